"""Elementwise kernels: one thread per element, no cooperation between threads.

Variants
- ``elementwise_multiply``: ``out[i] = x[i] * y[i]``, the first half of a dot product.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from gpulab.kernels._arrays import is_device_array, matching_vectors, to_device
from gpulab.kernels.launch import LaunchConfig, one_thread_per_element
from gpulab.kernels.registry import for_float_dtypes, kernel


@kernel(*for_float_dtypes("void({t}[::1], {t}[::1], {t}[::1])"))
def elementwise_multiply(x, y, out):
    """out[i] = x[i] * y[i], one thread per element.

    Reads x[i] and y[i], writes out[i]: 1 FLOP and 3 values moved per element.
    No synchronisation: threads share nothing. The guard ``i < n`` stops the threads of the
    last block that fall past the end of the arrays.
    """
    i = cuda.grid(1)  # = blockIdx.x * blockDim.x + threadIdx.x
    if i < x.shape[0]:
        out[i] = x[i] * y[i]


def multiply(x, y, out=None, threads_per_block: int = 256):
    """Elementwise product on the device.

    NumPy in, NumPy out; device arrays in, device array out (no copy back)."""
    x, y = matching_vectors(x=x, y=y)
    config = one_thread_per_element(x.shape[0], threads_per_block)
    on_device = is_device_array(x) and is_device_array(y)
    d_x, d_y = to_device(x), to_device(y)
    if out is None:
        d_out = cuda.device_array(x.shape[0], dtype=x.dtype)
    else:
        x, out = matching_vectors(x=x, out=out)
        d_out = to_device(out)
    launch_elementwise(config, d_x, d_y, d_out)
    if on_device:
        return d_out
    result = d_out.copy_to_host()
    if out is not None and isinstance(out, np.ndarray):
        out[:] = result
        return out
    return result


def launch_elementwise(config: LaunchConfig, d_x, d_y, d_out) -> None:
    """Launch ``elementwise_multiply`` with a given configuration (used by benchmarks)."""
    elementwise_multiply[config.blocks, config.threads_per_block](d_x, d_y, d_out)


__all__ = ["elementwise_multiply", "launch_elementwise", "multiply"]
