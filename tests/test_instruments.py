"""The simulator instruments: which simulated thread is running (1-D, 2-D and 3-D grids), and
the arrays that record reads (RecordingArray) and writes (WatchedArray)."""

import ast
from pathlib import Path

import numpy as np
import pytest
from numba import cuda

from gpulab import device, instruments
from gpulab.instruments import (
    RecordingArray,
    WatchedArray,
    element_index,
    launchable,
    python_function,
    simulated_thread,
)

SIM_ONLY = pytest.mark.skipif(device.tier() != "sim",
                              reason="instruments stand in for device arrays only in the simulator")


@cuda.jit
def read_own_slot(ids, x):
    """Each thread reads x at its linear id, computed with CUDA's own formula."""
    block = cuda.blockIdx.x + cuda.gridDim.x * (cuda.blockIdx.y + cuda.gridDim.y * cuda.blockIdx.z)
    thread = cuda.threadIdx.x + cuda.blockDim.x * (
        cuda.threadIdx.y + cuda.blockDim.y * cuda.threadIdx.z)
    per_block = cuda.blockDim.x * cuda.blockDim.y * cuda.blockDim.z
    ids[0] = x[block * per_block + thread]


@SIM_ONLY
@pytest.mark.parametrize(("blocks", "threads"), [
    (3, 40),                    # 1-D
    ((2, 3), (8, 4)),           # 2-D: the old exercise helper said (block.x, thread.x) here
    ((2, 2, 2), (4, 2, 3)),     # 3-D
])
def test_each_simulated_thread_is_named_by_cudas_linear_indices(blocks, threads):
    per_block = int(np.prod(threads))
    total = int(np.prod(blocks)) * per_block
    x = RecordingArray(np.zeros(total, np.float32))
    read_own_slot[blocks, threads](np.zeros(1, np.float32), x)
    assert len(x.reads) == total  # every thread has a name of its own
    for (block, thread), reads in x.reads.items():
        assert reads == [block * per_block + thread]


def test_outside_a_kernel_no_thread_is_running():
    assert simulated_thread() is None
    recorder = RecordingArray(np.arange(4))
    assert recorder[2] == 2 and recorder.reads == {}


def test_element_index_is_the_flat_row_major_position():
    assert element_index(5, (10,)) == 5
    assert element_index(-1, (10,)) == 9
    assert element_index((2, 3), (4, 5)) == 13
    assert element_index(np.int64(1), (3,)) == 1
    assert element_index(slice(0, 2), (3,)) is None
    assert element_index((1,), (3, 3)) is None  # a whole row, not an element


@cuda.jit
def dot_atomic(x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        cuda.atomic.add(out, 0, x[i] * y[i])


@cuda.jit
def dot_racy(x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[0] += x[i] * y[i]


@SIM_ONLY
def test_watched_array_tells_atomic_from_plain_writes():
    x = np.ones(100, dtype=np.float32)
    atomic_out = WatchedArray(np.zeros(1, np.float32))
    dot_atomic[4, 32](x, x, atomic_out)
    assert atomic_out.race() is None and atomic_out.copy_to_host()[0] == 100
    assert len(atomic_out.atomic_writers[0]) == 100
    plain_out = WatchedArray(np.zeros(1, np.float32))
    dot_racy[4, 32](x, x, plain_out)
    element, writers, count = plain_out.race()
    assert element == 0 and count == 100 and len(writers) == 2


@cuda.jit
def transpose_into(x, out):
    c, r = cuda.grid(2)
    if r < x.shape[0] and c < x.shape[1]:
        out[c, r] = x[r, c]


@SIM_ONLY
def test_watched_array_records_2d_writers_by_element():
    x = np.arange(6 * 5, dtype=np.float32).reshape(6, 5)
    out = WatchedArray(np.zeros((5, 6), np.float32))
    transpose_into[(2, 2), (4, 4)](x, out)
    np.testing.assert_array_equal(out.copy_to_host(), x.T)
    assert sorted(out.plain_writers) == list(range(30)) and out.race() is None
    # out[1, 4] (element 10) is x[4, 1]: column 1, row 4, so block (0, 1), thread (1, 0) of it
    assert out.plain_writers[10] == {(0 + 2 * 1, 1 + 4 * 0)}


def test_a_kernel_object_gives_its_function_and_its_launchable_self():
    assert python_function(dot_atomic).__name__ == "dot_atomic"
    assert python_function(dot_atomic[4, 32]).__name__ == "dot_atomic"
    assert launchable(dot_atomic[4, 32]) is launchable(dot_atomic)
    assert python_function(lambda x: x) is None and python_function(42) is None
    assert not instruments.is_device_function(dot_atomic)
    assert instruments.is_device_function(cuda.jit(device=True)(lambda a: a))


def test_instruments_stay_on_the_ground_floor():
    tree = ast.parse(Path(instruments.__file__).read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module}
    from_gpulab = {name for name in imported if name.startswith("gpulab")}
    assert from_gpulab <= {"gpulab", "gpulab.device"}, from_gpulab


@cuda.jit
def peek_at_shared(out):
    first = cuda.shared.array(4, np.float32)
    second = cuda.shared.array(4, np.int32)
    t = cuda.threadIdx.x
    if t == 0:
        out[0] = first[3]  # nobody wrote either array yet
        out[1] = second[3]
        first[3] = 1.0
        second[3] = 2
    cuda.syncthreads()
    if t == 1:
        out[2] = first[3]  # written by thread 0, behind a barrier: not poison
        out[3] = second[3]


@SIM_ONLY
def test_poisoned_shared_memory_starts_every_shared_array_with_poison():
    from numba.cuda.simulator.kernelapi import FakeCUDAShared

    original = FakeCUDAShared.__init__
    out = np.zeros(4, np.float64)
    with instruments.poisoned_shared_memory():
        peek_at_shared[1, 2](out)
    assert out[0] == instruments.poison_value(np.float32)
    assert out[1] == instruments.poison_value(np.int32)
    assert list(out[2:]) == [1.0, 2.0]  # two arrays, not one aliased
    assert FakeCUDAShared.__init__ is original  # the simulator is left as it was
    poison = instruments.poison_value(np.float32)
    assert np.isfinite(np.float32(64) * poison * poison)  # products and sums stay finite


# --- the time limit ---------------------------------------------------------------------------


@cuda.jit
def copy_step_zero(x, out):
    i = cuda.grid(1)
    while i < x.shape[0]:
        out[i] = x[i]
        i += 0  # never moves: loops forever


@cuda.jit
def copy_step_by_thread(x, out):
    i = cuda.grid(1)
    while i < x.shape[0]:
        out[i] = x[i]
        i += cuda.threadIdx.x  # thread 0 of each block never moves


@cuda.jit
def copy_no_guard(x, out):
    i = cuda.grid(1)
    out[i] = x[i]


@cuda.jit
def spin_without_arrays(out):
    k = 1
    while k > 0:
        k = k * 1


@SIM_ONLY
@pytest.mark.parametrize("kernel", [copy_step_zero, copy_step_by_thread])
def test_a_loop_that_never_ends_stops_at_its_access_budget(kernel):
    import time

    x = np.arange(100, dtype=np.float32)
    started = time.perf_counter()
    with pytest.raises(instruments.KernelDidNotFinishError, match="array accesses"):
        with instruments.limited(accesses_per_thread=instruments.access_budget(x, x)):
            kernel[2, 32](x, np.zeros(100, np.float32))
    assert time.perf_counter() - started < 30


@cuda.jit
def sync_forever(out):
    while out[0] >= 0.0:
        cuda.syncthreads()


@SIM_ONLY
def test_a_loop_of_barriers_stops_at_its_barrier_budget():
    with pytest.raises(instruments.KernelDidNotFinishError, match="more than 50 barriers"):
        with instruments.limited(barriers_per_thread=50) as limits:
            sync_forever[1, 4](np.zeros(1, np.float32))
    assert limits.tripped and "a thread passed more than 50 barriers" in limits.reason


@SIM_ONLY
def test_a_loop_without_array_accesses_stops_at_the_wall_clock_limit():
    from numba.cuda.simulator.cudadrv.devicearray import FakeWithinKernelCUDAArray

    original = FakeWithinKernelCUDAArray.__getitem__
    with pytest.raises(instruments.KernelDidNotFinishError):
        with instruments.limited(seconds=1.0) as limits:
            spin_without_arrays[1, 4](np.zeros(1, np.float32))
    assert limits.timed_out
    assert FakeWithinKernelCUDAArray.__getitem__ is original  # the simulator is left as it was
    import threading
    import time

    time.sleep(0.2)  # no simulated thread keeps spinning in the background
    assert not [t for t in threading.enumerate()
                if hasattr(t, "syncthreads_event") and t.is_alive()]


@SIM_ONLY
def test_a_kernel_that_finishes_is_not_disturbed_by_the_limit():
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(64, np.float32)
    with instruments.limited(instruments.access_budget(x, out), 100, 30.0) as limits:
        copy_no_guard[2, 32](x, out)
    assert not limits.tripped and not limits.timed_out
    np.testing.assert_array_equal(out, x)


# --- see your own kernel ------------------------------------------------------------------------


def _kernels():
    from gpulab.kernels import dot, matmul, memory

    return dot, matmul, memory


@SIM_ONLY
def test_trace_of_the_shared_tree_dot_product():
    dot, _, _ = _kernels()
    x = np.arange(13, dtype=np.float32)
    y = np.ones(13, np.float32)
    out = np.zeros(1, np.float32)
    trace = instruments.trace_kernel(dot.dot_shared_tree, 2, 8, x, y, out)
    assert trace.error is None and trace.arrays["out"][0] == x.sum()
    assert out[0] == 0  # the caller's arrays are copies
    assert trace.threads == [(b, t) for b in range(2) for t in range(8)]
    assert trace.shared_arrays == ["shared:partial"]
    assert trace.per_block("atomics") == {0: 1, 1: 1}  # one atomic per block, thread 0's
    assert trace.counts((0, 0))["atomics"] == 1 and trace.counts((0, 1))["atomics"] == 0
    assert trace.max_per_thread("global_writes") == 0  # out is only updated atomically
    assert set(trace.barrier_counts.values()) == {4}  # 1 + log2(8), in every thread
    assert trace.counts((1, 5))["global_reads"] == 0  # past the end: x[13], x[14] don't exist
    assert trace.counts((0, 3))["global_reads"] == 2
    assert trace.counts((0, 0))["shared_reads"] == 7  # partial[0] + 3 steps x 2
    assert trace.touched("x", "read")[(12,)] == [(1, 4)]
    summary = trace.summary()
    assert "barriers" in summary and "block 0 made 1" in summary


@SIM_ONLY
def test_trace_counts_one_atomic_per_element_for_the_atomic_dot_product():
    dot, _, _ = _kernels()
    x = np.ones(13, np.float32)
    trace = instruments.trace_kernel(dot.dot_atomic, 2, 8, x, x, np.zeros(1, np.float32))
    assert trace.per_block("atomics") == {0: 8, 1: 5}
    assert trace.arrays["out"][0] == 13
    assert [a.kind for a in trace.accesses if a.array == "out"] == ["atomic"] * 13
    assert trace.mean_per_thread("atomics") == pytest.approx(13 / 16)


@SIM_ONLY
@pytest.mark.parametrize(("K", "tile"), [(10, 4), (8, 4), (5, 2)])
def test_tiled_matmul_loads_2_ceil_k_over_t_per_thread_and_naive_2k(K, tile):
    _, matmul, _ = _kernels()
    rng = np.random.default_rng(K)
    A = rng.random((6, K), dtype=np.float32)
    B = rng.random((K, 7), dtype=np.float32)
    C = np.zeros((6, 7), np.float32)
    blocks = (-(-7 // tile), -(-6 // tile))
    tiled = instruments.trace_kernel(matmul.matmul_tiled, blocks, (tile, tile), A, B, C)
    naive = instruments.trace_kernel(matmul.matmul_naive, blocks, (tile, tile), A, B, C)
    for trace in (tiled, naive):
        np.testing.assert_allclose(trace.arrays["C"], A @ B, rtol=1e-5)
    assert tiled.max_per_thread("global_reads") == 2 * -(-K // tile)
    assert naive.max_per_thread("global_reads") == 2 * K
    assert tiled.max_per_thread("barriers") == 2 * -(-K // tile)
    assert tiled.max_per_thread("shared_reads") == 2 * tile * -(-K // tile)
    assert naive.max_per_thread("shared_reads") == 0
    assert set(tiled.shared_arrays) == {"shared:a_tile", "shared:b_tile"}


@SIM_ONLY
def test_a_2d_trace_names_threads_as_cuda_does():
    x = np.arange(6 * 5, dtype=np.float32).reshape(6, 5)
    trace = instruments.trace_kernel(transpose_into, (2, 2), (4, 4), x, np.zeros((5, 6),
                                                                             np.float32))
    assert len(trace.threads) == 64 and trace.threads[1] == ((0, 0), (1, 0))  # x fastest
    # out[1, 4] = x[4, 1]: column 1, row 4: block (0, 1), thread (1, 0)
    assert trace.touched("out", "write")[(1, 4)] == [((0, 1), (1, 0))]
    assert trace.touched("x", "read")[(4, 1)] == [((0, 1), (1, 0))]
    assert trace.per_block("global_writes") == {(0, 0): 16, (1, 0): 4, (0, 1): 8, (1, 1): 2}
    assert instruments.thread_label(((0, 1), (1, 0))) == "block (0, 1), thread (1, 0)"


@SIM_ONLY
def test_trace_of_a_strided_copy_shows_the_stride():
    _, _, memory = _kernels()
    x = np.arange(40, dtype=np.float32)
    trace = instruments.trace_kernel(memory.copy_strided, 2, 8, x, np.zeros(10, np.float32), 4)
    reads = trace.touched("x", "read")
    assert sorted(reads) == [(4 * i,) for i in range(10)]
    assert reads[(36,)] == [(1, 1)]
    assert trace.max_per_thread("global_reads") == 1



@SIM_ONLY
def test_a_kernel_that_fails_still_gives_its_trace_and_the_reason():
    trace = instruments.trace_kernel(copy_no_guard, 2, 8, np.ones(13, np.float32),
                                     np.zeros(13, np.float32))
    assert "IndexError" in trace.error
    assert "stopped early" in trace.summary()
    assert len(trace.touched("out", "write")) >= 8
    hung = instruments.trace_kernel(copy_step_zero, 1, 4, np.ones(5, np.float32),
                                    np.zeros(5, np.float32))
    assert "did not finish" in hung.error


@SIM_ONLY
def test_tracing_leaves_the_simulator_as_it_was():
    from numba.cuda.simulator.kernelapi import FakeCUDAAtomic, FakeCUDAModule, FakeCUDAShared

    before = (FakeCUDAShared.array, FakeCUDAAtomic.add, FakeCUDAModule.syncthreads)
    dot, _, _ = _kernels()
    instruments.trace_kernel(dot.dot_shared_tree, 1, 4, np.ones(4, np.float32),
                             np.ones(4, np.float32), np.zeros(1, np.float32))
    assert (FakeCUDAShared.array, FakeCUDAAtomic.add, FakeCUDAModule.syncthreads) == before


THREADS = 4
SCALE = np.float32(2.0)


@cuda.jit(device=True)
def doubled(value):
    return value * SCALE


@cuda.jit
def scale_through_shared(x, out):
    buffer = cuda.shared.array(THREADS, np.float32)
    t = cuda.threadIdx.x
    buffer[t] = x[t]
    cuda.syncthreads()
    out[t] = doubled(buffer[THREADS - 1 - t])


def test_a_kernel_recipe_carries_its_globals_and_device_functions():
    recipe = instruments.kernel_recipe(scale_through_shared)
    described = recipe["globals"]
    assert described["THREADS"] == {"kind": "value", "type": "int", "value": "4"}
    assert described["np"] == {"kind": "module", "name": "numpy"}
    assert described["doubled"]["kind"] == "cuda" and described["doubled"]["device"]
    assert described["doubled"]["recipe"]["globals"]["SCALE"]["kind"] == "npscalar"
    assert "x" not in described  # attribute names (threadIdx.x) are not globals
    assert instruments.unknown_globals(recipe) == []
    function = instruments.rebuild_function(recipe)
    assert function.__name__ == "scale_through_shared"


@SIM_ONLY
def test_a_trace_runs_in_a_simulator_child_as_it_does_on_a_gpu():
    """What trace_kernel does in the gpu tier (numba's simulator cannot run in that process):
    the kernel's recipe goes to a child process that traces it in the simulator."""
    x = np.arange(4, dtype=np.float32)
    trace = instruments._trace_in_child(scale_through_shared, 1, 4, (x, np.zeros(4, np.float32)))
    np.testing.assert_array_equal(trace.arrays["out"], 2 * x[::-1])
    assert trace.shared_arrays == ["shared:buffer"]
    assert trace.counts((0, 0)) == {"global_reads": 1, "global_writes": 1, "shared_reads": 1,
                                    "shared_writes": 1, "atomics": 0, "barriers": 1}


def test_gpulab_trace_is_there_without_importing_numba():
    import subprocess
    import sys

    code = ("import sys, gpulab; assert callable(gpulab.trace); "
            "assert 'numba' not in sys.modules, 'import gpulab imported numba'")
    subprocess.run([sys.executable, "-c", code], check=True)
