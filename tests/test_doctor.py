"""gpulab doctor: each diagnosis from faked facts, and the command on this machine."""

import json
import os
import re
import subprocess
import sys
from dataclasses import replace

import pytest

from gpulab import doctor
from gpulab.device import DriverProbe

NO_DRIVER = DriverProbe(False, 0, problem="no CUDA driver (libcuda) was found")
H100 = DriverProbe(True, 1, driver_version="12.8", device_name="NVIDIA H100 80GB HBM3",
                   compute_capability=(9, 0))
DRIVER_NO_DEVICE = DriverProbe(True, 0, driver_version="13.0",
                               problem="the CUDA driver reports no device")

HEALTHY_WITHOUT_GPU = doctor.Facts(
    probe=NO_DRIVER, tier="sim", tier_reason="no CUDA driver", requested_tier="",
    simulator_enabled=True, numba_version="0.68.1", numba_cuda_version="0.30.4",
    toolkit_version="13.5.0", ipywidgets_version="8.1.9", jupyterlab_widgets_version="3.0.17",
    widgets_labextension_version="5.0.16", mpi4py_version="4.1.1",
    mpiexec="/venv/bin/mpiexec", mpi_implementation="mpiexec (Open MPI) 5.0.8",
)


def run_doctor(*code_lines, env=None):
    """Run Python code in a fresh process (so the import order is the code's)."""
    return subprocess.run([sys.executable, "-c", "\n".join(code_lines)], capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, timeout=120)


# --- import order ---------------------------------------------------------------------------


def test_modules_before_gpulab_follow_import_order():
    order = ["sys", "numba", "numba.core", "gpulab", "gpulab.device", "numba.cuda"]
    assert doctor.modules_imported_before_gpulab(order) == ("numba", "numba.core")
    assert doctor.modules_imported_before_gpulab(["gpulab", "numba", "numba.cuda"]) == ()


def test_import_order_ok_when_gpulab_came_first():
    assert doctor.check_numba_import_order(()).ok


@pytest.mark.parametrize("before, says", [
    (("numba",), "numba.cuda itself was not loaded yet"),
    (("numba", "numba.cuda"), "only by luck"),
])
def test_numba_before_gpulab_is_a_problem_with_its_fix(before, says):
    finding = doctor.check_numba_import_order(before)
    assert not finding.ok and says in finding.problem
    assert "restart the kernel" in finding.fix and "`import gpulab` the first" in finding.fix


def test_report_in_a_process_that_imported_numba_first_names_the_fix():
    result = run_doctor("import numba", "import gpulab.doctor",
                        "raise SystemExit(gpulab.doctor.main([]))")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "PROBLEM  import order" in result.stdout
    assert "fix: restart the kernel" in result.stdout


# --- versions ---------------------------------------------------------------------------------


def test_tested_versions_are_ok():
    assert doctor.check_versions("0.68.1", "0.30.4").ok
    assert doctor.check_versions("0.60.0", "0.30.0").ok


@pytest.mark.parametrize("numba, numba_cuda, says, pin", [
    ("0.70.0", "0.30.4", "numba 0.70.0 is newer than the tested 0.60–0.68", '"numba>=0.60,<0.69"'),
    ("0.59.1", "0.30.4", "numba 0.59.1 is older", '"numba>=0.60,<0.69"'),
    ("0.68.1", "0.31.0", "numba-cuda 0.31.0 is newer than the tested 0.30",
     '"numba-cuda>=0.30,<0.31"'),
    ("0.68.1", None, "numba-cuda is not installed", '"numba-cuda>=0.30,<0.31"'),
])
def test_versions_outside_the_tested_range(numba, numba_cuda, says, pin):
    finding = doctor.check_versions(numba, numba_cuda)
    assert not finding.ok and says in finding.problem
    assert finding.fix.startswith("pip install") and pin in finding.fix


def test_the_tested_range_contains_what_is_installed_here():
    facts = doctor.gather(compile_ptx=False)
    assert doctor.check_versions(facts.numba_version, facts.numba_cuda_version).ok, facts


# --- toolkit vs driver ------------------------------------------------------------------------


@pytest.mark.parametrize("isa, cuda", [("9.5", (13, 5)), ("9.0", (13, 0)), ("8.5", (12, 5)),
                                       ("8.6", (12, 7)), ("8.8", (12, 9)), ("7.8", (11, 8))])
def test_ptx_isa_to_the_driver_that_loads_it(isa, cuda):
    assert doctor.cuda_version_for_ptx_isa(isa) == cuda


def test_no_driver_needs_no_match():
    assert doctor.check_toolkit_matches_driver(None, "13.5.0").ok
    assert doctor.check_toolkit_matches_driver(None, None).ok


def test_cuda13_wheels_with_a_cuda12_driver():
    finding = doctor.check_toolkit_matches_driver("12.8", "13.5.0", "9.5")
    assert not finding.ok
    assert "PTX ISA 9.5 (needs a CUDA 13.5 driver)" in finding.problem
    assert "CUDA_ERROR_UNSUPPORTED_PTX_VERSION" in finding.problem
    assert '"numba-cuda[cu12]"' in finding.fix and '"cuda-toolkit<12.9"' in finding.fix
    assert "update the NVIDIA driver" in finding.fix


def test_newer_minor_toolkit_than_the_driver():
    finding = doctor.check_toolkit_matches_driver("13.0", "13.5.0")
    assert not finding.ok and "CUDA 13.0 driver" in finding.problem
    assert '"numba-cuda[cu13]"' in finding.fix and '"cuda-toolkit<13.1"' in finding.fix


def test_ptx_newer_than_the_driver_even_when_the_versions_look_fine():
    finding = doctor.check_toolkit_matches_driver("12.8", "12.8.1", ptx_isa="8.8")
    assert not finding.ok and "needs a CUDA 12.9 driver" in finding.problem


def test_matching_toolkit_and_driver():
    assert doctor.check_toolkit_matches_driver("13.5", "13.5.0", "9.5").ok
    assert doctor.check_toolkit_matches_driver("12.9", "12.8.1", "8.7").ok


def test_driver_without_toolkit_wheels():
    finding = doctor.check_toolkit_matches_driver("12.4", None)
    assert not finding.ok and "cannot compile" in finding.problem
    assert '"numba-cuda[cu12]"' in finding.fix and '"cuda-toolkit<12.5"' in finding.fix


# --- tier ---------------------------------------------------------------------------------------


def test_simulator_on_although_a_gpu_is_present():
    finding = doctor.check_tier(H100, simulator_enabled=True, requested="",
                                tier_reason="NUMBA_ENABLE_CUDASIM=1 was set")
    assert not finding.ok and "NVIDIA H100" in finding.problem
    assert "NUMBA_ENABLE_CUDASIM=1 was set" in finding.problem
    assert "unset NUMBA_ENABLE_CUDASIM" in finding.fix


def test_simulator_asked_for_on_a_gpu_machine_is_fine():
    finding = doctor.check_tier(H100, simulator_enabled=True, requested="sim")
    assert finding.ok and "GPULAB_DEVICE=sim" in finding.detail


@pytest.mark.parametrize("probe", [NO_DRIVER, DRIVER_NO_DEVICE])
def test_simulator_off_without_a_gpu(probe):
    finding = doctor.check_tier(probe, simulator_enabled=False)
    assert not finding.ok and "CudaSupportError" in finding.problem
    assert probe.problem in finding.problem
    assert "unset GPULAB_DEVICE and NUMBA_ENABLE_CUDASIM" in finding.fix
    assert ("nvidia-smi" in finding.fix) == probe.found_driver


def test_the_usual_tiers_are_fine():
    assert doctor.check_tier(NO_DRIVER, simulator_enabled=True).ok
    assert doctor.check_tier(H100, simulator_enabled=False).ok
    assert doctor.check_tier(NO_DRIVER, simulator_enabled=False, requested="ptx").ok


def test_numba_cuda_that_does_not_import():
    finding = doctor.check_tier(NO_DRIVER, simulator_enabled=None)
    assert not finding.ok and "pip install" in finding.fix


# --- widgets ------------------------------------------------------------------------------------


def test_widgets_with_their_front_end():
    assert doctor.check_widgets_frontend("8.1.9", "3.0.17", "5.0.16").ok
    found_elsewhere = doctor.check_widgets_frontend("8.1.9", "3.0.17", None)
    assert found_elsewhere.ok and "not found here" in found_elsewhere.detail


@pytest.mark.parametrize("ipywidgets, frontend, extension, says", [
    ("8.1.9", None, None, "front end (jupyterlab_widgets) is not"),
    ("8.1.9", "1.1.7", None, "needs jupyterlab_widgets 3.x, but 1.1.7"),
    ("8.1.9", "3.0.17", "3.6.8", "widget manager extension 3.6.8"),
    (None, None, None, "ipywidgets is not installed"),
])
def test_missing_or_mismatched_widget_front_end(ipywidgets, frontend, extension, says):
    finding = doctor.check_widgets_frontend(ipywidgets, frontend, extension)
    assert not finding.ok and says in finding.problem
    assert "pip install" in finding.fix and "jupyterlab_widgets" in finding.fix


# --- all together -------------------------------------------------------------------------------


def test_diagnose_a_healthy_machine_without_gpu():
    findings = doctor.diagnose(HEALTHY_WITHOUT_GPU)
    assert [f.name for f in findings] == ["platform", "import order", "versions",
                                          "toolkit/driver", "tier", "widgets", "mpi"]
    assert all(f.ok for f in findings), findings


def test_main_exits_1_and_prints_every_fix(monkeypatch, capsys):
    broken = replace(HEALTHY_WITHOUT_GPU, probe=H100, simulator_enabled=True,
                     modules_before_gpulab=("numba",), numba_version="0.70.0",
                     toolkit_version="13.5.0", ptx_isa="9.5", jupyterlab_widgets_version=None)
    monkeypatch.setattr(doctor, "gather", lambda compile_ptx=True: broken)
    assert doctor.main([]) == 1
    out = capsys.readouterr().out
    assert out.count("PROBLEM") == 5 and out.count("fix:") == 5, out
    assert "5 of 7 checks found a problem" in out  # the platform is never a problem
    assert doctor.main(["--json"]) == 1
    findings = json.loads(capsys.readouterr().out)
    assert [f["ok"] for f in findings] == [True] + [False] * 5 + [True]


def test_gpulab_doctor_exits_0_on_this_machine():
    result = subprocess.run([sys.executable, "-m", "gpulab.doctor"], capture_output=True,
                            text=True, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "All 7 checks passed." in result.stdout


def test_mpi_missing_is_a_problem_that_says_what_chapter_11_does_instead():
    linux = doctor.device.Platform("linux", "x86_64")
    without = doctor.check_mpi(None, None, platform=linux)
    assert not without.ok and "mpi4py is not installed" in without.problem
    assert "threads" in without.problem and "mpi4py" in without.fix
    no_launcher = doctor.check_mpi("4.1.1", None, platform=linux)
    assert not no_launcher.ok and "no mpiexec" in no_launcher.problem
    broken = doctor.check_mpi("4.1.1", "/x/mpiexec", problem="/x/mpiexec does not run: boom",
                              platform=linux)
    assert not broken.ok and "does not run" in broken.problem
    windows = doctor.check_mpi(None, None, platform=doctor.device.Platform("windows", "AMD64"))
    assert "Microsoft MPI" in windows.fix
    facts = replace(HEALTHY_WITHOUT_GPU, mpi4py_version=None, mpiexec=None)
    findings = doctor.diagnose(facts)
    assert [f.name for f in findings if not f.ok] == ["mpi"]
    assert "1 of 7 checks found a problem: mpi." in doctor.format_report(findings)


def test_instructors_guide_quotes_the_number_of_checks():
    from pathlib import Path

    guide = (Path(__file__).resolve().parents[1] / "course" / "INSTRUCTORS.md").read_text()
    quoted = re.findall(r"All (\d+) checks passed", guide)
    assert quoted and {int(n) for n in quoted} == {len(doctor.diagnose(HEALTHY_WITHOUT_GPU))}
