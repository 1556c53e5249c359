"""gpulab.exercises.nbgrader_cells with nbgrader itself, on a one-exercise notebook: an
untouched check cell gets its hidden tests back with no warning, while an edited locked cell is
still reported and overwritten, and nbgrader's own OverwriteCells warns on the untouched one
(jupyter/nbgrader#1961: the reason this module exists)."""

import importlib.util
import re

import nbformat
import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("nbgrader") is None,
                       reason="nbgrader (Python >= 3.11, the dev extra) is not installed"),
]

CHECK = "value = f()\n### BEGIN HIDDEN TESTS\nassert value == 1, value\n### END HIDDEN TESTS"
EDITED_CHECK = "value = 1"  # a learner who edited the locked cell to pass
WARNING = re.compile(r"WARNING.*'checksum' for cell check has changed")


def exercise() -> nbformat.NotebookNode:
    def cell(source, **nbgrader):
        meta = {"nbgrader": {"schema_version": 3, "grade_id": nbgrader.pop("grade_id"),
                             "grade": False, "solution": False, "locked": False, **nbgrader}}
        return nbformat.v4.new_code_cell(source, metadata=meta)

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.cells = [
        cell("def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION",
             grade_id="answer", solution=True),
        cell(CHECK, grade_id="check", grade=True, locked=True, points=1),
    ]
    return nb


def round_trip(tmp_path, config: str) -> tuple[str, dict[str, float]]:
    from gpulab.exercises import grading

    (tmp_path / "nbgrader_config.py").write_text(config)
    (tmp_path / "source" / "hw").mkdir(parents=True)
    nbformat.write(exercise(), tmp_path / "source" / "hw" / "hw.ipynb")
    log = ""
    for step in (["generate_assignment", "hw"], None, ["autograde", "hw"]):
        if step is None:  # two learners hand in the released notebook, solved
            released = nbformat.read(tmp_path / "release" / "hw" / "hw.ipynb", as_version=4)
            released.cells[0].source = "def f():\n    return 1"
            for student, check in (("untouched", None), ("edited", EDITED_CHECK)):
                if check is not None:
                    released.cells[1].source = check
                (tmp_path / "submitted" / student / "hw").mkdir(parents=True)
                nbformat.write(released, tmp_path / "submitted" / student / "hw" / "hw.ipynb")
            continue
        result = grading.run_nbgrader(step, cwd=tmp_path, capture_output=True, text=True,
                                      timeout=300)
        log += result.stdout + result.stderr
        assert result.returncode == 0, log
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}", "gpulab") as book:
        scores = {student: float(book.find_submission_notebook("hw", "hw", student).score)
                  for student in ("untouched", "edited")}
    return log, scores


def warned_for(log: str) -> int:
    return len([line for line in log.splitlines() if WARNING.search(line)])


def test_only_the_edited_locked_cell_is_reported_and_both_are_graded_with_the_hidden_test(
        tmp_path):
    from gpulab.exercises import grading

    log, scores = round_trip(tmp_path, grading.CONFIG)
    warnings = [line for line in log.splitlines() if re.search("warn", line, re.IGNORECASE)]
    assert len(warnings) == warned_for(log) == 1, log  # the edited cell's, and nothing else
    assert scores == {"untouched": 1.0, "edited": 1.0}
    graded = nbformat.read(tmp_path / "autograded" / "edited" / "hw" / "hw.ipynb", 4)
    assert graded.cells[1].source == CHECK  # overwritten, hidden test and all


def test_nbgraders_own_overwrite_cells_warns_on_every_untouched_check(tmp_path):
    """If this fails, nbgrader fixed jupyter/nbgrader#1961 and nbgrader_cells can go."""
    log, scores = round_trip(tmp_path, "c = get_config()\nc.CourseDirectory.course_id = 'gpulab'\n")
    assert warned_for(log) == 2, log
    assert scores == {"untouched": 1.0, "edited": 1.0}


def test_the_released_source_is_nbgraders_hidden_tests_cleared():
    from gpulab.exercises.nbgrader_cells import OverwriteCells

    assert OverwriteCells().released_source(CHECK) == "value = f()"
    assert OverwriteCells().released_source("x = 1") == "x = 1"
