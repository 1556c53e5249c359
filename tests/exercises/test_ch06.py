"""Chapter 06's checks (dense backward, bias and activation backward, the bias-gradient column
reduction, the tiled transpose, the numeric gradient) against right answers over several seeds,
the stubs, and the wrong answers learners write: each must fail with the hint that names its
mistake."""

import math
import re

import numba
import numpy as np
import pytest
from numba import cuda

from gpulab.exercises import ch06
from gpulab.exercises.results import FAILED, NOT_ATTEMPTED, PASSED

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
def relu_mask_with_a_margin(dA, Z, b, act, dZ):  # z > -1e-3: small negatives let through
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        z = Z[r, c] + b[c]
        if act == RELU:
            dZ[r, c] = dA[r, c] if z > -1e-3 else 0
        elif act == TANH:
            t = math.tanh(z)
            dZ[r, c] = dA[r, c] * (1 - t * t)
        else:
            dZ[r, c] = dA[r, c]


@pytest.mark.parametrize("seed", [1, 7, 12345])
def test_backward_plants_z_near_0_so_a_relu_margin_fails(seed):
    result = ch06.check_bias_activation_backward(relu_mask_with_a_margin, seed=seed, show=False)
    assert result.status == FAILED, result


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


@cuda.jit
def backward_bias_shared(dA, Z, b, act, dZ):  # right: each block's biases read once, shared
    bias = cuda.shared.array(64, numba.float32)
    c, r = cuda.grid(2)
    if cuda.threadIdx.y == 0 and c < Z.shape[1]:
        bias[cuda.threadIdx.x] = b[c]
    cuda.syncthreads()
    if r < Z.shape[0] and c < Z.shape[1]:
        z = Z[r, c] + bias[cuda.threadIdx.x]
        if act == RELU:
            dZ[r, c] = dA[r, c] if z > 0 else 0
        elif act == TANH:
            dZ[r, c] = dA[r, c] * (1 - math.tanh(z) ** 2)
        else:
            dZ[r, c] = dA[r, c]


@cuda.jit
def backward_bias_shared_unsynced(dA, Z, b, act, dZ):  # no barrier: rows read unset slots
    bias = cuda.shared.array(64, numba.float32)
    c, r = cuda.grid(2)
    if cuda.threadIdx.y == 0 and c < Z.shape[1]:
        bias[cuda.threadIdx.x] = b[c]
    if r < Z.shape[0] and c < Z.shape[1]:
        z = Z[r, c] + bias[cuda.threadIdx.x]
        if act == RELU:
            dZ[r, c] = dA[r, c] if z > 0 else 0
        elif act == TANH:
            dZ[r, c] = dA[r, c] * (1 - math.tanh(z) ** 2)
        else:
            dZ[r, c] = dA[r, c]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("kernel", [backward, backward_bias_shared])
def test_backward_passes_a_right_kernel(kernel, seed):
    result = ch06.check_bias_activation_backward(kernel, seed=seed, show=False)
    assert result.status == PASSED, result


@pytest.mark.parametrize("kernel, status, words", [
    (backward_stub, NOT_ATTEMPTED, "derivative"),
    (no_derivative, FAILED, "derivative is missing"),
    (relu_no_bias, FAILED, "the bias is left out of z"),
    (mask_only, FAILED, "chain rule multiplies"),
    (tanh_f_not_f_prime, FAILED, "not by f(z) itself"),
    (tanh_one_minus_z_squared, FAILED, "square tanh(z), not z"),
    (identity_gets_relu, FAILED, "read the code in act"),
    (backward_in_place, FAILED, "wrote into its input dA"),
    (backward_swapped, FAILED, "the first value it gives is the column"),
    (backward_one_short, FAILED, "the guard is one short"),
    (backward_bias_shared_unsynced, FAILED, "has no `cuda.syncthreads()`"),
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
def starts_from_db_itself(dZ, db):  # a local sum, but started from db[c]'s own (unset) value
    c = cuda.grid(1)
    if c < dZ.shape[1]:
        total = db[c]
        for r in range(dZ.shape[0]):
            total += dZ[r, c]
        db[c] = total


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


@cuda.jit
def bias_grad_rows_from_db(dZ, db):  # the loop over the rows bounded by db's length (columns)
    c = cuda.grid(1)
    if c < dZ.shape[1]:
        total = 0.0
        for r in range(db.shape[0]):
            total += dZ[r, c]
        db[c] = total


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
    (starts_from_db_itself, FAILED, "started from db[c]'s own value"),
    (writes_every_row, FAILED, "write db once, after the loop"),
    (bias_grad_no_guard, FAILED, "strictly less than"),
    (bias_grad_swapped, FAILED, "dZ[r, c] is row r"),
    (bias_grad_thread_index, FAILED, "block's index and size"),
    (guard_on_rows, FAILED, "not with dZ.shape[0]"),
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
    tile = cuda.shared.array((TILE, TILE_COLUMNS), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    r0, c0 = cuda.blockIdx.y * TILE, cuda.blockIdx.x * TILE
    if r0 + tx < A.shape[0] and c0 + ty < A.shape[1]:
        tile[tx, ty] = A[r0 + tx, c0 + ty]  # x down A's columns: strided reads
    cuda.syncthreads()
    if c0 + ty < A.shape[1] and r0 + tx < A.shape[0]:
        out[c0 + ty, r0 + tx] = tile[tx, ty]


@cuda.jit
def transpose_grid_over_out(A, out):
    c, r = cuda.grid(2)  # (c, r) of out: the grid taken as out's, not A's
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


@cuda.jit
def transpose_tiled_unpadded(A, out):  # right: a TILE x TILE tile, its columns in one bank
    tile = cuda.shared.array((TILE, TILE), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    r0, c0 = cuda.blockIdx.y * TILE, cuda.blockIdx.x * TILE
    if r0 + ty < A.shape[0] and c0 + tx < A.shape[1]:
        tile[ty, tx] = A[r0 + ty, c0 + tx]
    cuda.syncthreads()
    if c0 + ty < A.shape[1] and r0 + tx < A.shape[0]:
        out[c0 + ty, r0 + tx] = tile[tx, ty]


@cuda.jit
def transpose_tiled_unpadded_writes_down(A, out):  # right: the tile written down its columns
    tile = cuda.shared.array((TILE, TILE), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    r0, c0 = cuda.blockIdx.y * TILE, cuda.blockIdx.x * TILE
    if r0 + ty < A.shape[0] and c0 + tx < A.shape[1]:
        tile[tx, ty] = A[r0 + ty, c0 + tx]
    cuda.syncthreads()
    if c0 + ty < A.shape[1] and r0 + tx < A.shape[0]:
        out[c0 + ty, r0 + tx] = tile[ty, tx]


def test_transpose_counts_the_tiles_bank_conflicts_and_notes_them_without_failing():
    padded = ch06.check_transpose_tiled(transpose_tiled, tile=TILE, seed=3, show=False)
    assert padded.status == PASSED, padded
    assert ("a warp's read of the tile takes up to 2 passes, a write up to 2 (1: no bank "
            "conflict; a warp spans 2 rows of a 16-wide tile, so a tile padded by one column "
            "still takes 2)." in padded.message), padded.message
    assert not [note for note in padded.notes if "bank" in note], padded.notes
    for kernel, kind, said in (
            (transpose_tiled_unpadded, "read", "read of the tile takes up to 8 passes, a write "
                                               "up to 1"),
            (transpose_tiled_unpadded_writes_down, "write", "read of the tile takes up to 1 "
                                                            "pass, a write up to 8")):
        result = ch06.check_transpose_tiled(kernel, tile=TILE, seed=3, show=False)
        assert result.status == PASSED, result
        assert said in result.message, result.message
        note, = [note for note in result.notes if "bank" in note]
        assert f"one warp's {kind} of your tile asks a single shared-memory bank for 8" in note
        assert "words 0, 32, 64, ... (row-major) all sit in bank 0" in note


@cuda.jit
def transpose_tiled_float64(A, out):  # right, for float64: no bank sentence (8-byte words)
    tile = cuda.shared.array((TILE, TILE), np.float64)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    r0, c0 = cuda.blockIdx.y * TILE, cuda.blockIdx.x * TILE
    if r0 + ty < A.shape[0] and c0 + tx < A.shape[1]:
        tile[ty, tx] = A[r0 + ty, c0 + tx]
    cuda.syncthreads()
    if c0 + ty < A.shape[1] and r0 + tx < A.shape[0]:
        out[c0 + ty, r0 + tx] = tile[tx, ty]


def test_transpose_says_nothing_of_banks_for_elements_of_8_bytes():
    result = ch06.check_transpose_tiled(transpose_tiled_float64, tile=TILE, seed=3,
                                        dtype=np.float64, show=False)
    assert result.status == PASSED, result
    assert "bank" not in result.message and not [n for n in result.notes if "bank" in n]


@pytest.mark.parametrize("kernel, status, words", [
    (transpose_stub, NOT_ATTEMPTED, "TILE x TILE tile"),
    (transpose_naive, FAILED, "writes of out are strided"),
    (transpose_strided_reads, FAILED, "reads of A are strided"),
    (tile_without_barrier, FAILED, "wait at a barrier"),
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


# --- more wrong answers, and right ones written differently (issue 22) --------------------------


@cuda.jit
def relu_on_dA(dA, Z, b, act, dZ):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        dZ[r, c] = dA[r, c] if dA[r, c] > 0 else 0


@cuda.jit
def tanh_no_square(dA, Z, b, act, dZ):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        z = Z[r, c] + b[c]
        if act == RELU:
            dZ[r, c] = dA[r, c] if z > 0 else 0
        elif act == TANH:
            dZ[r, c] = dA[r, c] * (1 - math.tanh(z))
        else:
            dZ[r, c] = dA[r, c]


@cuda.jit
def backward_hard_coded_block(dA, Z, b, act, dZ):
    c = cuda.blockIdx.x * 8 + cuda.threadIdx.x
    r = cuda.blockIdx.y * 8 + cuda.threadIdx.y
    if r < Z.shape[0] and c < Z.shape[1]:
        z = Z[r, c] + b[c]
        if act == RELU:
            dZ[r, c] = dA[r, c] if z > 0 else 0
        elif act == TANH:
            dZ[r, c] = dA[r, c] * (1 - math.tanh(z) ** 2)
        else:
            dZ[r, c] = dA[r, c]


@cuda.jit
def backward_le_guard(dA, Z, b, act, dZ):
    c, r = cuda.grid(2)
    if r <= Z.shape[0] and c <= Z.shape[1]:
        dZ[r, c] = dA[r, c] if Z[r, c] + b[c] > 0 else 0


@cuda.jit
def backward_thread_index(dA, Z, b, act, dZ):
    c, r = cuda.threadIdx.x, cuda.threadIdx.y
    if r < Z.shape[0] and c < Z.shape[1]:
        dZ[r, c] = dA[r, c] if Z[r, c] + b[c] > 0 else 0


@cuda.jit
def backward_relu_ge(dA, Z, b, act, dZ):  # right: >= differs from > only at exactly 0
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        z = Z[r, c] + b[c]
        d = 1.0
        if act == RELU:
            d = 1.0 if z >= 0 else 0.0
        if act == TANH:
            d = 1.0 - math.tanh(z) ** 2
        dZ[r, c] = dA[r, c] * d


@cuda.jit
def backward_spelled_out(dA, Z, b, act, dZ):  # right: the index written out, rows first
    row = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    col = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if row >= dZ.shape[0] or col >= dZ.shape[1]:
        return
    z = Z[row, col] + b[col]
    if act == IDENTITY:
        dZ[row, col] = dA[row, col]
    elif act == RELU:
        dZ[row, col] = dA[row, col] * (z > 0)
    else:
        t = math.tanh(z)
        dZ[row, col] = dA[row, col] - dA[row, col] * t * t


@cuda.jit
def backward_bias_of_the_row(dA, Z, b, act, dZ):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        z = Z[r, c] + b[r]
        d = 1.0
        if act == RELU:
            d = 1.0 if z > 0 else 0.0
        elif act == TANH:
            d = 1.0 - math.tanh(z) ** 2
        dZ[r, c] = dA[r, c] * d


@cuda.jit
def backward_no_identity_branch(dA, Z, b, act, dZ):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        z = Z[r, c] + b[c]
        if act == RELU:
            dZ[r, c] = dA[r, c] if z > 0 else 0.0
        elif act == TANH:
            dZ[r, c] = dA[r, c] * (1 - math.tanh(z) ** 2)


@cuda.jit
def backward_guessed_codes(dA, Z, b, act, dZ):  # tanh guessed as 2 (GELU's code)
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        z = Z[r, c] + b[c]
        d = 1.0
        if act == 1:
            d = 1.0 if z > 0 else 0.0
        elif act == 2:
            d = 1.0 - math.tanh(z) ** 2
        dZ[r, c] = dA[r, c] * d


@cuda.jit
def backward_tanh_from_exp(dA, Z, b, act, dZ):  # right: tanh from exp, literal codes 1 and 3
    c, r = cuda.grid(2)
    if r < dZ.shape[0] and c < dZ.shape[1]:
        z = Z[r, c] + b[c]
        g = dA[r, c]
        if act == 3:
            e = math.exp(-2.0 * z)
            t = (1.0 - e) / (1.0 + e)
            g = g * (1.0 - t * t)
        elif act == 1 and z <= 0:
            g = 0.0
        dZ[r, c] = g


def test_backward_names_the_bias_of_the_row():
    result = ch06.check_bias_activation_backward(backward_bias_of_the_row, seed=6, show=False)
    assert result.status == FAILED and "bias of each row" in result.message, result


@pytest.mark.parametrize("kernel, words", [
    (backward_no_identity_branch, "Every code needs its branch, identity too"),
    (backward_guessed_codes, "compares act with 2"),
    (relu_on_dA, "not on the gradient dA"),
    (tanh_no_square, "the square is missing"),
    (backward_hard_coded_block, "hard-codes the block size"),
    (backward_le_guard, "`<=`"),
    (backward_thread_index, "only the first block's"),
])
def test_backward_names_more_mistakes(kernel, words):
    result = ch06.check_bias_activation_backward(kernel, seed=5, show=False)
    assert result.status == FAILED, result
    assert words in result.message + result.hint, result


@pytest.mark.parametrize("kernel", [backward_relu_ge, backward_spelled_out,
                                    backward_tanh_from_exp])
def test_backward_accepts_right_kernels_written_differently(kernel):
    result = ch06.check_bias_activation_backward(kernel, seed=7, show=False)
    assert result.status == PASSED, result


@cuda.jit
def skips_first_row(dZ, db):
    c = cuda.grid(1)
    if c < dZ.shape[1]:
        total = 0.0
        for r in range(1, dZ.shape[0]):
            total += dZ[r, c]
        db[c] = total


@cuda.jit
def last_row_only(dZ, db):
    c = cuda.grid(1)
    if c < dZ.shape[1]:
        total = 0.0
        for r in range(dZ.shape[0]):
            total = dZ[r, c]
        db[c] = total


@cuda.jit
def bias_grad_one_short(dZ, db):
    c = cuda.grid(1)
    if c < dZ.shape[1] - 1:
        total = 0.0
        for r in range(dZ.shape[0]):
            total += dZ[r, c]
        db[c] = total


@cuda.jit
def batch_times_sum(dZ, db):
    c = cuda.grid(1)
    if c < dZ.shape[1]:
        total = 0.0
        for r in range(dZ.shape[0]):
            total += dZ[r, c] * dZ.shape[0]
        db[c] = total


@cuda.jit
def bias_grad_while(dZ, db):  # right: a while loop and the index written out
    c = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if c >= db.shape[0]:
        return
    acc = dZ[0, c]
    r = 1
    while r < dZ.shape[0]:
        acc += dZ[r, c]
        r += 1
    db[c] = acc


@cuda.jit
def bias_grad_backwards(dZ, db):  # right: the rows summed from the last to the first
    c = cuda.grid(1)
    if c < db.size:
        s = 0.0
        for r in range(dZ.shape[0] - 1, -1, -1):
            s = s + dZ[r, c]
        db[c] = s


@cuda.jit
def owner_adds_with_atomics(dZ, db):  # right sums, but an atomic per row
    c = cuda.grid(1)
    if c < dZ.shape[1]:
        db[c] = 0.0
        for r in range(dZ.shape[0]):
            cuda.atomic.add(db, c, dZ[r, c])


@cuda.jit
def bias_grad_block_32(dZ, db):
    c = cuda.blockIdx.x * 32 + cuda.threadIdx.x
    if c < dZ.shape[1]:
        total = 0.0
        for r in range(dZ.shape[0]):
            total += dZ[r, c]
        db[c] = total


@cuda.jit
def first_row_twice(dZ, db):
    c = cuda.grid(1)
    if c < dZ.shape[1]:
        total = dZ[0, c]
        for r in range(dZ.shape[0]):
            total += dZ[r, c]
        db[c] = total


@cuda.jit
def bias_grad_grid_stride(dZ, db):  # right: a grid-stride loop over the columns
    for c in range(cuda.grid(1), dZ.shape[1], cuda.gridsize(1)):
        total = 0.0
        for r in range(dZ.shape[0]):
            total += dZ[r, c]
        db[c] = total


@pytest.mark.parametrize("kernel, words", [
    (owner_adds_with_atomics, "wrote its db[c] 6 times"),
    (bias_grad_block_32, "hard-codes the block size, but this launch's blocks have 96"),
    (first_row_twice, "the first row is counted twice"),
    (skips_first_row, "the first row is missing"),
    (last_row_only, "only the last row"),
    (bias_grad_one_short, "The last column was skipped"),
    (batch_times_sum, "batch times too large"),
])
def test_bias_grad_names_more_mistakes(kernel, words):
    result = ch06.check_bias_grad(kernel, seed=5, show=False)
    assert result.status == FAILED, result
    assert words in result.message + result.hint, result


@cuda.jit
def bias_grad_block_64(dZ, db):  # the block size typed in: right only with 64 threads a block
    c = cuda.blockIdx.x * 64 + cuda.threadIdx.x
    if c < dZ.shape[1]:
        total = 0.0
        for r in range(dZ.shape[0]):
            total += dZ[r, c]
        db[c] = total


@pytest.mark.parametrize("seed", [1, 6, 9])  # seeds whose first launch has 64 threads a block
def test_bias_grad_runs_under_two_block_sizes(seed):
    result = ch06.check_bias_grad(bias_grad_block_64, seed=seed, show=False)
    assert result.status == FAILED, result
    assert "`c = cuda.blockIdx.x * 64 + cuda.threadIdx.x` hard-codes the block size" in (
        result.message), result


def test_a_row_loop_bounded_by_the_columns_names_dz_and_its_axis():
    for seed in (5, 6):
        result = ch06.check_bias_grad(bias_grad_rows_from_db, seed=seed, show=False)
        assert result.status == FAILED and "shared or local" not in result.message, result
        assert re.search(r"dZ has shape \(\d+, \d+\): the index ran past its axis 0 \(\d+\) "
                         "but fits its axis 1", result.message), result
        assert "a bound taken from another axis or array?" in result.message, result


@pytest.mark.parametrize("kernel", [bias_grad_while, bias_grad_backwards, bias_grad_grid_stride])
def test_bias_grad_accepts_right_kernels_written_differently(kernel):
    for seed in (5, 8):
        result = ch06.check_bias_grad(kernel, seed=seed, show=False)
        assert result.status == PASSED, result


@cuda.jit
def transpose_swapped_blocks(A, out):
    tile = cuda.shared.array((TILE, TILE_COLUMNS), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    r0, c0 = cuda.blockIdx.x * TILE, cuda.blockIdx.y * TILE  # x and y exchanged
    if r0 + ty < A.shape[0] and c0 + tx < A.shape[1]:
        tile[ty, tx] = A[r0 + ty, c0 + tx]
    cuda.syncthreads()
    if c0 + ty < A.shape[1] and r0 + tx < A.shape[0]:
        out[c0 + ty, r0 + tx] = tile[tx, ty]


@cuda.jit
def transpose_never_stores(A, out):
    tile = cuda.shared.array((TILE, TILE_COLUMNS), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    r0, c0 = cuda.blockIdx.y * TILE, cuda.blockIdx.x * TILE
    if r0 + ty < A.shape[0] and c0 + tx < A.shape[1]:
        tile[ty, tx] = A[r0 + ty, c0 + tx]
    cuda.syncthreads()


@cuda.jit
def transpose_into_A(A, out):
    tile = cuda.shared.array((TILE, TILE_COLUMNS), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    r0, c0 = cuda.blockIdx.y * TILE, cuda.blockIdx.x * TILE
    if r0 + ty < A.shape[0] and c0 + tx < A.shape[1]:
        tile[ty, tx] = A[r0 + ty, c0 + tx]
        A[r0 + ty, c0 + tx] = 0
    cuda.syncthreads()
    if c0 + ty < A.shape[1] and r0 + tx < A.shape[0]:
        out[c0 + ty, r0 + tx] = tile[tx, ty]


@cuda.jit
def transpose_square_tile(A, out):  # right: no padding column, the block's own sizes
    tile = cuda.shared.array((TILE, TILE), np.float32)
    x = cuda.blockIdx.x * cuda.blockDim.x
    y = cuda.blockIdx.y * cuda.blockDim.y
    i, j = cuda.threadIdx.y, cuda.threadIdx.x
    if y + i < A.shape[0] and x + j < A.shape[1]:
        tile[i, j] = A[y + i, x + j]
    cuda.syncthreads()
    if x + i < out.shape[0] and y + j < out.shape[1]:
        out[x + i, y + j] = tile[j, i]


@cuda.jit
def transpose_grid_then_tile(A, out):  # right: from cuda.grid(2), the tile's corner derived
    tile = cuda.shared.array((TILE, TILE_COLUMNS), np.float32)
    c, r = cuda.grid(2)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    if r < A.shape[0] and c < A.shape[1]:
        tile[ty, tx] = A[r, c]
    cuda.syncthreads()
    out_r = c - tx + ty
    out_c = r - ty + tx
    if out_r < out.shape[0] and out_c < out.shape[1]:
        out[out_r, out_c] = tile[tx, ty]


@cuda.jit
def barrier_before_the_load(A, out):
    tile = cuda.shared.array((TILE, TILE_COLUMNS), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    r0, c0 = cuda.blockIdx.y * TILE, cuda.blockIdx.x * TILE
    cuda.syncthreads()
    if r0 + ty < A.shape[0] and c0 + tx < A.shape[1]:
        tile[ty, tx] = A[r0 + ty, c0 + tx]
    if c0 + ty < A.shape[1] and r0 + tx < A.shape[0]:
        out[c0 + ty, r0 + tx] = tile[tx, ty]


@cuda.jit
def tile_stored_in_its_own_place(A, out):  # read crosswise, but not moved to the mirror block
    tile = cuda.shared.array((TILE, TILE_COLUMNS), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    r0, c0 = cuda.blockIdx.y * TILE, cuda.blockIdx.x * TILE
    if r0 + ty < A.shape[0] and c0 + tx < A.shape[1]:
        tile[ty, tx] = A[r0 + ty, c0 + tx]
    cuda.syncthreads()
    if r0 + ty < out.shape[0] and c0 + tx < out.shape[1]:
        out[r0 + ty, c0 + tx] = tile[tx, ty]


@cuda.jit
def transpose_written_transposed(A, out):  # right: the tile filled crosswise, read straight
    tile = cuda.shared.array((TILE, TILE_COLUMNS), np.float64)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row, col = cuda.blockIdx.y * TILE + ty, cuda.blockIdx.x * TILE + tx
    if row < A.shape[0] and col < A.shape[1]:
        tile[tx, ty] = A[row, col]
    cuda.syncthreads()
    out_row, out_col = cuda.blockIdx.x * TILE + ty, cuda.blockIdx.y * TILE + tx
    if out_row < out.shape[0] and out_col < out.shape[1]:
        out[out_row, out_col] = tile[ty, tx]


@pytest.mark.parametrize("kernel, words", [
    (barrier_before_the_load, "after filling the tile"),
    (tile_stored_in_its_own_place, "the tile's transposed place"),
    (transpose_grid_over_out, "block indices swapped"),
    (transpose_never_stores, "wrote nothing into out"),
    (transpose_into_A, "wrote into its input A"),
])
def test_transpose_names_more_mistakes(kernel, words):
    result = ch06.check_transpose_tiled(kernel, tile=TILE, seed=5, show=False)
    assert result.status == FAILED, result
    assert words in result.message + result.hint, result


@pytest.mark.parametrize("seed", range(10))
def test_transpose_swapped_block_indices_fail_on_every_seed(seed):
    # the hole of issue 22: A used to have as many tiles down as across on 3 seeds of 5
    result = ch06.check_transpose_tiled(transpose_swapped_blocks, tile=TILE, seed=seed,
                                        show=False)
    assert result.status == FAILED, result
    assert "block indices swapped" in result.message, result


@pytest.mark.parametrize("kernel", [transpose_square_tile, transpose_grid_then_tile,
                                    transpose_written_transposed])
def test_transpose_accepts_right_kernels_written_differently(kernel):
    result = ch06.check_transpose_tiled(kernel, tile=TILE, seed=9, show=False)
    assert result.status == PASSED, result


def numeric_gradient_flat(f, x, eps):  # right: over flat indices, into a list
    values = []
    for k in range(x.size):
        i = np.unravel_index(k, x.shape)
        old = x[i]
        x[i] = old + eps
        up = f()
        x[i] = old - eps
        down = f()
        x[i] = old
        values.append((up - down) / (2 * eps))
    return np.array(values).reshape(x.shape)


def numeric_gradient_nditer(f, x, eps):  # right: np.nditer with multi_index
    grad = np.empty_like(x)
    it = np.nditer(x, flags=["multi_index"])
    for _ in it:
        i = it.multi_index
        saved = float(x[i])
        x[i] = saved + eps
        plus = f()
        x[i] = saved - eps
        grad[i] = (plus - f()) / (2 * eps)
        x[i] = saved
    return grad


def perturbs_a_copy(f, x, eps):
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        y = x.copy()
        y[i] += eps
        plus = f()
        y[i] -= 2 * eps
        grad[i] = (plus - f()) / (2 * eps)
    return grad


def all_at_once(f, x, eps):
    saved = x.copy()
    x += eps
    plus = f()
    x[...] = saved - eps
    minus = f()
    x[...] = saved
    return np.full(x.shape, (plus - minus) / (2 * eps))


def backward_one_sided(f, x, eps):
    grad = np.zeros_like(x)
    base = f()
    for i in np.ndindex(x.shape):
        saved = x[i]
        x[i] = saved - eps
        grad[i] = (base - f()) / eps
        x[i] = saved
    return grad


def flat_result(f, x, eps):
    return numeric_gradient(f, x, eps).ravel()


def own_eps(f, x, eps):
    return numeric_gradient(f, x, 0.05)


def restored_by_arithmetic(f, x, eps):
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        x[i] += eps
        plus = f()
        x[i] -= 2 * eps
        minus = f()
        x[i] += eps
        grad[i] = (plus - minus) / (2 * eps)
    return grad


def base_outside_the_loop(f, x, eps):
    grad = np.zeros_like(x)
    plus = f()
    for i in np.ndindex(x.shape):
        saved = x[i]
        x[i] = saved - eps
        grad[i] = (plus - f()) / (2 * eps)
        x[i] = saved
    return grad


def a_row_at_a_time(f, x, eps):  # x[i] of a 2-D x is a row
    grad = np.zeros_like(x)
    for i in range(len(x)):
        saved = x[i].copy()
        x[i] = saved + eps
        plus = f()
        x[i] = saved - eps
        minus = f()
        x[i] = saved
        grad[i] = (plus - minus) / (2 * eps)
    return grad


def two_axes_only(f, x, eps):  # right for the 2-D x, an IndexError on a 1-D one
    grad = np.zeros_like(x)
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            saved = x[i, j]
            x[i, j] = saved + eps
            plus = f()
            x[i, j] = saved - eps
            grad[i, j] = (plus - f()) / (2 * eps)
            x[i, j] = saved
    return grad


@pytest.mark.parametrize("function, words", [
    (two_axes_only, "but not for a 1-D x"),
    (restored_by_arithmetic, "does not give back the same float"),
    (base_outside_the_loop, "half a one-sided difference"),
    (a_row_at_a_time, "a row was moved at once"),
    (perturbs_a_copy, "a copy"),
    (lambda f, x, eps: numeric_gradient(f, x, eps) / 2, "half the derivative"),
    (lambda f, x, eps: -numeric_gradient(f, x, eps), "opposite sign"),
    (all_at_once, "perturbed at once"),
    (backward_one_sided, "one-sided difference"),
    (flat_result, "one derivative per entry"),
    (own_eps, "with the eps given"),
    (lambda f, x, eps: numeric_gradient(f, x, eps) + 1, "the derivative is"),
    (lambda f, x, eps: numeric_gradient(f, x, eps).astype(np.int64), "(whole numbers)"),
])
def test_numeric_gradient_names_more_mistakes(function, words):
    result = ch06.check_numeric_gradient(function, seed=2, show=False)
    assert result.status == FAILED, result
    assert words in result.message + result.hint, result


@pytest.mark.parametrize("function", [numeric_gradient_flat, numeric_gradient_nditer])
def test_numeric_gradient_accepts_right_answers_written_differently(function):
    for seed in (1, 2):
        assert ch06.check_numeric_gradient(function, seed=seed, show=False).passed


def dense_normalises_dZ_in_place(X, W, dZ):  # every gradient / batch, and dZ changed
    dZ /= len(X)
    return X.T @ dZ, dZ.sum(axis=0), dZ @ W.T


def dense_centres_X_in_place(X, W, dZ):
    X -= X.mean(axis=0)
    return X.T @ dZ, dZ.sum(axis=0), dZ @ W.T


@pytest.mark.parametrize("function, words", [
    (dense_normalises_dZ_in_place, "changed its input dZ"),
    (dense_centres_X_in_place, "changed its input X"),
    (lambda X, W, dZ: (X.T @ dZ, dZ.sum(), dZ @ W.T), "over both axes into one number"),
    (lambda X, W, dZ: (X.T @ dZ, dZ.sum(axis=0)[:, None], dZ @ W.T), "db is a vector"),
    (lambda X, W, dZ: (X.T @ dZ, dZ.sum(axis=0), dZ @ W.T / len(X)),
     "dX is the right one divided by the batch"),
    (lambda X, W, dZ: (X.T @ dZ, dZ.sum(axis=1), dZ @ W.T), "each row of dZ"),
    (lambda X, W, dZ: (X.T @ dZ, dZ.sum(axis=0, keepdims=True), dZ @ W.T), "kept the batch"),
    (lambda X, W, dZ: (X.T @ dZ / len(X), dZ.sum(axis=0), dZ @ W.T), "divided by the batch"),
    (lambda X, W, dZ: (-(X.T @ dZ), -dZ.sum(axis=0), -(dZ @ W.T)), "opposite sign"),
    (lambda X, W, dZ: (X.T @ dZ, dZ.sum(axis=0), W @ dZ.T), "transposed"),
    (lambda X, W, dZ: (X.T @ dZ, dZ.sum(axis=0), dZ @ W), "ValueError"),
    (lambda X, W, dZ: (X.T @ dZ, dZ.sum(axis=0), dZ @ W.T * 2), "wrong values"),
    (lambda X, W, dZ: [X.T @ dZ, dZ.sum(axis=0), dZ @ W.T, None], "4 values"),
    (lambda X, W, dZ: ((X.astype(np.float32).T @ dZ.astype(np.float32)), dZ.sum(axis=0),
                       dZ @ W.T), "dW is float32 and off by float32's rounding"),
])
def test_dense_backward_names_more_mistakes(function, words):
    result = ch06.check_dense_backward(function, seed=4, show=False)
    assert result.status == FAILED, result
    assert words in result.message + result.hint, result


def dense_per_sample(X, W, dZ):  # right: one sample at a time, the gradients added up
    dW, db, dX = np.zeros_like(W), np.zeros(W.shape[1]), np.zeros_like(X)
    for s in range(len(X)):
        dW += np.outer(X[s], dZ[s])
        db += dZ[s]
        dX[s] = W @ dZ[s]
    return dW, db, dX


@pytest.mark.parametrize("function", [
    lambda X, W, dZ: [np.einsum("bi,bo->io", X, dZ), np.sum(dZ, 0), np.dot(dZ, W.T)],
    lambda X, W, dZ: (np.matmul(X.T, dZ), dZ.T.sum(axis=1), (W @ dZ.T).T),
    lambda X, W, dZ: ((dZ.T @ X).T, np.ones(len(X)) @ dZ, (W @ dZ.T).T),
    dense_per_sample,
])
def test_dense_backward_accepts_right_answers_written_differently(function):
    assert ch06.check_dense_backward(function, seed=4, show=False).passed


def test_messages_show_no_solution_code():
    """Issue 23: no failure message or hint of ch06 holds a line of the solutions."""
    texts = []
    for spec in (ch06.DENSE, ch06.BACKWARD, ch06.BIAS_GRAD, ch06.TRANSPOSE, ch06.NUMERIC):
        texts.append(spec.stub_hint)
        texts += [m.hint for m in spec.mistakes if isinstance(m.hint, str)]
        texts += [m.message for m in spec.mistakes if isinstance(m.message, str)]
    texts += [value for name, value in vars(ch06).items()
              if name.endswith("HINT") and isinstance(value, str)]
    for solution_code in ("cuda.grid(", "db[c] = total", "range(dZ.shape[0])",
                          "tile[tx, ty]", "tile[ty, tx]", "out[c0 + ty", "A[r0 + ty",
                          "(plus - minus)", "np.zeros_like(x)", "dZ.sum(axis=0)", "X.T @ dZ",
                          "c < dZ.shape[1]", "z = Z[r, c] + b[c]"):
        assert not [t for t in texts if solution_code in t], solution_code


def test_gpulab_own_kernels_and_reference_are_refused():
    from gpulab import reference
    from gpulab.kernels import dense

    for check, own in ((ch06.check_bias_activation_backward, dense.bias_activation_backward),
                       (ch06.check_bias_grad, dense.bias_grad),
                       (ch06.check_transpose_tiled, dense.transpose_tiled)):
        result = check(own, show=False)
        assert result.status == FAILED and "gpulab's own" in result.message, result

    def calls_reference(X, W, dZ):
        dX, dW, db = reference.dense_backward(dZ, X, W, np.zeros_like(dZ),
                                              np.zeros(W.shape[1]), "identity")
        return dW, db, dX

    result = ch06.check_dense_backward(calls_reference, show=False)
    assert result.status == FAILED and "gpulab's own" in result.message, result


@pytest.fixture
def small_gpu_runs(stand_in_gpu, no_wait_for_gpu, monkeypatch):
    """The stand-in GPU (kernels run in the simulator, on padded device arrays as on a GPU, no
    accesses recorded) with the GPU's sizes kept small."""
    monkeypatch.setattr(ch06, "TRANSPOSE_SIDES", {"sim": (17, 44), "gpu": (33, 80)})
    monkeypatch.setattr(ch06, "BIAS_GRAD_SIZES", {"sim": (40, 100), "gpu": (300, 700)})


def test_the_gpu_branches_pad_read_back_and_watch_the_inputs(small_gpu_runs):
    assert ch06.check_bias_grad(bias_grad, seed=3, show=False).passed
    result = ch06.check_bias_grad(bias_grad_in_place, seed=3, show=False)
    assert result.status == FAILED and "wrote into its input dZ" in result.message, result
    result = ch06.check_transpose_tiled(transpose_tiled, tile=TILE, seed=3, show=False)
    assert result.passed and "through shared memory" in result.message, result
    result = ch06.check_transpose_tiled(transpose_into_A, tile=TILE, seed=3, show=False)
    assert result.status == FAILED and "wrote into its input A" in result.message, result
    result = ch06.check_transpose_tiled(transpose_naive, tile=TILE, seed=3, show=False)
    assert result.status == FAILED and "uses no shared memory" in result.message, result


@cuda.jit
def backward_thread_per_row(dA, Z, b, act, dZ):
    """Wrong: only the threads of column 0 work, each looping over its row."""
    c, r = cuda.grid(2)
    if c == 0 and r < Z.shape[0]:
        for j in range(Z.shape[1]):
            z = Z[r, j] + b[j]
            if act == RELU:
                dZ[r, j] = dA[r, j] if z > 0 else 0.0
            elif act == TANH:
                t = math.tanh(z)
                dZ[r, j] = dA[r, j] * (1 - t * t)
            else:
                dZ[r, j] = dA[r, j]


@pytest.mark.parametrize("seed", [1, 7, 12345])
def test_backward_thread_per_row_fails_on_its_method(seed):
    result = ch06.check_bias_activation_backward(backward_thread_per_row, seed=seed, show=False)
    assert result.status == FAILED and "written by one thread" in result.message, result


@pytest.mark.parametrize("returned", [(np.zeros((3, 2)), [[1.0], [1.0, 2.0]], np.zeros((4, 3))),
                                      ("dW", "db", "dX"), (None, None, None)])
def test_dense_backward_not_arrays_of_numbers_is_told_not_a_bug(returned):
    result = ch06.check_dense_backward(lambda X, W, dZ: returned, seed=1, show=False)
    assert result.status == FAILED and "bug" not in result.message, result


@cuda.jit
def transpose_with_a_warp_barrier(A, out):
    """Wrong: `cuda.syncwarp()` where the whole block shares the tile (and the simulator has
    no syncwarp)."""
    tile = cuda.shared.array((TILE, TILE_COLUMNS), numba.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    r0, c0 = cuda.blockIdx.y * TILE, cuda.blockIdx.x * TILE
    if r0 + ty < A.shape[0] and c0 + tx < A.shape[1]:
        tile[ty, tx] = A[r0 + ty, c0 + tx]
    cuda.syncwarp()
    if c0 + ty < A.shape[1] and r0 + tx < A.shape[0]:
        out[c0 + ty, r0 + tx] = tile[tx, ty]


def test_a_function_the_simulator_lacks_is_named_as_such():
    result = ch06.check_transpose_tiled(transpose_with_a_warp_barrier, seed=1, show=False)
    assert result.status == FAILED, result
    assert "calls `cuda.syncwarp`" in result.message, result.message
    assert "Numba's CUDA simulator (where this check runs, without a GPU) does not have" in (
        result.message) and "syncthreads" in result.hint


def numeric_gradient_with_its_own_step(f, x, eps):
    """Wrong: eps ignored, a step of 1e-5 always."""
    grad = np.zeros_like(x, dtype=np.float64)
    for index in np.ndindex(x.shape):
        old = x[index]
        x[index] = old + 1e-5
        plus = f()
        x[index] = old - 1e-5
        minus = f()
        x[index] = old
        grad[index] = (plus - minus) / 2e-5
    return grad


def numeric_gradient_on_a_flat_copy(f, x, eps):
    """Wrong for a view: x.reshape(-1) of a non-contiguous x is a copy, which f never reads."""
    flat = x.reshape(-1)
    grad = np.zeros(flat.size)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + eps
        plus = f()
        flat[i] = old - eps
        minus = f()
        flat[i] = old
        grad[i] = (plus - minus) / (2 * eps)
    return grad.reshape(x.shape)


@pytest.mark.parametrize("seed", [1, 7, 12345])
@pytest.mark.parametrize("function, words", [
    (numeric_gradient_with_its_own_step, "steps by a number of its own"),
    (numeric_gradient_on_a_flat_copy, "the x you changed is a copy"),
])
def test_numeric_gradient_step_and_copy_mistakes(function, words, seed):
    result = ch06.check_numeric_gradient(function, seed=seed, show=False)
    assert result.status == "failed" and words in result.message, result


@cuda.jit
def bias_grad_block_leader(dZ, db):
    """Wrong method, right sums: thread 0 of each block sums every column of its block."""
    if cuda.threadIdx.x == 0:
        c0 = cuda.blockIdx.x * cuda.blockDim.x
        for c in range(c0, min(c0 + cuda.blockDim.x, dZ.shape[1])):
            total = 0.0
            for r in range(dZ.shape[0]):
                total += dZ[r, c]
            db[c] = total


@pytest.mark.parametrize("seed", [1, 2])
def test_bias_grad_by_one_thread_a_block_is_named_as_such(seed):
    result = ch06.check_bias_grad(bias_grad_block_leader, seed=seed, show=False)
    assert result.status == "failed" and "8 columns written by one thread" in result.message, (
        result)
    assert "inside the loop" not in result.message


@cuda.jit
def backward_two_columns_per_thread(dA, Z, b, act, dZ):
    """Wrong method, right values: each thread takes columns 2c and 2c + 1 of its row."""
    c2, r = cuda.grid(2)
    for c in (2 * c2, 2 * c2 + 1):
        if r < Z.shape[0] and c < Z.shape[1]:
            z = Z[r, c] + b[c]
            if act == RELU:
                dZ[r, c] = dA[r, c] if z > 0 else 0
            elif act == TANH:
                t = math.tanh(z)
                dZ[r, c] = dA[r, c] * (1 - t * t)
            else:
                dZ[r, c] = dA[r, c]


def test_backward_two_elements_per_thread_fails():
    result = ch06.check_bias_activation_backward(backward_two_columns_per_thread, seed=1,
                                                 show=False)
    assert result.status == "failed" and "2 elements written by one thread" in result.message, (
        result)


@cuda.jit
def backward_x_down_the_rows(dA, Z, b, act, dZ):
    """Wrong method: x taken as the row, the grid strided so every element is still written."""
    r0, c0 = cuda.grid(2)
    rows_step, cols_step = cuda.gridsize(2)
    for r in range(r0, Z.shape[0], rows_step):
        for c in range(c0, Z.shape[1], cols_step):
            z = Z[r, c] + b[c]
            d = np.float32(1)
            if act == 1:
                d = np.float32(1) if z > 0 else np.float32(0)
            elif act == 3:
                t = math.tanh(z)
                d = np.float32(1) - t * t
            dZ[r, c] = dA[r, c] * d


@pytest.mark.parametrize("seed", [1, 7])
def test_backward_names_x_down_the_rows(seed):
    result = ch06.check_bias_activation_backward(backward_x_down_the_rows, seed=seed, show=False)
    assert result.status == FAILED, result
    assert "threads side by side along x touched elements a row apart" in result.message, result
    assert "dZ[0, 0]" in result.message, result


@cuda.jit
def bias_grad_rows_bounded_by_the_columns(dZ, db):
    """Wrong: the loop over the rows stops at the smaller of rows and columns (right whenever
    the batch has fewer rows than columns)."""
    c = cuda.grid(1)
    if c < dZ.shape[1]:
        total = np.float32(0)
        for r in range(min(dZ.shape[0], dZ.shape[1])):
            total += dZ[r, c]
        db[c] = total


@pytest.mark.parametrize("seed", [1, 2, 12345])
def test_bias_grad_names_rows_bounded_by_the_columns(seed):
    result = ch06.check_bias_grad(bias_grad_rows_bounded_by_the_columns, seed=seed, show=False)
    assert result.status == FAILED, result
    assert "each column's sum stops after its first" in result.message, result.message
    assert "more rows than columns" in result.message


def numeric_gradient_restored_only_at_the_end(f, x, eps):
    """Wrong: each entry is left at x - eps while the later ones are probed, and x is put back
    only at the end (right whenever f's terms each read one entry)."""
    saved = x.copy()
    grad = np.zeros(x.shape)
    for index in np.ndindex(x.shape):
        x[index] = saved[index] + eps
        plus = f()
        x[index] = saved[index] - eps
        minus = f()
        grad[index] = (plus - minus) / (2 * eps)
    x[...] = saved
    return grad


def test_numeric_gradient_names_entries_left_moved_while_the_next_is_probed():
    result = ch06.check_numeric_gradient(numeric_gradient_restored_only_at_the_end, seed=1,
                                         show=False)
    assert result.status == FAILED, result
    assert "whose terms mix two" in result.message, result.message


@cuda.jit
def transpose_tile_typed_in(A, out):
    """Wrong: the tile's size typed in as 16 (and 17) where TILE is meant: right only while
    TILE is 16."""
    tile = cuda.shared.array((16, 17), numba.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    r0, c0 = cuda.blockIdx.y * 16, cuda.blockIdx.x * 16
    if r0 + ty < A.shape[0] and c0 + tx < A.shape[1]:
        tile[ty, tx] = A[r0 + ty, c0 + tx]
    cuda.syncthreads()
    if c0 + ty < out.shape[0] and r0 + tx < out.shape[1]:
        out[c0 + ty, r0 + tx] = tile[tx, ty]


def test_a_tile_size_typed_in_is_named_as_in_chapter_03():
    result = ch06.check_transpose_tiled(transpose_tile_typed_in, tile=16, seed=1, show=False)
    assert result.status == "failed", result
    assert "has the tile's size written as the number 16" in result.message, result.message


@cuda.jit
def transpose_barrier_some_blocks_skip(A, out):
    """Wrong: the barrier under `if cuda.blockIdx.x > 0:` (the same for a block's threads, so
    legal), so the blocks of the first column read the tile unsynchronised."""
    tile = cuda.shared.array((TILE, TILE_COLUMNS), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    r0, c0 = cuda.blockIdx.y * TILE, cuda.blockIdx.x * TILE
    if r0 + ty < A.shape[0] and c0 + tx < A.shape[1]:
        tile[ty, tx] = A[r0 + ty, c0 + tx]
    if cuda.blockIdx.x > 0:
        cuda.syncthreads()
    if c0 + ty < A.shape[1] and r0 + tx < A.shape[0]:
        out[c0 + ty, r0 + tx] = tile[tx, ty]


@pytest.mark.parametrize("seed", [1, 7])
def test_a_barrier_some_blocks_skip_is_told_as_a_missing_barrier(seed):
    result = ch06.check_transpose_tiled(transpose_barrier_some_blocks_skip, tile=TILE, seed=seed,
                                        show=False)
    assert result.status == "failed", result
    assert "before any thread wrote it" in result.message, result.message
    assert "in every block (no `if` around it)" in result.hint, result.hint


@cuda.jit(device=True)
def _load_and_wait(tile, A, r, c, tx, ty):
    if r < A.shape[0] and c < A.shape[1]:
        tile[ty, tx] = A[r, c]
    cuda.syncthreads()


@cuda.jit
def transpose_loading_in_a_device_function(A, out):
    """Right: the load and its barrier in a device function every thread calls."""
    tile = cuda.shared.array((TILE, TILE_COLUMNS), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    r0, c0 = cuda.blockIdx.y * TILE, cuda.blockIdx.x * TILE
    _load_and_wait(tile, A, r0 + ty, c0 + tx, tx, ty)
    if c0 + ty < A.shape[1] and r0 + tx < A.shape[0]:
        out[c0 + ty, r0 + tx] = tile[tx, ty]


@cuda.jit
def transpose_loading_in_a_device_function_under_the_guard(A, out):
    """Wrong: that device function, with its barrier, called only by the threads inside A."""
    tile = cuda.shared.array((TILE, TILE_COLUMNS), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    r0, c0 = cuda.blockIdx.y * TILE, cuda.blockIdx.x * TILE
    if r0 + ty < A.shape[0] and c0 + tx < A.shape[1]:
        _load_and_wait(tile, A, r0 + ty, c0 + tx, tx, ty)
    if c0 + ty < A.shape[1] and r0 + tx < A.shape[0]:
        out[c0 + ty, r0 + tx] = tile[tx, ty]


@pytest.mark.parametrize("seed", [1, 7])
def test_a_device_function_s_barrier_under_the_edge_guard_is_named(seed):
    right = ch06.check_transpose_tiled(transpose_loading_in_a_device_function, tile=TILE,
                                       seed=seed, show=False)
    assert right.passed, right.message
    wrong = ch06.check_transpose_tiled(transpose_loading_in_a_device_function_under_the_guard,
                                       tile=TILE, seed=seed, show=False)
    assert wrong.status == "failed", wrong
    assert "barrier inside a branch" in wrong.message, wrong.message
