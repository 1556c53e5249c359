"""The closest this Linux CI gets to a Mac: the versions macOS resolves, in a fresh environment.

A Mac gets numba-cuda 0.20.1 (the last release with a macOS wheel: pure Python, without
cuda-bindings or any CUDA toolkit wheel) and numba below 0.66 (see pyproject.toml). This test
asks uv what a Mac (arm64, this test's Python version) would install, installs exactly those
versions into a new virtual environment here (no system site-packages, nothing from .venv), and
in it

- checks what a Mac has: numba-cuda 0.20, no ``cuda.bindings``, no toolkit wheels;
- runs the simulator-tier kernel tests (``tests/kernels``, without the ptx and gpu ones);
- asks ``gpulab doctor`` with the platform set to macOS: every check must pass;
- asks for PTX and expects the plain "needs the CUDA toolkit wheels" error, not a traceback;
- executes every learner notebook (``course/NN_*.ipynb``) headless with nbclient in the
  simulator tier, two at a time.

The runner tools (pytest, nbclient, ipykernel) are resolved for macOS too. uv installs them
(seconds from its cache); a learner's pip gets the same versions.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytestmark = [pytest.mark.platforms, pytest.mark.slow]

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
TESTS_TIMEOUT_S = 600
CHAPTER_TIMEOUT_S = 300  # per notebook; the design asks under 60 s in the sim tier
WORKERS = 2

EXECUTE_SCRIPT = r"""
import json, re, sys, time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

path = Path(sys.argv[1])
notebook = nbformat.read(path, as_version=4)
client = NotebookClient(notebook, timeout=int(sys.argv[2]), kernel_name="python3",
                        resources={"metadata": {"path": str(path.parent)}})
started = time.perf_counter()
error = None
try:
    client.execute()
except CellExecutionError as failure:
    error = re.sub(r"\x1b\[[0-9;]*m", "", str(failure))[-3000:]  # no terminal colours
text = "".join(output.get("text", "") for cell in notebook.cells if cell.cell_type == "code"
               for output in cell.get("outputs", []))
print(json.dumps({"elapsed_s": time.perf_counter() - started, "error": error, "text": text}))
"""

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


def _uv() -> str:
    try:
        import uv
    except ImportError:
        found = shutil.which("uv")
        if found is None:
            pytest.fail("uv is not installed: it is in the dev extra (pip install -e '.[dev]')")
        return found
    return uv.find_uv_bin()


def _clean_environment(venv: Path, home: Path) -> dict:
    """Only the new environment on PATH, no settings from the test process or this checkout."""
    env = {key: value for key, value in os.environ.items()
           if key not in {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "MPLBACKEND",
                          "JUPYTER_PATH", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR",
                          "NUMBA_ENABLE_CUDASIM", "NUMBA_CUDA_USE_NVIDIA_BINDING",
                          "GPULAB_DEVICE", "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER"}}
    env.update(
        PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        VIRTUAL_ENV=str(venv),
        JUPYTER_CONFIG_DIR=str(home / "config"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        IPYTHONDIR=str(home / "ipython"),
        MPLBACKEND="Agg",
        GPULAB_DEVICE="sim",  # a Mac has no GPU; on a CI machine with one, emulate that
    )
    return env


def _run(command, *, cwd: Path, env: dict, timeout: float, what: str) -> str:
    completed = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                               timeout=timeout, check=False)
    if completed.returncode != 0:
        pytest.fail(f"{what} failed (exit status {completed.returncode}):\n"
                    f"{(completed.stdout + completed.stderr)[-5000:]}")
    return completed.stdout


def _tool_requirements() -> list[str]:
    """The runner tools with the lower bounds the dev extra gives them."""
    text = (ROOT / "pyproject.toml").read_text()
    found = []
    for tool in TOOLS:
        match = re.search(rf'"({re.escape(tool)}\s*[<>=!~][^"]*)"', text)
        found.append(match.group(1) if match else tool)
    return found


def _macos_pins(uv: str, workdir: Path, python_version: str) -> str:
    """What a Mac would install for gpulab and the runner tools, as ``name==version`` lines."""
    tools = workdir / "tools.in"
    tools.write_text("\n".join(_tool_requirements()) + "\n")
    return _run([uv, "pip", "compile", str(ROOT / "pyproject.toml"), str(tools), "--quiet",
                 "--no-header", "--no-annotate", "--python-platform", MACOS, "--python-version",
                 python_version, "--only-binary", ":all:", "--prerelease", "disallow",
                 "--color", "never"],
                cwd=workdir, env=dict(os.environ), timeout=INSTALL_TIMEOUT_S,
                what=f"resolving for {MACOS}")


def _execute_chapters(python: str, chapters: list[Path], script: Path, cwd: Path,
                      env: dict) -> list[dict]:
    def execute(chapter: Path) -> dict:
        completed = subprocess.run([python, str(script), str(chapter), str(CHAPTER_TIMEOUT_S)],
                                   cwd=cwd, env=env, capture_output=True, text=True,
                                   timeout=CHAPTER_TIMEOUT_S + 120, check=False)
        if completed.returncode != 0:
            return {"chapter": chapter.name, "elapsed_s": float("nan"),
                    "error": completed.stderr[-3000:], "text": ""}
        result = json.loads(completed.stdout.strip().splitlines()[-1])
        return {"chapter": chapter.name, **result}

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        return list(pool.map(execute, chapters))


def test_the_versions_macos_gets_run_the_simulator_tests_and_every_chapter(tmp_path):
    started = time.monotonic()
    uv = _uv()
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    pins = _macos_pins(uv, tmp_path, version)
    pinned = dict(re.findall(r"^([A-Za-z0-9_.\-]+)==(\S+)", pins, re.MULTILINE))
    assert pinned.get("numba-cuda", "").startswith("0.20."), \
        f"macOS no longer resolves numba-cuda 0.20 (update this test and the doctor):\n{pins}"
    (tmp_path / "macos.txt").write_text(pins)

    repo = tmp_path / "repo"  # a clean copy: nothing of this checkout's .venv or build
    shutil.copytree(ROOT, repo, ignore=NOT_IN_A_CLONE)
    venv, home = tmp_path / "env", tmp_path / "home"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    env = _clean_environment(venv, home)
    python = str(venv / "bin" / "python")
    install_env = {**env, "UV_CACHE_DIR": os.environ.get("UV_CACHE_DIR", "")} \
        if os.environ.get("UV_CACHE_DIR") else env
    _run([uv, "pip", "install", "--python", python, "--only-binary", ":all:", "-r",
          str(tmp_path / "macos.txt")], cwd=repo, env=install_env, timeout=INSTALL_TIMEOUT_S,
         what="installing the macOS versions")
    # gpulab itself without its dependencies: on Linux its markers would ask for numba-cuda 0.30.
    _run([uv, "pip", "install", "--python", python, "--no-deps", str(repo)], cwd=repo,
         env=install_env, timeout=INSTALL_TIMEOUT_S, what="installing gpulab")
    installed_s = time.monotonic() - started

    facts = json.loads(_run([python, "-c", CHECK_SCRIPT], cwd=tmp_path, env=env, timeout=300,
                            what="gpulab in the macOS environment").strip().splitlines()[-1])
    assert facts["numba_cuda"].startswith("0.20.") and not facts["cuda_bindings"], facts
    assert facts["toolkit"] is None and facts["tier"] == "sim", facts
    assert facts["doctor_ok"], f"gpulab doctor, as on a Mac:\n{facts['report']}"
    assert "platform" in facts["report"] and "simulator tier" in facts["report"], facts["report"]
    assert facts["ptx_error"] and "CUDA toolkit wheels" in facts["ptx_error"], facts

    tests_started = time.monotonic()
    kernel_tests = [str(path.relative_to(repo)) for path in [repo / "tests" / "kernels"]
                    if path.is_dir()]
    assert kernel_tests, "tests/kernels is gone: point this test at the simulator kernel tests"
    output = _run([python, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", str(WORKERS),
                   "--timeout", "300", "-m", "not ptx and not gpu and not slow", *kernel_tests],
                  cwd=repo, env=env, timeout=TESTS_TIMEOUT_S, what="the simulator kernel tests")
    summary = output.strip().splitlines()[-1]
    tests_s = time.monotonic() - tests_started

    chapters = sorted((repo / "course").glob("[0-9][0-9]_*.ipynb"))
    assert chapters, "no chapter notebooks found in course/"
    script = tmp_path / "execute.py"
    script.write_text(EXECUTE_SCRIPT)
    chapters_started = time.monotonic()
    results = _execute_chapters(python, chapters, script, repo, env)
    chapters_s = time.monotonic() - chapters_started
    lines = [f"  {r['chapter']:36s} {r['elapsed_s']:6.1f} s" for r in results]
    print(f"macOS versions: numba {facts['numba']}, numba-cuda {facts['numba_cuda']}, Python "
          f"{version}; install {installed_s:.0f} s; kernel tests {tests_s:.0f} s ({summary}); "
          f"{len(chapters)} chapters {chapters_s:.0f} s, {WORKERS} at a time; total "
          f"{time.monotonic() - started:.0f} s", *lines, sep="\n")
    failed = [f"{r['chapter']} failed with the macOS versions:\n{r['error']}"
              for r in results if r["error"] is not None]
    assert not failed, "\n\n".join(failed)
    assert all("gpulab tier : sim" in r["text"] for r in results
               if r["chapter"].startswith("01_")), "chapter 01 did not run in the sim tier"
