"""NumPy versions of every operation gpulab runs on the device.

They are the CPU side of every comparison (NumPy calls BLAS where it can, so the CPU is not
handicapped) and the oracle every kernel is tested against.
"""

from __future__ import annotations

import numpy as np


def multiply(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Elementwise product, as ``elementwise_multiply``."""
    return np.multiply(x, y)


def dot(x: np.ndarray, y: np.ndarray) -> np.floating:
    """x · y in the inputs' dtype (BLAS ``sdot``/``ddot``), as the dot kernels."""
    return np.dot(x, y)


def dot_exact(x: np.ndarray, y: np.ndarray) -> float:
    """x · y accumulated in float64 from the exact products: the yardstick for rounding error."""
    return float(np.dot(np.asarray(x, np.float64), np.asarray(y, np.float64)))


def dot_tolerance(x: np.ndarray, y: np.ndarray) -> float:
    """An absolute error bound for a dot product summed in x's dtype in any order.

    The classic bound for recursive summation is ``n * eps * sum|x_i y_i|``; tree and
    grid-stride orders do better, but the bound must hold for atomics in any order.
    """
    eps = np.finfo(np.asarray(x).dtype).eps
    magnitude = float(np.sum(np.abs(np.asarray(x, np.float64) * np.asarray(y, np.float64))))
    return len(x) * eps * magnitude + np.finfo(np.float64).tiny


def sum_chain(values) -> tuple[float, int]:
    """Add values one after another: each addition waits for the previous one.
    Returns the sum and the number of dependent steps (the chain's length)."""
    total, steps = 0.0, 0
    for v in values:
        total += v
        steps += 1
    return total, steps


def sum_tree(values) -> tuple[float, int]:
    """Add values pairwise in rounds; the additions of one round are independent.
    Returns the sum and the number of rounds (log2(n) rounded up)."""
    level, rounds = [float(v) for v in values], 0
    while len(level) > 1:
        level = [sum(level[i : i + 2]) for i in range(0, len(level), 2)]
        rounds += 1
    return (level[0] if level else 0.0), rounds


# --- chapter 02: moving data ------------------------------------------------------------------


def saxpy(a: float, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """a * x + y in x's dtype, as the ``saxpy`` kernel (one rounding per operation)."""
    x = np.asarray(x)
    return (x.dtype.type(a) * x + np.asarray(y)).astype(x.dtype, copy=False)


def copy(x: np.ndarray) -> np.ndarray:
    """A copy of x, as ``copy_coalesced``."""
    return np.array(x, copy=True)


def copy_strided(x: np.ndarray, stride: int) -> np.ndarray:
    """Every stride-th element of x (``x[::stride]``), as ``copy_strided``."""
    return np.ascontiguousarray(np.asarray(x)[::stride])


# --- chapter 03: matrix multiplication --------------------------------------------------------


def matmul(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """A @ B in the inputs' dtype (BLAS ``sgemm``/``dgemm``), as the matmul kernels."""
    return np.matmul(A, B)


def matmul_exact(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """A @ B accumulated in float64: the yardstick for rounding error."""
    return np.matmul(np.asarray(A, np.float64), np.asarray(B, np.float64))


def matmul_tolerance(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """An absolute error bound per element of A @ B summed in A's dtype in any order:
    ``K * eps * (|A| @ |B|)``, the dot-product bound of :func:`dot_tolerance` for every element."""
    eps = np.finfo(np.asarray(A).dtype).eps
    magnitude = np.matmul(np.abs(np.asarray(A, np.float64)), np.abs(np.asarray(B, np.float64)))
    return np.asarray(A).shape[1] * eps * magnitude + np.finfo(np.float64).tiny


# --- number formats (chapter 04) ---
# Emulations of gpulab.kernels.precision on the CPU, with NumPy and ml_dtypes. Every function
# rounds after every multiply and every add, in the order the kernel uses, so a kernel run in
# the simulator gives the very same bits, and the GPU-only bf16 kernels get an honest stand-in.
# "Accumulator" is the format the products and the running sums are kept in.

from gpulab import precision as _precision  # noqa: E402

ACCUMULATOR_FORMATS = ("fp64", "fp32", "fp16", "bf16")


def _accumulator(fmt) -> _precision.NumberFormat:
    fmt = _precision.get_format(fmt)
    if fmt.name not in ACCUMULATOR_FORMATS:
        raise ValueError(
            f"{fmt.name} is not an accumulator format here; use one of "
            f"{', '.join(ACCUMULATOR_FORMATS)}"
        )
    return fmt


def sum_in_format(values, accumulator) -> np.floating:
    """values[0] + values[1] + ... one after another, from 0, the running sum rounded to
    ``accumulator`` after every addition (``np.add.accumulate`` does not regroup)."""
    fmt = _accumulator(accumulator)
    stored = np.asarray(values).astype(fmt.dtype)
    if stored.size == 0:
        return fmt.dtype.type(0)
    return np.add.accumulate(stored.ravel())[-1]


def dot_chain_in_format(x, y, accumulator) -> np.floating:
    """x · y as one thread would do it alone: each product and each running sum rounded to
    ``accumulator``. The longest chain of roundings, so the worst order for error."""
    fmt = _accumulator(accumulator)
    products = np.asarray(x).astype(fmt.dtype) * np.asarray(y).astype(fmt.dtype)
    return sum_in_format(products, fmt)


def dot_partials_in_format(
    x, y, accumulator, blocks: int, threads_per_block: int, scale: float | None = None
) -> np.ndarray:
    """The per-block partial sums the grid-stride precision kernels write, bit for bit.

    Thread g of the G = blocks * threads_per_block threads adds the products of elements
    g, g + G, g + 2G, ... in a register; each block then adds its threads' sums by halving
    (slot t += slot t + stride); with ``scale`` (fp8) each partial is multiplied by it in
    float32. ``x`` and ``y`` hold the stored input values (fp16, bf16, or decoded fp8).
    """
    fmt = _accumulator(accumulator)
    total_threads = blocks * threads_per_block
    n = len(x)
    rows = max(-(-n // total_threads), 1)
    products = np.zeros(rows * total_threads, dtype=fmt.dtype)  # padding adds +0: no change
    products[:n] = np.asarray(x).astype(fmt.dtype) * np.asarray(y).astype(fmt.dtype)
    thread_sums = np.add.accumulate(products.reshape(rows, total_threads), axis=0)[-1]
    tree = thread_sums.reshape(blocks, threads_per_block).copy()
    stride = threads_per_block // 2
    while stride > 0:
        tree[:, :stride] = tree[:, :stride] + tree[:, stride : 2 * stride]
        stride //= 2
    partials = tree[:, 0].copy()
    if scale is not None:
        partials = (partials.astype(np.float32) * np.float32(scale)).astype(np.float32)
    return partials


def dot_grid_stride_in_format(
    x, y, accumulator, blocks: int, threads_per_block: int, scale: float | None = None
) -> np.floating:
    """The precision dot kernels' answer: :func:`dot_partials_in_format`, then the partials
    added one after another in the accumulator format (as the launch wrappers do)."""
    partials = dot_partials_in_format(x, y, accumulator, blocks, threads_per_block, scale)
    return sum_in_format(partials, "fp32" if scale is not None else accumulator)


def matmul_in_format(a, b, accumulator, scale: float | None = None) -> np.ndarray:
    """A @ B as the one-thread-per-output precision kernels compute it: for every output,
    acc = 0; acc += a[i, k] * b[k, j] for k = 0, 1, ..., each product and sum rounded to
    ``accumulator``; with ``scale`` (fp8) the result is multiplied by it in float32."""
    fmt = _accumulator(accumulator)
    a, b = np.asarray(a).astype(fmt.dtype), np.asarray(b).astype(fmt.dtype)
    acc = np.zeros((a.shape[0], b.shape[1]), dtype=fmt.dtype)
    for k in range(a.shape[1]):
        acc = acc + a[:, k : k + 1] * b[k : k + 1, :]
    if scale is not None:
        acc = (acc.astype(np.float32) * np.float32(scale)).astype(np.float32)
    return acc


def rounding_bound(x, y, accumulator, roundings: int) -> float:
    """A rigorous absolute error bound for a dot product whose every result went through at
    most ``roundings`` roundings in ``accumulator``: gamma_k * sum|x_i y_i| with
    gamma_k = k u / (1 - k u) and u the unit roundoff (Higham, 'Accuracy and Stability of
    Numerical Algorithms', 2nd ed., 2002, section 3.1). For the grid-stride kernels
    k = 1 (product) + chain length + log2(threads per block) + number of blocks."""
    u = _accumulator(accumulator).unit_roundoff
    ku = roundings * u
    magnitude = float(np.sum(np.abs(np.asarray(x, np.float64) * np.asarray(y, np.float64))))
    if ku >= 1:
        return float(np.inf)
    return ku / (1 - ku) * magnitude + np.finfo(np.float64).tiny


def grid_stride_roundings(n: int, blocks: int, threads_per_block: int) -> int:
    """How many roundings the longest path through a grid-stride dot kernel has: one for the
    product, one per add of the thread's chain, one per tree level, one per combined partial
    (and one for an fp8 scale)."""
    chain = -(-n // (blocks * threads_per_block))
    return 1 + chain + max(threads_per_block - 1, 0).bit_length() + blocks + 1
