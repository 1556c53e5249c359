"""gpulab's fused inference kernel (chapter 12): the two-layer forward pass and its argmax in one
launch, against NumPy, for sizes that are not multiples of the block; bad shapes get a clear
error."""

import gpulab  # noqa: F401  (before numba: it chooses the simulator or the GPU)

# isort: split
import numpy as np
import pytest

from gpulab.kernels.inference import run_fused_inference


def _numpy(X, W1, b1, W2, b2):
    return np.argmax(np.maximum(X @ W1 + b1, 0) @ W2 + b2, axis=1)


@pytest.mark.parametrize("batch, widths, threads", [(1, (5, 7, 3), 32), (37, (9, 13, 4), 32),
                                                    (70, (6, 20, 10), 64)])
def test_fused_inference_matches_numpy(batch, widths, threads):
    rng = np.random.default_rng(batch)
    n_in, n_hidden, n_classes = widths
    X = rng.standard_normal((batch, n_in)).astype(np.float32)
    W1 = rng.standard_normal((n_in, n_hidden)).astype(np.float32)
    b1 = rng.standard_normal(n_hidden).astype(np.float32)
    W2 = rng.standard_normal((n_hidden, n_classes)).astype(np.float32)
    b2 = rng.standard_normal(n_classes).astype(np.float32)
    got = run_fused_inference(X, W1, b1, W2, b2, threads_per_block=threads)
    assert got.shape == (batch,)
    np.testing.assert_array_equal(got, _numpy(X, W1, b1, W2, b2))


def test_ties_go_to_the_first_class():
    X = np.ones((3, 2), np.float32)
    W1 = np.eye(2, dtype=np.float32)
    W2 = np.ones((2, 4), np.float32)
    zeros = np.zeros(4, np.float32)
    assert run_fused_inference(X, W1, np.zeros(2, np.float32), W2, zeros).tolist() == [0, 0, 0]


def test_bad_shapes_get_a_clear_error():
    X = np.ones((3, 2), np.float32)
    with pytest.raises(ValueError, match="do not chain"):
        run_fused_inference(X, np.ones((3, 4)), np.ones(4), np.ones((4, 2)), np.ones(2))
    with pytest.raises(ValueError, match="2-D"):
        run_fused_inference(X[0], np.ones((2, 4)), np.ones(4), np.ones((4, 2)), np.ones(2))
