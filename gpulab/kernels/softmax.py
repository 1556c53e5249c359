"""Softmax with cross-entropy loss, and its gradient: where a classifier's logits become a loss.

Variants
- ``softmax_cross_entropy``: one thread per sample (row). Three passes over the row: its
  largest logit m, then sum(exp(z - m)), then p = exp(z - m) / sum, and the loss
  ``log(sum) + m - z[label]``. Subtracting m first keeps every exp in (0, 1], so nothing
  overflows however large the logits are (the *stable* softmax); the loss comes from the
  log-sum-exp, never from log(p), so a tiny p gives a large finite loss, not log(0) = -inf.
- ``softmax_cross_entropy_backward``: dL/dz = (p - onehot(label)) * scale, one thread per
  element; scale = 1 / batch for the mean loss over the batch.

One thread per row is the simple choice for a classifier's few classes (10 for digits): each
thread's loop is short. For a language model's 50,000-word vocabulary a whole block would
share each row (llm.c's fused classifier does that, with warp-level reductions).
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

from gpulab.kernels.arrays import (
    InputError,
    as_array,
    as_number,
    finish,
    is_device_array,
    output,
    to_device,
)
from gpulab.kernels.dense import default_threads_1d, grid_2d
from gpulab.kernels.registry import for_float_dtypes, kernel


@kernel(*for_float_dtypes("void({t}[:, ::1], int64[::1], {t}[:, ::1], {t}[::1])"))
def softmax_cross_entropy(logits, labels, probs, losses):
    """probs[r] = softmax(logits[r]), losses[r] = -log probs[r, labels[r]]; a thread per row.

    Per thread: reads its row of C logits three times (max, sum, normalise) and one label,
    writes C probabilities and one loss: about 4C FLOPs and C exps. No synchronisation: rows
    are independent. Neighbouring threads read rows C elements apart (not coalesced), which
    is fine for small C and why large vocabularies use a block per row instead.
    """
    r = cuda.grid(1)
    if r < logits.shape[0]:
        n_classes = logits.shape[1]
        m = logits[r, 0]
        for c in range(1, n_classes):
            m = max(m, logits[r, c])
        total = logits.dtype.type(0)
        for c in range(n_classes):
            total += math.exp(logits[r, c] - m)
        for c in range(n_classes):
            probs[r, c] = math.exp(logits[r, c] - m) / total
        losses[r] = math.log(total) + m - logits[r, labels[r]]


@kernel(*for_float_dtypes("void({t}[:, ::1], int64[::1], {t}, {t}[:, ::1])"))
def softmax_cross_entropy_backward(probs, labels, scale, dlogits):
    """dlogits[r, c] = (probs[r, c] - onehot(labels[r])[c]) * scale; a thread per element.

    x runs along the classes. Reads 1 probability and 1 label, writes 1 value: 2 FLOPs.
    No synchronisation.
    """
    c, r = cuda.grid(2)
    if r < probs.shape[0] and c < probs.shape[1]:
        target = probs.dtype.type(1) if c == labels[r] else probs.dtype.type(0)
        dlogits[r, c] = (probs[r, c] - target) * scale


def check_labels(labels, n_classes: int, n_rows: int):
    """Labels as a contiguous int64 array (NumPy) or an int64 device array, checked: one per
    row and every one in 0 .. n_classes - 1 (a NumPy label array is checked value by value;
    a device array only for its shape and dtype, since reading it back would cost a copy)."""
    if is_device_array(labels):
        if tuple(labels.shape) != (n_rows,) or np.dtype(labels.dtype) != np.int64:
            raise InputError(f"labels on the device must be int64 with shape ({n_rows},), not "
                             f"{np.dtype(labels.dtype)} {tuple(labels.shape)}")
        return labels
    from gpulab import reference

    try:
        checked = reference.check_labels(labels, n_classes, n_rows)
    except ValueError as error:
        raise InputError(str(error)) from None
    return np.ascontiguousarray(checked)


def run_softmax_cross_entropy(logits, labels, probs=None, losses=None):
    """(probs, per-sample losses) on the device with ``softmax_cross_entropy``. NumPy in, NumPy
    out; device logits in, device arrays out; with ``probs`` / ``losses``, written into them."""
    logits = as_array("logits", logits, 2)
    rows, classes = logits.shape
    labels = check_labels(labels, classes, rows)
    d_probs = output(probs, logits.shape, logits, "logits", "probs")
    d_losses = output(losses, (rows,), logits, "logits", "losses")
    threads = default_threads_1d()
    softmax_cross_entropy[-(-rows // threads), threads](
        to_device(logits), to_device(labels), d_probs, d_losses)
    return finish(d_probs, probs, logits), finish(d_losses, losses, logits)


def run_softmax_cross_entropy_backward(probs, labels, scale: float, out=None):
    """(probs - onehot(labels)) * scale on the device with ``softmax_cross_entropy_backward``."""
    probs = as_array("probs", probs, 2)
    labels = check_labels(labels, probs.shape[1], probs.shape[0])
    d_out = output(out, probs.shape, probs, "probs")
    blocks, threads = grid_2d(*probs.shape)
    softmax_cross_entropy_backward[blocks, threads](
        to_device(probs), to_device(labels), probs.dtype.type(as_number("scale", scale)), d_out)
    return finish(d_out, out, probs)


__all__ = [
    "check_labels", "run_softmax_cross_entropy", "run_softmax_cross_entropy_backward",
    "softmax_cross_entropy", "softmax_cross_entropy_backward",
]
