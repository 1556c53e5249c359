"""The closest this Linux CI gets to a Mac: the versions macOS resolves, in a fresh environment.

:mod:`macos_env` (beside this file) asks uv what a Mac (arm64, this test's Python version)
would install for gpulab with the ``lab`` extra and installs exactly those versions into a new
virtual environment here. In it, this test

- checks what a Mac has: numba-cuda 0.20, no ``cuda.bindings``, no toolkit wheels;
- asks ``gpulab doctor`` with the platform set to macOS: every check must pass;
- asks for PTX and expects the plain "needs the CUDA toolkit wheels" error, not a traceback;
- runs the simulator-tier kernel tests (``tests/kernels``, without the ptx and gpu ones).

Every chapter runs in the same versions too, once, without its exercise cells:
``tests/browser/test_voila.py`` serves the dashboards from an environment :mod:`macos_env`
builds the same way (as ``make lab`` on a Mac would serve them), so a chapter is not executed a
second time for the Mac here. The exercise cells (stubs, and checks that say "not attempted"
of them) are what a dashboard leaves out.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.platforms, pytest.mark.slow]

# tests/ is not a package: the environment builder is loaded from its file.
_SPEC = importlib.util.spec_from_file_location("macos_env",
                                               Path(__file__).with_name("macos_env.py"))
macos_env = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(macos_env)

TESTS_TIMEOUT_S = 600
WORKERS = 2

CHECK_SCRIPT = """
import importlib.util, json
from dataclasses import replace

import gpulab
from gpulab import device, doctor, ptx, toolkit

facts = replace(doctor.gather(compile_ptx=False), platform=device.Platform("macos", "arm64"))
findings = doctor.diagnose(facts)
try:
    ptx.kernel_ptx("elementwise_multiply")
    ptx_error = None
except ptx.ToolkitMissingError as error:
    ptx_error = str(error)
try:
    bindings = importlib.util.find_spec("cuda.bindings") is not None
except ImportError:
    bindings = False
print(json.dumps({
    "numba_cuda": device.package_version("numba-cuda"),
    "numba": device.package_version("numba"),
    "cuda_bindings": bindings,
    "toolkit": toolkit.installed_version(),
    "tier": gpulab.tier(),
    "report": doctor.format_report(findings),
    "doctor_ok": all(f.ok for f in findings),
    "ptx_error": ptx_error,
}))
"""


@pytest.fixture(scope="module")
def mac(tmp_path_factory):
    reachable, why = macos_env.pypi_reachable()
    if not reachable:
        pytest.skip(f"resolving for a Mac needs PyPI: {why}")
    return macos_env.build(tmp_path_factory.mktemp("macos"))


def test_the_versions_macos_gets_pass_the_doctor(mac):
    facts = json.loads(macos_env.run([mac.python, "-c", CHECK_SCRIPT], cwd=mac.repo.parent,
                                     env=mac.env, timeout=300,
                                     what="gpulab in the macOS environment")
                       .strip().splitlines()[-1])
    assert facts["numba_cuda"].startswith("0.20.") and not facts["cuda_bindings"], facts
    assert facts["toolkit"] is None and facts["tier"] == "sim", facts
    assert facts["doctor_ok"], f"gpulab doctor, as on a Mac:\n{facts['report']}"
    assert "platform" in facts["report"] and "simulator tier" in facts["report"], facts["report"]
    assert facts["ptx_error"] and "CUDA toolkit wheels" in facts["ptx_error"], facts
    print(f"macOS versions: numba {facts['numba']}, numba-cuda {facts['numba_cuda']}, Python "
          f"{sys.version_info.major}.{sys.version_info.minor}, voila {mac.version('voila')}; "
          f"resolved and installed in {mac.installed_s:.0f} s")


def test_the_versions_macos_gets_run_the_simulator_kernel_tests(mac):
    kernel_tests = mac.repo / "tests" / "kernels"
    assert kernel_tests.is_dir(), \
        "tests/kernels is gone: point this test at the simulator kernel tests"
    started = time.monotonic()
    output = macos_env.run([mac.python, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n",
                            str(WORKERS), "--timeout", "300", "-m",
                            "not ptx and not gpu and not slow", str(kernel_tests)],
                           cwd=mac.repo, env={**mac.env, "MPLBACKEND": "Agg"},
                           timeout=TESTS_TIMEOUT_S, what="the simulator kernel tests")
    print(f"kernel tests with the macOS versions: {output.strip().splitlines()[-1]} "
          f"({time.monotonic() - started:.0f} s)")
