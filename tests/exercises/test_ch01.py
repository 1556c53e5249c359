"""Chapter 01's checks (multiply, atomic dot product, block sum) against a right kernel and the
typical wrong ones.

The solutions live here and in the solution notebooks only: the package ships no solutions.
Every wrong kernel must be caught with a status and hint words a learner can act on, in the
simulator (where threads of a block run one after another, so races and missing barriers need
care: see gpulab.exercises.ch01's docstring) and on a GPU.
"""

import gpulab  # noqa: F401  (must come before numba: it chooses the simulator or the GPU)

# isort: split
from math import sqrt

import numpy as np
import pytest
from learner_kernels import multiply as multiply_solution
from learner_kernels import multiply_stub, multiply_with_list
from numba import cuda
from numpy import multiply as np_multiply

from gpulab.exercises.ch01 import check_block_sum, check_dot_atomic, check_multiply
from gpulab.kernels.dot import block_tree_sum, dot_atomic
from gpulab.kernels.elementwise import elementwise_multiply


@cuda.jit
def dot_through_a_view_of_out(x, y, out):  # a plain += on out[0], through a slice of it
    i = cuda.grid(1)
    if i < x.shape[0]:
        total = out[0:1]
        total[0] = total[0] + x[i] * y[i]


@cuda.jit
def dot_atomic_on_a_view_of_out(x, y, out):  # right: the atomic on the view's element 0
    i = cuda.grid(1)
    if i < x.shape[0]:
        cuda.atomic.add(out[0:1], 0, x[i] * y[i])


@pytest.mark.parametrize("seed", [1, 7, 12345])
def test_a_write_through_a_slice_of_out_is_seen_as_the_race_it_is(seed):
    result = check_dot_atomic(dot_through_a_view_of_out, seed=seed, show=False)
    assert result.status == "failed" and "wrote out[0], without an atomic" in result.message, \
        result
    assert check_dot_atomic(dot_atomic_on_a_view_of_out, seed=seed, show=False).passed

THREADS = 64  # the block size of the block-sum kernels (one shared slot per thread)
SMALL = 32  # a shared array too small for a block of THREADS threads

# --- exercise 1: multiply --------------------------------------------------------------------

# (the right kernel, the stub and the one with a list come from learner_kernels)


@cuda.jit
def multiply_no_guard(x, y, out):
    i = cuda.grid(1)
    out[i] = x[i] * y[i]


@cuda.jit
def multiply_guard_le(x, y, out):
    i = cuda.grid(1)
    if i <= x.shape[0]:
        out[i] = x[i] * y[i]


@cuda.jit
def multiply_thread_index_only(x, y, out):
    i = cuda.threadIdx.x
    if i < x.shape[0]:
        out[i] = x[i] * y[i]


@cuda.jit
def multiply_writes_nothing(x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        product = x[i] * y[i]  # noqa: F841  (computed, never stored)


@cuda.jit
def multiply_adds(x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = x[i] + y[i]


@cuda.jit
def multiply_off_by_one(x, y, out):
    i = cuda.grid(1)
    if 0 < i < x.shape[0]:
        out[i] = x[i - 1] * y[i - 1]


@cuda.jit
def multiply_skips_last_block(x, y, out):
    i = cuda.grid(1)
    if i < (x.shape[0] // cuda.blockDim.x) * cuda.blockDim.x:
        out[i] = x[i] * y[i]


def multiply_not_jitted(x, y, out):
    pass


# --- exercise 2: dot product with atomics -----------------------------------------------------


@cuda.jit
def dot_solution(x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        cuda.atomic.add(out, 0, x[i] * y[i])


@cuda.jit
def dot_stub(x, y, out):
    # YOUR CODE HERE
    raise NotImplementedError()


@cuda.jit
def dot_racy(x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[0] += x[i] * y[i]


@cuda.jit
def dot_racy_spelled_out(x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[0] = out[0] + x[i] * y[i]


@cuda.jit
def dot_overwrites(x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[0] = x[i] * y[i]


@cuda.jit
def dot_no_guard(x, y, out):
    i = cuda.grid(1)
    cuda.atomic.add(out, 0, x[i] * y[i])


@cuda.jit
def dot_thread_index_only(x, y, out):
    i = cuda.threadIdx.x
    if i < x.shape[0]:
        cuda.atomic.add(out, 0, x[i] * y[i])


@cuda.jit
def dot_skips_last_block(x, y, out):
    i = cuda.grid(1)
    if i < (x.shape[0] // cuda.blockDim.x) * cuda.blockDim.x:
        cuda.atomic.add(out, 0, x[i] * y[i])


@cuda.jit
def dot_adds_nothing(x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        cuda.atomic.add(out, 0, 0.0 * x[i])


# --- exercise 3: block sum in shared memory ----------------------------------------------------


@cuda.jit
def block_sum_solution(x, out):
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < x.shape[0]:
        partial[t] = x[i]
    else:
        partial[t] = 0  # threads past the end add nothing
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_stub(x, out):
    partial = cuda.shared.array(THREADS, x.dtype)  # noqa: F841
    # YOUR CODE HERE
    raise NotImplementedError()


@cuda.jit
def block_sum_no_barriers(x, out):
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        stride //= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_barrier_after_fill_only(x, out):
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        stride //= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_barrier_in_loop_only(x, out):
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_racy_total(x, out):
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        out[0] += partial[0]


@cuda.jit
def block_sum_overwrites_total(x, out):
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        out[0] = partial[0]


@cuda.jit
def block_sum_no_guard(x, out):
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i]
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_no_zero_past_end(x, out):
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < x.shape[0]:
        partial[t] = x[i]  # threads past the end leave their slot as it was
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_small_shared(x, out):
    partial = cuda.shared.array(SMALL, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_atomic_per_thread(x, out):  # right total, no tree: one atomic per thread
    i = cuda.grid(1)
    if i < x.shape[0]:
        cuda.atomic.add(out, 0, x[i])


@cuda.jit
def block_sum_shared_atomics(x, out):  # right total, one shared atomic per thread
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if t == 0:
        partial[0] = 0
    cuda.syncthreads()
    if i < x.shape[0]:
        cuda.atomic.add(partial, 0, x[i])
    cuda.syncthreads()
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_serial_thread0(x, out):  # right total, thread 0 adds the block's slots in a row
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < x.shape[0]:
        partial[t] = x[i]
    else:
        partial[t] = 0
    cuda.syncthreads()
    if t == 0:
        total = 0.0
        for k in range(THREADS):
            total += partial[k]
        cuda.atomic.add(out, 0, total)


@cuda.jit
def block_sum_serial_global(x, out):  # right total, thread 0 reads its block's x in a row
    t = cuda.threadIdx.x
    if t == 0:
        start = cuda.blockIdx.x * cuda.blockDim.x
        total = 0.0
        for k in range(start, min(start + cuda.blockDim.x, x.shape[0])):
            total += x[k]
        cuda.atomic.add(out, 0, total)


@cuda.jit
def block_sum_barrier_in_branch(x, out):  # a deadlock on a GPU
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
            cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_stops_early(x, out):  # the last round (stride 1) is missing
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 1:
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_stride_from_block(x, out):  # the first stride is the whole block
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    stride = cuda.blockDim.x
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_never_halves(x, out):  # forgot `stride //= 2`: never finishes
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


# --- every kernel gets the right verdict and hint ------------------------------------------

SIM_ONLY = pytest.mark.skipif(
    gpulab.tier() != "sim",
    reason="relies on the simulator's behaviour (bounds-checked shared memory, leftover shared "
    "values, threads run in order); a GPU may hide this mistake at this block size",
)

MULTIPLY_CASES = [
    (multiply_solution, "passed", ["all", "elements are right"]),
    (multiply_stub, "not attempted", ["notimplementederror", "its own element"]),
    (multiply_no_guard, "failed", ["past the end", "is there a guard"]),
    (multiply_guard_le, "failed", ["past the end", "equals the length"]),
    (multiply_thread_index_only, "failed", ["only the first block", "block's index"]),
    (multiply_writes_nothing, "failed", ["wrote nothing"]),
    (multiply_adds, "failed", ["x[i] + y[i]", "yours adds them"]),
    (multiply_off_by_one, "failed", ["one position off", "+ 1"]),
    (multiply_skips_last_block, "failed", ["except the last, partial one", "too strict"]),
    (multiply_with_list, "failed", ["would not compile", "list"]),
    (multiply_not_jitted, "failed", ["plain python function", "@cuda.jit"]),
]

FOLD_SLOTS, FOLD_STEP = 1024, 32


@cuda.jit
def dot_first_warp_folds_the_block(x, y, out):  # right (round 17): `t < 32`, a step of 32
    s = cuda.shared.array(FOLD_SLOTS, np.float32)  # within the block: no size typed in
    t, i = cuda.threadIdx.x, cuda.grid(1)
    v = np.float32(0)
    if i < x.shape[0]:
        v = x[i] * y[i]
    s[t] = v
    cuda.syncthreads()
    if t < 32:
        acc = np.float32(0)
        for k in range(t + FOLD_STEP, cuda.blockDim.x, FOLD_STEP):
            acc += s[k]
        s[t] += acc
    cuda.syncthreads()
    if t == 0:
        total = np.float32(0)
        for k in range(min(32, cuda.blockDim.x)):
            total += s[k]
        cuda.atomic.add(out, 0, total)


DOT_CASES = [
    (dot_solution, "passed", ["as expected"]),
    (dot_first_warp_folds_the_block, "passed", ["as expected"]),
    (dot_stub, "not attempted", ["notimplementederror", "with an atomic"]),
    (dot_racy, "failed", ["data race", "without an atomic", "an atomic add"]),
    (dot_racy_spelled_out, "failed", ["data race", "cuda.atomic.add"]),
    (dot_overwrites, "failed", ["single product", "cuda.atomic.add"]),
    (dot_no_guard, "failed", ["past the end", "guard"]),
    (dot_thread_index_only, "failed", ["first block's products", "block's index"]),
    (dot_skips_last_block, "failed", ["last, partial block", "too strict"]),
    (dot_adds_nothing, "failed", ["nothing was added"]),
]

BLOCK_SUM_CASES = [
    (block_sum_solution, "passed", ["as expected", "by a tree: 1 atomic per block"]),
    (block_sum_stub, "not attempted", ["notimplementederror", "halve it in rounds"]),
    (block_sum_atomic_per_thread, "failed",
     ["the total is right", "atomic adds (into out[0])", "one per thread"],),
    (block_sum_shared_atomics, "failed", ["atomic adds (into a shared slot)"]),
    (block_sum_serial_thread0, "failed", ["block 0, thread 0 read 64 shared slots", "6 rounds"]),
    (block_sum_serial_global, "failed", ["thread 0 read 64 values of x", "one value after"]),
    (block_sum_barrier_in_branch, "failed", ["barrier inside a branch", "if t < stride"]),
    pytest.param(block_sum_stops_early, "failed", ["even-numbered", "stride > 0"],
                 marks=SIM_ONLY),
    (block_sum_stride_from_block, "failed", ["array of 64 elements", "half the block"]),
    (block_sum_never_halves, "failed", ["did not finish", "halve its stride"]),
    pytest.param(block_sum_no_barriers, "failed",
                 ["0 `cuda.syncthreads()` call", "after each halving step"], marks=SIM_ONLY),
    pytest.param(block_sum_barrier_after_fill_only, "failed",
                 ["too small", "after each halving step"], marks=SIM_ONLY),
    pytest.param(block_sum_barrier_in_loop_only, "failed",
                 ["1 `cuda.syncthreads()` call", "after filling shared memory"], marks=SIM_ONLY),
    (block_sum_racy_total, "failed", ["data race", "cuda.atomic.add"]),
    (block_sum_overwrites_total, "failed", ["cuda.atomic.add"]),
    (block_sum_no_guard, "failed", ["past the end", "put 0 into shared memory"]),
    pytest.param(block_sum_no_zero_past_end, "failed",
                 ["only the last, partial block", "adds nothing"], marks=SIM_ONLY),
    pytest.param(block_sum_small_shared, "failed",
                 ["array of 32 elements", "threads must equal"], marks=SIM_ONLY),
]


def assert_verdict(result, status, words):
    text = str(result).lower()
    assert result.status == status, text
    assert result.passed == (status == "passed") == bool(result)
    for word in words:
        assert word.lower() in text, f"{word!r} missing from:\n{text}"
    if status == "failed" and "seed=" in text:
        assert f"seed={result.seed}" in text


@pytest.mark.parametrize(("kernel", "status", "words"), MULTIPLY_CASES,
                         ids=lambda case: getattr(case, "__name__", None))
@pytest.mark.parametrize("seed", [11, 2025])
def test_check_multiply(kernel, status, words, seed):
    assert_verdict(check_multiply(kernel, seed=seed, show=False), status, words)


@pytest.mark.parametrize(("kernel", "status", "words"), DOT_CASES,
                         ids=lambda case: getattr(case, "__name__", None))
@pytest.mark.parametrize("seed", [11, 2025])
def test_check_dot_atomic(kernel, status, words, seed):
    assert_verdict(check_dot_atomic(kernel, seed=seed, show=False), status, words)


@pytest.mark.parametrize(("kernel", "status", "words"), BLOCK_SUM_CASES,
                         ids=lambda case: getattr(case, "__name__", None))
def test_check_block_sum(kernel, status, words):
    result = check_block_sum(kernel, threads_per_block=THREADS, seed=7, show=False)
    assert_verdict(result, status, words)


@SIM_ONLY
@pytest.mark.parametrize("kernel", [block_sum_no_barriers, block_sum_barrier_after_fill_only,
                                    block_sum_barrier_in_loop_only])
def test_a_missing_barrier_is_caught_whatever_the_data(kernel):
    # Measured over 40 seeds per kernel while writing the checks: always wrong by far more than
    # the tolerance. Here a few more seeds, with the sizes drawn afresh each time.
    for seed in (1, 99, 12345):
        result = check_block_sum(kernel, seed=seed, show=False)
        assert result.status == "failed" and "cuda.syncthreads()" in result.hint, str(result)


# --- what every check does, seen through chapter 01 ----------------------------------------------


def test_a_check_prints_its_result_and_returns_it(capsys):
    result = check_multiply(multiply_solution)
    printed = capsys.readouterr().out
    assert printed.startswith("✅ PASSED — multiply:") and result.passed
    failed = check_multiply(multiply_no_guard)
    printed = capsys.readouterr().out
    assert printed.startswith("❌ NOT YET RIGHT — multiply:") and "Hint:" in printed
    assert f"seed={failed.seed}" in printed
    check_dot_atomic(dot_stub)
    assert capsys.readouterr().out.startswith("✏️ NOT ATTEMPTED YET — dot_atomic:")


def test_a_failure_repeats_with_its_seed():
    first = check_multiply(multiply_skips_last_block, show=False)
    again = check_multiply(multiply_skips_last_block, seed=first.seed, show=False)
    assert first.message == again.message
    seeds = {check_multiply(multiply_stub, show=False).seed for _ in range(5)}
    assert len(seeds) > 1, "each call should draw a fresh seed"


@pytest.mark.parametrize(
    ("thing", "words"),
    [
        (None, "no kernel to check"),
        (42, "pass the kernel itself"),
        (multiply_not_jitted, "@cuda.jit"),
        (cuda.jit(device=True)(lambda a: a), "device function"),
        (dot_solution, "takes 3 argument"),
    ],
)
def test_checks_never_raise_on_a_wrong_argument(thing, words):
    result = check_block_sum(thing, show=False)
    assert not result.passed and words in str(result)


def test_the_package_ships_no_solution_kernels():
    from gpulab.exercises import ch01

    kernels = [name for name, value in vars(ch01).items() if hasattr(value, "py_func")]
    assert kernels == []


# --- more wrong answers, written as learners write them, and right ones written differently ---


@cuda.jit
def multiply_block_as_a_shift(x, y, out):
    i = (cuda.blockIdx.x << 6) + cuda.threadIdx.x
    if i < x.shape[0]:
        out[i] = x[i] * y[i]


@cuda.jit
def multiply_block_of_64(x, y, out):
    i = cuda.blockIdx.x * 64 + cuda.threadIdx.x
    if i < x.shape[0]:
        out[i] = x[i] * y[i]


@cuda.jit
def multiply_hard_coded_n(x, y, out):
    i = cuda.grid(1)
    if i < 300:
        out[i] = x[i] * y[i]


@cuda.jit
def multiply_capped_beside_a_right_guard(x, y, out):  # the arrays here are shorter than 5000
    i = cuda.grid(1)
    if i < x.shape[0] and i < 5000:
        out[i] = x[i] * y[i]


@cuda.jit
def multiply_with_numpy_import(x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = np_multiply(x[i], y[i])


@cuda.jit
def multiply_with_percent_print(x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        if i == 0:
            print("root two is %f" % sqrt(2.0))  # noqa: UP031 - the simulator-only code tested
        out[i] = x[i] * y[i]


@cuda.jit(device=True)
def times(a, b):
    return a * b


@cuda.jit(device=True)
def plus(a, b):
    return a + b


OPERATIONS = [times, plus]


@cuda.jit
def multiply_through_a_list_of_device_functions(x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = OPERATIONS[0](x[i], y[i])


@cuda.jit
def multiply_grid_stride(x, y, out):
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        out[i] = x[i] * y[i]


@cuda.jit
def multiply_steps_by_block(x, y, out):  # right out, but blocks redo each other's elements
    for i in range(cuda.grid(1), x.shape[0], cuda.blockDim.x):
        out[i] = x[i] * y[i]


@cuda.jit
def multiply_steps_by_two_blocks(x, y, out):
    for i in range(cuda.grid(1), x.shape[0], 2 * cuda.blockDim.x):
        out[i] = x[i] * y[i]


@cuda.jit
def multiply_steps_by_blocks_times_32(x, y, out):  # the grid's size only for blocks of 32
    i = cuda.grid(1)
    while i < x.shape[0]:
        out[i] = x[i] * y[i]
        i += cuda.gridDim.x * 32


@cuda.jit
def multiply_spelled_out(x, y, out):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i >= x.shape[0]:
        return
    out[i] = times(x[i], y[i])


@cuda.jit
def dot_block_of_64(x, y, out):
    i = cuda.blockIdx.x * 64 + cuda.threadIdx.x
    if i < x.shape[0]:
        cuda.atomic.add(out, 0, x[i] * y[i])


@cuda.jit
def dot_adds_sums(x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        cuda.atomic.add(out, 0, x[i] + y[i])


@cuda.jit
def dot_grid_stride(x, y, out):
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        cuda.atomic.add(out, 0, x[i] * y[i])


@cuda.jit
def dot_spelled_out(x, y, out):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < x.shape[0]:
        product = x[i] * y[i]
        cuda.atomic.add(out, 0, product)


@cuda.jit
def block_sum_shift_halving(x, out):
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * THREADS + t
    partial[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    stride = THREADS >> 1
    while stride >= 1:
        if t < stride:
            partial[t] = partial[t] + partial[t + stride]
        cuda.syncthreads()
        stride >>= 1
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_stride_32(x, out):  # right for THREADS = 64 only: the first stride typed in
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    stride = 32
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_unrolled_from_32(x, out):  # the rounds written out, for THREADS = 64 only
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    if t < 32:
        partial[t] += partial[t + 32]
    cuda.syncthreads()
    if t < 16:
        partial[t] += partial[t + 16]
    cuda.syncthreads()
    if t < 8:
        partial[t] += partial[t + 8]
    cuda.syncthreads()
    if t < 4:
        partial[t] += partial[t + 4]
    cuda.syncthreads()
    if t < 2:
        partial[t] += partial[t + 2]
    cuda.syncthreads()
    if t < 1:
        partial[t] += partial[t + 1]
    cuda.syncthreads()
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_index_of_64(x, out):  # the block size typed into the index
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * 64 + t
    partial[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_s_from_block(x, out):  # right: fill 0 first, the stride named s
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = 0.0
    if i < x.shape[0]:
        partial[t] = x[i]
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if t < s:
            partial[t] += partial[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_with_gpulab_tree(x, out):
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    block_tree_sum(partial)
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


MORE_MULTIPLY_CASES = [
    (multiply_grid_stride, "passed", ["elements are right", "each written by one thread"]),
    (multiply_steps_by_block, "failed", ["77 of 117 elements were written by more than one",
                                         "the block size, `cuda.blockdim.x` = 40", "no loop"]),
    (multiply_steps_by_two_blocks, "failed", ["written by more than one thread", "steps by 80",
                                              "the grid has 120 threads"]),
    (multiply_steps_by_blocks_times_32, "failed", ["written by more than one thread",
                                                   "steps by 96", "no two threads meet"]),
    (multiply_spelled_out, "passed", ["elements are right"]),
    (multiply_block_of_64, "failed", ["hard-codes the block size", "cuda.blockidx.x * 64",
                                      "never a number"]),
    (multiply_block_as_a_shift, "failed", ["hard-codes the block size", "<< 6"]),
    (multiply_hard_coded_n, "failed", ["`if i < 300:` compares with a fixed number",
                                       "read from the array's shape"]),
    (multiply_capped_beside_a_right_guard, "failed", [
        "`if i < x.shape[0] and i < 5000:` compares", "with a fixed number",
        "read from the array's shape"]),  # on a GPU's sizes, a failure named by the same words
    (multiply_with_numpy_import, "failed", ["does not compile for a real gpu",
                                            "ufunc 'multiply'", "`x * y`"]),
    (multiply_with_percent_print, "failed", ["does not compile for a real gpu", "mod",
                                             "print('i =', i)"]),
    (multiply_through_a_list_of_device_functions, "failed",
     ["does not compile for a real gpu", "'operations': a python list",
      "call each device function by its name"]),
    (elementwise_multiply, "failed", ["is gpulab's own",
                                      "gpulab.kernels.elementwise.elementwise_multiply"]),
]
MORE_DOT_CASES = [
    (dot_grid_stride, "passed", ["as expected"]),
    (dot_spelled_out, "passed", ["as expected"]),
    (dot_block_of_64, "failed", ["hard-codes the block size", "never a number"]),
    (dot_adds_sums, "failed", ["sum of x[i] + y[i]", "multiply, don't add"]),
    (dot_atomic, "failed", ["is gpulab's own", "gpulab.kernels.dot.dot_atomic"]),
]
MORE_BLOCK_SUM_CASES = [
    (block_sum_shift_halving, "passed", ["as expected", "by a tree"]),
    (block_sum_s_from_block, "passed", ["as expected", "by a tree"]),
    (block_sum_stride_32, "failed", ["right with threads = 64 but not with threads = 128",
                                     "the first step's stride is a fixed number (`stride = 32`)",
                                     "not half the block", "whatever the block size"]),
    (block_sum_unrolled_from_32, "failed", ["not with threads = 128", "(`if t < 32:`)"]),
    (block_sum_index_of_64, "failed", ["not with threads = 128",
                                       "`i = cuda.blockidx.x * 64 + t` hard-codes the block"]),
    (block_sum_with_gpulab_tree, "failed", ["uses gpulab's own",
                                            "gpulab.kernels.dot.block_tree_sum"]),
]


@pytest.mark.parametrize(("kernel", "status", "words"), MORE_MULTIPLY_CASES,
                         ids=lambda case: getattr(case, "__name__", None))
def test_check_multiply_more(kernel, status, words):
    assert_verdict(check_multiply(kernel, seed=3, show=False), status, words)


@pytest.mark.parametrize(("kernel", "status", "words"), MORE_DOT_CASES,
                         ids=lambda case: getattr(case, "__name__", None))
def test_check_dot_atomic_more(kernel, status, words):
    assert_verdict(check_dot_atomic(kernel, seed=3, show=False), status, words)


@pytest.mark.parametrize(("kernel", "status", "words"), MORE_BLOCK_SUM_CASES,
                         ids=lambda case: getattr(case, "__name__", None))
def test_check_block_sum_more(kernel, status, words):
    assert_verdict(check_block_sum(kernel, threads_per_block=THREADS, seed=3, show=False),
                   status, words)


def test_a_replaced_reference_is_told_not_trusted(monkeypatch):
    from gpulab import reference

    monkeypatch.setattr(reference, "dot", lambda x, y: 0.0)
    result = check_dot_atomic(dot_adds_nothing, seed=3, show=False)
    assert_verdict(result, "failed", ["replaced before the check", "`gpulab.reference.dot`"])


@pytest.mark.parametrize("seed", range(6))
def test_a_hard_coded_block_size_fails_whatever_the_seed(seed):
    assert_verdict(check_multiply(multiply_block_of_64, seed=seed, show=False), "failed",
                   ["hard-codes the block size"])


def test_the_race_the_partial_block_and_the_method_are_mistakes_in_the_specs():
    from gpulab.exercises.ch01 import (
        BLOCK_SUM,
        BLOCK_SUM_PARTIAL_BLOCK_MISTAKES,
        DOT_ATOMIC,
        DOT_PARTIAL_BLOCK_MISTAKES,
        DOT_SHARE_MISTAKES,
        RACE_MISTAKES,
        SHARED_RACE,
        TREE_METHOD_MISTAKES,
        UNEVEN_BARRIERS,
    )

    assert DOT_ATOMIC.mistakes[-7:] == (RACE_MISTAKES + DOT_PARTIAL_BLOCK_MISTAKES
                                        + DOT_SHARE_MISTAKES + (UNEVEN_BARRIERS, SHARED_RACE))
    assert BLOCK_SUM.mistakes[-9:] == (RACE_MISTAKES + BLOCK_SUM_PARTIAL_BLOCK_MISTAKES
                                       + TREE_METHOD_MISTAKES)
    table = BLOCK_SUM.mistake_table()
    assert "| a right total by one atomic add per thread (into out[0] or a shared slot) | trace |" \
        in table
    assert "read in the source | source |" in table
    assert "idle threads not writing 0 (only the last, partial block wrong) | outputs |" in table
    assert "race" not in DOT_ATOMIC.also and "wrong method" not in BLOCK_SUM.also


def test_a_race_and_a_wrong_method_say_how_to_repeat_them():
    race = check_dot_atomic(dot_racy, seed=4, show=False)
    assert_verdict(race, "failed", ["data race"])
    assert "repeat it with check_dot_atomic(kernel, seed=4))." in race.message
    method = check_block_sum(block_sum_atomic_per_thread, threads_per_block=THREADS, seed=7,
                             show=False)
    assert_verdict(method, "failed", ["one per thread"])
    assert "(traced on " in method.message
    assert f"blocks of {THREADS} threads, n=" in method.message
    assert method.message.endswith("seed=7).")


# --- more answers, written as learners write them ------------------------------------------


@cuda.jit
def multiply_early_return(x, y, out):  # right: leave early, guard on out, factors swapped
    i = cuda.grid(1)
    if i >= out.shape[0]:
        return
    out[i] = y[i] * x[i]


@cuda.jit
def multiply_in_place_on_x(x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        x[i] *= y[i]
        out[i] = x[i]


@cuda.jit
def dot_atomic_outside_guard(x, y, out):  # right: threads past the end add 0
    i = cuda.grid(1)
    product = 0.0
    if i < x.shape[0]:
        product = x[i] * y[i]
    cuda.atomic.add(out, 0, product)


@cuda.jit
def dot_block_total_first(x, y, out):  # right: a shared total per block, one atomic into out
    total = cuda.shared.array(1, x.dtype)
    if cuda.threadIdx.x == 0:
        total[0] = 0
    cuda.syncthreads()
    i = cuda.grid(1)
    if i < x.shape[0]:
        cuda.atomic.add(total, 0, x[i] * y[i])
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        cuda.atomic.add(out, 0, total[0])


@cuda.jit
def dot_into_out_i(x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        cuda.atomic.add(out, i, x[i] * y[i])


@cuda.jit
def dot_squares_x(x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        cuda.atomic.add(out, 0, x[i] * x[i])


@cuda.jit
def dot_guard_one_short(x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0] - 1:
        cuda.atomic.add(out, 0, x[i] * y[i])


@cuda.jit
def dot_index_one_ahead(x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0] - 1:
        cuda.atomic.add(out, 0, x[i + 1] * y[i + 1])


@cuda.jit
def dot_thread_index_guarded_globally(x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        t = cuda.threadIdx.x
        cuda.atomic.add(out, 0, x[t] * y[t])


@cuda.jit
def block_sum_interleaved(x, out):  # right: strides 1, 2, 4, … on slots t % (2 * s) == 0
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    s = 1
    while s < cuda.blockDim.x:
        if t % (2 * s) == 0:
            partial[t] += partial[t + s]
        cuda.syncthreads()
        s *= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_every_thread_adds(x, out):
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_into_out_block(x, out):
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.add(out, cuda.blockIdx.x, partial[0])


@cuda.jit
def block_sum_global_index_adds(x, out):  # `i == 0`: only block 0 adds its total
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if i == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_last_thread_adds_its_slot(x, out):
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == cuda.blockDim.x - 1:
        cuda.atomic.add(out, 0, partial[t])


@cuda.jit
def block_sum_reads_x_t(x, out):
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[t] if i < x.shape[0] else 0
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_one_atomic_per_warp(x, out):  # right total, but 2 atomics per block of 64
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    stride = 16
    while stride > 0:
        if t % 32 < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t % 32 == 0:
        cuda.atomic.add(out, 0, partial[t])


@cuda.jit
def block_sum_all_threads_in_every_round(x, out):  # barriers right, rounds wrong
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t + stride < cuda.blockDim.x:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def dot_thread_zero_adds_everything(x, y, out):  # right total, no race, no parallel work
    if cuda.grid(1) == 0:
        total = 0.0
        for i in range(x.shape[0]):
            total += x[i] * y[i]
        out[0] = total


@pytest.mark.parametrize(("check", "kernel", "status", "words"), [
    (check_multiply, multiply_early_return, "passed", ["elements are right"]),
    (check_multiply, multiply_in_place_on_x, "failed", ["wrote into its input x",
                                                        "into out only"]),
    (check_dot_atomic, dot_atomic_outside_guard, "passed", ["as expected"]),
    (check_dot_atomic, dot_block_total_first, "passed", ["as expected"]),
    pytest.param(check_dot_atomic, dot_thread_zero_adds_everything, "failed",
                 ["block 0, thread 0 alone wrote out[0]", "no parallel work"], marks=SIM_ONLY),
    (check_dot_atomic, dot_into_out_i, "failed", ["array of 1 elements", "goes into out[0]"]),
    (check_dot_atomic, dot_squares_x, "failed", ["x · x (or y · y)", "one of y"]),
    (check_dot_atomic, dot_guard_one_short, "failed", ["without the product of element",
                                                       "one product was left out"]),
    (check_dot_atomic, dot_index_one_ahead, "failed", ["without the product of element 0"]),
    (check_dot_atomic, dot_thread_index_guarded_globally, "failed",
     ["every block added the first block's products", "block's index"]),
    (check_block_sum, block_sum_interleaved, "passed", ["by a tree"]),
    (check_block_sum, block_sum_every_thread_adds, "failed",
     ["64 times the total", "every thread of a block added"]),
    (check_block_sum, block_sum_into_out_block, "failed", ["array of 1 elements",
                                                           "goes into out[0]"]),
    (check_block_sum, block_sum_reads_x_t, "failed", ["every block summed the first block's"]),
    (check_block_sum, block_sum_global_index_adds, "failed",
     ["block 0's total alone", "not one thread of every block", "its index in the block"]),
    (check_block_sum, block_sum_last_thread_adds_its_slot, "failed",
     ["sum of slot 63 of each block's", "read from the wrong slot", "ends in slot 0"]),
    (check_block_sum, block_sum_all_threads_in_every_round, "failed",
     ["the sum is", "where your `cuda.syncthreads()` calls are", "only the threads t < stride"]),
    (check_block_sum, block_sum_one_atomic_per_warp, "failed",
     ["made 2 atomic adds (into out[0]): one per 32 threads", "one atomic per block"]),
], ids=lambda case: getattr(case, "__name__", None))
def test_more_answers_as_learners_write_them(check, kernel, status, words):
    assert_verdict(check(kernel, seed=5, show=False), status, words)


# --- the work shared out: no thread takes more than its share ----------------------------------


@cuda.jit
def multiply_by_thread_0_of_each_block(x, y, out):
    """Wrong: thread 0 of each block loops over its block's elements, the others idle."""
    if cuda.threadIdx.x == 0:
        start = cuda.blockIdx.x * cuda.blockDim.x
        for i in range(start, min(start + cuda.blockDim.x, x.shape[0])):
            out[i] = x[i] * y[i]


@cuda.jit
def multiply_stepping_by_4096(x, y, out):
    """Wrong: a grid-stride loop whose step, 4096, is typed in."""
    i = cuda.grid(1)
    while i < x.shape[0]:
        out[i] = x[i] * y[i]
        i += 4096


@cuda.jit
def dot_by_thread_0_of_each_block(x, y, out):
    """Wrong: thread 0 of each block adds its block's products alone, then one atomic."""
    if cuda.threadIdx.x == 0:
        start = cuda.blockIdx.x * cuda.blockDim.x
        total = 0.0
        for i in range(start, min(start + cuda.blockDim.x, x.shape[0])):
            total += x[i] * y[i]
        cuda.atomic.add(out, 0, total)


@cuda.jit
def dot_stepping_by_4096(x, y, out):
    """Wrong: a loop stepping by 4096 typed in (products counted twice past 4096)."""
    j = cuda.grid(1)
    while j < x.shape[0]:
        cuda.atomic.add(out, 0, x[j] * y[j])
        j += 4096


@pytest.mark.parametrize("check, kernel, words", [
    (check_multiply, multiply_by_thread_0_of_each_block, "written by one thread"),
    (check_multiply, multiply_stepping_by_4096, "`i += 4096` steps by a fixed number"),
    (check_dot_atomic, dot_by_thread_0_of_each_block, "read by one thread"),
    (check_dot_atomic, dot_stepping_by_4096, "`j += 4096` steps by a fixed number"),
])
@pytest.mark.parametrize("seed", [1, 7])
def test_work_not_shared_out_fails(check, kernel, words, seed):
    result = check(kernel, seed=seed, show=False)
    assert result.status == "failed", result
    assert words in result.message, result


@cuda.jit
def dot_resetting_out_in_the_kernel(x, y, out):
    """Wrong: thread 0 sets out[0] = 0 while the others already add into it."""
    i = cuda.grid(1)
    if i == 0:
        out[0] = 0
    if i < x.shape[0]:
        cuda.atomic.add(out, 0, x[i] * y[i])


def test_a_plain_reset_among_atomics_is_counted_as_one_plain_write():
    result = check_dot_atomic(dot_resetting_out_in_the_kernel, seed=3, show=False)
    assert result.status == "failed", result
    assert "1 of them without an atomic" in result.message, result


@cuda.jit
def multiply_two_per_thread(x, y, out):
    """Wrong method, right values: thread i writes elements 2i and 2i + 1."""
    i = 2 * cuda.grid(1)
    if i < out.shape[0]:
        out[i] = x[i] * y[i]
    if i + 1 < out.shape[0]:
        out[i + 1] = x[i + 1] * y[i + 1]


@pytest.mark.parametrize("seed", [1, 7, 12345])
def test_multiply_two_elements_per_thread_fails(seed):
    result = check_multiply(multiply_two_per_thread, seed=seed, show=False)
    assert result.status == "failed", result
    assert "2 elements written by one thread" in result.message and "one each" in result.message


@cuda.jit
def multiply_by_atomic_add(x, y, out):
    """Wrong: adds the product onto out's starting value (whatever memory held) with an atomic."""
    i = cuda.grid(1)
    if i < out.shape[0]:
        cuda.atomic.add(out, i, x[i] * y[i])


def test_multiply_added_into_out_is_told_it_adds_instead_of_storing():
    result = check_multiply(multiply_by_atomic_add, seed=1, show=False)
    assert result.status == "failed" and "adds into `out`" in result.message, result


@cuda.jit
def block_sum_total_read_by_the_last_thread(x, out):  # no barrier after the last round
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    stride = cuda.blockDim.x // 2
    while stride > 0:
        cuda.syncthreads()
        if t < stride:
            partial[t] += partial[t + stride]
        stride //= 2
    if t == cuda.blockDim.x - 1:
        cuda.atomic.add(out, 0, partial[0])


@pytest.mark.parametrize("seed", [1, 7, 12345])
def test_a_total_read_by_another_thread_without_a_barrier_is_a_race(seed):
    result = check_block_sum(block_sum_total_read_by_the_last_thread,
                             threads_per_block=THREADS, seed=seed, show=False)
    assert result.status == "failed", result
    assert ("thread 0 wrote partial[0] and block 0, thread 63 read it between the same two "
            "barriers") in result.message, result


@cuda.jit
def dot_by_warp_shuffles(x, y, out):
    """Right on a GPU, written differently: a warp's products summed by shuffles, one atomic
    per warp. The simulator has no shuffles: told as its gap, not as the learner's bug."""
    i = cuda.grid(1)
    v = np.float32(0)
    if i < x.shape[0]:
        v = x[i] * y[i]
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if cuda.laneid == 0:
        cuda.atomic.add(out, 0, v)


def test_a_warp_shuffle_the_simulator_lacks_is_told_as_its_gap():
    result = check_dot_atomic(dot_by_warp_shuffles, seed=1, show=False)
    assert result.status == "failed", result
    assert "calls `cuda.shfl_down_sync`" in result.message, result.message
    assert "the simulator's gap, not necessarily a mistake of yours" in result.message


@cuda.jit
def dot_into_one_shared_slot(x, y, out):
    """Wrong: every thread adds its product into one shared slot with a plain +=, then thread 0
    adds the slot with one atomic: the read-modify-writes race on a GPU (the simulator runs
    them one after another, so its total is right)."""
    total = cuda.shared.array(1, np.float32)
    i = cuda.grid(1)
    if cuda.threadIdx.x == 0:
        total[0] = 0
    cuda.syncthreads()
    if i < x.shape[0]:
        total[0] += x[i] * y[i]
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        cuda.atomic.add(out, 0, total[0])


@pytest.mark.parametrize("seed", [1, 7])
def test_dot_names_a_shared_slot_everyone_adds_into(seed):
    result = check_dot_atomic(dot_into_one_shared_slot, seed=seed, show=False)
    assert result.status == "failed", result
    assert "between the same two barriers" in result.message, result.message


@cuda.jit
def dot_guarded_by_out_s_length(x, y, out):
    """Wrong: the guard copied from multiply, `i < out.size`; out has one element."""
    i = cuda.grid(1)
    if i < out.size:
        cuda.atomic.add(out, 0, x[i] * y[i])


@cuda.jit
def block_sum_guarded_by_out_s_length(x, out):
    """Wrong: the fill's guard measures out (one element): only x[0] is loaded."""
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < len(out):
        partial[t] = x[i]
    else:
        partial[t] = 0
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@pytest.mark.parametrize("seed", [1, 7])
def test_a_guard_on_the_output_s_length_is_named(seed):
    """Not an overwrite of out[0], nor a missing barrier: the guard lets only thread 0 in."""
    for result, line in (
            (check_dot_atomic(dot_guarded_by_out_s_length, seed=seed, show=False),
             "if i < out.size:"),
            (check_block_sum(block_sum_guarded_by_out_s_length, threads_per_block=THREADS,
                             seed=seed, show=False), "if i < len(out):")):
        assert result.status == "failed", result
        assert f"your guard `{line}` measures the output" in result.message, result.message
        assert "x.shape[0]" in result.hint, result.hint


@cuda.jit
def block_sum_barrier_under_a_uniform_if(x, out):
    """Right, written differently: the barrier inside `if stride > 0:`, which every thread of
    the block takes the same way (CUDA allows a barrier in such a branch)."""
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        stride //= 2
        if stride > 0:
            cuda.syncthreads()
    cuda.syncthreads()
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_uniform_if_last_thread_reads(x, out):
    """Wrong: as above, but without the last barrier, and the block's last thread (not thread
    0, which wrote partial[0]) adds the total: a race on partial[0]."""
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        stride //= 2
        if stride > 0:
            cuda.syncthreads()
    if t == cuda.blockDim.x - 1:
        cuda.atomic.add(out, 0, partial[0])


@pytest.mark.parametrize("seed", [1, 7])
def test_a_barrier_under_a_branch_every_thread_takes_alike_is_legal(seed):
    right = check_block_sum(block_sum_barrier_under_a_uniform_if, threads_per_block=THREADS,
                            seed=seed, show=False)
    assert right.passed, right.message
    wrong = check_block_sum(block_sum_uniform_if_last_thread_reads, threads_per_block=THREADS,
                            seed=seed, show=False)
    assert wrong.status == "failed", wrong
    assert "wrote partial[0]" in wrong.message and "between the same two barriers" in (
        wrong.message), wrong.message
    assert "inside a branch" not in wrong.message, wrong.message


@cuda.jit
def block_sum_index_name_reused_for_the_stride(x, out):
    """Right: the global index's name `i`, bound again to half the block after the fill, is
    the same for every thread from there on."""
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    i = cuda.blockDim.x // 2
    while i > 0:
        if t < i:
            partial[t] += partial[t + i]
        cuda.syncthreads()
        i //= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_keyword_shape_stride_typed_in(x, out):
    """Wrong: the shared array sized by THREADS through `shape=`, the first stride typed in."""
    partial = cuda.shared.array(shape=THREADS, dtype=x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    stride = 32
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_keyword_shape_typed_in(x, out):
    """Wrong: 64 slots typed in through `shape=` (and a stride to match)."""
    partial = cuda.shared.array(shape=64, dtype=np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    stride = 32
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_one_tuple_shape_typed_in(x, out):
    """Wrong: 64 slots typed in as a 1-tuple."""
    partial = cuda.shared.array((64,), x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_flag_counted_in_a_loop_of_the_thread(x, out):
    """Wrong: `mine` is counted in a loop whose bounds depend on the thread, and the barriers
    run only where it is above 0 (threads past the end skip them)."""
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    n = x.shape[0]
    mine = 0
    partial[t] = 0
    for j in range(i, min(i + 1, n)):
        partial[t] = x[j]
        mine += 1
    if mine > 0:
        cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        if mine > 0:
            cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_return_under_a_nested_branch(x, out):
    """Wrong: threads past the end return, under an `if` that does not vary inside an `else`
    that does, before the barriers the others wait at."""
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < x.shape[0]:
        partial[t] = x[i]
    else:
        partial[t] = 0
        if x.shape[0] > 0:
            return
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_fill_guarded_by_a_name_for_out(x, out):
    """Wrong: the fill's guard compares with out's size, through a name."""
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    n = out.size
    partial[t] = x[i] if i < n else 0
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def dot_guarded_by_a_name_for_out(x, y, out):
    """Wrong: the guard compares with out's length, bound to a name first."""
    i = cuda.grid(1)
    n = out.shape[0]
    if i < n:
        cuda.atomic.add(out, 0, x[i] * y[i])


@pytest.mark.parametrize("seed", [1, 7])
def test_a_name_bound_again_to_the_same_value_for_every_thread_is_uniform(seed):
    result = check_block_sum(block_sum_index_name_reused_for_the_stride,
                             threads_per_block=THREADS, seed=seed, show=False)
    assert result.passed, result.message


@pytest.mark.parametrize("kernel, words", [
    (block_sum_keyword_shape_stride_typed_in, ["not with THREADS = 128", "`stride = 32`"]),
    (block_sum_keyword_shape_typed_in, ["types in 64 slots"]),
    (block_sum_one_tuple_shape_typed_in, ["types in 64 slots"]),
    (block_sum_flag_counted_in_a_loop_of_the_thread, ["inside `if mine > 0:`"]),
    (block_sum_return_under_a_nested_branch, ["`return` under `if i < x.shape[0]:`",
                                              "leave before a barrier"]),
    (block_sum_fill_guarded_by_a_name_for_out, ["your guard `partial[t] = x[i] if i < n else 0`",
                                                "measures the output"]),
])
@pytest.mark.parametrize("seed", [1, 7])
def test_round_ten_s_wrong_block_sums_are_named(kernel, words, seed):
    """A shared array's size given as `shape=` or a 1-tuple, a flag counted in a loop of the
    thread's own, a return under a uniform `if` inside a varying branch, a guard through a
    name bound to out's size."""
    result = check_block_sum(kernel, threads_per_block=THREADS, seed=seed, show=False)
    assert result.status == "failed", result
    for word in words:
        assert word in result.message, (word, result.message)


def test_a_guard_on_out_through_a_name_is_named():
    result = check_dot_atomic(dot_guarded_by_a_name_for_out, seed=1, show=False)
    assert result.status == "failed", result
    assert "your guard `if i < n:` measures the output" in result.message, result.message


ROUNDS = 10  # rounds enough for blocks of 1024 threads


@cuda.jit
def block_sum_index_and_stride_in_one_tuple(x, out):
    """Right: `t, stride = cuda.threadIdx.x, cuda.blockDim.x // 2`: only t varies."""
    partial = cuda.shared.array(THREADS, x.dtype)
    i = cuda.grid(1)
    t, stride = cuda.threadIdx.x, cuda.blockDim.x // 2
    partial[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_rounds_reuse_the_index_name(x, out):
    """Right: `for i in range(ROUNDS)` binds the global index's name again, for every thread
    alike; the barrier under `if stride > 0:`, a test of no thread's own values."""
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    for i in range(ROUNDS):
        stride = cuda.blockDim.x >> (i + 1)
        if stride > 0:
            if t < stride:
                partial[t] += partial[t + stride]
            cuda.syncthreads()
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_index_name_bound_again_in_a_loop(x, out):
    """Right: the global index's name bound again, inside the rounds' loop, to the stride."""
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    for r in range(ROUNDS):
        i = cuda.blockDim.x >> (r + 1)
        if i > 0:
            if t < i:
                partial[t] += partial[t + i]
            cuda.syncthreads()
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_continue_after_the_round_s_barrier(x, out):
    """Right: the barrier at the top of each round; threads with nothing to add `continue`,
    and every thread still reaches every barrier."""
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    stride = cuda.blockDim.x // 2
    while stride > 0:
        cuda.syncthreads()
        s = stride
        stride //= 2
        if t >= s:
            continue
        partial[t] += partial[t + s]
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_with_a_two_slot_scratch_array(x, out):
    """Right: a second shared array of 2 slots for the block's own numbers (its size typed in,
    by design: not one slot per thread)."""
    partial = cuda.shared.array(THREADS, x.dtype)
    info = cuda.shared.array(2, np.int32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    if t == 0:
        info[0] = cuda.blockDim.x // 2
        info[1] = 0
    cuda.syncthreads()
    stride = info[0]
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit(device=True)
def _thread_index():
    return cuda.threadIdx.x


@cuda.jit
def block_sum_barrier_under_a_device_function_s_index(x, out):
    """Wrong: t from a device function; the barrier inside `if t < stride:` (which the source
    rules cannot see varies: the trace shows it)."""
    partial = cuda.shared.array(THREADS, x.dtype)
    t = _thread_index()
    i = cuda.blockIdx.x * cuda.blockDim.x + t
    partial[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
            cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@pytest.mark.parametrize("kernel", [
    block_sum_index_and_stride_in_one_tuple, block_sum_rounds_reuse_the_index_name,
    block_sum_index_name_bound_again_in_a_loop, block_sum_continue_after_the_round_s_barrier,
    block_sum_with_a_two_slot_scratch_array,
])
@pytest.mark.parametrize("seed", [1, 7])
def test_round_eleven_s_right_block_sums_pass(kernel, seed):
    """What varies is followed through the code (tuples one by one, a loop's variable, names
    bound again inside a loop); a `continue` after the round's barrier skips none."""
    result = check_block_sum(kernel, threads_per_block=THREADS, seed=seed, show=False)
    assert result.passed, (kernel.__name__, result.message)


@pytest.mark.parametrize("seed", [1, 7])
def test_threads_of_a_block_passing_different_barriers_are_seen_in_the_trace(seed):
    result = check_block_sum(block_sum_barrier_under_a_device_function_s_index,
                             threads_per_block=THREADS, seed=seed, show=False)
    assert result.status == "failed", result
    assert "some threads passed" in result.message and "never arrive" in result.message, (
        result.message)


DOT_SLOTS = 1024  # the dot kernels' shared slots: the most threads a block can have


@cuda.jit
def block_sum_counting_the_live_slots_with_a_block_vote(x, out):
    """Right: `cuda.syncthreads_count` waits and returns the block's count of filled slots,
    the same to every thread; the tree halves over those slots only."""
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < x.shape[0]:
        partial[t] = x[i]
    live = cuda.syncthreads_count(1 if i < x.shape[0] else 0)
    size = live
    while size > 1:
        half = (size + 1) // 2
        if t + half < size:
            partial[t] += partial[t + half]
        cuda.syncthreads()
        size = half
    if t == 0 and live > 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def dot_tree_under_a_block_vote(x, y, out):
    """Right: the block's tree under `if cuda.syncthreads_or(...)`, a vote every thread of the
    block gets the same answer to."""
    partial = cuda.shared.array(DOT_SLOTS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] * y[i] if i < x.shape[0] else 0
    if cuda.syncthreads_or(1 if i < x.shape[0] else 0):
        stride = cuda.blockDim.x // 2
        while stride > 0:
            if t < stride:
                partial[t] += partial[t + stride]
            cuda.syncthreads()
            stride //= 2
        if t == 0:
            cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def dot_tree_bounded_by_a_swapped_index(x, y, out):
    """Wrong: `t2, lim = lim, t2` makes lim the thread's index; the barrier sits in
    `while stride > lim:`, whose turns then depend on the thread."""
    partial = cuda.shared.array(DOT_SLOTS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] * y[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    lim = 0
    t2 = t
    t2, lim = lim, t2
    stride = cuda.blockDim.x // 2
    while stride > lim:
        partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def dot_tree_rounds_counted_to_a_break(x, y, out):
    """Wrong: each thread counts its rounds up to a `break` that only some threads take, then
    runs that many rounds, a barrier in each."""
    partial = cuda.shared.array(DOT_SLOTS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] * y[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    rounds = 0
    for r in range(ROUNDS):
        if t >= cuda.blockDim.x >> (r + 1):
            break
        rounds += 1
    for r in range(rounds):
        partial[t] += partial[t + (cuda.blockDim.x >> (r + 1))]
        cuda.syncthreads()
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@pytest.mark.parametrize("seed", [1, 7])
def test_a_block_vote_is_the_same_for_every_thread(seed):
    result = check_block_sum(block_sum_counting_the_live_slots_with_a_block_vote,
                             threads_per_block=THREADS, seed=seed, show=False)
    assert result.passed, result.message
    result = check_dot_atomic(dot_tree_under_a_block_vote, threads_per_block=THREADS, seed=seed,
                              show=False)
    assert result.passed, result.message


@pytest.mark.parametrize("kernel, said", [
    (dot_tree_bounded_by_a_swapped_index, "inside `while stride > lim:`"),
    (dot_tree_rounds_counted_to_a_break, "inside `for r in range(rounds):`"),
])
@pytest.mark.parametrize("seed", [1, 7])
def test_an_index_swapped_in_or_counted_to_a_break_varies(kernel, said, seed):
    """Every value of a tuple is read before any name is bound; a loop some threads leave
    early (`break` under a branch of theirs) sets names that vary."""
    result = check_dot_atomic(kernel, threads_per_block=THREADS, seed=seed, show=False)
    assert result.status == "failed", result
    assert said in result.message and "depends on the thread" in result.message, result.message


@cuda.jit(device=True)
def _block_tree(partial, t):
    s = cuda.blockDim.x // 2
    while s > 0:
        if t < s:
            partial[t] += partial[t + s]
        cuda.syncthreads()
        s //= 2


@cuda.jit
def dot_tree_in_a_device_function(x, y, out):
    """Right: the block's tree in a device function every thread calls."""
    partial = cuda.shared.array(DOT_SLOTS, x.dtype)
    t, i = cuda.threadIdx.x, cuda.grid(1)
    partial[t] = x[i] * y[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    _block_tree(partial, t)
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def dot_tree_in_a_device_function_called_under_the_guard(x, y, out):
    """Wrong: the device function that waits at the barriers is called under `if i < n:`, so
    the last block's threads past the end skip them."""
    partial = cuda.shared.array(DOT_SLOTS, x.dtype)
    t, i = cuda.threadIdx.x, cuda.grid(1)
    partial[t] = x[i] * y[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    if i < x.shape[0]:
        _block_tree(partial, t)
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@pytest.mark.parametrize("seed", [1, 7])
def test_a_device_function_that_waits_at_a_barrier_is_a_barrier(seed):
    right = check_dot_atomic(dot_tree_in_a_device_function, seed=seed, show=False)
    assert right.passed, right.message
    wrong = check_dot_atomic(dot_tree_in_a_device_function_called_under_the_guard, seed=seed,
                             show=False)
    assert wrong.status == "failed", wrong
    assert "barrier inside a branch" in wrong.message and "`_block_tree(partial, t)` is inside" \
        in wrong.message, wrong.message


def test_the_dot_s_trace_names_threads_passing_different_barriers():
    """A barrier the source rules cannot see (a device function's index) is named from the
    dot's trace, as from the block sum's."""
    result = check_dot_atomic(dot_barrier_under_a_device_function_s_index, seed=1, show=False)
    assert result.status == "failed", result
    assert "some threads passed" in result.message, result.message


@cuda.jit
def dot_barrier_under_a_device_function_s_index(x, y, out):
    """Wrong: t from a device function, the tree's barrier inside `if t < stride:`."""
    partial = cuda.shared.array(DOT_SLOTS, x.dtype)
    t = _thread_index()
    i = cuda.blockIdx.x * cuda.blockDim.x + t
    partial[t] = x[i] * y[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
            cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])
