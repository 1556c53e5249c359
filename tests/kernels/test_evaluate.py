"""gpulab's evaluation kernel (chapter 08) against gpulab.reference, in the tier this process
runs: one fixed grid for batches smaller and larger than it, both float types, huge logits, the
results written into given arrays, and bad inputs named."""

import numpy as np
import pytest
from numba import cuda

from gpulab import reference
from gpulab.kernels import evaluate
from gpulab.kernels.arrays import InputError

DTYPES = [np.float32, np.float64]


def expected(logits, labels):
    _, losses = reference.softmax_cross_entropy(logits, labels)
    return losses, (np.argmax(logits, axis=1) == labels).astype(np.int32)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", [1, 7, 64, 65, 301])
def test_one_fixed_grid_evaluates_any_batch(dtype, batch, random_array, assert_close):
    logits = random_array((batch, 11), dtype, batch, scale=4)
    labels = np.random.default_rng(batch + 1).integers(0, 11, batch)
    losses, correct = evaluate.run_evaluate_batch(logits, labels, blocks=2,
                                                  threads_per_block=32)
    want_losses, want_correct = expected(logits, labels)
    assert_close(losses, want_losses, dtype)
    np.testing.assert_array_equal(correct, want_correct)
    assert losses.dtype == dtype and correct.dtype == np.int32


def test_the_default_grid_does_not_depend_on_the_batch():
    assert evaluate.evaluation_grid() == evaluate.evaluation_grid()
    blocks, threads = evaluate.evaluation_grid()
    assert blocks >= 1 and threads % 32 == 0


def test_huge_logits_stay_finite():
    logits = np.array([[1000.0, 0.0, -1000.0], [-1000.0, -1000.0, -999.0]], np.float32)
    losses, correct = evaluate.run_evaluate_batch(logits, np.array([2, 2]))
    assert np.all(np.isfinite(losses))
    np.testing.assert_allclose(losses, expected(logits, np.array([2, 2]))[0], atol=1e-3)
    np.testing.assert_array_equal(correct, [0, 1])


def test_mean_loss_and_accuracy_and_given_outputs():
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(50, 10)).astype(np.float32)
    labels = rng.integers(0, 10, 50)
    loss, accuracy = evaluate.mean_loss_and_accuracy(logits, labels)
    want_losses, want_correct = expected(logits, labels)
    assert loss == pytest.approx(float(want_losses.mean()), rel=1e-5)
    assert accuracy == pytest.approx(float(want_correct.mean()))
    losses, correct = np.zeros(50, np.float32), np.zeros(50, np.int32)
    evaluate.run_evaluate_batch(logits, labels, losses, correct)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-5)
    np.testing.assert_array_equal(correct, want_correct)
    d_losses, d_correct = evaluate.run_evaluate_batch(cuda.to_device(logits),
                                                      cuda.to_device(labels))
    np.testing.assert_array_equal(d_correct.copy_to_host(), want_correct)
    assert evaluate.evaluate_bytes(50, 10) == 50 * (40 + 8 + 4 + 4)


def test_bad_inputs_are_named():
    logits = np.zeros((4, 3), np.float32)
    with pytest.raises(InputError, match="out of range"):
        evaluate.run_evaluate_batch(logits, [0, 1, 2, 3])
    with pytest.raises(InputError, match="one per sample"):
        evaluate.run_evaluate_batch(logits, [0, 1, 2, 0], correct=np.zeros(5, np.int32))
    with pytest.raises(InputError, match="int32"):
        evaluate.run_evaluate_batch(logits, [0, 1, 2, 0], correct=np.zeros(4, np.int64))
    with pytest.raises(InputError, match="2-D"):
        evaluate.run_evaluate_batch(np.zeros(4, np.float32), [0, 1, 2, 0])
