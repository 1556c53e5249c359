"""Chapter 03's matmul experiment: the tiled kernel checked, counts per tile, estimates;
its GPU branch with the stand-in GPU."""

import matplotlib

matplotlib.use("Agg")
import pytest  # noqa: E402

from gpulab import device, timing  # noqa: E402
from gpulab.experiments.matmul import MatmulDashboard, MatmulExperiment, check_shape  # noqa: E402
from gpulab.kernels import matmul as mm  # noqa: E402

SIM = device.tier() != "gpu"
N_SMALL = 2**16


def labels_are_honest(timings):
    for _what, seconds, label in timings:
        assert seconds > 0
        assert label.startswith(("measured on", "estimated from a roofline model")), label


@pytest.fixture(scope="module")
def matmul_run():
    experiment = MatmulExperiment(tile=8, n=256, cpu_repeats=2)
    return experiment, experiment.run()


def test_matmul_experiment_checks_the_kernel(matmul_run):
    experiment, result = matmul_run
    check = result["kernel_check"]
    assert check["ok"]
    if SIM:
        assert check["shape"] == check_shape(8, "sim") == (13, 11, 15)


def test_matmul_counts_follow_the_tile(matmul_run):
    experiment, result = matmul_run
    counts = result["counts"]
    assert counts["device_loads_per_thread"] == 2 * (256 // 8)
    assert counts["naive_device_loads_per_thread"] == 2 * 256
    assert counts["barriers_per_block"] == 2 * (256 // 8)
    assert experiment.counts(16)["device_loads_per_thread"] == 2 * (256 // 16)


def test_larger_tiles_move_fewer_bytes_and_estimate_faster(matmul_run):
    _, result = matmul_run
    tiled = [k for k in result["kernels"] if k["method"] == "tiled"]
    traffic = [k["traffic_bytes"] for k in tiled]
    assert traffic == sorted(traffic, reverse=True)
    times = [k["estimate"].time_s for k in tiled]
    assert times == sorted(times, reverse=True)
    naive, best = result["kernels"][0], result["kernels"][-1]
    assert naive["traffic_bytes"] == mm.traffic_bytes(256, 256, 256, "naive")
    assert best["estimate"].time_s < naive["estimate"].time_s


def test_matmul_bars_and_points_say_where_they_came_from(matmul_run):
    experiment, _ = matmul_run
    labels_are_honest(experiment.bars())
    assert any("measured on this CPU" in label for _, _, label in experiment.bars())
    for point in experiment.roofline_points():
        assert point["origin"].startswith(("measured on", "estimated from"))
    text = experiment.explain()
    assert "barriers" in text and "FLOP per byte" in text


def test_matmul_experiment_never_times_the_gpu_in_the_simulator(monkeypatch):
    if not SIM:
        pytest.skip("the simulator tier never times the GPU")

    def refuse(*args, **kwargs):
        raise AssertionError("time_gpu was called in the sim tier")

    monkeypatch.setattr(timing, "time_gpu", refuse)
    result = MatmulExperiment(tile=4, n=64, cpu_repeats=1).run()
    assert all("measured" not in k for k in result["kernels"])


def test_matmul_dashboard_uses_the_tile_slider():
    dashboard = MatmulDashboard()
    dashboard.tile_slider.value = 4
    dashboard.gpu_dropdown.value = "L4"
    dashboard.run_button.click()
    assert dashboard.last_error is None
    assert dashboard.last_result["tile"] == 4 and dashboard.last_result["gpu"] == "L4"
    assert len(dashboard.figures) == 2
    assert "4 x 4 tiles" in dashboard.explanation.value


def test_matmul_experiment_rejects_bad_tiles():
    from gpulab.kernels.arrays import InputError

    with pytest.raises(InputError, match="1..32"):
        MatmulExperiment(tile=64)


def test_gpu_branches_of_the_matmul_experiment(stand_in_gpu):
    experiment = MatmulExperiment(tile=8, n=7, cpu_repeats=1)  # one block: few barriers
    result = experiment.run()
    assert all("measured" in k for k in result["kernels"])
    assert result["kernel_check"]["shape"] == (7, 7, 7) and result["kernel_check"]["ok"]
    assert "Fastest measured" in experiment.explain()
    assert any(p["origin"].startswith("measured on") for p in experiment.roofline_points())
