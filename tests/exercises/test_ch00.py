"""Chapter 00's checks (how many blocks, the first kernel launched by hand) against right answers
and the wrong ones learners write.

The solutions live here and in the solution notebook only: the package ships none.
"""

import gpulab  # noqa: F401  (must come before numba: it chooses the simulator or the GPU)

# isort: split
import math
import sys

import numpy as np
import pytest
from learner_kernels import copy_guarded as add_one_copies  # adds nothing
from numba import cuda

from gpulab.exercises import ch00, mistakes
from gpulab.exercises.ch00 import check_blocks_for, check_first_launch, watch_host_code
from gpulab.exercises.results import CheckFailedError
from gpulab.kernels.launch import one_thread_per_element

SEEDS = [1, 2, 2025]

# --- exercise 1: how many blocks? --------------------------------------------------------------


def blocks_solution(n, threads_per_block):
    return (n + threads_per_block - 1) // threads_per_block


def blocks_with_ceil(n, threads_per_block):
    return math.ceil(n / threads_per_block)


def blocks_stub(n, threads_per_block):
    # YOUR CODE HERE
    raise NotImplementedError()


def blocks_round_down(n, threads_per_block):
    return n // threads_per_block


def blocks_plus_one(n, threads_per_block):
    return n // threads_per_block + 1


def blocks_float(n, threads_per_block):
    return np.ceil(n / threads_per_block)


def blocks_true_division(n, threads_per_block):
    return n / threads_per_block


def blocks_swapped(n, threads_per_block):
    return (threads_per_block + n - 1) // n


def blocks_crashes(n, threads_per_block):
    return n // threads  # noqa: F821  (a typo a learner makes: NameError)


@pytest.mark.parametrize("function", [blocks_solution, blocks_with_ceil])
@pytest.mark.parametrize("seed", SEEDS)
def test_blocks_for_accepts_right_answers(function, seed):
    result = check_blocks_for(function, seed=seed, show=False)
    assert result.passed, str(result)
    assert f"seed={seed}" in result.message


@pytest.mark.parametrize(("function", "status", "words"), [
    (blocks_stub, "not attempted", ["notimplementederror", "rounded up"]),
    (None, "not attempted", ["no function"]),
    (blocks_round_down, "failed", ["get no thread", "round up, not down"]),
    (blocks_plus_one, "failed", ["would have no element", "even when n divides evenly"]),
    (blocks_float, "failed", ["a float64", "integer division"]),
    (blocks_true_division, "failed", ["float", "whole number"]),
    (blocks_swapped, "failed", ["wrong way round"]),
    (blocks_crashes, "failed", ["nameerror", "read the error"]),
])
@pytest.mark.parametrize("seed", SEEDS)
def test_blocks_for_names_the_mistake(function, status, words, seed):
    result = check_blocks_for(function, seed=seed, show=False)
    text = str(result).lower()
    assert result.status == status, text
    for word in words:
        assert word.lower() in text, f"{word!r} missing from:\n{text}"
    if status == "failed":
        assert f"seed={seed}" in text


# --- exercise 2: the first kernel, launched by hand ----------------------------------------------


@cuda.jit
def add_one(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = x[i] + 1


@cuda.jit
def add_one_stub(x, out):
    # YOUR CODE HERE
    raise NotImplementedError()


@cuda.jit
def add_one_no_guard(x, out):
    i = cuda.grid(1)
    out[i] = x[i] + 1


@cuda.jit
def add_one_guard_le(x, out):
    i = cuda.grid(1)
    if i <= x.shape[0]:
        out[i] = x[i] + 1


@cuda.jit
def add_one_thread_index_only(x, out):
    i = cuda.threadIdx.x
    if i < x.shape[0]:
        out[i] = x[i] + 1


@cuda.jit
def add_one_in_place(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        x[i] += 1
        out[i] = x[i]


def on_gpu(x):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    threads = 128
    blocks = (x.shape[0] + threads - 1) // threads
    add_one[blocks, threads](d_x, d_out)
    cuda.synchronize()
    return d_out.copy_to_host()


def on_gpu_stub(x):
    # YOUR CODE HERE
    raise NotImplementedError()


def on_gpu_too_few_blocks(x):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    threads = 128
    add_one[x.shape[0] // threads, threads](d_x, d_out)
    cuda.synchronize()
    return d_out.copy_to_host()


def on_gpu_returns_device_array(x):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    add_one[(x.shape[0] + 127) // 128, 128](d_x, d_out)
    cuda.synchronize()
    return d_out


def on_gpu_numpy_arrays(x):
    out = np.empty_like(x)
    add_one[(x.shape[0] + 127) // 128, 128](x, out)
    cuda.synchronize()
    return out


def on_gpu_forgets_return(x):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    add_one[(x.shape[0] + 127) // 128, 128](d_x, d_out)
    d_out.copy_to_host()


def on_gpu_with_numpy(x):
    return x + 1


def on_gpu_huge_blocks(x):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    add_one[1, 2048](d_x, d_out)
    return d_out.copy_to_host()


def on_gpu_no_synchronize(x):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    add_one[(x.shape[0] + 63) // 64, 64](d_x, d_out)
    return d_out.copy_to_host()


@pytest.mark.parametrize("seed", SEEDS)
def test_the_first_launch_passes(seed):
    result = check_first_launch(add_one, on_gpu, seed=seed, show=False)
    assert result.passed, str(result)
    assert "1 copy to the device, 1 allocation on the device, 1 launch" in result.message
    assert "synchronize" in result.message and f"seed={seed}" in result.message
    assert "did not call" not in result.message


def test_a_launch_without_synchronize_passes_with_a_note():
    result = check_first_launch(add_one, on_gpu_no_synchronize, seed=3, show=False)
    assert result.passed, str(result)
    assert "did not call `cuda.synchronize()`" in result.message


@pytest.mark.parametrize(("kernel", "run", "status", "words"), [
    (add_one_stub, on_gpu, "not attempted", ["notimplementederror", "plus one into out"]),
    (add_one, on_gpu_stub, "not attempted", ["function still raises", "five steps"]),
    (add_one, None, "not attempted", ["no host function"]),
    (add_one_no_guard, on_gpu, "failed", ["past the end", "is there a guard"]),
    (add_one_guard_le, on_gpu, "failed", ["past the end", "equals the length"]),
    (add_one_thread_index_only, on_gpu, "failed", ["only the first block", "block's index"]),
    (add_one_copies, on_gpu, "failed", ["a copy of x", "one more than"]),
    (add_one, on_gpu_too_few_blocks, "failed", ["got no thread", "rounded up"]),
    (add_one, on_gpu_returns_device_array, "failed",
     ["device array itself", "copy the output back"]),
    (add_one, on_gpu_numpy_arrays, "failed", ["with numpy arrays", "hidden from you",
                                              "already live on the device"]),
    (add_one, on_gpu_forgets_return, "failed", ["returned none", "copies it back"]),
    (add_one, on_gpu_with_numpy, "failed", ["never launched `add_one`", "without the gpu"]),
    (add_one, on_gpu_huge_blocks, "failed", ["2048 threads", "more than 1024"]),
])
def test_first_launch_mistakes_are_named(kernel, run, status, words):
    result = check_first_launch(kernel, run, seed=5, show=False)
    text = str(result).lower()
    assert result.status == status, text
    for word in words:
        assert word.lower() in text, f"{word!r} missing from:\n{text}"


def test_a_kernel_that_changes_its_input_is_caught_by_the_host_check():
    def run(x):
        d_x = cuda.to_device(x)
        d_out = cuda.device_array_like(d_x)
        add_one_in_place[(x.shape[0] + 63) // 64, 64](d_x, d_out)
        return d_out.copy_to_host()

    # x on the host is unchanged (device memory is a copy), and out is right: the kernel's
    # own check sees the write into its input.
    result = check_first_launch(add_one_in_place, run, seed=4, show=False)
    assert result.status == "failed" and "wrote into its input x" in result.message, result


def test_the_watch_restores_everything():
    original = (cuda.to_device, cuda.device_array_like, cuda.synchronize)
    kernel = add_one
    with watch_host_code(on_gpu, [kernel]) as watch:
        assert on_gpu.__globals__["add_one"] is not kernel
        on_gpu(np.arange(10, dtype=np.float32))
    assert on_gpu.__globals__["add_one"] is kernel
    assert (cuda.to_device, cuda.device_array_like, cuda.synchronize) == original
    assert [kind for kind, _ in watch.events] == [
        "to_device", "allocate", "launch", "synchronize", "copy_to_host"]


def test_the_package_ships_no_solution_kernels():
    from gpulab.exercises import ch00

    assert [name for name, value in vars(ch00).items() if hasattr(value, "py_func")] == []


def test_the_gpu_branch_runs_with_the_stand_in_gpu(stand_in_gpu, no_wait_for_gpu, monkeypatch):
    from gpulab.exercises import ch00, trial

    monkeypatch.setitem(ch00.HOST_SIZE_RANGE, "gpu", (301, 601))  # the simulator runs it
    monkeypatch.setitem(trial.SIZE_RANGE, "gpu", (300, 700))
    result = check_first_launch(add_one, on_gpu, seed=1, show=False)
    assert result.passed, str(result)
    result = check_first_launch(add_one, on_gpu_numpy_arrays, seed=1, show=False)
    assert "with NumPy arrays" in result.message


# --- more wrong answers, written as learners write them, and right ones written differently ---


def blocks_round_down_beside_a_shift(n, threads_per_block):  # the shift is not the mistake
    half = threads_per_block >> 1
    assert half * 2 <= threads_per_block
    return n // threads_per_block


def blocks_shift_by_8(n, threads_per_block):  # 256 threads assumed (round 16)
    return (n + threads_per_block - 1) >> 8


def blocks_shift_log2(n, threads_per_block):
    return (n + threads_per_block - 1) >> int(math.log2(threads_per_block))


def blocks_shift_bit_length(n, threads_per_block):
    return (n + threads_per_block - 1) >> (threads_per_block.bit_length() - 1)


def blocks_round(n, threads_per_block):
    return round(n / threads_per_block)


def blocks_floor(n, threads_per_block):
    return math.floor(n / threads_per_block)


def blocks_int_plus_one(n, threads_per_block):
    return int(n / threads_per_block) + 1


def blocks_as_text(n, threads_per_block):
    return str((n + threads_per_block - 1) // threads_per_block)


def blocks_from_gpulab(n, threads_per_block):
    return one_thread_per_element(n, threads_per_block).blocks


def blocks_that_patch_the_check(n, threads_per_block):
    sys.modules["gpulab.exercises.mistakes"].reject = lambda rules, evidence: None
    return 0


def blocks_negated_floor(n, threads_per_block):
    return -(-n // threads_per_block)


def blocks_minus_one_plus_one(n, threads_per_block):
    return (n - 1) // threads_per_block + 1


def blocks_remainder_test(n, threads_per_block):
    return n // threads_per_block + (n % threads_per_block > 0)


@pytest.mark.parametrize("function", [blocks_negated_floor, blocks_minus_one_plus_one,
                                      blocks_remainder_test])
def test_blocks_for_accepts_right_answers_written_differently(function):
    result = check_blocks_for(function, seed=7, show=False)
    assert result.passed, str(result)


@pytest.mark.parametrize(("function", "words"), [
    (blocks_shift_log2, ["not a power of two", "`>> k` divides by 2**k", "every block size"]),
    (blocks_round_down_beside_a_shift, ["get no thread", "round up, not down"]),
    (blocks_shift_by_8, ["`return (n + threads_per_block - 1) >> 8` shifts by 8, which divides by "
                         "2**8 = 256 whatever the block size is", "right for one block size"]),
    (blocks_shift_bit_length, ["not a power of two", "every block size"]),
    (blocks_round, ["rounded to the nearest whole number", "get no thread",
                    "round() goes to the nearest whole number"]),
    (blocks_floor, ["get no thread", "round up, not down"]),
    (blocks_int_plus_one, ["would have no element", "even when n divides evenly"]),
    (blocks_as_text, ["(str)", "whole number"]),
    (blocks_from_gpulab, ["gpulab's own", "gpulab.kernels.launch.one_thread_per_element",
                          "write the exercise yourself"]),
])
@pytest.mark.parametrize("seed", SEEDS)
def test_blocks_for_names_more_mistakes(function, words, seed):
    result = check_blocks_for(function, seed=seed, show=False)
    text = str(result).lower()
    assert result.status == "failed", text
    for word in words:
        assert word.lower() in text, f"{word!r} missing from:\n{text}"


def test_a_function_that_patches_the_check_is_told_so(monkeypatch):
    monkeypatch.setattr(mistakes, "reject", mistakes.reject)  # restored after the test
    result = check_blocks_for(blocks_that_patch_the_check, seed=1, show=False)
    assert result.status == "failed", str(result)
    assert "part of the check was replaced while the check ran your code" in result.message
    assert "`gpulab.exercises.mistakes.reject`" in result.message
    assert "restart the notebook's kernel" in result.hint.lower()


def test_a_check_replaced_before_it_runs_is_told_so(monkeypatch):
    monkeypatch.setattr(np, "array_equal", lambda *args, **kwargs: True)
    result = check_blocks_for(blocks_solution, seed=1, show=False)
    assert result.status == "failed" and "replaced before the check" in result.message
    assert "`numpy.array_equal`" in result.message


@cuda.jit
def add_one_block_of_64(x, out):
    i = cuda.blockIdx.x * 64 + cuda.threadIdx.x
    if i < x.shape[0]:
        out[i] = x[i] + 1


@cuda.jit
def add_one_spelled_out(x, out):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < x.shape[0]:
        out[i] = x[i] + np.float32(1.0)


@cuda.jit
def add_one_grid_stride(x, out):
    start, step = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, x.shape[0], step):
        out[i] = x[i] + 1


def on_gpu_blocks_by_a_shift_of_8(x):  # 256 threads a block assumed, 128 launched
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    blocks = (x.shape[0] + 255) >> 8
    add_one[blocks, 128](d_x, d_out)
    cuda.synchronize()
    return d_out.copy_to_host()


def blocks_by_256(n):  # a helper of the learner's, 256 threads assumed
    return (n + 255) >> 8


def on_gpu_blocks_by_a_helper_s_shift(x):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    add_one[blocks_by_256(x.shape[0]), 128](d_x, d_out)
    cuda.synchronize()
    return d_out.copy_to_host()


def on_gpu_blocks_by_a_shift_of_7(x):  # right: a shift that matches the 128 threads launched
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    add_one[(x.shape[0] + 127) >> 7, 128](d_x, d_out)
    cuda.synchronize()
    return d_out.copy_to_host()


def on_gpu_shape_as_blocks(x):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    add_one[x.shape, 8](d_x, d_out)
    cuda.synchronize()
    return d_out.copy_to_host()


def on_gpu_in_float64(x):
    d_x = cuda.to_device(x.astype(np.float64))
    d_out = cuda.device_array_like(d_x)
    add_one[(x.shape[0] + 127) // 128, 128](d_x, d_out)
    cuda.synchronize()
    return d_out.copy_to_host()


def on_gpu_in_float64_cast_back(x):
    d_x = cuda.to_device(np.array(x, dtype=float))
    d_out = cuda.device_array_like(d_x)
    add_one[(x.shape[0] + 127) // 128, 128](d_x, d_out)
    cuda.synchronize()
    return d_out.copy_to_host().astype(np.float32)


def on_gpu_two_blocks_extra(x):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    add_one[x.shape[0] // 128 + 2, 128](d_x, d_out)
    cuda.synchronize()
    return d_out.copy_to_host()


def on_gpu_blocks_from_gpulab(x):
    config = one_thread_per_element(x.shape[0], 128)
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    add_one[config.blocks, config.threads_per_block](d_x, d_out)
    cuda.synchronize()
    return d_out.copy_to_host()


def on_gpu_allocated_by_shape(x):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array(x.shape, dtype=x.dtype)
    threads = 256
    add_one_spelled_out[(x.size + threads - 1) // threads, threads](d_x, d_out)
    cuda.synchronize()
    out = np.empty_like(x)
    d_out.copy_to_host(out)
    return out


def on_gpu_grid_stride(x):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    add_one_grid_stride[2, 64](d_x, d_out)  # fewer threads than elements: each does several
    cuda.synchronize()
    return d_out.copy_to_host()


def on_gpu_output_copied_in(x):
    d_x = cuda.to_device(x)
    d_out = cuda.to_device(x)  # wrong: room for the output made by copying x in again
    threads = 128
    add_one[(x.size + threads - 1) // threads, threads](d_x, d_out)
    cuda.synchronize()
    return d_out.copy_to_host()


def on_gpu_in_place(x):  # right: the kernel reads and writes each element in one thread
    d_x = cuda.to_device(x)
    threads = 128
    add_one[(x.size + threads - 1) // threads, threads](d_x, d_x)
    cuda.synchronize()
    return d_x.copy_to_host()


@pytest.mark.parametrize(("kernel", "run"), [
    (add_one_spelled_out, on_gpu_allocated_by_shape),
    (add_one, on_gpu_in_place),
    (add_one_grid_stride, on_gpu_grid_stride),
])
def test_first_launches_written_differently_pass(kernel, run):
    result = check_first_launch(kernel, run, seed=4, show=False)
    assert result.passed, str(result)


@pytest.mark.parametrize(("kernel", "run", "words"), [
    (add_one_block_of_64, on_gpu, ["hard-codes the block size", "cuda.blockidx.x * 64",
                                   "never a number"]),
    (add_one, on_gpu_shape_as_blocks, ["`x.shape` is the number of elements, not of blocks",
                                       "(exercise 1)"]),
    (add_one, on_gpu_blocks_by_a_shift_of_8, ["`blocks = (x.shape[0] + 255) >> 8` shifts by 8",
                                              "(128 threads here)", "right for one block size"]),
    (add_one, on_gpu_blocks_by_a_helper_s_shift, ["`return (n + 255) >> 8` shifts by 8"]),
    (add_one, on_gpu_in_float64, ["worked in float64", "x holds float32", "no `astype`"]),
    (add_one, on_gpu_in_float64_cast_back, ["worked in float64", "twice the bytes"]),
    (add_one, on_gpu_two_blocks_extra, ["one whole block had nothing to do"]),
    (add_one, on_gpu_blocks_from_gpulab, ["gpulab's own", "one_thread_per_element"]),
    (add_one, on_gpu_output_copied_in, ["filled with x's values", "host link for nothing",
                                        "without copying anything into it"]),
])
def test_first_launch_names_more_mistakes(kernel, run, words):
    result = check_first_launch(kernel, run, seed=6, show=False)
    text = str(result).lower()
    assert result.status == "failed", text
    for word in words:
        assert word.lower() in text, f"{word!r} missing from:\n{text}"


def test_every_host_mistake_is_described_for_the_instructors():
    from gpulab.exercises.ch00 import BLOCKS_FOR, HOST

    for spec in (BLOCKS_FOR, HOST):
        table = spec.mistake_table()
        assert table.count("\n| ") == len(spec.mistakes) + 1  # the header and one row each
    assert "| a shift (`>>`) that assumes the block size is a power of two | outputs |" in (
        BLOCKS_FOR.mistake_table())


# --- the answer must come from the GPU; hints that describe, never give, the answer ------------


def on_gpu_token_launch(x):  # one block for show, the answer worked out on the host
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    add_one[1, 32](d_x, d_out)
    cuda.synchronize()
    return x + np.float32(1)


def on_gpu_fresh_copy_of_the_copy_back(x):  # a right answer: the same values, a new array
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    add_one[(x.shape[0] + 127) // 128, 128](d_x, d_out)
    cuda.synchronize()
    return np.array(d_out.copy_to_host())


def on_gpu_never_copies_back(x):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    add_one[(x.shape[0] + 127) // 128, 128](d_x, d_out)
    cuda.synchronize()
    return x + 1


def on_gpu_copies_back_the_input(x):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    add_one[(x.shape[0] + 127) // 128, 128](d_x, d_out)
    cuda.synchronize()
    return d_x.copy_to_host() + np.float32(1)


def on_gpu_rounded_down_tail_on_the_host(x):
    """Wrong: n // 256 blocks, the elements past them worked out on the host. The output's
    uncovered tail must not hold the right values by chance (a reused buffer): the check fills
    what the learner allocates with garbage."""
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    blocks = x.shape[0] // 256
    add_one[blocks, 256](d_x, d_out)
    cuda.synchronize()
    out = d_out.copy_to_host()
    out[blocks * 256:] = x[blocks * 256:] + 1
    return out


@pytest.mark.parametrize(("run", "words"), [
    (on_gpu_token_launch, ["1 block(s) of 32 threads = 32 threads", "covered only 32",
                           "did not come from the gpu", "rounded up"]),
    (on_gpu_rounded_down_tail_on_the_host, ["threads for n =", "got no thread",
                                            "rounded up"]),
    (on_gpu_never_copies_back, ["never copied anything back", "did not come from the gpu"]),
    (on_gpu_copies_back_the_input, ["returned another array", "the output `add_one` wrote"]),
])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_an_answer_that_did_not_come_from_the_gpu_fails(run, words, seed):
    result = check_first_launch(add_one, run, seed=seed, show=False)
    text = str(result).lower()
    assert result.status == "failed", text
    for word in words:
        assert word.lower() in text, f"{word!r} missing from:\n{text}"


def on_gpu_after_a_warm_up(x):  # a small launch first (it compiles), then the real one
    d_warm_x = cuda.to_device(x[:32])
    d_warm_out = cuda.device_array_like(d_warm_x)
    add_one[1, 32](d_warm_x, d_warm_out)
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    threads = 128
    add_one[-(-x.shape[0] // threads), threads](d_x, d_out)
    cuda.synchronize()
    return d_out.copy_to_host()


def on_gpu_copy_back_cast(x):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    add_one[(x.shape[0] + 255) // 256, 256](d_x, d_out)
    cuda.synchronize()
    return np.asarray(d_out.copy_to_host().astype(np.float32))


def on_gpu_copy_back_then_view(x):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    add_one[math.ceil(x.shape[0] / 64), 64](d_x, d_out)
    result = d_out.copy_to_host()
    return result[:]


def on_gpu_auto_synchronized(x):  # a stream that waits as its `with` block ends
    stream = cuda.stream()
    with stream.auto_synchronize():
        d_x = cuda.to_device(x, stream)
        d_out = cuda.device_array(x.shape, x.dtype, stream=stream)
        add_one[(x.size + 127) // 128, 128, stream](d_x, d_out)
        out = d_out.copy_to_host(stream=stream)
    return out


def on_gpu_kernel_as_a_default(x, kernel=add_one):  # the kernel reached through a default
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    kernel[(x.size + 127) // 128, 128](d_x, d_out)
    return d_out.copy_to_host()


KERNELS = {"add_one": add_one}
KERNEL_LIST = [add_one]


def on_gpu_kernel_from_a_dict(x):  # the kernel reached through a global dict
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    KERNELS["add_one"][(x.size + 127) // 128, 128](d_x, d_out)
    return d_out.copy_to_host()


def on_gpu_kernel_from_a_list(x):  # and through a global list
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    KERNEL_LIST[0][(x.size + 127) // 128, 128](d_x, d_out)
    return d_out.copy_to_host()


def on_gpu_sized_by_the_device(x):  # the block size read from the device, the context's wait
    threads = cuda.get_current_device().MAX_THREADS_PER_BLOCK // 4
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    add_one[(x.size + threads - 1) // threads, threads](d_x, d_out)
    cuda.current_context().synchronize()
    return d_out.copy_to_host()


@pytest.mark.parametrize("run", [on_gpu_after_a_warm_up, on_gpu_copy_back_cast,
                                 on_gpu_copy_back_then_view, on_gpu_fresh_copy_of_the_copy_back,
                                 on_gpu_auto_synchronized, on_gpu_kernel_as_a_default,
                                 on_gpu_kernel_from_a_dict, on_gpu_kernel_from_a_list,
                                 on_gpu_sized_by_the_device, on_gpu_blocks_by_a_shift_of_7])
@pytest.mark.parametrize("seed", [1, 2])
def test_more_first_launches_written_differently_pass(run, seed):
    result = check_first_launch(add_one, run, seed=seed, show=False)
    assert result.passed, str(result)
    assert KERNELS["add_one"] is add_one and KERNEL_LIST[0] is add_one  # restored


def test_a_wait_is_counted_once_however_it_is_asked_for():
    result = check_first_launch(add_one, on_gpu_sized_by_the_device, seed=2, show=False)
    assert result.passed, str(result)
    assert "1 synchronize, 1 copy back" in result.message


def test_the_pass_message_counts_in_the_plural():
    result = check_first_launch(add_one, on_gpu_after_a_warm_up, seed=2, show=False)
    assert result.passed, str(result)
    assert ("2 copies to the device, 2 allocations on the device, 2 launches, 1 synchronize, "
            "1 copy back") in result.message


@pytest.mark.parametrize("function", [blocks_round_down, blocks_plus_one, blocks_shift_log2,
                                      blocks_shift_bit_length, blocks_int_plus_one, blocks_floor,
                                      blocks_swapped, blocks_float, blocks_true_division])
@pytest.mark.parametrize("seed", SEEDS)
def test_blocks_for_hints_never_give_the_answer(function, seed):
    result = check_blocks_for(function, seed=seed, show=False)
    assert result.status == "failed", str(result)
    for answer in ("- 1", "-1)", "+ 1", "+1", "-(-", "ceil", ">>", "threads_per_block -"):
        assert answer not in result.hint, f"{answer!r} in the hint: {result.hint}"


def test_no_blocks_for_hint_gives_the_answer():
    from gpulab.exercises.ch00 import BLOCKS_MISTAKES

    for mistake in BLOCKS_MISTAKES:
        hint = mistake.hint if isinstance(mistake.hint, str) else ""
        assert "threads_per_block - 1" not in hint and "- 1)" not in hint, hint


# --- a block size of its own, and grids that are not one block size times enough blocks ---------


def blocks_hard_coded_256(n, threads_per_block):
    return (n + 255) // 256


def blocks_per_warp(n, threads_per_block):
    return (n + 31) // 32


def blocks_len_of_range(n, threads_per_block):
    return len(range(0, n, threads_per_block))


def blocks_while_loop(n, threads_per_block):
    blocks = 0
    while blocks * threads_per_block < n:
        blocks += 1
    return blocks


def blocks_in_float32(n, threads_per_block):
    return int(np.ceil(np.float32(n) / threads_per_block))


@pytest.mark.parametrize("seed", SEEDS)
def test_blocks_worked_out_in_float32_are_named(seed):
    result = check_blocks_for(blocks_in_float32, seed=seed, show=False)
    assert result.status == "failed", str(result)
    assert "worked out in float32" in result.message and "2**24" in result.hint, str(result)


@pytest.mark.parametrize("function", [blocks_len_of_range, blocks_while_loop])
def test_blocks_for_accepts_more_right_answers(function):
    assert check_blocks_for(function, seed=3, show=False).passed


@pytest.mark.parametrize(("function", "fixed"), [(blocks_hard_coded_256, 256),
                                                 (blocks_per_warp, 32)])
@pytest.mark.parametrize("seed", SEEDS)
def test_a_block_size_of_its_own_is_named(function, fixed, seed):
    result = check_blocks_for(function, seed=seed, show=False)
    assert result.status == "failed", str(result)
    assert f"divided by {fixed}, whatever threads_per_block" in result.message
    assert "threads_per_block the caller passes" in result.hint


def on_gpu_grid_swapped(x):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    add_one[128, (x.shape[0] + 127) // 128](d_x, d_out)
    cuda.synchronize()
    return d_out.copy_to_host()


def on_gpu_a_thread_per_block(x):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    add_one[x.shape[0], 1](d_x, d_out)
    cuda.synchronize()
    return d_out.copy_to_host()


def on_gpu_four_blocks_sized_from_n(x):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    add_one[4, (x.shape[0] + 3) // 4](d_x, d_out)
    cuda.synchronize()
    return d_out.copy_to_host()


def on_gpu_one_block_of_n(x):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    add_one[1, x.shape[0]](d_x, d_out)
    cuda.synchronize()
    return d_out.copy_to_host()


def on_gpu_blocks_of_1024(x):  # right: in the simulator n < 1024, so one block of 1024 threads
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    threads = 1024
    add_one[(x.shape[0] + threads - 1) // threads, threads](d_x, d_out)
    cuda.synchronize()
    return d_out.copy_to_host()


def test_blocks_of_1024_threads_pass():
    assert check_first_launch(add_one, on_gpu_blocks_of_1024, seed=3, show=False).passed


@pytest.mark.parametrize(("run", "words"), [
    (on_gpu_grid_swapped, ["128 block(s) of", "warps of 32 threads", "number of blocks first"]),
    (on_gpu_a_thread_per_block, ["block(s) of 1 thread(s)", "sat idle"]),
    (on_gpu_four_blocks_sized_from_n, ["4 block(s) of", "a block size worked out from n",
                                       "number of blocks first"]),
    (on_gpu_one_block_of_n, ["one block of", "at most 1024", "as many blocks as n needs"]),
])
def test_a_grid_not_made_of_blocks_of_a_fixed_size_fails(run, words):
    result = check_first_launch(add_one, run, seed=3, show=False)
    text = str(result).lower()
    assert result.status == "failed", text
    for word in words:
        assert word.lower() in text, f"{word!r} missing from:\n{text}"


def blocks_counted_in_warps(n, threads_per_block):
    """Wrong: rounds n up to warps, then divides by the block's warps (a block size that is
    not a multiple of 32 breaks it)."""
    warps = (n + 31) // 32
    per_block = threads_per_block // 32
    return warps // per_block + (1 if warps % per_block else 0)


@pytest.mark.parametrize("seed", [1, 7, 12345])
def test_blocks_counted_in_warps_fails(seed):
    result = check_blocks_for(blocks_counted_in_warps, seed=seed, show=False)
    assert result.status == "failed", result


def add_one_on_one_block_of_1024(x):
    """Wrong: the grid typed in, one block of 1024 threads, whatever n is."""
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    add_one[1, 1024](d_x, d_out)
    cuda.synchronize()
    return d_out.copy_to_host()


def test_one_block_of_1024_typed_in_fails():
    result = check_first_launch(add_one, add_one_on_one_block_of_1024, seed=3, show=False)
    assert result.status == "failed", result


# --- a second call: n a multiple of the block size chosen; a block size that follows n ---------


def on_gpu_plus_one_block(x):  # exercise 1's wrong formula: one block too many on a multiple
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    add_one[x.shape[0] // 128 + 1, 128](d_x, d_out)
    cuda.synchronize()
    return d_out.copy_to_host()


def on_gpu_n_plus_threads(x):  # (n + t) // t: the same mistake
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    t = 256
    add_one[(x.shape[0] + t) // t, t](d_x, d_out)
    cuda.synchronize()
    return d_out.copy_to_host()


def on_gpu_blocks_of_100(x):  # right: a block size that is not a multiple of 32 is allowed
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    add_one[(x.shape[0] + 99) // 100, 100](d_x, d_out)
    cuda.synchronize()
    return d_out.copy_to_host()


def on_gpu_threads_from_n(x):  # 13 blocks, the threads worked out from n
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    add_one[13, -(-x.shape[0] // 13)](d_x, d_out)
    cuda.synchronize()
    return d_out.copy_to_host()


@pytest.mark.parametrize("seed", [1, 7, 12345])
@pytest.mark.parametrize("run", [on_gpu_plus_one_block, on_gpu_n_plus_threads])
def test_one_block_too_many_on_a_multiple_of_the_block_fails(run, seed):
    result = check_first_launch(add_one, run, seed=seed, show=False)
    text = str(result).lower()
    assert result.status == "failed", text
    assert "(a multiple of its" in text and "one whole block had nothing to do" in text, text


def test_blocks_of_100_pass_where_n_happens_to_fit_thirteen_of_them():
    # n = 1297 fills 13 blocks of ceil(1297 / 13) = 100: a block size worked out from n looks
    # the same from one call, and the second call (130 more elements) tells them apart
    x, got, _ = ch00.check_launch_by_hand(on_gpu_blocks_of_100, add_one, 1297, 5, "call")
    assert np.array_equal(got, x + np.float32(1))
    for seed in (1, 7, 12345):
        result = check_first_launch(add_one, on_gpu_blocks_of_100, seed=seed, show=False)
        assert result.passed, str(result)


def test_a_block_size_worked_out_from_n_still_fails():
    with pytest.raises(CheckFailedError, match="a block size worked out from n"):
        ch00.check_launch_by_hand(on_gpu_threads_from_n, add_one, 1297, 5, "call")
    result = check_first_launch(add_one, on_gpu_threads_from_n, seed=1, show=False)
    assert result.status == "failed" and "worked out from n" in str(result), str(result)


def blocks_rounded_by_adding_0999(n, threads_per_block):
    return int(n / threads_per_block + 0.999)  # misses a remainder under 1/1000 of a block


def blocks_from_n_rounded_up_to_a_warp(n, threads_per_block):
    warps = (n + 31) // 32
    return (warps * 32 + threads_per_block - 1) // threads_per_block


@pytest.mark.parametrize("seed", [1, 7, 12345])
@pytest.mark.parametrize("function", [blocks_rounded_by_adding_0999,
                                      blocks_from_n_rounded_up_to_a_warp])
def test_blocks_for_rounding_tricks_fail_on_every_seed(function, seed):
    result = check_blocks_for(function, seed=seed, show=False)
    assert result.status == "failed", result


@cuda.jit
def add_one_in_thread_0(x, out):
    """Wrong method, right values: thread 0 does every element."""
    if cuda.grid(1) == 0:
        for i in range(x.shape[0]):
            out[i] = x[i] + 1


@pytest.mark.parametrize("seed", [1, 7])
def test_add_one_by_one_thread_fails(seed):
    result = check_first_launch(add_one_in_thread_0, on_gpu, seed=seed, show=False)
    assert result.status == "failed" and "117 elements written by one thread" in result.message


def on_gpu_copied_back_on_a_stream_without_waiting(x):
    """Wrong: the copy back into pinned memory on a stream is not waited for."""
    stream = cuda.stream()
    d_x = cuda.to_device(x, stream=stream)
    d_out = cuda.device_array_like(d_x, stream=stream)
    add_one[(x.shape[0] + 255) // 256, 256, stream](d_x, d_out)
    host = cuda.pinned_array(x.shape, dtype=x.dtype)
    d_out.copy_to_host(host, stream=stream)
    return host


def on_gpu_on_a_stream_waited_for(x):  # right: the same, then the stream waited for
    stream = cuda.stream()
    d_x = cuda.to_device(x, stream=stream)
    d_out = cuda.device_array_like(d_x, stream=stream)
    add_one[(x.shape[0] + 255) // 256, 256, stream](d_x, d_out)
    host = cuda.pinned_array(x.shape, dtype=x.dtype)
    d_out.copy_to_host(host, stream=stream)
    stream.synchronize()
    return host


def make_host_function(kernel):
    def add_one_on_gpu(x):  # right: the kernel reached through a closure
        d_x = cuda.to_device(x)
        d_out = cuda.device_array_like(d_x)
        kernel[(x.shape[0] + 127) // 128, 128](d_x, d_out)
        cuda.synchronize()
        return d_out.copy_to_host()
    return add_one_on_gpu


def test_a_copy_back_on_a_stream_must_be_waited_for():
    result = check_first_launch(add_one, on_gpu_copied_back_on_a_stream_without_waiting, seed=1,
                                show=False)
    assert result.status == "failed" and "without waiting for it" in result.message, result
    assert check_first_launch(add_one, on_gpu_on_a_stream_waited_for, seed=1, show=False).passed


def test_a_kernel_reached_through_a_closure_is_seen():
    result = check_first_launch(add_one, make_host_function(add_one), seed=1, show=False)
    assert result.passed, result


def on_gpu_output_copied_in_as_zeros(x):
    """Wrong for this chapter: the output copied in from a host array of zeros."""
    d_x = cuda.to_device(x)
    d_out = cuda.to_device(np.zeros_like(x))
    add_one[(x.size + 127) // 128, 128](d_x, d_out)
    return d_out.copy_to_host()


def test_an_output_copied_in_as_zeros_is_named():
    result = check_first_launch(add_one, on_gpu_output_copied_in_as_zeros, seed=1, show=False)
    assert result.status == "failed", result
    assert "filled with zeros" in result.message and "for nothing" in result.message


def on_gpu_two_blocks_typed_in(x):
    """Wrong: the grid typed in, 2 blocks of 1024 (enough for the first n the simulator
    draws, not for a larger one)."""
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    add_one[2, 1024](d_x, d_out)
    return d_out.copy_to_host()


def on_gpu_by_forall(x):
    """Not this exercise: Numba's forall picks the grid itself."""
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    add_one.forall(x.size)(d_x, d_out)
    return d_out.copy_to_host()


@pytest.mark.parametrize("run, words", [
    (on_gpu_two_blocks_typed_in, "got no thread"),
    (on_gpu_by_forall, "launched the kernel with `forall("),
])
def test_first_launch_names_a_grid_typed_in_and_forall(run, words):
    result = check_first_launch(add_one, run, seed=1, show=False)
    assert result.status == "failed", result
    assert words in result.message, result.message


def test_one_element_in_one_block_is_not_the_shape_as_the_block_count():
    # n = 1: one block is as many blocks as elements, and right
    x, got, _ = ch00.check_launch_by_hand(on_gpu_copy_back_then_view, add_one, 1, 5, "call")
    assert np.array_equal(got, x + np.float32(1))
