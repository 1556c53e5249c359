"""Matrix multiplication C = A @ B, for A of shape (M, K) and B of shape (K, N), any M, N, K.

Every variant does the same 2·M·N·K FLOPs (K multiply-adds per element of C). They differ in
how often each element of A and B is loaded from device memory, which is what sets their speed.

Variants, in the order chapter 03 teaches them
- ``matmul_naive``: one thread per element of C; it reads a row of A and a column of B straight
  from device memory: 2K loads for 2K FLOPs. A is loaded N times over, B M times.
- ``matmul_tiled``: a block of T x T threads computes a T x T tile of C. The block walks along K
  in steps of T; at each step it copies a T x T tile of A and one of B into shared memory, waits
  (``syncthreads``), and every thread does T multiply-adds from shared memory. Each element of
  A and B is now loaded from device memory N/T (resp. M/T) times: T times fewer. T is a launch
  parameter (the block's side, at most :data:`MAX_TILE`).
- ``matmul_register_blocked``: the fast one. A block of 256 threads computes a 128 x 128 tile of
  C, and each thread computes 8 x 8 elements of it, held in registers. For each k, a thread
  loads 8 values of A and 8 of B from shared memory and does 64 multiply-adds with them (an
  outer product): 16 shared loads per 64 multiply-adds where the tiled kernel needs 2 per one,
  8x fewer. Device-memory loads per FLOP: 1/128 of naive (the block's 128 x 128 tile).

Traffic model (used for the roofline, :func:`traffic_bytes`): if no cache helped, a kernel
that computes C in tiles of tile_m x tile_n loads A N/tile_n times and B M/tile_m times, and
writes C once: ``itemsize * (M*K*ceil(N/tile_n) + K*N*ceil(M/tile_m) + M*N)`` bytes. The naive
kernel is the case tile = 1. Real GPUs cache some of those loads in L1/L2, so this is the
traffic the kernel *asks* for, an upper bound on what reaches DRAM.

All kernels accumulate in the inputs' dtype (float32 or float64) and zero-fill tiles past the
edges of A and B, so sizes need not be multiples of any tile.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import cuda

from gpulab import device
from gpulab.kernels.arrays import (
    SUPPORTED_DTYPES,
    InputError,
    as_array,
    finish,
    one_of,
    output,
    same_dtype,
    to_device,
    whole_number,
)
from gpulab.kernels.registry import for_float_dtypes, kernel

METHODS = ("naive", "tiled", "register_blocked")
MATRIX_SIGNATURE = "void({t}[:, ::1], {t}[:, ::1], {t}[:, ::1])"

# matmul_tiled: the shared tiles are allocated at the largest size and the block's side
# (blockDim.x) is the tile actually used, so one compiled kernel serves every tile size.
MAX_TILE = 32  # 32 x 32 = 1024 threads, the most a block may have
TILE_SIZES = (4, 8, 16, 32)

# matmul_register_blocked: a block computes BLOCK_M x BLOCK_N of C; each of its
# (BLOCK_M / THREAD_M) * (BLOCK_N / THREAD_N) = 256 threads computes THREAD_M x THREAD_N.
BLOCK_M = 128
BLOCK_N = 128
BLOCK_K = 8
THREAD_M = 8
THREAD_N = 8
THREADS_N = BLOCK_N // THREAD_N  # 16 threads across a block's columns
THREADS_M = BLOCK_M // THREAD_M  # 16 threads down its rows
REGISTER_BLOCKED_THREADS = THREADS_M * THREADS_N  # 256
A_LOADS = BLOCK_M * BLOCK_K // REGISTER_BLOCKED_THREADS  # elements of A each thread copies
B_LOADS = BLOCK_K * BLOCK_N // REGISTER_BLOCKED_THREADS
A_TILE_PAD = 4  # a_tile rows of BLOCK_M + 4: the transposing stores hit 32 different banks
A_TILE_COLUMNS = BLOCK_M + A_TILE_PAD  # a shared array's shape must be a global constant


@kernel(*for_float_dtypes(MATRIX_SIGNATURE))
def matmul_naive(A, B, C):
    """C[row, col] = sum over k of A[row, k] * B[k, col]; one thread per element of C.

    Per thread: reads K elements of A (a row) and K of B (a column) from device memory, does
    2K FLOPs, writes one element. No shared memory, no synchronisation. x runs along the
    columns, and a warp is 32 threads of a block with threadIdx.x varying fastest: with blocks
    blockDim.x wide it covers 32 / blockDim.x rows of blockDim.x columns (one row only for
    blocks 32 wide; two rows of 16 for 16 x 16 blocks). Per k, the threads of one row read the
    same A[row, k] (a broadcast) and neighbouring B[k, col] (coalesced), and they write
    neighbouring C[row, col].
    """
    col, row = cuda.grid(2)  # x runs along the columns: threads next to each other in x share a row
    if row < C.shape[0] and col < C.shape[1]:
        acc = C.dtype.type(0)
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


@kernel(*for_float_dtypes(MATRIX_SIGNATURE))
def matmul_tiled(A, B, C):
    """C = A @ B in T x T tiles staged in shared memory; T = blockDim.x = blockDim.y.

    Per step along K, each thread copies one element of A's tile and one of B's from device
    memory into shared memory (0 past the edges), ``syncthreads`` so the tiles are complete,
    does T multiply-adds from shared memory, and ``syncthreads`` again before the tiles are
    overwritten. Per thread: 2 * ceil(K/T) loads from device memory (T times fewer than
    naive), 2 * ceil(K/T) barriers, 2 * ceil(K/T) * T FLOPs (the zero padding included), one
    write.
    """
    a_tile = cuda.shared.array((MAX_TILE, MAX_TILE), A.dtype)
    b_tile = cuda.shared.array((MAX_TILE, MAX_TILE), A.dtype)
    tile = cuda.blockDim.x
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * tile + ty
    col = cuda.blockIdx.x * tile + tx
    zero = A.dtype.type(0)
    acc = zero
    for k0 in range(0, A.shape[1], tile):
        if row < A.shape[0] and k0 + tx < A.shape[1]:  # thread (ty, tx) copies A[row, k0 + tx]
            a_tile[ty, tx] = A[row, k0 + tx]
        else:
            a_tile[ty, tx] = zero
        if k0 + ty < B.shape[0] and col < B.shape[1]:  # ... and B[k0 + ty, col]
            b_tile[ty, tx] = B[k0 + ty, col]
        else:
            b_tile[ty, tx] = zero
        cuda.syncthreads()  # both tiles complete
        for k in range(tile):
            acc += a_tile[ty, k] * b_tile[k, tx]
        cuda.syncthreads()  # everyone done with the tiles before the next step overwrites them
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


@kernel(*for_float_dtypes(MATRIX_SIGNATURE))
def matmul_register_blocked(A, B, C):
    """C = A @ B: a block of 256 threads computes 128 x 128 of C, each thread 8 x 8 of it.

    Thread (tr, tc) = (t // 16, t % 16) owns rows tr, tr + 16, ..., tr + 112 and columns
    tc, tc + 16, ..., tc + 112 of the block's tile (spread out: a warp, t = 32w ... 32w + 31,
    is 2 values of tr and 16 of tc, so its shared-memory reads are 2 broadcast words of a_tile
    and 16 neighbouring words of b_tile, free of bank conflicts, and it writes 16 neighbouring
    columns of C in each of 2 rows). Per step of BLOCK_K = 8 along K: each thread copies 4
    elements of A and 4 of B into shared memory (A transposed, 0 past the edges),
    ``syncthreads``; then for each of the 8 k it loads 8 values of A and 8 of B from shared
    memory into registers and does 64 multiply-adds into its 8 x 8 accumulators (registers);
    ``syncthreads``. Device-memory loads per FLOP: 1/128 of naive (per step, 8 loads for
    8 x 64 multiply-adds, 1/64 per multiply-add; naive makes 2 per multiply-add). Per thread:
    2 * 64 * K FLOPs (K rounded up to a multiple of 8), 64 writes.
    """
    a_tile = cuda.shared.array((BLOCK_K, A_TILE_COLUMNS), A.dtype)  # a_tile[k, m]
    b_tile = cuda.shared.array((BLOCK_K, BLOCK_N), A.dtype)  # b_tile[k, n]
    acc = cuda.local.array((THREAD_M, THREAD_N), A.dtype)
    a_frag = cuda.local.array(THREAD_M, A.dtype)
    b_frag = cuda.local.array(THREAD_N, A.dtype)
    M = A.shape[0]
    K = A.shape[1]
    N = B.shape[1]
    t = cuda.threadIdx.x
    tr = t // THREADS_N
    tc = t % THREADS_N
    block_row = cuda.blockIdx.y * BLOCK_M
    block_col = cuda.blockIdx.x * BLOCK_N
    zero = A.dtype.type(0)
    for i in range(THREAD_M):
        for j in range(THREAD_N):
            acc[i, j] = zero
    for k0 in range(0, K, BLOCK_K):
        # The two copy loops look alike but stay two loops on purpose: A's tile is stored
        # transposed (a_tile[k, m], so that the 8 values of A a thread needs for one k lie in
        # one row), B's as it is. A shared helper would need a flag for that, and would hide
        # which copy transposes in the source that chapter 03 prints.
        for load in range(A_LOADS):  # 32 threads copy 4 rows x 8 consecutive k of A
            e = load * REGISTER_BLOCKED_THREADS + t
            m = e // BLOCK_K
            kk = e % BLOCK_K
            if block_row + m < M and k0 + kk < K:
                a_tile[kk, m] = A[block_row + m, k0 + kk]
            else:
                a_tile[kk, m] = zero
        for load in range(B_LOADS):  # 32 threads copy 32 consecutive columns of a row of B
            e = load * REGISTER_BLOCKED_THREADS + t
            kk = e // BLOCK_N
            n = e % BLOCK_N
            if k0 + kk < K and block_col + n < N:
                b_tile[kk, n] = B[k0 + kk, block_col + n]
            else:
                b_tile[kk, n] = zero
        cuda.syncthreads()
        for kk in range(BLOCK_K):
            for i in range(THREAD_M):
                a_frag[i] = a_tile[kk, tr + i * THREADS_M]
            for j in range(THREAD_N):
                b_frag[j] = b_tile[kk, tc + j * THREADS_N]
            for i in range(THREAD_M):
                for j in range(THREAD_N):
                    acc[i, j] += a_frag[i] * b_frag[j]
        cuda.syncthreads()
    for i in range(THREAD_M):
        row = block_row + tr + i * THREADS_M
        if row < M:
            for j in range(THREAD_N):
                col = block_col + tc + j * THREADS_N
                if col < N:
                    C[row, col] = acc[i, j]


# --- counts -----------------------------------------------------------------------------------


def flops(M: int, N: int, K: int) -> int:
    """2·M·N·K: each of the M·N elements of C needs K multiplies and K adds."""
    return 2 * M * N * K


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def output_tile(method: str, tile: int | None = None) -> tuple[int, int]:
    """(rows, columns) of C one block computes: 1 x 1 for naive (each thread alone)."""
    if method == "naive":
        return 1, 1
    if method == "tiled":
        return (tile or default_tile()), (tile or default_tile())
    one_of("method", method, METHODS)
    return BLOCK_M, BLOCK_N


def traffic_bytes(M: int, N: int, K: int, method: str, tile: int | None = None,
                  itemsize: int = 4) -> int:
    """Device-memory bytes the kernel asks for if no cache helped (the module's traffic model):
    A is loaded once per block column, B once per block row, C written once."""
    tile_m, tile_n = output_tile(method, tile)
    return itemsize * (M * K * _ceil_div(N, tile_n) + K * N * _ceil_div(M, tile_m) + M * N)


def minimum_bytes(M: int, N: int, K: int, itemsize: int = 4) -> int:
    """A, B read once and C written once: the least any matmul must move."""
    return itemsize * (M * K + K * N + M * N)


# The kernel families of the published matmul series (and the course's three among them), as
# the GPU model sees them (gpulab.hardware.estimate_time's terms).
FAMILIES = ("naive_uncoalesced", "naive_coalesced", "shared_tiled", "blocktiled_1d",
            "blocktiled_2d", "vectorized", "warptiled", "cublas")
FAMILY_OF_METHOD = {"naive": "naive_coalesced", "tiled": "shared_tiled",
                    "register_blocked": "blocktiled_2d"}


def family_costs(family: str, M: int, N: int, K: int, threads: tuple[int, int] = (32, 32),
                 block_tile: tuple[int, int, int] | None = None,
                 thread_tile: tuple[int, int] = (1, 1), itemsize: int = 4) -> dict:
    """What a matmul of ``family`` asks of the GPU, as keyword arguments for
    :func:`gpulab.hardware.estimate_time`: device-memory bytes without and with cache reuse,
    bytes loaded from shared memory or L1, the FMA share of the inner loop's instructions,
    and the launch (blocks, threads per block).

    - ``naive_*``: one thread per element of C, blocks of ``threads`` = (x, y); each k loads
      one A and one B value per thread through L1. A warp spans ``wx = min(x, 32)`` columns
      and ``32 / wx`` rows: ``naive_coalesced`` (x along the columns, as gpulab's
      ``matmul_naive``) fetches one 32-B sector of A per row (a broadcast) and ``wx * 4`` bytes
      of B per k; ``naive_uncoalesced`` (x along the rows) fetches a sector of A per thread.
      Without reuse every fetch goes to DRAM; with reuse, L1/L2 serve all but the compulsory
      traffic. Either way each fetch crosses L1 (the shared-memory term). Inner loop: 2 loads
      + 1 FMA.
    - tiled families: a block computes ``block_tile`` = (BM, BN, BK) of C per step of BK, each
      thread ``thread_tile`` = (TM, TN); per k a thread loads TM values of A and TN of B from
      shared memory (4 at a time for ``vectorized``/``warptiled``) for TM x TN FMAs. DRAM: A
      read ceil(N / BN) times, B ceil(M / BM) times (:func:`traffic_bytes`).
    - ``cublas``: compulsory traffic and every issue slot an FMA (its internals are NVIDIA's);
      no launch given, so the model assumes it fills the GPU.
    """
    one_of("family", family, FAMILIES)
    fmas = M * N * K
    compulsory = minimum_bytes(M, N, K, itemsize)
    if family == "cublas":
        return {"bytes_moved": compulsory, "bytes_with_reuse": compulsory}
    if family.startswith("naive"):
        x, y = (int(v) for v in threads)
        warp_x = min(x, 32)
        warp_rows = max(32 // warp_x, 1)
        if family == "naive_coalesced":
            fetched_per_warp_k = 32 * warp_rows + warp_rows * _ceil_div(warp_x * itemsize, 32) * 32
        else:  # x runs along the rows: every thread its own sector of A; B broadcast per row
            fetched_per_warp_k = 32 * 32 + 32 * _ceil_div(warp_rows * itemsize, 32)
        fetched = fmas / 32 * fetched_per_warp_k
        return {"bytes_moved": fetched + itemsize * M * N, "bytes_with_reuse": compulsory,
                "shared_load_bytes": fetched, "fma_share": 1 / 3,
                "blocks": _ceil_div(N, x) * _ceil_div(M, y), "threads_per_block": x * y}
    BM, BN, _ = block_tile
    TM, TN = thread_tile
    per_load = 4 if family in ("vectorized", "warptiled") else 1
    loads_per_k = (TM + TN) / per_load
    return {"bytes_moved": itemsize * (M * K * _ceil_div(N, BN) + K * N * _ceil_div(M, BM)
                                       + M * N),
            "bytes_with_reuse": compulsory,
            "shared_load_bytes": fmas * itemsize * (TM + TN) / (TM * TN),
            "fma_share": TM * TN / (TM * TN + loads_per_k),
            "blocks": _ceil_div(N, BN) * _ceil_div(M, BM),
            "threads_per_block": (BM * BN) // (TM * TN)}


def kernel_costs(method: str, M: int, N: int, K: int, tile: int | None = None,
                 itemsize: int = 4) -> dict:
    """:func:`family_costs` of gpulab's own ``matmul_<method>`` with the launch
    :func:`launch_config` gives it."""
    config = launch_config(M, N, K, method, tile)
    if method == "naive":
        return family_costs("naive_coalesced", M, N, K, tuple(config.threads), itemsize=itemsize)
    if method == "tiled":
        return family_costs("shared_tiled", M, N, K, block_tile=(config.tile,) * 3,
                            itemsize=itemsize)
    return family_costs("blocktiled_2d", M, N, K, block_tile=(BLOCK_M, BLOCK_N, BLOCK_K),
                        thread_tile=(THREAD_M, THREAD_N), itemsize=itemsize)


# --- launches ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class MatmulLaunch:
    """A 2-D launch: ``blocks`` = (along N, along M), ``threads`` = threads per block."""

    method: str
    M: int
    N: int
    K: int
    blocks: tuple[int, int]
    threads: tuple[int, ...]
    tile: int | None = None

    @property
    def threads_per_block(self) -> int:
        return int(np.prod(self.threads))

    @property
    def total_threads(self) -> int:
        return self.blocks[0] * self.blocks[1] * self.threads_per_block

    @property
    def barriers_per_block(self) -> int:
        """syncthreads() each block passes: 2 per step along K (0 for naive)."""
        if self.method == "naive":
            return 0
        step = self.tile if self.method == "tiled" else BLOCK_K
        return 2 * _ceil_div(self.K, step)

    def __str__(self) -> str:
        what = {"naive": "1 element of C per thread",
                "tiled": f"{self.tile} x {self.tile} tiles in shared memory",
                "register_blocked": f"{BLOCK_M} x {BLOCK_N} of C per block, {THREAD_M} x "
                                    f"{THREAD_N} per thread"}[self.method]
        return (f"matmul_{self.method}: {self.blocks[0]} x {self.blocks[1]} blocks of "
                f"{' x '.join(map(str, self.threads))} threads for C of {self.M} x {self.N}, "
                f"K = {self.K} ({what})")


def default_tile() -> int:
    """16 x 16 = 256 threads on a GPU; 8 x 8 in the simulator (fewer simulated threads)."""
    return 16 if device.tier() == "gpu" else 8


def check_tile(tile) -> int:
    """The side of a tiled block: a whole number in 1..MAX_TILE."""
    return whole_number("tile", tile, 1, MAX_TILE,
                        why=f": a block of tile x tile threads may have at most 1024 threads, "
                            f"and the shared tiles hold {MAX_TILE} x {MAX_TILE}")


def launch_config(M: int, N: int, K: int, method: str = "register_blocked",
                  tile: int | None = None) -> MatmulLaunch:
    """The launch :func:`matmul` uses for C of M x N (and K) with ``method``."""
    one_of("method", method, METHODS)
    if tile is not None and method == "register_blocked":
        raise InputError(f"matmul_register_blocked has a fixed {BLOCK_M} x {BLOCK_N} tile; "
                         "pass tile only with method='naive' or 'tiled'")
    if method == "register_blocked":
        blocks = (_ceil_div(N, BLOCK_N), _ceil_div(M, BLOCK_M))
        return MatmulLaunch(method, M, N, K, blocks, (REGISTER_BLOCKED_THREADS,))
    side = check_tile(tile if tile is not None else default_tile())
    blocks = (_ceil_div(N, side), _ceil_div(M, side))
    return MatmulLaunch(method, M, N, K, blocks, (side, side),
                        tile=side if method == "tiled" else None)


_KERNELS = {"naive": matmul_naive, "tiled": matmul_tiled,
            "register_blocked": matmul_register_blocked}


def kernel_for(method: str):
    """The kernel ``matmul_<method>``."""
    return _KERNELS[one_of("method", method, METHODS)]


def launch(config: MatmulLaunch, d_A, d_B, d_C) -> None:
    """Launch the kernel of ``config.method`` on device arrays (used by benchmarks)."""
    kernel_for(config.method)[config.blocks, config.threads](d_A, d_B, d_C)


# --- the wrapper ------------------------------------------------------------------------------


def matmul_operands(A, B, dtypes=SUPPORTED_DTYPES, how: str | None = None,
                    on_device: bool = True):
    """Check A (M x K) and B (K x N) as matrices of one dtype among ``dtypes`` (see
    :func:`gpulab.kernels.arrays.as_array`) whose inner dimensions agree; return them."""
    A, B = as_array("A", A, 2, dtypes, how, on_device), as_array("B", B, 2, dtypes, how, on_device)
    if A.shape[1] != B.shape[0]:
        raise InputError(f"A is {A.shape[0]} x {A.shape[1]} and B is {B.shape[0]} x {B.shape[1]}: "
                         f"A's columns ({A.shape[1]}) must equal B's rows ({B.shape[0]})")
    same_dtype("B", B, "A", A)
    return A, B


def matmul(A, B, method: str = "register_blocked", tile: int | None = None, out=None):
    """A @ B on the device with the kernel ``matmul_<method>``. NumPy in, NumPy out; device
    arrays in, device array out; with ``out``, written into it. ``tile`` is the block's side
    for ``naive`` and ``tiled``.

    >>> matmul([[1, 2]], [[3], [4]], method="naive").tolist()
    [[11.0]]
    """
    A, B = matmul_operands(A, B)
    M, K = A.shape
    N = B.shape[1]
    config = launch_config(M, N, K, method, tile)
    d_C = output(out, (M, N), A, "A")
    launch(config, to_device(A), to_device(B), d_C)
    return finish(d_C, out, A, B)


__all__ = [
    "BLOCK_K", "BLOCK_M", "BLOCK_N", "MAX_TILE", "METHODS", "THREAD_M", "THREAD_N", "TILE_SIZES",
    "FAMILIES", "FAMILY_OF_METHOD", "MatmulLaunch", "check_tile", "default_tile",
    "family_costs", "flops", "kernel_costs", "kernel_for", "launch",
    "launch_config",
    "matmul", "matmul_naive", "matmul_operands", "matmul_register_blocked", "matmul_tiled",
    "minimum_bytes", "output_tile", "traffic_bytes",
]
