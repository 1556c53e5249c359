"""gpulab.tables: one table as aligned text (terminal, tests) and as HTML (notebooks)."""

import pytest

from gpulab.tables import MISSING, Column, Table


def test_text_aligns_numbers_right_and_words_left():
    table = Table([Column("kernel"), Column("time", "µs", "{:,.1f}"), Column("bound")],
                  [["naive", 1234.5, "memory"], ["tiled", 7.25, "compute"]])
    lines = str(table).splitlines()
    assert lines == ["kernel  time (µs)  bound",
                     "naive     1,234.5  memory",
                     "tiled         7.2  compute"]


def test_units_are_in_the_headings_and_numbers_use_the_column_format():
    table = Table([Column("memory", "GB", "{:.0f}"), "plain"], [[80.0, "x"]])
    assert str(table).splitlines()[0].startswith("memory (GB)")
    assert "80" in str(table) and "80.0" not in str(table)
    assert "<th" in table._repr_html_() and "memory (GB)</th>" in table._repr_html_()
    assert Column("ratio").cell(2.5) == "2.5" and Column("x").cell(None) == MISSING


def test_title_and_notes_frame_the_rows():
    table = Table(["a"], [["1"]], title="a title", notes=["source: a datasheet", ""])
    assert str(table).splitlines() == ["a title", "a", "1", "source: a datasheet"]
    html = table._repr_html_()
    assert "<caption>a title</caption>" in html and "source: a datasheet" in html


def test_html_escapes_every_text():
    table = Table(["<b>name</b>"], [["a < b & c"]], title="<script>", notes=["x > y"])
    html = table._repr_html_()
    assert "<b>" not in html and "<script>" not in html
    assert "&lt;b&gt;name&lt;/b&gt;" in html and "a &lt; b &amp; c" in html
    assert "x &gt; y" in html and "&lt;script&gt;" in html


def test_numeric_columns_are_right_aligned_in_html_too():
    html = Table(["what", "n"], [["x", "12"], ["y", "-"]])._repr_html_()
    assert '<td style="text-align: left">x</td><td style="text-align: right">12</td>' in html
    assert str(Table(["x"], [[float("inf")], [-1.5]])).splitlines() == ["   x", " inf", "-1.5"]
    forced = Table([Column("n", align="left")], [["12"]])._repr_html_()
    assert '<td style="text-align: left">12</td>' in forced


def test_an_empty_table_has_its_headings():
    table = Table([Column("batch"), Column("step", "ms")])
    assert str(table) == "batch  step (ms)"
    assert "<tbody></tbody>" in table._repr_html_()
    assert repr(table) == str(table)


def test_a_row_of_the_wrong_length_is_refused():
    with pytest.raises(ValueError, match="2 cells in a table of 3 columns"):
        Table(["a", "b", "c"], [["1", "2"]])


def test_a_result_shown_as_its_table():
    from dataclasses import dataclass

    from IPython.core.formatters import DisplayFormatter

    from gpulab.tables import ShownAsTable

    @dataclass(frozen=True, repr=False)
    class Result(ShownAsTable):
        cell: str

        def table(self):
            return Table(["x"], [[self.cell]], title="result")

    result = Result("<b>")
    assert str(result) == repr(result) == "result\nx\n<b>"
    shown, _ = DisplayFormatter().format(result)  # what a notebook gets
    assert shown["text/plain"] == str(result) and "&lt;b&gt;" in shown["text/html"]
