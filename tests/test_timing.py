"""Timing: measured CPU time, CUDA events (faked), the simulator refusing to pretend, estimates
labelled with the model's promised band, and the one Measurement record with its origin."""

import json
import time

import numpy as np
import pytest

from gpulab import device, timing
from gpulab.hardware import H100_SXM
from gpulab.timing import (
    Measurement,
    SimulatorTimingError,
    time_cpu,
    time_gpu,
)

SIM_ONLY = pytest.mark.skipif(device.tier() != "sim", reason="checks the simulator tier")
GPU_ONLY = pytest.mark.skipif(device.tier() != "gpu", reason="needs a real GPU")


def test_sleep_is_timed_plausibly():
    m = time_cpu(time.sleep, 0.002, repeats=3, warmup=0)
    assert len(m.times_s) == 3
    assert 0.0019 <= m.median_s < 0.1  # sleep never returns early; allow a busy machine
    assert m.min_s <= m.median_s <= m.max_s
    assert m.meta["loops"] == 1  # 2 ms is above min_time_s: one call per repeat
    assert m.origin == "cpu"
    assert m.name == "sleep"


def test_tiny_calls_are_timed_in_a_loop():
    x = np.ones(16)
    m = time_cpu(np.dot, x, x, repeats=5, min_time_s=2e-3, name="dot of 16")
    assert m.meta["loops"] >= 10  # a 16-element dot takes about a microsecond
    assert m.meta["timer"] == "time.perf_counter"
    assert 0 < m.median_s < 1e-3
    assert m.min_s <= m.median_s <= m.max_s
    assert m.name == "dot of 16"


def test_arguments_and_keywords_reach_the_function():
    calls = []

    def work(a, b, scale=1):
        calls.append((a, b, scale))

    time_cpu(work, 1, 2, scale=3, repeats=2, warmup=1, min_time_s=0)
    assert calls == [(1, 2, 3)] * 3  # one warm-up, two repeats


def test_labels_say_measured_on_this_cpu():
    m = time_cpu(sum, [1, 2, 3], repeats=1)
    assert m.label.startswith("measured on this CPU (")
    assert m.device == f"this CPU ({timing.cpu_description()})"
    assert m.label in str(m)


def test_rates_come_from_flops_and_bytes():
    m = Measurement("saxpy", [2e-3, 1e-3, 3e-3], "cpu", "this CPU", n=10**6,
                    flops=2e6, bytes_moved=12e6)
    assert m.median_s == 2e-3
    assert (m.min_s, m.max_s) == (1e-3, 3e-3)
    assert m.gflops_per_s == pytest.approx(1.0)  # 2e6 FLOP / 2 ms
    assert m.gbytes_per_s == pytest.approx(6.0)
    unknown = Measurement("x", [1.0], "cpu", "this CPU")
    assert unknown.gflops_per_s is None and unknown.gbytes_per_s is None


def test_time_cpu_records_flops():
    x = np.ones(1000)
    m = time_cpu(np.dot, x, x, repeats=3, n=1000, flops=2000, bytes_moved=16000)
    assert m.n == 1000
    assert m.gflops_per_s == pytest.approx(2000 / m.median_s / 1e9)
    assert m.gbytes_per_s > 0


def test_gpu_label():
    m = Measurement("saxpy", [1e-4], "gpu", "NVIDIA H200")
    assert m.label == "measured on NVIDIA H200 (CUDA events)"


def test_dict_round_trip():
    m = Measurement("dot", [1e-3, 2e-3], "gpu", "NVIDIA H100 80GB HBM3", n=5, flops=10.0,
                    bytes_moved=40.0, meta={"threads_per_block": 256})
    data = m.to_dict()
    json.dumps(data)  # serialisable
    assert Measurement.from_dict(data) == m
    with pytest.raises(ValueError, match="unknown Measurement field"):
        Measurement.from_dict({**data, "speed": "fast"})


def test_origins_say_where_the_numbers_came_from():
    cpu = Measurement("sum", [1e-3], "cpu", "this CPU (test)")
    gpu = Measurement("saxpy", [1e-4], "gpu", "NVIDIA H200")
    assert cpu.label == "measured on this CPU (test)" and cpu.measured
    assert gpu.label == "measured on NVIDIA H200 (CUDA events)" and gpu.measured
    recorded = gpu.as_recorded("2026-11-30T12:00:00+00:00")
    assert recorded.origin == "recorded" and recorded.measured
    assert recorded.label == "recorded on NVIDIA H200 on 2026-11-30"
    with pytest.raises(ValueError, match="only GPU measurements"):
        cpu.as_recorded()


def test_estimate_is_labelled_with_its_band():
    from gpulab import hardware

    m = timing.estimate("saxpy", H100_SXM.key, flops=2e8, bytes_moved=1.2e9, n=10**8)
    model = hardware.estimate_time(H100_SXM.key, 2e8, 1.2e9)
    assert m.origin == "model" and not m.measured
    assert m.times_s == [model.time_s] and m.meta["bound"] == model.bound == "memory"
    assert m.label == ("estimated by gpulab's GPU model of the NVIDIA H100 SXM5 80GB (promised "
                       "band for memory-bound work: ±30 %)")
    assert m.gbytes_per_s == pytest.approx(1.2e9 / model.time_s / 1e9)
    with_copy = timing.estimate("saxpy", H100_SXM.key, 2e8, 1.2e9, transfer_bytes=1.2e9)
    assert with_copy.median_s > m.median_s and with_copy.meta["transfer_s"] > 0


def test_local_gpu_spec_matches_the_device_name(monkeypatch):
    monkeypatch.setattr(device, "PROBE", device.DriverProbe(True, 1, device_name="NVIDIA H200"))
    assert timing.local_gpu_spec().key == "H200"
    assert timing.local_gpu_spec("T4").key == "T4"
    monkeypatch.setattr(device, "PROBE", device.DriverProbe(True, 1, device_name="Voodoo Banshee"))
    assert timing.local_gpu_spec() is None


@SIM_ONLY
def test_time_gpu_refuses_in_the_simulator():
    with pytest.raises(SimulatorTimingError, match="simulator time is not GPU time") as error:
        time_gpu(lambda: None)
    assert "gpulab.timing.estimate" in str(error.value)
    assert "recorded run" in str(error.value)
    assert isinstance(error.value, RuntimeError)


def test_time_gpu_times_with_cuda_events(monkeypatch):
    """The GPU path, with fake events standing in for the driver (no GPU here)."""
    from numba import cuda

    class FakeEvent:
        clock_ms = 0.0

        def __init__(self, timing=True):
            self.at = None

        def record(self, stream=0):
            FakeEvent.clock_ms += 0.25
            self.at = FakeEvent.clock_ms

        def synchronize(self):
            pass

        def elapsed_time(self, other):
            return other.at - self.at

    launches = []
    monkeypatch.setattr(device, "tier", lambda: "gpu")
    monkeypatch.setattr(device, "PROBE", device.DriverProbe(True, 1, device_name="NVIDIA H200"))
    monkeypatch.setattr(device, "numba_cuda_mode", lambda: "gpu")
    monkeypatch.setattr(cuda, "event", FakeEvent)
    monkeypatch.setattr(cuda, "synchronize", lambda: None)
    m = time_gpu(lambda: launches.append(1), repeats=4, warmup=2, name="fake", flops=1e9)
    assert len(launches) == 6
    assert m.times_s == pytest.approx([0.25e-3] * 4)
    assert m.origin == "gpu" and m.label == "measured on NVIDIA H200 (CUDA events)"
    assert m.meta["timer"] == "CUDA events"
    assert m.gflops_per_s == pytest.approx(1e9 / 0.25e-3 / 1e9)


@SIM_ONLY
def test_time_gpu_rejects_the_simulators_meaningless_event_time(monkeypatch):
    monkeypatch.setattr(device, "tier", lambda: "gpu")  # but numba.cuda is the simulator
    with pytest.raises(SimulatorTimingError, match="simulator time is not GPU time"):
        time_gpu(lambda: None, repeats=1, warmup=0)
    # And if it got past that, the events say so: numba's own (-1 ms) or, once given the GPU's
    # API (gpulab.instruments.simulator.events_as_on_a_gpu), the simulator's host time.
    monkeypatch.setattr(device, "numba_cuda_mode", lambda: "gpu")
    with pytest.raises(RuntimeError, match="events only time work on a real GPU"):
        time_gpu(lambda: None, repeats=1, warmup=0)
    from gpulab.instruments.simulator import events_as_on_a_gpu

    events_as_on_a_gpu()
    with pytest.raises(RuntimeError, match="from Numba's simulator"):
        time_gpu(lambda: None, repeats=1, warmup=0)


@pytest.mark.gpu
@GPU_ONLY
def test_time_gpu_on_a_real_gpu():
    from numba import cuda

    @cuda.jit
    def add_one(x):
        i = cuda.grid(1)
        if i < x.shape[0]:
            x[i] += 1

    n = 1 << 22
    d_x = cuda.to_device(np.zeros(n, dtype=np.float32))
    m = time_gpu(lambda: add_one[n // 256, 256](d_x), repeats=5, bytes_moved=8 * n)
    assert len(m.times_s) == 5 and 0 < m.median_s < 1.0
    assert m.label == f"measured on {device.PROBE.device_name} (CUDA events)"
    assert d_x.copy_to_host()[0] == 5 + 2  # two warm-up launches and five timed ones


@pytest.mark.parametrize("call, error, message", [
    (lambda: time_cpu(42), TypeError, "fn must be callable"),
    (lambda: time_cpu(sum, [1], repeats=0), ValueError, "repeats must be a whole number >= 1"),
    (lambda: time_cpu(sum, [1], repeats=2.5), ValueError, "repeats must be a whole number"),
    (lambda: time_cpu(sum, [1], warmup=-1), ValueError, "warmup must be a whole number >= 0"),
    (lambda: time_cpu(sum, [1], min_time_s=-1), ValueError, "min_time_s must be"),
    (lambda: time_gpu("kernel"), TypeError, "launch must be callable"),
    (lambda: time_gpu(print, repeats=0), ValueError, "repeats must be"),
    (lambda: Measurement("x", [], "cpu", "c"), ValueError, "has no times"),
    (lambda: Measurement("x", [-1.0], "cpu", "c"), ValueError, "negative"),
    (lambda: Measurement("x", [1.0], "tpu", "c"), ValueError, "origin must be one of"),
])
def test_bad_arguments(call, error, message):
    with pytest.raises(error, match=message):
        call()
