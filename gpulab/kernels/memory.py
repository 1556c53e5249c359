"""Kernels that mostly move data: their speed is set by memory bandwidth, not arithmetic.

Variants, in the order chapter 02 teaches them
- ``saxpy``: ``out[i] = a * x[i] + y[i]`` (BLAS's "single-precision a·x plus y"). 2 FLOPs for
  3 values moved: 1/6 FLOP per byte in float32, far below any GPU's ridge point, so its time
  is bytes / bandwidth. The yardstick of a memory-bound kernel.
- ``copy_coalesced``: ``out[i] = x[i]``. Thread i reads element i, so the 32 threads of a warp
  read 32 neighbouring elements: one request, 4 sectors of 32 bytes for float32 (coalesced).
- ``copy_strided``: ``out[i] = x[i * stride]``, i.e. ``x[::stride]``. Neighbouring threads read
  addresses ``stride * itemsize`` bytes apart, so a warp's request touches up to 32 sectors,
  and most of every sector fetched is thrown away. :mod:`gpulab.memory_model` counts them.

Which element a thread reads is written twice: in the kernel (which cannot call a Python
function) and in :func:`coalesced_read_index` / :func:`strided_read_index`, which the memory
model uses. ``tests/kernels/test_memory.py`` runs the kernels on ``x = arange(n)`` so that
``out`` shows which index every thread really read, and checks that the two agree.

Every kernel is one thread per element, guarded by ``i < out.shape[0]``, with no
synchronisation: threads share nothing.
"""

from __future__ import annotations

from numba import cuda

from gpulab.kernels.arrays import (
    as_array,
    as_number,
    finish,
    matching,
    output,
    to_device,
    whole_number,
)
from gpulab.kernels.launch import LaunchConfig, one_thread_per_element
from gpulab.kernels.registry import for_float_dtypes, kernel

DEFAULT_THREADS_PER_BLOCK = 256


def coalesced_read_index(thread: int) -> int:
    """The element of x that thread ``thread`` (global index) of ``copy_coalesced`` reads."""
    return thread


def strided_read_index(thread: int, stride: int) -> int:
    """The element of x that thread ``thread`` (global index) of ``copy_strided`` reads."""
    return thread * stride


@kernel(*for_float_dtypes("void({t}, {t}[::1], {t}[::1], {t}[::1])"))
def saxpy(a, x, y, out):
    """out[i] = a * x[i] + y[i], one thread per element.

    Reads x[i] and y[i], writes out[i]: 2 FLOPs (multiply, add) and 3 * itemsize bytes per
    element (12 bytes in float32). No synchronisation. Consecutive threads touch consecutive
    addresses in all three arrays, so every warp request is coalesced.
    """
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a * x[i] + y[i]


@kernel(*for_float_dtypes("void({t}[::1], {t}[::1])"))
def copy_coalesced(x, out):
    """out[i] = x[i], one thread per element: the coalesced copy.

    Reads x[i], writes out[i]: 0 FLOPs, 2 * itemsize bytes per element. A warp reads 32
    consecutive elements (128 bytes of float32 = 4 sectors of 32 bytes): nothing fetched is
    wasted. No synchronisation.
    """
    i = cuda.grid(1)  # the element read: coalesced_read_index(i) == i
    if i < out.shape[0]:
        out[i] = x[i]


@kernel(*for_float_dtypes("void({t}[::1], {t}[::1], int64)"))
def copy_strided(x, out, stride):
    """out[i] = x[i * stride]: copies every stride-th element (``x[::stride]``).

    Reads one element, writes one: 2 * itemsize useful bytes per thread, like the coalesced
    copy. But neighbouring threads read ``stride * itemsize`` bytes apart, so a warp's read
    touches up to 32 sectors of 32 bytes and uses only ``itemsize`` bytes of each: with
    stride >= 8 in float32 the memory system fetches 8x the bytes the kernel uses. The writes
    stay coalesced. No synchronisation.
    """
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = x[i * stride]  # the element read: strided_read_index(i, stride)


# --- counts: what one launch computes and moves --------------------------------------------


def saxpy_counts(n: int, itemsize: int = 4) -> dict:
    """FLOPs and device-memory bytes of one saxpy over n elements: 2n and 3n * itemsize."""
    return {"flops": 2 * n, "bytes_moved": 3 * n * itemsize}


def copy_counts(n_out: int, itemsize: int = 4) -> dict:
    """A copy of n_out elements: 0 FLOPs, n_out * itemsize read and written (the useful bytes;
    a strided read fetches more, see :func:`gpulab.memory_model.copy_access`)."""
    return {"flops": 0, "bytes_moved": 2 * n_out * itemsize}


def strided_length(n: int, stride: int) -> int:
    """How many elements ``x[::stride]`` has when x has n: ceil(n / stride)."""
    return -(-n // stride)


# --- launch wrappers -------------------------------------------------------------------------


def check_stride(stride) -> int:
    """A stride must be a whole number >= 1 (1 is the coalesced copy)."""
    return whole_number("stride", stride, 1)


def launch_config(n: int, threads_per_block: int = DEFAULT_THREADS_PER_BLOCK) -> LaunchConfig:
    """The launch every wrapper here uses for n elements (of the result): one thread each."""
    return one_thread_per_element(n, threads_per_block)


def run_saxpy(a, x, y, out=None, threads_per_block: int = DEFAULT_THREADS_PER_BLOCK):
    """a * x + y on the device with ``saxpy``. NumPy in, NumPy out; device arrays in, device
    array out; with ``out``, written into it.

    >>> run_saxpy(2.0, [1.0, 2.0], [10.0, 20.0]).tolist()
    [12.0, 24.0]
    """
    a = as_number("a", a)
    x, y = matching(x=x, y=y)
    config = launch_config(x.shape[0], threads_per_block)
    d_out = output(out, x.shape, x, "x")
    saxpy[config.blocks, config.threads_per_block](x.dtype.type(a), to_device(x), to_device(y),
                                                   d_out)
    return finish(d_out, out, x, y)


def run_copy_coalesced(x, out=None, threads_per_block: int = DEFAULT_THREADS_PER_BLOCK):
    """A copy of x made by ``copy_coalesced`` (one thread per element)."""
    x = as_array("x", x)
    config = launch_config(x.shape[0], threads_per_block)
    d_out = output(out, x.shape, x, "x")
    copy_coalesced[config.blocks, config.threads_per_block](to_device(x), d_out)
    return finish(d_out, out, x)


def run_copy_strided(x, stride: int, out=None,
                     threads_per_block: int = DEFAULT_THREADS_PER_BLOCK):
    """``x[::stride]`` made by ``copy_strided`` (one thread per element of the result)."""
    x = as_array("x", x)
    stride = check_stride(stride)
    n_out = strided_length(x.shape[0], stride)
    config = launch_config(n_out, threads_per_block)
    d_out = output(out, (n_out,), x, "x")
    copy_strided[config.blocks, config.threads_per_block](to_device(x), d_out, stride)
    return finish(d_out, out, x)


__all__ = [
    "coalesced_read_index",
    "copy_coalesced",
    "copy_counts",
    "copy_strided",
    "launch_config",
    "check_stride",
    "run_copy_coalesced",
    "run_copy_strided",
    "run_saxpy",
    "saxpy",
    "saxpy_counts",
    "strided_length",
    "strided_read_index",
]
