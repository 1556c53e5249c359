"""gpulab.reference's emulations of the narrow-format kernels: one rounding after every
multiply and add, in the kernels' order."""

import gpulab  # noqa: F401  (must come before numba: it chooses the simulator or the GPU)

# isort: split

import numpy as np
import pytest

from gpulab import formats, reference

# (sign, exponent, mantissa bits, bias, max, smallest normal, smallest subnormal, epsilon,
#  bytes per value, has infinity, has NaN)
PUBLISHED = {
    # IEEE 754-2019, Table 3.5: binary64 p = 53, emax = 1023
    "fp64": (1, 11, 52, 1023, (2 - 2**-52) * 2.0**1023, 2.0**-1022, 2.0**-1074, 2.0**-52, 8,
             True, True),
    # binary32: p = 24, emax = 127
    "fp32": (1, 8, 23, 127, (2 - 2**-23) * 2.0**127, 2.0**-126, 2.0**-149, 2.0**-23, 4,
             True, True),
    # TF32 (NVIDIA A100 whitepaper): 8 exponent, 10 mantissa bits, fp32's range, stored as fp32
    "tf32": (1, 8, 10, 127, (2 - 2**-10) * 2.0**127, 2.0**-126, 2.0**-136, 2.0**-10, 4,
             True, True),
    # binary16: p = 11, emax = 15; max 65504
    "fp16": (1, 5, 10, 15, 65504.0, 2.0**-14, 2.0**-24, 2.0**-10, 2, True, True),
    # bfloat16: binary32's exponent, 7 stored mantissa bits
    "bf16": (1, 8, 7, 127, (2 - 2**-7) * 2.0**127, 2.0**-126, 2.0**-133, 2.0**-7, 2,
             True, True),
    # OCP OFP8 v1.0, Table 1: E4M3 max S.1111.110 = 448, no infinities
    "fp8_e4m3": (1, 4, 3, 7, 448.0, 2.0**-6, 2.0**-9, 2.0**-3, 1, False, True),
    # E5M2 max S.11110.11 = 57344, IEEE-like infinities and NaN
    "fp8_e5m2": (1, 5, 2, 15, 57344.0, 2.0**-14, 2.0**-16, 2.0**-2, 1, True, True),
    # OCP MX v1.0, 5.3.3: FP4 E2M1 max 6.0, min normal 1.0, min subnormal 0.5, no inf/NaN
    "fp4_e2m1": (1, 2, 1, 1, 6.0, 1.0, 0.5, 0.5, 0.5, False, False),
}


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
