"""What several checks gather the same way, as pieces of their evidence: whether a learner's
function returned a number (:func:`is_number`, :func:`is_whole`), and which threads wrote each
element of an output on a traced launch (:class:`TracedWrites`).

A :class:`~gpulab.exercises.mistakes.Mistake` reads its evidence's ``where`` (or its ``trial``
or ``seed``) to say how to repeat a failure; the pieces here give theirs.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from gpulab.exercises.trial import Trial
from gpulab.instruments import thread_label


def is_number(value) -> bool:
    """Is ``value`` a real number (a NumPy one too)? ``True`` is 1 to Python, but no answer."""
    return not isinstance(value, bool) and isinstance(value, numbers.Real)


def is_whole(value) -> bool:
    """Is ``value`` a finite number with nothing after the point (``3`` or ``3.0``)?"""
    return is_number(value) and math.isfinite(float(value)) and float(value) == int(value)


@dataclass
class TracedWrites:
    """Which threads wrote each element of an output (``writers``: index → threads), traced on
    ``trial``'s small launch."""

    trial: Trial
    writers: dict

    @property
    def where(self) -> str:
        return f"traced on {self.trial.launched}, n={self.trial.n}, seed={self.trial.seed}"

    @property
    def shared(self) -> dict:
        """The elements more than one thread wrote, with their threads."""
        return {index: who for index, who in self.writers.items() if len(who) > 1}

    def example(self, name: str = "out") -> str:
        """The first element more than one thread wrote, and two of them: ``out[7] by block 1,
        thread 2 and block 0, thread 7``."""
        index, who = min(self.shared.items())
        return f"{name}[{index[0]}] by {thread_label(who[0])} and {thread_label(who[1])}"


__all__ = ["TracedWrites", "is_number", "is_whole"]
