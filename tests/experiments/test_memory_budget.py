"""Chapter 09's experiment: the calculator against the bytes a real training step allocates,
activation checkpointing and gradient accumulation measured, out of memory and its remedies,
and real models against real GPUs (the dashboard)."""

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from gpulab import device  # noqa: E402
from gpulab.experiments import memory_budget  # noqa: E402
from gpulab.experiments.memory_budget import (  # noqa: E402
    MemoryBudgetDashboard,
    ModelFitExperiment,
    breakdown_plot,
    compare_accumulation,
    compare_checkpointing,
    fit_plot,
    measure_mlp_step,
    run_out_of_memory,
)
from gpulab.hardware import H100_SXM
from gpulab.nn import memory  # noqa: E402
from gpulab.nn.memory import OutOfDeviceMemory  # noqa: E402

SIM = device.tier() != "gpu"


@pytest.mark.parametrize("widths, batch, optimiser, checkpointing, steps", [
    ((64, 128, 10), 32, "adam", False, 1),  # the digits recipe's network and batch
    ((64, 128, 10), 256, "sgd", False, 1),
    ((64, 128, 10), 256, "adam", True, 1),
    ((64, 128, 10), 256, "adam", False, 4),
    ((64, 512, 512, 10), 1024, "adam", False, 1),
])
def test_prediction_matches_the_bytes_a_real_step_allocates(widths, batch, optimiser,
                                                            checkpointing, steps):
    r = measure_mlp_step(widths, batch, optimiser, checkpointing, steps)
    assert 0.9 <= r["held_ratio"] <= 1.1, (r["held_bytes"], r["predicted"].held)
    assert 0.8 <= r["peak_ratio"] <= 1.25, (r["peak_bytes"], r["predicted"].total)
    assert "tracemalloc" in r["label"]


def test_checkpointing_lowers_activation_memory_and_costs_recompute():
    r = compare_checkpointing((64, 256, 256, 256, 10), batch_size=256, repeats=9)
    plain, ckpt = r["plain"], r["checkpointed"]
    assert ckpt["activations_kept_bytes"] < 0.7 * plain["activations_kept_bytes"]
    assert ckpt["peak_bytes"] < plain["peak_bytes"]
    for row in (plain, ckpt):  # the prediction of what the forward pass keeps
        assert row["activations_kept_bytes"] == pytest.approx(row["predicted_kept_bytes"],
                                                              rel=0.05)
    assert r["extra_flops"] == pytest.approx(
        2 * 256 * (64 * 256 + 2 * 256 * 256 + 256 * 10) / plain["flops"])
    assert ckpt["seconds"] > 0 and plain["seconds"] > 0 and "CPU time" in r["time_label"]
    assert r["largest_gradient_difference"] == 0.0  # the same matmuls, recomputed


def test_accumulation_gives_the_whole_batch_gradients_with_less_memory():
    r = compare_accumulation((64, 128, 10), batch_size=300, accumulation_steps=4)
    assert r["largest_gradient_difference"] <= 1e-5 * r["largest_gradient"]
    assert r["accumulated"]["held_bytes"] < 0.5 * r["whole"]["held_bytes"]


def test_out_of_memory_is_named_and_each_remedy_runs():
    r = run_out_of_memory()
    assert isinstance(r["error"], OutOfDeviceMemory)
    assert r["needed"].total > r["budget_bytes"]
    assert "Remedies" in str(r["error"]) and "workspace" in str(r["error"])
    for remedy in r["remedies"]:
        assert remedy["ran"] and remedy["needed"].total <= r["budget_bytes"]
        assert remedy["accumulation_steps"] > 1
        assert remedy["held_bytes"] < r["needed"].held
        assert remedy["peak_bytes"] == pytest.approx(remedy["needed"].total, rel=0.2)


def test_fit_experiment_and_its_words():
    experiment = ModelFitExperiment("training", recompute="full")
    result = experiment.run()
    assert [row["model"] for row in result["rows"]][0] == "GPT-3 Small (125M)"
    assert experiment.smallest_gpu("GPT-3 Small (125M)") == "T4"
    assert experiment.smallest_gpu("GPT-3 (175B)") is None
    words = experiment.explain()
    assert "no single GPU" in words and "estimate" in words
    sharded = ModelFitExperiment("training", recompute="full", zero_ranks=512).run()
    assert any(row["fits"][H100_SXM.key] for row in sharded["rows"] if "175B" in row["model"])
    figure = fit_plot(result)
    assert "GiB" in " ".join(t.get_text() for t in figure.axes[0].get_xticklabels())
    with pytest.raises(ValueError):
        ModelFitExperiment("fine-tuning")


def test_breakdown_plot_stacks_the_kinds():
    figure = breakdown_plot([memory.mlp_training_memory([64, 128, 10], b) for b in (8, 512)],
                            unit=1e3, unit_name="kB")
    labels = figure.axes[0].get_legend_handles_labels()[1]
    assert "activations" in labels and "KV cache" not in labels


def test_dashboard():
    dashboard = MemoryBudgetDashboard()
    dashboard.run_button.click()
    assert dashboard.last_error is None and "Inference" in dashboard.explanation.value
    dashboard.purpose.value = "training"
    dashboard.recompute.value = "none"
    dashboard.zero_ranks.value = 64
    dashboard.run_button.click()
    assert dashboard.last_error is None
    assert "ZeRO-3 over 64" in dashboard.last_result["setting"]
    assert "calculator" in dashboard.status.value


@pytest.mark.skipif(not SIM, reason="the real GPU branch runs on a GPU")
def test_gpu_measurements_say_they_need_a_gpu():
    assert memory_budget.measure_on_gpu()["measured"] is False
    assert memory_budget.context_overhead()["measured"] is False
    assert memory_budget.cuda_out_of_memory()["raised"] is False


def test_gpu_branch_with_the_stand_in_gpu(stand_in_gpu):
    """The stand-in GPU runs the simulator, whose driver reports no memory figures: the GPU
    functions must say so rather than fail."""
    for result in (memory_budget.measure_on_gpu((8, 4, 2), 4),
                   memory_budget.context_overhead(), memory_budget.cuda_out_of_memory()):
        assert "no memory figures" in result["reason"]


@pytest.mark.skipif(SIM, reason="needs a GPU")
def test_on_a_real_gpu():
    r = memory_budget.measure_on_gpu()
    assert r["measured"] and 0.85 <= r["ratio"] <= 1.25  # the driver allocates in pages
    oom = memory_budget.cuda_out_of_memory()
    assert oom["raised"] and oom["out_of_memory"]
    assert np.isfinite(memory_budget.context_overhead()["used_bytes"])
