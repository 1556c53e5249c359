"""Chapter 02's bandwidth experiment: checked, counted, measured on the CPU, estimated;
its figures; its GPU branch with the stand-in GPU."""

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from gpulab import device, hardware, memory_model  # noqa: E402
from gpulab.experiments.bandwidth import (  # noqa: E402
    BandwidthDashboard,
    BandwidthExperiment,
    stride_cost_plot,
    stride_sweep,
    warp_access_plot,
)

SIM = device.tier() != "gpu"
N_SMALL = 2**16


def texts(fig) -> str:
    """Every text of a figure: titles, labels, annotations and legends."""
    found = [t.get_text() for t in fig.findobj(matplotlib.text.Text)]
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend:
            found += [t.get_text() for t in legend.get_texts()]
    return " ".join(found)


def labels_are_honest(timings):
    for _what, seconds, label in timings:
        assert seconds > 0
        assert label.startswith(("measured on", "estimated from a roofline model")), label


@pytest.mark.parametrize("kernel", ["saxpy", "copy_coalesced", "copy_strided"])
def test_bandwidth_experiment_checks_counts_and_labels(kernel):
    experiment = BandwidthExperiment(kernel, n=N_SMALL, stride=8, cpu_repeats=2)
    result = experiment.run()
    assert result["kernel_check"]["ok"]
    labels_are_honest(experiment.timings())
    access = result["access"]
    expected_sectors = 32 if kernel == "copy_strided" else 4
    assert access.sectors_per_request == expected_sectors
    if SIM:
        assert access.source == "traced in the simulator"
        assert not result["measured"]  # no GPU time in the simulator tier
    assert result["estimate_with_copies"].time_s > result["estimate"].time_s
    assert "sectors" in experiment.explain()


def test_strided_copy_is_charged_for_the_sectors_it_fetches():
    strided = BandwidthExperiment("copy_strided", n=N_SMALL, stride=8, cpu_repeats=1).run()
    n_out = N_SMALL // 8
    assert strided["useful_bytes"] == 2 * 4 * n_out
    assert strided["fetched_bytes"] == pytest.approx(32 * n_out + 4 * n_out)
    expected = hardware.estimate_time("H100-SXM", 0, strided["fetched_bytes"])
    assert strided["estimate"].time_s == pytest.approx(expected.time_s)


def test_a_t4_is_slower_than_an_h100():
    h100 = BandwidthExperiment("saxpy", n=N_SMALL, gpu="H100-SXM", cpu_repeats=1).run()
    t4 = BandwidthExperiment("saxpy", n=N_SMALL, gpu="T4", cpu_repeats=1).run()
    assert t4["estimate"].time_s > h100["estimate"].time_s


def test_bandwidth_experiment_rejects_bad_arguments():
    with pytest.raises(ValueError, match="kernel must be one of"):
        BandwidthExperiment("magic")
    with pytest.raises(ValueError, match="stride"):
        BandwidthExperiment("copy_strided", stride=0)
    with pytest.raises(ValueError, match="float32 or float64"):
        BandwidthExperiment(dtype=np.int32)


def test_stride_sweep_series_are_labelled():
    sweep = stride_sweep(strides=(1, 2, 8), n=2**16, repeats=2)
    model = next(points for label, points in sweep["series"].items() if "sector model" in label)
    assert model == [(1, 1.0), (2, 2.0), (8, 8.0)]
    cpu = next(label for label in sweep["series"] if "NumPy" in label)
    assert "measured on this CPU" in cpu
    assert dict(sweep["series"][cpu])[1] == 1.0


def test_bandwidth_dashboard_runs_what_the_controls_say():
    dashboard = BandwidthDashboard()
    dashboard.kernel_dropdown.value = "copy_strided"
    dashboard.stride_slider.value = 2
    dashboard.n_slider.value = 2**12
    dashboard.gpu_dropdown.value = "A100-SXM"
    dashboard.run_button.click()
    assert dashboard.last_error is None
    result = dashboard.last_result
    assert result["stride"] == 2 and result["n"] == 2**12 and result["gpu"] == "A100-SXM"
    assert result["access"].sectors_per_request == 8
    assert "A100" in dashboard.explanation.value
    assert dashboard.figure is not None


def test_gpu_branches_of_the_bandwidth_experiment(stand_in_gpu):
    experiment = BandwidthExperiment("copy_strided", n=300, stride=4, cpu_repeats=1)
    result = experiment.run()
    assert set(result["measured"]) == {"kernel", "with_copies"}
    assert result["access"].source == "from the kernel's index arithmetic"
    assert result["kernel_check"]["ok"] and result["kernel_check"]["n"] == 300
    labels = [label for _, _, label in experiment.timings()]
    assert f"measured on {stand_in_gpu} (CUDA events)" in labels
    assert "Measured alone" in experiment.explain()
    sweep = stride_sweep(strides=(1, 2), n=128, repeats=1)
    assert any(f"measured on {stand_in_gpu}" in label for label in sweep["series"])


@pytest.mark.parametrize("stride, sectors", [(1, 4), (2, 8), (8, 32)])
def test_warp_access_plot_counts_the_sectors(stride, sectors):
    access = memory_model.copy_access(stride)
    fig = warp_access_plot(access)
    assert f"{sectors} sectors for one request of 32 threads" in texts(fig)
    labelled = {t.get_gid() for t in fig.axes[0].texts if t.get_gid()}
    first = min(access.requests[0].sectors)
    assert f"sector{first}" in labelled


def test_stride_cost_plot_legend_is_the_labels():
    series = {"GPU sector model: bytes fetched per byte used": [(1, 1.0), (8, 8.0)],
              "NumPy, measured on this CPU": [(1, 1.0), (8, 3.0)]}
    fig = stride_cost_plot(series)
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == list(series)


def test_a_recorded_run_stands_next_to_the_estimate(recorded_gpu_run):
    from gpulab.experiments.bandwidth import recorded_comparison

    table = recorded_comparison(kernel="saxpy")
    assert table is not None and len(table.rows) == 2
    alone = table.rows[0]
    assert "data already on the GPU" in alone.what and alone.ratio == pytest.approx(1.5, rel=0.01)
    assert "pageable" in table.rows[1].what
    assert "measured/predicted" in str(table)
    assert recorded_comparison(kernel="copy_coalesced") is not None
