"""The fused amax / non-finite kernel (chapter 10) against gpulab.nn.mixed_precision.amax and
a NumPy count, in the tier this process runs: sizes not multiples of the grid, NaN and inf
anywhere, the largest magnitude negative."""

import numpy as np
import pytest

from gpulab.kernels.amax import amax_and_nonfinite, amax_nonfinite
from gpulab.kernels.arrays import InputError
from gpulab.nn.mixed_precision import amax


def expected(x):
    return amax(x), int(np.count_nonzero(~np.isfinite(x)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 37, 1001])
def test_finite_values(dtype, n):
    x = np.random.default_rng(n).standard_normal(n).astype(dtype)
    x[n // 2] = -7.5  # the largest magnitude, negative
    assert amax_and_nonfinite(x) == expected(x) == (7.5, 0)


@pytest.mark.parametrize("blocks, threads", [(1, 32), (3, 64), (2, 128)])
def test_nan_is_left_out_and_counted_inf_kept(blocks, threads):
    rng = np.random.default_rng(blocks)
    x = rng.standard_normal(517).astype(np.float32)
    x[[0, 100, 516]] = np.nan
    got = amax_and_nonfinite(x, blocks=blocks, threads_per_block=threads)
    assert got == expected(x) and got[1] == 3 and np.isfinite(got[0])
    x[200] = -np.inf
    assert amax_and_nonfinite(x, blocks=blocks, threads_per_block=threads) == (np.inf, 4)


def test_all_nan_has_amax_zero_and_a_matrix_is_one_tensor():
    assert amax_and_nonfinite(np.full(40, np.nan, np.float32)) == (0.0, 40)
    x = np.arange(-6.0, 6.0).reshape(3, 4)
    assert amax_and_nonfinite(x) == (6.0, 0)


def test_device_arrays_and_another_kernel():
    from numba import cuda

    x = np.array([1.0, -2.0, np.inf], np.float32)
    assert amax_and_nonfinite(cuda.to_device(x), kernel=amax_nonfinite) == (np.inf, 1)


@pytest.mark.parametrize("bad, words", [
    (np.zeros(3, np.float16), "widen"),
    (np.zeros((4, 4), np.float32)[:, ::2], "contiguous"),
    ([1.0, 2.0], "NumPy or device array"),
])
def test_bad_input_is_explained(bad, words):
    with pytest.raises(InputError, match=words):
        amax_and_nonfinite(bad)


def test_the_block_must_be_a_power_of_two():
    with pytest.raises(InputError, match="power of two"):
        amax_and_nonfinite(np.ones(10, np.float32), threads_per_block=96)
