"""The neural-network kernels (dense, softmax, optim) against gpulab.reference, in the tier this
process runs. Shapes are small and never multiples of the block (the simulator costs ~0.1 ms
per thread), values random, both float types."""

import numpy as np
import pytest
from numba import cuda

from gpulab import reference
from gpulab.kernels import dense, optim, softmax
from gpulab.kernels._arrays import InputError

DTYPES = [np.float32, np.float64]
ACTIVATIONS = reference.ACTIVATIONS
SHAPE = (13, 11)  # 8 x 8 blocks in the simulator: partial blocks in both directions


def tolerance(dtype, scale=1.0):
    """(rtol, atol): a few roundings, plus float32's tanh/exp being a few ulps off. The
    absolute part scales with the largest value: GELU's derivative is a difference of O(1)
    terms, so near 0 its error is a few ulps of 1, not of the (tiny) result."""
    if dtype == np.float32:
        return 1e-5, 1e-6 * max(scale, 1.0)
    return 1e-13, 1e-14 * max(scale, 1.0)


def random(shape, dtype, seed, scale=3.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)


def assert_close(got, expected, dtype):
    rtol, atol = tolerance(dtype, float(np.max(np.abs(expected))))
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)


# --- forward: unfused and fused ------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_bias_add(dtype):
    Z, b = random(SHAPE, dtype, 1), random(SHAPE[1], dtype, 2)
    got = dense.run_bias_add(Z, b)
    assert got.dtype == dtype
    assert_close(got, reference.bias_add(Z, b), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_fused_equals_unfused_equals_reference(activation, dtype):
    Z, b = random(SHAPE, dtype, 3), random(SHAPE[1], dtype, 4)
    fused = dense.run_bias_activation(Z, b, activation)
    unfused = dense.run_activation(dense.run_bias_add(Z, b), activation)
    expected = reference.bias_activation(Z, b, activation)
    assert_close(fused, expected, dtype)
    assert_close(unfused, expected, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_backward_matches_reference(activation, dtype):
    Z, b, dA = random(SHAPE, dtype, 5), random(SHAPE[1], dtype, 6), random(SHAPE, dtype, 7)
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
    np.testing.assert_allclose(dense.run_activation(Z, "sigmoid")[0], [0, 0, 0.5, 1, 1],
                               atol=1e-7)


@pytest.mark.parametrize("dtype", DTYPES)
def test_bias_grad_is_the_column_sum(dtype):
    dZ = random((37, 11), dtype, 8)  # more rows than threads, columns not a multiple of 32
    assert_close(dense.run_bias_grad(dZ), reference.bias_grad(dZ), dtype)


@pytest.mark.parametrize("method", dense.TRANSPOSE_METHODS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_transpose(method, dtype):
    A = random((9, 13), dtype, 9)
    got = dense.run_transpose(A, method=method, tile=4)
    assert got.shape == (13, 9) and got.flags.c_contiguous
    np.testing.assert_array_equal(got, reference.transpose(A))


def test_device_arrays_in_device_arrays_out():
    Z, b = random(SHAPE, np.float32, 10), random(SHAPE[1], np.float32, 11)
    d_out = dense.run_bias_activation(cuda.to_device(Z), cuda.to_device(b), "relu")
    assert cuda.devicearray.is_cuda_ndarray(d_out)
    assert_close(d_out.copy_to_host(), reference.bias_activation(Z, b, "relu"), np.float32)


def test_traffic_counts():
    # fused: read Z, write A; unfused: also write Z + b and read it back; plus b once
    assert dense.forward_traffic_bytes(100, 10, fused=True) == 4 * (2 * 1000 + 10)
    assert dense.forward_traffic_bytes(100, 10, fused=False) == 4 * (4 * 1000 + 10)
    assert dense.launches(True) == 1 and dense.launches(False) == 2


# --- softmax cross-entropy -----------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_cross_entropy(dtype):
    logits = random((37, 10), dtype, 12, scale=5)
    labels = np.random.default_rng(13).integers(0, 10, 37)
    probs, losses = softmax.run_softmax_cross_entropy(logits, labels)
    expected_probs, expected_losses = reference.softmax_cross_entropy(logits, labels)
    assert_close(probs, expected_probs, dtype)
    assert_close(losses, expected_losses, dtype)
    np.testing.assert_allclose(probs.sum(axis=1), 1, rtol=1e-5)


def test_softmax_is_stable_for_huge_logits():
    logits = np.array([[1000.0, 0.0, -1000.0], [-1000.0, -1000.0, 1000.0]], np.float32)
    probs, losses = softmax.run_softmax_cross_entropy(logits, np.array([2, 2]))
    assert np.all(np.isfinite(probs)) and np.all(np.isfinite(losses))
    np.testing.assert_allclose(losses, [2000.0, 0.0], atol=1e-3)  # finite, not inf


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_cross_entropy_backward(dtype):
    logits = random((13, 10), dtype, 14)
    labels = np.random.default_rng(15).integers(0, 10, 13)
    probs, _ = reference.softmax_cross_entropy(logits, labels)
    got = softmax.run_softmax_cross_entropy_backward(probs, labels, 1 / 13)
    assert_close(got, reference.softmax_cross_entropy_backward(probs, labels, 1 / 13), dtype)


# --- optimisers ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_sgd_momentum(dtype):
    p, g, v = (random((9, 7), dtype, s) for s in (16, 17, 18))
    d_p, d_g, d_v = map(cuda.to_device, (p, g, v))
    optim.run_sgd_momentum(d_p, d_g, d_v, lr=0.1, momentum=0.9, weight_decay=0.01)
    want_p, want_v = reference.sgd_momentum_update(p, g, v, 0.1, 0.9, 0.01)
    assert_close(d_p.copy_to_host(), want_p, dtype)
    assert_close(d_v.copy_to_host(), want_v, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("step", [1, 7])
def test_adam(dtype, step):
    p, g, m = (random(67, dtype, s) for s in (19, 20, 21))
    v = np.abs(random(67, dtype, 22))
    d = [cuda.to_device(a) for a in (p, g, m, v)]
    optim.run_adam(*d, step=step, lr=0.01, weight_decay=0.1)
    want = reference.adam_update(p, g, m, v, step, 0.01, weight_decay=0.1)
    for got, expected in zip(d[:1] + d[2:], want, strict=True):
        assert_close(got.copy_to_host(), expected, dtype)


# --- bad input: every problem named -----------------------------------------------------------


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
        dense.run_activation(np.ones((4, 3), np.float32).T, "relu")
    with pytest.raises(InputError, match="dA has shape"):
        dense.run_bias_activation_backward(np.ones((2, 4), np.float32), Z, b, "relu")
    with pytest.raises(InputError, match="must have shape"):
        dense.run_bias_add(Z, b, out=np.ones((4, 3), np.float32))
    with pytest.raises(InputError, match="method must be one of"):
        dense.run_transpose(Z, method="magic")


def test_bad_labels_are_named():
    logits = np.zeros((3, 4), np.float32)
    with pytest.raises(InputError, match="out of range"):
        softmax.run_softmax_cross_entropy(logits, [0, 1, 4])
    with pytest.raises(InputError, match="out of range"):
        softmax.run_softmax_cross_entropy(logits, [0, -1, 2])
    with pytest.raises(InputError, match="3 rows of logits but 2 labels"):
        softmax.run_softmax_cross_entropy(logits, [0, 1])
    with pytest.raises(InputError, match="whole class numbers"):
        softmax.run_softmax_cross_entropy(logits, [0.5, 1, 2])


def test_bad_optimiser_inputs_are_named():
    p = cuda.to_device(np.ones(5, np.float32))
    with pytest.raises(InputError, match="device arrays"):
        optim.run_sgd_momentum(np.ones(5, np.float32), p, p, 0.1)
    with pytest.raises(InputError, match="6 elements but param has 5"):
        optim.run_sgd_momentum(p, cuda.to_device(np.ones(6, np.float32)), p, 0.1)
    with pytest.raises(InputError, match="momentum=1.0 is outside"):
        optim.run_sgd_momentum(p, p, p, 0.1, momentum=1.0)
    with pytest.raises(InputError, match="lr=-0.1 is outside"):
        optim.run_adam(p, p, p, p, 1, lr=-0.1)
    with pytest.raises(InputError, match="step must be"):
        optim.run_adam(p, p, p, p, 0, lr=0.1)
