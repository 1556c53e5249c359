"""Chapter 12's experiment: latency vs batch, the crossover, fp8 weights, the serving sweep."""

import matplotlib
import numpy as np
import pytest

from gpulab.experiments import inference as inf

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def trained():
    return inf.trained_digits(epochs=4)


def test_latency_rows_and_crossover(trained):
    model, _, data = trained
    cpu = inf.cpu_latency(model, data, (1, 16, 256), min_time_s=0.002)
    gpu = inf.gpu_latency(model, data, (1, 16, 256))
    assert [r["batch"] for r in cpu] == [1, 16, 256] and all(r["latency_s"] > 0 for r in cpu)
    assert "measured" in cpu[0]["where"]
    assert "estimated" in gpu[0]["where"] or "measured" in gpu[0]["where"]
    cross = inf.crossover(cpu, gpu)
    assert "CPU" in cross["sentence"]
    inf.latency_plot(cpu, gpu)


def test_gpu_estimate_includes_launches_and_transfer():
    est = inf.gpu_inference_estimate((64, 128, 10), 32, "H100")
    assert est.launches == 5 and est.transfer_bytes == 32 * 64 * 4 + 32 * 8
    assert est.time_s > est.kernel_s


def test_fp8_weights_keep_accuracy_and_quarter_the_memory(trained):
    model, _, data = trained
    r = inf.fp8_weights(model, data)
    assert r["quantised_bytes"] < 0.3 * r["fp32_bytes"]
    assert abs(r["quantised_accuracy"] - r["fp32_accuracy"]) < 0.03


def test_serving_sweep_is_bounded_and_shows_the_trade(trained):
    model, _, data = trained
    rows = inf.serving_sweep(model, data, windows_ms=(0.0, 20.0), rates=(300.0,),
                             n_requests=30, concurrency=8)
    assert len(rows) == 2 and all(r["completed"] == 30 and r["errors"] == 0 for r in rows)
    assert rows[1]["mean_batch"] > rows[0]["mean_batch"]
    assert all(r["p50_ms"] <= r["p99_ms"] for r in rows)
    inf.serving_plot(rows)


def test_energy_rows_carry_boundaries():
    e = inf.inference_energy([{"batch": 8, "latency_s": 1e-4}], [{"batch": 8, "latency_s": 5e-5}],
                             8)
    assert e["cpu"].boundary == "chip" and e["gpu"].boundary == "board"
    assert e["gpu"].method == "estimated"

def test_faster_not_greener_comes_from_the_rows():
    cpu = [{"batch": b, "latency_s": s} for b, s in ((1, 3e-5), (64, 1.7e-4), (1024, 1.9e-3))]
    gpu = [{"batch": b, "latency_s": s, "gpu_s": g}
           for b, s, g in ((1, 1.1e-4, 1e-5), (64, 1.1e-4, 1.1e-5), (1024, 1.4e-4, 6e-5))]
    ex = inf.faster_not_greener(cpu, gpu)
    slow_but_costly, fast_and_green = ex["faster_not_greener"], ex["faster_and_greener"]
    assert slow_but_costly["batch"] == 64 and slow_but_costly["speedup"] > 1
    assert slow_but_costly["gpu"].joules > slow_but_costly["cpu"].joules
    assert fast_and_green["batch"] == 1024
    assert fast_and_green["gpu"].joules < fast_and_green["cpu"].joules
    lines = inf.faster_not_greener_lines(ex)
    assert lines[0].startswith("Batch 64: the GPU is") and "more energy" in lines[0]
    assert "chip" in lines[-1] and "board" in lines[-1]
    with pytest.raises(ValueError, match="share no batch"):
        inf.faster_not_greener(cpu, [{"batch": 7, "latency_s": 1.0}])


def test_gpu_rows_are_measured_with_the_kernels_backend_on_the_gpu_tier(trained, monkeypatch):
    model, _, data = trained
    monkeypatch.setattr(inf.device, "tier", lambda: "gpu")
    monkeypatch.setattr(inf.timing, "local_gpu_spec", lambda: None)
    rows = inf.gpu_latency(model, data, (2,))
    assert rows[0]["batch"] == 2 and rows[0]["latency_s"] > 0
    assert rows[0]["where"].startswith("measured on this machine's GPU")


def test_a_recorded_run_stands_next_to_the_estimate(recorded_gpu_run):
    from gpulab.experiments.inference import recorded_comparison

    table = recorded_comparison([64, 128, 10])
    assert table is not None and [r.what for r in table.rows] == [
        "batch 1", "batch 8", "batch 64", "batch 512"]
    assert all(r.ratio > 1 for r in table.rows) and "NVIDIA H200" in str(table)


def test_inference_energy_is_measured_where_the_machine_can(monkeypatch):
    class Model:
        def predict(self, X):
            return X.sum(axis=1)

        def copy(self, backend):
            return self

    class Data:
        X_test = np.ones((10, 4), dtype=np.float32)

    calls = []

    def fake_measure(fn, device="cpu", **kwargs):
        runs = fn()
        calls.append((device, runs))
        return runs, inf.energy.Energy(2.0, 1.0, "board" if device == "gpu" else "chip",
                                       "measured", f"fake {device} meter")

    monkeypatch.setattr(inf.energy, "measure", fake_measure)
    monkeypatch.setattr(inf.energy, "rapl_zones", lambda: ["package-0"])
    monkeypatch.setattr(inf.energy, "gpu_power_available", lambda: True)
    monkeypatch.setattr(inf.device, "tier", lambda: "gpu")
    rows = [{"batch": 8, "latency_s": 1e-4}]
    e = inf.inference_energy(rows, rows, 8, model=Model(), data=Data(), min_time_s=0.0)
    assert [d for d, _ in calls] == ["cpu", "gpu"]
    for side, (_, runs) in zip(("cpu", "gpu"), calls, strict=True):
        assert e[side].method == "measured"
        assert e[side].joules == pytest.approx(2.0 / (8 * runs) * 1000)
    assert (e["cpu"].boundary, e["gpu"].boundary) == ("chip", "board")
    monkeypatch.setattr(inf.device, "tier", lambda: "sim")
    estimated = inf.inference_energy(rows, rows, 8, model=Model(), data=Data(), min_time_s=0.0)
    assert estimated["gpu"].method == "estimated" and estimated["cpu"].method == "measured"
