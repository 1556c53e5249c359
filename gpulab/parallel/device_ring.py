"""The ring all-reduce with each rank's vector on the device (chapter 11): the ring of
:mod:`gpulab.parallel.collectives`, whose every reduce step is a launch of
:func:`gpulab.kernels.ring.add_chunk` (or the learner's kernel of the same parameters)."""

from __future__ import annotations

import numba.cuda
import numpy as np

from gpulab.kernels import ring
from gpulab.kernels.arrays import InputError
from gpulab.parallel import collectives


def ring_allreduce_on_device(comm, x, kernel_function=None, threads: int = 64):
    """The element-wise mean of ``x`` over ``comm``'s ranks by a ring all-reduce whose vector
    lives on the device: each reduce-scatter step receives a chunk on the host (MPI with host
    buffers), copies it to the device and adds it in with :func:`~gpulab.kernels.ring.add_chunk` (or
    ``kernel_function``); the all-gather copies the finished chunks into place. Returns
    ``(mean, launches)``."""
    x = np.asarray(x)
    if x.ndim != 1 or not np.issubdtype(x.dtype, np.floating):
        raise InputError(f"x must be a 1-D float array, not {x.dtype} of shape {x.shape}")
    rank, size = comm.Get_rank(), comm.Get_size()
    d_data = numba.cuda.to_device(np.ascontiguousarray(x))
    bounds = collectives.chunk_bounds(len(x), size)
    right, left = (rank + 1) % size, (rank - 1) % size
    launches = 0
    for phase in ("reduce-scatter", "all-gather"):
        for step in range(size - 1):
            shift = 0 if phase == "reduce-scatter" else 1
            a, b = bounds[(rank - step + shift) % size]
            c, d = bounds[(rank - step - 1 + shift) % size]
            incoming = np.empty(d - c, dtype=x.dtype)
            comm.Sendrecv(d_data[a:b].copy_to_host(), dest=right, recvbuf=incoming,
                          source=left)
            if phase == "reduce-scatter":
                launches += ring.add_chunk_on_device(
                    d_data, numba.cuda.to_device(incoming), c, d - c, threads,
                    kernel_function) > 0
            elif d > c:
                d_data[c:d].copy_to_device(incoming)
    return d_data.copy_to_host() / size, launches


__all__ = ["ring_allreduce_on_device"]
