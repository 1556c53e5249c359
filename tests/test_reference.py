"""gpulab.reference's emulations of the narrow-format kernels: one rounding after every
multiply and add, in the kernels' order."""

import gpulab  # noqa: F401  (must come before numba: it chooses the simulator or the GPU)

# isort: split

import numpy as np
import pytest

from gpulab import formats, reference

# --- reference emulations -------------------------------------------------------------------


def test_sum_in_format_rounds_after_every_add():
    quarters = np.full(4000, 0.25)
    assert reference.sum_in_format(quarters, "fp16") == 512  # 512 + 0.25 ties to 512
    assert reference.sum_in_format(quarters, "bf16") == 64
    assert reference.sum_in_format(quarters, "fp32") == 1000
    assert reference.sum_in_format([], "fp16") == 0
    with pytest.raises(ValueError, match="accumulator"):
        reference.sum_in_format([1.0], "fp8_e4m3")


def _threads_literally(x, y, accumulator, blocks, threads_per_block):
    """An independent, slow emulation of the grid-stride kernels: one Python loop per thread
    with NumPy scalars of the accumulator's type."""
    scalar = formats.get_format(accumulator).dtype.type
    total_threads = blocks * threads_per_block
    sums = []
    for g in range(total_threads):
        acc = scalar(0)
        for i in range(g, len(x), total_threads):
            acc = scalar(acc + scalar(scalar(x[i]) * scalar(y[i])))
        sums.append(acc)
    partials = []
    for b in range(blocks):
        slots = sums[b * threads_per_block:(b + 1) * threads_per_block]
        stride = threads_per_block // 2
        while stride:
            for t in range(stride):
                slots[t] = scalar(slots[t] + slots[t + stride])
            stride //= 2
        partials.append(slots[0])
    return np.array(partials)


@pytest.mark.parametrize("accumulator", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("n", [1, 37, 300])
def test_grid_stride_emulation_matches_a_literal_loop(accumulator, n):
    rng = np.random.default_rng(n)
    x, y = rng.random(n), rng.random(n)
    storage = "fp32" if accumulator == "fp32" else accumulator
    xs, ys = formats.to_format(x, storage), formats.to_format(y, storage)
    fast = reference.dot_partials_in_format(xs, ys, accumulator, 2, 8)
    slow = _threads_literally(xs, ys, accumulator, 2, 8)
    assert np.array_equal(fast.astype(np.float64), slow.astype(np.float64))


def test_matmul_emulation_matches_chains():
    rng = np.random.default_rng(5)
    a, b = rng.random((3, 50)).astype(np.float16), rng.random((50, 4)).astype(np.float16)
    got = reference.matmul_in_format(a, b, "fp16")
    for i in range(3):
        for j in range(4):
            assert got[i, j] == reference.dot_chain_in_format(a[i], b[:, j], "fp16")


def test_rounding_bound_holds_and_fp16_breaks_the_fp32_bound():
    rng = np.random.default_rng(6)
    x, y = rng.random(3000), rng.random(3000)
    xs, ys = formats.to_format(x, "fp16"), formats.to_format(y, "fp16")
    exact = reference.dot_exact(xs, ys)
    k = reference.grid_stride_roundings(3000, 1, 32)
    assert k == 1 + 94 + 5 + 1 + 1
    for accumulator in ("fp16", "fp32"):
        got = float(reference.dot_grid_stride_in_format(xs, ys, accumulator, 1, 32))
        assert abs(got - exact) <= reference.rounding_bound(xs, ys, accumulator, k)
    fp16_error = abs(float(reference.dot_grid_stride_in_format(xs, ys, "fp16", 1, 32)) - exact)
    assert fp16_error > reference.rounding_bound(xs, ys, "fp32", k)
    assert reference.rounding_bound(xs, ys, "fp16", 10**6) == np.inf
