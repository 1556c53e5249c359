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
