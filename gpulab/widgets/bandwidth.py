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
"""

from __future__ import annotations

import numpy as np

from gpulab import bench, device, hardware, memory_model, plots, reference
from gpulab.hardware import format_seconds as _fmt
from gpulab.widgets._dashboard import Dashboard

KERNELS = ("saxpy", "copy_coalesced", "copy_strided")
PRECISION_OF_DTYPE = {"float32": "fp32", "float64": "fp64"}
CHECK_N = 1000  # the size the kernel runs at in the simulator, to check its answer
SAXPY_A = 2.0


def default_n(tier: str | None = None) -> int:
    """2^24 elements (64 MiB of float32 per array) without a GPU; 2^26 on one."""
    return 2**26 if (tier or device.tier()) == "gpu" else 2**24


def sizes(tier: str | None = None) -> list[int]:
    """The n a learner can pick: 2^10 … 2^24 (2^26 on a GPU), in steps of 4x."""
    return [2**e for e in range(10, (26 if (tier or device.tier()) == "gpu" else 24) + 1, 2)]


class BandwidthExperiment:
    """One memory-bound kernel at one size: checked, counted, measured and estimated.

    >>> BandwidthExperiment("copy_strided", stride=8).run()["access"].sectors_per_request
    ... # doctest: +SKIP
    32.0
    """

    def __init__(self, kernel: str = "saxpy", n: int | None = None, stride: int = 8,
                 gpu: str = "H100-SXM", dtype=np.float32, cpu_repeats: int = 5, seed: int = 0):
        if kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {', '.join(KERNELS)}, not {kernel!r}")
        from gpulab.kernels.memory import check_stride

        self.kernel = kernel
        self.n = int(n or default_n())
        if self.n < 1:
            raise ValueError(f"n must be at least 1, not {n!r}")
        self.stride = check_stride(stride) if kernel == "copy_strided" else 1
        self.gpu = hardware.get_gpu(gpu)
        self.dtype = np.dtype(dtype)
        if self.dtype.name not in PRECISION_OF_DTYPE:
            raise ValueError(f"dtype must be float32 or float64, not {self.dtype.name}")
        self.cpu_repeats = cpu_repeats
        self.seed = seed
        self.tier = device.tier()
        self.last_result: dict | None = None

    # -- counts ---------------------------------------------------------------------------------

    @property
    def n_out(self) -> int:
        return -(-self.n // self.stride)

    def arrays_in(self) -> int:
        return 2 if self.kernel == "saxpy" else 1

    def useful_bytes(self) -> int:
        """Bytes the kernel uses: saxpy reads x, y and writes out; a copy reads and writes
        n_out elements."""
        itemsize = self.dtype.itemsize
        if self.kernel == "saxpy":
            return 3 * self.n * itemsize
        return 2 * self.n_out * itemsize

    def flops(self) -> int:
        return 2 * self.n if self.kernel == "saxpy" else 0

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
        return (self.arrays_in() * self.n + self.n_out) * self.dtype.itemsize

    # -- running --------------------------------------------------------------------------------

    def _inputs(self, n: int, rng) -> tuple:
        x = rng.random(n, dtype=self.dtype)
        y = rng.random(n, dtype=self.dtype)
        return x, y

    def _numpy(self, x, y, out):
        if self.kernel == "saxpy":
            return lambda: np.add(np.multiply(x, SAXPY_A, out=out), y, out=out)
        if self.kernel == "copy_coalesced":
            return lambda: np.copyto(out, x)
        return lambda: np.copyto(out, x[:: self.stride])

    def _launcher(self, d_x, d_y, d_out):
        """A function that launches the kernel on device arrays, nothing else (no checks, no
        copies), so that timing it times the kernel."""
        from gpulab.kernels import memory
        from gpulab.kernels.launch import one_thread_per_element

        config = one_thread_per_element(self.n_out, memory.DEFAULT_THREADS_PER_BLOCK)
        grid = config.blocks, config.threads_per_block
        a = self.dtype.type(SAXPY_A)
        if self.kernel == "saxpy":
            return lambda: memory.saxpy[grid](a, d_x, d_y, d_out)
        if self.kernel == "copy_coalesced":
            return lambda: memory.copy_coalesced[grid](d_x, d_out)
        return lambda: memory.copy_strided[grid](d_x, d_out, self.stride)

    def check_kernel(self) -> dict:
        """Run the kernel for real (on the GPU, or in the simulator at n = 1000) and compare
        with gpulab.reference: the estimate is about a kernel that does this work."""
        rng = np.random.default_rng(self.seed + 1)
        n = self.n if self.tier == "gpu" else CHECK_N
        x, y = self._inputs(n, rng)
        from gpulab.kernels import memory

        if self.kernel == "saxpy":
            got, expected = memory.run_saxpy(SAXPY_A, x, y), reference.saxpy(SAXPY_A, x, y)
        elif self.kernel == "copy_coalesced":
            got, expected = memory.run_copy(x), reference.copy(x)
        else:
            got = memory.run_copy_strided(x, self.stride)
            expected = reference.copy_strided(x, self.stride)
        ok = bool(np.allclose(got, expected, rtol=4 * np.finfo(self.dtype).eps, atol=0))
        where = "the simulator" if self.tier == "sim" else device.PROBE.device_name
        return {"kernel": self.kernel, "n": n, "ok": ok, "where": where}

    def _measure_gpu(self, x, y, out, with_copies: bool):
        from numba import cuda

        d_x, d_y = cuda.to_device(x), cuda.to_device(y)
        d_out = cuda.device_array(self.n_out, self.dtype)
        on_device = self._launcher(d_x, d_y, d_out)

        def launch():
            if with_copies:
                d_x.copy_to_device(x)
                if self.kernel == "saxpy":
                    d_y.copy_to_device(y)
            on_device()
            if with_copies:
                d_out.copy_to_host(out)

        counts = {"n": self.n, "flops": self.flops(), "bytes_moved": self.useful_bytes()}
        if not with_copies:  # launches looped between the events: no Python latency counted
            from gpulab.suite import time_on_gpu

            return time_on_gpu(launch, 10, self.kernel, **counts)
        return bench.time_gpu(launch, repeats=10, name=self.kernel, **counts)

    def run(self) -> dict:
        """Check, count, measure and estimate; returns (and keeps in ``last_result``) a dict
        whose timings each carry a ``label`` saying where they came from."""
        rng = np.random.default_rng(self.seed)
        x, y = self._inputs(self.n, rng)
        out = np.empty(self.n_out, self.dtype)
        access = self.access()
        precision = PRECISION_OF_DTYPE[self.dtype.name]
        fetched = self.fetched_bytes(access)
        estimate = hardware.estimate_time(self.gpu, self.flops(), fetched, precision)
        with_copies = hardware.estimate_time(self.gpu, self.flops(), fetched, precision,
                                             transfer_bytes=self.transfer_bytes())
        cpu = bench.time_cpu(self._numpy(x, y, out), repeats=self.cpu_repeats,
                             name=f"NumPy {self.kernel}", n=self.n, flops=self.flops(),
                             bytes_moved=self.useful_bytes())
        measured = {}
        if self.tier == "gpu":
            measured = {"kernel": self._measure_gpu(x, y, out, False),
                        "with_copies": self._measure_gpu(x, y, out, True)}
        self.last_result = {
            "kernel": self.kernel, "n": self.n, "n_out": self.n_out, "stride": self.stride,
            "dtype": self.dtype.name, "tier": self.tier, "gpu": self.gpu.key,
            "access": access, "useful_bytes": self.useful_bytes(), "fetched_bytes": fetched,
            "transfer_bytes": self.transfer_bytes(), "flops": self.flops(),
            "estimate": estimate, "estimate_with_copies": with_copies, "cpu": cpu,
            "measured": measured, "kernel_check": self.check_kernel(),
        }
        return self.last_result

    def _result(self) -> dict:
        return self.last_result if self.last_result is not None else self.run()

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
        return "\n".join(lines)


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
        m = bench.time_cpu(np.copyto, out, x[::stride], repeats=repeats)
        cpu.append((stride, m.median_s / out.size))
        if tier == "gpu":
            from numba import cuda

            from gpulab.kernels import memory

            d_x, d_out = cuda.to_device(x), cuda.device_array(out.size, dtype)
            blocks = -(-out.size // memory.DEFAULT_THREADS_PER_BLOCK)
            grid = blocks, memory.DEFAULT_THREADS_PER_BLOCK
            g = bench.time_gpu(lambda d_x=d_x, d_out=d_out, s=stride, grid=grid:
                               memory.copy_strided[grid](d_x, d_out, s), repeats=10)
            gpu.append((stride, g.median_s / out.size))
    source = next(iter(accesses.values())).source
    series = {f"GPU sector model: bytes fetched per byte used ({source})": model,
              f"NumPy x[::stride] copy, time per element, measured on {bench.cpu_device()}":
                  _relative(cpu)}
    if gpu:
        series[f"copy_strided, time per element, measured on {device.PROBE.device_name}"] = \
            _relative(gpu)
    return {"series": series, "access": accesses, "n": n}


def _relative(points):
    base = dict(points)[min(dict(points))]
    return [(stride, cost / base) for stride, cost in points]


class BandwidthDashboard(Dashboard):
    """Controls for :class:`BandwidthExperiment`, a Run button, the warp's sectors, the
    timings and the explanation. Drive it from Python: ``d.kernel_dropdown.value =
    "copy_strided"; d.stride_slider.value = 16; d.run_button.click(); d.last_result``."""

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
        self.gpu_dropdown = widgets.Dropdown(
            options=[(spec.name, key) for key, spec in hardware.GPUS.items()], value="H100-SXM",
            description="GPU model", style={"description_width": "initial"})
        self._add_parts()
        self.widget = widgets.VBox([
            widgets.HBox([self.kernel_dropdown, self.stride_slider]),
            widgets.HBox([self.n_slider, self.gpu_dropdown]),
            self.run_button, self.status, self.output, self.explanation,
        ])

    def _where(self) -> str:
        if self.tier == "gpu":
            return (f"GPU times are measured on this machine's {device.PROBE.device_name}; the "
                    "model chosen above is added as a roofline estimate.")
        return ("No GPU here (simulator tier): the kernel runs in the simulator only to check "
                "its answer and trace its reads; CPU times are measured, GPU times are roofline "
                "estimates for the model chosen above.")

    def make_experiment(self) -> BandwidthExperiment:
        return BandwidthExperiment(kernel=self.kernel_dropdown.value, n=self.n_slider.value,
                                   stride=self.stride_slider.value, gpu=self.gpu_dropdown.value)

    def make_figure(self, result: dict):
        return plots.warp_access_plot(result["access"])

    def _explanation_html(self) -> str:
        """The timings as a table, then the explanation."""
        import html

        rows = "".join(
            f"<tr><td>{html.escape(what)}</td><td style='text-align:right'>{_fmt(seconds)}</td>"
            f"<td>{html.escape(label)}</td></tr>"
            for what, seconds, label in self.experiment.timings())
        return f"<table>{rows}</table>" + super()._explanation_html()


__all__ = ["BandwidthDashboard", "BandwidthExperiment", "default_n", "sizes", "stride_sweep"]
