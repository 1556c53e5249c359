"""Chapter 03's checks (naive and tiled matmul) against a right kernel and the typical wrong
ones.

Every wrong kernel must be caught with a status and hint words a learner can act on. The
solutions live here and in the solution notebooks only: the package ships none.
"""

import pytest
from numba import cuda

from gpulab import device
from gpulab.exercises.ch03 import MatmulTrial, check_matmul_naive, check_matmul_tiled

SIM = device.tier() == "sim"
TILE = 8 if SIM else 16
SEEDS = [1, 2]

# --- chapter 03, exercise 1: naive matmul -------------------------------------------------------


@cuda.jit
def naive_solution(A, B, C):
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        acc = C.dtype.type(0)
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


@cuda.jit
def naive_stub(A, B, C):
    # YOUR CODE HERE
    raise NotImplementedError()


@cuda.jit
def naive_rows_and_columns_swapped(A, B, C):
    row, col = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        acc = C.dtype.type(0)
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


@cuda.jit
def naive_no_guard(A, B, C):
    col, row = cuda.grid(2)
    acc = C.dtype.type(0)
    for k in range(A.shape[1]):
        acc += A[row, k] * B[k, col]
    C[row, col] = acc


@cuda.jit
def naive_accumulates_in_c(A, B, C):
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        for k in range(A.shape[1]):
            C[row, col] += A[row, k] * B[k, col]


@cuda.jit
def naive_drops_the_last_k(A, B, C):
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        acc = C.dtype.type(0)
        for k in range(A.shape[1] - 1):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


@cuda.jit
def naive_writes_one_product(A, B, C):
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        for k in range(A.shape[1]):
            C[row, col] = A[row, k] * B[k, col]


@pytest.mark.parametrize("seed", SEEDS)
def test_naive_solution_passes(seed):
    result = check_matmul_naive(naive_solution, seed=seed, show=False)
    assert result.passed, result.message


@pytest.mark.parametrize("kernel, status, words", [
    (naive_stub, "not attempted", "cuda.grid(2)"),
    (naive_rows_and_columns_swapped, "failed", "swapped"),
    (naive_no_guard, "failed", "outside"),
    (naive_accumulates_in_c, "failed", "local variable"),
    (naive_drops_the_last_k, "failed", "last k is missing"),
    (naive_writes_one_product, "failed", "single k"),
])
def test_naive_mistakes_are_explained(kernel, status, words):
    result = check_matmul_naive(kernel, seed=6, show=False)
    assert result.status == status, result.message
    assert words in result.message + result.hint


def test_trial_sizes_are_awkward():
    for seed in range(20):
        trial = MatmulTrial.draw("t", seed, TILE)
        dims = (trial.M, trial.N, trial.K)
        assert all(d % TILE for d in dims) and len(set(dims)) == 3
        assert trial.blocks[0] != trial.blocks[1]  # swapping rows and columns shows


# --- chapter 03, exercise 2: tiled matmul -------------------------------------------------------


@cuda.jit
def tiled_solution(A, B, C):
    a_tile = cuda.shared.array((TILE, TILE), A.dtype)
    b_tile = cuda.shared.array((TILE, TILE), A.dtype)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.grid(2)
    acc = A.dtype.type(0)
    for k0 in range(0, A.shape[1], TILE):
        if row < A.shape[0] and k0 + tx < A.shape[1]:
            a_tile[ty, tx] = A[row, k0 + tx]
        else:
            a_tile[ty, tx] = 0
        if k0 + ty < B.shape[0] and col < B.shape[1]:
            b_tile[ty, tx] = B[k0 + ty, col]
        else:
            b_tile[ty, tx] = 0
        cuda.syncthreads()
        for k in range(TILE):
            acc += a_tile[ty, k] * b_tile[k, tx]
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


@cuda.jit
def tiled_without_zero_fill(A, B, C):
    a_tile = cuda.shared.array((TILE, TILE), A.dtype)
    b_tile = cuda.shared.array((TILE, TILE), A.dtype)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.grid(2)
    acc = A.dtype.type(0)
    for k0 in range(0, A.shape[1], TILE):
        if row < A.shape[0] and k0 + tx < A.shape[1]:
            a_tile[ty, tx] = A[row, k0 + tx]
        if k0 + ty < B.shape[0] and col < B.shape[1]:
            b_tile[ty, tx] = B[k0 + ty, col]
        cuda.syncthreads()
        for k in range(TILE):
            acc += a_tile[ty, k] * b_tile[k, tx]
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


@cuda.jit
def tiled_without_barriers(A, B, C):
    a_tile = cuda.shared.array((TILE, TILE), A.dtype)
    b_tile = cuda.shared.array((TILE, TILE), A.dtype)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.grid(2)
    acc = A.dtype.type(0)
    for k0 in range(0, A.shape[1], TILE):
        if row < A.shape[0] and k0 + tx < A.shape[1]:
            a_tile[ty, tx] = A[row, k0 + tx]
        else:
            a_tile[ty, tx] = 0
        if k0 + ty < B.shape[0] and col < B.shape[1]:
            b_tile[ty, tx] = B[k0 + ty, col]
        else:
            b_tile[ty, tx] = 0
        for k in range(TILE):
            acc += a_tile[ty, k] * b_tile[k, tx]
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


@cuda.jit
def tiled_unguarded_loads(A, B, C):
    a_tile = cuda.shared.array((TILE, TILE), A.dtype)
    b_tile = cuda.shared.array((TILE, TILE), A.dtype)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.grid(2)
    acc = A.dtype.type(0)
    for k0 in range(0, A.shape[1], TILE):
        a_tile[ty, tx] = A[row, k0 + tx]
        b_tile[ty, tx] = B[k0 + ty, col]
        cuda.syncthreads()
        for k in range(TILE):
            acc += a_tile[ty, k] * b_tile[k, tx]
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


@cuda.jit
def tiled_stub(A, B, C):
    a_tile = cuda.shared.array((TILE, TILE), A.dtype)  # noqa: F841  (as the learner gets it)
    # YOUR CODE HERE
    raise NotImplementedError()


def test_tiled_solution_passes():
    result = check_matmul_tiled(tiled_solution, tile=TILE, seed=7, show=False)
    assert result.passed, result.message


@pytest.mark.parametrize("kernel, status, words", [
    (tiled_stub, "not attempted", "cuda.syncthreads()"),
    (tiled_without_barriers, "failed", "0 `cuda.syncthreads()`"),
    (tiled_unguarded_loads, "failed", "load 0 instead"),
])
def test_tiled_mistakes_are_explained(kernel, status, words):
    result = check_matmul_tiled(kernel, tile=TILE, seed=8, show=False)
    assert result.status == status, result.message
    assert words in result.message + result.hint


@pytest.mark.skipif(not SIM, reason="on a GPU stale shared memory may happen to hold zeros")
def test_tiles_without_zero_fill_fail_only_at_the_edges():
    result = check_matmul_tiled(tiled_without_zero_fill, tile=TILE, seed=9, show=False)
    assert result.status == "failed"
    assert "only the tiles that hang over an edge" in result.message
    assert "load 0 instead" in result.hint
