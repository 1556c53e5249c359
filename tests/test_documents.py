"""gpulab's JSON files: one header, one writer, one reader that says why it refuses a file."""

import pytest

from gpulab import documents


def test_a_document_written_is_read_back(tmp_path):
    path = documents.write(tmp_path / "sub" / "run.json",
                           {**documents.header("gpulab-test", 2), "value": 1.5})
    assert documents.read(path, "gpulab-test", "test file", 2) == {
        "format": "gpulab-test", "format_version": 2, "value": 1.5}
    assert documents.header("gpulab-test") == {"format": "gpulab-test"}


def test_the_reader_says_why_it_refuses_a_file(tmp_path):
    path = tmp_path / "file.json"
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        documents.read(path, "gpulab-test", "test file")
    path.write_text('{"format": "gpulab-other"}')
    with pytest.raises(ValueError, match="not a gpulab test file .no 'format': 'gpulab-test'"):
        documents.read(path, "gpulab-test", "test file")
    path.write_text('{"format": "gpulab-test", "format_version": 3}')
    with pytest.raises(ValueError, match="newer gpulab"):
        documents.read(path, "gpulab-test", "test file", 2)
    assert documents.read(path, "gpulab-test", "test file")["format_version"] == 3


def test_a_recorded_file_is_named_by_kind_device_and_day():
    assert (documents.dated_name("gpu_run", "NVIDIA H100 80GB HBM3", "2026-12-01T10:00:00+00:00")
            == "gpu_run_nvidia-h100-80gb-hbm3_2026-12-01.json")


def test_recorded_files_are_found_by_their_kind(tmp_path):
    for name in ("gpu_run_b_2026-12-02.json", "gpu_run_a_2026-12-01.json", "bench_a.json",
                 "gpu_run.json"):
        (tmp_path / name).write_text("{}")
    assert [p.name for p in documents.recorded_paths(tmp_path, "gpu_run")] == [
        "gpu_run_a_2026-12-01.json", "gpu_run_b_2026-12-02.json"]
