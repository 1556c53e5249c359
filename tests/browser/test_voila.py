"""Every chapter as a dashboard: Voila renders the notebook with its code hidden and widgets live.

Voila runs every cell when the page is requested (10-30 s a chapter in the simulator), then
serves the outputs only. The dashboards use the course's Voila template
(``dashboards/data/voila/templates/gpulab``, see ``gpulab.dashboard``): the exercises are left
out, since nobody can write code in a dashboard, and nothing is loaded from a third-party host.

The server (JupyterLab with Voila's extension) runs in the versions a Mac gets, in a fresh
environment (``tests/platforms/macos_env.py``: numba-cuda 0.20.1, numba < 0.66, and the ``lab``
extra, as ``make lab`` installs them on a Mac). Each chapter runs once per environment in a
``make test``: the solutions in ``.venv`` (nbgrader's round trip), the learner notebooks in
Binder's environment (tests/test_binder.py), and the dashboards here, with the Mac's versions:
each chapter without its exercise cells (the stubs, and their checks saying "not attempted",
which is all an untouched learner notebook ran of them; no check judges a kernel with the Mac's
versions). tests/platforms/test_macos_like_env.py checks the rest of that environment.

For each of the 13 chapters, one Voila server renders the page and the test checks: no exercise
stub, check or hint, no "not attempted" or "not written yet" message, no Python error (on the
page or in the server's log), no widget error, no JavaScript error, and no request to a host
other than 127.0.0.1 / localhost. Chapter 01's test also drives its CPU-vs-GPU dashboard: Run,
pressed after a change of controls, draws a new plot. Screenshots go to artifacts/screenshots/;
each test prints its chapter's render time.
"""

from __future__ import annotations

import importlib.util
import time
import warnings
from pathlib import Path
from urllib.parse import urlparse

import nbformat
import pytest

pytestmark = [pytest.mark.browser, pytest.mark.platforms, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
# tests/ is not a package: the Mac environment's builder is loaded from its file.
_SPEC = importlib.util.spec_from_file_location("macos_env",
                                               ROOT / "tests" / "platforms" / "macos_env.py")
macos_env = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(macos_env)
CHAPTERS = sorted(path.name for path in (ROOT / "course").glob("[0-9][0-9]_*.ipynb"))
CROSSOVER_CHAPTER = "01_dot_product.ipynb"
RENDER_TIMEOUT_MS = 300_000  # Voila executes the whole chapter before the page is complete
LOCAL_HOSTS = {"127.0.0.1", "localhost"}

# Text that must not be anywhere on a dashboard: stubs, checks, exercise errors, cell errors.
NOT_ON_THE_PAGE = (
    "YOUR CODE HERE", "NotImplementedError", "NOT ATTEMPTED", "write your code",
    "Pass the check first", "Error displaying widget", "There was an error when executing cell",
    "Traceback (most recent call last)",
)
# ... and not in any cell's output (the chapters' prose says "not written yet" once, rightly).
NOT_IN_AN_OUTPUT = ("not written yet", "your kernel", "yours:")
SERVER_ERRORS = ("Error at server while executing cell", "Traceback (most recent call last)")


@pytest.fixture(scope="module")
def dashboard_server(start_course_server, tmp_path_factory, request):
    """JupyterLab with Voila, serving a copy of course/ (with this checkout's dashboards/
    configuration) from the versions a Mac gets; stopped after this module. Where PyPI cannot
    be reached to resolve them, this environment's server instead, with a warning."""
    reachable, why = macos_env.pypi_reachable()
    if not reachable:
        warnings.warn(f"the Voila dashboards are served from this environment, not with the "
                      f"versions a Mac gets: resolving those needs PyPI ({why})", stacklevel=1)
        yield request.getfixturevalue("jupyter_server")
        return
    mac = macos_env.build(tmp_path_factory.mktemp("macos"), compile_bytecode=True)
    print(f"dashboards served with the macOS versions: numba-cuda {mac.version('numba-cuda')}, "
          f"numba {mac.version('numba')}, voila {mac.version('voila')}, "
          f"installed in {mac.installed_s:.0f} s")
    server = start_course_server(mac.python, mac.env)
    server.numba_cuda = mac.version("numba-cuda")
    yield server
    server.stop()


def open_dashboard(page, server, notebook: str) -> float:
    """Open the chapter's dashboard and wait until its kernel has run every cell and the page
    has drawn every output. Returns the seconds that took."""
    started = time.monotonic()
    # Voila streams the page while the kernel runs the cells: "load" comes after the last one.
    response = page.goto(server.voila_url(notebook), wait_until="load",
                         timeout=RENDER_TIMEOUT_MS)
    assert response is not None and response.ok, \
        f"Voila answered {response.status if response else 'nothing'}: is voila installed?"
    # Then the page replaces each output's JSON with its rendering, widgets included.
    page.wait_for_function(
        """() => !document.getElementById('loading') && !document.querySelector(
                     'script[type="application/vnd.voila.cell-output+json"]')""",
        timeout=RENDER_TIMEOUT_MS)
    page.wait_for_load_state("networkidle")
    return time.monotonic() - started


def third_party_requests(page) -> list[str]:
    return [url for url in page.requests
            if urlparse(url).scheme in ("http", "https", "ws", "wss")
            and urlparse(url).hostname not in LOCAL_HOSTS]


def assert_a_clean_dashboard(page, server, log_offset: int) -> None:
    """No exercise, no error of any kind, no third-party request (see the module)."""
    text = page.locator("body").inner_text()
    found = [phrase for phrase in NOT_ON_THE_PAGE if phrase in text]
    assert not found, f"the dashboard shows {found}"
    outputs = "\n".join(page.locator(".jp-OutputArea-output").all_inner_texts())
    found = [phrase for phrase in NOT_IN_AN_OUTPUT if phrase in outputs]
    assert not found, f"an output on the dashboard says {found}"
    headings = page.locator("h1, h2, h3, h4").all_inner_texts()
    assert not [h for h in headings if h.startswith("Exercise")], headings
    summaries = page.locator("summary").all_inner_texts()
    assert not [s for s in summaries if s.startswith("Hint")], summaries
    assert not page.locator(".jp-InputArea-editor:visible").count(), "code editors are visible"
    assert not page.errors, f"JavaScript errors in the page: {page.errors}"
    assert not third_party_requests(page), \
        f"the page loaded from third-party hosts: {third_party_requests(page)}"
    log = server.log_path.read_text(errors="replace")[log_offset:]
    errors = [line for line in log.splitlines() if any(e in line for e in SERVER_ERRORS)]
    assert not errors, "the kernel raised while Voila ran the chapter:\n" + log[-4000:]


def _log_size(server) -> int:
    return len(server.log_path.read_text(errors="replace"))


def test_the_course_has_13_chapters_to_render():
    assert len(CHAPTERS) == 13 and CROSSOVER_CHAPTER in CHAPTERS, CHAPTERS


@pytest.mark.parametrize("notebook", [name for name in CHAPTERS if name != CROSSOVER_CHAPTER])
def test_chapter_as_a_voila_dashboard(notebook, dashboard_server, page, screenshots):
    log_offset = _log_size(dashboard_server)
    render_s = open_dashboard(page, dashboard_server, f"course/{notebook}")
    screenshots.save(page, "page")
    assert page.locator(".jp-MarkdownCell").count() >= 5, "the chapter's text is missing"
    assert_a_clean_dashboard(page, dashboard_server, log_offset)
    print(f"Voila: {notebook} rendered in {render_s:.1f} s, {len(page.requests)} requests, "
          "all to 127.0.0.1")


def test_math_is_typeset_by_the_mathjax_served_with_voila(dashboard_server, page):
    """No chapter has $…$ math today; one that gets some must not fetch MathJax from a CDN."""
    probe = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("Bandwidth: $t = \\alpha + n \\beta$, and $$E = P t$$"),
        nbformat.v4.new_code_cell("print('ran')")])
    probe.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                    "language": "python"}
    nbformat.write(probe, dashboard_server.root / "math_probe.ipynb")
    open_dashboard(page, dashboard_server, "math_probe.ipynb")
    page.locator("mjx-container").first.wait_for(state="attached", timeout=30_000)
    assert page.locator("mjx-container").count() == 2, "MathJax did not typeset both formulas"
    assert "ran" in page.locator(".jp-OutputArea-output").all_inner_texts()[0]
    page.wait_for_load_state("networkidle")
    assert not third_party_requests(page), \
        f"typesetting loaded from third-party hosts: {third_party_requests(page)}"
    assert not page.errors, page.errors


def test_chapter01_as_a_voila_dashboard(dashboard_server, page, screenshots, crossover_board):
    log_offset = _log_size(dashboard_server)
    render_s = open_dashboard(page, dashboard_server, f"course/{CROSSOVER_CHAPTER}")
    board = crossover_board(page)
    board.wait_rendered(timeout_ms=RENDER_TIMEOUT_MS)

    text = page.locator("body").inner_text()
    # Code hidden: neither the first cell's imports nor the exercise stubs are on the page.
    assert "import gpulab  # first" not in text, "Voila shows the notebook's code cells"
    assert "def my_multiply(" not in text, "Voila shows the exercise stubs' code"
    assert "The dot product" in text, "the chapter's text is missing"
    if dashboard_server.numba_cuda:  # gpulab.info(), printed by the first cell, names it
        assert f"numba-cuda {dashboard_server.numba_cuda}" in text, \
            "the dashboard's kernel did not run in the environment with the Mac's versions"
    assert "gpulab tier : sim" in text, "chapter 01 did not run in the simulator tier"
    # The kernels the learner writes elsewhere are still explained and shown, from gpulab.
    assert "cuda.atomic.add" in text and "def dot_shared_tree" in text, "gpulab's kernels"
    sizes = page.locator(".jp-OutputArea-output img").evaluate_all(
        "imgs => imgs.map(i => [i.naturalWidth, i.naturalHeight])")
    assert len(sizes) >= 3 and all(w > 100 and h > 100 for w, h in sizes), sizes
    assert_a_clean_dashboard(page, dashboard_server, log_offset)
    # The Run button's icon comes from the Font Awesome bundled with Voila, not from a CDN.
    icon_font_loaded = page.evaluate(
        """() => [...document.fonts].some(f => f.family.includes('Font Awesome')
                                               && f.status === 'loaded')""")
    icon = board.root.locator(".gpulab-crossover-run i.fa-play")
    assert icon_font_loaded and icon.evaluate("i => i.getBoundingClientRect().width") > 5

    started = time.monotonic()
    board.root.scroll_into_view_if_needed()
    screenshots.save(board.root, "1-dashboard-rendered")
    first_plot = board.run()
    screenshots.save(board.root, "2-before-change")
    board.choose(dtype="float64", include_transfer=False)
    second_plot = board.run()
    explanation = board.explanation.inner_text()
    assert second_plot != first_plot, "the plot did not change after changing the controls"
    assert "8 = 16 bytes" in explanation and "With the copy" not in explanation, explanation
    screenshots.save(board.root, "3-after-change")
    screenshots.save(page, "4-page")

    assert not page.errors, f"JavaScript errors in the page: {page.errors}"
    assert not third_party_requests(page), third_party_requests(page)
    print(f"Voila: {CROSSOVER_CHAPTER} rendered in {render_s:.1f} s, "
          f"{len(page.requests)} requests, all to 127.0.0.1; two runs of the dashboard "
          f"{time.monotonic() - started:.1f} s")
