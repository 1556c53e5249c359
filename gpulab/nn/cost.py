"""What one training step costs: its kernels' FLOPs and bytes, and how long a named GPU would
take by gpulab's GPU model. The memory a step needs is :mod:`gpulab.nn.memory`'s (one
calculator for chapters 08, 09 and the trainer).

The kernel list is the one :class:`~gpulab.nn.backends.KernelBackend` launches for an
:class:`~gpulab.nn.mlp.MLP` (forward, loss, backward, optimiser), counted from the kernels'
docstrings:

- a matmul (M x K) @ (K x N): 2 M N K FLOPs and its compulsory traffic, A and B read once and
  C written once (:func:`gpulab.kernels.matmul.minimum_bytes`): a lower bound, as if caches
  were perfect;
- elementwise kernels and reductions: the values they read and write, once each;
- each kernel at least :data:`gpulab.hardware.KERNEL_MIN_S` on the GPU, and each launch
  :data:`gpulab.hardware.LAUNCH_OVERHEAD_S` of the host's time (Numba's issue cost);
- per step, the batch copied to the GPU (inputs and labels) and the losses and probabilities
  copied back (the trainer reads them for its loss and accuracy), over the host link.

:func:`estimate_step` puts the step's kernels on one stream (:func:`gpulab.hardware.
stream_timeline`): each kernel's GPU time is the largest of FLOPs / peak, bytes / bandwidth and
the minimum kernel time; the host issues the launches one after another, asynchronously, and
the GPU starts each kernel when the host has issued it and the previous one has finished. So
a step takes about the larger of the host's issuing and the GPU's work, not their sum: small
batches are **launch-bound** (the GPU waits for the host), large ones are bound by the
kernels' work. The batch's copies come before the kernels. It is an **estimate** from gpulab's
GPU model of a named GPU (compulsory traffic, the launch assumed to fill the GPU), labelled so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gpulab import hardware
from gpulab.kernels.dense import FLOPS_PER_ELEMENT
from gpulab.kernels.matmul import minimum_bytes
from gpulab.kernels.optim import ADAM_FLOPS, ADAM_VALUES_MOVED, SGD_FLOPS, SGD_VALUES_MOVED
from gpulab.nn.memory import LABEL_BYTES, mlp_parameters

OPTIMISER_STATE_TENSORS = {"sgd": 1, "adam": 2}  # the optimisers the kernel backend launches
PRECISION_OF_ITEMSIZE = {4: "fp32", 8: "fp64"}


@dataclass(frozen=True)
class KernelCost:
    """One kernel launch of a training step."""

    kernel: str
    phase: str  # "forward", "loss", "backward", "update"
    flops: float
    bytes_moved: float
    shape: str = ""


def _check_widths(widths) -> list[int]:
    widths = [int(w) for w in widths]
    if len(widths) < 2 or min(widths) < 1:
        raise ValueError(f"widths must list at least two positive sizes, not {widths}")
    return widths


def _check_batch(batch_size) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
            or batch_size < 1:
        raise ValueError(f"batch_size must be a positive whole number, not {batch_size!r}")
    return int(batch_size)


def n_parameters(widths) -> int:
    """Weights and biases of an MLP with these widths (:func:`gpulab.nn.memory.mlp_parameters`,
    the memory calculator's count)."""
    return mlp_parameters(_check_widths(widths))


def parameter_sizes(widths) -> list[int]:
    """Elements of every parameter tensor, W then b, layer by layer (one optimiser launch
    each)."""
    widths = _check_widths(widths)
    sizes = []
    for a, b in zip(widths[:-1], widths[1:], strict=True):
        sizes += [a * b, b]
    return sizes


def step_kernels(widths, batch_size: int, activation: str = "relu", optimiser: str = "adam",
                 itemsize: int = 4, include_update: bool = True) -> list[KernelCost]:
    """Every kernel one training step launches, with its FLOPs and bytes."""
    widths, B, s = _check_widths(widths), _check_batch(batch_size), itemsize
    if optimiser not in OPTIMISER_STATE_TENSORS:
        raise ValueError(f"optimiser must be one of {', '.join(OPTIMISER_STATE_TENSORS)}")
    layers = list(zip(widths[:-1], widths[1:], strict=True))
    last = len(layers) - 1
    kernels: list[KernelCost] = []
    for k, (n_in, n_out) in enumerate(layers):
        act = activation if k < last else "identity"
        kernels.append(KernelCost("matmul", "forward", 2 * B * n_in * n_out,
                                  minimum_bytes(B, n_out, n_in, s), f"{B}x{n_in} @ {n_in}x{n_out}"))
        kernels.append(KernelCost("bias_activation", "forward",
                                  B * n_out * (1 + FLOPS_PER_ELEMENT[act]),
                                  s * (2 * B * n_out + n_out), f"{B}x{n_out} {act}"))
    C = widths[-1]
    kernels.append(KernelCost("softmax_cross_entropy", "loss", 5 * B * C,
                              s * (2 * B * C + B) + LABEL_BYTES * B, f"{B}x{C}"))
    kernels.append(KernelCost("softmax_cross_entropy_backward", "loss", 2 * B * C,
                              s * 2 * B * C + LABEL_BYTES * B, f"{B}x{C}"))
    for k in range(last, -1, -1):
        n_in, n_out = layers[k]
        act = activation if k < last else "identity"
        if act != "identity":
            kernels.append(KernelCost("bias_activation_backward", "backward",
                                      B * n_out * (3 + FLOPS_PER_ELEMENT[act]),
                                      s * (3 * B * n_out + n_out), f"{B}x{n_out} {act}"))
        kernels.append(KernelCost("transpose", "backward", 0, s * 2 * B * n_in,
                                  f"X^T: {n_in}x{B}"))
        kernels.append(KernelCost("matmul", "backward", 2 * n_in * B * n_out,
                                  minimum_bytes(n_in, n_out, B, s),
                                  f"dW: {n_in}x{B} @ {B}x{n_out}"))
        kernels.append(KernelCost("bias_grad", "backward", B * n_out,
                                  s * (B * n_out + n_out), f"db: {n_out}"))
        if k > 0:
            kernels.append(KernelCost("transpose", "backward", 0, s * 2 * n_in * n_out,
                                      f"W^T: {n_out}x{n_in}"))
            kernels.append(KernelCost("matmul", "backward", 2 * B * n_out * n_in,
                                      minimum_bytes(B, n_in, n_out, s),
                                      f"dX: {B}x{n_out} @ {n_out}x{n_in}"))
    if include_update:
        flops, values = ((ADAM_FLOPS, ADAM_VALUES_MOVED) if optimiser == "adam"
                         else (SGD_FLOPS, SGD_VALUES_MOVED))
        for size in parameter_sizes(widths):
            kernels.append(KernelCost(f"{optimiser}_update", "update", flops * size,
                                      s * values * size, f"{size} parameters"))
    return kernels


def step_transfer_bytes(widths, batch_size: int, itemsize: int = 4) -> float:
    """Bytes over the host link per step: the batch in, losses and probabilities out."""
    widths, B = _check_widths(widths), _check_batch(batch_size)
    return itemsize * B * widths[0] + LABEL_BYTES * B + itemsize * B * (1 + widths[-1])


def step_flops(widths, batch_size: int, **options) -> float:
    return float(sum(k.flops for k in step_kernels(widths, batch_size, **options)))


@dataclass
class StepEstimate:
    """gpulab's GPU model of one training step on a named GPU: its kernels on one stream,
    after the batch's copies."""

    gpu: hardware.GPUSpec
    batch_size: int
    kernels: list[tuple[KernelCost, hardware.RooflineEstimate]] = field(repr=False)
    transfer_s: float

    @property
    def launches(self) -> int:
        return len(self.kernels)

    def timeline(self) -> list[hardware.StreamEvent]:
        """The kernels on one stream: host issue times, GPU start and end (seconds)."""
        return hardware.stream_timeline([est.gpu_s for _, est in self.kernels],
                                        [est.launch_overhead_s for _, est in self.kernels])

    @property
    def kernel_s(self) -> float:
        """From the first launch's issue to the last kernel's end: the host's issuing and the
        GPU's work overlap."""
        events = self.timeline()
        return events[-1].end_s if events else 0.0

    @property
    def gpu_s(self) -> float:
        """The GPU's busy time: every kernel's own time, without the waits for the host."""
        return sum(est.gpu_s for _, est in self.kernels)

    @property
    def launch_s(self) -> float:
        """The host's time to issue every launch of the step."""
        return sum(est.launch_s for _, est in self.kernels)

    @property
    def idle_s(self) -> float:
        """GPU time spent waiting for the host to issue the next launch."""
        return self.kernel_s - self.gpu_s

    @property
    def time_s(self) -> float:
        return self.kernel_s + self.transfer_s

    @property
    def samples_per_s(self) -> float:
        return self.batch_size / self.time_s

    @property
    def flops(self) -> float:
        return sum(cost.flops for cost, _ in self.kernels)

    @property
    def label(self) -> str:
        return (f"estimated by gpulab's GPU model of the {self.gpu.name} (launches issued "
                "ahead on one stream)")

    def by_phase(self) -> dict[str, float]:
        """GPU seconds per phase (forward, loss, backward, update), the GPU's waits for the
        host ("waiting for launches"), and the transfer: they add up to ``time_s``."""
        phases: dict[str, float] = {}
        for cost, est in self.kernels:
            phases[cost.phase] = phases.get(cost.phase, 0.0) + est.gpu_s
        phases["waiting for launches"] = self.idle_s
        phases["transfer"] = self.transfer_s
        return phases

    def bound(self) -> str:
        """What most of the step's time goes to: "launch" (the host's issuing outlasts the
        GPU's work), "transfer", "memory", "compute" or "latency" (the minimum kernel time)."""
        parts = {"launch": self.launch_s, "transfer": self.transfer_s,
                 "memory": sum(est.memory_s for _, est in self.kernels),
                 "compute": sum(est.compute_s for _, est in self.kernels),
                 "latency": sum(est.floor_s for _, est in self.kernels)}
        return max(parts, key=parts.get)

    def __str__(self) -> str:
        return (f"{self.time_s * 1e6:,.0f} µs per step of {self.batch_size} samples "
                f"({self.samples_per_s:,.0f} samples/s, {self.launches} launches, "
                f"mostly {self.bound()}), {self.label}")


def estimate_step(widths, batch_size: int, gpu=hardware.COURSE_GPU, activation: str = "relu",
                  optimiser: str = "adam", itemsize: int = 4,
                  include_transfer: bool = True, host_memory: str = "pageable",
                  launch_overhead_s: float | None = None,
                  host_api: str = "numba") -> StepEstimate:
    """gpulab's GPU model of one training step on ``gpu``: every kernel's GPU time (the
    largest of FLOPs / peak, bytes / bandwidth and the minimum kernel time) on one stream,
    the launches issued ahead by the host through ``host_api`` ("numba", "cuda_cpp",
    "cuda_graph"), after the batch's host transfers from ``host_memory``: "pageable" (a NumPy
    batch, as the trainer copies it) or "pinned" (page-locked, ``cuda.pinned_array``), which
    copy at different rates (:func:`gpulab.hardware.link_bytes_per_s`).
    ``launch_overhead_s`` replaces the model's host issue cost with a measured one (from a
    recorded run)."""
    gpu = hardware.get_gpu(gpu)
    precision = PRECISION_OF_ITEMSIZE.get(itemsize)
    if precision is None:
        raise ValueError(f"itemsize must be 4 (float32) or 8 (float64), not {itemsize!r}")
    kernels = step_kernels(widths, batch_size, activation, optimiser, itemsize)
    estimates = [(cost, hardware.estimate_time(gpu, cost.flops, cost.bytes_moved, precision,
                                               launch_overhead_s=launch_overhead_s,
                                               host_api=host_api))
                 for cost in kernels]
    transfer = (step_transfer_bytes(widths, batch_size, itemsize)
                / hardware.link_bytes_per_s(gpu, host_memory) if include_transfer else 0.0)
    return StepEstimate(gpu, int(batch_size), estimates, transfer)


def per_sample_seconds(widths, gpu) -> dict[str, float]:
    """What one more sample adds to a step's time on ``gpu``, per part: its FLOPs at the fp32
    peak ("compute"), its device-memory bytes at the memory bandwidth ("memory"), its bytes
    copied from pageable host memory (a NumPy batch) at the model's pageable copy rate,
    ``gpu.host_pageable_bytes_per_s`` ("transfer"); and "launch", the host's time to issue
    the step's launches, the same for every batch (the GPU's work overlaps it). From
    :func:`step_kernels` at batches 1 and 2 (every count is a + b * batch)."""
    gpu = hardware.get_gpu(gpu)
    one, two = step_kernels(widths, 1), step_kernels(widths, 2)
    flops = sum(k.flops for k in two) - sum(k.flops for k in one)
    moved = sum(k.bytes_moved for k in two) - sum(k.bytes_moved for k in one)
    copied = step_transfer_bytes(widths, 2) - step_transfer_bytes(widths, 1)
    return {"launch": len(one) * hardware.LAUNCH_OVERHEAD_S,
            "compute": flops / gpu.peak_flops_for("fp32"),
            "memory": moved / gpu.memory_bandwidth_bytes_per_s,
            "transfer": copied / hardware.link_bytes_per_s(gpu, "pageable")}


def estimate_epoch_s(widths, batch_size: int, n_samples: int, gpu=hardware.COURSE_GPU,
                     **options) -> float:
    """Roofline estimate of one epoch: full batches plus the last, partial one."""
    full, rest = divmod(int(n_samples), int(batch_size))
    total = full * estimate_step(widths, batch_size, gpu, **options).time_s
    if rest:
        total += estimate_step(widths, rest, gpu, **options).time_s
    return total


__all__ = [
    "KernelCost", "StepEstimate", "estimate_epoch_s", "estimate_step", "n_parameters",
    "parameter_sizes", "per_sample_seconds", "step_flops", "step_kernels", "step_transfer_bytes",
]
