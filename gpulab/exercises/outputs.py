"""Judging a kernel's output against the right one, and naming the mistake when it is wrong.
Outputs start as NaN, so that "never written" and "written wrong" can be told apart.

- 1-D: :func:`vector_failure` (nothing written, one position off, only the first block's
  elements, the last block, the last element, then the check's own known wrong formulas);
  :func:`matches` for a single value.
- A known wrong formula is a :class:`~gpulab.exercises.mistakes.Mistake` made by
  :func:`looks_like`: the output equals what that formula gives, computed from the evidence
  (its ``inputs``, ``expected``, ``trial``). A check declares its own beside it, as data.
- 2-D (chapters 05-07): :func:`run_2d` launches a kernel with one thread per element;
  :func:`coverage_failure` names a pattern of elements never written (rows and columns swapped,
  the last row or column skipped); :func:`reject_matrix` the wrong values;
  :func:`check_matrix_output` puts them together, with :func:`blame_hard_coded_block` and
  :func:`~gpulab.exercises.running.changed_input_failure` (a kernel that wrote into an
  input). The activations the 2-D exercises compute are :data:`ACTIVATIONS`.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from gpulab.exercises.mistakes import Mistake, diagnose
from gpulab.exercises.results import (
    GLOBAL_INDEX_HINT,
    GRID_2D_HINT,
    GUARD_2D_HINT,
    CheckFailedError,
    KernelError,
)
from gpulab.exercises.running import changed_input_failure, launch, padded, read_back
from gpulab.exercises.source_rules import (
    SHARED_BARRIER_HINT,
    KernelSource,
    compares_with_shape,
    hard_coded_block,
    shared_array_without_barrier,
)
from gpulab.exercises.trial import Trial, draw_case
from gpulab.kernels.dense import ACTIVATION_CODES

# --- one thread per element, 1-D --------------------------------------------------------------


def elementwise_tolerance(dtype) -> tuple[float, float]:
    """(rtol, atol) for results that are one rounding away from the exact answer."""
    eps = float(np.finfo(dtype).eps)
    return 4 * eps, float(np.finfo(dtype).tiny)


def _ranges(indices: np.ndarray) -> str:
    """'3, 7..12, 40' for a sorted index array (at most a few pieces)."""
    pieces, start = [], None
    for k, i in enumerate(indices):
        if start is None:
            start = i
        if k + 1 == len(indices) or indices[k + 1] != i + 1:
            pieces.append(f"{start}" if start == i else f"{start}..{i}")
            start = None
    return ", ".join(pieces[:4]) + (", ..." if len(pieces) > 4 else "")


@dataclass
class Elementwise:
    """What :data:`ELEMENTWISE_MISTAKES` look at: the ``expected`` and ``got`` outputs of a 1-D
    kernel with one thread per element (``got`` started as ``unwritten_marker``, NaN, so that
    "never written" and "written wrong" can be told apart), its trial, and the ``inputs`` the
    kernel was given (by name: what a check's :func:`looks_like` mistakes compute their wrong
    formulas from). Its properties are what the mistakes are recognised by; a failure's message
    ends with the trial, which says how to repeat it
    (:meth:`gpulab.exercises.mistakes.Mistake.failure`)."""

    expected: np.ndarray
    got: np.ndarray
    trial: Trial
    unwritten_marker: float = np.nan
    inputs: dict[str, Any] = field(default_factory=dict)
    # the size of the terms each element is computed from (|a·x| + |y| for saxpy): the
    # tolerance is relative to it where it is larger than the result, as where a·x and y nearly
    # cancel, a GPU's fused multiply-add (one rounding) and NumPy's two roundings part by up
    # to one rounding of a·x
    magnitude: np.ndarray | None = None
    what = "out"

    @property
    def tolerance(self) -> tuple[float, float]:
        return elementwise_tolerance(self.trial.dtype)

    @cached_property
    def bad(self) -> np.ndarray:
        rtol, atol = self.tolerance
        size = np.abs(np.asarray(self.expected, np.float64))
        if self.magnitude is not None:
            size = np.maximum(size, np.asarray(self.magnitude, np.float64))
        got = np.asarray(self.got, np.float64)
        with np.errstate(invalid="ignore"):
            close = (got == self.expected) | (np.abs(got - self.expected) <= atol + rtol * size)
        return ~close

    @cached_property
    def unwritten(self) -> np.ndarray:
        marker = self.unwritten_marker
        return np.isnan(self.got) if np.isnan(marker) else self.got == marker

    @cached_property
    def missing(self) -> np.ndarray:
        """Indices never written."""
        return np.flatnonzero(self.unwritten)

    @property
    def last_block_start(self) -> int:
        return (self.trial.blocks - 1) * self.trial.threads_per_block

    @cached_property
    def shift(self) -> int:
        """1 when every written value is element i - 1's, -1 when i + 1's, else 0."""
        rtol, atol = self.tolerance
        written_bad = self.bad & ~self.unwritten
        n = self.trial.n
        for shift in (1, -1):
            inner = np.zeros(n, dtype=bool)
            inner[max(shift, 0): n + min(shift, 0)] = True
            check = inner & ~self.unwritten
            if written_bad.any() and np.allclose(self.got[check],
                                                 np.roll(self.expected, shift)[check],
                                                 rtol=rtol, atol=atol):
                return shift
        return 0

    def missing_from(self, start: int) -> bool:
        """True when exactly the elements from ``start`` on were never written."""
        index = np.arange(self.trial.n)
        return bool(np.array_equal(self.missing, index[index >= start]))

    @property
    def never_written(self) -> str:
        missing = self.missing
        return (f"{missing.size} of {self.trial.n} elements of out were never written "
                f"(out[{_ranges(missing)}])")

    @property
    def wrong(self) -> str:
        first = int(np.flatnonzero(self.bad)[0])
        return (f"{int(self.bad.sum())} of {self.trial.n} elements are wrong; the first is "
                f"out[{first}]: expected {self.expected[first]:.6g}, got {self.got[first]:.6g}")

    def close_to(self, candidate) -> bool:
        """True when ``got`` is ``candidate`` (what a known wrong formula gives; None: never)."""
        rtol, atol = self.tolerance
        return candidate is not None and bool(np.allclose(self.got, candidate, rtol=rtol,
                                                          atol=atol))


def looks_like(did: str, value: Callable[[Any], Any], hint: str | Callable[[Any], str],
               said: str | Callable[[Any], str] | None = None) -> Mistake:
    """A known wrong formula as a :class:`~gpulab.exercises.mistakes.Mistake`: it is seen when
    the output equals ``value(evidence)`` (within the evidence's tolerance; None: not this one),
    and says which elements are wrong, then "out looks like <said>" (``said``: text or a function
    of the evidence; ``did`` when not given), with ``hint``. For example::

        looks_like("x[i] - 1", lambda e: e.inputs["x"] - np.float32(1),
                   "the exercise adds one; your kernel subtracts.")
    """
    def message(e) -> str:
        words = said(e) if callable(said) else (said or did)
        return f"{e.wrong}. {e.what} looks like {words}"
    return Mistake(did, lambda e: e.close_to(value(e)), message, hint)


def _off_by_one(e: Elementwise) -> str:
    first = int(np.flatnonzero(e.bad & ~e.unwritten)[0])
    said = "out[i] got element i - 1" if e.shift == 1 else "out[i] got element i + 1"
    return (f"out[{first}] = {e.got[first]:.6g} but should be {e.expected[first]:.6g}: every "
            f"value is one position off, {said}")


# The mistakes of a 1-D kernel with one thread per element, in the order they are tried (a
# check asks :func:`vector_failure`, which gathers the :class:`Elementwise` evidence): those
# of elements never written, then the check's own known wrong formulas, then these.
ELEMENTWISE_UNWRITTEN = (
    Mistake("nothing written", lambda e: e.unwritten.all(),
            lambda e: (f"your kernel wrote nothing into out: all {e.trial.n} elements still hold "
                       "their starting value"),
            "each thread should write its own element of out; check that the guard lets the "
            "threads inside the array in (the comparison's direction)."),
    Mistake("an index one off", lambda e: e.shift, _off_by_one,
            "out[i] must get element i of x and y: check for a stray `+ 1` or `- 1` in the "
            "index, and let the guard be just `i < x.shape[0]`."),
    Mistake("every block on the first block's elements",
            lambda e: e.unwritten.any() and e.missing_from(e.trial.threads_per_block),
            lambda e: (f"{e.never_written}: only the first block's elements "
                       f"(out[0..{e.trial.threads_per_block - 1}]) were written, so every block "
                       "worked on the same elements"),
            GLOBAL_INDEX_HINT),
    Mistake("the last, partial block skipped",
            lambda e: e.unwritten.any() and e.missing_from(e.last_block_start),
            lambda e: f"{e.never_written}: every block except the last, partial one is right",
            "the guard is too strict: it must stop only the threads whose index is n or more "
            "(the last block still has real elements before n)."),
    Mistake("the last element skipped",
            lambda e: (e.unwritten.any() and e.missing[-1] == e.trial.n - 1
                       and e.missing.size <= 2),
            lambda e: f"{e.never_written}: the last element(s) were skipped",
            "compare with `i < x.shape[0]`, not `i < x.shape[0] - 1`."),
    Mistake("elements never written", lambda e: e.unwritten.any(),
            lambda e: e.never_written, GLOBAL_INDEX_HINT),
)
ELEMENTWISE_WRONG = (
    Mistake("only the last, partial block wrong",
            lambda e: np.flatnonzero(e.bad).min() >= e.last_block_start,
            lambda e: f"{e.wrong}: only the last, partial block is wrong",
            "the last block is the only one where some threads have no element: check the guard "
            "and how those threads index."),
    Mistake("wrong values", lambda e: True, lambda e: e.wrong,
            "compare your formula with the exercise's."),
)


def elementwise_mistakes(known: Iterable[Mistake] = ()) -> tuple[Mistake, ...]:
    """A 1-D kernel's mistakes in the order they are tried, with a check's ``known`` wrong
    formulas (:func:`looks_like`) after those of elements never written."""
    return (*ELEMENTWISE_UNWRITTEN, *known, *ELEMENTWISE_WRONG)


ELEMENTWISE_MISTAKES = elementwise_mistakes()


def vector_failure(
    expected: np.ndarray, got: np.ndarray, trial: Trial, unwritten_marker: float = np.nan,
    mistakes: Iterable[Mistake] = (), inputs: dict[str, Any] | None = None,
    magnitude: np.ndarray | None = None,
) -> CheckFailedError | None:
    """None when ``got`` matches ``expected``; otherwise the failure of the first of
    :func:`elementwise_mistakes` seen (:func:`gpulab.exercises.mistakes.diagnose`): which
    elements are wrong (first one, how many, expected vs got) and what the pattern suggests.

    ``got`` must have started as ``unwritten_marker`` (NaN) everywhere, so that "never written"
    and "written wrong" can be told apart. ``mistakes`` are the check's known wrong formulas
    (:func:`looks_like`), computed from ``inputs`` (the kernel's, by name). ``magnitude``: see
    :attr:`Elementwise.magnitude`.
    """
    evidence = Elementwise(expected, got, trial, unwritten_marker, dict(inputs or {}), magnitude)
    if not evidence.bad.any():
        return None
    return diagnose(elementwise_mistakes(mistakes), evidence)


def matches(value: float, target, tolerance: float) -> bool:
    """True when ``value`` is within ``tolerance`` of ``target`` (of any element, if an array)."""
    if not np.isfinite(value):
        return False
    difference = np.abs(np.asarray(target, dtype=np.float64) - float(value))
    return bool(np.any(difference <= tolerance))


# --- what the 2-D kernel checks share (chapters 05, 06, 07) -----------------------------------


# The activations the 2-D exercises handle (chapters 05 and 06).
IDENTITY, RELU, TANH = (ACTIVATION_CODES[name] for name in ("identity", "relu", "tanh"))


# As (code, reference name, how to say it):
SAID = {"relu": "ReLU", "tanh": "tanh", "identity": "identity"}  # names as the text says them


ACTIVATIONS = ((RELU, "relu", "ReLU"), (TANH, "tanh", "tanh"), (IDENTITY, "identity",
                                                                  "identity"))


def per_activation(check_name: str, seed: int, dtype,
                   run: Callable[[Trial, int, str], None]) -> str:
    """Run a check's body ``run(trial, code, name)`` once per activation of
    :data:`ACTIVATIONS` (its code for ``act``, its name for :mod:`gpulab.reference`), each on
    its own 2-D case (:func:`~gpulab.exercises.trial.draw_case`: its own block shape), labelled
    ``act = 1 (ReLU)``; the pass message names each case's shape and block."""
    shapes = []
    for case, (code, name, words) in enumerate(ACTIVATIONS):
        trial = draw_case(check_name, seed, dtype, case)
        trial.case = f"act = {code} ({words})"
        run(trial, code, name)
        shapes.append(f"{words} on {trial.rows} x {trial.cols} in blocks of "
                      f"{trial.block[0]} x {trial.block[1]}")
    return f"all right: {'; '.join(shapes)} (seed={seed})."


PAD_VALUE = 100.0  # beyond the edges of the inputs (seen only by a kernel without guards)


GENERIC_MATRIX_HINT = "compare your formula with the exercise's."  # reject_matrix's last word


@dataclass
class MatrixOutput:
    """What :data:`MATRIX_MISTAKES` look at: the ``expected`` and ``got`` outputs of a 2-D
    kernel (``got`` NaN where never written), its trial, the tolerances, the output's name,
    ``what``, and the ``inputs`` the kernel was given (by name: what a check's
    :func:`looks_like` mistakes compute their wrong formulas from)."""

    expected: np.ndarray
    got: np.ndarray
    trial: Trial
    rtol: float
    atol: float
    what: str = "out"
    inputs: dict[str, Any] = field(default_factory=dict)
    # the line that makes a shared array in a kernel with no barrier (None: no such array)
    shared_line: str | None = field(default=None, kw_only=True)

    @cached_property
    def unwritten(self) -> np.ndarray:
        return np.isnan(self.got)

    @cached_property
    def bad(self) -> np.ndarray:
        return ~np.isclose(self.got, self.expected, rtol=self.rtol, atol=self.atol)

    @property
    def first_block_only(self) -> bool:
        """True when only the first block's elements were written."""
        x, y = self.trial.block[0], self.trial.block[1]
        return bool(self.unwritten[:, x:].all() and self.unwritten[y:, :].all())

    @property
    def never_written(self) -> str:
        rows = np.flatnonzero(self.unwritten.any(axis=1))
        cols = np.flatnonzero(self.unwritten.any(axis=0))
        return (f"{int(self.unwritten.sum())} of {self.got.size} elements of {self.what} were "
                f"never written: rows {rows[0]}..{rows[-1]}, columns {cols[0]}..{cols[-1]}")

    @property
    def wrong(self) -> str:
        r, c = map(int, np.argwhere(self.bad)[0])
        return (f"{int(self.bad.sum())} of {self.got.size} elements are wrong; the first is "
                f"{self.what}[{r}, {c}]: expected {self.expected[r, c]:.6g}, got "
                f"{self.got[r, c]:.6g}")

    def close_to(self, candidate) -> bool:
        """True when ``got`` is ``candidate`` (what a known wrong formula gives; None: never)."""
        return candidate is not None and bool(np.allclose(self.got, candidate, rtol=self.rtol,
                                                          atol=self.atol))


# The mistakes of a 2-D kernel with one thread per element, in the order they are tried
# (:func:`reject_matrix` gathers the :class:`MatrixOutput` evidence): those of elements never
# written, then the check's own known wrong formulas, then wrong values.
MATRIX_UNWRITTEN = (
    Mistake("nothing written", lambda e: e.unwritten.all(),
            lambda e: f"your kernel wrote nothing into {e.what}",
            "each thread should assign its own element, inside the guard."),
    Mistake("only the first block's elements written",
            lambda e: e.unwritten.any() and e.first_block_only, lambda e: e.never_written,
            "only the first block's elements were written: each thread needs its global "
            "indices, not `cuda.threadIdx` alone. " + GRID_2D_HINT),
    Mistake("elements never written", lambda e: e.unwritten.any(), lambda e: e.never_written,
            GUARD_2D_HINT + " " + GRID_2D_HINT),
)
# Wrong values from a kernel that shares an array among a block's threads with no barrier: told
# after the check's known formulas (a formula the values match is the more exact diagnosis).
MATRIX_SHARED_RACE = Mistake(
    "a shared array with no barrier (slots read before other threads wrote them)",
    lambda e: e.shared_line is not None,
    lambda e: (f"{e.wrong}. `{e.shared_line}` makes an array the block's threads share, but "
               "the kernel has no `cuda.syncthreads()`: a thread read slots that the threads "
               "filling them may not have written yet"),
    SHARED_BARRIER_HINT, "source")
MATRIX_WRONG = Mistake("wrong values", lambda e: True, lambda e: e.wrong, GENERIC_MATRIX_HINT)


def matrix_mistakes(known: Iterable[Mistake] = ()) -> tuple[Mistake, ...]:
    """A 2-D kernel's mistakes in the order they are tried, with a check's ``known`` wrong
    formulas (:func:`looks_like`) after those of elements never written, then a shared array
    with no barrier."""
    return (*MATRIX_UNWRITTEN, *known, MATRIX_SHARED_RACE, MATRIX_WRONG)


MATRIX_MISTAKES = matrix_mistakes()


def reject_matrix(expected: np.ndarray, got: np.ndarray, trial: Trial,
                  mistakes: Iterable[Mistake], rtol: float, atol: float, what: str = "out",
                  inputs: dict[str, Any] | None = None,
                  source: KernelSource | None = None) -> None:
    """Raise CheckFailedError unless ``got`` (from :func:`~gpulab.exercises.running.read_back`,
    NaN where never written) holds ``expected``: the failure of the first of
    :func:`matrix_mistakes` seen, which says which part is wrong and, when ``got`` is what one
    of the check's known wrong formulas (``mistakes``, computed from ``inputs``) gives, which
    mistake it is; or, when the kernel's ``source`` makes a shared array and has no barrier,
    that."""
    evidence = MatrixOutput(expected, got, trial, rtol, atol, what, dict(inputs or {}),
                            shared_line=shared_array_without_barrier(source))
    if evidence.unwritten.any() or evidence.bad.any():
        raise diagnose(matrix_mistakes(mistakes), evidence)


def blame_hard_coded_block(source: KernelSource, trial: Trial, error: Exception) -> None:
    """If the kernel hard-codes the block size, make the failure ``error`` say so."""
    line = hard_coded_block(source)
    if line:
        hint = (f"`{line}` hard-codes the block size, but this launch's blocks have "
                f"{trial.block[0]} x {trial.block[1]} threads: use `cuda.grid(2)` (or "
                "`cuda.blockDim.x` and `.y`) so that the kernel works for any block.")
        if isinstance(error, KernelError):
            error.index_hint = hint
        else:
            error.hint = hint


def index_hint_2d(source: KernelSource, rows: int, cols: int, first: str = "Z") -> str:
    """The hint for an index past an edge of a 2-D launch, from what the kernel's guard is."""
    guards = compares_with_shape(source)
    if source.tree is not None and not guards:
        return "your kernel has no guard: " + GUARD_2D_HINT
    if any(isinstance(op, (ast.LtE, ast.GtE)) for node in guards for op in node.ops):
        return ("a guard with `<=` lets through the thread whose index equals the size, one "
                f"past the end of {first}: the last valid index is one less than the size.")
    return (f"{first} has {rows} rows and {cols} columns here. Check that the row index goes "
            f"with `.shape[0]` and first in `{first}[r, c]`, the column index with `.shape[1]`, "
            "and that the first value `cuda.grid(2)` gives (x) is the column; then "
            + GUARD_2D_HINT)


@dataclass
class Coverage:
    """Which elements of a 2-D kernel's output ``what`` were never written (``unwritten``), on
    its trial's grid: the evidence :data:`COVERAGE_MISTAKES` are told from."""

    unwritten: np.ndarray
    trial: Trial
    what: str

    @property
    def grid(self) -> tuple[int, int]:
        """The threads along x and along y."""
        return self.trial.launch_threads

    def only(self, skipped: np.ndarray) -> bool:
        return bool(np.array_equal(self.unwritten, skipped))

    @property
    def indices(self) -> np.ndarray:
        """(r, c) of every element."""
        return np.indices((self.trial.rows, self.trial.cols))


def _swapped(e: Coverage) -> bool:
    r, c = e.indices
    return e.only(~((r < e.grid[0]) & (c < e.grid[1])))


def _skipped(words: str, last_row: bool, last_column: bool) -> Mistake:
    def seen(e: Coverage) -> bool:
        r, c = e.indices
        row, column = r == e.trial.rows - 1, c == e.trial.cols - 1
        return e.only((row if last_row else False) | (column if last_column else False))
    return Mistake(
        f"{words} skipped (the guard one short)", seen,
        lambda e: f"{words} of {e.what} were never written",
        lambda e: (f"the guard is one short: the last row's index is one less than {e.what}'s "
                   "number of rows, and it must still pass the guard (likewise for the "
                   "columns)."))


# A 2-D kernel's grid with x along the rows: the elements it never wrote.
SWAPPED_ROWS_AND_COLUMNS = Mistake(
    "rows and columns swapped", _swapped,
    lambda e: (f"{int(e.unwritten.sum())} of {e.unwritten.size} elements of {e.what} "
               "were never written, exactly those a kernel with rows and columns "
               f"swapped misses: the grid has {e.grid[0]} threads along x for the "
               f"{e.trial.cols} columns and {e.grid[1]} along y for the {e.trial.rows} "
               "rows"),
    "`cuda.grid(2)` returns x first, and x runs along the columns: the first value it "
    "gives is the column index, the second the row index.")

# Patterns of elements a 2-D kernel never wrote, in the order they are tried.
COVERAGE_MISTAKES = (
    SWAPPED_ROWS_AND_COLUMNS,
    _skipped("the last row and the last column", True, True),
    _skipped("the last row", True, False),
    _skipped("the last column", False, True),
)


def coverage_failure(unwritten: np.ndarray, trial: Trial, what: str) -> CheckFailedError | None:
    """A specific diagnosis when the elements never written form a known pattern
    (:data:`COVERAGE_MISTAKES`: r and c swapped, or the last row and column skipped); None
    otherwise."""
    if not unwritten.any():
        return None
    return diagnose(COVERAGE_MISTAKES, Coverage(unwritten, trial, what))


def run_2d(kernel, trial: Trial, source: KernelSource, inputs: dict, what: str = "out"
           ) -> np.ndarray:
    """Launch ``kernel(*inputs.values(), out)`` on the trial's grid and return ``out`` (NaN where
    never written). Array inputs go in as views of padded buffers; the check fails if the kernel
    wrote into an input (or its padding) or past the edges of ``out``."""
    hint = index_hint_2d(source, trial.rows, trial.cols, next(iter(inputs)))
    buffers, args = {}, []
    for name, value in inputs.items():
        if isinstance(value, np.ndarray):
            d_all, d_view = padded(value, trial.padding, PAD_VALUE)
            buffers[name] = (d_all, d_all.copy_to_host())
            args.append(d_view)
        else:
            args.append(value)
    d_out_all, d_out = padded(np.full(trial.extents, np.nan, trial.dtype), trial.padding,
                              np.nan)
    launch(kernel, trial, *args, d_out, index_hint=hint)
    for name, (d_all, before) in buffers.items():
        changed_input_failure(name, before, d_all.copy_to_host(), what, trial)
    return read_back(d_out_all, trial.extents, trial, what=what, hint=hint)


def check_matrix_output(kernel, trial: Trial, source: KernelSource, inputs: dict,
                        expected: np.ndarray, mistakes: Iterable[Mistake], hint: str,
                        what: str = "out") -> None:
    """One trial of a 2-D kernel with one thread per element of ``what``: run it
    (:func:`run_2d`), diagnose elements never written (:func:`coverage_failure`) and wrong
    values against ``expected`` and the check's known wrong formulas, ``mistakes``, computed
    from ``inputs`` (:func:`reject_matrix`, to 1e-5 relative, 1e-6 absolute). A failure whose
    hint is only the generic one gets the exercise's ``hint``, and says so if the kernel
    hard-codes the block size (:func:`blame_hard_coded_block`)."""
    try:
        out = run_2d(kernel, trial, source, inputs, what=what)
        failure = coverage_failure(np.isnan(out), trial, what)
        if failure:
            raise failure
        reject_matrix(expected, out, trial, mistakes, rtol=1e-5, atol=1e-6, what=what,
                      inputs=inputs, source=source)
    except (CheckFailedError, KernelError) as error:
        if getattr(error, "hint", None) == GENERIC_MATRIX_HINT:
            error.hint = hint
        blame_hard_coded_block(source, trial, error)
        raise


__all__ = [
    "ACTIVATIONS", "COVERAGE_MISTAKES", "Coverage", "ELEMENTWISE_MISTAKES",
    "ELEMENTWISE_UNWRITTEN", "ELEMENTWISE_WRONG",
    "MATRIX_MISTAKES", "MATRIX_SHARED_RACE", "MATRIX_UNWRITTEN", "MATRIX_WRONG", "Elementwise",
    "MatrixOutput",
    "GENERIC_MATRIX_HINT", "IDENTITY", "PAD_VALUE", "RELU", "SAID", "SWAPPED_ROWS_AND_COLUMNS",
    "TANH",
    "blame_hard_coded_block", "check_matrix_output", "coverage_failure", "elementwise_mistakes",
    "elementwise_tolerance", "index_hint_2d", "looks_like", "matches", "matrix_mistakes",
    "per_activation", "reject_matrix", "run_2d", "vector_failure"
]
