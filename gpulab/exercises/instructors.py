"""The instructors' guide's per-exercise tables, written from the checks' specs.

Each chapter module declares its checks as :class:`~gpulab.exercises.spec.CheckSpec` objects;
their ``title``, ``call``, ``holds``, ``mistakes`` and ``also`` are the one description of what
a check asks and diagnoses. ``course/INSTRUCTORS.md`` holds, for each chapter with specs, a
table between two markers::

    <!-- checks: ch01 -->

    | exercise | check | what must hold | what it diagnoses |
    ...

    <!-- end of checks: ch01 -->

``python -m gpulab.exercises.instructors`` (also run by ``make notebooks``)
rewrites every such table from the specs; ``tests/exercises/test_instructors.py`` fails when
the file and the specs differ.
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

from gpulab.exercises.spec import CheckSpec

ROOT = Path(__file__).resolve().parents[2]
INSTRUCTORS = ROOT / "course" / "INSTRUCTORS.md"
CHAPTERS = tuple(f"ch{n:02d}" for n in range(13))
HEADER = ("| exercise | check | what must hold | what it diagnoses |\n"
          "| --- | --- | --- | --- |")
_TABLE = re.compile(r"(<!-- checks: (ch\d\d) -->\n)(.*?)(<!-- end of checks: \2 -->)", re.S)


def specs(chapter: str) -> list[CheckSpec]:
    """The chapter module's check specs, in the notebook's order: by the number their title
    starts with ("2. ..."), else in the order the module declares them."""
    module = importlib.import_module(f"gpulab.exercises.{chapter}")
    found = [value for value in vars(module).values() if isinstance(value, CheckSpec)]
    number = re.compile(r"\s*(\d+)\.")
    return sorted(found, key=lambda spec: int(m.group(1)) if (m := number.match(spec.title))
                  else 0)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def table(chapter: str) -> str:
    """The chapter's table, one row per spec; a spec without a title or a call is an error
    (the table would have a hole)."""
    rows = []
    for spec in specs(chapter):
        if not (spec.title and spec.call and spec.holds):
            raise ValueError(f"{chapter}'s check {spec.exercise!r} has no title, call or holds: "
                             "the instructors' table needs all three")
        rows.append(f"| {_cell(spec.title)} | `{spec.call}` | {_cell(spec.holds)} | "
                    f"{_cell(spec.diagnoses())} |")
    return "\n".join([HEADER, *rows]) + "\n"


def rewritten(text: str) -> str:
    """``text`` with every marked table replaced by the one its chapter's specs give."""
    return _TABLE.sub(lambda m: m.group(1) + "\n" + table(m.group(2)) + "\n" + m.group(4), text)


def marked_chapters(text: str) -> list[str]:
    return [m.group(2) for m in _TABLE.finditer(text)]


def update(path: Path = INSTRUCTORS) -> bool:
    """Rewrite the tables in ``path``; True when anything changed."""
    text = path.read_text(encoding="utf-8")
    new = rewritten(text)
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


if __name__ == "__main__":
    changed = update()
    print(f"{INSTRUCTORS.relative_to(ROOT)}: {'rewritten' if changed else 'already up to date'}")
    sys.exit(0)
