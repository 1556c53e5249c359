"""The ring all-reduce's reduce step on the device (chapter 11).

In the reduce-scatter each rank receives one chunk of its left neighbour's partial sums per
step and adds it into its own copy of that chunk, in place: on a GPU the rank's vector (the
gradients) lives in device memory, and the add is a kernel.

- ``add_chunk``: ``data[offset + i] += incoming[i]`` for ``i < length``, one thread per element
  of the chunk. Per element: reads data and incoming, writes data (3 values moved, 1 FLOP):
  memory-bound, no synchronisation (each element has one owner). Elements of ``data`` outside
  the chunk are left alone.

:func:`add_chunk_on_device` launches it (or the learner's kernel of the same parameters);
:func:`gpulab.parallel.device_ring.ring_allreduce_on_device` is a ring all-reduce whose every
reduce step is such a launch, on each rank's device copy of its vector.
"""

from __future__ import annotations

import threading

import numba.cuda
import numpy as np
from numba import cuda

from gpulab.kernels.arrays import InputError
from gpulab.kernels.registry import for_float_dtypes, kernel

ADD_CHUNK_VALUES_MOVED = 3  # per element: read data, incoming; write data
ADD_CHUNK_FLOPS = 1
# The simulator swaps the kernel's `cuda` module while a launch runs (in this module's globals):
# ranks as threads launch one at a time (on a GPU each rank has its own device, and its own
# process), and the host code below says `numba.cuda`, which the swap leaves alone.
_LAUNCH_LOCK = threading.Lock()


@kernel(*for_float_dtypes("void({t}[::1], {t}[::1], int64, int64)"))
def add_chunk(data, incoming, offset, length):
    """The ring's reduce step: data[offset + i] += incoming[i] for i < length. A thread each.

    Per thread: reads data[offset + i] and incoming[i], writes data[offset + i]; 1 FLOP.
    No synchronisation: each element has one owner.
    """
    i = cuda.grid(1)
    if i < length:
        data[offset + i] += incoming[i]


def add_chunk_on_device(d_data, d_incoming, offset: int, length: int, threads: int = 64,
                        kernel_function=None) -> int:
    """Launch ``add_chunk`` (or ``kernel_function``, the same parameters) to add
    ``d_incoming[:length]`` into ``d_data[offset:offset + length]``; returns the blocks
    launched (0 for an empty chunk)."""
    offset, length, threads = int(offset), int(length), int(threads)
    if length < 0 or offset < 0 or offset + length > d_data.shape[0]:
        raise InputError(f"the chunk [{offset}, {offset + length}) is not inside data of "
                         f"{d_data.shape[0]} elements")
    if d_incoming.shape[0] < length:
        raise InputError(f"incoming has {d_incoming.shape[0]} elements, the chunk {length}")
    if threads < 1:
        raise InputError(f"threads must be at least 1, not {threads}")
    if length == 0:
        return 0
    blocks = -(-length // threads)
    with _LAUNCH_LOCK:
        (kernel_function or add_chunk)[blocks, threads](d_data, d_incoming, np.int64(offset),
                                                        np.int64(length))
        numba.cuda.synchronize()
    return blocks


__all__ = ["ADD_CHUNK_FLOPS", "ADD_CHUNK_VALUES_MOVED", "add_chunk", "add_chunk_on_device"]
