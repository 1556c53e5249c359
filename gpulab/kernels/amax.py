"""One pass over a tensor for what mixed precision needs to know of it (chapter 10): its amax
and whether it holds an inf or a NaN.

- The **loss scaler** (:class:`gpulab.nn.mixed_precision.LossScaler`) skips a step whose
  gradients hold an inf or a NaN: it needs the count of non-finite values (PyTorch's
  ``GradScaler`` runs one fused kernel over all gradients for it,
  ``_amp_foreach_non_finite_check_and_unscale_``).
- **FP8 delayed scaling** (:class:`gpulab.nn.mixed_precision.DelayedScaling`) records every
  tensor's amax, the largest magnitude, as Transformer Engine's cast kernels take it: NaN
  values left out (CUDA's ``fmaxf`` returns the other argument when one is NaN), ``|inf|`` =
  inf kept (:func:`gpulab.nn.mixed_precision.amax`).

:func:`amax_nonfinite` finds both in one reduction: ``out[0]`` = the amax, ``out[1]`` = how
many values are inf or NaN. It is a grid-stride loop (a fixed grid; each thread keeps its
largest magnitude and its count in registers, reading each element once), then a tree in
shared memory per block (two arrays, halved together, a barrier after every round), then one
atomic per output per block: ``atomic.max`` into out[0], ``atomic.add`` into out[1]. ``out``
must start at 0; the count is stored in x's float type (exact up to 2^24 in float32).
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

from gpulab import device
from gpulab.kernels.arrays import InputError, is_device_array, to_device
from gpulab.kernels.launch import check_threads_per_block, grid_stride
from gpulab.kernels.registry import for_float_dtypes, kernel

# Static shared-memory size: the largest block CUDA allows (a block uses its first slots).
SLOTS = 1024


@kernel(*for_float_dtypes("void({t}[::1], {t}[::1])"))
def amax_nonfinite(x, out):
    """out[0] = max |x| with NaN values left out (inf kept); out[1] += the number of inf or
    NaN values. One reduction: a grid-stride loop in registers, a tree per block, one atomic
    per output per block.

    Each thread reads x[g], x[g + G], ... (G = threads in the grid) once each, keeps the
    largest finite-or-infinite magnitude and counts the non-finite values; writes both to its
    slots of two shared arrays; the block halves them together (``syncthreads`` after the
    writes and after every round, outside the ``if``); thread 0 does ``atomic.max(out, 0,
    ...)`` and ``atomic.add(out, 1, ...)``. threads_per_block must be a power of two; out
    must start at [0, 0].
    """
    largest = cuda.shared.array(SLOTS, x.dtype)
    bad = cuda.shared.array(SLOTS, x.dtype)
    t = cuda.threadIdx.x
    mine = x.dtype.type(0)
    count = 0  # an integer: a float32 count plus the literal 1 would be float64 arithmetic
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        magnitude = abs(x[i])  # x[i] read once
        if math.isnan(magnitude):
            count += 1  # left out of the amax, as fmaxf leaves it out
        else:
            if math.isinf(magnitude):
                count += 1  # |inf| = inf stays in the amax
            mine = max(mine, magnitude)
    largest[t] = mine
    bad[t] = count
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            largest[t] = max(largest[t], largest[t + stride])
            bad[t] += bad[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.max(out, 0, largest[0])
        cuda.atomic.add(out, 1, bad[0])


def default_launch() -> tuple[int, int]:
    """(blocks, threads_per_block): 4 blocks per SM of 256 threads on a GPU; 2 blocks of 32 in
    the simulator, where every simulated thread costs CPU time."""
    if device.tier() == "gpu":
        sms = device.PROBE.multiprocessors or 32
        return 4 * sms, 256
    return 2, 32


def amax_and_nonfinite(x, kernel=None, blocks: int | None = None,
                       threads_per_block: int | None = None) -> tuple[float, int]:
    """(amax, number of inf or NaN values) of ``x`` (a float32 or float64 NumPy or device
    array, any shape, C-contiguous) in one launch of ``kernel`` (default
    :func:`amax_nonfinite`; any kernel ``k(x, out)`` with the same contract, such as the one
    chapter 10's exercise asks for) on a fixed grid (:func:`default_launch`).

    >>> amax_and_nonfinite(np.array([1.0, -3.0, np.nan, 2.0]))
    (3.0, 1)
    """
    kernel = amax_nonfinite if kernel is None else kernel
    default_blocks, default_threads = default_launch()
    blocks = default_blocks if blocks is None else blocks
    threads = check_threads_per_block(
        default_threads if threads_per_block is None else threads_per_block, power_of_two=True)
    if not is_device_array(x):
        if not isinstance(x, np.ndarray):
            raise InputError(f"x must be a NumPy or device array, not {type(x).__name__}")
        if x.dtype not in (np.float32, np.float64):
            raise InputError(f"x has dtype {x.dtype}; this kernel takes float32 or float64: "
                             "widen it with x.astype(np.float32) (exact for fp16, bf16, fp8)")
        if not x.flags.c_contiguous:
            raise InputError("x is not C-contiguous: pass np.ascontiguousarray(x)")
        x = x.reshape(-1)
    elif len(x.shape) != 1:
        raise InputError(f"a device array x must be 1-D here, not of shape {tuple(x.shape)}")
    if x.shape[0] == 0:
        return 0.0, 0
    config = grid_stride(int(x.shape[0]), threads, blocks)
    d_out = cuda.to_device(np.zeros(2, dtype=x.dtype))
    kernel[config.blocks, config.threads_per_block](to_device(x), d_out)
    out = d_out.copy_to_host()
    return float(out[0]), int(out[1])


__all__ = ["SLOTS", "amax_and_nonfinite", "amax_nonfinite", "default_launch"]
