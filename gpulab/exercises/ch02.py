"""Chapter 02's exercises: saxpy, and a copy that stays coalesced when each thread loops.

Each check takes your ``@cuda.jit`` kernel (not launched), runs it on random data whose size is
not a multiple of the block size, compares with :mod:`gpulab.reference`, prints what it found
and returns a :class:`~gpulab.exercises.checks.CheckResult`::

    from gpulab.exercises.ch02 import check_saxpy
    check_saxpy(my_saxpy)

How the copy's coalescing is checked
- In the simulator, x is a :class:`~gpulab.instruments.RecordingArray`: every element your
  kernel reads is recorded with the simulated thread that read it, in order, and
  :mod:`gpulab.memory_model` groups the reads into warp requests and counts 32-byte sectors —
  as Nsight Compute's "sectors per request" does on a GPU. A correct copy that gives each
  thread a contiguous chunk of x reads addresses ``chunk * 4`` bytes apart across a warp, needs
  several times the sectors, and fails with that explanation.
- On a GPU the addresses cannot be recorded from Python, so only the answer is checked there.
"""

from __future__ import annotations

import numpy as np

from gpulab import device, memory_model, reference
from gpulab.exercises.checks import (
    CheckFailedError,
    CheckResult,
    Trial,
    default_threads_per_block,
    diagnose_vector,
    launch,
    padded,
    read_back,
    run_check,
    run_elementwise,
    start_kernel,
)
from gpulab.instruments import RecordingArray

GRID_STRIDE_HINT = (
    "let each thread start at its global index and step by the number of threads in the "
    "grid: `for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)): out[i] = x[i]`. On "
    "every pass the 32 threads of a warp then read 32 neighbouring elements."
)
# The copy check launches a fixed grid smaller than n, so that every thread must loop.
COPY_BLOCKS = {"sim": 2, "gpu": 8}
COPY_THREADS = {"sim": 64, "gpu": 128}
COPY_SIZE_RANGE = {"sim": (300, 700), "gpu": (20_000, 60_000)}
# A warp request touching more than this many times the sectors a coalesced one needs fails.
SECTOR_SLACK = 1.5


# --- exercise 1: saxpy -------------------------------------------------------------------------

SAXPY_STUB_HINT = (
    "find this thread's element `i = cuda.grid(1)`, let only threads with `i < x.shape[0]` "
    "through, and write `out[i] = a * x[i] + y[i]`."
)


def check_saxpy(kernel, seed: int | None = None, threads_per_block: int | None = None,
                dtype=np.float32, show: bool = True) -> CheckResult:
    """Check ``kernel(a, x, y, out)``, which must set ``out[i] = a * x[i] + y[i]``, one thread
    per element, guarded. ``a`` is a random scalar (never 1, so forgetting it shows).

    Diagnoses: the stub; a missing or ``<=`` guard; nothing written; only the first block
    (``threadIdx.x`` alone as the index); the last, partial block skipped; a shift by one;
    ``x + y`` (forgot a), ``a * x`` (forgot y), ``a * y + x`` (swapped), ``a * (x + y)``;
    simulator-only code.
    """

    def body(seed: int) -> str:
        start_kernel(kernel, 4, SAXPY_STUB_HINT)
        trial = Trial.draw("check_saxpy", seed,
                           threads_per_block or default_threads_per_block(), dtype)
        a = trial.dtype.type(trial.rng.choice([-1, 1]) * trial.rng.uniform(1.5, 3.0))
        x, y = trial.uniform(-2, 2), trial.uniform(-2, 2)
        out = run_elementwise(kernel, trial, a, x, y)
        failure = diagnose_vector(
            reference.saxpy(a, x, y), out, trial,
            patterns={
                "x[i] + y[i] (a is missing)": (x + y, "multiply x[i] by a: "
                                               "`out[i] = a * x[i] + y[i]`."),
                "a * x[i] (y is missing)": (a * x, "add y[i]: `out[i] = a * x[i] + y[i]`."),
                "a * y[i] + x[i] (x and y swapped)": (a * y + x, "a multiplies x, not y."),
                "a * (x[i] + y[i])": (a * (x + y), "only x is scaled by a: "
                                      "`a * x[i] + y[i]`."),
                "x[i] * y[i] + a": (x * y + a, "saxpy is `a * x[i] + y[i]`."),
            },
        )
        if failure:
            raise failure
        return (f"all {trial.n} elements of a*x + y are right (a = {float(a):.3g}, "
                f"{trial.launched}, seed={trial.seed}).")

    return run_check("saxpy", body, seed, show)


# --- exercise 2: a coalesced grid-stride copy ------------------------------------------------

COPY_STUB_HINT = (
    "the grid is smaller than x, so each thread copies several elements: loop from "
    "`cuda.grid(1)` to `x.shape[0]` in steps of `cuda.gridsize(1)`."
)


def _first_threads(request: memory_model.WarpRequest, count: int = 4) -> str:
    return ", ".join(f"thread {t} reads x[{i}]"
                     for t, i in enumerate(request.element_indices[:count]))


def check_copy_grid_stride(kernel, seed: int | None = None, dtype=np.float32,
                           show: bool = True) -> CheckResult:
    """Check ``kernel(x, out)``, which must copy x into out with a **fixed grid** smaller than
    x (each thread copies several elements) while keeping every warp's reads coalesced.

    Launched with a few blocks (2 of 64 threads in the simulator), n random and larger than the
    grid. Diagnoses: the stub; reads or writes past the end; one element per thread with no
    loop (only the first elements copied); elements missing or wrong; and, in the simulator,
    a right copy whose warps read scattered addresses (each thread a contiguous chunk): the
    sectors per warp request are counted from the reads the kernel really made.
    """
    tier = "gpu" if device.tier() == "gpu" else "sim"

    def body(seed: int) -> str:
        start_kernel(kernel, 2, COPY_STUB_HINT)
        threads, blocks = COPY_THREADS[tier], COPY_BLOCKS[tier]
        trial = Trial.draw("check_copy_grid_stride", seed, threads, dtype,
                           size_range=COPY_SIZE_RANGE[tier])
        grid_threads = threads * blocks
        x = trial.uniform(-10, 10)
        recorder = None
        if tier == "sim":
            recorder = RecordingArray(x)  # an IndexError past the end, like numpy
            d_x = recorder
        else:
            _, d_x = padded(x, grid_threads, 0)
        d_out_all, d_out = padded(np.full(trial.n, np.nan, dtype=trial.dtype), grid_threads,
                                  np.nan)
        launch(kernel, trial, d_x, d_out, blocks=blocks)
        # The grid is fixed, not the trial's one thread per element: say what was launched.
        launched = f"{blocks} blocks of {threads} threads = {grid_threads} threads for n={trial.n}"
        out = read_back(d_out_all, (trial.n,), f"{launched}, seed={trial.seed}",
                        hint="stop the loop at `x.shape[0]`: `range(cuda.grid(1), x.shape[0], "
                        "cuda.gridsize(1))`.")
        unwritten = np.isnan(out)
        if unwritten.all():
            raise CheckFailedError(f"your kernel wrote nothing into out ({launched}).",
                                   GRID_STRIDE_HINT)
        if unwritten.any() and not unwritten[:grid_threads].any():
            raise CheckFailedError(
                f"only out[0..{grid_threads - 1}] were copied, one element per thread: the grid "
                f"has {grid_threads} threads for {trial.n} elements, so each thread must copy "
                f"several ({launched}, seed={trial.seed}).", GRID_STRIDE_HINT)
        failure = diagnose_vector(reference.copy(x), out, trial)
        if failure:
            raise CheckFailedError(failure.message.replace(str(trial), launched +
                                                           f", seed={trial.seed}"),
                                   failure.hint or GRID_STRIDE_HINT)
        if recorder is None:
            return (f"all {trial.n} elements copied ({launched}, seed={trial.seed}). "
                    "Coalescing is checked in the simulator tier, where reads can be recorded.")
        access = memory_model.summarise(recorder.reads, trial.dtype.itemsize,
                                        "traced in the simulator")
        ideal = access.ideal_sectors_per_request
        if access.sectors_per_request > SECTOR_SLACK * ideal:
            worst = max(access.requests, key=lambda r: len(r.sectors))
            raise CheckFailedError(
                f"the copy is right, but its reads are not coalesced: a warp request touches "
                f"{access.sectors_per_request:.3g} sectors of 32 bytes on average where "
                f"{ideal:g} would do ({access.efficiency * 100:.3g}% of the bytes fetched are "
                f"used). In one request of warp {worst.warp}, {_first_threads(worst)}: "
                f"neighbouring threads read addresses far apart ({launched}, seed={trial.seed}).",
                GRID_STRIDE_HINT)
        return (f"all {trial.n} elements copied, and coalesced: "
                f"{access.sectors_per_request:.3g} sectors per warp request (ideal {ideal:g}; "
                f"{access.n_requests} requests traced in the simulator; {launched}).")

    return run_check("copy_grid_stride", body, seed, show)


__all__ = ["check_copy_grid_stride", "check_saxpy"]
