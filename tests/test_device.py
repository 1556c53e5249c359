"""Tier detection: decided without numba, overridable, and loud when numba came first."""

import os
import subprocess
import sys

import pytest

import gpulab
from gpulab import device
from gpulab.device import DriverProbe, TierError

NO_GPU = DriverProbe(False, 0, problem="no CUDA driver (libcuda) was found")
ONE_GPU = DriverProbe(True, 1, "12.8", "NVIDIA H200", (9, 0), 141 * 10**9, 132)


@pytest.mark.parametrize(
    "environ, probe, tier, reason_words",
    [
        ({}, NO_GPU, "sim", "no CUDA driver"),
        ({}, ONE_GPU, "gpu", "reports 1 device"),
        ({"GPULAB_DEVICE": "sim"}, ONE_GPU, "sim", "GPULAB_DEVICE=sim"),
        ({"GPULAB_DEVICE": "GPU "}, ONE_GPU, "gpu", "GPULAB_DEVICE=gpu"),
        ({"GPULAB_DEVICE": "ptx"}, NO_GPU, "ptx", "GPULAB_DEVICE=ptx"),
        ({"NUMBA_ENABLE_CUDASIM": "1"}, ONE_GPU, "sim", "NUMBA_ENABLE_CUDASIM=1"),
        ({"NUMBA_ENABLE_CUDASIM": "0"}, ONE_GPU, "gpu", "reports 1 device"),
    ],
)
def test_choose(environ, probe, tier, reason_words):
    chosen, reason = device._choose(environ, probe)
    assert chosen == tier
    assert reason_words in reason


def test_gpu_requested_without_a_gpu_says_what_to_do():
    with pytest.raises(TierError, match="GPULAB_DEVICE=sim"):
        device._choose({"GPULAB_DEVICE": "gpu"}, NO_GPU)


def test_unknown_tier_is_named():
    with pytest.raises(TierError, match="'cuda' is not a tier"):
        device._choose({"GPULAB_DEVICE": "cuda"}, NO_GPU)


def test_this_machine():
    info = gpulab.info(show=False)
    assert info.tier == gpulab.tier()
    assert info.reason
    assert info.numba_version and info.numba_cuda_version
    if info.tier == "sim":
        assert "simulator" in info.device_name
        assert "simulator time is not GPU time" in str(info)


def _python(code, **env):
    environ = {k: v for k, v in os.environ.items()
               if k not in ("GPULAB_DEVICE", "NUMBA_ENABLE_CUDASIM")}
    environ.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=environ, check=False)


def test_import_does_not_import_numba():
    result = _python("import sys, gpulab; print('numba' in sys.modules)")
    assert result.stdout.strip() == "False", result.stderr


def test_info_prints_tier_and_reason():
    result = _python("import gpulab; gpulab.info()", GPULAB_DEVICE="sim")
    assert "gpulab tier : sim  (GPULAB_DEVICE=sim was set)" in result.stdout, result.stderr


def test_numba_first_in_the_wrong_mode_is_explained():
    result = _python("import numba.cuda, gpulab", NUMBA_ENABLE_CUDASIM="0", GPULAB_DEVICE="sim")
    assert result.returncode != 0
    assert "numba.cuda was imported before gpulab" in result.stderr
    assert "restart the Python kernel" in result.stderr


def test_numba_imported_but_not_numba_cuda_is_fine():
    result = _python("import numba, gpulab, numba.cuda as c; print(c.jit.__module__)",
                     GPULAB_DEVICE="sim")
    assert "simulator" in result.stdout, result.stderr


@pytest.mark.parametrize(("tier", "expected_s"), [("sim", device.SIMULATOR_SWITCH_INTERVAL_S),
                                                  ("ptx", 0.005)])
def test_the_simulator_tier_shortens_the_thread_switch_interval(tier, expected_s):
    """A simulated block's threads take turns at the GIL; the sim tier shortens the turn (see
    device.py for the measurements), the other tiers leave CPython's default (5 ms) alone."""
    result = _python("import sys, gpulab; print(sys.getswitchinterval())", GPULAB_DEVICE=tier)
    assert float(result.stdout) == pytest.approx(expected_s), result.stderr
