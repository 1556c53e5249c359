"""The GPU model's own error, measured: every published measurement against the model's
prediction for the same work on the same GPU (``gpulab model-check``).

For each point of :mod:`gpulab.published` the model predicts the figure the source measured,
from the point's ``model_case`` (what ran, its size and launch) and the GPU's datasheet
figures in :mod:`gpulab.hardware`:

- ``matmul``: :func:`gpulab.kernels.matmul.family_costs` of the kernel family at the size and
  launch the source states, through :func:`gpulab.hardware.estimate_time` (waves, FMA issue
  share, shared-memory/L1 bandwidth, DRAM, the minimum kernel time); naive kernels, whose
  traffic L1/L2 decide, as a range (with and without reuse);
- ``stream``: the datasheet's memory bandwidth (a streaming kernel's bytes at that rate);
- ``host_copy``: the model's pinned or pageable copy rate over the source's host link;
- ``launch``: :data:`~gpulab.hardware.HOST_LAUNCH_S` for the host's issue cost, or
  :data:`~gpulab.hardware.KERNEL_MIN_S` for the GPU's shortest kernel;
- ``collective``: the α–β ring of :mod:`gpulab.parallel.links` (NVLink SHARP: in-switch
  reduction, each GPU sends and receives the buffer once), as nccl-tests' bus bandwidth;
- ``power``: :func:`gpulab.hardware.power_watts` at the point's utilisation.

The ratio is measured / predicted: above 1 the real GPU did better than the model said. For
a range the ratio is 1 inside it, else against the nearer end. :data:`gpulab.hardware.
MODEL_BANDS` are the bands the model promises per kind; :func:`check` says which points fall
outside (``tests/bench/test_model_check.py`` holds every point inside). Points that set a
model constant are listed but marked: they calibrate the model rather than test it.
"""

from __future__ import annotations

import functools
import math
import statistics
from dataclasses import dataclass

from gpulab import hardware, published
from gpulab.kernels import matmul as mm
from gpulab.parallel import links
from gpulab.tables import Column, Table

COLLECTIVE_LINK = {("A100-SXM", "nvlink"): "nvlink3", (hardware.H100_SXM.key, "nvlink"): "nvlink4",
                   ("H200", "nvlink"): "nvlink4", ("B200", "nvlink"): "nvlink5",
                   (hardware.H100_SXM.key, "nvls"): "nvlink4", ("H200", "nvls"): "nvlink4"}


def _number(value: float) -> str:
    """4 significant figures, never in e-notation: '309', '1,986', '23,250'."""
    return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:,.4g}"


def _format(value: float, unit: str) -> str:
    return f"{_number(value)} {unit}"


@dataclass(frozen=True)
class Prediction:
    """The model's figure for a point, in the point's unit: ``value``, or a range
    ``low``..``high`` (for a rate, low is the no-reuse end)."""

    value: float
    how: str
    low: float | None = None
    high: float | None = None

    @property
    def is_range(self) -> bool:
        return self.low is not None and self.high is not None and self.high > self.low * 1.0001


@dataclass(frozen=True)
class CheckedPoint:
    """One published point with the model's prediction of it."""

    point: published.PublishedPoint
    prediction: Prediction

    @property
    def ratio(self) -> float:
        """Measured / predicted; for a range, 1 inside it, else against the nearer end."""
        measured = self.point.value
        p = self.prediction
        if p.is_range:
            if p.low <= measured <= p.high:
                return 1.0
            return measured / (p.low if measured < p.low else p.high)
        return measured / p.value

    @property
    def band(self) -> tuple[float, float]:
        return hardware.MODEL_BANDS[self.point.kind]

    @property
    def held_to_band(self) -> bool:
        """False for a point the model cannot predict (``not_modelled``): listed, not banded."""
        return not self.point.not_modelled

    @property
    def inside(self) -> bool:
        low, high = self.band
        return not self.held_to_band or low <= self.ratio <= high


def _rate(point, flops, estimate) -> Prediction:
    """A FLOP rate in the point's unit from an estimate (a range where caches decide)."""
    scale = published.UNITS[point.unit]
    slow, fast = estimate.time_range_s[1], estimate.time_range_s[0]
    bound = estimate.bound
    how = f"{bound}-bound" + (f", {estimate.fill}" if estimate.fill else "")
    if estimate.is_range:
        return Prediction(flops / estimate.time_s / scale, f"{how}; range: no reuse .. reuse",
                          low=flops / slow / scale, high=flops / fast / scale)
    return Prediction(flops / estimate.time_s / scale, how)


def _matmul(point, case) -> Prediction:
    m, n, k = int(case["m"]), int(case["n"]), int(case["k"])
    variant = case["variant"]
    options = {}
    if case.get("threads_per_block") and variant.startswith("naive"):
        side = int(round(math.sqrt(case["threads_per_block"])))
        options["threads"] = tuple(case.get("threads") or (side, side))
    if case.get("block_tile"):
        options["block_tile"] = tuple(case["block_tile"])
    if case.get("thread_tile"):
        options["thread_tile"] = tuple(case["thread_tile"])
    costs = mm.family_costs(variant, m, n, k, **options)
    flops = 2 * m * n * k
    estimate = hardware.estimate_time(point.gpu_key, flops, precision=case.get("precision",
                                                                              "fp32"),
                                      launches=0, **costs)
    # a kernel timed by the source with events: its GPU time (the host's issue overlaps)
    return _rate(point, flops, estimate)


def _stream(point, case) -> Prediction:
    """A streaming kernel: its bytes at the datasheet bandwidth, and no kernel shorter than
    :data:`~gpulab.hardware.KERNEL_MIN_S` (through :func:`~gpulab.hardware.estimate_time`)."""
    spec = point.spec
    scale = published.UNITS[point.unit]
    size = case.get("bytes")
    if not size:
        rate = spec.memory_bandwidth_bytes_per_s
        return Prediction(rate / scale, f"datasheet bandwidth {_format(rate / 1e9, 'GB/s')}")
    estimate = hardware.estimate_time(spec.key, 0, float(size), launches=1)
    return Prediction(size / estimate.gpu_s / scale,
                      f"{estimate.bound}-bound: {_format(size / 1e6, 'MB')} at "
                      f"{_format(spec.memory_bandwidth_bytes_per_s / 1e9, 'GB/s')}")


def _host_copy(point, case) -> Prediction:
    """The model's pinned or pageable copy rate over the GPU's host link
    (:func:`gpulab.hardware.link_bytes_per_s`)."""
    spec = point.spec
    rate = hardware.link_bytes_per_s(spec, case["memory"])
    return Prediction(rate / published.UNITS[point.unit],
                      f"{case['memory']} over {spec.host_link}")


def _launch(point, case) -> Prediction:
    """The host's cost to issue one launch (Numba's grows with the array arguments), or the
    GPU's shortest kernel."""
    scale = published.UNITS[point.unit]
    if case["measure"] == "host_issue":
        api = case["api"]
        if api not in hardware.HOST_LAUNCH_S:
            raise ValueError(f"{point.id}: no host launch cost for {api!r}")
        if api == "numba" and "n_array_args" in case:
            arrays = int(case["n_array_args"])
            seconds = hardware.NUMBA_LAUNCH_BASE_S + arrays * hardware.NUMBA_LAUNCH_PER_ARRAY_S
            return Prediction(seconds / scale, f"Numba: base + {arrays} x per-array cost")
        return Prediction(hardware.HOST_LAUNCH_S[api] / scale, f"HOST_LAUNCH_S[{api!r}]")
    return Prediction(hardware.KERNEL_MIN_S / scale, "KERNEL_MIN_S")


def _collective(point, case) -> Prediction:
    """nccl-tests' figure for an all-reduce: the α–β ring of :mod:`gpulab.parallel.links` at
    NCCL's share of the line rate (:data:`~gpulab.hardware.NCCL_NVLINK_EFFICIENCY`), or NVLink
    SHARP's in-switch reduction (each direction carries n (1 + 1/N) bytes in one step,
    :data:`~gpulab.hardware.NVLS_BYTES_SOURCE`). ``bytes`` null: the large-message limit."""
    n_gpus = int(case["n_gpus"])
    interconnect = case["interconnect"]
    key = COLLECTIVE_LINK.get((point.gpu_key, interconnect))
    if key is None:
        raise ValueError(f"{point.id}: no link model for {interconnect} on {point.gpu_key}")
    link = links.get_link(key)
    beta = link.beta_bytes_per_s * hardware.NCCL_NVLINK_EFFICIENCY
    size = float(case["bytes"]) if case.get("bytes") else math.inf
    if interconnect == "nvls":
        per_byte_s = (1 + 1 / n_gpus) / beta
        fixed_s = 2 * link.alpha_s
        how = f"in-switch (NVLS) over {link.name}"
    else:
        per_byte_s = 2 * (n_gpus - 1) / n_gpus / beta
        fixed_s = 2 * (n_gpus - 1) * link.alpha_s
        how = f"ring over {link.name}"
    algbw = 1 / per_byte_s if math.isinf(size) else size / (fixed_s + size * per_byte_s)
    value = algbw * 2 * (n_gpus - 1) / n_gpus if case.get("metric") == "busbw" else algbw
    return Prediction(value / published.UNITS[point.unit],
                      f"{how} at {hardware.NCCL_NVLINK_EFFICIENCY:.0%} of line rate")


def _power(point, case) -> Prediction:
    utilisation = 0.0 if case.get("state") == "idle" else float(case.get("utilisation") or 1.0)
    return Prediction(hardware.power_watts(point.gpu_key, utilisation),
                      f"idle + {utilisation:.0%} x (TDP - idle)")


PREDICTORS = {"matmul": _matmul, "stream": _stream, "host_copy": _host_copy, "launch": _launch,
              "collective": _collective, "power": _power}


def predict(point: published.PublishedPoint) -> Prediction:
    """The model's prediction of ``point``, in its unit."""
    case = point.model_case
    return PREDICTORS[case["type"]](point, case)


@dataclass(frozen=True)
class ModelCheck:
    """Every published point against the model, with a summary per kind."""

    rows: tuple[CheckedPoint, ...]

    def by_kind(self) -> dict[str, list[CheckedPoint]]:
        kinds: dict[str, list[CheckedPoint]] = {}
        for row in self.rows:
            kinds.setdefault(row.point.kind, []).append(row)
        return kinds

    def summary(self) -> dict[str, dict]:
        """Per kind: points, median and worst ratio (worst: farthest from 1, either way),
        the promised band, and how many fall outside it. Calibrating points are left out."""
        out = {}
        for kind, rows in self.by_kind().items():
            rows = [r for r in rows if r.held_to_band]
            if not rows:
                continue
            tested = [r for r in rows if not r.point.calibrates] or rows
            ratios = [r.ratio for r in tested]
            worst = max(ratios, key=lambda r: abs(math.log(r)))
            out[kind] = {"points": len(tested), "calibrating": len(rows) - len(tested)
                         if len(tested) < len(rows) else 0,
                         "median": statistics.median(ratios), "worst": worst,
                         "band": hardware.MODEL_BANDS[kind],
                         "outside": sum(not r.inside for r in tested)}
        return out

    @property
    def outside(self) -> list[CheckedPoint]:
        return [r for r in self.rows if not r.inside]

    @property
    def gpus(self) -> list[str]:
        """The GPUs of gpulab.hardware the points were measured on (host-side points on
        other GPUs are not counted)."""
        return sorted({r.point.gpu_key for r in self.rows if r.point.gpu_key})

    def table(self) -> Table:
        """One row per point: kind, GPU, measured, predicted, ratio, what ran and its source;
        how many points, and on which GPUs, underneath (the summary per kind:
        :meth:`summary_table`)."""
        rows = []
        for r in self.rows:
            p, pred = r.point, r.prediction
            predicted = (f"{_number(pred.low)}..{_number(pred.high)}" if pred.is_range
                         else _number(pred.value))
            mark = " (sets the model)" if p.calibrates else ""
            if p.not_modelled:
                mark = f" (not held to the band: {p.not_modelled})"
            rows.append([p.kind, p.gpu_key or "host", _number(p.value), predicted, p.unit,
                         r.ratio, f"{p.what}; {p.source}{mark}", "" if r.inside else "OUTSIDE"])
        unbanded = sum(not r.held_to_band for r in self.rows)
        return Table([Column("kind"), Column("GPU"), Column("measured"), Column("predicted"),
                      Column("unit"), Column("ratio", number_format="{:.2f}"),
                      Column("what ran; source"), Column("")], rows,
                     notes=[f"{unbanded} point(s) listed but not held to a band: the model "
                            "cannot know what they depend on (see each row)" if unbanded else "",
                            f"{len(self.rows)} published points on {len(self.gpus)} GPUs "
                            f"({', '.join(self.gpus)}); ratio = measured / predicted, for a "
                            "range 1 inside it"])

    def summary_table(self) -> Table:
        """Per kind (:meth:`summary`): points, median and worst ratio, the promised band, how
        many fall outside it, and how many more set the model."""
        return Table([Column("kind"), Column("points"),
                      Column("median ratio", number_format="{:.2f}"),
                      Column("worst ratio", number_format="{:.2f}"), Column("band"),
                      Column("outside"), Column("set the model")],
                     [[kind, s["points"], s["median"], s["worst"],
                       f"{s['band'][0]:.2f}..{s['band'][1]:.2f}", s["outside"],
                       s["calibrating"] or None] for kind, s in self.summary().items()],
                     title="per kind: ratio = measured / predicted (points that set the model "
                           "left out)")

    def error_note(self, kind: str) -> str:
        """One sentence for a chapter: the model's measured error for ``kind``."""
        s = self.summary().get(kind)
        if s is None:
            return f"no published {kind} measurement checks the model yet"
        return (f"against {s['points']} published {kind} measurements the model is off by a "
                f"median ×{s['median']:.2f} and at worst ×{s['worst']:.2f} "
                f"(measured / predicted; gpulab model-check)")


def check(path=None) -> ModelCheck:
    """Every published point (the shipped file, or ``path``) against the model."""
    if path is None:
        return _shipped_check()
    return ModelCheck(tuple(CheckedPoint(p, predict(p)) for p in published.load(path)))


@functools.lru_cache(maxsize=1)
def _shipped_check() -> ModelCheck:
    return ModelCheck(tuple(CheckedPoint(p, predict(p)) for p in published.load()))


def error_note(kind: str) -> str:
    """The model's measured error for ``kind`` of work, in one sentence (the shipped points)."""
    return check().error_note(kind)


def checked(case_type: str, gpu=None, size: float | None = None, size_key: str = "n",
            **case) -> CheckedPoint | None:
    """The published point of ``case_type`` matching ``case`` nearest to ``size`` (on ``gpu``
    where it has one), with the model's prediction of it; None when none matches."""
    point = published.nearest(case_type, gpu, size, size_key, **case)
    return None if point is None else CheckedPoint(point, predict(point))


def beside(ours: str, case_type: str, gpu=None, size: float | None = None,
           size_key: str = "n", **case) -> str:
    """A chapter's lines for the published measurement nearest to an estimate of ``ours``:
    what was measured, by whom, on which GPU and where; the model's prediction for that same
    run and measured / predicted; and what differs from ours. One line saying none was found
    when no point matches."""
    row = checked(case_type, gpu, size, size_key, **case)
    if row is None:
        return f"No published measurement of this kind ({case_type}, {case}) ships with gpulab."
    p, pred = row.point, row.prediction
    predicted = (f"{_format(pred.low, p.unit)} (no reuse) to {_format(pred.high, p.unit)} "
                 "(caches catch all reuse)" if pred.is_range else _format(pred.value, p.unit))
    verdict = ("inside the model's range" if pred.is_range and row.ratio == 1.0
               else f"measured / predicted = {row.ratio:.2f}")
    if p.calibrates:
        verdict += f"; this measurement sets the model's {p.sets}, so it checks nothing"
    return (f"Published: {_format(p.value, p.unit)}, {p.label}, {p.date}.\n"
            f"  The model for that same run predicts {predicted}: {verdict} (promised band "
            f"for {p.kind} work: {hardware.band_text(p.kind)}).\n"
            f"  What differs: theirs is {p.what}, on {_gpu_phrase(p.gpu)}; ours is {ours}.")


def _gpu_phrase(gpu: str) -> str:
    return gpu if gpu.lower().startswith(("a ", "an ", "the ")) else f"the {gpu}"


def main(argv=None) -> int:
    """``gpulab model-check``: print the tables; exit status 1 when a point is outside its
    band."""
    result = check()
    print(result.table())
    print()
    print(result.summary_table())
    if result.outside:
        print(f"{len(result.outside)} point(s) outside the model's band: "
              + ", ".join(r.point.id for r in result.outside))
        return 1
    return 0


__all__ = ["CheckedPoint", "ModelCheck", "Prediction", "beside", "check", "checked",
           "error_note", "main", "predict"]
