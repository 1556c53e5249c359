"""Chapter 10's experiments: the recipes side by side, underflow without loss scaling, swamping
without master weights, FP8's layer choice; labels, computed sentences, figures, the dashboard
and the GPU branch (with the stand-in GPU)."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from gpulab import device  # noqa: E402
from gpulab.experiments import mixed_precision as x  # noqa: E402
from gpulab.hardware import H100_SXM

EPOCHS = 2


@pytest.fixture(scope="module")
def headline():
    experiment = x.MixedPrecisionExperiment(epochs=EPOCHS)
    return experiment, experiment.run()


def test_every_number_says_where_it_came_from(headline):
    experiment, result = headline
    assert [row["key"] for row in result["rows"]] == list(x.HEADLINE)
    if device.tier() != "gpu":
        assert result["engine"] == "emulated" and "emulated" in result["where"]
        assert result["gpu_measured"] == []
    assert "estimated by gpulab's GPU model of the NVIDIA H100" in result["estimate_label"]
    assert "within 2× for compute-bound" in result["estimate_label"]  # the large layer
    table = experiment.table()
    assert "measured" in table and "estimated by gpulab's GPU model" in table


def test_the_explanation_is_computed_from_the_runs(headline):
    experiment, result = headline
    words = experiment.explain()
    for row in result["rows"]:
        assert row["title"] in words
        assert f"{100 * row['accuracy']:.1f} %" in words
    assert "Chapter 09's calculator" in words and "16.0 bytes" in words
    assert "launch" in words and "fp32's time /" in words
    row = result["rows"][0]
    assert f"each of its {row['small_products']} products" in words
    assert f"{row['small_launch_s'] * 1e6:.1f} µs for the host to launch it" in words
    assert "4 µs in the model" not in words
    # the large layer at the peaks, then at the published cuBLAS rates of the same products
    assert "at each format's peak rate" in words and "published cuBLAS GEMMs" in words
    fp32 = x.published_gemms(H100_SXM.key, x.LARGE_WIDTHS[0])["fp32"]
    rows = {r["key"]: r for r in result["rows"]}
    assert f"fp32 {rows['fp32']['large_flops'] / fp32.si_value * 1e3:.2f} ms" in words
    rows = {row["key"]: row for row in result["rows"]}
    assert rows["bf16"]["memory_measured"]["activations"] < rows["fp32"]["memory_measured"][
        "activations"]
    assert rows["fp8"]["estimate_large_s"] < rows["bf16"]["estimate_large_s"] < rows["fp32"][
        "estimate_large_s"]


def test_bytes_per_parameter_use_chapter_09s_parameter_count(headline):
    """One calculator: the table divides by gpulab.nn.memory.mlp_parameters, which counts what
    the fp32 run stores (4 bytes per weight and bias)."""
    experiment, result = headline
    from gpulab.nn import memory

    fp32 = next(r for r in result["rows"] if r["key"] == "fp32")["memory_measured"]
    assert fp32["parameters"] / 4 == memory.mlp_parameters(experiment.widths)
    assert not hasattr(x, "_n_parameters")
    assert " 16.0 " in experiment.table()


def test_speedups_beside_the_peaks_come_from_published_gemms():
    r = x.speedups(H100_SXM.key)
    assert r["peak_ratio"]["bf16"] == pytest.approx(989.5 / 67.0)
    large, small = r["sizes"][8192], r["sizes"][1024]
    assert {"fp32", "bf16", "fp8"} <= set(large["points"]) and "fp32" in small["points"]
    for size in (large, small):
        for fmt, point in size["points"].items():
            case = point.model_case
            assert case["m"] == case["n"] == case["k"] and case["precision"] == fmt
            assert point.gpu_key == H100_SXM.key and point.source.startswith("https://")
            assert size["share"][fmt] == pytest.approx(point.si_value / r["peak"][fmt])
            assert 0 < size["share"][fmt] < 1  # no published run beats the datasheet peak
        for fmt, ratio in size["ratio"].items():
            assert ratio == pytest.approx(size["points"][fmt].si_value
                                          / size["points"]["fp32"].si_value)
    # the lesson the numbers carry: fp8 gets less than twice bf16, small products far less
    assert large["ratio"]["fp8"] / large["ratio"]["bf16"] < 2
    assert small["ratio"]["bf16"] < large["ratio"]["bf16"]
    text = x.speedup_text(H100_SXM.key)
    assert f"bf16 {large['ratio']['bf16']:.1f}x (the peaks: {r['peak_ratio']['bf16']:.1f}x)" in text
    assert x.percent(large["share"]["fp8"]) in text and "upper bound" in text
    for point in large["points"].values():
        assert point.source in text and point.measured_by in text
    assert "smaller than at 8,192^3" in text


def test_speedups_without_published_gemms_say_the_peaks_are_upper_bounds():
    r = x.speedups("A100-SXM")
    assert "fp8" not in r["peak"]  # no fp8 arithmetic on an A100
    assert all(not size["points"] for size in r["sizes"].values())
    text = x.speedup_text("A100-SXM")
    assert "No published GEMM measurements on the NVIDIA A100" in text
    assert "upper bounds" in text and "2x for 16-bit values" in text
    experiment = x.MixedPrecisionExperiment(recipes=["fp32", "bf16"], epochs=1, gpu="A100-SXM")
    experiment.run()
    assert "No published GEMM of that size on the NVIDIA A100" in experiment.explain()


def test_runs_are_kept_between_sections(headline):
    _, result = headline
    assert x.run_recipe("bf16", epochs=EPOCHS) is result["runs"]["bf16"]


def test_underflow_experiment(headline):
    experiment = x.UnderflowExperiment(epochs=EPOCHS)
    result = experiment.run()
    small = result["small"]
    assert small["fp16_no_scaling"].flushed_fraction > 0.5
    assert small["bf16"].flushed_fraction == 0
    assert small["fp16_no_scaling"].final_accuracy < small["fp16"].final_accuracy
    words = experiment.explain()
    assert "2^-20 times smaller" in words and "flushed" in words
    assert f"{100 * small['fp16_no_scaling'].final_accuracy:.1f} %" in words


def test_master_weights_experiment():
    experiment = x.MasterWeightsExperiment(epochs=EPOCHS)
    result = experiment.run()
    low = result["runs"][3e-4]
    assert low["bf16_no_master"].mean_updates_lost > 0.5
    words = experiment.explain()
    assert "Learning rate 0.0003" in words and "too small to change a bf16 weight" in words


def test_fp8_experiment_and_the_verdict(headline):
    experiment = x.Fp8Experiment(epochs=EPOCHS)
    result = experiment.run()
    assert set(result["runs"]) == {"fp8", "fp8_keep_first", "fp8_keep_last", "bf16"}
    words = experiment.explain()
    assert "every layer in FP8" in words and "gradient scale" in words
    verdict = x.lower_precision_verdict(
        headline[1], x.UnderflowExperiment(epochs=EPOCHS).run(),
        x.MasterWeightsExperiment(epochs=EPOCHS).run(), result)
    assert verdict.startswith("No.") and "fp16 without loss scaling" in verdict
    assert "master weights" in verdict


def test_figures(headline):
    _, result = headline
    underflow = x.UnderflowExperiment(epochs=EPOCHS).run()
    figures = [
        x.recipe_plot(result),
        x.gradient_histogram_plot({"no scaling": underflow["small"]["fp16_no_scaling"],
                                   "loss scaling": underflow["small"]["fp16"]}),
        x.loss_scale_plot(result["runs"]["fp16"]),
        x.fp8_scale_plot(result["runs"]["fp8"]),
        x.dashboard_plot(result),
    ]
    assert all(len(f.axes) >= 1 for f in figures)
    for f in figures:
        plt.close(f)


def test_percentages_never_hide_a_small_share():
    assert x.percent(0.00031) == "0.031 %" and x.percent(0.919) == "91.9 %"
    assert x.percent(0.0) == "0.0 %"


def test_dashboard():
    dashboard = x.MixedPrecisionDashboard()
    dashboard.recipe_select.value = ("fp32", "fp16_no_scaling")
    dashboard.epochs_slider.value = 1
    dashboard.factor_dropdown.value = 2.0**-20
    dashboard.gpu_dropdown.value = "B200"
    dashboard.run_button.click()
    assert dashboard.last_error is None, dashboard.last_error
    assert [row["key"] for row in dashboard.last_result["rows"]] == ["fp32", "fp16_no_scaling"]
    assert "B200" in dashboard.last_result["estimate_label"]
    assert "Accuracy" in dashboard.explanation.value


def test_gpu_branch_with_the_stand_in_gpu(stand_in_gpu, monkeypatch):
    """On a GPU the runs use the kernel engine and chapter 04's kernels are timed: here a
    narrow network on a few samples, in the simulator."""
    small = x.digits().subset(12, 6)
    monkeypatch.setattr(x, "_DATA", {"digits": small})
    x.clear_runs()
    result = x.MixedPrecisionExperiment(recipes=["fp16"], epochs=1, widths=(64, 8, 10),
                                        measure_n=8, measure_formats=("fp32", "fp16", "fp8")
                                        ).run()
    assert result["engine"] == "kernels" and "chapter 04" in result["where"]
    assert [m.meta["format"] for m in result["gpu_measured"]] == ["fp32", "fp16", "fp8"]
    assert all(m.origin == "gpu" for m in result["gpu_measured"])
    assert "CUDA events" in result["measured_label"]
    x.clear_runs()


def test_a_recorded_run_stands_next_to_the_estimate(recorded_gpu_run):
    from gpulab.experiments.mixed_precision import recorded_matmul_comparison

    table = recorded_matmul_comparison()
    assert table is not None and len(table.rows) == 2
    assert "CUDA cores" in table.title and all(r.ratio > 0 for r in table.rows)
    # fp16 inputs move fewer bytes, so its estimate is no slower than fp32's
    assert table.rows[1].predicted_s <= table.rows[0].predicted_s
