"""See your own kernel: the trace of a launch, its counts, its threads named as CUDA does, a
kernel that fails or hangs, and the simulator left as it was."""

import numpy as np
import pytest
from numba import cuda

from gpulab import device, instruments

SIM_ONLY = pytest.mark.skipif(device.tier() != "sim",
                              reason="instruments stand in for device arrays only in the simulator")


@cuda.jit
def transpose_into(x, out):
    c, r = cuda.grid(2)
    if r < x.shape[0] and c < x.shape[1]:
        out[c, r] = x[r, c]


@cuda.jit
def copy_no_guard(x, out):
    i = cuda.grid(1)
    out[i] = x[i]


@cuda.jit
def copy_step_zero(x, out):
    i = cuda.grid(1)
    while i < x.shape[0]:
        out[i] = x[i]
        i += 0  # never moves: loops forever


@cuda.jit
def two_tiles_on_one_line(x, out):
    a = cuda.shared.array(8, np.float32); b = cuda.shared.array(8, np.float32)  # noqa: E702
    t = cuda.threadIdx.x
    a[t] = x[t]
    b[t] = 2 * x[t]
    cuda.syncthreads()
    out[t] = a[7 - t] + b[t]


def _kernels():
    from gpulab.kernels import dot, matmul, memory

    return dot, matmul, memory


@SIM_ONLY
def test_two_shared_arrays_made_on_one_line_are_traced_under_their_own_names():
    x = np.arange(8, dtype=np.float32)
    trace = instruments.trace_kernel(two_tiles_on_one_line, 1, 8, x, np.zeros(8, np.float32))
    assert trace.error is None and trace.shared_arrays == ["shared:a", "shared:b"]
    np.testing.assert_array_equal(trace.arrays["out"], x[::-1] + 2 * x)


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
    assert trace.uneven_barriers() is None  # each block's threads passed as many
    assert trace.counts((1, 5))["global_reads"] == 0  # past the end: x[13], x[14] don't exist
    assert trace.counts((0, 3))["global_reads"] == 2
    assert trace.counts((0, 0))["shared_reads"] == 7  # partial[0] + 3 steps x 2
    assert trace.touched("x", "read")[(12,)] == [(1, 4)]
    assert trace.elements_by_thread("x", "read")[(1, 4)] == [12]
    tree = trace.elements_by_thread("shared:partial", "read")[(0, 0)]
    assert tree == [0, 4, 0, 2, 0, 1, 0]  # its own slot, then the slot it adds, each round
    writes = trace.elements_by_thread("shared:partial", "write")[(0, 0)]
    assert writes == [0, 0, 0, 0]  # its own slot, stored then added into in 3 rounds
    assert trace.elements_by_thread("shared:partial", "write", repeats=False)[(0, 0)] == [0]
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


def test_gpulab_trace_is_there_without_importing_numba():
    import subprocess
    import sys

    code = ("import sys, gpulab; assert callable(gpulab.trace); "
            "assert 'numba' not in sys.modules, 'import gpulab imported numba'")
    subprocess.run([sys.executable, "-c", code], check=True)


@cuda.jit
def neighbour_read_without_a_barrier(x, out):
    slots = cuda.shared.array(8, np.float32)
    t = cuda.threadIdx.x
    slots[t] = x[t]
    out[t] = slots[(t + 1) % 8]  # written by the next thread, no barrier between


@cuda.jit
def neighbour_read_after_a_barrier(x, out):
    slots = cuda.shared.array(8, np.float32)
    t = cuda.threadIdx.x
    slots[t] = x[t]
    cuda.syncthreads()
    out[t] = slots[(t + 1) % 8]


@SIM_ONLY
def test_shared_races_are_found_between_the_same_two_barriers_whatever_the_order():
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float32)
    racy = instruments.trace_kernel(neighbour_read_without_a_barrier, 1, 8, x, out)
    races = racy.shared_races()
    assert len(races) == 8  # each slot: read by the thread before it, written by its own
    assert {(w.kind, o.kind) for w, o in races} == {("write", "read")}
    assert all(w.epoch == o.epoch == 0 for w, o in races)
    safe = instruments.trace_kernel(neighbour_read_after_a_barrier, 1, 8, x, out)
    assert safe.shared_races() == []
    assert {a.epoch for a in safe.accesses if a.space == "shared" and a.kind == "read"} == {1}


@cuda.jit
def scratch_slot_of_the_block(x, out):  # each thread's own value through one shared slot
    scratch = cuda.shared.array(1, np.float32)
    t = cuda.threadIdx.x
    scratch[0] = x[t] * 2
    out[t] = scratch[0]


@cuda.jit
def same_value_from_every_thread(x, out):  # every thread writes x[0] to one slot: no race
    first = cuda.shared.array(1, np.float32)
    t = cuda.threadIdx.x
    first[0] = x[0]
    out[t] = first[0] + x[t]


@SIM_ONLY
def test_a_race_is_a_slot_given_other_values_not_the_same_value_written_twice():
    x = np.arange(1, 9, dtype=np.float32)
    out = np.zeros(8, np.float32)
    racy = instruments.trace_kernel(scratch_slot_of_the_block, 1, 8, x, out)
    races = racy.shared_races()
    assert races and races[0][0].kind == "write" and races[0][0].value != races[0][1].value
    assert np.array_equal(out, np.zeros(8))  # trace_kernel copies: the simulator's right
    same = instruments.trace_kernel(same_value_from_every_thread, 1, 8, x, out)
    assert same.shared_races() == []
    assert {a.value for a in same.accesses if a.space == "shared"} == {1.0}


@cuda.jit
def _barrier_for_half_the_block(out):
    if cuda.threadIdx.x < cuda.blockDim.x // 2:
        cuda.syncthreads()
    out[cuda.grid(1)] = 1


@cuda.jit
def _second_block_leaves_early(out):
    if cuda.blockIdx.x == 1:
        return
    cuda.syncthreads()
    out[cuda.grid(1)] = 1


@SIM_ONLY
def test_uneven_barriers_name_a_block_whose_threads_passed_different_numbers():
    out = np.zeros(16, np.float32)
    trace = instruments.trace_kernel(_barrier_for_half_the_block, 2, 8, out)
    assert trace.uneven_barriers() == (0, 0, 1)  # (block, fewest, most)
    trace = instruments.trace_kernel(_second_block_leaves_early, 2, 8, out)
    assert trace.uneven_barriers() is None  # a whole block that leaves early is no problem
