"""Fused vs unfused bias + activation: the same arithmetic, half the memory traffic.

After a dense layer's matmul Z = X @ W, the bias and the activation can run

- **unfused**: ``bias_add`` writes Z + b to memory, ``apply_activation`` reads it back:
  per element 2 reads and 2 writes, 2 launches;
- **fused**: ``bias_activation`` keeps Z + b in a register: 1 read and 1 write, 1 launch.

Both are memory-bound (a few FLOPs per 8 bytes), so the fused one should take about half the
time. :func:`compare` puts numbers on it, each labelled with where it came from:

- bytes moved: counted (:func:`gpulab.kernels.dense.forward_traffic_bytes`);
- GPU time: measured with CUDA events in the ``gpu`` tier; otherwise estimated from a roofline
  model of a named GPU;
- CPU time: measured on this CPU, NumPy (``relu(Z + b)`` is two passes: NumPy cannot fuse)
  against one fused loop compiled by Numba for the CPU (``@njit``, one pass). The same rule,
  on another processor.

In every tier the GPU kernels also run once on a small problem and are compared with NumPy.
:func:`matmul_intensity_table` and :func:`bias_activation_estimates` put a small layer's
matmul against the GPU's ridge points and its bias + activation on the roofline (estimates).
:func:`fusion_plot` draws the result; :class:`FusionExperiment` is the logic and
:class:`FusionDashboard` the ipywidgets view.
"""

from __future__ import annotations

import functools

import matplotlib.pyplot as plt
import numpy as np

from gpulab import device, formats, hardware, recorded_runs, reference, timing
from gpulab.bench import model_check
from gpulab.experiments.dashboard import Dashboard
from gpulab.kernels import dense
from gpulab.plots import wrap_title
from gpulab.tables import Column, Table

PRECISION_OF_DTYPE = {"float32": "fp32", "float64": "fp64"}
CHECK_SHAPE = (13, 11)  # the simulator check: partial blocks in both directions
KERNELS = {"unfused": "bias_add + apply_activation", "fused": "bias_activation"}
CPU_METHODS = {"unfused": "NumPy, 2 passes", "fused": "Numba loop, 1 pass"}


@functools.lru_cache(maxsize=1)
def _fused_cpu():
    """relu(Z + b) in one pass over Z, compiled by Numba for the CPU on first use."""
    from numba import njit

    @njit(cache=False)
    def bias_relu_fused(Z, b, out):
        for r in range(Z.shape[0]):
            for c in range(Z.shape[1]):
                z = Z[r, c] + b[c]
                out[r, c] = z if z > 0 else 0
    return bias_relu_fused


def bias_relu_numpy(Z, b, out):
    """relu(Z + b) the NumPy way: ``Z + b`` is one pass (writing a temporary), ``maximum``
    a second (reading it back): the unfused traffic, on the CPU."""
    np.maximum(np.add(Z, b, out=out), 0, out=out)


def bias_relu_fused_cpu(Z, b, out):
    """relu(Z + b) in one pass (a Numba-compiled loop on one core, like NumPy)."""
    _fused_cpu()(Z, b, out)


def check_kernels(dtype=np.float32, activation: str = "relu", seed: int = 0) -> dict:
    """Run the fused and the unfused kernels (GPU or simulator) on a small Z and compare both
    with :func:`gpulab.reference.bias_activation`."""
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal(CHECK_SHAPE).astype(dtype)
    b = rng.standard_normal(CHECK_SHAPE[1]).astype(dtype)
    expected = reference.bias_activation(Z, b, activation)
    fused = dense.run_bias_activation(Z, b, activation)
    unfused = dense.run_apply_activation(dense.run_bias_add(Z, b), activation)
    scale = float(np.abs(expected).max())
    tol = (1e-5 if np.dtype(dtype) == np.float32 else 1e-12) * max(scale, 1.0)
    return {"shape": CHECK_SHAPE, "activation": activation,
            "fused_error": float(np.abs(fused - expected).max()),
            "unfused_error": float(np.abs(unfused - expected).max()),
            "ok": bool(np.abs(fused - expected).max() <= tol
                       and np.abs(unfused - expected).max() <= tol)}


def _estimate(gpu, M, N, fused, activation, dtype):
    """gpulab's GPU model of the pair (or the fused kernel): the bytes it asks for, and, for
    the unfused pair whose intermediate fits in L2, the bytes if L2 catches it (a range);
    launched as on a GPU (32 x 8 threads per block)."""
    gpu = hardware.get_gpu(gpu)
    itemsize = np.dtype(dtype).itemsize
    flops = M * N * (1 + dense.FLOPS_PER_ELEMENT[activation])
    blocks, threads = dense.grid_2d(M, N, (32, 8))
    launches = dense.launches(fused)
    return hardware.estimate_time(
        gpu, flops, dense.forward_traffic_bytes(M, N, fused, itemsize),
        PRECISION_OF_DTYPE[np.dtype(dtype).name], launches=launches,
        bytes_with_reuse=dense.forward_traffic_bytes_with_reuse(M, N, fused, itemsize,
                                                                gpu.l2_bytes),
        blocks=blocks[0] * blocks[1], threads_per_block=threads[0] * threads[1])


def _measure_gpu(M, N, fused, activation, dtype, seed):
    from numba import cuda

    rng = np.random.default_rng(seed)
    d_Z = cuda.to_device(rng.standard_normal((M, N)).astype(dtype))
    d_b = cuda.to_device(rng.standard_normal(N).astype(dtype))
    d_tmp, d_out = cuda.device_array((M, N), dtype), cuda.device_array((M, N), dtype)
    blocks, threads = dense.grid_2d(M, N)
    code = dense.activation_code(activation)

    def launch():
        if fused:
            dense.bias_activation[blocks, threads](d_Z, d_b, code, d_out)
        else:
            dense.bias_add[blocks, threads](d_Z, d_b, d_tmp)
            dense.apply_activation[blocks, threads](d_tmp, code, d_out)

    itemsize = np.dtype(dtype).itemsize
    return timing.time_gpu(launch, name="fused" if fused else "unfused", n=M * N,
                          bytes_moved=dense.forward_traffic_bytes(M, N, fused, itemsize))


def compare(batch_size: int = 4096, width: int = 1024, activation: str = "relu",
            gpu: str = hardware.COURSE_GPU, dtype=np.float32, measure_cpu: bool = True,
            seed: int = 0) -> dict:
    """Fused against unfused bias + activation on a batch_size x width matmul output.

    Returns ``{"rows": [...], "bytes": {...}, "check": {...}, ...}``; each row is
    ``{"what", "variant", "seconds", "label"}`` and its label says where the number came from.
    """
    dtype = np.dtype(dtype)
    if dtype.name not in PRECISION_OF_DTYPE:
        raise ValueError(f"dtype must be float32 or float64, not {dtype}")
    for what, value in (("batch_size", batch_size), ("width", width)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{what} must be a positive whole number, not {value!r}")
    spec = hardware.get_gpu(gpu)
    M, N = int(batch_size), int(width)
    rows = []
    for fused in (False, True):
        variant = "fused" if fused else "unfused"
        estimate = _estimate(spec, M, N, fused, activation, dtype)
        rows.append({"what": "GPU", "variant": variant, "how": KERNELS[variant],
                     "seconds": estimate.time_s, "seconds_with_reuse": estimate.time_range_s[0],
                     "label": estimate.label, "kind": estimate.kind,
                     "group": f"estimated by gpulab's GPU model of the {spec.name}"})
        if device.tier() == "gpu":
            measured = _measure_gpu(M, N, fused, activation, dtype, seed)
            rows.append({"what": "GPU", "variant": variant, "how": KERNELS[variant],
                         "seconds": measured.median_s, "label": measured.label})
    if measure_cpu and activation == "relu":
        rng = np.random.default_rng(seed)
        Z = rng.standard_normal((M, N)).astype(dtype)
        b = rng.standard_normal(N).astype(dtype)
        out = np.empty_like(Z)
        for variant, function in (("unfused", bias_relu_numpy), ("fused", bias_relu_fused_cpu)):
            measured = timing.time_cpu(function, Z, b, out, repeats=5, name=variant)
            np.testing.assert_allclose(out, reference.bias_activation(Z, b, "relu"), rtol=1e-6)
            rows.append({"what": "CPU", "variant": variant, "how": CPU_METHODS[variant],
                         "seconds": measured.median_s, "label": measured.label})
    itemsize = dtype.itemsize
    return {
        "rows": rows,
        "bytes": {variant: dense.forward_traffic_bytes(M, N, variant == "fused", itemsize)
                  for variant in ("unfused", "fused")},
        "shape": (M, N), "activation": activation, "gpu": spec.name, "dtype": dtype.name,
        "l2_bytes": spec.l2_bytes,
        "tier": device.tier(), "check": check_kernels(dtype, activation, seed),
    }


# The datasheet peak each precision's ridge point uses: fp32 runs on the CUDA cores, bf16 on the
# tensor cores.
RIDGE_PRECISIONS = (("fp32", "CUDA cores"), ("bf16", "tensor cores"))


def matmul_intensity_table(batch: int, n_in: int, n_out: int, gpu=hardware.COURSE_GPU) -> Table:
    """A dense layer's matmul, (batch x n_in) @ (n_in x n_out), against ``gpu``'s ridge points.

    Reads the FLOPs (2 per multiply-add, counted), the least bytes any matmul moves (X and W
    read once, Z written once: :func:`gpulab.kernels.matmul.minimum_bytes`), and from
    :mod:`gpulab.hardware` the GPU's dense peaks and memory bandwidth. Returns a table: per
    precision in :data:`RIDGE_PRECISIONS` (fp32 on the CUDA cores, bf16 on the tensor cores)
    the FLOPs, the bytes, their FLOP per byte, the peak, the bandwidth, the ridge point (peak /
    bandwidth) and whether the matmul is memory- or compute-bound there; then the datasheet
    source of the tensor-core peak."""
    from gpulab.kernels.matmul import minimum_bytes

    spec = hardware.get_gpu(gpu)
    flops = 2 * batch * n_in * n_out
    rows = []
    for precision, units in RIDGE_PRECISIONS:
        nbytes = minimum_bytes(batch, n_out, n_in,
                               int(formats.get_format(precision).bytes_per_value))
        intensity, ridge = flops / nbytes, hardware.ridge_point(spec, precision)
        rows.append([precision, flops / 1e6, nbytes / 1e3, intensity, units,
                     spec.peak_flops_for(precision) / 1e12,
                     spec.memory_bandwidth_bytes_per_s / 1e12, ridge,
                     f"{'memory' if intensity < ridge else 'compute'}-bound"])
    return Table([Column("precision"), Column("matmul", "MFLOP", "{:.2f}"),
                  Column("bytes", "kB", "{:.0f}"), Column("intensity", "FLOP/byte", "{:.0f}"),
                  Column("on the"), Column("peak", "TFLOP/s"),
                  Column("bandwidth", "TB/s"), Column("ridge point", "FLOP/byte", "{:.0f}"),
                  Column("bound")], rows,
                 title=f"{batch} x {n_in} @ {n_in} x {n_out} on the {spec.name}",
                 notes=[f"source: {spec.sources['peak_flops.bf16']}"])


def bias_activation_estimates(batch: int, width: int, gpu=hardware.COURSE_GPU,
                              activation: str = "relu") -> str:
    """Roofline estimates of bias + ``activation`` on a batch x width float32 matmul output,
    unfused (``bias_add`` then ``apply_activation``) and fused (``bias_activation``): each
    :func:`gpulab.hardware.estimate_time` for ``gpu`` (an estimate with its band) with its
    compute, memory and launch lines, from the counted FLOPs
    (:data:`gpulab.kernels.dense.FLOPS_PER_ELEMENT`), bytes
    (:func:`gpulab.kernels.dense.forward_traffic_bytes`) and launches. Returns text."""
    spec = hardware.get_gpu(gpu)
    shown = {"relu": "ReLU", "gelu": "GELU"}.get(activation, activation)
    return "\n".join(f"\nbias + {shown}, {'fused' if fused else 'unfused'}: "
                     f"{_estimate(spec, batch, width, fused, activation, np.float32)}"
                     for fused in (False, True))


def _l2_note(result: dict) -> str:
    """Whether the unfused pair's intermediate, Z + b, fits in the GPU's L2 cache: if it does,
    the second kernel can read it from L2, and the roofline's ratio (every byte counted as
    device-memory traffic) is an upper bound on what fusion saves."""
    M, N = result["shape"]
    intermediate = M * N * np.dtype(result["dtype"]).itemsize
    l2 = result.get("l2_bytes")
    size = f"The unfused pair's intermediate, Z + b, is {intermediate / 2**20:,.1f} MiB"
    if l2 is None:
        return (f"{size}; the {result['gpu']}'s L2 size is not published. If Z + b fits in L2, "
                "the second kernel reads it from there, and the GPU saves less than the bytes "
                "say: their ratio is an upper bound.")
    if intermediate <= l2:
        return (f"{size}, and the {result['gpu']}'s L2 cache holds {l2 / 2**20:,.0f} MiB: the "
                "second kernel can read much of it from L2 instead of device memory, so the "
                "ratio of bytes is an upper bound on what fusion saves on the GPU.")
    return (f"{size}, more than the {result['gpu']}'s L2 cache ({l2 / 2**20:,.0f} MiB): it "
            "goes out to device memory and back, as the roofline counts it.")


def explain(result: dict) -> str:
    """The comparison in words, every number with its origin."""
    M, N = result["shape"]
    unfused, fused = result["bytes"]["unfused"], result["bytes"]["fused"]
    lines = [f"Z is {M:,} x {N:,} {result['dtype']}: the unfused pair moves {unfused / 1e6:,.1f} "
             f"MB, the fused kernel {fused / 1e6:,.1f} MB ({unfused / fused:.2f}x less; counted)."]
    lines.append(_l2_note(result))
    groups: dict[tuple[str, str], dict] = {}
    for row in result["rows"]:
        groups.setdefault((row["what"], row.get("group", row["label"])), {})[row["variant"]] = row
    for (what, label), pair in groups.items():
        if len(pair) != 2:
            continue
        u, f = pair["unfused"], pair["fused"]
        if "seconds_with_reuse" in u and u["seconds_with_reuse"] < u["seconds"] * 0.999:
            lines.append(
                f"{what}: {u['how']} {u['seconds_with_reuse'] * 1e3:.3g} ms (L2 catches Z + b) "
                f"to {u['seconds'] * 1e3:.3g} ms (it does not), {f['how']} "
                f"{f['seconds'] * 1e3:.3g} ms: fusion saves "
                f"{u['seconds_with_reuse'] / f['seconds']:.2f}x to "
                f"{u['seconds'] / f['seconds']:.2f}x, {label} (promised band for "
                f"{f['kind']} work: {hardware.band_text(f['kind'])}).")
            continue
        band = (f" (promised band for {f['kind']} work: {hardware.band_text(f['kind'])})"
                if "kind" in f else "")
        lines.append(f"{what}: {u['how']} {u['seconds'] * 1e3:.3g} ms, {f['how']} "
                     f"{f['seconds'] * 1e3:.3g} ms ({u['seconds'] / f['seconds']:.2f}x), "
                     f"{label}{band}.")
    spec = hardware.get_gpu(result["gpu"])
    lines.append(model_check.beside(
        f"the fused kernel moving {fused / 1e6:,.1f} MB, modelled on the {spec.name}",
        "stream", spec.key, fused, size_key="bytes"))
    check = result["check"]
    lines.append(f"Kernels checked against NumPy on a {check['shape'][0]} x {check['shape'][1]} "
                 f"problem ({device.tier()} tier): {'agree' if check['ok'] else 'DISAGREE'} "
                 f"(largest difference {max(check['fused_error'], check['unfused_error']):.1e}).")
    if result.get("recorded"):
        lines.append(str(result["recorded"]))
    return "\n".join(lines)


def recorded_comparison(run=None):
    """The recorded run's fused and unfused timings against the roofline model of the same GPU
    (a :class:`~gpulab.recorded_runs.ComparisonTable`), or None when no run ships."""
    found = recorded_runs.recorded_series("fusion", run)
    if found is None or not isinstance(found[1], dict):
        return None
    run, recorded = found
    M, N = recorded["shape"]
    dtype = np.dtype(recorded.get("dtype", "float32"))
    spec = hardware.get_gpu(run.gpu_key)
    rows = []
    for row in recorded["rows"]:
        if row["what"] == "GPU" and "measured on" in row["label"]:
            estimate = _estimate(spec, M, N, row["variant"] == "fused",
                                 recorded["activation"], dtype)
            rows.append((f"{row['variant']} ({row['how']}), {M:,} x {N:,}", estimate.time_s,
                         row["seconds"]))
    if not rows:
        return None
    return recorded_runs.comparison_table(
        "Fusion measured on a real GPU, against the model", run, rows)




def fusion_plot(result: dict):
    """Left: bytes moved per variant (counted). Right: time per variant and processor, one bar
    group per origin (measured / estimated), labelled."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
    variants = ["unfused", "fused"]
    megabytes = [result["bytes"][v] / 1e6 for v in variants]
    left.bar(variants, megabytes, color=["#e69f00", "#0072b2"])
    for x, value in enumerate(megabytes):
        left.text(x, value, f"{value:,.1f} MB", ha="center", va="bottom", fontsize=9)
    M, N = result["shape"]
    left.set_title(f"device-memory traffic, {M:,} x {N:,} {result['dtype']} (counted)",
                   fontsize=10)
    left.set_ylabel("MB moved")
    groups: dict[tuple[str, str], dict] = {}
    for row in result["rows"]:
        groups.setdefault((row["what"], row["label"]), {})[row["variant"]] = row["seconds"]
    width = 0.38
    names = []
    for k, ((what, label), times) in enumerate(groups.items()):
        for j, variant in enumerate(variants):
            if variant in times:
                right.bar(k + (j - 0.5) * width, times[variant] * 1e3, width,
                          color="#e69f00" if variant == "unfused" else "#0072b2",
                          label=variant if k == 0 else None)
        names.append(wrap_title(f"{what}: {label}", 34))
    right.set_xticks(range(len(names)), names, fontsize=7.5)
    right.set_yscale("log")
    right.set_ylabel("time (ms, log scale)")
    right.set_title(f"bias + {result['activation']}: time per call", fontsize=10)
    right.legend(fontsize=8)
    return fig


class FusionExperiment:
    """Fused against unfused bias + activation on a batch_size x width layer output."""

    def __init__(self, batch_size: int = 4096, width: int = 1024, activation: str = "relu",
                 gpu: str = hardware.COURSE_GPU, dtype=np.float32):
        self.batch_size, self.width = int(batch_size), int(width)
        self.activation, self.gpu, self.dtype = activation, gpu, np.dtype(dtype)
        self.last_result: dict | None = None

    def run(self) -> dict:
        self.last_result = compare(self.batch_size, self.width, self.activation,
                                   self.gpu, self.dtype)
        self.last_result["recorded"] = recorded_comparison()
        return self.last_result

    def speedup(self, what: str = "GPU") -> float:
        """Unfused time / fused time for the first pair of ``what`` ("GPU" or "CPU") rows."""
        result = self.last_result if self.last_result is not None else self.run()
        pairs: dict[str, dict] = {}
        for row in result["rows"]:
            if row["what"] == what:
                pairs.setdefault(row["label"], {})[row["variant"]] = row["seconds"]
        for times in pairs.values():
            if len(times) == 2:
                return times["unfused"] / times["fused"]
        raise KeyError(f"no {what} rows (the CPU is measured for relu only)")

    def explain(self) -> str:
        return explain(self.last_result if self.last_result is not None else self.run())


class FusionDashboard(Dashboard):
    """Layer size, activation, GPU and dtype; a Run button; the figure and the explanation."""

    WHERE_GPU = (
        "CPU times are measured here (for relu); GPU times are measured on this machine's {gpu} "
        "and estimated for the model chosen."
    )
    WHERE_SIM = (
        "CPU times are measured here (for relu); GPU times are roofline estimates (no GPU: "
        "simulator tier)."
    )

    # Run takes ~18 s in the simulator (the kernels run and are timed): the status says it is
    # running, then again where the numbers come from (a failure shows there too).
    reports_status = True
    running_text = ("running… the kernels are launched and timed (about 20 s in the "
                    "simulator, a few on a GPU)")
    experiment: FusionExperiment | None

    def __init__(self):
        import ipywidgets as widgets

        style = {"description_width": "initial"}
        self.batch_dropdown = widgets.Dropdown(options=[64, 256, 1024, 4096, 16384],
                                               value=4096, description="batch", style=style)
        self.width_dropdown = widgets.Dropdown(options=[128, 512, 1024, 4096], value=1024,
                                               description="units", style=style)
        self.activation_dropdown = widgets.Dropdown(
            options=["relu", "gelu", "tanh", "sigmoid"], value="relu",
            description="activation", style=style)
        self.gpu_dropdown = self._gpu_dropdown()
        self.dtype_toggle = widgets.ToggleButtons(options=["float32", "float64"],
                                                  value="float32", description="dtype")
        self._add_parts()
        self._lay_out(
            widgets.HBox([self.batch_dropdown, self.width_dropdown, self.activation_dropdown]),
            widgets.HBox([self.gpu_dropdown, self.dtype_toggle, self.run_button]))

    def make_experiment(self) -> FusionExperiment:
        return FusionExperiment(
            self.batch_dropdown.value, self.width_dropdown.value,
            self.activation_dropdown.value, self.gpu_dropdown.value, self.dtype_toggle.value)

    def make_figure(self, result: dict):
        return fusion_plot(result)


__all__ = ["FusionDashboard", "FusionExperiment", "bias_activation_estimates",
           "bias_relu_fused_cpu", "bias_relu_numpy", "check_kernels", "compare", "explain",
           "fusion_plot", "matmul_intensity_table"]
