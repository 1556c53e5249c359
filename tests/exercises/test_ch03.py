"""Chapter 03's checks (naive and tiled matmul) against a right kernel and the typical wrong
ones.

Every wrong kernel must be caught with a status and hint words a learner can act on. The
solutions live here and in the solution notebooks only: the package ships none.
"""

from math import sqrt

import numba
import numpy as np
import pytest
from numba import cuda
from numpy import multiply as np_multiply

from gpulab import device
from gpulab.exercises.ch03 import (
    NAIVE_BLOCKS,
    check_matmul_naive,
    check_matmul_tiled,
    draw_naive,
    draw_tiled,
)

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


@cuda.jit
def naive_hard_coded_block(A, B, C):
    row = cuda.blockIdx.y * 8 + cuda.threadIdx.y  # the block's size written as a number
    col = cuda.blockIdx.x * 8 + cuda.threadIdx.x
    if row < C.shape[0] and col < C.shape[1]:
        acc = C.dtype.type(0)
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


@cuda.jit
def naive_x_and_y_dimensions_mixed(A, B, C):
    row = cuda.blockIdx.y * cuda.blockDim.x + cuda.threadIdx.y  # blockDim.x where y belongs
    col = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if row < C.shape[0] and col < C.shape[1]:
        acc = C.dtype.type(0)
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


@pytest.mark.parametrize("seed", SEEDS + [3])
def test_naive_solution_passes(seed):
    result = check_matmul_naive(naive_solution, seed=seed, show=False)
    assert result.passed, result.message


@pytest.mark.parametrize("kernel, status, words", [
    (naive_stub, "not attempted", "row and column"),
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


@pytest.mark.parametrize("seed", [4, 5])
def test_naive_rows_and_columns_swapped_on_every_block_shape(seed):
    for block in NAIVE_BLOCKS["gpu" if not SIM else "sim"]:
        result = check_matmul_naive(naive_rows_and_columns_swapped, seed=seed, block=block,
                                    show=False)
        assert result.status == "failed" and "swapped" in result.message, result.message


@pytest.mark.parametrize("kernel", [naive_hard_coded_block, naive_x_and_y_dimensions_mixed])
def test_naive_kernels_that_assume_a_block_shape_fail(kernel):
    results = [check_matmul_naive(kernel, seed=seed, show=False) for seed in range(4)]
    assert all(r.status == "failed" for r in results), [r.message for r in results]
    assert all("multiplies blockIdx" in r.message and "from the launch itself" in r.hint
               for r in results)


def test_naive_trial_sizes_are_awkward():
    for seed in range(30):
        trial = draw_naive("t", seed)
        bx, by = trial.block
        assert bx != by  # the block is never square: x and y can't be confused unnoticed
        assert trial.rows % by and trial.cols % bx and len(set(trial.extents)) == 3
        # with rows and columns swapped, part of C is not covered by the grid
        assert trial.blocks[0] * bx < trial.rows or trial.blocks[1] * by < trial.cols


def test_tiled_trial_sizes_are_awkward_and_small():
    for seed in range(30):
        trial = draw_tiled("t", seed, TILE)
        dims = (trial.rows, trial.cols, trial.inner)
        assert all(d % TILE for d in dims) and len(set(dims)) == 3
        assert trial.blocks[0] != trial.blocks[1]  # swapping rows and columns shows
        assert sorted(trial.blocks) == [2, 3]  # quick to trace; a swap can't pass for
        # "only the first block written"
        assert 2 <= -(-trial.inner // TILE) <= 3


# --- more wrong-but-plausible naive answers, and right ones written differently (issue 22) --

@cuda.jit
def naive_thread_index_only(A, B, C):
    col, row = cuda.threadIdx.x, cuda.threadIdx.y
    if row < C.shape[0] and col < C.shape[1]:
        acc = C.dtype.type(0)
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


@cuda.jit
def naive_guards_rows_only(A, B, C):
    col, row = cuda.grid(2)
    if row < C.shape[0]:
        acc = C.dtype.type(0)
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


@cuda.jit
def naive_loops_over_columns(A, B, C):  # the sum over N = B.shape[1], not K
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        acc = C.dtype.type(0)
        for k in range(min(B.shape[1], A.shape[1])):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


@cuda.jit
def naive_guard_uses_a_shape(A, B, C):  # the column guard against K, not N
    col, row = cuda.grid(2)
    if row < A.shape[0] and col < A.shape[1]:
        acc = C.dtype.type(0)
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


@cuda.jit
def naive_starts_at_one(A, B, C):
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        acc = C.dtype.type(1)
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


@cuda.jit
def naive_index_by_hand(A, B, C):  # right, the indices written out, an early return
    row = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    col = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if row >= C.shape[0] or col >= C.shape[1]:
        return
    acc = 0.0
    for k in range(A.shape[1]):
        acc += A[row, k] * B[k, col]
    C[row, col] = acc


@cuda.jit
def naive_while_loop(A, B, C):  # right, a while loop over k
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        acc = C.dtype.type(0)
        k = 0
        while k < A.shape[1]:
            acc += A[row, k] * B[k, col]
            k += 1
        C[row, col] = acc


@pytest.mark.parametrize("kernel, words", [
    (naive_thread_index_only, ["only the first block's"]),
    (naive_guards_rows_only, ["outside"]),
    (naive_guard_uses_a_shape, ["used index", "no guard keeps that index below"]),
    (naive_starts_at_one, ["elements of C are wrong", "the first is C["]),
])
def test_more_naive_mistakes_are_named(kernel, words):
    result = check_matmul_naive(kernel, seed=6, show=False)
    assert result.status == "failed", str(result)
    for word in words:
        assert word in result.message + result.hint, f"{word!r} missing from {result}"


def test_a_sum_over_the_wrong_dimension_is_named():
    for seed in range(40):
        trial = draw_naive("t", seed)
        if trial.cols < trial.inner:
            break
    result = check_matmul_naive(naive_loops_over_columns, seed=seed, show=False)
    assert result.status == "failed" and "runs over B's columns" in result.message, str(result)


@pytest.mark.parametrize("kernel", [naive_index_by_hand, naive_while_loop])
def test_naive_right_answers_written_differently_pass(kernel):
    result = check_matmul_naive(kernel, seed=2, show=False)
    assert result.passed, str(result)


def test_naive_refuses_gpulab_own_matmul():
    from gpulab.kernels import matmul

    result = check_matmul_naive(matmul.matmul_naive, seed=1, show=False)
    assert result.status == "failed" and "gpulab's own" in result.message, str(result)


@cuda.jit
def naive_with_numpy_import(A, B, C):
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        acc = C.dtype.type(0)
        for k in range(A.shape[1]):
            acc += np_multiply(A[row, k], B[k, col])
        C[row, col] = acc


@cuda.jit
def naive_with_percent_print(A, B, C):
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        if row == 0 and col == 0:
            print("root two is %f" % sqrt(2.0))  # noqa: UP031 - the simulator-only code tested
        acc = C.dtype.type(0)
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


@cuda.jit(device=True)
def times(a, b):
    return a * b


PRODUCTS = [times]


@cuda.jit
def naive_through_a_list_of_device_functions(A, B, C):
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        acc = C.dtype.type(0)
        for k in range(A.shape[1]):
            acc += PRODUCTS[0](A[row, k], B[k, col])
        C[row, col] = acc


@pytest.mark.parametrize(("kernel", "words"), [
    (naive_with_numpy_import, ["ufunc 'multiply'", "`x * y`"]),
    (naive_with_percent_print, ["mod", "print('i =', i)"]),
    (naive_through_a_list_of_device_functions, ["'products': a python list",
                                                "call each device function by its name"]),
], ids=lambda case: getattr(case, "__name__", None))
def test_simulator_only_code_fails_the_compile_step_on_the_2d_launch_path(kernel, words):
    """What ch01's elementwise checks refuse, refused through the shared launch() of the 2-D
    checks too: code only the simulator runs does not compile for a real GPU."""
    result = check_matmul_naive(kernel, seed=1, show=False)
    text = str(result).lower()
    assert result.status == "failed" and "does not compile for a real gpu" in text, str(result)
    assert all(word.lower() in text for word in words), str(result)


def test_the_mistake_table_lists_the_naive_checks_rules():
    from gpulab.exercises.ch03 import MATMUL_MISTAKES, NAIVE

    table = NAIVE.mistake_table()
    assert all(mistake.did in table for mistake in MATMUL_MISTAKES)


def test_the_mistake_tables_list_the_source_and_trace_diagnoses():
    """The swapped block indices, the assumed block shape and the tiled check's source and
    trace diagnoses are Mistake records, listed in the order the checks try them."""
    from gpulab.exercises.ch03 import (
        BARRIER_MISTAKES,
        MATMUL_MISTAKES,
        NAIVE,
        NAIVE_SHARE_MISTAKES,
        NAIVE_SOURCE_MISTAKES,
        STEP_SUM_MISTAKES,
        TILE_ACCESS_MISTAKES,
        TILED,
        TILED_SOURCE_MISTAKES,
        TILING_MISTAKES,
        UNSTORED_READ_MISTAKES,
    )

    assert NAIVE.mistakes == NAIVE_SOURCE_MISTAKES + MATMUL_MISTAKES + NAIVE_SHARE_MISTAKES
    assert TILED.mistakes == (TILED_SOURCE_MISTAKES + TILING_MISTAKES + BARRIER_MISTAKES
                              + UNSTORED_READ_MISTAKES + MATMUL_MISTAKES + STEP_SUM_MISTAKES
                              + TILE_ACCESS_MISTAKES)
    assert len(BARRIER_MISTAKES) == 6 and len(TILE_ACCESS_MISTAKES) == 5
    table = TILED.mistake_table()
    for mistake in (TILED_SOURCE_MISTAKES + BARRIER_MISTAKES + UNSTORED_READ_MISTAKES
                    + TILE_ACCESS_MISTAKES):
        assert f"| {mistake.did} | {mistake.recognised_from} |" in table
    assert "| the tile's size written as a number | source |" in table
    assert "| a load guard with the wrong bound" in table
    assert "blockIdx.x and blockIdx.y swapped" in NAIVE.mistake_table()
    assert "x and y swapped" not in TILED.also and "block shape" not in NAIVE.also


# --- chapter 03, exercise 2: tiled matmul -------------------------------------------------------
# Wrong kernels as learners write them: each differs from the solution in one mistake.


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
def tiled_with_conditional_expressions(A, B, C):
    """Right, written differently: loads as conditional expressions, barrier at the top."""
    a_tile = cuda.shared.array((TILE, TILE), A.dtype)
    b_tile = cuda.shared.array((TILE, TILE), A.dtype)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    acc = A.dtype.type(0)
    for step in range((A.shape[1] + TILE - 1) // TILE):
        k0 = step * TILE
        cuda.syncthreads()
        a_tile[ty, tx] = A[row, k0 + tx] if row < A.shape[0] and k0 + tx < A.shape[1] else 0
        b_tile[ty, tx] = B[k0 + ty, col] if k0 + ty < B.shape[0] and col < B.shape[1] else 0
        cuda.syncthreads()
        for k in range(TILE):
            acc += a_tile[ty, k] * b_tile[k, tx]
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


@cuda.jit
def tiled_multiply_adds_stop_at_k(A, B, C):
    """Right, written differently: no zero fill, the multiply-adds read only the slots stored."""
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
        for k in range(min(TILE, A.shape[1] - k0)):
            acc += a_tile[ty, k] * b_tile[k, tx]
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


@cuda.jit
def tiled_naive_in_disguise(A, B, C):
    """Right, but untiled: the naive kernel handed in for the tiled exercise."""
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        acc = C.dtype.type(0)
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


@cuda.jit
def tiled_only_a(A, B, C):
    """Right, but only A goes through a tile: B is read from global memory K times."""
    a_tile = cuda.shared.array((TILE, TILE), A.dtype)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.grid(2)
    acc = A.dtype.type(0)
    for k0 in range(0, A.shape[1], TILE):
        if row < A.shape[0] and k0 + tx < A.shape[1]:
            a_tile[ty, tx] = A[row, k0 + tx]
        else:
            a_tile[ty, tx] = 0
        cuda.syncthreads()
        if col < B.shape[1]:
            for k in range(TILE):
                if k0 + k < B.shape[0]:
                    acc += a_tile[ty, k] * B[k0 + k, col]
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
def tiled_no_barrier_after_loads(A, B, C):
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
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


@cuda.jit
def tiled_no_barrier_after_sums(A, B, C):
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
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


@cuda.jit
def tiled_barrier_in_a_branch(A, B, C):
    a_tile = cuda.shared.array((TILE, TILE), A.dtype)
    b_tile = cuda.shared.array((TILE, TILE), A.dtype)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.grid(2)
    acc = A.dtype.type(0)
    if row < C.shape[0] and col < C.shape[1]:  # threads outside C skip the barriers
        for k0 in range(0, A.shape[1], TILE):
            a_tile[ty, tx] = A[row, k0 + tx] if k0 + tx < A.shape[1] else 0
            b_tile[ty, tx] = B[k0 + ty, col] if k0 + ty < B.shape[0] else 0
            cuda.syncthreads()
            for k in range(TILE):
                acc += a_tile[ty, k] * b_tile[k, tx]
            cuda.syncthreads()
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
def tiled_zero_fills_a_only(A, B, C):  # B's tile keeps old values past K: right only by A's 0s
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
        cuda.syncthreads()
        for k in range(TILE):
            acc += a_tile[ty, k] * b_tile[k, tx]
        cuda.syncthreads()
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
def tiled_unguarded_write(A, B, C):
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
    C[row, col] = acc


@cuda.jit
def tiled_guard_off_by_one(A, B, C):
    a_tile = cuda.shared.array((TILE, TILE), A.dtype)
    b_tile = cuda.shared.array((TILE, TILE), A.dtype)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.grid(2)
    acc = A.dtype.type(0)
    for k0 in range(0, A.shape[1], TILE):
        if row < A.shape[0] and k0 + tx < A.shape[1] - 1:  # skips the last column of A
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
def tiled_rows_and_columns_swapped(A, B, C):
    a_tile = cuda.shared.array((TILE, TILE), A.dtype)
    b_tile = cuda.shared.array((TILE, TILE), A.dtype)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row, col = cuda.grid(2)
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
def tiled_load_index_swapped(A, B, C):
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
        if k0 + tx < B.shape[0] and col < B.shape[1]:
            b_tile[ty, tx] = B[k0 + tx, col]  # tx where ty belongs
        else:
            b_tile[ty, tx] = 0
        cuda.syncthreads()
        for k in range(TILE):
            acc += a_tile[ty, k] * b_tile[k, tx]
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


@cuda.jit
def tiled_store_transposed(A, B, C):
    a_tile = cuda.shared.array((TILE, TILE), A.dtype)
    b_tile = cuda.shared.array((TILE, TILE), A.dtype)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.grid(2)
    acc = A.dtype.type(0)
    for k0 in range(0, A.shape[1], TILE):
        if row < A.shape[0] and k0 + tx < A.shape[1]:
            a_tile[tx, ty] = A[row, k0 + tx]  # [tx, ty]: transposed
        else:
            a_tile[tx, ty] = 0
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
def tiled_multiply_adds_swapped(A, B, C):
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
            acc += a_tile[k, ty] * b_tile[tx, k]
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


@cuda.jit
def tiled_tile_indexed_by_row(A, B, C):
    a_tile = cuda.shared.array((TILE, TILE), A.dtype)
    b_tile = cuda.shared.array((TILE, TILE), A.dtype)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.grid(2)
    acc = A.dtype.type(0)
    for k0 in range(0, A.shape[1], TILE):
        if row < A.shape[0] and k0 + tx < A.shape[1]:
            a_tile[row, tx] = A[row, k0 + tx]  # row runs over all of C, past the tile
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
def tiled_sum_restarts(A, B, C):
    a_tile = cuda.shared.array((TILE, TILE), A.dtype)
    b_tile = cuda.shared.array((TILE, TILE), A.dtype)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.grid(2)
    acc = A.dtype.type(0)
    for k0 in range(0, A.shape[1], TILE):
        acc = A.dtype.type(0)  # starts again at every step
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
def tiled_hard_coded_k(A, B, C):
    a_tile = cuda.shared.array((TILE, TILE), A.dtype)
    b_tile = cuda.shared.array((TILE, TILE), A.dtype)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.grid(2)
    acc = A.dtype.type(0)
    for k0 in range(0, 2 * TILE - 1, TILE):  # K = 2 tiles, as in one example
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
def tiled_hard_coded_tile(A, B, C):
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
        for k in range(8 if SIM else 16):  # the tile's size as a number
            acc += a_tile[ty, k] * b_tile[k, tx]
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


@cuda.jit
def tiled_stub(A, B, C):
    a_tile = cuda.shared.array((TILE, TILE), A.dtype)  # noqa: F841  (as the learner gets it)
    # YOUR CODE HERE
    raise NotImplementedError()


@pytest.mark.parametrize("seed", [7, 8, 9])
@pytest.mark.parametrize("kernel", [tiled_solution, tiled_with_conditional_expressions,
                                    tiled_multiply_adds_stop_at_k])
def test_tiled_solution_passes_with_its_counts(kernel, seed):
    result = check_matmul_tiled(kernel, tile=TILE, seed=seed, show=False)
    assert result.passed, result.message
    assert "loaded at most" in result.message and "2 x ceil(K" in result.message


TILED_MISTAKES = [
    # (kernel, status, words in the message, words in the hint)
    (tiled_stub, "not attempted", "NotImplementedError", "step along K"),
    (tiled_naive_in_disguise, "failed", "correct, but each thread read up to",
     "load tiles into shared memory"),
    (tiled_only_a, "failed", "straight from global memory", "load tiles into shared memory"),
    (tiled_without_barriers, "failed", "0 barrier(s)", "before the multiply-adds"),
    (tiled_no_barrier_after_loads, "failed", "two per step", "before the multiply-adds"),
    (tiled_no_barrier_after_sums, "failed", "two per step", "after the multiply-adds"),
    (tiled_barrier_in_a_branch, "failed", "barrier inside a branch", "outside any `if`"),
    (tiled_without_zero_fill, "failed", "stored nothing into", "store 0 in the tile"),
    (tiled_zero_fills_a_only, "failed", "past the edge of B nothing is stored into its tile",
     "store 0 in the tile"),
    (tiled_unguarded_loads, "failed", "used index", "read outside A or B"),
    (tiled_unguarded_write, "failed", "", "wrote outside C"),
    (tiled_guard_off_by_one, "failed", "a guard compares with the wrong size",
     "must not read it"),
    (tiled_rows_and_columns_swapped, "failed", "swapped", "x index runs along the columns"),
    (tiled_load_index_swapped, "failed", "in a tiled matmul", "x goes with the column index"),
    (tiled_store_transposed, "failed", "x and y are swapped", "a_tile[ty, tx]"),
    (tiled_multiply_adds_swapped, "failed", "multiplied", "picks the row of A's tile"),
    (tiled_tile_indexed_by_row, "failed", "used index", "indexed a tile past its end"),
    (tiled_sum_restarts, "failed", "starts again at every step", "start `acc` at 0 once"),
    (tiled_hard_coded_tile, "failed", "written as the number", "write TILE"),
]


@pytest.mark.parametrize("kernel, status, words, hint_words", TILED_MISTAKES,
                         ids=[m[0].py_func.__name__ if hasattr(m[0], "py_func") else str(i)
                              for i, m in enumerate(TILED_MISTAKES)])
def test_tiled_mistakes_are_explained(kernel, status, words, hint_words):
    result = check_matmul_tiled(kernel, tile=TILE, seed=8, show=False)
    assert result.status == status, result.message
    assert words in result.message, result.message
    assert hint_words in result.hint, result.hint


def test_a_hard_coded_k_fails_whatever_k_is_drawn():
    """A loop over the steps written for one K (right whenever K is at most 2 tiles) fails
    before it runs, on every seed."""
    for seed in (0, 1):
        result = check_matmul_tiled(tiled_hard_coded_k, tile=TILE, seed=seed, show=False)
        assert result.status == "failed"
        assert "ends at a fixed number" in result.message
        assert "read it from A's shape" in result.hint


@cuda.jit
def tiled_stops_a_step_early(A, B, C):
    a_tile = cuda.shared.array((TILE, TILE), A.dtype)
    b_tile = cuda.shared.array((TILE, TILE), A.dtype)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.grid(2)
    acc = A.dtype.type(0)
    for k0 in range(0, A.shape[1] - TILE, TILE):  # one step short
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


def test_a_loop_one_step_short_is_named():
    result = check_matmul_tiled(tiled_stops_a_step_early, tile=TILE, seed=8, show=False)
    assert result.status == "failed"
    assert "the loop over the steps stopped after" in result.message, result.message
    assert "read it from A's shape" in result.hint


def test_the_untiled_hint_names_the_naive_kernels_loads():
    result = check_matmul_tiled(tiled_naive_in_disguise, tile=TILE, seed=3, show=False)
    K = draw_tiled("t", 3, TILE).inner
    assert f"2K = {2 * K}): that's the naive kernel" in result.message
    assert f"2 x ceil(K / {TILE}) = {2 * -(-K // TILE)}" in result.message


@pytest.fixture
def small_gpu_runs(stand_in_gpu, no_wait_for_gpu, monkeypatch):
    """The stand-in GPU (kernels run in the simulator, unpoisoned, as a GPU's fresh shared
    memory often holds zeros) with the tiled check's large GPU launch kept small."""
    from gpulab.exercises import ch03

    monkeypatch.setattr(ch03, "LARGE_TILED_BLOCKS", (2, 4))  # still quick in the simulator


def test_the_gpu_branch_checks_two_launches_and_the_trace(small_gpu_runs):
    result = check_matmul_tiled(tiled_solution, tile=8, seed=8, show=False)
    assert result.passed, result.message
    assert "; and for A " in result.message  # the large launch ran too
    result = check_matmul_tiled(tiled_naive_in_disguise, tile=8, seed=8, show=False)
    assert "that's the naive kernel" in result.message


def test_on_a_gpu_the_trace_catches_a_missing_zero_fill_that_zeroed_memory_hides(
        small_gpu_runs):
    result = check_matmul_tiled(tiled_without_zero_fill, tile=8, seed=9, show=False)
    assert result.status == "failed"
    assert "stored nothing into" in result.message and "store 0" in result.hint


def test_tiled_refuses_gpulab_own_kernel():
    from gpulab.kernels import matmul

    result = check_matmul_tiled(matmul.matmul_tiled, tile=TILE, seed=1, show=False)
    assert result.status == "failed" and "gpulab's own" in result.message, str(result)


@cuda.jit
def tiled_block_indices_swapped(A, B, C):  # blockIdx.x picks the row: right only on square grids
    a_tile = cuda.shared.array((TILE, TILE), A.dtype)
    b_tile = cuda.shared.array((TILE, TILE), A.dtype)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.x * TILE + ty
    col = cuda.blockIdx.y * TILE + tx
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


def test_swapped_block_indices_fail():  # on every seed: the grid is never square (see above)
    for seed in (0, 3):
        result = check_matmul_tiled(tiled_block_indices_swapped, tile=TILE, seed=seed, show=False)
        assert result.status == "failed", (seed, str(result))
        assert "never written" in result.message or "swapped" in result.message, str(result)


# --- the naive check's grid is never square in blocks: swapped block indices fail -------------


@cuda.jit
def naive_block_indices_swapped(A, B, C):  # thread indices right, block indices swapped
    row = cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y
    col = cuda.blockIdx.y * cuda.blockDim.x + cuda.threadIdx.x
    if row < C.shape[0] and col < C.shape[1]:
        acc = C.dtype.type(0)
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


@cuda.jit
def naive_block_indices_swapped_by_name(A, B, C):  # the same, through local names
    block_row, block_col = cuda.blockIdx.x, cuda.blockIdx.y
    rows_per_block, cols_per_block = cuda.blockDim.y, cuda.blockDim.x
    row = block_row * rows_per_block + cuda.threadIdx.y
    col = block_col * cols_per_block + cuda.threadIdx.x
    if row < C.shape[0] and col < C.shape[1]:
        acc = C.dtype.type(0)
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


@cuda.jit
def naive_index_by_local_names(A, B, C):  # right, each index through a local name
    block_row, block_col = cuda.blockIdx.y, cuda.blockIdx.x
    rows_per_block, cols_per_block = cuda.blockDim.y, cuda.blockDim.x
    row = block_row * rows_per_block + cuda.threadIdx.y
    col = block_col * cols_per_block + cuda.threadIdx.x
    if row < C.shape[0] and col < C.shape[1]:
        acc = np.float32(0.0)
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


def test_naive_grids_are_never_square_in_blocks():
    for seed in range(60):
        trial = draw_naive("t", seed)
        for each in (trial, draw_naive("t", seed, trial.block[::-1])):
            bx, by = each.block
            assert bx != by and each.blocks[0] != each.blocks[1], (seed, each)
            assert each.rows % by and each.cols % bx


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6, 7, 8])
def test_swapped_block_indices_fail_on_every_seed(seed):
    result = check_matmul_naive(naive_block_indices_swapped, seed=seed, show=False)
    assert result.status == "failed", str(result)
    for word in ("never written", "swap the block indices", "blockIdx.x counts the blocks "
                 "along x", "blocks across but"):
        assert word in result.message, f"{word!r} missing from {result}"
    assert "along y" in result.hint and "same axis" in result.hint


@pytest.mark.parametrize("seed", [1, 4, 7])
def test_swapped_block_indices_through_names_fail_too(seed):
    result = check_matmul_naive(naive_block_indices_swapped_by_name, seed=seed, show=False)
    assert result.status == "failed", str(result)
    assert "never written" in result.message, str(result)


@pytest.mark.parametrize("seed", [1, 4, 7])
def test_naive_index_through_local_names_passes(seed):
    result = check_matmul_naive(naive_index_by_local_names, seed=seed, show=False)
    assert result.passed, str(result)


# --- issue: more wrong naive answers (indices on the wrong axis, k from 1) and right ones ------

@cuda.jit
def naive_b_indexed_transposed(A, B, C):  # B[col, k]: B's axes swapped, the guard right
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        acc = 0.0
        for k in range(A.shape[1]):
            acc += A[row, k] * B[col, k]
        C[row, col] = acc


@cuda.jit
def naive_writes_c_transposed(A, B, C):  # C[col, row]: the sum right, written on swapped axes
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        acc = 0.0
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[col, row] = acc


@cuda.jit
def naive_guard_sizes_swapped(A, B, C):  # row against C's columns, col against its rows
    col, row = cuda.grid(2)
    if row < C.shape[1] and col < C.shape[0]:
        acc = 0.0
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


@cuda.jit
def naive_guard_with_or(A, B, C):
    col, row = cuda.grid(2)
    if row < C.shape[0] or col < C.shape[1]:
        acc = 0.0
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


@cuda.jit
def naive_sum_from_k_1(A, B, C):
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        acc = 0.0
        for k in range(1, A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


@cuda.jit
def naive_block_size_forgotten(A, B, C):  # blockIdx + threadIdx, no blockDim
    col = cuda.blockIdx.x + cuda.threadIdx.x
    row = cuda.blockIdx.y + cuda.threadIdx.y
    if row < C.shape[0] and col < C.shape[1]:
        acc = 0.0
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


@cuda.jit
def naive_zeroes_c_then_adds(A, B, C):  # right: C set to 0 before the sum
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = 0.0
        for k in range(A.shape[1]):
            C[row, col] += A[row, k] * B[k, col]


@cuda.jit
def naive_grid_stride(A, B, C):  # right: 2-D grid-stride loops
    x0, y0 = cuda.grid(2)
    sx, sy = cuda.gridsize(2)
    for row in range(y0, C.shape[0], sy):
        for col in range(x0, C.shape[1], sx):
            acc = 0.0
            for k in range(B.shape[0]):
                acc += A[row, k] * B[k, col]
            C[row, col] = acc


@cuda.jit(device=True)
def row_times_column(A, B, row, col):
    total = 0.0
    for k in range(A.shape[1] - 1, -1, -1):
        total += A[row, k] * B[k, col]
    return total


@cuda.jit
def naive_through_a_device_function(A, B, C):  # right: a helper, k backwards, A's and B's sizes
    col = cuda.threadIdx.x + cuda.blockDim.x * cuda.blockIdx.x
    row = cuda.threadIdx.y + cuda.blockDim.y * cuda.blockIdx.y
    if col < B.shape[1] and row < A.shape[0]:
        C[row, col] = row_times_column(A, B, row, col)


@pytest.mark.parametrize("kernel, words", [
    (naive_b_indexed_transposed, ["used index", "went outside B's columns", "other axis"]),
    (naive_writes_c_transposed, ["used index", "`C[col, row] = acc` went outside C's"]),
    (naive_guard_sizes_swapped, ["used index", "no guard keeps that index below"]),
    (naive_guard_with_or, ["used index", "went outside A's rows"]),
    (naive_sum_from_k_1, ["the first k, 0, is missing", "starts at 0"]),
    (naive_block_size_forgotten, ["were never written"]),
])
def test_indices_on_the_wrong_axis_and_k_from_1_are_named(kernel, words):
    result = check_matmul_naive(kernel, seed=6, show=False)
    assert result.status == "failed", str(result)
    for word in words:
        assert word in result.message + result.hint, f"{word!r} missing from {result}"


@pytest.mark.parametrize("kernel", [naive_zeroes_c_then_adds, naive_grid_stride,
                                    naive_through_a_device_function])
def test_more_naive_right_answers_pass(kernel):
    result = check_matmul_naive(kernel, seed=5, show=False)
    assert result.passed, str(result)


# --- issue: the loop over the steps ending at M or N (right whenever they need as many steps
# as K) fails on every seed; right tiled kernels written differently pass ----------------------

@cuda.jit
def tiled_steps_over_m(A, B, C):
    a_tile = cuda.shared.array((TILE, TILE), A.dtype)
    b_tile = cuda.shared.array((TILE, TILE), A.dtype)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.grid(2)
    acc = A.dtype.type(0)
    for k0 in range(0, A.shape[0], TILE):  # A's rows, not its columns
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
def tiled_steps_over_named_n(A, B, C):
    a_tile = cuda.shared.array((TILE, TILE), A.dtype)
    b_tile = cuda.shared.array((TILE, TILE), A.dtype)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.grid(2)
    M, N = C.shape
    acc = A.dtype.type(0)
    for k0 in range(0, N, TILE):  # C's columns
        a_tile[ty, tx] = A[row, k0 + tx] if row < M and k0 + tx < A.shape[1] else 0
        b_tile[ty, tx] = B[k0 + ty, col] if k0 + ty < B.shape[0] and col < N else 0
        cuda.syncthreads()
        for k in range(TILE):
            acc += a_tile[ty, k] * b_tile[k, tx]
        cuda.syncthreads()
    if row < M and col < N:
        C[row, col] = acc


@cuda.jit
def tiled_barrier_at_the_start_of_each_step(A, B, C):  # right: the barriers before the loads
    a_tile = cuda.shared.array((TILE, TILE), A.dtype)
    b_tile = cuda.shared.array((TILE, TILE), A.dtype)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.grid(2)
    acc = A.dtype.type(0)
    for k0 in range(0, A.shape[1], TILE):
        cuda.syncthreads()
        a_tile[ty, tx] = A[row, k0 + tx] if row < A.shape[0] and k0 + tx < A.shape[1] else 0
        b_tile[ty, tx] = B[k0 + ty, col] if k0 + ty < B.shape[0] and col < B.shape[1] else 0
        cuda.syncthreads()
        for k in range(TILE):
            acc += a_tile[ty, k] * b_tile[k, tx]
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


@cuda.jit
def tiled_transposed_tiles_and_named_k(A, B, C):  # right: tiles stored transposed, read so
    a_tile = cuda.shared.array((TILE, TILE), A.dtype)
    b_tile = cuda.shared.array((TILE, TILE), A.dtype)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    M, K = A.shape
    acc = 0.0
    for step in range((K + TILE - 1) // TILE):
        k0 = step * TILE
        a_tile[tx, ty] = 0
        b_tile[tx, ty] = 0
        if row < M and k0 + tx < K:
            a_tile[tx, ty] = A[row, k0 + tx]
        if k0 + ty < K and col < B.shape[1]:
            b_tile[tx, ty] = B[k0 + ty, col]
        cuda.syncthreads()
        for k in range(min(TILE, K - k0)):
            acc += a_tile[k, ty] * b_tile[tx, k]
        cuda.syncthreads()
    if row < M and col < B.shape[1]:
        C[row, col] = acc


@cuda.jit
def tiled_steps_counted_from_m(A, B, C):  # the number of steps computed from M
    a_tile = cuda.shared.array((TILE, TILE), A.dtype)
    b_tile = cuda.shared.array((TILE, TILE), A.dtype)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.grid(2)
    M = A.shape[0]
    steps = (M + TILE - 1) // TILE
    acc = A.dtype.type(0)
    for s in range(steps):
        k0 = s * TILE
        a_tile[ty, tx] = A[row, k0 + tx] if row < M and k0 + tx < A.shape[1] else 0
        b_tile[ty, tx] = B[k0 + ty, col] if k0 + ty < B.shape[0] and col < B.shape[1] else 0
        cuda.syncthreads()
        for k in range(TILE):
            acc += a_tile[ty, k] * b_tile[k, tx]
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


@pytest.mark.parametrize("kernel, which", [(tiled_steps_over_m, "ends the steps at M"),
                                           (tiled_steps_over_named_n, "ends the steps at N"),
                                           (tiled_steps_counted_from_m, "ends the steps at M")])
@pytest.mark.parametrize("seed", [7, 10])  # M (N) needs as many steps as K at 7 (10)
def test_steps_ending_at_m_or_n_fail_on_every_seed(kernel, which, seed):
    result = check_matmul_tiled(kernel, tile=TILE, seed=seed, show=False)
    assert result.status == "failed", result.message
    assert which in result.message and "K is A.shape[1]" in result.hint, str(result)


@pytest.mark.parametrize("kernel", [tiled_barrier_at_the_start_of_each_step,
                                    tiled_transposed_tiles_and_named_k])
def test_more_tiled_right_answers_pass(kernel):
    result = check_matmul_tiled(kernel, tile=TILE, seed=9, show=False)
    assert result.passed, result.message


@cuda.jit
def tiled_barriers_before_loads_and_at_the_end(A, B, C):  # two per step, none after the loads
    a_tile = cuda.shared.array((TILE, TILE), A.dtype)
    b_tile = cuda.shared.array((TILE, TILE), A.dtype)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.grid(2)
    acc = A.dtype.type(0)
    for k0 in range(0, A.shape[1], TILE):
        cuda.syncthreads()
        a_tile[ty, tx] = A[row, k0 + tx] if row < A.shape[0] and k0 + tx < A.shape[1] else 0
        b_tile[ty, tx] = B[k0 + ty, col] if k0 + ty < B.shape[0] and col < B.shape[1] else 0
        for k in range(TILE):
            acc += a_tile[ty, k] * b_tile[k, tx]
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


@cuda.jit
def tiled_while_over_the_steps(A, B, C):  # right: a while loop over k0
    a_tile = cuda.shared.array((TILE, TILE), A.dtype)
    b_tile = cuda.shared.array((TILE, TILE), A.dtype)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.grid(2)
    acc = A.dtype.type(0)
    k0 = 0
    while k0 < A.shape[1]:
        a_tile[ty, tx] = A[row, k0 + tx] if row < A.shape[0] and k0 + tx < A.shape[1] else 0
        b_tile[ty, tx] = B[k0 + ty, col] if k0 + ty < B.shape[0] and col < B.shape[1] else 0
        cuda.syncthreads()
        for k in range(TILE):
            acc += a_tile[ty, k] * b_tile[k, tx]
        cuda.syncthreads()
        k0 += TILE
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


def test_two_barriers_per_step_but_none_after_the_loads_is_named():
    result = check_matmul_tiled(tiled_barriers_before_loads_and_at_the_end, tile=TILE, seed=8,
                                show=False)
    assert result.status == "failed", result.message
    assert "none between its stores into the tiles and its multiply-adds" in result.message
    assert "before the multiply-adds" in result.hint


def test_a_while_loop_over_the_steps_passes():
    result = check_matmul_tiled(tiled_while_over_the_steps, tile=TILE, seed=8, show=False)
    assert result.passed, result.message


@cuda.jit
def naive_thread_per_row(A, B, C):
    """Wrong: the threads of column 0 each compute a whole row of C."""
    col, row = cuda.grid(2)
    if row < C.shape[0] and col == 0:
        for c in range(C.shape[1]):
            acc = 0.0
            for k in range(A.shape[1]):
                acc += A[row, k] * B[k, c]
            C[row, c] = acc


@cuda.jit
def naive_row_of_a_in_a_local_array_of_64(A, B, C):
    """Wrong: a row of A kept in a local array of 64 (K over 64 overflows it)."""
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        a_row = cuda.local.array(64, numba.float32)
        for k in range(min(A.shape[1], 64)):
            a_row[k] = A[row, k]
        acc = 0.0
        for k in range(A.shape[1]):
            acc += a_row[k % 64] * B[k, col]
        C[row, col] = acc


@pytest.mark.parametrize("kernel, words", [
    (naive_thread_per_row, "written by one thread"),
    (naive_row_of_a_in_a_local_array_of_64, "elements of C are wrong"),
])
@pytest.mark.parametrize("seed", [1, 7, 12345])
def test_naive_method_and_k_over_64_mistakes(kernel, words, seed):
    result = check_matmul_naive(kernel, seed=seed, show=False)
    assert result.status == "failed" and words in result.message, result


@cuda.jit
def tiled_double_buffered(A, B, C):  # right: two tiles used in turn, one barrier per step
    a_tile = cuda.shared.array((2, TILE, TILE), np.float32)
    b_tile = cuda.shared.array((2, TILE, TILE), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.grid(2)
    acc = np.float32(0)
    p = 0
    for k0 in range(0, A.shape[1], TILE):
        a_tile[p, ty, tx] = A[row, k0 + tx] if row < A.shape[0] and k0 + tx < A.shape[1] else 0
        b_tile[p, ty, tx] = B[k0 + ty, col] if k0 + ty < B.shape[0] and col < B.shape[1] else 0
        cuda.syncthreads()
        for k in range(TILE):
            acc += a_tile[p, ty, k] * b_tile[p, k, tx]
        p = 1 - p
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


@pytest.mark.parametrize("seed", [1, 7, 12345])
def test_double_buffered_tiles_with_one_barrier_per_step_pass(seed):
    # the reads of one buffer and the stores into the other share an interval: no slot both
    result = check_matmul_tiled(tiled_double_buffered, tile=TILE, seed=seed, show=False)
    assert result.passed, result


@cuda.jit
def naive_x_down_the_rows(A, B, C):
    """Wrong method: x taken as the row, the grid strided so every element of C is still
    written once: right values, but a warp's writes (and B's reads) land a row apart."""
    r0, c0 = cuda.grid(2)
    rows_step, cols_step = cuda.gridsize(2)
    for row in range(r0, C.shape[0], rows_step):
        for col in range(c0, C.shape[1], cols_step):
            acc = C.dtype.type(0)
            for k in range(A.shape[1]):
                acc += A[row, k] * B[k, col]
            C[row, col] = acc


@pytest.mark.parametrize("seed", [1, 7])
def test_naive_names_x_down_the_rows(seed):
    result = check_matmul_naive(naive_x_down_the_rows, seed=seed, show=False)
    assert result.status == "failed", result.message
    assert "threads side by side along x touched elements a row apart" in result.message
    assert "took C[" in result.message


@cuda.jit
def tiled_loaded_by_one_thread(A, B, C):
    """Wrong method: thread (0, 0) of each block copies both whole tiles; the others wait."""
    a_tile = cuda.shared.array((TILE, TILE), numba.float32)
    b_tile = cuda.shared.array((TILE, TILE), numba.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.grid(2)
    r0, c0 = cuda.blockIdx.y * TILE, cuda.blockIdx.x * TILE
    acc = numba.float32(0)
    for k0 in range(0, A.shape[1], TILE):
        if tx == 0 and ty == 0:
            for i in range(TILE):
                for j in range(TILE):
                    inside_a = r0 + i < A.shape[0] and k0 + j < A.shape[1]
                    inside_b = k0 + i < B.shape[0] and c0 + j < B.shape[1]
                    a_tile[i, j] = A[r0 + i, k0 + j] if inside_a else numba.float32(0)
                    b_tile[i, j] = B[k0 + i, c0 + j] if inside_b else numba.float32(0)
        cuda.syncthreads()
        for k in range(TILE):
            acc += a_tile[ty, k] * b_tile[k, tx]
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


def test_tiles_loaded_by_one_thread_are_named_as_such():
    result = check_matmul_tiled(tiled_loaded_by_one_thread, seed=1, show=False)
    assert result.status == "failed", result.message
    assert "threads read A or B from global memory" in result.message, result.message
    assert "a few threads load whole tiles" in result.message


TILE_SLOTS = TILE * TILE  # a flat tile's length: Numba needs a shared array's shape as a constant


@cuda.jit
def matmul_flat_tiles_read_with_the_wrong_stride(A, B, C):
    """Wrong: 1-D tiles, B's read as b_tile[tx * TILE + k] instead of b_tile[k * TILE + tx]."""
    a_tile = cuda.shared.array(TILE_SLOTS, A.dtype)
    b_tile = cuda.shared.array(TILE_SLOTS, A.dtype)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.grid(2)
    acc = A.dtype.type(0)
    for k0 in range(0, A.shape[1], TILE):
        if row < A.shape[0] and k0 + tx < A.shape[1]:
            a_tile[ty * TILE + tx] = A[row, k0 + tx]
        else:
            a_tile[ty * TILE + tx] = 0
        if k0 + ty < B.shape[0] and col < B.shape[1]:
            b_tile[ty * TILE + tx] = B[k0 + ty, col]
        else:
            b_tile[ty * TILE + tx] = 0
        cuda.syncthreads()
        for k in range(TILE):
            acc += a_tile[ty * TILE + k] * b_tile[tx * TILE + k]
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


def test_flat_tiles_read_wrong_fail_on_c_not_on_the_check_itself():
    """A flat tile's slots have one index, which the slot rules cannot place in a row: they are
    left to C's values (the check once crashed unpacking them)."""
    result = check_matmul_tiled(matmul_flat_tiles_read_with_the_wrong_stride, seed=1,
                                tile=TILE, show=False)
    assert result.status == "failed", str(result)
    assert "elements of C are wrong" in result.message and "check itself" not in (
        result.message), result.message


@cuda.jit
def naive_first_product_twice(A, B, C):
    """Wrong: the sum starts from the k = 0 product, then the loop starts at 0 again."""
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        acc = A[row, 0] * B[0, col]
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


@pytest.mark.parametrize("seed", SEEDS)
def test_naive_with_a_product_counted_twice_is_named_not_told_to_revisit_the_grid(seed):
    result = check_matmul_naive(naive_first_product_twice, seed=seed, show=False)
    assert result.status == "failed", result
    assert "the k = 0 product again: that product is counted twice" in result.message, (
        result.message)
    assert "count each product once" in result.hint, result.hint


@cuda.jit
def tiled_barrier_inside_the_loop_over_k(A, B, C):
    """Wrong: the barrier indented into the multiply-add loop: a thread's first multiply-add
    reads slots other threads may not have stored yet (TILE barriers a step, not too few)."""
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
            cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


@pytest.mark.parametrize("seed", SEEDS)
def test_a_barrier_inside_the_loop_over_k_is_named_as_a_race(seed):
    result = check_matmul_tiled(tiled_barrier_inside_the_loop_over_k, seed=seed, tile=TILE,
                                show=False)
    assert result.status == "failed", result
    assert "with no barrier between the two" in result.message and "(a race)" in (
        result.message), result.message
    assert "outside the loop over k" in result.hint, result.hint


@cuda.jit
def tiled_loads_by_a_branch_every_thread_takes_alike(A, B, C):
    """Right: a full step (`k0 + TILE <= K`, the same for the whole block) loads without the
    guard along K; each arm of the branch ends with the barrier after the loads."""
    a_tile = cuda.shared.array((TILE, TILE), A.dtype)
    b_tile = cuda.shared.array((TILE, TILE), A.dtype)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.grid(2)
    M, K = A.shape
    N = B.shape[1]
    acc = A.dtype.type(0)
    for k0 in range(0, K, TILE):
        if k0 + TILE <= K:
            a_tile[ty, tx] = A[row, k0 + tx] if row < M else 0
            b_tile[ty, tx] = B[k0 + ty, col] if col < N else 0
            cuda.syncthreads()
        else:
            a_tile[ty, tx] = A[row, k0 + tx] if row < M and k0 + tx < K else 0
            b_tile[ty, tx] = B[k0 + ty, col] if k0 + ty < K and col < N else 0
            cuda.syncthreads()
        for k in range(TILE):
            acc += a_tile[ty, k] * b_tile[k, tx]
        cuda.syncthreads()
    if row < M and col < N:
        C[row, col] = acc


@cuda.jit
def tiled_steps_counted_down(A, B, C):
    """Right: the steps along K taken from the last tile down (only the sum's order differs)."""
    a_tile = cuda.shared.array((TILE, TILE), A.dtype)
    b_tile = cuda.shared.array((TILE, TILE), A.dtype)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.grid(2)
    acc = A.dtype.type(0)
    for s in range((A.shape[1] + TILE - 1) // TILE - 1, -1, -1):
        k0 = s * TILE
        a_tile[ty, tx] = A[row, k0 + tx] if row < A.shape[0] and k0 + tx < A.shape[1] else 0
        b_tile[ty, tx] = B[k0 + ty, col] if k0 + ty < B.shape[0] and col < B.shape[1] else 0
        if cuda.blockDim.x > 1:  # the same for the whole block
            cuda.syncthreads()
        for k in range(TILE):
            acc += a_tile[ty, k] * b_tile[k, tx]
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


@cuda.jit
def tiled_first_step_without_the_load_barrier(A, B, C):
    """Wrong: the barrier after the loads sits under `if k0 > 0:`, so the first step has none."""
    a_tile = cuda.shared.array((TILE, TILE), A.dtype)
    b_tile = cuda.shared.array((TILE, TILE), A.dtype)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.grid(2)
    acc = A.dtype.type(0)
    for k0 in range(0, A.shape[1], TILE):
        a_tile[ty, tx] = A[row, k0 + tx] if row < A.shape[0] and k0 + tx < A.shape[1] else 0
        b_tile[ty, tx] = B[k0 + ty, col] if k0 + ty < B.shape[0] and col < B.shape[1] else 0
        if k0 > 0:
            cuda.syncthreads()
        for k in range(TILE):
            acc += a_tile[ty, k] * b_tile[k, tx]
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


@pytest.mark.parametrize("seed", [1, 7])
def test_barriers_in_branches_the_whole_block_takes_and_steps_counted_down_pass(seed):
    for kernel in (tiled_loads_by_a_branch_every_thread_takes_alike, tiled_steps_counted_down):
        result = check_matmul_tiled(kernel, tile=TILE, seed=seed, show=False)
        assert result.passed, (kernel.__name__, result.message)


@pytest.mark.parametrize("seed", [1, 7])
def test_a_load_barrier_some_steps_skip_is_named_with_its_place(seed):
    result = check_matmul_tiled(tiled_first_step_without_the_load_barrier, tile=TILE, seed=seed,
                                show=False)
    assert result.status == "failed", result
    assert "read tile slots that others have not stored yet" in result.message, result.message
    assert result.hint.startswith("call `cuda.syncthreads()` after the two stores"), result.hint


@cuda.jit
def tiled_next_tiles_loaded_at_the_end_of_each_step(A, B, C):
    """Right: the first tiles loaded before the loop; each step multiplies, waits, loads the
    next tiles (under a branch the whole block takes alike) and waits again."""
    a_tile = cuda.shared.array((TILE, TILE), A.dtype)
    b_tile = cuda.shared.array((TILE, TILE), A.dtype)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.grid(2)
    M, K = A.shape
    N = B.shape[1]
    steps = (K + TILE - 1) // TILE
    acc = A.dtype.type(0)
    a_tile[ty, tx] = A[row, tx] if row < M and tx < K else 0
    b_tile[ty, tx] = B[ty, col] if ty < K and col < N else 0
    cuda.syncthreads()
    for s in range(steps):
        for k in range(TILE):
            acc += a_tile[ty, k] * b_tile[k, tx]
        cuda.syncthreads()
        if s + 1 < steps:
            k0 = (s + 1) * TILE
            a_tile[ty, tx] = A[row, k0 + tx] if row < M and k0 + tx < K else 0
            b_tile[ty, tx] = B[k0 + ty, col] if k0 + ty < K and col < N else 0
        cuda.syncthreads()
    if row < M and col < N:
        C[row, col] = acc


@pytest.mark.parametrize("seed", [1, 7])
def test_tiles_loaded_at_the_end_of_the_step_for_the_next_pass(seed):
    result = check_matmul_tiled(tiled_next_tiles_loaded_at_the_end_of_each_step, tile=TILE,
                                seed=seed, show=False)
    assert result.passed, result.message
