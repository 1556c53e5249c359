"""Honest timing: measured CPU time, CUDA-event GPU time, and records that say where they ran.

- :func:`time_cpu` times a Python callable (a NumPy call, a numba-CPU function) with
  :func:`time.perf_counter`. A call shorter than ``min_time_s`` is timed in a loop of ``k``
  calls and divided by ``k`` (as :mod:`timeit` does), so microsecond-scale calls are measured
  well above the timer's resolution. The median of the repeats is the headline number.
- :func:`time_gpu` times work on a real GPU with CUDA events recorded around it. In the
  ``sim`` tier it refuses: the simulator runs one Python thread per CUDA thread on the CPU,
  so its run time says nothing about a GPU. Use a roofline estimate
  (:func:`gpulab.hardware.estimate_time`) or a run recorded on a named GPU
  (:func:`load_measurements`) instead, and say which.
- :class:`Measurement` keeps the times with what was measured, where, and on what, and its
  ``label`` says so ("measured on NVIDIA H200"). :func:`save_measurements` and
  :func:`load_measurements` keep runs as JSON with the date, tier, device and gpulab version,
  so a chapter can show a recorded GPU run next to a live CPU one.
"""

from __future__ import annotations

import datetime
import gc
import json
import math
import statistics
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from gpulab import device
from gpulab.hardware import cpu_description, format_seconds

WHERE = ("cpu", "gpu")
FILE_FORMAT = "gpulab-measurements"
FILE_FORMAT_VERSION = 1
_HEADER_KEYS = ("format", "format_version", "gpulab_version", "date", "tier", "device")


class SimulatorTimingError(RuntimeError):
    """Someone asked for GPU time in the ``sim`` tier, where there is no GPU to time."""


@dataclass
class Measurement:
    """Repeated timings of one piece of work, with what it was and where it ran.

    ``times_s`` holds one time per repeat (seconds per call). ``flops`` and ``bytes_moved``
    describe one call; with them the rates are computed from the median time.
    """

    name: str
    times_s: list[float]
    where: str
    device: str
    n: int | None = None
    flops: float | None = None
    bytes_moved: float | None = None
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.where not in WHERE:
            raise ValueError(f"where must be 'cpu' or 'gpu', not {self.where!r}")
        self.times_s = [float(t) for t in self.times_s]
        if not self.times_s:
            raise ValueError(f"measurement {self.name!r} has no times")
        if any(math.isnan(t) or t < 0 for t in self.times_s):
            raise ValueError(f"measurement {self.name!r} has a negative or NaN time: "
                             f"{self.times_s}")

    @property
    def median_s(self) -> float:
        return statistics.median(self.times_s)

    @property
    def min_s(self) -> float:
        return min(self.times_s)

    @property
    def max_s(self) -> float:
        return max(self.times_s)

    @property
    def gflops_per_s(self) -> float | None:
        """Achieved GFLOP/s at the median time; None when the FLOP count is unknown."""
        if self.flops is None or self.median_s == 0:
            return None
        return self.flops / self.median_s / 1e9

    @property
    def gbytes_per_s(self) -> float | None:
        """Achieved GB/s (decimal) at the median time; None when the byte count is unknown."""
        if self.bytes_moved is None or self.median_s == 0:
            return None
        return self.bytes_moved / self.median_s / 1e9

    @property
    def label(self) -> str:
        return f"measured on {self.device}"

    def __str__(self) -> str:
        text = (f"{self.name}: median {format_seconds(self.median_s)} "
                f"(min {format_seconds(self.min_s)}, max {format_seconds(self.max_s)}, "
                f"{len(self.times_s)} repeats)")
        if self.gflops_per_s is not None:
            text += f", {self.gflops_per_s:.3g} GFLOP/s"
        if self.gbytes_per_s is not None:
            text += f", {self.gbytes_per_s:.3g} GB/s"
        return f"{text}, {self.label}"

    def to_dict(self) -> dict:
        """A JSON-serialisable dict; :meth:`from_dict` reads it back."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Measurement:
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown Measurement field(s) {sorted(unknown)}; "
                             f"known: {', '.join(sorted(known))}")
        return cls(**data)


def _check_callable(what: str, fn) -> None:
    if not callable(fn):
        raise TypeError(f"{what} must be callable (a function to time), not {fn!r}")


def _check_count(what: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{what} must be a whole number >= {minimum}, not {value!r}")
    return value


def cpu_device() -> str:
    """How measurements on this machine's CPU name their device."""
    return f"this CPU ({cpu_description()})"


def _loops_for(fn, args, kwargs, min_time_s: float) -> int:
    """Calls per timed repeat: 1, 2, 5, 10, 20, 50, ... until one loop takes min_time_s."""
    loops = 1
    while True:
        start = time.perf_counter()
        for _ in range(loops):
            fn(*args, **kwargs)
        if time.perf_counter() - start >= min_time_s:
            return loops
        loops = _next_loops(loops)


def _next_loops(loops: int) -> int:
    """1, 2, 5, 10, 20, 50, 100, ..."""
    magnitude = 10 ** int(math.floor(math.log10(loops)))
    leading = loops // magnitude
    return {1: 2, 2: 5}.get(leading, 10) * magnitude


def time_cpu(fn, *args, repeats: int = 7, warmup: int = 1, min_time_s: float = 1e-3,
             name: str | None = None, n: int | None = None, flops: float | None = None,
             bytes_moved: float | None = None, **kwargs) -> Measurement:
    """Time ``fn(*args, **kwargs)`` on this CPU; one time per repeat, in seconds per call.

    ``warmup`` untimed calls run first (caches, lazy imports, JIT compilation). If one call
    takes less than ``min_time_s``, each repeat times a loop of ``k`` calls and divides by
    ``k``; ``k`` is in ``meta["loops"]``. The garbage collector is paused while timing, as
    :mod:`timeit` does. The keyword names of this function (``repeats``, ``name``, ...) are
    not passed on to ``fn``.
    """
    _check_callable("fn", fn)
    _check_count("repeats", repeats, 1)
    _check_count("warmup", warmup, 0)
    if not (isinstance(min_time_s, (int, float)) and min_time_s >= 0):
        raise ValueError(f"min_time_s must be a number of seconds >= 0, not {min_time_s!r}")
    for _ in range(warmup):
        fn(*args, **kwargs)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        loops = _loops_for(fn, args, kwargs, min_time_s) if min_time_s > 0 else 1
        times_s = []
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(loops):
                fn(*args, **kwargs)
            times_s.append((time.perf_counter() - start) / loops)
    finally:
        if gc_was_enabled:
            gc.enable()
    return Measurement(
        name=name or getattr(fn, "__name__", type(fn).__name__),
        times_s=times_s,
        where="cpu",
        device=cpu_device(),
        n=n,
        flops=flops,
        bytes_moved=bytes_moved,
        meta={"timer": "time.perf_counter", "loops": loops, "warmup": warmup,
              "min_time_s": min_time_s},
    )


SIMULATOR_TIMING_MESSAGE = (
    "simulator time is not GPU time: in the 'sim' tier kernels run in Numba's CUDA simulator, "
    "one Python thread per CUDA thread on this CPU, so timing them says nothing about a GPU. "
    "Use a roofline estimate (gpulab.hardware.estimate_time) or a recorded run on a named GPU "
    "(gpulab.bench.load_measurements), and time the CPU side with gpulab.bench.time_cpu."
)


def time_gpu(launch, repeats: int = 20, warmup: int = 2, name: str | None = None,
             n: int | None = None, flops: float | None = None,
             bytes_moved: float | None = None) -> Measurement:
    """Time ``launch()`` on the GPU with CUDA events; one time per repeat, in seconds.

    ``launch()`` must enqueue the work on the default stream (``kernel[blocks, threads](...)``
    does). Each repeat records an event before and after it and waits for the second, so the
    time is what the GPU spent between the two, launch overhead included. Anything
    synchronous inside ``launch`` (``cuda.to_device``, ``copy_to_host``) is timed as well:
    keep transfers out of it unless they are what you measure.

    Only in the ``gpu`` tier; in the ``sim`` tier it raises :class:`SimulatorTimingError`.
    """
    _check_callable("launch", launch)
    _check_count("repeats", repeats, 1)
    _check_count("warmup", warmup, 0)
    if device.tier() != "gpu":
        raise SimulatorTimingError(SIMULATOR_TIMING_MESSAGE)
    from numba import cuda  # gpulab is imported, so numba.cuda is in the GPU mode

    for _ in range(warmup):
        launch()
    cuda.synchronize()
    times_s = []
    for _ in range(repeats):
        start, stop = cuda.event(), cuda.event()  # timing=True is the default
        start.record()
        launch()
        stop.record()
        stop.synchronize()
        elapsed_ms = start.elapsed_time(stop)
        if not elapsed_ms >= 0:
            raise RuntimeError(
                f"CUDA events returned {elapsed_ms!r} ms; events only time work on a real GPU"
            )
        times_s.append(elapsed_ms / 1e3)
    return Measurement(
        name=name or getattr(launch, "__name__", type(launch).__name__),
        times_s=times_s,
        where="gpu",
        device=device.PROBE.device_name or "unknown GPU",
        n=n,
        flops=flops,
        bytes_moved=bytes_moved,
        meta={"timer": "CUDA events", "warmup": warmup},
    )


def _this_device() -> str:
    if device.tier() == "gpu":
        return device.PROBE.device_name or "unknown GPU"
    return cpu_device()


def save_measurements(path, measurements, meta: dict | None = None) -> Path:
    """Write ``measurements`` to ``path`` as JSON, with the gpulab version, the date and time
    (ISO 8601, UTC), the tier and the device of this process, and ``meta`` (your own notes;
    its keys must not clash with those). Returns the path written."""
    from gpulab import __version__

    measurements = list(measurements)
    for item in measurements:
        if not isinstance(item, Measurement):
            raise TypeError(f"save_measurements takes Measurement objects, not {item!r}")
    meta = dict(meta or {})
    clash = set(meta) & set(_HEADER_KEYS + ("measurements",))
    if clash:
        raise ValueError(f"meta keys {sorted(clash)} are reserved for the file header")
    document = {
        "format": FILE_FORMAT,
        "format_version": FILE_FORMAT_VERSION,
        "gpulab_version": __version__,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "tier": device.tier(),
        "device": _this_device(),
        **meta,
        "measurements": [m.to_dict() for m in measurements],
    }
    try:
        text = json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise ValueError(f"measurements or meta cannot be written as JSON: {error}") from error
    path = Path(path)
    path.write_text(text + "\n", encoding="utf-8")
    return path


def load_measurements(path) -> tuple[list[Measurement], dict]:
    """Read a file written by :func:`save_measurements`: the measurements and a dict with
    everything else (``gpulab_version``, ``date``, ``tier``, ``device`` and the saved meta)."""
    path = Path(path)
    document = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(document, dict) or document.get("format") != FILE_FORMAT:
        raise ValueError(f"{path} is not a gpulab measurements file (no 'format': "
                         f"{FILE_FORMAT!r} in it)")
    if document.get("format_version", 0) > FILE_FORMAT_VERSION:
        raise ValueError(f"{path} was written by a newer gpulab (format version "
                         f"{document['format_version']}); upgrade gpulab to read it")
    measurements = [Measurement.from_dict(item) for item in document.pop("measurements", [])]
    return measurements, document


__all__ = [
    "Measurement",
    "SimulatorTimingError",
    "cpu_device",
    "load_measurements",
    "save_measurements",
    "time_cpu",
    "time_gpu",
]
