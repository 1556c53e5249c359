"""Chapter 04's experiment and dashboard, driven from Python: the error trend per accumulator,
memory and speed per format, and the labels that say where every number came from."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from gpulab import device, formats, hardware, timing  # noqa: E402
from gpulab.experiments import number_formats as widget  # noqa: E402
from gpulab.experiments.number_formats import (  # noqa: E402
    DotErrorExperiment,
    PrecisionDashboard,
    error_plot,
    fp_gap,
    memory_rows,
    speed_rows,
)
from gpulab.hardware import H100_SXM  # noqa: E402

SIM = device.tier() != "gpu"
TREND_SIZES = [300, 3_000, 30_000]


@pytest.fixture(scope="module")
def trend():
    experiment = DotErrorExperiment([("fp16", "fp16"), ("fp16", "fp32"), ("bf16", "bf16"),
                                     ("bf16", "fp32")], sizes=TREND_SIZES)
    return experiment, experiment.run()


def test_error_grows_with_n_for_narrow_accumulators_and_not_for_fp32(trend):
    _, result = trend
    for narrow in ("fp16", "bf16"):
        errors = result["errors"][(narrow, narrow)]
        assert errors[-1] > 5 * errors[0], errors  # swamping: worse as the sums grow
        wide = result["errors"][(narrow, "fp32")]
        assert wide[-1] < errors[-1] / 100, (wide, errors)  # fp32 sums: much less
        assert wide[-1] <= 2 * wide[0]  # and no growth with n
    assert result["errors"][("bf16", "bf16")][-1] > result["errors"][("fp16", "fp16")][-1]


def test_every_series_says_how_it_was_computed(trend):
    _, result = trend
    assert list(result["sizes"]) == TREND_SIZES
    for label, points in result["series"].items():
        assert ("run by" in label) or ("emulated with ml_dtypes on this CPU" in label), label
        assert [n for n, _ in points] == TREND_SIZES
    fp16_label = result["labels"][("fp16", "fp16")]
    assert "dot_fp16_acc16" in fp16_label
    assert ("simulator" in fp16_label) == SIM
    if SIM:
        assert "emulated" in result["labels"][("bf16", "fp32")]
    assert "1 block x 32 threads" in result["launch"]


def test_storage_errors_are_the_floor_of_fp32_accumulation(trend):
    _, result = trend
    for storage in ("fp16", "bf16"):
        floor = result["storage_errors"][storage]
        total = result["errors"][(storage, "fp32")]
        for exact_sums, measured in zip(floor, total, strict=True):
            assert measured == pytest.approx(exact_sums, rel=0.5, abs=1e-7)


def test_explain_works_the_numbers_out(trend):
    experiment, _ = trend
    text = experiment.explain()
    assert "938 products" in text and "32 threads" in text
    assert "swamping" in text  # bf16 near 234: gap 1, half of it beats a 0.25 product
    assert "fp16 numbers are 0.125 apart" in text


def test_the_same_seed_gives_the_same_data():
    a, b = DotErrorExperiment(sizes=[10]), DotErrorExperiment(sizes=[10])
    assert np.array_equal(a.data(10)[0], b.data(10)[0])
    assert not np.array_equal(a.data(10)[0], a.data(11)[0][:10])


def test_experiment_rejects_bad_arguments():
    with pytest.raises(ValueError, match="no kernel stores fp8_e4m3 and accumulates in fp16"):
        DotErrorExperiment([("fp8_e4m3", "fp16")])
    with pytest.raises(ValueError, match="sizes"):
        DotErrorExperiment(sizes=[0])
    with pytest.raises(ValueError, match="at least one"):
        DotErrorExperiment([])


def test_default_sizes_follow_the_tier():
    assert max(widget.default_sizes("sim")) == 30_000
    assert max(widget.default_sizes("gpu")) == 1_000_000
    # on a GPU, one thread's fp16 sum of n/32 products of ~0.25 must stay below 65504
    assert max(widget.default_sizes("gpu")) / 32 * widget.MEAN_PRODUCT < 65504


def test_fp_gap():
    assert fp_gap(1000, "fp16") == 0.5
    assert fp_gap(234, "bf16") == 1.0
    assert fp_gap(1.0, "fp32") == 2.0**-23
    assert fp_gap(1e-9, "fp16") == 2.0**-24  # below the normals: the subnormal step


def test_error_plot_labels_every_line(trend):
    _, result = trend
    figure = error_plot(result)
    legend = [t.get_text().replace("\n", " ") for t in figure.axes[0].get_legend().get_texts()]
    assert legend == list(result["series"])
    assert figure.axes[0].get_xscale() == "log"


# --- memory and speed ---------------------------------------------------------------------


def test_memory_rows_for_a_7_billion_parameter_model():
    rows = {row["format"]: row for row in memory_rows(7e9, gpus=("L4", H100_SXM.key))}
    assert rows["fp32"]["gb"] == 28 and rows["fp16"]["gb"] == 14
    assert rows["fp4_e2m1"]["gb"] == 3.5
    assert rows["fp4_e2m1 + MX scales"]["bytes"] == 3.5e9 + 7e9 / 32
    assert rows["fp32"]["fits"] == {"L4": False, H100_SXM.key: True}  # 28 GB vs 24 GB, 80 GB
    figure = widget.memory_plot(7e9, gpus=("L4", "A100-SXM", H100_SXM.key))
    assert "parameters × bits / 8" in figure.axes[0].get_title()
    labels = [t.get_text() for t in figure.axes[0].texts]
    assert " NVIDIA A100 SXM4 80GB, NVIDIA H100 SXM5 80GB" in labels  # one line per size


def test_speed_rows_are_roofline_estimates():
    rows = {row["format"]: row for row in speed_rows(H100_SXM.key, dot_n=10**8, matmul_n=8192)}
    for row in rows.values():
        assert row["label"] == "estimated by gpulab's GPU model of the NVIDIA H100 SXM5 80GB"
    # memory-bound: half the bytes, about half the time (plus the same launch cost)
    launch = hardware.HOST_LAUNCH_S["numba"]
    assert rows["fp16"]["dot_s"] - launch == pytest.approx((rows["fp32"]["dot_s"] - launch) / 2,
                                                           rel=0.05)
    expected = hardware.estimate_time(H100_SXM.key, flops=2 * 8192**3,
                                      bytes_moved=3 * 8192**2 * 1, precision="fp8")
    assert rows["fp8_e4m3"]["matmul_s"] == pytest.approx(expected.time_s)
    assert rows["fp8_e4m3"]["matmul_s"] < rows["fp16"]["matmul_s"] < rows["fp32"]["matmul_s"]
    assert rows["fp4_e2m1"]["peak_flops"] is None and rows["fp4_e2m1"]["matmul_s"] is None
    b200 = {row["format"]: row for row in speed_rows("B200")}
    assert b200["fp4_e2m1"]["matmul_s"] < b200["fp8_e4m3"]["matmul_s"]


def test_speed_table_says_which_units_each_peak_is_for():
    rows = {row["format"]: row for row in speed_rows(H100_SXM.key)}
    assert rows["fp32"]["units"] == "CUDA cores"  # the datasheet's fp32 row: no tensor cores
    for name in ("tf32", "fp16", "bf16", "fp8_e4m3"):
        assert rows[name]["units"] == "tensor cores"
    assert widget.compute_units("fp64") == "CUDA cores"
    assert widget.compute_units("fp64_tensor") == "tensor cores"
    text = str(widget.speed_table(H100_SXM.key, dot_n=10**8, matmul_n=8192))
    lines = text.splitlines()
    assert lines[0].startswith("estimated by gpulab's GPU model of the NVIDIA H100 SXM5 80GB")
    assert "±30 % for memory-bound, within 2× for compute-bound" in lines[0]
    assert "dot, n=1e8 (ms)" in lines[1] and "matmul 8192³ (ms)" in lines[1]
    assert "dense peak (TFLOP/s)" in lines[1]
    fp32 = next(line for line in lines if line.strip().startswith("fp32"))
    assert " 67.0  CUDA cores " in fp32
    assert fp32.endswith(f" {rows['fp32']['matmul_s'] * 1e3:.3f}")
    fp4 = next(line for line in lines if line.strip().startswith("fp4_e2m1"))
    assert "none" in fp4 and "cores" not in fp4  # the H100 has no fp4 rate


def test_weights_table_compares_with_nominal_memory():
    text = str(widget.weights_table(7e9, gpus=("L4", H100_SXM.key)))
    assert "nominal GPU memory (datasheets): L4 24 GB; H100-SXM 80 GB" in text
    fp32 = next(line for line in text.splitlines() if line.strip().startswith("fp32"))
    assert fp32.split()[1:] == ["28", "no", "fits"]


def test_fp8_overflow_three_conversions():
    rows = {row["value"]: row for row in widget.fp8_overflow_rows(
        [440.0, 460.0, 464.0, 470.0, -1000.0, np.inf])}
    # ml_dtypes' cast rounds to nearest and does not saturate: up to 464 (the tie, to even)
    # it lands on 448; beyond, and infinity, it is NaN
    assert rows[460.0]["cast"] == rows[464.0]["cast"] == 448
    assert np.isnan(rows[470.0]["cast"]) and np.isnan(rows[np.inf]["cast"])
    # __NV_SATFINITE and the course's kernel clip to +-448
    for value, expected in ((470.0, 448), (-1000.0, -448), (np.inf, 448), (440.0, 448)):
        assert rows[value]["satfinite"] == expected
        assert rows[value]["kernel"] == expected
    assert "__NV_SATFINITE" in str(widget.fp8_overflow_table([500.0])).splitlines()[0]


@pytest.mark.skipif(not SIM, reason="the simulator tier never times the GPU")
def test_no_gpu_timing_in_the_simulator():
    with pytest.raises(timing.SimulatorTimingError):
        widget.measure_dot_kernels(1000)


@pytest.mark.skipif(SIM, reason="needs a GPU")
def test_measured_dot_kernels_on_a_gpu():
    measurements = widget.measure_dot_kernels(2**20)
    assert all("measured on" in m.label for m in measurements)
    assert {m.name for m in measurements} >= {"dot_fp16_acc32", "dot_fp8_acc32"}


# --- the dashboard --------------------------------------------------------------------------


@pytest.fixture
def dashboard():
    board = PrecisionDashboard()
    board.size_slider.value = 1_000  # keep the test quick
    return board


def test_dashboard_accumulators_follow_the_format(dashboard):
    assert dashboard.accumulator_toggle.options == ("fp16", "fp32")
    dashboard.format_dropdown.value = "fp8_e4m3"
    assert dashboard.accumulator_toggle.options == ("fp32",)
    dashboard.format_dropdown.value = "bf16"
    assert dashboard.accumulator_toggle.value == "bf16"
    assert dashboard.variants() == [("bf16", "bf16"), ("bf16", "fp32")]


def test_dashboard_runs_what_the_controls_say(dashboard):
    dashboard.format_dropdown.value = "fp16"
    dashboard.accumulator_toggle.value = "fp32"
    dashboard.run_button.click()
    assert dashboard.last_error is None, dashboard.last_error
    result = dashboard.last_result
    assert list(result["errors"]) == [("fp16", "fp32")]
    assert result["sizes"] == [n for n in widget.default_sizes() if n <= 1_000]
    legend = [t.get_text().replace("\n", " ") for t in
              dashboard.figure.axes[0].get_legend().get_texts()]
    assert legend == list(result["series"])
    assert "fp16 storage, fp32 accumulator" in dashboard.explanation.value
    assert dashboard.widget.children


def test_dashboard_shows_a_failure_instead_of_raising(dashboard, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(widget.DotErrorExperiment, "run", broken)
    assert dashboard.run() is None
    assert "boom" in dashboard.status.value and isinstance(dashboard.last_error, RuntimeError)


def test_formats_offered_have_kernels():
    from gpulab.kernels.narrow_formats import DOT_VARIANTS

    for storage, accumulators in widget.ACCUMULATORS.items():
        assert storage in formats.FORMATS
        for accumulator in accumulators:
            assert (storage, accumulator) in DOT_VARIANTS


def test_gpu_branch_with_the_stand_in_gpu(stand_in_gpu, monkeypatch):
    """measure_dot_kernels on the stand-in GPU; the simulator has no bfloat16, so the stand-in
    is a GPU without bf16 arithmetic."""
    from gpulab.kernels import narrow_formats

    monkeypatch.setattr(narrow_formats, "bf16_runs_here", lambda: False)
    measurements = widget.measure_dot_kernels(n=300)
    assert [m.name for m in measurements] == ["dot_grid_stride (fp32)", "dot_fp16_acc32",
                                              "dot_fp8_acc32"]
    assert all(m.label == f"measured on {stand_in_gpu} (CUDA events)" for m in measurements)
    assert [m.bytes_moved for m in measurements] == [2400, 1200, 600]


# --- the matmul error and underflow tables (chapter 04's cells) -------------------------------


def test_matmul_error_rows_per_kernel():
    rows = widget.matmul_error_rows(4, 256, 4)
    assert [(r["storage"], r["accumulator"]) for r in rows] == [
        ("fp16", "fp16"), ("fp16", "fp32"), ("bf16", "fp32"), ("fp8_e4m3", "fp32")]
    errors = {(r["storage"], r["accumulator"]): r["error"] for r in rows}
    assert 0 < errors[("fp16", "fp32")] < errors[("fp16", "fp16")]  # fp16 sums swamp more
    assert errors[("fp8_e4m3", "fp32")] == max(errors.values())  # 3 mantissa bits
    assert all(e < 0.2 for e in errors.values())
    if SIM:  # every row says where it ran
        assert all("simulator" in r["label"] or "emulated with ml_dtypes" in r["label"]
                   for r in rows)
    assert widget.matmul_error_rows(4, 256, 4) == rows  # the same seed, the same numbers
    table = widget.matmul_error_table(4, 256, 4)
    text = str(table)
    assert "4x256 times 256x4" in text and "against float64 on this CPU" in text
    assert len(table.rows) == 4 and f"{errors[('fp16', 'fp16')]:.1e}" in text


def test_matmul_error_table_on_the_stand_in_gpu(stand_in_gpu, monkeypatch):
    """The GPU branch: the kernels name the GPU they ran on; bf16 without bf16 arithmetic (the
    stand-in runs in the simulator, which has none) is emulated and says so."""
    from gpulab.kernels import narrow_formats

    monkeypatch.setattr(narrow_formats, "bf16_runs_here", lambda: False)
    labels = {r["storage"] + "/" + r["accumulator"]: r["label"]
              for r in widget.matmul_error_rows(4, 64, 4)}
    for key in ("fp16/fp16", "fp16/fp32", "fp8_e4m3/fp32"):
        assert labels[key].endswith(f"on {stand_in_gpu}"), labels[key]
    assert "emulated with ml_dtypes" in labels["bf16/fp32"]


def test_underflow_rows_follow_each_format_s_smallest_numbers():
    fp16 = formats.get_format("fp16")
    # one value far below half fp16's smallest subnormal, one subnormal, two normal
    values = np.array([fp16.smallest_subnormal / 8, fp16.smallest_normal / 16,
                       fp16.smallest_normal * 4, 1.0])
    rows = {r["format"]: r for r in widget.underflow_rows(values)}
    assert rows["fp16"]["zero"] == 0.25 and rows["fp16"]["subnormal"] == 0.25
    assert rows["fp32"]["zero"] == rows["bf16"]["zero"] == 0
    # log-uniform values from 1e-10 to 1e-2: the share below half the smallest subnormal
    gradients = 10.0 ** np.random.default_rng(12).uniform(-10, -2, 200_000)
    for row in widget.underflow_rows(gradients):
        half = formats.get_format(row["format"]).smallest_subnormal / 2
        expected = float(np.clip((np.log10(half) + 10) / 8, 0, 1))
        assert row["zero"] == pytest.approx(expected, abs=0.01), row
    text = str(widget.underflow_table(values, loss_scale=1024))
    assert "computed on this CPU" in text.splitlines()[0]
    assert "fp16 after multiplying by 1024 first: 0.0% flushed to zero" in text
    unscaled = widget.underflow_table(values, loss_scale=None)
    assert len(unscaled.rows) == 5 and not unscaled.notes
