"""Chapter 01's crossover experiment, figure and dashboard: every series labelled, the model's
GPU series, the controls, and the GPU branch with the stand-in GPU."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from gpulab import device, hardware, timing  # noqa: E402
from gpulab.experiments import crossover  # noqa: E402
from gpulab.experiments.crossover import (  # noqa: E402
    CrossoverDashboard,
    CrossoverExperiment,
    crossover_plot,
    first_faster_n,
)
from gpulab.experiments.independence import (  # noqa: E402
    IndependenceExperiment,
)
from gpulab.hardware import H100_SXM  # noqa: E402

SIM = device.tier() != "gpu"
SMALL_SIZES = [100, 10_000, 1_000_000]
SERIES = {
    "NumPy dot (BLAS) — measured on this CPU (test CPU)": [(10, 1e-6), (1000, 2e-6),
                                                            (100_000, 1e-4)],
    "dot_grid_stride, data on GPU — estimated from a roofline model of the NVIDIA H100 SXM5 "
    "80GB": [(10, 4e-6), (1000, 4e-6), (100_000, 5e-6)],
    "dot_grid_stride incl. host→device copy of x, y — estimated from a roofline model of the "
    "NVIDIA H100 SXM5 80GB": [(10, 5e-6), (1000, 6e-6), (100_000, 2e-4)],
}


def on_device(result) -> str:
    """The label of the estimated, data-already-on-the-GPU series."""
    return next(label for label in result["gpu_labels"]
                if "copy" not in label and "estimated by" in label)


def with_copy(result) -> str:
    return next(label for label in result["gpu_labels"]
                if "copy" in label and "estimated by" in label)


def seconds_at(result, label, n) -> float:
    return dict(result["series"][label])[n]


@pytest.fixture(scope="module")
def small_run():
    experiment = CrossoverExperiment(sizes=SMALL_SIZES)
    return experiment, experiment.run()


def test_every_series_says_where_its_numbers_came_from(small_run):
    _, result = small_run
    for label, points in result["series"].items():
        assert "measured on" in label or "estimated by" in label, label
        assert [n for n, _ in points] == SMALL_SIZES
        assert all(seconds > 0 for _, seconds in points)
    assert result["cpu_label"].startswith("NumPy dot")
    assert "measured on this CPU" in result["cpu_label"]
    assert "NVIDIA H100" in on_device(result) and "host→device copy" in with_copy(result)
    assert result["kernel_check"]["ok"]  # the kernel itself ran and agreed with NumPy


def test_gpu_series_follow_the_roofline_model(small_run):
    _, result = small_run
    for n in SMALL_SIZES:
        expected = hardware.estimate_time(H100_SXM.key, flops=2 * n, bytes_moved=2 * n * 4)
        assert seconds_at(result, on_device(result), n) == pytest.approx(expected.time_s)
        assert seconds_at(result, with_copy(result), n) > seconds_at(result, on_device(result), n)


@pytest.mark.skipif(not SIM, reason="the simulator tier never times the GPU")
def test_sim_tier_never_asks_for_gpu_time(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("time_gpu was called in the sim tier")

    monkeypatch.setattr(timing, "time_gpu", refuse)
    result = CrossoverExperiment(sizes=[1000]).run()
    assert all("measured on" not in label for label in result["gpu_labels"])


def test_explain_names_the_costs(small_run):
    experiment, _ = small_run
    text = experiment.explain()
    assert "launch" in text and "memory-bound" in text
    assert "2 FLOPs" in text and "8 bytes" in text
    assert "PCIe" in text


def test_crossover_n_on_synthetic_data():
    experiment = CrossoverExperiment(sizes=[10])
    experiment.last_result = {
        "cpu_label": "cpu — measured on this CPU",
        "series": {
            "cpu — measured on this CPU": [(10, 1e-6), (100, 1e-5), (1000, 1e-4)],
            "gpu — estimated from a model": [(10, 5e-6), (100, 5e-6), (1000, 5e-6)],
            "slow — estimated from a model": [(10, 1.0), (100, 1.0), (1000, 1.0)],
        },
    }
    assert experiment.crossover_n("gpu — estimated from a model") == 100
    assert experiment.crossover_n("slow — estimated from a model") is None
    with pytest.raises(KeyError, match="no series"):
        experiment.crossover_n("nope")


def test_experiment_rejects_bad_arguments():
    with pytest.raises(ValueError, match="method"):
        CrossoverExperiment(method="magic")
    with pytest.raises(ValueError, match="float32 or float64"):
        CrossoverExperiment(dtype=np.int32)
    with pytest.raises(ValueError, match="no GPU called"):
        CrossoverExperiment(gpu="Voodoo 2")


def test_default_sizes_come_from_the_tier():
    assert max(crossover.default_sizes("sim")) == 10**7
    assert max(crossover.default_sizes("gpu")) == 10**8
    assert crossover.default_sizes("sim")[0] == 10


@pytest.fixture
def dashboard():
    board = CrossoverDashboard()
    board.size_slider.value = (1_000, 1_000_000)  # keep the test quick
    board.run_button.click()
    assert board.last_error is None, board.last_error
    return board


def test_dashboard_runs_what_the_controls_say(dashboard):
    result = dashboard.last_result
    assert result["gpu"] == H100_SXM.key and result["dtype"] == "float32"
    assert result["sizes"] == [1_000, 3_000, 10_000, 30_000, 100_000, 300_000, 1_000_000]
    assert dashboard.figure is not None
    legend = [t.get_text().replace("\n", " ") for t in
              dashboard.figure.axes[0].get_legend().get_texts()]
    assert legend == list(result["series"])
    assert "memory-bound" in dashboard.explanation.value
    assert dashboard.widget.children  # a VBox to display


def test_choosing_a_t4_gives_a_slower_estimate(dashboard):
    h100 = dashboard.last_result
    dashboard.gpu_dropdown.value = "T4"
    dashboard.run_button.click()
    t4 = dashboard.last_result
    assert t4 is not h100 and t4["gpu"] == "T4"
    assert "NVIDIA T4" in on_device(t4)
    n = max(dict(t4["series"][on_device(t4)]))
    # 320 GB/s against 3.35 TB/s: the T4 is memory-bound here, while the H100's time is mostly
    # the host's launch cost (the same on both), so about twice as slow, not ten times
    assert seconds_at(t4, on_device(t4), n) > 2 * seconds_at(h100, on_device(h100), n)


def test_the_copy_checkbox_adds_the_transfer(dashboard):
    dashboard.transfer_checkbox.value = False
    dashboard.run_button.click()
    without = dashboard.last_result
    assert not any("copy" in label for label in without["series"])
    dashboard.transfer_checkbox.value = True
    dashboard.run_button.click()
    with_transfer = dashboard.last_result
    n = 1_000_000
    assert seconds_at(with_transfer, with_copy(with_transfer), n) > \
        seconds_at(without, on_device(without), n)


def test_float64_moves_twice_the_bytes(dashboard):
    dashboard.dtype_toggle.value = "float64"
    dashboard.run_button.click()
    result = dashboard.last_result
    assert result["dtype"] == "float64"
    n = 1_000_000
    expected = hardware.estimate_time(H100_SXM.key, flops=2 * n, bytes_moved=16 * n,
                                      precision="fp64")
    assert seconds_at(result, on_device(result), n) == pytest.approx(expected.time_s)
    assert "16 bytes" in dashboard.explanation.value


@pytest.mark.gpu
@pytest.mark.skipif(SIM, reason="needs a real GPU")
def test_gpu_tier_measures_the_kernel():
    result = CrossoverExperiment(sizes=[1000, 10**6]).run()
    measured = [label for label in result["gpu_labels"] if "measured on" in label]
    assert len(measured) == 3  # on device, with the copy from pageable and from pinned memory
    independence_result = IndependenceExperiment(12).run()
    assert independence_result["chain"]["gpu_time"].median_s > 0


def test_crossover_plot_legend_is_the_provenance_labels():
    fig = crossover_plot(SERIES)
    ax = fig.axes[0]
    legend = [t.get_text().replace("\n", " ") for t in ax.get_legend().get_texts()]
    assert legend == list(SERIES)
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    stars = [line for line in ax.get_lines() if line.get_label() == "_crossover"]
    assert [tuple(line.get_xdata()) for line in stars] == [(100_000,)]  # only the on-GPU line


def test_crossover_plot_takes_an_experiment_result():
    fig, ax = plt.subplots()
    assert crossover_plot({"series": SERIES}, ax=ax) is fig


@pytest.mark.parametrize("cpu, gpu, expected", [
    ([(1, 1.0), (2, 2.0), (3, 3.0)], [(1, 2.0), (2, 1.0), (3, 1.0)], 2),
    ([(1, 1.0), (2, 2.0), (3, 3.0)], [(1, 2.0), (2, 3.0), (3, 4.0)], None),
    ([(1, 1.0), (2, 2.0), (3, 3.0), (4, 4.0)], [(1, 5.0), (2, 1.0), (3, 5.0), (4, 1.0)], 4),
    ([(1, 1.0), (2, 2.0)], [(1, 0.5), (2, 0.5)], 1),
    ([(1, 1.0)], [(2, 0.1)], None),  # no size in common
])
def test_first_faster_n(cpu, gpu, expected):
    assert first_faster_n(cpu, gpu) == expected


def test_gpu_branch_with_the_stand_in_gpu(stand_in_gpu):
    # One size: each of its three GPU series is a launch of the grid-stride dot, whose grid
    # (from the SM count) costs the simulator the same ~4 s at any n; the labels are per series.
    result = CrossoverExperiment(sizes=[100]).run()
    measured = [label for label in result["gpu_labels"] if "measured on" in label]
    assert len(measured) == 3 and all(stand_in_gpu in label for label in measured)
    assert sum("from pinned memory" in label for label in measured) == 1
    assert any("estimated by" in label for label in result["gpu_labels"])


def test_a_recorded_run_stands_next_to_the_estimate(recorded_gpu_run):
    from gpulab.experiments.crossover import recorded_comparison

    table = recorded_comparison()
    assert table is not None and "NVIDIA H200" in table.measured_label
    assert "promised bands" in table.predicted_label and "H200" in table.predicted_label
    whats = [row.what for row in table.rows]
    assert any("pinned" in w for w in whats) and any("pageable" in w for w in whats)
    on_device = [row for row in table.rows if "data on GPU" in row.what]
    assert on_device[-1].ratio == pytest.approx(1.5)  # the fixture: 1.5x the model, memory-bound
    experiment = CrossoverExperiment(sizes=[100, 1000])
    result = experiment.run()
    assert result["recorded"] is not None
    text = experiment.explain()
    assert "measured/predicted" in text and "measured on NVIDIA H200" in text
    # the model itself now uses the measured launch overhead (6 µs), and says so
    estimate = result["records"][on_device_label(result)][0]
    assert estimate.launch_s == pytest.approx(6e-6) and "measured on" in estimate.label


def on_device_label(result):
    return next(label for label in result["records"]
                if "data on GPU" in label and "estimated by" in label)


def test_without_a_recorded_run_there_is_no_comparison(monkeypatch, tmp_path):
    from gpulab import recorded_runs
    from gpulab.experiments.crossover import recorded_comparison

    monkeypatch.setenv(recorded_runs.DATA_DIR_VARIABLE, str(tmp_path))
    assert recorded_comparison() is None
