"""Chapter 02's exercises: saxpy, the host code that times it, and a copy that stays coalesced
when each thread loops.

Each check takes your ``@cuda.jit`` kernel (not launched), runs it on random data whose size is
not a multiple of the block size, compares with :mod:`gpulab.reference`, prints what it found
and returns a :class:`~gpulab.exercises.results.CheckResult`::

    from gpulab.exercises.ch02 import check_saxpy
    check_saxpy(my_saxpy)

- :func:`check_saxpy`: exercise 1, ``saxpy(a, x, y, out)``.
- :func:`check_time_saxpy`: exercise 2, the host code
  ``time_saxpy(kernel, a, x, y, repeats) -> (out, seconds)``.
- :func:`check_copy_grid_stride`: exercise 3, ``copy_grid_stride(x, out)``, launched with a
  fixed grid smaller than x.

What must hold for a pass and what each check diagnoses is said once, in its spec
(:data:`SAXPY`, :data:`TIME_SAXPY`, :data:`COPY`), which ``help(check_...)`` shows.

How the timing's host code is seen: :func:`gpulab.exercises.host_code.watch_host_code` records
your copies, allocations, launches (through a stand-in for gpulab's saxpy kernel),
synchronisations, clock reads and CUDA events, in order; where each step falls between the
clock reads, and what the time was divided by (from the clock reads' own values), are told
from that record.

How the copy's stride and coalescing are checked: a trace of a small launch
(:func:`gpulab.exercises.running.trace_trial`) gives the elements each thread read, in order,
hence its step. In the simulator x is a :class:`~gpulab.instruments.RecordingArray`, and
:mod:`gpulab.memory_model` groups the reads of the full-size run into warp requests and counts
32-byte sectors, as Nsight Compute's "sectors per request" does: a right copy that gives each
thread a contiguous chunk of x reads addresses ``chunk * 4`` bytes apart across a warp, so it
needs several times the sectors of a coalesced one. On a GPU the addresses cannot be recorded
from Python, so only the answer is checked there.
"""

from __future__ import annotations

import ast
import time
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from gpulab import device, memory_model, reference
from gpulab.exercises.evidence import GridStride, OutputWrites, TracedWrites
from gpulab.exercises.grid_stride import grid_stride_mistakes, more_than_their_share
from gpulab.exercises.host_code import LAUNCHED_BY_FORALL, HostCodeWatch, watch_host_code
from gpulab.exercises.learner_code import parameter_unread
from gpulab.exercises.mistakes import Mistake, reject
from gpulab.exercises.outputs import looks_like, vector_failure
from gpulab.exercises.results import CheckFailedError, offer_trace
from gpulab.exercises.running import (
    call_learner,
    launch,
    padded,
    read_back,
    run_elementwise,
    trace_trial,
)
from gpulab.exercises.spec import CheckSpec, under_two_blocks
from gpulab.exercises.trial import Trial, draw_size, tier_key
from gpulab.instruments import RecordingArray
from gpulab.kernels.launch import MAX_THREADS_PER_BLOCK

GRID_STRIDE_HINT = (
    "let each thread start at its global index and step by the number of threads in the "
    "whole grid (the grid-stride loop of chapter 01, section 5), until the end of the array. "
    "On every pass the 32 threads of a warp then read 32 neighbouring elements."
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
# The launch saxpy's writes are traced on (small: every access is recorded).
SAXPY_TRACE_THREADS, SAXPY_TRACE_SIZES = 32, (65, 95)


SAXPY_METHOD_MISTAKES = (
    Mistake("a loop that steps by less than the grid (`cuda.blockDim.x`): threads redo each "
            "other's elements",
            lambda e: bool(e.shared),
            lambda e: (f"out is right, but {len(e.shared)} of {e.trial.n} elements were written "
                       f"by more than one thread, e.g. {e.example()}: your loop steps by less "
                       "than the whole grid (by the block size, `cuda.blockDim.x`?), so threads "
                       "of later blocks redo elements earlier ones already wrote"),
            "one thread per element needs no loop; if you keep a grid-stride loop, step by the "
            "whole grid, `cuda.gridsize(1)` (= `cuda.blockDim.x * cuda.gridDim.x`).",
            recognised_from="trace"),
)
SAXPY_SHARE_MISTAKES = (more_than_their_share(
    "one thread per element: each thread writes out[i] for its own i from `cuda.grid(1)`, "
    "and no thread loops over the others' elements."),)
# What saxpy's usual wrong formulas give, in the order they are tried (after the elements never
# written: :func:`~gpulab.exercises.outputs.elementwise_mistakes`).
SAXPY_OUTPUT_MISTAKES = (
    looks_like("x[i] + y[i] (a is missing)", lambda e: e.inputs["x"] + e.inputs["y"],
               "x[i] is never multiplied by a."),
    looks_like("a * x[i] (y is missing)", lambda e: e.inputs["a"] * e.inputs["x"],
               "y[i] is never added."),
    looks_like("a * y[i] + x[i] (x and y swapped)",
               lambda e: e.inputs["a"] * e.inputs["y"] + e.inputs["x"], "a multiplies x, not y."),
    looks_like("a * (x[i] + y[i])", lambda e: e.inputs["a"] * (e.inputs["x"] + e.inputs["y"]),
               "only x is scaled by a, not y."),
    looks_like("x[i] * y[i] + a", lambda e: e.inputs["x"] * e.inputs["y"] + e.inputs["a"],
               "saxpy is `a * x[i] + y[i]`."),
    looks_like("|a| * x[i] + y[i] (the sign of a lost)",
               lambda e: abs(e.inputs["a"]) * e.inputs["x"] + e.inputs["y"],
               "a is negative here: multiply by a itself, sign and all."),
    looks_like("a truncated to a whole number (int(a))",
               lambda e: np.float32(np.trunc(e.inputs["a"])) * e.inputs["x"] + e.inputs["y"],
               "a is a float32 with a fraction: multiply by it as it is, not by int(a).",
               said=lambda e: f"int(a) * x[i] + y[i] (a = {float(e.inputs['a']):.6g})"),
    looks_like("a rounded to float16 first",
               lambda e: (np.float32(np.float16(e.inputs["a"])) * e.inputs["x"]
                          + e.inputs["y"]),
               "keep a in float32, as x and y are: a float16 a keeps only 11 significant bits.",
               said="float16(a) * x[i] + y[i]"),
    looks_like("y[0] for every y[i]",
               lambda e: e.inputs["a"] * e.inputs["x"] + e.inputs["y"][0],
               "each element adds its own y[i], at the same index as x[i].",
               said="a * x[i] + y[0]"),
)
SAXPY = CheckSpec(
    "saxpy", "saxpy(a, x, y, out)", SAXPY_STUB_HINT,
    SAXPY_OUTPUT_MISTAKES + SAXPY_METHOD_MISTAKES + SAXPY_SHARE_MISTAKES, parameters=4,
    title="1. saxpy", call="check_saxpy(my_saxpy)",
    holds="`out[i] = a * x[i] + y[i]`, a random negative `a` (−3 < a ≤ −1.5), under two "
          "block sizes; traced on a small launch, each element written by one thread and no "
          "thread writing more than its share",
    also="the stub; guards and indexing (the shared one-thread-per-element rules: a missing "
         "or `<=` guard, nothing written, `threadIdx.x` alone as the index, the last partial "
         "block skipped, a shift by one); a hard-coded block or problem size; simulator-only "
         "code")


@SAXPY.check
def check_saxpy(kernel, seed: int | None = None, threads_per_block: int | None = None,
                dtype=np.float32) -> str:
    """``a`` is drawn with -3 < a ≤ -1.5 (never 1, so forgetting it shows; negative, so losing
    its sign shows), x and y uniform in
    [-2, 2). The block size is drawn too and the kernel runs again under another one, unless
    ``threads_per_block`` is given (then that one alone); then its writes are traced on a small
    launch (:data:`SAXPY_TRACE_THREADS` threads per block, n in :data:`SAXPY_TRACE_SIZES`),
    and if that trace stops, the full-size runs alone count."""
    source = SAXPY.start(kernel)

    def run(trial: Trial) -> tuple[Trial, float]:
        a = trial.dtype.type(-trial.rng.uniform(1.5, 3.0))  # negative: its sign must be kept
        x, y = trial.uniform(-2, 2), trial.uniform(-2, 2)
        out = run_elementwise(kernel, trial, a, x, y)
        magnitude = np.abs(np.float64(a) * x) + np.abs(y)  # a GPU fuses a * x + y (one FMA)
        if failure := vector_failure(reference.saxpy(a, x, y), out, trial,
                                     mistakes=SAXPY_OUTPUT_MISTAKES,
                                     inputs={"a": a, "x": x, "y": y}, magnitude=magnitude):
            raise failure
        return trial, float(a)

    trial = Trial.draw("check_saxpy", seed, dtype, block=threads_per_block)
    trial, a = under_two_blocks(run, trial, source, once=bool(threads_per_block))
    traced = Trial.draw("check_saxpy", seed, dtype, block=SAXPY_TRACE_THREADS,
                        size_range=SAXPY_TRACE_SIZES)
    x, y = traced.uniform(-2, 2), traced.uniform(-2, 2)
    trace = trace_trial(kernel, traced, traced.dtype.type(2), x, y,
                        np.zeros(traced.n, traced.dtype))
    if not trace.error:
        out_name = trace.global_arrays[-1] if trace.global_arrays else "out"
        reject(SAXPY_METHOD_MISTAKES, TracedWrites(traced, trace.touched(out_name, "write")))
        traced.grid_blocks = traced.blocks
        reject(SAXPY_SHARE_MISTAKES,
               OutputWrites(traced, trace.elements_by_thread(out_name, "write")))
    return (f"all {trial.n} elements of a*x + y are right (a = {a:.3g}, "
            f"{trial.launched}, seed={trial.seed}), each written by one thread.")


# --- exercise 2: the host code that times saxpy --------------------------------------------------

TIME_STUB_HINT = (
    "copy x and y to the device once, allocate out there, launch once to warm up, then read the "
    "clock, launch `repeats` times, wait for the GPU, read the clock again; return the result "
    "copied back and the seconds per launch. The hints above the cell go step by step."
)
DEVICE_ARRAYS_HINT = (
    "copy x and y to the device once, before timing, allocate the output there too, and "
    "launch with those device arrays: a NumPy array given to a launch is copied both ways on "
    "every launch (section 2's hidden copies)."
)
SYNCHRONIZE_HINT = (
    "a launch returns as soon as the GPU has the work, not when it is done: call "
    "`cuda.synchronize()` after the last launch and before you read the clock (with CUDA "
    "events: `stop.synchronize()` after `stop.record()`, before `elapsed_time`)."
)
PER_LAUNCH_HINT = "divide the time between the two clock reads by repeats."
TIME_SIZE_RANGE = {"sim": (300, 700), "gpu": (1_000_001, 4_000_001)}
TIMED_REPEATS = (3, 6)  # repeats is drawn from 3 to 5: a loop of 3 typed in shows
REPEATS_POSITION = 4  # time_saxpy(kernel, a, x, y, repeats)
SAXPY_ARGUMENTS = ("a", "x", "y", "out")
MOVES = {"to_device": ("copy to the device", "copies to the device"),
         "copy_to_host": ("copy back", "copies back"),
         "allocate": ("allocation", "allocations")}


@dataclass
class Timing:
    """What the learner's timing did (``watch``), what it returned, and the problem: the
    evidence the timing's mistakes are told from."""

    watch: HostCodeWatch
    returned: object
    n: int
    x: np.ndarray
    y: np.ndarray
    given_x: np.ndarray
    given_y: np.ndarray
    a: np.float32
    call: str
    where: str
    wall_s: float
    repeats: int
    unread: str | None = None  # the repeats parameter's name, when the function never reads it
    earlier: tuple | None = None  # (n, blocks, threads) of the first call's last launch

    @property
    def same_grid_as_before(self) -> bool:
        """The last launch's grid is the first call's, for an n over a block (of the largest
        size) longer: a grid typed in, which fits at most one of the two."""
        return (self.earlier is not None and bool(self.launches)
                and (self.launches[-1].blocks, self.launches[-1].threads) == self.earlier[1:])

    @property
    def launches(self) -> list:
        return self.watch.launches

    def first(self, test) -> tuple[int, object] | None:
        """(number, launch) of the first launch for which ``test`` is true."""
        return next(((k, launch_) for k, launch_ in enumerate(self.launches, start=1)
                     if test(launch_)), None)

    @property
    def window(self) -> tuple[int, int] | None:
        """(start, stop): positions in the events of the clock read (or event record) just
        before the last launch and the first one after it; None if there are not both."""
        launches = self.watch.positions("launch")
        clocks = self.watch.positions("clock")
        before = [k for k in clocks if k < launches[-1]]
        if not before:
            return None
        # the stop is the first reading of the same clock after the last launch: an event's
        # record() after a wall clock's start is not that clock's second reading
        kind = self.watch.events[before[-1]][1][0] == "event"
        after = [k for k in clocks if k > launches[-1]
                 and (self.watch.events[k][1][0] == "event") == kind]
        return (before[-1], after[0]) if after else None

    def inside(self) -> list[str]:
        start, stop = self.window
        return [kind for kind, _ in self.watch.events[start:stop + 1]]

    @property
    def by_events(self) -> bool:
        return self.window is not None and self.watch.events[self.window[1]][1][0] == "event"

    @property
    def moved(self) -> list[str]:
        return [kind for kind in self.inside() if kind in MOVES] if self.window else []

    @property
    def waited(self) -> bool:
        """A wait for the GPU after the last launch and before the clock stopped (for CUDA
        events: after the stop event's record, before its elapsed time was read)."""
        if self.window is None:
            return self.watch.after_last_launch("synchronize")
        start, stop = self.window
        events = self.watch.events
        if self.by_events:
            reads = [k for k in self.watch.positions("elapsed") if k > stop]
            end = reads[0] if reads else len(events)
            return any(kind == "synchronize" for kind, _ in events[stop:end])
        last_launch = self.watch.positions("launch")[-1]
        return any(kind == "synchronize" for kind, _ in events[last_launch:stop])

    @property
    def started_before_the_warm_up_ended(self) -> bool:
        """A clock (not CUDA events: those are queued behind the warm-up) started after a
        warm-up launch with no wait for the GPU in between (a synchronise, or a copy, which
        waits for the launches before it)."""
        if self.window is None or self.by_events:
            return False
        start = self.window[0]
        before = [k for k in self.watch.positions("launch") if k < start]
        return bool(before) and not any(
            kind in ("synchronize", "copy_to_host", "to_device")
            for kind, _ in self.watch.events[before[-1]:start])

    @property
    def timed(self) -> int:
        return self.inside().count("launch") if self.window else len(self.launches)

    @property
    def warm_up(self) -> int:
        return len(self.launches) - self.timed if self.window else 0

    @property
    def launched_before_the_clock(self) -> int:
        """The launches before the clock's first reading (or the first event's record): the
        warm-ups, also where the clock is read around each launch (the window is then the
        last launch's)."""
        if self.window is None:
            return 0
        events = self.watch.events
        kind = events[self.window[0]][1][0] == "event"
        first = next(k for k in self.watch.positions("clock") if (events[k][1][0] == "event")
                     == kind)
        return sum(1 for k in self.watch.positions("launch") if k < first)

    @property
    def elapsed_s(self) -> float | None:
        """The time the clock reads (or the events) give over the window, in seconds."""
        if self.window is None:
            return None
        start, stop = self.window
        if self.by_events:
            reads = [detail for k, (kind, detail) in enumerate(self.watch.events)
                     if kind == "elapsed" and k > stop]
            return reads[0] if reads else None
        return self.watch.events[stop][1][1] - self.watch.events[start][1][1]

    @property
    def pair(self) -> bool:
        return isinstance(self.returned, tuple | list) and len(self.returned) == 2

    @property
    def out(self):
        return self.returned[0]

    @property
    def seconds(self):
        return self.returned[1]

    def per(self, launches: int) -> bool:
        """Is the returned time the window's elapsed time divided by ``launches``?"""
        elapsed = self.elapsed_s
        return (elapsed is not None and elapsed > 0 and launches > 0
                and np.isclose(float(self.seconds), elapsed / launches, rtol=1e-3))

    @property
    def wrong(self) -> np.ndarray:
        rtol = 4 * float(np.finfo(np.float32).eps)
        return ~np.isclose(self.out, reference.saxpy(self.a, self.x, self.y), rtol=rtol,
                           atol=rtol)

    def first_wrong(self) -> str:
        first = int(np.flatnonzero(self.wrong)[0])
        expected = reference.saxpy(self.a, self.x, self.y)[first]
        return (f"{int(self.wrong.sum())} of {self.n} elements of out are wrong; the first is "
                f"out[{first}]: expected {expected:.6g}, got {self.out[first]:.6g}")


def _numpy_launch(e: Timing) -> tuple[int, int, str]:
    """(number, launches, the NumPy arguments' names) of the first launch given NumPy arrays."""
    number, launch_ = e.first(lambda each: each.numpy_arguments)
    return number, len(e.launches), ", ".join(SAXPY_ARGUMENTS[k]
                                              for k in launch_.numpy_arguments)


def _listed_moves(e: Timing) -> str:
    inside = e.inside()
    return ", ".join(f"{inside.count(k)} {MOVES[k][inside.count(k) > 1]}"
                     for k in dict.fromkeys(e.moved))


def _not_positive(seconds) -> bool:
    return (isinstance(seconds, bool) or not isinstance(seconds, int | float | np.floating)
            or not np.isfinite(seconds) or seconds <= 0)


TIMING_MISTAKES = (
    LAUNCHED_BY_FORALL,
    Mistake("never launched the kernel", lambda e: not e.launches,
            lambda e: f"{e.call} never launched the kernel it was given",
            "the function must launch the kernel it is given as its first argument (not "
            "gpulab's, not NumPy), `repeats` times.",
            recognised_from="host code"),
    Mistake("NumPy arrays passed to a launch (the hidden-copy trap)",
            lambda e: e.first(lambda launch_: launch_.numpy_arguments),
            lambda e: "launch {} of {} got NumPy arrays ({}): for each one, Numba copied it to "
            "the GPU before the launch and back after it — on every launch, without saying so. "
            "Your time measures those copies over the host link as much as the kernel: the "
            "hidden-copy trap".format(*_numpy_launch(e)),
            DEVICE_ARRAYS_HINT, recognised_from="host code"),
    Mistake("more than 1024 threads per block",
            lambda e: e.first(lambda launch_: launch_.threads_per_block > 1024),
            lambda e: "launch {} used blocks of {.threads_per_block} threads: the simulator "
            "runs that, but a GPU refuses more than 1024".format(
                *e.first(lambda launch_: launch_.threads_per_block > 1024)),
            "use 128 or 256 threads per block.", recognised_from="host code"),
    Mistake("blocks smaller than a warp (blocks and threads swapped?)",
            lambda e: e.first(lambda launch_: launch_.threads_per_block < 32),
            lambda e: "launch {0} used {1.blocks} block(s) of {1.threads_per_block} thread(s): a "
            "GPU runs each block in warps of 32 threads, so most of every warp sat idle, and "
            "you would time that".format(*e.first(lambda launch_: launch_.threads_per_block < 32)),
            "`kernel[blocks, threads]` takes the number of blocks first: choose 128 or 256 "
            "threads per block, then the blocks (chapter 00's blocks_for).",
            recognised_from="host code"),
    Mistake("float64 copies of float32 data",
            lambda e: e.first(lambda launch_: any(d is not None and d != np.float32
                                                  for d in launch_.dtypes[1:])),
            lambda e: "launch {} got arrays of {}, but x and y hold float32: the copies carry "
            "twice the bytes, and you would time a float64 saxpy, many times slower on most "
            "GPUs".format(*_float64_launch(e)),
            "copy x and y as they are: `cuda.to_device` and `cuda.device_array_like` keep "
            "their dtype (no `astype`, no `dtype=float`).", recognised_from="host code"),
    Mistake("one block as big as x", lambda e: _one_block_as_big_as_x(e) is not None,
            lambda e: (f"launch {_one_block_as_big_as_x(e)[0]} had one block of {e.n} threads "
                       f"for n = {e.n}: that works only while n is at most "
                       f"{MAX_THREADS_PER_BLOCK} (a GPU refuses bigger blocks; the notebook's N "
                       "is 2**26), and one block runs on one of the GPU's many "
                       "multiprocessors"),
            "choose a fixed number of threads per block (128 or 256) and as many blocks as n "
            "needs (chapter 00's blocks_for).", recognised_from="host code"),
    Mistake("a grid typed in (the same blocks for every n)",
            lambda e: e.same_grid_as_before,
            lambda e: (f"{e.call} launched {e.launches[-1].blocks} block(s) of "
                       f"{e.launches[-1].threads} threads, the very grid it launched for "
                       f"n = {e.earlier[0]}: the number of blocks does not follow n, so it fits "
                       "some sizes only (" + (
                           f"here the last {e.n - e.launches[-1].total_threads} elements got "
                           "no thread" if e.launches[-1].total_threads < e.n else
                           f"for n = {e.earlier[0]} whole blocks had nothing to do") + ")"),
            "work the number of blocks out from n, rounded up (chapter 00's blocks_for).",
            recognised_from="host code"),
    Mistake("too few blocks (rounded down)",
            lambda e: e.first(lambda launch_: launch_.total_threads < launch_.elements(e.n)),
            lambda e: (lambda k, launch_: (
                f"launch {k} had {launch_.blocks} block(s) of {launch_.threads} threads = "
                f"{launch_.total_threads} threads for n = {launch_.elements(e.n)}: the last "
                f"{launch_.elements(e.n) - launch_.total_threads} elements got no thread"))(
                *e.first(lambda launch_: launch_.total_threads < launch_.elements(e.n))),
            "the number of blocks must be rounded up (chapter 00's blocks_for).",
            recognised_from="host code"),
    Mistake("fewer launches than repeats", lambda e: len(e.launches) < e.repeats,
            lambda e: (f"{e.call} launched the kernel {len(e.launches)} time(s); with repeats = "
                       f"{e.repeats} it should time {e.repeats} launches"),
            "launch `repeats` times between the two clock reads, and divide by repeats.",
            recognised_from="host code"),
    Mistake("a CPU-time clock (`time.process_time`)",
            lambda e: e.watch.count("cpu_clock") and not e.watch.count("clock"),
            lambda e: ("you timed with `{}`, which counts the CPU time of this process only: "
                       "while the CPU waits for the GPU that clock stands still, so it misses "
                       "the very time you want to measure".format(next(
                           d[0] for k, d in e.watch.events if k == "cpu_clock"))),
            "use a wall clock, `time.perf_counter()` (or CUDA events).",
            recognised_from="host code"),
    Mistake("no clock read (the time not measured)",
            lambda e: not e.watch.count("clock") and not e.watch.count("cpu_clock"),
            lambda e: (f"{e.call} read no clock and recorded no CUDA event: no "
                       "`time.perf_counter` or other clock of `time` or `timeit`, no "
                       "`record()`, so the time it returned was not measured"),
            "read a wall clock (or record a CUDA event) before the timed launches, and again "
            "after waiting for the GPU.",
            recognised_from="host code"),
    Mistake("copies or allocations inside the timed loop", lambda e: e.moved,
            lambda e: (f"between your two clock reads your code made {_listed_moves(e)} as well "
                       f"as the {e.inside().count('launch')} launches: your time includes "
                       "moving data over the host link, not only the kernel"),
            "copy and allocate before the first clock read, and copy back after the second: "
            "only the launches (and the wait for them) belong inside.",
            recognised_from="host code"),
    Mistake("a wait on a stream the last launch did not use",
            lambda e: not e.waited and e.watch.count("empty_stream_wait"),
            lambda e: (f"{e.call} waited with `synchronize()` on a stream it made that the last "
                       "launch did not use (it got copies, or earlier launches, at most): the "
                       "timed launches ran on another stream, so that wait did not wait for "
                       "them, and neither did the clock"),
            "wait for the work you launched: `cuda.synchronize()`, or launch on your stream "
            "(`kernel[blocks, threads, stream](...)`) and wait for that stream.",
            recognised_from="host code"),
    Mistake("the clock read before the GPU finished (no synchronise)",
            lambda e: e.window is not None and not e.waited,
            "the clock stopped without waiting for the GPU: on a GPU your launches return at "
            "once, so you would time how long it takes to queue them. (The simulator finishes "
            "each launch before returning, which hides this.)", SYNCHRONIZE_HINT,
            recognised_from="host code"),
    Mistake("the clock started while the warm-up launch still ran (no synchronise)",
            lambda e: e.started_before_the_warm_up_ended,
            lambda e: (f"your clock started right after the warm-up launch, without waiting "
                       f"for it: on a GPU the launch returns at once, so the warm-up still runs "
                       f"inside your timed window and {e.timed} launches' time holds "
                       f"{e.timed + 1} launches' work. (The simulator finishes each launch "
                       "before returning, which hides this.)"),
            "wait for the GPU (`cuda.synchronize()`) after the warm-up launch, before the "
            "first clock read.", recognised_from="host code"),
    Mistake("never waited for the GPU", lambda e: e.window is None and not e.waited,
            lambda e: f"{e.call} never waited for the GPU after its launches", SYNCHRONIZE_HINT,
            recognised_from="host code"),
    Mistake("a warm-up launch with other argument types than the timed ones",
            lambda e: (e.window is not None and e.warm_up and e.timed
                       and not {_argument_types(w) for w in e.launches[:e.warm_up]}
                       & {_argument_types(e.launches[e.warm_up])}),
            lambda e: (f"your warm-up launch passed ({_types_said(e.launches[0])}) but the "
                       f"timed ones ({_types_said(e.launches[e.warm_up])}): Numba compiles a "
                       "kernel once for each set of argument types, so the first timed launch "
                       "compiled it again, inside your timed window"),
            "warm up with the very arguments you time (the same a, x, y and out, of the same "
            "types: np.float32(a), not 2.0).", recognised_from="host code"),
    Mistake("repeats never read (a count typed in)", lambda e: e.unread is not None,
            lambda e: (f"{e.call} never reads its argument `{e.unread}`, the number of launches "
                       "to time: a count typed in times as many launches as the caller asks "
                       "only when it happens to ask for that many"),
            "launch `repeats` times between the clock reads, the number the caller gives, "
            "not a number typed in.", recognised_from="source"),
    Mistake("more launches between the clock reads than repeats",
            lambda e: e.window is not None and e.timed > e.repeats,
            lambda e: (f"between your two clock reads there are {e.timed} launches, but repeats "
                       f"= {e.repeats}" + ("" if e.warm_up else ": the warm-up launch is "
                                               "inside the timed window")),
            "launch `repeats` times between the clock reads (the number the caller gives), "
            "and the warm-up launch before the first one.", recognised_from="host code"),
    Mistake("fewer launches between the clock reads than repeats (a count typed in)",
            lambda e: (e.window is not None and 0 < e.timed < e.repeats
                       and len(e.launches) < e.repeats + bool(e.launched_before_the_clock)),
            lambda e: (f"between your two clock reads there are {e.timed} launches, but repeats "
                       f"= {e.repeats}: the count the caller gives was not used"),
            "launch `repeats` times between the clock reads, the number the caller gives, "
            "not a number typed in.", recognised_from="host code"),
    Mistake("not a pair (out, seconds)", lambda e: not e.pair,
            lambda e: (f"{e.call} returned {type(e.returned).__name__}, not a pair "
                       "(out, seconds)"),
            "return two things: the output copied back to the host, then the seconds per "
            "launch.",
            recognised_from="host code"),
    Mistake("(seconds, out): the pair the wrong way round",
            lambda e: isinstance(e.seconds, np.ndarray) and not isinstance(e.out, np.ndarray),
            lambda e: f"{e.call} returned the time first and the array second",
            "return out first, then the seconds per launch.", recognised_from="host code"),
    Mistake("the device array returned",
            lambda e: not isinstance(e.out, np.ndarray) and hasattr(e.out, "copy_to_host"),
            lambda e: (f"{e.call} returned the device array itself as out: its values are still "
                       "in the GPU's memory"), "return `d_out.copy_to_host()`.",
            recognised_from="host code"),
    Mistake("out not a NumPy array", lambda e: not isinstance(e.out, np.ndarray),
            lambda e: f"{e.call} returned out as {type(e.out).__name__}, not a NumPy array",
            "return `d_out.copy_to_host()`.", recognised_from="host code"),
    Mistake("inputs changed", lambda e: not (np.array_equal(e.given_x, e.x)
                                             and np.array_equal(e.given_y, e.y)),
            lambda e: f"{e.call} changed x or y", "leave the inputs as they are.",
            recognised_from="host code"),
    Mistake("out of the wrong shape", lambda e: e.out.shape != e.x.shape,
            lambda e: f"{e.call} returned out of shape {e.out.shape}, not {e.x.shape}",
            "allocate out like x: `cuda.device_array_like(d_x)`.", recognised_from="outputs"),
    Mistake("out worked out on the host, not the launches' output copied back",
            lambda e: not e.watch.copied_back(e.out),
            lambda e: (f"{e.call} "
                       + ("never copied anything back from the device"
                          if not e.watch.count("copy_to_host") else
                          "copied back from the device, but returned another array, not the "
                          "copy of the output the launches wrote")
                       + (": its values are right, but they were worked out on the host, so "
                          "they do not show what the kernel computed" if not e.wrong.any() else
                          "")),
            "return the output the launches wrote, copied back after them "
            "(`d_out.copy_to_host()`): it is what the GPU computed.",
            recognised_from="host code"),
    Mistake("x and y swapped in the launch",
            lambda e: np.allclose(e.out, reference.saxpy(e.a, e.y, e.x), rtol=1e-6, atol=1e-6),
            lambda e: f"{e.first_wrong()}: out is a * y + x, so x and y were swapped",
            "give the launch its arguments in saxpy's order: a, x, y, out.",
            recognised_from="outputs"),
    Mistake("wrong values in out", lambda e: e.wrong.any(), lambda e: e.first_wrong(),
            "return the output array you launched into, copied back after the launches."),
    Mistake("the time not a positive number", lambda e: _not_positive(e.seconds),
            lambda e: (f"{e.call} returned {e.seconds!r} as the time; it should be a positive "
                       "number of seconds per launch"), PER_LAUNCH_HINT,
            recognised_from="host code"),
    Mistake("divided by repeats + warm-ups",
            lambda e: e.warm_up and e.per(len(e.launches)) and not e.per(e.timed),
            lambda e: (f"{e.call} returned {float(e.seconds):.3g} s: your clock reads span "
                       f"{e.timed} launches, but you divided by {len(e.launches)}, counting the "
                       f"{e.warm_up} warm-up launch(es) that ran before the clock started"),
            "divide by the number of launches between the clock reads: `repeats`.",
            recognised_from="host code"),
    Mistake("the total time, not per launch",
            lambda e: (e.per(1) and e.timed > 1) or (
                e.elapsed_s is None and e.seconds > 1.5 * e.wall_s / e.repeats + 1e-3),
            lambda e: (f"{e.call} returned {float(e.seconds):.3g} s per launch, but that is the "
                       f"time of all {e.timed} timed launches: that looks like the total, not "
                       "the time per launch"), PER_LAUNCH_HINT, recognised_from="host code"),
    Mistake("multiplied by repeats", lambda e: e.timed > 1 and e.per(1 / e.timed),
            lambda e: (f"{e.call} returned {float(e.seconds):.3g} s per launch: that is the time "
                       f"between your clock reads multiplied by {e.timed}, not divided"),
            PER_LAUNCH_HINT, recognised_from="host code"),
    Mistake("less time than the clock reads give (divided by n, or by 1000 too many)",
            lambda e: (e.elapsed_s is not None and e.elapsed_s > 0 and e.timed > 0
                       and 0 < float(e.seconds) < 0.2 * e.elapsed_s / e.timed),
            lambda e: (f"{e.call} returned {float(e.seconds):.3g} s per launch, but your clock "
                       f"reads span {e.elapsed_s:.3g} s for {e.timed} launches, "
                       f"{e.elapsed_s / e.timed:.3g} s each: the time was divided by more than "
                       "the number of launches (by the elements as well? by 1000 once too "
                       "often?)"),
            PER_LAUNCH_HINT, recognised_from="host code"),
    Mistake("not in seconds (milliseconds or nanoseconds)",
            lambda e: float(e.seconds) > min(e.wall_s, 100 * (e.elapsed_s or np.inf)),
            lambda e: (f"{e.call} returned {float(e.seconds):.3g} as the seconds per launch, but "
                       f"the whole call took {e.wall_s:.3g} s: the time is not in seconds "
                       "(CUDA events' `elapsed_time` gives milliseconds, `perf_counter_ns` "
                       "nanoseconds)"),
            "return seconds: convert milliseconds or nanoseconds before you return the time.",
            recognised_from="host code"),
    Mistake("no warm-up launch: the first launch, which compiles, timed",
            lambda e: (e.window is not None and not e.launched_before_the_clock
                       and e.timed == len(e.launches)),
            lambda e: (f"{e.call} launched nothing before "
                       f"{'its first event' if e.by_events else 'the clock'} started, so its "
                       "first timed launch also compiled the kernel for these argument types "
                       "(gpulab's kernels compile on their first launch), which on a GPU takes "
                       "far longer than a launch: your time includes it"),
            "launch once before the first clock read, with the very arguments you time (the "
            "warm-up), and wait for it.", recognised_from="host code"),
)
TIME_SAXPY = CheckSpec(
    "time_saxpy", "time_saxpy(kernel, a, x, y, repeats) -> (out, seconds)", TIME_STUB_HINT,
    TIMING_MISTAKES, title="2. time it", call="check_time_saxpy(time_saxpy)",
    holds="called with a stand-in for gpulab's saxpy that records each launch, while copies, "
          "allocations, `synchronize`, CUDA events and clock reads are recorded in order, "
          "whatever the import spelling: the launches' output copied back and right (not "
          "values worked out on the host), no copy between the clock reads, every launch on "
          "device arrays with enough blocks, `repeats` (drawn, 3–5) "
          "launches between the clock reads with the GPU waited for before the second, the "
          "seconds per launch a positive number (the simulator's time is labelled as such); "
          "all of it again when called a second time with another `repeats` and an n over "
          "1,024 larger (a grid typed in, or one block of n threads, fails)",
    also="no warm-up launch before one timed window fails (the first launch compiles); "
         "a clock read around each launch with none before passes with a note; timing with "
         "CUDA events is accepted")


def _argument_types(launch_) -> tuple:
    """What Numba compiles a launch for: each argument's type, dtype and number of axes."""
    return tuple((type(value).__name__, str(getattr(value, "dtype", "")),
                  getattr(value, "ndim", None)) for value in launch_.arguments)


def _types_said(launch_) -> str:
    return ", ".join(str(dtype) + (" array" if ndim else "") if dtype else name
                     for name, dtype, ndim in _argument_types(launch_))


def _one_block_as_big_as_x(e: Timing) -> tuple | None:
    """(number, launch) of the first launch of one block of n threads on the whole arrays
    (not a warm-up on a block's worth), or None."""
    return e.first(lambda launch_: launch_.blocks in (1, (1,))
                   and launch_.elements(0) == e.n and launch_.threads_per_block == e.n)


def _float64_launch(e: Timing) -> tuple[int, str]:
    number, launch_ = e.first(lambda launch_: any(d is not None and d != np.float32
                                                  for d in launch_.dtypes[1:]))
    return number, ", ".join(sorted({str(d) for d in launch_.dtypes[1:]
                                     if d is not None and d != np.float32}))


def _describe_host_code(watch: HostCodeWatch, warm_up: int) -> str:
    """The moves and launches the learner's host code made; the warm-up launches are those
    before the first clock read (``warm_up`` where it read no clock): a timing that reads the
    clock around each launch timed them all."""
    parts = [f"{count} {one if count == 1 else many}" for kind, (one, many) in MOVES.items()
             if (count := watch.count(kind))]
    launches = len(watch.launches)
    if clocks := watch.positions("clock"):
        warm_up = sum(1 for k in watch.positions("launch") if k < clocks[0])
    parts.append(f"{launches} launch" + ("es" if launches > 1 else "")
                 + (f" ({warm_up} to warm up)" if warm_up else ""))
    return ", ".join(parts)


@TIME_SAXPY.check
def check_time_saxpy(function, seed: int | None = None) -> str:
    """Called as ``function(kernel, a, x, y, repeats)`` with a stand-in for gpulab's saxpy
    kernel (``kernel[blocks, threads](a, d_x, d_y, d_out)``) that records every launch, n
    random and odd (:data:`TIME_SIZE_RANGE`), ``repeats`` drawn from :data:`TIMED_REPEATS`,
    then called again with another of them and n over 1,024 larger (a count or a grid typed in
    fits one call at most). A wall clock however imported (``time.perf_counter``, ``from time
    import perf_counter``, ``timeit.default_timer``, ``time.clock_gettime`` of a wall clock)
    or CUDA events (``cuda.event()`` or ``cuda.event(timing=True)``, ``record``, ``synchronize``,
    ``elapsed_time`` or ``cuda.event_elapsed_time``) both work, in the simulator too. The
    timed window is the clock read (or event record) just before the last launch and the first
    one after it."""
    from gpulab.kernels import memory

    tier = tier_key()
    rng = np.random.default_rng(seed)
    n = draw_size(rng, 2, TIME_SIZE_RANGE[tier])
    n += 1 - n % 2  # odd: no power-of-two block size divides it
    a = np.float32(rng.choice([-1, 1]) * rng.uniform(1.5, 3.0))
    x = rng.uniform(-2, 2, n).astype(np.float32)
    y = rng.uniform(-2, 2, n).astype(np.float32)
    name = getattr(function, "__name__", "your function")

    def timed(repeats: int, x: np.ndarray, y: np.ndarray, earlier: tuple | None = None) -> Timing:
        n = x.shape[0]
        given_x, given_y = x.copy(), y.copy()
        where = f"n={n}, repeats={repeats}, seed={seed}"
        call = f"{name}(kernel, a, x, y, {repeats})"
        started = time.perf_counter()
        with watch_host_code(function) as watch:
            returned = call_learner(function, watch.spy(memory.saxpy), a, given_x, given_y,
                                    repeats, stub_hint=TIME_STUB_HINT,
                                    call=f"{call} ({where})", may_change=(2, 3))
        timing = Timing(watch, returned, n, x, y, given_x, given_y, a, call, where,
                        time.perf_counter() - started, repeats,
                        parameter_unread(function, REPEATS_POSITION), earlier)
        TIME_SAXPY.reject(timing)
        return timing

    repeats = int(rng.integers(*TIMED_REPEATS))
    timing = timed(repeats, x, y)
    watch = timing.watch
    # called again with another count: a count typed in (behind a read of repeats, or a local
    # of that name) is the one asked for once at most; and with n over a block of 1024 longer
    # (odd again), so that a grid typed in fits one of the two at most
    last = watch.launches[-1]
    again = int(rng.choice([r for r in range(*TIMED_REPEATS) if r != repeats]))
    longer = n + MAX_THREADS_PER_BLOCK + 2 * int(rng.integers(1, 64))
    timed(again, rng.uniform(-2, 2, longer).astype(np.float32),
          rng.uniform(-2, 2, longer).astype(np.float32), (n, last.blocks, last.threads))
    label = ("simulator time: says nothing about a GPU" if tier == "sim"
             else f"measured on {device.PROBE.device_name or 'this GPU'}")
    clock = "CUDA events" if timing.by_events else "the clock"
    note = "" if timing.window is None or timing.launched_before_the_clock else (
        f" Note: no launch before you started {clock}, so the first timed launch may also "
        "have compiled the kernel for these types, which takes far longer than a launch: "
        "launch once before you start the clock.")
    return (f"out is right (n={n}, then n={longer}), and the time is "
            f"{float(timing.seconds) * 1e3:.3g} ms per launch ({label}). Your host code: "
            f"{_describe_host_code(watch, timing.warm_up)}, timed with {clock}; no NumPy "
            f"array passed to a launch (seed={seed}).{note}")


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
# Not COPY_BLOCKS: a step of `2 * cuda.blockDim.x` would match both grids; blocks of 40, not a
# multiple of 32, so that a step typed to fit 32-thread blocks (`cuda.gridDim.x * 32`) shows;
# n over twice the grid, so that a step of twice the grid shows.
STRIDE_TRACE_BLOCKS, STRIDE_TRACE_THREADS, STRIDE_TRACE_SIZES = 3, 40, (250, 350)


@dataclass
class Stride(GridStride):
    """How the copy's threads stepped, traced on a small fixed grid: the elements of x each
    thread read, in order, and the trace's ``error`` (None when it ran to the end)."""

    error: str | None = None
    ITEM, SPELLED, DONE = "element", "x[{}]", "copied"

    @property
    def never_ends(self) -> bool:
        """The loop stepped by 0: the trace never finished, or ``range`` refused a step of 0."""
        return bool(self.error) and ("did not finish" in self.error
                                     or "must not be zero" in self.error)


# The copy's method, traced on a small fixed grid (:func:`_stride_of`), in the order tried: a
# loop that never ends, then how the threads stepped (coalescing: the full-size run's warps).
STRIDE_MISTAKES = (
    Mistake("a step of 0 (the loop never ends; fails instead of hanging)",
            lambda e: e.never_ends,
            lambda e: (f"your kernel's loop steps by 0, so it never ends (on a GPU it would "
                       f"hang): {e.error}"), STRIDE_HINT, recognised_from="trace"),
) + grid_stride_mistakes(STRIDE_HINT)


@dataclass
class Copied:
    """The full-size run of the copy on its fixed grid: x, what came back in ``out`` (NaN where
    never written), the ``trial`` (its size and seed), the grid's ``grid_threads``, ``where``
    (what was launched, which says how to repeat it) and, in the simulator, the ``recorder``
    of x's reads."""

    x: np.ndarray
    out: np.ndarray
    trial: Trial
    grid_threads: int
    where: str
    recorder: RecordingArray | None = None
    changed_x: bool = False
    loops: bool = False  # the kernel's source has a loop

    @cached_property
    def unwritten(self) -> np.ndarray:
        return np.isnan(self.out)

    @cached_property
    def stopped_at(self) -> int:
        """Where the copy stopped: the first element never written when all after it are
        unwritten and all before it written, else 0."""
        first = int(np.argmax(self.unwritten))
        return first if self.unwritten[first:].all() and not self.unwritten[:first].any() else 0

    @cached_property
    def wrong(self) -> CheckFailedError | None:
        """What the elementwise rules of :func:`gpulab.exercises.outputs.vector_failure` say
        of out (elements missing or wrong), or None when it is right."""
        return vector_failure(reference.copy(self.x), self.out, self.trial)

    def wrong_message(self) -> str:
        """:attr:`wrong`'s message, told of the fixed grid that was launched, not the trial's
        one thread per element (its "(trial)." ending is this evidence's :attr:`where`)."""
        return self.wrong.message.removesuffix(f" ({self.trial}).").replace(str(self.trial),
                                                                            self.where)

    @cached_property
    def access(self) -> memory_model.AccessSummary | None:
        """The reads of x grouped into warp requests (in the simulator; None on a GPU)."""
        if self.recorder is None:
            return None
        return memory_model.summarise(self.recorder.reads, self.trial.dtype.itemsize,
                                      "traced in the simulator")

    @property
    def not_coalesced(self) -> bool:
        access = self.access
        return access is not None and (access.sectors_per_request
                                       > SECTOR_SLACK * access.ideal_sectors_per_request)


def _not_coalesced(e: Copied) -> str:
    access = e.access
    worst = max(access.requests, key=lambda r: len(r.sectors))
    reads = ", ".join(f"thread {t} reads x[{i}]" for t, i in enumerate(worst.element_indices[:4]))
    return (f"the copy is right, but its reads are not coalesced: a warp request touches "
            f"{access.sectors_per_request:.3g} sectors of 32 bytes on average where "
            f"{access.ideal_sectors_per_request:g} would do ({access.efficiency * 100:.3g}% of "
            f"the bytes fetched are used). In one request of warp {worst.warp}, "
            f"{reads}: neighbouring threads read addresses far apart")


# The full-size run's outputs, then (in the simulator) its warp requests, in the order tried.
COPY_MISTAKES = (
    Mistake("wrote into x", lambda e: e.changed_x, "your kernel wrote into its input x",
            "a copy reads x and writes out only: leave x as the caller gave it."),
    Mistake("nothing written", lambda e: e.unwritten.all(),
            "your kernel wrote nothing into out", GRID_STRIDE_HINT),
    Mistake("one element per thread (only out[0..grid - 1] copied)",
            lambda e: (e.unwritten[e.grid_threads:].all() and e.unwritten.any()
                       and not e.unwritten[:e.grid_threads].any()),
            lambda e: (f"only out[0..{e.grid_threads - 1}] were copied, one element per "
                       f"thread: the grid has {e.grid_threads} threads for {e.trial.n} "
                       "elements, so each thread must copy several" + (
                           ", but your loop never took a second step: its step is more than "
                           f"{e.trial.n - e.grid_threads} (what x has left after a thread's "
                           f"first element), not the grid's {e.grid_threads} threads"
                           if e.loops else "")), GRID_STRIDE_HINT),
    Mistake("a fixed number of passes (the loop stops before the end of x)",
            lambda e: e.stopped_at and e.stopped_at % e.grid_threads == 0,
            lambda e: (f"only out[0..{e.stopped_at - 1}] were copied: "
                       f"{e.stopped_at // e.grid_threads} passes of the {e.grid_threads}-thread "
                       f"grid, then the loop stopped before the end of x ({e.trial.n} elements)"),
            "loop until the end of x, not a fixed number of times: how many passes it takes "
            "depends on n."),
    Mistake("elements missing or wrong (the elementwise rules)",
            lambda e: e.wrong is not None, lambda e: e.wrong_message(),
            lambda e: e.wrong.hint or GRID_STRIDE_HINT),
    Mistake("a right copy whose warps read scattered addresses (a chunk per thread)",
            lambda e: e.not_coalesced, _not_coalesced, GRID_STRIDE_HINT,
            recognised_from="trace"),
)
COPY = CheckSpec(
    "copy_grid_stride", "copy_grid_stride(x, out)", COPY_STUB_HINT,
    STRIDE_MISTAKES + COPY_MISTAKES,
    parameters=2, title="3. grid-stride copy", call="check_copy_grid_stride(my_copy)",
    holds="a fixed grid smaller than the data copies all of it; traced on a small launch, "
          "every thread steps by the grid's size and no element is copied twice; in the "
          "simulator the reads of a full-size run are grouped into warp requests and must stay "
          "coalesced",
    also="the stub; reads or writes past the end")


def _stride_of(kernel, seed: int, dtype) -> None:
    """Trace the copy on a small fixed grid and fail if its threads do not step by the grid's
    size (:data:`STRIDE_MISTAKES`): elements copied by two threads, or skipped."""
    trial = Trial.draw("check_copy_grid_stride", seed, dtype, block=STRIDE_TRACE_THREADS,
                       size_range=STRIDE_TRACE_SIZES)
    trial.grid_blocks = STRIDE_TRACE_BLOCKS
    x = trial.uniform(-10, 10)
    out = np.full(trial.n, np.nan, dtype=trial.dtype)
    trace = trace_trial(kernel, trial, x, out)
    offer_trace(kernel, 2, 4, "x", "out", note="with x and out of 19 elements: 8 threads")
    order: dict = {}
    if not trace.error and len(trace.global_arrays) >= 2:
        order = trace.elements_by_thread(trace.global_arrays[0], "read")
    stride = Stride(trial, order, trace.error)
    if not stride.never_ends and (trace.error or stride.step is None):
        # Other errors, and one element per thread: the full-size run below says so.
        return
    reject(STRIDE_MISTAKES, stride)


@COPY.check
def check_copy_grid_stride(kernel, seed: int | None = None, dtype=np.float32) -> str:
    """First traced on :data:`STRIDE_TRACE_BLOCKS` blocks of :data:`STRIDE_TRACE_THREADS`
    threads (:func:`_stride_of`); then launched on a fixed grid (2 blocks of 64 threads in the
    simulator, 8 of 128 on a GPU: :data:`COPY_BLOCKS`, :data:`COPY_THREADS`), n random and
    larger than the grid (:data:`COPY_SIZE_RANGE`), x uniform in [-10, 10), out padded. In the
    simulator the sectors per warp request are counted from the reads the kernel really made,
    and more than :data:`SECTOR_SLACK` times the ideal fails."""
    tier = tier_key()
    source = COPY.start(kernel)
    _stride_of(kernel, seed, dtype)
    threads, blocks = COPY_THREADS[tier], COPY_BLOCKS[tier]
    trial = Trial.draw("check_copy_grid_stride", seed, dtype, block=threads,
                       size_range=COPY_SIZE_RANGE[tier])
    grid_threads = threads * blocks
    x = trial.uniform(-10, 10)
    given = x.copy()
    recorder = RecordingArray(x) if tier == "sim" else None  # an IndexError past the end
    d_x = recorder if recorder is not None else padded(x, grid_threads, 0)[1]
    d_out_all, d_out = padded(np.full(trial.n, np.nan, dtype=trial.dtype), grid_threads,
                              np.nan)
    launch(kernel, trial, d_x, d_out, blocks=blocks)
    # The grid is fixed, not the trial's one thread per element: say what was launched.
    launched = (f"{blocks} blocks of {threads} threads = {grid_threads} threads for "
                f"n={trial.n}, seed={trial.seed}")
    out = read_back(d_out_all, (trial.n,), launched,
                    hint="the loop must stop before `x.shape[0]`: no index may reach it.")
    copied = Copied(given, out, trial, grid_threads, launched, recorder,
                    not np.array_equal(d_x.copy_to_host(), given),
                    any(isinstance(node, ast.For | ast.While) for node in source.walk()))
    reject(COPY_MISTAKES, copied)
    access = copied.access
    if access is None:
        return (f"all {trial.n} elements copied ({launched}). "
                "Coalescing is checked in the simulator tier, where reads can be recorded.")
    return (f"all {trial.n} elements copied, and coalesced: "
            f"{access.sectors_per_request:.3g} sectors per warp request "
            f"(ideal {access.ideal_sectors_per_request:g}; "
            f"{access.n_requests} requests traced in the simulator; {launched}).")


__all__ = ["check_copy_grid_stride", "check_saxpy", "check_time_saxpy", "watch_host_code"]
