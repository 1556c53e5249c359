"""Simulator instruments: stand-in arrays that record which simulated CUDA thread touched what.

Numba's CUDA simulator runs every thread of a kernel as a Python thread, so an argument that is
not a device array but an object with ``__getitem__`` / ``__setitem__`` sees each access as it
happens, together with the simulated thread making it. The instruments here use that:

- :func:`simulated_thread` — ``(block, thread)`` of the simulated thread running now: the
  block's linear index in the grid and the thread's linear index in its block, computed the way
  CUDA does (x fastest, then y, then z) for 1-D, 2-D and 3-D launches alike.
- :class:`RecordingArray` — records every **read**: ``reads[(block, thread)]`` lists the
  (flat) element indices that thread read, in order. :mod:`gpulab.memory_model` turns them into
  warp requests and sectors.
- :class:`WatchedArray` — records every **write**: which threads wrote each element, and
  whether through a ``cuda.atomic`` function or with a plain store. The exercise checks use it to
  show a data race the simulator's one-thread-after-another schedule hides.
- :func:`poisoned_shared_memory` — while active, every ``cuda.shared.array`` a simulated kernel
  creates starts filled with :func:`poison_value` (as a GPU's shared memory starts with
  leftovers), so a thread that reads a slot before anyone wrote it gets a wrong answer every
  time, not only when the simulator's memory happens to hold something else.
- :func:`launchable` and :func:`python_function` — what a ``@cuda.jit`` kernel object is made
  of (on a GPU and in the simulator alike): the object to launch, and the Python function it
  was made from.

- :func:`limited` — a time limit for simulated kernels: a thread that makes more array accesses
  or passes more barriers than a budget, or a launch that runs longer than a wall-clock limit,
  stops with :class:`KernelDidNotFinishError` instead of hanging the caller.
- :func:`trace_kernel` — "see your own kernel": runs any 1-D, 2-D or 3-D kernel on small inputs
  and returns a :class:`KernelTrace`, every read and write of each array argument (global
  memory) and of each ``cuda.shared.array`` (shared memory), every atomic and every barrier,
  per thread; ``trace.summary()`` says it in words and ``trace.draw()`` draws it (the drawing
  is :func:`gpulab.plots.trace_plot`, which registers itself here with :func:`set_trace_drawer`:
  this floor records, the services layer draws).
- :func:`kernel_recipe` and :func:`rebuild_function` — a kernel's source and the globals it uses,
  as JSON, and the function rebuilt from them in another process: how a trace runs in a
  simulator child when this process drives a GPU, and how the exercise checks compile a
  learner's kernel for a real GPU.

Instruments work only in the simulator (``sim`` tier): on a GPU a kernel gets device memory and
Python sees none of its accesses (:func:`trace_kernel` then runs the kernel's source in a child
process in the simulator). This module is part of the ground floor: it imports numpy, and numba
only inside functions, never the rest of gpulab beyond :mod:`gpulab.device`.
"""

from __future__ import annotations

import ast
import ctypes
import dis
import inspect
import linecache
import operator
import os
import pickle
import re
import subprocess
import sys
import textwrap
import threading
import types
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from gpulab import device

# --- which simulated thread is running ---------------------------------------------------------


def _dim3(value) -> tuple[int, int, int] | None:
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
    block, thread = _dim3(getattr(current, "blockIdx", None)), _dim3(
        getattr(current, "threadIdx", None))
    if block is None or thread is None:
        return None
    # The simulator keeps the launch's dimensions on the thread's block manager (numba 0.5x-0.6x).
    manager = getattr(current, "_manager", None)
    grid_dim = _dim3(getattr(manager, "_grid_dim", None))
    block_dim = _dim3(getattr(manager, "_block_dim", None))
    if grid_dim is None or block_dim is None:
        if block[1:] == (0, 0) and thread[1:] == (0, 0):  # 1-D: the x index is the answer
            return block[0], thread[0]
        raise RuntimeError("gpulab.instruments cannot find the launch's dimensions in this "
                           "version of numba's CUDA simulator; please report this")
    return linear_index(block, grid_dim), linear_index(thread, block_dim)


# --- stand-in arrays -------------------------------------------------------------------------


def element_index(index, shape: tuple[int, ...]) -> int | None:
    """The flat (row-major) element number an integer index selects, negative indices counted
    from the end; None for anything else (a slice, say)."""
    index = index if isinstance(index, tuple) else (index,)
    if len(index) != len(shape):
        return None
    flat = 0
    for position, extent in zip(index, shape, strict=True):
        try:
            position = operator.index(position)
        except TypeError:
            return None
        flat = flat * extent + (position % extent if extent else position)
    return flat


class InstrumentedArray:
    """What both instruments share: a stand-in for a device array, backed by a NumPy array,
    that a simulated kernel indexes like the real thing (``shape``, ``dtype``, ``size``,
    ``ndim``, ``len``) and that a check copies back with :meth:`copy_to_host`.

    An index past the end raises ``IndexError`` as NumPy does, before anything is recorded.
    """

    def __init__(self, array: np.ndarray):
        self._array = np.asarray(array)
        self.shape, self.dtype = self._array.shape, self._array.dtype
        self.size, self.ndim = self._array.size, self._array.ndim
        self._lock = threading.Lock()  # simulated threads are real Python threads

    def __len__(self) -> int:
        return len(self._array)

    def __getitem__(self, index):
        count_access()
        return self._array[index]

    def __setitem__(self, index, value) -> None:
        count_access()
        self._array[index] = value

    def copy_to_host(self) -> np.ndarray:
        return self._array.copy()


class RecordingArray(InstrumentedArray):
    """Records the reads of a simulated kernel: ``reads[(block, thread)]`` is the list of flat
    element indices that thread read, in the order it read them (see :func:`simulated_thread`
    for what ``block`` and ``thread`` count). Reads from outside a kernel are not recorded;
    writes are passed through unrecorded."""

    def __init__(self, array: np.ndarray):
        super().__init__(array)
        self.reads: dict[tuple[int, int], list[int]] = defaultdict(list)

    def __getitem__(self, index):
        count_access()
        value = self._array[index]
        who = simulated_thread()
        element = element_index(index, self.shape)
        if who is not None and element is not None:
            with self._lock:
                self.reads[who].append(element)
        return value


def _atomic_code_objects() -> frozenset:
    """The code of the simulator's ``cuda.atomic`` functions: a write made from one of them is
    atomic."""
    try:
        from numba.cuda.simulator.kernelapi import FakeCUDAAtomic
    except ImportError:  # pragma: no cover - the simulator's layout changed
        return frozenset()
    return frozenset(
        member.__code__ for member in vars(FakeCUDAAtomic).values() if inspect.isfunction(member)
    )


class WatchedArray(InstrumentedArray):
    """Records the writes of a simulated kernel: for each element (its flat index, or the
    ``repr`` of an unusual index), the set of ``(block, thread)`` that wrote it with a plain store
    (``plain_writers``) and through a ``cuda.atomic`` function (``atomic_writers``).

    The simulator runs one block at a time and, within a block, lets each thread run until it
    waits at a barrier, so racing read-modify-writes rarely collide there. Recording the writes
    shows the race anyway: two threads writing one element without an atomic is a race on a GPU
    whatever order the simulator happened to use (:meth:`race`).
    """

    def __init__(self, array: np.ndarray):
        super().__init__(array)
        self.plain_writers: dict[object, set] = defaultdict(set)
        self.atomic_writers: dict[object, set] = defaultdict(set)
        self._atomic_codes = _atomic_code_objects()

    def __setitem__(self, index, value) -> None:
        count_access()
        self._array[index] = value
        # The caller is FakeCUDAAtomic.add & co. for an atomic, the kernel itself otherwise.
        atomic = sys._getframe(1).f_code in self._atomic_codes
        element = element_index(index, self.shape)
        writer = simulated_thread()
        with self._lock:
            writers = self.atomic_writers if atomic else self.plain_writers
            writers[repr(index) if element is None else element].add(writer)

    def race(self) -> tuple[object, list, int] | None:
        """(element, some plain writers, number of writers) for the first element that more
        than one thread wrote with at least one plain write; None if there is no such element."""
        for element, plain in self.plain_writers.items():
            writers = plain | self.atomic_writers.get(element, set())
            if len(writers) > 1:
                return element, sorted(w for w in plain if w is not None)[:2], len(writers)
        return None


# --- shared memory ----------------------------------------------------------------------------


def poison_value(dtype):
    """What :func:`poisoned_shared_memory` fills a new shared array with: a large, finite value
    no right answer is built from (the fourth root of the largest float, about 4.3e9 in float32,
    so products of two and their sums stay finite; 1/1024 of the largest integer, or a quarter
    for 8- and 16-bit ones); None for other dtypes, which are left as they are."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return dtype.type(np.sqrt(np.sqrt(np.finfo(dtype).max)))
    if dtype.kind in "iu":
        largest = int(np.iinfo(dtype).max)
        return dtype.type(largest // 1024 if dtype.itemsize >= 4 else largest // 4)
    return None


def _shared_array_patch(make: Callable) -> Callable:
    """A stand-in for the simulator's ``FakeCUDAShared.array``: one array per
    ``cuda.shared.array`` line per launch, as the simulator makes, but filled with
    :func:`poison_value` and made under a lock, so that every thread of the block gets the same
    one (the simulator's own get-or-create can hand two threads two arrays if Python switches
    threads in between). ``make(shared, values, caller_frame)`` gives what the kernel gets."""
    from numba.cuda.simulator import kernelapi
    from numba.cuda.simulator.kernelapi import FakeCUDAShared

    original = FakeCUDAShared.array
    lock = threading.Lock()

    def array(self, shape, dtype, alignment=None):
        if shape == 0 or alignment is not None:  # dynamic shared memory, or the simulator's
            return original(self, shape, dtype, alignment)  # "alignment unsupported" error
        caller = sys._getframe(1)
        key = (caller.f_code.co_filename, caller.f_lineno)  # as the simulator keys them
        with lock:
            found = self._allocations.get(key)
            if found is None:
                if isinstance(dtype, kernelapi.types.Type):
                    dtype = kernelapi.numpy_support.as_dtype(dtype)
                values = np.empty(shape, dtype)
                if poison_value(values.dtype) is not None:
                    values.fill(poison_value(values.dtype))
                found = make(self, values, caller)
                self._allocations[key] = found
        return found

    return array


@contextmanager
def poisoned_shared_memory() -> Iterator[None]:
    """Within this block, the shared arrays of simulated kernels start with
    :func:`poison_value` in every slot instead of whatever ``np.empty`` returned.

    The simulator allocates one array per ``cuda.shared.array`` line per launch (blocks run one
    after another and see the previous block's values, as on a GPU); only its first contents
    change here. A kernel that never reads a slot before writing it computes the same answer.
    """
    try:
        from numba.cuda.simulator.kernelapi import FakeCUDAShared
    except ImportError:  # pragma: no cover - no simulator: nothing to poison
        yield
        return
    with _patched({(FakeCUDAShared, "array"): _shared_array_patch(
            lambda shared, values, caller: values)}):
        yield


# --- the kernel object ---------------------------------------------------------------------------


def launchable(kernel):
    """The kernel to launch: ``kernel[blocks, threads]`` (a launch configuration, passed by
    mistake or on purpose) is unwrapped to its dispatcher; anything else comes back as it is."""
    return getattr(kernel, "dispatcher", kernel)


def python_function(kernel) -> Callable | None:
    """The Python function a ``@cuda.jit`` kernel was made from (a GPU dispatcher or a simulator
    kernel, launch configurations unwrapped); None when ``kernel`` is not a CUDA kernel."""
    kernel = launchable(kernel)
    function = getattr(kernel, "py_func", None)
    return function if function is not None and hasattr(kernel, "__getitem__") else None


def is_device_function(kernel) -> bool:
    """True for ``@cuda.jit(device=True)``: a function only other kernels can call."""
    kernel = launchable(kernel)
    return bool(getattr(kernel, "_device", False)
                or getattr(kernel, "targetoptions", {}).get("device", False))


# --- a time limit -----------------------------------------------------------------------------


class KernelDidNotFinishError(RuntimeError):
    """A simulated kernel was stopped by :func:`limited`: a thread made more array accesses or
    passed more barriers than its budget, or the launch ran past its wall-clock limit. Almost
    always a loop that never ends (a grid-stride loop whose step is 0 for some thread, a halving
    loop that never halves)."""


@dataclass
class _Limits:
    accesses_per_thread: int | None
    barriers_per_thread: int | None
    seconds: float | None
    active: bool = True
    timed_out: bool = False
    tripped: bool = False  # a thread went past a budget: every thread of the launch stops
    reason: str = ""  # why, for the threads stopped with it


_LIMITS: _Limits | None = None


def _simulated_thread_object():
    """The simulator's thread object running now, or None outside a simulated kernel."""
    current = threading.current_thread()
    return current if hasattr(current, "threadIdx") and hasattr(current, "blockIdx") else None


def count_access() -> None:
    """Count one array access of the simulated thread running now against :func:`limited`'s
    budget; raise :class:`KernelDidNotFinishError` past it. Free outside a limit or a kernel."""
    _count("accesses_per_thread", "gpulab_accesses",
           "made more than {budget} array accesses, many more than the arrays hold: a loop "
           "that never ends?")


def count_barrier() -> None:
    """Count one barrier (``syncthreads``) of the simulated thread running now against
    :func:`limited`'s budget."""
    _count("barriers_per_thread", "gpulab_barriers",
           "passed more than {budget} barriers (syncthreads): a loop that never ends?")


def _count(budget_name: str, counter: str, past_budget: str) -> None:
    """Add one to the running simulated thread's ``counter``; past the limit's ``budget_name``
    stop every thread, saying "a thread " + ``past_budget`` (``{budget}`` filled in)."""
    limits = _LIMITS
    budget = None if limits is None else getattr(limits, budget_name)
    if budget is None:
        return
    thread = _simulated_thread_object()
    if thread is None:
        return
    count = getattr(thread, counter, 0) + 1
    setattr(thread, counter, count)
    if limits.tripped:
        raise KernelDidNotFinishError(f"stopped with another thread: {limits.reason}")
    if count > budget:
        limits.tripped = True
        limits.reason = "a thread " + past_budget.format(budget=budget)
        raise KernelDidNotFinishError(limits.reason.replace("a thread", "this thread", 1))


def access_budget(*arrays, factor: int = 16, minimum: int = 2_000) -> int:
    """A generous per-thread access budget for a launch on ``arrays`` (anything with ``size``;
    others are ignored): ``factor`` times all their elements, at least ``minimum``. A thread
    that needs more is looping."""
    elements = sum(int(getattr(a, "size", 0) or 0) for a in arrays if hasattr(a, "shape"))
    return max(minimum, factor * elements)


def _stop_running_threads(limits: _Limits, timed_out: bool = True) -> None:
    """Raise KernelDidNotFinishError in every simulated thread still running code: the watchdog
    (``timed_out``), and the clean-up after a budget stopped one thread, so that its
    neighbours do not loop on in the background."""
    if not limits.active:
        return
    limits.timed_out = limits.timed_out or timed_out
    limits.tripped = True
    for thread in threading.enumerate():
        if (hasattr(thread, "syncthreads_event") and thread.is_alive()
                and not getattr(thread, "syncthreads_blocked", False)):
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(thread.ident), ctypes.py_object(KernelDidNotFinishError))


@contextmanager
def limited(accesses_per_thread: int | None = None, barriers_per_thread: int | None = None,
            seconds: float | None = None) -> Iterator[_Limits]:
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
    limits = _Limits(accesses_per_thread, barriers_per_thread, seconds)
    try:
        from numba.cuda.simulator.cudadrv.devicearray import FakeWithinKernelCUDAArray
        from numba.cuda.simulator.kernelapi import FakeCUDAModule
    except ImportError:  # not the simulator: nothing to limit here
        yield limits
        return
    previous = _LIMITS
    patches = {
        (FakeWithinKernelCUDAArray, "__getitem__"): _counting(
            FakeWithinKernelCUDAArray.__getitem__),
        (FakeWithinKernelCUDAArray, "__setitem__"): _counting(
            FakeWithinKernelCUDAArray.__setitem__),
    }
    for name in ("syncthreads", "syncthreads_count", "syncthreads_and", "syncthreads_or"):
        patches[FakeCUDAModule, name] = _counting(getattr(FakeCUDAModule, name), count_barrier)
    watchdog = None
    with _patched(patches):
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
            if limits.tripped:  # stop whatever of the stopped launch still runs
                _stop_running_threads(limits, timed_out=False)
            limits.active = False
            _LIMITS = previous


def _counting(method, count=count_access):
    """``method``, calling ``count`` (:func:`count_access`, :func:`count_barrier`) first."""
    def counted(self, *args):
        count()
        return method(self, *args)

    counted.gpulab_original = method
    return counted


@contextmanager
def _patched(patches: dict) -> Iterator[None]:
    """Set ``(owner, name) -> value`` class attributes for the block, then put them back."""
    originals = {key: key[0].__dict__[key[1]] for key in patches}
    try:
        for (owner, name), value in patches.items():
            setattr(owner, name, value)
        yield
    finally:
        for (owner, name), value in originals.items():
            setattr(owner, name, value)


# --- see your own kernel: the trace -----------------------------------------------------------

COUNT_KEYS = ("global_reads", "global_writes", "shared_reads", "shared_writes", "atomics",
              "barriers")
_SHARED_NAME = re.compile(r"(\w+)\s*=\s*(?:\w+\.)*shared\.array\(")
_ATOMIC_FUNCTIONS = ("add", "sub", "and_", "or_", "xor", "inc", "dec", "exch", "max", "min",
                     "nanmax", "nanmin", "compare_and_swap", "cas")


class Access(NamedTuple):
    """One access of a traced kernel: which thread (see :class:`KernelTrace`), which array (the
    kernel's parameter name, or ``shared:<variable>`` for a ``cuda.shared.array``), the index
    (a tuple, one int per axis, negative indices counted from the end), ``kind`` ('read',
    'write' or 'atomic': one per ``cuda.atomic`` call) and ``space`` ('global' or 'shared')."""

    thread: tuple
    array: str
    index: tuple
    kind: str
    space: str


def _dims(value) -> tuple[int, ...]:
    values = (value,) if isinstance(value, int | np.integer) else tuple(value)
    return tuple(int(v) for v in values)


class _TraceLog:
    """Where the traced arrays of one launch write their records."""

    def __init__(self, dimensions: int):
        self.dimensions = dimensions
        self.accesses: list[Access] = []
        self.barriers: dict[tuple, int] = defaultdict(int)
        self.shapes: dict[str, tuple] = {}
        self.spaces: dict[str, str] = {}
        self.lock = threading.Lock()

    def thread(self):
        """The running simulated thread's id in CUDA's numbering, or None outside a kernel."""
        current = _simulated_thread_object()
        if current is None:
            return None
        block, thread = _dim3(current.blockIdx), _dim3(current.threadIdx)
        if self.dimensions == 1:
            return block[0], thread[0]
        return block[:self.dimensions], thread[:self.dimensions]

    def record(self, array: str, index: tuple, kind: str, space: str) -> None:
        who = self.thread()
        if who is not None:
            with self.lock:
                self.accesses.append(Access(who, array, index, kind, space))


def _normal_index(index, shape: tuple[int, ...]) -> tuple | None:
    """The index as a tuple of non-negative ints, or None for slices and the like."""
    index = index if isinstance(index, tuple) else (index,)
    if len(index) != len(shape):
        return None
    try:
        return tuple(operator.index(i) % n if n else operator.index(i)
                     for i, n in zip(index, shape, strict=True))
    except TypeError:
        return None


class TracingArray(InstrumentedArray):
    """A stand-in array that records each read and write of a simulated kernel, with the thread
    that made it, in a trace log (see :func:`trace_kernel`). Atomics are recorded by the
    patched ``cuda.atomic`` functions, once per call, not as the read and write they are made
    of."""

    def __init__(self, array: np.ndarray, name: str, space: str, log: _TraceLog):
        super().__init__(array)
        self.name, self.space, self.log = name, space, log
        log.shapes[name], log.spaces[name] = self.shape, space

    def __getitem__(self, index):
        count_access()
        value = self._array[index]
        where = _normal_index(index, self.shape)
        if where is not None:
            self.log.record(self.name, where, "read", self.space)
        return value

    def __setitem__(self, index, value) -> None:
        count_access()
        self._array[index] = value
        where = _normal_index(index, self.shape)
        if where is not None:
            self.log.record(self.name, where, "write", self.space)

    def record_atomic(self, index) -> None:
        count_access()
        where = _normal_index(index, self.shape)
        if where is not None:
            self.log.record(self.name, where, "atomic", self.space)


def _tracing_patches(log: _TraceLog) -> dict:
    """Patches of the simulator for one traced launch: shared arrays become TracingArrays
    (poisoned, as :func:`poisoned_shared_memory` does), atomics and barriers are recorded."""
    from numba.cuda.simulator.kernelapi import FakeCUDAAtomic, FakeCUDAModule, FakeCUDAShared

    def traced_shared(shared, values, caller):
        line = linecache.getline(caller.f_code.co_filename, caller.f_lineno)
        named = _SHARED_NAME.search(line)
        name = f"shared:{named.group(1) if named else len(shared._allocations)}"
        return TracingArray(values, name, "shared", log)

    def atomic(method, name):
        def traced(self, array, *args):
            if isinstance(array, TracingArray):
                index = (0,) * array.ndim if name == "compare_and_swap" else args[0]
                array.record_atomic(index)
                array = array._array
            return method(self, array, *args)
        return traced

    def barrier(method):
        def traced(self, *args):
            who = log.thread()
            if who is not None:
                with log.lock:
                    log.barriers[who] += 1
            return method(self, *args)
        return traced

    patches = {(FakeCUDAShared, "array"): _shared_array_patch(traced_shared)}
    for name in _ATOMIC_FUNCTIONS:
        if name in FakeCUDAAtomic.__dict__:
            patches[FakeCUDAAtomic, name] = atomic(FakeCUDAAtomic.__dict__[name], name)
    for name in ("syncthreads", "syncthreads_count", "syncthreads_and", "syncthreads_or"):
        # limited() may have wrapped these already: count on top of whatever is there
        patches[FakeCUDAModule, name] = barrier(FakeCUDAModule.__dict__[name])
    return patches


def thread_label(thread, short: bool = False) -> str:
    """How a trace names a thread: 'block 1, thread 3' ('b1 t3' short), or for 2-D
    'block (1, 0), thread (3, 2)' ('b(1,0) t(3,2)' short)."""
    block, within = thread

    def text(value, sep):
        return str(value) if isinstance(value, int) else "(" + sep.join(map(str, value)) + ")"

    if short:
        return f"b{text(block, ',')} t{text(within, ',')}"
    return f"block {text(block, ', ')}, thread {text(within, ', ')}"


@dataclass
class KernelTrace:
    """What one traced launch did (see :func:`trace_kernel`).

    Threads are named as CUDA numbers them: ``(block, thread)`` with ``block`` =
    ``cuda.blockIdx.x`` and ``thread`` = ``cuda.threadIdx.x`` for a 1-D launch, and
    ``((blockIdx.x, blockIdx.y), (threadIdx.x, threadIdx.y))`` for a 2-D one (x first, as in
    ``cuda.grid(2)``; 3-D adds z). ``threads`` lists every thread of the launch, idle ones
    included, in CUDA's order (x fastest); ``accesses`` every :class:`Access` in the order the
    simulator made them; ``barrier_counts`` how many barriers (``syncthreads``) each thread
    passed. ``arrays`` holds each traced array's values after the kernel (copies: the caller's
    arrays are never changed), ``shapes`` and ``spaces`` their shapes and memory spaces.
    ``error`` is what stopped the kernel, if something did (the trace up to it is kept).
    """

    kernel: str
    grid: int | tuple
    block: int | tuple
    threads: list
    accesses: list[Access]
    barrier_counts: dict
    shapes: dict[str, tuple]
    spaces: dict[str, str]
    arrays: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    error: str | None = None

    def __post_init__(self):
        self._counts: dict | None = None

    # counts
    def per_thread(self) -> dict:
        """``{thread: counts}`` for every thread of the launch (see :meth:`counts`)."""
        if self._counts is None:
            counts = {t: dict.fromkeys(COUNT_KEYS, 0) for t in self.threads}
            for access in self.accesses:
                row = counts.setdefault(access.thread, dict.fromkeys(COUNT_KEYS, 0))
                key = ("atomics" if access.kind == "atomic"
                       else f"{access.space}_{access.kind}s")
                row[key] += 1
            for thread, number in self.barrier_counts.items():
                counts.setdefault(thread, dict.fromkeys(COUNT_KEYS, 0))["barriers"] = number
            self._counts = counts
        return self._counts

    def counts(self, thread) -> dict:
        """One thread's counts: ``global_reads``, ``global_writes`` (plain stores),
        ``shared_reads``, ``shared_writes``, ``atomics`` (``cuda.atomic`` calls, global or
        shared) and ``barriers``. ``thread`` as in :attr:`threads`."""
        thread = self._thread(thread)
        return dict(self.per_thread().get(thread, dict.fromkeys(COUNT_KEYS, 0)))

    def _thread(self, thread):
        if isinstance(thread, list):
            thread = tuple(tuple(t) if isinstance(t, list) else t for t in thread)
        return thread

    def _values(self, key: str) -> list[int]:
        if key not in COUNT_KEYS:
            raise KeyError(f"{key!r} is not a count; the counts are {', '.join(COUNT_KEYS)}")
        return [row[key] for row in self.per_thread().values()]

    def max_per_thread(self, key: str) -> int:
        """The largest count ``key`` (e.g. ``"global_reads"``) any thread has."""
        return max(self._values(key), default=0)

    def mean_per_thread(self, key: str) -> float:
        """Count ``key`` averaged over every thread of the launch, idle ones included."""
        values = self._values(key)
        return float(np.mean(values)) if values else 0.0

    def per_block(self, key: str) -> dict:
        """``{block: total of count key over its threads}``, e.g. atomics per block."""
        self._values(key)  # checks the key
        totals: dict = {}
        for thread, row in self.per_thread().items():
            totals[thread[0]] = totals.get(thread[0], 0) + row[key]
        return totals

    # which thread touched which element
    def touched(self, array: str, kind: str, block=None) -> dict:
        """``{index: [threads]}`` for the elements of ``array`` accessed as ``kind`` ('read',
        'write', 'atomic'), threads in the order they came, each once; only the threads of
        ``block`` if given (each block has its own copy of a shared array)."""
        found: dict = {}
        for access in self.accesses:
            if (access.array == array and access.kind == kind
                    and (block is None or access.thread[0] == block)):
                threads = found.setdefault(access.index, [])
                if access.thread not in threads:
                    threads.append(access.thread)
        return found

    @property
    def dimensions_of_threads(self) -> int:
        """1 for a 1-D launch, 2 or 3 otherwise."""
        return 1 if isinstance(self.block, int) else len(self.block)

    @property
    def global_arrays(self) -> list[str]:
        return [name for name, space in self.spaces.items() if space == "global"]

    @property
    def shared_arrays(self) -> list[str]:
        return [name for name, space in self.spaces.items() if space == "shared"]

    @property
    def launch(self) -> str:
        """'2 blocks of 8 threads', or '2 x 2 blocks of 4 x 4 threads'."""
        if isinstance(self.block, int):
            return f"{self.grid} blocks of {self.block} threads"
        return (f"{' x '.join(map(str, self.grid))} blocks of "
                f"{' x '.join(map(str, self.block))} threads")

    def summary(self) -> str:
        """What the kernel did, in plain words: per-thread averages and maxima of each count,
        atomics per block, and which elements several threads wrote."""
        n = len(self.threads)
        lines = [f"{self.kernel} on {self.launch} ({n} threads):"]
        if self.error:
            lines.append(f"- it stopped early: {self.error}")

        def each(space):
            reads, writes = f"{space}_reads", f"{space}_writes"
            return (f"each thread read {self.mean_per_thread(reads):.3g} values on average "
                    f"(at most {self.max_per_thread(reads)}) and wrote "
                    f"{self.mean_per_thread(writes):.3g} (at most "
                    f"{self.max_per_thread(writes)})")

        lines.append(f"- global memory: {each('global')}.")
        if self.shared_arrays:
            lines.append(f"- shared memory ({', '.join(self.shared_arrays)}): {each('shared')}.")
        barriers = sorted(set(self._values("barriers")))
        if barriers != [0]:
            same = (f"every thread {barriers[0]}" if len(barriers) == 1
                    else f"from {barriers[0]} to {barriers[-1]} per thread: not every thread "
                    "passed the same barriers")
            lines.append(f"- barriers (syncthreads): {same}.")
        atomics = self.per_block("atomics")
        if any(atomics.values()):
            shown = ", ".join(f"block {b} made {k}" for b, k in list(atomics.items())[:4])
            more = ", ..." if len(atomics) > 4 else ""
            lines.append(f"- atomics: {sum(atomics.values())} in all; {shown}{more}.")
        for name in self.global_arrays:
            writers = self.touched(name, "write")
            shared = {i: w for i, w in writers.items() if len(w) > 1}
            if shared:
                index, who = next(iter(shared.items()))
                lines.append(
                    f"- {name}: {len(shared)} element(s) written by more than one thread "
                    f"without an atomic, e.g. {name}[{', '.join(map(str, index))}] by "
                    f"{len(who)} threads ({thread_label(who[0])} and {thread_label(who[1])}).")
            unwritten = int(np.prod(self.shapes[name])) - len(writers) - len(
                self.touched(name, "atomic"))
            if writers and unwritten > 0:
                lines.append(f"- {name}: {unwritten} element(s) never written.")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        return (f"<KernelTrace of {self.kernel} on {self.launch}: {len(self.accesses)} "
                "accesses; print(trace) says what it did, trace.draw() draws it>")

    def _repr_pretty_(self, printer, cycle) -> None:  # what a notebook shows for `trace`
        printer.text(self.summary())

    def draw(self, array: str | None = None, **options):
        """A matplotlib Figure: which thread wrote and which read each element of ``array``
        (every global array if None), with per-thread counts (:func:`gpulab.plots.trace_plot`)."""
        if _TRACE_DRAWER is None:
            raise RuntimeError("drawing a trace needs gpulab.plots: run `import gpulab.plots` "
                               "first (gpulab.trace does it for you)")
        return _TRACE_DRAWER(self, array, **options)


_TRACE_DRAWER: Callable | None = None


def set_trace_drawer(function: Callable) -> None:
    """Called by :mod:`gpulab.plots` on import: the function :meth:`KernelTrace.draw` uses."""
    global _TRACE_DRAWER
    _TRACE_DRAWER = function


def _all_threads(grid: tuple[int, ...], block: tuple[int, ...], dimensions: int) -> list:
    def points(extent):  # CUDA's order: x fastest
        return [tuple(reversed(p)) for p in np.ndindex(*reversed(extent))]

    blocks, threads = points(grid), points(block)
    if dimensions == 1:
        return [(b[0], t[0]) for b in blocks for t in threads]
    return [(b, t) for b in blocks for t in threads]


TRACE_SECONDS = 60.0  # wall-clock limit of one traced launch


def _host_copy(value):
    """A NumPy copy of an array argument (NumPy, device or instrumented array); None for a
    scalar."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, InstrumentedArray):
        return value.copy_to_host()
    if hasattr(value, "copy_to_host") and hasattr(value, "shape"):
        return np.asarray(value.copy_to_host()).copy()
    return None


def trace_kernel(kernel, blocks, threads, *args) -> KernelTrace:
    """Run ``kernel[blocks, threads](*args)`` in the simulator and record, per thread, every read
    and write of each array argument (global memory) and of each ``cuda.shared.array``, every
    ``cuda.atomic`` call and every barrier: see your own kernel.

    ``kernel`` is any ``@cuda.jit`` kernel (yours, from a notebook cell, or gpulab's);
    ``blocks`` and ``threads`` are ints or tuples, as in a launch. Array arguments (NumPy or
    device arrays) are copied and traced, so yours are never changed (the values after the
    kernel are in ``trace.arrays``); scalars are passed as they are. Keep inputs small (tens of
    elements): every access is recorded. Shared memory starts poisoned
    (:func:`poison_value`), and a loop that never ends is stopped (:func:`limited`). If the
    kernel raises, the trace up to that point comes back with ``error`` set.

    In the ``sim`` tier the kernel runs here. Where this process drives a GPU (``gpu``) or
    compiles (``ptx``), numba's simulator cannot run in it, so the kernel's source and the
    globals it uses (:func:`kernel_recipe`) go to a child process that runs the simulator:
    the kernel must be defined in a file or notebook cell, and use only modules, numbers,
    NumPy types, small arrays and other kernels as globals.

    Example::

        x = np.arange(13, dtype=np.float32); out = np.zeros(13, np.float32)
        trace = trace_kernel(my_kernel, 2, 8, x, out)
        print(trace.summary()); trace.draw()
    """
    function = python_function(kernel)
    if function is None:
        raise TypeError(f"trace_kernel needs a @cuda.jit kernel, not {type(kernel).__name__}")
    grid, block = _dims(blocks), _dims(threads)
    if len(grid) != len(block) or not 1 <= len(grid) <= 3:
        raise ValueError(f"blocks {blocks!r} and threads {threads!r} must both be ints, or "
                         "tuples of the same length (2 or 3)")
    if device.tier() != "sim":
        return _trace_in_child(kernel, blocks, threads, args)
    names = _parameter_names(function, len(args))
    log = _TraceLog(len(grid))
    traced = []
    for name, value in zip(names, args, strict=True):
        values = _host_copy(value)
        traced.append(value if values is None else TracingArray(values, name, "global", log))
    error = None
    budget = access_budget(*[a for a in traced if isinstance(a, TracingArray)])
    with ExitStack() as stack:
        limits = stack.enter_context(limited(budget, budget, TRACE_SECONDS))
        stack.enter_context(_patched(_tracing_patches(log)))
        try:
            launchable(kernel)[blocks, threads](*traced)
        except Exception as exc:  # the learner's kernel: keep the trace, say what stopped it
            error = _stop_reason(exc, limits)
    dimensions = len(grid)
    return KernelTrace(
        kernel=function.__name__,
        grid=grid[0] if dimensions == 1 else grid,
        block=block[0] if dimensions == 1 else block,
        threads=_all_threads(grid, block, dimensions),
        accesses=list(log.accesses),
        barrier_counts=dict(log.barriers),
        shapes=dict(log.shapes),
        spaces=dict(log.spaces),
        arrays={a.name: a.copy_to_host() for a in traced if isinstance(a, TracingArray)},
        error=error,
    )


def _parameter_names(function, count: int) -> list[str]:
    try:
        names = list(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        names = []
    if len(names) != count:
        raise TypeError(f"{function.__name__} takes {len(names)} argument(s) "
                        f"({', '.join(names)}), but {count} were given")
    return names


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


def _stop_reason(exc: BaseException, limits: _Limits) -> str:
    where, text = simulator_thread(str(exc))
    where = f" in {where}" if where else ""
    if isinstance(exc, KernelDidNotFinishError):
        if limits.timed_out or not text:
            text = f"it ran for more than {limits.seconds:g} s: a loop that never ends?"
        return f"the kernel did not finish{where}: {text}"
    return f"{type(exc).__name__}{where}: {text}"


# --- a kernel's recipe: its source and globals, to rebuild it in another process ---------------

_MAX_ARRAY_GLOBAL = 4096  # elements: a bigger global array is not sent


def _global_names(code: types.CodeType) -> set[str]:
    """Names the code loads as globals (not attribute names), nested code included."""
    names = set()
    for instruction in dis.get_instructions(code):
        if instruction.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            names.add(instruction.argval)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            names |= _global_names(constant)
    return names


def _describe(value, seen: set) -> dict:
    """A JSON description of a global a kernel uses (see :func:`kernel_recipe`)."""
    if isinstance(value, types.ModuleType):
        return {"kind": "module", "name": value.__name__}
    if type(value).__name__ == "FakeCUDAModule":  # numba.cuda while a simulated kernel runs
        return {"kind": "module", "name": "numba.cuda"}
    if isinstance(value, bool | int | float | complex | str) or value is None:
        return {"kind": "value", "type": type(value).__name__, "value": repr(value)}
    if isinstance(value, np.generic):
        return {"kind": "npscalar", "dtype": value.dtype.name, "value": repr(value.item())}
    if isinstance(value, type) and issubclass(value, np.generic):
        return {"kind": "nptype", "name": np.dtype(value).name}
    if isinstance(value, np.dtype):
        return {"kind": "npdtype", "name": value.name}
    if isinstance(value, np.ndarray) and value.size <= _MAX_ARRAY_GLOBAL:
        return {"kind": "ndarray", "dtype": value.dtype.name, "shape": list(value.shape),
                "data": value.ravel().tolist()}
    if isinstance(value, tuple):
        items = [_describe(item, seen) for item in value]
        if all(item["kind"] != "unknown" for item in items):
            return {"kind": "tuple", "items": items}
        return {"kind": "unknown", "type": "tuple"}
    numba_type = _numba_type_name(value)
    if numba_type:
        return {"kind": "numba_type", "name": numba_type}
    function = python_function(value)
    if function is not None or is_device_function(value):
        function = function or getattr(launchable(value), "py_func", None)
        if function is not None and id(function) not in seen:
            recipe = kernel_recipe(value, seen)
            if recipe is not None:
                return {"kind": "cuda", "device": is_device_function(value), "recipe": recipe}
    if inspect.isfunction(value) and id(value) not in seen:
        recipe = _function_recipe(value, seen)
        if recipe is not None:
            return {"kind": "function", "recipe": recipe}
    home = getattr(value, "__module__", None), getattr(value, "__name__", None)
    if (callable(value) and all(isinstance(part, str) for part in home)
            and getattr(sys.modules.get(home[0]), home[1], None) is value):
        return {"kind": "attribute", "module": home[0], "name": home[1]}  # from numpy import sqrt
    return {"kind": "unknown", "type": type(value).__name__}


def _numba_type_name(value) -> str | None:
    module = type(value).__module__ or ""
    if not module.startswith("numba"):
        return None
    try:
        import numba
    except ImportError:  # pragma: no cover
        return None
    name = str(value)
    return name if getattr(numba.types, name, None) is value else None


def _function_recipe(function, seen: set) -> dict | None:
    seen = seen | {id(function)}
    try:
        source = textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError):
        return None
    names = _global_names(function.__code__)
    scope = dict(function.__globals__)
    if function.__closure__:
        scope.update(zip(function.__code__.co_freevars,
                         (cell.cell_contents for cell in function.__closure__), strict=True))
        names |= set(function.__code__.co_freevars)
    described = {}
    for name in sorted(names):
        if name in scope:
            described[name] = _describe(scope[name], seen)
    return {"name": function.__name__, "source": source, "globals": described}


def kernel_recipe(kernel, seen: set | None = None) -> dict | None:
    """The kernel's source and a description of every global (and closure variable) it uses,
    as JSON-able data: modules by name, numbers, NumPy types and scalars, small arrays, tuples
    of those, and other kernels and device functions (their own recipes). A global of any other
    kind is described as ``{"kind": "unknown"}``. None when the source cannot be found."""
    function = (kernel if inspect.isfunction(kernel)
                else python_function(kernel) or getattr(launchable(kernel), "py_func", None))
    if function is None:
        return None
    return _function_recipe(function, seen or set())


def unknown_globals(recipe: dict) -> list[str]:
    """Names of the globals :func:`rebuild_function` cannot rebuild, nested recipes included."""
    found = []
    for name, described in recipe["globals"].items():
        if described["kind"] == "unknown":
            found.append(name)
        elif described["kind"] in ("cuda", "function"):
            found += unknown_globals(described["recipe"])
    return found


def _rebuild_value(described: dict, jit_kernel, jit_device):
    kind = described["kind"]
    if kind == "module":
        import importlib

        return importlib.import_module(described["name"])
    if kind == "value":
        text, kind_of = described["value"], described["type"]
        if kind_of == "NoneType":
            return None
        if kind_of == "str":
            return ast.literal_eval(text)
        return {"bool": lambda t: t == "True", "int": int, "float": float,
                "complex": complex}[kind_of](text)
    if kind == "npscalar":
        return np.dtype(described["dtype"]).type(float(described["value"])
                                                if described["dtype"].startswith(("f", "c"))
                                                else ast.literal_eval(described["value"]))
    if kind == "nptype":
        return np.dtype(described["name"]).type
    if kind == "npdtype":
        return np.dtype(described["name"])
    if kind == "ndarray":
        return np.array(described["data"], dtype=described["dtype"]).reshape(described["shape"])
    if kind == "tuple":
        return tuple(_rebuild_value(item, jit_kernel, jit_device) for item in described["items"])
    if kind == "numba_type":
        import numba

        return getattr(numba.types, described["name"])
    if kind == "cuda":
        function = rebuild_function(described["recipe"], jit_kernel, jit_device)
        return jit_device(function) if described["device"] else jit_kernel(function)
    if kind == "function":
        return rebuild_function(described["recipe"], jit_kernel, jit_device)
    if kind == "attribute":
        import importlib

        return getattr(importlib.import_module(described["module"]), described["name"])
    raise ValueError(f"cannot rebuild a global of kind {described.get('type', kind)!r}")


def rebuild_function(recipe: dict, jit_kernel=None, jit_device=None) -> Callable:
    """The plain Python function a :func:`kernel_recipe` describes, its decorators removed, with
    its globals rebuilt (kernels and device functions it calls made with ``jit_kernel`` and
    ``jit_device``, by default ``cuda.jit`` and ``cuda.jit(device=True, inline="always")``).
    Its source is registered with :mod:`linecache` under ``<kernel NAME>``, so tracebacks and
    :func:`inspect.getsource` work."""
    if jit_kernel is None or jit_device is None:
        from numba import cuda

        jit_kernel = jit_kernel or cuda.jit
        jit_device = jit_device or cuda.jit(device=True, inline="always")
    tree = ast.parse(recipe["source"])
    definition = next(node for node in tree.body if isinstance(node, ast.FunctionDef))
    definition.decorator_list = []
    filename = f"<kernel {recipe['name']}>"
    lines = recipe["source"].splitlines(keepends=True)
    linecache.cache[filename] = (len(recipe["source"]), None, lines, filename)
    scope = {"__name__": "gpulab_rebuilt", "__builtins__": __builtins__}
    for name, described in recipe["globals"].items():
        if described["kind"] != "unknown":
            scope[name] = _rebuild_value(described, jit_kernel, jit_device)
    exec(compile(ast.Module([definition], []), filename, "exec"), scope)  # noqa: S102
    return scope[definition.name]


def _trace_in_child(kernel, blocks, threads, args) -> KernelTrace:
    """:func:`trace_kernel` in a child process that runs numba's simulator."""
    recipe = kernel_recipe(kernel)
    if recipe is None:
        raise RuntimeError(
            "tracing runs the kernel in numba's simulator, which cannot run in a process that "
            "uses a GPU, and this kernel's source was not found to run it in a child process: "
            "define it in a file or a notebook cell, or restart with GPULAB_DEVICE=sim")
    missing = unknown_globals(recipe)
    if missing:
        raise RuntimeError(
            f"tracing runs the kernel in a simulator child process, but the kernel uses "
            f"{', '.join(missing)}, which cannot be sent there (only modules, numbers, NumPy "
            "types, small arrays and other kernels can): restart with GPULAB_DEVICE=sim to "
            "trace it here")
    values = [_host_copy(a) if _host_copy(a) is not None else a for a in args]
    request = pickle.dumps((recipe, blocks, threads, values))
    environment = dict(os.environ, GPULAB_DEVICE="sim", NUMBA_ENABLE_CUDASIM="1")
    completed = subprocess.run([sys.executable, "-m", "gpulab.instruments", "--trace"],
                               input=request, capture_output=True, env=environment,
                               check=False, timeout=TRACE_SECONDS + 60)
    if completed.returncode != 0:
        raise RuntimeError("the simulator process that traces the kernel failed:\n"
                           + completed.stderr.decode(errors="replace")[-3000:])
    return pickle.loads(completed.stdout)  # noqa: S301 - our own child's answer


def _serve_trace() -> None:
    """Child side of :func:`_trace_in_child`: a pickled request on stdin, a trace on stdout."""
    from numba import cuda

    from gpulab import instruments  # this module under its own name, not __main__, so that
    # the parent can unpickle the KernelTrace

    recipe, blocks, threads, values = pickle.loads(sys.stdin.buffer.read())  # noqa: S301
    kernel = cuda.jit(instruments.rebuild_function(recipe))
    trace = instruments.trace_kernel(kernel, blocks, threads, *values)
    sys.stdout.buffer.write(pickle.dumps(trace))



__all__ = [
    "COUNT_KEYS", "Access", "InstrumentedArray", "KernelDidNotFinishError", "KernelTrace",
    "RecordingArray", "TracingArray", "WatchedArray", "access_budget", "count_access",
    "count_barrier", "element_index", "is_device_function", "kernel_recipe", "launchable",
    "limited", "linear_index", "poison_value", "poisoned_shared_memory", "python_function",
    "rebuild_function", "set_trace_drawer", "simulated_thread", "simulator_thread", "thread_label",
    "trace_kernel",
    "unknown_globals",
]


if __name__ == "__main__":
    if "--trace" in sys.argv:
        _serve_trace()
