"""The instructors' guide's per-exercise tables are the checks' specs, written out."""

import pytest

from gpulab.exercises import instructors
from gpulab.exercises.mistakes import Mistake
from gpulab.exercises.spec import CheckSpec


def test_the_guide_s_tables_are_the_ones_the_specs_give():
    text = instructors.INSTRUCTORS.read_text(encoding="utf-8")
    assert instructors.rewritten(text) == text, (
        "course/INSTRUCTORS.md's check tables differ from the checks' specs: run "
        "`python -m gpulab.exercises.instructors`")


def test_every_chapter_with_specs_has_its_table_in_the_guide():
    text = instructors.INSTRUCTORS.read_text(encoding="utf-8")
    with_specs = [chapter for chapter in instructors.CHAPTERS if instructors.specs(chapter)]
    assert set(with_specs) <= set(instructors.marked_chapters(text))


def test_a_row_lists_the_mistakes_in_the_order_the_check_tries_them():
    spec = CheckSpec("demo", "f(x)", "", (
        Mistake("returned x", lambda e: False, ""), Mistake("returned 2x", lambda e: False, "")),
        title="1. demo", call="check_demo(f)", holds="f(x) = x + 1", also="not a number")
    assert spec.diagnoses() == "returned x; returned 2x; not a number"


def test_a_spec_without_what_must_hold_cannot_make_a_row(monkeypatch):
    monkeypatch.setattr(instructors, "specs", lambda chapter: [CheckSpec("demo", "f(x)", "")])
    with pytest.raises(ValueError, match="no title, call or holds"):
        instructors.table("ch00")


def test_a_pipe_in_a_description_does_not_break_the_table(monkeypatch):
    spec = CheckSpec("demo", "f(x)", "", title="1. demo", call="check_demo(f)",
                     holds="max|x| / 448")
    monkeypatch.setattr(instructors, "specs", lambda chapter: [spec])
    assert "max\\|x\\| / 448" in instructors.table("ch00")
