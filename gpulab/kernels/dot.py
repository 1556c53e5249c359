"""Dot products: many threads must combine their products into one number.

Variants, in the order chapter 01 teaches them
- ``sum_racy``: every thread does ``out[0] = out[0] + x[i]`` without an atomic. Wrong on
  purpose: the read-modify-writes of different threads overwrite each other.
- ``dot_atomic``: one ``atomic.add`` per element. Correct, but every thread queues on the same
  address, so the adds are serialised — in an order that can change from run to run, so a float
  sum made of atomics is not deterministic (floating-point addition is not associative).
- ``dot_shared_tree``: each block sums its products in shared memory by halving (a tree,
  log2(threads_per_block) steps), then one atomic per block.
- ``dot_grid_stride``: a fixed, small grid; each thread first sums many products in a
  register, then the block does the tree. Fewest atomics, and the launch no longer grows with n.

All read 2 values (x[i], y[i]) and do 2 FLOPs (multiply, add) per element: 2n FLOPs and
2n * itemsize bytes. The result is accumulated in the input's dtype.

The tree is one device function, :func:`block_tree_sum`, shared with the narrow-format dot
kernels of :mod:`gpulab.kernels.narrow_formats`; it is inlined into each kernel (see
:func:`gpulab.kernels.registry.device_function`), and ``gpulab.kernel_source`` shows it after
the kernels that call it.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from gpulab import device
from gpulab.kernels.arrays import InputError, as_array, matching, one_of, to_device
from gpulab.kernels.launch import (
    LaunchConfig,
    check_threads_per_block,
    grid_stride,
    one_thread_per_element,
)
from gpulab.kernels.registry import device_function, for_float_dtypes, kernel

# Static shared-memory size of the tree kernels: the largest block CUDA allows. A block of
# 256 threads uses the first 256 slots (1 KiB of float32, 2 KiB of float64 are touched).
TREE_SHARED_SLOTS = 1024

METHODS = ("atomic", "shared_tree", "grid_stride")


@device_function
def block_tree_sum(partial):
    """Sum partial[0 : blockDim.x] of one block by halving; every thread gets the block's sum.

    Every thread of the block calls it after writing its own partial[threadIdx.x] (shared
    memory). ``syncthreads`` first, so that every slot is written; then log2(blockDim.x)
    steps in which thread t < stride adds partial[t + stride] into partial[t] (reads two
    slots, writes one), with ``syncthreads`` after each step so that no thread reads a slot
    before it is written. Returns partial[0]. blockDim.x must be a power of two; the sums are
    in partial's dtype.
    """
    t = cuda.threadIdx.x
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:  # 256 -> 128 -> ... -> 1 partial sums
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    return partial[0]


@kernel(*for_float_dtypes("void({t}[::1], {t}[::1])"))
def sum_racy(x, out):
    """Add x into out[0] with a plain read-modify-write: a data race, on purpose.

    Every thread reads out[0], then (after the barrier) writes back what it read plus its
    own x[i], so the threads of a block overwrite each other and most additions are lost.
    On a GPU the 32 threads of a warp typically read together before any of them writes; the
    barrier widens that window to the whole block so that the simulator, which otherwise
    runs threads one after another, shows the same race.
    """
    i = cuda.grid(1)
    mine = x[i] if i < x.shape[0] else x.dtype.type(0)
    seen = out[0]  # every thread of the block reads the same old value...
    cuda.syncthreads()
    out[0] = seen + mine  # ...and each write replaces the others: one survives per block


@kernel(*for_float_dtypes("void({t}[::1], {t}[::1], {t}[::1])"))
def dot_atomic(x, y, out):
    """out[0] += x[i] * y[i] with one atomic add per element.

    Reads x[i], y[i]; atomically updates out[0] (which must start at 0). No barrier: the
    atomic makes each read-add-write indivisible, but all n updates hit one address and are
    done one after another.
    """
    i = cuda.grid(1)
    if i < x.shape[0]:
        cuda.atomic.add(out, 0, x[i] * y[i])


@kernel(*for_float_dtypes("void({t}[::1], {t}[::1], {t}[::1])"))
def dot_shared_tree(x, y, out):
    """Per block: products into shared memory, a tree sum, one atomic add into out[0].

    Each thread reads x[i], y[i] once and writes partial[t] (shared memory); then
    :func:`block_tree_sum` halves the block's products, with ``syncthreads`` before the first
    step and after every step, so no thread reads a slot before it is written. Thread 0
    atomically adds the block's sum into out[0] (which must start at 0): one atomic per block.
    Requires threads_per_block to be a power of two.
    """
    partial = cuda.shared.array(TREE_SHARED_SLOTS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < x.shape[0]:
        partial[t] = x[i] * y[i]
    else:
        partial[t] = 0  # threads past the end add nothing
    total = block_tree_sum(partial)
    if t == 0:
        cuda.atomic.add(out, 0, total)


@kernel(*for_float_dtypes("void({t}[::1], {t}[::1], {t}[::1])"))
def dot_grid_stride(x, y, out):
    """A fixed grid loops over the vectors; register sums, a block tree, one atomic per block.

    Thread g reads x[g], x[g + G], x[g + 2G], ... (G = threads in the grid), so neighbouring
    threads still read neighbouring addresses on every pass (coalesced). Each thread writes
    its register sum to partial[t] (shared memory); the block sums them with
    :func:`block_tree_sum` (its barriers as in ``dot_shared_tree``) and thread 0 atomically
    adds the result into out[0]. threads_per_block must be a power of two.
    """
    partial = cuda.shared.array(TREE_SHARED_SLOTS, x.dtype)
    t = cuda.threadIdx.x
    acc = x.dtype.type(0)
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        acc += x[i] * y[i]
    partial[t] = acc
    total = block_tree_sum(partial)
    if t == 0:
        cuda.atomic.add(out, 0, total)


def default_grid_stride_blocks() -> int:
    """Blocks for the grid-stride kernel: 4 per SM on a GPU (enough to hide memory latency),
    2 in the simulator (where each extra thread costs ~0.1 ms of CPU time)."""
    if device.tier() == "gpu" and device.PROBE.multiprocessors:
        return 4 * device.PROBE.multiprocessors
    return 2


def default_threads_per_block(method: str) -> int:
    """256 on a GPU; 32 for the grid-stride kernel in the simulator (fewer simulated threads)."""
    if method == "grid_stride" and device.tier() != "gpu":
        return 32
    return 256


def launch_config(
    n_elements: int, method: str, threads_per_block: int | None = None, blocks: int | None = None
) -> LaunchConfig:
    """The launch :func:`dot` uses for ``n_elements`` with ``method``."""
    one_of("method", method, METHODS)
    if threads_per_block is None:
        threads_per_block = default_threads_per_block(method)
    check_threads_per_block(threads_per_block, power_of_two=method != "atomic")
    if method == "grid_stride":
        if blocks is None:
            blocks = default_grid_stride_blocks()
        return grid_stride(n_elements, threads_per_block, blocks)
    if blocks is not None:
        raise InputError(
            f"blocks is chosen from n for method {method!r}; pass it only with grid_stride"
        )
    return one_thread_per_element(n_elements, threads_per_block)


_KERNELS = {"atomic": dot_atomic, "shared_tree": dot_shared_tree, "grid_stride": dot_grid_stride}


def dot(
    x,
    y,
    method: str = "shared_tree",
    threads_per_block: int | None = None,
    blocks: int | None = None,
):
    """x · y on the device with the kernel ``dot_<method>``; returns a NumPy scalar of x's
    dtype.

    >>> float(dot([1, 2], [3, 4]))
    11.0
    """
    x, y = matching(x=x, y=y)
    config = launch_config(x.shape[0], method, threads_per_block, blocks)
    d_out = cuda.to_device(np.zeros(1, dtype=x.dtype))
    _KERNELS[method][config.blocks, config.threads_per_block](to_device(x), to_device(y), d_out)
    return d_out.copy_to_host()[0]


def run_sum_racy(x, threads_per_block: int = 256):
    """Sum x with the racy kernel ``sum_racy``, to see what a data race does (the answer is
    wrong)."""
    x = as_array("x", x)
    config = one_thread_per_element(x.shape[0], threads_per_block)
    d_out = cuda.to_device(np.zeros(1, dtype=x.dtype))
    sum_racy[config.blocks, config.threads_per_block](to_device(x), d_out)
    return d_out.copy_to_host()[0]


__all__ = [
    "METHODS", "TREE_SHARED_SLOTS", "block_tree_sum", "default_grid_stride_blocks",
    "default_threads_per_block", "dot", "dot_atomic", "dot_grid_stride", "dot_shared_tree",
    "launch_config", "run_sum_racy", "sum_racy",
]
