"""Recorded GPU runs, and predicted against measured.

``gpulab gpu-check`` (``make gpu-check``) runs on a machine with an NVIDIA GPU and writes
``gpulab/data/gpu_run_<device>_<date>.json``: every kernel checked at GPU sizes, the chapters'
GPU series (crossover, bandwidth, matmul tiles, fusion, training epochs), host copies from
pageable and pinned memory, and the launch overhead, with the GPU's name, driver, toolkit and
date. This module reads those files so that a chapter can show, next to each estimate of
gpulab's GPU model, what a real GPU measured and the ratio measured / predicted.

- :func:`latest_gpu_run` — the newest run in the data folder, or None when none ships. The
  folder is ``gpulab/data/``, or ``$GPULAB_DATA_DIR`` (an instructor's own runs; the tests'
  fixture run).
- :class:`GpuRun` — one run: its series, its measured launch overhead and host copy rates, and
  :meth:`GpuRun.model_constants` (those two measured figures as arguments for
  :func:`gpulab.hardware.estimate_time`, so the model uses them once a run exists).
- :class:`Comparison` and :class:`ComparisonTable` — predicted vs measured, with the ratio,
  as text and HTML.

The ratio is the model's error on that work: above 1, the GPU took longer than the model
said; below 1, it was faster. The model promises a band per kind of work
(:data:`gpulab.hardware.MODEL_BANDS`: ±30 % for memory-bound work, launches and copies,
within 2× for compute-bound work), and ``gpulab model-check`` holds every published
measurement inside its band. A ratio far outside the band says the kernel, or the model, is
missing something: a kernel that wastes bandwidth or FLOPs shows up far above 1.
"""

from __future__ import annotations

import functools
import os
import statistics
from dataclasses import dataclass
from pathlib import Path

from gpulab import documents, hardware
from gpulab.tables import Column, ShownAsTable, Table
from gpulab.timing import Measurement

FILE_FORMAT = "gpulab-gpu-run"
FILE_FORMAT_VERSION = 1
RUN_KIND = "gpu_run"  # the files are gpu_run_<device>_<date>.json (documents.dated_name)
PACKAGE_DATA_DIR = Path(__file__).resolve().parent / "data"
DATA_DIR_VARIABLE = "GPULAB_DATA_DIR"


def data_dir() -> Path:
    """Where recorded runs are read from: ``$GPULAB_DATA_DIR`` if set, else ``gpulab/data``."""
    chosen = os.environ.get(DATA_DIR_VARIABLE)
    return Path(chosen) if chosen else PACKAGE_DATA_DIR


@dataclass(frozen=True)
class GpuRun:
    """One recorded run (a ``gpulab-gpu-run`` file)."""

    path: Path
    record: dict

    @property
    def device(self) -> str:
        return self.record["device"]

    @property
    def date(self) -> str:
        return self.record["date"]

    @property
    def driver(self) -> str:
        return str(self.record.get("driver", "unknown"))

    @property
    def toolkit(self) -> str:
        return str(self.record.get("toolkit", "unknown"))

    @property
    def gpu_key(self) -> str | None:
        """The matching :mod:`gpulab.hardware` entry, whose model the run is compared with."""
        spec = hardware.match_device(self.device)
        return None if spec is None else spec.key

    @property
    def label(self) -> str:
        return (f"measured on {self.device} (recorded run of {self.date[:10]}, driver "
                f"{self.driver}, CUDA toolkit {self.toolkit})")

    def series(self, name: str):
        """One of the chapters' GPU series (see ``gpulab.gpu_check.chapter_series``), or None
        when this run did not record it (or recorded only the error that stopped it)."""
        value = self.record.get("series", {}).get(name)
        if isinstance(value, dict) and set(value) == {"error"}:
            return None
        return value

    def measurement(self, data: dict) -> Measurement:
        """A measurement from this run's file, as origin ``recorded``."""
        return Measurement.from_dict(data).as_recorded(self.date)

    @property
    def launch_overhead_s(self) -> float | None:
        """Seconds per launch of an empty kernel, Numba's dispatch included (median)."""
        data = self.series("launch overhead")
        return None if not data else statistics.median(data["times_s"])

    def host_copy_bytes_per_s(self, memory: str) -> float | None:
        """Measured host->device copy rate from ``memory`` ("pageable" or "pinned")."""
        if memory not in ("pageable", "pinned"):
            raise ValueError(f"memory must be 'pageable' or 'pinned', not {memory!r}")
        data = self.series("host copies") or {}
        return data.get(memory, {}).get("bytes_per_s")

    def model_constants(self, link: str = "pageable") -> dict:
        """Keyword arguments for :func:`gpulab.hardware.estimate_time` that replace the model's
        launch overhead and host copy rate with this run's measured ones."""
        constants: dict = {"measured_on": f"{self.device} ({self.date[:10]})"}
        if self.launch_overhead_s:
            constants["launch_overhead_s"] = self.launch_overhead_s
        if link in ("pageable", "pinned") and self.host_copy_bytes_per_s(link):
            constants["link_rate_bytes_per_s"] = self.host_copy_bytes_per_s(link)
        return constants


def load_gpu_run(path) -> GpuRun:
    """Read one recorded run; a clear ValueError for a file that is not one. A file is parsed
    once while it stays unchanged (chapters ask for the latest run at every estimate)."""
    path = Path(path)
    stat = path.stat()
    return _load_gpu_run(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=32)
def _load_gpu_run(path: Path, mtime_ns: int, size: int) -> GpuRun:
    record = documents.read(path, FILE_FORMAT, "GPU run", FILE_FORMAT_VERSION)
    missing = [key for key in ("device", "date") if not record.get(key)]
    if missing:
        raise ValueError(f"{path} lacks {', '.join(missing)}")
    return GpuRun(path, record)


def gpu_runs(directory=None) -> list[GpuRun]:
    """Every recorded run (``gpu_run_*.json``) in ``directory``, oldest first; [] if none.
    Quick smoke-test runs (``--quick``: small sizes) are left out."""
    directory = Path(directory) if directory is not None else data_dir()
    runs = [load_gpu_run(p) for p in documents.recorded_paths(directory, RUN_KIND)]
    return sorted((r for r in runs if not r.record.get("quick")), key=lambda r: r.date)


def latest_gpu_run(directory=None) -> GpuRun | None:
    """The newest recorded run, or None: a chapter then shows its estimates alone, labelled
    as the estimates they are."""
    runs = gpu_runs(directory)
    return runs[-1] if runs else None


def recorded_series(name: str, run: GpuRun | None = None) -> tuple[GpuRun, object] | None:
    """(run, its series ``name``) from ``run`` or the latest recorded run, or None when no run
    ships, it did not record that series, or its GPU is not one the course has a model for:
    what every chapter's predicted-vs-measured table starts from."""
    run = run or latest_gpu_run()
    series = run.series(name) if run is not None else None
    if not series or run.gpu_key is None:
        return None
    return run, series


def model_constants(link: str = "pageable", directory=None) -> dict:
    """The latest run's measured launch overhead and host copy rate as arguments for
    :func:`gpulab.hardware.estimate_time` ({} when no run ships: the model's constants)."""
    run = latest_gpu_run(directory)
    return {} if run is None else run.model_constants(link)


# --- predicted against measured ------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    """One prediction next to one measurement of the same work."""

    what: str
    predicted_s: float
    measured_s: float

    def __post_init__(self):
        if not (self.predicted_s > 0 and self.measured_s > 0):
            raise ValueError(f"{self.what}: times must be positive, not predicted "
                             f"{self.predicted_s!r}, measured {self.measured_s!r}")

    @property
    def ratio(self) -> float:
        """Measured / predicted: how many times the model's estimate the GPU took (the
        model's error on this work)."""
        return self.measured_s / self.predicted_s


@dataclass(frozen=True, repr=False)
class ComparisonTable(ShownAsTable):
    """Predicted (gpulab's GPU model) against measured (a recorded run), row by row."""

    title: str
    predicted_label: str
    measured_label: str
    rows: tuple[Comparison, ...]

    def __bool__(self) -> bool:
        return bool(self.rows)

    def table(self) -> Table:
        """The rows as a :class:`~gpulab.tables.Table`: what, predicted, measured and their
        ratio; the title above, where each side comes from beneath."""
        return Table([Column("what"), Column("predicted", align="right"),
                      Column("measured", align="right"),
                      Column("measured/predicted", "×", "{:.2f}")],
                     [[r.what, hardware.format_seconds(r.predicted_s),
                       hardware.format_seconds(r.measured_s), r.ratio] for r in self.rows],
                     title=self.title, notes=[f"predicted: {self.predicted_label}",
                                              f"measured: {self.measured_label}"])


def comparison_table(title: str, run: GpuRun, rows) -> ComparisonTable:
    """A table of ``rows`` ((what, predicted seconds, measured seconds)) for ``run``; the
    predictions are gpulab's GPU model of the run's own GPU."""
    spec = hardware.get_gpu(run.gpu_key) if run.gpu_key else None
    predicted = (f"estimated by gpulab's GPU model of the {spec.name if spec else run.device} "
                 f"(its promised bands: {hardware.band_text('memory-bound')} for memory-bound "
                 f"work, launches and copies, {hardware.band_text('compute-bound')} for "
                 "compute-bound work; gpulab model-check)")
    return ComparisonTable(title, predicted, run.label,
                           tuple(Comparison(what, p, m) for what, p, m in rows))


def series_comparison(name: str, title: str, rows_of,
                      run: GpuRun | None = None) -> ComparisonTable | None:
    """The table ``title`` of the recorded series ``name`` (of ``run``, else the latest run)
    against gpulab's GPU model: ``rows_of(run, series)`` gives its rows ((what, predicted
    seconds, measured seconds)). None where :func:`recorded_series` finds no such series."""
    found = recorded_series(name, run)
    if found is None:
        return None
    run, series = found
    return comparison_table(title, run, list(rows_of(run, series)))


def constants_table(run: GpuRun | None = None) -> ComparisonTable | None:
    """The model's launch overhead and host copy rates against the ones the run measured
    (a 1 GB copy from pageable and from pinned memory, and one empty-kernel launch), or None
    when no run ships or it measured none of them."""
    run = run or latest_gpu_run()
    if run is None or run.gpu_key is None:
        return None
    spec = hardware.get_gpu(run.gpu_key)
    rows = []
    if run.launch_overhead_s:
        rows.append(("one kernel launch (Numba dispatch included)", hardware.LAUNCH_OVERHEAD_S,
                     run.launch_overhead_s))
    for memory in ("pageable", "pinned"):
        rate = run.host_copy_bytes_per_s(memory)
        if rate:
            rows.append((f"copy 1 GB host→device from {memory} memory",
                         1e9 / hardware.link_bytes_per_s(spec, memory), 1e9 / rate))
    if not rows:
        return None
    return comparison_table("Launches and host copies on a real GPU, against the model", run,
                            rows)


def describe(run: GpuRun | None) -> str:
    """One line for a chapter: which run its measured GPU figures come from, or that the GPU
    figures shown are estimates and how to record measured ones."""
    if run is None:
        return ("GPU figures here are estimates by gpulab's GPU model (gpulab model-check "
                "measures its error against published measurements). On a machine with an "
                "NVIDIA GPU, `make gpu-check` records measured ones, and the chapters then show "
                "them next to each estimate.")
    return f"GPU figures {run.label}, next to the model's estimates."


__all__ = [
    "DATA_DIR_VARIABLE",
    "FILE_FORMAT",
    "RUN_KIND",
    "Comparison",
    "ComparisonTable",
    "GpuRun",
    "comparison_table",
    "constants_table",
    "data_dir",
    "describe",
    "gpu_runs",
    "latest_gpu_run",
    "load_gpu_run",
    "model_constants",
    "series_comparison",
    "recorded_series",
]
