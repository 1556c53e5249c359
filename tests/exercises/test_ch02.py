"""Chapter 02's checks (saxpy, the host code that times it, the coalesced grid-stride copy)
against a right answer and the typical wrong ones.

Every wrong kernel must be caught with a status and hint words a learner can act on. The
solutions live here and in the solution notebooks only: the package ships none.
"""

import gpulab  # noqa: F401  (must come before numba: it chooses the simulator or the GPU)

# isort: split
import time
from time import perf_counter as clock  # a learner's import at the top of the cell

import numpy as np
import pytest
from learner_kernels import copy_guarded as copy_one_per_thread  # not grid-stride
from numba import cuda

from gpulab import device
from gpulab.exercises.ch02 import check_copy_grid_stride, check_saxpy, check_time_saxpy
from gpulab.kernels import memory as gpulab_memory

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


@cuda.jit
def saxpy_rounded_once(a, x, y, out):  # what a GPU runs: a * x + y as one FMA, one rounding
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = np.float32(np.float64(a) * np.float64(x[i]) + np.float64(y[i]))


@pytest.mark.parametrize("seed", [1, 3, 4, 7, 12345])
def test_saxpy_accepts_a_x_plus_y_rounded_once_as_a_gpu_fuses_it(seed):
    # numba-cuda compiles `a * x[i] + y[i]` to fma.rn.f32: where a * x and y nearly cancel it
    # parts from NumPy's two roundings by up to one rounding of a * x (the tolerance's scale)
    result = check_saxpy(saxpy_rounded_once, seed=seed, show=False)
    assert result.passed, result


@pytest.mark.parametrize("seed", SEEDS)
def test_saxpy_solution_passes(seed):
    result = check_saxpy(saxpy_solution, seed=seed, show=False)
    assert result.passed, result.message


@pytest.mark.parametrize("kernel, status, words", [
    (saxpy_stub, "not attempted", "one thread per element"),
    (saxpy_forgets_a, "failed", "a is missing"),
    (saxpy_swapped, "failed", "swapped"),
    (saxpy_no_guard, "failed", "guard"),
    (saxpy_thread_index_only, "failed", "block's index"),
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
def copy_past_the_end(x, out):
    for i in range(cuda.grid(1), x.shape[0] + 1, cuda.gridsize(1)):
        out[i] = x[i]


@pytest.mark.parametrize("seed", SEEDS)
def test_copy_solution_passes(seed):
    result = check_copy_grid_stride(copy_solution, seed=seed, show=False)
    assert result.passed, result.message
    if SIM:
        assert "and coalesced" in result.message and "(ideal 4;" in result.message


@cuda.jit
def copy_stepping_past_x(x, out):  # a step typed in, larger than any x the check draws
    for i in range(cuda.grid(1), x.shape[0], 100_000):
        out[i] = x[i]


@pytest.mark.parametrize("kernel, status, words", [
    (copy_stub, "not attempted", "no two threads meet"),
    (copy_one_per_thread, "failed", "one element per thread"),
    (copy_stepping_past_x, "failed", "your loop never took a second step"),
    (copy_past_the_end, "failed", "is there a guard"),
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
    assert "whole grid" in result.hint


@cuda.jit
def copy_steps_by_block(x, out):  # right answer, the blocks copy each other's elements
    for i in range(cuda.grid(1), x.shape[0], cuda.blockDim.x):
        out[i] = x[i]


@cuda.jit
def copy_steps_by_blocks(x, out):  # right answer, steps by gridDim.x
    for i in range(cuda.grid(1), x.shape[0], cuda.gridDim.x):
        out[i] = x[i]


@cuda.jit
def copy_starts_at_thread_index(x, out):  # every block copies the same elements
    for i in range(cuda.threadIdx.x, x.shape[0], cuda.gridsize(1)):
        out[i] = x[i]


@cuda.jit
def copy_every_block_everything(x, out):
    for i in range(cuda.threadIdx.x, x.shape[0], cuda.blockDim.x):
        out[i] = x[i]


@cuda.jit
def copy_steps_too_far(x, out):
    for i in range(cuda.grid(1), x.shape[0], 2 * cuda.gridsize(1)):
        out[i] = x[i]


@cuda.jit
def copy_never_steps(x, out):  # a while loop whose increment was forgotten: never ends
    i = cuda.grid(1)
    while i < x.shape[0]:
        out[i] = x[i]
        i += 0


@cuda.jit
def copy_step_zero(x, out):  # the step computed as gridDim.x // blockDim.x, which is 0
    for i in range(cuda.grid(1), x.shape[0], cuda.gridDim.x // cuda.blockDim.x):
        out[i] = x[i]


@pytest.mark.parametrize("kernel, words, hint", [
    (copy_steps_by_block, ["more than one thread", "steps by the block size"],
     "cuda.gridsize(1)"),
    (copy_steps_by_blocks, ["more than one thread", "steps by the number of blocks"],
     "cuda.gridsize(1)"),
    (copy_starts_at_thread_index, ["more than one thread", "start at the same element"],
     "cuda.grid(1)"),
    (copy_every_block_everything, ["more than one thread", "steps by the block size"],
     "cuda.gridsize(1)"),
    (copy_steps_too_far, ["steps by", "never copied"], "cuda.gridsize(1)"),
    (copy_never_steps, ["steps by 0", "did not finish"], "gridsize"),
    (copy_step_zero, ["steps by 0", "must not be zero"], "gridsize"),
])
def test_a_wrong_stride_fails_and_names_the_step(kernel, words, hint):
    result = check_copy_grid_stride(kernel, seed=6, show=False)
    assert result.status == "failed", str(result)
    for word in words:
        assert word in result.message, f"{word!r} missing from {result.message}"
    assert hint in result.hint
    assert "seed=6" in result.message


@cuda.jit
def copy_doubled(x, out):  # grid-stride, but the wrong value
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        out[i] = 2 * x[i]


@cuda.jit
def copy_guard_reversed(x, out):  # writes nothing
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        if i > x.shape[0]:
            out[i] = x[i]


@cuda.jit
def copy_one_short(x, out):  # grid-stride, but the loop stops before the last element
    for i in range(cuda.grid(1), x.shape[0] - 1, cuda.gridsize(1)):
        out[i] = x[i]


@pytest.mark.parametrize("kernel, words", [
    (copy_doubled, ["elements are wrong", "threads for n="]),
    (copy_guard_reversed, ["wrote nothing into out", "threads for n="]),
    (copy_one_short, ["last element", "threads for n="]),
])
def test_a_wrong_copy_names_the_fixed_grid_it_ran_on(kernel, words):
    result = check_copy_grid_stride(kernel, seed=7, show=False)
    assert result.status == "failed", str(result)
    for word in words:
        assert word in result.message, f"{word!r} missing from {result.message}"
    assert result.message.endswith("seed=7).")


def test_the_copy_spec_lists_its_mistakes_in_the_order_tried():
    from gpulab.exercises.ch02 import COPY, COPY_MISTAKES, STRIDE_MISTAKES

    assert COPY.mistakes == STRIDE_MISTAKES + COPY_MISTAKES
    rows = COPY.mistake_table().splitlines()[4:]
    assert [row.split(" | ")[0].removeprefix("| ") for row in rows] == [
        mistake.did for mistake in COPY.mistakes]
    assert rows[0].startswith("| a step of 0") and "one element per thread" not in COPY.also


# --- chapter 02, exercise 2: the host code that times saxpy ------------------------------------

def blocks_for(n, threads):
    return (n + threads - 1) // threads


def time_solution(kernel, a, x, y, repeats=5):
    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    d_out = cuda.device_array_like(d_x)
    threads = 256
    blocks = blocks_for(x.shape[0], threads)
    kernel[blocks, threads](a, d_x, d_y, d_out)  # warm-up: compiles
    cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        kernel[blocks, threads](a, d_x, d_y, d_out)
    cuda.synchronize()
    seconds = (time.perf_counter() - start) / repeats
    return d_out.copy_to_host(), seconds


def time_without_warm_up(kernel, a, x, y, repeats=5):
    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    d_out = cuda.device_array_like(d_x)
    blocks = blocks_for(x.shape[0], 128)
    start = time.perf_counter()
    for _ in range(repeats):
        kernel[blocks, 128](a, d_x, d_y, d_out)
    cuda.synchronize()
    seconds = (time.perf_counter() - start) / repeats
    return d_out.copy_to_host(), seconds


def time_stub(kernel, a, x, y, repeats=5):
    # YOUR CODE HERE
    raise NotImplementedError()


def time_numpy_arrays(kernel, a, x, y, repeats=5):  # the hidden-copy trap
    out = np.empty_like(x)
    blocks = blocks_for(x.shape[0], 256)
    start = time.perf_counter()
    for _ in range(repeats):
        kernel[blocks, 256](a, x, y, out)
    cuda.synchronize()
    return out, (time.perf_counter() - start) / repeats


def time_copies_in_loop(kernel, a, x, y, repeats=5):
    blocks = blocks_for(x.shape[0], 256)
    start = time.perf_counter()
    for _ in range(repeats):
        d_x, d_y = cuda.to_device(x), cuda.to_device(y)
        d_out = cuda.device_array_like(d_x)
        kernel[blocks, 256](a, d_x, d_y, d_out)
    cuda.synchronize()
    seconds = (time.perf_counter() - start) / repeats
    return d_out.copy_to_host(), seconds


def time_includes_copy_back(kernel, a, x, y, repeats=5):
    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    d_out = cuda.device_array_like(d_x)
    blocks = blocks_for(x.shape[0], 256)
    start = time.perf_counter()
    for _ in range(repeats):
        kernel[blocks, 256](a, d_x, d_y, d_out)
    out = d_out.copy_to_host()
    return out, (time.perf_counter() - start) / repeats


def time_no_synchronize(kernel, a, x, y, repeats=5):
    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    d_out = cuda.device_array_like(d_x)
    blocks = blocks_for(x.shape[0], 256)
    start = time.perf_counter()
    for _ in range(repeats):
        kernel[blocks, 256](a, d_x, d_y, d_out)
    seconds = (time.perf_counter() - start) / repeats
    cuda.synchronize()
    return d_out.copy_to_host(), seconds


def time_too_few_blocks(kernel, a, x, y, repeats=5):
    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    d_out = cuda.device_array_like(d_x)
    start = time.perf_counter()
    for _ in range(repeats):
        kernel[x.shape[0] // 256, 256](a, d_x, d_y, d_out)
    cuda.synchronize()
    seconds = (time.perf_counter() - start) / repeats
    return d_out.copy_to_host(), seconds


def time_returns_device_array(kernel, a, x, y, repeats=5):
    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    d_out = cuda.device_array_like(d_x)
    blocks = blocks_for(x.shape[0], 256)
    start = time.perf_counter()
    for _ in range(repeats):
        kernel[blocks, 256](a, d_x, d_y, d_out)
    cuda.synchronize()
    return d_out, (time.perf_counter() - start) / repeats


def time_total_not_per_launch(kernel, a, x, y, repeats=5):
    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    d_out = cuda.device_array_like(d_x)
    blocks = blocks_for(x.shape[0], 256)
    start = time.perf_counter()
    for _ in range(repeats):
        kernel[blocks, 256](a, d_x, d_y, d_out)
    cuda.synchronize()
    seconds = time.perf_counter() - start
    return d_out.copy_to_host(), seconds


def time_launches_once(kernel, a, x, y, repeats=5):
    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    d_out = cuda.device_array_like(d_x)
    start = time.perf_counter()
    kernel[blocks_for(x.shape[0], 256), 256](a, d_x, d_y, d_out)
    cuda.synchronize()
    seconds = time.perf_counter() - start
    return d_out.copy_to_host(), seconds


def time_returns_only_out(kernel, a, x, y, repeats=5):
    out, _ = time_solution(kernel, a, x, y, repeats)
    return out


@pytest.mark.parametrize("seed", SEEDS + [2025])
def test_the_timing_solution_passes(seed):
    result = check_time_saxpy(time_solution, seed=seed, show=False)
    assert result.passed, str(result)
    assert "no NumPy array passed to a launch" in result.message
    assert "(1 to warm up)" in result.message and f"seed={seed}" in result.message
    if SIM:
        assert "simulator time: says nothing about a GPU" in result.message
    assert "Note:" not in result.message


def time_each_launch_without_warm_up(kernel, a, x, y, repeats=5):
    """The clock read around each launch, the first (which compiles) averaged in."""
    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    d_out = cuda.device_array_like(d_x)
    blocks = blocks_for(x.shape[0], 128)
    total = 0.0
    for _ in range(repeats + 1):
        start = time.perf_counter()
        kernel[blocks, 128](a, d_x, d_y, d_out)
        cuda.synchronize()
        total += time.perf_counter() - start
    return d_out.copy_to_host(), total / (repeats + 1)


def test_no_warm_up_before_one_timed_window_fails():
    """The exercise asks for the warm-up: with one window around every launch, the first
    launch's compile is in the time returned."""
    for seed in (3, 4):
        result = check_time_saxpy(time_without_warm_up, seed=seed, show=False)
        assert result.status == "failed", str(result)
        assert "launched nothing before the clock started" in result.message, result.message
        assert "your time includes it" in result.message and "warm-up" in result.hint


def time_each_launch_keeping_the_fastest(kernel, a, x, y, repeats=5):
    """Right, written differently: each launch timed alone, the fastest kept (the first,
    which compiles, is never the fastest)."""
    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    d_out = cuda.device_array_like(d_x)
    blocks = blocks_for(x.shape[0], 128)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        kernel[blocks, 128](a, d_x, d_y, d_out)
        cuda.synchronize()
        times.append(time.perf_counter() - start)
    return d_out.copy_to_host(), min(times)


@pytest.mark.parametrize("function", [time_each_launch_without_warm_up,
                                      time_each_launch_keeping_the_fastest])
def test_a_clock_around_each_launch_without_warm_up_passes_with_a_note(function):
    """Where the clock is read around each launch, the warm-ups are the launches before its
    first reading, and which of the times the answer kept is not known: a note, no failure."""
    result = check_time_saxpy(function, seed=3, show=False)
    assert result.passed, str(result)
    assert "launch once before you start the clock" in result.message


@pytest.mark.parametrize("function, status, words, hint", [
    (time_stub, "not attempted", ["still raises"], "warm up"),
    (time_numpy_arrays, "failed", ["got NumPy arrays (x, y, out)", "hidden-copy trap"],
     "copy x and y to the device once"),
    (time_copies_in_loop, "failed", ["8 copies to the device", "4 allocations", "host link"],
     "before the first clock read"),
    (time_includes_copy_back, "failed", ["1 copy back", "your time includes"],
     "copy back after the second"),
    (time_no_synchronize, "failed", ["without waiting for the GPU"], "cuda.synchronize()"),
    (time_too_few_blocks, "failed", ["got no thread"], "must be rounded up"),
    (time_returns_device_array, "failed", ["device array itself"], "copy_to_host()"),
    (time_total_not_per_launch, "failed", ["looks like the total"], "divide"),
    (time_launches_once, "failed", ["launched the kernel 1 time(s)"], "`repeats` times"),
    (time_returns_only_out, "failed", ["not a pair"], "then the seconds per launch"),
])
def test_timing_mistakes_are_named(function, status, words, hint):
    result = check_time_saxpy(function, seed=4, show=False)
    assert result.status == status, str(result)
    for word in words:
        assert word in result.message, f"{word!r} missing from {result.message}"
    assert hint in result.hint, result.hint


def test_the_gpu_branches_run_with_the_stand_in_gpu(stand_in_gpu, no_wait_for_gpu, monkeypatch):
    from gpulab.exercises import ch02

    monkeypatch.setitem(ch02.TIME_SIZE_RANGE, "gpu", (301, 601))  # the simulator runs them
    monkeypatch.setitem(ch02.COPY_SIZE_RANGE, "gpu", (1100, 1500))
    result = check_time_saxpy(time_solution, seed=1, show=False)
    assert result.passed and f"measured on {stand_in_gpu}" in result.message, str(result)
    result = check_copy_grid_stride(copy_solution, seed=1, show=False)
    assert result.passed and "checked in the simulator tier" in result.message, str(result)
    result = check_copy_grid_stride(copy_steps_by_block, seed=1, show=False)
    assert result.status == "failed" and "steps by the block size" in result.message


# --- wrong-but-plausible answers and right ones written differently (issue 22) -----------------

@cuda.jit
def saxpy_forgets_y(a, x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = a * x[i]


@cuda.jit
def saxpy_scales_both(a, x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = a * (x[i] + y[i])


@cuda.jit
def saxpy_block_of_64(a, x, y, out):  # the block size typed in
    i = cuda.blockIdx.x * 64 + cuda.threadIdx.x
    if i < x.shape[0]:
        out[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_capped_beside_a_right_guard(a, x, y, out):  # the arrays here have fewer than 100,000
    i = cuda.grid(1)
    if i >= 100_000:
        return
    if i < x.shape[0]:
        out[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_fixed_size(a, x, y, out):  # the problem size typed in
    i = cuda.grid(1)
    if i < 100:
        out[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_steps_by_block(a, x, y, out):  # right values, threads redo each other's elements
    for i in range(cuda.grid(1), x.shape[0], cuda.blockDim.x):
        out[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_guard_too_loose(a, x, y, out):
    i = cuda.grid(1)
    if i <= x.shape[0]:
        out[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_skips_last_block(a, x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0] - x.shape[0] % cuda.blockDim.x:
        out[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_multiplies_y(a, x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = x[i] * y[i] + a


@cuda.jit
def saxpy_grid_stride(a, x, y, out):  # right, written as a grid-stride loop
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        out[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_early_return(a, x, y, out):  # right, the index by hand and an early return
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i >= x.shape[0]:
        return
    out[i] = a * x[i] + y[i]


@pytest.mark.parametrize("kernel, words", [
    (saxpy_forgets_y, ["a * x[i] (y is missing)"]),
    (saxpy_scales_both, ["a * (x[i] + y[i])"]),
    (saxpy_block_of_64, ["hard-codes the block size", "blockIdx.x * 64"]),
    (saxpy_fixed_size, ["`if i < 100:` compares with a fixed number"]),
    (saxpy_capped_beside_a_right_guard, ["`if i >= 100_000:` compares", "with a fixed number"]),
    (saxpy_steps_by_block, ["written by more than one thread", "block size"]),
    (saxpy_guard_too_loose, ["guard"]),
    (saxpy_skips_last_block, ["elements"]),
    (saxpy_multiplies_y, ["x[i] * y[i] + a"]),
])
def test_saxpy_wrong_answers_name_their_mistake(kernel, words):
    result = check_saxpy(kernel, seed=5, show=False)
    assert result.status == "failed", str(result)
    for word in words:
        assert word in result.message + result.hint, f"{word!r} missing from {result}"


@pytest.mark.parametrize("seed", [1, 7])
@pytest.mark.parametrize("kernel", [saxpy_grid_stride, saxpy_early_return])
def test_saxpy_right_answers_written_differently_pass(kernel, seed):
    result = check_saxpy(kernel, seed=seed, show=False)
    assert result.passed, str(result)
    assert "each written by one thread" in result.message


def test_saxpy_blockdim_stride_fails_on_every_seed():
    for seed in range(5):
        result = check_saxpy(saxpy_steps_by_block, seed=seed, show=False)
        assert result.status == "failed" and "more than one thread" in result.message, seed


def test_saxpy_refuses_gpulab_own_kernel():
    result = check_saxpy(gpulab_memory.saxpy, seed=1, show=False)
    assert result.status == "failed" and "gpulab's own" in result.message, str(result)


def time_events(kernel, a, x, y, repeats=5):  # right, timed with CUDA events
    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    d_out = cuda.device_array_like(d_x)
    blocks = blocks_for(x.shape[0], 256)
    kernel[blocks, 256](a, d_x, d_y, d_out)
    start, stop = cuda.event(), cuda.event()
    start.record()
    for _ in range(repeats):
        kernel[blocks, 256](a, d_x, d_y, d_out)
    stop.record()
    stop.synchronize()
    seconds = start.elapsed_time(stop) / 1e3 / repeats
    return d_out.copy_to_host(), seconds


def time_from_import_ns(kernel, a, x, y, repeats=5):  # right, `from time import ..._ns`
    from time import perf_counter_ns as clock

    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    d_out = cuda.device_array_like(d_x)
    blocks = blocks_for(x.shape[0], 128)
    kernel[blocks, 128](a, d_x, d_y, d_out)
    cuda.synchronize()
    started = clock()
    for _ in range(repeats):
        kernel[blocks, 128](a, d_x, d_y, d_out)
    cuda.synchronize()
    seconds = (clock() - started) / 1e9 / repeats
    return d_out.copy_to_host(), seconds


def time_events_no_wait(kernel, a, x, y, repeats=5):
    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    d_out = cuda.device_array_like(d_x)
    blocks = blocks_for(x.shape[0], 256)
    kernel[blocks, 256](a, d_x, d_y, d_out)
    start, stop = cuda.event(), cuda.event()
    start.record()
    for _ in range(repeats):
        kernel[blocks, 256](a, d_x, d_y, d_out)
    stop.record()
    seconds = start.elapsed_time(stop) / 1e3 / repeats
    return d_out.copy_to_host(), seconds


def time_cpu_clock(kernel, a, x, y, repeats=5):
    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    d_out = cuda.device_array_like(d_x)
    blocks = blocks_for(x.shape[0], 256)
    kernel[blocks, 256](a, d_x, d_y, d_out)
    cuda.synchronize()
    start = time.process_time()
    for _ in range(repeats):
        kernel[blocks, 256](a, d_x, d_y, d_out)
    cuda.synchronize()
    return d_out.copy_to_host(), (time.process_time() - start) / repeats


def time_divides_by_warm_ups_too(kernel, a, x, y, repeats=5):
    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    d_out = cuda.device_array_like(d_x)
    blocks = blocks_for(x.shape[0], 256)
    kernel[blocks, 256](a, d_x, d_y, d_out)
    cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        kernel[blocks, 256](a, d_x, d_y, d_out)
    cuda.synchronize()
    seconds = (time.perf_counter() - start) / (repeats + 1)
    return d_out.copy_to_host(), seconds


def time_from_import_copies_in_loop(kernel, a, x, y, repeats=5):
    from time import perf_counter

    blocks = blocks_for(x.shape[0], 256)
    start = perf_counter()
    for _ in range(repeats):
        d_x, d_y = cuda.to_device(x), cuda.to_device(y)
        d_out = cuda.device_array_like(d_x)
        kernel[blocks, 256](a, d_x, d_y, d_out)
    cuda.synchronize()
    return d_out.copy_to_host(), (perf_counter() - start) / repeats


def time_from_import_no_synchronize(kernel, a, x, y, repeats=5):
    from time import perf_counter as now

    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    d_out = cuda.device_array_like(d_x)
    blocks = blocks_for(x.shape[0], 256)
    start = now()
    for _ in range(repeats):
        kernel[blocks, 256](a, d_x, d_y, d_out)
    seconds = (now() - start) / repeats
    cuda.synchronize()
    return d_out.copy_to_host(), seconds


def time_module_clock_no_synchronize(kernel, a, x, y, repeats=5):
    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    d_out = cuda.device_array_like(d_x)
    blocks = blocks_for(x.shape[0], 256)
    start = clock()
    for _ in range(repeats):
        kernel[blocks, 256](a, d_x, d_y, d_out)
    seconds = (clock() - start) / repeats
    cuda.synchronize()
    return d_out.copy_to_host(), seconds


def time_too_many_threads(kernel, a, x, y, repeats=5):
    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    d_out = cuda.device_array_like(d_x)
    start = time.perf_counter()
    for _ in range(repeats):
        kernel[1, 2048](a, d_x, d_y, d_out)
    cuda.synchronize()
    seconds = (time.perf_counter() - start) / repeats
    return d_out.copy_to_host(), seconds


def time_never_launches(kernel, a, x, y, repeats=5):
    return a * x + y, 1e-6


def time_uses_gpulab_kernel(kernel, a, x, y, repeats=5):
    return time_solution(gpulab_memory.saxpy, a, x, y, repeats)


def time_warm_up_not_waited(kernel, a, x, y, repeats=5):  # the warm-up runs into the window
    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    d_out = cuda.device_array_like(d_x)
    blocks = blocks_for(x.shape[0], 128)
    kernel[blocks, 128](a, d_x, d_y, d_out)
    start = time.perf_counter()
    for _ in range(repeats):
        kernel[blocks, 128](a, d_x, d_y, d_out)
    cuda.synchronize()
    seconds = (time.perf_counter() - start) / repeats
    return d_out.copy_to_host(), seconds


def time_per_element(kernel, a, x, y, repeats=5):  # seconds per launch per element
    return _timed(kernel, a, x, y, repeats, scale=1 / x.shape[0])


def time_divided_by_1000(kernel, a, x, y, repeats=5):  # "to milliseconds", the wrong way
    return _timed(kernel, a, x, y, repeats, scale=1e-3)


def time_stream(kernel, a, x, y, repeats=5):  # right: a stream of its own, waited for
    stream = cuda.stream()
    d_x, d_y = cuda.to_device(x, stream=stream), cuda.to_device(y, stream=stream)
    d_out = cuda.device_array_like(d_x, stream=stream)
    blocks = blocks_for(x.shape[0], 256)
    kernel[blocks, 256, stream](a, d_x, d_y, d_out)
    stream.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        kernel[blocks, 256, stream](a, d_x, d_y, d_out)
    stream.synchronize()
    seconds = (time.perf_counter() - start) / repeats
    return d_out.copy_to_host(stream=stream), seconds


def time_default_stream(kernel, a, x, y, repeats=5):  # right: the default stream waited for
    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    d_out = cuda.device_array_like(d_x)
    blocks = blocks_for(x.shape[0], 128)
    kernel[blocks, 128](a, d_x, d_y, d_out)
    cuda.default_stream().synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        kernel[blocks, 128](a, d_x, d_y, d_out)
    cuda.default_stream().synchronize()
    seconds = (time.perf_counter() - start) / repeats
    return d_out.copy_to_host(), seconds


def time_out_on_the_host(kernel, a, x, y, repeats=5):  # the launches timed, out from NumPy
    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    d_out = cuda.device_array_like(d_x)
    blocks = blocks_for(x.shape[0], 256)
    kernel[blocks, 256](a, d_x, d_y, d_out)
    cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        kernel[blocks, 256](a, d_x, d_y, d_out)
    cuda.synchronize()
    return a * x + y, (time.perf_counter() - start) / repeats


def time_copies_back_x(kernel, a, x, y, repeats=5):  # copies back, but not the output
    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    d_out = cuda.device_array_like(d_x)
    blocks = blocks_for(x.shape[0], 256)
    kernel[blocks, 256](a, d_x, d_y, d_out)
    cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        kernel[blocks, 256](a, d_x, d_y, d_out)
    cuda.synchronize()
    seconds = (time.perf_counter() - start) / repeats
    return np.float32(a) * d_x.copy_to_host() + y, seconds


def time_auto_synchronized(kernel, a, x, y, repeats=5):  # right: the stream waits on exit
    stream = cuda.stream()
    d_x, d_y = cuda.to_device(x, stream=stream), cuda.to_device(y, stream=stream)
    d_out = cuda.device_array_like(d_x, stream=stream)
    blocks = blocks_for(x.shape[0], 256)
    with stream.auto_synchronize():
        kernel[blocks, 256, stream](a, d_x, d_y, d_out)
    start = time.perf_counter()
    with stream.auto_synchronize():
        for _ in range(repeats):
            kernel[blocks, 256, stream](a, d_x, d_y, d_out)
    seconds = (time.perf_counter() - start) / repeats
    return d_out.copy_to_host(), seconds


def time_copies_back_into_an_array(kernel, a, x, y, repeats=5):  # right: into its own array
    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    d_out = cuda.device_array(x.shape, x.dtype)
    blocks = blocks_for(x.shape[0], 256)
    kernel[blocks, 256](a, d_x, d_y, d_out)
    cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        kernel[blocks, 256](a, d_x, d_y, d_out)
    cuda.synchronize()
    seconds = (time.perf_counter() - start) / repeats
    out = np.empty_like(x)
    d_out.copy_to_host(out)
    return out, seconds


@pytest.mark.parametrize("function, words, hint", [
    (time_out_on_the_host, ["never copied anything back", "worked out on the host"],
     "copy_to_host"),
    (time_copies_back_x, ["returned another array", "worked out on the host"], "copy_to_host"),
    (time_events_no_wait, ["without waiting for the GPU"], "stop.synchronize()"),
    (time_warm_up_not_waited, ["started right after the warm-up launch", "inside your timed"],
     "after the warm-up launch"),
    (time_per_element, ["per launch, but your clock reads span", "divided by more than"],
     "divide the time"),
    (time_divided_by_1000, ["divided by more than"], "divide the time"),
    (time_cpu_clock, ["`process_time`", "stands still"], "perf_counter"),
    (time_divides_by_warm_ups_too, ["span 4 launches", "divided by 5", "1 warm-up"],
     "`repeats`"),
    (time_from_import_copies_in_loop, ["8 copies to the device", "host link"],
     "before the first clock read"),
    (time_from_import_no_synchronize, ["without waiting for the GPU"], "cuda.synchronize()"),
    (time_module_clock_no_synchronize, ["without waiting for the GPU"], "cuda.synchronize()"),
    (time_too_many_threads, ["blocks of 2048 threads"], "256 threads"),
    (time_never_launches, ["never launched the kernel"], "kernel it is given"),
    (time_uses_gpulab_kernel, ["gpulab's own"], "write the exercise yourself"),
])
def test_more_timing_mistakes_are_named(function, words, hint):
    result = check_time_saxpy(function, seed=4, show=False)
    assert result.status == "failed", str(result)
    for word in words:
        assert word in result.message, f"{word!r} missing from {result.message}"
    assert hint in result.hint, result.hint


@pytest.mark.parametrize("function, clock", [(time_events, "CUDA events"),
                                             (time_from_import_ns, "the clock"),
                                             (time_stream, "the clock"),
                                             (time_default_stream, "the clock"),
                                             (time_copies_back_into_an_array, "the clock"),
                                             (time_auto_synchronized, "the clock")])
def test_timing_right_answers_written_differently_pass(function, clock):
    result = check_time_saxpy(function, seed=2, show=False)
    assert result.passed, str(result)
    assert f"timed with {clock}" in result.message and "Note:" not in result.message


@cuda.jit
def copy_while_loop(x, out):  # right, a while loop stepping by the grid
    i = cuda.grid(1)
    while i < x.shape[0]:
        out[i] = x[i]
        i += cuda.blockDim.x * cuda.gridDim.x


@cuda.jit
def copy_index_by_hand(x, out):  # right, start and step written out
    start = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    for i in range(start, x.shape[0], cuda.blockDim.x * cuda.gridDim.x):
        out[i] = x[i]


@pytest.mark.parametrize("kernel", [copy_while_loop, copy_index_by_hand])
def test_copy_right_answers_written_differently_pass(kernel):
    result = check_copy_grid_stride(kernel, seed=3, show=False)
    assert result.passed, str(result)


# --- the timing's clocks however reached, and CUDA events however written ----------------------

def _prepared(kernel, x, y, threads=256):
    """The copies, the allocation and a warm-up launch, waited for: (d_x, d_y, d_out, blocks)."""
    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    d_out = cuda.device_array_like(d_x)
    blocks = blocks_for(x.shape[0], threads)
    kernel[blocks, threads](x.dtype.type(1), d_x, d_y, d_out)
    cuda.synchronize()
    return d_x, d_y, d_out, blocks


def time_fake_seconds(kernel, a, x, y, repeats=5):  # no clock read: the time is made up
    d_x, d_y, d_out, blocks = _prepared(kernel, x, y)
    for _ in range(repeats):
        kernel[blocks, 256](a, d_x, d_y, d_out)
    cuda.synchronize()
    return d_out.copy_to_host(), 1e-5


def time_timeit_copies_in_loop(kernel, a, x, y, repeats=5):  # `timeit.default_timer`, module
    import timeit

    d_x, d_y, d_out, blocks = _prepared(kernel, x, y)
    start = timeit.default_timer()
    for _ in range(repeats):
        d_x = cuda.to_device(x)
        kernel[blocks, 256](a, d_x, d_y, d_out)
    seconds = (timeit.default_timer() - start) / repeats
    cuda.synchronize()
    return d_out.copy_to_host(), seconds


def time_timeit_no_synchronize(kernel, a, x, y, repeats=5):
    import timeit

    d_x, d_y, d_out, blocks = _prepared(kernel, x, y)
    start = timeit.default_timer()
    for _ in range(repeats):
        kernel[blocks, 256](a, d_x, d_y, d_out)
    seconds = (timeit.default_timer() - start) / repeats
    cuda.synchronize()
    return d_out.copy_to_host(), seconds


def time_clock_gettime_cpu(kernel, a, x, y, repeats=5):  # a CPU-time clock by its id
    d_x, d_y, d_out, blocks = _prepared(kernel, x, y)
    start = time.clock_gettime(time.CLOCK_PROCESS_CPUTIME_ID)
    for _ in range(repeats):
        kernel[blocks, 256](a, d_x, d_y, d_out)
    cuda.synchronize()
    seconds = (time.clock_gettime(time.CLOCK_PROCESS_CPUTIME_ID) - start) / repeats
    return d_out.copy_to_host(), seconds


def time_event_elapsed_divides_by_warm_ups_too(kernel, a, x, y, repeats=5):
    d_x, d_y, d_out, blocks = _prepared(kernel, x, y)
    start, stop = cuda.event(), cuda.event()
    start.record()
    for _ in range(repeats):
        kernel[blocks, 256](a, d_x, d_y, d_out)
    stop.record()
    stop.synchronize()
    return d_out.copy_to_host(), cuda.event_elapsed_time(start, stop) / 1e3 / (repeats + 1)


@pytest.mark.skipif(not hasattr(time, "CLOCK_PROCESS_CPUTIME_ID"), reason="no clock_gettime")
@pytest.mark.parametrize("function, words, hint", [
    (time_fake_seconds, ["read no clock", "no CUDA event", "not measured"], "wall clock"),
    (time_timeit_copies_in_loop, ["4 copies to the device", "host link"],
     "before the first clock read"),
    (time_timeit_no_synchronize, ["without waiting for the GPU"], "cuda.synchronize()"),
    (time_clock_gettime_cpu, ["`clock_gettime(CLOCK_PROCESS_CPUTIME_ID)`", "stands still"],
     "wall clock"),
    (time_event_elapsed_divides_by_warm_ups_too, ["span 4 launches", "divided by 5"],
     "`repeats`"),
])
def test_timing_mistakes_are_named_however_the_clock_is_reached(function, words, hint):
    result = check_time_saxpy(function, seed=4, show=False)
    assert result.status == "failed", str(result)
    for word in words:
        assert word in result.message, f"{word!r} missing from {result.message}"
    assert hint in result.hint, result.hint


def time_events_with_timing(kernel, a, x, y, repeats=5):  # right: `cuda.event(timing=True)`
    d_x, d_y, d_out, blocks = _prepared(kernel, x, y)
    start = cuda.event(timing=True)
    stop = cuda.event(timing=True)
    start.record()
    for _ in range(repeats):
        kernel[blocks, 256](a, d_x, d_y, d_out)
    stop.record()
    stop.synchronize()
    return d_out.copy_to_host(), start.elapsed_time(stop) * 1e-3 / repeats


def time_event_elapsed_time(kernel, a, x, y, repeats=5):  # right: `cuda.event_elapsed_time`
    d_x, d_y, d_out, blocks = _prepared(kernel, x, y)
    start, stop = cuda.event(), cuda.event()
    start.record()
    for _ in range(repeats):
        kernel[blocks, 256](a, d_x, d_y, d_out)
    stop.record()
    stop.synchronize()
    return d_out.copy_to_host(), cuda.event_elapsed_time(start, stop) / 1e3 / repeats


def time_clock_gettime_monotonic(kernel, a, x, y, repeats=5):  # right: a wall clock by its id
    d_x, d_y, d_out, blocks = _prepared(kernel, x, y)
    start = time.clock_gettime(time.CLOCK_MONOTONIC)
    for _ in range(repeats):
        kernel[blocks, 256](a, d_x, d_y, d_out)
    cuda.synchronize()
    seconds = (time.clock_gettime(time.CLOCK_MONOTONIC) - start) / repeats
    return d_out.copy_to_host(), seconds


def time_timeit_timeit(kernel, a, x, y, repeats=5):  # right: `timeit.timeit`, waiting each time
    import timeit

    d_x, d_y, d_out, blocks = _prepared(kernel, x, y)
    total = timeit.timeit(lambda: (kernel[blocks, 256](a, d_x, d_y, d_out), cuda.synchronize()),
                          number=repeats)
    return d_out.copy_to_host(), total / repeats


def time_datetime_now(kernel, a, x, y, repeats=5):  # right: a wall clock through datetime
    import datetime

    d_x, d_y, d_out, blocks = _prepared(kernel, x, y)
    start = datetime.datetime.now()
    for _ in range(repeats):
        kernel[blocks, 256](a, d_x, d_y, d_out)
    cuda.synchronize()
    seconds = (datetime.datetime.now() - start).total_seconds() / repeats
    return d_out.copy_to_host(), seconds


def time_context_synchronize(kernel, a, x, y, repeats=5):  # right: the context's own wait
    d_x, d_y, d_out, blocks = _prepared(kernel, x, y)
    context = cuda.current_context()
    start = time.perf_counter()
    for _ in range(repeats):
        kernel[blocks, 256](a, d_x, d_y, d_out)
    context.synchronize()
    seconds = (time.perf_counter() - start) / repeats
    return d_out.copy_to_host(), seconds


@pytest.mark.skipif(not hasattr(time, "CLOCK_MONOTONIC"), reason="no clock_gettime")
@pytest.mark.parametrize("function, clock", [(time_events_with_timing, "CUDA events"),
                                             (time_context_synchronize, "the clock"),
                                             (time_event_elapsed_time, "CUDA events"),
                                             (time_clock_gettime_monotonic, "the clock"),
                                             (time_timeit_timeit, "the clock"),
                                             (time_datetime_now, "the clock")])
def test_timing_clocks_and_events_written_differently_pass(function, clock):
    import timeit

    result = check_time_saxpy(function, seed=2, show=False)
    assert result.passed, str(result)
    assert f"timed with {clock}" in result.message and "Note:" not in result.message
    # everything the check patched is restored
    import datetime

    assert timeit.default_timer is time.perf_counter
    assert datetime.datetime.__bases__ == (datetime.date,)
    assert timeit.Timer.__init__.__defaults__[2] is time.perf_counter
    assert "built-in" in repr(time.time) and "built-in" in repr(time.clock_gettime)


@pytest.mark.parametrize("function", [time_events_with_timing, time_event_elapsed_time])
def test_a_timing_with_cuda_events_runs_outside_the_check_too(function):
    # A try-it cell calls the learner's function itself: in the simulator, cuda.event(timing=True)
    # and cuda.event_elapsed_time must work there as on a GPU (the simulator's own Event() takes
    # no argument, and it has no event_elapsed_time).
    x = np.arange(5, dtype=np.float32)
    out, seconds = function(gpulab_memory.saxpy, np.float32(2), x, np.ones_like(x), repeats=2)
    np.testing.assert_allclose(out, 2 * x + 1)
    assert seconds > 0


# --- more answers, written as learners write them ----------------------------------------------

@cuda.jit
def saxpy_in_place_on_y(a, x, y, out):  # BLAS's saxpy: y overwritten
    i = cuda.grid(1)
    if i < x.shape[0]:
        y[i] = a * x[i] + y[i]
        out[i] = y[i]


@cuda.jit
def saxpy_in_two_steps(a, x, y, out):  # right: out written, then added to
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = y[i]
        out[i] += a * x[i]


def test_saxpy_that_overwrites_y_fails_and_two_steps_pass():
    result = check_saxpy(saxpy_in_place_on_y, seed=3, show=False)
    assert result.status == "failed", str(result)
    assert "wrote into its input y" in result.message
    assert "into out only" in result.hint
    assert check_saxpy(saxpy_in_two_steps, seed=3, show=False).passed


def _timed(kernel, a, x, y, launches, threads=256, scale=1.0, grid=None, divide_by=None):
    """Prepared and warmed up; ``launches`` launches between two perf_counter reads; the time
    divided by ``divide_by`` (default: the launches) and multiplied by ``scale``; ``grid``:
    (blocks, threads) of every launch."""
    d_x, d_y, d_out, blocks = _prepared(kernel, x, y, threads)
    grid = grid or (blocks, threads)
    start = time.perf_counter()
    for _ in range(launches):
        kernel[grid](a, d_x, d_y, d_out)
    cuda.synchronize()
    seconds = (time.perf_counter() - start) / (divide_by or launches) * scale
    return d_out.copy_to_host(), seconds


def time_in_milliseconds(kernel, a, x, y, repeats=5):
    return _timed(kernel, a, x, y, repeats, scale=1e3)


def time_times_repeats(kernel, a, x, y, repeats=5):
    return _timed(kernel, a, x, y, repeats, scale=repeats * repeats)


def time_ten_launches(kernel, a, x, y, repeats=5):  # repeats ignored, divided by repeats
    return _timed(kernel, a, x, y, 10, divide_by=repeats)


def time_grid_swapped(kernel, a, x, y, repeats=5):
    return _timed(kernel, a, x, y, repeats, grid=(256, blocks_for(x.shape[0], 256)))


def time_events_in_ms(kernel, a, x, y, repeats=5):  # elapsed_time's milliseconds returned
    d_x, d_y, d_out, blocks = _prepared(kernel, x, y)
    start, stop = cuda.event(), cuda.event()
    start.record()
    for _ in range(repeats):
        kernel[blocks, 256](a, d_x, d_y, d_out)
    stop.record()
    stop.synchronize()
    milliseconds = cuda.event_elapsed_time(start, stop) / repeats
    return d_out.copy_to_host(), milliseconds


def time_warm_up_timed(kernel, a, x, y, repeats=5):  # the clock started before the warm-up
    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    d_out = cuda.device_array_like(d_x)
    blocks = blocks_for(x.shape[0], 128)
    start = time.perf_counter()
    kernel[blocks, 128](a, d_x, d_y, d_out)
    for _ in range(repeats):
        kernel[blocks, 128](a, d_x, d_y, d_out)
    cuda.synchronize()
    seconds = (time.perf_counter() - start) / repeats
    return d_out.copy_to_host(), seconds


def time_in_float64(kernel, a, x, y, repeats=5):
    return _timed(kernel, a, x.astype(np.float64), y.astype(np.float64), repeats)


def time_pair_swapped(kernel, a, x, y, repeats=5):
    out, seconds = _timed(kernel, a, x, y, repeats)
    return seconds, out


def time_copy_back_in_the_return(kernel, a, x, y, repeats=5):  # the copy back runs first
    d_x, d_y, d_out, blocks = _prepared(kernel, x, y)
    start = time.perf_counter()
    for _ in range(repeats):
        kernel[blocks, 256](a, d_x, d_y, d_out)
    cuda.synchronize()
    return d_out.copy_to_host(), (time.perf_counter() - start) / repeats


def time_x_and_y_swapped(kernel, a, x, y, repeats=5):
    return _timed(kernel, a, y, x, repeats)


def time_each_launch_averaged(kernel, a, x, y, repeats=5):  # right: each launch timed alone
    d_x, d_y, d_out, blocks = _prepared(kernel, x, y)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        kernel[blocks, 256](a, d_x, d_y, d_out)
        cuda.synchronize()
        times.append(time.perf_counter() - start)
    return d_out.copy_to_host(), sum(times) / len(times)


def time_synchronize_every_launch(kernel, a, x, y, repeats=5):  # right: waits after each
    d_x, d_y, d_out, blocks = _prepared(kernel, x, y, threads=128)
    start = time.time()
    for _ in range(repeats):
        kernel[blocks, 128](a, d_x, d_y, d_out)
        cuda.synchronize()
    seconds = (time.time() - start) / repeats
    return d_out.copy_to_host(), seconds


@pytest.mark.parametrize("function, words, hint", [
    (time_in_milliseconds, ["as the seconds per launch, but the whole call took",
                            "not in seconds"], "convert milliseconds"),
    (time_events_in_ms, ["not in seconds", "`elapsed_time` gives milliseconds"],
     "convert milliseconds"),
    (time_times_repeats, ["multiplied by 4, not divided"], "divide"),
    (time_ten_launches, ["there are 10 launches, but repeats = 4"], "`repeats` times"),
    (time_warm_up_timed, ["5 launches, but repeats = 4", "warm-up launch is inside"],
     "warm-up launch before"),
    (time_grid_swapped, ["256 block(s) of", "warps of 32 threads"], "number of blocks first"),
    (time_in_float64, ["arrays of float64", "x and y hold float32"], "no `astype`"),
    (time_pair_swapped, ["returned the time first and the array second"], "out first"),
    (time_copy_back_in_the_return, ["1 copy back as well as the 4 launches"],
     "copy back after the second"),
    (time_x_and_y_swapped, ["out is a * y + x"], "a, x, y, out"),
])
def test_timing_mistakes_as_learners_write_them(function, words, hint):
    result = check_time_saxpy(function, seed=4, show=False)
    assert result.status == "failed", str(result)
    for word in words:
        assert word in result.message, f"{word!r} missing from {result.message}"
    assert hint in result.hint, result.hint


@pytest.mark.parametrize("function", [time_each_launch_averaged, time_synchronize_every_launch])
def test_timing_right_answers_as_learners_write_them_pass(function):
    result = check_time_saxpy(function, seed=4, show=False)
    assert result.passed, str(result)
    assert "5 launches (1 to warm up)" in result.message, result.message  # repeats = 4


@cuda.jit
def copy_twice_the_block(x, out):  # the step typed as two blocks: right for a grid of 2 only
    for i in range(cuda.grid(1), x.shape[0], 2 * cuda.blockDim.x):
        out[i] = x[i]


@cuda.jit
def copy_four_passes(x, out):  # a fixed number of passes, not until the end of x
    for k in range(4):
        i = cuda.grid(1) + k * cuda.gridsize(1)
        if i < x.shape[0]:
            out[i] = x[i]


@cuda.jit
def copy_then_clears_x(x, out):
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        out[i] = x[i]
        x[i] = 0


@cuda.jit
def copy_from_the_end(x, out):  # right: backwards from the end, by the grid
    i = x.shape[0] - 1 - cuda.grid(1)
    while i >= 0:
        out[i] = x[i]
        i -= cuda.gridsize(1)


@cuda.jit
def copy_a_chunk_per_block(x, out):  # right: a block's threads step by the block in its chunk
    chunk = (x.shape[0] + cuda.gridDim.x - 1) // cuda.gridDim.x
    start = cuda.blockIdx.x * chunk
    for i in range(start + cuda.threadIdx.x, min(start + chunk, x.shape[0]), cuda.blockDim.x):
        out[i] = x[i]


@pytest.mark.parametrize("kernel, status, words", [
    (copy_twice_the_block, "failed", ["each thread steps by 80, but the grid has 120 threads"]),
    (copy_four_passes, "failed", ["4 passes of the", "-thread grid", "before the end of x"]),
    (copy_then_clears_x, "failed", ["wrote into its input x"]),
    (copy_from_the_end, "passed", ["elements copied"]),
    (copy_a_chunk_per_block, "passed", ["elements copied"]),
])
def test_copy_answers_as_learners_write_them(kernel, status, words):
    result = check_copy_grid_stride(kernel, seed=3, show=False)
    assert result.status == status, str(result)
    for word in words:
        assert word in result.message, f"{word!r} missing from {result.message}"


# --- saxpy: the work shared out, the sign of a, a step typed in --------------------------------


@cuda.jit
def saxpy_by_thread_0_of_each_block(a, x, y, out):
    """Wrong: thread 0 of each block loops over its block's elements."""
    if cuda.threadIdx.x == 0:
        start = cuda.blockIdx.x * cuda.blockDim.x
        for i in range(start, min(start + cuda.blockDim.x, x.shape[0])):
            out[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_with_abs_a(a, x, y, out):
    """Wrong: |a| (a scale taken as a size)."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = abs(a) * x[i] + y[i]


@cuda.jit
def saxpy_with_int_a(a, x, y, out):
    """Wrong: a truncated to a whole number."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = int(a) * x[i] + y[i]


@cuda.jit
def saxpy_with_float16_a(a, x, y, out):
    """Wrong: a rounded to float16 before the multiply."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = np.float32(np.float16(a)) * x[i] + y[i]


@cuda.jit
def saxpy_with_y0(a, x, y, out):
    """Wrong: the first y for every element."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = a * x[i] + y[0]


@cuda.jit
def saxpy_stepping_by_4096(a, x, y, out):
    """Wrong: a loop stepping by a grid size typed in."""
    for i in range(cuda.grid(1), x.shape[0], 4096):
        out[i] = a * x[i] + y[i]


@cuda.jit
def copy_stepping_by_blocks_times_32(x, out):
    """Wrong: the grid's size as `gridDim.x * 32`, right only for blocks of 32 threads."""
    for i in range(cuda.grid(1), x.shape[0], cuda.gridDim.x * 32):
        out[i] = x[i]


@pytest.mark.parametrize("check, kernel, words", [
    (check_saxpy, saxpy_by_thread_0_of_each_block, "written by one thread"),
    (check_saxpy, saxpy_with_abs_a, "the sign of a lost"),
    (check_saxpy, saxpy_with_int_a, "int(a) * x[i] + y[i]"),
    (check_saxpy, saxpy_with_float16_a, "float16(a) * x[i] + y[i]"),
    (check_saxpy, saxpy_with_y0, "a * x[i] + y[0]"),
    (check_saxpy, saxpy_stepping_by_4096, "steps by a fixed number"),
    (check_copy_grid_stride, copy_stepping_by_blocks_times_32, "redo each other's elements"),
])
@pytest.mark.parametrize("seed", [1, 7, 12345])
def test_saxpy_and_copy_methods_fail_with_their_mistake(check, kernel, words, seed):
    result = check(kernel, seed=seed, show=False)
    assert result.status == "failed", result
    assert words in result.message + result.hint, result


def time_waiting_on_an_empty_stream(kernel, a, x, y, repeats=5):
    """Wrong: the launches run on the default stream; the wait is on a stream with no work."""
    d_x, d_y, d_out, blocks = _prepared(kernel, x, y)
    stream = cuda.stream()
    start = time.perf_counter()
    for _ in range(repeats):
        kernel[blocks, 256](a, d_x, d_y, d_out)
    stream.synchronize()
    seconds = (time.perf_counter() - start) / repeats
    return d_out.copy_to_host(), seconds


def time_on_its_own_stream(kernel, a, x, y, repeats=5):  # right: launched on a stream, waited
    d_x, d_y, d_out, blocks = _prepared(kernel, x, y)
    stream = cuda.stream()
    start = time.perf_counter()
    for _ in range(repeats):
        kernel[blocks, 256, stream](a, d_x, d_y, d_out)
    stream.synchronize()
    seconds = (time.perf_counter() - start) / repeats
    return d_out.copy_to_host(), seconds


def time_waiting_on_the_copies_stream(kernel, a, x, y, repeats=5):
    """Wrong: the copies in go to one stream, the launches to another; the clock waits for the
    copies' stream only."""
    copies, launches = cuda.stream(), cuda.stream()
    d_x, d_y = cuda.to_device(x, stream=copies), cuda.to_device(y, stream=copies)
    d_out = cuda.device_array_like(d_x)
    blocks = (x.shape[0] + 255) // 256
    kernel[blocks, 256, launches](a, d_x, d_y, d_out)
    cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        kernel[blocks, 256, launches](a, d_x, d_y, d_out)
    copies.synchronize()
    seconds = (time.perf_counter() - start) / repeats
    return d_out.copy_to_host(), seconds


@pytest.mark.parametrize("function", [time_waiting_on_an_empty_stream,
                                      time_waiting_on_the_copies_stream])
def test_a_wait_on_a_stream_without_the_launches_fails_and_one_with_them_passes(function):
    result = check_time_saxpy(function, seed=2, show=False)
    assert result.status == "failed" and "that the last launch did not use" in (
        result.message), str(result)
    assert check_time_saxpy(time_on_its_own_stream, seed=2, show=False).passed


def time_warm_up_with_a_python_float(kernel, a, x, y, repeats=5):
    """Wrong: the warm-up passes 2.0 (float64) and the timed launches a float32 a: another
    specialisation, compiled inside the timed window."""
    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    d_out = cuda.device_array_like(d_x)
    blocks = (x.shape[0] + 255) // 256
    kernel[blocks, 256](2.0, d_x, d_y, d_out)
    cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        kernel[blocks, 256](a, d_x, d_y, d_out)
    cuda.synchronize()
    seconds = (time.perf_counter() - start) / repeats
    return d_out.copy_to_host(), seconds


def test_a_warm_up_with_other_argument_types_fails():
    result = check_time_saxpy(time_warm_up_with_a_python_float, seed=2, show=False)
    assert result.status == "failed" and "compiled it again" in result.message, str(result)
    assert "float, float32 array" in result.message, str(result)


def time_three_launches_typed_in(kernel, a, x, y, repeats=5):
    """Wrong: three timed launches whatever repeats says, divided by three."""
    return _timed(kernel, a, x, y, 3)


@pytest.mark.parametrize("seed", [2, 4, 10])  # repeats 4, 4 and 5
def test_a_repeat_count_typed_in_fails(seed):
    result = check_time_saxpy(time_three_launches_typed_in, seed=seed, show=False)
    assert result.status == "failed", str(result)
    assert ("there are 3 launches, but repeats = " in result.message
            and "the count the caller gives was not used" in result.message) or (
        "launched the kernel 4 time(s); with repeats = 5" in result.message) or (
        "never reads its argument `repeats`" in result.message), result.message


def time_five_launches_typed_in(kernel, a, x, y, repeats=5):
    """Wrong: the default count typed in, right only when the caller asks for 5."""
    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    d_out = cuda.device_array_like(d_x)
    blocks = (x.shape[0] + 255) // 256
    kernel[blocks, 256](a, d_x, d_y, d_out)
    cuda.synchronize()
    start = clock()
    for _ in range(5):
        kernel[blocks, 256](a, d_x, d_y, d_out)
    cuda.synchronize()
    seconds = (clock() - start) / 5
    return d_out.copy_to_host(), seconds


@pytest.mark.parametrize("seed", [10, 13])  # repeats = 5: the count typed in is the one asked
def test_a_repeat_count_typed_in_fails_even_when_it_is_the_one_asked_for(seed):
    result = check_time_saxpy(time_five_launches_typed_in, seed=seed, show=False)
    assert result.status == "failed", str(result)
    assert "repeats=5" in result.message, result.message
    assert "never reads its argument `repeats`" in result.message, result.message


def time_through_a_helper_and_a_closure(kernel, a, x, y, n_launches):
    """Right, written differently: repeats named otherwise, read only inside a closure."""
    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    d_out = cuda.device_array_like(d_x)
    blocks = (x.shape[0] + 255) // 256

    def launch_all():
        for _ in range(n_launches):
            kernel[blocks, 256](a, d_x, d_y, d_out)

    kernel[blocks, 256](a, d_x, d_y, d_out)
    cuda.synchronize()
    start = clock()
    launch_all()
    cuda.synchronize()
    seconds = (clock() - start) / n_launches
    return d_out.copy_to_host(), seconds


def test_repeats_read_under_another_name_inside_a_closure_passes():
    result = check_time_saxpy(time_through_a_helper_and_a_closure, seed=10, show=False)
    assert result.status == "passed", str(result)


def time_warmed_up_on_one_block(kernel, a, x, y, repeats=5):
    """Right, written differently: the warm-up launch runs on a one-block slice of the arrays
    (the same types, so it compiles what the timed launches use)."""
    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    d_out = cuda.device_array_like(d_x)
    kernel[1, 256](a, d_x[:256], d_y[:256], d_out[:256])
    cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        kernel[blocks_for(x.shape[0], 256), 256](a, d_x, d_y, d_out)
    cuda.synchronize()
    seconds = (time.perf_counter() - start) / repeats
    return d_out.copy_to_host(), seconds


def test_a_warm_up_on_a_slice_passes():
    assert check_time_saxpy(time_warmed_up_on_one_block, seed=1, show=False).passed


def time_waiting_on_the_warm_up_stream(kernel, a, x, y, repeats=5):
    """Wrong: the warm-up on one stream, the timed launches on another; the clock waits for
    the warm-up's stream only."""
    warm, timed = cuda.stream(), cuda.stream()
    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    d_out = cuda.device_array_like(d_x)
    blocks = (x.shape[0] + 255) // 256
    kernel[blocks, 256, warm](a, d_x, d_y, d_out)
    warm.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        kernel[blocks, 256, timed](a, d_x, d_y, d_out)
    warm.synchronize()
    seconds = (time.perf_counter() - start) / repeats
    cuda.synchronize()
    return d_out.copy_to_host(), seconds


def time_recording_an_event_never_waited_for(kernel, a, x, y, repeats=5):
    """Wrong: an event recorded after the launches, but the wall clock read without waiting
    for it (or anything)."""
    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    d_out = cuda.device_array_like(d_x)
    blocks = (x.shape[0] + 255) // 256
    kernel[blocks, 256](a, d_x, d_y, d_out)
    cuda.synchronize()
    done = cuda.event()
    start = time.perf_counter()
    for _ in range(repeats):
        kernel[blocks, 256](a, d_x, d_y, d_out)
    done.record()
    seconds = (time.perf_counter() - start) / repeats
    cuda.synchronize()
    return d_out.copy_to_host(), seconds


@pytest.mark.parametrize("function, words", [
    (time_waiting_on_the_warm_up_stream, "that the last launch did not use"),
    (time_recording_an_event_never_waited_for, "without waiting for the GPU"),
])
def test_waits_that_do_not_wait_for_the_timed_launches_fail(function, words):
    result = check_time_saxpy(function, seed=1, show=False)
    assert result.status == "failed", str(result)
    assert words in result.message, result.message


def time_by_forall(kernel, a, x, y, repeats=5):
    """Not this exercise: Numba's forall picks the grid itself."""
    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    d_out = cuda.device_array_like(d_x)
    launch = kernel.forall(x.shape[0])
    launch(a, d_x, d_y, d_out)
    cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        launch(a, d_x, d_y, d_out)
    cuda.synchronize()
    seconds = (time.perf_counter() - start) / repeats
    return d_out.copy_to_host(), seconds


def test_a_launch_by_forall_is_named_not_told_as_no_launch():
    result = check_time_saxpy(time_by_forall, seed=1, show=False)
    assert result.status == "failed", str(result)
    assert "launched the kernel with `forall(" in result.message, result.message


def time_repeats_overwritten(kernel, a, x, y, repeats=5):
    """Wrong: repeats read, but only after a count typed in replaced it."""
    repeats = 4  # "4 is enough for a stable number"
    return _timed(kernel, a, x, y, repeats)


def time_repeats_checked_then_typed_in(kernel, a, x, y, repeats=5):
    """Wrong: repeats read (checked), the loop's count typed in."""
    assert repeats > 0
    return _timed(kernel, a, x, y, 4)


@pytest.mark.parametrize("function", [time_repeats_overwritten,
                                      time_repeats_checked_then_typed_in])
def test_a_count_typed_in_behind_a_read_of_repeats_fails_on_the_second_call(function):
    # seed 1 asks for 4 launches first (the count typed in), then for 3
    result = check_time_saxpy(function, seed=1, show=False)
    assert result.status == "failed", str(result)
    assert "there are 4 launches, but repeats = 3" in result.message, result.message


def time_with_a_grid_typed_in(kernel, a, x, y, repeats=5):
    """Wrong: 4 blocks of 256 threads typed in, enough for the first n the check draws in the
    simulator, far from enough for the notebook's N."""
    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    d_out = cuda.device_array_like(d_x)
    kernel[4, 256](a, d_x, d_y, d_out)
    cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        kernel[4, 256](a, d_x, d_y, d_out)
    cuda.synchronize()
    seconds = (time.perf_counter() - start) / repeats
    return d_out.copy_to_host(), seconds


def time_with_one_block_of_n_threads(kernel, a, x, y, repeats=5):
    """Wrong: one block as big as x (a GPU refuses more than 1024 threads in a block)."""
    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    d_out = cuda.device_array_like(d_x)
    kernel[1, x.shape[0]](a, d_x, d_y, d_out)
    cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        kernel[1, x.shape[0]](a, d_x, d_y, d_out)
    cuda.synchronize()
    seconds = (time.perf_counter() - start) / repeats
    return d_out.copy_to_host(), seconds


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_grid_typed_in_or_one_block_of_n_threads_fails(seed):
    result = check_time_saxpy(time_with_a_grid_typed_in, seed=seed, show=False)
    assert result.status == "failed", str(result)
    assert "the very grid it launched for" in result.message, result.message
    assert "blocks_for" in result.hint, result.hint
    result = check_time_saxpy(time_with_one_block_of_n_threads, seed=seed, show=False)
    assert result.status == "failed", str(result)
    assert "had one block of" in result.message and "at most 1024" in result.message, (
        result.message)
