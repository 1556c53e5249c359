"""Chapter 01 as a dashboard: Voila renders the notebook with its code hidden and widgets live.

Voila runs every cell when the page is requested (~12 s in the simulator), then serves the
outputs only. The test checks that no source code shows, that the figures and the exercise hints
are there, and that the CPU-vs-GPU dashboard's Run button, pressed after a change of controls,
draws a new plot. Screenshots go to artifacts/screenshots/.
"""

from __future__ import annotations

import time

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

NOTEBOOK = "course/01_dot_product.ipynb"
RENDER_TIMEOUT_MS = 300_000  # Voila executes the whole chapter before the page is complete


def test_chapter01_as_a_voila_dashboard(jupyter_server, page, screenshots, crossover_board):
    started = time.monotonic()
    response = page.goto(jupyter_server.voila_url(NOTEBOOK), wait_until="commit",
                         timeout=RENDER_TIMEOUT_MS)
    assert response is not None and response.ok, \
        f"Voila answered {response.status if response else 'nothing'}: is voila installed?"
    board = crossover_board(page)
    board.wait_rendered(timeout_ms=RENDER_TIMEOUT_MS)
    render_s = time.monotonic() - started

    text = page.locator("body").inner_text()
    # Code hidden: neither the first cell's imports nor the exercise stubs are on the page.
    assert "import gpulab  # first" not in text, "Voila shows the notebook's code cells"
    assert "def my_multiply(" not in text, "Voila shows the exercise stubs' code"
    assert not page.locator(".jp-InputArea-editor:visible").count(), "code editors are visible"
    assert "The dot product" in text, "the chapter's text is missing"
    assert "NOT ATTEMPTED YET — multiply" in text, "the exercise checks' output is missing"
    assert not page.get_by_text("Error displaying widget").count(), "a widget did not render"
    sizes = page.locator(".jp-OutputArea-output img").evaluate_all(
        "imgs => imgs.map(i => [i.naturalWidth, i.naturalHeight])")
    assert len(sizes) >= 3 and all(w > 100 and h > 100 for w, h in sizes), sizes

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
    print(f"Voila: the dashboard appeared after {render_s:.1f} s; "
          f"test total {time.monotonic() - started:.1f} s")
