"""The softmax cross-entropy kernels against gpulab.reference, in the tier this process runs:
both float types, huge logits, and every bad label named."""

import numpy as np
import pytest
from numba import cuda

from gpulab import reference
from gpulab.kernels import softmax
from gpulab.kernels.arrays import InputError

DTYPES = [np.float32, np.float64]


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_cross_entropy(dtype, random_array, assert_close):
    logits = random_array((37, 10), dtype, 12, scale=5)
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
def test_softmax_cross_entropy_backward(dtype, random_array, assert_close):
    logits = random_array((13, 10), dtype, 14)
    labels = np.random.default_rng(15).integers(0, 10, 13)
    probs, _ = reference.softmax_cross_entropy(logits, labels)
    got = softmax.run_softmax_cross_entropy_backward(probs, labels, 1 / 13)
    assert_close(got, reference.softmax_cross_entropy_backward(probs, labels, 1 / 13), dtype)


def test_device_logits_give_device_results_and_outs_are_filled(random_array, assert_close):
    logits = random_array((6, 4), np.float32, 16)
    labels = np.array([0, 1, 2, 3, 0, 1])
    d_probs, d_losses = softmax.run_softmax_cross_entropy(cuda.to_device(logits),
                                                          cuda.to_device(labels))
    assert cuda.devicearray.is_cuda_ndarray(d_probs)
    assert cuda.devicearray.is_cuda_ndarray(d_losses)
    probs, losses = np.empty((6, 4), np.float32), np.empty(6, np.float32)
    got = softmax.run_softmax_cross_entropy(logits, labels, probs=probs, losses=losses)
    assert got[0] is probs and got[1] is losses
    assert_close(probs, d_probs.copy_to_host(), np.float32)


def test_bad_labels_and_outputs_are_named():
    logits = np.zeros((3, 4), np.float32)
    with pytest.raises(InputError, match="out of range"):
        softmax.run_softmax_cross_entropy(logits, [0, 1, 4])
    with pytest.raises(InputError, match="out of range"):
        softmax.run_softmax_cross_entropy(logits, [0, -1, 2])
    with pytest.raises(InputError, match="3 rows of logits but 2 labels"):
        softmax.run_softmax_cross_entropy(logits, [0, 1])
    with pytest.raises(InputError, match="whole class numbers"):
        softmax.run_softmax_cross_entropy(logits, [0.5, 1, 2])
    with pytest.raises(InputError, match="int64 with shape"):
        softmax.run_softmax_cross_entropy(logits, cuda.to_device(np.zeros(3, np.int32)))
    with pytest.raises(InputError, match="losses has 2 elements"):
        softmax.run_softmax_cross_entropy(logits, [0, 1, 2], losses=np.empty(2, np.float32))
