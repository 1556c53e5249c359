"""Watching the learner's host code (chapters 00 and 02): within :func:`watch_host_code`, the
copies, allocations, launches (through a :class:`KernelSpy`), synchronisations, clock reads
(:data:`WALL_CLOCKS`, :data:`CPU_CLOCKS`, however imported) and CUDA events of the learner's
function are recorded, in order, in a :class:`HostCodeWatch` that a check reads: was the clock
read after the GPU finished? were copies inside the timed loop? how many threads did a launch
start (:class:`HostLaunch`)? Numba's own functions still do the work, so it behaves the same in
both tiers.
"""

from __future__ import annotations

import math
import threading
import types
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from gpulab.exercises.mistakes import Mistake
from gpulab.instruments import launchable


@dataclass
class HostLaunch:
    """One launch the learner's host code made: its grid, and which arguments were NumPy
    arrays (Numba copies each of those to the device before the launch and back after it)."""

    blocks: object
    threads: object
    numpy_arguments: tuple[int, ...]
    dtypes: tuple = ()  # each argument's dtype (None for a scalar without one)
    arguments: tuple = field(default=(), repr=False)  # the arguments themselves

    def elements(self, default: int) -> int:
        """The length of the shortest array argument of the launch (a launch on slices, such
        as a warm-up on one block's worth, needs threads for those only); ``default`` where no
        argument is an array."""
        lengths = [value.shape[0] for value in self.arguments
                   if getattr(value, "shape", None) and len(value.shape) > 0]
        return min(lengths, default=default)

    @property
    def total_threads(self) -> int:
        def product(value) -> int:
            return math.prod(value) if isinstance(value, tuple) else int(value)

        return product(self.blocks) * product(self.threads)

    @property
    def threads_per_block(self) -> int:
        return math.prod(self.threads) if isinstance(self.threads, tuple) else int(self.threads)


@dataclass
class HostCodeWatch:
    """What :func:`watch_host_code` saw, in order: ``events`` holds ``(kind, detail)`` pairs,
    kind one of ``"to_device"``, ``"allocate"`` (detail: the shape), ``"launch"`` (detail: a
    :class:`HostLaunch`), ``"synchronize"``, ``"copy_to_host"`` (detail: the shape), ``"clock"``
    (a wall-clock read: detail ``(name, seconds)``, or ``("event", None)`` for a CUDA event's
    ``record()``), ``"cpu_clock"`` (``time.process_time`` and the like: CPU time, which stops
    while the CPU waits for the GPU), ``"elapsed"`` (an event's ``elapsed_time``: detail the
    seconds it gave), ``"copy_back_on_stream"`` (after a ``copy_to_host`` given a stream, which
    returns before the copy ends), ``"forall"`` (a ``kernel.forall(n)`` launch: detail n),
    ``"empty_stream_wait"`` (``synchronize()`` of a stream the
    code made with ``cuda.stream()`` but gave no launch: it does not wait for the launches,
    which went to another stream). The copies
    Numba makes itself for NumPy arguments are not events: they show in
    :attr:`HostLaunch.numpy_arguments`. ``copies_back`` holds each ``copy_to_host``'s ``(device
    array, host array)``, ``copies_in`` each ``to_device``'s ``(host array, device
    array)``; ``streams_made`` the streams ``cuda.stream()`` made, ``streams_used`` those given
    to a launch or a copy, ``launch_streams`` those given to a launch."""

    events: list = field(default_factory=list)
    launching: bool = False
    copies_back: list = field(default_factory=list)
    copies_in: list = field(default_factory=list)
    streams_made: list = field(default_factory=list)
    streams_used: list = field(default_factory=list)
    launch_streams: list = field(default_factory=list)  # each launch's stream (None: default)

    def empty_stream(self, stream) -> bool:
        """Was ``stream`` made here, and not the stream of the last launch (given copies at
        most, or launches before it but not that one)? Then its wait does not wait for it."""
        made_here = any(stream is made for made in self.streams_made)
        return made_here and (not self.launch_streams or self.launch_streams[-1] is not stream)

    @property
    def forall_tasks(self):
        """The task count of the first ``kernel.forall(n)`` launch (None: none)."""
        return next((detail for kind, detail in self.events if kind == "forall"), None)

    def count(self, kind: str) -> int:
        return sum(1 for event, _ in self.events if event == kind)

    @property
    def launches(self) -> list[HostLaunch]:
        return [detail for event, detail in self.events if event == "launch"]

    def copied_back(self, got) -> bool:
        """Is ``got`` a copy back (``copy_to_host``) of a device array a launch was given to
        write (an argument after its first), a view of one, or an array equal to one
        (``astype``, ``np.array(copy)``: the same values, so a right answer)? False for values
        worked out on the host."""
        if not isinstance(got, np.ndarray):
            return False
        written = {id(argument) for launch in self.launches
                   for argument in launch.arguments[1:] if hasattr(argument, "copy_to_host")}
        return any(np.shares_memory(got, host)
                   or (got.shape == host.shape and np.array_equal(got, host))
                   for device_array, host in self.copies_back
                   if id(device_array) in written and isinstance(host, np.ndarray))

    def positions(self, kind: str) -> list[int]:
        """Where in :attr:`events` the events of ``kind`` are."""
        return [k for k, (event, _) in enumerate(self.events) if event == kind]

    def after_last_launch(self, kind: str) -> bool:
        """True when an event of ``kind`` follows the last launch."""
        return self.after_last("launch", kind)

    def after_last(self, first: str, kind: str) -> bool:
        """True when an event of ``kind`` follows the last event of ``first``."""
        kinds = [event for event, _ in self.events]
        if first not in kinds:
            return False
        last = len(kinds) - 1 - kinds[::-1].index(first)
        return kind in kinds[last + 1:]

    def spy(self, kernel) -> KernelSpy:
        """A stand-in for ``kernel`` that records each launch, then launches the real kernel."""
        return KernelSpy(launchable(kernel), self)


# A host-code check's rule, for any evidence with the learner's ``call`` and the ``watch``.
LAUNCHED_BY_FORALL = Mistake(
    "launched with `forall`, which picks the grid itself",
    lambda e: e.watch.forall_tasks is not None,
    lambda e: (f"{e.call} launched the kernel with `forall({e.watch.forall_tasks})`, Numba's "
               "launch that chooses the blocks and threads for you: this exercise is about "
               "choosing them"),
    "launch with `kernel[blocks, threads](...)`, the number of blocks worked out from n and "
    "the block size (chapter 00's blocks_for).", recognised_from="host code")


class KernelSpy:
    """``spy[blocks, threads](*args)`` records a :class:`HostLaunch` and launches the kernel it
    stands for; any other attribute is the kernel's."""

    def __init__(self, kernel, watch: HostCodeWatch):
        self.kernel, self.watch = kernel, watch

    def __getitem__(self, configuration):
        configuration = configuration if isinstance(configuration, tuple) else (configuration,)

        def launch(*args):
            numpy_arguments = tuple(k for k, value in enumerate(args)
                                    if isinstance(value, np.ndarray) and value.ndim > 0)
            blocks, threads = (configuration + (None, None))[:2]
            if len(configuration) > 2:
                self.watch.streams_used.append(configuration[2])
            self.watch.launch_streams.append(configuration[2] if len(configuration) > 2
                                             else None)
            dtypes = tuple(getattr(value, "dtype", None) for value in args)
            self.watch.events.append(("launch", HostLaunch(blocks, threads, numpy_arguments,
                                                           dtypes, args)))
            self.watch.launching = True
            try:
                return self.kernel[configuration](*args)
            finally:
                self.watch.launching = False

        return launch

    def forall(self, ntasks, *args, **kwargs):
        """``kernel.forall(n)``: Numba's launch that picks the grid itself. Recorded as a
        ``"forall"`` event (detail: n), then made as Numba makes it."""
        self.watch.events.append(("forall", ntasks))
        return self.kernel.forall(ntasks, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.kernel, name)


# The clocks of the `time` module a host-code check records: wall clocks (seconds; the _ns ones
# in nanoseconds), and CPU-time clocks, which do not tick while the CPU waits for the GPU.
# `timeit.default_timer` is `time.perf_counter`; `time.clock_gettime(clock_id)` (and its _ns
# twin) is a wall clock or a CPU-time one depending on the clock id (:data:`CPU_CLOCK_IDS`).
WALL_CLOCKS = ("perf_counter", "perf_counter_ns", "time", "time_ns", "monotonic",
               "monotonic_ns")


CPU_CLOCKS = ("process_time", "process_time_ns", "thread_time", "thread_time_ns")


GETTIME_CLOCKS = ("clock_gettime", "clock_gettime_ns")


CPU_CLOCK_IDS = ("CLOCK_PROCESS_CPUTIME_ID", "CLOCK_THREAD_CPUTIME_ID")

_MISSING = object()  # an attribute the watch added, to be deleted again on exit


def _clock_id_name(clock_id) -> str:
    import time

    return next((name for name in dir(time)
                 if name.startswith("CLOCK_") and getattr(time, name) == clock_id),
                str(clock_id))


def _recorded_clock(watch: HostCodeWatch, name: str, original, owner_thread: int):
    def recorded(*args, **kwargs):
        value = original(*args, **kwargs)
        if not watch.launching and threading.get_ident() == owner_thread:
            kind, read = "cpu_clock" if name in CPU_CLOCKS else "clock", name
            if name in GETTIME_CLOCKS:
                clock_id = _clock_id_name(args[0] if args else kwargs.get("clk_id"))
                kind = "cpu_clock" if clock_id in CPU_CLOCK_IDS else "clock"
                read = f"{name}({clock_id})"
            seconds = value / 1e9 if name.endswith("_ns") else value
            watch.events.append((kind, (read, float(seconds))))
        return value

    return recorded


def _fill_with_garbage(array) -> None:
    """Fill a device array the learner's code allocated with what fresh device memory may
    hold, NaN (or an integer type's largest value): never the right values by chance, as a
    reused buffer can be (the simulator's and the GPU's allocations are not cleared)."""
    dtype = np.dtype(getattr(array, "dtype", None) or np.float64)
    if dtype.kind not in "fiu" or not getattr(array, "size", 0):
        return
    garbage = np.nan if dtype.kind == "f" else np.iinfo(dtype).max
    array.copy_to_device(np.full(array.shape, garbage, dtype))


def _patch_events(watch: HostCodeWatch, owner_thread: int, patched: list) -> None:
    """Record CUDA events' ``record`` (a ``"clock"`` event), ``synchronize`` and
    ``elapsed_time``, and streams' ``synchronize``. In the simulator the events are those of
    :func:`~gpulab.instruments.simulator.events_as_on_a_gpu` (``cuda.event(timing=True)``, the
    host time between two records)."""
    from numba import cuda

    event_class = type(cuda.event())  # in the simulator, mended when gpulab.exercises is imported
    originals = {name: getattr(event_class, name) for name in ("record", "elapsed_time")}
    mine = lambda: not watch.launching and threading.get_ident() == owner_thread  # noqa: E731

    def record(self, *args, **kwargs):
        if mine():
            watch.events.append(("clock", ("event", None)))
        return originals["record"](self, *args, **kwargs)

    def elapsed_time(self, other, *args, **kwargs):
        ms = originals["elapsed_time"](self, other, *args, **kwargs)
        if mine():
            watch.events.append(("elapsed", float(ms) / 1e3))
        return ms

    for name, replacement in (("record", record), ("elapsed_time", elapsed_time)):
        patched.append((event_class, name, originals[name]))
        setattr(event_class, name, replacement)

    def waits_recorded(owner: type | None, kind=lambda waited_on: "synchronize") -> None:
        """``owner.synchronize`` recorded as a wait of ``kind(the object waited on)``."""
        if owner is None:
            return
        wait = owner.synchronize

        def synchronize(self, *args, **kwargs):
            if mine():
                watch.events.append((kind(self), None))
            return wait(self, *args, **kwargs)

        patched.append((owner, "synchronize", wait))
        owner.synchronize = synchronize

    def owner_of_synchronize(thing) -> type | None:
        return next((k for k in type(thing).__mro__ if "synchronize" in vars(k)), None)

    # A wait on an event, a stream's (`stream.synchronize()`, `cuda.default_stream().
    # synchronize()`) and the context's (`cuda.current_context().synchronize()`; in the
    # simulator, mended by gpulab.instruments.simulator.device_as_on_a_gpu) are waits for the
    # GPU as `cuda.synchronize()` is.
    waits_recorded(event_class)
    waits_recorded(owner_of_synchronize(cuda.default_stream()),
                   lambda stream: ("empty_stream_wait" if watch.empty_stream(stream)
                                   else "synchronize"))
    waits_recorded(owner_of_synchronize(cuda.current_context()))

    # `with stream.auto_synchronize():` waits for the stream on exit (numba-cuda's Stream calls
    # its synchronize, recorded above); the simulator's only yields, so its exit waits here.
    owner = next((k for k in type(cuda.default_stream()).__mro__
                  if "auto_synchronize" in vars(k)), None)
    if owner is not None:
        automatic = owner.auto_synchronize

        @contextmanager
        def auto_synchronize(self, *args, **kwargs):
            def waits() -> int:
                return watch.count("synchronize") + watch.count("empty_stream_wait")

            with automatic(self, *args, **kwargs) as value:
                yield value
                before = waits()
            if waits() == before:  # the original's exit did not wait
                self.synchronize()

        patched.append((owner, "auto_synchronize", automatic))
        owner.auto_synchronize = auto_synchronize


def _patch_datetime(watch: HostCodeWatch, owner_thread: int, patched: list) -> None:
    """``datetime.datetime.now()`` (and ``today``, ``utcnow``) is a wall clock too: the module's
    ``datetime`` becomes a subclass whose readings are recorded, as seconds since the epoch."""
    import datetime as datetime_module

    original = datetime_module.datetime

    def reading(name: str):
        def read(cls, *args, **kwargs):
            value = getattr(original, name)(*args, **kwargs)
            if not watch.launching and threading.get_ident() == owner_thread:
                seconds = value.timestamp() if value.tzinfo else (
                    value - original(1970, 1, 1)).total_seconds()
                watch.events.append(("clock", (f"datetime.{name}", seconds)))
            return value
        return classmethod(read)

    recording = type("datetime", (original,), {name: reading(name)
                                               for name in ("now", "today", "utcnow")})
    patched.append((datetime_module, "datetime", original))
    datetime_module.datetime = recording


def _patch_timeit(clocks: dict, patched: list) -> None:
    """``timeit.default_timer`` (``time.perf_counter``) reads the recording clock, as a module
    attribute and as the default timer of ``timeit.timeit``, ``timeit.repeat`` and
    ``timeit.Timer`` (bound when :mod:`timeit` was first imported)."""
    import time
    import timeit

    recording = {id(original): getattr(time, name) for name, original in clocks.items()}
    if id(timeit.default_timer) in recording:
        patched.append((timeit, "default_timer", timeit.default_timer))
        timeit.default_timer = recording[id(timeit.default_timer)]
    for function in (timeit.Timer.__init__, timeit.timeit, timeit.repeat):
        defaults = function.__defaults__ or ()
        if any(id(value) in recording for value in defaults):
            patched.append((function, "__defaults__", defaults))
            function.__defaults__ = tuple(recording.get(id(value), value) for value in defaults)


@contextmanager
def watch_host_code(function=None, kernels=()) -> Iterator[HostCodeWatch]:
    """Within this block, record what the learner's host code does: ``cuda.to_device``,
    ``cuda.device_array`` / ``cuda.device_array_like``, ``cuda.synchronize``, device arrays'
    ``copy_to_host``, clock reads (:data:`WALL_CLOCKS`, :data:`CPU_CLOCKS`,
    :data:`GETTIME_CLOCKS`, ``timeit.default_timer`` and ``timeit.timeit``'s timer,
    ``datetime.datetime.now()``, however imported: ``from time import perf_counter`` is rebound
    in ``function``'s globals too, as are names imported from ``numba.cuda``), CUDA events'
    records and waits (``cuda.event(timing=True)`` and ``cuda.event_elapsed_time`` work in the
    simulator too), and every launch of one of ``kernels`` made through a global name of
    ``function``, a closure of it, a parameter's default or an entry of a global dict or list
    (bound to a :class:`KernelSpy` meanwhile). Only calls from the thread that
    entered the block count, and none made by Numba during a launch. Everything is restored on
    exit. Numba's own functions still do the work, so it behaves the same in both tiers."""
    import time

    from numba import cuda

    watch = HostCodeWatch()
    owner_thread = threading.get_ident()
    patched: list[tuple[object, str, object]] = []

    def patch(owner, name, kind, with_shape=True, stream_at=99):
        original = getattr(owner, name)

        def recorded(*args, **kwargs):
            counted = not watch.launching and threading.get_ident() == owner_thread
            if counted:
                detail = getattr(args[0], "shape", args[0]) if with_shape and args else None
                watch.events.append((kind, detail))
                # the stream a copy is given: to_device(obj, stream), copy_to_host(ary, stream)
                stream = kwargs.get("stream", args[stream_at] if stream_at < len(args) else 0)
                if stream:
                    watch.streams_used.append(stream)
                    if kind == "copy_to_host":  # asynchronous: it returns before the copy ends
                        watch.events.append(("copy_back_on_stream", None))
            if counted and kind == "synchronize":  # on a GPU it calls the context's, below:
                watch.launching = True  # not a second wait of the learner's
                try:
                    result = original(*args, **kwargs)
                finally:
                    watch.launching = False
            else:
                result = original(*args, **kwargs)
            if counted and kind == "allocate":
                _fill_with_garbage(result)
            if counted and kind == "copy_to_host":
                watch.copies_back.append((args[0], result))
            if counted and kind == "to_device" and args:
                watch.copies_in.append((args[0], result))
            return result

        patched.append((owner, name, original))
        setattr(owner, name, recorded)

    array_type = type(cuda.device_array(1))
    array_class = next(k for k in array_type.__mro__ if "copy_to_host" in vars(k))
    namespace = getattr(function, "__globals__", {})
    rebound: list[tuple[str, object]] = []
    cells: list[tuple[object, object]] = []  # closure cells holding a kernel, and the kernel
    entries: list[tuple[dict | list, object, object]] = []  # (a global dict or list, key, kernel)
    try:
        patch(cuda, "to_device", "to_device", stream_at=1)
        patch(cuda, "device_array", "allocate")
        patch(cuda, "device_array_like", "allocate")
        patch(cuda, "synchronize", "synchronize", with_shape=False)
        patch(array_class, "copy_to_host", "copy_to_host", stream_at=2)  # args[0]: the array
        make_stream = cuda.stream

        def stream(*args, **kwargs):
            made = make_stream(*args, **kwargs)
            watch.streams_made.append(made)
            return made

        patched.append((cuda, "stream", make_stream))
        cuda.stream = stream
        _patch_events(watch, owner_thread, patched)
        clocks = {name: getattr(time, name)
                  for name in WALL_CLOCKS + CPU_CLOCKS + GETTIME_CLOCKS if hasattr(time, name)}
        for name, original in clocks.items():
            setattr(time, name, _recorded_clock(watch, name, original, owner_thread))
            patched.append((time, name, original))
        _patch_timeit(clocks, patched)
        _patch_datetime(watch, owner_thread, patched)
        # Names imported from `time`, `timeit` or `numba.cuda` are rebound to the recording
        # ones: `from time import perf_counter as pc`, `from numba.cuda import synchronize`.
        replaced = {id(original): getattr(owner, name) for owner, name, original in patched
                    if isinstance(owner, types.ModuleType) and original is not _MISSING}
        for name, value in list(namespace.items()):
            if id(value) in replaced:
                rebound.append((name, value))
                namespace[name] = replaced[id(value)]
        targets = [launchable(kernel) for kernel in kernels]

        def is_a_kernel(value) -> bool:
            return any(value is kernel or value is target
                       for kernel, target in zip(kernels, targets, strict=True))

        for name, value in list(namespace.items()):
            if is_a_kernel(value):
                rebound.append((name, value))
                namespace[name] = watch.spy(value)
        # and a kernel the function reaches through a closure (defined inside another function)
        for cell in getattr(function, "__closure__", None) or ():
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if is_a_kernel(value):
                cells.append((cell, value))
                cell.cell_contents = watch.spy(value)
        # and one given as a parameter's default (`def add_one_on_gpu(x, kernel=add_one)`)
        if any(is_a_kernel(value) for value in getattr(function, "__defaults__", None) or ()):
            patched.append((function, "__defaults__", function.__defaults__))
            function.__defaults__ = tuple(watch.spy(value) if is_a_kernel(value) else value
                                          for value in function.__defaults__)
        keywords = getattr(function, "__kwdefaults__", None) or {}
        if any(is_a_kernel(value) for value in keywords.values()):
            patched.append((function, "__kwdefaults__", dict(keywords)))
            function.__kwdefaults__ = {name: watch.spy(value) if is_a_kernel(value) else value
                                       for name, value in keywords.items()}
        # and one kept in a global dict or list (`KERNELS = {"add": add_one}`), one level deep
        for held in list(namespace.values()):
            if isinstance(held, dict | list) and held is not namespace:
                for key, value in list(held.items() if isinstance(held, dict)
                                       else enumerate(held)):
                    if is_a_kernel(value):
                        entries.append((held, key, value))
                        held[key] = watch.spy(value)
        yield watch
    finally:
        for held, key, value in entries:
            held[key] = value
        for name, value in rebound:
            namespace[name] = value
        for cell, value in cells:
            cell.cell_contents = value
        for owner, name, original in reversed(patched):
            if original is _MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, original)


__all__ = [
    "CPU_CLOCKS", "CPU_CLOCK_IDS", "GETTIME_CLOCKS", "LAUNCHED_BY_FORALL", "WALL_CLOCKS",
    "HostCodeWatch", "HostLaunch",
    "KernelSpy", "watch_host_code"
]
