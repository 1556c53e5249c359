"""The stand-in arrays that record reads (RecordingArray) and writes (WatchedArray), and shared
memory that starts poisoned."""

import numpy as np
import pytest
from numba import cuda

from gpulab import device, instruments
from gpulab.instruments import WatchedArray, element_index

SIM_ONLY = pytest.mark.skipif(device.tier() != "sim",
                              reason="instruments stand in for device arrays only in the simulator")


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
def into_a_row_view(x, out):  # each thread writes out[r, c] through the row out[r]
    c, r = cuda.grid(2)
    if r < out.shape[0] and c < out.shape[1]:
        row = out[r]
        row[c] = x[r, c]


@cuda.jit
def atomic_through_a_view(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        cuda.atomic.add(out[1:], 0, x[i])


@SIM_ONLY
def test_writes_through_a_slice_are_recorded_at_the_parent_s_elements():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = WatchedArray(np.zeros((3, 4), np.float32))
    into_a_row_view[(1, 1), (4, 3)](x, out)
    np.testing.assert_array_equal(out.copy_to_host(), x)
    assert out.race() is None and sorted(out.plain_writers) == list(range(12))
    assert out.plain_writers[element_index((2, 1), (3, 4))] == {(0, 9)}  # thread x=1, y=2
    totals = WatchedArray(np.zeros(3, np.float32))
    atomic_through_a_view[2, 32](np.ones(50, np.float32), totals)
    assert totals.copy_to_host().tolist() == [0, 50, 0]
    assert len(totals.atomic_writers[1]) == 50 and not totals.plain_writers


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


def test_watched_array_lists_each_threads_plain_writes():
    out = WatchedArray(np.zeros(4, np.float32))
    out.plain_writers.update({2: {(0, 1)}, 0: {(0, 1), (1, 0)}, 3: {None}})
    out.atomic_writers[1].add((0, 0))
    assert out.writes_by_thread() == {(0, 1): [0, 2], (1, 0): [0]}
