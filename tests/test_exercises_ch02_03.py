"""Chapter 02 and 03 checks against a right kernel and the typical wrong ones.

Every wrong kernel must be caught with a status and hint words a learner can act on. The
solutions live here and in the solution notebooks only: the package ships none.
"""

import gpulab  # noqa: F401  (must come before numba: it chooses the simulator or the GPU)

# isort: split
import pytest
from numba import cuda

from gpulab import device
from gpulab.exercises.ch02 import check_copy_grid_stride, check_saxpy
from gpulab.exercises.ch03 import MatmulTrial, check_matmul_naive, check_matmul_tiled

SIM = device.tier() == "sim"
TILE = 8 if SIM else 16
SEEDS = [1, 2]

# --- chapter 02, exercise 1: saxpy ---------------------------------------------------------------


@cuda.jit
def saxpy_solution(a, x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_stub(a, x, y, out):
    # YOUR CODE HERE
    raise NotImplementedError()


@cuda.jit
def saxpy_forgets_a(a, x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = x[i] + y[i]


@cuda.jit
def saxpy_swapped(a, x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = a * y[i] + x[i]


@cuda.jit
def saxpy_no_guard(a, x, y, out):
    i = cuda.grid(1)
    out[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_thread_index_only(a, x, y, out):
    i = cuda.threadIdx.x
    if i < x.shape[0]:
        out[i] = a * x[i] + y[i]


@pytest.mark.parametrize("seed", SEEDS)
def test_saxpy_solution_passes(seed):
    result = check_saxpy(saxpy_solution, seed=seed, show=False)
    assert result.passed, result.message


@pytest.mark.parametrize("kernel, status, words", [
    (saxpy_stub, "not attempted", "out[i] = a * x[i] + y[i]"),
    (saxpy_forgets_a, "failed", "a is missing"),
    (saxpy_swapped, "failed", "swapped"),
    (saxpy_no_guard, "failed", "guard"),
    (saxpy_thread_index_only, "failed", "cuda.grid(1)"),
])
def test_saxpy_mistakes_are_explained(kernel, status, words):
    result = check_saxpy(kernel, seed=3, show=False)
    assert result.status == status
    assert words in result.message + result.hint


def test_a_plain_function_is_not_a_kernel():
    def not_a_kernel(a, x, y, out):
        pass

    result = check_saxpy(not_a_kernel, show=False)
    assert not result.passed and "@cuda.jit" in result.hint


# --- chapter 02, exercise 2: the coalesced grid-stride copy --------------------------------------


@cuda.jit
def copy_solution(x, out):
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        out[i] = x[i]


@cuda.jit
def copy_stub(x, out):
    # YOUR CODE HERE
    raise NotImplementedError()


@cuda.jit
def copy_in_chunks(x, out):  # right answer, uncoalesced reads
    g = cuda.grid(1)
    chunk = (x.shape[0] + cuda.gridsize(1) - 1) // cuda.gridsize(1)
    for i in range(g * chunk, min((g + 1) * chunk, x.shape[0])):
        out[i] = x[i]


@cuda.jit
def copy_one_per_thread(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = x[i]


@cuda.jit
def copy_past_the_end(x, out):
    for i in range(cuda.grid(1), x.shape[0] + 1, cuda.gridsize(1)):
        out[i] = x[i]


@pytest.mark.parametrize("seed", SEEDS)
def test_copy_solution_passes(seed):
    result = check_copy_grid_stride(copy_solution, seed=seed, show=False)
    assert result.passed, result.message
    if SIM:
        assert "and coalesced" in result.message and "(ideal 4;" in result.message


@pytest.mark.parametrize("kernel, status, words", [
    (copy_stub, "not attempted", "cuda.gridsize(1)"),
    (copy_one_per_thread, "failed", "one element per thread"),
    (copy_past_the_end, "failed", "x.shape[0]"),
])
def test_copy_mistakes_are_explained(kernel, status, words):
    result = check_copy_grid_stride(kernel, seed=4, show=False)
    assert result.status == status, result.message
    assert words in result.message + result.hint


@pytest.mark.skipif(not SIM, reason="reads are traced only in the simulator")
def test_a_right_but_uncoalesced_copy_fails_with_the_sector_count():
    result = check_copy_grid_stride(copy_in_chunks, seed=5, show=False)
    assert result.status == "failed"
    assert "not coalesced" in result.message and "sectors" in result.message
    assert "cuda.gridsize(1)" in result.hint


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
