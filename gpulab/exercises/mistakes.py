"""Known wrong answers, as data: a :class:`Mistake` says what the learner did, how it is
recognised and what the check tells them; :func:`diagnose` walks a check's mistakes in order.

A check gathers its *evidence* (any object: the outputs and the expected values, the trial,
the kernel's source, a trace's counts, what the host code did) and asks ``diagnose(MISTAKES,
evidence)``. The first mistake whose ``seen(evidence)`` is true becomes the failure, so the
order matters: the most specific first, a catch-all last. For example::

    ROUNDED_DOWN = Mistake(
        did="rounded down (n // threads_per_block)",
        seen=lambda e: e.got == e.n // e.threads and e.n % e.threads,
        message=lambda e: f"the last {e.n % e.threads} elements get no thread",
        hint="round up: `(n + threads_per_block - 1) // threads_per_block`.")

``message`` and ``hint`` are text or functions of the evidence; :func:`diagnose` adds the
evidence's ``where`` (or else its ``trial``, or else its ``seed``) to the message, so a failure
says how to repeat it. ``recognised_from`` ("outputs", "trace", "source", "host code") is for
the tables that describe each check (:meth:`gpulab.exercises.spec.CheckSpec.mistake_table`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from gpulab.exercises.results import CheckFailedError

RECOGNISED_FROM = ("outputs", "trace", "source", "host code", "compiled code")


@dataclass(frozen=True)
class Mistake:
    """One wrong answer learners write: ``did`` (what they did, a few words), ``seen`` (is it
    this one? a function of the evidence), ``message`` and ``hint`` (what the check says: text,
    or a function of the evidence), and what it is ``recognised_from``."""

    did: str
    seen: Callable[[Any], Any]
    message: str | Callable[[Any], str]
    hint: str | Callable[[Any], str] = ""
    recognised_from: str = "outputs"

    def __post_init__(self):
        if self.recognised_from not in RECOGNISED_FROM:
            raise ValueError(f"recognised_from must be one of {RECOGNISED_FROM}, "
                             f"not {self.recognised_from!r}")

    def failure(self, evidence) -> CheckFailedError:
        """The failure this mistake makes of ``evidence``: its message, then the evidence's
        ``where`` (or ``trial``, or ``seed=…``) in parentheses when it has one, and its hint."""
        message = self.message(evidence) if callable(self.message) else self.message
        hint = self.hint(evidence) if callable(self.hint) else self.hint
        where = getattr(evidence, "where", None) or getattr(evidence, "trial", None) or (
            f"seed={evidence.seed}" if getattr(evidence, "seed", None) is not None else "")
        return CheckFailedError(f"{message} ({where})." if where else f"{message}.", hint)


def diagnose(mistakes: Iterable[Mistake], evidence) -> CheckFailedError | None:
    """The failure of the first mistake ``seen`` in ``evidence``, or None when none is."""
    for mistake in mistakes:
        if mistake.seen(evidence):
            return mistake.failure(evidence)
    return None


def reject(mistakes: Iterable[Mistake], evidence) -> None:
    """Raise the failure :func:`diagnose` finds, if any."""
    failure = diagnose(mistakes, evidence)
    if failure is not None:
        raise failure


__all__ = ["RECOGNISED_FROM", "Mistake", "diagnose", "reject"]
