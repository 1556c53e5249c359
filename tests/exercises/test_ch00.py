"""Chapter 00's checks (how many blocks, the first kernel launched by hand) against right answers
and the wrong ones learners write.

The solutions live here and in the solution notebook only: the package ships none.
"""

import gpulab  # noqa: F401  (must come before numba: it chooses the simulator or the GPU)

# isort: split
import math

import numpy as np
import pytest
from numba import cuda

from gpulab.exercises.ch00 import check_blocks_for, check_first_launch, watch_host_code

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
def add_one_copies(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = x[i]


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
    (add_one_no_guard, on_gpu, "failed", ["past the end", "if i < x.shape[0]"]),
    (add_one_guard_le, on_gpu, "failed", ["past the end", "`<` not `<=`"]),
    (add_one_thread_index_only, on_gpu, "failed", ["only the first block", "cuda.grid(1)"]),
    (add_one_copies, on_gpu, "failed", ["a copy of x", "x[i] + 1"]),
    (add_one, on_gpu_too_few_blocks, "failed", ["got no thread", "round the number of blocks up"]),
    (add_one, on_gpu_returns_device_array, "failed", ["device array itself", "copy_to_host()"]),
    (add_one, on_gpu_numpy_arrays, "failed", ["with numpy arrays", "hidden from you",
                                              "cuda.to_device(x)"]),
    (add_one, on_gpu_forgets_return, "failed", ["returned none", "return d_out.copy_to_host()"]),
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

    # The kernel's own output is right, and device memory is a copy: x on the host is unchanged.
    assert check_first_launch(add_one_in_place, run, seed=4, show=False).passed


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


def test_the_gpu_branch_runs_with_the_stand_in_gpu(stand_in_gpu, monkeypatch):
    from gpulab.exercises import ch00, checks

    monkeypatch.setitem(ch00.HOST_SIZE_RANGE, "gpu", (301, 601))  # the simulator runs it
    monkeypatch.setitem(checks.SIZE_RANGE, "gpu", (300, 700))
    # The simulator's events cannot be polled (reported to the checks' maintainers).
    monkeypatch.setattr(checks, "_wait_for_gpu", lambda seconds: None)
    result = check_first_launch(add_one, on_gpu, seed=1, show=False)
    assert result.passed, str(result)
    result = check_first_launch(add_one, on_gpu_numpy_arrays, seed=1, show=False)
    assert "with NumPy arrays" in result.message
