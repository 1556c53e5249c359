"""The course installs on every learner's laptop: its requirements resolve for each platform.

CI runs on Linux only, so this test asks a resolver what a Mac, a Windows laptop and a Linux
machine (x86_64 and aarch64) would install, for every supported Python, from PyPI and from
wheels only (``--only-binary :all:``: a learner has no compiler for numba or NumPy). A
requirement that cannot be met on a platform fails its case here.

The resolver is uv (``uv pip compile --python-platform``): it evaluates environment markers
(``sys_platform == 'darwin'``) for the *target* platform. ``pip download --platform`` cannot
stand in for it: pip evaluates markers against the machine it runs on ("Ignoring ...: markers
don't match your environment"), so it would resolve a Mac with the Linux requirements.

What each platform installs is what its path in the README installs:

- macOS (arm64 and x86_64): ``.[lab,dev]``, all that ``make lab`` and ``make test`` install
  there (``tests/test_environments.py`` resolves ``lab`` alone); also ``.[cu13,...]``,
  which must install no CUDA toolkit wheel (none exists for macOS).
- Windows and Linux: ``.[cu12,...]`` and ``.[cu13,...]``, one per CUDA driver generation.

All cases are resolved at once, in parallel, by one module fixture; each case is its own test.
The resolutions mostly wait on PyPI (about 50 of them: 1.5 min on a warm uv cache, 5.5 min on
a fresh machine's empty one, about a CPU-second each), so a ``make test`` starts them when the
session starts, in a thread of pytest's main process (``tests/conftest.py``, :func:`prefetch`):
they wait beside the other tests instead of holding a worker, and the fixture reads what that
thread wrote (or resolves by itself, where the session did not start them).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

# tests/ is not a package: the platform tests' shared helpers (finding uv, asking PyPI) are
# loaded from their file.
_SPEC = importlib.util.spec_from_file_location("macos_env",
                                               Path(__file__).with_name("macos_env.py"))
macos_env = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(macos_env)

pytestmark = [pytest.mark.platforms, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = ROOT / "pyproject.toml"

# Every CPython the project supports: from requires-python's lower bound to the newest release.
SUPPORTED_PYTHONS = ("3.10", "3.11", "3.12", "3.13", "3.14")
# Each platform as uv names it (a target triple), and the extras its README path installs.
# macOS: Apple Silicon (arm64, macOS 13 and newer) and Intel (x86_64).
PLATFORMS = {
    "macos-arm64": "aarch64-apple-darwin",
    "macos-x86_64": "x86_64-apple-darwin",
    "windows-x86_64": "x86_64-pc-windows-msvc",
    "linux-x86_64": "x86_64-manylinux_2_28",
    "linux-aarch64": "aarch64-manylinux_2_28",
}
MACOS = ("macos-arm64", "macos-x86_64")
EXTRAS = {
    name: ((("lab", "dev"), ("cu13", "lab", "dev")) if name in MACOS else
           (("cu12", "lab", "dev"), ("cu13", "lab", "dev")))
    for name in PLATFORMS
}
# Combinations that cannot work, each with the reason. Such a case must still fail to
# resolve: the day it resolves, drop it from here and from the README.
UNSUPPORTED = {
    ("macos-x86_64", "3.14"): "numba has no macOS x86_64 wheel for Python 3.14: its last Intel "
                              "Mac release, 0.62.1, covers Python 3.10-3.13",
}
# Distributions that only exist for an NVIDIA GPU: none may reach a Mac.
CUDA_ONLY = re.compile(r"^(nvidia-.*|cuda-(bindings|core|toolkit|python)|cupy.*)$")
TIMEOUT_S = 600
# Where the session's resolutions are written (set by :func:`prefetch` for the workers it starts).
PREFETCHED_VARIABLE = "GPULAB_RESOLUTIONS_FILE"
PREFETCH_WAIT_S = 840  # under make test's 900 s a test: then the fixture says why and fails


@dataclass(frozen=True)
class Case:
    platform: str
    python: str
    extras: tuple[str, ...]

    @property
    def id(self) -> str:
        return f"{self.platform}-py{self.python}-{'+'.join(self.extras)}"


@dataclass(frozen=True)
class Resolution:
    case: Case
    returncode: int
    pins: dict[str, str]  # normalised name -> version
    output: str


CASES = [Case(platform, python, extras) for platform in PLATFORMS
         for python in SUPPORTED_PYTHONS for extras in EXTRAS[platform]]


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _major_minor(version: str) -> tuple[int, int]:
    major, minor = (int(part) for part in re.findall(r"\d+", version)[:2])
    return major, minor


def _resolve(uv: str, case: Case, offline: bool = False) -> Resolution:
    command = [uv, "pip", "compile", str(PYPROJECT), "--quiet", "--no-header", "--no-annotate",
               "--python-platform", PLATFORMS[case.platform], "--python-version", case.python,
               "--only-binary", ":all:", "--prerelease", "disallow", "--color", "never",
               *(f"--extra={extra}" for extra in case.extras), *(["--offline"] if offline else [])]
    env = {key: value for key, value in os.environ.items() if key != "VIRTUAL_ENV"}
    completed = subprocess.run(command, capture_output=True, text=True, env=env,
                               timeout=TIMEOUT_S, check=False, cwd=ROOT)
    pins = dict(re.findall(r"^([A-Za-z0-9_.\-]+)==(\S+)", completed.stdout, re.MULTILINE))
    return Resolution(case, completed.returncode, {_normalise(k): v for k, v in pins.items()},
                      completed.stdout + completed.stderr)


def resolve_all(cases: list[Case]) -> dict[str, Resolution]:
    """Resolve every case, in two rounds to spare PyPI and time (one resolution asks PyPI
    about ~110 projects: 10-15 s online, under 2 s from uv's cache).

    Round 1 asks PyPI for one case per platform (its newest supported Python, CUDA 13),
    which refreshes uv's cache of the package indexes. Round 2 resolves the other cases from
    that cache (``--offline``) and asks PyPI again for any case the cache could not settle,
    so a failure is always PyPI's answer, never a stale cache's."""
    uv = macos_env.uv()
    first = {}
    for case in cases:  # the last supported Python with cu13 (or none, on a Mac) wins
        if (case.platform, case.python) not in UNSUPPORTED and case.extras[0] != "cu12":
            first[case.platform] = case
    rest = [case for case in cases if case not in first.values()]
    results = {}
    with ThreadPoolExecutor(max_workers=len(first)) as pool:
        for result in pool.map(lambda case: _resolve(uv, case), first.values()):
            results[result.case.id] = result
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        for result in pool.map(lambda case: _resolve(uv, case, offline=True), rest):
            results[result.case.id] = result
    retry = [case for case in rest if results[case.id].returncode != 0]
    with ThreadPoolExecutor(max_workers=max(1, min(len(retry), 8))) as pool:
        for result in pool.map(lambda case: _resolve(uv, case), retry):
            results[result.case.id] = result
    return results


def resolve_all_to_file(path: Path) -> None:
    """:func:`resolve_all` of every case, written to ``path`` as JSON once all are done (or the
    error that stopped them, so that nobody waits for a file that never comes)."""
    try:
        written = {"resolutions": [asdict(result) for result in resolve_all(CASES).values()]}
    except Exception as error:  # noqa: BLE001 - handed to the test that reads the file
        written = {"error": f"{type(error).__name__}: {error}"}
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(written), encoding="utf-8")
    partial.replace(path)


def prefetch() -> Path:
    """Start resolving every case in a background thread of this process; return the file the
    results will be written to. Its path goes to the environment (:data:`PREFETCHED_VARIABLE`),
    so that xdist workers started after this read it."""
    path = Path(tempfile.mkdtemp(prefix="gpulab-resolutions-")) / "resolutions.json"
    os.environ[PREFETCHED_VARIABLE] = str(path)
    threading.Thread(target=resolve_all_to_file, args=(path,), name="resolutions",
                     daemon=True).start()
    return path


def read_prefetched(path: Path) -> dict[str, Resolution]:
    """The resolutions :func:`prefetch` started, once written (waiting up to
    :data:`PREFETCH_WAIT_S`)."""
    deadline = time.monotonic() + PREFETCH_WAIT_S
    while not path.exists():
        if time.monotonic() > deadline:
            pytest.fail(f"the resolutions started with the session were not written to {path} "
                        f"within {PREFETCH_WAIT_S} s")
        time.sleep(1)
    written = json.loads(path.read_text(encoding="utf-8"))
    if "error" in written:
        pytest.fail(f"resolving the requirements stopped: {written['error']}")
    results = {}
    for item in written["resolutions"]:
        case = Case(item["case"]["platform"], item["case"]["python"],
                    tuple(item["case"]["extras"]))
        results[case.id] = Resolution(case, item["returncode"], item["pins"], item["output"])
    return results


@pytest.fixture(scope="module")
def resolutions() -> dict[str, Resolution]:
    prefetched = os.environ.get(PREFETCHED_VARIABLE)
    results = read_prefetched(Path(prefetched)) if prefetched else resolve_all(CASES)
    if all(result.returncode != 0 for result in results.values()):
        reachable, why = macos_env.pypi_reachable()
        if not reachable:
            pytest.skip(f"no case resolved and PyPI is not reachable from here ({why})")
    return results


def test_the_supported_pythons_match_requires_python():
    declared = re.search(r'^requires-python\s*=\s*"([^"]+)"', PYPROJECT.read_text(),
                         re.MULTILINE).group(1)
    assert declared == f">={SUPPORTED_PYTHONS[0]}", \
        f"pyproject says requires-python {declared!r}; update SUPPORTED_PYTHONS to match"


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_requirements_resolve_from_wheels(resolutions, case):
    result = resolutions[case.id]
    reason = UNSUPPORTED.get((case.platform, case.python))
    if reason is not None:
        assert result.returncode != 0, (
            f"{case.id} resolves now, although it was listed as unsupported ({reason}): drop "
            "it from UNSUPPORTED and from the README's platform table")
        assert "numba" in result.output, result.output[-2000:]
        pytest.xfail(reason)
    assert result.returncode == 0, (
        f"the requirements do not resolve for {case.platform} on Python {case.python} with "
        f"[{','.join(case.extras)}] from wheels:\n{result.output[-3000:]}")
    pins = result.pins
    assert "numba" in pins and "numba-cuda" in pins, sorted(pins)
    numba, numba_cuda = _major_minor(pins["numba"]), _major_minor(pins["numba-cuda"])
    if case.platform in MACOS:
        cuda_only = sorted(name for name in pins if CUDA_ONLY.match(name))
        assert not cuda_only, f"{case.id} would install CUDA-only packages: {cuda_only}"
        assert numba_cuda == (0, 20), f"{case.id}: numba-cuda {pins['numba-cuda']}"
        assert numba < (0, 66), f"{case.id}: numba {pins['numba']} (numba-cuda 0.20 needs <0.66)"
    else:
        assert numba_cuda >= (0, 30), f"{case.id}: numba-cuda {pins['numba-cuda']}"
        cuda = "13" if "cu13" in case.extras else "12"
        toolkit = [f"{name}=={version}" for name, version in pins.items()
                   if name in ("cuda-bindings", "nvidia-nvvm", "nvidia-cuda-nvcc-cu12",
                               "nvidia-cuda-nvrtc", "nvidia-cuda-nvrtc-cu12")]
        assert toolkit, f"{case.id} installs no CUDA toolkit wheels: {sorted(pins)}"
        assert all(version.split(".")[0] == cuda or name.endswith("-cu12")
                   for name, version in (item.split("==") for item in toolkit)), \
            f"{case.id} mixes CUDA generations: {toolkit}"


def test_prefetched_resolutions_read_back_as_resolved(tmp_path, monkeypatch):
    case = Case("linux-x86_64", "3.12", ("cu13", "lab", "dev"))
    resolved = {case.id: Resolution(case, 0, {"numba": "0.62.1"}, "numba==0.62.1\n")}
    monkeypatch.setitem(globals(), "resolve_all", lambda cases: resolved)
    resolve_all_to_file(tmp_path / "resolutions.json")
    assert read_prefetched(tmp_path / "resolutions.json") == resolved


def test_a_prefetch_that_stopped_says_why(tmp_path, monkeypatch):
    def unreachable(cases):
        raise OSError("uv could not be started")

    monkeypatch.setitem(globals(), "resolve_all", unreachable)
    resolve_all_to_file(tmp_path / "resolutions.json")
    with pytest.raises(pytest.fail.Exception, match="stopped: OSError: uv could not be started"):
        read_prefetched(tmp_path / "resolutions.json")
