"""Which simulated thread is running: CUDA's linear indices in 1-D, 2-D and 3-D grids, and
none outside a kernel."""

import threading

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


def test_the_device_has_every_gpus_limits_and_its_context_waits():
    """On a GPU from Numba's own device (compute capability 5.0 and later: the same values);
    in the simulator from gpulab's mend (device_as_on_a_gpu)."""
    from gpulab.device import DEVICE_LIMITS
    from gpulab.instruments.simulator import device_as_on_a_gpu

    device_as_on_a_gpu()  # a second call changes nothing (gpulab's import made the first)
    gpu = cuda.get_current_device()
    assert {name: getattr(gpu, name) for name in DEVICE_LIMITS} == DEVICE_LIMITS
    cuda.current_context().synchronize()


@cuda.jit
def sum_of_shared_slots(out):
    """Each thread writes t + 1 into its slot of one shared array; thread 0 sums them."""
    slots = cuda.shared.array(8, np.float32)
    t = cuda.threadIdx.x
    slots[t] = t + 1
    cuda.syncthreads()
    if t == 0:
        total = np.float32(0)
        for i in range(8):
            total += slots[i]
        out[0] = total


class SlowLookups(dict):
    """The simulator's table of shared arrays, with a lookup that lets the other threads run
    before it answers (as Python may switch threads anywhere): what makes the race certain."""

    stores = 0
    arrived = 0
    everyone = threading.Condition()

    def get(self, key, default=None):
        found = super().get(key, default)
        cls = type(self)
        with cls.everyone:  # wait (up to 0.3 s) until the block's 8 threads have all looked
            cls.arrived += 1
            cls.everyone.notify_all()
            cls.everyone.wait_for(lambda: cls.arrived >= 8, timeout=0.3)
        return found

    def __setitem__(self, key, value):
        type(self).stores += 1
        super().__setitem__(key, value)


def run_with_slow_lookups(shared_array):
    from numba.cuda.simulator.kernelapi import FakeCUDAShared

    from gpulab.instruments.simulator import patched

    original_init = FakeCUDAShared.__init__

    def init(self, *args):
        original_init(self, *args)
        self._allocations = SlowLookups()

    SlowLookups.stores = SlowLookups.arrived = 0
    out = np.zeros(1, np.float32)
    with patched({(FakeCUDAShared, "__init__"): init, (FakeCUDAShared, "array"): shared_array}):
        sum_of_shared_slots[1, 8](out)
    return float(out[0]), SlowLookups.stores


@cuda.jit
def two_shared_arrays_on_one_line(out):
    """Each thread writes 1 into its slot of a, 2 into its slot of b; thread 0 sums both."""
    a = cuda.shared.array(8, np.float32); b = cuda.shared.array(8, np.float32)  # noqa: E702
    t = cuda.threadIdx.x
    a[t] = 1
    b[t] = 2
    cuda.syncthreads()
    if t == 0:
        total = np.float32(0)
        for i in range(8):
            total += a[i] + b[i]
        out[0] = total


@SIM_ONLY
def test_two_shared_arrays_made_on_one_line_are_two_arrays():
    """The simulator keys shared arrays by line, so these two were one (8 x 2 + 8 x 2 = 32,
    not 24); gpulab's stand-in keys them by call, as a GPU has two."""
    from gpulab.instruments.simulator import mend

    mend()
    out = np.zeros(1, np.float32)
    two_shared_arrays_on_one_line[1, 8](out)
    assert out[0] == 24


@SIM_ONLY
def test_every_thread_of_a_block_gets_the_same_shared_array_whenever_python_switches():
    from numba.cuda.simulator.kernelapi import FakeCUDAShared

    from gpulab.instruments.simulator import mend

    mend()  # as importing gpulab's kernels or exercises does
    mend()  # a second call changes nothing
    mended = FakeCUDAShared.array
    assert mended.original is not mended and not hasattr(mended.original, "made_once")
    assert mended.made_once
    assert run_with_slow_lookups(mended) == (36.0, 1)  # one array, every slot written
    # The control: the simulator's own get-or-create, with the same switch, makes one array
    # per thread, and thread 0 sums slots nobody wrote into its own, where the block's threads
    # are Python threads (Numba's block runner; gpulab's greenlets switch only at a barrier).
    from numba.cuda.simulator import kernel

    from gpulab.instruments.simulator import patched

    with patched({(kernel.BlockManager, "run"): kernel.BlockManager.run.original}):
        total, stores = run_with_slow_lookups(mended.original)
    assert stores > 1
    assert FakeCUDAShared.array is mended  # the simulator is left mended


@SIM_ONLY
@pytest.mark.parametrize("module", ["gpulab.kernels.dot", "gpulab.exercises"])
def test_importing_gpulabs_kernels_or_exercises_mends_the_simulator(module):
    import subprocess
    import sys

    probe = (f"import gpulab, {module}; from numba import cuda; "
             "from numba.cuda.simulator.kernelapi import FakeCUDAShared; "
             "print(FakeCUDAShared.array.made_once, cuda.event.mended)")
    shown = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                           timeout=120, check=True)
    assert shown.stdout.split() == ["True", "True"]


@cuda.jit
def fill_when_told(out, started, go):
    """Say the launch has started, wait for ``go``, then write 1 into out (one thread)."""
    started.set()
    go.wait(5)
    out[0] = 1


def launch_while_another_thread_launches(launch_second) -> tuple:
    """Start fill_when_told in a host thread, and once it runs, call ``launch_second()`` in this
    one; return what each gave."""
    import threading

    started, go = threading.Event(), threading.Event()
    first_out = np.zeros(1, np.float32)
    first = threading.Thread(target=lambda: fill_when_told[1, 1](first_out, started, go))
    first.start()
    assert started.wait(10)
    threading.Timer(0.2, go.set).start()  # the first launch goes on while the second waits
    try:
        second = launch_second()
    finally:
        go.set()
        first.join(10)
    return float(first_out[0]), second


@SIM_ONLY
def test_a_second_host_threads_launch_waits_for_the_running_one():
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    from gpulab.instruments.simulator import mend, patched

    mend()

    def sum_of_slots():
        out = np.zeros(1, np.float32)
        sum_of_shared_slots[1, 8](out)
        return float(out[0])

    assert launch_while_another_thread_launches(sum_of_slots) == (1.0, 36.0)
    # The control: the simulator's own launch, made during another, is taken for a device
    # function called from inside it and fails.
    with patched({(FakeCUDAKernel, "__call__"): FakeCUDAKernel.__call__.original}):
        with pytest.raises(AttributeError):
            launch_while_another_thread_launches(sum_of_slots)


@cuda.jit
def fail_in_thread_0(out, ended):
    """Thread 0 indexes past the end at once; thread 1 takes a while, then says it ended."""
    t = cuda.threadIdx.x
    if t == 0:
        out[5] = 1
    else:
        import time

        time.sleep(0.3)
        ended.append(t)


@cuda.jit
def fail_in_thread_1(out, passed):
    """Thread 1 indexes past the end; every thread then meets at a barrier and says it passed."""
    t = cuda.threadIdx.x
    if t == 1:
        out[5] = 1
    cuda.syncthreads()
    passed.append(t)


@SIM_ONLY
def test_a_failed_launch_leaves_no_thread_running():
    """Thread 0 waits at the barrier when thread 1 fails: the launch raises thread 1's error,
    thread 0 ends at the barrier, and no thread of the launch runs on after it returns."""
    import time

    from gpulab.instruments.simulator import mend, unfinished_threads

    mend()
    passed = []
    with pytest.raises(IndexError, match=r"tid=\[1, 0, 0\]"):
        fail_in_thread_1[1, 4](np.zeros(2, np.float32), passed)
    assert unfinished_threads() == 0  # those paused at the barrier were ended there
    time.sleep(0.1)
    assert passed == []


@cuda.jit
def busy_then_barrier(out, steps):
    """Each thread adds 1 to its slot ``steps`` times, waits at a barrier, then thread 0 sums
    the slots into out[0] (reads and writes out, one barrier)."""
    t = cuda.threadIdx.x
    for _ in range(steps):
        out[t + 1] += 1
    cuda.syncthreads()
    if t == 0:
        total = 0
        for i in range(1, out.size):
            total += out[i]
        out[0] = total


@cuda.jit
def barrier_after_some_returned(out):
    """Threads 0-3 return at once; the others meet at a barrier and write their slot."""
    t = cuda.threadIdx.x
    if t < 4:
        return
    cuda.syncthreads()
    out[t] = 1


@SIM_ONLY
def test_a_block_runs_as_greenlets_without_starting_an_os_thread():
    """A block's CUDA threads run as greenlets in the launching thread: a launch of 8 threads
    that meet at a barrier starts no OS thread and gives the same sums; Numba's own block
    runner (the control) starts one per CUDA thread."""
    from numba.cuda.simulator import kernel

    from gpulab.instruments.simulator import mend, patched

    mend()
    started = []
    start = threading.Thread.start

    def counted_start(thread):
        if isinstance(thread, kernel.BlockThread):  # not another test's background thread
            started.append(thread)
        return start(thread)

    def launch() -> int:
        started.clear()
        out = np.zeros(9, np.float32)
        with patched({(threading.Thread, "start"): counted_start}):
            busy_then_barrier[1, 8](out, 200)
        assert out[0] == 1_600 and (out[1:] == 200).all()
        return len(started)

    assert launch() == 0
    with patched({(kernel.BlockManager, "run"): kernel.BlockManager.run.original}):
        assert launch() == 8


@SIM_ONLY
def test_a_barrier_waits_for_the_live_threads_only_and_errors_still_raise():
    """As in Numba's loop: threads that returned do not hold a barrier up; a thread's exception
    stops the launch, named by its thread."""
    from gpulab.instruments.simulator import mend

    mend()
    out = np.zeros(10, np.float32)
    barrier_after_some_returned[1, 10](out)
    assert out.tolist() == [0] * 4 + [1] * 6
    with pytest.raises(IndexError, match=r"tid=\[0, 0, 0\]"):
        fail_in_thread_0[1, 2](np.zeros(2, np.float32), [])


@cuda.jit
def record_order(order):
    """Each thread appends its index to order[0], meets the others at a barrier, then appends
    it to order[1]: the order in which each phase ran its threads."""
    t = cuda.threadIdx.x
    order[0].append(t)
    cuda.syncthreads()
    order[1].append(t)


@SIM_ONLY
def test_each_phase_runs_its_threads_in_its_own_order_the_same_in_every_run():
    """Between two barriers a block's threads run in a shuffled order (a fixed order would hide
    every race with a later thread), seeded by block and phase, so that a run repeats."""
    from gpulab.instruments.simulator import mend

    mend()
    runs = []
    for _ in range(2):
        order = ([], [])
        record_order[1, 32](order)
        runs.append(order)
    first, second = runs[0]
    assert sorted(first) == sorted(second) == list(range(32))
    assert first != list(range(32)) and second != first
    assert runs[0] == runs[1]


@cuda.jit
def count_for_ever(out):
    """Every thread adds 1 to its slot, without end (until stopped)."""
    t = cuda.threadIdx.x
    while out[t] >= 0:
        out[t] += 1


@SIM_ONLY
def test_an_interrupt_stops_a_launch_at_once_and_the_next_launch_runs():
    """Jupyter's "interrupt the kernel" (a KeyboardInterrupt in the launching thread) stops a
    simulated launch where it is: no thread of it runs on in the background."""
    import _thread
    import time

    from gpulab import instruments
    from gpulab.instruments.simulator import mend, unfinished_threads

    mend()
    out = cuda.to_device(np.zeros(8, np.float64))  # a device array: it holds what was counted
    timer = threading.Timer(0.3, _thread.interrupt_main)
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        with instruments.limited(seconds=60.0):  # a safety net: the interrupt comes first
            timer.start()
            count_for_ever[1, 8](out)
    assert time.monotonic() - started < 30
    assert unfinished_threads() == 0
    counted = out.copy_to_host()
    assert counted.any()  # the launch ran before it was interrupted
    time.sleep(0.1)
    np.testing.assert_array_equal(out.copy_to_host(), counted)  # nothing counts on after it
    ones = np.zeros(8, np.float32)
    barrier_after_some_returned[1, 8](ones)
    assert ones.tolist() == [0] * 4 + [1] * 4


@cuda.jit(debug=True, opt=False)
def divide_by_zero(out):
    """Divides a float by zero: in debug mode the simulator raises FloatingPointError."""
    out[0] = np.float64(1.0) / out[1]


@SIM_ONLY
def test_debug_mode_raises_on_division_by_zero_and_leaves_the_host_as_it_was():
    from gpulab.instruments.simulator import mend

    mend()
    before = np.geterr()
    with pytest.raises(FloatingPointError, match=r"tid=\[0, 0, 0\]"):
        divide_by_zero[1, 1](np.zeros(2, np.float64))
    assert np.geterr() == before  # divide="raise" stayed with the simulated thread


def test_max_and_min_of_floats_leave_nan_out_as_on_a_gpu():
    import builtins
    import math

    from gpulab.instruments import float_max_min_as_on_a_gpu

    nan = float("nan")
    assert math.isnan(max(nan, 1.0))  # Python's: the first argument stays
    with float_max_min_as_on_a_gpu():
        assert max(nan, 1.0) == 1.0 and max(1.0, nan) == 1.0
        assert min(np.float32(nan), np.float32(-2.0)) == -2.0
        assert math.isnan(max(nan, nan))
        assert max([3, 1, 2]) == 3 and max(1, 2, 3) == 3 and min(["ab", "c"], key=len) == "c"
    assert builtins.max is max and math.isnan(max(nan, 1.0))


def test_math_overflows_to_inf_only_inside_the_block():
    import math

    from gpulab.instruments import math_overflows_to_inf

    with math_overflows_to_inf():
        assert math.exp(1000.0) == math.inf and math.sinh(-1000.0) == -math.inf
        assert math.ldexp(-1.0, 5000) == -math.inf and math.exp(1.0) == pytest.approx(math.e)
    with pytest.raises(OverflowError):
        math.exp(1000.0)
