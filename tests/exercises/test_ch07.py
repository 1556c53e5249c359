"""Chapter 07's checks (SGD with momentum, mini-batches) against a right answer, the stub
and the typical wrong answers."""

import numpy as np
import pytest
from numba import cuda

from gpulab.exercises import ch07
from gpulab.exercises.checks import FAILED, NOT_ATTEMPTED, PASSED

# --- chapter 07 ------------------------------------------------------------------------------


@cuda.jit
def sgd(param, grad, velocity, lr, momentum):
    i = cuda.grid(1)
    if i < param.shape[0]:
        v = momentum * velocity[i] + grad[i]
        velocity[i] = v
        param[i] -= lr * v


@cuda.jit
def sgd_plain(param, grad, velocity, lr, momentum):
    i = cuda.grid(1)
    if i < param.shape[0]:
        param[i] -= lr * grad[i]


@cuda.jit
def sgd_unstored(param, grad, velocity, lr, momentum):
    i = cuda.grid(1)
    if i < param.shape[0]:
        param[i] -= lr * (momentum * velocity[i] + grad[i])


@cuda.jit
def sgd_no_guard(param, grad, velocity, lr, momentum):
    i = cuda.grid(1)
    v = momentum * velocity[i] + grad[i]
    velocity[i] = v
    param[i] -= lr * v


@pytest.mark.parametrize("kernel, status, words", [
    (sgd, PASSED, "right after two steps"),
    (sgd_plain, FAILED, "velocity is not used"),
    (sgd_unstored, FAILED, "write the new velocity back"),
    (sgd_no_guard, FAILED, "guard"),
])
def test_sgd_momentum(kernel, status, words):
    result = ch07.check_sgd_momentum(kernel, seed=6, show=False)
    assert result.status == status, result
    assert words in result.message + result.hint, result


def minibatches(n, batch_size, rng):
    order = rng.permutation(n)
    return [order[s:s + batch_size] for s in range(0, n, batch_size)]


@pytest.mark.parametrize("function, status, words", [
    (minibatches, PASSED, "every sample once"),
    (lambda n, b, rng: [rng.permutation(n)[s:s + b] for s in range(0, n - n % b, b)], FAILED,
     "last, partial batch"),
    (lambda n, b, rng: [np.arange(n)[s:s + b] for s in range(0, n, b)], FAILED, "stored order"),
    (lambda n, b, rng: minibatches(n, b, np.random.default_rng()), FAILED, "same seed"),
    (lambda n, b, rng: [rng.integers(0, n, b) for _ in range(0, n, b)], FAILED,
     "missing or repeated"),
])
def test_minibatches(function, status, words):
    result = ch07.check_minibatches(function, seed=8, show=False)
    assert result.status == status, result
    assert words in result.message + result.hint, result


def test_the_stub_is_not_attempted():
    def stub(*args):
        raise NotImplementedError()

    assert ch07.check_minibatches(stub, show=False).status == NOT_ATTEMPTED
