"""What a chapter's dashboard leaves out: the exercises, since nobody can write code in Voila.

Voila shows a chapter with its code hidden and its widgets live. The exercises make no sense
there: the learner's stubs raise ``NotImplementedError``, the checks would print "NOT ATTEMPTED
YET … write your code", and the "try it" cells would print "not written yet". So the dashboard
template (``dashboards/data/voila/templates/gpulab``, which ``dashboards/config/voila.json``
selects) runs :class:`LeaveOutExercises`, an nbconvert preprocessor, before Voila executes the
notebook. Left out are:

- the exercise cells nbgrader knows: solution cells (the stubs) and grade cells (the checks),
  as ``gpulab.exercises.release`` and nbgrader mark them in the cell metadata;
- every code cell that needs a name only a left-out cell defines (found with the standard
  library's ``symtable``, transitively): the "try it" cells and the cells that run the
  learner's function later, so the dashboard runs without a ``NameError``;
- in Markdown, each ``### Exercise …`` section (to the next heading of the same or a higher
  level, or the cell's end) and each ``<details><summary>Hint …`` block; a cell left empty goes;
- a Markdown cell without a heading whose code cells (up to the next Markdown cell) are all
  left out: the prose that introduces a cell running the learner's code ("See your kernel");
- any cell tagged ``exercise`` (cell metadata ``tags``), for what the rules above cannot see.

A cell that mixes gpulab's results with the learner's (a ``try: … except NotImplementedError``
part) is left out whole; split it in ``solutions/`` and the dashboard keeps gpulab's part.

Where a kept cell shows gpulab's version of an exercise with
:func:`~gpulab.exercises.reveal.compare_yours`, a cell after the first one tells it to show it at
once (:func:`with_versions`): there is no attempt to wait for.

Everything else runs as in the notebook. To see what a chapter's dashboard leaves out, and why::

    python -m gpulab.dashboard course/01_dot_product.ipynb
"""

from __future__ import annotations

import argparse
import ast
import re
import symtable
import sys
from dataclasses import dataclass

import nbformat
from nbconvert.preprocessors import Preprocessor

_HEADING = re.compile(r"^(#{1,6})\s")
_EXERCISE_HEADING = re.compile(r"^(#{1,6})\s+Exercise\b")
_HINT = re.compile(r"<details>\s*<summary>\s*Hint\b.*?</details>[ \t]*\n?", re.DOTALL)
_FENCE = re.compile(r"^\s*(```|~~~)")
EXERCISE_TAG = "exercise"


@dataclass(frozen=True)
class LeftOut:
    """One cell the dashboard leaves out, by its index in the notebook, and why."""

    index: int
    reason: str


def _source(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def is_exercise_cell(cell) -> bool:
    """An nbgrader solution cell (the learner's stub) or grade cell (its check)."""
    grading = cell.get("metadata", {}).get("nbgrader", {})
    return bool(grading.get("solution") or grading.get("grade"))


def _as_python(source: str) -> str:
    """The cell as plain Python: IPython's own transform turns ``%magic`` and ``!shell`` lines
    into calls (it comes with the kernel); without IPython, such lines are dropped."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:
        return "\n".join(line for line in source.splitlines()
                         if not line.lstrip().startswith(("%", "!")))
    return TransformerManager().transform_cell(source)


def cell_names(source: str) -> tuple[set[str], set[str]]:
    """(names the cell binds at the top level, global names it reads and does not bind).

    From ``symtable``, so a function's parameters and locals are not taken for globals. A cell
    that is not valid Python binds and reads nothing, as far as this module can tell."""
    try:
        table = symtable.symtable(_as_python(source), "<cell>", "exec")
    except SyntaxError:
        return set(), set()
    bound = {symbol.get_name() for symbol in table.get_symbols()
             if symbol.is_assigned() or symbol.is_imported()}
    read = {symbol.get_name() for symbol in table.get_symbols() if symbol.is_referenced()}
    scopes = list(table.get_children())
    while scopes:
        scope = scopes.pop()
        scopes.extend(scope.get_children())
        read.update(symbol.get_name() for symbol in scope.get_symbols()
                    if symbol.is_referenced() and symbol.is_global())
    return bound, read - bound


def without_exercise_text(markdown: str) -> str:
    """The Markdown without its ``Exercise`` sections and ``Hint`` blocks."""
    markdown = _HINT.sub("", markdown)
    kept, skipping_below, in_fence = [], None, False  # skipping_below: the heading's level
    for line in markdown.split("\n"):
        if _FENCE.match(line):
            in_fence = not in_fence
        heading = None if in_fence else _HEADING.match(line)
        if heading and skipping_below is not None and len(heading.group(1)) <= skipping_below:
            skipping_below = None
        exercise = None if in_fence else _EXERCISE_HEADING.match(line)
        if exercise and skipping_below is None:
            skipping_below = len(exercise.group(1))
        if skipping_below is None:
            kept.append(line)
    return "\n".join(kept).rstrip() + ("\n" if markdown.endswith("\n") else "")


def imported_names(source: str) -> set[str]:
    """The names a cell binds with ``import`` statements."""
    try:
        tree = ast.parse(_as_python(source))
    except SyntaxError:
        return set()
    return {(alias.asname or alias.name).split(".")[0] for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom) for alias in node.names}


def plan(notebook) -> tuple[list, list[LeftOut]]:
    """The cells a dashboard shows (Markdown trimmed where needed) and the ones it leaves out.

    The notebook itself is not changed."""
    kept, left_out = [], []
    lost: set[str] = set()  # names that only a left-out cell would have defined
    kept_bound: set[str] = set()  # names the kept cells define
    for index, cell in enumerate(notebook.cells):
        if EXERCISE_TAG in cell.get("metadata", {}).get("tags", ()):
            left_out.append(LeftOut(index, f"tagged {EXERCISE_TAG!r}"))
            if cell.cell_type == "code":
                lost |= cell_names(_source(cell))[0]
            continue
        if cell.cell_type == "markdown":
            text = _source(cell)
            trimmed = without_exercise_text(text)
            if not trimmed.strip():
                left_out.append(LeftOut(index, "an exercise's text or hints"))
                continue
            if trimmed != text:
                cell = nbformat.from_dict(dict(cell, source=trimmed))
            kept.append(cell)
            continue
        if cell.cell_type != "code":
            kept.append(cell)
            continue
        bound, needed = cell_names(_source(cell))
        if is_exercise_cell(cell):
            kind = "solution" if cell.metadata["nbgrader"].get("solution") else "grade"
            reason = f"nbgrader {kind} cell"
        elif needed & lost:
            reason = f"needs {', '.join(sorted(needed & lost))}, defined only by left-out cells"
        else:
            lost -= bound
            kept_bound |= bound
            kept.append(cell)
            continue
        # a check cell's `from gpulab.exercises import ch01` imports again what a kept cell
        # imported: the name is not lost
        lost |= bound - (imported_names(_source(cell)) & kept_bound)
        left_out.append(LeftOut(index, reason))
    return _without_orphaned_prose(notebook.cells, kept, left_out)


def _without_orphaned_prose(cells, kept: list, left_out: list[LeftOut]) -> tuple[list,
                                                                                list[LeftOut]]:
    """Leave out each kept Markdown cell without a heading that only introduces left-out code:
    every code cell after it, up to the next Markdown cell, is left out (and there is one)."""
    gone = {cell.index for cell in left_out}
    orphaned = []
    for index, cell in enumerate(cells):
        if index in gone or cell.cell_type != "markdown":
            continue
        if any(_HEADING.match(line) for line in _source(cell).split("\n")):
            continue
        following = []
        for later in range(index + 1, len(cells)):
            if cells[later].cell_type == "markdown":
                break
            if cells[later].cell_type == "code":
                following.append(later)
        if following and all(later in gone for later in following):
            orphaned.append(index)
    if not orphaned:
        return kept, left_out
    # kept holds the notebook's own cell objects, or trimmed copies of Markdown cells: match
    # by position instead, walking both lists in order
    kept_indices = [index for index in range(len(cells)) if index not in gone]
    kept = [cell for index, cell in zip(kept_indices, kept, strict=True)
            if index not in orphaned]
    left_out = sorted([*left_out, *(LeftOut(index, "introduces only left-out code")
                                    for index in orphaned)], key=lambda cell: cell.index)
    return kept, left_out


class LeaveOutExercises(Preprocessor):
    """nbconvert preprocessor: the notebook as its dashboard shows it (see the module)."""

    def preprocess(self, nb, resources):
        nb.cells, left_out = plan(nb)
        with_versions(nb)
        self.log.info("dashboard: left out %d exercise cells", len(left_out))
        return nb, resources


SHOW_VERSIONS = ("from gpulab.exercises.reveal import show_gpulabs_versions\n"
                 "show_gpulabs_versions()  # a dashboard has no exercises to wait for")


def with_versions(nb) -> None:
    """If a kept cell shows gpulab's version of an exercise with ``compare_yours`` (which waits
    for the learner's check in a notebook), insert a cell after the first code cell (the one
    that imports gpulab first) that shows them at once: the dashboard has no exercise to wait
    for, and gpulab's kernels are its lesson."""
    sources = [(i, _source(cell)) for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]
    if not sources or not any("compare_yours(" in source for _, source in sources):
        return
    nb.cells.insert(sources[0][0] + 1, nbformat.v4.new_code_cell(SHOW_VERSIONS))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gpulab.dashboard",
        description="List the cells a chapter's Voila dashboard leaves out, and why.")
    parser.add_argument("notebooks", nargs="+", help="course/NN_name.ipynb ...")
    args = parser.parse_args(argv)
    for path in args.notebooks:
        notebook = nbformat.read(path, as_version=4)
        kept, left_out = plan(notebook)
        print(f"{path}: shows {len(kept)} of {len(notebook.cells)} cells, leaves out "
              f"{len(left_out)}")
        for cell in left_out:
            first = _source(notebook.cells[cell.index]).strip().split("\n")[0][:60]
            print(f"  cell {cell.index:3d}: {cell.reason}  | {first}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
