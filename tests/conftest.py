"""Test setup: gpulab is imported first so that it chooses the tier before numba loads.

``stand_in_gpu`` is the one fake GPU every test of a GPU branch uses: the tier says ``gpu``, the
probe names a GPU, and CUDA-event timing (:func:`gpulab.timing.time_gpu`) is replaced by a
``time.perf_counter`` stand-in, while the kernels themselves run for real in the simulator. It
runs every line of a GPU branch (device arrays, launches, copies, checks, labels) in CI; its
times mean nothing and no test asserts a speed with it.
"""

import os
import time

os.environ.setdefault("MPLBACKEND", "Agg")

import pytest  # noqa: E402

import gpulab  # noqa: E402,F401  (must precede numba)
from gpulab import device, timing  # noqa: E402

STAND_IN_GPU_NAME = "NVIDIA H100 80GB HBM3"  # matched to the H100-SXM entry by name
STAND_IN_SMS = 2  # few multiprocessors: launches sized from the SM count stay small


def stand_in_time_gpu(launch, repeats=20, warmup=2, name=None, n=None, flops=None,
                      bytes_moved=None):
    """time_gpu's signature and record: ``launch()`` runs once (in the simulator), timed with
    perf_counter instead of CUDA events; warm-up and repeats are not run (the time means
    nothing, and the simulator is slow)."""
    start = time.perf_counter()
    launch()
    times = [time.perf_counter() - start]
    return timing.Measurement(name=name or "launch", times_s=times, origin="gpu",
                              device=device.PROBE.device_name, n=n, flops=flops,
                              bytes_moved=bytes_moved, meta={"timer": "stand-in"})


@pytest.fixture
def stand_in_gpu(monkeypatch):
    """Pretend to be in the gpu tier with a stand-in timer (see the module docstring). Skipped
    on a real GPU, where the real branch runs instead. CuPy is reported missing, so cuBLAS rows
    are skipped as they are on a GPU without CuPy."""
    if device.tier() == "gpu":
        pytest.skip("a real GPU is here: the real GPU branch is tested instead")
    monkeypatch.setattr(device, "TIER", "gpu")
    monkeypatch.setattr(device, "PROBE", device.DriverProbe(True, 1, "12.8", STAND_IN_GPU_NAME,
                                                            (9, 0), 80 * 10**9, STAND_IN_SMS))
    monkeypatch.setattr(timing, "time_gpu", stand_in_time_gpu)
    monkeypatch.setattr(timing, "cupy_module", lambda: None)
    return STAND_IN_GPU_NAME
