"""Recorded GPU runs load, say where they came from, and render predicted against measured;
bad files get clear errors. The run is the tests' fixture (tests/conftest.py), never shipped."""

import json

import pytest

from gpulab import hardware, recorded_runs
from gpulab.hardware import H100_SXM


def test_no_run_ships_yet_and_the_chapters_say_what_they_show_instead(monkeypatch, tmp_path):
    monkeypatch.setenv(recorded_runs.DATA_DIR_VARIABLE, str(tmp_path))
    assert recorded_runs.latest_gpu_run() is None
    assert recorded_runs.model_constants() == {}
    assert recorded_runs.constants_table() is None
    text = recorded_runs.describe(None)
    assert "estimates by gpulab's GPU model" in text and "model-check" in text
    assert "make gpu-check" in text and "best case" not in text
    assert "no recorded run" not in text.lower()


def test_the_data_folder_is_the_package_one_unless_overridden(monkeypatch, tmp_path):
    monkeypatch.delenv(recorded_runs.DATA_DIR_VARIABLE, raising=False)
    assert recorded_runs.data_dir() == recorded_runs.PACKAGE_DATA_DIR
    monkeypatch.setenv(recorded_runs.DATA_DIR_VARIABLE, str(tmp_path))
    assert recorded_runs.data_dir() == tmp_path


def test_a_recorded_run_loads_with_its_provenance(recorded_gpu_run):
    run = recorded_runs.latest_gpu_run()
    assert run is not None and run.device == recorded_gpu_run.device
    assert run.gpu_key == "H200"
    assert "2026-12-01" in run.label and "driver 570.00" in run.label
    assert "toolkit 12.8" in run.label and run.label.startswith("measured on NVIDIA H200")
    assert run.launch_overhead_s == pytest.approx(6e-6)
    assert run.host_copy_bytes_per_s("pageable") == pytest.approx(6e9)
    assert run.host_copy_bytes_per_s("pinned") == pytest.approx(50e9)
    with pytest.raises(ValueError, match="'pageable' or 'pinned'"):
        run.host_copy_bytes_per_s("host")
    assert run.series("no such series") is None
    assert recorded_runs.describe(run).startswith("GPU figures measured on NVIDIA H200")


def test_the_model_uses_the_measured_launch_overhead_and_copy_rate(recorded_gpu_run):
    constants = recorded_runs.model_constants("pinned")
    assert constants["launch_overhead_s"] == pytest.approx(6e-6)
    assert constants["link_rate_bytes_per_s"] == pytest.approx(50e9)
    estimate = hardware.estimate_time(H100_SXM.key, 0, 0, transfer_bytes=1e9, link="pinned",
                                      **constants)
    assert estimate.launch_s == pytest.approx(6e-6)
    assert estimate.transfer_s == pytest.approx(1e9 / 50e9)
    assert "measured on NVIDIA H200" in estimate.label and "promised band" in estimate.label


def test_constants_table_compares_model_and_measured(recorded_gpu_run):
    table = recorded_runs.constants_table()
    text = str(table)
    assert "measured/predicted" in text and "NVIDIA H200" in text
    ratios = {row.what: row.ratio for row in table.rows}
    launch = next(r for w, r in ratios.items() if "launch" in w)
    assert launch == pytest.approx(6e-6 / hardware.LAUNCH_OVERHEAD_S)
    pageable = next(r for w, r in ratios.items() if "pageable" in w)
    assert pageable == pytest.approx(hardware.get_gpu("H200").host_pageable_bytes_per_s / 6e9)
    assert "<table>" in table._repr_html_() and "measured/predicted (×)" in table._repr_html_()


def test_quick_smoke_runs_are_not_shown_and_the_newest_run_wins(recorded_gpu_run, tmp_path):
    record = json.loads(recorded_gpu_run.path.read_text())
    newer = dict(record, date="2026-12-05T00:00:00+00:00", device="NVIDIA H100 80GB HBM3")
    (tmp_path / "gpu_run_h100_2026-12-05.json").write_text(json.dumps(newer))
    quick = dict(record, date="2026-12-09T00:00:00+00:00", quick=True)
    (tmp_path / "gpu_run_quick_2026-12-09.json").write_text(json.dumps(quick))
    runs = recorded_runs.gpu_runs()
    assert [r.date[:10] for r in runs] == ["2026-12-01", "2026-12-05"]
    latest = recorded_runs.latest_gpu_run()
    assert latest.device == "NVIDIA H100 80GB HBM3" and latest.gpu_key == H100_SXM.key


def test_bad_files_get_clear_errors(tmp_path):
    bad = tmp_path / "gpu_run_bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        recorded_runs.load_gpu_run(bad)
    bad.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(ValueError, match="not a gpulab GPU run"):
        recorded_runs.load_gpu_run(bad)
    bad.write_text(json.dumps({"format": "gpulab-gpu-run", "format_version": 99,
                               "device": "x", "date": "2026"}))
    with pytest.raises(ValueError, match="newer gpulab"):
        recorded_runs.load_gpu_run(bad)
    bad.write_text(json.dumps({"format": "gpulab-gpu-run", "format_version": 1}))
    with pytest.raises(ValueError, match="lacks device, date"):
        recorded_runs.load_gpu_run(bad)


def test_a_comparison_needs_positive_times():
    with pytest.raises(ValueError, match="must be positive"):
        recorded_runs.Comparison("x", 0.0, 1.0)
    assert recorded_runs.Comparison("x", 2.0, 3.0).ratio == pytest.approx(1.5)
