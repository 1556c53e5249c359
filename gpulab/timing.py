"""Honest timing: measured CPU time, CUDA-event GPU time, roofline estimates, and one record,
:class:`Measurement`, that says where each time came from.

- :func:`time_cpu` times a Python callable (a NumPy call, a numba-CPU function) with
  :func:`time.perf_counter`. A call shorter than ``min_time_s`` is timed in a loop of ``k``
  calls and divided by ``k`` (as :mod:`timeit` does), so microsecond-scale calls are measured
  well above the timer's resolution. The median of the repeats is the headline number.
- :func:`time_gpu` times work on a real GPU with CUDA events recorded around it. In the
  ``sim`` tier it refuses: the simulator runs one Python thread per CUDA thread on the CPU,
  so its run time says nothing about a GPU. Use a roofline estimate (:func:`estimate`) or a
  run recorded on a named GPU (:func:`gpulab.bench.latest_recorded_run`), and say which.
- :func:`time_gpu_looped` launches short kernels back to back between the events, so Python's
  launch latency overlaps the GPU's work; :func:`measure_copy_bandwidth` is the device-to-device
  copy rate a memory-bound kernel can hope for; :func:`cupy_module` is CuPy (cuBLAS) or None.
- :func:`estimate` turns gpulab's GPU model of a named GPU into a ``model`` measurement: an
  estimate with the band the model promises for its kind of work (``gpulab model-check``
  measures the model against published measurements), never a measurement.
- :class:`Measurement` keeps the times with what was timed, on what, and its ``origin``:
  ``cpu`` (measured on this CPU), ``gpu`` (measured with CUDA events), ``model`` (estimated
  by gpulab's GPU model, :func:`gpulab.hardware.estimate_time`), ``recorded`` (measured on a
  named GPU in a recorded run, see :mod:`gpulab.bench`) or ``published`` (measured by others
  on a named GPU, with the source: :mod:`gpulab.published`). Its ``label`` says so in words.
  Runs are saved as JSON by :mod:`gpulab.bench` (one file format).
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from dataclasses import asdict, dataclass, field, fields, replace

from gpulab import device, hardware
from gpulab.hardware import cpu_description, format_seconds

ORIGINS = ("cpu", "gpu", "model", "recorded", "published")
MIN_TIMED_S = 2e-3  # a looped GPU timing region lasts at least this long


class SimulatorTimingError(RuntimeError):
    """Someone asked for GPU time in the ``sim`` tier, where there is no GPU to time."""


@dataclass
class Measurement:
    """Repeated timings of one piece of work, with what it was and where it ran.

    ``times_s`` holds one time per repeat (seconds per call); a ``model`` estimate has one.
    ``origin`` is one of :data:`ORIGINS`; ``device`` names the CPU or GPU measured, or the
    GPU modelled. ``flops`` and ``bytes_moved`` describe one call; with them the rates are
    computed from the median time.
    """

    name: str
    times_s: list[float]
    origin: str
    device: str
    n: int | None = None
    flops: float | None = None
    bytes_moved: float | None = None
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.origin not in ORIGINS:
            raise ValueError(f"origin must be one of {', '.join(ORIGINS)}, not {self.origin!r}")
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
    def measured(self) -> bool:
        """True for times measured on real hardware (here, in a recorded run, or published
        by others)."""
        return self.origin != "model"

    @property
    def label(self) -> str:
        """Where the numbers came from, in words."""
        if self.origin == "model":
            band = self.meta.get("band")
            return (f"estimated by gpulab's GPU model of the {self.device}"
                    + (f" (promised band for {self.meta.get('kind')} work: {band})"
                       if band else ""))
        if self.origin == "published":
            who = self.meta.get("measured_by", "others")
            where = self.meta.get("source")
            return f"measured by {who} on {self.device}" + (f" ({where})" if where else "")
        if self.origin == "recorded":
            day = self.meta.get("date", "")[:10]
            return f"recorded on {self.device}" + (f" on {day}" if day else "")
        if self.origin == "gpu":
            return f"measured on {self.device} (CUDA events)"
        return f"measured on {self.device}"

    def as_recorded(self, date: str | None = None) -> Measurement:
        """This GPU measurement as shown from a recorded run (origin ``recorded``)."""
        if self.origin not in ("gpu", "recorded"):
            raise ValueError(f"only GPU measurements are recorded runs, not {self.origin!r}")
        meta = dict(self.meta, **({"date": date} if date else {}))
        return replace(self, origin="recorded", meta=meta)

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
        origin="cpu",
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
    "Use the GPU model's estimate (gpulab.timing.estimate), a recorded run on a named GPU "
    "(gpulab.bench.latest_recorded_run) or a published measurement (gpulab.published), and "
    "time the CPU side with gpulab.timing.time_cpu."
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
    if device.tier() != "gpu" or device.numba_cuda_mode() == "sim":
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
        simulated = any("simulator" in cls.__module__ for cls in type(start).__mro__)
        if simulated or not elapsed_ms >= 0:
            raise RuntimeError(
                f"CUDA events returned {elapsed_ms!r} ms"
                + (" from Numba's simulator" if simulated else "")
                + "; events only time work on a real GPU"
            )
        times_s.append(elapsed_ms / 1e3)
    return Measurement(
        name=name or getattr(launch, "__name__", type(launch).__name__),
        times_s=times_s,
        origin="gpu",
        device=device.PROBE.device_name or "unknown GPU",
        n=n,
        flops=flops,
        bytes_moved=bytes_moved,
        meta={"timer": "CUDA events", "warmup": warmup},
    )


def time_gpu_looped(launch, repeats: int, name: str, **counts) -> Measurement:
    """CUDA-event time per call of ``launch``, with calls looped between the events until a
    region lasts at least :data:`MIN_TIMED_S`, so Python's launch latency overlaps the GPU's
    work (Numba's dispatch is still paid once per call, as a learner's loop pays it)."""
    single = time_gpu(launch, repeats=1, warmup=1, name=name)
    loops = int(min(max(math.ceil(MIN_TIMED_S / max(single.median_s, 1e-7)), 1), 200))

    def looped():
        for _ in range(loops):
            launch()

    timed = time_gpu(looped, repeats=repeats, warmup=1, name=name)
    return Measurement(name=name, times_s=[t / loops for t in timed.times_s], origin="gpu",
                       device=timed.device, meta={**timed.meta, "loops": loops}, **counts)


def measure_copy_bandwidth(n_bytes: int, repeats: int = 10) -> float:
    """Bytes per second (read + write) of a device-to-device copy of ``n_bytes``: the
    bandwidth a memory-bound kernel can hope for on this GPU. GPU tier only."""
    import numpy as np
    from numba import cuda

    count = max(int(n_bytes) // 4, 1)
    src = cuda.device_array(count, dtype=np.float32)
    dst = cuda.device_array(count, dtype=np.float32)
    src.copy_to_device(np.ones(count, np.float32))
    measurement = time_gpu_looped(lambda: dst.copy_to_device(src), repeats, "device copy")
    return 2 * count * 4 / measurement.median_s


def cupy_module():
    """CuPy (whose matmul calls cuBLAS), or None when it is not installed or cannot load."""
    try:
        import cupy
    except Exception:  # not installed, or no matching CUDA runtime
        return None
    return cupy


def local_gpu_spec(override: str | None = None) -> hardware.GPUSpec | None:
    """The spec for this machine's GPU from gpulab's table, matched by name, or ``override``."""
    if override:
        return hardware.get_gpu(override)
    return hardware.match_device(device.PROBE.device_name or "")


def estimate(name: str, gpu, flops: float, bytes_moved: float, precision: str = "fp32",
             transfer_bytes: float = 0.0, launches: int = 1, n: int | None = None,
             useful_bytes: float | None = None, **model) -> Measurement:
    """gpulab's GPU model (:func:`gpulab.hardware.estimate_time`) for a named GPU as a
    ``model`` :class:`Measurement`: the GPU time of the work (compute, memory, waves, the
    minimum kernel time) and the host's issue cost, overlapped on a stream, plus the host link
    when ``transfer_bytes`` > 0. ``model`` passes the model's other terms on (``blocks``,
    ``threads_per_block``, ``bytes_with_reuse``, ...). ``bytes_moved`` is what the model
    charges; ``useful_bytes`` (default the same) is what the rate is computed from. The
    model's parts and its promised band are kept in ``meta``."""
    estimate_ = hardware.estimate_time(gpu, flops, bytes_moved, precision,
                                       transfer_bytes=transfer_bytes, launches=launches, **model)
    return Measurement(
        name=name, times_s=[estimate_.time_s], origin="model", device=estimate_.gpu.name, n=n,
        flops=flops, bytes_moved=bytes_moved if useful_bytes is None else useful_bytes,
        meta={"model": "gpulab GPU model", "gpu": estimate_.gpu.key,
              "precision": estimate_.precision, "bound": estimate_.bound,
              "kind": estimate_.kind, "band": hardware.band_text(estimate_.kind),
              "compute_s": estimate_.compute_s, "memory_s": estimate_.memory_s,
              "gpu_s": estimate_.gpu_s, "launch_s": estimate_.launch_s,
              "transfer_s": estimate_.transfer_s},
    )


__all__ = [
    "MIN_TIMED_S",
    "ORIGINS",
    "SIMULATOR_TIMING_MESSAGE",
    "Measurement",
    "SimulatorTimingError",
    "cpu_device",
    "cupy_module",
    "estimate",
    "local_gpu_spec",
    "measure_copy_bandwidth",
    "time_cpu",
    "time_gpu",
    "time_gpu_looped",
]
