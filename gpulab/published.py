"""Measurements on real GPUs published by others, with their sources: the yardstick of the
GPU model for the learners who have no GPU.

``gpulab/data/published_measurements.json`` ships with the package (nothing is downloaded). Each
point is one figure someone measured and published: the GPU, what ran (kernel or library,
size, number format), the value and its unit, the date, the source's address, the sentence or
table row that gives the figure (``quote``), and ``model_case``: what the point corresponds to
in gpulab's GPU model (:mod:`gpulab.bench.model_check` predicts it from that).

Kinds of point, one per band of the model (:data:`gpulab.hardware.MODEL_BANDS`):
``memory-bound`` (streaming kernels, device copies), ``compute-bound`` (tiled matmuls,
cuBLAS), ``cache-decided`` (naive matmuls, whose traffic L1/L2 decide), ``launch-bound``
(launch costs and the shortest kernel), ``copy`` (host↔device, pinned and pageable),
``collective`` (nccl-tests bus bandwidth) and ``power`` (board power under load or idle).

A point with ``not_modelled`` names what the model cannot know (a host link the source does
not state, an anomaly the source itself flags): it is listed beside its prediction but held to
no band. A point with ``sets`` is where a model constant comes from (``"sets": "KERNEL_MIN_S"``):
it calibrates the model rather than tests it, and :mod:`gpulab.bench.model_check` says so.

>>> points = load()
>>> len({p.gpu_key for p in points if p.gpu_key}) >= 4
True
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from gpulab import documents, hardware
from gpulab.timing import Measurement

DATA_FILE = Path(__file__).resolve().parent / "data" / "published_measurements.json"
FILE_FORMAT = "gpulab-published-measurements"
KINDS = tuple(hardware.MODEL_BANDS)
UNITS = {"GFLOP/s": 1e9, "TFLOP/s": 1e12, "GB/s": 1e9, "µs": 1e-6, "W": 1.0}
CASE_TYPES = ("matmul", "stream", "host_copy", "launch", "collective", "power")
REQUIRED = ("id", "gpu", "kind", "what", "model_case", "value", "unit", "measured_by", "date",
            "source", "quote")
# a host-side figure (the host's cost to issue a launch, the shortest kernel on a GPU the course
# does not describe) need not name a GPU of gpulab.hardware.GPUS
GPU_OPTIONAL_CASES = ("launch",)
DATE = re.compile(r"^((\d{4})(-\d{2}(-\d{2})?)?|undated)$")


@dataclass(frozen=True)
class PublishedPoint:
    """One published measurement (see the module docstring for the fields)."""

    id: str
    gpu: str  # as the source names it
    gpu_key: str  # the GPU in gpulab.hardware.GPUS; "" for a host-side launch figure
    kind: str
    what: str
    model_case: dict
    value: float
    unit: str
    measured_by: str
    date: str
    source: str
    quote: str
    notes: str = ""
    sets: str = ""  # the model constant this point sets, if any
    not_modelled: str = ""  # why the model cannot predict this point (listed, not banded)
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"{self.id}: kind must be one of {', '.join(KINDS)}, not "
                             f"{self.kind!r}")
        if self.unit not in UNITS:
            raise ValueError(f"{self.id}: unit must be one of {', '.join(UNITS)}, not "
                             f"{self.unit!r}")
        if not (isinstance(self.value, (int, float)) and math.isfinite(self.value)
                and self.value > 0):
            raise ValueError(f"{self.id}: value must be a positive number, not {self.value!r}")
        if self.model_case.get("type") not in CASE_TYPES:
            raise ValueError(f"{self.id}: model_case type must be one of "
                             f"{', '.join(CASE_TYPES)}, not {self.model_case.get('type')!r}")
        if not self.source.startswith("https://"):
            raise ValueError(f"{self.id}: source must be an https:// address, not "
                             f"{self.source!r}")
        if not DATE.match(str(self.date)):
            raise ValueError(f"{self.id}: date must be YYYY, YYYY-MM, YYYY-MM-DD or "
                             f"'undated' (the source gives none), not {self.date!r}")
        if self.gpu_key:
            hardware.get_gpu(self.gpu_key)  # a clear ValueError for a GPU the course lacks
        elif self.model_case.get("type") not in GPU_OPTIONAL_CASES:
            raise ValueError(f"{self.id}: a {self.model_case.get('type')} point must name a GPU "
                             f"of gpulab.hardware.GPUS in gpu_key")

    @property
    def spec(self) -> hardware.GPUSpec | None:
        """The GPU's datasheet figures; None for a host-side point on a GPU the course lacks."""
        return hardware.get_gpu(self.gpu_key) if self.gpu_key else None

    @property
    def si_value(self) -> float:
        """The value in SI units: FLOP/s, bytes/s, seconds or watts."""
        return self.value * UNITS[self.unit]

    @property
    def label(self) -> str:
        return f"measured by {self.measured_by} on {self.gpu} ({self.source})"

    @property
    def calibrates(self) -> bool:
        return bool(self.sets)

    def as_measurement(self, flops: float | None = None,
                       bytes_moved: float | None = None) -> Measurement:
        """This point as a ``published`` :class:`~gpulab.timing.Measurement`: a time, from
        the value itself (µs) or from the work it did (``flops`` for a FLOP rate,
        ``bytes_moved`` for a bandwidth)."""
        if self.unit == "µs":
            seconds = self.si_value
        elif self.unit in ("GFLOP/s", "TFLOP/s") and flops:
            seconds = flops / self.si_value
        elif self.unit == "GB/s" and bytes_moved:
            seconds = bytes_moved / self.si_value
        else:
            raise ValueError(f"{self.id}: a {self.unit} figure needs the work it did (flops "
                             f"or bytes_moved) to become a time")
        return Measurement(
            name=self.what, times_s=[seconds], origin="published", device=self.gpu,
            flops=flops, bytes_moved=bytes_moved,
            meta={"measured_by": self.measured_by, "source": self.source, "date": self.date,
                  "point": self.id})

    def __str__(self) -> str:
        return f"{self.what}: {self.value:,.4g} {self.unit}, {self.label}, {self.date}"


def _point(record: dict) -> PublishedPoint:
    if not isinstance(record, dict):
        raise ValueError(f"a published point is an object, not {record!r}")
    missing = [key for key in REQUIRED if record.get(key) in (None, "")]
    if missing:
        raise ValueError(f"published point {record.get('id', '?')!r} lacks "
                         f"{', '.join(missing)}")
    known = {f for f in PublishedPoint.__dataclass_fields__ if f != "extra"}
    fields_ = {k: v for k, v in record.items() if k in known}
    extra = {k: v for k, v in record.items() if k not in known}
    return PublishedPoint(**fields_, extra=extra)


@functools.lru_cache(maxsize=4)
def _load(path: Path, mtime_ns: int) -> tuple[PublishedPoint, ...]:
    data = documents.read(path, FILE_FORMAT, "published-measurements file")
    points = tuple(_point(r) for r in data.get("points", []))
    ids = [p.id for p in points]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise ValueError(f"{path}: repeated point ids {repeated}")
    return points


def load(path=None) -> tuple[PublishedPoint, ...]:
    """Every published point in ``path`` (default: the file that ships with gpulab)."""
    path = Path(path) if path is not None else DATA_FILE
    return _load(path, path.stat().st_mtime_ns)


def find(kind: str | None = None, case_type: str | None = None, gpu: str | None = None,
         path=None, **case) -> list[PublishedPoint]:
    """The points of ``kind`` whose model case is of ``case_type`` and matches every
    ``case`` item (``variant="naive_coalesced"``, ``memory="pinned"``), on ``gpu`` if given."""
    key = hardware.get_gpu(gpu).key if gpu else None
    found = []
    for point in load(path):
        if kind and point.kind != kind:
            continue
        if case_type and point.model_case.get("type") != case_type:
            continue
        if key and point.gpu_key != key:
            continue
        if any(point.model_case.get(k) != v for k, v in case.items()):
            continue
        found.append(point)
    return found


def nearest(case_type: str, gpu=None, size: float | None = None, size_key: str = "n",
            path=None, **case) -> PublishedPoint | None:
    """The point of ``case_type`` matching ``case`` nearest to ``size`` (by ratio of
    ``model_case[size_key]``), preferring ``gpu`` when it has one; None when none matches."""
    candidates = find(case_type=case_type, gpu=gpu, path=path, **case) if gpu else []
    candidates = candidates or find(case_type=case_type, path=path, **case)
    if not candidates:
        return None
    if size is None:
        return candidates[0]

    def distance(point):
        theirs = point.model_case.get(size_key)
        return abs(math.log(theirs / size)) if theirs else math.inf

    return min(candidates, key=distance)


__all__ = ["CASE_TYPES", "DATA_FILE", "FILE_FORMAT", "KINDS", "UNITS", "PublishedPoint", "find",
           "load", "nearest"]
