"""Write the learner notebooks (``course/``) from the instructor notebooks (``solutions/``).

One source per chapter: ``solutions/NN_name.ipynb`` holds the solutions between nbgrader's
markers, and ``course/NN_name.ipynb`` is generated from it:

- in code cells, the lines from ``### BEGIN SOLUTION`` to ``### END SOLUTION`` become
  ``# YOUR CODE HERE`` and ``raise NotImplementedError()``, indented like the BEGIN marker
  (as nbgrader does);
- in code cells, the lines from ``### BEGIN HIDDEN TESTS`` to ``### END HIDDEN TESTS`` are
  removed (the solution notebook keeps its ``assert result.passed`` there, so CI fails when a
  solution fails, while the learner's notebook still runs top to bottom);
- in Markdown cells, ``<!-- BEGIN SOLUTION -->`` ... ``<!-- END SOLUTION -->`` is removed;
- a cell left empty by a removal is dropped; outputs, execution counts, execution timings and
  saved widget state are cleared; all other metadata is kept.

Files are written as ``nbformat`` writes them (indent 1, sorted keys) plus a final newline, and
only when their bytes change, so running the release twice changes nothing.

    python -m gpulab.exercises.release            # (re)write course/ from solutions/
    python -m gpulab.exercises.release --check    # exit 1 if course/ is out of date
"""

from __future__ import annotations

import argparse
import copy
import re
import sys
from pathlib import Path

import nbformat

SOLUTION_STUB = ("# YOUR CODE HERE", "raise NotImplementedError()")
FIX_COMMAND = "make notebooks  (or: python -m gpulab.exercises.release)"

# A marker line: its groups are the indent, BEGIN or END, and the region's kind.
_CODE_MARKER = re.compile(r"^(\s*)#+\s*(BEGIN|END) (SOLUTION|HIDDEN TESTS)\s*$")
_MARKDOWN_MARKER = re.compile(r"^(\s*)<!--\s*(BEGIN|END) (SOLUTION)\s*-->\s*$")
_OUTPUT_METADATA = ("execution",)  # per-cell timings written by nbclient
_NOTEBOOK_OUTPUT_METADATA = ("widgets",)  # saved widget state: an output


class MarkerError(ValueError):
    """Unbalanced or nested solution / hidden-test markers; the message names where."""


def _where(notebook: str, index: int, line: int) -> str:
    return f"{notebook}, cell {index}, line {line}"


def _strip(source: str, notebook: str, index: int, marker_line: re.Pattern, spell,
           stub: tuple[str, ...] = ()) -> tuple[str, bool]:
    """The learner's version of a cell's source, and whether any marker was found: the lines
    from a BEGIN marker (``marker_line`` matches one) to its END removed, a SOLUTION region
    replaced by ``stub``, indented like its BEGIN. ``spell(edge, kind)`` writes a marker as the
    cell spells it, for the errors."""
    lines, open_region, found = [], None, False  # open_region: (kind, line number)
    for number, line in enumerate(source.split("\n"), start=1):
        marker = marker_line.match(line)
        if marker is None:
            if open_region is None:
                lines.append(line)
            continue
        found = True
        indent, edge, kind = marker.groups()
        if edge == "BEGIN":
            if open_region is not None:
                raise MarkerError(
                    f"{_where(notebook, index, number)}: `{spell('BEGIN', kind)}` inside the "
                    f"`{spell('BEGIN', open_region[0])}` region opened on line {open_region[1]}; "
                    "markers cannot nest: close the first region before opening another"
                )
            open_region = (kind, number)
            if kind == "SOLUTION":
                lines.extend(indent + stub_line for stub_line in stub)
        else:
            if open_region is None or open_region[0] != kind:
                opened = (
                    f"; the open region is `{spell('BEGIN', open_region[0])}` from line "
                    f"{open_region[1]}" if open_region else ""
                )
                raise MarkerError(
                    f"{_where(notebook, index, number)}: `{spell('END', kind)}` without a "
                    f"matching `{spell('BEGIN', kind)}`{opened}"
                )
            open_region = None
    if open_region is not None:
        raise MarkerError(
            f"{_where(notebook, index, open_region[1])}: `{spell('BEGIN', open_region[0])}` is "
            f"never closed: add `{spell('END', open_region[0])}` in the same cell"
        )
    return "\n".join(lines), found


def learner_version(nb: nbformat.NotebookNode, name: str = "notebook") -> nbformat.NotebookNode:
    """A copy of the solution notebook ``nb`` as learners get it (see the module docstring).
    ``name`` is used in error messages."""
    result = copy.deepcopy(nb)
    cells = []
    for index, cell in enumerate(result.cells):
        found = False
        if cell.cell_type == "code":
            cell.source, found = _strip(cell.source, name, index, _CODE_MARKER,
                                         lambda edge, kind: f"### {edge} {kind}",
                                         SOLUTION_STUB)
            cell.outputs = []
            cell.execution_count = None
        elif cell.cell_type == "markdown":
            cell.source, found = _strip(cell.source, name, index, _MARKDOWN_MARKER,
                                         lambda edge, _: f"<!-- {edge} SOLUTION -->")
        for key in _OUTPUT_METADATA:
            cell.metadata.pop(key, None)
        if found and not cell.source.strip():
            continue  # the cell held only a solution or hidden tests
        cells.append(cell)
    result.cells = cells
    for key in _NOTEBOOK_OUTPUT_METADATA:
        result.metadata.pop(key, None)
    return result


def notebook_text(nb: nbformat.NotebookNode) -> str:
    """The exact text written to disk: nbformat's JSON (indent 1, sorted keys) and a newline."""
    text = nbformat.writes(nb, version=4)
    return text if text.endswith("\n") else text + "\n"


def _learner_text(source: Path) -> str:
    nb = nbformat.read(source, as_version=4)
    return notebook_text(learner_version(nb, name=str(source)))


def release_notebook(source: Path, target: Path) -> bool:
    """Write the learner version of ``source`` to ``target``; True if ``target`` changed."""
    source, target = Path(source), Path(target)
    text = _learner_text(source)
    if target.exists() and target.read_text(encoding="utf-8") == text:
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "w", encoding="utf-8", newline="\n") as file:
        file.write(text)
    return True


def _notebooks(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.ipynb") if not p.name.startswith("."))


def release_all(solutions_dir="solutions", course_dir="course", check: bool = False) -> list[Path]:
    """Bring ``course_dir`` up to date with ``solutions_dir``; return the out-of-date paths.

    With ``check=False`` the stale learner notebooks are rewritten and their paths returned.
    With ``check=True`` nothing is written: the list holds the learner notebooks that are
    missing or differ from what their source would give, and the course notebooks that have no
    source in ``solutions_dir`` (which regeneration cannot fix).
    """
    solutions, course = Path(solutions_dir), Path(course_dir)
    if not solutions.is_dir():
        raise FileNotFoundError(f"no solutions folder at {solutions}: nothing to release from")
    stale = []
    for source in _notebooks(solutions):
        target = course / source.name
        if check:
            current = target.read_text(encoding="utf-8") if target.exists() else None
            if current != _learner_text(source):
                stale.append(target)
        elif release_notebook(source, target):
            stale.append(target)
    if check:
        sources = {p.name for p in _notebooks(solutions)}
        stale.extend(p for p in _notebooks(course) if p.name not in sources)
    return stale


def orphans(solutions_dir="solutions", course_dir="course") -> list[Path]:
    """Course notebooks without a source in ``solutions_dir``."""
    sources = {p.name for p in _notebooks(Path(solutions_dir))}
    return [p for p in _notebooks(Path(course_dir)) if p.name not in sources]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gpulab.exercises.release",
        description="Write the learner notebooks (course/) from the solution notebooks "
        "(solutions/).",
    )
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if a learner notebook is out of date")
    parser.add_argument("--solutions", default="solutions", help="source folder (solutions)")
    parser.add_argument("--course", default="course", help="learner folder (course)")
    args = parser.parse_args(argv)
    try:
        stale = release_all(args.solutions, args.course, check=args.check)
    except (MarkerError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    without_source = orphans(args.solutions, args.course)
    if args.check:
        if not stale:
            print(f"{args.course}/ is up to date with {args.solutions}/")
            return 0
        out_of_date = [p for p in stale if p not in without_source]
        if out_of_date:
            print(f"out of date with {args.solutions}/:", file=sys.stderr)
            for path in out_of_date:
                print(f"  {path}", file=sys.stderr)
            print(f"regenerate them with: {FIX_COMMAND}", file=sys.stderr)
    for path in stale if not args.check else []:
        print(f"wrote {path}")
    if without_source:
        print(f"no source in {args.solutions}/ for:", file=sys.stderr)
        for path in without_source:
            print(f"  {path}", file=sys.stderr)
        print(f"edit chapters in {args.solutions}/ (the learner version is generated): move "
              "these there, or delete them", file=sys.stderr)
        return 1
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
