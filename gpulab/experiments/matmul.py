"""Matrix multiplication: chapter 03's experiment. What does the tile size change?

For the tile size a learner picks, :class:`MatmulExperiment`:

- **runs** ``matmul_tiled`` with that tile (on the GPU at full size, or in the simulator at a
  size a little over one tile in every direction, so edges are exercised) and checks it
  against NumPy;
- **counts**, per thread and per block, the loads from device memory, the loads from shared
  memory and the barriers, from the launch configuration;
- **measures** NumPy's matmul (BLAS) on this CPU;
- **estimates** every kernel (naive, tiled at each tile size, register-blocked) on a named GPU
  with the roofline model and the traffic model of :mod:`gpulab.kernels.matmul`, and on a GPU
  also **measures** them (and cuBLAS, when CuPy is installed).

:class:`MatmulDashboard` is the ipywidgets view: a tile slider, a GPU, a Run button, the
rates and the roofline.
"""

from __future__ import annotations

import numpy as np

from gpulab import device, hardware, plots, timing
from gpulab.bench.cases import DEFAULT_TILE, matmul_case, run_and_check
from gpulab.experiments.dashboard import Dashboard
from gpulab.hardware import format_seconds as _fmt

PRECISION = "fp32"


def default_n(tier: str | None = None) -> int:
    """M = N = K: 1024 without a GPU (BLAS on this CPU takes ~10-100 ms), 4096 on one."""
    return 4096 if (tier or device.tier()) == "gpu" else 1024


def check_shape(tile: int, tier: str | None = None, n: int | None = None) -> tuple[int, int, int]:
    """(M, N, K) the tiled kernel really runs at: on a GPU the full n; in the simulator a
    little over one tile each way (2 x 2 blocks, 2 steps along K, none a multiple of the
    tile), because every barrier costs the simulator tens of milliseconds."""
    if (tier or device.tier()) == "gpu":
        return (n or default_n("gpu"),) * 3
    return tile + 5, tile + 3, tile + 7


class MatmulExperiment:
    """Naive, tiled (tile = ``tile``) and register-blocked matmul, compared at M = N = K = n."""

    def __init__(self, tile: int = 16, n: int | None = None, gpu: str = "H100-SXM",
                 cpu_repeats: int = 3, seed: int = 0):
        from gpulab.kernels.matmul import TILE_SIZES, check_tile

        self.tile = check_tile(tile)
        self.tiles = sorted(set(TILE_SIZES) | {self.tile})
        self.n = int(n or default_n())
        if self.n < 1:
            raise ValueError(f"n must be at least 1, not {n!r}")
        self.gpu = hardware.get_gpu(gpu)
        self.cpu_repeats = cpu_repeats
        self.seed = seed
        self.tier = device.tier()
        self.last_result: dict | None = None

    def variants(self) -> list[tuple[str, str, int | None]]:
        """(label, method, tile) of every kernel compared."""
        return ([("matmul_naive", "naive", None)]
                + [(f"matmul_tiled T={t}", "tiled", t) for t in self.tiles]
                + [("matmul_register_blocked", "register_blocked", None)])

    def counts(self, tile: int | None = None) -> dict:
        """Per-thread and per-block work of matmul_tiled with ``tile`` at n x n x n."""
        from gpulab.kernels import matmul as mm

        tile = tile or self.tile
        n = self.n
        steps = -(-n // tile)
        return {
            "tile": tile,
            "threads_per_block": tile * tile,
            "device_loads_per_thread": 2 * steps,
            "naive_device_loads_per_thread": 2 * n,
            "shared_loads_per_thread": 2 * steps * tile,
            "barriers_per_block": 2 * steps,
            "shared_bytes_used_per_block": 2 * tile * tile * 4,
            "traffic_bytes": mm.traffic_bytes(n, n, n, "tiled", tile),
            "naive_traffic_bytes": mm.traffic_bytes(n, n, n, "naive"),
            "flops": mm.flops(n, n, n),
        }

    def check_kernel(self) -> dict:
        """Run matmul_tiled with the chosen tile for real and compare with gpulab.reference."""
        from gpulab.kernels import matmul as mm

        shape = check_shape(self.tile, self.tier, self.n)
        case = matmul_case("matmul_tiled", 0, self.tile, shape=shape)
        inputs = case.make_inputs(np.random.default_rng(self.seed + 1))
        ok, verdict = run_and_check(case, inputs)
        config = mm.launch_config(*shape, "tiled", self.tile)
        where = "the simulator" if self.tier == "sim" else device.PROBE.device_name
        return {"shape": shape, "ok": ok, "verdict": verdict, "launch": str(config),
                "where": where}

    def _measure_gpu(self, kernel: str, tile, inputs) -> timing.Measurement:
        from numba import cuda

        case = matmul_case(kernel, self.n, tile or DEFAULT_TILE)
        launch = case.launcher(*[cuda.to_device(a) for a in inputs])
        return timing.time_gpu_looped(launch, 5, kernel.removeprefix("matmul_"),
                                      flops=case.flops)

    def run(self) -> dict:
        """Check, count, measure and estimate; every timing carries a label saying where it
        came from. Returns (and keeps in ``last_result``) a dict."""
        from gpulab.kernels import matmul as mm

        n = self.n
        baseline = matmul_case("matmul_naive", n)
        inputs = baseline.make_inputs(np.random.default_rng(self.seed))
        flops = baseline.flops
        cpu = timing.time_cpu(baseline.cpu_baseline(*inputs), repeats=self.cpu_repeats,
                              name=baseline.baseline_name, n=n, flops=flops,
                              bytes_moved=baseline.bytes_moved)
        kernels = []
        for label, method, tile in self.variants():
            traffic = mm.traffic_bytes(n, n, n, method, tile)
            entry = {"label": label, "method": method, "tile": tile, "flops": flops,
                     "traffic_bytes": traffic,
                     "estimate": hardware.estimate_time(self.gpu, flops, traffic, PRECISION)}
            if self.tier == "gpu":
                entry["measured"] = self._measure_gpu(f"matmul_{method}", tile, inputs)
            kernels.append(entry)
        cublas = None
        cupy = timing.cupy_module() if self.tier == "gpu" else None
        if cupy is not None:
            d_A, d_B = cupy.asarray(inputs[0]), cupy.asarray(inputs[1])
            d_C = cupy.empty_like(d_A)
            cublas = timing.time_gpu_looped(lambda: cupy.matmul(d_A, d_B, out=d_C), 5,
                                            "cuBLAS", flops=flops)
        self.last_result = {
            "n": n, "tile": self.tile, "gpu": self.gpu.key, "tier": self.tier, "cpu": cpu,
            "kernels": kernels, "cublas": cublas, "counts": self.counts(),
            "kernel_check": self.check_kernel(),
        }
        return self.last_result

    def _result(self) -> dict:
        return self.last_result if self.last_result is not None else self.run()

    def bars(self) -> list[tuple[str, float, str]]:
        """(what, FLOP/s, where it came from) for :func:`gpulab.plots.rates_plot`."""
        r = self._result()
        bars = [(f"NumPy (BLAS), n = {r['n']:,}", r["cpu"].gflops_per_s * 1e9, r["cpu"].label)]
        if r["cublas"] is not None:
            bars.append(("cuBLAS (CuPy)", r["cublas"].gflops_per_s * 1e9, r["cublas"].label))
        for k in r["kernels"]:
            if "measured" in k:
                bars.append((k["label"], k["measured"].gflops_per_s * 1e9, k["measured"].label))
            bars.append((k["label"], k["estimate"].achieved_flops_per_s, k["estimate"].label))
        return bars

    def roofline_points(self) -> list[dict]:
        r = self._result()
        points = []
        for k in r["kernels"]:
            common = {"name": k["label"], "flops": k["flops"], "bytes_moved": k["traffic_bytes"]}
            points.append({**common, "seconds": k["estimate"].time_s,
                           "origin": k["estimate"].label})
            if "measured" in k:
                points.append({**common, "seconds": k["measured"].median_s,
                               "origin": k["measured"].label})
        return points

    def explain(self) -> str:
        r = self._result()
        c = r["counts"]
        tiled = next(k for k in r["kernels"] if k["method"] == "tiled"
                     and k["tile"] == self.tile)
        naive = r["kernels"][0]
        est = tiled["estimate"]
        check = r["kernel_check"]
        ridge = hardware.ridge_point(self.gpu, PRECISION)
        lines = [
            f"With {c['tile']} x {c['tile']} tiles ({c['threads_per_block']} threads per block, "
            f"filling {c['shared_bytes_used_per_block']:,} bytes of shared memory), each thread "
            "loads "
            f"{c['device_loads_per_thread']:,} values from device memory instead of "
            f"{c['naive_device_loads_per_thread']:,} (naive), reads "
            f"{c['shared_loads_per_thread']:,} from shared memory, and its block waits at "
            f"{c['barriers_per_block']:,} barriers, at n = {r['n']:,}.",
            f"Traffic model: {c['traffic_bytes'] / 1e9:,.3g} GB instead of "
            f"{c['naive_traffic_bytes'] / 1e9:,.3g} GB, so {c['flops'] / c['traffic_bytes']:.3g} "
            f"FLOP per byte (the {self.gpu.name} needs {ridge:.3g} to be compute-bound): about "
            f"{_fmt(est.time_s)}, {est.achieved_flops_per_s / 1e12:.3g} TFLOP/s, "
            f"{est.bound}-bound ({est.label}); naive: {_fmt(naive['estimate'].time_s)}.",
            f"This CPU: {r['cpu'].gflops_per_s:,.3g} GFLOP/s ({r['cpu'].label}).",
            f"The tiled kernel ran for real in {check['where']} at M, N, K = "
            f"{', '.join(map(str, check['shape']))} and "
            + ("matched NumPy to rounding." if check["ok"] else "did NOT match NumPy."),
        ]
        measured = [k for k in r["kernels"] if "measured" in k]
        if measured:
            best = max(measured, key=lambda k: k["measured"].gflops_per_s)
            lines.append(f"Fastest measured: {best['label']}, "
                         f"{best['measured'].gflops_per_s:,.4g} GFLOP/s "
                         f"({best['measured'].label}).")
        if r["cublas"] is not None:
            lines.append(f"cuBLAS: {r['cublas'].gflops_per_s:,.4g} GFLOP/s "
                         f"({r['cublas'].label}).")
        return "\n".join(lines)


class MatmulDashboard(Dashboard):
    """A tile-size slider, a GPU, a Run button; the rates of every kernel, the roofline and an
    explanation. Drive it from Python: ``d.tile_slider.value = 32; d.run_button.click()``."""

    WHERE_GPU = (
        "Kernels are measured on this machine's {gpu} at full size; the model chosen above is "
        "added as an estimate."
    )
    WHERE_SIM = (
        "No GPU here (simulator tier): the tiled kernel runs in the simulator at a small size "
        "to check its answer; the CPU is measured; GPU rates are roofline estimates for the "
        "model chosen above."
    )

    experiment: MatmulExperiment | None

    def __init__(self):
        import ipywidgets as widgets

        from gpulab.kernels.matmul import TILE_SIZES

        self.tier = device.tier()
        self.tile_slider = widgets.SelectionSlider(options=list(TILE_SIZES), value=16,
                                                   description="tile T")
        self.gpu_dropdown = widgets.Dropdown(
            options=[(spec.name, key) for key, spec in hardware.GPUS.items()], value="H100-SXM",
            description="GPU model", style={"description_width": "initial"})
        self._add_parts()
        self.widget = widgets.VBox([
            widgets.HBox([self.tile_slider, self.gpu_dropdown, self.run_button]),
            self.status, self.output, self.explanation,
        ])
        self.figures: list = []

    def make_experiment(self) -> MatmulExperiment:
        return MatmulExperiment(tile=self.tile_slider.value, gpu=self.gpu_dropdown.value)

    def _draw(self) -> None:
        """Two figures (the rates, the roofline), kept in ``figures``."""
        self.figures = [
            plots.rates_plot(self.experiment.bars(), "FLOP/s",
                             title=f"fp32 matmul, M = N = K = {self.last_result['n']:,}: "
                                   "solid = measured, hatched = estimated"),
            plots.roofline_plot(self.experiment.roofline_points(), self.gpu_dropdown.value),
        ]
        self._show(*self.figures)
        self.explanation.value = self._explanation_html()


__all__ = ["MatmulDashboard", "MatmulExperiment", "check_shape", "default_n"]
