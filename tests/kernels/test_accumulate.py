"""gpulab's accumulation kernel (chapter 09) against NumPy, in the tier this process runs: in
place over several micro-batches, any shape, both float types; bad inputs named."""

import numpy as np
import pytest
from numba import cuda

from gpulab.kernels import accumulate
from gpulab.kernels.arrays import InputError
from gpulab.nn.mlp import MLP


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_accumulates_in_place_over_micro_batches(dtype):
    rng = np.random.default_rng(0)
    grads = rng.normal(size=(3, 7, 9)).astype(dtype)
    weights = (5 / 14, 5 / 14, 4 / 14)
    d_sum = cuda.to_device(np.zeros((7, 9), dtype))
    for grad, weight in zip(grads, weights, strict=True):
        accumulate.accumulate_into(d_sum, cuda.to_device(grad), weight)
    want = sum(w * g.astype(np.float64) for w, g in zip(weights, grads, strict=True))
    np.testing.assert_allclose(d_sum.copy_to_host(), want, rtol=1e-5, atol=1e-6)


def test_micro_batches_give_the_whole_batch_gradients():
    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(23, 6)).astype(np.float32), rng.integers(0, 3, 23)
    sums = accumulate.accumulate_gradients(MLP([6, 5, 3], seed=0), X, y, 4)
    whole = MLP([6, 5, 3], seed=0)
    whole.loss(X, y)
    whole.backward()
    for name, grad in whole.gradients().items():
        np.testing.assert_allclose(sums[name].copy_to_host(), grad, rtol=1e-4, atol=1e-6)


def test_micro_batch_parts():
    parts = accumulate.micro_batch_parts(10, 3)
    assert [len(p) for p in parts] == [4, 3, 3]
    assert len(accumulate.micro_batch_parts(2, 5)) == 2


def test_bad_inputs_are_named():
    d = cuda.to_device(np.ones(5, np.float32))
    with pytest.raises(InputError, match="device arrays"):
        accumulate.accumulate_into(np.ones(5, np.float32), d, 0.5)
    with pytest.raises(InputError, match="same parameter"):
        accumulate.accumulate_into(d, cuda.to_device(np.ones(6, np.float32)), 0.5)
    with pytest.raises(InputError, match="grad_sum is float32 but grad_micro is float64"):
        accumulate.accumulate_into(d, cuda.to_device(np.ones(5)), 0.5)
    with pytest.raises(InputError, match="weight=1.5 is outside"):
        accumulate.accumulate_into(d, d, 1.5)
    with pytest.raises(InputError, match="adds nothing"):
        accumulate.accumulate_into(d, d, 0)
    with pytest.raises(InputError, match="micro_batches"):
        accumulate.micro_batch_parts(10, 0)
    with pytest.raises(InputError, match="at least one sample"):
        accumulate.micro_batch_parts(0, 2)
    with pytest.raises(InputError, match="samples but y"):
        accumulate.accumulate_gradients(MLP([6, 5, 3], seed=0), np.ones((4, 6)), [0, 1], 2)
