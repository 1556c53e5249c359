"""Number formats: error, memory and speed per format (chapter 04).

- :class:`DotErrorExperiment` runs x · y with gpulab's precision kernels for each (storage,
  accumulator) pair and growing n, and measures the relative error against the exact dot
  product of the original values (float64). x and y are uniform in [0, 1), so the running sum
  grows with n and swamping shows. The launch is fixed at 1 block of 32 threads in every tier:
  the error depends on the order of the additions, not on the machine, so fixing the launch
  gives the same numbers on a GPU and in the simulator. Each series says how it was computed:
  run by a kernel (on the GPU, or in the simulator), or emulated with ml_dtypes.
- :func:`fp8_overflow_table` — what three E4M3 conversions do with values beyond 448:
  ml_dtypes' cast (no saturation), CUDA's ``__NV_SATFINITE`` rule, the course's kernel.
- :func:`matmul_error_rows` / :func:`matmul_error_table` — C = A @ B with the precision matmul
  kernels, each one's largest error against float64 on this CPU.
- :func:`underflow_rows` / :func:`underflow_table` — the share of small values (gradients) each
  format rounds to zero or keeps only as a subnormal, and what a loss scale changes.
- :func:`memory_rows` / :func:`weights_table` — a model's weights in each format, against GPU
  memory sizes (the datasheets' nominal sizes).
- :func:`speed_rows` / :func:`speed_table` — per format, roofline **estimates** for a named GPU
  (a memory-bound dot product, a compute-bound matmul at the datasheet's dense peak for that
  format: the CUDA cores' for fp32, the tensor cores' for tf32 and narrower), and on a GPU the
  precision dot kernels **measured** with CUDA events.
- :func:`error_plot`, :func:`memory_plot` — the figures.
- :class:`PrecisionDashboard` — choose format, accumulator and n; press Run.
"""

from __future__ import annotations

import math

import numpy as np

from gpulab import device, formats, hardware, timing
from gpulab.experiments.dashboard import Dashboard
from gpulab.experiments.experiment import Experiment
from gpulab.tables import Column, Table

STORAGE_FORMATS = ("fp32", "fp16", "bf16", "fp8_e4m3")
ACCUMULATORS = {"fp32": ("fp32",), "fp16": ("fp16", "fp32"), "bf16": ("bf16", "fp32"),
                "fp8_e4m3": ("fp32",)}
DEFAULT_VARIANTS = (("fp32", "fp32"), ("fp16", "fp16"), ("fp16", "fp32"), ("bf16", "bf16"),
                    ("bf16", "fp32"), ("fp8_e4m3", "fp32"))
EXPERIMENT_BLOCKS = 1
EXPERIMENT_THREADS_PER_BLOCK = 32
MEAN_PRODUCT = 0.25  # E[x y] for independent x, y uniform in [0, 1)


def default_sizes(tier: str | None = None) -> list[int]:
    """n = 100 ... 30 000 in the simulator (each launch costs ~0.1 s there, mostly its
    barriers, plus a few µs per element), 100 ... 1 000 000 on a GPU. Beyond that a single
    thread's fp16 running sum (n / 32 products of about 0.25) would pass fp16's largest value,
    65504, and become infinity."""
    if (tier or device.tier()) == "gpu":
        return [100, 1_000, 10_000, 100_000, 1_000_000]
    return [100, 1_000, 3_000, 10_000, 30_000]


def variant_name(storage: str, accumulator: str) -> str:
    return f"{storage} storage, {accumulator} accumulator"


def _check_variant(storage: str, accumulator: str) -> tuple[str, str]:
    storage = formats.get_format(storage).name
    accumulator = formats.get_format(accumulator).name
    if storage not in ACCUMULATORS or accumulator not in ACCUMULATORS[storage]:
        allowed = "; ".join(f"{s}: {', '.join(a)}" for s, a in ACCUMULATORS.items())
        raise ValueError(f"no kernel stores {storage} and accumulates in {accumulator}; the "
                         f"accumulators per storage format are {allowed}")
    return storage, accumulator


def fp_gap(value: float, fmt) -> float:
    """The distance between neighbouring numbers of ``fmt`` around ``value`` (its ulp)."""
    fmt = formats.get_format(fmt)
    value = abs(value)
    if value < fmt.smallest_normal:
        return fmt.smallest_subnormal
    return 2.0 ** (math.floor(math.log2(value)) - fmt.mantissa_bits)


class DotErrorExperiment(Experiment):
    """Relative error of x · y per (storage, accumulator) pair as n grows.

    >>> result = DotErrorExperiment(sizes=[100, 1000]).run()        # doctest: +SKIP
    >>> result["errors"][("fp16", "fp16")]                           # doctest: +SKIP
    [2.3e-05, 4.1e-04]
    """

    def __init__(self, variants=DEFAULT_VARIANTS, sizes=None, seed: int = 0):
        self.variants = [_check_variant(s, a) for s, a in variants]
        if not self.variants:
            raise ValueError("give at least one (storage, accumulator) pair")
        self.sizes = sorted(set(default_sizes() if sizes is None else sizes))
        if not self.sizes or any(isinstance(n, bool) or not isinstance(n, (int, np.integer))
                                 or n < 1 for n in self.sizes):
            raise ValueError(f"sizes must be positive whole numbers, not {sizes!r}")
        self.seed = seed
        self.tier = device.tier()

    def data(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The float64 vectors used at size n (uniform in [0, 1), from the seed and n)."""
        rng = np.random.default_rng([self.seed, n])
        return rng.random(n), rng.random(n)

    def run(self) -> dict:
        """Run every kernel at every n. Returns (and keeps in ``last_result``)
        ``{"sizes", "errors": {(storage, acc): [rel. error per n]}, "labels": {(storage, acc):
        where the numbers came from}, "series": {label: [(n, error)]}, "storage_errors":
        {storage: [error of the exact dot of the rounded inputs]}, "launch", "tier"}``."""
        from gpulab.kernels.narrow_formats import dot_in_format

        errors = {variant: [] for variant in self.variants}
        labels: dict[tuple[str, str], str] = {}
        storage_errors = {s: [] for s in dict.fromkeys(s for s, _ in self.variants)}
        for n in self.sizes:
            x, y = self.data(n)
            exact = float(np.dot(x, y))
            for storage, accumulator in self.variants:
                result = dot_in_format(x, y, storage, accumulator,
                                       threads_per_block=EXPERIMENT_THREADS_PER_BLOCK,
                                       blocks=EXPERIMENT_BLOCKS)
                errors[(storage, accumulator)].append(abs(float(result) - exact) / exact)
                labels[(storage, accumulator)] = result.label
            for storage in storage_errors:
                rounded = [formats.round_trip(v.astype(np.float32), storage) if
                           storage == "fp8_e4m3" else formats.round_to(v, storage)
                           for v in (x, y)]
                storage_errors[storage].append(abs(float(np.dot(*rounded)) - exact) / exact)
        series = {f"{variant_name(*variant)} — {labels[variant]}":
                  list(zip(self.sizes, errors[variant], strict=True))
                  for variant in self.variants}
        self.last_result = {
            "sizes": list(self.sizes),
            "errors": errors,
            "labels": labels,
            "series": series,
            "storage_errors": storage_errors,
            "launch": (f"{EXPERIMENT_BLOCKS} block{'s' if EXPERIMENT_BLOCKS != 1 else ''} x "
                       f"{EXPERIMENT_THREADS_PER_BLOCK} threads (grid-stride, then a tree per "
                       "block, then the partials in a row)"),
            "tier": self.tier,
        }
        return self.last_result

    def explain(self) -> str:
        """What the errors say, in words, with the numbers worked out."""
        result = self._result()
        n = result["sizes"][-1]
        threads = EXPERIMENT_BLOCKS * EXPERIMENT_THREADS_PER_BLOCK
        chain = -(-n // threads)
        running = chain * MEAN_PRODUCT
        lines = [f"Each of the {threads} threads adds about {chain:,} products in a row "
                 f"(n = {n:,}); their average is {MEAN_PRODUCT}, so a thread's running sum "
                 f"reaches about {running:,.0f}."]
        for storage, accumulator in self.variants:
            errors = result["errors"][(storage, accumulator)]
            gap = fp_gap(running, accumulator)
            text = (f"{variant_name(storage, accumulator)}: relative error "
                    f"{errors[0]:.1e} at n = {result['sizes'][0]:,}, {errors[-1]:.1e} at "
                    f"n = {n:,}.")
            if accumulator in ("fp16", "bf16"):
                text += (f" Near {running:,.0f}, {accumulator} numbers are {gap:g} apart, so "
                         f"every added product (about {MEAN_PRODUCT}) is rounded by up to "
                         f"{gap / 2:g}" + (" — more than the product itself: swamping."
                                            if gap / 2 >= MEAN_PRODUCT else "."))
            else:
                floor = result["storage_errors"][storage][-1]
                text += (f" fp32 numbers near {running:,.0f} are {gap:.2g} apart, so the sum "
                         f"hardly adds error; what remains is rounding the inputs to {storage} "
                         f"(the exact dot product of the rounded inputs is off by {floor:.1e}).")
            lines.append(text)
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Overflow in fp8 E4M3: three conversions
# ---------------------------------------------------------------------------------------------

OVERFLOW_VALUES = (440.0, 460.0, 470.0, 1000.0, -1000.0, math.inf)


def fp8_overflow_rows(values=OVERFLOW_VALUES) -> list[dict]:
    """What three conversions to E4M3 (no scale) store for each value:

    - ``cast``: ``ml_dtypes.float8_e4m3fn``'s cast (NumPy ``astype``), which does not saturate:
      a value that rounds beyond 448 (|x| > 464, halfway to the next step, 480) becomes NaN,
      and so does infinity — the OCP specification's non-saturating conversion;
    - ``satfinite``: clip to +-448 first, then round (:func:`gpulab.formats.to_format` with
      ``saturate=True``) — CUDA's ``__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3)``
      and the OCP specification's saturating conversion;
    - ``kernel``: the course's ``quantize_fp8_e4m3`` kernel with scale 1 (run on the GPU or in
      the simulator), which saturates too.
    """
    import ml_dtypes

    from gpulab.kernels.narrow_formats import run_quantize_fp8_e4m3

    x = np.asarray(values, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        cast = x.astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
    satfinite = formats.round_to(x, "fp8_e4m3", saturate=True)
    codes, _ = run_quantize_fp8_e4m3(x, scale=1.0)
    kernel = codes.view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    return [{"value": float(v), "cast": float(c), "satfinite": float(s), "kernel": float(k)}
            for v, c, s, k in zip(x, cast, satfinite, kernel, strict=True)]


def fp8_overflow_table(values=OVERFLOW_VALUES) -> Table:
    """:func:`fp8_overflow_rows` as a table: each value, and what each conversion made of it."""
    return Table([Column("x"), Column("ml_dtypes cast"), Column("__NV_SATFINITE"),
                  Column("course kernel")],
                 [[row["value"], row["cast"], row["satfinite"], row["kernel"]]
                  for row in fp8_overflow_rows(values)])


# ---------------------------------------------------------------------------------------------
# Matmul error per format; small values lost to underflow
# ---------------------------------------------------------------------------------------------

MATMUL_SEED = 7
UNDERFLOW_FORMATS = ("fp32", "bf16", "fp16", "fp8_e5m2", "fp8_e4m3")


def matmul_error_rows(M: int, K: int, N: int, seed: int = MATMUL_SEED) -> list[dict]:
    """C = A @ B with gpulab's four precision matmul kernels, for A (M x K) and B (K x N) drawn
    from a standard normal distribution (``np.random.default_rng(seed)``, A first): fp16 inputs
    summed in fp16 and in fp32, bf16 and fp8 E4M3 inputs summed in fp32
    (:mod:`gpulab.kernels.narrow_formats`; run on the GPU or in the simulator, bf16 emulated with
    ml_dtypes where it cannot run). Returns one ``{"storage", "accumulator", "error", "label"}``
    per kernel: ``error`` is the largest |C - C_exact| as a fraction of max|C_exact|, C_exact
    computed in float64 on this CPU; ``label`` says where and how the kernel ran."""
    import ml_dtypes

    from gpulab.kernels import narrow_formats as kernels

    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    exact = A.astype(np.float64) @ B.astype(np.float64)
    scale = np.abs(exact).max()
    A16, B16 = A.astype(np.float16), B.astype(np.float16)
    runs = [kernels.matmul_fp16(A16, B16, "fp16"), kernels.matmul_fp16(A16, B16, "fp32"),
            kernels.matmul_bf16(A.astype(ml_dtypes.bfloat16), B.astype(ml_dtypes.bfloat16)),
            kernels.matmul_fp8(A, B)]
    return [{"storage": run.storage, "accumulator": run.accumulator,
             "error": float(np.abs(run.value.astype(np.float64) - exact).max() / scale),
             "label": run.label} for run in runs]


def matmul_error_table(M: int, K: int, N: int, seed: int = MATMUL_SEED) -> Table:
    """:func:`matmul_error_rows` as a table: a row per kernel with its input format, its
    accumulator, its largest error as a fraction of max|C|, and where it ran."""
    return Table([Column("inputs"), Column("sums"),
                  Column("largest error", "of max|C|", "{:.1e}"), Column("where it ran")],
                 [[row["storage"], row["accumulator"], row["error"], row["label"]]
                  for row in matmul_error_rows(M, K, N, seed)],
                 title=f"C = A @ B, {M}x{K} times {K}x{N}, values from a standard normal "
                       "distribution; errors against float64 on this CPU")


def underflow_rows(values, format_names=UNDERFLOW_FORMATS) -> list[dict]:
    """Round positive ``values`` (an array) to each format (:func:`gpulab.formats.round_to`)
    and return one ``{"format", "zero", "subnormal"}`` per format: the fraction of the values
    that became 0, and the fraction kept only as a subnormal (non-zero, below the format's
    smallest normal number: fewer significant bits). Computed with NumPy/ml_dtypes on this
    CPU."""
    values = np.asarray(values, dtype=np.float64)
    rows = []
    for name in format_names:
        stored = formats.round_to(values, name)
        smallest_normal = formats.get_format(name).smallest_normal
        rows.append({"format": formats.get_format(name).name,
                     "zero": float(np.mean(stored == 0)),
                     "subnormal": float(np.mean((stored != 0) & (stored < smallest_normal)))})
    return rows


def underflow_table(values, format_names=UNDERFLOW_FORMATS, loss_scale: float | None = 1024,
                    scaled_format: str = "fp16") -> Table:
    """:func:`underflow_rows` as a table, then (unless ``loss_scale`` is None) the fraction of
    ``values * loss_scale`` that ``scaled_format`` rounds to zero: what loss scaling saves."""
    notes = []
    if loss_scale is not None:
        scaled = underflow_rows(np.asarray(values, dtype=np.float64) * loss_scale,
                                [scaled_format])[0]
        notes.append(f"{scaled['format']} after multiplying by {loss_scale:g} first: "
                     f"{scaled['zero']:.1%} flushed to zero")
    return Table([Column("format"), Column("flushed to zero", number_format="{:.1%}"),
                  Column("subnormal (fewer significant bits)", number_format="{:.1%}")],
                 [[row["format"], row["zero"], row["subnormal"]]
                  for row in underflow_rows(values, format_names)],
                 title="fraction of gradients lost (rounded to 0) — computed on this CPU:",
                 notes=notes)


# ---------------------------------------------------------------------------------------------
# Memory per format
# ---------------------------------------------------------------------------------------------

MEMORY_FORMATS = ("fp32", "fp16", "bf16", "fp8_e4m3", "fp4_e2m1")


def memory_rows(parameters: float = 7e9, format_names=MEMORY_FORMATS,
                gpus=("L4", "A100-SXM", hardware.H100_SXM.key, "H200")) -> list[dict]:
    """Per format: bytes for ``parameters`` weights (fp4 also with OCP MX block scales:
    one byte per 32 values) and, per GPU, whether the weights alone fit in its memory.
    Computed (parameters x bits / 8); GPU memory from :mod:`gpulab.hardware`'s datasheets."""
    rows = []
    specs = [hardware.get_gpu(name) for name in gpus]
    for name in format_names:
        fmt = formats.get_format(name)
        variants = [(fmt.name, formats.memory_bytes(parameters, fmt))]
        if fmt.name == "fp4_e2m1":
            variants.append(("fp4_e2m1 + MX scales",
                             formats.memory_bytes(parameters, fmt, formats.MX_BLOCK_SIZE)))
        for label, nbytes in variants:
            rows.append({"format": label, "bytes": nbytes, "gb": nbytes / 1e9,
                         "fits": {gpu.key: nbytes <= gpu.memory_bytes for gpu in specs}})
    return rows


def weights_table(parameters: float = 7e9,
                  gpus=("L4", "A100-SXM", hardware.H100_SXM.key)) -> Table:
    """:func:`memory_rows` as a table: GB of weights per format and, per GPU, whether they fit
    in its **nominal** memory (the datasheet's figure; the driver makes a little less
    available, and the CUDA context takes some of that)."""
    specs = [hardware.get_gpu(key) for key in gpus]
    return Table([Column("format"), Column("weights", "GB", "{:.3g}"),
                  *(Column(key, align="right") for key in gpus)],
                 [[row["format"], row["gb"], *("fits" if row["fits"][key] else "no"
                                               for key in gpus)]
                  for row in memory_rows(parameters, gpus=gpus)],
                 title=f"{parameters / 1e9:g} billion parameters, weights only "
                       "(parameters x bits / 8):",
                 notes=["nominal GPU memory (datasheets): " + "; ".join(
                     f"{spec.key} {spec.memory_bytes / 1e9:g} GB" for spec in specs)])


def memory_plot(parameters: float = 7e9, gpus=("L4", "A100-SXM", hardware.H100_SXM.key), ax=None):
    """Bars: GB of weights per format; dashed lines: the memory of each GPU (datasheets)."""
    import matplotlib.pyplot as plt

    rows = memory_rows(parameters, gpus=gpus)
    if ax is None:
        fig, ax = plt.subplots(figsize=(8, 3.6))
    else:
        fig = ax.figure
    names = [row["format"].replace(" + ", "\n+ ") for row in rows]
    ax.bar(names, [row["gb"] for row in rows], color="#6fa8dc")
    for row, name in zip(rows, names, strict=True):
        ax.text(name, row["gb"], f"{row['gb']:.3g} GB", ha="center", va="bottom", fontsize=8)
    by_size: dict[float, list[str]] = {}
    for key in gpus:  # GPUs with the same memory share one line
        gpu = hardware.get_gpu(key)
        by_size.setdefault(gpu.memory_bytes / 1e9, []).append(gpu.name)
    for gb, names in by_size.items():
        ax.axhline(gb, ls="--", lw=1, color="#999999")
        ax.text(len(rows) - 0.5, gb, " " + ", ".join(names), va="bottom", ha="right",
                fontsize=8, color="#555555")
    ax.set_ylabel("GB (decimal) for the weights")
    ax.set_title(f"{parameters / 1e9:g} billion parameters: weights only, computed as "
                 "parameters × bits / 8", fontsize=9)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------
# Speed per format
# ---------------------------------------------------------------------------------------------

SPEED_FORMATS = ("fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "fp4_e2m1")
# Datasheet peaks for these precisions are the CUDA cores' (ordinary scalar instructions); every
# other precision's peak (tf32, fp16, bf16, fp8, fp4, int8, fp64_tensor) is the tensor cores'.
CUDA_CORE_PRECISIONS = ("fp64", "fp32")


def compute_units(precision: str) -> str:
    """Which units a datasheet's peak for ``precision`` is for: "CUDA cores" or "tensor cores"."""
    return "CUDA cores" if precision in CUDA_CORE_PRECISIONS else "tensor cores"


def speed_rows(gpu=hardware.COURSE_GPU, dot_n: int = 100_000_000, matmul_n: int = 8192,
               format_names=SPEED_FORMATS) -> list[dict]:
    """Estimates by gpulab's GPU model per format on ``gpu``: a dot product of ``dot_n`` elements
    (memory-bound: bytes shrink with the format) and an ``matmul_n``-cubed matmul
    (compute-bound: the datasheet's dense peak for the format, tensor cores for tf32 and
    narrower; ``units`` says which). ``None`` where the GPU has no rate for the format. Every
    time is an estimate; ``dot_kind`` and ``matmul_kind`` say which of the model's promised
    bands it falls under (:data:`gpulab.hardware.MODEL_BANDS`)."""
    gpu = hardware.get_gpu(gpu)
    rows = []
    for name in format_names:
        fmt = formats.get_format(name)
        row = {"format": fmt.name, "bytes_per_value": fmt.bytes_per_value,
               "peak_flops": gpu.peak_flops.get(fmt.hardware_precision),
               "units": compute_units(fmt.hardware_precision),
               "dot_s": None, "matmul_s": None, "dot_kind": None, "matmul_kind": None,
               "label": f"estimated by gpulab's GPU model of the {gpu.name}"}
        if row["peak_flops"] is not None:
            dot = hardware.estimate_time(
                gpu, flops=2 * dot_n, bytes_moved=2 * dot_n * fmt.bytes_per_value,
                precision=fmt.hardware_precision)
            matmul = hardware.estimate_time(
                gpu, flops=2 * matmul_n**3, bytes_moved=3 * matmul_n**2 * fmt.bytes_per_value,
                precision=fmt.hardware_precision)
            row.update(dot_s=dot.time_s, matmul_s=matmul.time_s, dot_kind=dot.kind,
                       matmul_kind=matmul.kind)
        rows.append(row)
    return rows


def speed_table(gpu=hardware.COURSE_GPU, dot_n: int = 100_000_000, matmul_n: int = 8192) -> Table:
    """:func:`speed_rows` as a table: per format its bytes per value, the datasheet's dense peak
    and the units it is for, and the two estimated times ("none" where the datasheet gives no
    rate for the format)."""
    rows = speed_rows(gpu, dot_n, matmul_n)
    kinds = dict.fromkeys(row[key] for key in ("dot_kind", "matmul_kind") for row in rows
                          if row[key])
    bands = ", ".join(f"{hardware.band_text(kind)} for {kind}" for kind in kinds)
    cells = []
    for row in rows:
        rated = row["peak_flops"] is not None
        cells.append([row["format"], row["bytes_per_value"],
                      row["peak_flops"] / 1e12 if rated else "none",
                      row["units"] if rated else "",
                      row["dot_s"] * 1e3 if row["dot_s"] else "none",
                      row["matmul_s"] * 1e3 if row["matmul_s"] else "none"])
    dot = f"dot, n={dot_n:.0e}".replace("e+0", "e").replace("e+", "e")
    return Table([Column("format"), Column("B/value"),
                  Column("dense peak", "TFLOP/s", "{:,.1f}"), Column("of the"),
                  Column(dot, "ms", "{:.3f}"), Column(f"matmul {matmul_n}³", "ms", "{:.3f}")],
                 cells, title=f"{rows[0]['label']}"
                 + (f" (its promised bands: {bands}; gpulab model-check)" if bands else "") + ":")


def measure_dot_kernels(n: int = 2**26) -> list[timing.Measurement]:
    """On a GPU: time the precision dot kernels (data already on the device, default launch)
    with CUDA events. In the simulator: raises SimulatorTimingError (simulator time is not
    GPU time)."""
    if device.tier() != "gpu":
        raise timing.SimulatorTimingError(timing.SIMULATOR_TIMING_MESSAGE)
    import ml_dtypes
    from numba import cuda

    from gpulab.kernels import dot as dot_kernels
    from gpulab.kernels import narrow_formats as kernels

    rng = np.random.default_rng(0)
    x = rng.random(n, dtype=np.float32)
    config = dot_kernels.launch_config(n, "grid_stride")
    grid = (config.blocks, config.threads_per_block)
    runs = []
    d_out = cuda.to_device(np.zeros(1, np.float32))
    d_x32 = cuda.to_device(x)
    runs.append(("dot_grid_stride (fp32)", 4, lambda: dot_kernels.dot_grid_stride[grid](
        d_x32, d_x32, d_out)))
    d_partials = cuda.to_device(np.zeros(config.blocks, np.float32))
    d_x16 = cuda.to_device(x.astype(np.float16))
    runs.append(("dot_fp16_acc32", 2, lambda: kernels.dot_fp16_acc32[grid](
        d_x16, d_x16, d_partials)))
    if kernels.bf16_runs_here():
        d_xb = cuda.to_device(x.astype(ml_dtypes.bfloat16).view(np.uint16))
        runs.append(("dot_bf16_acc32", 2, lambda: kernels.dot_bf16_acc32[grid](
            d_xb, d_xb, d_partials)))
    codes, _ = kernels.run_quantize_fp8_e4m3(x)
    d_codes = cuda.to_device(codes)
    d_table = cuda.to_device(formats.decode_table("fp8_e4m3"))
    runs.append(("dot_fp8_acc32", 1, lambda: kernels.dot_fp8_acc32[grid](
        d_codes, d_codes, d_table, np.float32(1), d_partials)))
    return [timing.time_gpu(launch, name=name, n=n, flops=2 * n, bytes_moved=2 * n * itemsize)
            for name, itemsize, launch in runs]


# ---------------------------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------------------------

_COLOURS = {"fp32": "#444444", "fp16": "#3d85c6", "bf16": "#e69138", "fp8_e4m3": "#6aa84f"}


def error_plot(result: dict, ax=None):
    """Relative error against n (log-log), one line per (storage, accumulator) pair; solid
    for fp32 accumulation, dashed for accumulation in the storage format. The legend says
    how each line was computed."""
    import textwrap

    import matplotlib.pyplot as plt

    if ax is None:
        fig, ax = plt.subplots(figsize=(9, 4.2))
    else:
        fig = ax.figure
    floor = np.finfo(np.float64).eps
    for (storage, accumulator), errors in result["errors"].items():
        label = f"{variant_name(storage, accumulator)} — {result['labels'][(storage, accumulator)]}"
        ax.loglog(result["sizes"], np.maximum(errors, floor), marker="o",
                  ls="-" if accumulator in ("fp32", "fp64") else "--",
                  color=_COLOURS.get(storage, None), label="\n".join(textwrap.wrap(label, 60)))
    ax.set_xlabel("n (elements in x and y)")
    ax.set_ylabel("relative error of x · y")
    ax.set_title(f"x, y uniform in [0, 1); launch: {result['launch']}", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------
# The dashboard
# ---------------------------------------------------------------------------------------------


class PrecisionDashboard(Dashboard):
    """Choose a storage format, an accumulator and the largest n; Run draws the error of x · y
    (with the same format accumulating in fp32 for comparison) and explains it.

    Drive it from Python: ``d.format_dropdown.value = "bf16"; d.run_button.click()``.
    """

    WHERE_GPU = (
        "Kernels run on this machine's {gpu}; errors are computed against float64 on this CPU."
    )
    WHERE_SIM = (
        "No GPU here: fp32, fp16 and fp8 kernels run in Numba's CUDA simulator, bf16 is "
        "emulated with ml_dtypes; errors are computed against float64 on this CPU."
    )

    experiment: DotErrorExperiment | None

    def __init__(self):
        import ipywidgets as widgets

        self.tier = device.tier()
        sizes = default_sizes(self.tier)
        self.format_dropdown = widgets.Dropdown(options=list(STORAGE_FORMATS), value="fp16",
                                                description="storage")
        self.accumulator_toggle = widgets.ToggleButtons(options=list(ACCUMULATORS["fp16"]),
                                                        value="fp16", description="accumulate")
        self.size_slider = widgets.SelectionSlider(
            options=[(f"{n:,}", n) for n in sizes], value=sizes[-1], description="largest n",
            style={"description_width": "initial"}, layout=widgets.Layout(width="500px"))
        self._add_parts()
        self.format_dropdown.observe(self._format_changed, names="value")
        self._lay_out(widgets.HBox([self.format_dropdown, self.accumulator_toggle]),
                      widgets.HBox([self.size_slider, self.run_button]))

    def _format_changed(self, change) -> None:
        options = list(ACCUMULATORS[change["new"]])
        self.accumulator_toggle.options = options
        self.accumulator_toggle.value = options[0]

    def variants(self) -> list[tuple[str, str]]:
        """What Run computes: the chosen pair, plus the same storage accumulating in fp32."""
        storage, accumulator = self.format_dropdown.value, self.accumulator_toggle.value
        pairs = [(storage, accumulator)]
        if accumulator != "fp32":
            pairs.append((storage, "fp32"))
        return pairs

    def make_experiment(self) -> DotErrorExperiment:
        sizes = [n for n in default_sizes(self.tier) if n <= self.size_slider.value]
        return DotErrorExperiment(self.variants(), sizes=sizes)

    def make_figure(self, result: dict):
        return error_plot(result)


__all__ = [
    "DotErrorExperiment",
    "PrecisionDashboard",
    "default_sizes",
    "error_plot",
    "compute_units",
    "fp8_overflow_rows",
    "fp8_overflow_table",
    "fp_gap",
    "matmul_error_rows",
    "matmul_error_table",
    "measure_dot_kernels",
    "memory_plot",
    "memory_rows",
    "speed_rows",
    "speed_table",
    "underflow_rows",
    "underflow_table",
    "weights_table",
]
