"""gpulab.dashboard: what a chapter's Voila dashboard leaves out, and the wiring that applies it.

The browser test (tests/browser/test_voila.py) renders all 13 dashboards; these tests check the
rules on small notebooks, and statically on every chapter that no cell a dashboard keeps needs a
name that only a left-out cell defines (that would be a NameError on the page).
"""

from __future__ import annotations

import builtins
import json
import re
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from gpulab import dashboard

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "course").glob("[0-9][0-9]_*.ipynb"))
TEMPLATE = ROOT / "dashboards" / "data" / "voila" / "templates" / "gpulab"
# Names a notebook kernel has without defining them.
KERNEL_NAMES = set(dir(builtins)) | {"display", "get_ipython", "In", "Out", "exit", "quit"}


def _grading(solution: bool) -> dict:
    return {"nbgrader": {"grade": not solution, "solution": solution, "locked": not solution,
                         "grade_id": "x", "schema_version": 3}}


def _exercise_notebook():
    return new_notebook(cells=[
        new_code_cell("import numpy as np\nrng = np.random.default_rng(0)"),
        new_markdown_cell("## 1. Adding\n\nProse.\n\n### Exercise 1 — add\n\nComplete `add`."),
        new_markdown_cell("<details><summary>Hint 1</summary>\n\nUse +.\n\n</details>\n"),
        new_code_cell("from gpulab.exercises import ch00\n\ndef add(x, y):\n"
                      "    # YOUR CODE HERE\n    raise NotImplementedError()",
                      metadata=_grading(solution=True)),
        new_code_cell("# Try it\ntry:\n    print(add(1, 2))\nexcept NotImplementedError:\n"
                      "    print('not written yet')"),
        new_code_cell("result = ch00.check_add(add)", metadata=_grading(solution=False)),
        new_code_cell("total = add(3, 4)"),       # needs the learner's add
        new_code_cell("print(total)"),            # needs what a left-out cell defined
        new_code_cell("def scale(x):\n    return 2 * x\n\nprint(scale(rng.random()))"),
        new_code_cell("add = np.add\nprint(add(1, 2))"),  # defines add again: kept
        new_code_cell("print(add(5, 6))"),        # ... so this one is kept too
        new_markdown_cell("## 2. What to remember\n\nAdding is easy."),
    ])


def test_the_exercise_cells_and_what_needs_them_are_left_out():
    notebook = _exercise_notebook()
    kept, left_out = dashboard.plan(notebook)
    assert [cell.index for cell in left_out] == [2, 3, 4, 5, 6, 7]
    reasons = {cell.index: cell.reason for cell in left_out}
    assert reasons[3] == "nbgrader solution cell" and reasons[5] == "nbgrader grade cell"
    assert "needs add" in reasons[4] and "needs total" in reasons[7]
    sources = [cell.source for cell in kept]
    assert sources[1] == "## 1. Adding\n\nProse."  # the exercise's section is cut, the prose kept
    assert "def scale(x)" in sources[2] and sources[3].startswith("add = np.add")
    assert sources[4] == "print(add(5, 6))" and sources[-1].startswith("## 2.")
    assert len(notebook.cells) == 12, "plan() must not change the notebook"


def test_a_cell_tagged_exercise_is_left_out_with_what_needs_it():
    notebook = new_notebook(cells=[
        new_markdown_cell("Run your kernel below.", metadata={"tags": ["exercise"]}),
        new_code_cell("mine = 3", metadata={"tags": ["exercise", "other"]}),
        new_code_cell("print(mine)"),
        new_code_cell("print(1)", metadata={"tags": ["other"]}),
    ])
    kept, left_out = dashboard.plan(notebook)
    assert [(cell.index, cell.reason[:6]) for cell in left_out] == [
        (0, "tagged"), (1, "tagged"), (2, "needs ")]
    assert [cell.source for cell in kept] == ["print(1)"]


def test_prose_that_only_introduces_left_out_code_is_left_out_too():
    notebook = new_notebook(cells=[
        new_code_cell("def mine():\n    raise NotImplementedError()", metadata=_grading(True)),
        new_markdown_cell("**Your kernel, traced.** The cell below draws it."),
        new_code_cell("print(mine())"),             # left out: needs mine
        new_markdown_cell("## 3. A heading stays\n\nEven before left-out code."),
        new_code_cell("mine()"),
        new_markdown_cell("Then compare yours with gpulab's."),
        new_code_cell("mine()"),
        new_code_cell("print('gpulab')"),            # kept: so is the prose above it
        new_markdown_cell("Closing prose, no code after it."),
    ])
    kept, left_out = dashboard.plan(notebook)
    reasons = {cell.index: cell.reason for cell in left_out}
    assert reasons == {0: "nbgrader solution cell", 1: "introduces only left-out code",
                       2: "needs mine, defined only by left-out cells",
                       4: "needs mine, defined only by left-out cells",
                       6: "needs mine, defined only by left-out cells"}
    assert [cell.source[:8] for cell in kept] == ["## 3. A ", "Then com", "print('g", "Closing "]


def test_a_function_parameter_is_not_a_global_name():
    bound, needed = dashboard.cell_names("def f(x, *, n=3):\n    y = x * n\n    return y + z\n"
                                         "w = [v for v in range(3)]\nprint(f(w))")
    assert bound == {"f", "w"}
    assert needed == {"z", "range", "print"}


def test_magics_are_read_as_ipython_runs_them():
    bound, needed = dashboard.cell_names("%matplotlib inline\ny = np.zeros(3)\n!ls")
    assert bound == {"y"} and needed == {"np", "get_ipython"}


def test_invalid_python_binds_and_needs_nothing():
    assert dashboard.cell_names("def (:") == (set(), set())


@pytest.mark.parametrize("markdown, expected", [
    ("### Exercise 2 — x\n\nDo it.\n\n### Exercise 3 — y\n\nAnd this.", ""),
    ("Intro.\n\n### Exercise 1 — x\n\nDo it.\n\n#### Detail\n\nStill the exercise.\n\n"
     "## 3. Next\n\nKept.", "Intro.\n\n## 3. Next\n\nKept."),
    ("```\n### Exercise in a code block\n```\nKept.", "```\n### Exercise in a code block\n```\n"
     "Kept."),
    ("Before.\n<details><summary>Hint 1</summary>\n\nx\n\n</details>\n"
     "<details><summary>Answer</summary>\n\n4\n\n</details>\n",
     "Before.\n<details><summary>Answer</summary>\n\n4\n\n</details>\n"),
    ("## Exercises are fun\n\nNot an exercise heading.", "## Exercises are fun\n\n"
     "Not an exercise heading."),
])
def test_exercise_text_and_hints_are_cut_from_markdown(markdown, expected):
    assert dashboard.without_exercise_text(markdown) == expected


def test_the_preprocessor_changes_the_notebook_it_is_given():
    notebook = _exercise_notebook()
    processed, resources = dashboard.LeaveOutExercises().preprocess(notebook, {})
    assert len(processed.cells) == 6 and resources == {}


@pytest.mark.parametrize("path", CHAPTERS, ids=[path.stem for path in CHAPTERS])
def test_a_chapter_dashboard_keeps_no_exercise_and_needs_nothing_it_left_out(path):
    notebook = nbformat.read(path, as_version=4)
    kept, left_out = dashboard.plan(notebook)
    graded = [cell for cell in notebook.cells if dashboard.is_exercise_cell(cell)]
    assert graded and len(left_out) > len(graded), "a chapter has exercises to leave out"
    defined = set(KERNEL_NAMES)
    for cell in kept:
        assert not dashboard.is_exercise_cell(cell)
        if cell.cell_type == "markdown":
            assert not re.search(r"^#+\s+Exercise\b", cell.source, re.MULTILINE), cell.source
            assert "<summary>Hint" not in cell.source, cell.source
        if cell.cell_type == "code":
            assert "NotImplementedError" not in cell.source, cell.source
            bound, needed = dashboard.cell_names(cell.source)
            missing = {name for name in needed - defined}
            assert not missing, f"{path.name}: a kept cell needs {missing}:\n{cell.source}"
            defined |= bound


def test_the_command_lists_what_a_dashboard_leaves_out(capsys):
    assert dashboard.main([str(CHAPTERS[1])]) == 0
    out = capsys.readouterr().out
    assert re.search(r"01_dot_product.ipynb: shows \d+ of \d+ cells, leaves out \d+", out)
    assert "nbgrader solution cell" in out and "needs my_multiply" in out


def test_voila_is_configured_to_use_the_course_template():
    config = json.loads((ROOT / "dashboards" / "config" / "voila.json").read_text())
    assert config["VoilaConfiguration"]["template"] == TEMPLATE.name
    conf = json.loads((TEMPLATE / "conf.json").read_text())
    assert conf["base_template"] == "lab"
    types = [step["type"] for step in conf["preprocessors"].values()]
    assert types == ["gpulab.dashboard.LeaveOutExercises"]
    template = (TEMPLATE / "index.html.j2").read_text()
    assert not re.search(r"(src|href)=\"(https?:)?//", template), "a link to another host"


@pytest.mark.parametrize("launcher", ["Makefile", "binder/start"])
def test_the_servers_learners_start_point_jupyter_at_the_dashboards(launcher):
    text = (ROOT / launcher).read_text()
    for variable, folder in (("JUPYTER_CONFIG_PATH", "dashboards/config"),
                             ("JUPYTER_PATH", "dashboards/data")):
        assert re.search(rf"{variable}=\S*{folder}", text), f"{launcher} sets no {variable}"
    if launcher == "Makefile":
        lab_recipe = re.search(r"^lab:.*\n\t(.*)", text, re.MULTILINE).group(1)
        assert "$(DASHBOARDS_ENV)" in lab_recipe and "jupyter lab" in lab_recipe


def test_a_dashboard_shows_gpulabs_versions_without_waiting_for_a_check():
    """compare_yours waits for the learner's check, which a dashboard leaves out: the
    preprocessor tells it not to wait, in a cell right after the one that imports gpulab."""
    compare = new_code_cell('compare_yours(ch01.MULTIPLY, "elementwise_multiply");')
    nb = new_notebook(cells=[new_code_cell("import gpulab"), new_markdown_cell("Compare:"),
                             compare])
    dashboard.with_versions(nb)
    assert [c.source for c in nb.cells][:2] == ["import gpulab", dashboard.SHOW_VERSIONS]
    plain = new_notebook(cells=[new_code_cell("import gpulab"), new_code_cell("print(1)")])
    dashboard.with_versions(plain)
    assert len(plain.cells) == 2


def test_the_cell_it_adds_runs_and_shows_the_versions(monkeypatch, capsys):
    from gpulab.exercises import results, reveal

    monkeypatch.setattr(results, "_PASSED_EXERCISES", set())
    monkeypatch.setattr(reveal, "_show_always", [False])
    exec(dashboard.SHOW_VERSIONS, {})
    assert reveal.compare_yours("multiply", "elementwise_multiply") is True
    assert "def elementwise_multiply" in capsys.readouterr().out


def test_a_check_cell_importing_again_what_a_kept_cell_imported_loses_no_name():
    nb = new_notebook(cells=[
        new_code_cell("import gpulab\nfrom gpulab.exercises import ch01"),
        new_code_cell("result = ch01.check_multiply(my_multiply)\n"
                      "from gpulab.exercises import ch01",
                      metadata={"nbgrader": {"grade": True, "grade_id": "c", "points": 1}}),
        new_code_cell('compare_yours(ch01.MULTIPLY, "elementwise_multiply");')])
    kept, left_out = dashboard.plan(nb)
    assert [c.source for c in kept][-1].startswith("compare_yours(")
    assert [entry.index for entry in left_out] == [1]
