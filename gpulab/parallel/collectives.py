"""The ring all-reduce, from point-to-point messages: gpulab's version (shown in chapter 11
after the learner has written theirs), its schedule, and what it sends.

N ranks each hold a vector of n numbers; all of them want the element-wise mean. Cut every
vector into N chunks (chunk k is the same index range on every rank) and arrange the ranks in a
ring: each sends only to its right neighbour, (rank + 1) % N, and receives only from its left,
(rank - 1) % N.

1. **Reduce-scatter**, N - 1 steps: at step s rank r sends chunk (r - s) mod N and adds the chunk
   (r - s - 1) mod N that arrives from the left to its own. A chunk gathers one more rank's
   contribution at every hop; after N - 1 steps rank r holds chunk (r + 1) mod N summed over all
   ranks.
2. **All-gather**, N - 1 steps: each rank passes on the finished chunk it received last;
   after N - 1 more steps every rank has every finished chunk.

Each rank sends 2(N - 1) messages of n/N numbers: **2(N - 1)/N · n** numbers in all, less
than 2n however many ranks there are. That is why the ring is bandwidth-optimal (Patarasuk
and Yuan, "Bandwidth optimal all-reduce algorithms for clusters of workstations", JPDC 2009),
and why NCCL uses it for large messages; its cost is 2(N - 1) message latencies, which is why
NCCL switches to trees for small messages on many GPUs.
"""

from __future__ import annotations

import numpy as np


def chunk_bounds(n: int, size: int) -> list[tuple[int, int]]:
    """(start, stop) of the ``size`` chunks of a vector of ``n`` elements, as
    ``np.array_split`` cuts it: the first ``n % size`` chunks have one element more."""
    if size < 1:
        raise ValueError(f"size must be >= 1, not {size}")
    base, extra = divmod(int(n), int(size))
    bounds, start = [], 0
    for k in range(size):
        stop = start + base + (1 if k < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def ring_schedule(size: int) -> list[dict]:
    """The ring all-reduce step by step: for each of the 2(N - 1) steps, its phase and, for every
    rank, the chunk it sends to the right and the chunk it receives from the left."""
    steps = []
    for s in range(size - 1):
        steps.append({"phase": "reduce-scatter", "step": s,
                      "send": [(r - s) % size for r in range(size)],
                      "receive": [(r - s - 1) % size for r in range(size)]})
    for s in range(size - 1):
        steps.append({"phase": "all-gather", "step": s,
                      "send": [(r - s + 1) % size for r in range(size)],
                      "receive": [(r - s) % size for r in range(size)]})
    return steps


def ring_bytes_per_rank(n_bytes: float, size: int) -> float:
    """Bytes each rank sends in a ring all-reduce of ``n_bytes``: 2(N - 1)/N · n_bytes."""
    return 2 * (size - 1) / size * n_bytes if size > 1 else 0.0


def ring_bytes_sent(n: int, size: int, itemsize: int) -> list[int]:
    """Exact bytes each rank sends in a ring all-reduce of ``n`` elements, with the chunks of
    :func:`chunk_bounds` (they differ by at most one element)."""
    bounds = chunk_bounds(n, size)
    length = [stop - start for start, stop in bounds]
    totals = [0] * size
    for step in ring_schedule(size):
        for rank, chunk in enumerate(step["send"]):
            totals[rank] += length[chunk] * itemsize
    return totals


def ring_allreduce_mean(comm, x):
    """The element-wise mean of ``x`` over every rank of ``comm``, by a ring of Sendrecv
    messages (reduce-scatter, then all-gather); ``x`` is left unchanged."""
    rank, size = comm.Get_rank(), comm.Get_size()
    data = np.array(x, copy=True)
    bounds = chunk_bounds(data.size, size)
    right, left = (rank + 1) % size, (rank - 1) % size
    for step in range(size - 1):  # reduce-scatter: add what arrives to our copy of that chunk
        s0, s1 = bounds[(rank - step) % size]
        r0, r1 = bounds[(rank - step - 1) % size]
        incoming = np.empty(r1 - r0, dtype=data.dtype)
        comm.Sendrecv(data[s0:s1], dest=right, recvbuf=incoming, source=left)
        data[r0:r1] += incoming
    for step in range(size - 1):  # all-gather: pass the finished chunks round the ring
        s0, s1 = bounds[(rank - step + 1) % size]
        r0, r1 = bounds[(rank - step) % size]
        incoming = np.empty(r1 - r0, dtype=data.dtype)
        comm.Sendrecv(data[s0:s1], dest=right, recvbuf=incoming, source=left)
        data[r0:r1] = incoming
    return data / size


__all__ = ["chunk_bounds", "ring_allreduce_mean", "ring_bytes_per_rank", "ring_bytes_sent",
           "ring_schedule"]
