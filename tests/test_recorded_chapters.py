"""A recorded GPU run, once one ships, renders in the chapters next to their estimates.

The run is the tests' fixture (tests/conftest.py, ``fixture_gpu_run``): the chapters are
executed with ``$GPULAB_DATA_DIR`` pointing at a folder holding it, and must show its
measurements with the ratio measured / predicted. Chapter 02 (bandwidth, launches and host
copies, the bench) and chapter 12 (inference latency) run from their first cell to their last
that reads a recorded run (the rest of the chapter runs in tests/test_nbgrader.py, without one:
running it again here would only repeat that); the other chapters' comparisons are the
experiments' ``recorded_comparison`` functions, unit-tested in tests/experiments/ with the same
fixture.
"""

import json
import os
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent


def reads_a_recorded_run(cell) -> bool:
    return cell.cell_type == "code" and "recorded" in cell.source


def run_chapter(chapter: str, data_dir: Path) -> str:
    """Execute solutions/<chapter>, from its first cell to its last that reads a recorded run,
    with the fixture run in ``data_dir``; all their outputs."""
    from nbclient import NotebookClient

    notebook = nbformat.read(ROOT / "solutions" / chapter, as_version=4)
    last = max(i for i, cell in enumerate(notebook.cells) if reads_a_recorded_run(cell))
    notebook.cells = notebook.cells[:last + 1]
    saved = {k: os.environ.get(k) for k in ("GPULAB_DATA_DIR", "GPULAB_DEVICE")}
    os.environ["GPULAB_DATA_DIR"] = str(data_dir)  # the kernel inherits the environment
    os.environ.setdefault("GPULAB_DEVICE", "sim")
    try:
        NotebookClient(notebook, timeout=300, kernel_name="python3",
                       resources={"metadata": {"path": str(ROOT / "solutions")}}).execute()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    texts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            texts.append(output.get("text", ""))
            texts.append(str(output.get("data", {}).get("text/plain", "")))
    return "\n".join(texts)


@pytest.mark.notebook
@pytest.mark.parametrize("chapter, tables", [
    ("02_moving_data.ipynb", ["Launches and host copies on a real GPU",
                              "copy_strided measured on a real GPU"]),
    ("12_inference_serving_energy.ipynb", ["Inference latency measured on a real GPU"]),
])
def test_a_recorded_run_renders_next_to_the_estimates(chapter, tables, tmp_path,
                                                      fixture_gpu_record):
    path = tmp_path / "gpu_run_nvidia-h200-test-fixture_2026-12-01.json"
    path.write_text(json.dumps(fixture_gpu_record), encoding="utf-8")
    text = run_chapter(chapter, tmp_path)
    for title in tables:
        assert title in text, f"{chapter} did not show “{title}” with a recorded run present"
    assert "measured/predicted" in text
    assert "measured on NVIDIA H200 (test fixture" in text
