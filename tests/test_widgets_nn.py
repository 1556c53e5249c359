"""The chapter 05-08 dashboards driven from Python: set a control, click, read the result.
Every number they show says where it came from."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from gpulab import device  # noqa: E402
from gpulab.nn import cost  # noqa: E402
from gpulab.nn.recipes import DIGITS  # noqa: E402
from gpulab.widgets.batch_size import (  # noqa: E402
    BatchSizeDashboard,
    BatchSizeExperiment,
    largest_batch_within,
)
from gpulab.widgets.fusion import FusionDashboard, FusionExperiment  # noqa: E402
from gpulab.widgets.gradients import GradientDashboard, GradientExperiment  # noqa: E402
from gpulab.widgets.training import TrainingDashboard, TrainingExperiment  # noqa: E402

SIM = device.tier() != "gpu"


# --- chapter 05: fusion ----------------------------------------------------------------------


def test_fusion_halves_the_traffic_and_labels_every_time():
    experiment = FusionExperiment(batch_size=512, width=256)
    result = experiment.run()
    assert result["bytes"]["unfused"] == 4 * (4 * 512 * 256 + 256)
    assert result["bytes"]["fused"] == 4 * (2 * 512 * 256 + 256)
    assert result["check"]["ok"]
    for row in result["rows"]:
        assert row["label"].startswith(("measured on", "estimated from a roofline model"))
    assert {row["what"] for row in result["rows"]} == {"GPU", "CPU"}
    assert experiment.speedup("GPU") == pytest.approx(2.0, rel=0.01)  # the model: 2x traffic
    assert "counted" in experiment.explain()


def test_fusion_dashboard_runs_the_chosen_settings():
    dashboard = FusionDashboard()
    dashboard.batch_dropdown.value = 256
    dashboard.width_dropdown.value = 128
    dashboard.activation_dropdown.value = "gelu"
    dashboard.gpu_dropdown.value = "T4"
    dashboard.run_button.click()
    assert dashboard.last_error is None
    result = dashboard.last_result
    assert result["shape"] == (256, 128) and result["activation"] == "gelu"
    assert "T4" in result["gpu"] and "T4" in dashboard.explanation.value
    assert all(row["what"] == "GPU" for row in result["rows"])  # the CPU is timed for relu only


# --- chapter 06: gradients -------------------------------------------------------------------


def test_gradient_experiment_shows_the_eps_tradeoff():
    result = GradientExperiment("tanh").run()
    sweep = result["sweep"]
    assert 1e-8 <= sweep["best"]["float64"] <= 1e-3
    assert min(sweep["float64"]) < 1e-8 < min(sweep["float32"])  # float32 cannot check
    assert sweep["float64"][0] > 100 * min(sweep["float64"])  # truncation at large eps
    assert sweep["float64"][-1] > 100 * min(sweep["float64"])  # rounding at small eps
    assert result["check"].passed


def test_gradient_dashboard_checks_the_kernels():
    dashboard = GradientDashboard()
    dashboard.activation_dropdown.value = "sigmoid"
    dashboard.backend_toggle.value = "kernels"
    dashboard.run_button.click()
    assert dashboard.last_error is None
    check = dashboard.last_result["check"]
    assert check.passed and "CUDA kernels" in check.backend
    assert "sigmoid" in dashboard.explanation.value


# --- chapter 07: training --------------------------------------------------------------------


def test_training_experiment_reports_the_gap_and_checks_a_kernel_step():
    experiment = TrainingExperiment(epochs=3, hidden=(32,))
    result = experiment.run()
    history = result["history"]
    assert len(history.records) == 3 and "measured on this CPU" in history.timing
    assert result["kernel_step"]["ok"]
    assert result["gpu_label"].startswith("estimated from a roofline model")
    words = experiment.explain()
    assert "held-out" in words and "measured" in words and "estimated" in words


def test_training_dashboard_trains_spirals():
    dashboard = TrainingDashboard()
    dashboard.dataset_toggle.value = "spirals"
    dashboard.hidden_dropdown.value = (16,)
    dashboard.epochs_slider.value = 2
    dashboard.optimiser_toggle.value = "sgd"
    dashboard.lr_dropdown.value = 0.1
    dashboard.run_button.click()
    assert dashboard.last_error is None
    assert dashboard.last_result["history"].model.startswith("MLP(2 -> 16 -> 3")
    assert dashboard.figure is not None


def test_training_dashboard_reports_a_failure_instead_of_raising(monkeypatch):
    from gpulab.nn.trainer import TrainingError
    from gpulab.widgets import training

    def diverge(self, X, y):
        raise TrainingError("epoch 1, step 1: the loss became nan")

    monkeypatch.setattr(training.Trainer, "step", diverge)
    dashboard = TrainingDashboard()
    dashboard.run_button.click()  # the callback must not raise: the error is shown
    assert isinstance(dashboard.last_error, TrainingError)
    assert "Failed" in dashboard.status.value and "nan" in dashboard.status.value


# --- chapter 08: batch size ------------------------------------------------------------------


@pytest.fixture(scope="module")
def batch_run():
    experiment = BatchSizeExperiment(batch_sizes=[8, 64, 512], epochs=3)
    return experiment, experiment.run()


def test_batch_size_series_are_labelled(batch_run):
    _, result = batch_run
    for label, values in result["samples_per_s"].items():
        assert "measured on" in label or "estimated from a roofline model" in label, label
        assert len(values) == 3 and all(v > 0 for v in values)
    assert result["updates_per_epoch"] == [180, 23, 3]


def test_batch_size_tradeoffs(batch_run):
    experiment, result = batch_run
    estimated = result["samples_per_s"][result["estimate_label"]]
    assert estimated[0] < estimated[1] < estimated[2]  # launch-bound: bigger batches, more/s
    activations = [m["activations"] for m in result["memory"]]
    assert activations[2] == 64 * activations[0]  # linear in the batch
    assert len({m["weights"] for m in result["memory"]}) == 1  # weights do not depend on it
    # same epochs, same learning rate: the largest batch (3 updates per epoch) is behind
    assert result["final_test_loss"][2] > result["final_test_loss"][0]
    assert experiment.best_batch() in (8, 64)
    words = experiment.explain()
    assert "launch-bound" in words and "updates per epoch" in words


def test_batch_size_dashboard():
    dashboard = BatchSizeDashboard()
    dashboard.batch_select.value = (16, 256)
    dashboard.epochs_slider.value = 2
    dashboard.gpu_dropdown.value = "A100-SXM"
    dashboard.run_button.click()
    assert dashboard.last_error is None
    assert dashboard.last_result["batch_sizes"] == [16, 256]
    assert "A100" in dashboard.last_result["estimate_label"]
    assert "Convergence" in dashboard.explanation.value


def test_largest_batch_within_a_budget():
    widths = DIGITS["widths"]
    budget = cost.training_memory(widths, 128).total
    assert largest_batch_within(budget) == 128
    assert largest_batch_within(budget - 1) == 64
    assert largest_batch_within(1) is None
    assert largest_batch_within(np.inf) == 1024
