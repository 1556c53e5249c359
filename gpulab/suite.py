"""The benchmark suite behind ``gpulab bench``: every kernel of chapters 02-03, checked, then
timed, then compared with its ceiling and with a baseline from the same run.

What a row means depends on the tier, and every row says which (its ``origin``):

- ``cpu``   — measured on this machine's CPU with :func:`gpulab.bench.time_cpu` (NumPy, which
  calls BLAS for matmul): the baseline.
- ``gpu``   — measured on the local GPU with CUDA events (:func:`gpulab.bench.time_gpu`); short
  kernels are launched several times back to back between the events and the time divided,
  so that Python's launch latency is not counted as GPU time.
- ``model`` — estimated from a roofline model of a named GPU (:func:`gpulab.hardware.
  estimate_time`): the larger of FLOPs / peak and bytes / bandwidth, plus launch overhead
  (plus the host link for rows "incl. transfers"). In the ``sim`` tier these are the only GPU
  figures: simulator time is not GPU time, so the simulator is used only to *check* each
  kernel's answer against NumPy at a tiny size.

Ceilings: a memory-bound kernel's rate is compared with the GPU's datasheet bandwidth and, on a
GPU, with the bandwidth of a device-to-device copy measured in the same run; a matmul's with
the datasheet's fp32 peak and, where CuPy is installed, with cuBLAS measured in the same run.

    report = run_suite()                  # the default sizes of this tier
    print(report.table())
    save_report("results.json", report)   # with the date, tier, device and gpulab version
    recorded = latest_recorded_run()      # a run recorded on a named GPU, or None

Recorded GPU runs live in ``gpulab/data/bench_*.json`` (``gpulab bench --record`` on a GPU).
"""

from __future__ import annotations

import datetime
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np

from gpulab import bench, device, hardware
from gpulab.hardware import format_seconds as _format_seconds
from gpulab.kernels.launch import one_thread_per_element

FILE_FORMAT = "gpulab-bench"
FILE_FORMAT_VERSION = 1
DATA_DIR = Path(__file__).parent / "data"
ORIGINS = ("cpu", "gpu", "model")
MEMORY_KERNELS = ("saxpy", "copy_coalesced", "copy_strided")
MATMUL_KERNELS = ("matmul_naive", "matmul_tiled", "matmul_register_blocked")
KERNELS = MEMORY_KERNELS + MATMUL_KERNELS
DTYPE = np.float32  # the suite is fp32, like the chapters' headline numbers
PRECISION = "fp32"
DEFAULT_GPU = "H100-SXM"
DEFAULT_STRIDE = 8  # float32: 8 x 4 B = 32 B apart, one sector per thread
DEFAULT_TILE = 16
SAXPY_A = 2.5  # the scalar a of every saxpy the suite runs
MIN_TIMED_S = 2e-3  # a GPU timing region at least this long (launches looped to reach it)

# Sizes per tier. sim: the CPU baseline stays well under a second per call; gpu: large enough
# to saturate the memory system (2^26 float32 = 256 MiB per array) and n = 4096 for matmul.
SIZES = {
    "sim": {"memory": (2**20, 2**24), "matmul": (256, 1024, 4096)},
    "gpu": {"memory": (2**20, 2**26), "matmul": (1024, 4096)},
}
# The simulator check: a tiny problem whose sizes are not multiples of any block or tile.
CHECK_N = 1000
CHECK_MATMUL = (17, 23, 9)  # M, N, K


def default_sizes(tier: str | None = None) -> dict[str, tuple[int, ...]]:
    return SIZES["gpu" if (tier or device.tier()) == "gpu" else "sim"]


# --- rows and reports ----------------------------------------------------------------------


@dataclass
class Row:
    """One line of the table: what ran, at which size, where its numbers come from.

    ``times_s``: one time per repeat for measured rows; the single estimate for ``model``
    rows. ``flops`` and ``bytes_moved`` are the useful work of one call (for matmul, bytes
    are the traffic model's for model rows, the compulsory A + B + C otherwise).
    """

    kernel: str
    group: str  # "memory" or "matmul"
    size: str
    role: str  # "kernel", "baseline", "transfer", "with transfers", "ceiling"
    origin: str  # one of ORIGINS
    device: str
    times_s: list[float]
    flops: float | None = None
    bytes_moved: float | None = None
    percent_of_spec: float | None = None
    spec: str | None = None  # what the percentage is of, e.g. "3.35 TB/s (H100 datasheet)"
    percent_of_measured: float | None = None
    measured_ceiling: str | None = None  # e.g. "device copy 3.0 TB/s" or "cuBLAS"
    check: str | None = None
    note: str | None = None
    n: int | None = None

    def __post_init__(self):
        if self.origin not in ORIGINS:
            raise ValueError(f"origin must be one of {ORIGINS}, not {self.origin!r}")
        self.times_s = [float(t) for t in self.times_s]
        if not self.times_s or any(not t >= 0 for t in self.times_s):
            raise ValueError(f"row {self.kernel!r} needs non-negative times, not {self.times_s}")

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
    def flops_per_s(self) -> float | None:
        return self.flops / self.median_s if self.flops and self.median_s > 0 else None

    @property
    def bytes_per_s(self) -> float | None:
        return self.bytes_moved / self.median_s if self.bytes_moved and self.median_s > 0 else None

    @property
    def rate(self) -> str:
        """GFLOP/s for matmul rows that compute, GB/s (decimal) for everything else."""
        if self.group == "matmul" and self.flops_per_s:
            return _format_rate(self.flops_per_s, "FLOP/s")
        if self.bytes_per_s:
            return _format_rate(self.bytes_per_s, "B/s")
        return "—"

    @property
    def label(self) -> str:
        """Where the numbers came from, in words."""
        if self.origin == "model":
            return f"estimated from a roofline model of the {self.device}"
        if self.origin == "gpu":
            return f"measured on {self.device} (CUDA events)"
        return f"measured on {self.device}"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Row:
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown row field(s) {sorted(unknown)}")
        return cls(**data)


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

    def table(self) -> str:
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


def _format_rate(value: float, unit: str) -> str:
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def _format_range(row: Row) -> str:
    if row.origin == "model" or len(row.times_s) == 1:
        return "—"
    return f"{_format_seconds(row.min_s)} – {_format_seconds(row.max_s)}"


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
    return [row.kernel, row.size, row.origin, _format_seconds(row.median_s), _format_range(row),
            row.rate, _percentages(row), check]


def format_table(report: BenchReport) -> str:
    """The table ``gpulab bench`` prints, with a header saying where and when, and a legend
    saying what each origin means."""
    lines = [
        f"gpulab bench — tier {report.tier}, {report.date}, gpulab {report.gpulab_version}",
        f"device: {report.device}",
    ]
    if report.tier != "gpu":
        lines.append("No GPU in this process: simulator time is not GPU time. GPU figures are "
                     f"roofline estimates for the {_gpu_name(report.gpu_model)}; each kernel was "
                     "run in the simulator only to check its answer.")
    if report.copy_bytes_per_s:
        lines.append(f"measured device-to-device copy bandwidth: "
                     f"{_format_rate(report.copy_bytes_per_s, 'B/s')} (read + write)")
    cells = [list(TABLE_COLUMNS)] + [table_cells(row) for row in report.rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(TABLE_COLUMNS) - 1)]
    lines.append("")
    for index, row_cells in enumerate(cells):
        text = "  ".join(c.ljust(w) for c, w in zip(row_cells, widths, strict=False))
        lines.append(f"{text}  {row_cells[-1]}".rstrip())
        if index == 0:
            lines.append("-" * min(len(lines[-1]), 160))
    lines += ["", "origin:"]
    origins = {row.origin: row for row in report.rows}
    explanations = {
        "cpu": "measured on {device} with time.perf_counter: median of the repeats, range "
               "min – max",
        "gpu": "measured on {device} with CUDA events (launches looped between the events, "
               "time per launch); range min – max",
        "model": "estimated from a roofline model of the {device}: max(FLOPs / peak, bytes / "
                 f"bandwidth) + {hardware.LAUNCH_OVERHEAD_S * 1e6:g} µs launch (+ host link for "
                 "'incl. transfers'); matmul bytes from the traffic model in "
                 "gpulab.kernels.matmul (no cache reuse). A roofline estimate is a ceiling: real "
                 "kernels reach a fraction of it, which `gpulab bench` on a GPU measures",
    }
    for origin in ORIGINS:
        if origin in origins:
            text = explanations[origin].format(device=origins[origin].device)
            lines.append(f"  {origin:5s} = {text}")
    lines.append("  rates: bytes are the useful bytes read + written (GB = 1e9 B); FLOP/s from "
                 "2·M·N·K for matmul")
    if report.checks:
        lines.append("checks (each kernel's answer against NumPy, gpulab.reference):")
        for kernel, text in report.checks.items():
            lines.append(f"  {kernel:24s} {text}")
    lines += [f"note: {note}" for note in report.notes]
    if report.elapsed_s is not None:
        lines.append(f"run took {report.elapsed_s:.1f} s")
    return "\n".join(lines)


# --- JSON -------------------------------------------------------------------------------------


def save_report(path, report: BenchReport) -> Path:
    """Write ``report`` as JSON (format ``gpulab-bench``); :func:`load_report` reads it back."""
    document = {"format": FILE_FORMAT, "format_version": FILE_FORMAT_VERSION,
                **report.to_dict()}
    text = json.dumps(document, indent=1, ensure_ascii=False, allow_nan=False)
    path = Path(path)
    path.write_text(text + "\n", encoding="utf-8")
    return path


def load_report(path) -> BenchReport:
    path = Path(path)
    document = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(document, dict) or document.get("format") != FILE_FORMAT:
        raise ValueError(f"{path} is not a gpulab bench file (no 'format': {FILE_FORMAT!r})")
    if document.get("format_version", 0) > FILE_FORMAT_VERSION:
        raise ValueError(f"{path} was written by a newer gpulab; upgrade gpulab to read it")
    document.pop("format")
    document.pop("format_version")
    return BenchReport.from_dict(document)


def recorded_runs(directory=DATA_DIR) -> list[BenchReport]:
    """The runs recorded in ``directory`` (``bench_*.json``), oldest first; [] if none."""
    directory = Path(directory)
    reports = [load_report(p) for p in sorted(directory.glob("bench_*.json"))]
    return sorted(reports, key=lambda r: r.date)


def latest_recorded_run(tier: str = "gpu", directory=DATA_DIR) -> BenchReport | None:
    """The newest recorded run of ``tier`` (a real GPU by default), or None: there may be
    none yet, and a chapter must then say so rather than show made-up numbers."""
    runs = [r for r in recorded_runs(directory) if r.tier == tier]
    return runs[-1] if runs else None


def describe_recorded_run(report: BenchReport | None) -> str:
    if report is None:
        return ("no recorded run yet: nobody has run `gpulab bench --record` on a GPU for this "
                "version of the course, so only this machine's figures and the model are shown")
    return f"recorded run: {report.headline} (gpulab {report.gpulab_version})"


def record_path(report: BenchReport, directory=DATA_DIR) -> Path:
    slug = "".join(c if c.isalnum() else "-" for c in report.device).strip("-").lower()
    return Path(directory) / f"bench_{slug}_{report.date[:10]}.json"


# --- progress ---------------------------------------------------------------------------------


class Progress:
    """A plain text progress bar on stderr: ``[#####.....] 5/10 matmul_tiled n=1024``."""

    def __init__(self, total: int, enabled: bool = True, stream=None, width: int = 24):
        self.total, self.done, self.enabled, self.width = max(total, 1), 0, enabled, width
        self.stream = stream or sys.stderr
        self.started = time.perf_counter()

    def step(self, what: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        filled = round(self.width * self.done / self.total)
        elapsed = time.perf_counter() - self.started
        text = (f"[{'#' * filled}{'.' * (self.width - filled)}] {self.done}/{self.total} "
                f"{what} ({elapsed:.0f} s)")
        tty = getattr(self.stream, "isatty", lambda: False)()
        self.stream.write(("\r" + text.ljust(90)) if tty else text + "\n")
        if tty and self.done >= self.total:
            self.stream.write("\n")
        self.stream.flush()


# --- the cases --------------------------------------------------------------------------------


@dataclass
class Case:
    """One kernel at one size: its counts, how to launch it on device arrays, its CPU
    baseline and how to check its answer."""

    kernel: str  # the label in the table, e.g. "matmul_tiled (T=16)"
    key: str  # the kernel's registry name, e.g. "matmul_tiled"
    group: str
    size: str
    n: int
    flops: float
    bytes_moved: float  # useful bytes (what the table's rate uses)
    model_bytes: float  # bytes the roofline model charges (fetched sectors, traffic model)
    transfer_bytes: float  # inputs in + result out over the host link
    make_inputs: Callable[[np.random.Generator], tuple]
    run_device: Callable  # (kernel args on device) -> None, enqueues the kernel
    reference_inputs: Callable  # (host inputs) -> the arguments _verdict needs
    cpu_baseline: Callable | None = None  # (host inputs) -> zero-arg callable
    baseline_name: str = ""
    note: str | None = None


def _memory_cases(n: int, stride: int, kernels) -> list[Case]:
    from gpulab.kernels import memory

    itemsize = np.dtype(DTYPE).itemsize
    size = f"n = {n:,}"
    cases = []
    a = DTYPE(SAXPY_A)

    def one_thread(count):
        return one_thread_per_element(count, memory.DEFAULT_THREADS_PER_BLOCK)

    if "saxpy" in kernels:
        config = one_thread(n)
        cases.append(Case(
            "saxpy", "saxpy", "memory", size, n, **memory.saxpy_counts(n, itemsize),
            model_bytes=3 * n * itemsize, transfer_bytes=3 * n * itemsize,
            make_inputs=lambda rng: (rng.random(n, dtype=DTYPE), rng.random(n, dtype=DTYPE),
                                     np.empty(n, DTYPE)),
            run_device=lambda x, y, out: memory.saxpy[config.blocks, config.threads_per_block](
                a, x, y, out),
            reference_inputs=lambda x, y, out: (x, y),
            cpu_baseline=lambda x, y, out: (lambda: (np.multiply(x, a, out=out),
                                                     np.add(out, y, out=out))),
            baseline_name="NumPy a*x + y",
        ))
    if "copy_coalesced" in kernels:
        config = one_thread(n)
        cases.append(Case(
            "copy_coalesced", "copy_coalesced", "memory", size, n,
            **memory.copy_counts(n, itemsize),
            model_bytes=2 * n * itemsize, transfer_bytes=2 * n * itemsize,
            make_inputs=lambda rng: (rng.random(n, dtype=DTYPE), np.empty(n, DTYPE)),
            run_device=lambda x, out: memory.copy_coalesced[config.blocks,
                                                            config.threads_per_block](x, out),
            reference_inputs=lambda x, out: (x,),
            cpu_baseline=lambda x, out: (lambda: np.copyto(out, x)),
            baseline_name="NumPy copy",
        ))
    if "copy_strided" in kernels:
        from gpulab import memory_model

        n_out = memory.strided_length(n, stride)
        config = one_thread(n_out)
        access = memory_model.copy_access(stride, itemsize=itemsize)
        fetched_per_element = access.bytes_fetched / (access.n_requests * memory_model.WARP_SIZE)
        cases.append(Case(
            "copy_strided", "copy_strided", "memory", f"n = {n:,}, stride {stride}", n,
            **memory.copy_counts(n_out, itemsize),
            model_bytes=n_out * (fetched_per_element + itemsize),
            transfer_bytes=(n + n_out) * itemsize,
            make_inputs=lambda rng: (rng.random(n, dtype=DTYPE), np.empty(n_out, DTYPE)),
            run_device=lambda x, out: memory.copy_strided[config.blocks,
                                                          config.threads_per_block](x, out, stride),
            reference_inputs=lambda x, out: (x, stride),
            cpu_baseline=lambda x, out: (lambda: np.copyto(out, x[::stride])),
            baseline_name=f"NumPy x[::{stride}] copy",
            note=f"reads {access.sectors_per_request:g} sectors per warp request "
                 f"(coalesced: {access.ideal_sectors_per_request:g})",
        ))
    return cases


def _matmul_cases(n: int, tile: int, kernels) -> list[Case]:
    from gpulab.kernels import matmul as mm

    itemsize = np.dtype(DTYPE).itemsize
    cases = []
    for kernel in kernels:
        if kernel not in MATMUL_KERNELS:
            continue
        method = kernel.removeprefix("matmul_")
        method_tile = tile if method == "tiled" else None
        config = mm.launch_config(n, n, n, method, method_tile)
        label = f"{kernel} (T={tile})" if method == "tiled" else kernel
        cases.append(Case(
            label, kernel, "matmul", f"M = N = K = {n:,}", n, flops=mm.flops(n, n, n),
            bytes_moved=mm.minimum_bytes(n, n, n, itemsize),
            model_bytes=mm.traffic_bytes(n, n, n, method, method_tile, itemsize),
            transfer_bytes=3 * n * n * itemsize,
            make_inputs=lambda rng: (rng.random((n, n), dtype=DTYPE) - DTYPE(0.5),
                                     rng.random((n, n), dtype=DTYPE) - DTYPE(0.5),
                                     np.empty((n, n), DTYPE)),
            run_device=lambda A, B, C, config=config: mm.launch(config, A, B, C),
            reference_inputs=lambda A, B, C: (A, B),
            cpu_baseline=lambda A, B, C: (lambda: np.matmul(A, B, out=C)),
            baseline_name="NumPy matmul (BLAS)",
        ))
    return cases


# --- checking ---------------------------------------------------------------------------------


def _max_error(got: np.ndarray, expected: np.ndarray) -> float:
    got64, expected64 = np.asarray(got, np.float64), np.asarray(expected, np.float64)
    return float(np.max(np.abs(got64 - expected64))) if got64.size else 0.0


def _verdict(kernel: str, got, inputs, where: str) -> str:
    """Compare a result with gpulab.reference: exact for copies and saxpy (one rounding per
    operation), within the K·eps·(|A| @ |B|) bound for matmul."""
    from gpulab import reference

    if kernel.startswith("matmul"):
        A, B = inputs[0], inputs[1]
        error = np.abs(np.asarray(got, np.float64) - reference.matmul_exact(A, B))
        ok = bool(np.all(error <= reference.matmul_tolerance(A, B)))
        shape = f"{A.shape[0]}x{A.shape[1]} @ {B.shape[0]}x{B.shape[1]}"
        text = f"max |error| {error.max():.2g} within bound"
    else:
        expected = {"saxpy": lambda: reference.saxpy(SAXPY_A, inputs[0], inputs[1]),
                    "copy_coalesced": lambda: reference.copy(inputs[0])}.get(kernel)
        expected = expected() if expected else reference.copy_strided(inputs[0], inputs[-1])
        error = _max_error(got, expected)
        ok = bool(np.allclose(got, expected, rtol=4 * np.finfo(DTYPE).eps, atol=0))
        shape = f"n = {len(inputs[0]):,}"
        text = f"max |error| {error:.2g}"
    mark = "ok" if ok else "WRONG"
    return f"{mark} vs NumPy ({where}, {shape}, {text if ok else 'outside the bound: ' + text})"


def check_in_simulator(kernels, stride: int, tile: int, seed: int = 0) -> dict[str, str]:
    """Run each kernel once, for real, at a tiny size whose dimensions are not multiples of
    any block or tile, and compare with NumPy. In the ``sim`` tier this runs in the
    simulator; it is a correctness check, never a timing."""
    from gpulab.kernels import matmul as mm
    from gpulab.kernels import memory

    rng = np.random.default_rng(seed)
    where = "simulator" if device.tier() == "sim" else device.PROBE.device_name or "GPU"
    results = {}
    x, y = rng.random(CHECK_N, dtype=DTYPE), rng.random(CHECK_N, dtype=DTYPE)
    M, N, K = CHECK_MATMUL
    A = rng.random((M, K), dtype=DTYPE) - DTYPE(0.5)
    B = rng.random((K, N), dtype=DTYPE) - DTYPE(0.5)
    for kernel in kernels:
        if kernel == "saxpy":
            results[kernel] = _verdict(kernel, memory.run_saxpy(SAXPY_A, x, y), (x, y), where)
        elif kernel == "copy_coalesced":
            results[kernel] = _verdict(kernel, memory.run_copy(x), (x,), where)
        elif kernel == "copy_strided":
            results[kernel] = _verdict(kernel, memory.run_copy_strided(x, stride), (x, stride),
                                       where)
        elif kernel in MATMUL_KERNELS:
            method = kernel.removeprefix("matmul_")
            method_tile = tile if method == "tiled" else None
            got = mm.matmul(A, B, method=method, tile=method_tile)
            results[kernel] = _verdict(kernel, got, (A, B), where)
    return results


# --- timing -----------------------------------------------------------------------------------


def time_on_gpu(launch, repeats: int, name: str, **counts) -> bench.Measurement:
    """CUDA-event time per call of ``launch``, with calls looped between the events until a
    region lasts at least MIN_TIMED_S, so Python's launch latency overlaps the GPU's work."""
    single = bench.time_gpu(launch, repeats=1, warmup=1, name=name)
    loops = int(min(max(math.ceil(MIN_TIMED_S / max(single.median_s, 1e-7)), 1), 200))

    def looped():
        for _ in range(loops):
            launch()

    timed = bench.time_gpu(looped, repeats=repeats, warmup=1, name=name)
    return bench.Measurement(name=name, times_s=[t / loops for t in timed.times_s], where="gpu",
                             device=timed.device, meta={**timed.meta, "loops": loops}, **counts)


def measure_copy_bandwidth(n_bytes: int, repeats: int = 10) -> float:
    """Bytes per second (read + write) of a device-to-device copy of ``n_bytes``: the
    bandwidth a memory-bound kernel can hope for on this GPU. GPU tier only."""
    from numba import cuda

    count = n_bytes // 4
    src = cuda.device_array(count, dtype=np.float32)
    dst = cuda.device_array(count, dtype=np.float32)
    src.copy_to_device(np.ones(count, np.float32))
    measurement = time_on_gpu(lambda: dst.copy_to_device(src), repeats, "device copy")
    return 2 * count * 4 / measurement.median_s


def _cupy():
    try:
        import cupy
    except Exception:  # not installed, or no matching CUDA runtime
        return None
    return cupy


def local_gpu_spec(override: str | None = None) -> hardware.GPUSpec | None:
    """The spec for this machine's GPU from gpulab's table, matched by name, or ``override``."""
    if override:
        return hardware.get_gpu(override)
    name = device.PROBE.device_name or ""
    for candidate in [name, *[t for t in name.replace("-", " ").split()
                              if any(c.isdigit() for c in t)]]:
        try:
            return hardware.get_gpu(candidate)
        except ValueError:
            continue
    return None


# --- the run ----------------------------------------------------------------------------------


def _cpu_row(case: Case, inputs, repeats: int) -> Row:
    fn = case.cpu_baseline(*inputs)
    measured = bench.time_cpu(fn, repeats=repeats, warmup=1, name=case.baseline_name)
    return Row(case.baseline_name, case.group, case.size, "baseline", "cpu",
               bench.cpu_device(), measured.times_s, case.flops, case.bytes_moved, n=case.n)


def _model_rows(case: Case, gpu: hardware.GPUSpec) -> list[Row]:
    kernel = hardware.estimate_time(gpu, case.flops, case.model_bytes, PRECISION)
    with_copy = hardware.estimate_time(gpu, case.flops, case.model_bytes, PRECISION,
                                       transfer_bytes=case.transfer_bytes)
    rows = [
        Row(case.kernel, case.group, case.size, "kernel", "model", gpu.name, [kernel.time_s],
            case.flops, case.bytes_moved if case.group == "memory" else case.model_bytes,
            note=f"{kernel.bound}-bound" + (f"; {case.note}" if case.note else ""), n=case.n),
        Row(f"{case.kernel} incl. transfers", case.group, case.size, "with transfers", "model",
            gpu.name, [with_copy.time_s], case.flops, case.bytes_moved,
            note=f"+ {_format_seconds(with_copy.transfer_s)} to move inputs in and the result "
                 f"out over {gpu.host_link}", n=case.n),
    ]
    _add_spec_percent(rows[0], gpu)
    return rows


def _add_spec_percent(row: Row, gpu: hardware.GPUSpec | None) -> None:
    if gpu is None:
        return
    if row.group == "matmul" and row.flops_per_s:
        peak = gpu.peak_flops_for(PRECISION)
        row.percent_of_spec = 100 * row.flops_per_s / peak
        row.spec = f"{_format_rate(peak, 'FLOP/s')} fp32 peak"
    elif row.bytes_per_s:
        peak = gpu.memory_bandwidth_bytes_per_s
        row.percent_of_spec = 100 * row.bytes_per_s / peak
        row.spec = f"{_format_rate(peak, 'B/s')} datasheet"


def _gpu_rows(case: Case, inputs, repeats: int, spec, copy_bytes_per_s) -> tuple[list[Row], str]:
    """Measure one case on the local GPU: the kernel alone (data already on the GPU), the
    transfers alone, and the kernel with the transfers. Also checks the answer."""
    from numba import cuda

    name = device.PROBE.device_name or "GPU"
    d_inputs = [cuda.to_device(a) for a in inputs]
    case.run_device(*d_inputs)
    cuda.synchronize()
    got = d_inputs[-1].copy_to_host()
    check = _verdict(case.key, got, case.reference_inputs(*inputs), name)
    kernel = time_on_gpu(lambda: case.run_device(*d_inputs), repeats, case.kernel)
    row = Row(case.kernel, case.group, case.size, "kernel", "gpu", name, kernel.times_s,
              case.flops, case.bytes_moved, check=check, note=case.note, n=case.n)
    _add_spec_percent(row, spec)
    if case.group == "memory" and copy_bytes_per_s:
        row.percent_of_measured = 100 * row.bytes_per_s / copy_bytes_per_s
        row.measured_ceiling = f"device copy {_format_rate(copy_bytes_per_s, 'B/s')}"
    host_inputs, d_output = inputs[:-1], d_inputs[-1]
    out_host = np.empty_like(inputs[-1])

    def h2d():
        for host, dev in zip(host_inputs, d_inputs, strict=False):
            dev.copy_to_device(host)

    def d2h():
        d_output.copy_to_host(out_host)

    def everything():
        h2d()
        case.run_device(*d_inputs)
        d2h()

    in_bytes = sum(a.nbytes for a in host_inputs)
    rows = [row]
    for what, fn, nbytes in (("host→device inputs", h2d, in_bytes),
                             ("device→host result", d2h, out_host.nbytes)):
        m = bench.time_gpu(fn, repeats=max(3, repeats // 2), warmup=1, name=what)
        transfer = Row(f"{case.kernel}: {what}", case.group, case.size, "transfer", "gpu", name,
                       m.times_s, None, nbytes, n=case.n)
        if spec is not None:
            link = spec.host_link_bytes_per_s
            transfer.percent_of_spec = 100 * transfer.bytes_per_s / link
            transfer.spec = f"{_format_rate(link, 'B/s')} {spec.host_link} one way"
        rows.append(transfer)
    total = bench.time_gpu(everything, repeats=max(3, repeats // 2), warmup=1, name=case.kernel)
    rows.append(Row(f"{case.kernel} incl. transfers", case.group, case.size, "with transfers",
                    "gpu", name, total.times_s, case.flops, case.bytes_moved,
                    note="pageable host memory, as cuda.to_device uses", n=case.n))
    return rows, check


def _cublas_row(case: Case, inputs, repeats: int, spec) -> Row | None:
    cupy = _cupy()
    if cupy is None:
        return None
    A, B = (cupy.asarray(a) for a in inputs[:2])
    C = cupy.empty_like(A)
    m = time_on_gpu(lambda: cupy.matmul(A, B, out=C), repeats, "cuBLAS")
    row = Row("cuBLAS sgemm (CuPy)", case.group, case.size, "baseline", "gpu",
              device.PROBE.device_name or "GPU", m.times_s, case.flops, case.bytes_moved,
              n=case.n)
    _add_spec_percent(row, spec)
    return row


def run_suite(kernels=KERNELS, memory_sizes=None, matmul_sizes=None, gpu: str | None = None,
              stride: int = DEFAULT_STRIDE, tile: int = DEFAULT_TILE, repeats: int | None = None,
              cpu_repeats: int = 5, progress: bool = False, seed: int = 0) -> BenchReport:
    """Run the suite and return a :class:`BenchReport` (``report.table()`` to print it).

    ``gpu``: the GPU model (a key of :data:`gpulab.hardware.GPUS`) for estimates; defaults to
    H100-SXM in the ``sim`` tier, and to the local GPU's entry (matched by name) on a GPU.
    """
    from gpulab import __version__
    from gpulab.kernels import memory
    from gpulab.kernels.matmul import check_tile

    started = time.perf_counter()
    unknown = [k for k in kernels if k not in KERNELS]
    if unknown:
        raise ValueError(f"unknown kernel(s) {', '.join(unknown)}; "
                         f"choose from {', '.join(KERNELS)}")
    stride, tile = memory.check_stride(stride), check_tile(tile)
    tier = device.tier()
    sizes = default_sizes(tier)
    memory_sizes = tuple(memory_sizes or sizes["memory"])
    matmul_sizes = tuple(matmul_sizes or sizes["matmul"])
    on_gpu = tier == "gpu"
    repeats = repeats or (10 if on_gpu else 5)
    spec = local_gpu_spec(gpu) if on_gpu else hardware.get_gpu(gpu or DEFAULT_GPU)
    cases = [c for n in memory_sizes for c in _memory_cases(n, stride, kernels)]
    cases += [c for n in matmul_sizes for c in _matmul_cases(n, tile, kernels)]
    bar = Progress(len(cases) + 1 + on_gpu, enabled=progress)
    notes = []
    copy_bytes_per_s = None
    checks: dict[str, str] = {}
    if on_gpu:
        largest = max(memory_sizes) * np.dtype(DTYPE).itemsize
        copy_bytes_per_s = measure_copy_bandwidth(largest)
        bar.step("device-to-device copy")
        if _cupy() is None and any(k in MATMUL_KERNELS for k in kernels):
            notes.append("CuPy is not installed, so there is no cuBLAS baseline: "
                         "pip install cupy-cuda12x (or -cuda13x)")
    else:
        checks = check_in_simulator(kernels, stride, tile, seed)
        bar.step("simulator checks")
    rng = np.random.default_rng(seed)
    rows: list[Row] = []
    cublas: dict[str, Row] = {}
    for case in cases:
        inputs = case.make_inputs(rng)
        if not any(r.kernel == case.baseline_name and r.size == case.size for r in rows):
            rows.append(_cpu_row(case, inputs, cpu_repeats))  # the baseline heads its size
        if on_gpu:
            kernel_rows, check = _gpu_rows(case, inputs, repeats, spec, copy_bytes_per_s)
            checks.setdefault(case.key, check)
            if case.group == "matmul" and case.size not in cublas:
                row = _cublas_row(case, inputs, repeats, spec)
                if row is not None:
                    cublas[case.size] = row
            if case.group == "matmul" and case.size in cublas:
                reference_s = cublas[case.size].median_s
                kernel_rows[0].percent_of_measured = 100 * reference_s / kernel_rows[0].median_s
                kernel_rows[0].measured_ceiling = "cuBLAS"
            rows += kernel_rows
            if spec is not None:
                rows += _model_rows(case, spec)[:1]
        else:
            model_rows = _model_rows(case, spec)
            model_rows[0].check = checks.get(case.key)
            rows += model_rows
        if case.size in cublas and not any(r is cublas[case.size] for r in rows):
            rows.append(cublas[case.size])
        bar.step(f"{case.kernel} {case.size}")
    if tuple(kernels) == KERNELS:  # the whole suite: also chapter 07-08's training epoch
        from gpulab.nn.benchmark import suite_rows

        rows += suite_rows(spec, repeats=3)
    if not on_gpu:
        notes.append("simulator time is not GPU time: the kernels ran in the simulator only to "
                     "check their answers; the GPU columns are a model, not a measurement")
    elif spec is not None:
        notes.append(f"datasheet figures are those of the {spec.name} in gpulab.hardware"
                     + (" (chosen with --gpu)" if gpu else
                        f", matched from the device name {device.PROBE.device_name!r}"))
    else:
        notes.append(f"{device.PROBE.device_name!r} is not in gpulab.hardware's table: no "
                     "datasheet percentages (pass --gpu to choose a spec)")
    return BenchReport(
        rows=rows, tier=tier,
        device=(device.PROBE.device_name or "GPU") if on_gpu else bench.cpu_device(),
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        gpulab_version=__version__, gpu_model=spec.key if spec else None,
        copy_bytes_per_s=copy_bytes_per_s, checks=checks, cpu=bench.cpu_device(), notes=notes,
        elapsed_s=time.perf_counter() - started,
    )


__all__ = [
    "BenchReport", "KERNELS", "Row", "default_sizes", "describe_recorded_run", "format_table",
    "latest_recorded_run", "load_report", "recorded_runs", "run_suite", "save_report",
]
