"""GPU specifications with their sources, and a roofline estimate of how long a kernel takes.

Every figure in :data:`GPUS` comes from NVIDIA's datasheet or product page for that GPU, and
``GPUSpec.sources`` says which one, field by field. Conventions, so that numbers compare:

- ``peak_flops`` is the **dense** rate in FLOP/s. Datasheets print most tensor-core figures
  "with sparsity" (2:4 structured sparsity, marked with an asterisk); those are halved here
  and the source note says so. ``fp32``/``fp64`` are the CUDA-core (non-tensor) rates, the
  ones a plain Numba kernel can reach; ``fp64_tensor`` is the FP64 tensor-core rate where it
  exists. ``int8`` is in operations per second.
- Memory sizes are the datasheet's decimal gigabytes (80 GB = 80e9 bytes).
- ``host_link_bytes_per_s`` is **per direction**: datasheets print PCIe bandwidth counting
  both directions (PCIe 5.0 x16: "128 GB/s"), which is 64 GB/s each way. It is the link's
  peak, not what a copy gets: a copy from **pinned** (page-locked) host memory runs near it
  (:attr:`GPUSpec.host_pinned_bytes_per_s`), a copy from ordinary **pageable** memory — every
  NumPy array — is staged through a pinned buffer by the driver and runs well below it
  (:attr:`GPUSpec.host_pageable_bytes_per_s`). Both are model assumptions with their
  reasons (:data:`PINNED_COPY_SOURCE`, :data:`PAGEABLE_COPY_SOURCE`); a recorded run measures
  them (``make gpu-check``).
- ``sm_count`` and ``l2_bytes`` come from NVIDIA's architecture whitepapers; ``None`` where
  NVIDIA has not published the figure for that product.
- ``nvlink_bytes_per_s`` is the datasheet's total per GPU, which counts **both directions**
  (H100: 900 GB/s = 450 GB/s each way). A copy to another GPU uses one direction:
  :attr:`GPUSpec.nvlink_bytes_per_s_per_direction`.
- Peak figures are ceilings. Real kernels reach some fraction: the course measures that
  fraction, and the roofline below says what the ceiling would allow.

The roofline model (Williams, Waterman and Patterson, "Roofline: an insightful visual
performance model for multicore architectures", CACM 52(4), 2009): a kernel that does
``flops`` operations and moves ``bytes_moved`` bytes to and from device memory needs at least
``flops / peak_flops`` seconds of arithmetic and ``bytes_moved / bandwidth`` seconds of memory
traffic. The two overlap, so the kernel takes about the larger of the two, plus the fixed
cost of launching it. :func:`estimate_time` adds the host-device transfer when asked.

>>> h100 = get_gpu("h100")
>>> n = 100_000_000                      # saxpy: y = a*x + y on float32
>>> est = estimate_time(h100, flops=2 * n, bytes_moved=3 * 4 * n)
>>> est.bound
'memory'
>>> round(est.memory_s * 1e3, 3)         # 1.2 GB / 3.35 TB/s, in ms
0.358
"""

from __future__ import annotations

import functools
import math
import os
import platform
import re
import subprocess
from dataclasses import dataclass, field

# ---------------------------------------------------------------------------------------------
# Formats and units
# ---------------------------------------------------------------------------------------------

PRECISIONS = ("fp64", "fp64_tensor", "fp32", "tf32", "fp16", "bf16", "fp8", "fp4", "int8")
LINKS = ("pageable", "pinned", "nvlink")

TERA = 1e12
PETA = 1e15
GB = 1e9  # datasheet gigabytes are decimal
TB = 1e12

# ---------------------------------------------------------------------------------------------
# Kernel-launch overhead
# ---------------------------------------------------------------------------------------------

LAUNCH_OVERHEAD_S = 4e-6
LAUNCH_OVERHEAD_SOURCE = (
    "About 4 µs per kernel: the order of magnitude NVIDIA reports for short kernels launched "
    "back to back from a CUDA stream, where launch overhead is comparable to the kernel itself "
    "(NVIDIA Technical Blog, A. Gray, 'Getting Started with CUDA Graphs', "
    "https://developer.nvidia.com/blog/cuda-graphs/; the usual range quoted is 3-5 µs). "
    "It is a model constant, not a measurement of this machine: launching from Python through "
    "Numba adds host-side work (argument checks and marshalling) on top, so measure it with "
    "gpulab.bench.time_gpu on a real GPU before relying on it."
)

# ---------------------------------------------------------------------------------------------
# Host <-> device copies: pinned and pageable memory are different rates
# ---------------------------------------------------------------------------------------------

PINNED_LINK_FRACTION = 0.8
PINNED_COPY_SOURCE = (
    "Model assumption: a copy from pinned (page-locked) host memory reaches about 80 % of the "
    "link's per-direction peak. The copy engine reads pinned memory directly (DMA), so the "
    "link is the limit, and PCIe's packet headers, flow control and encoding take the rest "
    "(NVIDIA CUDA C++ Best Practices Guide, 'Data Transfer Between Host and Device' and "
    "'Pinned Memory': 'Page-locked or pinned memory transfers attain the highest bandwidth "
    "between the host and the device', https://docs.nvidia.com/cuda/cuda-c-best-practices-"
    "guide/; NVIDIA's bandwidthTest and nvbandwidth measure it: https://github.com/NVIDIA/"
    "nvbandwidth). Your machine's figure: cuda.pinned_array + gpulab gpu-check."
)
PAGEABLE_COPY_BYTES_PER_S = 10e9
PAGEABLE_COPY_SOURCE = (
    "Model assumption: about 10 GB/s from ordinary (pageable) host memory, never more than the "
    "pinned rate. The driver cannot DMA from memory the operating system may move, so it "
    "copies each chunk into a pinned staging buffer with the CPU first and then sends it "
    "(NVIDIA Technical Blog, M. Harris, 'How to Optimize Data Transfers in CUDA C/C++', "
    "https://developer.nvidia.com/blog/how-optimize-data-transfers-cuda-cc/); the CPU copy, "
    "one core's memcpy rate on the order of 10 GB/s, caps it, so a faster link barely helps. "
    "Measured pageable rates vary widely between machines (NVIDIA DCGM's PCIe plugin measures "
    "pinned and unpinned separately for this reason: https://docs.nvidia.com/datacenter/dcgm/"
    "latest/user-guide/diag-pcie-plugin.html): measure yours with gpulab gpu-check."
)

# ---------------------------------------------------------------------------------------------
# The source documents
# ---------------------------------------------------------------------------------------------

_H100_DATASHEET = (
    "NVIDIA H100 Tensor Core GPU datasheet, H100 SXM column "
    "(https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet; same "
    "table on https://www.nvidia.com/en-us/data-center/h100/)"
)
_H200_PAGE = (
    "NVIDIA H200 Tensor Core GPU product page and datasheet, H200 SXM column "
    "(https://www.nvidia.com/en-us/data-center/h200/); the H200 NVL (PCIe card, 600 W) is a "
    "different SKU and is not described here"
)
_B200_DGX = (
    "NVIDIA DGX B200 product page and datasheet (https://www.nvidia.com/en-us/data-center/"
    "dgx-b200/): 8 Blackwell GPUs, 1,440 GB HBM3e in total, 64 TB/s HBM3e bandwidth in total, "
    "72 PFLOPS FP8 training and 144 PFLOPS FP4 inference (both with sparsity), 14.4 TB/s "
    "aggregate NVLink bandwidth"
)
_B200_HGX = (
    "NVIDIA HGX B200 specifications, per-GPU table, HGX B200 column "
    "(https://www.nvidia.com/en-us/data-center/hgx/); the B200 of HGX/DGX B200 (SXM, up to "
    "1,000 W) is used here, not the 1,200 W B200 of GB200 NVL72"
)
_HOPPER_WHITEPAPER = (
    "NVIDIA H100 Tensor Core GPU Architecture whitepaper, table 'Comparison of NVIDIA A100 and "
    "H100 Data Center GPUs', H100 SXM5 column: 132 SMs, 50 MB L2 cache "
    "(https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper)"
)
_AMPERE_WHITEPAPER = (
    "NVIDIA A100 Tensor Core GPU Architecture whitepaper, A100 column: 108 SMs, 40 MB L2 cache "
    "(https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/"
    "nvidia-ampere-architecture-whitepaper.pdf)"
)
_TURING_WHITEPAPER = (
    "NVIDIA Turing GPU Architecture whitepaper, Tesla T4 column: 40 SMs, 4,096 KB L2 cache "
    "(https://images.nvidia.com/aem-dam/en-zz/Solutions/design-visualization/technologies/"
    "turing-architecture/NVIDIA-Turing-Architecture-Whitepaper.pdf)"
)
_NOT_PUBLISHED = ("not published on the datasheet or product page used here; on a GPU, "
                  "`gpulab info` reports the device's own SM count")

_A100_DATASHEET = (
    "NVIDIA A100 Tensor Core GPU datasheet, A100 80GB SXM column "
    "(https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
    "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf)"
)
_L4_DATASHEET = (
    "NVIDIA L4 Tensor Core GPU datasheet and product page "
    "(https://www.nvidia.com/en-us/data-center/l4/)"
)
_T4_DATASHEET = (
    "NVIDIA T4 Tensor Core GPU datasheet "
    "(https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/"
    "t4-tensor-core-datasheet-951643.pdf; product page "
    "https://www.nvidia.com/en-us/data-center/tesla-t4/)"
)
_CUDA_THROUGHPUT_TABLE = (
    "CUDA C++ Programming Guide, 'Arithmetic Instructions' throughput table "
    "(https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#arithmetic-instructions)"
)


def _as_printed(flops_per_s: float, precision: str = "fp32") -> str:
    """A rate the way datasheets print it: '67 TFLOPS', '4.5 PFLOPS', '624 TOPS' for int8."""
    unit = "OPS" if precision.startswith("int") else "FLOPS"
    tenths_of_peta = flops_per_s / (PETA / 10)
    if flops_per_s >= PETA and math.isclose(tenths_of_peta, round(tenths_of_peta)):
        return f"{flops_per_s / PETA:g} P{unit}"
    return f"{flops_per_s / TERA:,.4g} T{unit}"


def _flops_sources(document: str, peak_flops: dict[str, float], sparse_halved=(),
                   notes: dict[str, str] | None = None) -> dict[str, str]:
    """One source per peak-FLOP figure: ``{"peak_flops.<format>": citation}``.

    Formats in ``sparse_halved`` are printed on the datasheet with sparsity; the note gives
    the printed figure (twice the stored one) so a reader can check it against the document.
    """
    notes = notes or {}
    sources = {}
    for precision, value in peak_flops.items():
        if precision in notes:
            sources[f"peak_flops.{precision}"] = notes[precision]
        elif precision in sparse_halved:
            sources[f"peak_flops.{precision}"] = (
                f"{document}. Printed as {_as_printed(2 * value, precision)} with sparsity; "
                f"halved to the dense {_as_printed(value, precision)}."
            )
        else:
            sources[f"peak_flops.{precision}"] = f"{document}. Dense figure as printed."
    return sources


def _as_rate(bytes_per_s: float) -> str:
    if bytes_per_s >= TB:
        return f"{bytes_per_s / TB:g} TB/s"
    return f"{bytes_per_s / GB:g} GB/s"


_PCIE_NOTE = {
    "PCIe 3.0 x16": "PCIe 3.0 x16 carries 16 GB/s each way (32 GB/s counting both directions)",
    "PCIe 4.0 x16": "the datasheet's 'PCIe Gen4: 64 GB/s' counts both directions: 32 GB/s each way",
    "PCIe 5.0 x16": "the datasheet's 'PCIe Gen5: 128 GB/s' counts both directions: 64 GB/s each "
                    "way",
}

# ---------------------------------------------------------------------------------------------
# The spec record
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GPUSpec:
    """One GPU's datasheet figures, each with its source in ``sources``."""

    key: str
    name: str
    architecture: str
    compute_capability: tuple[int, int]
    memory_bytes: int
    memory_bandwidth_bytes_per_s: float
    peak_flops: dict[str, float]
    host_link: str
    host_link_bytes_per_s: float
    nvlink_bytes_per_s: float | None
    tdp_watts: float
    sm_count: int | None = None
    l2_bytes: int | None = None
    memory_type: str | None = None  # "HBM3", "HBM3e", "HBM2e", "GDDR6"
    sources: dict[str, str] = field(default_factory=dict)

    def __post_init__(self):
        unknown = set(self.peak_flops) - set(PRECISIONS)
        if unknown:
            raise ValueError(
                f"{self.key}: unknown precision(s) {sorted(unknown)}; use {', '.join(PRECISIONS)}"
            )
        for what, value in [("memory_bytes", self.memory_bytes),
                            ("memory_bandwidth_bytes_per_s", self.memory_bandwidth_bytes_per_s),
                            ("host_link_bytes_per_s", self.host_link_bytes_per_s),
                            ("tdp_watts", self.tdp_watts), *self.peak_flops.items()]:
            if not value > 0:
                raise ValueError(f"{self.key}: {what} must be positive, not {value!r}")

    @property
    def label(self) -> str:
        return self.name

    @property
    def precisions(self) -> tuple[str, ...]:
        """The formats this GPU has a peak rate for, in :data:`PRECISIONS` order."""
        return tuple(p for p in PRECISIONS if p in self.peak_flops)

    def peak_flops_for(self, precision: str) -> float:
        """Dense peak FLOP/s (OP/s for int8) in ``precision``; ValueError if it has none."""
        key = str(precision).strip().lower()
        if key not in self.peak_flops:
            raise ValueError(
                f"the {self.name} has no {precision!r} rate; it supports "
                f"{', '.join(self.precisions)}"
            )
        return self.peak_flops[key]

    @property
    def nvlink_bytes_per_s_per_direction(self) -> float | None:
        """Half the datasheet's NVLink figure, which counts both directions."""
        return None if self.nvlink_bytes_per_s is None else self.nvlink_bytes_per_s / 2

    @property
    def host_pinned_bytes_per_s(self) -> float:
        """Model rate of a host->device copy from pinned memory, one direction
        (:data:`PINNED_COPY_SOURCE`): near the link's peak."""
        return PINNED_LINK_FRACTION * self.host_link_bytes_per_s

    @property
    def host_pageable_bytes_per_s(self) -> float:
        """Model rate of a copy from ordinary (pageable) host memory, such as a NumPy array
        (:data:`PAGEABLE_COPY_SOURCE`): well below the link's peak."""
        return min(PAGEABLE_COPY_BYTES_PER_S, self.host_pinned_bytes_per_s)

    def source(self, field_name: str) -> str:
        """The citation for one field (``"peak_flops.fp16"`` for a FLOP rate)."""
        try:
            return self.sources[field_name]
        except KeyError:
            raise ValueError(
                f"no source recorded for {field_name!r}; recorded: {', '.join(self.sources)}"
            ) from None

    def __str__(self) -> str:
        return (
            f"{self.name} ({self.architecture}, compute capability "
            f"{self.compute_capability[0]}.{self.compute_capability[1]}): "
            f"{self.memory_bytes / GB:g} GB at {_as_rate(self.memory_bandwidth_bytes_per_s)}, "
            f"{_as_printed(self.peak_flops['fp32'])} fp32, {self.tdp_watts:g} W"
        )


def _spec(*, document, sparse_halved=(), flops_notes=None, extra_sources=None, **fields):
    """A GPUSpec whose every field cites ``document`` unless ``extra_sources`` says otherwise."""
    sources = {
        name: document
        for name in ("name", "architecture", "compute_capability", "memory_bytes", "memory_type",
                     "memory_bandwidth_bytes_per_s", "host_link", "host_link_bytes_per_s",
                     "nvlink_bytes_per_s", "tdp_watts")
    }
    sources["compute_capability"] = (
        "NVIDIA, CUDA GPUs - Compute Capability (https://developer.nvidia.com/cuda-gpus)"
    )
    sources["host_link_bytes_per_s"] = f"{document}; {_PCIE_NOTE[fields['host_link']]}"
    sources["host_pinned_bytes_per_s"] = PINNED_COPY_SOURCE
    sources["host_pageable_bytes_per_s"] = PAGEABLE_COPY_SOURCE
    sources.update(_flops_sources(document, fields["peak_flops"], sparse_halved, flops_notes))
    sources.update(extra_sources or {})
    return GPUSpec(sources=sources, **fields)


# ---------------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------------

_HOPPER_SPARSE = ("tf32", "fp16", "bf16", "fp8", "int8")

H100_SXM = _spec(
    document=_H100_DATASHEET,
    sparse_halved=_HOPPER_SPARSE,
    key="H100-SXM",
    name="NVIDIA H100 SXM5 80GB",
    architecture="Hopper",
    compute_capability=(9, 0),
    memory_bytes=80 * GB,
    memory_bandwidth_bytes_per_s=3.35 * TB,
    peak_flops={"fp64": 34 * TERA, "fp64_tensor": 67 * TERA, "fp32": 67 * TERA,
                "tf32": 494.5 * TERA, "fp16": 989.5 * TERA, "bf16": 989.5 * TERA,
                "fp8": 1979 * TERA, "int8": 1979 * TERA},
    host_link="PCIe 5.0 x16",
    host_link_bytes_per_s=64 * GB,
    nvlink_bytes_per_s=900 * GB,
    tdp_watts=700,
    memory_type="HBM3",
    sm_count=132,
    l2_bytes=50 * 2**20,
    extra_sources={
        "sm_count": _HOPPER_WHITEPAPER,
        "l2_bytes": _HOPPER_WHITEPAPER,
        "nvlink_bytes_per_s": f"{_H100_DATASHEET}; 'NVLink: 900 GB/s' counts both directions "
                              "(18 fourth-generation links), 450 GB/s each way",
        "tdp_watts": f"{_H100_DATASHEET}; 'up to 700 W (configurable)'",
    },
)

H200 = _spec(
    document=_H200_PAGE,
    sparse_halved=_HOPPER_SPARSE,
    key="H200",
    name="NVIDIA H200 SXM 141GB",
    architecture="Hopper",
    compute_capability=(9, 0),
    memory_bytes=141 * GB,
    memory_bandwidth_bytes_per_s=4.8 * TB,
    peak_flops={"fp64": 34 * TERA, "fp64_tensor": 67 * TERA, "fp32": 67 * TERA,
                "tf32": 494.5 * TERA, "fp16": 989.5 * TERA, "bf16": 989.5 * TERA,
                "fp8": 1979 * TERA, "int8": 1979 * TERA},
    host_link="PCIe 5.0 x16",
    host_link_bytes_per_s=64 * GB,
    nvlink_bytes_per_s=900 * GB,
    tdp_watts=700,
    memory_type="HBM3e",
    sm_count=None,
    l2_bytes=None,
    extra_sources={
        "sm_count": f"{_H200_PAGE}: SM count {_NOT_PUBLISHED}",
        "l2_bytes": f"{_H200_PAGE}: L2 size not published",
        "nvlink_bytes_per_s": f"{_H200_PAGE}; 'NVLink: 900 GB/s' counts both directions, "
                              "450 GB/s each way",
        "tdp_watts": f"{_H200_PAGE}; 'up to 700 W (configurable)' for H200 SXM",
    },
)

B200 = _spec(
    document=_B200_HGX,
    sparse_halved=("tf32", "fp16", "bf16", "fp8", "fp4", "int8"),
    key="B200",
    name="NVIDIA B200 SXM 180GB",
    architecture="Blackwell",
    compute_capability=(10, 0),
    memory_bytes=180 * GB,
    memory_bandwidth_bytes_per_s=7.7 * TB,
    peak_flops={"fp64": 37 * TERA, "fp64_tensor": 37 * TERA, "fp32": 75 * TERA,
                "tf32": 1.1 * PETA, "fp16": 2.25 * PETA, "bf16": 2.25 * PETA,
                "fp8": 4.5 * PETA, "fp4": 9 * PETA, "int8": 4.5 * PETA},
    host_link="PCIe 5.0 x16",
    host_link_bytes_per_s=64 * GB,
    nvlink_bytes_per_s=1800 * GB,
    tdp_watts=1000,
    memory_type="HBM3e",
    sm_count=None,
    l2_bytes=None,
    extra_sources={
        "sm_count": f"{_B200_HGX}: SM count {_NOT_PUBLISHED}",
        "l2_bytes": f"{_B200_HGX}: L2 size not published",
        "memory_bytes": f"{_B200_HGX}: 180 GB HBM3E per GPU; agrees with {_B200_DGX} "
                        "(1,440 GB / 8)",
        "memory_bandwidth_bytes_per_s": (
            f"{_B200_HGX}: 7.7 TB/s per GPU. UNCERTAIN: the DGX B200 datasheet's 64 TB/s for "
            "8 GPUs is 8 TB/s each, the figure most articles quote; 7.7 TB/s is NVIDIA's later "
            "per-GPU figure."
        ),
        "peak_flops.fp64": f"{_B200_HGX}: 'FP64/FP64 Tensor Core 37 TFLOPS'. Dense figure.",
        "peak_flops.fp64_tensor": f"{_B200_HGX}: 'FP64/FP64 Tensor Core 37 TFLOPS'. Dense "
                                  "figure.",
        "host_link": f"{_B200_HGX}: 'PCIe Gen5: 128 GB/s' (Blackwell supports PCIe 6.0, but "
                     "the HGX/DGX B200 hosts connect the GPUs at Gen5)",
        "nvlink_bytes_per_s": f"{_B200_HGX}: fifth-generation NVLink, 1.8 TB/s per GPU counting "
                              f"both directions (900 GB/s each way); {_B200_DGX}",
        "tdp_watts": f"{_B200_HGX}: 'configurable up to 1,000 W'. Other B200 systems differ "
                     "(GB200 NVL72: up to 1,200 W).",
    },
)

A100_SXM = _spec(
    document=_A100_DATASHEET,
    sparse_halved=("tf32", "fp16", "bf16", "int8"),
    key="A100-SXM",
    name="NVIDIA A100 SXM4 80GB",
    architecture="Ampere",
    compute_capability=(8, 0),
    memory_bytes=80 * GB,
    memory_bandwidth_bytes_per_s=2.039 * TB,
    peak_flops={"fp64": 9.7 * TERA, "fp64_tensor": 19.5 * TERA, "fp32": 19.5 * TERA,
                "tf32": 156 * TERA, "fp16": 312 * TERA, "bf16": 312 * TERA,
                "int8": 624 * TERA},
    host_link="PCIe 4.0 x16",
    host_link_bytes_per_s=32 * GB,
    nvlink_bytes_per_s=600 * GB,
    tdp_watts=400,
    memory_type="HBM2e",
    sm_count=108,
    l2_bytes=40 * 2**20,
    extra_sources={
        "sm_count": _AMPERE_WHITEPAPER,
        "l2_bytes": _AMPERE_WHITEPAPER,
        "memory_bandwidth_bytes_per_s": f"{_A100_DATASHEET}: 2,039 GB/s (the 40 GB A100 has "
                                        "1,555 GB/s; the 80 GB PCIe card 1,935 GB/s)",
        "nvlink_bytes_per_s": f"{_A100_DATASHEET}; 'NVLink: 600 GB/s' counts both directions "
                              "(12 third-generation links), 300 GB/s each way",
    },
)

L4 = _spec(
    document=_L4_DATASHEET,
    sparse_halved=("tf32", "fp16", "bf16", "fp8", "int8"),
    flops_notes={
        "fp64": f"Not on the datasheet. Derived: fp32 rate / 64, the FP64:FP32 throughput "
                f"ratio of compute capability 8.9 in the {_CUDA_THROUGHPUT_TABLE}.",
    },
    key="L4",
    name="NVIDIA L4 24GB",
    architecture="Ada Lovelace",
    compute_capability=(8, 9),
    memory_bytes=24 * GB,
    memory_bandwidth_bytes_per_s=300 * GB,
    peak_flops={"fp64": 30.3 * TERA / 64, "fp32": 30.3 * TERA, "tf32": 60 * TERA,
                "fp16": 121 * TERA, "bf16": 121 * TERA, "fp8": 242.5 * TERA,
                "int8": 242.5 * TERA},
    host_link="PCIe 4.0 x16",
    host_link_bytes_per_s=32 * GB,
    nvlink_bytes_per_s=None,
    tdp_watts=72,
    memory_type="GDDR6",
    sm_count=None,
    l2_bytes=None,
    extra_sources={
        "sm_count": f"{_L4_DATASHEET}: SM count {_NOT_PUBLISHED}",
        "l2_bytes": f"{_L4_DATASHEET}: L2 size not published",
        "nvlink_bytes_per_s": f"{_L4_DATASHEET}: no NVLink (PCIe only)",
    },
)

T4 = _spec(
    document=_T4_DATASHEET,
    flops_notes={
        "fp64": f"Not on the datasheet. Derived: fp32 rate / 32, the FP64:FP32 throughput "
                f"ratio of compute capability 7.5 in the {_CUDA_THROUGHPUT_TABLE}.",
        "fp16": f"{_T4_DATASHEET}: 'Mixed Precision (FP16/FP32) 65 TFLOPS' on the tensor "
                "cores. Dense (Turing has no sparsity support).",
        "int8": f"{_T4_DATASHEET}: 'INT8 130 TOPS'. Dense.",
    },
    key="T4",
    name="NVIDIA T4 16GB",
    architecture="Turing",
    compute_capability=(7, 5),
    memory_bytes=16 * GB,
    memory_bandwidth_bytes_per_s=320 * GB,
    peak_flops={"fp64": 8.1 * TERA / 32, "fp32": 8.1 * TERA, "fp16": 65 * TERA,
                "int8": 130 * TERA},
    host_link="PCIe 3.0 x16",
    host_link_bytes_per_s=16 * GB,
    nvlink_bytes_per_s=None,
    tdp_watts=70,
    memory_type="GDDR6",
    sm_count=40,
    l2_bytes=4 * 2**20,
    extra_sources={
        "sm_count": _TURING_WHITEPAPER,
        "l2_bytes": _TURING_WHITEPAPER,
        "memory_bandwidth_bytes_per_s": f"{_T4_DATASHEET}: '320+ GB/s'",
        "host_link_bytes_per_s": f"{_T4_DATASHEET}: 'x16 PCIe Gen3', 'interconnect bandwidth "
                                 "32 GB/s' counting both directions: 16 GB/s each way",
        "nvlink_bytes_per_s": f"{_T4_DATASHEET}: no NVLink (PCIe only)",
    },
)

GPUS: dict[str, GPUSpec] = {gpu.key: gpu for gpu in (H100_SXM, H200, B200, A100_SXM, L4, T4)}

# ---------------------------------------------------------------------------------------------
# Lookup
# ---------------------------------------------------------------------------------------------


def _normalise(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def get_gpu(name: str | GPUSpec) -> GPUSpec:
    """The spec for ``name``: a key (``"H100-SXM"``) or an unambiguous part of a key or a name
    (``"h100"``, ``"a100 sxm4"``). Case, spaces and hyphens are ignored; an unknown or ambiguous
    name raises ValueError listing the keys. A GPUSpec is returned as it is."""
    if isinstance(name, GPUSpec):
        return name
    if not isinstance(name, str) or not _normalise(name):
        raise ValueError(f"name a GPU, one of {', '.join(GPUS)}; got {name!r}")
    wanted = _normalise(name)
    for key, gpu in GPUS.items():
        if wanted == _normalise(key):
            return gpu
    matches = [key for key, gpu in GPUS.items()
               if wanted in _normalise(key) or wanted in _normalise(gpu.name)]
    if len(matches) == 1:
        return GPUS[matches[0]]
    if matches:
        raise ValueError(
            f"{name!r} matches several GPUs ({', '.join(matches)}); name one of them"
        )
    raise ValueError(f"no GPU called {name!r}; known GPUs: {', '.join(GPUS)}")


def match_device(device_name: str) -> GPUSpec | None:
    """The spec a driver's device name stands for ("NVIDIA H100 80GB HBM3" -> the H100 SXM),
    tried whole and then word by word (words with a digit), or None for a GPU not in
    :data:`GPUS`."""
    name = device_name or ""
    for candidate in [name, *[t for t in name.replace("-", " ").split()
                              if any(c.isdigit() for c in t)]]:
        try:
            return get_gpu(candidate)
        except ValueError:
            continue
    return None


# ---------------------------------------------------------------------------------------------
# Roofline
# ---------------------------------------------------------------------------------------------


def _check_amount(what: str, value) -> float:
    if isinstance(value, bool) or not hasattr(value, "__float__"):
        raise ValueError(f"{what} must be a number, not {value!r}")
    value = float(value)
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"{what} must be a finite number, not {value!r}")
    if value < 0:
        raise ValueError(f"{what} cannot be negative (got {value:g})")
    return value


@dataclass(frozen=True)
class RooflineEstimate:
    """How long a kernel would take on ``gpu`` by the roofline model, and why.

    All times are in seconds. ``transfer_s`` is 0 unless a host-device (or NVLink) transfer
    was asked for. ``launch_overhead_s`` and ``link_rate_bytes_per_s`` are the model's
    constants unless measured ones were passed in; ``measured_on`` then names the GPU and
    run they were measured on.
    """

    gpu: GPUSpec
    flops: float
    bytes_moved: float
    precision: str
    compute_s: float
    memory_s: float
    launch_s: float
    transfer_s: float
    launches: int = 1
    transfer_bytes: float = 0.0
    link: str = "pageable"
    launch_overhead_s: float = LAUNCH_OVERHEAD_S
    link_rate_bytes_per_s: float | None = None
    measured_on: str | None = None

    @property
    def kernel_s(self) -> float:
        """The kernel alone: compute and memory overlap, the launch does not."""
        return max(self.compute_s, self.memory_s) + self.launch_s

    @property
    def time_s(self) -> float:
        """Kernel time plus the transfer time (0 when no transfer was asked for)."""
        return self.kernel_s + self.transfer_s

    @property
    def bound(self) -> str:
        """What limits the estimate: ``"memory"``, ``"compute"``, ``"launch"``, or
        ``"transfer"`` when moving the data over the link takes longest."""
        parts = {"memory": self.memory_s, "compute": self.compute_s, "launch": self.launch_s,
                 "transfer": self.transfer_s}
        return max(parts, key=parts.get)  # ties: first listed (memory before compute)

    @property
    def arithmetic_intensity(self) -> float:
        """FLOPs per byte of device-memory traffic (inf when no bytes move)."""
        if self.bytes_moved == 0:
            return math.inf if self.flops > 0 else 0.0
        return self.flops / self.bytes_moved

    @property
    def achieved_flops_per_s(self) -> float:
        return self.flops / self.time_s if self.time_s > 0 else 0.0

    @property
    def label(self) -> str:
        label = (f"estimated from a roofline model of the {self.gpu.name}, a best case "
                 "(roofline ceiling)")
        if self.measured_on:
            label += f"; launch overhead and host copy rates measured on {self.measured_on}"
        return label

    def __str__(self) -> str:
        lines = [
            f"{format_seconds(self.time_s)} {self.label} ({self.bound}-bound, {self.precision})",
            f"  compute  {format_seconds(self.compute_s):>10}  {self.flops:.3g} FLOP at "
            f"{_as_printed(self.gpu.peak_flops_for(self.precision), self.precision)}",
            f"  memory   {format_seconds(self.memory_s):>10}  {self.bytes_moved:.3g} B at "
            f"{_as_rate(self.gpu.memory_bandwidth_bytes_per_s)}",
            f"  launch   {format_seconds(self.launch_s):>10}  {self.launches} x "
            f"{self.launch_overhead_s * 1e6:.3g} µs",
        ]
        if self.transfer_bytes:
            rate = self.link_rate_bytes_per_s or link_bytes_per_s(self.gpu, self.link)
            where = ("NVLink" if self.link == "nvlink"
                     else f"{self.gpu.host_link} from {self.link} host memory")
            lines.append(f"  transfer {format_seconds(self.transfer_s):>10}  "
                         f"{self.transfer_bytes:.3g} B over {where} at {_as_rate(rate)}")
        return "\n".join(lines)


def format_rate(value: float, unit: str) -> str:
    """A rate with an SI prefix: ``format_rate(3.2e13, "FLOP/s")`` -> ``'32 TFLOP/s'``."""
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"



def format_seconds(seconds: float) -> str:
    """A duration with a readable unit: ``format_seconds(4e-6)`` -> ``'4 µs'``."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns"


def link_bytes_per_s(gpu: GPUSpec | str, link: str = "pageable") -> float:
    """Model rate of a copy in one direction over ``link``: ``"pageable"`` (PCIe from ordinary
    host memory, e.g. a NumPy array), ``"pinned"`` (PCIe from page-locked memory,
    ``cuda.pinned_array``) or ``"nvlink"`` (one direction of the GPU's NVLink)."""
    gpu = get_gpu(gpu)
    if link == "host":
        raise ValueError("link='host' is ambiguous: a host copy runs at different rates from "
                         "pageable memory (ordinary NumPy arrays: link='pageable') and from "
                         "pinned memory (cuda.pinned_array: link='pinned')")
    if link not in LINKS:
        raise ValueError(f"link must be one of {', '.join(LINKS)}, not {link!r}")
    if link == "pageable":
        return gpu.host_pageable_bytes_per_s
    if link == "pinned":
        return gpu.host_pinned_bytes_per_s
    if gpu.nvlink_bytes_per_s is None:
        raise ValueError(f"the {gpu.name} has no NVLink; use link='pageable' or 'pinned' "
                         f"({gpu.host_link})")
    return gpu.nvlink_bytes_per_s_per_direction


def estimate_time(gpu: GPUSpec | str, flops: float, bytes_moved: float, precision: str = "fp32",
                  transfer_bytes: float = 0.0, link: str = "pageable",
                  launches: int = 1, launch_overhead_s: float | None = None,
                  link_rate_bytes_per_s: float | None = None,
                  measured_on: str | None = None) -> RooflineEstimate:
    """Roofline estimate of a kernel doing ``flops`` operations and moving ``bytes_moved``
    bytes to and from device memory, in ``precision``, launched ``launches`` times.

    ``transfer_bytes`` > 0 adds copying that many bytes over ``link`` ("pageable": PCIe from
    ordinary host memory, the default, as NumPy arrays are; "pinned": PCIe from page-locked
    memory; "nvlink": one direction of the GPU's NVLink, half the datasheet's total).
    Count both ways yourself: copying x and y in and y back out is 3 arrays.
    ``launch_overhead_s`` and ``link_rate_bytes_per_s`` replace the model's constants with
    measured ones (from a recorded run); ``measured_on`` says where they were measured.
    """
    gpu = get_gpu(gpu)
    flops = _check_amount("flops", flops)
    bytes_moved = _check_amount("bytes_moved", bytes_moved)
    transfer_bytes = _check_amount("transfer_bytes", transfer_bytes)
    if isinstance(launches, bool) or not isinstance(launches, int) or launches < 0:
        raise ValueError(f"launches must be a whole number >= 0, not {launches!r}")
    overhead = (LAUNCH_OVERHEAD_S if launch_overhead_s is None
                else _check_amount("launch_overhead_s", launch_overhead_s))
    precision = str(precision).strip().lower()
    peak = gpu.peak_flops_for(precision)
    link_rate = link_bytes_per_s(gpu, link)
    if link_rate_bytes_per_s is not None:
        link_rate = _check_amount("link_rate_bytes_per_s", link_rate_bytes_per_s)
        if link_rate == 0:
            raise ValueError("link_rate_bytes_per_s must be positive")
    return RooflineEstimate(
        gpu=gpu,
        flops=flops,
        bytes_moved=bytes_moved,
        precision=precision,
        compute_s=flops / peak,
        memory_s=bytes_moved / gpu.memory_bandwidth_bytes_per_s,
        launch_s=launches * overhead,
        transfer_s=transfer_bytes / link_rate,
        launches=launches,
        transfer_bytes=transfer_bytes,
        link=link,
        launch_overhead_s=overhead,
        link_rate_bytes_per_s=link_rate_bytes_per_s,
        measured_on=measured_on,
    )


def ridge_point(gpu: GPUSpec | str, precision: str = "fp32") -> float:
    """FLOP per byte where the compute and memory roofs meet: kernels with a lower arithmetic
    intensity are memory-bound on this GPU, higher ones compute-bound."""
    gpu = get_gpu(gpu)
    return gpu.peak_flops_for(precision) / gpu.memory_bandwidth_bytes_per_s


# ---------------------------------------------------------------------------------------------
# This machine's CPU
# ---------------------------------------------------------------------------------------------


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "cpu model") and value.strip():
                    return " ".join(value.split())
    except OSError:
        pass
    if platform.system() == "Darwin":
        try:
            out = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"],
                                 capture_output=True, text=True, timeout=2, check=False)
            if out.stdout.strip():
                return out.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor() or platform.machine() or None


def _usable_cores() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


@functools.lru_cache(maxsize=1)
def cpu_description() -> str:
    """This machine's CPU model and how many logical cores this process may use, read from
    /proc/cpuinfo (Linux) or the platform module; no network."""
    model = _cpu_model() or "unknown CPU"
    cores = _usable_cores()
    total = os.cpu_count()
    if cores is None:
        return model
    if total and total != cores:
        return f"{model}, {cores} of {total} logical cores"
    return f"{model}, {cores} logical core{'s' if cores != 1 else ''}"


__all__ = [
    "GPUS",
    "LAUNCH_OVERHEAD_S",
    "LAUNCH_OVERHEAD_SOURCE",
    "LINKS",
    "PAGEABLE_COPY_BYTES_PER_S",
    "PAGEABLE_COPY_SOURCE",
    "PINNED_COPY_SOURCE",
    "PINNED_LINK_FRACTION",
    "PRECISIONS",
    "GPUSpec",
    "RooflineEstimate",
    "cpu_description",
    "estimate_time",
    "format_rate",
    "format_seconds",
    "get_gpu",
    "link_bytes_per_s",
    "match_device",
    "ridge_point",
]
