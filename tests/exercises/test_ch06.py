"""Chapter 06's checks (dense backward, bias and activation backward, the bias-gradient column
reduction, the tiled transpose, the numeric gradient) against right answers over several seeds,
the stubs, and the wrong answers learners write: each must fail with the hint that names its
mistake."""

import math

import numpy as np
import pytest
from numba import cuda

from gpulab.exercises import ch06
from gpulab.exercises.checks import FAILED, NOT_ATTEMPTED, PASSED

SEEDS = [3, 11, 12]
IDENTITY, RELU, TANH = ch06.IDENTITY, ch06.RELU, ch06.TANH
TILE = 16
TILE_COLUMNS = TILE + 1  # a constant of its own: `TILE + 1` in a shape does not compile

# --- bias and activation backward ---------------------------------------------------------------


@cuda.jit
def backward(dA, Z, b, act, dZ):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        z = Z[r, c] + b[c]
        if act == RELU:
            dZ[r, c] = dA[r, c] if z > 0 else 0
        elif act == TANH:
            t = math.tanh(z)
            dZ[r, c] = dA[r, c] * (1 - t * t)
        else:
            dZ[r, c] = dA[r, c]


@cuda.jit
def backward_stub(dA, Z, b, act, dZ):
    # YOUR CODE HERE
    raise NotImplementedError()


@cuda.jit
def no_derivative(dA, Z, b, act, dZ):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        dZ[r, c] = dA[r, c]


@cuda.jit
def relu_no_bias(dA, Z, b, act, dZ):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        dZ[r, c] = dA[r, c] if Z[r, c] > 0 else 0


@cuda.jit
def mask_only(dA, Z, b, act, dZ):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        dZ[r, c] = 1.0 if Z[r, c] + b[c] > 0 else 0.0


@cuda.jit
def tanh_f_not_f_prime(dA, Z, b, act, dZ):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        z = Z[r, c] + b[c]
        if act == RELU:
            dZ[r, c] = dA[r, c] if z > 0 else 0
        elif act == TANH:
            dZ[r, c] = dA[r, c] * math.tanh(z)
        else:
            dZ[r, c] = dA[r, c]


@cuda.jit
def tanh_one_minus_z_squared(dA, Z, b, act, dZ):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        z = Z[r, c] + b[c]
        if act == RELU:
            dZ[r, c] = dA[r, c] if z > 0 else 0
        elif act == TANH:
            dZ[r, c] = dA[r, c] * (1 - z * z)
        else:
            dZ[r, c] = dA[r, c]


@cuda.jit
def identity_gets_relu(dA, Z, b, act, dZ):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        z = Z[r, c] + b[c]
        if act == TANH:
            t = math.tanh(z)
            dZ[r, c] = dA[r, c] * (1 - t * t)
        else:
            dZ[r, c] = dA[r, c] if z > 0 else 0


@cuda.jit
def backward_in_place(dA, Z, b, act, dZ):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        if Z[r, c] + b[c] <= 0:
            dA[r, c] = 0
        dZ[r, c] = dA[r, c]


@cuda.jit
def backward_swapped(dA, Z, b, act, dZ):
    r, c = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        dZ[r, c] = dA[r, c] if Z[r, c] + b[c] > 0 else 0


@cuda.jit
def backward_one_short(dA, Z, b, act, dZ):
    c, r = cuda.grid(2)
    if r < Z.shape[0] - 1 and c < Z.shape[1]:
        dZ[r, c] = dA[r, c] if Z[r, c] + b[c] > 0 else 0


@pytest.mark.parametrize("seed", SEEDS)
def test_backward_passes_a_right_kernel(seed):
    result = ch06.check_bias_activation_backward(backward, seed=seed, show=False)
    assert result.status == PASSED, result


@pytest.mark.parametrize("kernel, status, words", [
    (backward_stub, NOT_ATTEMPTED, "derivative"),
    (no_derivative, FAILED, "derivative is missing"),
    (relu_no_bias, FAILED, "`z = Z[r, c] + b[c]`"),
    (mask_only, FAILED, "chain rule multiplies"),
    (tanh_f_not_f_prime, FAILED, "not by f(z) itself"),
    (tanh_one_minus_z_squared, FAILED, "square tanh(z), not z"),
    (identity_gets_relu, FAILED, "read the code in act"),
    (backward_in_place, FAILED, "wrote into its input dA"),
    (backward_swapped, FAILED, "not `r, c = cuda.grid(2)`"),
    (backward_one_short, FAILED, "the guard is one short"),
])
def test_backward_names_the_mistake(kernel, status, words):
    for seed in (5, 6):
        result = ch06.check_bias_activation_backward(kernel, seed=seed, show=False)
        assert result.status == status, result
        assert words in result.message + result.hint, result


# --- the bias gradient --------------------------------------------------------------------------


@cuda.jit
def bias_grad(dZ, db):
    c = cuda.grid(1)
    if c < dZ.shape[1]:
        total = 0.0
        for r in range(dZ.shape[0]):
            total += dZ[r, c]
        db[c] = total


@cuda.jit
def bias_grad_stub(dZ, db):
    # YOUR CODE HERE
    raise NotImplementedError()


@cuda.jit
def racy_thread_per_row(dZ, db):
    r = cuda.grid(1)
    if r < dZ.shape[0]:
        for c in range(dZ.shape[1]):
            db[c] += dZ[r, c]


@cuda.jit
def atomics_without_zeroing(dZ, db):
    r = cuda.grid(1)
    if r < dZ.shape[0]:
        for c in range(dZ.shape[1]):
            cuda.atomic.add(db, c, dZ[r, c])


@cuda.jit
def mean_not_sum(dZ, db):
    c = cuda.grid(1)
    if c < dZ.shape[1]:
        total = 0.0
        for r in range(dZ.shape[0]):
            total += dZ[r, c]
        db[c] = total / dZ.shape[0]


@cuda.jit
def skips_last_row(dZ, db):
    c = cuda.grid(1)
    if c < dZ.shape[1]:
        total = 0.0
        for r in range(dZ.shape[0] - 1):
            total += dZ[r, c]
        db[c] = total


@cuda.jit
def no_start_value(dZ, db):
    c = cuda.grid(1)
    if c < dZ.shape[1]:
        for r in range(dZ.shape[0]):
            db[c] += dZ[r, c]


@cuda.jit
def writes_every_row(dZ, db):
    c = cuda.grid(1)
    if c < dZ.shape[1]:
        db[c] = 0.0
        for r in range(dZ.shape[0]):
            db[c] += dZ[r, c]


@cuda.jit
def bias_grad_no_guard(dZ, db):
    c = cuda.grid(1)
    total = 0.0
    for r in range(dZ.shape[0]):
        total += dZ[r, c]
    db[c] = total


@cuda.jit
def bias_grad_swapped(dZ, db):
    c = cuda.grid(1)
    if c < dZ.shape[1]:
        total = 0.0
        for r in range(dZ.shape[0]):
            total += dZ[c, r]
        db[c] = total


@cuda.jit
def bias_grad_thread_index(dZ, db):
    c = cuda.threadIdx.x
    if c < dZ.shape[1]:
        total = 0.0
        for r in range(dZ.shape[0]):
            total += dZ[r, c]
        db[c] = total


@cuda.jit
def guard_on_rows(dZ, db):
    c = cuda.grid(1)
    if c < dZ.shape[0]:
        total = 0.0
        for r in range(dZ.shape[0]):
            total += dZ[r, c]
        db[c] = total


@cuda.jit
def bias_grad_in_place(dZ, db):
    c = cuda.grid(1)
    if c < dZ.shape[1]:
        for r in range(1, dZ.shape[0]):
            dZ[0, c] += dZ[r, c]
        db[c] = dZ[0, c]


@pytest.mark.parametrize("seed", SEEDS)
def test_bias_grad_passes_a_right_kernel(seed):
    result = ch06.check_bias_grad(bias_grad, seed=seed, show=False)
    assert result.status == PASSED, result


@pytest.mark.parametrize("kernel, status, words", [
    (bias_grad_stub, NOT_ATTEMPTED, "one thread per column"),
    (racy_thread_per_row, FAILED, "race"),
    (atomics_without_zeroing, FAILED, "nobody set it to 0"),
    (mean_not_sum, FAILED, "not the mean"),
    (skips_last_row, FAILED, "the last row is missing"),
    (no_start_value, FAILED, "without giving it a start value"),
    (writes_every_row, FAILED, "write `db[c] = total` once"),
    (bias_grad_no_guard, FAILED, "`if c < dZ.shape[1]:`"),
    (bias_grad_swapped, FAILED, "dZ[r, c] is row r"),
    (bias_grad_thread_index, FAILED, "not `cuda.threadIdx.x` alone"),
    (guard_on_rows, FAILED, "not `dZ.shape[0]`"),
    (bias_grad_in_place, FAILED, "wrote into its input dZ"),
])
def test_bias_grad_names_the_mistake(kernel, status, words):
    for seed in (5, 6):
        result = ch06.check_bias_grad(kernel, seed=seed, show=False)
        assert result.status == status, result
        assert words in result.message + result.hint, result


# --- the tiled transpose ------------------------------------------------------------------------


@cuda.jit
def transpose_tiled(A, out):
    tile = cuda.shared.array((TILE, TILE_COLUMNS), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    r0, c0 = cuda.blockIdx.y * TILE, cuda.blockIdx.x * TILE
    if r0 + ty < A.shape[0] and c0 + tx < A.shape[1]:
        tile[ty, tx] = A[r0 + ty, c0 + tx]
    cuda.syncthreads()
    if c0 + ty < A.shape[1] and r0 + tx < A.shape[0]:
        out[c0 + ty, r0 + tx] = tile[tx, ty]


@cuda.jit
def transpose_stub(A, out):
    # YOUR CODE HERE
    raise NotImplementedError()


@cuda.jit
def transpose_naive(A, out):
    c, r = cuda.grid(2)
    if r < A.shape[0] and c < A.shape[1]:
        out[c, r] = A[r, c]


@cuda.jit
def transpose_strided_reads(A, out):
    c, r = cuda.grid(2)  # (c, r) of out this time
    if r < out.shape[0] and c < out.shape[1]:
        out[r, c] = A[c, r]


@cuda.jit
def tile_without_barrier(A, out):
    tile = cuda.shared.array((TILE, TILE_COLUMNS), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    r0, c0 = cuda.blockIdx.y * TILE, cuda.blockIdx.x * TILE
    if r0 + ty < A.shape[0] and c0 + tx < A.shape[1]:
        tile[ty, tx] = A[r0 + ty, c0 + tx]
    if c0 + ty < A.shape[1] and r0 + tx < A.shape[0]:
        out[c0 + ty, r0 + tx] = tile[tx, ty]


@cuda.jit
def tile_not_transposed(A, out):
    tile = cuda.shared.array((TILE, TILE_COLUMNS), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    r0, c0 = cuda.blockIdx.y * TILE, cuda.blockIdx.x * TILE
    if r0 + ty < A.shape[0] and c0 + tx < A.shape[1]:
        tile[ty, tx] = A[r0 + ty, c0 + tx]
    cuda.syncthreads()
    if c0 + ty < A.shape[1] and r0 + tx < A.shape[0]:
        out[c0 + ty, r0 + tx] = tile[ty, tx]


@cuda.jit
def store_guarded_like_load(A, out):
    tile = cuda.shared.array((TILE, TILE_COLUMNS), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    r0, c0 = cuda.blockIdx.y * TILE, cuda.blockIdx.x * TILE
    if r0 + ty < A.shape[0] and c0 + tx < A.shape[1]:
        tile[ty, tx] = A[r0 + ty, c0 + tx]
    cuda.syncthreads()
    if r0 + ty < A.shape[0] and c0 + tx < A.shape[1]:
        out[c0 + ty, r0 + tx] = tile[tx, ty]


@cuda.jit
def tile_but_strided_store(A, out):
    tile = cuda.shared.array((TILE, TILE_COLUMNS), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    r0, c0 = cuda.blockIdx.y * TILE, cuda.blockIdx.x * TILE
    if r0 + ty < A.shape[0] and c0 + tx < A.shape[1]:
        tile[ty, tx] = A[r0 + ty, c0 + tx]
    cuda.syncthreads()
    if c0 + tx < A.shape[1] and r0 + ty < A.shape[0]:
        out[c0 + tx, r0 + ty] = tile[ty, tx]


@cuda.jit
def barrier_in_branch(A, out):
    tile = cuda.shared.array((TILE, TILE_COLUMNS), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    r0, c0 = cuda.blockIdx.y * TILE, cuda.blockIdx.x * TILE
    if r0 + ty < A.shape[0] and c0 + tx < A.shape[1]:
        tile[ty, tx] = A[r0 + ty, c0 + tx]
        cuda.syncthreads()
    if c0 + ty < A.shape[1] and r0 + tx < A.shape[0]:
        out[c0 + ty, r0 + tx] = tile[tx, ty]


@pytest.mark.parametrize("seed", SEEDS)
def test_transpose_passes_a_tiled_kernel(seed):
    result = ch06.check_transpose_tiled(transpose_tiled, tile=TILE, seed=seed, show=False)
    assert result.status == PASSED, result
    assert "coalesced" in result.message


@pytest.mark.parametrize("kernel, status, words", [
    (transpose_stub, NOT_ATTEMPTED, "TILE x TILE tile"),
    (transpose_naive, FAILED, "writes of out are strided"),
    (transpose_strided_reads, FAILED, "reads of A are strided"),
    (tile_without_barrier, FAILED, "call `cuda.syncthreads()`"),
    (tile_not_transposed, FAILED, "content was not transposed"),
    (store_guarded_like_load, FAILED, "The two guards differ"),
    (tile_but_strided_store, FAILED, "writes of out are strided"),
    (barrier_in_branch, FAILED, "barrier inside a branch"),
])
def test_transpose_names_the_mistake(kernel, status, words):
    result = ch06.check_transpose_tiled(kernel, tile=TILE, seed=5, show=False)
    assert result.status == status, result
    assert words in result.message + result.hint, result


def test_transpose_asks_for_a_tile_a_warp_can_use():
    result = ch06.check_transpose_tiled(transpose_tiled, tile=8, seed=1, show=False)
    assert result.status == FAILED and "use 16 or 32" in result.message, result


# --- numeric gradient -------------------------------------------------------------------------


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


# --- dense backward -----------------------------------------------------------------------------


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
def test_python_stubs_are_not_attempted(check):
    def stub(*args):
        raise NotImplementedError()

    assert check(stub, show=False).status == NOT_ATTEMPTED


@pytest.mark.parametrize("seed", SEEDS)
def test_python_solutions_pass_on_several_seeds(seed):
    assert ch06.check_numeric_gradient(numeric_gradient, seed=seed, show=False).passed
    assert ch06.check_dense_backward(dense_backward, seed=seed, show=False).passed
