"""Numba's CUDA simulator as the instruments see it: which simulated thread is running, and
patching the simulator's classes for the length of a block.

Numba's CUDA simulator runs every thread of a kernel as a Python thread, so code called from a
kernel (an instrumented array's ``__getitem__``, a patched ``syncthreads``) can ask which
simulated thread it runs in:

- :func:`simulated_thread` — ``(block, thread)`` of the simulated thread running now: the
  block's linear index in the grid and the thread's linear index in its block, computed the way
  CUDA does (x fastest, then y, then z) for 1-D, 2-D and 3-D launches alike;
  :func:`running_thread` is the simulator's thread object itself.
- :func:`simulator_thread` — the thread named at the start of a simulator's error message.
- :func:`patched` — set class attributes of the simulator for a block, then put them back.
- :func:`shared_array_maker` and :func:`shared_arrays_made_once` — ``cuda.shared.array`` made
  under a lock, so that every thread of a block gets the same array (the simulator's own
  get-or-create can hand two threads two arrays).
- :func:`events_as_on_a_gpu` — the simulator's CUDA events with the real target's host API, so
  that a learner's timing written for a GPU runs in the simulator too.
- :func:`launches_one_at_a_time` — a launch from a second host thread (a server's model
  thread, the ranks of a simulated ring) waits for the running one instead of failing.
- :func:`blocks_wait_without_polling` — the launching thread sleeps until a block's threads
  reach a barrier or end, instead of polling them and taking the GIL from them.
- :func:`mend` — these mends, once, in the simulator tier (gpulab's kernels and the exercise
  checks call it when they are imported).
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np


def dim3(value) -> tuple[int, int, int] | None:
    """(x, y, z) from the simulator's Dim3 or a tuple of up to three ints; None if unknown."""
    if value is None:
        return None
    if all(hasattr(value, axis) for axis in "xyz"):
        return int(value.x), int(value.y), int(value.z)
    values = tuple(int(v) for v in value) + (1, 1, 1)
    return values[0], values[1], values[2]


def linear_index(index: tuple[int, int, int], extent: tuple[int, int, int]) -> int:
    """CUDA's linear index of a 3-D ``index`` within ``extent``: ``x + X * (y + Y * z)``."""
    return index[0] + extent[0] * (index[1] + extent[1] * index[2])


def simulated_thread() -> tuple[int, int] | None:
    """``(block, thread)`` of the simulated CUDA thread running now, or None outside a kernel.

    ``block`` is the linear index of ``cuda.blockIdx`` in the grid and ``thread`` the linear
    index of ``cuda.threadIdx`` in the block (``x + blockDim.x * (y + blockDim.y * z)``), so
    threads ``32 w .. 32 w + 31`` of a block form its warp ``w`` in 1-D, 2-D and 3-D launches.
    """
    current = threading.current_thread()
    block, thread = dim3(getattr(current, "blockIdx", None)), dim3(
        getattr(current, "threadIdx", None))
    if block is None or thread is None:
        return None
    # The simulator keeps the launch's dimensions on the thread's block manager (numba 0.5x-0.6x).
    manager = getattr(current, "_manager", None)
    grid_dim = dim3(getattr(manager, "_grid_dim", None))
    block_dim = dim3(getattr(manager, "_block_dim", None))
    if grid_dim is None or block_dim is None:
        if block[1:] == (0, 0) and thread[1:] == (0, 0):  # 1-D: the x index is the answer
            return block[0], thread[0]
        raise RuntimeError("gpulab.instruments cannot find the launch's dimensions in this "
                           "version of numba's CUDA simulator; please report this")
    return linear_index(block, grid_dim), linear_index(thread, block_dim)


def running_thread():
    """The simulator's thread object running now, or None outside a simulated kernel."""
    current = threading.current_thread()
    return current if hasattr(current, "threadIdx") and hasattr(current, "blockIdx") else None


_SIM_PREFIX = re.compile(r"tid=\[([\d, ]+)\] ctaid=\[([\d, ]+)\]:?\s*")


def simulator_thread(text: str) -> tuple[str, str]:
    """Split an error message of the simulator's, ``"tid=[3, 0, 0] ctaid=[1, 0, 0]: index 5
    ..."``, into ``("block (1, 0, 0), thread (3, 0, 0) (x, y, z)", "index 5 ...")``; a message
    without that prefix gives ``("", text)``."""
    prefix = _SIM_PREFIX.match(text)
    if not prefix:
        return "", text
    thread = tuple(int(v) for v in prefix.group(1).split(","))
    block = tuple(int(v) for v in prefix.group(2).split(","))
    return f"block {block}, thread {thread} (x, y, z)", text[prefix.end():]


@contextmanager
def patched(patches: dict) -> Iterator[None]:
    """Set ``(owner, name) -> value`` class attributes for the block, then put them back."""
    originals = {key: key[0].__dict__[key[1]] for key in patches}
    try:
        for (owner, name), value in patches.items():
            setattr(owner, name, value)
        yield
    finally:
        for (owner, name), value in originals.items():
            setattr(owner, name, value)


# Held while a shared array is looked up and, if missing, made and stored: see shared_array_maker.
_SHARED_ALLOCATION = threading.Lock()


def shared_array_maker(make: Callable) -> Callable:
    """A stand-in for the simulator's ``FakeCUDAShared.array``: one array per
    ``cuda.shared.array`` call per launch, looked up and made under a lock. ``make(shared,
    values, caller_frame)`` gives what the kernel gets, from ``values`` (``np.empty``, as the
    simulator starts them).

    Per call, not per line: the simulator keys its arrays by the caller's file and line, so two
    calls on one line (``a = cuda.shared.array(32, f4); b = cuda.shared.array(32, f4)``) got one
    array between them, and a kernel right on a GPU gave wrong sums. The key adds the call's
    bytecode offset (the same in every thread).

    Why the lock: the simulator looks the line up in a dict and, when it is missing, makes the
    array and stores it. Its threads are Python threads, so another thread of the block can run
    between the lookup and the store; the two then hold two different arrays, and a barrier
    later one of them reads slots nobody wrote (``np.empty``'s leftovers). Measured on 2 busy
    cores (three processes, each calling ``gpulab.kernels.dot.dot(x, y, "grid_stride")`` on
    random float32 vectors of 1..5000 elements for 200-240 s; the loop is in issue 22's note):
    10 wrong results in 10,775 launches without the lock, some of them 1e19 or 5e36;
    0 in 11,011 with it.
    """
    from numba.cuda.simulator import kernelapi

    original = kernelapi.FakeCUDAShared.array

    def array(self, shape, dtype, alignment=None):
        if shape == 0 or alignment is not None:  # dynamic shared memory, or the simulator's
            return original(self, shape, dtype, alignment)  # "alignment unsupported" error
        caller = sys._getframe(1)
        key = (caller.f_code.co_filename, caller.f_lineno, caller.f_lasti)  # one per call
        with _SHARED_ALLOCATION:
            found = self._allocations.get(key)
            if found is None:
                if isinstance(dtype, kernelapi.types.Type):
                    dtype = kernelapi.numpy_support.as_dtype(dtype)
                found = make(self, np.empty(shape, dtype), caller)
                self._allocations[key] = found
        return found

    array.made_once = True
    array.original = original  # what it replaced (for tests)
    return array


def shared_arrays_made_once() -> None:
    """Replace the simulator's ``FakeCUDAShared.array`` by :func:`shared_array_maker`'s,
    which gives the kernel the array as the simulator makes it. A second call changes
    nothing; nothing changes outside the simulator."""
    try:
        from numba.cuda.simulator.kernelapi import FakeCUDAShared
    except ImportError:  # not the simulator
        return
    if not getattr(FakeCUDAShared.array, "made_once", False):
        FakeCUDAShared.array = shared_array_maker(lambda shared, values, caller: values)


# Held by a launch from a host thread for as long as the simulator runs it.
_LAUNCH = threading.RLock()


def launches_one_at_a_time() -> None:
    """Make a launch from a host thread wait while another host thread's launch runs.

    The simulator runs one launch at a time (its kernel context is one global, "concurrent
    simulated kernel not supported"): a launch made while another runs is taken for a device
    function called from inside it, and fails in the caller's thread (``AttributeError``). On a
    GPU, launches from two host threads queue on the device. Calls made by simulated threads
    (device functions) pass straight through. A launch that fails returns once the threads it
    started have ended (:func:`_let_stopped_threads_end`). A second call changes nothing;
    nothing changes outside the simulator."""
    try:
        from numba.cuda.simulator.kernel import FakeCUDAKernel
    except ImportError:  # not the simulator
        return
    launch = FakeCUDAKernel.__call__
    if getattr(launch, "one_at_a_time", False):
        return

    def launch_in_turn(self, *args):
        if self._device or running_thread() is not None:  # a device function, in a kernel
            return launch(self, *args)
        with _LAUNCH:
            try:
                return launch(self, *args)
            except BaseException:
                _let_stopped_threads_end()
                raise

    launch_in_turn.one_at_a_time = True
    launch_in_turn.original = launch  # what it replaced (for tests)
    FakeCUDAKernel.__call__ = launch_in_turn


STOPPED_THREADS_WAIT_S = 1.0


def _let_stopped_threads_end(seconds: float = STOPPED_THREADS_WAIT_S) -> None:
    """Wait up to ``seconds`` for the simulated threads still alive to end.

    The simulator raises a block's first exception at once and tells the block's other threads
    to stop at their next barrier, without waiting for them. Until they get there they run on,
    and once the next launch of a kernel of the same module has begun they run inside it: their
    ``cuda`` is then that launch's, and a ``cuda.shared.array`` line gives them its shared array
    to write into. A thread that loops without a barrier is left to :func:`~gpulab.
    instruments.limits.limited`, after ``seconds``."""
    deadline = time.monotonic() + seconds
    for thread in threading.enumerate():
        if hasattr(thread, "syncthreads_event") and thread is not threading.current_thread():
            thread.join(max(0.0, deadline - time.monotonic()))


def mend() -> None:
    """In the simulator tier, :func:`shared_arrays_made_once`, :func:`launches_one_at_a_time`,
    :func:`events_as_on_a_gpu` and :func:`blocks_wait_without_polling`; nothing on a GPU or in
    the ptx tier. Called when gpulab's kernels and the exercise checks are imported; a second
    call changes nothing."""
    from gpulab import device

    if device.tier() == "sim":
        shared_arrays_made_once()
        launches_one_at_a_time()
        events_as_on_a_gpu()
        blocks_wait_without_polling()


# How long a block's launching thread waits for news from its threads before it looks at them
# anyway: a safety net only (a thread signals when it reaches a barrier and when it ends).
BLOCK_WAKE_S = 0.01


def blocks_wait_without_polling() -> None:
    """Make the simulator's launching thread sleep while a block's threads run.

    Numba's ``BlockManager.run`` starts a block's threads, then loops over them until every one
    has ended, releasing a barrier once every live thread waits at it. The loop never sleeps, so
    it takes its share of the GIL from the threads it waits for: in a check's test file it was
    half the process's time (``threading.Thread.is_alive``, 25 million calls in 150 s). Here each
    thread signals its block when it reaches a barrier (it sets ``syncthreads_blocked``) and
    when it ends, and the loop waits for that signal between looks (at most
    :data:`BLOCK_WAKE_S`). What runs and in which rule is Numba's: a barrier is released when
    every live thread of the block waits at it; a thread's exception stops the block and is
    raised. A second call changes nothing; nothing changes outside the simulator."""
    try:
        from numba.cuda.simulator import kernel
    except ImportError:  # not the simulator
        return
    if getattr(kernel.BlockManager.run, "waits", False):
        return

    def signal(thread) -> None:
        changed = getattr(getattr(thread, "_manager", None), "gpulab_changed", None)
        if changed is not None:
            changed.set()

    def set_blocked(thread, blocked: bool) -> None:
        thread.gpulab_blocked = blocked
        if blocked:
            signal(thread)

    thread_run = kernel.BlockThread.run

    def run_and_signal(thread) -> None:
        try:
            thread_run(thread)
        finally:
            thread.gpulab_ended = True
            signal(thread)

    def run_block(self, grid_point, *args):
        self.gpulab_changed = changed = threading.Event()
        threads = []
        for block_point in np.ndindex(*self._block_dim):
            def target():
                self._f(*args)

            thread = kernel.BlockThread(target, self, grid_point, block_point, self._debug)
            thread.start()
            threads.append(thread)
        live = list(threads)
        while live:
            changed.clear()  # a signal from here on wakes the wait below
            for thread in live:
                if thread.exception and not thread.syncthreads_blocked:
                    for other in threads:  # as Numba does: stop the block, raise at once
                        other.abort = True
                        other.syncthreads_blocked = False
                        other.syncthreads_event.set()
                    raise thread.exception[0].with_traceback(thread.exception[1])
            live = [t for t in live
                    if not getattr(t, "gpulab_ended", False) and t.is_alive()]
            if live and all(t.syncthreads_blocked for t in live):
                for thread in live:
                    thread.syncthreads_blocked = False
                    thread.syncthreads_event.set()
            elif live:
                changed.wait(BLOCK_WAKE_S)
        for thread in threads:
            if thread.exception:
                raise thread.exception[0].with_traceback(thread.exception[1])

    kernel.BlockThread.syncthreads_blocked = property(
        lambda thread: getattr(thread, "gpulab_blocked", False), set_blocked)
    kernel.BlockThread.run = run_and_signal
    run_block.waits = True
    run_block.original = kernel.BlockManager.run  # what it replaced (for tests)
    kernel.BlockManager.run = run_block


def events_as_on_a_gpu() -> None:
    """Give the simulator's CUDA events what the real target has and the simulator lacks:
    ``cuda.event(timing=True)`` (its ``Event()`` takes no argument), ``cuda.event_elapsed_time(
    start, stop)`` (missing), and an ``elapsed_time`` in milliseconds (its own returns -1): the
    host time between the two records. The simulator runs launches synchronously, so that is
    the simulated work's time on this CPU, which says nothing about a GPU. Nothing changes on a
    GPU; a second call changes nothing."""
    from numba import cuda

    if "simulator" not in getattr(cuda.event, "__module__", "") or hasattr(cuda.event, "mended"):
        return
    # The clock as it is now: a check that records the learner's clock reads replaces
    # time.perf_counter later, and an event's record is not a clock read of the learner's.
    simulated, host_clock = cuda.event, time.perf_counter

    class Event(simulated):
        recorded_s: float | None = None

        def record(self, stream=0):
            self.recorded_s = host_clock()
            return super().record(stream)

        def elapsed_time(self, event) -> float:
            if self.recorded_s is None or event.recorded_s is None:
                raise ValueError("elapsed_time needs both events recorded (event.record())")
            return (event.recorded_s - self.recorded_s) * 1e3

    def event(timing: bool = True) -> Event:
        return Event()

    event.mended = True
    cuda.event = event
    cuda.event_elapsed_time = lambda start, stop: start.elapsed_time(stop)


__all__ = ["dim3", "events_as_on_a_gpu", "launches_one_at_a_time", "linear_index", "mend",
           "patched", "running_thread",
           "shared_array_maker", "shared_arrays_made_once", "simulated_thread",
           "simulator_thread"]
