"""The repository's promises: Binder config agrees with pyproject, the README's links point at
real notebooks, notebooks are committed without outputs, CI calls the README's test command."""

import re
import sys
from pathlib import Path

import nbformat
import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _version_tuple(text):
    return tuple(int(part) for part in re.findall(r"\d+", text)[:2])


def test_binder_installs_this_package_with_real_extras():
    lines = [line.split("#")[0].strip() for line in
             (ROOT / "binder" / "requirements.txt").read_text().splitlines()]
    editable = [line for line in lines if line.startswith("-e .")]
    assert editable, "binder/requirements.txt must install the repository with `-e .`"
    extras = re.findall(r"\[([^\]]*)\]", editable[0])
    known = set(PYPROJECT["project"]["optional-dependencies"])
    for extra in (extras[0].split(",") if extras else []):
        assert extra.strip() in known, f"binder asks for extra {extra!r}, pyproject has {known}"


def test_binder_python_satisfies_requires_python():
    runtime = (ROOT / "binder" / "runtime.txt").read_text().strip()
    assert runtime.startswith("python-")
    minimum = _version_tuple(PYPROJECT["project"]["requires-python"])
    assert _version_tuple(runtime) >= minimum


def test_readme_links_point_at_notebooks_that_exist():
    readme = (ROOT / "README.md").read_text()
    targets = re.findall(r"urlpath=(?:lab/tree|voila/render)/([^)\s]+\.ipynb)", readme)
    targets += re.findall(r"\]\((course/[^)]+\.ipynb)\)", readme)
    assert targets, "the README links no notebook"
    for target in targets:
        assert (ROOT / target).is_file(), f"README links {target}, which does not exist"
    for notebook in sorted((ROOT / "course").glob("[0-9][0-9]_*.ipynb")):
        for view in ("lab/tree", "voila/render"):
            assert f"urlpath={view}/course/{notebook.name}" in readme, (
                f"README lacks the {view} link for {notebook.name}")


def test_readme_gives_the_two_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text()
    assert "make lab" in readme and "make test" in readme
    assert "make test" in (ROOT / ".ci" / "run").read_text()


@pytest.mark.parametrize(
    "path", sorted(ROOT.glob("course/*.ipynb")) + sorted(ROOT.glob("solutions/*.ipynb")),
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_notebooks_are_committed_without_outputs(path):
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "code":
            assert not cell.outputs, f"{path.name} cell {index} has saved outputs"
            assert cell.execution_count is None
    first_code = next(c for c in notebook.cells if c.cell_type == "code")
    assert "import gpulab" in first_code.source, "gpulab must be imported before numba"


@pytest.mark.parametrize("path", sorted(ROOT.glob("solutions/*.ipynb")), ids=lambda p: p.name)
def test_exercises_are_nbgrader_solution_and_check_cells(path):
    """Each exercise is a solution cell, then optionally a "try it" cell (ungraded code that
    runs the learner's work on a few elements) and markdown, then a locked, graded check cell,
    so `nbgrader autograde` can score it without hand-made metadata."""
    cells = nbformat.read(path, as_version=4).cells
    grade_ids = []
    for index, cell in enumerate(cells):
        if "### BEGIN SOLUTION" not in cell.source:
            continue
        assert cell.metadata.get("nbgrader", {}).get("solution") is True, (path.name, index)
        following = index + 1
        tries = 0
        while cells[following].cell_type == "markdown" or (
                cells[following].cell_type == "code"
                and not cells[following].metadata.get("nbgrader")):
            tries += cells[following].cell_type == "code"
            following += 1
        assert tries <= 1, f"{path.name}: more than one try-it cell after cell {index}"
        check = cells[following]
        meta = check.metadata.get("nbgrader", {})
        assert meta.get("grade") is True and meta.get("locked") is True, (path.name, following)
        assert "### BEGIN HIDDEN TESTS" in check.source and "check_" in check.source
        grade_ids += [cell.metadata["nbgrader"]["grade_id"], meta["grade_id"]]
    assert len(grade_ids) == len(set(grade_ids)), "grade ids must be unique"


def test_the_longest_files_named_for_scheduling_exist():
    """tests/conftest.py starts the files it lists as longest first: a renamed or removed file
    would silently lose its place at the front."""
    listed = re.search(r"FILE_SECONDS = \{(.*?)\n\}", (ROOT / "tests" / "conftest.py").read_text(),
                       re.DOTALL).group(1)
    names = re.findall(r'"([\w/]+\.py)"', listed)
    assert len(names) >= 10, names
    assert [name for name in names if not (ROOT / "tests" / name).is_file()] == []
