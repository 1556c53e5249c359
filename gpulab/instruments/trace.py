"""See your own kernel: :func:`trace_kernel` runs any 1-D, 2-D or 3-D kernel on small inputs
and returns a :class:`KernelTrace`, every read and write of each array argument (global memory)
and of each ``cuda.shared.array`` (shared memory), every atomic and every barrier, per thread;
``trace.summary()`` says it in words and ``trace.draw()`` draws it (the drawing is
:func:`gpulab.plots.trace_plot`, which registers itself here with :func:`set_trace_drawer`:
this floor records, the services layer draws).

In the ``sim`` tier the kernel runs in this process; where it drives a GPU, in a simulator
child process (``python -m gpulab.instruments --trace``) given the kernel's recipe
(:mod:`gpulab.instruments.recipes`).
"""

from __future__ import annotations

import inspect
import linecache
import operator
import os
import pickle
import re
import subprocess
import sys
import threading
from collections import defaultdict
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from gpulab import device
from gpulab.instruments.arrays import ArrayView, InstrumentedArray, shared_array_patch
from gpulab.instruments.kernel_objects import launchable, python_function
from gpulab.instruments.limits import (
    KernelDidNotFinishError,
    Limits,
    access_budget,
    count_access,
    limited,
)
from gpulab.instruments.recipes import kernel_recipe, unknown_globals
from gpulab.instruments.simulator import dim3, patched, running_thread, simulator_thread

COUNT_KEYS = ("global_reads", "global_writes", "shared_reads", "shared_writes", "atomics",
              "barriers")

_SHARED_NAME = re.compile(r"(\w+)\s*=\s*(?:\w+\.)*shared\.array\(")

_ATOMIC_FUNCTIONS = ("add", "sub", "and_", "or_", "xor", "inc", "dec", "exch", "max", "min",
                     "nanmax", "nanmin", "compare_and_swap", "cas")


class Access(NamedTuple):
    """One access of a traced kernel: which thread (see :class:`KernelTrace`), which array (the
    kernel's parameter name, or ``shared:<variable>`` for a ``cuda.shared.array``), the index
    (a tuple, one int per axis, negative indices counted from the end), ``kind`` ('read',
    'write' or 'atomic': one per ``cuda.atomic`` call), ``space`` ('global' or 'shared') and
    ``epoch`` (how many barriers the thread had passed: accesses of one block with the same
    epoch lie between the same two barriers) and, for shared memory, the ``value`` read or
    written (as stored)."""

    thread: tuple
    array: str
    index: tuple
    kind: str
    space: str
    epoch: int = 0  # the barriers (syncthreads) the thread had passed when it made the access
    value: object = None  # a shared access's value (a Python scalar), None for global ones


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
        self.itemsizes: dict[str, int] = {}
        self.lock = threading.Lock()

    def thread(self):
        """The running simulated thread's id in CUDA's numbering, or None outside a kernel."""
        current = running_thread()
        if current is None:
            return None
        block, thread = dim3(current.blockIdx), dim3(current.threadIdx)
        if self.dimensions == 1:
            return block[0], thread[0]
        return block[:self.dimensions], thread[:self.dimensions]

    def record(self, array: str, index: tuple, kind: str, space: str, value=None) -> None:
        who = self.thread()
        if who is not None:
            with self.lock:
                self.accesses.append(Access(who, array, index, kind, space,
                                            self.barriers.get(who, 0), value))


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
        log.itemsizes[name] = self.dtype.itemsize

    def __getitem__(self, index):
        count_access()
        value = self._array[index]
        where = _normal_index(index, self.shape)
        if where is not None:
            self.log.record(self.name, where, "read", self.space, self._shared_value(where))
        return ArrayView.of(self, value)

    def __setitem__(self, index, value) -> None:
        count_access()
        self._array[index] = value
        where = _normal_index(index, self.shape)
        if where is not None:
            self.log.record(self.name, where, "write", self.space, self._shared_value(where))

    def _shared_value(self, where: tuple):
        """The element's value as stored, for shared memory (where races are judged)."""
        return self._array[where].item() if self.space == "shared" else None

    def record_atomic(self, index) -> None:
        count_access()
        where = _normal_index(index, self.shape)
        if where is not None:
            self.log.record(self.name, where, "atomic", self.space)


def _tracing_patches(log: _TraceLog) -> dict:
    """Patches of the simulator for one traced launch: shared arrays become TracingArrays
    (poisoned, as :func:`~gpulab.instruments.arrays.poisoned_shared_memory` does), atomics and
    barriers are recorded."""
    from numba.cuda.simulator.kernelapi import FakeCUDAAtomic, FakeCUDAModule, FakeCUDAShared

    def traced_shared(shared, values, caller):
        line = linecache.getline(caller.f_code.co_filename, caller.f_lineno)
        names = _SHARED_NAME.findall(line)  # in order: the n-th call on a line is its n-th name
        on_line = sum(key[:2] == (caller.f_code.co_filename, caller.f_lineno)
                      for key in shared._allocations)
        name = f"shared:{names[on_line] if on_line < len(names) else len(shared._allocations)}"
        return TracingArray(values, name, "shared", log)

    def atomic(method, name):
        def traced(self, array, *args):
            if isinstance(array, TracingArray | ArrayView):
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

    patches = {(FakeCUDAShared, "array"): shared_array_patch(traced_shared)}
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
    arrays are never changed), ``shapes``, ``spaces`` and ``itemsizes`` their shapes, memory
    spaces and bytes per element.
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
    itemsizes: dict[str, int] = field(default_factory=dict)  # bytes per element, per array

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

    def uneven_barriers(self) -> tuple | None:
        """(block, fewest, most) barriers its threads passed, for the first block whose threads
        did not all pass as many (on a GPU the others wait for them forever); None when each
        block's threads passed the same number (a whole block may leave early)."""
        passed: dict = {}
        for thread in self.threads:
            passed.setdefault(thread[0], []).append(self.barrier_counts.get(thread, 0))
        return next(((block, min(counts), max(counts)) for block, counts in passed.items()
                     if min(counts) != max(counts)), None)

    # which thread touched which element
    def shared_races(self) -> list[tuple[Access, Access]]:
        """(write, other) pairs of shared-memory accesses of one block between the same two
        barriers (the same :attr:`Access.epoch`) to the same slot by two threads, one a plain
        write: a race on a GPU, whatever order the simulator ran them in (it runs a block's
        threads one after another up to each barrier). The first such pair per slot and epoch,
        in the order the simulator made them; atomics race with nothing. Left out, as no race
        on a GPU either: two writes of the same value, a read of a slot the reader itself wrote
        in that interval (the others wrote the same value there, or their writes are a pair
        already), and a read before another thread's write of the value it read."""
        found, seen = [], set()
        writes: dict[tuple, Access] = {}
        writers: dict[tuple, set] = {}
        for access in self.accesses:
            if access.space != "shared" or access.kind == "atomic":
                continue
            block = access.thread[0]
            key = (block, access.array, access.index, access.epoch)
            first = writes.get(key)
            if (first is not None and first.thread != access.thread and key not in seen
                    and not (access.kind == "write" and access.value == first.value)
                    and not (access.kind == "read" and access.thread in writers[key])):
                found.append((first, access))
                seen.add(key)
            if access.kind == "write":
                writes.setdefault(key, access)
                writers.setdefault(key, set()).add(access.thread)
        earlier_reads: dict[tuple, Access] = {}
        for access in self.accesses:  # a read before another thread's write, same interval
            if access.space != "shared" or access.kind == "atomic":
                continue
            key = (access.thread[0], access.array, access.index, access.epoch)
            if access.kind == "read":
                earlier_reads.setdefault(key, access)
            elif (key not in seen and (read := earlier_reads.get(key)) is not None
                  and read.thread != access.thread and read.value != access.value):
                found.append((access, read))
                seen.add(key)
        return found

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

    def elements_by_thread(self, array: str, kind: str, repeats: bool = True) -> dict:
        """``{thread: [element, ...]}``: the first index of each ``kind`` access ('read',
        'write', 'atomic') of ``array`` by each thread, in the order it made them; with
        ``repeats=False`` an access to the element the thread touched last is not listed again
        (a sum kept in one element counts once)."""
        found: dict = {}
        for access in self.accesses:
            if access.array == array and access.kind == kind:
                elements = found.setdefault(access.thread, [])
                if repeats or not elements or elements[-1] != access.index[0]:
                    elements.append(access.index[0])
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
    (:func:`~gpulab.instruments.arrays.poison_value`), and a loop that never ends is stopped
    (:func:`limited`). If the kernel raises, the trace up to that point comes back with
    ``error`` set.

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
        stack.enter_context(patched(_tracing_patches(log)))
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
        itemsizes=dict(log.itemsizes),
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


def _stop_reason(exc: BaseException, limits: Limits) -> str:
    where, text = simulator_thread(str(exc))
    where = f" in {where}" if where else ""
    if isinstance(exc, KernelDidNotFinishError):
        if limits.timed_out or not text:
            text = f"it ran for more than {limits.seconds:g} s: a loop that never ends?"
        return f"the kernel did not finish{where}: {text}"
    return f"{type(exc).__name__}{where}: {text}"


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


__all__ = ["Access", "COUNT_KEYS", "KernelTrace", "TRACE_SECONDS", "TracingArray",
           "set_trace_drawer", "thread_label", "trace_kernel"]
