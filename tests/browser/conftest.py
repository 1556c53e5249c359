"""Real-client tests: JupyterLab and Voila in headless Chromium, driven by Playwright.

A session fixture serves a *copy* of ``course/`` (so nothing a browser does can save outputs
into the repository) with JupyterLab on a free 127.0.0.1 port behind a random token. The Voila
server extension, installed with voila, serves the same files at ``/voila/render/...``.
``jupyter_server`` runs in this environment (.venv); ``start_course_server`` starts one from
another environment (test_voila.py's dashboards: the versions a Mac gets).

The server runs with the course's dashboard configuration, as ``make lab`` and ``binder/start``
set it: ``JUPYTER_CONFIG_PATH=dashboards/config`` (Voila's ``voila.json``, which picks the
``gpulab`` template) and ``JUPYTER_PATH=dashboards/data`` (that template: no exercises, nothing
from a third-party host). Every page records the URL of each request it makes in
``page.requests``.

The browser is Debian's Chromium (``/usr/bin/chromium``, or ``$GPULAB_CHROMIUM``), never a
Playwright download. ``.ci/run`` installs it; without it these tests are skipped and say why.
Screenshots go to ``artifacts/screenshots/`` and are listed at the end of the pytest run.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOT_DIR = ROOT / "artifacts" / "screenshots"
DASHBOARDS = ROOT / "dashboards"  # the Voila configuration and template of the dashboards
CHROMIUM = Path(os.environ.get("GPULAB_CHROMIUM", "/usr/bin/chromium"))
# Headless Chromium as root, on a machine whose network is closed: without the background
# networking flags it waits on connections to Google's update and sync services.
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage",
]
SERVER_START_S = 90
VIEWPORT = {"width": 1400, "height": 1800}  # tall: the dashboard and its plot fit at once
# CSS animations off in every page, from its first element: the tests read what a page shows,
# never how it moves, and headless Chromium draws each frame of Voila's spinner in software
# while the kernel runs a chapter (10-50 s): 0.23 CPU-seconds a second with it, 0.12 without,
# measured on chapter 12's dashboard. Transitions stay (JupyterLab waits on some of them).
NO_ANIMATIONS_SCRIPT = """(() => {
  const css = '*, *::before, *::after { animation: none !important; }';
  const add = () => {
    const style = document.createElement('style');
    style.textContent = css;
    (document.head || document.documentElement).appendChild(style);
  };
  if (document.documentElement) { add(); return; }
  new MutationObserver((_, observer) => {
    if (document.documentElement) { observer.disconnect(); add(); }
  }).observe(document, {childList: true});
})();"""

# JupyterLab settings for the test: no news or update check (no network, and no pop-up over the
# notebook), no autosave, and every cell kept in the page (no windowing), so the test can read
# every prompt.
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false",
                                                    "checkForUpdates": False},
    "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
}


def pytest_configure(config):
    for line in (
        "browser: drives JupyterLab or Voila in headless Chromium (needs /usr/bin/chromium)",
        "binder: installs binder/requirements.txt into a fresh virtual environment",
        "slow: takes minutes (installs packages, or runs a whole chapter in a browser)",
    ):
        config.addinivalue_line("markers", line)


def pytest_terminal_summary(terminalreporter):
    """List every screenshot the browser tests saved (also under xdist, via user_properties)."""
    paths = dict.fromkeys(  # each of a test's reports (setup, call, teardown) carries them
        value
        for reports in terminalreporter.stats.values()
        for report in reports
        for name, value in getattr(report, "user_properties", ())
        if name == "screenshot"
    )
    if paths:
        terminalreporter.write_sep("-", "browser screenshots")
        for path in paths:
            terminalreporter.write_line(str(path))


# --- the server ---------------------------------------------------------------------------------


@dataclass
class JupyterServer:
    """A running ``jupyter lab`` serving ``root`` at ``url`` behind ``token``."""

    url: str
    token: str
    root: Path
    log_path: Path
    process: subprocess.Popen
    numba_cuda: str | None = None  # the numba-cuda its kernels must report, where one is wanted

    def lab_url(self, notebook: str, workspace: str) -> str:
        """The notebook in a fresh workspace, so Run All acts on it and nothing else."""
        return f"{self.url}/lab/workspaces/{workspace}/tree/{notebook}?reset&token={self.token}"

    def voila_url(self, notebook: str) -> str:
        return f"{self.url}/voila/render/{notebook}?token={self.token}"

    def log_tail(self, characters: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-characters:]

    def stop(self) -> None:
        """Stop the server and its kernels (again: nothing)."""
        _stop(self.process)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _answers(url: str, token: str) -> bool:
    request = urllib.request.Request(f"{url}/api/status",
                                     headers={"Authorization": f"token {token}"})
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _write_settings(settings_dir: Path) -> None:
    for plugin, values in LAB_SETTINGS.items():
        path = settings_dir / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


def _server_environment(home: Path, base: dict | None) -> dict:
    env = dict(os.environ if base is None else base)
    # The kernel must draw inline: tests/conftest.py sets MPLBACKEND=Agg for pytest itself.
    env.pop("MPLBACKEND", None)
    env.update(
        JUPYTER_CONFIG_DIR=str(home / "config"),  # no user configuration
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        IPYTHONDIR=str(home / "ipython"),  # no user startup files
        # the dashboards' configuration and template, as `make lab` and binder/start set them
        JUPYTER_CONFIG_PATH=str(DASHBOARDS / "config"),
        JUPYTER_PATH=str(DASHBOARDS / "data"),
        PYTHONUNBUFFERED="1",
    )
    return env


@pytest.fixture(scope="session")
def chromium() -> Path:
    """Debian's Chromium; without it every browser test is skipped, and says why."""
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM}: install Debian's chromium "
                    "(`apt-get install chromium`, which .ci/run does) or set GPULAB_CHROMIUM; "
                    "the real-browser tests are skipped")
    return CHROMIUM


def serve_course(home: Path, python: str = sys.executable,
                 environment: dict | None = None) -> JupyterServer:
    """Start JupyterLab (with Voila's server extension) from ``python``'s environment, serving a
    copy of course/ under ``home``, and wait until it answers. ``environment``: the process
    environment to start it with (default: this process's); the dashboards' settings are added.
    Stop it with its ``stop()``."""
    root = home / "served"
    shutil.copytree(ROOT / "course", root / "course",
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    settings = home / "settings"
    _write_settings(settings)
    port, token = _free_port(), secrets.token_hex(16)
    url = f"http://127.0.0.1:{port}"
    command = [
        python, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
        f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
        f"--LabApp.user_settings_dir={settings}", f"--LabApp.workspaces_dir={home / 'ws'}",
        "--ServerApp.port_retries=0",
    ]
    if os.getuid() == 0:
        command.append("--allow-root")
    log_path = home / "jupyter.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                   env=_server_environment(home, environment), cwd=root,
                                   start_new_session=True)
    server = JupyterServer(url, token, root, log_path, process)
    deadline = time.monotonic() + SERVER_START_S
    while not _answers(url, token):
        if process.poll() is not None or time.monotonic() > deadline:
            _stop(process)
            pytest.fail(f"JupyterLab did not start on {url} within {SERVER_START_S} s "
                        f"(exit status {process.poll()}). Its log:\n{server.log_tail()}")
        time.sleep(0.25)
    return server


@pytest.fixture(scope="session")
def start_course_server(chromium, tmp_path_factory):
    """``start_course_server(python, environment)``: :func:`serve_course` from another
    environment (its interpreter and process environment); stopped when the session ends."""
    started: list[JupyterServer] = []

    def start(python: str, environment: dict) -> JupyterServer:
        started.append(serve_course(tmp_path_factory.mktemp("jupyter"), python, environment))
        return started[-1]

    yield start
    for server in started:  # those their tests did not stop
        server.stop()


@pytest.fixture(scope="session")
def jupyter_server(chromium, tmp_path_factory):
    """JupyterLab, from this environment (.venv), serving a copy of course/."""
    server = serve_course(tmp_path_factory.mktemp("jupyter"))
    yield server
    server.stop()


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM lets the server shut its kernels down; if it hangs, kill its process group."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait(timeout=10)


# --- the browser --------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def browser(chromium):
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="playwright is not installed (the `dev` extra has it)")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser, request):
    """A fresh browser context and page, without CSS animations (:data:`NO_ANIMATIONS_SCRIPT`);
    page errors are collected in ``page.errors``, the URL of every request the page makes in
    ``page.requests``."""
    context = browser.new_context(viewport=VIEWPORT)
    context.add_init_script(NO_ANIMATIONS_SCRIPT)
    new_page = context.new_page()
    new_page.set_default_timeout(60_000)
    new_page.errors = []
    new_page.requests = []
    new_page.on("pageerror", lambda error: new_page.errors.append(str(error)))
    new_page.on("request", lambda request: new_page.requests.append(request.url))
    yield new_page
    if getattr(request.node, "rep_call_failed", False):
        try:
            Screenshots(request).save(new_page, "at-failure")
        except Exception:  # the failure itself is what matters
            pass
    context.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call" and report.failed:
        item.rep_call_failed = True
    return report


class Screenshots:
    """Saves ``artifacts/screenshots/<test>-<step>.png`` and records the path in the report."""

    def __init__(self, request):
        self.request = request
        name = request.node.name.removeprefix("test_")
        self.prefix = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-")

    def save(self, target, step: str) -> Path:
        """Screenshot a Playwright page (the visible part) or locator (the element)."""
        SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOT_DIR / f"{self.prefix}-{step}.png"
        target.screenshot(path=str(path))
        self.request.node.user_properties.append(("screenshot", str(path)))
        print(f"screenshot: {path}")
        return path


@pytest.fixture
def screenshots(request) -> Screenshots:
    return Screenshots(request)


# --- the chapter 01 dashboard ---------------------------------------------------------------


class CrossoverBoard:
    """The CPU-vs-GPU dashboard (gpulab.experiments.crossover) as a person sees it in a page.

    Found by the CSS classes the dashboard gives its parts (``gpulab-crossover-*``)."""

    RUN_TIMEOUT_MS = 180_000

    def __init__(self, page):
        self.page = page
        self.root = page.locator(".gpulab-crossover")
        self.plot = self.root.locator(".gpulab-crossover-plot img")
        self.explanation = self.root.locator(".gpulab-crossover-explanation")
        self.status = self.root.locator(".gpulab-crossover-status")

    def wait_rendered(self, timeout_ms: int = 240_000) -> None:
        self.root.wait_for(state="visible", timeout=timeout_ms)
        self.root.locator(".gpulab-crossover-run").wait_for(state="visible")

    def choose(self, gpu_name: str | None = None, dtype: str | None = None,
               include_transfer: bool | None = None) -> None:
        """Set the controls the way a person does: pick from the list, press, tick."""
        if gpu_name is not None:
            self.root.locator(".gpulab-crossover-gpu select").select_option(label=gpu_name)
        if dtype is not None:
            self.root.locator(".gpulab-crossover-dtype button", has_text=dtype).click()
        if include_transfer is not None:
            self.root.locator(".gpulab-crossover-transfer input").set_checked(include_transfer)

    def plot_source(self) -> str | None:
        return self.plot.get_attribute("src") if self.plot.count() else None

    def run(self) -> str:
        """Press Run and wait until the new plot is drawn and the run has finished.

        The kernel sends, in order: status "running…", the plot, the explanation, the status
        again; so a new plot and a status that no longer says running mean all of it arrived.
        Returns the plot image's src."""
        before = self.plot_source()
        self.root.locator(".gpulab-crossover-run").click()
        self.page.wait_for_function(
            """([before]) => {
                const board = document.querySelector('.gpulab-crossover');
                const img = board.querySelector('.gpulab-crossover-plot img');
                const status = board.querySelector('.gpulab-crossover-status').innerText;
                return img !== null && img.complete && img.naturalWidth > 0
                    && img.getAttribute('src') !== before && !status.includes('running');
            }""",
            arg=[before],
            timeout=self.RUN_TIMEOUT_MS,
        )
        status = self.status.inner_text()
        assert "Failed" not in status, f"the dashboard reported: {status}"
        return self.plot_source()

    def plot_size(self) -> tuple[int, int]:
        return tuple(self.plot.evaluate("img => [img.naturalWidth, img.naturalHeight]"))


@pytest.fixture
def crossover_board():
    """``crossover_board(page)``: the chapter 01 dashboard in that page."""
    return CrossoverBoard
