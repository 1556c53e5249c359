"""The coalescing model: sectors per warp request, from index patterns and from real reads."""

import gpulab  # noqa: F401  (must come before numba: it chooses the simulator or the GPU)

# isort: split
import numpy as np
import pytest
from numba import cuda

from gpulab import device, memory_model
from gpulab.memory_model import (
    SECTOR_BYTES,
    copy_access,
    predicted_sectors_per_request,
    summarise,
    warp_requests,
)

SIM_ONLY = pytest.mark.skipif(device.tier() != "sim", reason="tracing reads needs the simulator")


def one_warp(indices, itemsize=4):
    return summarise({(0, t): [i] for t, i in enumerate(indices)}, itemsize, "test")


def test_neighbouring_float32_need_four_sectors():
    access = one_warp(range(32))
    assert access.n_requests == 1
    assert access.sectors_per_request == 4 == access.ideal_sectors_per_request
    assert access.lines_per_request == 1
    assert access.bytes_fetched == 128 == access.bytes_requested
    assert access.efficiency == 1.0


def test_a_broadcast_needs_one_sector():
    access = one_warp([7] * 32)
    assert access.sectors_per_request == 1
    assert access.bytes_requested == 4  # one element, broadcast to 32 threads


def test_scattered_threads_need_a_sector_each():
    access = one_warp([i * 1000 for i in range(32)])
    assert access.sectors_per_request == 32
    assert access.bytes_fetched == 32 * SECTOR_BYTES
    assert access.efficiency == pytest.approx(4 / 32)


def test_misaligned_warp_needs_one_more_sector():
    assert one_warp(range(3, 35)).sectors_per_request == 5


def test_float64_needs_eight_sectors():
    assert one_warp(range(32), itemsize=8).sectors_per_request == 8


@pytest.mark.parametrize("stride", [1, 2, 3, 4, 7, 8, 9, 16, 100])
@pytest.mark.parametrize("itemsize", [4, 8])
def test_index_arithmetic_matches_the_closed_form(stride, itemsize):
    access = copy_access(stride, n_threads=256, itemsize=itemsize)
    assert access.sectors_per_request == predicted_sectors_per_request(stride, itemsize)
    assert access.sectors_per_request <= stride * access.ideal_sectors_per_request


def test_requests_group_threads_by_warp_and_by_read():
    reads = {(0, t): [t, t + 64] for t in range(64)}  # 2 warps, 2 reads each
    requests = warp_requests(reads, 4)
    assert [(r.warp, r.step) for r in requests] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert requests[1].element_indices == tuple(range(64, 96))
    partial = warp_requests({(0, t): [t] for t in range(40)}, 4)  # a partial second warp
    assert [len(r.element_indices) for r in partial] == [32, 8]
    with pytest.raises(ValueError, match="itemsize"):
        warp_requests(reads, 3)


@SIM_ONLY
@pytest.mark.parametrize("stride", [1, 2, 4, 8, 32])
def test_traced_reads_of_the_real_kernel_match_the_model(stride):
    traced = memory_model.trace_copy(stride, n_threads=256)
    assert traced.source == "traced in the simulator"
    modelled = copy_access(stride, n_threads=256, threads_per_block=128)
    assert traced.n_requests == modelled.n_requests == 8
    assert [r.element_indices for r in traced.requests] == \
        [r.element_indices for r in modelled.requests]
    assert traced.sectors_per_request == predicted_sectors_per_request(stride)


@cuda.jit
def grid_stride_copy(x, out):
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        out[i] = x[i]


@SIM_ONLY
def test_trace_reads_records_loops_in_order():
    x = np.arange(200, dtype=np.float32)
    out = np.zeros_like(x)
    access = memory_model.trace_reads(grid_stride_copy, 2, 32, [x, out], watch=0)
    np.testing.assert_array_equal(out, x)  # the kernel really ran on the recorded array
    assert access.sectors_per_request == pytest.approx(4, abs=0.5)  # coalesced on every pass
    assert sum(len(r.element_indices) for r in access.requests) == 200


@pytest.mark.skipif(device.tier() == "sim", reason="checks the refusal outside the simulator")
def test_tracing_refuses_outside_the_simulator():
    with pytest.raises(RuntimeError, match="simulator"):
        memory_model.trace_copy(2)


def test_summary_text_says_where_it_came_from():
    text = str(copy_access(8))
    assert "32 sectors" in text and "12.5% efficiency" in text
    assert "index arithmetic" in text


@cuda.jit
def copy_rows(x, out):
    c, r = cuda.grid(2)
    if r < x.shape[0] and c < x.shape[1]:
        out[r, c] = x[r, c]


@SIM_ONLY
def test_a_2d_launch_is_cut_into_warps_by_linear_thread_index():
    # Blocks of 32 x 4 threads: each warp is one y, 32 neighbouring columns of a row.
    x = np.arange(8 * 64, dtype=np.float32).reshape(8, 64)
    out = np.zeros_like(x)
    access = memory_model.trace_reads(copy_rows, (2, 2), (32, 4), [x, out], watch=0)
    np.testing.assert_array_equal(out, x)
    assert access.n_requests == 2 * 2 * 4
    assert access.sectors_per_request == 4 == access.ideal_sectors_per_request


# --- shared memory: banks ---------------------------------------------------------------------


def shared_trace(words_by_thread, block=64, itemsize=4, shape=(4096,)):
    """A stand-in trace: thread t of block 0 reads the shared elements words_by_thread[t]."""
    from gpulab.instruments.trace import Access, KernelTrace

    accesses = [Access((0, t), "shared:tile", (i,), "read", "shared")
                for t, indices in enumerate(words_by_thread) for i in indices]
    return KernelTrace("k", 1, block, [(0, t) for t in range(block)], accesses, {},
                       {"shared:tile": shape}, {"shared:tile": "shared"},
                       itemsizes={"shared:tile": itemsize})


@pytest.mark.parametrize(("stride", "ways"), [(1, 1), (2, 2), (16, 16), (32, 32), (33, 1)])
def test_a_warp_reading_with_a_stride_takes_as_many_passes_as_words_share_a_bank(stride, ways):
    trace = shared_trace([[t * stride] for t in range(32)], block=32)
    request, = memory_model.shared_requests(trace)
    assert request.ways == ways
    assert request.busiest_bank[0] == 0


def test_threads_reading_one_word_share_it_and_each_warp_is_its_own_request():
    trace = shared_trace([[5], *[[5]] * 31, *[[t * 32] for t in range(32)]], block=64)
    first, second = memory_model.shared_requests(trace)
    assert (first.warp, first.ways) == (0, 1)  # a broadcast
    assert (second.warp, second.ways) == (1, 32)
    assert memory_model.worst_bank_conflict(trace) == second
    assert memory_model.worst_bank_conflict(trace, "write") is None


def test_a_float64_element_spans_two_banks():
    trace = shared_trace([[t] for t in range(32)], block=32, itemsize=8)
    request, = memory_model.shared_requests(trace)
    assert request.words == tuple(range(64)) and request.ways == 2


TILE = 32


@cuda.jit
def transpose_through_a_tile(A, out):  # one tile, TILE x TILE, read down its columns
    tile = cuda.shared.array((TILE, TILE), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    tile[ty, tx] = A[ty, tx]
    cuda.syncthreads()
    out[ty, tx] = tile[tx, ty]


@cuda.jit
def transpose_through_a_padded_tile(A, out):
    tile = cuda.shared.array((TILE, TILE + 1), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    tile[ty, tx] = A[ty, tx]
    cuda.syncthreads()
    out[ty, tx] = tile[tx, ty]


@SIM_ONLY
def test_a_traced_32_wide_tile_read_down_a_column_is_a_32_way_conflict_and_padding_removes_it():
    from gpulab.instruments import trace_kernel

    A = np.arange(TILE * TILE, dtype=np.float32).reshape(TILE, TILE)
    ways = {}
    for kernel in (transpose_through_a_tile, transpose_through_a_padded_tile):
        trace = trace_kernel(kernel, (1, 1), (TILE, TILE), A, np.zeros_like(A))
        np.testing.assert_array_equal(trace.arrays["out"], A.T)
        ways[kernel] = [max(r.ways for r in memory_model.shared_requests(trace, kind))
                        for kind in ("write", "read")]
        assert len(memory_model.shared_requests(trace, "read")) == TILE  # 32 warps, 1 read each
    assert ways[transpose_through_a_tile] == [1, 32]
    assert ways[transpose_through_a_padded_tile] == [1, 1]
