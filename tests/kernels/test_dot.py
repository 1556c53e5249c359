"""The dot-product kernels against gpulab.reference, in the tier this process runs."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpulab import reference
from gpulab.kernels import dot as dot_module
from gpulab.kernels.arrays import InputError
from gpulab.kernels.dot import METHODS, dot, launch_config, run_sum_racy

DTYPES = [np.float32, np.float64]


def random_vectors(n, dtype, seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)


def assert_close_dot(got, x, y):
    expected = reference.dot_exact(x, y)
    tolerance = reference.dot_tolerance(x, y)
    assert abs(float(got) - expected) <= tolerance, (got, expected, tolerance)


@pytest.mark.parametrize("method", METHODS)
def test_the_first_example_is_eleven(method):
    assert float(dot([1, 2], [3, 4], method=method)) == 11.0


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 31, 257, 1000])  # 257, 1000: not multiples of the block
def test_matches_numpy_on_awkward_lengths(method, dtype, n):
    x, y = random_vectors(n, dtype, seed=n)
    result = dot(x, y, method=method)
    assert result.dtype == dtype
    assert_close_dot(result, x, y)


# Property tests over sizes 1..5000. The simulator costs ~0.1 ms per thread (and a barrier per
# tree step), so the one-thread-per-element kernels get fewer examples than grid-stride.
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 5000), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**32 - 1))
def test_grid_stride_property(n, dtype, seed):
    x, y = random_vectors(n, dtype, seed)
    assert_close_dot(dot(x, y, method="grid_stride"), x, y)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 5000), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**32 - 1))
def test_atomic_property(n, dtype, seed):
    x, y = random_vectors(n, dtype, seed)
    assert_close_dot(dot(x, y, method="atomic"), x, y)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 5000), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**32 - 1))
def test_shared_tree_property(n, dtype, seed):
    x, y = random_vectors(n, dtype, seed)
    assert_close_dot(dot(x, y, method="shared_tree", threads_per_block=64), x, y)


def test_device_arrays_are_accepted():
    from numba import cuda

    x, y = random_vectors(300, np.float32, seed=1)
    assert_close_dot(dot(cuda.to_device(x), cuda.to_device(y), method="grid_stride"), x, y)


@pytest.mark.parametrize("threads_per_block", [32, 128])
def test_tree_block_sizes(threads_per_block):
    x, y = random_vectors(333, np.float64, seed=2)
    assert_close_dot(dot(x, y, "shared_tree", threads_per_block=threads_per_block), x, y)


def test_run_sum_racy_loses_additions():
    n, threads_per_block = 1000, 128
    got = float(run_sum_racy(np.ones(n, np.float32), threads_per_block=threads_per_block))
    blocks = launch_config(n, "shared_tree", threads_per_block).blocks
    # Each block's writes overwrite each other: at most one element per block survives.
    assert got <= blocks < n


# --- bad input: every problem named -------------------------------------------------------

BAD_INPUTS = [
    (np.ones(3, np.float32), np.ones(4, np.float32), "same length"),
    (np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), "1-D"),
    (np.ones(0, np.float32), np.ones(0, np.float32), "empty"),
    (np.ones(3, np.int32), np.ones(3, np.int32), "dtype int32"),
    (np.ones(3, np.float16), np.ones(3, np.float16), "dtype float16"),
    (np.ones(6, np.float32)[::2], np.ones(3, np.float32), "not contiguous"),
    (np.ones(3, np.float32), np.ones(3, np.float64), "one dtype"),
    ("abc", np.ones(3), "NumPy array"),
    ([1, "a"], [1, 2], "numbers"),
]


@pytest.mark.parametrize("x, y, words", BAD_INPUTS)
@pytest.mark.parametrize("method", METHODS)
def test_bad_input_is_named(x, y, words, method):
    with pytest.raises(InputError, match=words):
        dot(x, y, method=method)


def test_bad_launch_parameters_are_named():
    x = np.ones(10, np.float32)
    with pytest.raises(InputError, match="power of two"):
        dot(x, x, "shared_tree", threads_per_block=100)
    with pytest.raises(InputError, match="outside 1..1024"):
        dot(x, x, "atomic", threads_per_block=2048)
    with pytest.raises(ValueError, match="method must be one of"):
        dot(x, x, "magic")
    with pytest.raises(ValueError, match="only with grid_stride"):
        dot(x, x, "atomic", blocks=3)
    with pytest.raises(InputError, match="blocks must be a whole number >= 1"):
        dot(x, x, "grid_stride", blocks=0)


def test_default_launch_follows_the_tier():
    config = launch_config(10_000, "grid_stride")
    if dot_module.device.tier() == "sim":
        assert config.total_threads <= 64  # small: each simulated thread costs ~0.1 ms
    assert config.grid_stride
