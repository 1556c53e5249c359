"""The GPU model against every published measurement: each point inside the band the model
promises for its kind of work, and the table a GPU engineer reads (``gpulab model-check``)."""

import json
import math

import pytest

from gpulab import hardware, published
from gpulab.bench import model_check
from gpulab.hardware import H100_SXM

RESULT = model_check.check()


@pytest.mark.parametrize("row", RESULT.rows, ids=[r.point.id for r in RESULT.rows])
def test_every_published_point_is_inside_its_band(row):
    if not row.held_to_band:  # listed with the reason the model cannot know it
        assert len(row.point.not_modelled) > 20 and row.inside
        return
    low, high = hardware.MODEL_BANDS[row.point.kind]
    assert low <= row.ratio <= high, (
        f"{row.point.id}: measured {row.point.value} {row.point.unit}, the model predicts "
        f"{row.prediction.value:.4g} ({row.prediction.how}): ratio {row.ratio:.2f} is outside "
        f"{low:.2f}..{high:.2f}")


def test_the_bands_are_the_promised_ones():
    for kind in ("memory-bound", "copy", "collective"):
        assert hardware.MODEL_BANDS[kind] == pytest.approx((0.7, 1.3))  # ±30 %
    assert hardware.MODEL_BANDS["compute-bound"] == pytest.approx((0.5, 2.0))


def test_the_table_names_gpu_what_measured_predicted_ratio_and_source():
    table = str(RESULT.table())
    for row in RESULT.rows:
        line = next(line for line in table.splitlines() if row.point.source in line
                    and row.point.what in line)
        assert f"{row.ratio:.2f}" in line
        assert (row.point.gpu_key or "host") in line
    summary = str(RESULT.summary_table())
    for kind, s in RESULT.summary().items():
        assert any(line.startswith(kind) and f"{s['median']:.2f}" in line
                   and f"{s['worst']:.2f}" in line for line in summary.splitlines())
    assert f"{len(RESULT.rows)} published points" in table


def test_summary_has_median_and_worst_per_kind():
    summary = RESULT.summary()
    assert {"memory-bound", "compute-bound", "cache-decided", "launch-bound", "collective",
            "copy", "power"} <= set(summary)
    for kind, s in summary.items():
        ratios = [r.ratio for r in RESULT.by_kind()[kind]
                  if not r.point.calibrates and r.held_to_band]
        if not ratios:
            continue
        assert min(ratios) <= s["median"] <= max(ratios)
        assert s["worst"] in ratios
        assert all(abs(math.log(s["worst"])) >= abs(math.log(r)) for r in ratios)


def test_a_range_counts_as_exact_inside_and_against_the_nearer_end_outside():
    point = next(r.point for r in RESULT.rows if r.point.kind == "cache-decided")
    inside = model_check.CheckedPoint(point, model_check.Prediction(1.0, "t", low=point.value / 2,
                                                                    high=point.value * 2))
    assert inside.ratio == 1.0
    below = model_check.CheckedPoint(point, model_check.Prediction(1.0, "t", low=point.value * 2,
                                                                   high=point.value * 4))
    assert below.ratio == pytest.approx(0.5)


def test_a_point_outside_its_band_fails_the_check(tmp_path, capsys, monkeypatch):
    good = next(r.point for r in RESULT.rows if r.point.model_case["type"] == "stream")
    record = {k: getattr(good, k) for k in published.REQUIRED} | {"gpu_key": good.gpu_key}
    record["id"], record["value"] = "too-fast", good.value * 3
    path = tmp_path / "points.json"
    path.write_text(json.dumps({"format": published.FILE_FORMAT, "points": [record]}))
    result = model_check.check(path)
    assert [r.point.id for r in result.outside] == ["too-fast"]
    assert "OUTSIDE" in result.table()
    monkeypatch.setattr(model_check, "check", lambda: result)
    assert model_check.main([]) == 1
    assert "outside the model's band: too-fast" in capsys.readouterr().out


def test_the_shipped_points_pass_the_command(capsys):
    assert model_check.main([]) == 0
    out = capsys.readouterr().out
    assert "median" in out and "worst" in out


def test_error_note_quotes_median_and_worst():
    note = model_check.error_note("memory-bound")
    s = RESULT.summary()["memory-bound"]
    assert f"×{s['median']:.2f}" in note and f"×{s['worst']:.2f}" in note
    assert "gpulab model-check" in note
    assert "no published" in model_check.error_note("no such kind")


def test_beside_gives_the_published_point_and_the_model_for_that_run():
    text = model_check.beside("gpulab's register-blocked kernel at 1024 on the H100", "matmul",
                              H100_SXM.key, 1024, size_key="m", variant="blocktiled_2d")
    assert "Published:" in text and "RTX A6000" in text and "What differs" in text
    assert "measured / predicted" in text or "inside the model's range" in text
    assert "No published" in model_check.beside("x", "matmul", variant="no such kernel")
