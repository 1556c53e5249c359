"""The optimiser kernels (SGD with momentum, Adam) against gpulab.reference, in the tier this
process runs: in place, on device arrays, both float types; bad hyperparameters named."""

import numpy as np
import pytest
from numba import cuda

from gpulab import reference
from gpulab.kernels import optim
from gpulab.kernels.arrays import InputError

DTYPES = [np.float32, np.float64]


@pytest.mark.parametrize("dtype", DTYPES)
def test_sgd_momentum(dtype, random_array, assert_close):
    p, g, v = (random_array((9, 7), dtype, s) for s in (16, 17, 18))
    d_p, d_g, d_v = map(cuda.to_device, (p, g, v))
    optim.run_sgd_momentum_update(d_p, d_g, d_v, lr=0.1, momentum=0.9, weight_decay=0.01)
    want_p, want_v = reference.sgd_momentum_update(p, g, v, 0.1, 0.9, 0.01)
    assert_close(d_p.copy_to_host(), want_p, dtype)
    assert_close(d_v.copy_to_host(), want_v, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("step", [1, 7])
def test_adam(dtype, step, random_array, assert_close):
    p, g, m = (random_array(67, dtype, s) for s in (19, 20, 21))
    v = np.abs(random_array(67, dtype, 22))
    d = [cuda.to_device(a) for a in (p, g, m, v)]
    optim.run_adam_update(*d, step=step, lr=0.01, weight_decay=0.1)
    want = reference.adam_update(p, g, m, v, step, 0.01, weight_decay=0.1)
    for got, expected in zip(d[:1] + d[2:], want, strict=True):
        assert_close(got.copy_to_host(), expected, dtype)


def test_bad_optimiser_inputs_are_named():
    p = cuda.to_device(np.ones(5, np.float32))
    with pytest.raises(InputError, match="device arrays"):
        optim.run_sgd_momentum_update(np.ones(5, np.float32), p, p, 0.1)
    with pytest.raises(InputError, match="6 elements but param has 5"):
        optim.run_sgd_momentum_update(p, cuda.to_device(np.ones(6, np.float32)), p, 0.1)
    with pytest.raises(InputError, match="param is float32 but grad is float64"):
        optim.run_sgd_momentum_update(p, cuda.to_device(np.ones(5)), p, 0.1)
    with pytest.raises(InputError, match="momentum=1.0 is outside"):
        optim.run_sgd_momentum_update(p, p, p, 0.1, momentum=1.0)
    with pytest.raises(InputError, match="lr=-0.1 is outside"):
        optim.run_adam_update(p, p, p, p, 1, lr=-0.1)
    with pytest.raises(InputError, match="step must be"):
        optim.run_adam_update(p, p, p, p, 0, lr=0.1)
    with pytest.raises(InputError, match="eps must be a real number"):
        optim.run_adam_update(p, p, p, p, 1, lr=0.1, eps="tiny")
