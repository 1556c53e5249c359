"""A time limit for simulated kernels (:func:`limited`): a thread that makes more array
accesses or passes more barriers than a budget, or a launch that runs longer than a wall-clock
limit, stops with :class:`KernelDidNotFinishError` instead of hanging the caller.

The instrumented arrays count their accesses here (:func:`count_access`); within
:func:`limited` the simulator's own device arrays and barriers are counted too.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import greenlet

from gpulab.instruments.simulator import (
    blocks_as_greenlets,
    patched,
    running_thread,
    stop_blocks,
)


class KernelDidNotFinishError(RuntimeError):
    """A simulated kernel was stopped by :func:`limited`: a thread made more array accesses or
    passed more barriers than its budget, or the launch ran past its wall-clock limit. Almost
    always a loop that never ends (a grid-stride loop whose step is 0 for some thread, a halving
    loop that never halves)."""


@dataclass
class Limits:
    accesses_per_thread: int | None
    barriers_per_thread: int | None
    seconds: float | None
    active: bool = True
    timed_out: bool = False
    tripped: bool = False  # a thread went past a budget: every thread of the launch stops
    reason: str = ""  # why, for the threads stopped with it


_LIMITS: Limits | None = None
# Held while stopping threads and while a limit ends, so that a watchdog that fires as its
# limit ends does not stop a launch made after it.
_STOPPING = threading.RLock()


_PAST_ACCESSES = ("made more than {budget} array accesses, many more than the arrays hold: a "
                  "loop that never ends?")


def count_access() -> None:
    """Count one array access of the simulated thread running now against :func:`limited`'s
    budget; raise :class:`KernelDidNotFinishError` past it. Free outside a limit or a kernel.
    (The simulator's own arrays count in :func:`_counting_accesses`, the same steps inline.)"""
    limits = _LIMITS
    if limits is not None and limits.accesses_per_thread is not None:
        _count(limits, limits.accesses_per_thread, "gpulab_accesses", _PAST_ACCESSES)


def count_barrier() -> None:
    """Count one barrier (``syncthreads``) of the simulated thread running now against
    :func:`limited`'s budget."""
    limits = _LIMITS
    if limits is not None and limits.barriers_per_thread is not None:
        _count(limits, limits.barriers_per_thread, "gpulab_barriers",
               "passed more than {budget} barriers (syncthreads): a loop that never ends?")


def _count(limits: Limits, budget: int, counter: str, past_budget: str) -> None:
    """Add one to the running simulated thread's ``counter``; past ``budget`` stop every
    thread, saying "a thread " + ``past_budget`` (``{budget}`` filled in)."""
    thread = running_thread()
    if thread is None:
        return
    count = getattr(thread, counter, 0) + 1
    setattr(thread, counter, count)
    if limits.tripped or count > budget:
        _stop(limits, past_budget.format(budget=budget))


def _stop(limits: Limits, past_budget: str) -> None:
    """Raise :class:`KernelDidNotFinishError` in a thread past its budget (``past_budget``
    says how), which trips ``limits``, or in any thread once they are tripped."""
    if limits.tripped:
        raise KernelDidNotFinishError(f"stopped with another thread: {limits.reason}")
    limits.tripped = True
    limits.reason = "a thread " + past_budget
    raise KernelDidNotFinishError(limits.reason.replace("a thread", "this thread", 1))


def access_budget(*arrays, factor: int = 16, minimum: int = 2_000) -> int:
    """A generous per-thread access budget for a launch on ``arrays`` (anything with ``size``;
    others are ignored): ``factor`` times all their elements, at least ``minimum``. A thread
    that needs more is looping."""
    elements = sum(int(getattr(a, "size", 0) or 0) for a in arrays if hasattr(a, "shape"))
    return max(minimum, factor * elements)


def _stop_running_threads(limits: Limits) -> None:
    """The watchdog: mark ``limits`` timed out and tripped (every simulated thread then stops at
    its next access or barrier) and stop the blocks running, and any that start while the limit
    lasts, with KernelDidNotFinishError (:func:`~gpulab.instruments.simulator.stop_blocks`)."""
    with _STOPPING:
        if not limits.active:
            return
        limits.timed_out = limits.tripped = True
        stop_blocks(KernelDidNotFinishError)


@contextmanager
def limited(accesses_per_thread: int | None = None, barriers_per_thread: int | None = None,
            seconds: float | None = None) -> Iterator[Limits]:
    """Within this block, a simulated kernel that loops forever stops with
    :class:`KernelDidNotFinishError` (raised by the launch, its message starting with the
    simulator's ``tid=[...] ctaid=[...]``) instead of hanging:

    - a thread that makes more than ``accesses_per_thread`` accesses to device arrays or
      instrumented arrays (:func:`access_budget` is a generous choice), or passes more than
      ``barriers_per_thread`` barriers, stops at once;
    - after ``seconds`` of wall-clock time, every simulated thread still running Python code is
      stopped (a loop that touches no array): the result's ``timed_out`` is then True.

    None means no limit of that kind. Outside the simulator this does nothing (on a GPU the
    caller must poll for completion itself).
    """
    global _LIMITS
    limits = Limits(accesses_per_thread, barriers_per_thread, seconds)
    try:
        from numba.cuda.simulator.cudadrv.devicearray import FakeWithinKernelCUDAArray
        from numba.cuda.simulator.kernelapi import FakeCUDAModule
    except ImportError:  # not the simulator: nothing to limit here
        yield limits
        return
    blocks_as_greenlets()  # the watchdog stops the CUDA thread running in a launching thread
    previous = _LIMITS
    # Within an outer limit, count on its originals: an access is counted once, by this one.
    def uncounted(method):
        return getattr(method, "gpulab_original", method)

    patches = {
        (FakeWithinKernelCUDAArray, "__getitem__"): _counting_accesses(
            uncounted(FakeWithinKernelCUDAArray.__getitem__)),
        (FakeWithinKernelCUDAArray, "__setitem__"): _counting_accesses(
            uncounted(FakeWithinKernelCUDAArray.__setitem__)),
    }
    for name in ("syncthreads", "syncthreads_count", "syncthreads_and", "syncthreads_or"):
        patches[FakeCUDAModule, name] = _counting_barriers(uncounted(getattr(FakeCUDAModule, name)))
    watchdog = None
    with patched(patches):
        _LIMITS = limits
        if seconds is not None:
            watchdog = threading.Timer(seconds, _stop_running_threads, (limits,))
            watchdog.daemon = True
            watchdog.start()
        try:
            yield limits
        finally:
            if watchdog is not None:
                watchdog.cancel()
            with _STOPPING:  # a watchdog already stopping threads finishes first
                if limits.timed_out:  # blocks start again
                    stop_blocks(None)
                limits.active = False
            _LIMITS = previous


def _counting_barriers(method):
    """``method`` (a ``syncthreads`` variant), calling :func:`count_barrier` first."""
    def counted(self, *args):
        count_barrier()
        return method(self, *args)

    counted.gpulab_original = method
    return counted


def _counting_accesses(method):
    """``method`` (a device array's ``__getitem__`` or ``__setitem__``), counting one access
    first. :func:`count_access` inlined: this runs on every element a simulated kernel reads or
    writes, where each Python call costs (a third of a check's time went to counting)."""
    def counted(self, *args):
        limits = _LIMITS
        if limits is not None and limits.accesses_per_thread is not None:
            thread = getattr(greenlet.getcurrent(), "gpulab_thread", None) or running_thread()
            if thread is not None:
                count = thread.gpulab_accesses = getattr(thread, "gpulab_accesses", 0) + 1
                if limits.tripped or count > limits.accesses_per_thread:
                    _stop(limits, _PAST_ACCESSES.format(budget=limits.accesses_per_thread))
        return method(self, *args)

    counted.gpulab_original = method
    return counted


__all__ = ["KernelDidNotFinishError", "Limits", "access_budget", "count_access", "count_barrier",
           "limited"]
