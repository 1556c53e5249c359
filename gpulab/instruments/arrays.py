"""Stand-in arrays that record which simulated CUDA thread touched what, and shared memory that
starts poisoned.

An argument that is not a device array but an object with ``__getitem__`` / ``__setitem__``
sees each access of a simulated kernel as it happens, together with the simulated thread making
it (:func:`gpulab.instruments.simulator.simulated_thread`):

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

from gpulab.instruments.limits import count_access
from gpulab.instruments.simulator import patched, shared_array_maker, simulated_thread


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
        value = self._array[index]
        return ArrayView.of(self, value)

    def __setitem__(self, index, value) -> None:
        count_access()
        self._array[index] = value

    def copy_to_host(self) -> np.ndarray:
        return self._array.copy()


class ArrayView:
    """A slice a simulated kernel took of an instrumented array (``v = out[1:]``, ``out[0:1]``):
    its reads and writes go to the parent array at the parent's own elements, so that they are
    recorded there as a direct access would be (a plain ``v[0] += p`` from several threads is a
    race on the parent's element). An element's place in the parent comes from its byte offset
    and the parent's strides; a parent whose strides do not allow that gives plain slices."""

    def __init__(self, parent: InstrumentedArray, array: np.ndarray):
        self._parent, self._array = parent, array
        self.shape, self.dtype = array.shape, array.dtype
        self.size, self.ndim = array.size, array.ndim

    @staticmethod
    def of(parent, value):
        """``value`` (what indexing ``parent._array`` gave) as a view of ``parent`` when it is
        an array that shares the parent's memory; anything else as it is."""
        if not isinstance(value, np.ndarray) or value.ndim == 0:
            return value
        strides = parent._array.strides
        if (any(stride <= 0 for stride in strides) or list(strides) != sorted(strides, reverse=True)
                or not np.may_share_memory(value, parent._array)):
            return value
        return ArrayView(parent, value)

    def __len__(self) -> int:
        return len(self._array)

    def _element(self, index) -> tuple[int, ...] | None:
        """The parent's index of the view's element ``index``; None for a slice of the view."""
        index = index if isinstance(index, tuple) else (index,)
        if len(index) != self.ndim:
            return None
        try:
            index = tuple(operator.index(i) % n for i, n in zip(index, self.shape, strict=True))
        except TypeError:
            return None
        offset = (self._array.__array_interface__["data"][0]
                  - self._parent._array.__array_interface__["data"][0]
                  + sum(i * stride for i, stride in zip(index, self._array.strides, strict=True)))
        where = []
        for stride in self._parent._array.strides:
            position, offset = divmod(offset, stride)
            where.append(int(position))
        return tuple(where)

    def __getitem__(self, index):
        value = self._array[index]  # an index past the end raises here, as NumPy does
        where = self._element(index)
        if where is None:
            return ArrayView.of(self._parent, value)
        return self._parent[where]

    def __setitem__(self, index, value) -> None:
        self._array[index]  # noqa: B018 - an index past the end raises here, as NumPy does
        where = self._element(index)
        if where is None:
            self._array[index] = value  # a whole slice at once: not a kernel's element write
            return
        self._parent[where] = value

    def record_atomic(self, index) -> None:
        """For a traced atomic on the view: recorded on the parent's element."""
        where = self._element(index)
        if where is not None and hasattr(self._parent, "record_atomic"):
            self._parent.record_atomic(where)

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
        return ArrayView.of(self, value)


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
        # The caller is FakeCUDAAtomic.add & co. for an atomic, the kernel itself otherwise
        # (through a view's __setitem__ for a view: the frame above it, then).
        caller = sys._getframe(1)
        if caller.f_code is ArrayView.__setitem__.__code__:
            caller = caller.f_back
        atomic = caller.f_code in self._atomic_codes
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

    def writes_by_thread(self) -> dict:
        """``{(block, thread): [flat elements it wrote with a plain store]}``, each list sorted,
        as :func:`gpulab.memory_model.summarise` takes them."""
        found: dict = {}
        for element, writers in self.plain_writers.items():
            for writer in writers:
                if writer is not None and isinstance(element, int):
                    found.setdefault(writer, []).append(element)
        return {who: sorted(elements) for who, elements in found.items()}


def poison_value(dtype):
    """What :func:`poisoned_shared_memory` fills a new shared array with: a large, finite value
    no right answer is built from (the fourth root of the largest float, about 4.3e9 in float32,
    so products of two and their sums stay finite; 1/1024 of the largest integer, or a quarter
    for 8- and 16-bit ones); None for other dtypes, which are left as they are. Not NaN: the
    checks read NaN in an output as never written, and some kernels skip or count NaN as data
    (a poisoned read multiplied by 0 is 0: ch03 finds such reads in its trace instead)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return dtype.type(np.sqrt(np.sqrt(np.finfo(dtype).max)))
    if dtype.kind in "iu":
        largest = int(np.iinfo(dtype).max)
        return dtype.type(largest // 1024 if dtype.itemsize >= 4 else largest // 4)
    return None


def shared_array_patch(make: Callable) -> Callable:
    """A stand-in for the simulator's ``FakeCUDAShared.array`` that fills each new shared array
    with :func:`poison_value` before ``make(shared, values, caller_frame)`` gives what the
    kernel gets; made once per line and launch, under a lock, by
    :func:`~gpulab.instruments.simulator.shared_array_maker`."""
    def poisoned(shared, values, caller):
        if poison_value(values.dtype) is not None:
            values.fill(poison_value(values.dtype))
        return make(shared, values, caller)

    return shared_array_maker(poisoned)


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
    with patched({(FakeCUDAShared, "array"): shared_array_patch(
            lambda shared, values, caller: values)}):
        yield


__all__ = ["ArrayView", "InstrumentedArray", "RecordingArray", "WatchedArray", "element_index",
           "poison_value", "poisoned_shared_memory", "shared_array_patch"]
