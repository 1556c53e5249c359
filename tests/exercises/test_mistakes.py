"""Known mistakes as data (gpulab.exercises.mistakes): the first one seen is the verdict."""

from dataclasses import dataclass

import pytest

from gpulab.exercises.mistakes import Mistake, diagnose, reject
from gpulab.exercises.results import CheckFailedError


@dataclass
class Answer:
    got: int
    expected: int
    where: str = "seed=4"


TOO_SMALL = Mistake("too small", lambda a: a.got < a.expected,
                    lambda a: f"{a.got} is less than {a.expected}", "add more.")
NEGATIVE = Mistake("negative", lambda a: a.got < 0, "a negative count", lambda a: f"not {a.got}")
ANYTHING = Mistake("anything else", lambda a: a.got != a.expected, "wrong", "look again.")


def test_the_first_mistake_seen_is_the_verdict_with_where_it_happened():
    failure = diagnose([TOO_SMALL, NEGATIVE, ANYTHING], Answer(-1, 3))
    assert failure.message == "-1 is less than 3 (seed=4)." and failure.hint == "add more."
    failure = diagnose([NEGATIVE, TOO_SMALL], Answer(-1, 3))
    assert failure.message == "a negative count (seed=4)." and failure.hint == "not -1"


def test_no_mistake_seen_is_no_verdict():
    assert diagnose([TOO_SMALL, ANYTHING], Answer(3, 3)) is None
    reject([TOO_SMALL], Answer(3, 3))  # does not raise


def test_reject_raises_the_failure():
    with pytest.raises(CheckFailedError, match="wrong"):
        reject([TOO_SMALL, ANYTHING], Answer(5, 3))


def test_evidence_without_a_place_gets_a_plain_message():
    @dataclass
    class Bare:
        got: int
        expected: int

    assert diagnose([ANYTHING], Bare(1, 2)).message == "wrong."


def test_a_mistake_says_what_it_is_recognised_from():
    with pytest.raises(ValueError, match="recognised_from"):
        Mistake("x", bool, "y", recognised_from="intuition")
