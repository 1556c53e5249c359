"""`gpulab bench`: the suite in the sim tier at tiny sizes, its table's labels, its JSON round
trip and the recorded runs. GPU paths are tested only with a GPU (skipped, with the reason,
otherwise). Speed is never asserted here: that is what the benchmark itself reports."""

import io
import json

import numpy as np
import pytest

from gpulab import bench, device, hardware, timing
from gpulab.bench.suite import Progress
from gpulab.cli import main
from gpulab.hardware import H100_SXM

SIM = device.tier() == "sim"
SIM_ONLY = pytest.mark.skipif(not SIM, reason="checks the simulator tier's behaviour")
GPU_ONLY = pytest.mark.skipif(device.tier() != "gpu", reason="needs a real GPU")
TINY = {"memory_sizes": [5000], "matmul_sizes": [40], "cpu_repeats": 2}


@pytest.fixture(scope="module")
def tiny_report():
    return bench.run_suite(**TINY)


def test_every_row_says_where_its_numbers_came_from(tiny_report):
    assert tiny_report.rows
    for row in tiny_report.rows:
        assert row.origin in timing.ORIGINS
        assert row.label.startswith(("measured on", "estimated by gpulab's GPU model"))
        assert row.median_s > 0 and row.min_s <= row.median_s <= row.max_s
    table = tiny_report.table()
    for origin in {row.origin for row in tiny_report.rows}:
        assert f"  {origin:8s} = " in table  # the legend explains each origin used


def test_every_kernel_is_checked_against_numpy(tiny_report):
    assert set(tiny_report.checks) == set(bench.KERNELS)
    assert all(text.startswith("ok vs NumPy") for text in tiny_report.checks.values())


@SIM_ONLY
def test_sim_tier_reports_estimates_not_simulator_time(tiny_report, monkeypatch):
    assert {row.origin for row in tiny_report.rows} == {"cpu", "model"}
    assert "simulator time is not GPU time" in tiny_report.table()
    assert all("simulator" in text for text in tiny_report.checks.values())
    assert tiny_report.gpu_model == H100_SXM.key


    def refuse(*args, **kwargs):
        raise AssertionError("time_gpu was called in the sim tier")

    monkeypatch.setattr(timing, "time_gpu", refuse)
    bench.run_suite(kernels=("saxpy",), memory_sizes=[100], cpu_repeats=1)


@SIM_ONLY
def test_model_rows_follow_the_roofline(tiny_report):
    gpu = H100_SXM
    saxpy = tiny_report.rows_for("saxpy", origin="model", role="kernel")[0]
    expected = hardware.estimate_time(gpu, 2 * 5000, 3 * 4 * 5000)
    assert saxpy.median_s == pytest.approx(expected.time_s)
    with_copies = tiny_report.rows_for("saxpy incl. transfers")[0]
    assert with_copies.median_s > saxpy.median_s  # the host link is slower than HBM
    assert saxpy.percent_of_spec is None  # an estimate divided by its own peak says nothing
    assert "% of" not in " ".join(bench.report.table_cells(saxpy))


def test_baselines_are_measured_on_this_cpu(tiny_report):
    baselines = tiny_report.rows_for(role="baseline", origin="cpu")
    names = {row.kernel for row in baselines}
    assert {"NumPy a*x + y", "NumPy copy", "NumPy matmul (BLAS)"} <= names
    assert all("this CPU" in row.label for row in baselines)


def test_strided_copy_fetches_more_than_it_uses(tiny_report):
    row = tiny_report.rows_for("copy_strided", role="kernel")[0]
    assert "32 sectors per warp request" in row.note


def test_json_round_trip(tiny_report, tmp_path):
    path = bench.save_report(tmp_path / "run.json", tiny_report)
    document = json.loads(path.read_text())
    assert document["format"] == "gpulab-bench" and document["date"] == tiny_report.date
    again = bench.load_report(path)
    assert again.to_dict() == tiny_report.to_dict()
    assert str(again.table()) == str(tiny_report.table())


def test_loader_rejects_other_files(tmp_path):
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(ValueError, match="not a gpulab bench file"):
        bench.load_report(path)


def test_recorded_runs_cope_with_none(tmp_path):
    assert bench.recorded_runs(tmp_path) == []
    assert bench.latest_recorded_run(directory=tmp_path) is None
    text = bench.describe_recorded_run(None)
    assert "no recorded run" not in text.lower()  # learner-facing: say what IS shown
    assert "estimates by gpulab's GPU model" in text and "make gpu-check" in text


def test_latest_recorded_run_picks_the_newest_gpu_run(tiny_report, tmp_path):
    older = bench.BenchReport.from_dict({**tiny_report.to_dict(), "tier": "gpu",
                                         "device": "NVIDIA Test GPU", "date": "2025-01-01"})
    newer = bench.BenchReport.from_dict({**older.to_dict(), "date": "2025-06-01"})
    for report in (newer, older):
        bench.save_report(bench.record_path(report, tmp_path), report)
    bench.save_report(tmp_path / "bench_cpu.json", tiny_report)  # a sim run is not a GPU run
    latest = bench.latest_recorded_run(directory=tmp_path)
    assert latest.date == "2025-06-01" and latest.device == "NVIDIA Test GPU"
    assert "measured on NVIDIA Test GPU on 2025-06-01" in bench.describe_recorded_run(latest)


def test_shipped_recorded_runs_load():
    shipped = bench.recorded_runs()
    if not shipped:
        pytest.skip("no recorded GPU run ships with gpulab yet (gpulab/data/ is empty); "
                    "test_latest_recorded_run_picks_the_newest_gpu_run covers the loading")
    for report in shipped:
        assert report.tier == "gpu" and report.rows
        assert all(row.origin in ("cpu", "gpu", "model") for row in report.rows)


def test_progress_bar_counts_to_the_end():
    stream = io.StringIO()
    bar = Progress(3, stream=stream)
    for what in "abc":
        bar.step(what)
    lines = stream.getvalue().splitlines()
    assert lines[-1].startswith("[" + "#" * 24 + "] 3/3 c")


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="unknown kernel"):
        bench.run_suite(kernels=("magic",))
    with pytest.raises(ValueError, match="stride"):
        bench.run_suite(kernels=("copy_strided",), stride=0)
    with pytest.raises(ValueError, match="tile"):
        bench.run_suite(kernels=("matmul_tiled",), tile=64)


def test_roofline_points_come_from_kernel_rows(tiny_report):
    points = tiny_report.roofline_points()
    names = {p["name"] for p in points}
    assert "matmul_register_blocked" in names and "saxpy" in names
    assert "copy_coalesced" not in names  # no FLOPs: no place on a roofline
    assert all(p["flops"] > 0 and p["seconds"] > 0 for p in points)


# --- the command line ---------------------------------------------------------------------------


def test_cli_prints_the_table_and_saves(tmp_path, capsys):
    path = tmp_path / "results.json"
    code = main(["bench", "--sizes", "3000", "--matmul-sizes", "24", "--kernels",
                 "saxpy,copy_strided,matmul_naive", "--repeats", "2", "--save", str(path)])
    out, err = capsys.readouterr()
    assert code == 0
    assert "gpulab bench" in out and "origin:" in out and f"saved to {path}" in out
    assert "saxpy" in out and "copy_strided" in out and "matmul_naive" in out
    assert "matmul_tiled" not in out
    assert "] 1/" in err and "matmul_naive" in err  # the progress bar, on stderr
    assert main(["bench", "--load", str(path)]) == 0
    assert "saxpy" in capsys.readouterr().out


def test_cli_rejects_bad_input(capsys):
    assert main(["bench", "--kernels", "magic", "--no-progress"]) == 2
    assert "unknown kernel" in capsys.readouterr().err
    assert main(["bench", "--load", "/nonexistent.json"]) == 2


@SIM_ONLY
def test_cli_refuses_to_record_without_a_gpu(capsys):
    assert main(["bench", "--record"]) == 2
    assert "no GPU" in capsys.readouterr().err


def test_cli_runs_as_a_separate_process():
    """`python -m gpulab.cli bench` in a fresh process (gpulab picks the tier on import)."""
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "gpulab.cli", "bench", "--kernels", "copy_coalesced",
         "--sizes", "1000", "--repeats", "1", "--no-progress"],
        capture_output=True, text=True, check=False, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "copy_coalesced" in result.stdout and "origin:" in result.stdout


# --- GPU only ------------------------------------------------------------------------------------


@GPU_ONLY
def test_gpu_run_measures_kernels_and_the_copy_ceiling():
    report = bench.run_suite(kernels=("saxpy", "matmul_register_blocked"),
                             memory_sizes=[2**20], matmul_sizes=[256], repeats=3)
    assert report.copy_bytes_per_s and report.copy_bytes_per_s > 0
    saxpy = report.rows_for("saxpy", origin="gpu", role="kernel")[0]
    assert saxpy.percent_of_measured is not None and saxpy.check.startswith("ok")
    transfers = report.rows_for(role="transfer", origin="gpu")
    assert {r.kernel.split(": ")[1] for r in transfers} >= {"host→device inputs",
                                                             "device→host result"}
    assert np.isfinite(report.rows_for("matmul_register_blocked", origin="gpu")[0].median_s)


def test_gpu_code_path_with_the_stand_in_gpu(stand_in_gpu):
    """The gpu-tier branch of the suite with the stand-in GPU: it cannot say anything about
    speed, but it runs every line a GPU run would (device arrays, checks, transfers, the copy
    ceiling, percentages of measured rows, labels)."""
    kernels = ("saxpy", "copy_strided", "matmul_naive", "matmul_register_blocked")  # the tiled
    # kernel's barriers would make this slow in the simulator; its path is the same as naive's
    report = bench.run_suite(kernels=kernels, memory_sizes=[600], matmul_sizes=[9],
                             repeats=1, cpu_repeats=1)
    assert report.tier == "gpu" and report.device == stand_in_gpu
    assert report.gpu_model == H100_SXM.key  # matched from the device name
    assert report.copy_bytes_per_s > 0
    assert set(report.checks) == set(kernels)
    assert all(text.startswith("ok vs NumPy (NVIDIA H100") for text in report.checks.values())
    saxpy = report.rows_for("saxpy", origin="gpu", role="kernel")[0]
    assert "device copy" in saxpy.measured_ceiling and saxpy.percent_of_spec is not None
    assert report.rows_for("saxpy: host→device inputs", role="transfer")
    assert report.rows_for("saxpy incl. transfers", origin="gpu")
    model = report.rows_for("matmul_register_blocked", origin="model")  # the model, to compare
    assert model and model[0].percent_of_spec is None  # an estimate carries no "% of peak"
    assert any("CuPy is not installed" in note for note in report.notes)
    table = report.table()
    assert "measured device-to-device copy bandwidth" in table and "CUDA events" in table
    compared = bench.recorded_comparison(report)  # each measured kernel against its estimate
    assert {row.what for row in compared.rows} == {
        "saxpy, n = 600", "copy_strided, n = 600, stride 8", "matmul_naive, M = N = K = 9",
        "matmul_register_blocked, M = N = K = 9"}
    assert all(row.ratio > 0 for row in compared.rows)
    assert "promised bands" in compared.predicted_label and "NVIDIA" in compared.predicted_label
    assert "measured/predicted" in bench.describe_recorded_run(report)
