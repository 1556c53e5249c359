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

from gpulab.device import DEVICE_LIMITS

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
# A kernel's fixed costs: the GPU's minimum time per kernel, and the host's cost to issue one
# ---------------------------------------------------------------------------------------------

KERNEL_MIN_S = 2.2e-6
KERNEL_MIN_SOURCE = (
    "About 2.2 µs of GPU time per kernel, however little it does: NVIDIA's nvbench measured "
    "2.182 µs per launch for a 64K-element fp16 sigmoid launched back to back (batch mode) on "
    "an RTX 5090, and 4.098 µs for one isolated launch timed with CUDA events (NVIDIA/cccl "
    "pull request 7391, https://github.com/NVIDIA/cccl/pull/7391, 2026). The back-to-back "
    "figure is the floor on a stream; gpulab/data/published_measurements.json holds both"
)

# The host's time to issue one launch (argument checks and marshalling, the driver call), per
# way of launching. Launches are asynchronous: the host issues the next while the GPU runs the
# last, so this cost is paid on the host's timeline, not the GPU's (see stream_timeline).
NUMBA_LAUNCH_BASE_S = 6.6e-6
NUMBA_LAUNCH_PER_ARRAY_S = 3.75e-6
NUMBA_TYPICAL_ARRAYS = 3
HOST_LAUNCH_S = {
    "numba": NUMBA_LAUNCH_BASE_S + NUMBA_TYPICAL_ARRAYS * NUMBA_LAUNCH_PER_ARRAY_S,
    "cuda_cpp": 3.0e-6,
    "cuda_graph": 0.58e-6,
}
HOST_LAUNCH_SOURCES = {
    "numba": (
        "Numba's host time per launch: 6.6 µs for an empty kernel, 10.6 µs with one float32 "
        "array argument and 14.1 µs with two, timed with %timeit on numba-cuda's main branch "
        "(G. Markall, NVIDIA/numba-cuda pull request 288, 2025-06-11, "
        "https://github.com/NVIDIA/numba-cuda/pull/288): 6.6 µs + about 3.75 µs per array. "
        "The model takes a kernel of 3 arrays, the course's usual: 17.85 µs"
    ),
    "cuda_cpp": (
        "3.0 µs of host time per cuLaunchKernel call of an empty kernel (3.3 µs with 19 "
        "arguments) on a GB200 (meta-pytorch/tritonbench pull request 1017, 2026-04-14, "
        "https://github.com/meta-pytorch/tritonbench/pull/1017); 2.65 µs per <<<>>> launch "
        "measured on an RTX 5070 Ti laptop under WSL2 (ahrefs/ocannl issue 488, "
        "https://github.com/ahrefs/ocannl/issues/488) agrees"
    ),
    "cuda_graph": (
        "About 0.58 µs per kernel node when the step is replayed as one CUDA Graph (plus about "
        "15 µs per replay), fitted over graphs of 8 to 117 no-op kernels on an RTX 5070 Ti "
        "laptop (ahrefs/ocannl issue 488, https://github.com/ahrefs/ocannl/issues/488)"
    ),
}
HOST_LAUNCH_NAMES = {"numba": "Numba (Python)", "cuda_cpp": "CUDA C++ (cudaLaunchKernel)",
                     "cuda_graph": "a CUDA Graph (one launch for many kernels)"}
HOST_APIS = tuple(HOST_LAUNCH_S)
# The course launches through Numba: its host cost per launch is "the" launch overhead.
LAUNCH_OVERHEAD_S = HOST_LAUNCH_S["numba"]
LAUNCH_OVERHEAD_SOURCE = HOST_LAUNCH_SOURCES["numba"]

# ---------------------------------------------------------------------------------------------
# Power: idle + utilisation x (TDP - idle)
# ---------------------------------------------------------------------------------------------

IDLE_FRACTION_OF_TDP = 0.1
IDLE_POWER_SOURCE = (
    "Measured board power of idle GPUs with no process on them, as nvidia-smi prints it: "
    "Tesla V100-PCIE 24 W of a 250 W cap (https://github.com/marconetto/azadventures, "
    "chapter18), GeForce RTX 2080 Ti 20 W of 250 W (https://github.com/Anthony-Hoo/"
    "Anthony-Hoo.github.io, AutoDL_Multi-GPU_Interconnection_Test), A40 'around 30W' of 300 W "
    "(https://github.com/NVIDIA/open-gpu-kernel-modules/issues/874), H200 SXM 80.3 W of 700 W "
    "(a benchmark page, lower confidence): 8-11 % of the power limit; the model takes 10 %. "
    "NVIDIA publishes no idle figure for the GPUs in this table"
)
POWER_MODEL_SOURCE = (
    "power = idle + utilisation × (TDP − idle): a linear model between the idle board power "
    f"({IDLE_POWER_SOURCE.split(':')[0].lower()}; gpulab.hardware.IDLE_POWER_SOURCE) and the "
    "TDP at full use. Checked against published board power under load (an H100 at 615 W in "
    "an FP32 burn, https://github.com/huggingface/gpu-fryer/issues/4): gpulab model-check"
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
# Inside an SM: resident blocks, FP32 lanes, shared-memory banks
# ---------------------------------------------------------------------------------------------

SPECS_SOURCE = ("CUDA C++ Programming Guide, Technical Specifications per Compute Capability: "
                "https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html"
                "#features-and-technical-specifications-technical-specifications-per-compute-"
                "capability")


@dataclass(frozen=True)
class SMLimits:
    """Per-SM limits of one compute capability (see :data:`SPECS_SOURCE`)."""

    max_threads: int
    max_blocks: int
    registers: int  # 32-bit registers per SM
    shared_bytes: int  # shared memory per SM usable by blocks
    reserved_shared_bytes_per_block: int  # taken by the system for each resident block
    register_unit: int = 256  # registers are allocated to a warp in units of this many
    shared_unit: int = 128  # shared memory is allocated to a block in units of this many bytes
    warp_size: int = 32

    @property
    def max_warps(self) -> int:
        return self.max_threads // self.warp_size


SM_LIMITS = {
    (7, 5): SMLimits(1024, 16, 65536, 64 * 1024, 0, shared_unit=256),
    (8, 0): SMLimits(2048, 32, 65536, 164 * 1024, 1024),
    (8, 6): SMLimits(1536, 16, 65536, 100 * 1024, 1024),
    (8, 9): SMLimits(1536, 24, 65536, 100 * 1024, 1024),
    (9, 0): SMLimits(2048, 32, 65536, 228 * 1024, 1024),
    (10, 0): SMLimits(2048, 32, 65536, 228 * 1024, 1024),
}


@dataclass(frozen=True)
class Occupancy:
    """Resident blocks and warps per SM, and what limits them."""

    threads_per_block: int
    blocks_per_sm: int
    warps_per_sm: int
    max_warps_per_sm: int
    limited_by: str  # "registers", "shared memory", "threads", "blocks"

    @property
    def fraction(self) -> float:
        return self.warps_per_sm / self.max_warps_per_sm

    def __str__(self) -> str:
        return (f"{self.fraction:.0%} theoretical occupancy ({self.warps_per_sm} of "
                f"{self.max_warps_per_sm} warps per SM, {self.blocks_per_sm} "
                f"block{'s' if self.blocks_per_sm != 1 else ''} of {self.threads_per_block} "
                f"threads; limited by {self.limited_by})")



def _round_up(value: int, unit: int) -> int:
    return math.ceil(value / unit) * unit


def theoretical_occupancy(compute_capability, threads_per_block: int, registers: int,
                          shared_bytes: int = 0) -> Occupancy:
    """Resident warps per SM for blocks of ``threads_per_block`` threads using ``registers``
    registers per thread and ``shared_bytes`` of shared memory per block."""
    limits = SM_LIMITS.get(tuple(compute_capability))
    if limits is None:
        raise ValueError(f"no SM limits for compute capability {tuple(compute_capability)}; "
                         f"known: {sorted(SM_LIMITS)}")
    most = DEVICE_LIMITS["MAX_THREADS_PER_BLOCK"]
    if not 1 <= threads_per_block <= most:
        raise ValueError(f"threads_per_block must be 1..{most}, not {threads_per_block}")
    warps_per_block = math.ceil(threads_per_block / limits.warp_size)
    by = {"threads": limits.max_warps // warps_per_block, "blocks": limits.max_blocks}
    if registers > 0:
        per_warp = _round_up(registers * limits.warp_size, limits.register_unit)
        by["registers"] = (limits.registers // per_warp) // warps_per_block
    block_shared = _round_up(shared_bytes + limits.reserved_shared_bytes_per_block,
                             limits.shared_unit) if shared_bytes else 0
    if block_shared:
        by["shared memory"] = limits.shared_bytes // block_shared
    limited_by = min(by, key=by.get)
    blocks = by[limited_by]
    return Occupancy(threads_per_block, blocks, blocks * warps_per_block, limits.max_warps,
                     limited_by)




FP32_LANES_PER_SM = {(7, 5): 64, (8, 0): 64, (8, 6): 128, (8, 9): 128, (9, 0): 128,
                     (10, 0): 128}
FP32_LANES_SOURCE = (
    "FP32 cores per SM in NVIDIA's architecture whitepapers: Turing TU102 64 (NVIDIA Turing GPU "
    "Architecture whitepaper, 'Turing Streaming Multiprocessor'), A100 64 (NVIDIA A100 Tensor "
    "Core GPU Architecture whitepaper, 'A100 SM Architecture': '64 FP32 CUDA Cores/SM'), GA102 "
    "128 (NVIDIA Ampere GA102 GPU Architecture whitepaper: '128 FP32 operations per clock' per "
    "SM), Ada 128 (NVIDIA Ada GPU Architecture whitepaper: '128 CUDA Cores' per SM), H100 128 "
    "(NVIDIA H100 Tensor Core GPU Architecture whitepaper: '128 FP32 CUDA Cores per SM'); "
    "Blackwell assumed as Hopper (128)"
)
NCCL_NVLINK_EFFICIENCY = 370 / 450
NCCL_EFFICIENCY_SOURCE = (
    "Sylvain Jeaugey (NVIDIA, NCCL), https://github.com/NVIDIA/nccl-tests/issues/212 "
    "(2024-05-06): '450GB/s is the line rate. With the protocol overhead (~20%) NCCL can get an "
    "effective NVLink bandwidth of 370GB/s, which you can observe as \"BusBw\" when running "
    "non-allreduce operations, or when running with NCCL_ALGO=RING' (H100, NVLink 4). The "
    "share NCCL's bus bandwidth reaches of an NVLink's per-direction line rate"
)
NVLS_BYTES_SOURCE = (
    "NVLink SHARP (NVLS): NVSwitch reduces in the switch. Each GPU reduces its 1/N shard with "
    "multimem loads (the switch reads that shard from all N GPUs: each GPU sends n bytes in all) "
    "and broadcasts the reduced shard with multimem stores (each GPU receives n bytes in all), "
    "so each direction of a GPU's links carries n (1 + 1/N) bytes, against 2 (N-1)/N n for a "
    "ring. NVIDIA, 'NVIDIA NVLink and NVSwitch' (https://www.nvidia.com/en-us/data-center/"
    "nvlink/) and NCCL 2.17 release notes (NVLS algorithm)"
)
SHARED_BANKS = 32  # compute capability 5.x and later (SHARED_BANDWIDTH_SOURCE)
SHARED_BANK_BYTES = 4  # each bank serves one 32-bit word per clock
SHARED_BYTES_PER_CLOCK_PER_SM = SHARED_BANKS * SHARED_BANK_BYTES  # 128
SHARED_BANDWIDTH_SOURCE = (
    "CUDA C++ Programming Guide, 'Shared Memory' for compute capability 5.x and later: 'Shared "
    "memory has 32 banks ... Each bank has a bandwidth of 32 bits per clock cycle': 32 × 4 B = "
    "128 B per clock per SM (https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html"
    "#shared-memory-5-x). L1 hits are served by the same array at the same width. The clock "
    "is the one the fp32 peak implies: peak / (2 FLOP × FP32 lanes × SMs)"
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
_A6000_DATASHEET = (
    "NVIDIA RTX A6000 datasheet and product page (https://www.nvidia.com/en-us/design-"
    "visualization/rtx-a6000/): 10,752 CUDA cores, 48 GB GDDR6 with ECC, 768 GB/s, FP32 38.7 "
    "TFLOPS, tensor performance 309.7 TFLOPS (a sparse figure), PCI Express 4.0 x16, max power "
    "consumption 300 W, NVLink bridge 112.5 GB/s for two cards (the same table is reproduced at "
    "https://www.servethehome.com/nvidia-rtx-a6000-48gb-gpu-drops-quadro-designation/). It is "
    "here because the best-known published SGEMM series (Simon Boehm's) was measured on it"
)
_GA102_WHITEPAPER = (
    "NVIDIA Ampere GA102 GPU Architecture whitepaper, RTX A6000 column: 84 SMs, 6,144 KB L2 "
    "(https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf)"
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
_PCIE_BYTES_PER_S = {  # one direction of the link, as the notes above say
    "PCIe 3.0 x16": 16 * GB,
    "PCIe 4.0 x16": 32 * GB,
    "PCIe 5.0 x16": 64 * GB,
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
    idle_watts: float | None = None  # measured board power at idle, sourced; None: unpublished
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

    @property
    def fp32_lanes_per_sm(self) -> int | None:
        """FP32 lanes (CUDA cores) per SM of this architecture (:data:`FP32_LANES_SOURCE`)."""
        return FP32_LANES_PER_SM.get(tuple(self.compute_capability))

    @property
    def shared_bytes_per_s(self) -> float | None:
        """Shared-memory (and L1) bandwidth of all SMs together: 128 B per clock per SM
        (:data:`SHARED_BANDWIDTH_SOURCE`) at the clock the fp32 peak implies. None where the
        architecture's FP32 lanes per SM are not in :data:`FP32_LANES_PER_SM`."""
        lanes = self.fp32_lanes_per_sm
        if lanes is None:
            return None
        sm_clocks_per_s = self.peak_flops["fp32"] / (2 * lanes)  # SMs x clock
        return SHARED_BYTES_PER_CLOCK_PER_SM * sm_clocks_per_s

    @property
    def idle_power_watts(self) -> float:
        """Board power at idle: the measured figure in ``idle_watts`` where one is published,
        else :data:`IDLE_FRACTION_OF_TDP` of the TDP (:data:`IDLE_POWER_SOURCE`)."""
        return self.idle_watts if self.idle_watts is not None else (
            IDLE_FRACTION_OF_TDP * self.tdp_watts)

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


def _spec(*, document, like=None, whitepaper=None, sparse_halved=(), fp64_from_fp32=None,
          extra_sources=None, **fields):
    """A GPUSpec whose every field cites ``document`` unless ``extra_sources`` says otherwise.

    - ``like``: a GPUSpec whose figures this GPU shares, all but those in ``fields`` (the H200
      is the H100 SXM's chip with other memory); the shared figures cite ``document`` too,
      which states them again. SM count and L2 size are not shared: a whitepaper gives them
      per product.
    - ``whitepaper``: the source of ``sm_count`` and ``l2_bytes``. Without one they are None,
      cited as not published in ``document``.
    - The host link's per-direction rate follows from its name (:data:`_PCIE_BYTES_PER_S`), and
      a GPU without NVLink (``nvlink_bytes_per_s=None``) is cited as PCIe only.
    - ``fp64_from_fp32``: for a datasheet without an FP64 rate, N of its compute capability's
      1:N FP64:FP32 throughput ratio (:data:`_CUDA_THROUGHPUT_TABLE`): fp64 = fp32 / N, cited
      as derived.
    """
    if like is not None:
        shared = {name: getattr(like, name) for name in like.__dataclass_fields__
                  if name not in ("sources", "sm_count", "l2_bytes")}
        fields = {**shared, "peak_flops": dict(like.peak_flops), **fields}
    flops_notes = {}
    if fp64_from_fp32 is not None:
        fields["peak_flops"] = {"fp64": fields["peak_flops"]["fp32"] / fp64_from_fp32,
                                **fields["peak_flops"]}
        cc = ".".join(map(str, fields["compute_capability"]))
        flops_notes["fp64"] = (f"Not on the datasheet. Derived: fp32 rate / {fp64_from_fp32}, "
                               f"the FP64:FP32 throughput ratio of compute capability {cc} in "
                               f"the {_CUDA_THROUGHPUT_TABLE}.")
    fields.setdefault("host_link_bytes_per_s", _PCIE_BYTES_PER_S[fields["host_link"]])
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
    if whitepaper is None:
        if fields.get("sm_count") is not None or fields.get("l2_bytes") is not None:
            raise ValueError(f"{fields['key']}: sm_count and l2_bytes need the whitepaper "
                             "that gives them")
        sources["sm_count"] = f"{document}: SM count {_NOT_PUBLISHED}"
        sources["l2_bytes"] = f"{document}: L2 size not published"
    else:
        sources["sm_count"] = sources["l2_bytes"] = whitepaper
    if fields["nvlink_bytes_per_s"] is None:
        sources["nvlink_bytes_per_s"] = f"{document}: no NVLink (PCIe only)"
    sources.update(extra_sources or {})
    return GPUSpec(sources=sources, **fields)


# ---------------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------------

_HOPPER_SPARSE = ("tf32", "fp16", "bf16", "fp8", "int8")

H100_SXM = _spec(
    document=_H100_DATASHEET, whitepaper=_HOPPER_WHITEPAPER,
    sparse_halved=_HOPPER_SPARSE,
    key="H100-SXM", name="NVIDIA H100 SXM5 80GB",
    architecture="Hopper", compute_capability=(9, 0), tdp_watts=700,
    memory_bytes=80 * GB, memory_type="HBM3", memory_bandwidth_bytes_per_s=3.35 * TB,
    peak_flops={"fp64": 34 * TERA, "fp64_tensor": 67 * TERA, "fp32": 67 * TERA,
                "tf32": 494.5 * TERA, "fp16": 989.5 * TERA, "bf16": 989.5 * TERA,
                "fp8": 1979 * TERA, "int8": 1979 * TERA},
    host_link="PCIe 5.0 x16", nvlink_bytes_per_s=900 * GB,
    sm_count=132, l2_bytes=50 * 2**20,
    extra_sources={
        "nvlink_bytes_per_s": f"{_H100_DATASHEET}; 'NVLink: 900 GB/s' counts both directions "
                              "(18 fourth-generation links), 450 GB/s each way",
        "tdp_watts": f"{_H100_DATASHEET}; 'up to 700 W (configurable)'",
    },
)

H200 = _spec(  # the H100 SXM's chip, clocks and power with more, faster memory
    like=H100_SXM, document=_H200_PAGE,
    sparse_halved=_HOPPER_SPARSE,
    key="H200", name="NVIDIA H200 SXM 141GB",
    memory_bytes=141 * GB, memory_type="HBM3e", memory_bandwidth_bytes_per_s=4.8 * TB,
    extra_sources={
        "nvlink_bytes_per_s": f"{_H200_PAGE}; 'NVLink: 900 GB/s' counts both directions, "
                              "450 GB/s each way",
        "tdp_watts": f"{_H200_PAGE}; 'up to 700 W (configurable)' for H200 SXM",
    },
)

B200 = _spec(
    document=_B200_HGX,
    sparse_halved=("tf32", "fp16", "bf16", "fp8", "fp4", "int8"),
    key="B200", name="NVIDIA B200 SXM 180GB",
    architecture="Blackwell", compute_capability=(10, 0), tdp_watts=1000,
    memory_bytes=180 * GB, memory_type="HBM3e", memory_bandwidth_bytes_per_s=7.7 * TB,
    peak_flops={"fp64": 37 * TERA, "fp64_tensor": 37 * TERA, "fp32": 75 * TERA,
                "tf32": 1.1 * PETA, "fp16": 2.25 * PETA, "bf16": 2.25 * PETA,
                "fp8": 4.5 * PETA, "fp4": 9 * PETA, "int8": 4.5 * PETA},
    host_link="PCIe 5.0 x16", nvlink_bytes_per_s=1800 * GB,
    extra_sources={
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
    document=_A100_DATASHEET, whitepaper=_AMPERE_WHITEPAPER,
    sparse_halved=("tf32", "fp16", "bf16", "int8"),
    key="A100-SXM", name="NVIDIA A100 SXM4 80GB",
    architecture="Ampere", compute_capability=(8, 0), tdp_watts=400,
    memory_bytes=80 * GB, memory_type="HBM2e", memory_bandwidth_bytes_per_s=2.039 * TB,
    peak_flops={"fp64": 9.7 * TERA, "fp64_tensor": 19.5 * TERA, "fp32": 19.5 * TERA,
                "tf32": 156 * TERA, "fp16": 312 * TERA, "bf16": 312 * TERA,
                "int8": 624 * TERA},
    host_link="PCIe 4.0 x16", nvlink_bytes_per_s=600 * GB,
    sm_count=108, l2_bytes=40 * 2**20,
    extra_sources={
        "memory_bandwidth_bytes_per_s": f"{_A100_DATASHEET}: 2,039 GB/s (the 40 GB A100 has "
                                        "1,555 GB/s; the 80 GB PCIe card 1,935 GB/s)",
        "nvlink_bytes_per_s": f"{_A100_DATASHEET}; 'NVLink: 600 GB/s' counts both directions "
                              "(12 third-generation links), 300 GB/s each way",
    },
)

L4 = _spec(
    document=_L4_DATASHEET,
    sparse_halved=("tf32", "fp16", "bf16", "fp8", "int8"),
    key="L4", name="NVIDIA L4 24GB",
    architecture="Ada Lovelace", compute_capability=(8, 9), tdp_watts=72,
    memory_bytes=24 * GB, memory_type="GDDR6", memory_bandwidth_bytes_per_s=300 * GB,
    peak_flops={"fp32": 30.3 * TERA, "tf32": 60 * TERA, "fp16": 121 * TERA, "bf16": 121 * TERA,
                "fp8": 242.5 * TERA, "int8": 242.5 * TERA},
    fp64_from_fp32=64,
    host_link="PCIe 4.0 x16", nvlink_bytes_per_s=None,
)

T4 = _spec(
    document=_T4_DATASHEET, whitepaper=_TURING_WHITEPAPER,
    key="T4", name="NVIDIA T4 16GB",
    architecture="Turing", compute_capability=(7, 5), tdp_watts=70,
    memory_bytes=16 * GB, memory_type="GDDR6", memory_bandwidth_bytes_per_s=320 * GB,
    peak_flops={"fp32": 8.1 * TERA, "fp16": 65 * TERA, "int8": 130 * TERA}, fp64_from_fp32=32,
    host_link="PCIe 3.0 x16", nvlink_bytes_per_s=None,
    sm_count=40, l2_bytes=4 * 2**20,
    extra_sources={
        "memory_bandwidth_bytes_per_s": f"{_T4_DATASHEET}: '320+ GB/s'",
        "host_link_bytes_per_s": f"{_T4_DATASHEET}: 'x16 PCIe Gen3', 'interconnect bandwidth "
                                 "32 GB/s' counting both directions: 16 GB/s each way",
        "peak_flops.fp16": f"{_T4_DATASHEET}: 'Mixed Precision (FP16/FP32) 65 TFLOPS' on the "
                           "tensor cores. Dense (Turing has no sparsity support).",
        "peak_flops.int8": f"{_T4_DATASHEET}: 'INT8 130 TOPS'. Dense.",
    },
)

RTX_A6000 = _spec(
    document=_A6000_DATASHEET, whitepaper=_GA102_WHITEPAPER,
    key="RTX-A6000", name="NVIDIA RTX A6000 48GB",
    architecture="Ampere", compute_capability=(8, 6), tdp_watts=300,
    memory_bytes=48 * GB, memory_type="GDDR6", memory_bandwidth_bytes_per_s=768 * GB,
    peak_flops={"fp32": 38.7 * TERA, "fp16": 309.7 / 2 * TERA, "bf16": 309.7 / 2 * TERA},
    fp64_from_fp32=64,
    host_link="PCIe 4.0 x16", nvlink_bytes_per_s=112.5 * GB,
    sm_count=84, l2_bytes=6 * 2**20,
    extra_sources={
        "nvlink_bytes_per_s": f"{_A6000_DATASHEET}; 112.5 GB/s counts both directions, and "
                              "joins only two cards",
        "peak_flops.fp16": f"{_A6000_DATASHEET}: 'Tensor performance 309.7 TFLOPS' is with "
                           "sparsity; halved to the dense 154.85 TFLOPS (fp16/bf16 inputs on "
                           "the tensor cores).",
        "peak_flops.bf16": f"{_A6000_DATASHEET}: as fp16 (same tensor-core rate on GA102).",
    },
)

GPUS: dict[str, GPUSpec] = {gpu.key: gpu for gpu in (H100_SXM, H200, B200, A100_SXM, L4, T4,
                                                     RTX_A6000)}

COURSE_GPU: str = H100_SXM.key
"""The key in :data:`GPUS` of the GPU the course models where a learner names none: the H100 SXM,
the data-centre GPU most published training measurements use. A default everywhere, never a fact
about a measurement (those name their GPU's spec, e.g. ``H100_SXM.key``)."""

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
class LaunchFill:
    """How much of the GPU a launch of ``blocks`` blocks keeps busy: waves and the last one.

    An SM holds ``blocks_per_sm`` blocks at once (the occupancy rules,
    :func:`theoretical_occupancy`: threads, registers, shared memory), so the GPU runs the
    grid in **waves** of ``blocks_per_sm × sm_count`` blocks. The model gives each resident
    block 1/``blocks_per_sm`` of its SM, so a launch of fewer blocks than slots, or a last
    partial wave, leaves SM time unused: ``fill`` = blocks / (waves × slots) is the share of
    the GPU's throughput the launch gets. (Pessimistic for a lone block with instruction-level
    parallelism of its own; right for memory-bound kernels, which need many warps in flight.)
    """

    blocks: int
    threads_per_block: int
    blocks_per_sm: int
    sm_count: int
    limited_by: str

    @property
    def slots(self) -> int:
        return self.blocks_per_sm * self.sm_count

    @property
    def waves(self) -> int:
        return max(1, math.ceil(self.blocks / self.slots))

    @property
    def fill(self) -> float:
        return self.blocks / (self.waves * self.slots)

    def __str__(self) -> str:
        return (f"{self.blocks:,} block{'s' if self.blocks != 1 else ''} of "
                f"{self.threads_per_block} threads, {self.blocks_per_sm} per SM (limited by "
                f"{self.limited_by}) on {self.sm_count} SMs: {self.waves} wave"
                f"{'s' if self.waves != 1 else ''}, {self.fill:.0%} of the GPU busy")


def launch_fill(gpu: GPUSpec | str, blocks: int, threads_per_block: int,
                registers_per_thread: int = 0, shared_bytes_per_block: int = 0
                ) -> LaunchFill | None:
    """The :class:`LaunchFill` of ``blocks`` blocks of ``threads_per_block`` threads on
    ``gpu``, each thread using ``registers_per_thread`` registers (0: unknown, the threads and
    blocks limits only) and each block ``shared_bytes_per_block``; None where the GPU's SM
    count or its architecture's limits are not in this table."""
    gpu = get_gpu(gpu)
    for what, value in (("blocks", blocks), ("threads_per_block", threads_per_block)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{what} must be a whole number >= 1, not {value!r}")
    cc = tuple(gpu.compute_capability)
    if gpu.sm_count is None or cc not in SM_LIMITS:
        return None
    occupancy = theoretical_occupancy(cc, threads_per_block, int(registers_per_thread),
                                      int(shared_bytes_per_block))
    if occupancy.blocks_per_sm < 1:
        raise ValueError(f"a block of {threads_per_block} threads with {registers_per_thread} "
                         f"registers each and {shared_bytes_per_block} B of shared memory does "
                         f"not fit on an SM of the {gpu.name} ({occupancy.limited_by})")
    return LaunchFill(blocks, threads_per_block, occupancy.blocks_per_sm, gpu.sm_count,
                      occupancy.limited_by)


# The bands the model promises, as measured / predicted, per kind of work; `gpulab
# model-check` measures where the published points fall, and a test holds them inside.
MODEL_BANDS = {
    "memory-bound": (0.7, 1.3),
    "copy": (0.7, 1.3),
    "collective": (0.7, 1.3),
    "launch-bound": (0.7, 1.3),
    "compute-bound": (0.5, 2.0),
    "power": (0.7, 1.3),
    "cache-decided": (0.7, 1.3),  # of the range's ends: inside [with reuse, without]
}
KIND_OF_BOUND = {"memory": "memory-bound", "compute": "compute-bound",
                 "shared memory": "compute-bound", "latency": "launch-bound",
                 "launch": "launch-bound", "transfer": "copy"}


def band_text(kind: str) -> str:
    """The promised band of ``kind`` in words: '±30 %' or 'within 2×'."""
    low, high = MODEL_BANDS[kind]
    if kind == "cache-decided":
        return "between its with- and without-reuse ends (±30 %)"
    if math.isclose(low + high, 2.0) and high <= 1.5:
        return f"±{(high - 1) * 100:.0f} %"
    return f"within {high:g}×"


def estimates_label(estimates) -> str:
    """Where a series of :class:`RooflineEstimate` of one GPU came from: the model, with its
    promised band for each kind of work among them (a launch-bound small n, a memory-bound
    large n), and the machine the launch and copy constants were measured on, if any."""
    first = estimates[0]
    by_band: dict[str, list[str]] = {}
    for kind in dict.fromkeys(e.kind for e in estimates):
        by_band.setdefault(band_text(kind), []).append(kind)
    bands = "; ".join(f"for {' and '.join(kinds)} work: {band}"
                      for band, kinds in by_band.items())
    text = (f"estimated by gpulab's GPU model of the {first.gpu.name} (its promised band "
            f"{bands}; gpulab model-check)")
    if first.measured_on:
        text += f"; launch cost and host copy rates measured on {first.measured_on}"
    return text


@dataclass(frozen=True)
class RooflineEstimate:
    """How long work takes on ``gpu`` by gpulab's GPU model, and why. Times in seconds.

    The GPU time of the kernels is the largest of: FLOPs / (peak × fill × FMA share),
    shared-memory bytes / (shared bandwidth × fill), device-memory bytes / (bandwidth × fill),
    and ``launches`` × :data:`KERNEL_MIN_S` (no kernel is shorter). ``fill`` is the share of
    the GPU the launch can keep busy (:class:`LaunchFill`; 1 when the launch was not given).
    The host issues each launch in ``host_launch_s`` (:data:`HOST_LAUNCH_S`), asynchronously:
    :func:`stream_timeline` overlaps the host's issuing with the GPU's work, so ``kernel_s``,
    from the first issue to the end of the last kernel, is about the larger of the two, not
    their sum. ``bytes_with_reuse`` (when given) is the device-memory traffic if the caches
    catch all the reuse; the estimate is then a range (:attr:`time_range_s`), ``time_s``
    being its no-reuse end.
    """

    gpu: GPUSpec
    flops: float
    bytes_moved: float
    precision: str
    compute_s: float
    memory_s: float
    launch_s: float  # the host's issue time of all the launches
    transfer_s: float
    launches: int = 1
    transfer_bytes: float = 0.0
    link: str = "pageable"
    launch_overhead_s: float = LAUNCH_OVERHEAD_S  # host issue cost of one launch
    link_rate_bytes_per_s: float | None = None
    measured_on: str | None = None
    shared_s: float = 0.0
    floor_s: float = 0.0  # launches x KERNEL_MIN_S
    fill: LaunchFill | None = None
    memory_s_with_reuse: float | None = None
    host_api: str = "numba"
    fma_share: float = 1.0

    @property
    def gpu_s(self) -> float:
        """The GPU's busy time for the kernels (no host issue, no transfer)."""
        return max(self.compute_s, self.shared_s, self.memory_s, self.floor_s)

    @property
    def gpu_s_with_reuse(self) -> float:
        memory = self.memory_s if self.memory_s_with_reuse is None else self.memory_s_with_reuse
        return max(self.compute_s, self.shared_s, memory, self.floor_s)

    def _stream_s(self, gpu_s: float) -> float:
        if self.launches == 0:
            return gpu_s
        each_gpu, each_host = gpu_s / self.launches, self.launch_overhead_s
        return each_host + each_gpu + (self.launches - 1) * max(each_host, each_gpu)

    @property
    def kernel_s(self) -> float:
        """From the first launch's issue to the last kernel's end, on one stream: the host
        issues ahead while the GPU runs (:func:`stream_timeline`)."""
        return self._stream_s(self.gpu_s)

    @property
    def time_s(self) -> float:
        """Kernel time plus the transfer time (0 when no transfer was asked for); for a
        range (``bytes_with_reuse``), its no-reuse end."""
        return self.kernel_s + self.transfer_s

    @property
    def time_range_s(self) -> tuple[float, float]:
        """(caches catch all reuse, no reuse): equal unless ``bytes_with_reuse`` was given."""
        return self._stream_s(self.gpu_s_with_reuse) + self.transfer_s, self.time_s

    @property
    def is_range(self) -> bool:
        low, high = self.time_range_s
        return high > low * 1.0001

    @property
    def bound(self) -> str:
        """What limits the estimate: ``"memory"``, ``"compute"``, ``"shared memory"``,
        ``"latency"`` (the minimum kernel time), ``"launch"`` (the host's issuing), or
        ``"transfer"`` when moving the data over the link takes longest."""
        parts = {"memory": self.memory_s, "compute": self.compute_s,
                 "shared memory": self.shared_s, "latency": self.floor_s,
                 "launch": self.launch_s, "transfer": self.transfer_s}
        return max(parts, key=parts.get)  # ties: first listed (memory before compute)

    @property
    def kind(self) -> str:
        """The kind of work for the model's error bands (:data:`MODEL_BANDS`)."""
        return "cache-decided" if self.is_range else KIND_OF_BOUND[self.bound]

    @property
    def arithmetic_intensity(self) -> float:
        """FLOPs per byte of device-memory traffic (inf when no bytes move)."""
        if self.bytes_moved == 0:
            return math.inf if self.flops > 0 else 0.0
        return self.flops / self.bytes_moved

    @property
    def label(self) -> str:
        return estimates_label([self])

    def __str__(self) -> str:
        fill = (f" × {self.fill.fill:.0%} of the GPU busy" if self.fill else "")
        share = f" × {self.fma_share:.0%} FMA issue share" if self.fma_share < 1 else ""
        if self.is_range:
            low, high = self.time_range_s
            head = f"{format_seconds(low)} to {format_seconds(high)}"
        else:
            head = format_seconds(self.time_s)
        lines = [
            f"{head} {self.label} ({self.bound}-bound, {self.precision})",
            f"  compute  {format_seconds(self.compute_s):>10}  {self.flops:.3g} FLOP at "
            f"{_as_printed(self.gpu.peak_flops_for(self.precision), self.precision)}{fill}"
            f"{share}",
            f"  memory   {format_seconds(self.memory_s):>10}  {self.bytes_moved:.3g} B at "
            f"{_as_rate(self.gpu.memory_bandwidth_bytes_per_s)}{fill}",
        ]
        if self.memory_s_with_reuse is not None:
            lines.append(f"  reused   {format_seconds(self.memory_s_with_reuse):>10}  memory "
                         "time if the caches catch all the reuse")
        if self.shared_s:
            lines.append(f"  shared   {format_seconds(self.shared_s):>10}  shared-memory/L1 "
                         "loads at 128 B per clock per SM")
        if self.fill:
            lines.append(f"  waves    {self.fill}")
        lines += [
            f"  floor    {format_seconds(self.floor_s):>10}  {self.launches} x "
            f"{KERNEL_MIN_S * 1e6:.3g} µs minimum per kernel",
            f"  host     {format_seconds(self.launch_s):>10}  {self.launches} x "
            f"{self.launch_overhead_s * 1e6:.3g} µs to issue a launch through "
            f"{HOST_LAUNCH_NAMES.get(self.host_api, self.host_api)}, overlapping the GPU",
        ]
        if self.transfer_bytes:
            rate = self.link_rate_bytes_per_s or link_bytes_per_s(self.gpu, self.link)
            where = ("NVLink" if self.link == "nvlink"
                     else f"{self.gpu.host_link} from {self.link} host memory")
            lines.append(f"  transfer {format_seconds(self.transfer_s):>10}  "
                         f"{self.transfer_bytes:.3g} B over {where} at {_as_rate(rate)}")
        return "\n".join(lines)


@dataclass(frozen=True)
class StreamEvent:
    """One kernel on a stream: when the host issued it, and when the GPU ran it (seconds)."""

    index: int
    issued_s: float  # the host finished issuing it
    start_s: float
    end_s: float

    @property
    def gpu_s(self) -> float:
        return self.end_s - self.start_s


def stream_timeline(gpu_times_s, host_issue_s: float | list[float]) -> list[StreamEvent]:
    """Kernels launched back to back on one stream: the host spends ``host_issue_s`` issuing
    each (one figure for all, or one per kernel) and goes straight on to the next (launches
    are asynchronous); the GPU starts a kernel when the host has issued it and the previous
    kernel has finished. ``gpu_times_s`` is each kernel's GPU time. Idle GPU time (a gap)
    appears only where the host falls behind: kernels shorter than the issue cost."""
    gpu_times = [_check_amount("gpu time", t) for t in gpu_times_s]
    issues = (list(host_issue_s) if isinstance(host_issue_s, (list, tuple))
              else [host_issue_s] * len(gpu_times))
    if len(issues) != len(gpu_times):
        raise ValueError(f"{len(issues)} host issue times for {len(gpu_times)} kernels")
    events, host_s, gpu_free_s = [], 0.0, 0.0
    for index, (gpu_s, issue_s) in enumerate(zip(gpu_times, issues, strict=True)):
        host_s += _check_amount("host issue time", issue_s)
        start = max(host_s, gpu_free_s)
        gpu_free_s = start + gpu_s
        events.append(StreamEvent(index, host_s, start, gpu_free_s))
    return events


def power_watts(gpu: GPUSpec | str, utilisation: float) -> float:
    """Board power of ``gpu`` busy for ``utilisation`` (0..1) of the time: idle +
    utilisation × (TDP − idle) (:data:`POWER_MODEL_SOURCE`)."""
    gpu = get_gpu(gpu)
    utilisation = _check_amount("utilisation", utilisation)
    if utilisation > 1:
        raise ValueError(f"utilisation is a share of the time, 0..1, not {utilisation:g}")
    idle = gpu.idle_power_watts
    return idle + utilisation * (gpu.tdp_watts - idle)


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
                  measured_on: str | None = None, *, blocks: int | None = None,
                  threads_per_block: int | None = None, registers_per_thread: int = 0,
                  shared_bytes_per_block: int = 0, shared_load_bytes: float = 0.0,
                  fma_share: float = 1.0, bytes_with_reuse: float | None = None,
                  host_api: str = "numba") -> RooflineEstimate:
    """gpulab's GPU model of work doing ``flops`` operations and moving ``bytes_moved`` bytes
    to and from device memory, in ``precision``, in ``launches`` kernel launches (the FLOPs
    and bytes are their total). See :class:`RooflineEstimate` for the terms.

    - ``blocks`` and ``threads_per_block`` (with ``registers_per_thread`` from ptxas and
      ``shared_bytes_per_block``, when known) give the waves: the share of the GPU the launch
      fills (:func:`launch_fill`). Without them the launch is assumed to fill the GPU.
    - ``shared_load_bytes``: bytes the threads load from shared memory (or L1 hits), at
      128 B per clock per SM; ``fma_share``: the share of the inner loop's instructions that
      are FMAs (each instruction takes an issue slot; 1 for a library kernel).
    - ``bytes_with_reuse``: the device-memory traffic if L1/L2 catch all the reuse that
      ``bytes_moved`` counts again: the estimate is then a range.
    - ``host_api``: how the host launches ("numba", "cuda_cpp", "cuda_graph";
      :data:`HOST_LAUNCH_S`); ``launch_overhead_s`` replaces its cost with a measured one.
    - ``transfer_bytes`` > 0 adds copying that many bytes over ``link`` ("pageable": PCIe
      from ordinary host memory, the default, as NumPy arrays are; "pinned": page-locked;
      "nvlink": one direction of the GPU's NVLink). Count both ways yourself.
      ``link_rate_bytes_per_s`` replaces the link's model rate with a measured one;
      ``measured_on`` says where the measured constants come from.
    """
    gpu = get_gpu(gpu)
    flops = _check_amount("flops", flops)
    bytes_moved = _check_amount("bytes_moved", bytes_moved)
    transfer_bytes = _check_amount("transfer_bytes", transfer_bytes)
    shared_load_bytes = _check_amount("shared_load_bytes", shared_load_bytes)
    if isinstance(launches, bool) or not isinstance(launches, int) or launches < 0:
        raise ValueError(f"launches must be a whole number >= 0, not {launches!r}")
    if host_api not in HOST_LAUNCH_S:
        raise ValueError(f"host_api must be one of {', '.join(HOST_APIS)}, not {host_api!r}")
    fma_share = _check_amount("fma_share", fma_share)
    if not 0 < fma_share <= 1:
        raise ValueError(f"fma_share is a share of the instructions, in (0, 1], not {fma_share}")
    overhead = (HOST_LAUNCH_S[host_api] if launch_overhead_s is None
                else _check_amount("launch_overhead_s", launch_overhead_s))
    precision = str(precision).strip().lower()
    peak = gpu.peak_flops_for(precision)
    link_rate = link_bytes_per_s(gpu, link)
    if link_rate_bytes_per_s is not None:
        link_rate = _check_amount("link_rate_bytes_per_s", link_rate_bytes_per_s)
        if link_rate == 0:
            raise ValueError("link_rate_bytes_per_s must be positive")
    fill = None
    if blocks is not None or threads_per_block is not None:
        if blocks is None or threads_per_block is None:
            raise ValueError("give blocks and threads_per_block together (or neither)")
        fill = launch_fill(gpu, blocks, threads_per_block, registers_per_thread,
                           shared_bytes_per_block)
    busy = fill.fill if fill else 1.0
    with_reuse = None
    if bytes_with_reuse is not None:
        reused = _check_amount("bytes_with_reuse", bytes_with_reuse)
        if reused > bytes_moved:
            raise ValueError(f"bytes_with_reuse ({reused:g}) cannot exceed bytes_moved "
                             f"({bytes_moved:g}): it is the traffic when caches help")
        with_reuse = reused / (gpu.memory_bandwidth_bytes_per_s * busy)
    shared_rate = gpu.shared_bytes_per_s
    if shared_load_bytes and shared_rate is None:
        raise ValueError(f"no shared-memory bandwidth for the {gpu.name}'s architecture")
    return RooflineEstimate(
        gpu=gpu,
        flops=flops,
        bytes_moved=bytes_moved,
        precision=precision,
        compute_s=flops / (peak * busy * fma_share),
        memory_s=bytes_moved / (gpu.memory_bandwidth_bytes_per_s * busy),
        launch_s=launches * overhead,
        transfer_s=transfer_bytes / link_rate,
        launches=launches,
        transfer_bytes=transfer_bytes,
        link=link,
        launch_overhead_s=overhead,
        link_rate_bytes_per_s=link_rate_bytes_per_s,
        measured_on=measured_on,
        shared_s=shared_load_bytes / (shared_rate * busy) if shared_load_bytes else 0.0,
        floor_s=max(launches, 1) * KERNEL_MIN_S,
        fill=fill,
        memory_s_with_reuse=with_reuse,
        host_api=host_api,
        fma_share=fma_share,
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
    "FP32_LANES_PER_SM",
    "FP32_LANES_SOURCE",
    "GPUS",
    "GPUSpec",
    "HOST_APIS",
    "HOST_LAUNCH_NAMES",
    "HOST_LAUNCH_S",
    "HOST_LAUNCH_SOURCES",
    "IDLE_FRACTION_OF_TDP",
    "IDLE_POWER_SOURCE",
    "KERNEL_MIN_S",
    "KIND_OF_BOUND",
    "LAUNCH_OVERHEAD_S",
    "LAUNCH_OVERHEAD_SOURCE",
    "LINKS",
    "LaunchFill",
    "MODEL_BANDS",
    "NCCL_EFFICIENCY_SOURCE",
    "NCCL_NVLINK_EFFICIENCY",
    "NUMBA_LAUNCH_BASE_S",
    "NUMBA_LAUNCH_PER_ARRAY_S",
    "NUMBA_TYPICAL_ARRAYS",
    "NVLS_BYTES_SOURCE",
    "Occupancy",
    "PAGEABLE_COPY_BYTES_PER_S",
    "PAGEABLE_COPY_SOURCE",
    "PINNED_COPY_SOURCE",
    "PINNED_LINK_FRACTION",
    "POWER_MODEL_SOURCE",
    "PRECISIONS",
    "RooflineEstimate",
    "SHARED_BANDWIDTH_SOURCE",
    "SHARED_BYTES_PER_CLOCK_PER_SM",
    "SMLimits",
    "SM_LIMITS",
    "SPECS_SOURCE",
    "StreamEvent",
    "band_text",
    "cpu_description",
    "estimate_time",
    "format_rate",
    "format_seconds",
    "get_gpu",
    "launch_fill",
    "link_bytes_per_s",
    "match_device",
    "power_watts",
    "ridge_point",
    "stream_timeline",
    "theoretical_occupancy",
]
