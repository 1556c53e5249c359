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
