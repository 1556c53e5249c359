"""One table for every table gpulab shows: aligned text in a terminal, an HTML table in a notebook.

A :class:`Table` is column headings (each with its unit, "step (µs)", so the cells carry numbers
only where they can), rows of cells, an optional title above and notes beneath (where the numbers
come from). ``str(table)`` is aligned plain text, for the command line, ``print`` and tests;
a notebook shows ``_repr_html_``, an HTML table that does not wrap like long lines of text.

>>> table = Table([Column("GPU"), Column("bandwidth", "TB/s", "{:.2f}")],
...               [["H100 SXM", 3.35], ["T4", 0.32]], notes=["datasheets"])
>>> print(table)
GPU       bandwidth (TB/s)
H100 SXM              3.35
T4                    0.32
datasheets

Cells are strings (shown as they are) or numbers (formatted by their column's ``number_format``,
else with ``{:g}``); ``None`` shows as "—". A column whose cells all start like a number is
aligned right, any other left, unless its ``align`` says otherwise. The standard library has no
such table and pandas is not a dependency; this is the small part of one gpulab needs.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

MISSING = "—"  # a cell with no value (None)
GAP = "  "  # between two columns of the text
NUMBER_START = re.compile(r"^[-+−~<>≈]?\s?[0-9.]")  # "3.2 ms", "-1", "≈ 4", ".5", "<1 %"
PLACEHOLDERS = {"", "-", MISSING, "none", "n/a"}  # a numeric column's empty cells
NUMBER_WORDS = {"nan", "inf", "-inf", "+inf"}  # floats that start with no digit


@dataclass(frozen=True)
class Column:
    """A column's heading ``name``, its ``unit`` (shown in the heading as "name (unit)"), how a
    number in it is written (``number_format``, e.g. "{:,.1f}") and its alignment ("left",
    "right", or None: right where every cell starts like a number)."""

    name: str
    unit: str = ""
    number_format: str | None = None
    align: str | None = None

    @property
    def heading(self) -> str:
        return f"{self.name} ({self.unit})" if self.unit else self.name

    def cell(self, value) -> str:
        if value is None:
            return MISSING
        if isinstance(value, str):
            return value
        return (self.number_format or "{:g}").format(value)


def _lines(text: str) -> str:
    """``text`` escaped for HTML, its line breaks kept."""
    return html.escape(text).replace("\n", "<br>")


def _numeric(texts: list[str]) -> bool:
    filled = [t for t in texts if t.strip() not in PLACEHOLDERS]
    return bool(filled) and all(NUMBER_START.match(t.strip()) or t.strip() in NUMBER_WORDS
                                for t in filled)


class Table:
    """Column headings (:class:`Column` or plain strings), rows of cells, an optional
    ``title`` (a line above) and ``notes`` (lines beneath: sources, legends, footnotes)."""

    def __init__(self, columns: Sequence[Column | str], rows: Iterable[Sequence] = (),
                 title: str = "", notes: Iterable[str] = ()):
        self.columns = tuple(c if isinstance(c, Column) else Column(c) for c in columns)
        self.rows = tuple(tuple(row) for row in rows)
        for row in self.rows:
            if len(row) != len(self.columns):
                raise ValueError(f"a row of {len(row)} cells in a table of "
                                 f"{len(self.columns)} columns: {row!r}")
        self.title, self.notes = title, tuple(n for n in notes if n)

    def cells(self) -> list[list[str]]:
        """The rows as the text each cell shows."""
        return [[column.cell(v) for column, v in zip(self.columns, row, strict=True)]
                for row in self.rows]

    def _right_aligned(self, cells: list[list[str]]) -> list[bool]:
        return [c.align == "right" if c.align else _numeric([row[k] for row in cells])
                for k, c in enumerate(self.columns)]

    def __str__(self) -> str:
        cells = self.cells()
        headings = [c.heading for c in self.columns]
        widths = [max(len(t) for t in column) for column in zip(headings, *cells, strict=True)]
        right = self._right_aligned(cells)

        def line(texts):
            return GAP.join(t.rjust(w) if r else t.ljust(w)
                            for t, w, r in zip(texts, widths, right, strict=True)).rstrip()

        lines = [self.title] if self.title else []
        lines += [line(headings)] + [line(row) for row in cells] + list(self.notes)
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def __contains__(self, text: str) -> bool:
        """Whether the table's text (:meth:`__str__`) contains ``text``."""
        return text in str(self)

    def _repr_html_(self) -> str:
        cells = self.cells()
        right = self._right_aligned(cells)

        def tag(name, text, right_aligned):
            style = "right" if right_aligned else "left"
            return f'<{name} style="text-align: {style}">{html.escape(text)}</{name}>'

        head = "".join(tag("th", c.heading, r) for c, r in zip(self.columns, right, strict=True))
        body = "".join("<tr>" + "".join(tag("td", t, r) for t, r in zip(row, right, strict=True))
                       + "</tr>" for row in cells)
        title = f"<caption>{_lines(self.title)}</caption>" if self.title else ""
        notes = "".join(f'<p style="font-size: smaller">{_lines(n)}</p>' for n in self.notes)
        return (f"<table>{title}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
                f"{notes}")


class ShownAsTable:
    """A mixin for a result shown as its :meth:`table` (a :class:`Table`): its text in a
    terminal, as its repr and in IPython's text/plain, the table's HTML in a notebook. (A
    dataclass using it says ``repr=False``, or its generated repr would come first.)"""

    def table(self) -> Table:
        raise NotImplementedError

    def __str__(self) -> str:
        return str(self.table())

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        return self.table()._repr_html_()


__all__ = ["MISSING", "Column", "ShownAsTable", "Table"]
