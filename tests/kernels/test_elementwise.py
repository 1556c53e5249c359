import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpulab import reference
from gpulab.kernels.arrays import InputError, is_device_array
from gpulab.kernels.elementwise import run_elementwise_multiply


@settings(max_examples=8, deadline=None)
@given(n=st.integers(1, 5000), dtype=st.sampled_from([np.float32, np.float64]),
       seed=st.integers(0, 2**32 - 1))
def test_run_elementwise_multiply_matches_reference(n, dtype, seed):
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)
    got = run_elementwise_multiply(x, y, threads_per_block=128)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, reference.multiply(x, y))  # one rounding: exact


def test_device_arrays_stay_on_the_device():
    from numba import cuda

    x = np.arange(5, dtype=np.float32)
    result = run_elementwise_multiply(cuda.to_device(x), cuda.to_device(x))
    assert is_device_array(result)
    np.testing.assert_array_equal(result.copy_to_host(), x * x)


def test_out_argument_is_filled():
    x = np.arange(7.0)
    out = np.empty(7)
    assert run_elementwise_multiply(x, x, out=out) is out
    np.testing.assert_array_equal(out, x * x)


@pytest.mark.parametrize(
    "out, words",
    [(np.empty(6), "must have length 7"), (np.empty(7, np.float32), "one dtype"),
     (np.empty((7, 1)), "1-D")],
)
def test_bad_out_is_named(out, words):
    with pytest.raises(InputError, match=words):
        run_elementwise_multiply(np.arange(7.0), np.arange(7.0), out=out)
