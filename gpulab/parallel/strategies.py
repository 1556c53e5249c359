"""Beyond data parallelism: what sharding the optimiser state (ZeRO), splitting the matrices
(tensor parallelism) and splitting the layers (pipeline parallelism) cost in communication
(the memory they save is counted by :mod:`gpulab.nn.memory`); and a matmul split across ranks,
run for real.

**ZeRO** (Rajbhandari, Rasley, Ruwase and He, "ZeRO: Memory Optimizations Toward Training
Trillion Parameter Models", SC 2020, arXiv:1910.02054, Figure 1 and Section 7). Mixed-precision
Adam keeps 16 bytes per parameter, which plain data parallelism keeps on every GPU and ZeRO
stages 1-3 shard over the N GPUs; those bytes are chapter 09's calculator's
(:func:`gpulab.nn.memory.zero_bytes_per_parameter`, the one formula), and this module counts
what the stages send. Stages 1 and 2 communicate as much as plain data parallelism (a
reduce-scatter of the gradients and an all-gather of the updated weights are together one
all-reduce); stage 3 gathers the weights again in the backward pass: 1.5 times as much.

**Tensor parallelism** (Shoeybi et al., "Megatron-LM: Training Multi-Billion Parameter
Language Models Using Model Parallelism", 2019, arXiv:1909.08053, Section 3): each
transformer layer's matrices are split over t GPUs (the first matmul of a block by columns,
the second by rows), so each GPU does 1/t of the arithmetic, and every layer needs two
all-reduces of the activations (tokens × hidden values) in the forward pass and two in the
backward pass. That traffic grows with the batch, which is why tensor parallelism stays inside
an NVLink domain.

**Pipeline parallelism** (Huang et al., "GPipe: Efficient Training of Giant Neural Networks
using Pipeline Parallelism", NeurIPS 2019, arXiv:1811.06965): the layers are split into p
stages on p GPUs; only the activations at each stage boundary travel (forward) and their
gradients (backward), point to point. The cost is idle time: with m micro-batches per batch,
a fraction (p - 1)/(m + p - 1) of each step is the "bubble" when stages wait for each other.
"""

from __future__ import annotations

import numpy as np

from gpulab.nn.memory import ZERO_STAGES

ZERO_PAPER = ("Rajbhandari et al., 'ZeRO: Memory Optimizations Toward Training Trillion "
              "Parameter Models', SC 2020 (https://arxiv.org/abs/1910.02054), Figure 1")
MEGATRON_PAPER = ("Shoeybi et al., 'Megatron-LM' (https://arxiv.org/abs/1909.08053), Section 3: "
                  "2 all-reduces per transformer layer forward, 2 backward")
GPIPE_PAPER = ("Huang et al., 'GPipe' (https://arxiv.org/abs/1811.06965): bubble fraction "
               "(p - 1)/(m + p - 1)")

GRADIENT_BYTES = 2  # 16-bit gradients (and 16-bit weights, for stage 3's all-gathers)


def zero_traffic_bytes_per_parameter(stage: int, n_gpus: int) -> float:
    """Bytes each GPU sends per parameter per step (16-bit values, ring algorithms): stages 0-2
    one all-reduce, 2 · 2(N - 1)/N; stage 3 half as much again (the weights are all-gathered
    for the forward and again for the backward pass)."""
    if stage not in ZERO_STAGES:
        raise ValueError(f"stage must be one of {ZERO_STAGES}, not {stage!r}")
    n = int(n_gpus)
    if n <= 1:
        return 0.0
    allreduce = 2 * (n - 1) / n * GRADIENT_BYTES
    return allreduce * (1.5 if stage == 3 else 1.0)


def tensor_parallel_traffic_bytes(tokens: int, hidden: int, layers: int, t: int,
                                  itemsize: int = 2) -> float:
    """Bytes each GPU sends per step with Megatron tensor parallelism of degree ``t``: 4
    all-reduces per layer (2 forward, 2 backward) of tokens × hidden values, each 2(t - 1)/t of
    its size with a ring."""
    if t <= 1:
        return 0.0
    return 4 * layers * 2 * (t - 1) / t * tokens * hidden * itemsize


def pipeline_traffic_bytes(tokens: int, hidden: int, itemsize: int = 2) -> float:
    """Bytes that cross one pipeline stage boundary per step: the activations (tokens × hidden)
    forward and their gradients backward, each sent once, point to point."""
    return 2 * tokens * hidden * itemsize


def pipeline_bubble(stages: int, micro_batches: int) -> float:
    """GPipe's idle fraction of a step: (p - 1)/(m + p - 1)."""
    p, m = int(stages), int(micro_batches)
    if p < 1 or m < 1:
        raise ValueError("stages and micro_batches must be >= 1")
    return (p - 1) / (m + p - 1)


def column_parallel_matmul(comm, X: np.ndarray, W: np.ndarray) -> np.ndarray:
    """X @ W with W's columns split over the ranks: each rank multiplies X by its block of
    columns, then an all-gather puts the blocks of the product side by side (Megatron's first
    matmul of an MLP block). Every rank returns the whole product."""
    rank, size = comm.Get_rank(), comm.Get_size()
    columns = np.array_split(np.arange(W.shape[1]), size)[rank]
    mine = X @ W[:, columns]
    return np.concatenate(comm.allgather(mine), axis=1)


def row_parallel_matmul(comm, X: np.ndarray, W: np.ndarray) -> np.ndarray:
    """X @ W with W's rows (and X's matching columns) split over the ranks: each rank computes
    a partial product of the full shape and an all-reduce adds them (Megatron's second matmul).
    Every rank returns the whole product."""
    rank, size = comm.Get_rank(), comm.Get_size()
    rows = np.array_split(np.arange(W.shape[0]), size)[rank]
    partial = np.ascontiguousarray(X[:, rows] @ W[rows, :])
    total = np.empty_like(partial)
    comm.Allreduce(partial, total)
    return total


__all__ = ["GPIPE_PAPER", "GRADIENT_BYTES", "MEGATRON_PAPER", "ZERO_PAPER",
           "column_parallel_matmul", "pipeline_bubble", "pipeline_traffic_bytes",
           "row_parallel_matmul", "tensor_parallel_traffic_bytes",
           "zero_traffic_bytes_per_parameter"]
