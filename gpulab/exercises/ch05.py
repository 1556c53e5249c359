"""Chapter 05's exercises: a fused bias + ReLU kernel, and the napkin math of its traffic.

- :func:`check_bias_relu` takes your ``@cuda.jit`` kernel ``(Z, b, out)``; it must write
  ``out[r, c] = max(Z[r, c] + b[c], 0)`` with one thread per element of a 2-D grid (x along
  the columns) and a guard for both directions.
- :func:`check_traffic` takes your function ``bytes_moved(M, N, fused, itemsize)``.

Each check uses random sizes that are not multiples of the block and random values, prints a
:class:`~gpulab.exercises.checks.CheckResult` and returns it; a failure names the seed:
``check_bias_relu(kernel, seed=1234)`` repeats the trial.

This module also holds the helpers that chapters 06-08's checks share: 2-D trials and
launches, and calling a learner's plain Python function.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gpulab import device, reference
from gpulab.exercises.checks import (
    SIMULATOR_ONLY_HINT,
    CheckFailedError,
    CheckResult,
    KernelSource,
    NotAttemptedError,
    kernel_source,
    raises_not_implemented,
    run_check,
    simulator_only_code,
)

GRID_2D_HINT = (
    "`c, r = cuda.grid(2)` gives this thread's column (x) and row (y): x runs along the "
    "columns, so neighbouring threads of a warp read neighbouring elements of a row."
)
GUARD_2D_HINT = (
    "guard both directions: `if r < Z.shape[0] and c < Z.shape[1]:`. The blocks at the right "
    "and bottom edges are only partly used."
)
PAD = 3  # rows and columns of padding around the output, where stray writes would land


# --- shared by chapters 05-08 ------------------------------------------------------------------


def start_kernel(kernel, parameter_count: int, stub_hint: str) -> KernelSource:
    """Is it a kernel, is it still the stub, would it compile for a GPU?"""
    source = kernel_source(kernel, parameter_count)
    if raises_not_implemented(source):
        raise NotAttemptedError(
            "your kernel still raises NotImplementedError: write your code in place of "
            "`raise NotImplementedError()`.", stub_hint)
    if device.tier() == "sim":
        problems = simulator_only_code(source)
        if problems:
            raise CheckFailedError(
                "your kernel would run here, because the simulator executes it as plain Python, "
                "but it would not compile for a real GPU: " + "; ".join(problems) + ".",
                SIMULATOR_ONLY_HINT)
    return source


def call_learner(function, *args, stub_hint: str = "", **kwargs):
    """Call a learner's plain Python function; the stub becomes *not attempted*, any other
    exception a failure that names it."""
    if not callable(function):
        raise CheckFailedError(f"the check needs your function, not {function!r:.60}.",
                               "pass the function itself, without calling it.")
    try:
        return function(*args, **kwargs)
    except NotImplementedError:
        raise NotAttemptedError(
            "your function still raises NotImplementedError: write your code in place of "
            "`raise NotImplementedError()`.", stub_hint) from None
    except Exception as error:  # the learner's code: explain, don't crash
        raise CheckFailedError(
            f"your function stopped with {type(error).__name__}: {error}",
            "read the error: the line it names is where your function stopped.") from None


def block_2d() -> tuple[int, int]:
    """Threads per block (x, y): 8 x 8 in the simulator, 16 x 16 on a GPU."""
    return (16, 16) if device.tier() == "gpu" else (8, 8)


def draw_side(rng: np.random.Generator, block: int, low: int, high: int) -> int:
    """A random size in [low, high) that is not a multiple of ``block`` and spans more than one
    block."""
    low = max(low, block + 1)
    if block <= 1:  # every size is a multiple of 1
        return int(rng.integers(low, max(high, low + 2)))
    while True:
        n = int(rng.integers(low, max(high, low + 2 * block)))
        if n % block:
            return n


@dataclass
class Trial2D:
    """One random 2-D problem: rows x cols, the block, the seed and its random generator."""

    check_name: str
    seed: int
    rows: int
    cols: int
    block: tuple[int, int]
    dtype: np.dtype
    rng: np.random.Generator = field(repr=False)

    @classmethod
    def draw(cls, check_name: str, seed: int, dtype=np.float32) -> Trial2D:
        rng = np.random.default_rng(seed)
        block = block_2d()
        high = 40 if device.tier() == "sim" else 300
        rows = draw_side(rng, block[1], 9, high)
        cols = draw_side(rng, block[0], 9, high)
        return cls(check_name, seed, rows, cols, block, np.dtype(dtype), rng)

    @property
    def blocks(self) -> tuple[int, int]:
        return -(-self.cols // self.block[0]), -(-self.rows // self.block[1])

    def normal(self, *shape, scale: float = 1.0) -> np.ndarray:
        return (self.rng.standard_normal(shape) * scale).astype(self.dtype)

    def __str__(self) -> str:
        return (f"{self.rows} x {self.cols}, {self.blocks[0]} x {self.blocks[1]} blocks of "
                f"{self.block[0]} x {self.block[1]} threads, {self.dtype.name}, "
                f"seed={self.seed}; repeat it with {self.check_name}(kernel, seed={self.seed})")


def padded_output(trial: Trial2D):
    """(device buffer, device view): the kernel gets a rows x cols view of a buffer with PAD
    extra rows and columns filled with NaN, so a write past the edges is seen, not lost."""
    from numba import cuda

    buffer = np.full((trial.rows + PAD, trial.cols + PAD), np.nan, dtype=trial.dtype)
    d_buffer = cuda.to_device(buffer)
    return d_buffer, d_buffer[: trial.rows, : trial.cols]


def launch_2d(kernel, trial: Trial2D, *args, guard_hint: str = GUARD_2D_HINT) -> None:
    """Launch the learner's kernel on the trial's 2-D grid; turn what it raises into advice."""
    from numba import cuda

    kernel = getattr(kernel, "dispatcher", kernel)
    try:
        kernel[trial.blocks, trial.block](*args)
        cuda.synchronize()
    except NotImplementedError:
        raise NotAttemptedError("your kernel still raises NotImplementedError.") from None
    except IndexError as error:
        raise CheckFailedError(
            f"a thread used an index past the end of an array ({error}; {trial}).",
            guard_hint) from None
    except Exception as error:  # the learner's code
        try:
            from numba.core.errors import NumbaError
        except ImportError:  # pragma: no cover
            NumbaError = ()  # noqa: N806
        if isinstance(error, NumbaError):
            raise CheckFailedError(f"your kernel would not compile for the GPU: "
                                   f"{str(error).splitlines()[0]}", SIMULATOR_ONLY_HINT) from None
        raise CheckFailedError(f"your kernel stopped with {type(error).__name__}: {error} "
                               f"({trial}).", "read the error: it names the line.") from None


def diagnose_matrix(expected: np.ndarray, got_all: np.ndarray, trial: Trial2D,
                    patterns: dict[str, tuple[np.ndarray, str]], rtol: float, atol: float,
                    what: str = "out") -> None:
    """Raise CheckFailedError unless ``got_all`` (the padded buffer) holds ``expected`` in its
    rows x cols corner and NaN elsewhere; the message says which part is wrong."""
    got = got_all[: trial.rows, : trial.cols]
    outside = np.isfinite(got_all)
    outside[: trial.rows, : trial.cols] = False
    if outside.any():
        r, c = map(int, np.argwhere(outside)[0])
        raise CheckFailedError(
            f"a thread wrote {what}[{r}, {c}], outside the {trial.rows} x {trial.cols} matrix "
            f"({trial}).", GUARD_2D_HINT)
    unwritten = np.isnan(got)
    if unwritten.all():
        raise CheckFailedError(f"your kernel wrote nothing into {what} ({trial}).",
                               "each thread should assign its own element, inside the guard.")
    if unwritten.any():
        rows_missing = np.flatnonzero(unwritten.any(axis=1))
        cols_missing = np.flatnonzero(unwritten.any(axis=0))
        if unwritten[:, trial.block[0]:].all() and unwritten[trial.block[1]:, :].all():
            hint = ("only the first block's elements were written: use the global index "
                    "`c, r = cuda.grid(2)`, not `cuda.threadIdx` alone. " + GRID_2D_HINT)
        else:
            hint = GUARD_2D_HINT + " " + GRID_2D_HINT
        raise CheckFailedError(
            f"{int(unwritten.sum())} of {got.size} elements of {what} were never written (rows "
            f"{rows_missing[0]}..{rows_missing[-1]}, columns {cols_missing[0]}.."
            f"{cols_missing[-1]}; {trial}).", hint)
    bad = ~np.isclose(got, expected, rtol=rtol, atol=atol)
    if not bad.any():
        return
    r, c = map(int, np.argwhere(bad)[0])
    text = (f"{int(bad.sum())} of {got.size} elements are wrong; the first is {what}[{r}, {c}]: "
            f"expected {expected[r, c]:.6g}, got {got[r, c]:.6g}")
    for description, (candidate, hint) in patterns.items():
        if np.allclose(got, candidate, rtol=rtol, atol=atol):
            raise CheckFailedError(f"{text}. {what} looks like {description} ({trial}).", hint)
    raise CheckFailedError(f"{text} ({trial}).", "compare your formula with the exercise's.")


# --- exercise 1: fused bias + ReLU ------------------------------------------------------------

BIAS_RELU_STUB_HINT = (
    "find this thread's row and column with `c, r = cuda.grid(2)`, let only threads inside the "
    "matrix through, and write `out[r, c]` = Z[r, c] + b[c] if that is positive, else 0."
)


def check_bias_relu(kernel, seed: int | None = None, dtype=np.float32,
                    show: bool = True) -> CheckResult:
    """Check ``kernel(Z, b, out)``: ``out[r, c] = max(Z[r, c] + b[c], 0)``, one thread per
    element, x along the columns, guarded; launched on a 2-D grid that overhangs both edges.

    Diagnoses: the stub; writes past the edges; nothing written; only the first block; rows
    and columns swapped; the bias left out; the ReLU left out; ``b[r]`` instead of ``b[c]``;
    simulator-only code."""

    def body(seed: int) -> str:
        start_kernel(kernel, 3, BIAS_RELU_STUB_HINT)
        from numba import cuda

        trial = Trial2D.draw("check_bias_relu", seed, dtype)
        Z = trial.normal(trial.rows, trial.cols)
        b = trial.normal(trial.cols, scale=0.5)
        d_all, d_out = padded_output(trial)
        launch_2d(kernel, trial, cuda.to_device(Z), cuda.to_device(b), d_out)
        expected = reference.bias_activation(Z, b, "relu")
        b_by_row = np.resize(b, trial.rows)[:, None]  # what b[r] would read (when it can)
        diagnose_matrix(expected, d_all.copy_to_host(), trial, {
            "max(Z, 0): the bias is missing": (np.maximum(Z, 0), "add b[c] before the ReLU."),
            "Z + b: the ReLU is missing": (Z + b, "keep only positive values: `z if z > 0 "
                                                  "else 0`."),
            "max(Z + b[r], 0): the bias indexed by row": (
                np.maximum(Z + b_by_row, 0), "there is one bias per output column: b[c]."),
            "max(Z, 0) + b: the bias added after the ReLU": (
                np.maximum(Z, 0) + b, "add the bias first, then apply the ReLU."),
        }, rtol=1e-6, atol=1e-6)
        return (f"all {trial.rows * trial.cols} elements are right ({trial.blocks[0]} x "
                f"{trial.blocks[1]} blocks of {trial.block[0]} x {trial.block[1]} threads, "
                f"seed={trial.seed}).")

    return run_check("bias_relu", body, seed, show)


# --- exercise 2: napkin math --------------------------------------------------------------------

TRAFFIC_STUB_HINT = (
    "count values: the unfused pair reads Z and b, writes Z + b, reads it back and writes A; "
    "the fused kernel reads Z and b and writes A. Multiply by itemsize."
)


def check_traffic(function, seed: int | None = None, show: bool = True) -> CheckResult:
    """Check ``function(M, N, fused, itemsize)``: the bytes bias + activation move on an
    M x N matmul output, each value read or written once per pass (b counted once), as
    :func:`gpulab.kernels.dense.forward_traffic_bytes`."""
    from gpulab.kernels.dense import forward_traffic_bytes

    def body(seed: int) -> str:
        rng = np.random.default_rng(seed)
        cases = [(int(rng.integers(2, 5000)), int(rng.integers(2, 5000)), fused, itemsize)
                 for fused in (True, False) for itemsize in (4, 8, 2)]
        for M, N, fused, itemsize in cases:
            got = call_learner(function, M, N, fused, itemsize, stub_hint=TRAFFIC_STUB_HINT)
            want = forward_traffic_bytes(M, N, fused, itemsize)
            if not isinstance(got, (int, float, np.integer, np.floating)):
                raise CheckFailedError(f"bytes_moved returned {got!r}: return a number of bytes.")
            if got == want:
                continue
            kind = "fused" if fused else "unfused"
            values = 2 if fused else 4
            suspects = {
                itemsize * values * M * N: "b is missing: it is read too (N values, once).",
                values * M * N + N: "these are values, not bytes: multiply by itemsize.",
                itemsize * (2 * M * N + N) if not fused else None:
                    "the unfused pair also writes Z + b to memory and reads it back: 4 M N "
                    "values in all.",
                itemsize * (3 * M * N + N):
                    "count each pass: the fused kernel reads Z (M N values) and writes A "
                    "(M N); the unfused pair reads Z, writes Z + b, reads Z + b, writes A.",
                itemsize * (values * M * N + M): "b has one value per column: N, not M.",
            }
            hint = suspects.get(got, TRAFFIC_STUB_HINT)
            raise CheckFailedError(
                f"for M={M}, N={N}, {kind}, itemsize={itemsize}: expected {want:,} bytes, got "
                f"{got:,}.", hint)
        return f"all {len(cases)} cases right (seed={seed})."

    return run_check("traffic", body, seed, show)


__all__ = ["Trial2D", "call_learner", "check_bias_relu", "check_traffic", "diagnose_matrix",
           "launch_2d", "padded_output", "start_kernel"]
