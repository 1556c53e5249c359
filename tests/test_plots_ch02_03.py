"""Chapter 02-03 figures: the warp's sectors, the roofline, rates; legends say where numbers
came from."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from gpulab import hardware, memory_model, plots  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def text_of(fig) -> str:
    ax = fig.axes[0]
    return "\n".join([ax.get_title(), *(t.get_text() for t in ax.texts)])


@pytest.mark.parametrize("stride, sectors", [(1, 4), (2, 8), (8, 32)])
def test_warp_access_plot_counts_the_sectors(stride, sectors):
    access = memory_model.copy_access(stride)
    fig = plots.warp_access_plot(access)
    assert f"{sectors} sectors for one request of 32 threads" in text_of(fig)
    labelled = {t.get_gid() for t in fig.axes[0].texts if t.get_gid()}
    first = min(access.requests[0].sectors)
    assert f"sector{first}" in labelled


def test_roofline_places_points_and_marks_estimates():
    gpu = hardware.get_gpu("H100-SXM")
    points = [
        {"name": "saxpy", "flops": 2e6, "bytes_moved": 12e6, "seconds": 4e-6,
         "origin": "estimated from a roofline model of the NVIDIA H100 SXM5 80GB"},
        {"name": "matmul", "flops": 2e9, "bytes_moved": 4e7, "seconds": 1e-3,
         "origin": "measured on NVIDIA H100 80GB HBM3 (CUDA events)"},
        {"name": "copy", "flops": 0, "bytes_moved": 8e6, "seconds": 3e-6, "origin": "measured"},
    ]
    fig = plots.roofline_plot(points, gpu, measured_bandwidth=3.0e12)
    ax = fig.axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("saxpy — estimated" in t for t in legend)
    assert any("matmul — measured" in t for t in legend)
    assert any("measured copy bandwidth" in t for t in legend)
    assert "not shown, no FLOPs: copy" in ax.get_title()
    markers = {line.get_label().split(" — ")[0]: line for line in ax.get_lines()}
    assert markers["saxpy"].get_markerfacecolor() == "white"  # hollow: an estimate
    assert markers["matmul"].get_markerfacecolor() != "white"  # filled: a measurement
    x, y = markers["matmul"].get_data()
    assert x[0] == pytest.approx(50) and y[0] == pytest.approx(2e12)
    roof = next(line for line in ax.get_lines() if line.get_label().startswith("roof"))
    xs, ys = roof.get_data()
    assert max(ys) == pytest.approx(gpu.peak_flops["fp32"])


def test_rates_plot_hatches_estimates():
    bars = [("NumPy", 5e10, "measured on this CPU"), ("tiled", 1e13, "estimated from a roofline "
                                                                      "model of the T4")]
    fig = plots.rates_plot(bars)
    patches = fig.axes[0].patches
    assert patches[0].get_hatch() is None and patches[1].get_hatch() == "//"
    assert "50 GFLOP/s" in text_of(fig) and "10 TFLOP/s" in text_of(fig)


def test_stride_cost_plot_legend_is_the_labels():
    series = {"GPU sector model: bytes fetched per byte used": [(1, 1.0), (8, 8.0)],
              "NumPy, measured on this CPU": [(1, 1.0), (8, 3.0)]}
    fig = plots.stride_cost_plot(series)
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == list(series)
