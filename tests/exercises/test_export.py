"""gpulab export-learner: the learners' copy has the course and the package, imports, runs
``make lab``, and holds no solution, hidden test, test or instructor's guide, searched here
with its own code rather than only with the exporter's."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpulab import cli
from gpulab.exercises import export

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "solutions"
GUIDE = ROOT / "course" / "INSTRUCTORS.md"
MARKER_LINE = re.compile(r"^\s*#+\s*(BEGIN|END) (SOLUTION|HIDDEN TESTS)\s*$", re.MULTILINE)
FAKE_PYTHON = """#!/bin/sh
echo "$0 $*" >> "$FAKE_LOG"
case "$1 $2" in
  "-m venv") mkdir -p "$3/bin" && cp "$0" "$3/bin/python" ;;
  "-m gpulab.toolkit") echo cu12 ;;
esac
exit 0
"""


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("class") / "learners"
    export.export(ROOT, target)
    return target


def collapse(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def notebook_text(path: Path) -> str:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return "\n".join("".join(c["source"]) if isinstance(c["source"], list) else c["source"]
                     for c in cells)


def copied_files(copy: Path) -> dict[str, str]:
    """{path in the copy: its text (a notebook's cell sources)}."""
    return {path.relative_to(copy).as_posix():
            notebook_text(path) if path.suffix == ".ipynb" else path.read_text(errors="replace")
            for path in copy.rglob("*") if path.is_file()}


def solution_regions() -> list[tuple[str, str, str]]:
    """(kind, grade id, code) of every region in solutions/, found without the exporter."""
    regions = []
    for notebook in sorted(SOLUTIONS.glob("*.ipynb")):
        for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
            source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id", "")
            kind, lines = None, []
            for line in source.split("\n"):
                marker = MARKER_LINE.match(line)
                if marker and marker.group(1) == "BEGIN":
                    kind, lines = marker.group(2), []
                elif marker:
                    regions.append((kind, grade_id, collapse("\n".join(lines))))
                    kind = None
                elif kind:
                    lines.append(line)
    return regions


# --- what the copy holds -----------------------------------------------------------------------


def test_the_copy_has_the_course_and_not_the_instructors_files(copy):
    for name in (*export.FOLDERS, *export.FILES):
        assert (copy / name).exists() == (ROOT / name).exists(), f"the copy lacks {name}"
    assert (copy / "binder").is_dir() and (copy / "gpulab").is_dir()
    chapters = sorted(p.name for p in (ROOT / "course").glob("[0-9][0-9]_*.ipynb"))
    assert len(chapters) == 13
    assert sorted(p.name for p in (copy / "course").glob("*.ipynb")) == chapters
    for name in ("CHEATSHEET.md", "GLOSSARY.md", "SYLLABUS.md"):
        assert (copy / "course" / name).is_file(), name
    for name in ("solutions", "tests", "conftest.py", ".ci", "course/INSTRUCTORS.md"):
        assert not (copy / name).exists(), f"{name} is in the learners' copy"
    assert not list(copy.rglob("__pycache__")) and not list(copy.rglob("*.egg-info"))
    for chapter in chapters:  # the notebooks are the released ones, byte for byte
        assert (copy / "course" / chapter).read_bytes() == (ROOT / "course" / chapter).read_bytes()
    assert (copy / "Makefile").read_bytes() == (ROOT / "Makefile").read_bytes()
    readme = (copy / "README.md").read_text()
    assert readme.startswith(export.README_NOTE)
    assert readme[len(export.README_NOTE):] == (ROOT / "README.md").read_text()


def test_no_marker_hidden_test_or_solution_anywhere_in_the_copy(copy):
    files = copied_files(copy)
    regions = solution_regions()
    assert sum(kind == "SOLUTION" for kind, _, _ in regions) >= 35
    assert sum(kind == "HIDDEN TESTS" for kind, _, _ in regions) >= 35
    problems, shown = [], set()
    for path, text in files.items():
        if "BEGIN HIDDEN TESTS" in text and path.endswith(".ipynb"):
            problems.append(f"{path}: a hidden-test marker")
        if MARKER_LINE.search(text):
            problems.append(f"{path}: a marker line {MARKER_LINE.search(text).group(0)!r}")
        collapsed = collapse(text)
        for kind, grade_id, code in regions:
            if len(code) < 20 or code not in collapsed:
                continue
            if kind == "SOLUTION" and (grade_id, path) in export.SHOWN_TO_LEARNERS:
                shown.add((grade_id, path))
            else:
                problems.append(f"{path} holds the {kind.lower()} of {grade_id}: {code[:60]}")
    assert not problems, "\n".join(problems)
    assert shown == set(export.SHOWN_TO_LEARNERS), (
        "SHOWN_TO_LEARNERS names a solution the package no longer holds: "
        f"{set(export.SHOWN_TO_LEARNERS) - shown}")


def test_the_exporter_finds_what_it_must_not_write(copy, tmp_path):
    planted = tmp_path / "planted"
    shutil.copytree(copy, planted)
    assert export.unexpected(export.find_leaks(planted, SOLUTIONS)) == []
    shutil.copy(SOLUTIONS / "03_matrix_multiplication.ipynb", planted / "course" / "spare.ipynb")
    (planted / "tests").mkdir()
    solution = next(r for r in export.regions(SOLUTIONS) if r.grade_id == "ch06-exercise1-solution")
    (planted / "course" / "notes.md").write_text(f"Answer: `{solution.code}`\n")
    found = {str(leak) for leak in export.unexpected(export.find_leaks(planted, SOLUTIONS))}
    assert "tests: instructor-only, must not be in a learners' copy" in found
    assert any(leak.startswith("course/spare.ipynb: a marker line") for leak in found), found
    assert any(leak.startswith("course/spare.ipynb: holds the solution of 03") for leak in found)
    assert any(leak.startswith("course/notes.md: holds the solution of 06_backpropagation")
               for leak in found), found


# --- the copy works ----------------------------------------------------------------------------


def test_the_package_imports_from_the_copy(copy):
    code = ("import gpulab, gpulab.exercises.ch01 as ch01, gpulab.cli; "
            "print(gpulab.__file__); print(ch01.__file__); "
            "print('def dot_atomic(' in gpulab.kernel_source('dot_atomic'))")
    env = {**os.environ, "PYTHONPATH": str(copy), "GPULAB_DEVICE": "sim"}
    done = subprocess.run([sys.executable, "-c", code], cwd=copy, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    package, chapter, kernel = done.stdout.strip().splitlines()[-3:]
    assert Path(package).resolve().is_relative_to(copy.resolve()), package
    assert Path(chapter).resolve().is_relative_to(copy.resolve()), chapter
    assert kernel == "True"


def _make(copy: Path, target: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess, str]:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    fake, log = tmp_path / "fakepython", tmp_path / "log"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    done = subprocess.run(["make", target, f"PYTHON={fake}"], cwd=copy, capture_output=True,
                          text=True, timeout=60, check=False,
                          env={**os.environ, "FAKE_LOG": str(log)})
    return done, log.read_text() if log.exists() else ""


def test_make_lab_in_the_copy_installs_the_learners_environment(copy, tmp_path):
    work = tmp_path / "repo"
    shutil.copytree(copy, work)
    done, log = _make(work, "install-lab", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    installs = [line for line in log.splitlines() if " -m pip install " in line and " -e " in line]
    assert len(installs) == 1 and installs[0].endswith("-e .[cu12,lab]"), log
    assert installs[0].startswith(".venv-lab/bin/python ")
    for name in ("pyproject.toml", "gpulab/toolkit.py", "LICENSE", "LICENSE-CONTENT.md"):
        assert (work / name).is_file()  # what the editable install builds from


@pytest.mark.parametrize("target", ["test", "notebooks", "instructor", "lint"])
def test_the_instructors_targets_say_this_is_the_learners_copy(copy, tmp_path, target):
    done, log = _make(copy, target, tmp_path)
    assert done.returncode == 2
    assert "This is a learners' copy of the course" in done.stdout and "make lab" in done.stdout
    assert log == "" and not (copy / ".venv").exists()  # nothing installed first


# --- refusals and updates ----------------------------------------------------------------------


def test_a_non_empty_folder_needs_update_which_keeps_git(copy, tmp_path):
    target = tmp_path / "class"
    shutil.copytree(copy, target)
    (target / ".git").mkdir()
    (target / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (target / "course" / "99_removed.ipynb").write_text("{}")  # from an older export
    with pytest.raises(export.ExportError, match="not empty.*--update"):
        export.export(ROOT, target)
    export.export(ROOT, target, update=True)
    assert (target / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n"
    assert not (target / "course" / "99_removed.ipynb").exists()
    assert (target / "course" / "01_dot_product.ipynb").is_file()


def test_a_leftover_solutions_folder_in_the_target_fails_the_update(copy, tmp_path):
    target = tmp_path / "class"
    shutil.copytree(copy, target)
    shutil.copytree(SOLUTIONS, target / "solutions", symlinks=True)
    with pytest.raises(export.ExportError, match="gives exercises away") as raised:
        export.export(ROOT, target, update=True)
    assert "solutions: instructor-only" in str(raised.value)


def test_stale_learner_notebooks_are_refused(tmp_path):
    source = tmp_path / "source"
    for name in (*export.FOLDERS, "solutions"):
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__"))
    for name in export.FILES:
        shutil.copy(ROOT / name, source / name)
    stale = source / "course" / "04_precision.ipynb"
    stale.write_text(stale.read_text().replace("# YOUR CODE HERE", "# an old answer", 1))
    with pytest.raises(export.ExportError, match=r"out of date.*04_precision.*make notebooks"):
        export.export(source, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_bad_sources_and_targets_are_refused(tmp_path):
    with pytest.raises(export.ExportError, match="not the course's repository.*solutions"):
        export.export(ROOT / "course", tmp_path / "out")
    with pytest.raises(export.ExportError, match="beside the course's repository.*is inside"):
        export.export(ROOT, ROOT / "course" / "copy")
    # --update into the folder that holds the repository would replace its gpulab/ or course/
    with pytest.raises(export.ExportError, match="beside the course's repository.*holds it"):
        export.export(ROOT, ROOT.parent, update=True)
    (tmp_path / "file").write_text("x")
    with pytest.raises(export.ExportError, match="is a file"):
        export.export(ROOT, tmp_path / "file")


# --- the command and the guide -----------------------------------------------------------------


def test_the_command_writes_the_copy_and_says_so(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert cli.main(["export-learner", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^wrote \d+ files \(13 notebooks\) to ", out), out
    assert cli.main(["export-learner", str(tmp_path / "out")]) == 1
    assert "is not empty" in capsys.readouterr().err


def test_the_instructors_guide_quotes_what_the_command_prints(tmp_path, capsys, monkeypatch):
    guide = GUIDE.read_text(encoding="utf-8")
    assert "gpulab export-learner" in guide
    quoted = re.findall(r"^ *> (wrote .*)$", guide, re.MULTILINE)
    assert quoted, "INSTRUCTORS.md quotes no output of gpulab export-learner"
    monkeypatch.chdir(ROOT)
    assert export.main([str(tmp_path / "class")]) == 0
    printed = capsys.readouterr().out.strip()
    for line in quoted:  # <N> files to <DIR>: the rest is word for word what it prints
        pattern = r"\d+".join(".+".join(re.escape(part) for part in piece.split("<DIR>"))
                              for piece in line.split("<N>"))
        assert re.fullmatch(pattern, printed), f"the guide quotes {line!r}; it prints {printed!r}"
    for name in ("solutions/", "tests/", "INSTRUCTORS.md", "--update"):
        assert name in guide.split("gpulab export-learner", 1)[1][:3000], name
