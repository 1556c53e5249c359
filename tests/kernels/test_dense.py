"""The dense-layer kernels (bias, activation, their backward, bias gradient, transposes)
against gpulab.reference, in the tier this process runs. Shapes are small and never multiples
of the block (the simulator costs ~0.1 ms per thread), values random, both float types."""

import numpy as np
import pytest
from numba import cuda

from gpulab import reference
from gpulab.kernels import dense
from gpulab.kernels.arrays import InputError
from gpulab.kernels.registry import kernel_spec

DTYPES = [np.float32, np.float64]
ACTIVATIONS = reference.ACTIVATIONS
SHAPE = (13, 11)  # 8 x 8 blocks in the simulator: partial blocks in both directions


@pytest.mark.parametrize("dtype", DTYPES)
def test_bias_add(dtype, random_array, assert_close):
    Z, b = random_array(SHAPE, dtype, 1), random_array(SHAPE[1], dtype, 2)
    got = dense.run_bias_add(Z, b)
    assert got.dtype == dtype
    assert_close(got, reference.bias_add(Z, b), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_fused_equals_unfused_equals_reference(activation, dtype, random_array, assert_close):
    Z, b = random_array(SHAPE, dtype, 3), random_array(SHAPE[1], dtype, 4)
    fused = dense.run_bias_activation(Z, b, activation)
    unfused = dense.run_apply_activation(dense.run_bias_add(Z, b), activation)
    expected = reference.bias_activation(Z, b, activation)
    assert_close(fused, expected, dtype)
    assert_close(unfused, expected, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_backward_matches_reference(activation, dtype, random_array, assert_close):
    Z, b = random_array(SHAPE, dtype, 5), random_array(SHAPE[1], dtype, 6)
    dA = random_array(SHAPE, dtype, 7)
    got = dense.run_bias_activation_backward(dA, Z, b, activation)
    assert_close(got, reference.bias_activation_backward(dA, Z, b, activation), dtype)


def test_sigmoid_and_gelu_stay_finite_for_huge_inputs():
    Z = np.array([[-1000.0, -50.0, 0.0, 50.0, 1000.0]], dtype=np.float32)
    b = np.zeros(5, np.float32)
    for activation in ("sigmoid", "gelu", "tanh"):
        out = dense.run_bias_activation(Z, b, activation)
        assert np.all(np.isfinite(out)), (activation, out)
        back = dense.run_bias_activation_backward(np.ones_like(Z), Z, b, activation)
        assert np.all(np.isfinite(back)), (activation, back)
    np.testing.assert_allclose(dense.run_apply_activation(Z, "sigmoid")[0], [0, 0, 0.5, 1, 1],
                               atol=1e-7)


def test_both_activation_kernels_share_one_device_function():
    """apply_activation and bias_activation call the inlined ``activation``; the source a
    learner prints shows it after the kernel."""
    for name in ("apply_activation", "bias_activation"):
        spec = kernel_spec(name)
        assert spec.helpers == ("activation",)
        assert "def activation(z, act)" in spec.source


@pytest.mark.parametrize("dtype", DTYPES)
def test_bias_grad_is_the_column_sum(dtype, random_array, assert_close):
    dZ = random_array((37, 11), dtype, 8)  # more rows than threads, columns not a multiple of 32
    assert_close(dense.run_bias_grad(dZ), reference.bias_grad(dZ), dtype)


@pytest.mark.parametrize("method", dense.TRANSPOSE_METHODS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_transpose(method, dtype, random_array):
    A = random_array((9, 13), dtype, 9)
    got = dense.transpose(A, method=method, tile=4)
    assert got.shape == (13, 9) and got.flags.c_contiguous
    np.testing.assert_array_equal(got, reference.transpose(A))


def test_device_arrays_in_device_arrays_out(random_array, assert_close):
    Z, b = random_array(SHAPE, np.float32, 10), random_array(SHAPE[1], np.float32, 11)
    d_out = dense.run_bias_activation(cuda.to_device(Z), cuda.to_device(b), "relu")
    assert cuda.devicearray.is_cuda_ndarray(d_out)
    assert_close(d_out.copy_to_host(), reference.bias_activation(Z, b, "relu"), np.float32)


def test_out_is_filled_and_returned(random_array):
    Z = random_array((5, 3), np.float64, 12)
    out = np.empty((3, 5))
    assert dense.transpose(Z, out=out, method="naive", tile=2) is out
    np.testing.assert_array_equal(out, Z.T)


def test_traffic_counts():
    # fused: read Z, write A; unfused: also write Z + b and read it back; plus b once
    assert dense.forward_traffic_bytes(100, 10, fused=True) == 4 * (2 * 1000 + 10)
    assert dense.forward_traffic_bytes(100, 10, fused=False) == 4 * (4 * 1000 + 10)
    assert dense.launches(True) == 1 and dense.launches(False) == 2


def test_bad_dense_inputs_are_named():
    Z, b = np.ones((3, 4), np.float32), np.ones(4, np.float32)
    with pytest.raises(InputError, match="one bias per output"):
        dense.run_bias_activation(Z, np.ones(5, np.float32), "relu")
    with pytest.raises(InputError, match="use one dtype"):
        dense.run_bias_add(Z, b.astype(np.float64))
    with pytest.raises(InputError, match="activation must be one of"):
        dense.run_bias_activation(Z, b, "swish")
    with pytest.raises(InputError, match="dtype int64"):
        dense.run_bias_add(np.ones((3, 4), np.int64), b)
    with pytest.raises(InputError, match="not C-contiguous"):
        dense.run_apply_activation(np.ones((4, 3), np.float32).T, "relu")
    with pytest.raises(InputError, match="dA has shape"):
        dense.run_bias_activation_backward(np.ones((2, 4), np.float32), Z, b, "relu")
    with pytest.raises(InputError, match="must have shape"):
        dense.run_bias_add(Z, b, out=np.ones((4, 3), np.float32))
    with pytest.raises(InputError, match="method must be one of"):
        dense.transpose(Z, method="magic")
    with pytest.raises(InputError, match="outside 1..32"):
        dense.transpose(Z, tile=33)
