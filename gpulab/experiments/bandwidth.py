"""Moving data: chapter 02's experiment. How long does a memory-bound kernel take, with and
without the host↔device copies, and what does a strided read cost?

For one kernel (saxpy, the coalesced copy or the strided copy) at one size:

- the kernel **really runs** (on the GPU, or in the simulator at a small size) and its answer is
  compared with NumPy;
- the warp's memory requests are counted by :mod:`gpulab.memory_model`: **traced** from the
  kernel's real reads in the simulator, or from its index arithmetic on a GPU;
- the CPU doing the same with NumPy is **measured** on this machine;
- the GPU time is **measured** with CUDA events on a GPU, and **estimated** from a roofline
  model of the chosen GPU (always, so the two can be compared; alone in the ``sim`` tier),
  both for the kernel alone and including the copies over the host link. The bytes the model
  charges for a read are the sectors the warp fetches, not the bytes the kernel uses.

:class:`BandwidthExperiment` is the logic; :class:`BandwidthDashboard` the ipywidgets view.
:func:`stride_sweep` gives the cost of a strided read per useful element, for a plot.
:func:`copy_cost_table` (the model: a kernel alone and with its copies from pageable and pinned
memory) and :func:`time_saxpy_copies` with :func:`copy_timings_table` (the same, measured with
CUDA events on a GPU) are chapter 02's tables of host↔device copies.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

import numpy as np
from matplotlib.patches import Rectangle

from gpulab import device, hardware, memory_model, plots, recorded_runs, timing
from gpulab.bench.cases import (
    CHECK_N,
    MEMORY_KERNELS,
    PRECISION_OF_DTYPE,
    SAXPY_A,
    memory_case,
    run_and_check,
)
from gpulab.experiments.dashboard import Dashboard
from gpulab.experiments.experiment import Experiment
from gpulab.hardware import format_seconds as _fmt
from gpulab.tables import Column, ShownAsTable, Table

KERNELS = MEMORY_KERNELS


def default_n(tier: str | None = None) -> int:
    """2^24 elements (64 MiB of float32 per array) without a GPU; 2^26 on one."""
    return 2**26 if (tier or device.tier()) == "gpu" else 2**24


def sizes(tier: str | None = None) -> list[int]:
    """The n a learner can pick: 2^10 … 2^24 (2^26 on a GPU), in steps of 4x."""
    return [2**e for e in range(10, (26 if (tier or device.tier()) == "gpu" else 24) + 1, 2)]


class BandwidthExperiment(Experiment):
    """One memory-bound kernel at one size: checked, counted, measured and estimated.

    >>> BandwidthExperiment("copy_strided", stride=8).run()["access"].sectors_per_request
    ... # doctest: +SKIP
    32.0
    """

    def __init__(self, kernel: str = "saxpy", n: int | None = None, stride: int = 8,
                 gpu: str = hardware.COURSE_GPU, dtype=np.float32, cpu_repeats: int = 5,
                 seed: int = 0):
        self.case = memory_case(kernel, int(n or default_n()), stride, dtype)  # validates
        self.kernel, self.n, self.stride = kernel, self.case.n, self.case.stride
        self.gpu = hardware.get_gpu(gpu)
        self.dtype = np.dtype(dtype)
        self.cpu_repeats = cpu_repeats
        self.seed = seed
        self.tier = device.tier()

    # -- counts (from the case that gpulab bench runs too) ---------------------------------------

    @property
    def n_out(self) -> int:
        return -(-self.n // self.stride)

    def arrays_in(self) -> int:
        return 2 if self.kernel == "saxpy" else 1

    def useful_bytes(self) -> int:
        """Bytes the kernel uses: saxpy reads x, y and writes out; a copy reads and writes
        n_out elements."""
        return self.case.bytes_moved

    def flops(self) -> int:
        return self.case.flops

    def access(self) -> memory_model.AccessSummary:
        """How the kernel's reads of x group into warp requests: traced from a real run in the
        simulator, or from the kernel's index arithmetic on a GPU (which does not tell)."""
        if self.tier != "sim":
            return memory_model.copy_access(self.stride, itemsize=self.dtype.itemsize)
        if self.kernel != "saxpy":
            return memory_model.trace_copy(self.stride, n_threads=256, dtype=self.dtype)
        from gpulab.kernels.memory import saxpy

        x = np.arange(256, dtype=self.dtype)
        out = np.empty_like(x)
        return memory_model.trace_reads(saxpy, 2, 128, [self.dtype.type(SAXPY_A), x, x, out],
                                        watch=1)

    def fetched_bytes(self, access: memory_model.AccessSummary) -> float:
        """Bytes the memory system moves: every read array at the access's sectors per
        element, plus the coalesced write."""
        per_element = access.bytes_fetched / sum(len(r.element_indices) for r in access.requests)
        return self.arrays_in() * self.n_out * per_element + self.n_out * self.dtype.itemsize

    def transfer_bytes(self) -> int:
        """The inputs copied to the GPU and the result copied back."""
        return self.case.transfer_bytes

    # -- running --------------------------------------------------------------------------------

    def check_kernel(self) -> dict:
        """Run the kernel for real (on the GPU, or in the simulator at n = 1000) and compare
        with gpulab.reference: the estimate is about a kernel that does this work."""
        case = self.case if self.tier == "gpu" else memory_case(self.kernel, CHECK_N,
                                                                 self.stride, self.dtype)
        ok, verdict = run_and_check(case, seed=self.seed + 1)
        where = "the simulator" if self.tier == "sim" else device.PROBE.device_name
        return {"kernel": self.kernel, "n": case.n, "ok": ok, "where": where,
                "verdict": verdict}

    def _measure_gpu(self, inputs, with_copies: bool) -> timing.Measurement:
        from numba import cuda

        d_inputs = [cuda.to_device(a) for a in inputs]
        on_device = self.case.launcher(*d_inputs)
        counts = {"n": self.n, "flops": self.flops(), "bytes_moved": self.useful_bytes()}
        if not with_copies:  # launches looped between the events: no Python latency counted
            return timing.time_gpu_looped(on_device, 10, self.kernel, **counts)
        host_in, out = inputs[:-1], inputs[-1]

        def launch():
            for host, dev in zip(host_in, d_inputs, strict=False):
                dev.copy_to_device(host)
            on_device()
            d_inputs[-1].copy_to_host(out)

        return timing.time_gpu(launch, repeats=10, name=self.kernel, **counts)

    def run(self) -> dict:
        """Check, count, measure and estimate; returns (and keeps in ``last_result``) a dict
        whose timings each carry a ``label`` saying where they came from."""
        inputs = self.case.make_inputs(np.random.default_rng(self.seed))
        access = self.access()
        precision = PRECISION_OF_DTYPE[self.dtype.name]
        fetched = self.fetched_bytes(access)
        estimate = hardware.estimate_time(self.gpu, self.flops(), fetched, precision)
        with_copies = hardware.estimate_time(self.gpu, self.flops(), fetched, precision,
                                             transfer_bytes=self.transfer_bytes())
        cpu = timing.time_cpu(self.case.cpu_baseline(*inputs), repeats=self.cpu_repeats,
                             name=f"NumPy {self.kernel}", n=self.n, flops=self.flops(),
                             bytes_moved=self.useful_bytes())
        measured = {}
        if self.tier == "gpu":
            measured = {"kernel": self._measure_gpu(inputs, False),
                        "with_copies": self._measure_gpu(inputs, True)}
        self.last_result = {
            "kernel": self.kernel, "n": self.n, "n_out": self.n_out, "stride": self.stride,
            "dtype": self.dtype.name, "tier": self.tier, "gpu": self.gpu.key,
            "access": access, "useful_bytes": self.useful_bytes(), "fetched_bytes": fetched,
            "transfer_bytes": self.transfer_bytes(), "flops": self.flops(),
            "estimate": estimate, "estimate_with_copies": with_copies, "cpu": cpu,
            "measured": measured, "kernel_check": self.check_kernel(),
            "recorded": recorded_comparison(kernel=self.kernel, dtype=self.dtype),
        }
        return self.last_result

    def timings(self) -> list[tuple[str, float, str]]:
        """(what, seconds, where it came from) for every timing of the last run."""
        r = self._result()
        rows = [("NumPy on the CPU", r["cpu"].median_s, r["cpu"].label)]
        for key, what in (("kernel", "kernel, data already on the GPU"),
                          ("with_copies", "kernel incl. copies over the host link")):
            if key in r["measured"]:
                rows.append((what, r["measured"][key].median_s, r["measured"][key].label))
        rows.append(("kernel, data already on the GPU", r["estimate"].time_s,
                     r["estimate"].label))
        rows.append(("kernel incl. copies over the host link",
                     r["estimate_with_copies"].time_s, r["estimate_with_copies"].label))
        return rows

    def explain(self) -> str:
        """What the numbers say, in plain words."""
        r = self._result()
        access, est, est_copy = r["access"], r["estimate"], r["estimate_with_copies"]
        itemsize = self.dtype.itemsize
        lines = [
            f"Each warp request reads {access.sectors_per_request:g} sectors of 32 bytes "
            f"({access.source}); neighbouring elements would need "
            f"{access.ideal_sectors_per_request:g}. The memory system moves "
            f"{r['fetched_bytes'] / 1e6:,.1f} MB for the {r['useful_bytes'] / 1e6:,.1f} MB the "
            f"kernel uses ({access.efficiency * 100:.3g}% of each sector is used).",
            f"On the {self.gpu.name} that takes about {_fmt(est.time_s)} "
            f"({est.bound}-bound, {est.label}); copying the inputs in and the result out over "
            f"{self.gpu.host_link} adds {_fmt(est_copy.transfer_s)}: "
            f"{est_copy.time_s / est.time_s:.0f}x the kernel alone.",
            f"This CPU does the same with NumPy in {_fmt(r['cpu'].median_s)} "
            f"({r['cpu'].label}).",
        ]
        if self.kernel == "saxpy":
            ridge = hardware.ridge_point(self.gpu, PRECISION_OF_DTYPE[self.dtype.name])
            lines.append(
                f"saxpy does 2 FLOPs per {3 * itemsize} bytes: {2 / (3 * itemsize):.2g} FLOP per "
                f"byte, far below the {ridge:.3g} FLOP/byte where the {self.gpu.name} stops "
                "being memory-bound."
            )
        for key, what in (("kernel", "alone"), ("with_copies", "with the copies")):
            if key in r["measured"]:
                m = r["measured"][key]
                lines.append(f"Measured {what}: {_fmt(m.median_s)} ({m.label}).")
        if r.get("recorded"):
            lines.append(str(r["recorded"]))
        return "\n".join(lines)


def recorded_comparison(run=None, kernel: str = "saxpy", dtype=np.float32):
    """The recorded run's measurement of ``kernel`` (alone, and with its copies from pageable
    host memory) against the roofline model of the same GPU: a
    :class:`~gpulab.recorded_runs.ComparisonTable`, or None when no run ships."""
    found = recorded_runs.recorded_series(f"bandwidth {kernel}", run)
    if found is None or np.dtype(dtype) != np.float32:
        return None
    run, recorded = found
    rows = []
    for key, what in (("kernel", "data already on the GPU"),
                      ("with_copies", "incl. copies from pageable host memory")):
        if key not in recorded:
            continue
        measured = run.measurement(recorded[key])
        model = BandwidthExperiment(kernel, n=measured.n, gpu=run.gpu_key, dtype=dtype)
        fetched = model.fetched_bytes(model.access())
        estimate = hardware.estimate_time(
            model.gpu, model.flops(), fetched, PRECISION_OF_DTYPE[model.dtype.name],
            transfer_bytes=model.transfer_bytes() if key == "with_copies" else 0.0)
        rows.append((f"{kernel}, n = {measured.n:,}, {what}", estimate.time_s,
                     measured.median_s))
    return recorded_runs.comparison_table(
        f"{kernel} measured on a real GPU, against the model", run, rows)


COPY_LINKS = ("pageable", "pinned")  # the host memory a copy over the host link starts from
COPY_RATE_FIELDS = ("host_link_bytes_per_s", "host_pageable_bytes_per_s",
                    "host_pinned_bytes_per_s")


@dataclass(frozen=True, repr=False)
class CopyCostTable(ShownAsTable):
    """A kernel's roofline estimate alone (``kernel``) and including its host↔device copies
    from each kind of host memory (``with_copies[link]``); printed as a table, with the
    sources of the host link's rates."""

    gpu: hardware.GPUSpec
    kernel: hardware.RooflineEstimate
    with_copies: dict

    def table(self) -> Table:
        """The times as a table: the kernel alone, then with its copies from each host memory
        (their ratio to the kernel alone and the copy rate), the copy rates' sources beneath."""
        gpu, kernel = self.gpu, self.kernel
        rows = [["kernel alone", kernel.time_s * 1e6, None, None]]
        rows += [[f"incl. copies from {link}", estimate.time_s * 1e6,
                  estimate.time_s / kernel.time_s, hardware.link_bytes_per_s(gpu, link) / 1e9]
                 for link, estimate in self.with_copies.items()]
        return Table([Column(""), Column("time", "µs", "{:,.0f}"),
                       Column("ratio to the kernel alone", "×", "{:.0f}"),
                       Column("copies at", "GB/s", "{:.3g}")], rows,
                      title=f"host link: {gpu.host_link}, {gpu.host_link_bytes_per_s / 1e9:g} GB/s "
                            "each way, peak",
                      notes=[*(f"  {field}: {gpu.source(field).split('. ')[0]}."
                               for field in COPY_RATE_FIELDS), f"(all {kernel.label})"])


def copy_cost_table(gpu, flops: float, bytes_moved: float, copy_bytes: float,
                    links=COPY_LINKS, precision: str = "fp32") -> CopyCostTable:
    """The roofline model of ``gpu`` (a key or a :class:`~gpulab.hardware.GPUSpec`) for a
    kernel doing ``flops`` and moving ``bytes_moved`` bytes in device memory, alone and with
    ``copy_bytes`` bytes copied over the host link from each kind of host memory in ``links``
    (:func:`gpulab.hardware.estimate_time`). Returns a :class:`CopyCostTable`: ``print`` it for
    the times, their ratio to the kernel alone, the copy rates and their sources; its
    ``kernel`` and ``with_copies[link]`` are the estimates."""
    gpu = hardware.get_gpu(gpu)
    with_copies = {link: hardware.estimate_time(gpu, flops, bytes_moved, precision,
                                                transfer_bytes=copy_bytes, link=link)
                   for link in links}
    return CopyCostTable(gpu, hardware.estimate_time(gpu, flops, bytes_moved, precision),
                         with_copies)


SAXPY_TIMINGS = ("device arrays", "NumPy arrays (hidden copies)", "copies only, pageable",
                 "copies only, pinned")  # the names of time_saxpy_copies' measurements


def time_saxpy_copies(x, y, out, a: float = 2.0) -> list[timing.Measurement]:
    """On a GPU, with CUDA events (:func:`gpulab.timing.time_gpu`), the ways to time saxpy on
    the float32 NumPy arrays ``x``, ``y`` (read) and ``out`` (written): the kernel on device
    arrays; the kernel given the NumPy arrays themselves (Numba's hidden copies in and back
    included); and the copies alone (x and y in, out back), from those pageable arrays and from
    ``cuda.pinned_array`` buffers holding the same values. Returns the four measurements, named
    as in :data:`SAXPY_TIMINGS`; in the simulator tier time_gpu refuses."""
    from numba import cuda

    from gpulab.kernels import memory

    config = memory.launch_config(x.shape[0])
    grid = config.blocks, config.threads_per_block
    d_x, d_y, d_out = cuda.to_device(x), cuda.to_device(y), cuda.device_array_like(out)
    a = np.float32(a)
    x_pin, y_pin, out_pin = (cuda.pinned_array(x.shape[0], np.float32) for _ in range(3))
    x_pin[:], y_pin[:] = x, y

    def copies(xs, ys, outs):
        return lambda: (d_x.copy_to_device(xs), d_y.copy_to_device(ys), d_out.copy_to_host(outs))

    on_device, hidden, pageable, pinned = SAXPY_TIMINGS
    return [
        timing.time_gpu(lambda: memory.saxpy[grid](a, d_x, d_y, d_out), name=on_device),
        timing.time_gpu(lambda: memory.saxpy[grid](a, x, y, out), repeats=5, name=hidden),
        timing.time_gpu(copies(x, y, out), repeats=5, name=pageable),
        timing.time_gpu(copies(x_pin, y_pin, out_pin), repeats=5, name=pinned),
    ]


def copy_timings_table(runs, copy_bytes: float, gpu=hardware.COURSE_GPU) -> Table:
    """:func:`time_saxpy_copies`' measurements as a table: each one's median and where it was
    measured; then the rates of the copies alone (``copy_bytes`` over the median of
    "copies only, pageable" and "copies only, pinned") next to the rates ``gpu``'s model
    assumes (:func:`gpulab.hardware.link_bytes_per_s`)."""
    gpu = hardware.get_gpu(gpu)
    by_name = {m.name: m for m in runs}
    missing = [name for name in SAXPY_TIMINGS[2:] if name not in by_name]
    if missing:
        raise ValueError(f"no measurement named {', '.join(map(repr, missing))} among "
                         f"{', '.join(map(repr, by_name))}")
    pageable, pinned = (by_name[name] for name in SAXPY_TIMINGS[2:])
    p, q = pageable.median_s, pinned.median_s
    return Table([Column("what was timed"), Column("median", "µs", "{:.0f}"),
                  Column("measured")], [[m.name, m.median_s * 1e6, m.label] for m in runs],
                 notes=[f"copies: {copy_bytes / p / 1e9:.3g} GB/s from pageable memory, "
                        f"{copy_bytes / q / 1e9:.3g} GB/s from pinned memory ({p / q:.1f}x), "
                        f"{pinned.label}; the model assumed "
                        f"{hardware.link_bytes_per_s(gpu, 'pageable') / 1e9:.3g} and "
                        f"{hardware.link_bytes_per_s(gpu, 'pinned') / 1e9:.3g} GB/s for the "
                        f"{gpu.name}"])


def stride_sweep(strides=(1, 2, 4, 8, 16, 32), n: int | None = None, dtype=np.float32,
                 repeats: int = 5) -> dict:
    """Cost per useful element of a strided read, relative to stride 1, per series:

    - the GPU memory model: bytes fetched per byte used (sectors traced in the simulator, or
      from the index arithmetic on a GPU);
    - this CPU, measured: time per copied element of ``x[::stride]`` (NumPy);
    - on a GPU, measured: time per copied element of ``copy_strided``.

    Returns ``{"series": {label: [(stride, cost)]}, "access": {stride: AccessSummary}}``.
    """
    dtype = np.dtype(dtype)
    n = int(n or min(default_n(), 2**22 if device.tier() != "gpu" else 2**26))
    rng = np.random.default_rng(0)
    x = rng.random(n, dtype=dtype)
    tier = device.tier()
    accesses, model, cpu, gpu = {}, [], [], []
    for stride in strides:
        access = (memory_model.trace_copy(stride, dtype=dtype) if tier == "sim"
                  else memory_model.copy_access(stride, itemsize=dtype.itemsize))
        accesses[stride] = access
        model.append((stride, 1 / access.efficiency))
        out = np.empty(-(-n // stride), dtype)
        m = timing.time_cpu(np.copyto, out, x[::stride], repeats=repeats)
        cpu.append((stride, m.median_s / out.size))
        if tier == "gpu":
            from numba import cuda

            case = memory_case("copy_strided", n, stride, dtype)
            launch = case.launcher(cuda.to_device(x), cuda.device_array(out.size, dtype))
            g = timing.time_gpu_looped(launch, 10, f"copy_strided, stride {stride}")
            gpu.append((stride, g.median_s / out.size))
    source = next(iter(accesses.values())).source
    series = {f"GPU sector model: bytes fetched per byte used ({source})": model,
              f"NumPy x[::stride] copy, time per element, measured on {timing.cpu_device()}":
                  _relative(cpu)}
    if gpu:
        series[f"copy_strided, time per element, measured on {device.PROBE.device_name}"] = \
            _relative(gpu)
    return {"series": series, "access": accesses, "n": n}


def _relative(points):
    base = dict(points)[min(dict(points))]
    return [(stride, cost / base) for stride, cost in points]


def warp_access_plot(summary, request: int = 0, ax=None):
    """One warp request of an :class:`~gpulab.memory_model.AccessSummary`: the 32 threads on
    top, device memory below in 32-byte sectors, a line from each thread to the bytes it
    reads. Sectors the request touches are coloured; the title counts them.

    Text artists carry gids: ``"sector{k}"`` for each touched sector's label."""
    from gpulab.memory_model import SECTOR_BYTES

    warp = summary.requests[request]
    addresses = warp.byte_addresses
    sectors = sorted(warp.sectors)
    first, last = sectors[0], sectors[-1]
    span = last - first + 1
    fig, ax = plots.new_figure(ax, (10.5, 3.6))
    threads = len(addresses)
    width_bytes = span * SECTOR_BYTES
    for k in range(first, last + 1):
        touched = k in warp.sectors
        x0 = (k - first) * SECTOR_BYTES / width_bytes
        ax.add_patch(Rectangle((x0, 0.0), SECTOR_BYTES / width_bytes, 0.18,
                               facecolor="#f4b183" if touched else "white",
                               edgecolor="#666666", lw=0.6))
    for t, address in enumerate(addresses):
        x_thread = (t + 0.5) / threads
        x_byte = ((address - first * SECTOR_BYTES) + warp.itemsize / 2) / width_bytes
        ax.plot([x_thread, x_byte], [0.82, 0.2], color="#3d85c6", lw=0.7, alpha=0.8)
        ax.add_patch(Rectangle((t / threads + 0.1 / threads, 0.82), 0.8 / threads, 0.1,
                               color=plots.BUSY_COLOUR))
    ax.text(0.0, 0.97, f"thread 0 … {threads - 1} of one warp", fontsize=8.5, va="bottom")
    ax.text(0.0, -0.04, f"device memory, sectors {first}…{last} ({SECTOR_BYTES} bytes each; "
            "orange = fetched)", fontsize=8.5, va="top")
    ax.set_xlim(-0.01, 1.01)
    ax.set_ylim(-0.15, 1.05)
    ax.axis("off")
    ax.set_title(
        f"{len(sectors)} sectors for one request of {threads} threads × {warp.itemsize} B: "
        f"{warp.bytes_fetched} bytes fetched, {warp.bytes_requested} used "
        f"({summary.source})", fontsize=10)
    labelled = sectors if len(sectors) <= 32 and span <= 64 else sorted({first, last})
    for k in labelled:
        ax.text((k - first + 0.5) / span, 0.09, str(k), ha="center", va="center", fontsize=6.5,
                gid=f"sector{k}")
    return fig


def stride_cost_plot(series: dict, ax=None):
    """Cost per useful element, relative to stride 1, against the stride: one line per series.

    ``series`` is ``{label: [(stride, relative_cost), ...]}``; the label says where the numbers
    came from (a measurement, or the sector model). Hollow markers: model; filled: measured."""
    fig, ax = plots.new_figure(ax, (7.5, 4.6))
    for label, points in series.items():
        strides, costs = zip(*sorted(points), strict=True)
        hollow = plots.is_estimate(label) or "model" in label
        ax.plot(strides, costs, "o-", ms=5, label=label, mfc="white" if hollow else None)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("stride (elements between neighbouring threads' reads)")
    ax.set_ylabel("cost per useful element (stride 1 = 1)")
    ax.set_title("Strided reads: the memory system moves whole sectors")
    ax.grid(True, which="major", alpha=0.3)
    wrapped = ["\n".join(textwrap.wrap(label, 70, break_on_hyphens=False)) for label in series]
    ax.legend(ax.get_lines(), wrapped, loc="upper left", fontsize=7.5)
    return fig


class BandwidthDashboard(Dashboard):
    """Controls for :class:`BandwidthExperiment`, a Run button, the warp's sectors, the
    timings and the explanation. Drive it from Python: ``d.kernel_dropdown.value =
    "copy_strided"; d.stride_slider.value = 16; d.run_button.click(); d.last_result``."""

    WHERE_GPU = (
        "GPU times are measured on this machine's {gpu}; the model chosen above is added as a "
        "roofline estimate."
    )
    WHERE_SIM = (
        "No GPU here (simulator tier): the kernel runs in the simulator only to check its "
        "answer and trace its reads; CPU times are measured, GPU times are roofline estimates "
        "for the model chosen above."
    )

    experiment: BandwidthExperiment | None

    def __init__(self):
        import ipywidgets as widgets

        self.tier = device.tier()
        self.kernel_dropdown = widgets.Dropdown(options=list(KERNELS), value="copy_strided",
                                                description="kernel")
        self.stride_slider = widgets.SelectionSlider(options=[1, 2, 4, 8, 16, 32], value=8,
                                                     description="stride")
        self.n_slider = widgets.SelectionSlider(
            options=[(f"{n:,}", n) for n in sizes(self.tier)], value=default_n(self.tier),
            description="n", layout=widgets.Layout(width="500px"))
        self.gpu_dropdown = self._gpu_dropdown()
        self._add_parts()
        self._lay_out(widgets.HBox([self.kernel_dropdown, self.stride_slider]),
                      widgets.HBox([self.n_slider, self.gpu_dropdown]), self.run_button)

    def make_experiment(self) -> BandwidthExperiment:
        return BandwidthExperiment(kernel=self.kernel_dropdown.value, n=self.n_slider.value,
                                   stride=self.stride_slider.value, gpu=self.gpu_dropdown.value)

    def make_figure(self, result: dict):
        return warp_access_plot(result["access"])

    def _explanation_html(self) -> str:
        """The timings as a table, then the explanation."""
        import html

        rows = "".join(
            f"<tr><td>{html.escape(what)}</td><td style='text-align:right'>{_fmt(seconds)}</td>"
            f"<td>{html.escape(label)}</td></tr>"
            for what, seconds, label in self.experiment.timings())
        return f"<table>{rows}</table>" + super()._explanation_html()


__all__ = ["SAXPY_TIMINGS", "BandwidthDashboard", "BandwidthExperiment", "CopyCostTable",
           "copy_cost_table", "copy_timings_table", "default_n", "sizes", "stride_sweep",
           "time_saxpy_copies"]
