"""Dashboards driven from Python: set a control, click Run, read the result."""

import math
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from gpulab import bench, device, hardware  # noqa: E402
from gpulab.widgets import crossover, independence  # noqa: E402
from gpulab.widgets.crossover import CrossoverDashboard, CrossoverExperiment  # noqa: E402
from gpulab.widgets.independence import (  # noqa: E402
    IndependenceDashboard,
    IndependenceExperiment,
)

SIM = device.tier() != "gpu"
SMALL_SIZES = [100, 10_000, 1_000_000]


def on_device(result) -> str:
    """The label of the estimated, data-already-on-the-GPU series."""
    return next(label for label in result["gpu_labels"]
                if "copy" not in label and "estimated from" in label)


def with_copy(result) -> str:
    return next(label for label in result["gpu_labels"]
                if "copy" in label and "estimated from" in label)


def seconds_at(result, label, n) -> float:
    return dict(result["series"][label])[n]


@pytest.fixture(scope="module")
def small_run():
    experiment = CrossoverExperiment(sizes=SMALL_SIZES)
    return experiment, experiment.run()


def test_every_series_says_where_its_numbers_came_from(small_run):
    _, result = small_run
    for label, points in result["series"].items():
        assert "measured on" in label or "estimated from" in label, label
        assert [n for n, _ in points] == SMALL_SIZES
        assert all(seconds > 0 for _, seconds in points)
    assert result["cpu_label"].startswith("NumPy dot")
    assert "measured on this CPU" in result["cpu_label"]
    assert "NVIDIA H100" in on_device(result) and "host→device copy" in with_copy(result)
    assert result["kernel_check"]["ok"]  # the kernel itself ran and agreed with NumPy


def test_gpu_series_follow_the_roofline_model(small_run):
    _, result = small_run
    for n in SMALL_SIZES:
        expected = hardware.estimate_time("H100-SXM", flops=2 * n, bytes_moved=2 * n * 4)
        assert seconds_at(result, on_device(result), n) == pytest.approx(expected.time_s)
        assert seconds_at(result, with_copy(result), n) > seconds_at(result, on_device(result), n)


@pytest.mark.skipif(not SIM, reason="the simulator tier never times the GPU")
def test_sim_tier_never_asks_for_gpu_time(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("time_gpu was called in the sim tier")

    monkeypatch.setattr(bench, "time_gpu", refuse)
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
    assert result["gpu"] == "H100-SXM" and result["dtype"] == "float32"
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
    n = 1_000_000
    # 320 GB/s against 3.35 TB/s: several times slower, even with the same launch overhead
    assert seconds_at(t4, on_device(t4), n) > 3 * seconds_at(h100, on_device(h100), n)


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
    expected = hardware.estimate_time("H100-SXM", flops=2 * n, bytes_moved=16 * n,
                                      precision="fp64")
    assert seconds_at(result, on_device(result), n) == pytest.approx(expected.time_s)
    assert "16 bytes" in dashboard.explanation.value


@pytest.mark.parametrize("n", [1, 2, 12, 13, 100])
def test_independence_sums_match_numpy_and_count_steps(n):
    result = IndependenceExperiment(n).run()
    assert result["chain"]["sum"] == result["tree"]["sum"] == result["numpy_sum"]
    assert result["numpy_sum"] == float(np.sum(result["values"], dtype=np.float64))
    assert result["matches_numpy"]
    assert result["chain"]["steps"] == n - 1
    assert result["tree"]["steps"] == (math.ceil(math.log2(n)) if n > 1 else 0)
    chain, tree = result["chain"]["launch"], result["tree"]["launch"]
    assert (chain.blocks, chain.threads_per_block, chain.grid_stride) == (1, 1, True)
    assert tree.blocks == 1 and tree.threads_per_block >= n
    assert tree.threads_per_block & (tree.threads_per_block - 1) == 0  # a power of two
    assert result["chain"]["kernel"] == "dot_grid_stride"
    assert result["tree"]["kernel"] == "dot_shared_tree"
    if SIM:
        assert result["chain"]["gpu_time"] is None and "Not timed" in result["timing_note"]


def test_independence_rejects_sizes_beyond_one_block():
    with pytest.raises(ValueError, match="1024"):
        IndependenceExperiment(1025)
    with pytest.raises(ValueError):
        IndependenceExperiment(0)


def test_independence_dashboard():
    board = IndependenceDashboard()
    assert board.n_slider.value == 12
    assert board.n_slider.max == independence.max_n()
    board.n_slider.value = 20
    board.run_button.click()
    assert board.last_error is None, board.last_error
    result = board.last_result
    assert result["n"] == 20 and result["matches_numpy"]
    assert result["chain"]["steps"] == 19 and result["tree"]["steps"] == 5
    assert "dot_grid_stride[1, 1]" in board.summary.value
    assert "dot_shared_tree[1, 32]" in board.summary.value
    texts = [t.get_text() for t in board.figure.axes[0].texts]
    assert any("n = 20: 19 steps" in t for t in texts)


@pytest.mark.gpu
@pytest.mark.skipif(SIM, reason="needs a real GPU")
def test_gpu_tier_measures_the_kernel():
    result = CrossoverExperiment(sizes=[1000, 10**6]).run()
    measured = [label for label in result["gpu_labels"] if "measured on" in label]
    assert len(measured) == 2  # on device, and with the copy
    independence_result = IndependenceExperiment(12).run()
    assert independence_result["chain"]["gpu_time"].median_s > 0


def test_importing_the_widgets_package_is_light():
    code = ("import sys, gpulab.widgets; "
            "assert 'ipywidgets' not in sys.modules and 'numba' not in sys.modules; "
            "from gpulab.widgets import IndependenceExperiment")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
