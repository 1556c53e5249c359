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
"""

from __future__ import annotations

import functools

import numpy as np

from gpulab import bench, device, hardware, reference
from gpulab.kernels import dense

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
    unfused = dense.run_activation(dense.run_bias_add(Z, b), activation)
    scale = float(np.abs(expected).max())
    tol = (1e-5 if np.dtype(dtype) == np.float32 else 1e-12) * max(scale, 1.0)
    return {"shape": CHECK_SHAPE, "activation": activation,
            "fused_error": float(np.abs(fused - expected).max()),
            "unfused_error": float(np.abs(unfused - expected).max()),
            "ok": bool(np.abs(fused - expected).max() <= tol
                       and np.abs(unfused - expected).max() <= tol)}


def _estimate(gpu, M, N, fused, activation, dtype):
    itemsize = np.dtype(dtype).itemsize
    flops = M * N * (1 + dense.FLOPS_PER_ELEMENT[activation])
    return hardware.estimate_time(gpu, flops, dense.forward_traffic_bytes(M, N, fused, itemsize),
                                  PRECISION_OF_DTYPE[np.dtype(dtype).name],
                                  launches=dense.launches(fused))


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
    return bench.time_gpu(launch, name="fused" if fused else "unfused", n=M * N,
                          bytes_moved=dense.forward_traffic_bytes(M, N, fused, itemsize))


def compare(batch_size: int = 4096, width: int = 1024, activation: str = "relu",
            gpu: str = "H100-SXM", dtype=np.float32, measure_cpu: bool = True,
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
                     "seconds": estimate.time_s, "label": estimate.label})
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
            measured = bench.time_cpu(function, Z, b, out, repeats=5, name=variant)
            np.testing.assert_allclose(out, reference.bias_activation(Z, b, "relu"), rtol=1e-6)
            rows.append({"what": "CPU", "variant": variant, "how": CPU_METHODS[variant],
                         "seconds": measured.median_s, "label": measured.label})
    itemsize = dtype.itemsize
    return {
        "rows": rows,
        "bytes": {variant: dense.forward_traffic_bytes(M, N, variant == "fused", itemsize)
                  for variant in ("unfused", "fused")},
        "shape": (M, N), "activation": activation, "gpu": spec.name, "dtype": dtype.name,
        "tier": device.tier(), "check": check_kernels(dtype, activation, seed),
    }


def explain(result: dict) -> str:
    """The comparison in words, every number with its origin."""
    M, N = result["shape"]
    unfused, fused = result["bytes"]["unfused"], result["bytes"]["fused"]
    lines = [f"Z is {M:,} x {N:,} {result['dtype']}: the unfused pair moves {unfused / 1e6:,.1f} "
             f"MB, the fused kernel {fused / 1e6:,.1f} MB ({unfused / fused:.2f}x less; counted)."]
    groups: dict[tuple[str, str], dict] = {}
    for row in result["rows"]:
        groups.setdefault((row["what"], row["label"]), {})[row["variant"]] = row
    for (what, label), pair in groups.items():
        if len(pair) == 2:
            u, f = pair["unfused"], pair["fused"]
            lines.append(f"{what}: {u['how']} {u['seconds'] * 1e3:.3g} ms, {f['how']} "
                         f"{f['seconds'] * 1e3:.3g} ms ({u['seconds'] / f['seconds']:.2f}x), "
                         f"{label}.")
    check = result["check"]
    lines.append(f"Kernels checked against NumPy on a {check['shape'][0]} x {check['shape'][1]} "
                 f"problem ({device.tier()} tier): {'agree' if check['ok'] else 'DISAGREE'} "
                 f"(largest difference {max(check['fused_error'], check['unfused_error']):.1e}).")
    return "\n".join(lines)


__all__ = ["bias_relu_fused_cpu", "bias_relu_numpy", "check_kernels", "compare", "explain"]
