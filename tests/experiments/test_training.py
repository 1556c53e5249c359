"""Chapter 07's training experiment and figures: curves, decision regions, failures reported."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from gpulab import device  # noqa: E402
from gpulab.experiments.training import (  # noqa: E402
    TrainingDashboard,
    TrainingExperiment,
    compare_runs,
    decision_regions,
    epoch_times,
    gpu_ratios,
    ratios_table,
    times_table,
    training_curves,
)
from gpulab.hardware import H100_SXM
from gpulab.nn import MLP, Trainer, load_digits, spirals  # noqa: E402

SIM = device.tier() != "gpu"


def test_training_experiment_reports_the_gap_and_checks_a_kernel_step():
    experiment = TrainingExperiment(epochs=3, hidden=(32,))
    result = experiment.run()
    history = result["history"]
    assert len(history.records) == 3 and "measured on this CPU" in history.timing
    assert result["kernel_step"]["ok"]
    assert result["gpu_label"].startswith("estimated by gpulab's GPU model")
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


def test_setting_the_widget_to_bf16_trains_and_reports_bf16(figure_texts):
    dashboard = TrainingDashboard()
    dashboard.precision_toggle.value = "bf16"
    dashboard.hidden_dropdown.value = (16,)
    dashboard.epochs_slider.value = 1
    dashboard.run_button.click()
    assert dashboard.last_error is None
    result = dashboard.last_result
    assert result["precision"] == "bf16" and list(result["histories"]) == [
        "bf16 storage, emulated on this CPU"]
    history = result["history"]
    assert "bf16 + fp32 master weights" in history.model and "bf16" in history.timing
    assert "emulated with NumPy and ml_dtypes" in history.timing
    assert len(history.records) == 1 and 0 < history.final.test_accuracy <= 1
    assert result["kernel_step"]["ok"]  # one real bf16 step on chapter 04's kernels
    assert "bf16 storage" in dashboard.explanation.value
    assert "bf16 storage" in figure_texts(dashboard.figure)


def test_fp16_storage_uses_loss_scaling_and_refuses_what_the_recipe_cannot_train():
    experiment = TrainingExperiment(dataset="spirals", hidden=(8,), epochs=1, precision="fp16")
    experiment.run()
    assert "loss scaling" in experiment.explain() and "fp16" in experiment.explain()
    with pytest.raises(ValueError, match="ReLU layers with Adam"):
        TrainingExperiment(precision="bf16", activation="gelu")
    with pytest.raises(ValueError, match="precision must be one of fp32, bf16, fp16"):
        TrainingExperiment(precision="fp8")


def test_the_chapters_tables_say_where_their_numbers_come_from():
    data = spirals(n_per_class=10, seed=0)
    histories = {name: Trainer(MLP([2, 8, 3], seed=0), lr=1e-2, epochs=2, progress=False,
                               batch_size=batch).fit(data)
                 for name, batch in (("batch 8", 8), ("batch 32", 32))}
    table = compare_runs(histories)
    assert "batch 8" in table and "held-out" in table and "measured on this CPU" in table
    ratios = gpu_ratios(H100_SXM.key, "T4")
    assert set(ratios) == {"fp32", "fp16", "memory bandwidth"}  # the T4 has no bf16 rate
    assert 8 < ratios["fp32"] < 9 and ratios["fp16"] > ratios["fp32"]
    assert "CUDA cores" in str(ratios_table()) and "tensor cores" in str(ratios_table())
    times = epoch_times(histories["batch 8"], data.n_train, widths=(2, 8, 3), batch_size=8)
    assert len(times) == 3 and any(k.startswith("estimated by gpulab's GPU model") for k in times)
    assert "ms" in str(times_table(times))


def test_training_dashboard_reports_a_failure_instead_of_raising(monkeypatch):
    from gpulab.experiments import training
    from gpulab.nn.trainer import TrainingError

    def diverge(self, X, y):
        raise TrainingError("epoch 1, step 1: the loss became nan")

    monkeypatch.setattr(training.Trainer, "step", diverge)
    dashboard = TrainingDashboard()
    dashboard.run_button.click()  # the callback must not raise: the error is shown
    assert isinstance(dashboard.last_error, TrainingError)
    assert "Failed" in dashboard.status.value and "nan" in dashboard.status.value



@pytest.fixture(scope="module")
def spiral_run():
    data = spirals(n_per_class=30, seed=0)
    model = MLP([2, 16, 3], seed=0)
    history = Trainer(model, lr=1e-2, epochs=3, progress=False).fit(data)
    return data, model, history


def test_training_curves_show_training_and_held_out(figure_texts, spiral_run):
    _, _, history = spiral_run
    fig = training_curves({"run": history})
    assert "run: training" in figure_texts(fig) and "run: held-out" in figure_texts(fig)
    assert len(fig.axes[0].get_lines()) == 2
    plt.close(fig)


def test_decision_regions(figure_texts, spiral_run):
    data, model, _ = spiral_run
    fig = decision_regions(model, data, resolution=40)
    assert "% right" in figure_texts(fig)
    plt.close(fig)
    with pytest.raises(ValueError, match="2 features"):
        decision_regions(MLP([64, 10]), load_digits())


def test_gpu_branch_with_the_stand_in_gpu(stand_in_gpu, monkeypatch):
    """The kernels train on the stand-in GPU (for real, in the simulator): a tiny data set."""
    from gpulab.experiments import training

    monkeypatch.setattr(training, "load", lambda name: spirals(n_per_class=8, seed=0))
    result = TrainingExperiment(dataset="spirals", hidden=(8,), epochs=1, batch_size=24).run()
    assert set(result["histories"]) == {"NumPy on this CPU", "gpulab kernels on the GPU"}
    assert result["kernel_step"]["ok"]
