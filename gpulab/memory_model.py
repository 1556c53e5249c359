"""How many memory transactions a warp's reads cost: the coalescing model of chapter 02.

The 32 threads of a warp, while converged on one instruction (the usual case, not a guarantee:
since Volta they may diverge), issue their loads together, as one *request*. Device memory is read
in **sectors** of 32 bytes (grouped in 128-byte cache lines), so a request costs as many
sectors as the distinct 32-byte pieces its 32 addresses fall in — the "sectors per request"
that NVIDIA's Nsight Compute reports (``l1tex__t_sectors_pipe_lsu_mem_global_op_ld`` /
``..._t_requests_...``; see the Nsight Compute Kernel Profiling Guide, "Memory Tables",
https://docs.nvidia.com/nsight-compute/ProfilingGuide/, and the CUDA C++ Best Practices Guide,
"Coalesced Access to Global Memory",
https://docs.nvidia.com/cuda/cuda-c-best-practices-guide/#coalesced-access-to-global-memory).

- 32 threads reading 32 neighbouring float32 values: 128 bytes, **4 sectors** — every byte
  fetched is used (coalesced).
- Thread i reading element ``i * stride``: the addresses spread out, and with
  ``stride * itemsize >= 32`` every thread needs a sector of its own: **32 sectors**, of
  which the warp uses ``itemsize`` bytes each. The memory system moves 8x (float32) the bytes
  the kernel uses.

The model counts sectors from the index each thread reads, assuming (as ``cudaMalloc``
guarantees) that arrays start on a 256-byte boundary. It ignores caches: a sector one warp
fetched may still be in L1/L2 when another warp needs it, which a real GPU exploits.

Where the indices come from
- :func:`copy_access` takes them from the index functions of :mod:`gpulab.kernels.memory`
  (the arithmetic the copy kernels use);
- :func:`trace_reads` records them from a real run of a kernel in Numba's CUDA simulator:
  the array is replaced by a :class:`~gpulab.instruments.RecordingArray` (the simulator
  instrument, at home in :mod:`gpulab.instruments`) that notes which simulated thread read
  which element, in which order. ``tests/test_memory_model.py`` checks the two agree.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from gpulab.hardware import SHARED_BANK_BYTES, SHARED_BANKS
from gpulab.instruments import RecordingArray, launchable

WARP_SIZE = 32
SECTOR_BYTES = 32
LINE_BYTES = 128


@dataclass(frozen=True)
class WarpRequest:
    """The reads the threads of one warp issue together: the k-th read of each thread.

    ``element_indices`` holds one index per active thread (fewer than 32 in a partial warp).
    """

    block: int
    warp: int
    step: int
    element_indices: tuple[int, ...]
    itemsize: int

    @property
    def byte_addresses(self) -> list[int]:
        return [index * self.itemsize for index in self.element_indices]

    @property
    def sectors(self) -> set[int]:
        """The 32-byte sectors touched (an element never straddles two: itemsize divides 32)."""
        return {address // SECTOR_BYTES for address in self.byte_addresses}

    @property
    def lines(self) -> set[int]:
        return {address // LINE_BYTES for address in self.byte_addresses}

    @property
    def bytes_requested(self) -> int:
        """Bytes the threads asked for; threads reading the same element count once (the
        hardware broadcasts it)."""
        return len(set(self.element_indices)) * self.itemsize

    @property
    def bytes_fetched(self) -> int:
        return len(self.sectors) * SECTOR_BYTES


@dataclass(frozen=True)
class AccessSummary:
    """What a kernel's reads of one array cost, over all its warp requests."""

    requests: tuple[WarpRequest, ...]
    itemsize: int
    source: str  # where the indices came from, e.g. "traced in the simulator"

    @property
    def n_requests(self) -> int:
        return len(self.requests)

    @property
    def sectors(self) -> int:
        return sum(len(r.sectors) for r in self.requests)

    @property
    def sectors_per_request(self) -> float:
        return self.sectors / self.n_requests if self.requests else 0.0

    @property
    def lines_per_request(self) -> float:
        return sum(len(r.lines) for r in self.requests) / self.n_requests if self.requests else 0.0

    @property
    def bytes_requested(self) -> int:
        return sum(r.bytes_requested for r in self.requests)

    @property
    def bytes_fetched(self) -> int:
        return sum(r.bytes_fetched for r in self.requests)

    @property
    def efficiency(self) -> float:
        """Bytes used / bytes fetched: 1.0 when coalesced."""
        return self.bytes_requested / self.bytes_fetched if self.bytes_fetched else 1.0

    @property
    def ideal_sectors_per_request(self) -> float:
        """Sectors a full warp of neighbouring elements would need: 32 * itemsize / 32."""
        return WARP_SIZE * self.itemsize / SECTOR_BYTES

    def __str__(self) -> str:
        return (f"{self.sectors_per_request:.3g} sectors of {SECTOR_BYTES} B per warp request "
                f"(ideal {self.ideal_sectors_per_request:g}), {self.lines_per_request:.3g} "
                f"cache lines of {LINE_BYTES} B; {self.bytes_fetched:,} bytes fetched for "
                f"{self.bytes_requested:,} used ({self.efficiency * 100:.3g}% efficiency; "
                f"{self.n_requests} requests, {self.source})")


def warp_requests(reads: Mapping[tuple[int, int], Sequence[int]], itemsize: int,
                  warp_size: int = WARP_SIZE) -> list[WarpRequest]:
    """Group reads into warp requests.

    ``reads[(block, thread)]`` lists the element indices thread ``thread`` (its linear index
    in the block) of block ``block`` read, in order. The k-th read of the threads of one warp
    (threads ``w*32 .. w*32+31`` of a block) form one request, as the warp executes the load
    instruction together.
    """
    if itemsize not in (1, 2, 4, 8, 16, 32):
        raise ValueError(f"itemsize must divide {SECTOR_BYTES} bytes, not {itemsize!r}")
    grouped: dict[tuple[int, int, int], list[tuple[int, int]]] = defaultdict(list)
    for (block, thread), indices in reads.items():
        for step, index in enumerate(indices):
            grouped[block, thread // warp_size, step].append((thread, int(index)))
    return [
        WarpRequest(block, warp, step, tuple(index for _, index in sorted(members)), itemsize)
        for (block, warp, step), members in sorted(grouped.items())
    ]


def summarise(reads: Mapping[tuple[int, int], Sequence[int]], itemsize: int,
              source: str) -> AccessSummary:
    """An :class:`AccessSummary` of ``reads`` (as for :func:`warp_requests`)."""
    return AccessSummary(tuple(warp_requests(reads, itemsize)), itemsize, source)


def reads_from_index_function(read_index, n_threads: int, threads_per_block: int
                              ) -> dict[tuple[int, int], list[int]]:
    """{(block, thread): [read_index(global index)]} for a one-thread-per-element launch."""
    return {
        (g // threads_per_block, g % threads_per_block): [read_index(g)]
        for g in range(n_threads)
    }


def copy_access(stride: int, n_threads: int = 1024, itemsize: int = 4,
                threads_per_block: int = 256) -> AccessSummary:
    """The reads of ``copy_strided`` (``copy_coalesced`` for stride 1) by ``n_threads``
    threads, from the kernels' own index functions."""
    from gpulab.kernels.memory import coalesced_read_index, strided_read_index

    if stride == 1:
        read_index = coalesced_read_index
    else:
        def read_index(thread):
            return strided_read_index(thread, stride)
    reads = reads_from_index_function(read_index, n_threads, threads_per_block)
    return summarise(reads, itemsize, "from the kernel's index arithmetic")


def predicted_sectors_per_request(stride: int, itemsize: int = 4) -> int:
    """Closed form for a full warp reading elements ``i * stride`` from an aligned array:
    the warp spans ``32 * stride * itemsize`` bytes, one sector per 32 of them, but never
    more than one sector per thread."""
    span_bytes = WARP_SIZE * stride * itemsize
    return min(WARP_SIZE, -(-span_bytes // SECTOR_BYTES))


# --- tracing a real kernel in the simulator ---------------------------------------------------


def trace_reads(kernel, blocks, threads, args: Iterable, watch: int) -> AccessSummary:
    """Run ``kernel[blocks, threads](*args)`` in the simulator with argument number ``watch``
    (a 1-D NumPy array) replaced by a :class:`RecordingArray`, and summarise its reads.

    Only in the ``sim`` tier: a GPU does not tell Python which addresses it read.
    """
    from gpulab import device

    if device.tier() != "sim":
        raise RuntimeError("trace_reads runs kernels in the simulator; in the gpu tier use "
                           "copy_access (the model) or a profiler such as Nsight Compute")
    args = list(args)
    recorder = RecordingArray(args[watch])
    args[watch] = recorder
    launchable(kernel)[blocks, threads](*args)
    return summarise(recorder.reads, recorder.dtype.itemsize, "traced in the simulator")


def trace_copy(stride: int, n_threads: int = 256, dtype=np.float32,
               threads_per_block: int = 128) -> AccessSummary:
    """Run ``copy_strided`` (``copy_coalesced`` for stride 1) for real in the simulator on
    ``n_threads`` outputs and summarise the reads of x it made."""
    from gpulab.kernels import memory

    x = np.arange(n_threads * stride, dtype=dtype)
    out = np.zeros(n_threads, dtype=dtype)
    blocks = -(-n_threads // threads_per_block)
    if stride == 1:
        return trace_reads(memory.copy_coalesced, blocks, threads_per_block, [x, out], watch=0)
    return trace_reads(memory.copy_strided, blocks, threads_per_block, [x, out, stride], watch=0)


# --- shared memory: banks ---------------------------------------------------------------------
#
# Shared memory is split into SHARED_BANKS banks, each serving one 4-byte word per clock
# (hardware.SHARED_BANDWIDTH_SOURCE: compute capability 5.x and later). Word w lives in bank
# w % 32. A warp's request is served in as many passes ("wavefronts", as Nsight Compute calls
# them) as the most *distinct* words it asks of one bank: threads asking for the same word share
# it (a broadcast). 32 threads reading down a column of a 32-wide float32 tile ask one bank for
# 32 words: 32 passes, a 32-way bank conflict. The simulator has no banks; this counts them from
# the indices a trace recorded.


@dataclass(frozen=True)
class SharedRequest:
    """The k-th read (or write) of one shared array by each thread of one warp, which the warp
    issues together: ``words`` holds the 4-byte word each active thread touches (several for
    an element wider than 4 bytes)."""

    block: object
    warp: int
    step: int
    array: str
    words: tuple[int, ...]

    @property
    def ways(self) -> int:
        """The passes the request takes: the most distinct words it asks of one bank (1: free of
        conflicts; 32: one word per pass). Exact for elements of 4 bytes or fewer; for wider
        ones a lower bound (how a GPU splits a warp's 8-byte accesses is not modelled)."""
        return len(self.busiest_bank[1])

    @property
    def busiest_bank(self) -> tuple[int, tuple[int, ...]]:
        """(bank, the distinct words asked of it, smallest first) for the bank asked for the most
        distinct words (the lowest such bank); (0, ()) for a request with no words."""
        per_bank: dict[int, set[int]] = defaultdict(set)
        for word in self.words:
            per_bank[word % SHARED_BANKS].add(word)
        bank = max(sorted(per_bank), key=lambda b: len(per_bank[b]), default=0)
        return bank, tuple(sorted(per_bank.get(bank, ())))


def shared_requests(trace, kind: str = "read") -> list[SharedRequest]:
    """The warp requests of a traced kernel's shared-memory reads (``kind="write"``: writes),
    from a :class:`~gpulab.instruments.KernelTrace`: a thread's k-th access of a shared array
    is grouped with the k-th access of the same array by the other threads of its warp (warp w
    of a block: its threads w*32 .. w*32+31, x fastest). That is the instruction the warp runs
    together, while the threads do not diverge."""
    block_shape = trace.block if isinstance(trace.block, tuple) else (trace.block,)
    steps: dict[tuple, int] = defaultdict(int)
    grouped: dict[tuple, list[tuple[int, tuple[int, ...]]]] = defaultdict(list)
    for access in trace.accesses:
        if access.space != "shared" or access.kind != kind:
            continue
        block, thread = access.thread
        position = thread if isinstance(thread, tuple) else (thread,)
        linear = int(np.ravel_multi_index(position, block_shape, order="F"))  # x fastest
        step = steps[block, linear, access.array]
        steps[block, linear, access.array] += 1
        size = trace.itemsizes.get(access.array, SHARED_BANK_BYTES)
        element = int(np.ravel_multi_index(access.index, trace.shapes[access.array]))
        first = element * size // SHARED_BANK_BYTES
        words = tuple(range(first, first + max(1, size // SHARED_BANK_BYTES)))
        grouped[block, linear // WARP_SIZE, step, access.array].append((linear, words))
    return [SharedRequest(block, warp, step, array,
                          tuple(word for _, words in sorted(members) for word in words))
            for (block, warp, step, array), members in sorted(grouped.items(), key=str)]


def worst_bank_conflict(trace, kind: str = "read") -> SharedRequest | None:
    """The shared request of ``trace`` that takes the most passes (:func:`shared_requests`),
    or None when the kernel made no shared access of that kind."""
    return max(shared_requests(trace, kind), key=lambda request: request.ways, default=None)


__all__ = [
    "LINE_BYTES", "SECTOR_BYTES", "SHARED_BANKS", "WARP_SIZE", "AccessSummary", "SharedRequest",
    "WarpRequest", "copy_access", "predicted_sectors_per_request", "reads_from_index_function",
    "shared_requests", "summarise", "trace_copy", "trace_reads", "warp_requests",
    "worst_bank_conflict",
]
