"""Watching the learner's host code (gpulab.exercises.host_code): clocks however imported, CUDA
events."""

import gpulab  # noqa: F401  (must come before numba: it chooses the simulator or the GPU)

# isort: split
from time import perf_counter as now_from_time_import  # a clock imported by name

from numba import cuda

from gpulab.exercises import host_code


def test_watch_host_code_records_clocks_however_imported_and_cuda_events():
    import time

    def host(clock_module=time):
        now_from_time_import()  # `from time import perf_counter as ...`, a global
        clock_module.process_time_ns()
        start = cuda.event()
        start.record()
        start.synchronize()
        start.elapsed_time(start)

    with host_code.watch_host_code(host) as watch:
        host()
    kinds = [kind for kind, _ in watch.events]
    assert kinds == ["clock", "cpu_clock", "clock", "synchronize", "elapsed"], kinds
    assert watch.events[0][1][0] == "perf_counter" and watch.events[1][1][0] == "process_time_ns"
    assert watch.events[2][1] == ("event", None)
    assert now_from_time_import is time.perf_counter  # restored
