"""The time limit of simulated kernels: access and barrier budgets, a wall-clock limit, and a
kernel that finishes left alone."""

import numpy as np
import pytest
from numba import cuda

from gpulab import device, instruments

SIM_ONLY = pytest.mark.skipif(device.tier() != "sim",
                              reason="instruments stand in for device arrays only in the simulator")


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
    from gpulab.instruments.simulator import unfinished_threads

    assert unfinished_threads() == 0  # no simulated thread is left to spin on


@SIM_ONLY
def test_a_watchdog_that_fires_between_launches_stops_the_next_block():
    """The limit runs out while no block runs (host code): the next block under it stops at
    once instead of looping for ever."""
    import time

    with pytest.raises(instruments.KernelDidNotFinishError, match="time limit"):
        with instruments.limited(seconds=0.2) as limits:
            time.sleep(0.5)
            spin_without_arrays[1, 4](np.zeros(1, np.float32))
    assert limits.timed_out
    out = np.zeros(64, np.float32)
    copy_no_guard[2, 32](np.arange(64, dtype=np.float32), out)  # after the limit: runs
    assert out[63] == 63


@SIM_ONLY
def test_a_kernel_that_finishes_is_not_disturbed_by_the_limit():
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(64, np.float32)
    with instruments.limited(instruments.access_budget(x, out), 100, 30.0) as limits:
        copy_no_guard[2, 32](x, out)
    assert not limits.tripped and not limits.timed_out
    np.testing.assert_array_equal(out, x)


@cuda.jit
def four_accesses(x, out):
    """Each thread reads x twice and writes out twice: four array accesses."""
    i = cuda.grid(1)
    out[i] = x[i]
    out[i] = out[i] + x[i]


@SIM_ONLY
def test_a_limit_inside_another_counts_each_access_once():
    x, out = np.ones(4, np.float32), np.zeros(4, np.float32)
    with instruments.limited(accesses_per_thread=10**6, seconds=60):
        with instruments.limited(accesses_per_thread=5):
            four_accesses[1, 4](x, out)  # 4 accesses: within 5, counted once
        with pytest.raises(instruments.KernelDidNotFinishError):
            with instruments.limited(accesses_per_thread=3):
                four_accesses[1, 4](x, out)
    assert list(out) == [2.0] * 4
