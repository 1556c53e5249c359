"""Chapter 03's exercises: a naive matmul, then the tiled one with shared memory.

Each check takes your ``@cuda.jit`` kernel ``kernel(A, B, C)`` (not launched), runs it with a
2-D grid on random matrices whose sizes M, N, K differ from each other and are not multiples of
the block's side, compares C with :mod:`gpulab.reference` (within the rounding bound
``K * eps * (|A| @ |B|)`` of a float32 sum in any order), prints what it found and returns a
:class:`~gpulab.exercises.checks.CheckResult`::

    from gpulab.exercises.ch03 import check_matmul_naive
    check_matmul_naive(my_matmul)

The launch is ``kernel[(ceil(N / side), ceil(M / side)), (side, side)]``: the x index runs
along the columns of C, the y index along its rows (``col, row = cuda.grid(2)``).
A, B and C are views of larger buffers: a thread past an edge raises ``IndexError`` in the
simulator, and on a GPU its write lands in padding the check inspects.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gpulab import device, reference
from gpulab.exercises.checks import (
    CheckFailedError,
    CheckResult,
    KernelSource,
    Launched,
    block_2d,
    count_calls,
    launch,
    padded,
    plain_writes_to,
    read_back,
    run_check,
    start_kernel,
)

PAD_VALUE = 100.0  # beyond the edges of A and B (seen only by a kernel without guards, on a GPU)
TILE = 8  # the tile of the tiled exercise in the simulator (16 on a GPU)
EDGE_HINT = (
    "a thread read or wrote outside a matrix: guard the write with "
    "`if row < C.shape[0] and col < C.shape[1]:`, and the loads with the matrix's own sizes."
)
INDEX_HINT = (
    "take `col, row = cuda.grid(2)`: the x index runs along the columns of C (neighbouring "
    "threads, neighbouring columns), the y index along its rows; then "
    "`C[row, col] = sum of A[row, k] * B[k, col]` for k in range(A.shape[1])."
)
SYNC_HINT = (
    "call `cuda.syncthreads()` after loading both tiles (so they are complete before anyone "
    "reads them) and again after the inner loop (so nobody overwrites a tile another thread "
    "still reads)."
)
EDGE_TILE_HINT = (
    "where the tile hangs over an edge, load 0 instead: `a_tile[ty, tx] = A[row, k0 + tx] if "
    "row < A.shape[0] and k0 + tx < A.shape[1] else 0` (and likewise for B with k0 + ty and "
    "col); shared memory keeps the previous step's values otherwise."
)


def default_side() -> int:
    """The block's side: that of every 2-D check's block (:func:`~gpulab.exercises.checks.
    block_2d`), 8 x 8 threads in the simulator, 16 x 16 on a GPU."""
    return block_2d()[0]


@dataclass
class MatmulTrial(Launched):
    """A random M x K @ K x N problem for a launch of side x side blocks."""

    check_name: str
    seed: int
    M: int
    N: int
    K: int
    side: int
    dtype: np.dtype
    rng: np.random.Generator = field(repr=False)

    @classmethod
    def draw(cls, check_name: str, seed: int, side: int, dtype=np.float32,
             shape: tuple[int, int, int] | None = None) -> MatmulTrial:
        """M, N, K different from each other and not multiples of ``side``, spanning 2-3
        blocks (simulator) or more (GPU) in each direction; M and N need different numbers of
        blocks, so that swapping rows and columns leaves part of C unwritten."""
        rng = np.random.default_rng(seed)
        low, high = (side + 1, 3 * side) if device.tier() != "gpu" else (5 * side, 30 * side)
        high = max(high, low + 12)  # room for three different sizes even with a tiny tile
        for _ in range(100_000):
            dims = [int(d) for d in rng.integers(low, high, size=3)]
            M, N, K = dims
            if ((side == 1 or all(d % side for d in dims)) and len(set(dims)) == 3
                    and -(-M // side) != -(-N // side)):
                break
        else:  # pragma: no cover - the range above always has solutions
            raise RuntimeError(f"no test shape found for tile {side}; please report this")
        M, N, K = shape or dims
        return cls(check_name, seed, M, N, K, side, np.dtype(dtype), rng)

    @property
    def blocks(self) -> tuple[int, int]:
        return -(-self.N // self.side), -(-self.M // self.side)

    @property
    def threads(self) -> tuple[int, int]:
        return self.side, self.side

    @property
    def extents(self) -> tuple[int, ...]:
        return self.M, self.N, self.K

    def matrix(self, rows: int, cols: int) -> np.ndarray:
        return self.rng.uniform(-1, 1, (rows, cols)).astype(self.dtype)

    def __str__(self) -> str:
        return (f"A {self.M}x{self.K} @ B {self.K}x{self.N}, {self.launched}, {self.dtype.name}, "
                f"{self.repeat}")


def _run(kernel, trial: MatmulTrial, index_hint: str = EDGE_HINT):
    """Launch on fresh random A, B, each a view of a buffer padded with PAD_VALUE; return
    (A, B, C as written), NaN where never written."""
    A, B = trial.matrix(trial.M, trial.K), trial.matrix(trial.K, trial.N)
    pad = trial.side
    _, d_A = padded(A, pad, PAD_VALUE)
    _, d_B = padded(B, pad, PAD_VALUE)
    d_C_all, d_C = padded(np.full((trial.M, trial.N), np.nan, trial.dtype), pad, np.nan)
    launch(kernel, trial, d_A, d_B, d_C, index_hint=index_hint)
    return A, B, read_back(d_C_all, (trial.M, trial.N), trial, what="C", hint=EDGE_HINT)


def _cells(mask: np.ndarray, limit: int = 3) -> str:
    cells = [f"C[{r}, {c}]" for r, c in np.argwhere(mask)[:limit]]
    return ", ".join(cells) + (", ..." if mask.sum() > limit else "")


def _accumulates_in_output(source: KernelSource) -> bool:
    """True when the kernel adds into C directly (``C[row, col] += ...``)."""
    name = source.parameters[2] if len(source.parameters) == 3 else "C"
    return any("+=" in line for line in plain_writes_to(source, name))


def _diagnose(A, B, C, trial: MatmulTrial, wrong_hint: str,
              source: KernelSource | None = None) -> CheckFailedError | None:
    """None when C = A @ B to rounding; otherwise what is wrong and what usually causes it."""
    M, N, K = trial.M, trial.N, trial.K
    expected = reference.matmul_exact(A, B)
    bound = reference.matmul_tolerance(A, B)
    unwritten = np.isnan(C)
    wrong = unwritten | ~(np.abs(C - expected) <= bound)
    if not wrong.any():
        return None
    accumulates = source is not None and _accumulates_in_output(source)
    if accumulates and np.isnan(C).any():
        return CheckFailedError(
            f"elements of C are NaN: your kernel adds into C[row, col], which starts with "
            f"whatever was in memory (NaN here) ({trial}).",
            "accumulate in a local variable that starts at 0 (`acc = C.dtype.type(0)`), and "
            "write it to C once, after the loop.")
    if unwritten.all():
        return CheckFailedError(f"your kernel wrote nothing into C ({trial}).",
                                "each thread should assign `C[row, col] = ...` for its own "
                                "row and column, inside the guard.")
    summary = f"{int(wrong.sum())} of {M * N} elements of C are wrong"
    if unwritten.any():
        rows, cols = np.flatnonzero(unwritten.any(axis=1)), np.flatnonzero(unwritten.any(axis=0))
        where = f"{int(unwritten.sum())} were never written (e.g. {_cells(unwritten)})"
        if not unwritten[: trial.side, : trial.side].any() and \
                unwritten.sum() == M * N - trial.side * trial.side:
            return CheckFailedError(f"{summary}: only the first block's {trial.side} x "
                                    f"{trial.side} corner was written ({trial}).", INDEX_HINT)
        if rows.min() >= min(M, N) or cols.min() >= min(M, N):
            return CheckFailedError(
                f"{summary}: {where}. The unwritten part lies beyond row or column "
                f"{min(M, N) - 1}, as happens when rows and columns are swapped "
                f"(C is {M} x {N}; {trial}).", INDEX_HINT)
        return CheckFailedError(f"{summary}: {where} ({trial}).", INDEX_HINT)
    written_nan = np.isnan(C) & ~unwritten
    if written_nan.any():
        return CheckFailedError(f"{summary}: they hold NaN ({trial}).",
                                "accumulate in a local variable that starts at 0 "
                                "(`acc = C.dtype.type(0)`), not in C, which starts with garbage.")
    suspects = {
        "C holds the sum for k = 0 .. K-2: the last k is missing":
            (A[:, : K - 1].astype(np.float64) @ B[: K - 1], "loop over `range(A.shape[1])`."),
        "C holds A[row, k] * B[k, col] for a single k, not their sum":
            (A[:, -1:].astype(np.float64) @ B[-1:], "add the products: `acc += A[row, k] * "
                                                    "B[k, col]`, then write acc once."),
    }
    if N < K:
        suspects["the sum stops at k = N - 1: the loop runs over B's columns, not over K"] = (
            A[:, :N].astype(np.float64) @ B[:N], "loop over `range(A.shape[1])` (K).")
    if M < K:
        suspects["the sum stops at k = M - 1: the loop runs over A's rows, not over K"] = (
            A[:, :M].astype(np.float64) @ B[:M], "loop over `range(A.shape[1])` (K).")
    for message, (candidate, hint) in suspects.items():
        if np.all(np.abs(C - candidate) <= bound + 1e-6):
            return CheckFailedError(f"{summary}: {message} ({trial}).", hint)
    first = tuple(np.argwhere(wrong)[0])
    detail = (f"the first is C[{first[0]}, {first[1]}]: expected {expected[first]:.6g}, got "
              f"{C[first]:.6g}")
    edge_rows = np.flatnonzero(wrong.any(axis=1))
    if wrong.all():
        return CheckFailedError(f"{summary}, all of them; {detail} ({trial}).", wrong_hint)
    if edge_rows.min() >= (trial.blocks[1] - 1) * trial.side or \
            np.flatnonzero(wrong.any(axis=0)).min() >= (trial.blocks[0] - 1) * trial.side:
        return CheckFailedError(f"{summary}, only in the last, partial blocks; {detail} "
                                f"({trial}).", wrong_hint)
    return CheckFailedError(f"{summary}; {detail} ({trial}).", wrong_hint)


# --- exercise 1: naive matmul ----------------------------------------------------------------

NAIVE_STUB_HINT = (
    "`col, row = cuda.grid(2)`; if the thread is inside C, add up `A[row, k] * B[k, col]` for "
    "k in range(A.shape[1]) in a local variable and write it to `C[row, col]`."
)


def check_matmul_naive(kernel, seed: int | None = None, side: int | None = None,
                       dtype=np.float32, show: bool = True) -> CheckResult:
    """Check ``kernel(A, B, C)``: one thread per element of C computes a whole row-times-column
    sum. Diagnoses: the stub; missing guards (IndexError, or writes outside C on a GPU);
    nothing written; only one block written; rows and columns swapped; accumulating into C
    (NaN); the sum running over the wrong dimension or missing its last term; a single
    product instead of a sum; simulator-only code."""

    def body(seed: int) -> str:
        source = start_kernel(kernel, 3, NAIVE_STUB_HINT)
        trial = MatmulTrial.draw("check_matmul_naive", seed, side or default_side(), dtype)
        A, B, C = _run(kernel, trial)
        failure = _diagnose(A, B, C, trial, INDEX_HINT, source)
        if failure is not None:
            raise failure
        return (f"C = A @ B for A {trial.M}x{trial.K}, B {trial.K}x{trial.N} "
                f"({trial.launched}, seed={trial.seed}).")

    return run_check("matmul_naive", body, seed, show)


# --- exercise 2: tiled matmul ----------------------------------------------------------------

TILED_STUB_HINT = (
    "for each step k0 along K: each thread loads A[row, k0 + tx] into a_tile[ty, tx] and "
    "B[k0 + ty, col] into b_tile[ty, tx] (0 outside the matrices), `cuda.syncthreads()`, adds "
    "a_tile[ty, k] * b_tile[k, tx] for k in range(TILE), `cuda.syncthreads()`; at the end the "
    "thread writes its sum to C[row, col] if it is inside C."
)


def check_matmul_tiled(kernel, tile: int | None = None, seed: int | None = None,
                       dtype=np.float32, show: bool = True) -> CheckResult:
    """Check ``kernel(A, B, C)``, the shared-memory tiled matmul with ``tile x tile`` blocks
    (your ``TILE``). Diagnoses: the stub; loads or the write without edge guards
    (IndexError); edge tiles not zero-filled (right when every size is a multiple of the tile,
    wrong otherwise); missing ``cuda.syncthreads()``; and everything the naive check finds."""
    tile = tile or default_side()

    def body(seed: int) -> str:
        source = start_kernel(kernel, 3, TILED_STUB_HINT)
        trial = MatmulTrial.draw("check_matmul_tiled", seed, tile, dtype)
        barriers = count_calls(source, "syncthreads") if source.tree is not None else 2
        hint = SYNC_HINT if barriers < 2 else EDGE_TILE_HINT
        A, B, C = _run(kernel, trial, index_hint=EDGE_TILE_HINT)
        failure = _diagnose(A, B, C, trial, hint, source)
        if failure is not None and barriers < 2:
            failure = CheckFailedError(
                f"{failure.message} Your kernel has {barriers} `cuda.syncthreads()` call(s); "
                "a tiled matmul needs two per step.", SYNC_HINT)
        elif failure is not None:
            whole = MatmulTrial.draw(trial.check_name, trial.seed, tile, dtype,
                                     shape=(2 * tile, 3 * tile, 2 * tile))
            try:
                again = _diagnose(*_run(kernel, whole, EDGE_TILE_HINT), whole, hint)
            except Exception:  # only a closer look: keep the first failure
                again = failure
            if again is None:
                failure = CheckFailedError(
                    f"{failure.message} With M, N, K multiples of {tile} the answer is right: "
                    "only the tiles that hang over an edge go wrong.", EDGE_TILE_HINT)
        if failure is not None:
            raise failure
        return (f"C = A @ B for A {trial.M}x{trial.K}, B {trial.K}x{trial.N} with {tile} x {tile} "
                f"tiles ({trial.blocks[0]} x {trial.blocks[1]} blocks, "
                f"{-(-trial.K // tile)} steps along K, seed={trial.seed}).")

    return run_check("matmul_tiled", body, seed, show)


__all__ = ["MatmulTrial", "check_matmul_naive", "check_matmul_tiled", "default_side"]
