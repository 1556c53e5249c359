"""saxpy and the copy kernels against gpulab.reference, in the tier this process runs; and the
index each thread reads, read back from a real run, against the functions the memory model uses."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpulab import reference
from gpulab.kernels import memory
from gpulab.kernels.arrays import InputError, is_device_array

DTYPES = [np.float32, np.float64]


@settings(max_examples=8, deadline=None)
@given(n=st.integers(1, 2000), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**32 - 1),
       a=st.floats(-100, 100, allow_nan=False))
def test_saxpy_matches_reference(n, dtype, seed, a):
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)
    got = memory.run_saxpy(a, x, y, threads_per_block=128)
    assert got.dtype == dtype
    # one multiply and one add, each rounded once, as in NumPy (a fused multiply-add on a GPU
    # rounds once instead of twice, so allow one rounding of the result)
    np.testing.assert_allclose(got, reference.saxpy(a, x, y), rtol=2 * np.finfo(dtype).eps,
                               atol=4 * np.finfo(dtype).eps * abs(a))


@pytest.mark.parametrize("n", [1, 255, 257, 700])  # not multiples of the block
@pytest.mark.parametrize("dtype", DTYPES)
def test_copies_are_exact(n, dtype):
    x = np.random.default_rng(n).standard_normal(n).astype(dtype)
    np.testing.assert_array_equal(memory.run_copy_coalesced(x), reference.copy(x))
    for stride in (1, 2, 3, 8, 33):
        got = memory.run_copy_strided(x, stride)
        np.testing.assert_array_equal(got, reference.copy_strided(x, stride))
        assert got.shape == (memory.strided_length(n, stride),)


@pytest.mark.parametrize("stride", [1, 2, 5, 8, 16])
def test_threads_read_the_index_the_model_says(stride):
    """x = arange(n): out[i] is the index thread i really read."""
    n = 600
    x = np.arange(n, dtype=np.float64)
    out = memory.run_copy_strided(x, stride)
    expected = [memory.strided_read_index(i, stride) for i in range(out.shape[0])]
    np.testing.assert_array_equal(out, expected)
    out = memory.run_copy_coalesced(x)
    np.testing.assert_array_equal(out, [memory.coalesced_read_index(i) for i in range(n)])


def test_device_arrays_stay_on_the_device():
    from numba import cuda

    x = np.arange(10, dtype=np.float32)
    result = memory.run_saxpy(2.0, cuda.to_device(x), cuda.to_device(x))
    assert is_device_array(result)
    np.testing.assert_array_equal(result.copy_to_host(), 3 * x)


def test_out_argument_is_filled():
    x = np.arange(9.0)
    out = np.empty(3)
    assert memory.run_copy_strided(x, 3, out=out) is out
    np.testing.assert_array_equal(out, [0.0, 3.0, 6.0])


def test_counts():
    assert memory.saxpy_counts(1000, 4) == {"flops": 2000, "bytes_moved": 12_000}
    assert memory.copy_counts(10, 8) == {"flops": 0, "bytes_moved": 160}


BAD = [
    (lambda: memory.run_saxpy("2", np.ones(3, np.float32), np.ones(3, np.float32)), "real number"),
    (lambda: memory.run_saxpy(float("nan"), np.ones(3), np.ones(3)), "finite"),
    (lambda: memory.run_saxpy(2.0, np.ones(3, np.float32), np.ones(4, np.float32)), "same length"),
    (lambda: memory.run_saxpy(2.0, np.ones(3, np.float32), np.ones(3)), "one dtype"),
    (lambda: memory.run_saxpy(2.0, np.ones(3, np.int32), np.ones(3, np.int32)), "dtype int32"),
    (lambda: memory.run_copy_coalesced(np.ones((2, 2))), "1-D"),
    (lambda: memory.run_copy_coalesced(np.ones(6)[::2]), "not contiguous"),
    (lambda: memory.run_copy_strided(np.ones(6), 0), "stride must be"),
    (lambda: memory.run_copy_strided(np.ones(6), 1.5), "stride must be"),
    (lambda: memory.run_copy_strided(np.ones(6), 2, out=np.empty(4)), "length 3"),
    (lambda: memory.run_copy_coalesced(np.ones(6), out=np.empty(6, np.float32)), "one dtype"),
]


@pytest.mark.parametrize("call, words", BAD)
def test_bad_input_is_named(call, words):
    with pytest.raises(InputError, match=words):
        call()
