"""The published measurements that ship with gpulab: each one sourced, on a GPU the course
models, in a unit it knows; a bad file gets a clear error."""

import json

import pytest

from gpulab import hardware, published, timing
from gpulab.hardware import H100_SXM

POINTS = published.load()


def test_at_least_thirty_points_on_at_least_four_gpus():
    assert len(POINTS) >= 30
    assert len({p.gpu_key for p in POINTS if p.gpu_key}) >= 4


def test_every_kind_of_work_the_issue_names_is_covered():
    kinds = {p.kind for p in POINTS}
    assert {"memory-bound", "compute-bound", "launch-bound", "copy", "collective"} <= kinds
    families = {p.model_case.get("variant") for p in POINTS if p.model_case["type"] == "matmul"}
    assert {"naive_uncoalesced", "naive_coalesced", "shared_tiled", "blocktiled_2d",
            "cublas"} <= families
    copies = {p.model_case["memory"] for p in POINTS if p.model_case["type"] == "host_copy"}
    assert copies == {"pinned", "pageable"}
    apis = {p.model_case.get("api") for p in POINTS if p.model_case["type"] == "launch"}
    assert {"numba", "cuda_cpp", "cuda_graph"} <= apis
    assert any(p.model_case.get("measure") == "kernel_min" for p in POINTS)
    interconnects = {p.model_case["interconnect"] for p in POINTS
                     if p.model_case["type"] == "collective"}
    assert {"nvlink", "nvls"} <= interconnects
    assert any(p.kind == "power" for p in POINTS)


@pytest.mark.parametrize("point", POINTS, ids=[p.id for p in POINTS])
def test_every_point_is_sourced_and_dated(point):
    assert point.source.startswith("https://")
    assert len(point.quote) >= 10 and len(point.what) >= 10 and point.measured_by
    assert point.date == "undated" or point.date[:2] in ("19", "20")
    assert point.label == f"measured by {point.measured_by} on {point.gpu} ({point.source})"
    if point.gpu_key:
        assert point.spec.key == point.gpu_key
    else:  # a host-side launch figure on a GPU the course does not describe
        assert point.model_case["type"] == "launch" and point.spec is None


@pytest.mark.parametrize("gpu", sorted({p.gpu_key for p in POINTS if p.gpu_key}))
def test_the_gpus_the_sources_used_have_datasheet_figures(gpu):
    spec = hardware.get_gpu(gpu)
    assert "https://" in spec.source("memory_bandwidth_bytes_per_s")
    assert "https://" in spec.source("peak_flops.fp32")


def test_a_point_becomes_a_published_measurement():
    point = next(p for p in POINTS if p.unit in ("GFLOP/s", "TFLOP/s"))
    flops = 2 * point.model_case["m"] * point.model_case["n"] * point.model_case["k"]
    measurement = point.as_measurement(flops=flops)
    assert measurement.origin == "published" and measurement.measured
    assert measurement.gflops_per_s * 1e9 == pytest.approx(point.si_value)
    assert measurement.label == f"measured by {point.measured_by} on {point.gpu} ({point.source})"
    with pytest.raises(ValueError, match="needs the work it did"):
        point.as_measurement()
    assert "published" in timing.ORIGINS


def test_tensor_core_gemms_on_the_h100_for_chapter_10():
    """Chapter 10 sets the peaks' speed-ups beside published GEMMs of one size on one GPU: fp32,
    bf16 and fp8 at 8192^3 (fp32 and bf16 from one run), and the small 1024^3 case; each below
    its format's datasheet peak. The small tensor-core products are listed, not banded."""
    h100 = H100_SXM
    for n in (8192, 1024):
        points = published.find("compute-bound", "matmul", H100_SXM.key, variant="cublas", m=n,
                                n=n, k=n)
        found = {}
        for point in points:
            found.setdefault(point.model_case["precision"], point)  # the first of each format
            assert point.unit == "TFLOP/s"
            assert point.si_value < h100.peak_flops_for(point.model_case["precision"])
        assert {"fp32", "bf16", "fp8"} <= set(found), n
        assert found["fp32"].source == found["bf16"].source  # their ratio is one run's
        if n == 1024:
            assert found["bf16"].not_modelled and found["fp8"].not_modelled
            assert not found["fp32"].not_modelled
    best = [p for p in POINTS if p.id.startswith("mamf-h100-")]
    assert {p.model_case["precision"] for p in best} == {"bf16", "fp8"}


def test_find_and_nearest():
    naive = published.find(case_type="matmul", variant="naive_coalesced")
    assert naive and all(p.model_case["variant"] == "naive_coalesced" for p in naive)
    near = published.nearest("matmul", H100_SXM.key, 1024, variant="naive_coalesced")
    assert near is not None and near.model_case["variant"] == "naive_coalesced"
    assert published.nearest("matmul", variant="no such kernel") is None


def _write(tmp_path, points, format_=published.FILE_FORMAT):
    path = tmp_path / "points.json"
    path.write_text(json.dumps({"format": format_, "points": points}))
    return path


GOOD = {"id": "x", "gpu": "NVIDIA T4", "gpu_key": "T4", "kind": "memory-bound",
        "what": "a device copy of 1 GB", "model_case": {"type": "stream", "op": "copy"},
        "value": 250.0, "unit": "GB/s", "measured_by": "someone", "date": "2024-01",
        "source": "https://example.org/t4", "quote": "250 GB/s device to device"}


@pytest.mark.parametrize("change, message", [
    ({"kind": "fast"}, "kind must be one of"),
    ({"unit": "furlongs"}, "unit must be one of"),
    ({"value": -3}, "positive number"),
    ({"value": float("nan")}, "positive number"),
    ({"source": "http://insecure"}, "https://"),
    ({"gpu_key": "Voodoo2"}, "no GPU called"),
    ({"model_case": {"type": "magic"}}, "model_case type"),
    ({"quote": ""}, "lacks quote"),
    ({"date": "last spring"}, "date must be"),
    ({"gpu_key": ""}, "must name a GPU"),
])
def test_a_bad_point_gets_a_clear_error(tmp_path, change, message):
    with pytest.raises(ValueError, match=message):
        published.load(_write(tmp_path, [{**GOOD, **change}]))


def test_a_bad_file_gets_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="not a gpulab published-measurements file"):
        published.load(_write(tmp_path, [GOOD], format_="other"))
    with pytest.raises(ValueError, match="repeated point ids"):
        published.load(_write(tmp_path, [GOOD, GOOD]))
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    with pytest.raises(ValueError, match="not valid JSON"):
        published.load(broken)
    assert published.load(_write(tmp_path, [GOOD]))[0].si_value == 250e9
