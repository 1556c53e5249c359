"""Chapter 02's exercises: saxpy, the host code that times it, and a copy that stays coalesced
when each thread loops.

Each check takes your ``@cuda.jit`` kernel (not launched), runs it on random data whose size is
not a multiple of the block size, compares with :mod:`gpulab.reference`, prints what it found
and returns a :class:`~gpulab.exercises.checks.CheckResult`::

    from gpulab.exercises.ch02 import check_saxpy
    check_saxpy(my_saxpy)

How the timing's host code is checked
- :func:`check_time_saxpy` calls your ``time_saxpy(kernel, a, x, y, repeats)`` with a stand-in
  for gpulab's saxpy kernel that records every launch (its grid, and whether an argument was a
  NumPy array, which makes Numba copy it to the GPU and back on that launch), while
  :func:`gpulab.exercises.checks.watch_host_code` records your copies, allocations,
  synchronisations and clock reads, in order. So it sees the hidden-copy trap, copies inside
  the timed loop, a clock stopped before the GPU finished, and a time that includes the copies.

How the copy's stride and coalescing are checked
- Your kernel is traced on a small launch (:func:`gpulab.exercises.checks.trace_trial`): the
  elements each thread read, in order, give its step, and elements read by two threads show a
  step that is not the grid's size (threads copying each other's elements). A loop that never
  ends (a step of 0) fails with a message instead of hanging.
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
    HostCodeWatch,
    Trial,
    call_learner,
    default_threads_per_block,
    diagnose_vector,
    draw_size,
    launch,
    offer_trace,
    padded,
    read_back,
    run_check,
    run_elementwise,
    start_kernel,
    trace_trial,
    watch_host_code,
)
from gpulab.instruments import RecordingArray, thread_label

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
    "one thread per element, like chapter 01's multiply: this thread's index, the guard, and "
    "one assignment with a, x and y. The hints above the cell go step by step."
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


# --- exercise 2: the host code that times saxpy --------------------------------------------------

TIME_STUB_HINT = (
    "copy x and y to the device once, allocate out there, launch once to warm up, then read the "
    "clock, launch `repeats` times, wait for the GPU, read the clock again; return the result "
    "copied back and the seconds per launch. The hints above the cell go step by step."
)
DEVICE_ARRAYS_HINT = (
    "copy once, before timing: `d_x = cuda.to_device(x)` (and y), `d_out = "
    "cuda.device_array_like(d_x)`, and launch with the device arrays: "
    "`kernel[blocks, threads](a, d_x, d_y, d_out)`."
)
SYNCHRONIZE_HINT = (
    "a launch returns as soon as the GPU has the work, not when it is done: call "
    "`cuda.synchronize()` after the last launch and before you read the clock."
)
TIME_SIZE_RANGE = {"sim": (300, 700), "gpu": (1_000_001, 4_000_001)}
TIMED_REPEATS = 3
SAXPY_ARGUMENTS = ("a", "x", "y", "out")


def _timing_window(watch: HostCodeWatch) -> tuple[int, int] | None:
    """(start, stop): positions in ``watch.events`` of the clock read just before the first
    timed launch and the first clock read after the last launch; None if the clock was not read
    around the launches (e.g. timed with CUDA events)."""
    kinds = [kind for kind, _ in watch.events]
    launches = [k for k, kind in enumerate(kinds) if kind == "launch"]
    after = [k for k, kind in enumerate(kinds) if kind == "clock" and k > launches[-1]]
    if not after:
        return None
    stop = after[0]
    before = [k for k, kind in enumerate(kinds) if kind == "clock" and k < launches[-1]]
    if not before:
        return None
    start = before[-1]
    return start, stop


def _describe_host_code(watch: HostCodeWatch, warm_up: int) -> str:
    parts = []
    for kind, one, many in (("to_device", "copy to the device", "copies to the device"),
                            ("allocate", "allocation", "allocations"),
                            ("copy_to_host", "copy back", "copies back")):
        count = watch.count(kind)
        if count:
            parts.append(f"{count} {one if count == 1 else many}")
    launches = len(watch.launches)
    parts.append(f"{launches} launch" + ("es" if launches > 1 else "")
                 + (f" ({warm_up} to warm up)" if warm_up else ""))
    return ", ".join(parts)


def check_time_saxpy(function, seed: int | None = None, show: bool = True) -> CheckResult:
    """Check the host function ``function(kernel, a, x, y, repeats) -> (out, seconds)``: it
    must copy x and y to the device once, allocate out there, launch ``kernel[blocks,
    threads](a, d_x, d_y, d_out)`` with enough blocks, time ``repeats`` launches (waiting for
    the GPU before the clock stops) and return ``out`` copied back as a NumPy array and the
    seconds per launch.

    Called with a stand-in for gpulab's saxpy kernel that records every launch, n random and
    odd, ``repeats`` = 3. Diagnoses: the stub; NumPy arrays passed to a launch (Numba's hidden
    copies, both ways, every launch); copies or allocations inside the timed loop or inside
    the clock's window; no ``cuda.synchronize()`` before the clock stops; too few blocks; more
    than 1024 threads per block; fewer launches than ``repeats``; the device array returned;
    not a pair; a time that is the total rather than per launch, or not a positive number;
    inputs changed. A missing warm-up launch is a note, not a failure."""
    from gpulab.kernels import memory

    tier = "gpu" if device.tier() == "gpu" else "sim"

    def body(seed: int) -> str:
        import time

        rng = np.random.default_rng(seed)
        n = draw_size(rng, 2, TIME_SIZE_RANGE[tier])
        n += 1 - n % 2  # odd: no power-of-two block size divides it
        a = np.float32(rng.choice([-1, 1]) * rng.uniform(1.5, 3.0))
        x = rng.uniform(-2, 2, n).astype(np.float32)
        y = rng.uniform(-2, 2, n).astype(np.float32)
        given_x, given_y = x.copy(), y.copy()
        name = getattr(function, "__name__", "your function")
        where = f"n={n}, repeats={TIMED_REPEATS}, seed={seed}"
        call = f"{name}(kernel, a, x, y, {TIMED_REPEATS}) ({where})"
        started = time.perf_counter()
        with watch_host_code() as watch:
            returned = call_learner(function, watch.spy(memory.saxpy), a, given_x, given_y,
                                    TIMED_REPEATS, stub_hint=TIME_STUB_HINT, call=call)
        wall_s = time.perf_counter() - started
        launches = watch.launches
        if not launches:
            raise CheckFailedError(
                f"{call} never launched the kernel it was given.",
                "launch the `kernel` argument: `kernel[blocks, threads](a, d_x, d_y, d_out)`.")
        for number, launch_ in enumerate(launches, start=1):
            if launch_.numpy_arguments:
                names = ", ".join(SAXPY_ARGUMENTS[k] for k in launch_.numpy_arguments)
                raise CheckFailedError(
                    f"launch {number} of {len(launches)} got NumPy arrays ({names}): for each "
                    "one, Numba copied it to the GPU before the launch and back after it — on "
                    "every launch, without saying so. Your time measures those copies over the "
                    "host link as much as the kernel: the hidden-copy trap "
                    f"({where}).", DEVICE_ARRAYS_HINT)
            if launch_.threads_per_block > 1024:
                raise CheckFailedError(
                    f"launch {number} used blocks of {launch_.threads_per_block} threads: the "
                    f"simulator runs that, but a GPU refuses more than 1024 ({where}).",
                    "use 128 or 256 threads per block.")
            if launch_.total_threads < n:
                raise CheckFailedError(
                    f"launch {number} had {launch_.blocks} block(s) of {launch_.threads} threads "
                    f"= {launch_.total_threads} threads for n = {n}: the last "
                    f"{n - launch_.total_threads} elements got no thread ({where}).",
                    "round the number of blocks up: `(n + threads - 1) // threads` "
                    "(chapter 00's blocks_for).")
        if len(launches) < TIMED_REPEATS:
            raise CheckFailedError(
                f"{call} launched the kernel {len(launches)} time(s); with repeats = "
                f"{TIMED_REPEATS} it should time {TIMED_REPEATS} launches.",
                "launch `repeats` times between the two clock reads, and divide by repeats.")
        window = _timing_window(watch)
        warm_up = 0
        if window is not None:
            start, stop = window
            inside = [kind for kind, _ in watch.events[start:stop + 1]]
            warm_up = sum(1 for kind, _ in watch.events[:start] if kind == "launch")
            moved = [kind for kind in inside if kind in ("to_device", "copy_to_host", "allocate")]
            if moved:
                what = {"to_device": ("copy to the device", "copies to the device"),
                        "copy_to_host": ("copy back", "copies back"),
                        "allocate": ("allocation", "allocations")}
                listed = ", ".join(f"{inside.count(k)} {what[k][inside.count(k) > 1]}"
                                   for k in dict.fromkeys(moved))
                raise CheckFailedError(
                    f"between your two clock reads your code made {listed} as well as the "
                    f"{inside.count('launch')} launches: your time includes moving data over "
                    f"the host link, not only the kernel ({where}).",
                    "copy and allocate before the first clock read, and copy back after the "
                    "second: only the launches (and the wait for them) belong inside.")
            last_launch = max(k for k, (kind, _) in enumerate(watch.events) if kind == "launch")
            waited = any(kind == "synchronize" for kind, _ in watch.events[last_launch:stop])
            if not waited:
                raise CheckFailedError(
                    f"the clock stopped without waiting for the GPU: on a GPU your launches "
                    f"return at once, so you would time how long it takes to queue them. (The "
                    f"simulator finishes each launch before returning, which hides this.) "
                    f"({where})", SYNCHRONIZE_HINT)
        elif not watch.after_last_launch("synchronize"):
            raise CheckFailedError(
                f"{call} never waited for the GPU after its launches.", SYNCHRONIZE_HINT)
        if not isinstance(returned, tuple | list) or len(returned) != 2:
            raise CheckFailedError(
                f"{call} returned {type(returned).__name__}, not a pair (out, seconds).",
                "end with `return d_out.copy_to_host(), seconds`.")
        out, seconds = returned
        if not isinstance(out, np.ndarray):
            if hasattr(out, "copy_to_host"):
                raise CheckFailedError(
                    f"{call} returned the device array itself as out: its values are still in "
                    "the GPU's memory.", "return `d_out.copy_to_host()`.")
            raise CheckFailedError(f"{call} returned out as {type(out).__name__}, not a NumPy "
                                   "array.", "return `d_out.copy_to_host()`.")
        if not (np.array_equal(given_x, x) and np.array_equal(given_y, y)):
            raise CheckFailedError(f"{call} changed x or y.", "leave the inputs as they are.")
        if out.shape != x.shape:
            raise CheckFailedError(f"{call} returned out of shape {out.shape}, not {x.shape}.",
                                   "allocate out like x: `cuda.device_array_like(d_x)`.")
        rtol = 4 * float(np.finfo(np.float32).eps)
        expected = reference.saxpy(a, x, y)
        bad = ~np.isclose(out, expected, rtol=rtol, atol=rtol)
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            raise CheckFailedError(
                f"{int(bad.sum())} of {n} elements of out are wrong; the first is out[{first}]: "
                f"expected {expected[first]:.6g}, got {out[first]:.6g} ({where}).",
                "return the output array you launched into, copied back after the launches.")
        if isinstance(seconds, bool) or not isinstance(seconds, int | float | np.floating) or \
                not np.isfinite(seconds) or seconds <= 0:
            raise CheckFailedError(
                f"{call} returned {seconds!r} as the time; it should be a positive number of "
                "seconds per launch.", "divide the time between the two clock reads by repeats.")
        if seconds > 1.5 * wall_s / TIMED_REPEATS + 1e-3:
            raise CheckFailedError(
                f"{call} returned {float(seconds):.3g} s per launch, but the whole call took "
                f"{wall_s:.3g} s for {TIMED_REPEATS} launches: that looks like the total, not "
                "the time per launch.", "divide the time between the two clock reads by repeats.")
        label = ("simulator time: says nothing about a GPU" if tier == "sim"
                 else f"measured on {device.PROBE.device_name or 'this GPU'}")
        note = "" if window is None or warm_up else (
            " Note: no launch before your first clock read, so the first timed launch may also "
            "have compiled the kernel for these types, which takes far longer than a launch: "
            "launch once before you start the clock.")
        return (f"out is right (n={n}), and the time is {float(seconds) * 1e3:.3g} ms per launch "
                f"({label}). Your host code: {_describe_host_code(watch, warm_up)}; no NumPy "
                f"array passed to a launch (seed={seed}).{note}")

    return run_check("time_saxpy", body, seed, show)


# --- exercise 3: a coalesced grid-stride copy ------------------------------------------------

COPY_STUB_HINT = (
    "the grid is smaller than x, so each thread copies several elements with a loop: where does "
    "thread g start, and how far must it step so that no two threads meet? The hints above the "
    "cell go step by step."
)
STRIDE_HINT = (
    "start at this thread's global index and step by the number of threads in the whole grid, "
    "`cuda.gridsize(1)` (= `cuda.blockDim.x * cuda.gridDim.x`): thread g copies g, g + G, "
    "g + 2G, … and no two threads ever copy the same element."
)
# The launch the copy's stride is traced on (small: every access is recorded).
STRIDE_TRACE_BLOCKS, STRIDE_TRACE_THREADS, STRIDE_TRACE_SIZES = 2, 32, (150, 250)


def _first_threads(request: memory_model.WarpRequest, count: int = 4) -> str:
    return ", ".join(f"thread {t} reads x[{i}]"
                     for t, i in enumerate(request.element_indices[:count]))



def _stride_of(kernel, seed: int, dtype) -> None:
    """Trace the copy on a small fixed grid and fail if its threads do not step by the grid's
    size: elements copied by two threads, or skipped, with the step each thread took."""
    trial = Trial.draw("check_copy_grid_stride", seed, STRIDE_TRACE_THREADS, dtype,
                       size_range=STRIDE_TRACE_SIZES)
    blocks, threads = STRIDE_TRACE_BLOCKS, STRIDE_TRACE_THREADS
    grid = blocks * threads
    x = trial.uniform(-10, 10)
    out = np.full(trial.n, np.nan, dtype=trial.dtype)
    trace = trace_trial(kernel, trial, x, out, blocks=blocks)
    launched = (f"traced with {blocks} blocks of {threads} threads = {grid} threads for "
                f"n={trial.n}, seed={trial.seed}")
    offer_trace(kernel, 2, 4, "x", "out", note="with x and out of 19 elements: 8 threads")
    if trace.error:
        if "did not finish" in trace.error or "must not be zero" in trace.error:
            raise CheckFailedError(
                f"your kernel's loop steps by 0, so it never ends: {trace.error} ({launched}). "
                "On a GPU it would hang.", STRIDE_HINT)
        return  # the full-size run below explains other errors
    source, target = trace.global_arrays[:2] if len(trace.global_arrays) >= 2 else (None, None)
    order: dict = {}
    for access in trace.accesses:
        if access.array == source and access.kind == "read":
            order.setdefault(access.thread, []).append(access.index[0])
    steps = [b - a for run in order.values() for a, b in zip(run, run[1:], strict=False)]
    if not steps:
        return  # one element per thread: the full-size run says so
    step = max(set(steps), key=steps.count)
    readers = trace.touched(source, "read")
    shared = {index: who for index, who in readers.items() if len(who) > 1}
    named = {threads: "the block size, `cuda.blockDim.x`",
             blocks: "the number of blocks, `cuda.gridDim.x`", 1: "1"}
    step_text = named.get(step, str(step))
    if shared:
        index, who = min(shared.items())
        first = (f"{len(shared)} of {trial.n} elements were copied by more than one thread, "
                 f"e.g. x[{index[0]}] by {thread_label(who[0])} and {thread_label(who[1])}")
        if step == grid:
            raise CheckFailedError(
                f"{first}: the step is right ({grid}, the whole grid), but threads of different "
                f"blocks start at the same element ({launched}).",
                "start at the thread's global index `cuda.grid(1)`, not `cuda.threadIdx.x`, "
                "which repeats in every block. " + STRIDE_HINT)
        raise CheckFailedError(
            f"{first}: each thread steps by {step_text}, but the grid has {grid} threads, so "
            f"the threads overlap and copy each other's elements. The result is right, but the "
            f"work is done {len(steps) + len(order)} times instead of {trial.n} ({launched}).",
            STRIDE_HINT)
    if step > grid:
        skipped = trial.n - len(readers)
        raise CheckFailedError(
            f"each thread steps by {step}, more than the {grid} threads of the grid, so "
            f"{skipped} elements between them were never copied ({launched}).", STRIDE_HINT)


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
        _stride_of(kernel, seed, dtype)
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
        launched = (f"{blocks} blocks of {threads} threads = {grid_threads} threads for "
                    f"n={trial.n}, seed={trial.seed}")
        out = read_back(d_out_all, (trial.n,), launched,
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
                f"several ({launched}).", GRID_STRIDE_HINT)
        failure = diagnose_vector(reference.copy(x), out, trial)
        if failure:
            raise CheckFailedError(failure.message.replace(str(trial), launched),
                                   failure.hint or GRID_STRIDE_HINT)
        if recorder is None:
            return (f"all {trial.n} elements copied ({launched}). "
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
                f"neighbouring threads read addresses far apart ({launched}).",
                GRID_STRIDE_HINT)
        return (f"all {trial.n} elements copied, and coalesced: "
                f"{access.sectors_per_request:.3g} sectors per warp request (ideal {ideal:g}; "
                f"{access.n_requests} requests traced in the simulator; {launched}).")

    return run_check("copy_grid_stride", body, seed, show)


__all__ = ["check_copy_grid_stride", "check_saxpy", "check_time_saxpy", "watch_host_code"]
