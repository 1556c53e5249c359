"""The exercise checks of chapters 05-08 against a right answer, the stub and the typical wrong
answers: each wrong one must fail with a hint a learner can act on, the stub must say "not
attempted", and no check may raise."""

import numpy as np
import pytest
from numba import cuda

from gpulab.exercises import ch05, ch06, ch07, ch08
from gpulab.exercises.checks import FAILED, NOT_ATTEMPTED, PASSED
from gpulab.nn import cost

SEEDS = [3, 11]

# --- chapter 05: fused bias + ReLU -------------------------------------------------------------


@cuda.jit
def bias_relu(Z, b, out):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        z = Z[r, c] + b[c]
        out[r, c] = z if z > 0 else 0


@cuda.jit
def bias_relu_stub(Z, b, out):
    # YOUR CODE HERE
    raise NotImplementedError()


@cuda.jit
def bias_relu_no_guard(Z, b, out):
    c, r = cuda.grid(2)
    z = Z[r, c] + b[c]
    out[r, c] = z if z > 0 else 0


@cuda.jit
def bias_relu_no_bias(Z, b, out):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        out[r, c] = Z[r, c] if Z[r, c] > 0 else 0


@cuda.jit
def bias_relu_no_relu(Z, b, out):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        out[r, c] = Z[r, c] + b[c]


@cuda.jit
def bias_relu_thread_index(Z, b, out):
    c, r = cuda.threadIdx.x, cuda.threadIdx.y
    if r < Z.shape[0] and c < Z.shape[1]:
        z = Z[r, c] + b[c]
        out[r, c] = z if z > 0 else 0


@cuda.jit
def bias_relu_list(Z, b, out):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        values = [Z[r, c] + b[c], 0.0]
        out[r, c] = max(values)


@pytest.mark.parametrize("seed", SEEDS)
def test_bias_relu_passes_a_right_kernel(seed):
    assert ch05.check_bias_relu(bias_relu, seed=seed, show=False).status == PASSED


@pytest.mark.parametrize("kernel, status, words", [
    (bias_relu_stub, NOT_ATTEMPTED, "cuda.grid(2)"),
    (bias_relu_no_guard, FAILED, "guard both directions"),
    (bias_relu_no_bias, FAILED, "add b[c] before the ReLU"),
    (bias_relu_no_relu, FAILED, "keep only positive values"),
    (bias_relu_thread_index, FAILED, "not `cuda.threadIdx` alone"),
    (bias_relu_list, FAILED, "cuda.local.array"),
    (None, NOT_ATTEMPTED, "write the kernel"),
])
def test_bias_relu_explains_mistakes(kernel, status, words):
    result = ch05.check_bias_relu(kernel, seed=3, show=False)
    assert result.status == status, result
    assert words in result.message + result.hint, result


def test_traffic():
    def right(M, N, fused, itemsize):
        return itemsize * ((2 if fused else 4) * M * N + N)

    def values_not_bytes(M, N, fused, itemsize):
        return (2 if fused else 4) * M * N + N

    def stub(M, N, fused, itemsize):
        raise NotImplementedError()

    assert ch05.check_traffic(right, show=False).passed
    result = ch05.check_traffic(values_not_bytes, seed=1, show=False)
    assert result.status == FAILED and "itemsize" in result.hint
    assert ch05.check_traffic(stub, show=False).status == NOT_ATTEMPTED


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


# --- chapter 08 ------------------------------------------------------------------------------


def parameter_memory(widths, optimiser, itemsize):
    P = sum(a * b + b for a, b in zip(widths[:-1], widths[1:], strict=True))
    return (2 + {"sgd": 1, "adam": 2}[optimiser]) * P * itemsize


def no_biases(widths, optimiser, itemsize):
    P = sum(a * b for a, b in zip(widths[:-1], widths[1:], strict=True))
    return (2 + {"sgd": 1, "adam": 2}[optimiser]) * P * itemsize


@pytest.mark.parametrize("function, status, words", [
    (parameter_memory, PASSED, "right"),
    (no_biases, FAILED, "biases are missing"),
    (lambda w, o, i: parameter_memory(w, "sgd", i), FAILED, "two tensors"),
])
def test_parameter_memory(function, status, words):
    result = ch08.check_parameter_memory(function, seed=9, show=False)
    assert result.status == status, result
    assert words in result.message + result.hint, result


def largest_batch(budget, widths, candidates):
    fitting = [b for b in sorted(candidates) if cost.training_memory(widths, b).total <= budget]
    return fitting[-1] if fitting else None


def smallest_batch(budget, widths, candidates):
    fitting = [b for b in sorted(candidates) if cost.training_memory(widths, b).total <= budget]
    return fitting[0] if fitting else None


@pytest.mark.parametrize("function, status, words", [
    (largest_batch, PASSED, "right"),
    (smallest_batch, FAILED, "smallest batch that fits"),
    (lambda budget, widths, candidates: max(candidates), FAILED, "nothing fits"),
])
def test_largest_batch(function, status, words):
    result = ch08.check_largest_batch(function, seed=10, show=False)
    assert result.status == status, result
    assert words in result.message + result.hint, result


def test_stubs_are_not_attempted_everywhere():
    def stub(*args):
        raise NotImplementedError()

    for check in (ch05.check_traffic, ch06.check_numeric_gradient, ch06.check_dense_backward,
                  ch07.check_minibatches, ch08.check_parameter_memory, ch08.check_largest_batch):
        assert check(stub, show=False).status == NOT_ATTEMPTED, check.__name__
