"""One :class:`Case` per benchmarked kernel at one size: its inputs, how to launch it on
device arrays, its NumPy baseline, its counts and how to check its answer.

The ``gpulab bench`` suite (:mod:`gpulab.bench.suite`) and the chapter dashboards
(:mod:`gpulab.experiments.bandwidth`, :mod:`gpulab.experiments.matmul`) build their runs from
these cases, so a kernel is launched, counted and checked in exactly one way everywhere.

- :func:`memory_case` — saxpy, coalesced and strided copies (chapter 02);
- :func:`matmul_case` — naive, tiled and register-blocked matmul (chapter 03);
- :func:`run_and_check` — run a case for real (GPU or simulator) and compare with
  :mod:`gpulab.reference`: exact for saxpy and copies, within K·eps·(|A| @ |B|) for matmul.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gpulab import device, reference

MEMORY_KERNELS = ("saxpy", "copy_coalesced", "copy_strided")
MATMUL_KERNELS = ("matmul_naive", "matmul_tiled", "matmul_register_blocked")
KERNELS = MEMORY_KERNELS + MATMUL_KERNELS
DTYPE = np.float32  # the suite is fp32, like the chapters' headline numbers
PRECISION_OF_DTYPE = {"float32": "fp32", "float64": "fp64"}
DEFAULT_STRIDE = 8  # float32: 8 x 4 B = 32 B apart, one sector per thread
DEFAULT_TILE = 16
SAXPY_A = 2.5  # the scalar a of every saxpy gpulab benchmarks

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
    """The suite's problem sizes for ``tier`` (default: this process's)."""
    return SIZES["gpu" if (tier or device.tier()) == "gpu" else "sim"]


@dataclass
class Case:
    """One kernel at one size.

    ``make_inputs(rng)`` returns host arrays, the output last; ``launcher(*device_arrays)``
    returns a zero-argument function that only enqueues the kernel (no copies, no checks), so
    timing it times the kernel; ``cpu_baseline(*host_arrays)`` returns a zero-argument NumPy
    function doing the same work; ``expected(*host_arrays)`` is the reference answer.
    """

    kernel: str  # the label in tables, e.g. "matmul_tiled (T=16)"
    key: str  # the kernel's registry name, e.g. "matmul_tiled"
    group: str  # "memory" or "matmul"
    size: str
    n: int
    dtype: np.dtype
    flops: float
    bytes_moved: float  # useful bytes (what a rate is computed from)
    model_bytes: float  # bytes the roofline model charges (fetched sectors, traffic model)
    transfer_bytes: float  # inputs in + result out over the host link
    make_inputs: Callable[[np.random.Generator], tuple]
    launcher: Callable[..., Callable[[], None]]
    cpu_baseline: Callable[..., Callable[[], object]]
    baseline_name: str
    note: str | None = None
    stride: int = 1  # copy_strided's stride

    @property
    def precision(self) -> str:
        return PRECISION_OF_DTYPE[np.dtype(self.dtype).name]

    def check(self, got, inputs) -> tuple[bool, str]:
        """Compare ``got`` with gpulab.reference for these host ``inputs``: exact to a few
        ulps for saxpy and copies (one rounding per operation), within the
        K·eps·(|A| @ |B|) bound for matmul. Returns (ok, what was compared)."""
        got64 = np.asarray(got, np.float64)
        if self.group == "matmul":
            A, B = inputs[0], inputs[1]
            error = np.abs(got64 - reference.matmul_exact(A, B))
            ok = bool(np.all(error <= reference.matmul_tolerance(A, B)))
            return ok, (f"{A.shape[0]}x{A.shape[1]} @ {B.shape[0]}x{B.shape[1]}, "
                        f"max |error| {error.max():.2g}")
        expected = np.asarray(self.expected(*inputs), np.float64)
        error = float(np.max(np.abs(got64 - expected))) if expected.size else 0.0
        eps = np.finfo(self.dtype).eps
        ok = got64.shape == expected.shape and bool(np.allclose(got64, expected, rtol=4 * eps,
                                                                atol=0))
        return ok, f"n = {len(inputs[0]):,}, max |error| {error:.2g}"

    def expected(self, *inputs):
        """The reference answer for host ``inputs`` (output array last, ignored)."""
        if self.key == "saxpy":
            return reference.saxpy(SAXPY_A, inputs[0], inputs[1])
        if self.key == "copy_coalesced":
            return reference.copy(inputs[0])
        if self.key == "copy_strided":
            return reference.copy_strided(inputs[0], self.stride)
        return reference.matmul(inputs[0], inputs[1])


def _threads(count: int):
    from gpulab.kernels import memory
    from gpulab.kernels.launch import one_thread_per_element

    config = one_thread_per_element(count, memory.DEFAULT_THREADS_PER_BLOCK)
    return config.blocks, config.threads_per_block


def memory_case(kernel: str, n: int, stride: int = DEFAULT_STRIDE, dtype=DTYPE) -> Case:
    """saxpy (out = a·x + y), copy_coalesced or copy_strided (out = x[::stride]) over n
    elements of ``dtype`` (float32 or float64), one thread per output element."""
    from gpulab import memory_model
    from gpulab.kernels import memory

    if kernel not in MEMORY_KERNELS:
        raise ValueError(f"kernel must be one of {', '.join(MEMORY_KERNELS)}, not {kernel!r}")
    dtype = _check_dtype(dtype)
    n = _check_size("n", n)
    itemsize = dtype.itemsize
    a = dtype.type(SAXPY_A)
    if kernel == "saxpy":
        grid = _threads(n)
        return Case(
            "saxpy", "saxpy", "memory", f"n = {n:,}", n, dtype, **memory.saxpy_counts(n, itemsize),
            model_bytes=3 * n * itemsize, transfer_bytes=3 * n * itemsize,
            make_inputs=lambda rng: (rng.random(n, dtype=dtype), rng.random(n, dtype=dtype),
                                     np.empty(n, dtype)),
            launcher=lambda x, y, out: (lambda: memory.saxpy[grid](a, x, y, out)),
            cpu_baseline=lambda x, y, out: (lambda: np.add(np.multiply(x, a, out=out), y,
                                                           out=out)),
            baseline_name="NumPy a*x + y",
        )
    if kernel == "copy_coalesced":
        grid = _threads(n)
        return Case(
            "copy_coalesced", "copy_coalesced", "memory", f"n = {n:,}", n, dtype,
            **memory.copy_counts(n, itemsize),
            model_bytes=2 * n * itemsize, transfer_bytes=2 * n * itemsize,
            make_inputs=lambda rng: (rng.random(n, dtype=dtype), np.empty(n, dtype)),
            launcher=lambda x, out: (lambda: memory.copy_coalesced[grid](x, out)),
            cpu_baseline=lambda x, out: (lambda: np.copyto(out, x)),
            baseline_name="NumPy copy",
        )
    stride = memory.check_stride(stride)
    n_out = memory.strided_length(n, stride)
    grid = _threads(n_out)
    access = memory_model.copy_access(stride, itemsize=itemsize)
    fetched_per_element = access.bytes_fetched / (access.n_requests * memory_model.WARP_SIZE)
    return Case(
        "copy_strided", "copy_strided", "memory", f"n = {n:,}, stride {stride}", n, dtype,
        **memory.copy_counts(n_out, itemsize),
        model_bytes=n_out * (fetched_per_element + itemsize),
        transfer_bytes=(n + n_out) * itemsize,
        make_inputs=lambda rng: (rng.random(n, dtype=dtype), np.empty(n_out, dtype)),
        launcher=lambda x, out: (lambda: memory.copy_strided[grid](x, out, stride)),
        cpu_baseline=lambda x, out: (lambda: np.copyto(out, x[::stride])),
        baseline_name=f"NumPy x[::{stride}] copy",
        note=f"reads {access.sectors_per_request:g} sectors per warp request "
             f"(coalesced: {access.ideal_sectors_per_request:g})",
        stride=stride,
    )


def matmul_case(kernel: str, n: int, tile: int = DEFAULT_TILE, dtype=DTYPE,
                shape: tuple[int, int, int] | None = None) -> Case:
    """C = A @ B with ``kernel`` (matmul_naive, matmul_tiled with ``tile``, or
    matmul_register_blocked) at M = N = K = n, or at ``shape`` = (M, N, K)."""
    from gpulab.kernels import matmul as mm

    if kernel not in MATMUL_KERNELS:
        raise ValueError(f"kernel must be one of {', '.join(MATMUL_KERNELS)}, not {kernel!r}")
    dtype = _check_dtype(dtype)
    M, N, K = shape or (_check_size("n", n),) * 3
    method = kernel.removeprefix("matmul_")
    method_tile = mm.check_tile(tile) if method == "tiled" else None
    config = mm.launch_config(M, N, K, method, method_tile)
    itemsize = dtype.itemsize
    half = dtype.type(0.5)
    label = f"{kernel} (T={method_tile})" if method == "tiled" else kernel
    size = f"M = N = K = {M:,}" if M == N == K else f"M, N, K = {M}, {N}, {K}"
    return Case(
        label, kernel, "matmul", size, M, dtype, flops=mm.flops(M, N, K),
        bytes_moved=mm.minimum_bytes(M, N, K, itemsize),
        model_bytes=mm.traffic_bytes(M, N, K, method, method_tile, itemsize),
        transfer_bytes=(M * K + K * N + M * N) * itemsize,
        make_inputs=lambda rng: (rng.random((M, K), dtype=dtype) - half,
                                 rng.random((K, N), dtype=dtype) - half,
                                 np.empty((M, N), dtype)),
        launcher=lambda A, B, C: (lambda: mm.launch(config, A, B, C)),
        cpu_baseline=lambda A, B, C: (lambda: np.matmul(A, B, out=C)),
        baseline_name="NumPy matmul (BLAS)",
    )


def check_case(kernel: str, stride: int = DEFAULT_STRIDE, tile: int = DEFAULT_TILE,
               dtype=DTYPE) -> Case:
    """The small case the simulator runs to check ``kernel``: sizes that are not multiples
    of any block or tile (n = 1000; M, N, K = 17, 23, 9)."""
    if kernel in MEMORY_KERNELS:
        return memory_case(kernel, CHECK_N, stride, dtype)
    return matmul_case(kernel, 0, tile, dtype, shape=CHECK_MATMUL)


def run_and_check(case: Case, inputs=None, seed: int = 0) -> tuple[bool, str]:
    """Copy ``inputs`` (made from ``seed`` when not given) to the device, launch the case's
    kernel, copy the result back and compare with the reference. Runs on the GPU in the
    ``gpu`` tier and in Numba's CUDA simulator in the ``sim`` tier: a check, never a timing.
    Returns (ok, a one-line verdict naming where it ran)."""
    from numba import cuda

    if inputs is None:
        inputs = case.make_inputs(np.random.default_rng(seed))
    d_arrays = [cuda.to_device(a) for a in inputs]
    case.launcher(*d_arrays)()
    cuda.synchronize()
    got = d_arrays[-1].copy_to_host()
    ok, text = case.check(got, inputs)
    where = "simulator" if device.tier() != "gpu" else (device.PROBE.device_name or "GPU")
    mark = "ok" if ok else "WRONG"
    return ok, f"{mark} vs NumPy ({where}, {text}{'' if ok else ', outside the bound'})"


def _check_dtype(dtype) -> np.dtype:
    dtype = np.dtype(dtype)
    if dtype.name not in PRECISION_OF_DTYPE:
        raise ValueError(f"dtype must be float32 or float64, not {dtype.name}")
    return dtype


def _check_size(what: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{what} must be a whole number >= 1, not {value!r}")
    return int(value)
