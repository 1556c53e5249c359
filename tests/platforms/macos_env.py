"""The versions a Mac gets, installed into a fresh environment on this Linux machine.

A Mac gets numba-cuda 0.20.1 (the last release with a macOS wheel: pure Python, without
cuda-bindings or any CUDA toolkit wheel) and numba below 0.66 (see pyproject.toml). :func:`build`
asks uv what a Mac (arm64, this test's Python version) would install for gpulab with the ``lab``
extra (JupyterLab and Voila, as ``make lab`` installs them on a Mac), plus the runner tools
(pytest, nbclient, ipykernel, with the dev extra's lower bounds), and installs exactly those
versions into a new virtual environment (no system site-packages, nothing from .venv), then
gpulab itself from a clean copy of the repository.

Its :func:`uv` and :func:`pypi_reachable` serve ``test_dependency_resolution.py`` too.
Two test files build the environment, each loading this file by its path (tests/ is not a
package):
``tests/platforms/test_macos_like_env.py`` (what a Mac has, the doctor, the simulator kernel
tests) and ``tests/browser/test_voila.py``, whose dashboards are served from this environment:
each chapter without its exercise cells runs once with the Mac's versions, and the dashboards
are not run a second time in ``.venv``. Each file builds its own (they run on different xdist
workers); both resolve within seconds of each other, from uv's cache once the first has.
"""

import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MACOS = "aarch64-apple-darwin"  # Apple Silicon: most learners' Macs
# What runs the tests and notebooks in the new environment (bounds from the dev extra).
TOOLS = ("pytest", "pytest-xdist", "pytest-timeout", "hypothesis", "nbformat", "nbclient",
         "ipykernel")
NOT_IN_A_CLONE = shutil.ignore_patterns(
    ".git", ".venv", ".venv-lab", "artifacts", "build", "*.egg-info", "__pycache__",
    ".pytest_cache", ".ruff_cache", ".hypothesis", ".ipynb_checkpoints",
)
INSTALL_TIMEOUT_S = 900


@dataclass
class MacEnvironment:
    """A fresh environment with the versions a Mac gets, and a clean copy of the repository."""

    python: str  # the environment's interpreter
    env: dict[str, str]  # the process environment to run it with (see clean_environment)
    repo: Path  # the copy gpulab was installed from (tests/ and course/ are in it)
    pins: dict[str, str]  # package name -> the version a Mac resolves
    installed_s: float  # resolving and installing, seconds

    def version(self, package: str) -> str:
        return self.pins.get(package, "")


def pypi_reachable() -> tuple[bool, str]:
    """Whether PyPI answers from here (what resolving for a Mac needs), and what it said."""
    url = "https://pypi.org/simple/pip/"
    try:
        with urllib.request.urlopen(url, timeout=15) as response:
            return response.status == 200, f"{url} answered {response.status}"
    except (urllib.error.URLError, OSError) as error:
        return False, f"{url} unreachable ({error})"


def uv() -> str:
    try:
        import uv as uv_module
    except ImportError:
        found = shutil.which("uv")
        if found is None:
            pytest.fail("uv is not installed: it is in the dev extra (pip install -e '.[dev]')")
        return found
    return uv_module.find_uv_bin()


# Settings of the test process that must not reach the Mac's environment: its interpreter and
# packages, Jupyter's paths (a user kernelspec could win over the environment's own), numba's
# and CUDA's (a GPU machine's toolkit, which a Mac never has), gpulab's and pytest's.
NOT_PASSED_ON = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "MPLBACKEND", "LD_LIBRARY_PATH")
NOT_PASSED_ON_PREFIXES = ("JUPYTER_", "NUMBA_", "CUDA_", "GPULAB_", "PYTEST_")


def clean_environment(venv: Path, home: Path) -> dict[str, str]:
    """Only the new environment on PATH (and no other virtual environment's programs), no
    settings from the test process or this checkout."""
    env = {key: value for key, value in os.environ.items()
           if key not in NOT_PASSED_ON and not key.startswith(NOT_PASSED_ON_PREFIXES)}
    others = {str(Path(sys.prefix) / "bin"), str(Path(os.environ.get("VIRTUAL_ENV", sys.prefix))
                                                  / "bin")}
    path = [entry for entry in os.environ.get("PATH", "").split(os.pathsep)
            if entry and entry not in others]
    env.update(
        PATH=os.pathsep.join([str(venv / "bin"), *path]),
        VIRTUAL_ENV=str(venv),
        JUPYTER_CONFIG_DIR=str(home / "config"),
        JUPYTER_DATA_DIR=str(home / "data"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        IPYTHONDIR=str(home / "ipython"),
        GPULAB_DEVICE="sim",  # a Mac has no GPU; on a CI machine with one, emulate that
    )
    return env


def run(command, *, cwd: Path, env: dict, timeout: float, what: str) -> str:
    completed = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                               timeout=timeout, check=False)
    if completed.returncode != 0:
        pytest.fail(f"{what} failed (exit status {completed.returncode}):\n"
                    f"{(completed.stdout + completed.stderr)[-5000:]}")
    return completed.stdout


def tool_requirements() -> list[str]:
    """The runner tools with the lower bounds the dev extra gives them."""
    text = (ROOT / "pyproject.toml").read_text()
    found = []
    for tool in TOOLS:
        match = re.search(rf'"({re.escape(tool)}\s*[<>=!~][^"]*)"', text)
        found.append(match.group(1) if match else tool)
    return found


def macos_pins(workdir: Path, python_version: str) -> str:
    """What a Mac would install for gpulab[lab] and the runner tools, as ``name==version``
    lines."""
    tools = workdir / "tools.in"
    tools.write_text("\n".join(tool_requirements()) + "\n")
    return run([uv(), "pip", "compile", str(ROOT / "pyproject.toml"), "--extra", "lab",
                str(tools), "--quiet", "--no-header", "--no-annotate", "--python-platform",
                MACOS, "--python-version", python_version, "--only-binary", ":all:",
                "--prerelease", "disallow", "--color", "never"],
               cwd=workdir, env=dict(os.environ), timeout=INSTALL_TIMEOUT_S,
               what=f"resolving for {MACOS}")


def build(workdir: Path, compile_bytecode: bool = False) -> MacEnvironment:
    """Resolve for a Mac, install those versions into ``workdir/env``, then gpulab from a clean
    copy of the repository (``workdir/repo``) without its dependencies: on Linux its markers
    would ask for numba-cuda 0.30.

    ``compile_bytecode``: compile every installed module to bytecode, as pip does on a Mac, for
    an environment that starts many processes (Voila's kernels). uv does not by default, and
    where PYTHONDONTWRITEBYTECODE is set (the development machine) no process writes it, so
    each would compile its imports again: 5.3 CPU-seconds to import what a chapter's kernel
    imports, against 2.4 with the bytecode (compiling it all once: about 25)."""
    started = time.monotonic()
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    pins_text = macos_pins(workdir, version)
    pins = {name.lower(): pinned
            for name, pinned in re.findall(r"^([A-Za-z0-9_.\-]+)==(\S+)", pins_text, re.M)}
    assert pins.get("numba-cuda", "").startswith("0.20."), \
        f"macOS no longer resolves numba-cuda 0.20 (update this test and the doctor):\n{pins_text}"
    (workdir / "macos.txt").write_text(pins_text)

    repo = workdir / "repo"
    shutil.copytree(ROOT, repo, ignore=NOT_IN_A_CLONE)
    venv, home = workdir / "env", workdir / "home"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    env = clean_environment(venv, home)
    python = str(venv / "bin" / "python")
    install_env = {**env, "UV_CACHE_DIR": os.environ["UV_CACHE_DIR"]} \
        if os.environ.get("UV_CACHE_DIR") else env
    bytecode = ["--compile-bytecode"] if compile_bytecode else []
    run([uv(), "pip", "install", "--python", python, *bytecode, "--only-binary", ":all:", "-r",
         str(workdir / "macos.txt")], cwd=repo, env=install_env, timeout=INSTALL_TIMEOUT_S,
        what="installing the macOS versions")
    run([uv(), "pip", "install", "--python", python, *bytecode, "--no-deps", str(repo)],
        cwd=repo, env=install_env, timeout=INSTALL_TIMEOUT_S, what="installing gpulab")
    return MacEnvironment(python, env, repo, pins, time.monotonic() - started)
