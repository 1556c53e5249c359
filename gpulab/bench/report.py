"""What ``gpulab bench`` reports, and the one file format its runs are kept in.

- :class:`Row` — one line of the table: a :class:`gpulab.timing.Measurement` (the times and
  where they came from) with the table's context: group, size, role, the datasheet peak and
  a measured ceiling, check, note.
- :class:`BenchReport` — a whole run with where and when it ran; :func:`format_table` prints it.
- :func:`save_report` / :func:`load_report` — JSON (format ``gpulab-bench``, version 2) with the
  date, tier, device and gpulab version. Recorded GPU runs live in ``gpulab/data/bench_*.json``
  (``gpulab bench --record`` on a GPU): :func:`recorded_runs`, :func:`latest_recorded_run`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from gpulab import documents, hardware
from gpulab.hardware import format_rate, format_seconds
from gpulab.recorded_runs import Comparison, ComparisonTable, data_dir
from gpulab.tables import Column, Table
from gpulab.timing import ORIGINS, Measurement

FILE_FORMAT = "gpulab-bench"
FILE_FORMAT_VERSION = 2  # 2: each row holds a timing.Measurement
RUN_KIND = "bench"  # recorded runs are bench_<device>_<date>.json (documents.dated_name)
DATA_DIR = Path(__file__).resolve().parent.parent / "data"


@dataclass
class Row:
    """One line of the table: a measurement (or a model estimate) and its context.

    ``measurement.times_s``: one time per repeat for measured rows; the single estimate for
    ``model`` rows. Its ``flops`` and ``bytes_moved`` are the useful work of one call.
    """

    measurement: Measurement
    group: str  # "memory" or "matmul" (or "training")
    size: str
    role: str  # "kernel", "baseline", "transfer", "with transfers"
    percent_of_spec: float | None = None
    spec: str | None = None  # what the percentage is of, e.g. "3.35 TB/s (H100 datasheet)"
    percent_of_measured: float | None = None
    measured_ceiling: str | None = None  # e.g. "device copy 3.0 TB/s" or "cuBLAS"
    check: str | None = None
    note: str | None = None

    kernel = property(lambda self: self.measurement.name)
    origin = property(lambda self: self.measurement.origin)
    device = property(lambda self: self.measurement.device)
    times_s = property(lambda self: self.measurement.times_s)
    flops = property(lambda self: self.measurement.flops)
    bytes_moved = property(lambda self: self.measurement.bytes_moved)
    n = property(lambda self: self.measurement.n)
    median_s = property(lambda self: self.measurement.median_s)
    min_s = property(lambda self: self.measurement.min_s)
    max_s = property(lambda self: self.measurement.max_s)
    label = property(lambda self: self.measurement.label)

    @property
    def flops_per_s(self) -> float | None:
        return self.flops / self.median_s if self.flops and self.median_s > 0 else None

    @property
    def bytes_per_s(self) -> float | None:
        return self.bytes_moved / self.median_s if self.bytes_moved and self.median_s > 0 else None

    @property
    def rate(self) -> str:
        """FLOP/s for matmul rows that compute, B/s (decimal) for everything else."""
        if self.group == "matmul" and self.flops_per_s:
            return format_rate(self.flops_per_s, "FLOP/s")
        if self.bytes_per_s:
            return format_rate(self.bytes_per_s, "B/s")
        return "—"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Row:
        data = dict(data)
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown row field(s) {sorted(unknown)}")
        if not isinstance(data.get("measurement"), dict):
            raise ValueError("a row needs a 'measurement' object")
        return cls(measurement=Measurement.from_dict(data.pop("measurement")), **data)


@dataclass
class BenchReport:
    """A whole run: rows plus where and when it ran."""

    rows: list[Row]
    tier: str
    device: str
    date: str
    gpulab_version: str
    gpu_model: str | None = None  # the spec used for model rows and percentages
    copy_bytes_per_s: float | None = None  # measured device-to-device copy bandwidth
    checks: dict[str, str] = field(default_factory=dict)
    cpu: str = ""
    notes: list[str] = field(default_factory=list)
    elapsed_s: float | None = None

    def rows_for(self, kernel: str | None = None, origin: str | None = None,
                 role: str | None = None) -> list[Row]:
        return [r for r in self.rows if (kernel is None or r.kernel == kernel)
                and (origin is None or r.origin == origin) and (role is None or r.role == role)]

    def table(self) -> Table:
        return format_table(self)

    def roofline_points(self, size: str | None = None) -> list[dict]:
        """Kernel rows as points for :func:`gpulab.plots.roofline_plot` (largest size unless
        ``size`` is given): name, FLOPs, bytes, seconds and where the time came from."""
        points = []
        for row in self.rows:
            if row.role != "kernel" or not row.flops or not row.bytes_moved:
                continue
            if size is not None and row.size != size:
                continue
            points.append({"name": row.kernel, "size": row.size, "flops": row.flops,
                           "bytes_moved": row.bytes_moved, "seconds": row.median_s,
                           "origin": row.label})
        if size is None and points:
            largest = {}
            for p in points:
                key = (p["name"], p["origin"])
                if key not in largest or p["flops"] > largest[key]["flops"]:
                    largest[key] = p
            points = list(largest.values())
        return points

    def to_dict(self) -> dict:
        data = asdict(self)
        data["rows"] = [row.to_dict() for row in self.rows]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> BenchReport:
        data = dict(data)
        rows = [Row.from_dict(item) for item in data.pop("rows", [])]
        known = {f.name for f in fields(cls)}
        return cls(rows=rows, **{k: v for k, v in data.items() if k in known})

    @property
    def headline(self) -> str:
        """'measured on NVIDIA H200 on 2025-01-31' or 'this CPU + a model of the H100 ...'."""
        day = self.date[:10]
        if self.tier == "gpu":
            return f"measured on {self.device} on {day}"
        return f"measured on {self.cpu or 'this CPU'} on {day}; GPU figures estimated for the " \
               f"{_gpu_name(self.gpu_model)}"


def _gpu_name(key: str | None) -> str:
    if not key:
        return "no GPU"
    try:
        return hardware.get_gpu(key).name
    except ValueError:
        return key


# --- formatting -------------------------------------------------------------------------------


def _format_range(row: Row) -> str:
    if row.origin == "model" or len(row.times_s) == 1:
        return "—"
    return f"{format_seconds(row.min_s)} – {format_seconds(row.max_s)}"


def _percent(value: float) -> str:
    return f"{value:.0f}%" if value >= 1 else f"{value:.1g}%"


def _percentages(row: Row) -> str:
    parts = []
    if row.percent_of_spec is not None:
        parts.append(f"{_percent(row.percent_of_spec)} of {row.spec}")
    if row.percent_of_measured is not None:
        parts.append(f"{_percent(row.percent_of_measured)} of {row.measured_ceiling}")
    return "; ".join(parts) or "—"


TABLE_COLUMNS = ("kernel", "size", "origin", "median", "min – max", "rate", "% of ceiling",
                 "check / note")


def table_cells(row: Row) -> list[str]:
    short_check = row.check.split(" (")[0] if row.check else None  # details under the table
    check = "; ".join(x for x in (short_check, row.note) if x) or ""
    return [row.kernel, row.size, row.origin, format_seconds(row.median_s), _format_range(row),
            row.rate, _percentages(row), check]


def format_table(report: BenchReport) -> Table:
    """The table ``gpulab bench`` prints, with a title saying where and when, and a legend
    beneath saying what each origin means."""
    title = [
        f"gpulab bench — tier {report.tier}, {report.date}, gpulab {report.gpulab_version}",
        f"device: {report.device}",
    ]
    if report.tier != "gpu":
        title.append("No GPU in this process: simulator time is not GPU time. GPU figures are "
                     f"estimates for the {_gpu_name(report.gpu_model)} by gpulab's GPU model; "
                     "each kernel was run in the simulator only to check its answer.")
    if report.copy_bytes_per_s:
        title.append(f"measured device-to-device copy bandwidth: "
                     f"{format_rate(report.copy_bytes_per_s, 'B/s')} (read + write)")
    lines = ["origin:"]
    origins = {row.origin: row for row in report.rows}
    explanations = {
        "cpu": "measured on {device} with time.perf_counter: median of the repeats, range "
               "min – max",
        "gpu": "measured on {device} with CUDA events (launches looped between the events, "
               "time per launch); range min – max",
        "model": "estimated by gpulab's GPU model of the {device}: "
                 "max(FLOPs / peak, bytes / bandwidth) + "
                 f"{hardware.LAUNCH_OVERHEAD_S * 1e6:g} µs launch (+ host link for "
                 "'incl. transfers'); matmul bytes from the traffic model in "
                 "gpulab.kernels.matmul (no cache reuse). An estimate, with a promised band "
                 f"per kind of work ({hardware.band_text('memory-bound')} memory-bound, "
                 f"{hardware.band_text('compute-bound')} compute-bound; gpulab model-check); "
                 "`gpulab bench` on a GPU measures the real times",
        "recorded": "measured on {device} in a recorded run (gpulab/data/)",
    }
    for origin in ORIGINS:
        if origin in origins:
            text = explanations[origin].format(device=origins[origin].device)
            lines.append(f"  {origin:8s} = {text}")
    lines.append("  rates: bytes are the useful bytes read + written (GB = 1e9 B); FLOP/s from "
                 "2·M·N·K for matmul")
    if report.checks:
        lines.append("checks (each kernel's answer against NumPy, gpulab.reference):")
        for kernel, text in report.checks.items():
            lines.append(f"  {kernel:24s} {text}")
    lines += [f"note: {note}" for note in report.notes]
    if report.elapsed_s is not None:
        lines.append(f"run took {report.elapsed_s:.1f} s")
    return Table([Column(name, align="left") for name in TABLE_COLUMNS],
                 [table_cells(row) for row in report.rows], title="\n".join(title), notes=lines)


# --- JSON -------------------------------------------------------------------------------------


def save_report(path, report: BenchReport) -> Path:
    """Write ``report`` as JSON (format ``gpulab-bench``); :func:`load_report` reads it back."""
    return documents.write(path, {**documents.header(FILE_FORMAT, FILE_FORMAT_VERSION),
                                  **report.to_dict()}, ensure_ascii=False, allow_nan=False)


def load_report(path) -> BenchReport:
    document = documents.read(path, FILE_FORMAT, "bench file", FILE_FORMAT_VERSION)
    document.pop("format")
    document.pop("format_version")
    return BenchReport.from_dict(document)


def recorded_runs(directory=None) -> list[BenchReport]:
    """The runs recorded in ``directory`` (``bench_*.json``; by default ``gpulab/data`` or
    ``$GPULAB_DATA_DIR``), oldest first; [] if none."""
    directory = Path(directory) if directory is not None else data_dir()
    reports = [load_report(p) for p in documents.recorded_paths(directory, RUN_KIND)]
    return sorted(reports, key=lambda r: r.date)


def latest_recorded_run(tier: str = "gpu", directory=None) -> BenchReport | None:
    """The newest recorded run of ``tier`` (a real GPU by default), or None: there may be
    none yet, and a chapter must then say so rather than show made-up numbers."""
    runs = [r for r in recorded_runs(directory) if r.tier == tier]
    return runs[-1] if runs else None


def recorded_comparison(report: BenchReport) -> ComparisonTable | None:
    """Each kernel a GPU run measured, against the estimate the same run made for the same GPU
    with gpulab's GPU model (ratio measured / predicted); None for a run without such pairs (a
    CPU run)."""
    model = {(r.kernel, r.size): r for r in report.rows if r.origin == "model"
             and r.role == "kernel"}
    rows = tuple(Comparison(f"{r.kernel}, {r.size}", model[r.kernel, r.size].median_s,
                            r.median_s)
                 for r in report.rows
                 if r.origin in ("gpu", "recorded") and r.role == "kernel"
                 and (r.kernel, r.size) in model)
    if not rows:
        return None
    compared = [model[key] for key in model
                if any(row.what == f"{key[0]}, {key[1]}" for row in rows)]
    kinds = dict.fromkeys(r.measurement.meta["kind"] for r in compared
                          if r.measurement.meta.get("kind") in hardware.MODEL_BANDS)
    bands = ", ".join(f"{hardware.band_text(kind)} for {kind}" for kind in kinds)
    predicted = (f"estimated by gpulab's GPU model of the {compared[0].device}"
                 + (f" (its promised bands: {bands}; gpulab model-check)" if bands else ""))
    return ComparisonTable(f"gpulab bench on {report.device}: predicted against measured",
                           predicted, report.headline, rows)


def describe_recorded_run(report: BenchReport | None) -> str:
    """What a chapter says about the GPU figures it shows: the recorded run (with each kernel's
    measured / predicted), or that the GPU figures are the model's estimates."""
    if report is None:
        return ("GPU figures here are estimates by gpulab's GPU model (gpulab model-check "
                "measures its error against published measurements). `make gpu-check` on a "
                "machine with an NVIDIA GPU records measured ones (gpulab/data/), and they then "
                "appear here next to the estimates.")
    text = f"recorded run: {report.headline} (gpulab {report.gpulab_version})"
    table = recorded_comparison(report)
    return text if table is None else f"{text}\n{table}"


def record_path(report: BenchReport, directory=DATA_DIR) -> Path:
    return Path(directory) / documents.dated_name(RUN_KIND, report.device, report.date)
