"""What several checks gather the same way, as pieces of their evidence: whether a learner's
function returned a number (:func:`is_number`, :func:`is_whole`) or an array of numbers
(:func:`as_numbers`), which threads wrote each
element of an output on a traced launch (:class:`TracedWrites`), and how a grid-stride loop's
threads stepped on a small fixed grid (:class:`GridStride`).

A :class:`~gpulab.exercises.mistakes.Mistake` reads its evidence's ``where`` (or its ``trial``
or ``seed``) to say how to repeat a failure; the pieces here give theirs.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from gpulab.exercises.results import CheckFailedError
from gpulab.exercises.trial import Trial
from gpulab.instruments import thread_label


def is_number(value) -> bool:
    """Is ``value`` a real number (a NumPy one too)? ``True`` is 1 to Python, but no answer."""
    return not isinstance(value, bool) and isinstance(value, numbers.Real)


def as_numbers(value, what: str, where: str = "") -> np.ndarray:
    """``value`` (an array, or nested lists of numbers) as a float64 array; a plain-words
    failure for what is not numbers of one shape (None, text, ragged lists)."""
    if value is None:
        raise CheckFailedError(f"{what} is None{where}: did you forget to return it?",
                               f"return {what} as a NumPy array.")
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        kind = type(value).__name__
        raise CheckFailedError(
            f"{what} is a {kind} that is not an array of numbers of one shape{where} (text, "
            "None, or rows of different lengths?).", f"return {what} as a NumPy array of "
            "numbers, of the shape the exercise asks for.") from None
    return array


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
        return _by_several(self.writers)

    def example(self, name: str = "out") -> str:
        """The first element more than one thread wrote, and two of them: ``out[7] by block 1,
        thread 2 and block 0, thread 7``."""
        return _first_of_several(self.shared, f"{name}[{{}}]")


@dataclass
class GridStride:
    """A grid-stride loop traced on ``trial``'s small fixed grid: the elements each thread
    touched, in order (``order``: thread → [element, ...]). ``ITEM``, ``SPELLED`` and ``DONE``
    word the messages of :mod:`gpulab.exercises.grid_stride` for one exercise (ch02's copy:
    "element", "x[{}]", "copied"; the default verb is "touched")."""

    trial: Trial  # on a fixed grid (``grid_blocks``)
    order: dict
    ITEM = "element"
    SPELLED = "x[{}]"
    DONE = "touched"

    @property
    def blocks(self) -> int:
        """The number of blocks of the traced launch (its fixed grid's, or those that cover n)."""
        blocks = self.trial.blocks
        return int(np.prod(blocks)) if isinstance(blocks, tuple) else blocks

    @property
    def threads(self) -> int:
        return self.trial.threads_per_block

    @property
    def grid(self) -> int:
        return self.trial.grid_threads

    @property
    def where(self) -> str:
        return (f"traced on {self.blocks} blocks of {self.threads} threads = {self.grid} "
                f"threads, n={self.trial.n}, seed={self.trial.seed}")

    @property
    def step(self) -> int | None:
        """The most common step between the elements a thread touched one after the other."""
        steps = [b - a for run in self.order.values() for a, b in zip(run, run[1:],
                                                                      strict=False)]
        return max(set(steps), key=steps.count) if steps else None

    @property
    def touched(self) -> dict:
        """The threads that touched each element (element → threads, in the order of
        ``order``)."""
        found: dict = {}
        for thread, elements in self.order.items():
            for element in elements:
                if thread not in found.setdefault(element, []):
                    found[element].append(thread)
        return found

    @property
    def shared(self) -> dict:
        """The elements more than one thread touched, with their threads."""
        return _by_several(self.touched)

    @property
    def busy(self) -> list:
        """The threads that touched any element."""
        return [thread for thread, elements in self.order.items() if elements]

    @property
    def share(self) -> int:
        """The most any thread needs to take: ceil(n / the grid's threads)."""
        return -(-self.trial.n // self.grid)

    @property
    def most(self) -> int:
        """The most distinct elements one thread touched."""
        return max((len(set(run)) for run in self.order.values()), default=0)

    @property
    def work(self) -> int:
        """The elements touched, counting each time."""
        return sum(len(run) for run in self.order.values())

    @property
    def x_down_a_column(self) -> tuple | None:
        """``(left, element, right, element)``: the first two threads side by side along x (one
        block, one ``threadIdx.y``, ``threadIdx.x`` one apart) of a 2-D launch that each
        touched one element of a 2-D array and stepped down a column (the row index one apart,
        the column the same), where no such pair steps along a row (the column one apart, the
        row the same); None otherwise. Then x runs along the rows, and a warp's neighbouring
        threads touch elements a whole row apart. (A flat index split into a column and a row
        wraps to the next column now and then: those pairs step neither way.)"""
        one = {thread: run[0] for thread, run in self.order.items()
               if len(set(run)) == 1 and isinstance(thread[1], tuple) and len(thread[1]) == 2
               and isinstance(run[0], tuple) and len(run[0]) == 2}
        pairs = [(left, one[left], right, one[right]) for left in sorted(one)
                 for right in [(left[0], (left[1][0] + 1, left[1][1]))] if right in one]
        steps = [(pair[3][0] - pair[1][0], pair[3][1] - pair[1][1]) for pair in pairs]
        down = [pair for pair, step in zip(pairs, steps, strict=True) if step == (1, 0)]
        return down[0] if down and (0, 1) not in steps else None

    def example(self, element: str | None = None) -> str:
        """The first element more than one thread touched, spelled by ``element`` (default
        ``SPELLED``: ``"x[{}]"``, ``"sample {}"``), and two of them: ``x[7] by block 1, thread
        2 and block 0, thread 7``."""
        return _first_of_several(self.shared, element or self.SPELLED)

    def overlap(self) -> str:
        """``3 of 19 elements were copied by more than one thread, e.g. x[7] by ...``"""
        return (f"{len(self.shared)} of {self.trial.n} {self.ITEM}s were {self.DONE} by more "
                f"than one thread, e.g. {self.example()}")

    @property
    def scattered_neighbours(self) -> tuple | None:
        """``(left, element, right, element)``: the first two threads side by side in one block
        (1-D) whose first elements lie more than one apart, where most such pairs' do: at every
        step a warp's threads then take elements far apart (not coalesced). None otherwise."""
        def first(thread):
            run = self.order.get(thread)
            if not run:
                return None
            element = run[0]
            return element[0] if isinstance(element, tuple) and len(element) == 1 else element

        pairs = [(thread, first(thread), (thread[0], thread[1] + 1),
                  first((thread[0], thread[1] + 1))) for thread in self.order
                 if isinstance(thread[1], int)]
        pairs = [p for p in pairs if isinstance(p[1], int) and isinstance(p[3], int)]
        far = [p for p in pairs if abs(p[3] - p[1]) != 1]
        return far[0] if pairs and 2 * len(far) > len(pairs) else None

    def longest_run(self) -> str:
        """The thread that touched the most and its first and last: ``block 0, thread 1:
        samples 3..9``."""
        thread = max(self.order, key=lambda t: len(self.order[t]))
        first, last = (index[0] if isinstance(index, tuple) and len(index) == 1 else index
                       for index in (self.order[thread][0], self.order[thread][-1]))
        return f"{thread_label(thread)}: {self.ITEM}s {first}..{last}"


class OutputWrites(GridStride):
    """A one-thread-per-element kernel traced on a small launch (``grid_blocks``: all its
    blocks): the elements of its output each thread wrote, in order."""

    ITEM, SPELLED, DONE = "element", "out[{}]", "written"


def writes_of(item: str, spelled: str, done: str = "written") -> type[OutputWrites]:
    """An :class:`OutputWrites` worded for one exercise's output: ``writes_of("row",
    "out[{}]")`` says "3 rows written by one thread"."""
    return type(f"{item.title()}Writes", (OutputWrites,),
                {"ITEM": item, "SPELLED": spelled, "DONE": done,
                 "__doc__": f"The {item}s of the output ({spelled}) each thread {done}."})


class InputReads(GridStride):
    """A kernel traced on a small launch (``grid_blocks``: all its blocks): the elements of its
    input x each thread read, in order."""

    ITEM, SPELLED, DONE = "element", "x[{}]", "read"


def shown_apart(value: float, other: float) -> str:
    """``value`` with as many significant digits as it takes (4 to 9) to read differently from
    ``other``: 447.97, not 448, beside 448; -0.34627914 beside -0.34627911."""
    for digits in range(4, 10):
        if f"{value:.{digits}g}" != f"{other:.{digits}g}":
            return f"{value:.{digits}g}"
    return f"{value:.17g}"


def expected_got(expected: float, got: float) -> str:
    """``expected E, got G`` with digits enough to tell the two apart."""
    return f"expected {shown_apart(expected, got)}, got {shown_apart(got, expected)}"


def _by_several(who: dict) -> dict:
    return {index: threads for index, threads in who.items() if len(threads) > 1}


def _first_of_several(shared: dict, element: str) -> str:
    index, who = min(shared.items())
    at = index[0] if isinstance(index, tuple) else index
    return f"{element.format(at)} by {thread_label(who[0])} and {thread_label(who[1])}"


__all__ = ["GridStride", "InputReads", "OutputWrites", "TracedWrites", "as_numbers",
           "expected_got", "is_number", "is_whole", "shown_apart", "writes_of"]
