"""Elementwise kernels: one thread per element, no cooperation between threads.

Variants
- ``elementwise_multiply``: ``out[i] = x[i] * y[i]``, the first half of a dot product.
"""

from __future__ import annotations

from numba import cuda

from gpulab.kernels.arrays import finish, matching, output, to_device
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


def run_elementwise_multiply(x, y, out=None, threads_per_block: int = 256):
    """x * y on the device with ``elementwise_multiply``, one thread per element.

    NumPy in, NumPy out; device arrays in, device array out (no copy back); with ``out``,
    the result is written into it (see :mod:`gpulab.kernels.arrays`)."""
    x, y = matching(x=x, y=y)
    config = one_thread_per_element(x.shape[0], threads_per_block)
    d_out = output(out, x.shape, x, "x")
    launch(config, to_device(x), to_device(y), d_out)
    return finish(d_out, out, x, y)


def launch(config: LaunchConfig, d_x, d_y, d_out) -> None:
    """Launch ``elementwise_multiply`` with a given configuration on device arrays, unchecked
    (used by benchmarks)."""
    elementwise_multiply[config.blocks, config.threads_per_block](d_x, d_y, d_out)


__all__ = ["elementwise_multiply", "launch", "run_elementwise_multiply"]
