"""CPU vs GPU as n grows: chapter 01's closing experiment.

A dot product of two n-element vectors on the CPU (NumPy, which calls BLAS) against one of
gpulab's dot kernels, with and without copying x and y to the GPU first. Every series says
where its numbers came from:

- the CPU side is always **measured** on this machine (:func:`gpulab.timing.time_cpu`);
- in the ``gpu`` tier the kernel is **measured** on the local GPU with CUDA events
  (:func:`gpulab.timing.time_gpu`), and the chosen GPU model is added as an estimate;
- in the ``sim`` tier simulator time is not GPU time, so the GPU side is **estimated** by
  gpulab's GPU model of the chosen GPU (:func:`gpulab.hardware.estimate_time`): 2n FLOPs,
  2n * itemsize bytes read, plus 2n * itemsize bytes over the host link for the copy.

:class:`CrossoverExperiment` is the logic (no browser needed); :class:`CrossoverDashboard` is
the ipywidgets view of it.
"""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np

from gpulab import device, hardware, plots, recorded_runs, timing
from gpulab.experiments.dashboard import Dashboard
from gpulab.experiments.experiment import Experiment
from gpulab.hardware import format_seconds as _fmt

PRECISION_OF_DTYPE = {"float32": "fp32", "float64": "fp64"}


def default_sizes(tier: str | None = None) -> list[int]:
    """n = 10, 30, 100, ... up to 1e7 in the sim tier (the CPU side stays fast: NumPy's dot on
    1e7 float32 takes ~10 ms) and up to 1e8 on a GPU (800 MB per float64 vector)."""
    largest_exponent = 8 if (tier or device.tier()) == "gpu" else 7
    sizes = []
    for exponent in range(1, largest_exponent + 1):
        sizes += [10**exponent, 3 * 10**exponent]
    return sizes[:-1]  # ... 3e6, 1e7 (or ... 3e7, 1e8)


def first_faster_n(baseline, candidate) -> int | None:
    """The smallest n from which ``candidate`` takes less time than ``baseline`` at every
    larger n too (where it crosses for good, so one noisy timing does not make a crossover).

    Both are sequences of ``(n, seconds)``; only sizes present in both are compared.
    """
    baseline_s = dict(baseline)
    common = sorted((n, s < baseline_s[n]) for n, s in candidate if n in baseline_s)
    crossing = None
    for n, faster in common:
        crossing = (crossing or n) if faster else None
    return None if crossing is None else int(crossing)


def _cpu_label(series: dict) -> str:
    for label in series:
        if "CPU" in label or "NumPy" in label:
            return label
    return next(iter(series))


def crossover_plot(points, ax=None, cpu_label: str | None = None):
    """Time against n (log-log), one line per series, the legend entry being its label.

    ``points`` is ``{label: [(n, seconds), ...]}`` or a result dict with a ``"series"`` entry
    (as :meth:`gpulab.experiments.crossover.CrossoverExperiment.run` returns). The CPU series is
    ``cpu_label`` or the first label naming the CPU or NumPy; where another series first beats
    it for good, a star marks the crossover. Hollow markers: estimates; filled: measurements.
    """
    series = points["series"] if "series" in points else points
    cpu_label = cpu_label or _cpu_label(series)
    fig, ax = plots.new_figure(ax, (8.5, 6.0))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    crossings = []
    for i, (label, pts) in enumerate(series.items()):
        n, seconds = zip(*sorted(pts), strict=True)
        style = "-" if label == cpu_label else "--" if "host→device copy" in label else "-."
        colour = colours[i % len(colours)]
        hollow = "estimated" in label  # filled markers: measured; hollow: a model's estimate
        ax.plot(n, seconds, style, marker="o", ms=4, color=colour, label=label,
                mfc="white" if hollow else colour)
        crossing = None if label == cpu_label else first_faster_n(series[cpu_label], pts)
        if crossing is not None:
            crossings.append((colour, crossing, dict(pts)[crossing]))
    for k, (colour, crossing, at) in enumerate(crossings):  # stacked bottom right: no overlap
        ax.plot([crossing], [at], "*", ms=14, color=colour, mec="black", label="_crossover")
        ax.annotate(f"faster than the CPU from n = {crossing:,}", (crossing, at),
                    xytext=(0.98, 0.04 + 0.07 * k), textcoords="axes fraction", ha="right",
                    fontsize=8.5, color=colour,
                    arrowprops={"arrowstyle": "->", "color": colour, "lw": 0.8, "shrinkB": 7})
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("n (elements per vector)")
    ax.set_ylabel("time per dot product (s)")
    ax.set_title("CPU vs GPU as n grows: where does the GPU start to win?")
    ax.grid(True, which="major", alpha=0.3)
    wrapped = ["\n".join(textwrap.wrap(label, 110, break_on_hyphens=False)) for label in series]
    handles = [h for h in ax.get_lines() if not h.get_label().startswith("_")]
    ax.legend(handles, wrapped, loc="upper center", bbox_to_anchor=(0.5, -0.13), fontsize=8)
    return fig



HOST_MEMORY = ("pageable", "pinned")  # the two kinds of host memory a copy can start from


class CrossoverExperiment(Experiment):
    """Time x · y on the CPU and on a GPU for each n in ``sizes``.

    >>> result = CrossoverExperiment(sizes=[10, 10_000]).run()   # doctest: +SKIP
    >>> list(result["series"])                                    # doctest: +SKIP
    ['NumPy dot (BLAS) — measured on this CPU (...)', 'dot_grid_stride, data on GPU — ...', ...]
    """

    def __init__(self, sizes=None, gpu: str = hardware.COURSE_GPU, dtype=np.float32,
                 method: str = "grid_stride", include_transfer: bool = True,
                 cpu_repeats: int = 5, seed: int = 0):
        from gpulab.kernels import dot as dot_kernels

        if method not in dot_kernels.METHODS:
            raise ValueError(f"method must be one of {', '.join(dot_kernels.METHODS)}, "
                             f"not {method!r}")
        self.sizes = sorted({int(n) for n in (sizes or default_sizes())})
        if not self.sizes or self.sizes[0] < 1:
            raise ValueError(f"sizes must be positive whole numbers, not {sizes!r}")
        self.gpu = hardware.get_gpu(gpu)
        self.dtype = np.dtype(dtype)
        if self.dtype.name not in PRECISION_OF_DTYPE:
            raise ValueError(f"dtype must be float32 or float64, not {self.dtype.name}")
        self.method = method
        self.kernel_name = f"dot_{method}"
        self.include_transfer = include_transfer
        self.cpu_repeats = cpu_repeats
        self.seed = seed
        self.tier = device.tier()

    # -- the numbers --------------------------------------------------------------------------

    def _counts(self, n: int) -> dict:
        """2 FLOPs (multiply, add) and 2 values read per element."""
        return {"flops": 2 * n, "bytes_moved": 2 * n * self.dtype.itemsize}

    def _estimate(self, n: int, copy_from: str | None, measured_constants: bool = True):
        """The roofline estimate; ``copy_from`` "pageable" or "pinned" adds the host→device
        copy of x and y from that kind of host memory (None: the data is already there).
        When a recorded run ships, its measured launch overhead and copy rate replace the
        model's constants (``measured_constants``; the estimate's label says so)."""
        copy_bytes = 2 * n * self.dtype.itemsize if copy_from else 0.0
        link = copy_from or "pageable"
        constants = recorded_runs.model_constants(link) if measured_constants else {}
        return hardware.estimate_time(self.gpu, precision=PRECISION_OF_DTYPE[self.dtype.name],
                                      transfer_bytes=copy_bytes, link=link,
                                      **constants, **self._counts(n))

    def _measure_gpu(self, x, y, n: int, copy_from: str | None):
        from numba import cuda

        from gpulab.kernels import dot as dot_kernels

        kernel = getattr(dot_kernels, self.kernel_name)
        config = dot_kernels.launch_config(n, self.method)
        d_x, d_y = cuda.to_device(x), cuda.to_device(y)
        d_out = cuda.to_device(np.zeros(1, self.dtype))
        if copy_from == "pinned":  # page-locked host copies: the copy engine reads them directly
            x_pinned, y_pinned = cuda.pinned_array(n, self.dtype), cuda.pinned_array(n, self.dtype)
            x_pinned[:], y_pinned[:] = x, y
            x, y = x_pinned, y_pinned

        def launch():
            if copy_from:  # the host→device copy of x and y, into buffers already allocated
                d_x.copy_to_device(x)
                d_y.copy_to_device(y)
            kernel[config.blocks, config.threads_per_block](d_x, d_y, d_out)

        return timing.time_gpu(launch, name=self.kernel_name, n=n, **self._counts(n))

    def run(self) -> dict:
        """Measure and estimate every series; returns (and keeps in ``last_result``)
        ``{"series": {label: [(n, seconds), ...]}, "cpu_label", "gpu_labels", "crossover",
        "records", ...}``. Labels say where each series came from."""
        rng = np.random.default_rng(self.seed)
        by_what: dict[tuple[str, bool], list] = {}

        def add(what: str, record):
            key = (what, isinstance(record, hardware.RooflineEstimate))
            by_what.setdefault(key, []).append(record)
            return key

        cpu_key = ("", False)
        for n in self.sizes:
            x = rng.random(n, dtype=self.dtype)
            y = rng.random(n, dtype=self.dtype)
            cpu = timing.time_cpu(np.dot, x, y, repeats=self.cpu_repeats, name="NumPy dot",
                                 n=n, **self._counts(n))
            # The CPU side is its best of the repeats: on a shared machine (Binder, CI) other
            # processes delay BLAS's worker threads, and the baseline must not be handicapped.
            cpu_key = add(f"NumPy dot (BLAS), best of {self.cpu_repeats}", cpu)
            copies = HOST_MEMORY if self.include_transfer else ()
            if self.tier == "gpu":
                add(f"{self.kernel_name}, data on GPU", self._measure_gpu(x, y, n, None))
                for memory in copies:
                    add(f"{self.kernel_name} incl. host→device copy of x, y from {memory} "
                        "memory", self._measure_gpu(x, y, n, memory))
            add(f"{self.kernel_name}, data on GPU", self._estimate(n, None))
            for memory in copies:
                add(f"{self.kernel_name} incl. host→device copy of x, y from {memory} memory",
                    self._estimate(n, memory))
        # an estimate's label names its kind of work, which changes with n: one label a series
        labels = {key: f"{key[0]} — "
                  + (hardware.estimates_label(recs) if key[1] else recs[0].label)
                  for key, recs in by_what.items()}
        records = {labels[key]: recs for key, recs in by_what.items()}
        cpu_label = labels[cpu_key]
        series = {label: list(zip(self.sizes, map(_seconds, recs), strict=True))
                  for label, recs in records.items()}
        gpu_labels = [label for label in series if label != cpu_label]
        self.last_result = {
            "series": series,
            "cpu_label": cpu_label,
            "gpu_labels": gpu_labels,
            "crossover": {label: first_faster_n(series[cpu_label], series[label])
                          for label in gpu_labels},
            "records": records,
            "tier": self.tier,
            "gpu": self.gpu.key,
            "dtype": self.dtype.name,
            "method": self.method,
            "kernel": self.kernel_name,
            "include_transfer": self.include_transfer,
            "sizes": list(self.sizes),
            "kernel_check": self.check_kernel(),
            "recorded": recorded_comparison(dtype=self.dtype, method=self.method),
        }
        return self.last_result

    def check_kernel(self, n: int = 1000) -> dict:
        """Run the kernel for real (on the GPU, or in the simulator) on n random values and
        compare with NumPy: the estimate is about a kernel that does compute x · y."""
        from gpulab.kernels import dot as dot_kernels
        from gpulab.reference import dot_tolerance

        rng = np.random.default_rng(self.seed + 1)
        x, y = rng.random(n, dtype=self.dtype), rng.random(n, dtype=self.dtype)
        got, expected = dot_kernels.dot(x, y, method=self.method), np.dot(x, y)
        return {"kernel": self.kernel_name, "n": n, "result": float(got),
                "numpy": float(expected), "launch": str(dot_kernels.launch_config(n, self.method)),
                "ok": bool(abs(float(got) - float(expected)) <= dot_tolerance(x, y))}

    def crossover_n(self, series_label: str) -> int | None:
        """The smallest n from which series ``series_label`` is faster than the CPU (and stays
        faster at every larger n), or None if it never is."""
        result = self._result()
        series = result["series"]
        if series_label not in series:
            raise KeyError(f"no series {series_label!r}; the series are: {', '.join(series)}")
        return first_faster_n(series[result["cpu_label"]], series[series_label])

    # -- the words ----------------------------------------------------------------------------

    def explain(self) -> str:
        """Why the GPU loses at small n, where it wins, and what bounds it, in plain words."""
        result = self._result()
        records = result["records"]
        estimated = {label: recs for label, recs in records.items()
                     if isinstance(recs[0], hardware.RooflineEstimate)}
        on_device = next(label for label in estimated if "host→device copy" not in label)
        small, large = estimated[on_device][0], estimated[on_device][-1]
        itemsize, precision = self.dtype.itemsize, PRECISION_OF_DTYPE[self.dtype.name]
        cpu = dict(result["series"][result["cpu_label"]])
        n0, n1 = result["sizes"][0], result["sizes"][-1]
        measured = [recs[0] for label, recs in records.items() if label not in estimated
                    and label != result["cpu_label"] and "host→device copy" not in label]
        lines = [
            f"At n = {n0:,} the CPU takes {_fmt(cpu[n0])}; the {self.gpu.name} would need about "
            f"{_fmt(small.time_s)} by gpulab's GPU model"
            + (f" ({measured[0].label}: {_fmt(measured[0].median_s)})" if measured else "")
            + f", nearly all of it the fixed cost of launching a kernel "
            f"(~{_fmt(small.launch_overhead_s)}): small problems lose on the GPU.",
            f"A dot product does 2 FLOPs (multiply, add) per 2 × {itemsize} = {2 * itemsize} bytes "
            f"read: {2 / (2 * itemsize):g} FLOP/byte, far below the "
            f"{hardware.ridge_point(self.gpu, precision):.2g} FLOP/byte the {self.gpu.name} needs "
            f"to keep its {precision} units busy, so it is memory-bound. At n = {n1:,} the model "
            f"gives {_fmt(large.time_s)} ({large.bound}-bound: {2 * itemsize * n1 / 1e6:,.0f} MB "
            f"at {self.gpu.memory_bandwidth_bytes_per_s / 1e12:g} TB/s).",
        ]
        for label in result["gpu_labels"]:
            where = ("With the copy from " + label.split(" from ")[1].split(" memory")[0]
                     + " memory" if "host→device copy" in label
                     else "With the data already on the GPU")
            source = (f"{self.gpu.name}, estimated" if label in estimated
                      else records[label][0].label)
            crossing = result["crossover"][label]
            lines.append(f"{where} ({source}): the GPU is faster than the CPU from n = "
                         f"{crossing:,}." if crossing else
                         f"{where} ({source}): the GPU never beats the CPU up to n = {n1:,}.")
        copied = {recs[-1].link: recs[-1] for label, recs in estimated.items()
                  if "host→device copy" in label}
        if copied:
            rate = {memory: (est.link_rate_bytes_per_s, "measured") if est.link_rate_bytes_per_s
                    else (hardware.link_bytes_per_s(self.gpu, memory), "model")
                    for memory, est in copied.items()}
            parts = [f"from {memory} memory at {rate[memory][0] / 1e9:.3g} GB/s "
                     f"({rate[memory][1]}) takes "
                     f"{_fmt(est.transfer_s)}, "
                     f"{est.transfer_s / large.kernel_s:.0f}× the kernel"
                     for memory, est in copied.items()]
            lines.append(
                f"At n = {n1:,}, copying x and y over {self.gpu.host_link} (peak "
                f"{self.gpu.host_link_bytes_per_s / 1e9:g} GB/s each way) "
                + "; ".join(parts) + ". An ordinary NumPy array is pageable: the driver copies "
                "it through a pinned staging buffer, well below the link's peak. The GPU pays "
                "off when data stays on it for many operations, not for one dot product.")
        if result.get("recorded"):
            lines.append(str(result["recorded"]))
        return "\n".join(lines)


def recorded_comparison(run=None, dtype=np.float32, method: str = "grid_stride"):
    """The recorded run's crossover series (``gpulab gpu-check``) against gpulab's GPU model of
    the same GPU with the datasheet's constants: a :class:`~gpulab.recorded_runs.ComparisonTable`,
    or None when no run ships (or it recorded another kernel or dtype, or a GPU the course has
    no figures for)."""
    found = recorded_runs.recorded_series("crossover", run)
    kernel = f"dot_{method}"
    if found is None or np.dtype(dtype) != np.float32:
        return None
    run, series = found
    model = CrossoverExperiment(sizes=[1], gpu=run.gpu_key, dtype=dtype, method=method)
    rows = []
    for label, points in series.items():
        what = label.split(" — ")[0]
        if "measured on" not in label or not what.startswith(kernel):
            continue
        copy_from = next((m for m in HOST_MEMORY if f"from {m} memory" in what),
                         "pageable" if "copy" in what else None)
        for n, seconds in points:
            rows.append((f"{what}, n = {int(n):,}",
                         model._estimate(int(n), copy_from, measured_constants=False).time_s,
                         seconds))
    if not rows:
        return None
    return recorded_runs.comparison_table(
        "The crossover measured on a real GPU, against the model", run, rows)


def _seconds(record) -> float:
    """What a series plots: the model's time, the best CPU repeat, the median GPU repeat."""
    if isinstance(record, hardware.RooflineEstimate):
        return record.time_s
    return record.min_s if record.origin == "cpu" else record.median_s


class CrossoverDashboard(Dashboard):
    """Controls for :class:`CrossoverExperiment`, a Run button, the plot and the explanation.

    Drive it from Python: ``d.gpu_dropdown.value = "T4"; d.run_button.click(); d.last_result``.
    """

    WHERE_GPU = (
        "GPU times are measured on this machine's {gpu}; the model chosen above is added as a "
        "roofline estimate."
    )
    WHERE_SIM = (
        "No GPU here (simulator tier): CPU times are measured, GPU times are roofline estimates "
        "for the model chosen above."
    )

    experiment: CrossoverExperiment | None

    def __init__(self):
        import ipywidgets as widgets

        self.tier = device.tier()
        sizes = default_sizes(self.tier)
        gpu_help = ("compare with" if self.tier == "gpu" else "GPU model")
        self.gpu_dropdown = self._gpu_dropdown(gpu_help)
        self.dtype_toggle = widgets.ToggleButtons(options=["float32", "float64"],
                                                  value="float32", description="dtype")
        self.transfer_checkbox = widgets.Checkbox(
            value=True, description="include host→device copy (pageable and pinned)")
        self.size_slider = widgets.SelectionRangeSlider(
            options=[(f"{n:,}", n) for n in sizes], index=(0, len(sizes) - 1),
            description="n from, to", style={"description_width": "initial"},
            layout=widgets.Layout(width="600px"))
        self._add_parts()
        self._lay_out(widgets.HBox([self.gpu_dropdown, self.dtype_toggle]),
                      widgets.HBox([self.transfer_checkbox, self.run_button]), self.size_slider)
        # CSS classes the browser tests (tests/browser/) find the dashboard's parts by.
        for part, name in ((self.widget, "gpulab-crossover"),
                           (self.gpu_dropdown, "gpulab-crossover-gpu"),
                           (self.dtype_toggle, "gpulab-crossover-dtype"),
                           (self.transfer_checkbox, "gpulab-crossover-transfer"),
                           (self.run_button, "gpulab-crossover-run"),
                           (self.status, "gpulab-crossover-status"),
                           (self.output, "gpulab-crossover-plot"),
                           (self.explanation, "gpulab-crossover-explanation")):
            part.add_class(name)

    def make_experiment(self) -> CrossoverExperiment:
        low, high = self.size_slider.value
        sizes = [n for n in default_sizes(self.tier) if low <= n <= high]
        return CrossoverExperiment(sizes=sizes, gpu=self.gpu_dropdown.value,
                                   dtype=self.dtype_toggle.value,
                                   include_transfer=self.transfer_checkbox.value)

    def make_figure(self, result: dict):
        return crossover_plot(result)


__all__ = ["CrossoverDashboard", "CrossoverExperiment", "default_sizes"]
