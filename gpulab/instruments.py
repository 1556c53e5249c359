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

Instruments work only in the simulator (``sim`` tier): on a GPU a kernel gets device memory and
Python sees none of its accesses. This module is part of the ground floor: it imports numpy,
and numba only inside functions, never the rest of gpulab beyond :mod:`gpulab.device`.
"""

from __future__ import annotations

import inspect
import operator
import sys
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np

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
        return self._array[index]

    def __setitem__(self, index, value) -> None:
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


class _PoisonOnStore(dict):
    """The simulator's table of a launch's shared arrays: an array is filled with poison as it
    is stored, before any other simulated thread can get it."""

    def __setitem__(self, key, array) -> None:
        if isinstance(array, np.ndarray) and poison_value(array.dtype) is not None:
            array.fill(poison_value(array.dtype))
        super().__setitem__(key, array)


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
    original = FakeCUDAShared.__init__

    def poisoning_init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        # numba keeps the arrays in ``_allocations`` (numba-cuda 0.x); tested in
        # tests/test_instruments.py, so a change in the simulator shows there.
        if type(getattr(self, "_allocations", None)) is dict:
            self._allocations = _PoisonOnStore(self._allocations)

    FakeCUDAShared.__init__ = poisoning_init
    try:
        yield
    finally:
        FakeCUDAShared.__init__ = original


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


__all__ = [
    "InstrumentedArray", "RecordingArray", "WatchedArray", "element_index", "is_device_function",
    "launchable", "linear_index", "poison_value", "poisoned_shared_memory", "python_function",
    "simulated_thread",
]
