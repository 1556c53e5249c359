"""`gpulab gpu-check` / `make gpu-check`: without a GPU it prints its plan and exits non-zero
with a clear message; with the stand-in GPU its steps run (every line a GPU would run, at tiny
sizes) and the record lands in one file with the GPU's name, driver, toolkit and date."""

import json
import subprocess
import sys

import pytest

from gpulab import device, gpu_check
from gpulab.cli import main

TINY = {"vector": 1000, "matmul": 17, "dot": 1000, "narrow": 300, "dense": (13, 11),
        "optimiser": 1000}


@pytest.mark.skipif(device.tier() == "gpu", reason="checks the path without a GPU")
def test_without_a_gpu_it_prints_the_plan_and_exits_non_zero():
    result = subprocess.run([sys.executable, "-m", "gpulab.cli", "gpu-check"],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2
    assert "kernels" in result.stdout and "notebooks" in result.stdout  # the plan
    assert "needs an NVIDIA GPU" in result.stderr and "Nothing was run" in result.stderr


def test_plan_and_bad_steps(capsys):
    assert main(["gpu-check", "--plan"]) == 0
    plan = capsys.readouterr().out
    for step in gpu_check.STEPS:
        assert f"``{step}``" in plan
    assert main(["gpu-check", "--steps", "kernels,magic"]) == 2
    assert "unknown step(s) magic" in capsys.readouterr().err


def test_steps_run_on_the_stand_in_gpu(stand_in_gpu, monkeypatch, tmp_path):
    from gpulab.kernels import narrow_formats

    monkeypatch.setattr(narrow_formats, "bf16_runs_here", lambda: False)  # no bf16 in the sim
    monkeypatch.setitem(gpu_check.SIZES, "quick", TINY)
    record = gpu_check.run(["kernels", "record"], quick=True, directory=tmp_path)
    assert record["steps"]["kernels"]["status"] == "ok", record["steps"]
    assert record["kernels"] and all(v.startswith("ok") for v in record["kernels"].values()), \
        record["kernels"]
    assert any(k.startswith("dot_fp16") for k in record["kernels"])
    written = json.loads((tmp_path / record["path"].split("/")[-1]).read_text())
    assert written["device"] == stand_in_gpu and written["format"] == "gpulab-gpu-run"
    assert {"driver", "toolkit", "date", "compute_capability"} <= set(written)
    text = gpu_check.summary(record)
    assert stand_in_gpu in text and "kernels against NumPy" in text


def test_a_failing_step_is_reported_and_the_rest_still_run(stand_in_gpu, monkeypatch,
                                                          tmp_path):
    def broken(sizes):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(gpu_check, "check_kernels", broken)
    record = gpu_check.run(["kernels", "record"], directory=tmp_path)
    assert record["steps"]["kernels"]["status"].startswith("FAILED: RuntimeError")
    assert record["steps"]["record"]["status"] == "ok"


def test_the_fixture_run_has_every_series_the_command_records(fixture_gpu_record):
    """tests/conftest.py's fixture run stands for what gpu-check writes: same series."""
    missing = set(gpu_check.SERIES) - set(fixture_gpu_record["series"])
    assert not missing, f"add {sorted(missing)} to the fixture run in tests/conftest.py"


def test_a_failing_series_is_recorded_as_its_error_and_the_others_still_run():
    def broken():
        raise RuntimeError("cuBLAS missing")

    series = gpu_check.measure_each({"first": lambda: [1], "broken": broken,
                                     "last": lambda: {"x": 2}})
    assert series == {"first": [1], "broken": {"error": "RuntimeError: cuBLAS missing"},
                      "last": {"x": 2}}
    record = {"device": "NVIDIA H200", "driver": "x", "toolkit": "y", "date": "2026-12-01",
              "steps": {}, "series": series}
    assert gpu_check.failed_series(record) == ["broken"]
    assert "series FAILED: broken" in gpu_check.summary(record)


def test_a_failed_series_reads_as_missing(recorded_gpu_run, tmp_path):
    import json

    from gpulab import recorded_runs

    record = json.loads(recorded_gpu_run.path.read_text())
    record["series"]["crossover"] = {"error": "RuntimeError: out of memory"}
    recorded_gpu_run.path.write_text(json.dumps(record))
    run = recorded_runs.latest_gpu_run()
    assert run.series("crossover") is None and run.series("fusion") is not None
