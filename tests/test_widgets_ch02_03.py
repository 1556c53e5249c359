"""Chapter 02-03 dashboards driven from Python: set a control, click Run, read the result."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from gpulab import bench, device, hardware  # noqa: E402
from gpulab.kernels import matmul as mm  # noqa: E402
from gpulab.widgets.bandwidth import (  # noqa: E402
    BandwidthDashboard,
    BandwidthExperiment,
    stride_sweep,
)
from gpulab.widgets.matmul import MatmulDashboard, MatmulExperiment, check_shape  # noqa: E402

SIM = device.tier() != "gpu"
N_SMALL = 2**16


def labels_are_honest(timings):
    for _what, seconds, label in timings:
        assert seconds > 0
        assert label.startswith(("measured on", "estimated from a roofline model")), label


# --- chapter 02 ----------------------------------------------------------------------------------


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
    expected = hardware.estimate_time("H100-SXM", 0, strided["fetched_bytes"])
    assert strided["estimate"].time_s == pytest.approx(expected.time_s)


def test_a_t4_is_slower_than_an_h100():
    h100 = BandwidthExperiment("saxpy", n=N_SMALL, gpu="H100-SXM", cpu_repeats=1).run()
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


# --- chapter 03 ----------------------------------------------------------------------------------


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

    monkeypatch.setattr(bench, "time_gpu", refuse)
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
    from gpulab.kernels._arrays import InputError

    with pytest.raises(InputError, match="1..32"):
        MatmulExperiment(tile=64)


# --- the gpu-tier branches, run in the simulator with a stand-in timer ----------------------------


@pytest.fixture
def stand_in_gpu(monkeypatch):
    """Pretend to be in the gpu tier, with CUDA events replaced by perf_counter: exercises every
    line of the GPU branches (their timings mean nothing and nothing here asserts speed)."""
    if not SIM:
        pytest.skip("the real GPU branch is exercised on a GPU")
    import time

    def stand_in_time_gpu(launch, repeats=20, warmup=2, name=None, n=None, flops=None,
                          bytes_moved=None):
        for _ in range(warmup):
            launch()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            launch()
            times.append(time.perf_counter() - start)
        return bench.Measurement(name=name or "launch", times_s=times, where="gpu",
                                 device="Stand-in GPU", n=n, flops=flops,
                                 bytes_moved=bytes_moved)

    monkeypatch.setattr(device, "TIER", "gpu")
    monkeypatch.setattr(device, "PROBE", device.DriverProbe(True, 1, "12.8", "Stand-in GPU",
                                                            (9, 0), 10**9, 4))
    monkeypatch.setattr(bench, "time_gpu", stand_in_time_gpu)
    monkeypatch.setattr(mm, "TILE_SIZES", (8,))  # fewer simulated barriers


def test_gpu_branches_of_the_bandwidth_experiment(stand_in_gpu):
    experiment = BandwidthExperiment("copy_strided", n=300, stride=4, cpu_repeats=1)
    result = experiment.run()
    assert set(result["measured"]) == {"kernel", "with_copies"}
    assert result["access"].source == "from the kernel's index arithmetic"
    assert result["kernel_check"]["ok"] and result["kernel_check"]["n"] == 300
    assert any(label == "measured on Stand-in GPU" for _, _, label in experiment.timings())
    assert "Measured alone" in experiment.explain()
    sweep = stride_sweep(strides=(1, 2), n=128, repeats=1)
    assert any("measured on Stand-in GPU" in label for label in sweep["series"])


def test_gpu_branches_of_the_matmul_experiment(stand_in_gpu):
    experiment = MatmulExperiment(tile=8, n=7, cpu_repeats=1)  # one block: few barriers
    result = experiment.run()
    assert all("measured" in k for k in result["kernels"])
    assert result["kernel_check"]["shape"] == (7, 7, 7) and result["kernel_check"]["ok"]
    assert "Fastest measured" in experiment.explain()
    assert any(p["origin"].startswith("measured on") for p in experiment.roofline_points())
