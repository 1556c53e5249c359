"""Which simulated thread is running: CUDA's linear indices in 1-D, 2-D and 3-D grids, and
none outside a kernel."""

import numpy as np
import pytest
from numba import cuda

from gpulab import device
from gpulab.instruments import RecordingArray, simulated_thread

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


@SIM_ONLY
def test_events_take_the_gpu_api_and_time_the_host_between_records():
    from gpulab.instruments.simulator import events_as_on_a_gpu

    events_as_on_a_gpu()
    events_as_on_a_gpu()  # a second call changes nothing
    start, stop = cuda.event(timing=True), cuda.event()
    start.record()
    read_own_slot[1, 4](np.zeros(4, dtype=np.int64), np.arange(4.0))
    stop.record()
    stop.synchronize()
    assert cuda.event_elapsed_time(start, stop) == start.elapsed_time(stop) > 0
    with pytest.raises(ValueError, match="both events recorded"):
        cuda.event().elapsed_time(stop)
