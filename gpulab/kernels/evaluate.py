"""Evaluating a batch of any size with one fixed grid: each sample's cross-entropy loss and
whether the network's prediction for it is right (chapter 08).

A classifier is judged on held-out samples after every epoch: the mean loss and the share it
gets right. Per sample that is one row of logits: the row's largest logit (the predicted class)
and the log-sum-exp that gives the loss. The batch can be 8 samples or 65,536; the kernel's
grid does not follow it.

- ``evaluate_batch``: a **fixed grid** whose threads step through the batch, a grid-stride loop
  over the samples: thread g (of G in the grid) handles samples g, g + G, g + 2G, ... while
  they are inside the batch. A batch smaller than the grid leaves threads with nothing to do;
  a larger one gives each thread several samples. The same launch, ``[blocks, threads]``,
  serves every batch, and at every step of the loop a warp's 32 threads take 32 neighbouring
  samples, so together they read one contiguous stretch of logits whatever the batch.

:func:`evaluation_grid` is the grid (chosen from the device, never from the batch);
:func:`run_evaluate_batch` launches the kernel (or a learner's of the same parameters) and
:func:`mean_loss_and_accuracy` reduces its per-sample results to the two numbers an epoch
reports. :data:`EVALUATE_FLOPS_PER_CLASS` and :func:`evaluate_bytes` count its work for the GPU
model.
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

from gpulab import device
from gpulab.kernels.arrays import (
    InputError,
    as_array,
    finish,
    is_device_array,
    output,
    to_device,
    whole_number,
)
from gpulab.kernels.registry import for_float_dtypes, kernel
from gpulab.kernels.softmax import check_labels

# Per sample and class: a comparison for the max, a subtraction, an exp and an add for the sum
# (an exp counted as one operation, as the roofline counts them).
EVALUATE_FLOPS_PER_CLASS = 4


@kernel(*for_float_dtypes("void({t}[:, ::1], int64[::1], {t}[::1], int32[::1])"))
def evaluate_batch(logits, labels, losses, correct):
    """For every sample s of the batch (a row of logits): losses[s] = its cross-entropy loss,
    log(sum_c exp(z_c - m)) + m - z[labels[s]] with m the row's largest logit, and
    correct[s] = 1 if that largest logit is the label's (the first one on a tie, as
    ``np.argmax``), else 0. A fixed grid: each thread steps through the samples by the grid's
    size (a grid-stride loop), so any batch fits one launch.

    Per sample: reads its row of C logits twice (max, then the sum of exps) and its label,
    writes one loss and one 0/1: about 4C FLOPs. No synchronisation: samples are independent.
    """
    first = cuda.grid(1)
    stride = cuda.gridsize(1)
    n_classes = logits.shape[1]
    for s in range(first, logits.shape[0], stride):
        m = logits[s, 0]
        predicted = 0
        for c in range(1, n_classes):
            if logits[s, c] > m:
                m = logits[s, c]
                predicted = c
        total = logits.dtype.type(0)
        for c in range(n_classes):
            total += math.exp(logits[s, c] - m)
        label = labels[s]
        losses[s] = math.log(total) + m - logits[s, label]
        correct[s] = 1 if predicted == label else 0


def evaluation_grid() -> tuple[int, int]:
    """(blocks, threads per block) of every evaluation launch, whatever the batch: on a GPU 4
    blocks of 256 threads per SM (enough warps to hide memory latency, and a grid no larger
    than the GPU holds at once); in the simulator 2 blocks of 32 (each simulated thread costs
    CPU time)."""
    if device.tier() == "gpu" and device.PROBE.multiprocessors:
        return 4 * device.PROBE.multiprocessors, 256
    return 2, 32


def evaluate_bytes(batch: int, n_classes: int, itemsize: int = 4) -> int:
    """Bytes of device memory one launch moves: each logit read once from memory (the second
    pass over a row hits the cache), a label (8 bytes), a loss and a 0/1 (4 bytes) per sample."""
    return int(batch) * (int(n_classes) * int(itemsize) + 8 + int(itemsize) + 4)


def run_evaluate_batch(logits, labels, losses=None, correct=None, kernel=None,
                       blocks: int | None = None, threads_per_block: int | None = None):
    """(losses, correct) for a batch of ``logits`` (rows = samples) and their ``labels``, by
    ``kernel`` (default gpulab's :func:`evaluate_batch`; yours takes the same four parameters)
    launched on the fixed grid of :func:`evaluation_grid` (or ``blocks`` x
    ``threads_per_block``). NumPy in, NumPy out; device logits in, device arrays out; with
    ``losses`` / ``correct`` (float like logits / int32), written into them."""
    logits = as_array("logits", logits, 2)
    rows, classes = logits.shape
    labels = check_labels(labels, classes, rows)
    d_losses = output(losses, (rows,), logits, "logits", "losses")
    if correct is not None:
        correct = as_array("correct", correct, 1, dtypes=(np.int32,),
                           how="make it with np.zeros(len(labels), np.int32)")
        if tuple(correct.shape) != (rows,):
            raise InputError(f"correct has {correct.shape[0]} elements but the batch has "
                             f"{rows} samples: give it one per sample")
    d_correct = (correct if is_device_array(correct)
                 else cuda.device_array(rows, dtype=np.int32))
    default_blocks, default_threads = evaluation_grid()
    blocks = default_blocks if blocks is None else whole_number("blocks", blocks, 1)
    threads = (default_threads if threads_per_block is None
               else whole_number("threads_per_block", threads_per_block, 1, 1024))
    (kernel or evaluate_batch)[blocks, threads](to_device(logits), to_device(labels), d_losses,
                                                d_correct)
    return finish(d_losses, losses, logits), finish(d_correct, correct, logits)


def mean_loss_and_accuracy(logits, labels, kernel=None) -> tuple[float, float]:
    """The batch's mean cross-entropy loss and the share of samples predicted right, from the
    per-sample results of :func:`run_evaluate_batch` (summed here, on the host)."""
    losses, correct = run_evaluate_batch(np.asarray(logits), labels, kernel=kernel)
    return float(np.mean(losses, dtype=np.float64)), float(np.mean(correct))


__all__ = [
    "EVALUATE_FLOPS_PER_CLASS", "evaluate_batch", "evaluate_bytes", "evaluation_grid",
    "mean_loss_and_accuracy", "run_evaluate_batch",
]
