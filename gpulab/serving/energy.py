"""Energy = power × time, with its boundary stated.

Every result is an :class:`Energy`: joules, the seconds they cover, the **boundary** (what was
inside the meter: ``chip``, ``board``, ``server``, ``data centre`` or ``embodied``) and whether it
was **measured** or **estimated**, with the source. Where the power comes from:

- a GPU: NVML (``nvidia-ml-py``) — its **total-energy counter** (millijoules since the driver
  loaded, Volta and newer) read before and after the work, boundary ``board``, measured; where
  a GPU has no counter, NVML's board power sampled by a thread while the work runs and
  integrated, said so in the source (on Ampere and newer each reading is a one-second average,
  so a job shorter than a few seconds is smeared);
- a CPU: RAPL's package energy counter in ``/sys/class/powercap`` where readable — boundary
  ``chip`` (the CPU package), measured;
- otherwise an **estimate**: for a GPU, the power model of :mod:`gpulab.hardware`
  (:func:`~gpulab.hardware.power_watts`: idle power + utilisation × (TDP − idle), utilisation
  being the share of the time the GPU is busy) times the time; for a CPU the stated rating
  :data:`CPU_RATED_WATTS` times the time, an upper-end estimate.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from gpulab import device, hardware

BOUNDARIES = [
    {"boundary": "chip", "includes": "the processor package only (RAPL package, GPU die)",
     "must state": "which chip, measured or rated, idle included or not"},
    {"boundary": "board", "includes": "the GPU card: chip, memory, voltage regulators, fans "
                                      "(NVML's board power)",
     "must state": "the card, the power limit, whether idle time is counted"},
    {"boundary": "server", "includes": "every board plus CPUs, DRAM, network cards, fans, "
                                       "power-supply losses",
     "must state": "the whole machine, measured at the wall or estimated, utilisation"},
    {"boundary": "data centre", "includes": "the server × PUE (cooling, power distribution)",
     "must state": "the PUE used and its source"},
    {"boundary": "embodied", "includes": "manufacturing and shipping the hardware, spread over "
                                         "its lifetime",
     "must state": "the lifetime and utilisation assumed"},
]
BOUNDARY_NAMES = tuple(b["boundary"] for b in BOUNDARIES)

CPU_RATED_WATTS = 65.0
CPU_RATED_SOURCE = ("an assumed 65 W package rating (a common desktop/server CPU TDP), not this "
                    "machine's datasheet")
PUE_TYPICAL = 1.58
PUE_SOURCE = "Uptime Institute Global Data Center Survey 2023: average PUE 1.58 (2023 survey)"
RAPL_ROOT = Path("/sys/class/powercap")


@dataclass(frozen=True)
class Energy:
    """Joules over ``seconds`` inside ``boundary``, ``measured`` or ``estimated``."""

    joules: float
    seconds: float
    boundary: str
    method: str
    source: str
    device: str = ""

    def __post_init__(self):
        if self.boundary not in BOUNDARY_NAMES:
            raise ValueError(f"boundary must be one of {BOUNDARY_NAMES}, not {self.boundary!r}")
        if self.method not in ("measured", "estimated"):
            raise ValueError("method must be 'measured' or 'estimated'")

    @property
    def watts(self) -> float:
        return self.joules / self.seconds if self.seconds > 0 else 0.0

    @property
    def label(self) -> str:
        return f"{self.boundary}, {self.method}"

    def per(self, count: float, unit: float = 1.0) -> Energy:
        """The same energy per ``count / unit`` items (e.g. per thousand inferences)."""
        return replace(self, joules=self.joules / count * unit, seconds=self.seconds / count * unit)

    def at_data_centre(self, server_overhead: float = 1.0, pue: float = PUE_TYPICAL) -> Energy:
        """Scale up to the data-centre boundary: × server overhead (stated) × PUE (stated)."""
        return replace(self, joules=self.joules * server_overhead * pue, boundary="data centre",
                       method="estimated",
                       source=f"{self.source}; × {server_overhead:g} server overhead (assumed) "
                              f"× PUE {pue:g} ({PUE_SOURCE})")

    def __str__(self) -> str:
        return (f"{self.joules:.4g} J over {self.seconds:.4g} s ({self.watts:.3g} W) — "
                f"{self.label}: {self.source}")


def energy_from_samples(times_s, watts) -> float:
    """Joules from power samples: the trapezoid rule over (time, watts)."""
    t = [float(v) for v in times_s]
    w = [float(v) for v in watts]
    if len(t) != len(w) or len(t) < 2:
        raise ValueError("need at least two (time, watts) samples of equal count")
    return sum((t[i + 1] - t[i]) * (w[i + 1] + w[i]) / 2 for i in range(len(t) - 1))


def rapl_zones(root: Path = RAPL_ROOT) -> list[Path]:
    """The readable RAPL package counters (``intel-rapl:N/energy_uj``), [] where none."""
    zones = []
    for zone in sorted(root.glob("intel-rapl:*")) if root.exists() else []:
        counter = zone / "energy_uj"
        if ":" in zone.name.split("intel-rapl")[1][1:]:
            continue  # a sub-zone (core, dram): the package counter covers it
        try:
            int(counter.read_text())
        except (OSError, ValueError):
            continue
        zones.append(zone)
    return zones


def _rapl_read(zones) -> list[tuple[int, int]]:
    out = []
    for zone in zones:
        try:
            top = int((zone / "max_energy_range_uj").read_text())
        except (OSError, ValueError):
            top = 2**32
        out.append((int((zone / "energy_uj").read_text()), top))
    return out


def estimate_energy(seconds: float, watts: float, boundary: str, source: str,
                    device: str = "") -> Energy:
    """An estimate: ``watts`` (rated, stated in ``source``) × ``seconds``."""
    return Energy(watts * seconds, seconds, boundary, "estimated", source, device)


def estimate_gpu(seconds: float, gpu="H100", utilisation: float = 1.0) -> Energy:
    """A GPU's board energy over ``seconds`` by the power model of :mod:`gpulab.hardware`:
    busy for ``utilisation`` (0..1) of the time, idle the rest:
    ``power_watts = idle + utilisation × (TDP − idle)``."""
    spec = hardware.get_gpu(gpu)
    watts = hardware.power_watts(spec, utilisation)
    idle_from = ("measured idle" if spec.idle_watts is not None
                 else f"idle taken as {hardware.IDLE_FRACTION_OF_TDP:.0%} of TDP")
    return estimate_energy(seconds, watts, "board",
                           f"power model of the {spec.name}: {idle_from} "
                           f"{spec.idle_power_watts:.3g} W + utilisation {utilisation:.0%} × "
                           f"(TDP {spec.tdp_watts:g} W − idle) = {watts:.3g} W "
                           f"({hardware.POWER_MODEL_SOURCE})", spec.name)


def estimate_cpu(seconds: float, watts: float = CPU_RATED_WATTS) -> Energy:
    return estimate_energy(seconds, watts, "chip", f"rated power: {CPU_RATED_SOURCE}"
                           if watts == CPU_RATED_WATTS else f"assumed {watts:g} W", "CPU")


NVML_COUNTER_SOURCE = (
    "NVML's total energy counter (nvmlDeviceGetTotalEnergyConsumption, millijoules since the "
    "driver loaded; Volta and newer), read before and after the work: the board's energy, "
    "whatever else ran on the GPU meanwhile"
)
NVML_SAMPLES_SOURCE = (
    "NVML board power (nvmlDeviceGetPowerUsage) sampled every {interval:g} s and integrated; "
    "this GPU has no energy counter. On Ampere and newer each reading is a one-second average, "
    "so a job shorter than a few seconds is smeared over its neighbours"
)


class _Nvml:
    """NVML opened on GPU 0 for one measurement (``nvidia-ml-py``'s ``pynvml``)."""

    def __init__(self):
        import pynvml  # nvidia-ml-py

        self.nvml = pynvml
        pynvml.nvmlInit()
        self.handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        name = pynvml.nvmlDeviceGetName(self.handle)
        self.name = name.decode() if isinstance(name, bytes) else str(name)

    def energy_mj(self) -> float | None:
        """The total-energy counter in millijoules, or None where the GPU has none."""
        try:
            return float(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))
        except self.nvml.NVMLError:
            return None

    def power_w(self) -> float:
        return self.nvml.nvmlDeviceGetPowerUsage(self.handle) / 1e3

    def close(self) -> None:
        self.nvml.nvmlShutdown()


class _PowerSampler:
    def __init__(self, nvml: _Nvml, interval_s: float):
        self.nvml, self.interval_s = nvml, interval_s
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.samples.append((time.perf_counter(), self.nvml.power_w()))
            time.sleep(self.interval_s)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def gpu_power_available() -> bool:
    """True when NVML (nvidia-ml-py) is importable and finds a GPU."""
    try:
        import pynvml

        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
        pynvml.nvmlShutdown()
        return count > 0
    except Exception:
        return False


def _present_gpu(gpu) -> hardware.GPUSpec:
    """``gpu`` when named; else this machine's GPU where gpulab's table has it; else the H100."""
    if gpu is not None:
        return hardware.get_gpu(gpu)
    return (hardware.match_device(device.PROBE.device_name or "")
            or hardware.get_gpu(hardware.COURSE_GPU))


def _measure_gpu(fn, args, kwargs, interval_s: float) -> tuple[object, Energy]:
    nvml = _Nvml()
    try:
        before = nvml.energy_mj()
        if before is not None:
            t0 = time.perf_counter()
            result = fn(*args, **kwargs)
            seconds = time.perf_counter() - t0
            after = nvml.energy_mj()
            return result, Energy((after - before) / 1e3, seconds, "board", "measured",
                                  NVML_COUNTER_SOURCE, nvml.name)
        with _PowerSampler(nvml, interval_s) as sampler:
            t0 = time.perf_counter()
            result = fn(*args, **kwargs)
            t1 = time.perf_counter()
            time.sleep(interval_s)
        samples = sampler.samples
        if len(samples) < 2:
            raise RuntimeError("NVML returned fewer than two power samples")
        joules = energy_from_samples([t for t, _ in samples], [w for _, w in samples])
        span = samples[-1][0] - samples[0][0]
        joules *= (t1 - t0) / span if span > 0 else 1.0
        return result, Energy(joules, t1 - t0, "board", "measured",
                              NVML_SAMPLES_SOURCE.format(interval=interval_s), nvml.name)
    finally:
        nvml.close()


def measure(fn, *args, device: str = "cpu", interval_s: float = 0.01, gpu=None,
            utilisation: float = 1.0, **kwargs) -> tuple[object, Energy]:
    """Run ``fn(*args, **kwargs)`` and return (its result, its :class:`Energy`).

    ``device="cpu"``: RAPL package energy where readable (chip, measured), else the rated
    estimate. ``device="gpu"``: where NVML finds a GPU, its total-energy counter (board,
    measured), or its power samples where the GPU has no counter (board, measured, said so);
    otherwise gpulab's power model of ``gpu`` (by default the GPU present, where gpulab's table
    has it, else the H100) busy ``utilisation`` of the time (board, estimated)."""
    if device not in ("cpu", "gpu"):
        raise ValueError(f"device must be 'cpu' or 'gpu', not {device!r}")
    if device == "gpu":
        if gpu_power_available():
            return _measure_gpu(fn, args, kwargs, interval_s)
        t0 = time.perf_counter()
        result = fn(*args, **kwargs)
        return result, estimate_gpu(time.perf_counter() - t0, _present_gpu(gpu), utilisation)
    zones = rapl_zones()
    before = _rapl_read(zones) if zones else []
    t0 = time.perf_counter()
    result = fn(*args, **kwargs)
    seconds = time.perf_counter() - t0
    if zones:
        after = _rapl_read(zones)
        joules = sum(((a - b) % top) / 1e6 for (b, top), (a, _) in zip(before, after, strict=True))
        return result, Energy(joules, seconds, "chip", "measured",
                              f"RAPL package counters ({len(zones)} package(s)), whole CPU "
                              "package including other processes", "CPU")
    return result, estimate_cpu(seconds)


def same_job(seconds_fast: float, watts_fast: float, seconds_slow: float, watts_slow: float,
             idle_watts_fast: float = 0.0, idle_watts_slow: float = 0.0,
             window_s: float | None = None) -> dict:
    """Energy of one job on two chips over the same wall-clock ``window_s`` (default: the slower
    job's time): each draws its busy watts while working and its idle watts for the rest."""
    window = max(seconds_fast, seconds_slow) if window_s is None else window_s
    fast = watts_fast * seconds_fast + idle_watts_fast * max(0.0, window - seconds_fast)
    slow = watts_slow * seconds_slow + idle_watts_slow * max(0.0, window - seconds_slow)
    return {"fast_joules": fast, "slow_joules": slow, "window_s": window,
            "faster_is_greener": fast < slow}


__all__ = ["BOUNDARIES", "BOUNDARY_NAMES", "CPU_RATED_SOURCE", "CPU_RATED_WATTS",
           "NVML_COUNTER_SOURCE", "NVML_SAMPLES_SOURCE", "PUE_SOURCE", "PUE_TYPICAL", "Energy",
           "energy_from_samples", "estimate_cpu", "estimate_energy", "estimate_gpu",
           "gpu_power_available", "measure", "rapl_zones", "same_job"]
