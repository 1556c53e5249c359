"""Matrix multiplication: chapter 03's experiment. What does the tile size change?

For the tile size a learner picks, :class:`MatmulExperiment`:

- **runs** ``matmul_tiled`` with that tile (on the GPU at full size, or in the simulator at a
  size a little over one tile in every direction, so edges are exercised) and checks it
  against NumPy;
- **counts**, per thread and per block, the loads from device memory, the loads from shared
  memory and the barriers, from the launch configuration;
- **measures** NumPy's matmul (BLAS) on this CPU;
- **estimates** every kernel (naive, tiled at each tile size, register-blocked) on a named GPU
  with gpulab's GPU model (:func:`kernel_estimate`: the kernel family's costs from
  :func:`gpulab.kernels.matmul.kernel_costs`, its waves from the registers ptxas gives it,
  the naive kernel as a range because L1/L2 decide its traffic), next to the **published**
  measurement of the same kernel family on a real GPU (:func:`published_beside`), and on a GPU
  also **measures** them (and cuBLAS, when CuPy is installed).

:class:`MatmulDashboard` is the ipywidgets view: a tile slider, a GPU, a Run button, the
rates and the roofline.

Two pictures of a launch, computed from its :class:`~gpulab.kernels.matmul.MatmulLaunch`:
:func:`warp_footprint` (which elements of C the 32 threads of one warp compute, and what they
read per step of k) and :func:`tiling_plot` (the 2-D grid of blocks over C, and the tiles one
block walks along K).

:func:`traffic_table` prints the traffic model's bytes, FLOP per byte and roofline time of each
kernel at one size.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from gpulab import device, hardware, kernel_resources, plots, ptx, recorded_runs, timing
from gpulab.bench import model_check
from gpulab.bench.cases import DEFAULT_TILE, matmul_case, run_and_check
from gpulab.experiments.dashboard import Dashboard
from gpulab.experiments.experiment import Experiment
from gpulab.hardware import format_seconds as _fmt
from gpulab.tables import Column, Table

PRECISION = "fp32"
WARP_SIZE = 32  # threads of a warp, on every NVIDIA GPU so far


def default_n(tier: str | None = None) -> int:
    """M = N = K: 1024 without a GPU (BLAS on this CPU takes ~10-100 ms), 4096 on one."""
    return 4096 if (tier or device.tier()) == "gpu" else 1024


@functools.lru_cache(maxsize=16)
def kernel_registers(method: str, compute_capability: tuple[int, int]
                     ) -> tuple[int, int] | None:
    """(registers per thread, static shared bytes per block) of ``matmul_<method>`` on
    ``compute_capability``, as the assembler (ptxas via nvJitLink, no GPU) reports them: from
    the table shipped in ``gpulab/data`` (tested against a fresh assembly), else assembled now;
    None where neither can say (no toolkit wheels, an unknown architecture)."""
    name = f"matmul_{method}"
    found = kernel_resources.shipped(name, compute_capability)
    if found is None:
        try:
            found = kernel_resources.resources(name, tuple(compute_capability))
        except (ptx.ToolkitMissingError, kernel_resources.AssemblyError, ValueError,
                RuntimeError):
            return None
    return found.registers, found.shared_bytes


def kernel_estimate(gpu, method: str, n: int, tile: int | None = None
                    ) -> hardware.RooflineEstimate:
    """gpulab's GPU model of ``matmul_<method>`` at M = N = K = ``n`` on ``gpu``: the kernel
    family's device-memory bytes (without and with cache reuse), its shared-memory/L1 loads and
    FMA issue share (:func:`gpulab.kernels.matmul.kernel_costs`), and its waves, from the
    launch gpulab uses and the registers and shared memory ptxas gives the kernel. One launch
    (the host's issue cost overlaps a loop of them: use ``gpu_s`` for the kernel's rate)."""
    from gpulab.kernels import matmul as mm

    gpu = hardware.get_gpu(gpu)
    if method == "naive" and tile is None:
        tile = 16  # the naive kernel's 16 x 16 blocks on a GPU
    costs = mm.kernel_costs(method, n, n, n, tile if method != "register_blocked" else None)
    found = kernel_registers(method, tuple(gpu.compute_capability))
    registers, shared = found if found else (0, 0)
    return hardware.estimate_time(gpu, mm.flops(n, n, n), precision=PRECISION, launches=1,
                                  registers_per_thread=registers,
                                  shared_bytes_per_block=shared, **costs)


def published_beside(method: str, n: int, gpu, tile: int | None = None) -> str:
    """The published measurement of ``matmul_<method>``'s kernel family (nearest size), the
    model's prediction for that run, measured / predicted, and what differs from ours."""
    from gpulab.kernels import matmul as mm

    family = mm.FAMILY_OF_METHOD[method]
    spec = hardware.get_gpu(gpu)
    ours = (f"gpulab's matmul_{method}" + (f" (T = {tile})" if tile else "")
            + f" at n = {n:,}, modelled on the {spec.name}")
    return model_check.beside(ours, "matmul", spec.key, n, variant=family)


def check_shape(tile: int, tier: str | None = None, n: int | None = None) -> tuple[int, int, int]:
    """(M, N, K) the tiled kernel really runs at: on a GPU the full n; in the simulator a
    little over one tile each way (2 x 2 blocks, 2 steps along K, none a multiple of the
    tile), because every barrier costs the simulator tens of milliseconds."""
    if (tier or device.tier()) == "gpu":
        return (n or default_n("gpu"),) * 3
    return tile + 5, tile + 3, tile + 7


class MatmulExperiment(Experiment):
    """Naive, tiled (tile = ``tile``) and register-blocked matmul, compared at M = N = K = n."""

    def __init__(self, tile: int = 16, n: int | None = None, gpu: str = hardware.COURSE_GPU,
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
                     "estimate": kernel_estimate(self.gpu, method, n, tile)}
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
            "kernel_check": self.check_kernel(), "recorded": recorded_comparison(),
        }
        return self.last_result

    def bars(self) -> list[tuple[str, float, str]]:
        """(what, FLOP/s, where it came from) for :func:`gpulab.plots.rates_plot`."""
        r = self._result()
        bars = [(f"NumPy (BLAS), n = {r['n']:,}", r["cpu"].gflops_per_s * 1e9, r["cpu"].label)]
        if r["cublas"] is not None:
            bars.append(("cuBLAS (CuPy)", r["cublas"].gflops_per_s * 1e9, r["cublas"].label))
        for k in r["kernels"]:
            if "measured" in k:
                bars.append((k["label"], k["measured"].gflops_per_s * 1e9, k["measured"].label))
            est = k["estimate"]
            if est.is_range:
                bars.append((f"{k['label']} (no cache reuse)", k["flops"] / est.gpu_s,
                             est.label))
                bars.append((f"{k['label']} (caches catch all reuse)",
                             k["flops"] / est.gpu_s_with_reuse, est.label))
            else:
                bars.append((k["label"], k["flops"] / est.gpu_s, est.label))
        return bars

    def roofline_points(self) -> list[dict]:
        r = self._result()
        points = []
        for k in r["kernels"]:
            common = {"name": k["label"], "flops": k["flops"], "bytes_moved": k["traffic_bytes"]}
            points.append({**common, "seconds": k["estimate"].gpu_s,
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
            f"{_fmt(est.gpu_s)} on the GPU, {c['flops'] / est.gpu_s / 1e12:.3g} TFLOP/s, "
            f"{est.bound}-bound" + (f", {est.fill}" if est.fill else "")
            + f" ({est.label}); naive: {_range_text(naive['estimate'])}.",
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
        blocked = r["kernels"][-1]["estimate"]
        if blocked.fill:
            lines.append(f"Register-blocked at n = {r['n']:,}: {blocked.fill}, so "
                         f"{c['flops'] / blocked.gpu_s / 1e12:.3g} TFLOP/s, not the "
                         f"{blocked.gpu.peak_flops_for(PRECISION) / 1e12:.3g} TFLOP/s peak.")
        lines.append(published_beside("naive", r["n"], self.gpu))
        lines.append(published_beside("tiled", r["n"], self.gpu, self.tile))
        lines.append(published_beside("register_blocked", r["n"], self.gpu))
        if r.get("recorded"):
            lines.append(str(r["recorded"]))
        return "\n".join(lines)


def _range_text(estimate) -> str:
    """'3.2 ms' or, for a cache-decided kernel, '0.41 ms (caches catch all reuse) to 45 ms (no
    reuse)' (GPU time)."""
    if not estimate.is_range:
        return _fmt(estimate.gpu_s)
    return (f"{_fmt(estimate.gpu_s_with_reuse)} (caches catch all reuse) to "
            f"{_fmt(estimate.gpu_s)} (no reuse)")


def recorded_comparison(run=None):
    """The recorded run's matmul kernels (``matmul_naive``, ``matmul_tiled T=…``,
    ``matmul_register_blocked`` at the GPU tier's n) against the roofline model of the same GPU
    with this module's traffic model: a :class:`~gpulab.recorded_runs.ComparisonTable`, or
    None when no run ships."""
    def rows_of(run, recorded):
        spec = hardware.get_gpu(run.gpu_key)
        for label, data in recorded.items():
            measured = run.measurement(data)
            name, _, tile = label.partition(" T=")
            method = name.removeprefix("matmul_")
            estimate = kernel_estimate(spec, method, measured.n, int(tile) if tile else None)
            yield f"{label}, n = {measured.n:,}", estimate.gpu_s, measured.median_s

    return recorded_runs.series_comparison(
        "matmul tiles", "Matrix products measured on a real GPU, against the model", rows_of,
        run)


TRAFFIC_KERNELS = (("naive", None), ("tiled", 16), ("register_blocked", None))  # (method, tile)


def traffic_table(n: int, gpu=hardware.COURSE_GPU, kernels=TRAFFIC_KERNELS) -> Table:
    """For M = N = K = ``n``, one row per (method, tile) of ``kernels``: the device-memory bytes
    the kernel asks for (:func:`gpulab.kernels.matmul.traffic_bytes`, no cache helping), its
    FLOP per byte, and its GPU time, bound and waves by gpulab's GPU model of ``gpu`` in fp32
    (:func:`kernel_estimate`): a range for the naive kernel, whose traffic the caches decide.
    A note beneath says the size and where the times come from."""
    from gpulab.kernels import matmul as mm

    if not kernels:
        raise ValueError("kernels must name at least one (method, tile)")
    gpu = hardware.get_gpu(gpu)
    flops = mm.flops(n, n, n)
    rows = []
    for method, tile in kernels:
        traffic = mm.traffic_bytes(n, n, n, method, tile)
        estimate = kernel_estimate(gpu, method, n, tile)
        waves = (f"{estimate.fill.waves} wave(s), {estimate.fill.fill:.0%} busy"
                 if estimate.fill else "")
        rows.append([method + (f" T={tile}" if tile else ""), traffic / 1e9, flops / traffic,
                     _range_text(estimate), f"{estimate.bound}-bound", waves])
    return Table([Column("kernel"), Column("traffic", "GB", "{:.2f}"),
                  Column("intensity", "FLOP/B", "{:.2f}"), Column("GPU time", align="right"),
                  Column("bound"), Column("waves")], rows,
                 notes=[f"(n = {n}; GPU times {estimate.label})"])


def published_series_table(gpu_key: str | None = None) -> Table:
    """Every published matmul point (one series per GPU: naive to cuBLAS), next to the
    model's prediction for the same run and measured / predicted (:mod:`gpulab.bench.
    model_check`). Where the measured naive kernels beat the model's no-reuse end, the
    caches served the reuse the traffic model counts again."""
    rows = [r for r in model_check.check().rows if r.point.model_case["type"] == "matmul"
            and (gpu_key is None or r.point.gpu_key == gpu_key)]
    cells = []
    for r in rows:
        p, pred = r.point, r.prediction
        model = (f"{pred.low:,.0f}..{pred.high:,.0f}" if pred.is_range else f"{pred.value:,.0f}")
        cells.append([p.gpu_key, p.what, f"{p.value:,.0f} {p.unit}", f"{model} {p.unit}",
                      r.ratio])
    sources = sorted({r.point.source for r in rows})
    return Table([Column("GPU"), Column("kernel (as published)"), Column("measured"),
                  Column("model"), Column("ratio", number_format="{:.2f}")], cells,
                 notes=["measured: " + "; ".join(f"{r.point.measured_by} ({r.point.source})"
                                                 for r in {r.point.source: r
                                                           for r in rows}.values()),
                        f"model: gpulab's GPU model of each GPU; ratio = measured / predicted, 1 "
                        f"inside a range ({len(rows)} points, {len(sources)} source(s))"])


def _span(values: list[int]) -> str:
    return f"{values[0]}..{values[-1]}" if len(values) > 1 else str(values[0])


def _block_shape(config) -> tuple[int, int]:
    """(blockDim.x, blockDim.y) of a 2-D launch; a 1-D block is refused."""
    if len(config.threads) != 2:
        raise ValueError(f"{config}: the picture needs a 2-D block of threads (naive or tiled), "
                         f"not {len(config.threads)}-D")
    return int(config.threads[0]), int(config.threads[1])


@dataclass(frozen=True)
class WarpFootprint:
    """The elements of C one warp of a 2-D matmul block computes (one thread per element):
    threads are numbered with ``threadIdx.x`` varying fastest (t = tx + ty * blockDim.x), and
    warp w is threads 32w ... 32w + 31 of its block."""

    block: tuple[int, int]  # (blockDim.x, blockDim.y)
    warp: int
    threads: tuple[tuple[int, int], ...]  # (tx, ty) of the warp's threads
    itemsize: int = 4

    @property
    def rows(self) -> int:
        """Rows of C (values of ty) the warp touches."""
        return len({ty for _, ty in self.threads})

    @property
    def columns(self) -> int:
        """Columns of C (values of tx) the warp touches."""
        return len({tx for tx, _ in self.threads})

    @property
    def a_values_per_k(self) -> int:
        """Different A[row, k] the warp reads for one k: one per row (a broadcast to the threads
        of that row)."""
        return self.rows

    @property
    def b_values_per_k(self) -> int:
        """Different B[k, col] the warp reads for one k: one per column, side by side in B's
        row k."""
        return self.columns

    def __str__(self) -> str:
        bx, by = self.block
        xs = sorted({tx for tx, _ in self.threads})
        ys = sorted({ty for _, ty in self.threads})
        share = len(self.threads) // max(self.columns, 1)
        lines = [
            f"blocks of {bx} x {by} threads; threadIdx.x varies fastest, so warp {self.warp} is "
            f"threads x = {_span(xs)}, y = {_span(ys)} ({len(self.threads)} threads): "
            f"{self.rows} row{'s' if self.rows > 1 else ''} of C, {self.columns} columns wide.",
            f"For each k it reads {self.a_values_per_k} A[row, k] (one per row, "
            f"broadcast to the threads of that row) and {self.b_values_per_k} neighbouring "
            f"B[k, col] ({self.b_values_per_k * self.itemsize} bytes in a row of B"
            + (f", each read by {share} threads" if share > 1 else "") + ").",
        ]
        if self.rows > 1:
            lines.append(f"A warp lies along one row of C only when blocks are at least "
                         f"{WARP_SIZE} threads wide.")
        return "\n".join(lines)


def warp_footprint(config, warp: int = 0, itemsize: int = 4) -> WarpFootprint:
    """Which threads (tx, ty) of a block of ``config`` (a 2-D
    :class:`~gpulab.kernels.matmul.MatmulLaunch`) form warp ``warp``, and what that means for
    its reads of A and B."""
    bx, by = _block_shape(config)
    size = bx * by
    warps = -(-size // WARP_SIZE)
    if not 0 <= warp < warps:
        raise ValueError(f"a block of {bx} x {by} threads has {warps} warp(s): "
                         f"warp must be in 0..{warps - 1}, not {warp!r}")
    ids = range(warp * WARP_SIZE, min(size, (warp + 1) * WARP_SIZE))
    return WarpFootprint((bx, by), warp, tuple((t % bx, t // bx) for t in ids), itemsize)


def tiling_plot(config, block: tuple[int, int] | None = None, ax=None):
    """The launch ``config`` (a tiled :class:`~gpulab.kernels.matmul.MatmulLaunch`) drawn to
    scale, one unit per element: the 2-D grid of blocks over C, and for one block (``block`` =
    (blockIdx.x, blockIdx.y); by default (1, 1) where the grid has it) the strip of A and of B
    it walks along K, one tile per step, with the parts past the edges (zero-filled) hatched.
    Inside that block, the warps are shaded (threadIdx.x varies fastest).

    Patches carry gids: ``"block(x,y)"`` for each block of the grid, ``"a_tile{s}"`` and
    ``"b_tile{s}"`` for step s along K, ``"warp{w}"`` for the warps of the chosen block."""
    from matplotlib.patches import Rectangle

    if config.method != "tiled":
        raise ValueError(f"tiling_plot draws the tiled kernel's launch, not {config.method!r}")
    T = config.tile
    grid_x, grid_y = config.blocks
    M, N, K = config.M, config.N, config.K
    steps = -(-K // T)
    bx, by = block if block is not None else (min(1, grid_x - 1), min(1, grid_y - 1))
    if not (0 <= bx < grid_x and 0 <= by < grid_y):
        raise ValueError(f"block {(bx, by)} is not in the grid of {grid_x} x {grid_y} blocks")
    gap = max(2.0, 0.08 * max(M, N, K, grid_x * T, grid_y * T))
    left = max(K, steps * T) + gap  # x where B and C start
    top = max(K, steps * T) + gap  # y where A and C start (y grows downwards)
    fig, ax = plots.new_figure(ax, (9.0, 7.0))
    strip = "#f4b183"

    def outline(x, y, w, h, name):
        ax.add_patch(Rectangle((x, y), w, h, fill=False, edgecolor="black", lw=1.6, zorder=4))
        ax.text(x + w / 2, y - 0.02 * gap - 0.5, name, ha="center", va="bottom", fontsize=9)

    # the grid of blocks over C (blocks past C's edges stick out: their threads do nothing)
    for j in range(grid_y):
        for i in range(grid_x):
            chosen = (i, j) == (bx, by)
            ax.add_patch(Rectangle((left + i * T, top + j * T), T, T, fill=False,
                                   edgecolor="#3d85c6" if chosen else "#9fc5e8",
                                   lw=1.4 if chosen else 0.6, zorder=3 if chosen else 2,
                                   gid=f"block({i},{j})"))
    # the chosen block's warps, one thread per element of C
    threads_x, threads_y = _block_shape(config)
    shades = ("#cfe2f3", "#6fa8dc")
    for w in range(-(-threads_x * threads_y // WARP_SIZE)):
        for tx, ty in warp_footprint(config, w).threads:
            ax.add_patch(Rectangle((left + bx * T + tx, top + by * T + ty), 1, 1,
                                   facecolor=shades[w % 2], edgecolor="none", zorder=1,
                                   gid=f"warp{w}"))
    # the strips of A and B the chosen block walks along K, one T x T tile per step
    for s in range(steps):
        for name, x, y in (("a", s * T, top + by * T), ("b", left + bx * T, s * T)):
            ax.add_patch(Rectangle((x, y), T, T, facecolor=strip, alpha=0.55 + 0.45 * (s % 2),
                                   edgecolor="#7f6000", lw=0.8, zorder=1, gid=f"{name}_tile{s}"))
            if steps <= 6 or s in (0, steps - 1):  # label every step while they fit
                ax.text(x + T / 2, y + T / 2, str(s) if steps > 6 else f"step {s}",
                        ha="center", va="center", fontsize=7, zorder=5)
    # past the edges of A and B: the tiles hold zeros there
    for x, y, w, h in ((K, top + by * T, steps * T - K, T), (left + bx * T, K, T, steps * T - K),
                       (0, top + M, K, (by + 1) * T - M), (left + N, 0, (bx + 1) * T - N, K)):
        if w > 0 and h > 0:
            ax.add_patch(Rectangle((x, y), w, h, fill=False, hatch="///", edgecolor="#999999",
                                   lw=0, zorder=2))
    outline(0, top, K, M, f"A ({M} x {K})")
    outline(left, 0, N, K, f"B ({K} x {N})")
    outline(left, top, N, M, f"C ({M} x {N})")
    foot = warp_footprint(config)
    ax.text(0, top + grid_y * T + 0.05 * gap + 0.5,
            f"light blue: the grid's blocks (past C's edges their threads do nothing)\n"
            f"dark blue: block ({bx}, {by}); its warps shaded in turn, {foot.rows} row"
            f"{'s' if foot.rows > 1 else ''} of {foot.columns} each\n"
            f"orange: the {steps} tile{'s' if steps > 1 else ''} of A and of B it loads into "
            f"shared memory, one per step along K\nhatched: past the edge, filled with zeros",
            fontsize=8, va="top")
    ax.set_xlim(-1, left + max(N, grid_x * T) + 1)
    ax.set_ylim(top + max(M, grid_y * T) + 0.35 * gap + 3, -gap * 0.6)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(f"matmul_tiled: a grid of {grid_x} x {grid_y} blocks of {T} x {T} threads over "
                 f"C; each block walks K = {K} in {steps} step{'s' if steps > 1 else ''} of "
                 f"{T}", fontsize=10)
    return fig


class MatmulDashboard(Dashboard):
    """A tile-size slider, a GPU, a Run button; the rates of every kernel, the roofline and an
    explanation. Drive it from Python: ``d.tile_slider.value = 32; d.run_button.click()``."""

    WHERE_GPU = (
        "Kernels are measured on this machine's {gpu} at full size; the model chosen above is "
        "added as an estimate."
    )
    WHERE_SIM = (
        "No GPU here (simulator tier): the tiled kernel runs in the simulator at a small size "
        "to check its answer; the CPU is measured; GPU rates are estimates by gpulab's GPU "
        "model of the GPU chosen above, next to published measurements on real GPUs."
    )

    experiment: MatmulExperiment | None

    def __init__(self):
        import ipywidgets as widgets

        from gpulab.kernels.matmul import TILE_SIZES

        self.tier = device.tier()
        self.tile_slider = widgets.SelectionSlider(options=list(TILE_SIZES), value=16,
                                                   description="tile T")
        self.gpu_dropdown = self._gpu_dropdown()
        self._add_parts()
        self._lay_out(widgets.HBox([self.tile_slider, self.gpu_dropdown, self.run_button]))
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


__all__ = ["TRAFFIC_KERNELS", "WARP_SIZE", "MatmulDashboard", "MatmulExperiment", "WarpFootprint",
           "check_shape", "default_n", "kernel_estimate", "kernel_registers",
           "published_beside", "published_series_table", "tiling_plot", "traffic_table",
           "warp_footprint"]
