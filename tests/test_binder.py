"""Binder, checked as far as a machine without Docker allows; and the one run of each learner
notebook in a `make test`.

mybinder.org builds the repository with repo2docker: a Python from ``binder/runtime.txt``,
``pip install -r binder/requirements.txt`` from the repository root, then ``binder/postBuild``
if there is one, and every command run through ``binder/start`` if there is one. The module's
fixture does the same in a fresh virtual environment (no system site-packages, nothing from this
checkout's .venv), with uv installing the requirements file in pip's place (a tenth of the time;
pip's install of the same extras is ``make lab``'s); the slow test checks what it installed
and runs ``gpulab doctor`` there (so versions that drifted on PyPI are named).

Binder's is the learner's environment (``make lab``'s .venv-lab is the same ``lab`` extra), so
each learner notebook (``course/NN_*.ipynb``) is executed here once, chapter 01 first, headless
with nbclient, and every check that needs an executed learner notebook reads that one run: no
cell raises (what nbval checked; ``make test`` no longer runs nbval on course/), no answer is
visible before its attempt and no output shows one (:mod:`tests/test_spoilers.py`'s
comparisons), and the memory of the notebook's kernel (and anything it starts), sampled every
0.1 s, stays under 1.5 GB: mybinder.org stops a session at 2 GB. When PyPI is unreachable, the
notebooks run in this test process's environment instead and the install test skips, saying so.

The fast tests check the links the README gives: Binder opens JupyterLab at a chapter, and each
chapter has its Voila dashboard link.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gpulab import device

# tests/ is not a package: the PyPI probe the platform tests share is loaded from its file.
_SPEC = importlib.util.spec_from_file_location(
    "macos_env", Path(__file__).parent / "platforms" / "macos_env.py")
macos_env = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(macos_env)

ROOT = Path(__file__).resolve().parents[1]
BINDER = ROOT / "binder"
CHAPTER = "course/01_dot_product.ipynb"  # the one the issue names; the others run after it
CHAPTERS = sorted(path.name for path in (ROOT / "course").glob("[0-9][0-9]_*.ipynb"))
README = (ROOT / "README.md").read_text()
# tests/ is not a package: the spoiler comparison is loaded from its file.
_SPEC = importlib.util.spec_from_file_location("spoiler_comparison",
                                               Path(__file__).with_name("test_spoilers.py"))
SPOILERS = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(SPOILERS)
PEAK_KERNEL_MEMORY_LIMIT_BYTES = 1.5e9  # mybinder.org's limit is 2 GB; keep a margin
SAMPLE_INTERVAL_S = 0.1
INSTALL_TIMEOUT_S = 900
SIZE_TOLERANCE = 0.15  # as tests/test_environments.py allows for the README's sizes
EXECUTE_TIMEOUT_S = 180  # per chapter; a sim-tier chapter must finish in 60 s
# What repo2docker does not copy into the image (and what a fresh clone does not have).
NOT_IN_A_CLONE = shutil.ignore_patterns(
    ".git", ".venv", ".venv-lab", "artifacts", "build", "*.egg-info", "__pycache__",
    ".pytest_cache", ".ruff_cache", ".hypothesis", ".ipynb_checkpoints",
)

# Executes a notebook inside the Binder environment (run by *that* environment's Python) and
# writes it, with its outputs, where the test reads it. Every cell runs, as a learner's
# "Run All" with errors shown; the test reports the first error.
EXECUTE_SCRIPT = """
import json, sys, time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

path, executed = Path(sys.argv[1]), Path(sys.argv[2])
notebook = nbformat.read(path, as_version=4)
client = NotebookClient(notebook, timeout={timeout}, kernel_name="python3", allow_errors=True,
                        resources={{"metadata": {{"path": str(path.parent)}}}})
started = time.perf_counter()
client.execute()
elapsed_s = time.perf_counter() - started
nbformat.write(notebook, executed)
outputs = [output.get("text", "") for cell in notebook.cells if cell.cell_type == "code"
           for output in cell.get("outputs", [])]
print(json.dumps({{"elapsed_s": elapsed_s, "text": "".join(outputs)}}))
"""


def _runtime_python() -> tuple[str, str]:
    """The interpreter for binder/runtime.txt's version, and a note on which was chosen."""
    wanted = (BINDER / "runtime.txt").read_text().strip().removeprefix("python-")
    if f"{sys.version_info.major}.{sys.version_info.minor}" == wanted:
        return sys.executable, f"Python {wanted}, as binder/runtime.txt asks"
    found = shutil.which(f"python{wanted}")
    if found:
        return found, f"Python {wanted} ({found}), as binder/runtime.txt asks"
    return sys.executable, (f"binder/runtime.txt asks for Python {wanted}, not found here: "
                            f"using Python {sys.version_info.major}.{sys.version_info.minor}")


def _installer(venv_python: str) -> list[str]:
    """The install command for the new environment: uv's (the dev extra holds it), else pip."""
    try:
        from uv import find_uv_bin
    except ImportError:
        return [venv_python, "-m", "pip", "install"]
    # --compile-bytecode: the .pyc files pip writes, so the size measured is the same
    return [find_uv_bin(), "pip", "install", "--python", venv_python, "--compile-bytecode"]


def _clean_environment(venv: Path, home: Path) -> dict:
    """Only the new environment on PATH, no settings from the test process or this checkout."""
    env = {key: value for key, value in os.environ.items()
           if key not in {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "MPLBACKEND",
                          "JUPYTER_PATH", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR",
                          "NUMBA_ENABLE_CUDASIM", "GPULAB_DEVICE"}}
    env.update(
        PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        VIRTUAL_ENV=str(venv),
        JUPYTER_CONFIG_DIR=str(home / "config"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        IPYTHONDIR=str(home / "ipython"),
        PIP_PROGRESS_BAR="off",
    )
    if device.PROBE.device_count:  # Binder has no GPU: emulate that here too
        env["GPULAB_DEVICE"] = "sim"
    return env


def _run(command, *, cwd: Path, env: dict, timeout: float, what: str) -> str:
    completed = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                               timeout=timeout, check=False)
    if completed.returncode != 0:
        output = (completed.stdout + completed.stderr)[-4000:]
        if what == "pip install":
            reachable, why = macos_env.pypi_reachable()
            if not reachable:
                pytest.skip(f"pip could not install binder/requirements.txt and PyPI is not "
                            f"reachable from here ({why}); pip said:\n{output}")
        pytest.fail(f"{what} failed (exit status {completed.returncode}):\n{output}")
    return completed.stdout


def _execute_sampling_memory(command, *, cwd: Path, env: dict):
    """Run ``command`` (which starts a kernel) and sample its children's memory.

    Returns (stdout, peak bytes, the programs (argv[0]) of the processes seen). The peak is the
    largest sum of resident set sizes over the child process tree (kernel, and whatever it
    starts), sampled every SAMPLE_INTERVAL_S: shared pages count once per process, so it
    errs on the high side."""
    psutil = pytest.importorskip("psutil", reason="psutil measures the kernel's memory")
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    parent = psutil.Process(process.pid)
    peak_bytes, programs = 0, set()
    deadline = time.monotonic() + EXECUTE_TIMEOUT_S
    while process.poll() is None:
        if time.monotonic() > deadline:
            for child in parent.children(recursive=True):  # the kernel, then the script
                child.kill()
            process.kill()
            process.wait()
            pytest.fail(f"{command[-1]} did not finish within {EXECUTE_TIMEOUT_S} s")
        total = 0
        try:
            children = parent.children(recursive=True)
        except psutil.NoSuchProcess:
            break
        for child in children:
            try:
                total += child.memory_info().rss
                programs.update(child.cmdline()[:1])  # empty for a process that is exiting
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        peak_bytes = max(peak_bytes, total)
        time.sleep(SAMPLE_INTERVAL_S)
    stdout, stderr = process.communicate()
    if process.returncode != 0:
        pytest.fail(f"executing the notebook failed (exit status {process.returncode}):\n"
                    f"{stderr[-4000:]}")
    return stdout, peak_bytes, programs


@dataclass
class LearnerEnvironment:
    """Where the learner notebooks run: the Binder environment, or (when it cannot be built
    because PyPI is unreachable) this test process's own, with the reason."""

    python: str
    env: dict
    repo: Path
    prefix: list[str]  # binder/start, through which repo2docker runs every command
    binder: bool
    note: str
    facts: dict = field(default_factory=dict)  # what the install checks read


@pytest.fixture(scope="module")
def learner_environment(tmp_path_factory) -> LearnerEnvironment:
    """binder/requirements.txt installed as repo2docker installs it, once for this module."""
    started = time.monotonic()
    tmp_path = tmp_path_factory.mktemp("binder")
    repo = tmp_path / "repo"  # what repo2docker copies into the image
    shutil.copytree(ROOT, repo, ignore=NOT_IN_A_CLONE)
    venv, home = tmp_path / "env", tmp_path / "home"
    python, python_note = _runtime_python()
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    env = _clean_environment(venv, home)
    venv_python = str(venv / "bin" / "python")

    def through_start(repository: Path) -> list[str]:
        start = repository / "binder" / "start"
        return ["bash", str(start)] if start.exists() else []

    # repo2docker: pip install -r binder/requirements.txt, from the repository's root. uv
    # installs the same file here (the newest versions it allows, as pip picks them) in about
    # 5 s against pip's 43 s (2 cores); pip's own install of the same extras is `make lab`'s.
    # nbclient and ipykernel run the notebook headless here (JupyterLab brings them on Binder).
    try:
        _run([*_installer(venv_python), "-r", "binder/requirements.txt", "nbclient",
              "ipykernel"], cwd=repo, env=env, timeout=INSTALL_TIMEOUT_S, what="pip install")
    except pytest.skip.Exception as unreachable:
        # No Binder environment: the learner notebooks still run once, in this environment,
        # so that their errors and spoilers are still checked; the install test skips.
        here = {key: value for key, value in os.environ.items() if key != "GPULAB_DEVICE"}
        if device.PROBE.device_count:
            here["GPULAB_DEVICE"] = "sim"
        return LearnerEnvironment(sys.executable, here, ROOT, through_start(ROOT), False,
                                  str(unreachable.msg))
    # On Binder the first import of each gpulab module writes its bytecode; where
    # PYTHONDONTWRITEBYTECODE is set (the development machine) nothing would, and each
    # chapter's kernel would compile gpulab again. The editable install leaves it to this.
    subprocess.run([venv_python, "-m", "compileall", "-q", str(repo / "gpulab")], check=True,
                   env=env, capture_output=True)
    installed_s = time.monotonic() - started
    post_build = repo / "binder" / "postBuild"
    if post_build.exists():
        _run(["bash", str(post_build)], cwd=repo, env=env, timeout=INSTALL_TIMEOUT_S,
             what="binder/postBuild")
    freeze = _run([venv_python, "-m", "pip", "freeze"], cwd=repo, env=env, timeout=120,
                  what="pip freeze")
    measured_gib = sum(path.lstat().st_blocks * 512 for path in venv.rglob("*")
                       if path.is_file() and not path.is_symlink()) / 2**30  # as du counts
    doctor = subprocess.run([venv_python, "-m", "gpulab.doctor"], cwd=repo, env=env,
                            capture_output=True, text=True, timeout=300, check=False)
    return LearnerEnvironment(
        venv_python, env, repo, through_start(repo), True,
        f"{python_note}; the install took {installed_s:.0f} s, {measured_gib:.2f} GiB",
        {"freeze": freeze, "measured_gib": measured_gib, "doctor": doctor})


@pytest.mark.binder
@pytest.mark.slow
def test_binder_environment_is_the_learners_and_passes_the_doctor(learner_environment):
    if not learner_environment.binder:
        pytest.skip(learner_environment.note)
    facts = learner_environment.facts
    freeze = facts["freeze"]
    for needed in ("jupyterlab", "voila", "ipywidgets", "jupyterlab_widgets", "numba-cuda",
                   "cuda-toolkit"):
        assert re.search(rf"^{needed}[=@ ]", freeze, re.IGNORECASE | re.MULTILINE), \
            f"binder/requirements.txt did not install {needed}"
    # Binder is the learner's environment (`make lab`'s .venv-lab): no test or grading tools,
    # and the size the README gives for it.
    for absent in ("nbgrader", "pytest", "playwright", "ruff"):
        assert not re.search(rf"^{absent}[=@ ]", freeze, re.IGNORECASE | re.MULTILINE), \
            f"binder/requirements.txt installs {absent}, which learners do not need"
    stated_gib = float(re.search(r"^\| `\.venv-lab` \|.*\| (\d+(?:\.\d+)?) GiB \|$", README,
                                 re.MULTILINE).group(1))
    measured_gib = facts["measured_gib"]
    if sys.platform == "linux":  # the README's sizes are Linux x86_64's
        assert abs(measured_gib - stated_gib) <= SIZE_TOLERANCE * stated_gib, (
            f"the learner's environment holds {measured_gib:.2f} GiB; the README says "
            f"{stated_gib} GiB: update its table of environments")
    # What was resolved today is within the tested versions, with the widgets' front end.
    doctor = facts["doctor"]
    assert doctor.returncode == 0, f"gpulab doctor in the Binder environment:\n{doctor.stdout}" \
                                   f"{doctor.stderr[-2000:]}"
    print(f"Binder emulation: {learner_environment.note}; gpulab doctor: ok")


def _first_error(notebook: dict) -> str | None:
    """The first error a cell showed (its traceback without terminal colours), and how many
    cells showed one; None when no cell raised."""
    errors = [output for cell in notebook["cells"] if cell["cell_type"] == "code"
              for output in cell.get("outputs", []) if output.get("output_type") == "error"]
    if not errors:
        return None
    traceback = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(errors[0].get("traceback", [])))
    return f"{len(errors)} cell(s) raised; the first:\n{traceback[-3000:]}"


def _checks_that_passed_untouched(chapter: str, notebook: dict) -> list[str]:
    """The graded check cells of the untouched learner notebook that did not say "not attempted
    yet" or "not yet right": a check an untouched notebook passes gives points for nothing (the
    blank submission of tests/test_nbgrader.py, read from this run for every chapter)."""
    problems = []
    for cell in notebook["cells"]:
        grading = cell.get("metadata", {}).get("nbgrader", {})
        if not grading.get("grade"):
            continue
        text = "".join("".join(output.get("text", "")) for output in cell.get("outputs", []))
        if "PASSED" in text.replace("NOT ATTEMPTED", "") or not re.search(
                r"NOT ATTEMPTED YET|NOT YET RIGHT", text):
            problems.append(f"{chapter}: the untouched check cell {grading['grade_id']} did not "
                            f"fail: {text.strip()[:300]!r}")
    return problems


@pytest.mark.binder
@pytest.mark.notebook
@pytest.mark.parametrize("chapter", [CHAPTER.removeprefix("course/")]
                         + [name for name in CHAPTERS if not CHAPTER.endswith(name)])
def test_learner_notebook_runs_once_in_the_learners_environment(learner_environment, chapter,
                                                                tmp_path):
    """The chapter's one execution in a make test (chapter 01 first): no cell raises (what
    nbval checked), no check cell passes untouched (it would give points for nothing:
    nbgrader's blank submission, read here for every chapter), no answer is visible before its
    attempt (tests/test_spoilers.py's comparison, on the sources and everything the cells
    showed), no output anywhere shows an answer or what compare_yours keeps until a check
    passes, and the kernel's peak memory stays under the margin, with the Binder environment's
    own Python."""
    where = learner_environment
    script = tmp_path / "execute.py"
    script.write_text(EXECUTE_SCRIPT.format(timeout=EXECUTE_TIMEOUT_S))
    executed = tmp_path / chapter
    command = [*where.prefix, where.python, str(script), str(where.repo / "course" / chapter),
               str(executed)]
    stdout, peak_bytes, programs = _execute_sampling_memory(command, cwd=where.repo,
                                                            env=where.env)
    result = json.loads(stdout.strip().splitlines()[-1])
    notebook = json.loads(executed.read_text(encoding="utf-8"))
    print(f"{chapter}: {result['elapsed_s']:.1f} s, peak kernel memory {peak_bytes / 1e6:.0f} MB"
          f" ({'Binder environment: ' if where.binder else ''}{where.note})")
    problems = []
    error = _first_error(notebook)
    if error is not None:
        problems.append(f"{chapter} raised in the {'Binder' if where.binder else 'test'} "
                        f"environment: {error}")
    problems += _checks_that_passed_untouched(chapter, notebook)
    problems += [f"answer visible before the attempt: {p}"
                 for p in SPOILERS.answers_visible_before_the_attempts(chapter, notebook)]
    problems += [f"answer shown while no check has passed: {p}"
                 for p in SPOILERS.answers_shown_in_the_outputs(chapter, notebook)]
    if not 0 < peak_bytes < PEAK_KERNEL_MEMORY_LIMIT_BYTES:
        problems.append(f"{chapter}: the kernel peaked at {peak_bytes / 1e6:.0f} MB, over "
                        f"the {PEAK_KERNEL_MEMORY_LIMIT_BYTES / 1e6:.0f} MB this course "
                        "allows on Binder (its limit is 2 GB)")
    if where.binder and where.python not in programs:
        problems.append(f"{chapter}: the kernel did not run with the Binder environment's "
                        f"Python ({where.python}) but {sorted(programs)}")
    if CHAPTER.endswith(chapter):
        if "gpulab tier : sim" not in result["text"]:
            problems.append("chapter 01 did not run in the sim tier")
        if "NOT ATTEMPTED YET" not in result["text"]:
            problems.append("chapter 01's checks printed no hint")
    assert not problems, "\n".join(problems)


# --- the links ---------------------------------------------------------------------------------


def test_readme_binder_links_open_jupyterlab_at_a_chapter():
    links = re.findall(r"https://mybinder\.org/v2/gh/[^)\s]+", README)
    assert links, "the README has no Binder link"
    for link in links:
        target = re.search(r"[?&]urlpath=(?:lab/tree|voila/render)/([^&)\s]+)", link)
        assert target, f"{link} opens neither JupyterLab (urlpath=lab/tree/...) nor Voila"
        assert (ROOT / target.group(1)).is_file(), f"{link} opens a notebook that does not exist"
    for chapter in CHAPTERS:
        assert any(link.endswith(f"lab/tree/course/{chapter}") for link in links), \
            f"the README has no Binder link to {chapter}"


def test_readme_links_each_chapter_as_a_voila_dashboard():
    targets = re.findall(r"voila/render/([\w/]*\d\d_\w+\.ipynb)", README)  # not NN_name
    for target in targets:
        assert (ROOT / target).is_file(), f"the README's Voila link opens {target}: missing"
    for chapter in CHAPTERS:
        assert f"course/{chapter}" in targets, \
            f"the README has no Voila link (voila/render/course/{chapter}) for {chapter}"
