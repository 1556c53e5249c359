"""Does training get N times faster on N GPUs? A model of one data-parallel training step on
named systems: compute time from gpulab's GPU model (:mod:`gpulab.hardware`,
:mod:`gpulab.nn.cost`), communication from the α–β model of the links
(:mod:`gpulab.parallel.links`).

One data-parallel step on N GPUs = each GPU's forward and backward pass on its share of the
batch, then an all-reduce of the gradients, then the update. The all-reduce either waits for
the whole backward pass (**no overlap**) or runs while the backward pass is still producing
later layers' gradients (**overlap**, as PyTorch DDP and every large-scale trainer do: the
gradients of the last layers are ready first). With overlap, the step waits for the part of the
all-reduce longer than the backward pass, and at least for the all-reduce of the last
"bucket" of gradients, which can only start when the backward pass ends (PyTorch DDP packs
gradients into buckets of 25 MB by default, ``bucket_cap_mb``: https://pytorch.org/docs/stable/
generated/torch.nn.parallel.DistributedDataParallel.html).

Two ways to use more GPUs:

- **strong scaling**: the same global batch, split N ways (what the digits run of chapter 11
  does): each GPU's share of the work shrinks, the all-reduce does not;
- **weak scaling**: each GPU keeps its own batch, the global batch grows with N (how large
  models are trained): the work per GPU stays, the all-reduce grows slowly with N.

Speed-up is samples (or tokens) per second on N GPUs over one GPU's; efficiency is speed-up / N.

Beyond one server (or one NVL72 rack) the all-reduce is **hierarchical**: a reduce-scatter
inside each server over NVLink, an all-reduce of each GPU's 1/g share across the servers over
the network (every GPU with its own network port), an all-gather inside the server again.
Everything here is a model, and an optimistic one for the step's time (peak FLOP rates, links at
full speed), though not for its efficiency: compute below peak *raises* that (the same
all-reduce is a smaller share of a longer step), links below line rate lower it. Every result
says it is an estimate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpulab import hardware
from gpulab.nn import cost
from gpulab.parallel.links import Link, get_link, look_up

BUCKET_BYTES = 25 * 2**20  # PyTorch DDP's default bucket_cap_mb = 25
GPU_COUNTS = (1, 2, 4, 8, 16, 32, 72, 144, 288, 576, 1152, 2304, 4608, 9216)


@dataclass(frozen=True)
class System:
    """GPUs of one kind, ``domain_size`` of them joined by ``domain_link`` (a server or a rack),
    domains joined by ``scale_out`` with one port per GPU."""

    key: str
    name: str
    gpu: str
    domain_size: int
    domain_link: str
    scale_out: str
    note: str = ""

    @property
    def spec(self) -> hardware.GPUSpec:
        return hardware.get_gpu(self.gpu)

    @property
    def inside(self) -> Link:
        return get_link(self.domain_link)

    @property
    def between(self) -> Link:
        return get_link(self.scale_out)

    def allreduce_time(self, n_bytes: float, n_gpus: int) -> float:
        """All-reduce of ``n_bytes`` over ``n_gpus``: a ring inside one domain; beyond it the
        hierarchical scheme (ring inside, ring of 1/g shares across the domains)."""
        n = int(n_gpus)
        if n <= self.domain_size:
            return self.inside.allreduce_time(n_bytes, n)
        g = self.domain_size
        domains = math.ceil(n / g)
        return (self.inside.allreduce_time(n_bytes, g)
                + self.between.allreduce_time(n_bytes / g, domains))


SYSTEMS: dict[str, System] = {system.key: system for system in (
    System("pcie-box", "a PCIe box: 8 × L4, PCIe 4.0, no NVLink", "L4", 8, "pcie4", "ib-ndr",
           "GPUs talk through the host's PCIe (assumed: full x16 bandwidth each); boxes "
           "joined by InfiniBand NDR, one 400 Gb/s port per GPU, assumed"),
    System("hgx-h100", "an 8-GPU NVLink server: 8 × H100 SXM, NVLink 4 through NVSwitch",
           hardware.H100_SXM.key, 8, "nvlink4", "ib-ndr",
           "as HGX/DGX H100; servers joined by InfiniBand NDR, one 400 Gb/s port per GPU "
           "(as DGX H100)"),
    System("gb200-nvl72", "GB200 NVL72: 72 Blackwell GPUs and 36 Grace CPUs, one NVLink domain",
           "B200", 72, "nvl72", "ib-ndr",
           "compute from the HGX B200 datasheet (NVL72's B200 runs at up to 1,200 W and is a "
           "little faster); racks joined by InfiniBand NDR, one 400 Gb/s port per GPU, assumed"),
)}


def get_system(key: str | System) -> System:
    """The system called ``key`` (a key of :data:`SYSTEMS`)."""
    return look_up(SYSTEMS, key, "system")


@dataclass(frozen=True)
class Workload:
    """What one GPU trains per step: a model of ``parameters`` parameters and its batch."""

    key: str
    name: str
    parameters: float
    per_gpu: int  # samples (MLP, strong scaling: the global batch) or tokens per GPU (weak)
    scaling: str  # "strong" or "weak"
    gradient_bytes: int  # per parameter
    note: str = ""

    def compute(self, gpu: hardware.GPUSpec, n_gpus: int) -> tuple[float, float]:
        """(seconds of one GPU's forward + backward + update, seconds of its backward pass)."""
        if self.key == "digits":
            share = math.ceil(self.per_gpu / n_gpus)
            step = cost.estimate_step(list(DIGITS_WIDTHS), share, gpu)
            return step.time_s, step.by_phase().get("backward", 0.0)
        flops = 6 * self.parameters * self.per_gpu
        # 16-bit weights read in the forward and the backward pass, gradients written
        estimate = hardware.estimate_time(gpu, flops, 6 * self.parameters, "bf16", launches=0)
        return estimate.time_s, estimate.time_s * 2 / 3


DIGITS_WIDTHS = (64, 128, 10)

WORKLOADS: dict[str, Workload] = {w.key: w for w in (
    Workload("digits", "the digits MLP (9,610 parameters), global batch 256", 9_610, 256,
             "strong", 4, "fp32 gradients; compute = gpulab.nn.cost's roofline of every kernel "
             "and launch of a step on the GPU's share of the batch"),
    Workload("124m", "a 124M-parameter transformer (GPT-2 small size)", 124e6, 8192, "weak", 2,
             "8,192 tokens per GPU per step; 6 FLOPs per parameter per token (forward 2, "
             "backward 4; Kaplan et al. 2020) at the bf16 peak; bf16 gradients"),
    Workload("1.3b", "a 1.3B-parameter transformer", 1.3e9, 8192, "weak", 2,
             "as above"),
    Workload("8b", "an 8B-parameter transformer (Llama 3 8B size)", 8.0e9, 8192, "weak", 2,
             "as above; 16 bytes per parameter for mixed-precision Adam is 128 GB: plain data "
             "parallelism does not fit it on an 80 GB GPU without ZeRO (chapter 09)"),
)}


def get_workload(key: str | Workload) -> Workload:
    """The workload called ``key`` (a key of :data:`WORKLOADS`)."""
    return look_up(WORKLOADS, key, "workload")


@dataclass(frozen=True)
class DataParallelStep:
    """One modelled data-parallel step (all times in seconds, estimated; links at their line
    rate, which NCCL does not reach, :mod:`gpulab.parallel.links`)."""

    workload: Workload
    system: System
    n_gpus: int
    overlap: bool
    compute_s: float
    backward_s: float
    communicate_s: float
    single_gpu_s: float

    last_bucket_s: float = 0.0

    @property
    def exposed_communication_s(self) -> float:
        """The part of the all-reduce the step waits for: all of it without overlap; with
        overlap, what the backward pass cannot hide, and at least the last bucket's."""
        if not self.overlap:
            return self.communicate_s
        return max(self.communicate_s - self.backward_s, self.last_bucket_s)

    @property
    def time_s(self) -> float:
        return self.compute_s + self.exposed_communication_s

    @property
    def speedup(self) -> float:
        """Throughput on N GPUs over throughput on one."""
        if self.workload.scaling == "strong":
            return self.single_gpu_s / self.time_s
        return self.n_gpus * self.single_gpu_s / self.time_s

    @property
    def efficiency(self) -> float:
        return self.speedup / self.n_gpus

    @property
    def label(self) -> str:
        return (f"estimated by gpulab's GPU model of the {self.system.spec.name} and the α–β "
                f"model of {self.system.inside.name}"
                + (f" and {self.system.between.name}" if self.n_gpus > self.system.domain_size
                   else "") + " at line rate")


def data_parallel_step(workload, system, n_gpus: int, overlap: bool = False) -> DataParallelStep:
    """The modelled step of ``workload`` on ``n_gpus`` of ``system``."""
    workload, system = get_workload(workload), get_system(system)
    n = int(n_gpus)
    if n < 1:
        raise ValueError(f"n_gpus must be >= 1, not {n_gpus!r}")
    gpu = system.spec
    compute, backward = workload.compute(gpu, n)
    single, _ = workload.compute(gpu, 1)
    gradient_bytes = workload.parameters * workload.gradient_bytes
    communicate = system.allreduce_time(gradient_bytes, n)
    last_bucket = system.allreduce_time(min(gradient_bytes, BUCKET_BYTES), n)
    return DataParallelStep(workload, system, n, overlap, compute, backward, communicate, single,
                            last_bucket)


def scaling_curve(workload, system, counts=GPU_COUNTS,
                  overlap: bool = False) -> list[DataParallelStep]:
    return [data_parallel_step(workload, system, n, overlap) for n in counts]


__all__ = ["BUCKET_BYTES", "DIGITS_WIDTHS", "GPU_COUNTS", "SYSTEMS", "WORKLOADS",
           "DataParallelStep", "System", "Workload", "data_parallel_step", "get_system",
           "get_workload", "scaling_curve"]
