"""Numba's CUDA simulator as the instruments see it: which simulated thread is running, and
patching the simulator's classes for the length of a block.

Numba's CUDA simulator runs every thread of a kernel as a Python thread (as a greenlet once
:func:`mend` has run: :func:`blocks_as_greenlets`), so code called from a kernel (an
instrumented array's ``__getitem__``, a patched ``syncthreads``) can ask which simulated thread
it runs in:

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
- :func:`device_as_on_a_gpu` — the simulator's device with the limits every GPU has
  (``MAX_THREADS_PER_BLOCK``, ``WARP_SIZE``, ...) and its context with ``synchronize()``.
- :func:`launches_one_at_a_time` — a launch from a second host thread (a server's model
  thread, the ranks of a simulated ring) waits for the running one instead of failing.
- :func:`blocks_as_greenlets` — a block's CUDA threads run as greenlets, in turn, in the thread
  that launched it, instead of as one OS thread each; :func:`current_thread` is the one
  running, :func:`stop_blocks` stops the blocks running and to come (a watchdog), and
  :func:`unfinished_threads` counts the CUDA threads left paused (none, after any launch).
- :func:`float_max_min_as_on_a_gpu` — for a block, ``max`` and ``min`` of two floats leave a
  NaN out, as the CUDA target's ``fmaxf`` and ``fminf`` do.
- :func:`math_overflows_to_inf` — for a block, ``math.exp`` and its kin give ±inf where their
  result overflows, as CUDA's do, instead of raising OverflowError as Python's do.
- :func:`mend` — these mends, once, in the simulator tier (gpulab's kernels and the exercise
  checks call it when they are imported).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import math
import random
import re
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import greenlet
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
    current = current_thread()
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
    """The simulator's thread object running now, or None outside a simulated kernel. Called
    on every counted array access (:mod:`gpulab.instruments.limits`): a CUDA thread running
    as a greenlet is found first, without the checks a host thread needs."""
    simulated = getattr(greenlet.getcurrent(), "gpulab_thread", None)
    if simulated is not None:
        return simulated
    current = threading.current_thread()  # Numba's own runner: a thread per CUDA thread
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
    (device functions) pass straight through. A second call changes nothing; nothing changes
    outside the simulator."""
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
            return launch(self, *args)

    launch_in_turn.one_at_a_time = True
    launch_in_turn.original = launch  # what it replaced (for tests)
    FakeCUDAKernel.__call__ = launch_in_turn


def device_as_on_a_gpu() -> None:
    """Give the simulator's device the limits every GPU has
    (:data:`gpulab.device.DEVICE_LIMITS`: ``cuda.get_current_device().MAX_THREADS_PER_BLOCK``
    and its kin, missing there) and its context the ``synchronize()`` a real context has
    (``cuda.current_context().synchronize()``, the simulator's ``cuda.synchronize``). A limit
    of one GPU model (``MULTIPROCESSOR_COUNT``) stays missing: the simulator is no GPU model.
    Nothing changes on a GPU; a second call changes nothing."""
    try:
        from numba.cuda.simulator import api
        from numba.cuda.simulator.cudadrv.devices import FakeCUDAContext, FakeCUDADevice
    except ImportError:  # not the simulator
        return
    from gpulab.device import DEVICE_LIMITS

    for name, value in DEVICE_LIMITS.items():
        if not hasattr(FakeCUDADevice, name):
            setattr(FakeCUDADevice, name, value)
    if not hasattr(FakeCUDAContext, "synchronize"):
        FakeCUDAContext.synchronize = lambda self: api.synchronize()


def mend() -> None:
    """In the simulator tier, :func:`shared_arrays_made_once`, :func:`launches_one_at_a_time`,
    :func:`events_as_on_a_gpu`, :func:`device_as_on_a_gpu` and :func:`blocks_as_greenlets`;
    nothing on a GPU or in the ptx tier. Called when gpulab's kernels and the exercise checks
    are imported; a second call changes nothing."""
    from gpulab import device

    if device.tier() == "sim":
        shared_arrays_made_once()
        launches_one_at_a_time()
        events_as_on_a_gpu()
        device_as_on_a_gpu()
        blocks_as_greenlets()


# Seeds the order of a block's phases: phase p of block b runs in the order of seed
# b * PHASES_PER_BLOCK + p (blocks_as_greenlets).
PHASES_PER_BLOCK = 1 << 20

# The host threads running a simulated block now (their ``threading.get_ident()``; a block's
# CUDA threads run as greenlets inside the thread that launched it, blocks_as_greenlets), what
# every block raises as it starts while a watchdog has stopped the blocks (stop_blocks), and
# the lock held while these change or an exception is raised into those threads: an exception
# raised into a thread in the set reaches it before it has left its block.
_RUNNING_BLOCKS: set[int] = set()
_STOPPED_BY: list[type[BaseException]] = []
_RUNNING_BLOCKS_LOCK = threading.Lock()


def stop_blocks(exception: type[BaseException] | None) -> int:
    """Stop simulated blocks with ``exception``, as a watchdog stops a kernel that never ends
    (:func:`gpulab.instruments.limits.limited`): it is raised now in every host thread running
    a block (in the CUDA thread running there, which Numba names in its message, or else in
    the block's loop), and every block that starts from now on raises it, until
    ``stop_blocks(None)``. Returns how many running blocks it reached."""
    with _RUNNING_BLOCKS_LOCK:
        _STOPPED_BY[:] = [exception] if exception is not None else []
        if exception is None:
            return 0
        for ident in _RUNNING_BLOCKS:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident),
                                                       ctypes.py_object(exception))
        return len(_RUNNING_BLOCKS)


def _start_block(ident: int) -> None:
    with _RUNNING_BLOCKS_LOCK:
        if _STOPPED_BY:
            raise _STOPPED_BY[0]("stopped before this block began: the launch is past its time "
                                 "limit")
        _RUNNING_BLOCKS.add(ident)


def unfinished_threads() -> int:
    """How many simulated CUDA threads have started and not ended (greenlets paused at a
    barrier): 0 outside a launch, whatever the last launch did. Slow (it looks at every object
    the garbage collector tracks): for tests and diagnosis."""
    return sum(1 for found in gc.get_objects() if isinstance(found, greenlet.greenlet)
               and getattr(found, "gpulab_thread", None) is not None and found)


def blocks_as_greenlets() -> None:
    """Run each simulated CUDA thread as a greenlet in the launching thread, not as an OS thread.

    Numba's ``BlockManager.run`` starts an OS thread for every CUDA thread of a block, then
    loops until each has ended, releasing a barrier once every live thread waits at it. Starting
    the threads was most of a small launch's time (4,096 ``threading.Thread`` started and
    joined: 0.74 s of a 1.1 s launch of 4,096 ``out[i] = x[i] + 1`` threads), and each barrier
    is a round of GIL hand-offs. Here each CUDA thread is a greenlet (the ``greenlet`` package:
    a function that can pause and be resumed, in one OS thread): the block's threads run in
    turn, each until it reaches a barrier or ends; when every live thread waits at the barrier
    they all go on, in turn again. Numba's rules are kept: threads that returned do not hold a
    barrier up; a thread's exception (named ``tid=[..] ctaid=[..]`` by Numba's ``BlockThread``)
    stops the block, the threads waiting at a barrier end there, and the launch raises it.
    Between two barriers the threads run in a shuffled order, seeded by the block and the phase
    (so the same in every run): any order is one a GPU may take, and a race between two threads
    of a phase (one reads a slot the other writes) shows whichever of the two a fixed order
    would run first. A thread is never interrupted between barriers, so a race inside one
    statement (two threads' ``out[0] += v``) does not lose updates here: the checks find those
    from a trace of the writes and from the source. ``cuda.threadIdx`` and the other
    per-thread reads find the running CUDA thread through :func:`current_thread`. A second
    call changes nothing; nothing changes outside the simulator."""
    try:
        from numba.cuda.simulator import kernel, kernelapi
    except ImportError:  # not the simulator
        return
    if getattr(kernel.BlockManager.run, "greenlets", False):
        return

    class RunsItsTarget(threading.Thread):
        def run(self) -> None:  # what Numba's BlockThread.run calls: the CUDA thread's code
            self.gpulab_target()

    class GreenletThread(kernel.BlockThread, RunsItsTarget):
        """Numba's ``BlockThread`` (its ``tid=[..] ctaid=[..]`` error messages, its
        ``syncthreads_count`` and friends) run by a greenlet: made without an OS thread's
        locks and events, and waiting at a barrier by handing control back to its block."""

        def __init__(self, f, manager, block_index, thread_index, debug, thread_id):
            if debug:  # as Numba's BlockThread: division by zero raises in debug mode
                def target():
                    np.seterr(divide="raise")
                    f()
            else:
                target = f
            self.gpulab_target = target
            self.gpulab_greenlet = greenlet.greenlet(self.run)
            self.gpulab_greenlet.gpulab_thread = self
            self._manager = manager
            self.blockIdx = kernelapi.Dim3(*block_index)
            self.threadIdx = kernelapi.Dim3(*thread_index)
            self.syncthreads_blocked = self.abort = False
            self.exception = None
            self.debug = debug
            self.thread_id = thread_id  # the linear index in the block, as CUDA numbers it

        def syncthreads(self) -> None:
            if self.abort:
                raise RuntimeError("abort flag set on syncthreads call")  # Numba's words
            self.syncthreads_blocked = True
            self.gpulab_greenlet.parent.switch()  # back to the block until the barrier opens
            if self.abort:
                raise RuntimeError("abort flag set on syncthreads clear")

        __repr__ = kernel.BlockThread.__str__

    def run_block(self, grid_point, *args):
        def target():
            self._f(*args)

        extent = dim3(self._block_dim)
        threads = [GreenletThread(target, self, grid_point, point, self._debug,
                                  linear_index(dim3(point), extent))
                   for point in np.ndindex(*self._block_dim)]
        ident = threading.get_ident()
        block = linear_index(dim3(grid_point), dim3(self._grid_dim))
        errors = np.errstate(divide="raise") if self._debug else contextlib.nullcontext()
        try:
            _start_block(ident)
            live, phase = threads, 0
            while live:
                # Threads 0, 1, 2, ... in turn would hide every race between a thread and a
                # later one (a read of a slot that a later thread writes before the same
                # barrier): each phase runs in its own order, the same in every run.
                random.Random(block * PHASES_PER_BLOCK + phase).shuffle(live)
                for thread in live:
                    with errors:  # debug: as in Numba's threads, and not left on in this one
                        thread.gpulab_greenlet.switch()  # until it waits at a barrier or ends
                    if thread.exception:
                        raise thread.exception[0].with_traceback(thread.exception[1])
                live = [t for t in live if not t.gpulab_greenlet.dead]
                phase += 1
                for thread in live:  # every live thread waits at the barrier: it opens
                    thread.syncthreads_blocked = False
        finally:
            try:
                _end_paused(threads)
            finally:
                with _RUNNING_BLOCKS_LOCK:
                    _RUNNING_BLOCKS.discard(ident)

    kernelapi.threading = _threading_seen_by_kernels()
    run_block.greenlets = True
    run_block.original = kernel.BlockManager.run  # what it replaced (for tests)
    kernel.BlockManager.run = run_block


def _end_paused(threads) -> None:
    """End the threads of a stopped block that wait at a barrier (each raises Numba's "abort
    flag set" there), every one of them even if one raises something else (a second interrupt,
    a watchdog): the first such exception is raised after."""
    first = None
    for thread in threads:
        thread.abort = True
        while thread.gpulab_greenlet:  # started, not ended
            try:
                thread.gpulab_greenlet.switch()
            except BaseException as error:  # noqa: BLE001 - raised below, once all have ended
                first = first or error
    if first is not None:
        raise first


def current_thread():
    """The simulated CUDA thread (Numba's ``BlockThread``) running now, or else
    ``threading.current_thread()``: what the simulator's ``threading.current_thread()`` means
    once CUDA threads are greenlets (:func:`blocks_as_greenlets`)."""
    simulated = getattr(greenlet.getcurrent(), "gpulab_thread", None)
    return simulated if simulated is not None else threading.current_thread()


def _threading_seen_by_kernels() -> types.ModuleType:
    """``threading`` as the simulator's ``kernelapi`` sees it: its own but for
    :func:`current_thread`."""
    seen = types.ModuleType("threading")
    seen.__getattr__ = lambda name: getattr(threading, name)
    seen.current_thread = current_thread
    return seen


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


def _to_inf(function: Callable, sign_of_argument: bool) -> Callable:
    def as_on_a_gpu(*args):
        try:
            return function(*args)
        except OverflowError:
            return math.copysign(math.inf, args[0]) if sign_of_argument else math.inf
    as_on_a_gpu.__name__ = function.__name__
    return as_on_a_gpu


@contextmanager
def math_overflows_to_inf() -> Iterator[None]:
    """Within this block, ``math.exp``, ``expm1`` and ``cosh`` give inf, and ``sinh`` and
    ``ldexp`` ±inf, where the result overflows (past 1.8e308), as the CUDA target's do, instead
    of raising OverflowError as Python's do. Kernels that call them as ``math.exp`` see the
    change; a name imported with ``from math import exp`` keeps Python's."""
    with patched({(math, name): _to_inf(getattr(math, name), signed)
                  for name, signed in (("exp", False), ("expm1", False), ("cosh", False),
                                       ("sinh", True), ("ldexp", True))}):
        yield


def _nan_left_out(python: Callable) -> Callable:
    def as_on_a_gpu(*args, **kwargs):
        if len(args) == 2 and not kwargs and all(isinstance(a, float | np.floating)
                                                 for a in args):
            first, second = args
            if first != first:  # NaN
                return second
            if second != second:
                return first
        return python(*args, **kwargs)
    as_on_a_gpu.__name__ = python.__name__
    return as_on_a_gpu


@contextmanager
def float_max_min_as_on_a_gpu() -> Iterator[None]:
    """Within this block, the builtins ``max`` and ``min`` of two floats leave a NaN out (the
    other float is the answer; NaN only when both are), as the CUDA target compiles them, to
    ``fmaxf``/``fminf``. Python's keep whichever argument comes first when one is NaN, so
    ``max(nan, 1.0)`` is nan in the simulator and 1.0 on a GPU. Any other call is Python's."""
    import builtins

    with patched({(builtins, "max"): _nan_left_out(builtins.max),
                  (builtins, "min"): _nan_left_out(builtins.min)}):
        yield


__all__ = ["blocks_as_greenlets", "current_thread", "dim3", "events_as_on_a_gpu",
           "float_max_min_as_on_a_gpu", "launches_one_at_a_time", "linear_index",
           "math_overflows_to_inf", "mend", "patched",
           "running_thread", "stop_blocks", "unfinished_threads",
           "shared_array_maker", "shared_arrays_made_once", "simulated_thread",
           "simulator_thread"]
