"""The training benchmark measures the NumPy baseline, labels where it ran, and refuses to time
the simulator."""

import pytest

from gpulab import device, timing
from gpulab.bench.training import (
    samples_per_s,
    training_estimate,
    training_rows,
    training_throughput,
)
from gpulab.nn.data import load_digits


def test_numpy_epoch_is_measured_on_this_cpu():
    data = load_digits().subset(256, 32)
    m = training_throughput("numpy", batch_size=64, epochs=2, data=data)
    assert m.origin == "cpu" and m.label.startswith("measured on this CPU")
    assert len(m.times_s) == 2 and m.n == 256
    assert samples_per_s(m) == pytest.approx(256 / m.median_s)
    assert m.meta["samples_per_s"] == pytest.approx(samples_per_s(m))
    assert m.flops > 0 and m.gflops_per_s > 0


@pytest.mark.skipif(device.tier() == "gpu", reason="on a GPU the kernels are timed")
def test_simulator_is_not_timed():
    with pytest.raises(timing.SimulatorTimingError):
        training_throughput("kernels")


def test_estimate_is_labelled():
    estimate = training_estimate("H200", batch_size=32, n_samples=320)
    assert estimate.origin == "model"
    assert estimate.label.startswith("estimated by gpulab's GPU model of the NVIDIA H200 SXM "
                                     "141GB")
    assert estimate.meta["samples_per_s"] == pytest.approx(320 / estimate.median_s)


def test_training_rows_for_gpulab_bench():
    from gpulab import hardware

    rows = training_rows(hardware.get_gpu("T4"), repeats=2)
    assert [r.origin for r in rows] in (["cpu", "model"], ["cpu", "gpu", "model"])
    for row in rows:
        assert row.group == "training" and "samples/s" in row.note
        assert row.label.startswith(("measured on", "estimated by gpulab's GPU model"))
    assert rows[-1].device == "NVIDIA T4 16GB"
    if device.tier() == "sim":
        assert rows[-1].check.startswith("ok vs NumPy")


def test_gpu_rows_with_the_stand_in_gpu(stand_in_gpu, monkeypatch):
    """The kernel backend's epoch timed in the gpu tier: the stand-in runs one real epoch of
    the kernels in the simulator, so the data is cut to one batch and the hidden layer to 8
    units (the weight-shaped launches, 64 x 128 threads for the recipe, are the simulator's
    cost; the branch's lines are the same at any width)."""
    from gpulab.bench import training
    from gpulab.nn.recipes import digits_model

    small = load_digits().subset(8, 8)
    monkeypatch.setattr(training, "load_digits", lambda seed=0: small)
    monkeypatch.setattr(training, "digits_model",
                        lambda backend, seed=0: digits_model(backend, seed=seed,
                                                             widths=(64, 8, 10)))
    rows = training_rows(None, repeats=1, batch_size=8)
    assert [r.origin for r in rows] == ["cpu", "gpu"]
    assert rows[1].label == f"measured on {stand_in_gpu} (CUDA events)"
