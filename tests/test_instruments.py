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
