"""The two environments the Makefile makes, and what the README says about them.

- ``make lab`` makes ``.venv-lab`` with ``.[<cuda>,lab]``: JupyterLab and Voila and nothing for
  testing or grading, so the learner's JupyterLab has no nbgrader menus. ``make test`` and
  ``make instructor`` make ``.venv`` with ``.[<cuda>,dev]``. Each has its own stamp, so either
  order makes both, and neither installs into the other.
- The ``lab`` extra, resolved from PyPI for Linux and macOS as a learner's pip would, brings no
  nbgrader, pytest, playwright, ruff, hypothesis, nbval or uv (while ``dev`` does bring
  nbgrader, so the check can tell the two apart).
- The README's table of environments gives each one's size; this checkout's ``.venv``, when it
  is the one ``make test`` made, is measured against it here, and ``tests/test_binder.py``
  measures a fresh learner environment (Binder's is the same install).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
EXTRAS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
# What only developers and instructors need: none of it may reach a learner's environment.
NOT_FOR_LEARNERS = re.compile(r"^(nbgrader|pytest(-.*)?|playwright|ruff|hypothesis|nbval|uv)$")
# One row of the README's table: | `.venv-lab` | `make lab` | ... | 1.4 GiB |
SIZE_ROW = re.compile(r"^\| `(\.venv[\w-]*)` \| (.*?) \| .*? \| (\d+(?:\.\d+)?) GiB \|$", re.M)
SIZE_TOLERANCE = 0.15  # a release of a dependency grows or shrinks it; the README rounds to 0.1

# Stands in for Python in the Makefile tests: logs which program ran with which arguments,
# fakes venv and the toolkit.
FAKE_PYTHON = """#!/bin/sh
echo "$0 $*" >> "$FAKE_LOG"
case "$1 $2" in
  "-m venv") mkdir -p "$3/bin" && cp "$0" "$3/bin/python" ;;
  "-m gpulab.toolkit") echo "$FAKE_EXTRA" ;;
esac
exit 0
"""


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    return _normalise(re.match(r"[A-Za-z0-9_.\-]+", requirement).group(0))


# --- the Makefile ------------------------------------------------------------------------------


def make_in_copy(tmp_path: Path, *targets: str, extra: str = "cu12") -> list[str]:
    """Run ``make TARGET`` for each target in a copy of the Makefile with a fake Python; the
    ``pip install -e`` (or ``uv pip install -e``) lines it ran, as 'VENV .[extras] by pip' (or
    'by uv')."""
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
    for target in targets:
        result = subprocess.run(["make", target, f"PYTHON={fake}"], cwd=tmp_path, env=env,
                                capture_output=True, text=True, timeout=60, check=False)
        assert result.returncode == 0, result.stdout + result.stderr
    installs = []
    for line in log.read_text().splitlines() if log.exists() else []:
        program, _, arguments = line.partition(" ")
        words = arguments.split()
        if words[:3] in (["-m", "pip", "install"], ["-m", "uv", "pip"]) and "-e" in words:
            venv = Path(program).parents[1].name
            installs.append(f"{venv} {words[words.index('-e') + 1]} by {words[1]}")
    return installs


@pytest.mark.parametrize("extra, cuda", [("cu12", "cu12,"), ("none", "")])
def test_make_lab_installs_the_lab_extra_only_in_its_own_environment(tmp_path, extra, cuda):
    # pip, as Binder and a learner's own pip install it
    assert make_in_copy(tmp_path, "install-lab", extra=extra) == [
        f".venv-lab .[{cuda}lab] by pip"]


def test_make_test_installs_the_dev_extra_in_dot_venv(tmp_path):
    # uv, which the dev extra holds: the same install in half pip's time
    assert make_in_copy(tmp_path, "install") == [".venv .[cu12,dev] by uv"]


@pytest.mark.parametrize("order", [("install", "install-lab"), ("install-lab", "install")])
def test_either_order_makes_both_environments_once(tmp_path, order):
    """``make lab`` after ``make test`` (or the other way round) makes the other environment,
    and a second run of either installs nothing."""
    installs = make_in_copy(tmp_path, *order, *order)
    assert sorted(installs) == [".venv .[cu12,dev] by uv", ".venv-lab .[cu12,lab] by pip"]
    assert (tmp_path / ".venv" / ".installed").is_file()
    assert (tmp_path / ".venv-lab" / ".installed").is_file()


def test_the_targets_run_jupyterlab_from_the_right_environment():
    if shutil.which("make") is None:
        pytest.skip("make is not installed")

    def commands(target: str) -> str:
        return subprocess.run(["make", "-n", "-W", "pyproject.toml", target], cwd=ROOT,
                              capture_output=True, text=True, timeout=60, check=True).stdout

    lab, instructor = commands("lab"), commands("instructor")
    assert ".venv-lab/bin/jupyter lab" in lab and "course/00_welcome.ipynb" in lab
    assert "-e \".[$extras]\"" in lab and "echo lab" in lab and "dev" not in lab
    assert ".venv/bin/jupyter lab" in instructor and "solutions/00_welcome.ipynb" in instructor
    assert f"PATH=\"{ROOT}/.venv/bin:" in instructor  # nbgrader in its terminals, no activating
    assert ".venv/.installed" in commands("test") and ".venv-lab" not in commands("test")


def test_make_test_hands_out_the_longest_files_first():
    """tests/conftest.py puts the longest files first and ``--dist loadfile`` hands whole files
    to the workers in that order; but xdist (3.6+) re-sorts the files by how many tests each
    holds unless told not to, which put the macOS versions' one 2.5-minute test last, running
    alone on one core at the end of the run."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    dry_run = subprocess.run(["make", "-n", "-W", "pyproject.toml", "test"], cwd=ROOT,
                             capture_output=True, text=True, timeout=60, check=True).stdout
    pytest_command, = (line for line in dry_run.splitlines() if " -m pytest " in line)
    assert "--dist loadfile" in pytest_command and "--no-loadscope-reorder" in pytest_command


def test_git_ignores_both_environments():
    ignored = (ROOT / ".gitignore").read_text().split()
    assert ".venv/" in ignored and ".venv-lab/" in ignored


# --- what the lab extra brings -----------------------------------------------------------------


def test_the_lab_extra_names_no_test_or_grading_tool():
    lab = {_requirement_name(requirement) for requirement in EXTRAS["lab"]}
    assert {"jupyterlab", "voila"} <= lab
    assert not {name for name in lab if NOT_FOR_LEARNERS.match(name)}
    dev = {_requirement_name(requirement) for requirement in EXTRAS["dev"]}
    assert {"nbgrader", "pytest", "playwright", "ruff"} <= dev
    assert lab <= dev, "the tests need what the learner gets (JupyterLab, Voila)"


def _uv() -> str:
    try:
        import uv
    except ImportError:
        pytest.skip("uv is not installed (it is in the dev extra)")
    return uv.find_uv_bin()


def _resolve(platform: str, extras: tuple[str, ...]) -> subprocess.CompletedProcess:
    command = [_uv(), "pip", "compile", str(ROOT / "pyproject.toml"), "--quiet", "--no-header",
               "--no-annotate", "--python-platform", platform, "--python-version", "3.11",
               "--only-binary", ":all:", "--color", "never",
               *(f"--extra={extra}" for extra in extras)]
    env = {key: value for key, value in os.environ.items() if key != "VIRTUAL_ENV"}
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=600,
                          check=False, cwd=ROOT)


def _pins(resolved: subprocess.CompletedProcess) -> set[str]:
    return {_normalise(name) for name in
            re.findall(r"^([A-Za-z0-9_.\-]+)==", resolved.stdout, re.MULTILINE)}


def _skip_unless_pypi_answers(resolved: subprocess.CompletedProcess) -> None:
    if resolved.returncode == 0:
        return
    try:
        urllib.request.urlopen("https://pypi.org/simple/voila/", timeout=15).close()
    except (urllib.error.URLError, OSError) as error:
        pytest.skip(f"the requirements did not resolve and PyPI is unreachable ({error})")


@pytest.mark.platforms
@pytest.mark.parametrize("platform, extras", [
    ("x86_64-manylinux_2_28", ("cu13", "lab")),
    ("aarch64-apple-darwin", ("lab",)),
], ids=["linux-x86_64-cu13", "macos-arm64"])
def test_the_learner_environment_resolves_without_test_or_grading_tools(platform, extras):
    """What ``make lab`` installs, all of it (dependencies of dependencies too), as PyPI's
    wheels for Python 3.11 resolve it today."""
    learner = _resolve(platform, extras)
    _skip_unless_pypi_answers(learner)
    assert learner.returncode == 0, learner.stderr[-3000:]
    pins = _pins(learner)
    assert {"jupyterlab", "voila", "ipywidgets", "numba-cuda"} <= pins
    assert not sorted(name for name in pins if NOT_FOR_LEARNERS.match(name)), pins
    developer = _resolve(platform, (*extras[:-1], "dev"))
    assert developer.returncode == 0, developer.stderr[-3000:]
    assert {"nbgrader", "pytest", "playwright"} <= _pins(developer)


# --- the README's sizes ------------------------------------------------------------------------


def readme_sizes() -> dict[str, float]:
    """{environment folder: GiB} from the README's table of environments."""
    return {folder: float(size) for folder, _, size in SIZE_ROW.findall(README)}


def installed_bytes(folder: Path) -> int:
    """The disk space a folder's files take, as ``du`` counts it (allocated blocks)."""
    total = 0
    for directory, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(directory, name)).st_blocks * 512
            except OSError:  # removed while walking
                continue
    return total


def test_the_readme_gives_both_environments_with_their_commands_and_sizes():
    rows = {folder: commands for folder, commands, _ in SIZE_ROW.findall(README)}
    assert set(rows) == {".venv-lab", ".venv"}, rows
    assert "`make lab`" in rows[".venv-lab"]
    assert "`make test`" in rows[".venv"] and "`make instructor`" in rows[".venv"]
    sizes = readme_sizes()
    assert 0.3 < sizes[".venv-lab"] < sizes[".venv"] < 5
    assert "~1 GB" not in README


@pytest.mark.skipif(sys.platform != "linux", reason="the README's sizes are Linux x86_64's")
def test_this_checkouts_dev_environment_has_the_size_the_readme_gives():
    venv = ROOT / ".venv"
    if Path(sys.prefix).resolve() != venv.resolve() or not (venv / ".installed").is_file():
        pytest.skip(f"the tests run from {sys.prefix}, not from the .venv `make test` makes")
    measured = installed_bytes(venv) / 2**30
    stated = readme_sizes()[".venv"]
    assert abs(measured - stated) <= SIZE_TOLERANCE * stated, (
        f".venv holds {measured:.2f} GiB; the README says {stated} GiB: measure it again "
        "(du -sh .venv) and update the README's table of environments")
