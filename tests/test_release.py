"""The learner notebooks are generated from the solution notebooks, and stay in sync."""

from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from gpulab.exercises.release import (
    MarkerError,
    learner_version,
    main,
    release_all,
    release_notebook,
)

ROOT = Path(__file__).resolve().parents[1]

SOLVED_KERNEL = """\
@cuda.jit
def multiply_kernel(x, y, out):
    ### BEGIN SOLUTION
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = x[i] * y[i]
    ### END SOLUTION"""

CHECK_CELL = """\
result = check_multiply(multiply_kernel)
### BEGIN HIDDEN TESTS
assert result.passed, result
### END HIDDEN TESTS"""

EXPLANATION = """\
Why does the last block need a guard?

<!-- BEGIN SOLUTION -->
Because n is not a multiple of the block size: its last threads have no element.
<!-- END SOLUTION -->
Think about it before you read on."""


def solution_notebook() -> nbformat.NotebookNode:
    nb = new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                               "language": "python"}})
    kernel = new_code_cell(SOLVED_KERNEL, execution_count=3, metadata={"tags": ["exercise"]})
    check = new_code_cell(CHECK_CELL, execution_count=4)
    check.outputs = [new_output("stream", name="stdout", text="✅ PASSED — multiply\n")]
    check.metadata["execution"] = {"iopub.status.busy": "2025-01-01T00:00:00Z"}
    nb.cells = [
        new_markdown_cell("# Chapter 01"),
        kernel,
        check,
        new_markdown_cell(EXPLANATION),
        new_markdown_cell("<!-- BEGIN SOLUTION -->\nOnly for instructors.\n<!-- END SOLUTION -->"),
        new_code_cell("### BEGIN HIDDEN TESTS\nassert True\n### END HIDDEN TESTS"),
    ]
    return nb


def test_solution_lines_become_the_stub_at_the_markers_indentation():
    learner = learner_version(solution_notebook())
    assert learner.cells[1].source == (
        "@cuda.jit\n"
        "def multiply_kernel(x, y, out):\n"
        "    # YOUR CODE HERE\n"
        "    raise NotImplementedError()"
    )


def test_hidden_tests_are_removed_and_the_call_stays():
    learner = learner_version(solution_notebook())
    assert learner.cells[2].source == "result = check_multiply(multiply_kernel)"
    assert all("HIDDEN" not in cell.source and "assert" not in cell.source
               for cell in learner.cells)


def test_markdown_solutions_are_removed():
    learner = learner_version(solution_notebook())
    assert learner.cells[3].source == (
        "Why does the last block need a guard?\n\nThink about it before you read on."
    )
    # a cell that held only a solution (or only hidden tests) is dropped
    assert len(learner.cells) == 4
    assert all("instructors" not in cell.source for cell in learner.cells)


def test_outputs_and_counts_are_cleared_and_metadata_kept():
    source = solution_notebook()
    learner = learner_version(source)
    code = [cell for cell in learner.cells if cell.cell_type == "code"]
    assert all(cell.outputs == [] and cell.execution_count is None for cell in code)
    assert learner.cells[1].metadata == {"tags": ["exercise"]}
    assert "execution" not in learner.cells[2].metadata
    assert learner.metadata.kernelspec.name == "python3"
    assert source.cells[2].outputs, "the source notebook must not be modified"
    assert [cell.id for cell in learner.cells] == [source.cells[i].id for i in range(4)]


def test_a_cell_without_markers_is_unchanged():
    nb = new_notebook(cells=[new_code_cell("x = 1  # BEGIN SOLUTION is only a comment here")])
    assert learner_version(nb).cells[0].source == nb.cells[0].source


@pytest.mark.parametrize(
    ("source", "line", "words"),
    [
        ("a = 1\n### BEGIN SOLUTION\nb = 2", 2, "never closed"),
        ("### END SOLUTION", 1, "without a matching"),
        ("### BEGIN SOLUTION\n### BEGIN HIDDEN TESTS\n### END HIDDEN TESTS\n### END SOLUTION",
         2, "cannot nest"),
        ("### BEGIN SOLUTION\n### END HIDDEN TESTS", 2, "without a matching"),
        ("### BEGIN HIDDEN TESTS\nassert x", 1, "never closed"),
    ],
)
def test_unbalanced_or_nested_markers_name_the_notebook_cell_and_line(source, line, words):
    nb = new_notebook(cells=[new_markdown_cell("intro"), new_code_cell(source)])
    with pytest.raises(ValueError, match=words) as error:
        learner_version(nb, name="solutions/01_dot_product.ipynb")
    assert isinstance(error.value, MarkerError)
    assert f"solutions/01_dot_product.ipynb, cell 1, line {line}" in str(error.value)


def test_unbalanced_markdown_markers_are_an_error():
    nb = new_notebook(cells=[new_markdown_cell("<!-- BEGIN SOLUTION -->\nanswer")])
    with pytest.raises(ValueError, match="cell 0, line 1.*never closed"):
        learner_version(nb, name="nb.ipynb")


def test_regeneration_is_byte_identical(tmp_path):
    source, target = tmp_path / "solutions" / "01_dot.ipynb", tmp_path / "course" / "01_dot.ipynb"
    source.parent.mkdir()
    nbformat.write(solution_notebook(), source)
    assert release_notebook(source, target) is True
    written = target.read_bytes()
    assert written.endswith(b"}\n") and b'\n "cells": [\n' in written  # indent 1, final newline
    assert release_notebook(source, target) is False
    assert target.read_bytes() == written
    assert release_all(source.parent, target.parent, check=True) == []


def test_release_all_reports_stale_missing_and_orphaned_notebooks(tmp_path, capsys):
    solutions, course = tmp_path / "solutions", tmp_path / "course"
    solutions.mkdir()
    course.mkdir()
    for name in ("01_dot.ipynb", "02_data.ipynb"):
        nbformat.write(solution_notebook(), solutions / name)
    (course / "99_orphan.ipynb").write_text("{}")
    expected = [course / "01_dot.ipynb", course / "02_data.ipynb", course / "99_orphan.ipynb"]
    assert release_all(solutions, course, check=True) == expected
    assert not (course / "01_dot.ipynb").exists(), "check=True must not write"

    assert main(["--check", "--solutions", str(solutions), "--course", str(course)]) == 1
    message = capsys.readouterr().err
    assert "01_dot.ipynb" in message and "make notebooks" in message
    assert "99_orphan.ipynb" in message

    assert release_all(solutions, course) == expected[:2]
    (course / "99_orphan.ipynb").unlink()
    assert main(["--check", "--solutions", str(solutions), "--course", str(course)]) == 0
    (solutions / "02_data.ipynb").write_text(
        (solutions / "02_data.ipynb").read_text().replace("Chapter 01", "Chapter 02")
    )
    assert release_all(solutions, course, check=True) == [course / "02_data.ipynb"]


def test_the_course_notebooks_are_up_to_date_with_their_solutions():
    solutions, course = ROOT / "solutions", ROOT / "course"
    if not any(solutions.glob("*.ipynb")):
        pytest.skip("solutions/ has no notebooks yet: nothing to release")
    stale = release_all(solutions, course, check=True)
    assert stale == [], (
        "learner notebooks out of date with solutions/: run `make notebooks` "
        f"(or python -m gpulab.exercises.release): {[str(p) for p in stale]}"
    )
