"""Chapter 02's checks (saxpy, the coalesced grid-stride copy) against a right kernel and the
typical wrong ones.

Every wrong kernel must be caught with a status and hint words a learner can act on. The
solutions live here and in the solution notebooks only: the package ships none.
"""

import gpulab  # noqa: F401  (must come before numba: it chooses the simulator or the GPU)

# isort: split
import pytest
from numba import cuda

from gpulab import device
from gpulab.exercises.ch02 import check_copy_grid_stride, check_saxpy

SIM = device.tier() == "sim"
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
