"""Chapter 05's fusion experiment: fused vs unfused traffic and times, every time labelled;
the fusion and batch-size figures label their origins."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from gpulab import device  # noqa: E402
from gpulab.experiments.batch_size import batch_size_plot  # noqa: E402
from gpulab.experiments.fusion import FusionDashboard, FusionExperiment, fusion_plot  # noqa: E402
from gpulab.hardware import H100_SXM
from gpulab.nn import MLP, Trainer, spirals  # noqa: E402

SIM = device.tier() != "gpu"


def test_fusion_halves_the_traffic_and_labels_every_time():
    experiment = FusionExperiment(batch_size=512, width=256)
    result = experiment.run()
    assert result["bytes"]["unfused"] == 4 * (4 * 512 * 256 + 256)
    assert result["bytes"]["fused"] == 4 * (2 * 512 * 256 + 256)
    assert result["check"]["ok"]
    for row in result["rows"]:
        assert row["label"].startswith(("measured on", "estimated by gpulab's GPU model"))
    assert {row["what"] for row in result["rows"]} == {"GPU", "CPU"}
    # at this size the two launches the host issues through Numba set the time: about 2x
    assert 1.5 < experiment.speedup("GPU") <= 2.01
    words = experiment.explain()
    assert "counted" in words and "Published:" in words and "promised band" in words


def test_explain_says_whether_the_intermediate_fits_in_l2():
    from gpulab.experiments.fusion import explain

    def result(M, N, gpu, l2):
        return {"shape": (M, N), "dtype": "float32", "gpu": gpu, "l2_bytes": l2,
                "bytes": {"unfused": 4 * (4 * M * N + N), "fused": 4 * (2 * M * N + N)},
                "rows": [], "check": {"shape": (13, 11), "ok": True, "fused_error": 0.0,
                                      "unfused_error": 0.0}}

    fits = explain(result(4096, 1024, "H100", 50 * 2**20))  # 16 MiB in a 50 MiB L2
    assert "16.0 MiB" in fits and "50 MiB" in fits and "upper bound" in fits
    spills = explain(result(16384, 4096, "H100", 50 * 2**20))  # 256 MiB
    assert "256.0 MiB, more than" in spills and "upper bound" not in spills
    unknown = explain(result(4096, 1024, "H200", None))
    assert "not published" in unknown and "upper bound" in unknown
    from_the_table = FusionExperiment(batch_size=64, width=128).run()
    assert from_the_table["l2_bytes"] == 50 * 2**20  # the H100's, from gpulab.hardware


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


def test_fusion_and_batch_size_plots_label_their_origins(figure_texts):
    result = {"bytes": {"unfused": 4000, "fused": 2000}, "shape": (10, 100), "dtype": "float32",
              "activation": "relu", "rows": [
                  {"what": "GPU", "variant": v, "seconds": s, "label": "estimated from a "
                   "roofline model of the NVIDIA T4 16GB"} for v, s in (("unfused", 2e-6),
                                                                       ("fused", 1e-6))]}
    fig = fusion_plot(result)
    assert "estimated from a" in figure_texts(fig) and "counted" in figure_texts(fig)
    plt.close(fig)
    data = spirals(n_per_class=10, seed=1)
    history = Trainer(MLP([2, 4, 3]), epochs=2, progress=False).fit(data)
    batch = {"batch_sizes": [8, 64], "samples_per_s": {"x — measured on this CPU": [1.0, 2.0]},
             "memory": [{"parameters": 1, "gradients": 1, "optimiser state": 2, "activations": a,
                        "workspace": 1}
                        for a in (8, 64)], "histories": [history, history], "model": "MLP"}
    fig = batch_size_plot(batch)
    assert "measured on this CPU" in figure_texts(fig) and "batch 64" in figure_texts(fig)
    plt.close(fig)


def test_gpu_branch_with_the_stand_in_gpu(stand_in_gpu):
    result = FusionExperiment(batch_size=16, width=32).run()
    gpu_rows = [row for row in result["rows"] if row["what"] == "GPU"]
    measured = [row for row in gpu_rows if row["label"].startswith("measured on")]
    assert {row["variant"] for row in measured} == {"unfused", "fused"}
    assert all(stand_in_gpu in row["label"] for row in measured)
    assert result["check"]["ok"]


def test_a_recorded_run_stands_next_to_the_estimate(recorded_gpu_run):
    from gpulab.experiments.fusion import recorded_comparison

    table = recorded_comparison()
    assert table is not None and {r.what.split(" ")[0] for r in table.rows} == {"unfused",
                                                                               "fused"}
    assert all(r.ratio > 0 for r in table.rows) and "NVIDIA H200" in str(table)


def test_matmul_intensity_table_against_the_ridge_points():
    from pytest import approx

    from gpulab import formats, hardware
    from gpulab.experiments.fusion import matmul_intensity_table
    from gpulab.kernels.matmul import minimum_bytes

    h100 = H100_SXM
    table = matmul_intensity_table(256, 64, 128, H100_SXM.key)
    fp32, bf16 = table.rows
    for row, precision, units in ((fp32, "fp32", "CUDA cores"), (bf16, "bf16", "tensor cores")):
        nbytes = minimum_bytes(256, 128, 64, int(formats.get_format(precision).bytes_per_value))
        assert row[0] == precision and row[4] == units
        assert row[3] == approx(2 * 256 * 64 * 128 / nbytes)
        assert row[7] == approx(hardware.ridge_point(h100, precision))
        assert row[-1] == "memory-bound"
    text = str(table)
    assert "intensity (FLOP/byte)" in text and "ridge point (FLOP/byte)" in text
    assert text.splitlines()[-1] == f"source: {h100.sources['peak_flops.bf16']}"
    big = matmul_intensity_table(4096, 4096, 4096, H100_SXM.key)
    assert [row[-1] for row in big.rows] == ["compute-bound", "compute-bound"]


def test_bias_activation_estimates_are_the_roofline_s():
    from gpulab import hardware
    from gpulab.experiments.fusion import bias_activation_estimates
    from gpulab.kernels import dense

    text = bias_activation_estimates(256, 128, H100_SXM.key)
    unfused, fused = text.split("\nbias + ReLU, fused: ")
    assert unfused.startswith("\nbias + ReLU, unfused: ")
    for part, fused_, launches in ((unfused, False, 2), (fused, True, 1)):
        nbytes = dense.forward_traffic_bytes(256, 128, fused_)
        assert f"{nbytes:.3g} B at 3.35 TB/s".replace("e+0", "e+0") in part
        assert f"{launches} x 2.2 µs minimum per kernel" in part
        assert f"{launches} x {hardware.HOST_LAUNCH_S['numba'] * 1e6:.1f} µs to issue" in part
        assert "waves" in part and "launch-bound" in part
    assert text.count("estimated by gpulab's GPU model of the NVIDIA H100") == 2
    assert "best case" not in text
    assert "bias + tanh" in bias_activation_estimates(8, 8, "T4", "tanh")
