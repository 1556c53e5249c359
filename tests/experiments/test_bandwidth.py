"""Chapter 02's bandwidth experiment: checked, counted, measured on the CPU, estimated;
its figures; its GPU branch with the stand-in GPU."""

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from gpulab import device, hardware, memory_model, timing  # noqa: E402
from gpulab.experiments.bandwidth import (  # noqa: E402
    SAXPY_TIMINGS,
    BandwidthDashboard,
    BandwidthExperiment,
    copy_cost_table,
    copy_timings_table,
    stride_cost_plot,
    stride_sweep,
    time_saxpy_copies,
    warp_access_plot,
)
from gpulab.hardware import H100_SXM  # noqa: E402

SIM = device.tier() != "gpu"
N_SMALL = 2**16


def labels_are_honest(timings):
    for _what, seconds, label in timings:
        assert seconds > 0
        assert label.startswith(("measured on", "estimated by gpulab's GPU model")), label


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
    expected = hardware.estimate_time(H100_SXM.key, 0, strided["fetched_bytes"])
    assert strided["estimate"].time_s == pytest.approx(expected.time_s)


def test_a_t4_is_slower_than_an_h100():
    h100 = BandwidthExperiment("saxpy", n=N_SMALL, gpu=H100_SXM.key, cpu_repeats=1).run()
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


def test_copy_cost_table_is_the_roofline_model_with_and_without_copies():
    n = 2**24
    flops, nbytes = 2 * n, 12 * n
    table = copy_cost_table(H100_SXM.key, flops, nbytes, nbytes)
    kernel = hardware.estimate_time(H100_SXM.key, flops, nbytes)
    assert table.kernel.time_s == pytest.approx(kernel.time_s)
    assert list(table.with_copies) == ["pageable", "pinned"]
    h100 = H100_SXM
    text = str(table)
    for link in ("pageable", "pinned"):
        expected = hardware.estimate_time(h100, flops, nbytes, transfer_bytes=nbytes, link=link)
        assert table.with_copies[link].time_s == pytest.approx(expected.time_s)
        row = next(line for line in text.splitlines()
                   if line.startswith(f"incl. copies from {link} "))
        assert row.split()[-3:] == [f"{expected.time_s * 1e6:,.0f}",
                                    f"{expected.time_s / kernel.time_s:.0f}",
                                    f"{hardware.link_bytes_per_s(h100, link) / 1e9:.3g}"]
    heading = text.splitlines()[1]
    assert heading.split() == ["time", "(µs)", "ratio", "to", "the", "kernel", "alone", "(×)",
                               "copies", "at", "(GB/s)"]
    alone = next(line for line in text.splitlines() if line.startswith("kernel alone"))
    assert alone.split()[2] == f"{kernel.time_s * 1e6:,.0f}"
    assert f"host link: {h100.host_link}, {h100.host_link_bytes_per_s / 1e9:g} GB/s" in text
    for field in ("host_link_bytes_per_s", "host_pageable_bytes_per_s", "host_pinned_bytes_per_s"):
        assert f"  {field}: {h100.source(field).split('. ')[0]}." in text
    assert text.endswith(f"(all {kernel.label})")
    assert "estimated by gpulab's GPU model of the NVIDIA H100" in text
    assert "promised band" in text and "best case" not in text
    slower = copy_cost_table("T4", flops, nbytes, nbytes, links=("pageable",))
    assert list(slower.with_copies) == ["pageable"] and slower.gpu.key == "T4"


def fake_copy_runs(pageable_s: float, pinned_s: float) -> list:
    seconds = dict(zip(SAXPY_TIMINGS, (1e-4, 0.2, pageable_s, pinned_s), strict=True))
    return [timing.Measurement(name=name, times_s=[s], origin="gpu", device="Some GPU")
            for name, s in seconds.items()]


def test_copy_timings_table_gives_the_measured_rates_next_to_the_model():
    h100 = H100_SXM
    text = str(copy_timings_table(fake_copy_runs(0.1, 0.02), 1e9, h100))
    for name in SAXPY_TIMINGS:
        assert name in text
    assert text.count("measured on Some GPU (CUDA events)") == 5
    assert "copies: 10 GB/s from pageable memory, 50 GB/s from pinned memory (5.0x)" in text
    assert (f"the model assumed {h100.host_pageable_bytes_per_s / 1e9:.3g} and "
            f"{h100.host_pinned_bytes_per_s / 1e9:.3g} GB/s for the {h100.name}") in text
    with pytest.raises(ValueError, match="copies only, pinned"):
        copy_timings_table(fake_copy_runs(0.1, 0.02)[:3], 1e9)


@pytest.mark.skipif(not SIM, reason="in the simulator tier only")
def test_time_saxpy_copies_refuses_the_simulator():
    x = np.ones(8, np.float32)
    with pytest.raises(timing.SimulatorTimingError):
        time_saxpy_copies(x, x, np.empty_like(x))


def test_time_saxpy_copies_on_the_stand_in_gpu(stand_in_gpu):
    rng = np.random.default_rng(0)
    x, y = rng.random(300, dtype=np.float32), rng.random(300, dtype=np.float32)
    out = np.zeros_like(x)
    runs = time_saxpy_copies(x, y, out)
    assert [m.name for m in runs] == list(SAXPY_TIMINGS)
    assert np.array_equal(out, np.float32(2) * x + y)  # the NumPy-array launch wrote it
    text = str(copy_timings_table(runs, 3 * x.nbytes, H100_SXM.key))
    assert text.count(f"measured on {stand_in_gpu} (CUDA events)") == 5
    assert "GB/s for the NVIDIA H100" in text


def test_chapter_02_gpu_cell_runs_on_the_stand_in_gpu(stand_in_gpu, capsys):
    """Cell c02-11 of solutions/02_moving_data.ipynb, run as the notebook runs it on a GPU."""
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "solutions" / "02_moving_data.ipynb"
    cell = next(c for c in json.loads(path.read_text(encoding="utf-8"))["cells"]
                if c.get("id") == "c02-11")
    x = np.arange(300, dtype=np.float32)
    exec("".join(cell["source"]), {"ON_GPU": True, "x": x, "y": x, "out": np.zeros_like(x),
                                   "copy_bytes": 3 * x.nbytes,
                                   "H100": H100_SXM})
    text = capsys.readouterr().out
    assert all(name in text for name in SAXPY_TIMINGS)
    assert f"measured on {stand_in_gpu} (CUDA events)" in text and "the model assumed" in text


@pytest.mark.parametrize("stride, sectors", [(1, 4), (2, 8), (8, 32)])
def test_warp_access_plot_counts_the_sectors(figure_texts, stride, sectors):
    access = memory_model.copy_access(stride)
    fig = warp_access_plot(access)
    assert f"{sectors} sectors for one request of 32 threads" in figure_texts(fig)
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
