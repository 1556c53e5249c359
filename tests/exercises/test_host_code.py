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


def test_watch_host_code_records_timeit_clock_gettime_and_event_spellings():
    import time
    import timeit

    from numba.cuda import synchronize as imported_synchronize

    def host():
        timeit.default_timer()  # `timeit.default_timer`, a module attribute
        timeit.timeit(lambda: None, number=1)  # the default timer of `timeit.timeit`
        time.clock_gettime(time.CLOCK_PROCESS_CPUTIME_ID)
        time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        start, stop = cuda.event(timing=True), cuda.event(timing=True)
        start.record()
        stop.record()
        namespace["synchronize"]()  # `from numba.cuda import synchronize`, a global
        cuda.event_elapsed_time(start, stop)

    namespace = host.__globals__
    namespace["synchronize"] = imported_synchronize
    try:
        with host_code.watch_host_code(host) as watch:
            host()
        assert namespace["synchronize"] is imported_synchronize  # restored
    finally:
        del namespace["synchronize"]
    kinds = [kind for kind, _ in watch.events]
    assert kinds == ["clock", "clock", "clock", "cpu_clock", "clock", "clock", "clock",
                     "synchronize", "elapsed"], kinds
    assert watch.events[3][1][0] == "clock_gettime(CLOCK_PROCESS_CPUTIME_ID)"
    assert watch.events[4][1][0] == "clock_gettime_ns(CLOCK_MONOTONIC)"
    assert watch.events[4][1][1] < 1e8  # nanoseconds read as seconds
    assert watch.events[-1][1] >= 0  # the simulator's events give the host time between
    assert timeit.default_timer is time.perf_counter  # all restored
    assert timeit.timeit.__defaults__[2] is time.perf_counter
    assert "built-in" in repr(time.clock_gettime_ns)
    assert cuda.synchronize is imported_synchronize
