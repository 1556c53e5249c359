"""Write a learners' copy of the course, for a class repository: what a learner needs to run
``make lab`` and work through the chapters, and nothing that gives the exercises away.

    gpulab export-learner DIR              # DIR missing or empty
    gpulab export-learner DIR --update     # DIR an earlier copy, e.g. a clone of the class repo
    python -m gpulab.exercises.export DIR

What goes (:data:`FOLDERS`, :data:`FILES`): ``course/`` (the learner notebooks, the cheat sheet,
the glossary, the syllabus), the ``gpulab`` package, ``binder/``, ``dashboards/`` (Voila's
template), the README, Makefile, pyproject.toml, the licences and .gitignore. What stays behind:
``solutions/`` (the notebooks with the solutions and hidden tests), ``tests/`` (their kernels
and functions solve the exercises, to test the checks), ``conftest.py``, ``.ci/`` and
``course/INSTRUCTORS.md`` (:data:`INSTRUCTOR_ONLY`). The copy's README starts with a note saying
what it leaves out; its ``make test``, ``make notebooks`` and ``make instructor`` say that they
belong to the instructor's repository.

Before writing, ``course/`` is checked against ``solutions/`` (as ``release --check`` does):
a stale learner notebook could hold an old solution. After writing, every file of the copy is
searched (:func:`find_leaks`) for a solution or hidden-test marker line, the code of any hidden
test and the code of any solution in ``solutions/``. The package itself shows learners a few
solutions on purpose (:data:`SHOWN_TO_LEARNERS`); any other find is an error, and the command
then exits with status 1, saying which file holds what.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from gpulab.exercises import release

# dashboards/: Voila's configuration and the course's template, which `make lab` and
# binder/start point Jupyter at (gpulab.dashboard); copied where the repository has it.
FOLDERS = ("course", "gpulab", "binder", "dashboards")
FILES = ("README.md", "Makefile", "pyproject.toml", "LICENSE", "LICENSE-CONTENT.md",
         ".gitignore")
INSTRUCTOR_ONLY = ("solutions", "tests", "conftest.py", ".ci", "course/INSTRUCTORS.md")
# Never copied from inside the folders: caches, build output, editor files.
_JUNK = ("__pycache__", ".ipynb_checkpoints", ".pytest_cache", ".DS_Store")
_JUNK_SUFFIXES = (".pyc", ".egg-info")
# Solutions whose code the package holds on purpose: (grade id, file) -> why a learner may see it.
SHOWN_TO_LEARNERS = {
    ("ch01-exercise2-solution", "gpulab/kernels/dot.py"):
        "gpulab's dot_atomic, which chapter 01 prints after the check (\"compare yours\")",
    ("ch09-exercise3-solution", "gpulab/kernels/accumulate.py"):
        "gpulab's accumulate kernel, which runs the chapter's micro-batches until the learner's "
        "passes and is shown after the check",
    ("ch11-exercise2-solution", "gpulab/kernels/ring.py"):
        "gpulab's add_chunk, which runs the ring's reduce steps until the learner's passes and "
        "is shown after the check",
}
README_NOTE = """\
> **This is the learners' copy of the course**, made with `gpulab export-learner`. It has the
> chapters (`course/`), the `gpulab` package and `make lab`. The instructor's files are not
> part of it: the notebooks with the solutions (`solutions/`), the tests and
> `course/INSTRUCTORS.md`; where this README mentions them, or `make test`, `make notebooks`
> and `make instructor`, that is about the instructor's repository.

"""
_MARKER = re.compile(r"^\s*(#+\s*(BEGIN|END) (SOLUTION|HIDDEN TESTS)|<!--\s*(BEGIN|END) "
                     r"SOLUTION\s*-->)\s*$", re.MULTILINE)
_REGION = re.compile(r"^\s*#+\s*BEGIN (SOLUTION|HIDDEN TESTS)\s*$(.*?)^\s*#+\s*END \1\s*$",
                     re.MULTILINE | re.DOTALL)
_SHORTEST_CODE = 20  # characters: shorter regions (`return x`) are not worth a search


class ExportError(RuntimeError):
    """The source is not a course checkout, the target is not free, or the copy leaks."""


@dataclass(frozen=True)
class Region:
    """One solution or hidden-test region of a solution notebook."""

    notebook: str
    cell: int
    kind: str  # "SOLUTION" or "HIDDEN TESTS"
    grade_id: str  # the cell's nbgrader grade id ("" when it has none)
    code: str  # whitespace collapsed

    @property
    def label(self) -> str:
        return f"the {self.kind.lower()} of {self.notebook}, cell {self.cell} ({self.grade_id})"


@dataclass(frozen=True)
class Leak:
    path: str  # relative to the copy
    what: str
    region: Region | None = None

    def __str__(self) -> str:
        return f"{self.path}: {self.what}"


def _collapse(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _cell_sources(notebook: Path) -> list[tuple[dict, str]]:
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return [(cell, "".join(cell["source"]) if isinstance(cell["source"], list)
             else cell["source"]) for cell in cells]


def regions(solutions: Path) -> list[Region]:
    """Every solution and hidden-test region of the notebooks in ``solutions``."""
    found = []
    for notebook in sorted(Path(solutions).glob("*.ipynb")):
        for index, (cell, source) in enumerate(_cell_sources(notebook)):
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
            for match in _REGION.finditer(source):
                found.append(Region(notebook.name, index, match.group(1), grade_id,
                                    _collapse(match.group(2))))
    return found


def _text(path: Path) -> str:
    """A file as a learner would search it: a notebook's cell sources, other files as text."""
    if path.suffix == ".ipynb":
        return "\n".join(source for _, source in _cell_sources(path))
    return path.read_text(encoding="utf-8", errors="replace")


def _files(root: Path) -> list[Path]:
    """The files under ``root``, outside a .git folder or a virtual environment (.venv*)."""
    return sorted(p for p in root.rglob("*") if p.is_file() and not any(
        part == ".git" or part.startswith(".venv") for part in p.relative_to(root).parts))


def find_leaks(copy: Path, solutions: Path) -> list[Leak]:
    """What in ``copy`` gives an exercise away: an instructor-only path, a marker line, a
    hidden test's code, a solution's code (including those in :data:`SHOWN_TO_LEARNERS`, whose
    leaks carry their region so that the caller can tell them apart)."""
    copy = Path(copy)
    leaks = [Leak(name, "instructor-only, must not be in a learners' copy")
             for name in INSTRUCTOR_ONLY if (copy / name).exists()]
    searched = [region for region in regions(solutions) if len(region.code) >= _SHORTEST_CODE]
    for path in _files(copy):
        relative = path.relative_to(copy).as_posix()
        text = _text(path)
        marker = _MARKER.search(text)
        if marker:
            leaks.append(Leak(relative, f"a marker line: {marker.group(0).strip()!r}"))
        collapsed = _collapse(text)
        leaks += [Leak(relative, f"holds {region.label}", region) for region in searched
                  if region.code in collapsed]
    return leaks


def unexpected(leaks: list[Leak]) -> list[Leak]:
    """The leaks that :data:`SHOWN_TO_LEARNERS` does not explain."""
    return [leak for leak in leaks if leak.region is None
            or (leak.region.grade_id, leak.path) not in SHOWN_TO_LEARNERS]


def _copy_tree(source: Path, target: Path) -> None:
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        if any(part in _JUNK or part.endswith(_JUNK_SUFFIXES) for part in relative.parts):
            continue
        if (source.name + "/" + relative.as_posix()) in INSTRUCTOR_ONLY or path.is_dir():
            continue
        (target / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target / relative)  # a link is copied as the file it names


def export(source: Path, target: Path, update: bool = False) -> list[Path]:
    """Write the learners' copy of the course at ``source`` into ``target``; return the files
    written. ``target`` must be missing or empty, or, with ``update``, an earlier copy: its
    exported folders and files are replaced, anything else (``.git``) is kept.

    Raises :class:`ExportError` when ``source`` lacks a part of the course, when its learner
    notebooks are out of date, when ``target`` is not free, or when the copy leaks."""
    source, target = Path(source).resolve(), Path(target).resolve()
    missing = [name for name in ("course", "gpulab", *FILES, "solutions")
               if not (source / name).exists()]
    if missing:
        raise ExportError(f"{source} is not the course's repository: it has no "
                          f"{', '.join(missing)}")
    if target == source or source in target.parents or target in source.parents:
        raise ExportError(f"write the copy beside the course's repository, not into {target}, "
                          f"which {'holds' if target in source.parents else 'is inside'} it")
    if target.exists() and not target.is_dir():
        raise ExportError(f"{target} is a file; give a folder")
    if target.is_dir() and any(target.iterdir()) and not update:
        raise ExportError(f"{target} is not empty; give a new folder, or --update to replace an "
                          "earlier copy there (its .git and other files are kept)")
    stale = release.release_all(source / "solutions", source / "course", check=True)
    if stale:
        raise ExportError("the learner notebooks are out of date with solutions/ ("
                          + ", ".join(path.name for path in stale)
                          + f"); regenerate them first: {release.FIX_COMMAND}")
    target.mkdir(parents=True, exist_ok=True)
    for name in (*FOLDERS, *FILES):
        if (target / name).is_dir():
            shutil.rmtree(target / name)
        elif (target / name).exists():
            (target / name).unlink()
    for folder in FOLDERS:
        if (source / folder).is_dir():
            _copy_tree(source / folder, target / folder)
    for name in FILES:
        shutil.copyfile(source / name, target / name)
    readme = target / "README.md"
    readme.write_text(README_NOTE + readme.read_text(encoding="utf-8"), encoding="utf-8")
    leaks = unexpected(find_leaks(target, source / "solutions"))
    if leaks:
        raise ExportError(f"the copy in {target} gives exercises away; fix the source and export "
                          "again:\n" + "\n".join(f"  {leak}" for leak in leaks))
    return _files(target)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="gpulab export-learner",
        description="Write a learners' copy of the course (no solutions/, no hidden tests, no "
        "tests/, no INSTRUCTORS.md) into DIR, for a class repository.")
    parser.add_argument("dir", metavar="DIR", help="where to write the copy (missing or empty)")
    parser.add_argument("--source", default=".", help="the course's repository (default: .)")
    parser.add_argument("--update", action="store_true",
                        help="DIR holds an earlier copy: replace what the export writes, keep "
                             "the rest (.git)")
    args = parser.parse_args(argv)
    try:
        written = export(Path(args.source), Path(args.dir), update=args.update)
    except (ExportError, release.MarkerError) as error:
        print(f"gpulab export-learner: {error}", file=sys.stderr)
        return 1
    notebooks = sum(path.suffix == ".ipynb" for path in written)
    print(f"wrote {len(written)} files ({notebooks} notebooks) to {Path(args.dir)}: no "
          "solutions, hidden tests, tests or instructor's guide. In a clone of your class "
          "repository: git add -A && git commit, then learners run: make lab")
    return 0


if __name__ == "__main__":
    sys.exit(main())
