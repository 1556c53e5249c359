"""What the kernel's source says (gpulab.exercises.source_rules): a kernel check's first steps
(the stub, simulator-only code) and barriers that every thread must reach."""

import gpulab  # noqa: F401  (must come before numba: it chooses the simulator or the GPU)

# isort: split
import ast

import numpy as np
import pytest
from learner_kernels import copy_guarded, multiply, multiply_stub, multiply_with_list
from numba import cuda

from gpulab import device
from gpulab.exercises import compiling, results, source_rules

SIM_ONLY = pytest.mark.skipif(device.tier() != "sim", reason="the simulator's behaviour")


# --- a kernel check's first steps -------------------------------------------------------------


def test_simulator_only_code_is_named():
    @cuda.jit
    def uses_numpy_and_fstrings(x, y, out):
        i = cuda.grid(1)
        scratch = np.zeros(4)
        print(f"thread {i}")
        out[i] = scratch[0]

    source = source_rules.kernel_source(uses_numpy_and_fstrings, 3)
    found = " ".join(source_rules.simulator_only_code(source))
    assert "np.zeros" in found and "f-string" in found
    assert source_rules.simulator_only_code(source_rules.kernel_source(multiply, 3)) == []


def test_start_kernel_returns_the_source_of_a_right_kernel():
    source = source_rules.start_kernel(multiply, 3, "stub hint")
    assert source.parameters == ["x", "y", "out"] and "x[i] * y[i]" in source.source


def test_start_kernel_says_not_attempted_for_the_stub():
    with pytest.raises(results.NotAttemptedError) as stop:
        source_rules.start_kernel(multiply_stub, 3, "write out[i] = x[i] * y[i]")
    assert "NotImplementedError" in stop.value.message
    assert stop.value.hint == "write out[i] = x[i] * y[i]"


@SIM_ONLY
def test_start_kernel_rejects_code_only_the_simulator_runs():
    with pytest.raises(results.CheckFailedError) as failure:
        source_rules.start_kernel(multiply_with_list, 3, "")
    assert "would not compile" in failure.value.message and "list" in failure.value.message
    assert failure.value.hint == compiling.SIMULATOR_ONLY_HINT


def test_start_kernel_unwraps_a_launch_configuration():
    assert source_rules.start_kernel(multiply[2, 32], 3, "").parameters == ["x", "y", "out"]


# --- barriers every thread reaches ------------------------------------------------------------


@cuda.jit
def barrier_inside_the_guard(x, out):
    shared = cuda.shared.array(64, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < x.shape[0]:
        shared[t] = x[i]
        cuda.syncthreads()
        out[i] = shared[63 - t]


@cuda.jit
def barrier_in_the_else(x, out):
    shared = cuda.shared.array(64, np.float32)
    t = cuda.threadIdx.x
    if t >= x.shape[0]:
        shared[t] = 0
    else:
        shared[t] = x[t]
        cuda.syncthreads()
    out[t] = shared[0]


@cuda.jit
def barrier_in_a_thread_dependent_loop(x, out):
    shared = cuda.shared.array(64, np.float32)
    t = cuda.threadIdx.x
    shared[t] = x[t]
    stride = t + 1
    while stride < 64:
        shared[t] += shared[(t + stride) % 64]
        cuda.syncthreads()
        stride *= 2
    out[t] = shared[t]


@cuda.jit
def barrier_after_an_early_return(x, out):
    shared = cuda.shared.array(64, np.float32)
    i = cuda.grid(1)
    if i >= x.shape[0]:
        return
    shared[cuda.threadIdx.x] = x[i]
    cuda.syncthreads()
    out[i] = shared[0]


@cuda.jit
def barrier_skipped_by_break(x, out):
    shared = cuda.shared.array(64, np.float32)
    t = cuda.threadIdx.x
    for step in range(6):
        if t > step:
            break
        shared[t] = x[t]
        cuda.syncthreads()
    out[t] = shared[0]


@cuda.jit
def barrier_under_a_flag_one_thread_sets(x, out):
    t = cuda.threadIdx.x
    flag = 0
    if t == 0:
        flag = 1
    # thread 0 alone takes the branch below: flag's value came through the one above
    if flag == 1:
        cuda.syncthreads()
    out[t] = x[t]


@cuda.jit
def tree_with_uniform_barriers(x, out):
    shared = cuda.shared.array(64, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    shared[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            shared[t] += shared[t + stride]
        cuda.syncthreads()
        stride //= 2
    for _ in range(3):
        cuda.syncthreads()
    if stride == 0 and x.shape[0] > 0:  # every thread of the block takes it alike
        cuda.syncthreads()
    if t == 0:
        cuda.atomic.add(out, 0, shared[0])


@pytest.mark.parametrize(("kernel", "words", "hint"), [
    (barrier_inside_the_guard, "inside `if i < x.shape[0]:`", source_rules.BARRIER_HINT),
    (barrier_in_the_else, "inside `if t >= x.shape[0]:`", source_rules.BARRIER_HINT),
    (barrier_under_a_flag_one_thread_sets, "inside `if flag == 1:`", source_rules.BARRIER_HINT),
    (barrier_in_a_thread_dependent_loop, "depends on the thread", source_rules.BARRIER_LOOP_HINT),
    (barrier_after_an_early_return, "leave before a barrier", source_rules.BARRIER_EXIT_HINT),
    (barrier_skipped_by_break, "skip a barrier in the loop", source_rules.BARRIER_EXIT_HINT),
])
def test_a_barrier_that_some_threads_skip_is_rejected(kernel, words, hint):
    with pytest.raises(results.CheckFailedError) as failure:
        source_rules.start_kernel(kernel, 2, "")
    assert failure.value.message.startswith(source_rules.BARRIER_IN_BRANCH)
    assert words in failure.value.message
    assert failure.value.hint == hint


def test_barriers_that_every_thread_reaches_are_accepted():
    source = source_rules.kernel_source(tree_with_uniform_barriers, 2)
    assert source_rules.barrier_problems(source) == []


def test_no_gpulab_kernel_has_a_barrier_some_threads_skip():
    import inspect
    import textwrap

    from gpulab.kernels.registry import DEVICE_FUNCTIONS, load_all

    functions = [spec.python_function for spec in load_all().values()]
    for function in [*functions, *DEVICE_FUNCTIONS.values()]:
        source = textwrap.dedent(inspect.getsource(function))
        tree = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef))
        kernel = source_rules.KernelSource(function, source, tree)
        assert source_rules.barrier_problems(kernel) == [], function.__name__


# --- a size typed into the kernel ---------------------------------------------------------------


@cuda.jit
def fixed(x, out):
    i = cuda.grid(1)
    if i < 300 and cuda.threadIdx.x >= 0:
        out[i] = x[i]


def test_a_size_typed_into_the_kernel_is_found():
    assert source_rules.hard_coded_size(source_rules.kernel_source(fixed, 2)) == (
        "if i < 300 and cuda.threadIdx.x >= 0:")
    assert source_rules.hard_coded_size(source_rules.kernel_source(copy_guarded, 2)) is None


CLASSES = 10  # a module global holding a count typed in


@cuda.jit
def row_sums_over_ten(x, out):
    r = cuda.grid(1)
    if r < x.shape[0]:
        total = 0.0
        for c in range(1, CLASSES):
            total += x[r, c]
        out[r] = total


@cuda.jit
def row_sums_by_pairs(x, out):  # the end from the shape: a step of 2 is no count typed in
    r = cuda.grid(1)
    if r < x.shape[0]:
        total = 0.0
        for c in range(0, x.shape[1], 2):
            total += x[r, c]
        out[r] = total


def test_a_range_over_a_count_typed_in_is_found_by_its_end_or_any_argument():
    ten, pairs = (source_rules.kernel_source(k, 2) for k in (row_sums_over_ten, row_sums_by_pairs))
    assert source_rules.range_over_typed_in_count(ten) == "for c in range(1, CLASSES):"
    assert source_rules.range_over_typed_in_count(pairs) is None
    assert source_rules.range_over_typed_in_count(pairs, any_argument=True) == (
        "for c in range(0, x.shape[1], 2):")
    assert source_rules.range_over_typed_in_count(None) is None


BLOCK = 64  # a typed-in block size, as a module global
NOT_A_COUNT = 1.5


@cuda.jit
def block_from_a_global(x, out):
    i = cuda.blockIdx.x * BLOCK + cuda.threadIdx.x
    if i < out.shape[0]:
        out[i] = x[i]


@cuda.jit
def block_from_a_local(x, out):
    size = 128
    i = size * cuda.blockIdx.x + cuda.threadIdx.x
    if i < out.shape[0]:
        out[i] = x[i]


@cuda.jit
def block_from_blockdim(x, out):
    size = cuda.blockDim.x
    i = cuda.blockIdx.x * size + cuda.threadIdx.x
    if i < out.shape[0]:
        out[i] = x[i] * NOT_A_COUNT


@cuda.jit
def block_by_a_shift(x, out):
    i = (cuda.blockIdx.x << 6) + cuda.threadIdx.x  # 64 threads a block, assumed
    if i < out.shape[0]:
        out[i] = x[i]


@cuda.jit
def shift_of_the_thread_index(x, out):  # not a block size: a stride of 2 within the block
    i = cuda.blockIdx.x * cuda.blockDim.x + (cuda.threadIdx.x << 1)
    if i < out.shape[0]:
        out[i] = x[i]


def test_a_block_size_typed_in_as_a_shift_is_hard_coded():
    assert source_rules.hard_coded_block(source_rules.kernel_source(block_by_a_shift, 2)) == (
        "i = (cuda.blockIdx.x << 6) + cuda.threadIdx.x  # 64 threads a block, assumed")
    assert source_rules.hard_coded_block(
        source_rules.kernel_source(shift_of_the_thread_index, 2)) is None


def test_a_block_size_typed_in_through_a_name_is_hard_coded():
    assert source_rules.hard_coded_block(source_rules.kernel_source(block_from_a_global, 2)) == (
        "i = cuda.blockIdx.x * BLOCK + cuda.threadIdx.x")
    assert source_rules.hard_coded_block(source_rules.kernel_source(block_from_a_local, 2)) == (
        "i = size * cuda.blockIdx.x + cuda.threadIdx.x")
    assert source_rules.hard_coded_block(source_rules.kernel_source(block_from_blockdim, 2)) is None
    names = source_rules.typed_in_count_names(source_rules.kernel_source(block_from_blockdim, 2))
    assert names == set()


@cuda.jit
def copy_stepping_by_4096(x, out):
    for i in range(cuda.grid(1), x.shape[0], 4096):
        out[i] = x[i]


@cuda.jit
def copy_stepping_by_1024_in_a_while(x, out):
    i = cuda.grid(1)
    while i < x.shape[0]:
        out[i] = x[i]
        i += 1024


@cuda.jit
def rows_summed_in_blocks_of_128(a, x, out):
    row = cuda.grid(1)
    if row < out.shape[0]:
        for start in range(0, x.shape[0], 128):
            out[row] += a[row, start]


@cuda.jit
def copy_stepping_by_the_grid(x, out):
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        out[i] = x[i]


@cuda.jit
def rows_unrolled_by_32(a, x, out):  # right: a column loop in steps of 32 under a thread's `if`
    row = cuda.grid(1)
    if row < a.shape[0]:
        acc = 0.0
        k0 = 0
        while k0 + 32 <= a.shape[1]:
            for k in range(k0, k0 + 32):
                acc += a[row, k] * x[k]
            k0 += 32
        for k in range(k0, a.shape[1]):
            acc += a[row, k] * x[k]
        out[row] = acc


@cuda.jit
def first_warp_folds_the_block(x, out):  # right: a warp strides the block's slots by 32
    partial = cuda.shared.array(256, np.float32)
    t, i = cuda.threadIdx.x, cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    if t < 32:
        for k in range(t + 32, cuda.blockDim.x, 32):
            partial[t] += partial[k]
    cuda.syncthreads()
    if t == 0:
        total = 0.0
        for k in range(min(32, cuda.blockDim.x)):
            total += partial[k]
        cuda.atomic.add(out, 0, total)


def test_fixed_step_names_a_grid_size_typed_in_not_a_blocked_inner_loop():
    from gpulab.exercises.source_rules import fixed_step, kernel_source

    assert fixed_step(kernel_source(copy_stepping_by_4096, 2)) == \
        "for i in range(cuda.grid(1), x.shape[0], 4096):"
    assert fixed_step(kernel_source(copy_stepping_by_1024_in_a_while, 2)) == "i += 1024"
    assert fixed_step(kernel_source(rows_summed_in_blocks_of_128, 3)) is None
    assert fixed_step(kernel_source(copy_stepping_by_the_grid, 2)) is None
    # round 17: the same for every thread that runs it, or a loop within the block
    assert fixed_step(kernel_source(rows_unrolled_by_32, 3)) is None
    assert fixed_step(kernel_source(first_warp_folds_the_block, 2)) is None


N_TYPED_IN = 100_000


@cuda.jit
def capped_through_an_alias(x, out):
    col = cuda.grid(1)
    c = col
    if c < out.shape[0] and c < 100_000:
        out[c] = x[c]


@cuda.jit
def capped_after_an_augmented_assignment(x, out):
    k = cuda.threadIdx.x
    k += cuda.blockIdx.x * cuda.blockDim.x
    if k < out.shape[0] and k < 10**5:
        out[k] = x[k]


@cuda.jit
def capped_in_a_loop_from_a_variable(x, out):
    start = cuda.grid(1)
    for j in range(start, out.shape[0], cuda.gridsize(1)):
        if j < 1e5:
            out[j] = x[j]


@cuda.jit
def capped_by_a_module_constant(x, out):
    i = cuda.grid(1)
    if i < N_TYPED_IN and i < out.shape[0]:
        out[i] = x[i]


@cuda.jit
def capped_by_a_min(x, out):
    i = cuda.grid(1)
    if i < min(out.shape[0], 100_000):
        out[i] = x[i]


@cuda.jit
def clamped_values(x, out):  # right: a value's threshold, not an index's
    i = cuda.grid(1)
    if i < out.shape[0]:
        v = x[i]
        if v > 65504:
            v = 65504
        out[i] = v


@pytest.mark.parametrize(("kernel", "expected"), [
    (capped_through_an_alias, ("if c < out.shape[0] and c < 100_000:", 100_000)),
    (capped_after_an_augmented_assignment, ("if k < out.shape[0] and k < 10**5:", 100_000)),
    (capped_in_a_loop_from_a_variable, ("if j < 1e5:", 100_000)),
    (capped_by_a_module_constant, ("if i < N_TYPED_IN and i < out.shape[0]:", 100_000)),
    (capped_by_a_min, ("if i < min(out.shape[0], 100_000):", 100_000)),
    (first_warp_folds_the_block, None),  # `t < 32`: a place in the block, not a size
    (clamped_values, None),
    (copy_stepping_by_the_grid, None),
])
def test_an_index_capped_by_a_number_typed_in_is_found_however_spelled(kernel, expected):
    found = source_rules.index_capped_by_number(source_rules.kernel_source(kernel, 2))
    assert found == expected


@cuda.jit
def halving_then_fixed(x, out):
    i = cuda.grid(1)
    s = cuda.blockDim.x // 2
    while s > 16:
        s //= 2
    if i < 300:
        out[i] = x[i]


def test_a_halving_loops_test_is_not_a_problem_size():
    source = source_rules.kernel_source(halving_then_fixed, 2)
    assert source_rules.hard_coded_size(source) == "if i < 300:"


@cuda.jit
def shares_without_a_barrier(x, out):
    cache = cuda.shared.array(32, np.float32)
    cache[cuda.threadIdx.x] = x[cuda.grid(1)]
    out[cuda.grid(1)] = cache[31 - cuda.threadIdx.x]


@cuda.jit
def shares_with_a_barrier(x, out):
    cache = cuda.shared.array(32, np.float32)
    cache[cuda.threadIdx.x] = x[cuda.grid(1)]
    cuda.syncthreads()
    out[cuda.grid(1)] = cache[31 - cuda.threadIdx.x]


@cuda.jit(device=True)
def wait_for_the_block():
    cuda.syncthreads()


@cuda.jit
def shares_with_a_barrier_in_a_device_function(x, out):
    cache = cuda.shared.array(32, np.float32)
    cache[cuda.threadIdx.x] = x[cuda.grid(1)]
    wait_for_the_block()
    out[cuda.grid(1)] = cache[31 - cuda.threadIdx.x]


def test_a_shared_array_in_a_kernel_without_a_barrier_is_found():
    found = source_rules.shared_array_without_barrier(
        source_rules.kernel_source(shares_without_a_barrier, 2))
    assert found == "cache = cuda.shared.array(32, np.float32)"
    for kernel in (shares_with_a_barrier, copy_guarded,  # a barrier; no shared array
                   shares_with_a_barrier_in_a_device_function):
        assert source_rules.shared_array_without_barrier(
            source_rules.kernel_source(kernel, 2)) is None
    assert source_rules.shared_array_without_barrier(None) is None


@cuda.jit
def tail_for_one_warp(x, out):
    cache = cuda.shared.array(64, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    cache[t] = x[i]
    cuda.syncthreads()
    if i < 300:
        out[i] = 0.0  # a problem size typed in, not a thread count
    if t < 16:
        for k in (16, 8, 4, 2, 1):
            cache[t] += cache[t + k]


def test_a_thread_count_typed_in_is_told_from_a_problem_size():
    source = source_rules.kernel_source(tail_for_one_warp, 2)
    assert source_rules.hard_coded_thread_count(source) == "if t < 16:"
    assert source_rules.hard_coded_size(source) == "if i < 300:"
    assert source_rules.hard_coded_thread_count(
        source_rules.kernel_source(shares_with_a_barrier, 2)) is None


ROW_SLOTS = 12


@cuda.jit
def keeps_a_local_array_by_number(x, out):
    kept = cuda.local.array(16, np.float32)  # one slot per element of x's row
    for j in range(x.shape[1]):
        kept[j] = x[0, j]
    out[0] = kept[0]


@cuda.jit
def keeps_a_local_array_by_name(x, out):
    kept = cuda.local.array(ROW_SLOTS, np.float32)
    columns = x.shape[1]
    for j in range(columns):
        kept[j] = x[0, j]
    out[0] = kept[0]


@cuda.jit
def keeps_a_local_array_by_shape(x, out):
    kept = cuda.local.array((4, 8), np.float32)
    for j in range(x.shape[1]):
        kept[0, j] = x[0, j]
    out[0] = kept[0, 0]


@cuda.jit
def accumulates_in_a_local_array_of_one(x, out):  # a float32 accumulator, not a cache
    total = cuda.local.array(1, np.float32)
    total[0] = 0
    for j in range(x.shape[1]):
        total[0] += x[0, j]
    out[0] = total[0]


@pytest.mark.parametrize("kernel, length", [(keeps_a_local_array_by_number, 16),
                                            (keeps_a_local_array_by_name, 12),
                                            (keeps_a_local_array_by_shape, 32)])
def test_a_local_array_of_a_length_typed_in_is_found_with_its_length(kernel, length):
    line, found = source_rules.fixed_length_local_array(source_rules.kernel_source(kernel, 2))
    assert line.startswith("kept = cuda.local.array(") and found == length
    assert "#" not in line  # the learner's comment left out


@pytest.mark.parametrize("kernel", [shares_with_a_barrier, accumulates_in_a_local_array_of_one])
def test_a_local_array_not_indexed_along_an_array_s_dimension_is_not_found(kernel):
    assert source_rules.fixed_length_local_array(source_rules.kernel_source(kernel, 2)) is None


def test_what_varies_by_thread_is_taken_statement_by_statement():
    tree = ast.parse(
        "def k(x, out):\n"
        "    i = cuda.grid(1)\n"
        "    partial[t] = x[i]\n"
        "    i = cuda.blockDim.x // 2\n"
        "    while i > 0:\n"
        "        i //= 2\n"
        "    mine = 0\n"
        "    for j in range(i, cuda.grid(1)):\n"
        "        mine += 1\n"
        "    t, s = cuda.threadIdx.x, cuda.blockDim.x // 2\n"
        "    for i in range(10):\n"
        "        s = cuda.blockDim.x >> (i + 1)\n"
        "    out[0] = mine\n").body[0]
    by_statement = source_rules.varying_by_statement(tree)  # what varies before each statement
    statements = tree.body
    assert "i" in by_statement[statements[1]]  # x[i], i from the grid
    assert "i" not in by_statement[statements[3]]  # the halving loop, i bound again
    # set in a loop whose number of turns depends on the thread
    assert {"j", "mine"} <= by_statement[statements[8]]
    # a tuple unpacked from a tuple, one by one; a loop's variable from a range of the block's
    assert "t" in by_statement[statements[7]] and "s" not in by_statement[statements[7]]
    assert "i" not in by_statement[statements[7].body[0]]
    assert "i" in source_rules.thread_varying_names(tree)  # the whole kernel at once
