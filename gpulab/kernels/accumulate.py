"""Gradient accumulation on the device: add one micro-batch's gradient into a running sum, in
place (chapter 09).

A batch too large for the device's memory runs as micro-batches, one after another; each
micro-batch's gradient is a mean over its own samples, so the batch's gradient is the sum of
the micro-batches' gradients, each weighted by its share of the samples (``weight`` =
micro-batch size / batch size; the last part may be smaller, so its weight differs). The sum
lives in one buffer per parameter, allocated once before the first micro-batch and updated in
place by every later one: no new array per micro-batch.

- ``accumulate``: ``grad_sum[i] += weight * grad_micro[i]``, one thread per element of the
  parameter seen as one flat vector (a weight matrix ``W`` is passed as ``W.reshape(-1)``, a
  view). Per element: reads grad_sum and grad_micro, writes grad_sum (3 values moved, 2 FLOPs):
  memory-bound, no synchronisation (each element has one owner).

:func:`accumulate_into` launches it (or the learner's kernel of the same parameters) on device
arrays of any shape; :func:`accumulate_gradients` runs a model's micro-batches and sums their
gradients with it.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from gpulab.kernels.arrays import InputError, as_number, is_device_array, matching
from gpulab.kernels.dense import default_threads_1d
from gpulab.kernels.registry import for_float_dtypes, kernel

ACCUMULATE_VALUES_MOVED = 3  # per element: read grad_sum, grad_micro; write grad_sum
ACCUMULATE_FLOPS = 2


@kernel(*for_float_dtypes("void({t}[::1], {t}[::1], {t})"))
def accumulate(grad_sum, grad_micro, weight):
    """Gradient accumulation: grad_sum[i] += weight * grad_micro[i], in place. A thread each.

    Per thread: reads grad_sum[i] and grad_micro[i], writes grad_sum[i] (3 values); 2 FLOPs.
    No synchronisation: each element has one owner.
    """
    i = cuda.grid(1)
    if i < grad_sum.shape[0]:
        grad_sum[i] += weight * grad_micro[i]


def _flat(array):
    """A 1-D view of a contiguous array (a matrix W becomes W.reshape(-1), no copy)."""
    return array.reshape(-1) if len(getattr(array, "shape", ())) > 1 else array


def accumulate_into(grad_sum, grad_micro, weight: float, kernel=None,
                    threads_per_block: int | None = None) -> None:
    """``grad_sum += weight * grad_micro`` on device arrays of any (equal) shape, in place, by
    ``kernel`` (default gpulab's :func:`accumulate`; yours takes the same three parameters)
    launched with one thread per element. ``weight`` must be a number in (0, 1]: a
    micro-batch's share of the batch."""
    if not (is_device_array(grad_sum) and is_device_array(grad_micro)):
        raise InputError("accumulate_into adds in place on the device: pass device arrays "
                         "(cuda.to_device(...)) for grad_sum and grad_micro")
    if tuple(grad_sum.shape) != tuple(grad_micro.shape):
        raise InputError(f"grad_sum has shape {tuple(grad_sum.shape)} but grad_micro "
                         f"{tuple(grad_micro.shape)}: they must be gradients of the same "
                         "parameter")
    flat_sum, flat_micro = matching(grad_sum=_flat(grad_sum), grad_micro=_flat(grad_micro))
    weight = as_number("weight", weight, 0.0, 1.0)
    if weight == 0.0:
        raise InputError("weight=0 adds nothing: a micro-batch's weight is its share of the "
                         "batch, its size / the batch's size")
    threads = default_threads_1d() if threads_per_block is None else int(threads_per_block)
    n = flat_sum.shape[0]
    (kernel or accumulate)[-(-n // threads), threads](
        flat_sum, flat_micro, flat_sum.dtype.type(weight))


def micro_batch_parts(n: int, micro_batches: int) -> list[np.ndarray]:
    """The index arrays of ``micro_batches`` parts of n samples, in order, sizes differing by at
    most one (``np.array_split``); fewer parts when n is smaller."""
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise InputError(f"a batch needs at least one sample, not n={n!r}")
    if (isinstance(micro_batches, bool) or not isinstance(micro_batches, int | np.integer)
            or micro_batches < 1):
        raise InputError(f"micro_batches must be a whole number >= 1, not {micro_batches!r}")
    return np.array_split(np.arange(int(n)), min(int(micro_batches), int(n)))


def accumulate_gradients(model, X, y, micro_batches: int, kernel=None) -> dict:
    """The gradients of the mean loss over the batch ``X``, ``y``, from ``micro_batches``
    forward and backward passes of ``model`` (one part at a time), summed on the device into one
    buffer per parameter by ``kernel`` (:func:`accumulate_into`). Returns ``{name: device
    array}`` in ``model.gradients()``'s names; the model is not updated. On the kernel backend
    the gradients are already on the device; on the NumPy backend each is copied there."""
    y = np.asarray(y)
    if len(X) != len(y):
        raise InputError(f"X has {len(X)} samples but y has {len(y)}")
    parts = micro_batch_parts(len(y), micro_batches)
    sums: dict = {}
    for part in parts:
        weight = len(part) / len(y)
        model.loss(X[part], y[part])
        model.backward()
        for key, _, grad in model.parameters():
            d_grad = grad if is_device_array(grad) else cuda.to_device(np.ascontiguousarray(grad))
            if key not in sums:  # allocated once, before the first micro-batch's sum
                sums[key] = cuda.to_device(np.zeros(d_grad.shape, d_grad.dtype))
            accumulate_into(sums[key], d_grad, weight, kernel)
    return sums


__all__ = [
    "ACCUMULATE_FLOPS", "ACCUMULATE_VALUES_MOVED", "accumulate", "accumulate_gradients",
    "accumulate_into", "micro_batch_parts",
]
