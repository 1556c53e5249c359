"""Chapter 03's matmul experiment: the tiled kernel checked, counts per tile, estimates;
its GPU branch with the stand-in GPU."""

import matplotlib

matplotlib.use("Agg")
import pytest  # noqa: E402

from gpulab import device, timing  # noqa: E402
from gpulab.experiments.matmul import (  # noqa: E402
    TRAFFIC_KERNELS,
    MatmulDashboard,
    MatmulExperiment,
    check_shape,
    kernel_estimate,
    tiling_plot,
    traffic_table,
    warp_footprint,
)
from gpulab.hardware import H100_SXM
from gpulab.kernels import matmul as mm  # noqa: E402

SIM = device.tier() != "gpu"
N_SMALL = 2**16


def labels_are_honest(timings):
    for _what, seconds, label in timings:
        assert seconds > 0
        assert label.startswith(("measured on", "estimated by gpulab's GPU model")), label


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
        assert point["origin"].startswith(("measured on", "estimated by"))
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


@pytest.mark.parametrize("tile, rows, columns", [(4, 4, 4), (8, 4, 8), (16, 2, 16), (32, 1, 32)])
def test_a_warp_covers_32_over_the_block_width_rows(tile, rows, columns):
    config = mm.launch_config(40, 50, 30, "naive", tile)
    foot = warp_footprint(config)
    assert (foot.rows, foot.columns) == (rows, columns)
    assert foot.a_values_per_k == rows and foot.b_values_per_k == columns
    assert len(foot.threads) == min(32, tile * tile)
    assert (f"{rows} row" in str(foot)) and ("threadIdx.x varies fastest" in str(foot))
    # the last warp of a 16 x 16 block is its last two rows
    if tile == 16:
        assert {ty for _, ty in warp_footprint(config, 7).threads} == {14, 15}


def test_traffic_table_is_the_traffic_model_and_the_roofline():
    n = 4096
    table = traffic_table(n, H100_SXM.key)
    text = str(table)
    heading, *lines = text.splitlines()
    assert heading.split()[:5] == ["kernel", "traffic", "(GB)", "intensity", "(FLOP/B)"]
    assert len(lines) == len(TRAFFIC_KERNELS) + 1
    for line, (method, tile) in zip(lines, TRAFFIC_KERNELS, strict=False):
        traffic = mm.traffic_bytes(n, n, n, method, tile)
        estimate = kernel_estimate(H100_SXM.key, method, n, tile)
        assert line.startswith(method + (f" T={tile}" if tile else ""))
        assert f" {traffic / 1e9:.2f}  " in line
        assert f" {mm.flops(n, n, n) / traffic:.2f}  " in line
        assert f"{estimate.bound}-bound" in line and "wave(s)" in line
    # the naive kernel's traffic is the caches' to decide: a range, never one figure
    assert "(caches catch all reuse) to" in lines[0] and "(no reuse)" in lines[0]
    assert "memory-bound" in lines[0] and "compute-bound" in lines[2]
    assert lines[-1].startswith(f"(n = {n}; GPU times estimated by gpulab's GPU model of the "
                                f"{H100_SXM.name}")
    assert "best case" not in text and "ceiling" not in text
    t4 = str(traffic_table(512, "T4", kernels=(("tiled", 8),))).splitlines()
    assert t4[1].startswith("tiled T=8") and "NVIDIA T4" in t4[-1]
    with pytest.raises(ValueError, match="at least one"):
        traffic_table(512, kernels=())


def test_warp_footprint_refuses_a_warp_the_block_does_not_have():
    with pytest.raises(ValueError, match="2 warp"):
        warp_footprint(mm.launch_config(9, 9, 9, "tiled", 8), 2)
    with pytest.raises(ValueError, match="2-D"):
        warp_footprint(mm.launch_config(9, 9, 9, "register_blocked"))


def gids(fig, prefix: str) -> set[str]:
    return {p.get_gid() for p in fig.axes[0].patches if (p.get_gid() or "").startswith(prefix)}


@pytest.mark.parametrize("shape, tile", [((17, 23, 9), 8), ((300, 500, 200), 16), ((5, 6, 4), 4)])
def test_tiling_plot_draws_the_launch_it_is_given(shape, tile):
    config = mm.launch_config(*shape, "tiled", tile)
    fig = tiling_plot(config)
    grid_x, grid_y = config.blocks
    steps = -(-shape[2] // tile)
    assert gids(fig, "block(") == {f"block({i},{j})" for i in range(grid_x) for j in range(grid_y)}
    assert gids(fig, "a_tile") == {f"a_tile{s}" for s in range(steps)}
    assert gids(fig, "b_tile") == {f"b_tile{s}" for s in range(steps)}
    assert gids(fig, "warp") == {f"warp{w}" for w in range(-(-tile * tile // 32))}
    title = fig.axes[0].get_title()
    assert f"{grid_x} x {grid_y} blocks of {tile} x {tile} threads" in title
    assert f"K = {shape[2]} in {steps} step" in title


def test_tiling_plot_wants_a_tiled_launch_and_a_block_of_its_grid():
    with pytest.raises(ValueError, match="tiled"):
        tiling_plot(mm.launch_config(9, 9, 9, "naive", 8))
    with pytest.raises(ValueError, match="not in the grid"):
        tiling_plot(mm.launch_config(9, 9, 9, "tiled", 8), block=(3, 0))


def test_a_recorded_run_stands_next_to_the_estimate(recorded_gpu_run):
    from gpulab.experiments.matmul import recorded_comparison

    table = recorded_comparison()
    assert table is not None and len(table.rows) == 2
    assert table.rows[0].what.startswith("matmul_naive, n = 4,096")
    assert all(r.ratio > 1 for r in table.rows) and "measured/predicted" in str(table)


def test_the_register_blocked_kernel_at_1024_fills_half_the_h100():
    # 64 blocks of 256 threads at 156 registers (ptxas, sm_90): one block per SM, one wave on
    # 132 SMs, so about half the GPU busy, and the rate about half the fp32 peak at best
    estimate = kernel_estimate(H100_SXM.key, "register_blocked", 1024)
    assert estimate.fill.blocks == 64 and estimate.fill.waves == 1
    assert estimate.fill.fill == pytest.approx(64 / 132, rel=0.01)
    assert mm.flops(1024, 1024, 1024) / estimate.gpu_s < 0.5 * 67e12


def test_published_series_and_the_nearest_published_run():
    from gpulab.experiments.matmul import published_beside, published_series_table

    table = published_series_table()
    assert "RTX-A6000" in table and "Simon Boehm" in table and "cuBLAS" in table
    beside = published_beside("register_blocked", 1024, H100_SXM.key)
    assert beside.startswith("Published:") and "2D Blocktiling" in beside
    assert "matmul_register_blocked at n = 1,024" in beside
