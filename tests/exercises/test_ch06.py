"""Chapter 06's checks (ReLU backward, numeric gradient, dense backward) against a right
answer, the stub and the typical wrong answers."""

import numpy as np
import pytest
from numba import cuda

from gpulab.exercises import ch06
from gpulab.exercises.checks import FAILED, NOT_ATTEMPTED, PASSED

# --- chapter 06 ------------------------------------------------------------------------------


@cuda.jit
def relu_backward(dA, Z, b, dZ):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        dZ[r, c] = dA[r, c] if Z[r, c] + b[c] > 0 else 0


@cuda.jit
def relu_backward_no_bias(dA, Z, b, dZ):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        dZ[r, c] = dA[r, c] if Z[r, c] > 0 else 0


@cuda.jit
def relu_backward_mask_only(dA, Z, b, dZ):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        dZ[r, c] = 1.0 if Z[r, c] + b[c] > 0 else 0.0


@pytest.mark.parametrize("kernel, status, words", [
    (relu_backward, PASSED, "right"),
    (relu_backward_no_bias, FAILED, "Z[r, c] + b[c] > 0"),
    (relu_backward_mask_only, FAILED, "chain rule multiplies"),
])
def test_relu_backward(kernel, status, words):
    result = ch06.check_relu_backward(kernel, seed=5, show=False)
    assert result.status == status, result
    assert words in result.message + result.hint, result


def numeric_gradient(f, x, eps):
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        saved = x[i]
        x[i] = saved + eps
        plus = f()
        x[i] = saved - eps
        minus = f()
        x[i] = saved
        grad[i] = (plus - minus) / (2 * eps)
    return grad


def one_sided(f, x, eps):
    grad = np.zeros_like(x)
    base = f()
    for i in np.ndindex(x.shape):
        saved = x[i]
        x[i] = saved + eps
        grad[i] = (f() - base) / eps
        x[i] = saved
    return grad


def not_restored(f, x, eps):
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        x[i] += eps
        plus = f()
        x[i] -= 2 * eps
        grad[i] = (plus - f()) / (2 * eps)
    return grad


def divides_by_eps(f, x, eps):
    return 2 * numeric_gradient(f, x, eps)


@pytest.mark.parametrize("function, status, words", [
    (numeric_gradient, PASSED, "matches"),
    (one_sided, FAILED, "eps^2"),
    (not_restored, FAILED, "put its saved value back"),
    (divides_by_eps, FAILED, "2 * eps"),
])
def test_numeric_gradient(function, status, words):
    result = ch06.check_numeric_gradient(function, seed=2, show=False)
    assert result.status == status, result
    assert words in result.message + result.hint, result


def dense_backward(X, W, dZ):
    return X.T @ dZ, dZ.sum(axis=0), dZ @ W.T


@pytest.mark.parametrize("function, status, words", [
    (dense_backward, PASSED, "right"),
    (lambda X, W, dZ: (X.T @ dZ, dZ.mean(axis=0), dZ @ W.T), FAILED, "not their sum"),
    (lambda X, W, dZ: (dZ.T @ X, dZ.sum(axis=0), dZ @ W.T), FAILED, "shape"),
    (lambda X, W, dZ: (dZ @ W.T, dZ.sum(axis=0), X.T @ dZ), FAILED, "another order"),
    (lambda X, W, dZ: (X.T @ dZ, dZ.sum(axis=0)), FAILED, "three arrays"),
])
def test_dense_backward(function, status, words):
    result = ch06.check_dense_backward(function, seed=4, show=False)
    assert result.status == status, result
    assert words in result.message + result.hint, result


@pytest.mark.parametrize("check", [ch06.check_numeric_gradient, ch06.check_dense_backward])
def test_stubs_are_not_attempted(check):
    def stub(*args):
        raise NotImplementedError()

    assert check(stub, show=False).status == NOT_ATTEMPTED
