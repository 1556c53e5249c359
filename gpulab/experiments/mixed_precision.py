"""Mixed precision: accuracy, memory and speed per recipe, and what each part is for
(chapter 10's experiments, figures and dashboard).

Every experiment trains the digits MLP (:mod:`gpulab.nn.recipes`: 64-128-10, Adam, batches of
32, the same initial weights and shuffling for a seed) under the recipes of
:mod:`gpulab.nn.mixed_precision`:

- :class:`MixedPrecisionExperiment` — fp32, bf16, fp16 + loss scaling and fp8: held-out
  accuracy (measured), memory (computed by chapter 09's calculator, :mod:`gpulab.nn.memory`,
  and measured from the arrays a step keeps), speed (the roofline time of a step's matrix
  products on a named GPU, estimated by gpulab's GPU model; on a GPU, chapter 04's matmul
  kernels measured);
- :class:`UnderflowExperiment` — fp16 with and without loss scaling, and bf16, on gradients made
  small (the loss multiplied by a factor, Adam's epsilon with it, so that in exact arithmetic
  the training is unchanged): the fraction of gradient values flushed to zero, and what it
  does to learning;
- :class:`MasterWeightsExperiment` — bf16 with and without fp32 master weights: the fraction
  of Adam's updates too small to change a bf16 weight, at two learning rates;
- :class:`Fp8Experiment` — FP8 with delayed scaling in every layer, or with the first or the
  last layer kept in bf16.

Where the numbers come from: in the ``gpu`` tier every run is on the kernel engine (chapter
04's matmul kernels and the kernel backend, on the GPU); in the ``sim`` tier every run is
**emulated** with NumPy and ml_dtypes on this CPU (the chapter runs one real step on the kernels
in the simulator and compares: :func:`gpulab.nn.mixed_precision.compare_engines`). Runs are
kept (:func:`run_recipe`), so sections that share a run train it once.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np

from gpulab import device, formats, hardware, published, recorded_runs
from gpulab.experiments.dashboard import Dashboard
from gpulab.experiments.experiment import Experiment
from gpulab.nn import memory
from gpulab.nn import mixed_precision as mp
from gpulab.nn.data import load_digits
from gpulab.nn.recipes import DIGITS
from gpulab.plots import wrap_title
from gpulab.tables import Column, Table

EPOCHS = 4
GROWTH_INTERVAL = 50  # the chapter's runs are 180 steps long; PyTorch's default is 2000
SMALL_GRADIENTS = 2.0**-20  # the loss factor that makes the digits' gradients tiny
LARGE_WIDTHS = (8192, 8192, 8192)  # a layer the size of a large model's, for the estimate
LARGE_BATCH = 8192
HEADLINE = ("fp32", "bf16", "fp16", "fp8")
TITLES = {"fp32": "fp32", "bf16": "bf16 mixed", "fp16": "fp16 mixed + loss scaling",
          "fp8": "fp8 (delayed scaling)", "fp16_no_scaling": "fp16 mixed, no loss scaling",
          "bf16_no_master": "bf16, no fp32 master", "bf16_scaled": "bf16 + loss scaling",
          "fp8_keep_first": "fp8, first layer bf16", "fp8_keep_last": "fp8, last layer bf16",
          "fp8_keep_first_last": "fp8, first + last bf16"}

_RUNS: dict[tuple, mp.MixedRun] = {}
_DATA = {}


def default_engine() -> str:
    """The kernel engine on a GPU; the emulation in the simulator (a step there costs
    seconds)."""
    return "kernels" if device.tier() == "gpu" else "emulated"


def digits():
    if "digits" not in _DATA:
        _DATA["digits"] = load_digits(seed=0)
    return _DATA["digits"]


def run_recipe(recipe, epochs: int = EPOCHS, seed: int = 0, lr: float = DIGITS["lr"],
               loss_factor: float = 1.0, growth_interval: int = GROWTH_INTERVAL,
               engine: str | None = None, widths=DIGITS["widths"]) -> mp.MixedRun:
    """:func:`gpulab.nn.mixed_precision.train_mixed` on the digits, kept: the same settings
    train once per session (:func:`clear_runs` forgets them)."""
    recipe = mp.get_recipe(recipe)
    engine = engine or default_engine()
    widths = tuple(int(w) for w in widths)
    key = (recipe, int(epochs), int(seed), float(lr), float(loss_factor), int(growth_interval),
           engine, device.tier(), widths, id(digits()))
    if key not in _RUNS:
        _RUNS[key] = mp.train_mixed(recipe, digits(), epochs=epochs, seed=seed, lr=lr,
                                    loss_factor=loss_factor, growth_interval=growth_interval,
                                    engine=engine, widths=widths)
    return _RUNS[key]


def clear_runs() -> None:
    _RUNS.clear()


def title(key: str) -> str:
    return TITLES.get(key, mp.get_recipe(key).title)


def percent(x: float) -> str:
    """'91.9 %'; small shares keep two significant digits ('0.031 %'), and a share that is
    not zero never shows as 0."""
    if 0 < abs(x) < 1e-3:
        return f"{100 * x:.2g} %"
    return f"{100 * x:.1f} %"


def power_of_two(x: float) -> str:
    exponent = math.log2(x)
    return f"2^{exponent:.0f}" if exponent == round(exponent) else f"{x:.3g}"


# ---------------------------------------------------------------------------------------------
# Speed on a GPU: chapter 04's matmul kernels, measured
# ---------------------------------------------------------------------------------------------


def measure_matmul_kernels(n: int = 2048, fmts=("fp32", "fp16", "bf16", "fp8")):
    """CUDA-event times of an n x n x n product with each format's kernel (chapter 03's tiled
    fp32 kernel; chapter 04's ``matmul_fp16_acc32``, ``matmul_bf16_acc32``,
    ``matmul_fp8_acc32``): CUDA cores, one thread per output, no tensor cores. GPU tier only;
    returns [] in the simulator. bf16 is left out where the GPU has no bf16 arithmetic."""
    if device.tier() != "gpu":
        return []
    from numba import cuda

    from gpulab import timing
    from gpulab.kernels import matmul as fp32_matmul
    from gpulab.kernels import narrow_formats as nf

    rng = np.random.default_rng(0)
    a32 = rng.standard_normal((n, n)).astype(np.float32)
    b32 = rng.standard_normal((n, n)).astype(np.float32)
    block = nf.default_matmul_block()
    grid = (-(-n // block[0]), -(-n // block[1]))
    d_c = cuda.device_array((n, n), dtype=np.float32)
    measurements = []
    for fmt in fmts:
        if fmt == "fp32":
            config = fp32_matmul.launch_config(n, n, n, "tiled", 16)
            d_a, d_b = cuda.to_device(a32), cuda.to_device(b32)

            def launch(config=config, d_a=d_a, d_b=d_b):
                fp32_matmul.launch(config, d_a, d_b, d_c)
            name = "matmul_tiled (fp32)"
        elif fmt == "fp16":
            d_a, d_b = cuda.to_device(a32.astype(np.float16)), cuda.to_device(
                b32.astype(np.float16))

            def launch(d_a=d_a, d_b=d_b):
                nf.matmul_fp16_acc32[grid, block](d_a, d_b, d_c)
            name = "matmul_fp16_acc32"
        elif fmt == "bf16":
            if not nf.bf16_runs_here():
                continue
            d_a = cuda.to_device(mp.store(a32, "bf16").view(np.uint16))
            d_b = cuda.to_device(mp.store(b32, "bf16").view(np.uint16))

            def launch(d_a=d_a, d_b=d_b):
                nf.matmul_bf16_acc32[grid, block](d_a, d_b, d_c)
            name = "matmul_bf16_acc32"
        elif fmt == "fp8":
            d_a = cuda.to_device(mp.store(a32, "fp8_e4m3", True).view(np.uint8))
            d_b = cuda.to_device(mp.store(b32, "fp8_e4m3", True).view(np.uint8))
            d_table = cuda.to_device(formats.decode_table("fp8_e4m3"))

            def launch(d_a=d_a, d_b=d_b, d_table=d_table):
                nf.matmul_fp8_acc32[grid, block](d_a, d_b, d_table, np.float32(1.0), d_c)
            name = "matmul_fp8_acc32"
        else:
            raise ValueError(f"no matmul kernel for {fmt!r}")
        measured = timing.time_gpu(launch, repeats=5, warmup=1, name=name, n=n,
                                   flops=2.0 * n**3)
        measured.meta["format"] = fmt
        measurements.append(measured)
    return measurements


ITEMSIZE = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1}


def recorded_matmul_comparison(run=None):
    """The recorded run's narrow matmul kernels (:func:`measure_matmul_kernels` on a real GPU)
    against gpulab's GPU model of the same work: they run on the CUDA cores, so the model's
    compute roof is the fp32 CUDA-core peak (not the tensor cores' per-format peaks), and its
    memory roof the bytes of A and B in their format plus C in fp32. A
    :class:`~gpulab.recorded_runs.ComparisonTable`, or None when no run ships."""
    def rows_of(run, recorded):
        for data in recorded:
            measured = run.measurement(data)
            n, fmt = measured.n, measured.meta.get("format", "fp32")
            traffic = n * n * (2 * ITEMSIZE.get(fmt, 4) + 4)
            estimate = hardware.estimate_time(run.gpu_key, 2 * n**3, traffic, "fp32")
            yield f"{measured.name}, n = {n:,}", estimate.time_s, measured.median_s

    return recorded_runs.series_comparison(
        "narrow matmuls",
        "Chapter 04's matmul kernels measured on a real GPU (CUDA cores), against the model",
        rows_of, run)


def _estimate_label(gpu, kinds) -> str:
    """Where the step estimates come from, with the model's promised band for each kind of
    work among them."""
    bands = ", ".join(f"{hardware.band_text(kind)} for {kind}"
                      for kind in sorted(kinds, key=list(hardware.MODEL_BANDS).index))
    return (f"estimated by gpulab's GPU model of the {gpu.name}"
            + (f" (its promised bands: {bands}; gpulab model-check)" if bands else ""))


# ---------------------------------------------------------------------------------------------
# Speed-ups over fp32: the peaks' ratio, and what published GEMMs reach
# ---------------------------------------------------------------------------------------------

SPEEDUP_FORMATS = ("fp32", "fp16", "bf16", "fp8")
SPEEDUP_SIZES = (8192, 1024)  # the large layer's products, and a small one


def published_gemms(gpu=hardware.COURSE_GPU, n: int = 8192) -> dict:
    """{format: the published cuBLAS GEMM of n x n x n on ``gpu``} for the formats of
    :data:`SPEEDUP_FORMATS` that :mod:`gpulab.published` has a point for, at exactly that size
    (a ratio of two formats means something only for the same product on the same GPU)."""
    key = hardware.get_gpu(gpu).key
    found = {}
    for fmt in SPEEDUP_FORMATS:
        for point in published.find(case_type="matmul", gpu=key, variant="cublas",
                                    precision=fmt):
            case = point.model_case
            if case.get("m") == case.get("n") == case.get("k") == int(n):
                found.setdefault(fmt, point)
    return found


def speedups(gpu=hardware.COURSE_GPU, sizes=SPEEDUP_SIZES) -> dict:
    """The speed-up of each format over fp32, twice: from the datasheet peaks (what the model's
    compute-bound estimates assume) and from published cuBLAS GEMMs on the same GPU, with the
    share of its peak each published run reached. ``{"gpu", "peak": {fmt: FLOP/s}, "peak_ratio":
    {fmt: x}, "sizes": {n: {"points", "share", "ratio"}}}``; a size without a published fp32
    point has no measured ratios (its shares are still given)."""
    spec = hardware.get_gpu(gpu)
    peak = {}
    for fmt in SPEEDUP_FORMATS:
        try:
            peak[fmt] = spec.peak_flops_for(fmt)
        except ValueError:  # a GPU without that format's arithmetic (no fp8 before Ada)
            continue
    result = {"gpu": spec, "peak": peak,
              "peak_ratio": {fmt: peak[fmt] / peak["fp32"] for fmt in peak if fmt != "fp32"},
              "sizes": {}}
    for n in sizes:
        points = published_gemms(spec.key, n)
        share = {fmt: point.si_value / peak[fmt] for fmt, point in points.items() if fmt in peak}
        ratio = ({fmt: point.si_value / points["fp32"].si_value for fmt, point in points.items()
                  if fmt != "fp32"} if "fp32" in points else {})
        result["sizes"][int(n)] = {"points": points, "share": share, "ratio": ratio}
    return result


def _tflops(value: float) -> str:
    return f"{value / 1e12:,.4g}"


def speedup_text(gpu=hardware.COURSE_GPU, sizes=SPEEDUP_SIZES) -> str:
    """The peaks' speed-ups over fp32 beside the published runs' (:func:`speedups`), each
    number with its origin; or, where nothing is published for ``gpu``, why the peaks' ratios
    are upper bounds."""
    r = speedups(gpu, sizes)
    spec, peak = r["gpu"], r["peak"]
    lines = [f"Peak ratios over fp32 ({spec.name}'s datasheet dense peaks, gpulab.hardware): "
             + ", ".join(f"{fmt} {ratio:.1f}x" for fmt, ratio in r["peak_ratio"].items())
             + ": what the model's compute-bound estimates assume, an upper bound (every "
             "format at its peak)."]
    sources = {}
    for n, size in r["sizes"].items():
        points = size["points"]
        if not points:
            continue
        parts = [f"{fmt} {_tflops(point.si_value)} TFLOP/s ({percent(size['share'][fmt])} of "
                 f"its {_tflops(peak[fmt])})" for fmt, point in points.items()]
        text = (f"Published cuBLAS GEMMs of {n:,}^3 on an {spec.name} reach: "
                + ", ".join(parts) + ".")
        if size["ratio"]:
            elsewhere = [fmt for fmt in size["ratio"]
                         if points[fmt].source != points["fp32"].source]
            text += (" Measured speed-ups over fp32: " + ", ".join(
                f"{fmt} {ratio:.1f}x (the peaks: {r['peak_ratio'][fmt]:.1f}x)"
                for fmt, ratio in size["ratio"].items())
                + (f"; {' and '.join(elsewhere)} ran on another source's {spec.name}, so that "
                   "ratio also holds the two machines' differences" if elsewhere else "") + ".")
        if "bf16" in points and "fp8" in points:
            measured = points["fp8"].si_value / points["bf16"].si_value
            text += (f" fp8 over bf16: {measured:.2f}x measured, {peak['fp8'] / peak['bf16']:.1f}x"
                     " by the peaks.")
        lines.append(text)
        for point in points.values():
            sources.setdefault(point.source, point.measured_by)
    measured = [n for n, size in r["sizes"].items() if "bf16" in size["ratio"]]
    if len(measured) >= 2:
        large, small = max(measured), min(measured)
        big, little = r["sizes"][large]["ratio"]["bf16"], r["sizes"][small]["ratio"]["bf16"]
        relation = ("smaller than" if little < big else "not smaller than")
        lines.append(f"At {small:,}^3 bf16's measured lead over fp32 ({little:.1f}x) is "
                     f"{relation} at {large:,}^3 ({big:.1f}x): a small product keeps no format "
                     "near its peak.")
    if sources:
        lines.append("Sources: " + "; ".join(f"{who}, {where}" for where, who in sources.items())
                     + " (gpulab.published; gpulab model-check holds the model against them).")
    else:
        bytes_ratio = formats.get_format("fp32").bits / formats.get_format("bf16").bits
        lines.append(
            f"No published GEMM measurements on the {spec.name} ship with gpulab, so these "
            "ratios stay upper bounds. A real step gets less: products small enough to be "
            "launch- or memory-bound (the digits MLP above) run no faster in a narrower format, "
            "and layers that move bytes rather than multiply (bias, activation, softmax, the "
            f"optimiser) gain at most the ratio of bytes, {bytes_ratio:.0f}x for 16-bit values.")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# The recipes side by side
# ---------------------------------------------------------------------------------------------


class MixedPrecisionExperiment(Experiment):
    """Train each recipe; record accuracy, memory and speed (see the module docstring).

    >>> result = MixedPrecisionExperiment(epochs=2).run()  # doctest: +SKIP
    """

    def __init__(self, recipes=HEADLINE, epochs: int = EPOCHS, seed: int = 0,
                 lr: float = DIGITS["lr"], loss_factor: float = 1.0,
                 growth_interval: int = GROWTH_INTERVAL, gpu: str = hardware.COURSE_GPU,
                 engine: str | None = None, measure_n: int = 2048,
                 measure_formats=("fp32", "fp16", "bf16", "fp8"), widths=DIGITS["widths"]):
        self.recipes = [mp.get_recipe(r).key for r in recipes]
        if not self.recipes:
            raise ValueError("choose at least one recipe")
        self.epochs, self.seed, self.lr = int(epochs), int(seed), float(lr)
        self.loss_factor, self.growth_interval = float(loss_factor), int(growth_interval)
        self.gpu = hardware.get_gpu(gpu)
        self.engine = engine or default_engine()
        self.measure_n, self.measure_formats = measure_n, tuple(measure_formats)
        self.widths = [int(w) for w in widths]
        self.batch_size = DIGITS["batch_size"]

    def run(self) -> dict:
        runs = {key: run_recipe(key, self.epochs, self.seed, self.lr, self.loss_factor,
                                self.growth_interval, self.engine, self.widths)
                for key in self.recipes}
        rows, kinds = [], set()
        for key, run in runs.items():
            recipe = run.recipe
            computed = None
            if key in mp.RECIPES:
                computed = memory.mlp_training_memory(
                    self.widths, self.batch_size, "adam",
                    precision=mp.MEMORY_PRECISION[recipe.compute]).as_dict()
                computed = {kind: computed[kind] for kind in run.memory_measured}
            small_s, small = mp.estimate_step_matmuls(recipe, self.widths, self.batch_size,
                                                      self.gpu)
            large_s, large = mp.estimate_step_matmuls(recipe, LARGE_WIDTHS, LARGE_BATCH, self.gpu)
            kinds.update(estimate.kind for estimate in small + large)
            rows.append({"key": key, "title": title(key), "accuracy": run.final_accuracy,
                         "skipped": run.skipped_steps, "steps": run.steps,
                         "flushed": run.flushed_fraction,
                         "memory_measured": run.memory_measured, "memory_computed": computed,
                         "estimate_small_s": small_s, "estimate_large_s": large_s,
                         "small_products": len(small),
                         "small_launch_s": sum(e.launch_s for e in small) / len(small),
                         "small_floor_s": sum(e.floor_s for e in small) / len(small),
                         "large_flops": sum(e.flops for e in large)})
        measured = (measure_matmul_kernels(self.measure_n, self.measure_formats)
                    if device.tier() == "gpu" else [])
        first = next(iter(runs.values()))
        self.last_result = {
            "runs": runs, "rows": rows, "epochs": self.epochs, "seed": self.seed,
            "lr": self.lr, "loss_factor": self.loss_factor, "where": first.where,
            "engine": first.engine, "gpu": self.gpu.name, "tier": device.tier(),
            "estimate_label": _estimate_label(self.gpu, kinds),
            "large": f"MLP {'-'.join(map(str, LARGE_WIDTHS))}, batch {LARGE_BATCH}",
            "small": f"MLP {'-'.join(map(str, self.widths))}, batch {self.batch_size}",
            "gpu_measured": measured,
            "measured_label": (f"measured on {device.PROBE.device_name or 'the GPU'} with CUDA "
                               f"events: chapter 04's kernels, {self.measure_n}^3, CUDA cores "
                               "(no tensor cores)") if measured else "",
        }
        return self.last_result

    def table(self) -> Table:
        """Per recipe: held-out accuracy, bytes per parameter and activation bytes (measured),
        and the estimated step times; where each comes from beneath."""
        r = self._result()
        rows = []
        for row in r["rows"]:
            m = row["memory_measured"]
            per_param = (m["parameters"] + m["gradients"] + m["optimiser state"]
                         + m["master weights"]) / memory.mlp_parameters(self.widths)
            rows.append([row["title"], percent(row["accuracy"]), per_param, m["activations"],
                         row["estimate_small_s"] * 1e6, row["estimate_large_s"] * 1e3])
        notes = [f"accuracy: held-out, after {r['epochs']} epochs from seed {r['seed']}, "
                 f"{r['where']}",
                 "bytes/param and activations: measured (nbytes of the arrays a step keeps, "
                 f"batch {self.batch_size})",
                 f"steps: the matrix products of one training step, {r['estimate_label']}; "
                 f"digits = {r['small']}, large = {r['large']}"]
        notes += [f"{m.name}: {m.median_s * 1e3:.3f} ms ({r['measured_label']})"
                  for m in r["gpu_measured"]]
        return Table([Column("recipe"), Column("accuracy"),
                      Column("bytes/param", number_format="{:.1f}"),
                      Column("activations", "B", "{:,}"), Column("step, digits", "µs", "{:.1f}"),
                      Column("step, large", "ms", "{:.3f}")], rows, notes=notes)

    def explain(self) -> str:
        r = self._result()
        rows = {row["key"]: row for row in r["rows"]}
        lines = []
        if "fp32" in rows:
            base = rows["fp32"]["accuracy"]
            parts = []
            for key, row in rows.items():
                if key == "fp32":
                    continue
                gap = 100 * (row["accuracy"] - base)
                parts.append(f"{row['title']} {percent(row['accuracy'])} ({gap:+.1f} points)")
            near = [rows[k]["title"] for k in rows if k != "fp32"
                    and abs(rows[k]["accuracy"] - base) <= 0.01]
            far = [rows[k]["title"] for k in rows if k != "fp32"
                   and abs(rows[k]["accuracy"] - base) > 0.01]
            text = (f"Accuracy (held-out, measured after {r['epochs']} epochs, seed {r['seed']}; "
                    f"{r['where']}): fp32 {percent(base)}; " + "; ".join(parts) + ".")
            if near:
                text += f" Within 1 point of fp32: {', '.join(near)}."
            if far:
                text += f" More than 1 point away: {', '.join(far)}."
            lines.append(text)
        else:
            lines.append(f"Accuracy (held-out, measured after {r['epochs']} epochs, seed "
                         f"{r['seed']}; {r['where']}): " + "; ".join(
                             f"{row['title']} {percent(row['accuracy'])}" for row in rows.values())
                         + ". Add fp32 to compare with it.")
        measured = {k: row["memory_measured"] for k, row in rows.items()}
        P = memory.mlp_parameters(self.widths)
        per = {k: (m["parameters"] + m["gradients"] + m["optimiser state"]
                   + m["master weights"]) / P for k, m in measured.items()}
        acts = {k: m["activations"] for k, m in measured.items()}
        mem = ("Memory (measured from the arrays a step keeps): per parameter, "
               + ", ".join(f"{rows[k]['title']} {per[k]:.1f} bytes" for k in rows) + ". ")
        if "fp32" in per and any(k != "fp32" for k in per):
            others = [k for k in per if k != "fp32"]
            if all(per[k] >= per["fp32"] - 0.5 for k in others):
                mem += ("Mixed precision does not shrink what each parameter costs with Adam: the "
                        "16-bit copy and gradient (2 + 2 bytes) are added to an fp32 master copy "
                        "and Adam's m and v (4 + 8). ")
            mem += ("The activations kept for the backward pass: " + ", ".join(
                f"{rows[k]['title']} {acts[k]:,} bytes" for k in rows)
                + f" at batch {self.batch_size}: that is what a narrower format saves.")
        computed = [k for k, row in rows.items() if row["memory_computed"]]
        if computed:
            worst = max(abs(sum(rows[k]["memory_measured"].values())
                            / sum(rows[k]["memory_computed"].values()) - 1) for k in computed)
            mem += (f" Chapter 09's calculator (gpulab.nn.memory) predicts these totals within "
                    f"{100 * worst:.1f} %.")
        lines.append(mem)
        small = {k: row["estimate_small_s"] for k, row in rows.items()}
        large = {k: row["estimate_large_s"] for k, row in rows.items()}
        row0 = next(iter(rows.values()))
        speed = (f"Speed ({r['estimate_label']}): the matrix products of one step of the digits "
                 f"MLP take " + ", ".join(f"{small[k] * 1e6:.1f} µs ({rows[k]['title']})"
                                           for k in rows)
                 + f": at batch {self.batch_size} each of its {row0['small_products']} products "
                 f"costs the model {row0['small_launch_s'] * 1e6:.1f} µs for the host to launch it"
                 f" (Numba) and a {row0['small_floor_s'] * 1e6:.1f} µs shortest kernel, with "
                 "almost no arithmetic, so the format hardly matters.")
        if "fp32" in large:
            speed += (f" For the {r['large']}, at each format's peak rate: " + ", ".join(
                f"{rows[k]['title']} {large[k] * 1e3:.2f} ms"
                + ("" if k == "fp32" else f" (fp32's time / {large['fp32'] / large[k]:.1f})")
                for k in rows) + ".")
            achieved = speeds_at_published_rates(rows, self.gpu.key, LARGE_WIDTHS[0])
            if achieved:
                speed += (" At the rates published cuBLAS GEMMs of that size reach on the "
                          f"{self.gpu.name} (printed in section 6): " + ", ".join(
                              f"{rows[k]['title']} {t * 1e3:.2f} ms"
                              + ("" if k == "fp32" or "fp32" not in achieved
                                 else f" (fp32's time / {achieved['fp32'] / t:.1f})")
                              for k, t in achieved.items()) + ".")
            else:
                speed += (f" No published GEMM of that size on the {self.gpu.name} ships with "
                          "gpulab: these are upper bounds (section 6 says why real steps get "
                          "less).")
        lines.append(speed)
        if r["gpu_measured"]:
            lines.append("Measured on this GPU (" + r["measured_label"] + "): " + ", ".join(
                f"{m.name} {m.median_s * 1e3:.2f} ms" for m in r["gpu_measured"])
                + ". These kernels use the CUDA cores, not the tensor cores, so they show the "
                "traffic a narrower format saves, not the tensor cores' speed.")
        return "\n".join(lines)


def speeds_at_published_rates(rows: dict, gpu, n: int) -> dict:
    """{recipe key: seconds} for the large layer's step at the published cuBLAS rate of its
    compute format (n x n x n products on ``gpu``, :func:`published_gemms`); recipes whose
    format has no published point, or whose layers mix formats, are left out."""
    points = published_gemms(gpu, n)
    times = {}
    for key, row in rows.items():
        recipe = mp.get_recipe(key)
        if recipe.fp8_keep or recipe.compute not in points:
            continue
        times[key] = row["large_flops"] / points[recipe.compute].si_value
    return times


# ---------------------------------------------------------------------------------------------
# Why loss scaling: small gradients in fp16
# ---------------------------------------------------------------------------------------------


class UnderflowExperiment(Experiment):
    """fp32, fp16 without and with loss scaling, and bf16 without, on gradients made
    ``loss_factor`` times smaller; and fp16 without scaling on the digits' own gradients."""

    RECIPES = ("fp32", "fp16_no_scaling", "fp16", "bf16")

    def __init__(self, loss_factor: float = SMALL_GRADIENTS, epochs: int = EPOCHS,
                 seed: int = 0, growth_interval: int = GROWTH_INTERVAL,
                 engine: str | None = None):
        self.loss_factor, self.epochs, self.seed = float(loss_factor), int(epochs), int(seed)
        self.growth_interval = int(growth_interval)
        self.engine = engine or default_engine()

    def run(self) -> dict:
        settings = {"epochs": self.epochs, "seed": self.seed,
                    "growth_interval": self.growth_interval, "engine": self.engine}
        small = {key: run_recipe(key, loss_factor=self.loss_factor, **settings)
                 for key in self.RECIPES}
        natural = run_recipe("fp16_no_scaling", loss_factor=1.0, **settings)
        self.last_result = {"small": small, "natural": natural, "loss_factor": self.loss_factor,
                            "epochs": self.epochs, "seed": self.seed,
                            "where": natural.where}
        return self.last_result

    def explain(self) -> str:
        r = self._result()
        s, natural = r["small"], r["natural"]
        factor = power_of_two(r["loss_factor"])
        scaled = s["fp16"]
        lines = [
            f"With the digits' own gradients, fp16 without loss scaling flushed "
            f"{percent(natural.flushed_fraction)} of the gradient values to zero and reached "
            f"{percent(natural.final_accuracy)} held-out accuracy: these gradients are far above "
            "fp16's smallest value.",
            f"With gradients {factor} times smaller: fp32 {percent(s['fp32'].final_accuracy)}; "
            f"fp16 without scaling flushed {percent(s['fp16_no_scaling'].flushed_fraction)} of "
            f"the gradient values and reached {percent(s['fp16_no_scaling'].final_accuracy)}; "
            f"fp16 with dynamic loss scaling flushed {percent(scaled.flushed_fraction)}, skipped "
            f"{scaled.skipped_steps} of {scaled.steps} steps (overflow) and reached "
            f"{percent(scaled.final_accuracy)}, ending at a loss scale of "
            f"{power_of_two(scaled.loss_scales[-1])}; bf16 without any scaling flushed "
            f"{percent(s['bf16'].flushed_fraction)} and reached "
            f"{percent(s['bf16'].final_accuracy)}.",
            f"(Held-out accuracy after {r['epochs']} epochs, seed {r['seed']}; {r['where']}.)",
        ]
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Why fp32 master weights: updates swamped in bf16
# ---------------------------------------------------------------------------------------------


class MasterWeightsExperiment(Experiment):
    """fp32, bf16 with fp32 master weights, bf16 without, at each learning rate."""

    RECIPES = ("fp32", "bf16", "bf16_no_master")

    def __init__(self, lrs=(DIGITS["lr"], 3e-4), epochs: int = EPOCHS, seed: int = 0,
                 engine: str | None = None):
        self.lrs = [float(lr) for lr in lrs]
        self.epochs, self.seed = int(epochs), int(seed)
        self.engine = engine or default_engine()

    def run(self) -> dict:
        runs = {lr: {key: run_recipe(key, self.epochs, self.seed, lr, engine=self.engine)
                     for key in self.RECIPES} for lr in self.lrs}
        first = runs[self.lrs[0]]["fp32"]
        self.last_result = {"runs": runs, "lrs": self.lrs, "epochs": self.epochs,
                            "seed": self.seed, "where": first.where}
        return self.last_result

    def explain(self) -> str:
        r = self._result()
        lines = []
        for lr in r["lrs"]:
            runs = r["runs"][lr]
            lost = runs["bf16_no_master"].mean_updates_lost
            gap = 100 * (runs["bf16_no_master"].final_accuracy - runs["bf16"].final_accuracy)
            lines.append(
                f"Learning rate {lr:g}: on average {percent(lost)} of Adam's updates per step "
                f"were too small to change a bf16 weight. Without fp32 master weights they are "
                f"lost: {percent(runs['bf16_no_master'].final_accuracy)} held-out accuracy, "
                f"against {percent(runs['bf16'].final_accuracy)} with master weights "
                f"({gap:+.1f} points) and {percent(runs['fp32'].final_accuracy)} in fp32.")
        lines.append(f"(After {r['epochs']} epochs, seed {r['seed']}; {r['where']}.)")
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# FP8: which layers
# ---------------------------------------------------------------------------------------------


class Fp8Experiment(Experiment):
    """FP8 in every layer, or with the first or the last layer in bf16; both kept (in a
    two-layer MLP: no FP8 layer left) is the bf16 recipe."""

    RECIPES = ("fp8", "fp8_keep_first", "fp8_keep_last", "bf16")

    def __init__(self, epochs: int = EPOCHS, seed: int = 0, engine: str | None = None):
        self.epochs, self.seed = int(epochs), int(seed)
        self.engine = engine or default_engine()

    def run(self) -> dict:
        runs = {key: run_recipe(key, self.epochs, self.seed, engine=self.engine)
                for key in self.RECIPES}
        self.last_result = {"runs": runs, "epochs": self.epochs, "seed": self.seed,
                            "where": runs["fp8"].where}
        return self.last_result

    def explain(self) -> str:
        r = self._result()
        runs = r["runs"]
        acc = {k: run.final_accuracy for k, run in runs.items()}
        spread = 100 * (max(acc.values()) - min(acc.values()))
        names = {"fp8": "every layer in FP8", "fp8_keep_first": "the first layer in bf16",
                 "fp8_keep_last": "the last layer in bf16",
                 "bf16": "both in bf16 (no FP8 layer left: the bf16 recipe)"}
        text = ("Held-out accuracy: " + "; ".join(f"{names[k]} {percent(acc[k])}" for k in runs)
                + f" (after {r['epochs']} epochs, seed {r['seed']}; {r['where']}). ")
        if spread <= 1.0:
            text += (f"The choices are within {spread:.1f} points of each other: on this small "
                     "network, keeping the first and last layers in higher precision made no "
                     "difference larger than what another seed changes.")
        else:
            best = max(acc, key=acc.get)
            digit = 100 / len(digits().y_test)
            text += (f"The choices differ by up to {spread:.1f} points, {names[best]} highest "
                     f"here — on one seed, where one held-out digit is {digit:.2f} points: "
                     f"{spread / digit:.0f} digits.")
        g = runs["fp8"].fp8_scales.get("layer0.g")
        if g:
            text += (f" The first layer's gradient scale went from 1 at the first step (no "
                     f"history yet) to {g[-1]:.3g} at the last: its gradients' amax is about "
                     f"{formats.get_format('fp8_e5m2').max_value / g[-1]:.2g}, far below "
                     "E5M2's largest value, which the scale makes use of.")
        return text


# ---------------------------------------------------------------------------------------------
# Is lower precision always safe?
# ---------------------------------------------------------------------------------------------


def lower_precision_verdict(headline: dict, underflow: dict, master: dict, fp8: dict) -> str:
    """The misconception "lower precision is always safe", answered by the chapter's runs
    (the results of the four experiments above): sentences computed from them."""
    rows = {row["key"]: row for row in headline["rows"]}
    base = rows["fp32"]["accuracy"]
    protected = max(abs(row["accuracy"] - base) for row in headline["rows"])
    s = underflow["small"]
    low_lr = min(master["lrs"])
    m = master["runs"][low_lr]
    fp8_spread = 100 * (max(r.final_accuracy for r in fp8["runs"].values())
                        - min(r.final_accuracy for r in fp8["runs"].values()))
    unsafe = []

    def fell_behind(run, protected_run, recipe: str, lost: str, protected: str) -> None:
        """Say how ``run`` fell behind ``protected_run`` if it ended more than a point lower."""
        if run.final_accuracy < protected_run.final_accuracy - 0.01:
            unsafe.append(f"{recipe} lost {lost} and reached {percent(run.final_accuracy)} "
                          f"against {percent(protected_run.final_accuracy)} {protected}")

    fell_behind(s["fp16_no_scaling"], s["fp32"],
                f"fp16 without loss scaling, on gradients {power_of_two(underflow['loss_factor'])} "
                "times smaller,",
                f"{percent(s['fp16_no_scaling'].flushed_fraction)} of its gradient values to zero",
                "in fp32")
    fell_behind(m["bf16_no_master"], m["bf16"],
                f"bf16 without fp32 master weights, at learning rate {low_lr:g},",
                f"{percent(m['bf16_no_master'].mean_updates_lost)} of Adam's updates per step",
                "with them")
    if unsafe:
        text = ("No. Lower precision is safe only with the parts that protect it. In this "
                "chapter's runs, " + "; ".join(unsafe) + ". ")
    else:
        text = ("In these runs no unprotected recipe fell more than a point behind; that says "
                "more about this small network than about large ones. ")
    text += (f"With the protections — fp32 sums in the products, fp32 master weights, dynamic "
             f"loss scaling for fp16, per-tensor delayed scales for fp8 — every recipe came "
             f"within {100 * protected:.1f} points of fp32 on the digits, and the FP8 layer "
             f"choices within {fp8_spread:.1f} points of each other. Safe is measured, recipe "
             "by recipe, on the model you train: the digits are a small, forgiving problem.")
    return text


# ---------------------------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------------------------


def recipe_plot(result: dict):
    """Three panels per recipe: held-out accuracy per epoch (measured), bytes kept by kind
    (measured, with chapter 09's computed total as a marker), and the estimated time of a
    large layer's step."""
    fig, (acc_ax, mem_ax, speed_ax) = plt.subplots(1, 3, figsize=(15, 4.3), layout="constrained")
    runs, rows = result["runs"], result["rows"]
    for key, run in runs.items():
        acc_ax.plot(range(1, len(run.test_accuracy) + 1), 100 * np.array(run.test_accuracy),
                    "o-", ms=3, label=title(key))
    acc_ax.set_xlabel("epoch")
    acc_ax.set_ylabel("held-out accuracy (%)")
    acc_ax.set_title(wrap_title(f"accuracy, measured ({result['engine']})", 50), fontsize=10)
    acc_ax.legend(fontsize=8)
    acc_ax.grid(True, alpha=0.3)
    kinds = ("parameters", "gradients", "master weights", "optimiser state", "activations")
    bottom = np.zeros(len(rows))
    x = np.arange(len(rows))
    for kind in kinds:
        values = np.array([row["memory_measured"][kind] for row in rows]) / 1e3
        mem_ax.bar(x, values, bottom=bottom, label=kind)
        bottom += values
    computed = [sum(row["memory_computed"].values()) / 1e3 if row["memory_computed"] else np.nan
                for row in rows]
    mem_ax.plot(x, computed, "k_", ms=24, mew=2, label="chapter 09's calculator (total)")
    mem_ax.set_xticks(x, [title(row["key"]) for row in rows], rotation=15, fontsize=8)
    mem_ax.set_ylabel("kB kept by a training step")
    mem_ax.set_title("memory: measured (bars), computed (line)", fontsize=10)
    mem_ax.set_ylim(0, 1.45 * float(np.nanmax([bottom.max(), *computed])))
    mem_ax.legend(fontsize=7, ncol=2, loc="upper center")
    large = np.array([row["estimate_large_s"] for row in rows]) * 1e3
    speed_ax.bar(x, large, color="0.6", hatch="//", edgecolor="k")
    speed_ax.set_xticks(x, [title(row["key"]) for row in rows], rotation=15, fontsize=8)
    speed_ax.set_ylabel("ms per step (matrix products)")
    speed_ax.set_title(wrap_title(f"{result['large']}: {result['estimate_label']}", 55),
                       fontsize=9)
    return fig


def gradient_histogram_plot(runs: dict, fmt: str = "fp16", title_text: str | None = None):
    """Histogram of log2 |gradient| of every value the backward pass stored, before rounding,
    one line per run (``{label: MixedRun}``), with ``fmt``'s limits: below half its smallest
    subnormal a value becomes 0; below its smallest normal it keeps fewer bits."""
    fmt = formats.get_format(fmt)
    fig, ax = plt.subplots(figsize=(10, 4.2), layout="constrained")
    centres = mp.HISTOGRAM_EDGES_LOG2[:-1] + 0.5
    for label, run in runs.items():
        counts = run.gradients.counts
        total = max(run.gradients.nonzero, 1)
        ax.step(centres, 100 * counts / total, where="mid", label=label)
    flush = math.log2(fmt.smallest_subnormal) - 1
    ax.axvspan(mp.HISTOGRAM_EDGES_LOG2[0], flush, color="red", alpha=0.12,
               label=f"{fmt.name}: rounds to 0 (below 2^{flush:.0f})")
    ax.axvline(math.log2(fmt.smallest_subnormal), color="red", ls="--", lw=1,
               label=f"{fmt.name} smallest subnormal 2^{math.log2(fmt.smallest_subnormal):.0f}")
    ax.axvline(math.log2(fmt.smallest_normal), color="orange", ls="--", lw=1,
               label=f"{fmt.name} smallest normal 2^{math.log2(fmt.smallest_normal):.0f}")
    ax.axvline(math.log2(fmt.max_value), color="purple", ls="--", lw=1,
               label=f"{fmt.name} largest {fmt.max_value:g}")
    ax.set_xlabel("log2 |gradient value| (before rounding)")
    ax.set_ylabel("% of the non-zero gradient values")
    ax.set_title(title_text or "every gradient value the backward pass stored, all steps",
                 fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    return fig


def loss_scale_plot(run: mp.MixedRun):
    """The loss scale used at every step (log2) and the steps skipped on inf/NaN."""
    fig, ax = plt.subplots(figsize=(10, 3.4), layout="constrained")
    scales = np.log2(np.array(run.loss_scales))
    ax.plot(np.arange(1, len(scales) + 1), scales, "-", label="loss scale used")
    skipped = np.flatnonzero(run.skipped)
    ax.plot(skipped + 1, scales[skipped], "rx", ms=8, label="step skipped (inf/NaN gradient)")
    ax.set_xlabel("training step")
    ax.set_ylabel("log2 (loss scale)")
    ax.set_title(wrap_title(f"dynamic loss scaling: {run.recipe.title}", 80), fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    return fig


def fp8_scale_plot(run: mp.MixedRun):
    """Every FP8 tensor's scale per step (log2): weights and inputs (E4M3), gradients (E5M2)."""
    fig, ax = plt.subplots(figsize=(10, 3.6), layout="constrained")
    for name, scales in run.fp8_scales.items():
        style = "--" if name.endswith(".g") else "-"
        ax.plot(np.arange(1, len(scales) + 1), np.log2(scales), style, label=name)
    ax.set_xlabel("training step")
    ax.set_ylabel("log2 (scale)")
    ax.set_title("per-tensor delayed scales: x and w in E4M3 (solid), gradients g in E5M2 "
                 "(dashed)", fontsize=10)
    ax.legend(fontsize=8, ncol=3)
    ax.grid(True, alpha=0.3)
    return fig


def dashboard_plot(result: dict):
    """Accuracy per epoch, gradient histograms and loss scales of the runs a dashboard ran."""
    fig, (acc_ax, hist_ax, scale_ax) = plt.subplots(1, 3, figsize=(15, 4.3),
                                                    layout="constrained")
    centres = mp.HISTOGRAM_EDGES_LOG2[:-1] + 0.5
    for key, run in result["runs"].items():
        acc_ax.plot(range(1, len(run.test_accuracy) + 1), 100 * np.array(run.test_accuracy),
                    "o-", ms=3, label=title(key))
        hist_ax.step(centres, 100 * run.gradients.counts / max(run.gradients.nonzero, 1),
                     where="mid", label=title(key))
        if run.recipe.loss_scaling:
            scale_ax.plot(np.log2(run.loss_scales), label=title(key))
    fp16 = formats.get_format("fp16")
    hist_ax.axvline(math.log2(fp16.smallest_subnormal) - 1, color="red", ls="--",
                    label="fp16: below this, 0")
    acc_ax.set_xlabel("epoch")
    acc_ax.set_ylabel("held-out accuracy (%)")
    acc_ax.legend(fontsize=7)
    acc_ax.set_title(wrap_title(f"measured ({result['engine']})", 50), fontsize=10)
    hist_ax.set_xlabel("log2 |gradient| (before rounding)")
    hist_ax.set_ylabel("% of non-zero values")
    hist_ax.legend(fontsize=7)
    hist_ax.set_title("gradients stored (loss scale included)", fontsize=10)
    scale_ax.set_xlabel("training step")
    scale_ax.set_ylabel("log2 (loss scale)")
    scale_ax.set_title("loss scale (recipes with scaling)", fontsize=10)
    if scale_ax.lines:
        scale_ax.legend(fontsize=7)
    for ax in (acc_ax, hist_ax, scale_ax):
        ax.grid(True, alpha=0.3)
    return fig


# ---------------------------------------------------------------------------------------------
# The dashboard
# ---------------------------------------------------------------------------------------------

LOSS_FACTORS = (1.0, 2.0**-8, 2.0**-12, 2.0**-16, 2.0**-18, 2.0**-20)
GROWTH_INTERVALS = (2000, 200, 50, 10)


class MixedPrecisionDashboard(Dashboard):
    """Choose recipes (ablations too), epochs, how small the gradients are, the learning rate
    and the loss scaler's growth interval; Run trains them.

    Drive it from Python: ``d.recipe_select.value = ("fp32", "fp16_no_scaling");
    d.factor_dropdown.value = 2**-20; d.run_button.click()``.
    """

    WHERE_GPU = ("Training runs on {gpu}: chapter 04's matmul kernels and the kernel backend "
                 "(measured accuracy); speeds are a roofline estimate for the model chosen.")
    WHERE_SIM = ("No GPU here (simulator tier): the recipes are emulated with NumPy and "
                 "ml_dtypes on this CPU, rounding where the kernels round (accuracy measured "
                 "on the emulation); speeds are a roofline estimate for the model chosen.")
    running_text = "training…"

    def __init__(self):
        import ipywidgets as widgets

        options = [(title(k), k) for k in (*mp.RECIPES, *mp.ABLATIONS)]
        self.recipe_select = widgets.SelectMultiple(
            options=options, value=("fp32", "fp16", "fp16_no_scaling"), rows=len(options),
            description="recipes", style={"description_width": "initial"})
        self.epochs_slider = widgets.IntSlider(value=3, min=1, max=10, description="epochs")
        self.factor_dropdown = widgets.Dropdown(
            options=[(f"x {power_of_two(f)}" if f != 1 else "as they are", f)
                     for f in LOSS_FACTORS],
            value=1.0, description="gradients", style={"description_width": "initial"})
        self.lr_dropdown = widgets.Dropdown(options=[3e-3, 1e-3, 3e-4], value=DIGITS["lr"],
                                            description="learning rate",
                                            style={"description_width": "initial"})
        self.growth_dropdown = widgets.Dropdown(options=list(GROWTH_INTERVALS),
                                                value=GROWTH_INTERVAL,
                                                description="scale growth interval",
                                                style={"description_width": "initial"})
        self.gpu_dropdown = self._gpu_dropdown(
            keep=lambda spec: "fp8" in spec.peak_flops and "bf16" in spec.peak_flops)
        self._add_parts()
        self._lay_out(widgets.HBox([self.recipe_select,
                                    widgets.VBox([self.epochs_slider, self.factor_dropdown,
                                                  self.lr_dropdown, self.growth_dropdown,
                                                  self.gpu_dropdown, self.run_button])]))

    def make_experiment(self) -> MixedPrecisionExperiment:
        return MixedPrecisionExperiment(
            recipes=list(self.recipe_select.value), epochs=self.epochs_slider.value,
            lr=self.lr_dropdown.value, loss_factor=self.factor_dropdown.value,
            growth_interval=self.growth_dropdown.value, gpu=self.gpu_dropdown.value)

    def make_figure(self, result: dict):
        return dashboard_plot(result)


__all__ = [
    "EPOCHS", "GROWTH_INTERVAL", "HEADLINE", "LARGE_BATCH", "LARGE_WIDTHS", "SMALL_GRADIENTS",
    "Fp8Experiment", "MasterWeightsExperiment", "MixedPrecisionDashboard",
    "MixedPrecisionExperiment", "SPEEDUP_FORMATS", "SPEEDUP_SIZES", "UnderflowExperiment",
    "clear_runs", "dashboard_plot", "default_engine", "fp8_scale_plot",
    "gradient_histogram_plot", "loss_scale_plot",
    "lower_precision_verdict", "measure_matmul_kernels", "published_gemms", "recipe_plot",
    "recorded_matmul_comparison", "run_recipe", "speeds_at_published_rates", "speedup_text",
    "speedups",
]
