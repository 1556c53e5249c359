"""Chapter 08's batch-size experiment: throughput, memory and convergence per batch size."""

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from gpulab import device  # noqa: E402
from gpulab.experiments.batch_size import (  # noqa: E402
    BatchSizeDashboard,
    BatchSizeExperiment,
    largest_batch_within,
)
from gpulab.hardware import H100_SXM
from gpulab.nn import cost, memory  # noqa: E402
from gpulab.nn.recipes import DIGITS  # noqa: E402

SIM = device.tier() != "gpu"


@pytest.fixture(scope="module")
def batch_run():
    experiment = BatchSizeExperiment(batch_sizes=[8, 64, 512], epochs=3)
    return experiment, experiment.run()


def test_batch_size_series_are_labelled(batch_run):
    _, result = batch_run
    for label, values in result["samples_per_s"].items():
        assert "measured on" in label or "estimated by gpulab's GPU model" in label, label
        assert len(values) == 3 and all(v > 0 for v in values)
    assert result["updates_per_epoch"] == [180, 23, 3]


def test_batch_size_tradeoffs(batch_run):
    experiment, result = batch_run
    estimated = result["samples_per_s"][result["estimate_label"]]
    assert estimated[0] < estimated[1] < estimated[2]  # launch-bound: bigger batches, more/s
    activations = [m["activations"] for m in result["memory"]]
    assert activations[2] == 64 * activations[0]  # linear in the batch
    assert len({m["parameters"] for m in result["memory"]}) == 1  # weights do not depend on it
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
    budget = memory.mlp_training_memory(widths, 128, "adam").total
    assert largest_batch_within(budget) == 128
    assert largest_batch_within(budget - 1) == 64
    assert largest_batch_within(1) is None
    assert largest_batch_within(np.inf) == 1024


def test_gpu_branch_with_the_stand_in_gpu(stand_in_gpu, monkeypatch):
    """The kernel backend's throughput on the stand-in GPU: a few samples, one batch size, one
    step per epoch, and a narrow hidden layer (64-8-10): the simulator's cost is in the
    weight-shaped launches (64 x 128 threads for the recipe), and the branch's lines are the
    same at any width."""
    from gpulab.experiments import batch_size
    from gpulab.nn.data import load_digits
    from gpulab.nn.recipes import train_digits

    small = load_digits(seed=0).subset(16, 4)
    monkeypatch.setattr(batch_size, "load_digits", lambda seed=0: small)
    monkeypatch.setattr(batch_size, "train_digits",
                        lambda backend, **settings: train_digits(backend, widths=(64, 8, 10),
                                                                 **settings))
    result = BatchSizeExperiment(batch_sizes=[16], epochs=1).run()
    measured = [label for label in result["samples_per_s"] if "wall clock" in label]
    assert measured and all(v > 0 for v in result["samples_per_s"][measured[0]])


def test_a_recorded_run_stands_next_to_the_estimate(recorded_gpu_run):
    from gpulab.experiments.batch_size import recorded_comparison

    table = recorded_comparison()
    assert table is not None and len(table.rows) == 4
    assert [r.ratio for r in table.rows] == pytest.approx([3.0] * 4)  # the fixture's factor
    assert "batch 8" in table.rows[0].what and "promised bands" in table.predicted_label


def test_napkin_inputs_name_each_value():
    from gpulab import hardware
    from gpulab.experiments.batch_size import napkin_inputs

    widths = list(DIGITS["widths"])
    kernels = cost.step_kernels(widths, 1)
    text = napkin_inputs(widths, H100_SXM.key)
    assert text.startswith(hardware.LAUNCH_OVERHEAD_SOURCE)
    assert (f"cost.step_kernels({widths}, 1): {len(kernels)} kernels, "
            f"{sum(k.flops for k in kernels):,.0f} FLOPs and "
            f"{sum(k.bytes_moved for k in kernels):,.0f} bytes") in text
    assert f"{cost.step_transfer_bytes(widths, 1):,} bytes copied" in text
    h100 = H100_SXM
    assert f"peak_flops_for('fp32') = {h100.peak_flops_for('fp32'):.3g}" in text
    assert f"host_pageable_bytes_per_s = {h100.host_pageable_bytes_per_s:.3g}" in text
    assert all(key in text.splitlines()[-1] for key in hardware.GPUS)


def test_throughput_table_puts_a_prediction_next_to_the_model():
    from gpulab.experiments.batch_size import throughput_table
    from gpulab.nn.cost import per_sample_seconds

    widths = list(DIGITS["widths"])

    def exact(w, batch, gpu):
        return cost.estimate_step(w, batch, gpu).samples_per_s

    def unwritten(w, batch, gpu):
        raise NotImplementedError

    lines = str(throughput_table(widths, exact, gpus=("T4",), batches=(8, 4096))).splitlines()
    model = cost.estimate_step(widths, 4096, "T4").samples_per_s
    assert lines[2].split() == ["T4", "4,096", f"{model:,.0f}", f"{model:,.0f}", "1.00"]
    parts = per_sample_seconds(widths, "T4")
    ceiling = 1 / (max(parts["compute"], parts["memory"]) + parts["transfer"])
    assert lines[3].startswith(f"T4: levels off near {ceiling:,.0f} samples/s (the model)")
    for predict in (None, unwritten):
        row = str(throughput_table(widths, predict, gpus=("T4",), batches=(8,))).splitlines()[1]
        assert row.split()[-2:] == ["-", "-"]


def test_memory_table_counts_against_nominal_memory():
    from gpulab.experiments.batch_size import memory_table

    widths = list(DIGITS["widths"])
    table = memory_table(widths, batches=(8, 4096), gpu=H100_SXM.key)
    lines = str(table).splitlines()
    m = memory.mlp_training_memory(widths, 4096, "adam")
    assert lines[0].endswith("total (kB)")
    assert lines[2].split()[0] == "4096" and lines[2].endswith(f"{m.total / 1e3:,.1f}")
    h100 = H100_SXM
    assert lines[-1] == (f"batch 4,096: {m.total / 1e6:.2f} MB (counted by gpulab.nn.memory), "
                         f"{100 * m.total / h100.memory_bytes:.3f} % of the {h100.name}'s "
                         "nominal 80 GB")


def test_chapters_08_and_09_print_the_same_bytes_for_the_same_step():
    from gpulab.experiments.batch_size import memory_table

    widths = list(DIGITS["widths"])
    row = next(line for line in str(memory_table(widths)).splitlines()
               if line.split()[:1] == ["32"])
    ch09 = memory.mlp_training_memory(widths, 32, "adam")  # chapter 09's digits breakdown
    assert ch09.total == 428_320
    assert row.endswith(f"{ch09.total / 1e3:,.1f}")  # kB, as the heading says
