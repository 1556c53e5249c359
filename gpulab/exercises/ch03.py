"""Chapter 03's exercises: a naive matmul, then the tiled one with shared memory.

Each check takes your ``@cuda.jit`` kernel ``kernel(A, B, C)`` (not launched), runs it with a
2-D grid on random matrices whose sizes M, N, K differ from each other and are not multiples of
the block's sides, compares C with :mod:`gpulab.reference` (within the rounding bound
``K * eps * (|A| @ |B|)`` of a float32 sum in any order), prints what it found and returns a
:class:`~gpulab.exercises.results.CheckResult`::

    from gpulab.exercises.ch03 import check_matmul_naive
    check_matmul_naive(my_matmul)

The launch is ``kernel[(ceil(N / bx), ceil(M / by)), (bx, by)]``: the x index runs along the
columns of C, the y index along its rows (``col, row = cuda.grid(2)``). A, B and C are views of
larger buffers: a thread past an edge raises ``IndexError`` in the simulator, and on a GPU its
write lands in padding the check inspects.

What must hold for a pass and what each check diagnoses is said once, in its spec
(:data:`NAIVE` for :func:`check_matmul_naive`, :data:`TILED` for :func:`check_matmul_tiled`,
which also judges the method from a trace), which ``help(check_...)`` shows.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from gpulab import device, reference
from gpulab.exercises.grid_stride import more_than_their_share, written_by_several, x_along_a_row
from gpulab.exercises.mistakes import Mistake, diagnose, reject
from gpulab.exercises.results import CheckFailedError, KernelError, offer_trace
from gpulab.exercises.running import launch, padded, read_back, trace_trial
from gpulab.exercises.source_rules import (
    BARRIER_HINT,
    KernelSource,
    lines_with_number,
    plain_writes_to,
)
from gpulab.exercises.spec import CheckSpec, reject_unshared_work
from gpulab.exercises.trial import Trial, tier_key

PAD_VALUE = 100.0  # beyond the edges of A and B (seen only by a kernel without guards, on a GPU)
TILE = 8  # the tile of the tiled exercise in the simulator (16 on a GPU)
EDGE_HINT = (
    "a thread read or wrote outside a matrix: the write needs a guard on both of C's sizes, "
    "and each load a guard on its own matrix's sizes."
)
INDEX_HINT = (
    "revisit the 2-D grid (section 2): the x index runs along the columns of C (neighbouring "
    "threads, neighbouring columns), the y index along its rows; each element of C is the sum "
    "over k of A's row times B's column."
)
WRITE_GUARD_HINT = (
    "only threads inside C may write: the final write needs a guard on both the row and the "
    "column (the blocks at the right and bottom edges are only partly inside C)."
)
LOAD_GUARD_HINT = (
    "a thread whose element of A lies outside A (row >= A.shape[0], or k0 + tx >= A.shape[1]) "
    "must not read it: test both before the load, and store 0 in the tile instead; likewise for "
    "B with k0 + ty < B.shape[0] and col < B.shape[1]."
)
TILE_INDEX_HINT = (
    "a tile is TILE x TILE: index it with the thread's own indices, `a_tile[ty, tx]` and "
    "`b_tile[ty, tx]` for the stores and `a_tile[ty, k]`, `b_tile[k, tx]` with k in "
    "range(TILE) for the multiply-adds, never with row or col, which run over the whole matrix."
)
ZERO_FILL_HINT = (
    "where the tile hangs over an edge of A or B, store 0 in the tile instead of skipping the "
    "store (an `else:` after the guarded load): a slot nobody writes at this step keeps what "
    "it held before, and the multiply-adds use it."
)
LOADS_HINT = (
    "at step k0, thread (tx, ty) copies A[row, k0 + tx] into a_tile[ty, tx] and "
    "B[k0 + ty, col] into b_tile[ty, tx]: x goes with the column index, y with the row index."
)
SYNC_AFTER_LOADS = (
    "call `cuda.syncthreads()` after the two stores into the tiles and before the multiply-adds, "
    "so that both tiles are complete before any thread reads them"
)
SYNC_AFTER_SUMS = (
    "call `cuda.syncthreads()` after the multiply-adds (at the end of the step), so that no "
    "thread overwrites a tile at the next step while another still reads it"
)
UNTILED_HINT = (
    "load tiles into shared memory: at each step along K every thread copies ONE element of A "
    "and ONE of B into the shared tiles, the block waits (`cuda.syncthreads()`), and the TILE "
    "multiply-adds read only the tiles; then the block waits again. A value loaded once is "
    "used by TILE threads."
)
STEPS_HINT = (
    "the loop over the steps must cover all of K, whatever its size (read it from A's shape: "
    "K is A.shape[1], its number of columns, not M or N), with C written after it."
)
HARD_CODED_HINT = (
    "write TILE wherever the tile's size is meant (the shared arrays' shape, the step along K, "
    "the inner loop), never the number itself: TILE is 16 on a GPU and 8 in the simulator."
)


def default_side() -> int:
    """The tiled check's default tile: 8 in the simulator (:data:`TILE`), 16 on a GPU."""
    return 16 if device.tier() == "gpu" else TILE


# Blocks of the naive check: never square, so that x and y can't be mixed up unnoticed.
NAIVE_BLOCKS = {"sim": ((8, 4), (4, 8), (16, 4), (4, 16)),
                "gpu": ((32, 8), (8, 32), (16, 8), (8, 16))}
# Blocks (rows, columns of blocks) of the tiled check's traced launch: 6, never as many rows of
# blocks as columns, and at least two each way (with a single row of blocks, a kernel with rows
# and columns swapped writes exactly the first block's elements: the two mistakes look alike).
TILED_GRIDS = ((2, 3), (3, 2))
# Tiles along M, N and K of the tiled check's large launch (on a GPU): 6 to 30 blocks a side.
LARGE_TILED_BLOCKS = (5, 30)


def draw_naive(check_name: str, seed: int, block: tuple[int, int] | None = None,
               dtype=np.float32, long_rows: bool = False) -> Trial:
    """The naive check's trial, C's (M, N) as its shape and K as ``inner``: a block (x, y)
    that is not square (drawn when not given), M, N, K different from each other, M not a
    multiple of y and N not of x, spanning 2-3 blocks (simulator) or more (GPU) in each
    direction, and so that swapping rows and columns leaves part of C unwritten. The grid is
    never square in blocks either (2 x 3 or 3 x 2 in the simulator), so a kernel that takes
    the row's block from blockIdx.x and the column's from blockIdx.y leaves part of C
    unwritten too. ``long_rows``: K larger than that (65-99 in the simulator), so that a
    kernel keeping a row of A in a local array of a length typed in fails."""
    rng = np.random.default_rng(seed)
    tier = tier_key()
    if block is None:
        choices = NAIVE_BLOCKS[tier]
        block = choices[int(rng.integers(len(choices)))]
    bx, by = block
    blocks_low, blocks_high = (1, 3) if tier == "sim" else (5, 30)
    k_range = (9, 40) if tier == "sim" else (100, 600)
    if long_rows:  # K past what a local array of 64 (or 512) typed in holds
        k_range = (65, 100) if tier == "sim" else (600, 1200)
    for _ in range(100_000):
        M = int(rng.integers(blocks_low * by + 1, blocks_high * by))
        N = int(rng.integers(blocks_low * bx + 1, blocks_high * bx))
        K = int(rng.integers(*k_range))
        covered_if_swapped = (-(-N // bx) * bx >= M) and (-(-M // by) * by >= N)
        square_grid = -(-N // bx) == -(-M // by)  # swapped blockIdx.x/.y would cover C
        if (M % by and N % bx and len({M, N, K}) == 3 and not covered_if_swapped
                and not square_grid):
            break
    else:  # pragma: no cover - the ranges above always have solutions
        raise RuntimeError(f"no test shape found for block {block}; please report this")
    return Trial(check_name, seed, (M, N), tuple(block), np.dtype(dtype), rng, inner=K)


def draw_tiled(check_name: str, seed: int, tile: int, dtype=np.float32,
               large: bool = False) -> Trial:
    """The tiled check's trial: tile x tile blocks; M, N, K different, none a multiple of
    the tile; K spans 2 or 3 steps. Small (6 blocks, so that tracing it stays quick),
    or with ``large`` tens of blocks (the GPU's run)."""
    rng = np.random.default_rng(seed)
    for _ in range(100_000):
        if large:
            low, high = LARGE_TILED_BLOCKS
            M, N, K = (int(v) for v in rng.integers(low * tile + 1, high * tile, size=3))
        else:
            rows, cols = TILED_GRIDS[int(rng.integers(len(TILED_GRIDS)))]

            def extent(blocks):
                low = (blocks - 1) * tile + 1 if blocks > 1 else tile // 2 + 1
                return int(rng.integers(low, blocks * tile))

            M, N = extent(rows), extent(cols)
            K = int(rng.integers(tile + 1, 3 * tile))
        dims = (M, N, K)
        if (tile == 1 or all(d % tile for d in dims)) and len(set(dims)) == 3 and \
                -(-M // tile) != -(-N // tile):
            break
    else:  # pragma: no cover
        raise RuntimeError(f"no test shape found for tile {tile}; please report this")
    return Trial(check_name, seed, (M, N), (tile, tile), np.dtype(dtype), rng, inner=K)


def operands(trial: Trial) -> tuple[np.ndarray, np.ndarray]:
    """Fresh random A (M x K) and B (K x N) of a matmul trial (C is M x N, K is ``inner``)."""
    M, N, K = trial.extents
    return (trial.rng.uniform(-1, 1, (M, K)).astype(trial.dtype),
            trial.rng.uniform(-1, 1, (K, N)).astype(trial.dtype))


def _run(kernel, trial: Trial) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Launch on fresh random A, B, each a view of a buffer padded with PAD_VALUE; return (A, B,
    C as written, NaN where never written)."""
    A, B = operands(trial)
    d_C_all, d_C = padded(np.full(trial.shape, np.nan, trial.dtype), trial.padding, np.nan)
    launch(kernel, trial, padded(A, trial.padding, PAD_VALUE)[1],
           padded(B, trial.padding, PAD_VALUE)[1], d_C, index_hint=EDGE_HINT)
    return A, B, read_back(d_C_all, trial.shape, trial, what="C", hint=WRITE_GUARD_HINT)


def _names(source: KernelSource) -> tuple[str, str, str]:
    names = source.parameters
    return tuple(names) if len(names) == 3 else ("A", "B", "C")


@dataclass
class Product:
    """C as the kernel wrote it (NaN where never written) against A @ B, with the trial and
    the kernel's source: the evidence :data:`MATMUL_MISTAKES` and, for a tiled kernel (tiles
    as wide as the trial's block), :data:`STEP_SUM_MISTAKES` are told from. ``suspects``: try
    the naive kernel's usual wrong sums too."""

    A: np.ndarray
    B: np.ndarray
    C: np.ndarray
    trial: Trial
    source: KernelSource | None = None
    suspects: bool = True

    @property
    def wrong(self) -> np.ndarray:
        """Where C is not A @ B to float32 rounding (NaN counts as wrong)."""
        return np.isnan(self.C) | ~(np.abs(self.C - reference.matmul_exact(self.A, self.B))
                                    <= reference.matmul_tolerance(self.A, self.B))

    @property
    def unwritten(self) -> np.ndarray:
        return np.isnan(self.C)

    @property
    def summary(self) -> str:
        return f"{int(self.wrong.sum())} of {self.trial.n} elements of C are wrong"

    @property
    def never_written(self) -> str:
        cells = ", ".join(f"C[{r}, {c}]" for r, c in np.argwhere(self.unwritten)[:3])
        more = ", ..." if self.unwritten.sum() > 3 else ""
        return f"{int(self.unwritten.sum())} were never written (e.g. {cells}{more})"

    @property
    def corner_only(self) -> bool:
        (bx, by), (M, N) = self.trial.block, (self.trial.rows, self.trial.cols)
        return (not self.unwritten[:by, :bx].any()
                and self.unwritten.sum() == M * N - min(by, M) * min(bx, N))

    @property
    def extents(self) -> tuple[int, int]:
        """Threads across (x) and down (y) the grid."""
        return self.trial.launch_threads

    @property
    def swapped(self) -> bool:
        """Exactly the part of C a grid with x as the row and y as the column covers."""
        x_extent, y_extent = self.extents
        cover = np.zeros_like(self.unwritten)
        cover[:x_extent, :y_extent] = True
        return bool(np.array_equal(self.unwritten, ~cover))

    def holds(self, stop: int, start: int = 0) -> bool:
        """True when C is A @ B summed over k = start .. stop - 1 only."""
        partial = self.A[:, start:stop].astype(np.float64) @ self.B[start:stop]
        bound = reference.matmul_tolerance(self.A, self.B) + 1e-6
        return bool(np.all(np.abs(self.C - partial) <= bound))

    def twice(self) -> int | None:
        """The k (the first or the last) whose product C holds twice over the whole sum, as a
        sum started from that product and then looped over every k gives; None otherwise."""
        bound = reference.matmul_tolerance(self.A, self.B) + 1e-6
        whole = self.A.astype(np.float64) @ self.B
        return next((k for k in (0, self.trial.inner - 1) if np.all(np.abs(
            self.C - whole - np.outer(self.A[:, k], self.B[k])) <= bound)), None)

    @property
    def T(self) -> int:
        """A tiled kernel's tile (the trial's block is T x T)."""
        return self.trial.block[0]

    @property
    def steps(self) -> int:
        """A tiled kernel's steps along K."""
        return -(-self.trial.inner // self.T)

    @property
    def last(self) -> int:
        """Where a tiled kernel's last step starts along K."""
        return (self.steps - 1) * self.T

    @cached_property
    def stopped_after(self) -> int | None:
        """The number of steps C's sum covers when the loop stopped early, else None."""
        return next((done for done in range(1, self.steps) if self.holds(done * self.T)), None)


def _accumulates_nan(e: Product) -> bool:
    """C is NaN somewhere and the kernel adds into C directly (``C[row, col] += ...``)."""
    return e.source is not None and e.unwritten.any() and any(
        "+=" in line for line in plain_writes_to(e.source, _names(e.source)[2]))


MATMUL_MISTAKES = (
    Mistake("accumulating into C (`C[row, col] += ...`), which starts as garbage",
            _accumulates_nan,
            "elements of C are NaN: your kernel adds into C[row, col], which starts with "
            "whatever was in memory (NaN here)",
            "C is an output, not a running total: memory from the device holds garbage until "
            "written, so keep the sum in a local variable and write C once.",
            recognised_from="source"),
    Mistake("nothing written", lambda e: e.unwritten.all(), "your kernel wrote nothing into C",
            "each thread should assign `C[row, col] = ...` for its own row and column, inside "
            "the guard."),
    Mistake("only the first block written (`threadIdx` alone, a hard-coded block)",
            lambda e: e.unwritten.any() and e.corner_only,
            lambda e: (f"{e.summary}: only the first block's {e.trial.block[0]} x "
                       f"{e.trial.block[1]} corner was written"), INDEX_HINT),
    Mistake("rows and columns swapped (x used as the row)",
            lambda e: e.unwritten.any() and e.swapped,
            lambda e: (f"{e.summary}: {e.never_written}. Exactly "
                       f"C[0:{min(e.trial.rows, e.extents[0])}, "
                       f"0:{min(e.trial.cols, e.extents[1])}] was written: the grid's x index "
                       f"({e.extents[0]} threads across) was used as the row and its y index "
                       f"({e.extents[1]} threads down) as the column, so rows and columns are "
                       f"swapped (C is {e.trial.rows} x {e.trial.cols})"), INDEX_HINT),
    Mistake("part of C never written", lambda e: e.unwritten.any(),
            lambda e: f"{e.summary}: {e.never_written}", INDEX_HINT),
    Mistake("the sum missing its last k (`range(K - 1)`)",
            lambda e: e.suspects and e.holds(e.trial.inner - 1),
            lambda e: (f"{e.summary}: C holds the sum for k = 0 .. K-2: the last k is "
                       "missing"), "loop over `range(A.shape[1])`."),
    Mistake("the sum missing its first k (`range(1, K)`)",
            lambda e: e.suspects and e.holds(e.trial.inner, 1),
            lambda e: f"{e.summary}: C holds the sum for k = 1 .. K-1: the first k, 0, is missing",
            "a range starts at 0 unless told otherwise; the sum runs over every k, 0 included."),
    Mistake("one product counted twice (the sum started from it, then the loop from 0)",
            lambda e: e.suspects and e.twice() is not None,
            lambda e: (f"{e.summary}: C holds the whole sum plus the k = {e.twice()} product "
                       "again: that product is counted twice"),
            "count each product once: either the running sum starts at 0 and the loop covers "
            "every k, or it starts from one product and the loop skips that k."),
    Mistake("a single product written, not the sum",
            lambda e: e.suspects and e.holds(e.trial.inner, e.trial.inner - 1),
            lambda e: (f"{e.summary}: C holds A[row, k] * B[k, col] for a single k, not their "
                       "sum"), "the loop must add up the products over every k, not replace "
                       "the running value with each one."),
    Mistake("the sum over B's columns (N), not over K",
            lambda e: (e.suspects and e.trial.cols < e.trial.inner
                       and e.holds(e.trial.cols)),
            lambda e: (f"{e.summary}: the sum stops at k = N - 1: the loop runs over B's "
                       "columns, not over K"), "loop over `range(A.shape[1])` (K)."),
    Mistake("the sum over A's rows (M), not over K",
            lambda e: (e.suspects and e.trial.rows < e.trial.inner
                       and e.holds(e.trial.rows)),
            lambda e: (f"{e.summary}: the sum stops at k = M - 1: the loop runs over A's rows, "
                       "not over K"), "loop over `range(A.shape[1])` (K)."),
)


def _diagnose(A, B, C, trial: Trial, wrong_hint: str,
              source: KernelSource | None = None, suspects: bool = True
              ) -> CheckFailedError | None:
    """None when C = A @ B to rounding; otherwise the first of :data:`MATMUL_MISTAKES` seen
    (with ``suspects``, the naive kernel's usual wrong sums too), or, when none is, which
    elements are wrong, marked ``specific=False``."""
    product = Product(A, B, C, trial, source, suspects)
    wrong = product.wrong
    if not wrong.any():
        return None
    failure = diagnose(MATMUL_MISTAKES, product)
    if failure is None:
        r, c = np.argwhere(wrong)[0]
        every = ", all of them" if wrong.all() else ""
        failure = CheckFailedError(
            f"{product.summary}{every}; the first is C[{r}, {c}]: expected "
            f"{reference.matmul_exact(A, B)[r, c]:.6g}, got {C[r, c]:.6g} ({trial}).",
            wrong_hint, specific=False)
    return failure


# --- exercise 1: naive matmul ----------------------------------------------------------------


def _axis_of(node, name):
    return (node.attr if isinstance(node, ast.Attribute) and node.attr in "xyz"
            and isinstance(node.value, ast.Attribute) and node.value.attr == name else None)


def _block_products(source: KernelSource):
    """(the product, the axis of its ``blockIdx``, the other factor) for each product of
    ``blockIdx`` by something, in the source's order."""
    for node in source.walk():
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            for left, right in ((node.left, node.right), (node.right, node.left)):
                if _axis_of(left, "blockIdx") is not None:
                    yield node, _axis_of(left, "blockIdx"), right


@dataclass
class NaiveSource:
    """A naive kernel's wrong C, as :func:`_diagnose` told it (``failure``), with its source
    and trial: the evidence :data:`NAIVE_SOURCE_MISTAKES` are told from (the source says why
    the elements are wrong)."""

    source: KernelSource
    trial: Trial
    failure: CheckFailedError

    @property
    def where(self) -> str:
        return str(self.trial)

    @property
    def found(self) -> str:
        """What the outputs showed, without the trial that ends it."""
        return self.failure.message.removesuffix(f" ({self.trial}).").removesuffix(".")

    @cached_property
    def swapped(self) -> str | None:
        """In words, when one line multiplies blockIdx.x by blockDim.y and another blockIdx.y
        by blockDim.x: the row's block taken from blockIdx.x and the column's from
        blockIdx.y."""
        lines = {}
        for node, axis, right in _block_products(self.source):
            other = _axis_of(right, "blockDim")
            if axis in ("x", "y") and other in ("x", "y") and axis != other:
                lines.setdefault(axis, self.source.line(node))
        if set(lines) != {"x", "y"}:
            return None
        across, down = self.trial.blocks
        return (f"`{lines['x']}` and `{lines['y']}` swap the block indices: blockIdx.x counts "
                f"the blocks along x, across C's columns, and blockIdx.y the blocks along y, "
                f"down its rows. This grid has {across} blocks across but {down} down, so the "
                f"kernel's blocks of rows and of columns don't line up with C's")

    @cached_property
    def assumed(self) -> str | None:
        """What the kernel assumes about the block's shape, in words, when a line multiplies
        ``blockIdx`` by a number or by ``blockDim`` of the other axis; None otherwise."""
        bx, by = self.trial.block
        for node, axis, right in _block_products(self.source):
            if isinstance(right, ast.Constant) and type(right.value) is int:
                return (f"`{self.source.line(node)}` multiplies blockIdx.{axis} by the number "
                        f"{right.value}, but this launch's blocks have "
                        f"{bx if axis == 'x' else by} threads along {axis} ({bx} x {by})")
            other = _axis_of(right, "blockDim")
            if other is not None and other != axis:
                return (f"`{self.source.line(node)}` multiplies blockIdx.{axis} by "
                        f"blockDim.{other}: the blocks here are {bx} x {by}, not square, so a "
                        f"block's {'rows' if axis == 'y' else 'columns'} start at the wrong "
                        "place")
        return None


# Read from the source once C is wrong, before MATMUL_MISTAKES: why the elements are wrong.
NAIVE_SOURCE_MISTAKES = (
    Mistake("blockIdx.x and blockIdx.y swapped (both lines named)", lambda e: e.swapped,
            lambda e: f"{e.found}. {e.swapped}",
            "a block's rows come from the block index along y and its columns from the one "
            "along x, each times the block's size along that same axis, plus the thread's "
            "index along it.", recognised_from="source"),
    Mistake("a block shape assumed: `blockIdx` times a number or times the other axis's "
            "`blockDim` (named with the line)", lambda e: e.assumed,
            lambda e: f"{e.found}. {e.assumed[0].upper()}{e.assumed[1:]}",
            "the global index must come from the launch itself (the block's index times the "
            "block's size along the same axis, plus the thread's), never from a number or the "
            "other axis's size: the caller chooses the block.", recognised_from="source"),
)

NAIVE_STUB_HINT = (
    "one thread per element of C: find this thread's row and column, let only threads inside C "
    "work, add up the products of row `row` of A and column `col` of B, and write the sum. The "
    "hints above the cell go step by step."
)
NAIVE_SHARE_HINT = (
    "one thread per element of C: each thread takes the one element its block and thread "
    "indices give and loops over k only, not over a row or a column of C."
)
NAIVE_SHARE_MISTAKES = (written_by_several(NAIVE_SHARE_HINT),
                         more_than_their_share(NAIVE_SHARE_HINT), x_along_a_row("C"))
NAIVE = CheckSpec(
    "matmul_naive", "matmul_naive(A, B, C)", NAIVE_STUB_HINT,
    NAIVE_SOURCE_MISTAKES + MATMUL_MISTAKES + NAIVE_SHARE_MISTAKES, parameters=3,
    title="1. naive matmul", call="check_matmul_naive(my_matmul)",
    holds="C = A @ B within the float32 rounding bound, one thread per element of C, on two "
          "launches whose blocks are not square (e.g. 8 × 4 then 4 × 8 in the simulator), on grids "
          "that are not square in blocks either, M ≠ N ≠ K not multiples of the block's sides, "
          "K over 64 on the second; traced on a small launch, no thread writing more than its "
          "share of C",
    also="the stub; missing guards (the line of the IndexError in the simulator, writes "
         "outside C on a GPU); simulator-only code")


def _naive_index_hint(error: IndexError, source: KernelSource, trial: Trial) -> str:
    """The hint for an IndexError: the line, and the matrix and axis it overran, told from the
    error's size (M, N and K differ); EDGE_HINT when the line or the matrix is unknown."""
    line, found = _learner_line(error, source), re.search(r"axis (\d) with size (\d+)", str(error))
    M, N, K = trial.extents
    shapes = dict(zip(_names(source), ((M, K), (K, N), (M, N)), strict=True))
    name = next((name for name, shape in shapes.items() if found and re.search(
        rf"\b{re.escape(name)}\s*\[", line) and shape[int(found[1])] == int(found[2])), None)
    if name is None:
        return EDGE_HINT
    axis = int(found[1])
    return (f"`{line}` went outside {name}'s {('rows', 'columns')[axis]} ({found[2]} of them): "
            f"either no guard keeps that index below {name}.shape[{axis}], or it belongs on "
            f"{name}'s other axis. A's rows are C's rows and B's columns C's columns; k runs "
            "along A's columns and B's rows.")


@NAIVE.check
def check_matmul_naive(kernel, seed: int | None = None,
                       block: tuple[int, int] | None = None, dtype=np.float32) -> str:
    """Two launches: a block that is not square (:data:`NAIVE_BLOCKS`), then the same block
    turned on its side, each on its own sizes (:func:`draw_naive`); ``block=(x, y)`` runs one
    launch with that block. When C is wrong, the source is read for swapped block indices, then
    for an assumed block shape (:data:`NAIVE_SOURCE_MISTAKES`), which the failure then names
    with their lines after what C showed; otherwise the failure is the first of
    :data:`MATMUL_MISTAKES` seen, or which elements are wrong."""
    source = NAIVE.start(kernel)
    trial = draw_naive("check_matmul_naive", seed, block, dtype)
    trials = [trial]
    if block is None:  # and the block turned on its side: x and y can't hide; K longer
        trials.append(draw_naive("check_matmul_naive", seed, trial.block[::-1], dtype,
                                 long_rows=True))
    for run in trials:
        try:
            failure = _diagnose(*_run(kernel, run), run, INDEX_HINT, source)
        except KernelError as error:
            if isinstance(error.cause, IndexError):
                raise KernelError(error.cause, run, _naive_index_hint(error.cause, source, run)
                                  ) from None
            raise
        if failure is not None:
            reject(NAIVE_SOURCE_MISTAKES, NaiveSource(source, run, failure))
            raise failure
    # the method: one thread per element of C, traced on a small launch
    small = Trial("check_matmul_naive", trial.seed, (7, 9), (4, 4), trial.dtype,
                  np.random.default_rng(trial.seed), inner=5)
    reject_unshared_work(NAIVE_SHARE_MISTAKES, kernel, small, *operands(small),
                         np.zeros(small.shape, small.dtype))
    return (f"C = A @ B right for {trial.size} ({trial.launched})"
            + "".join(f" and {run.size} ({run.launched})" for run in trials[1:])
            + f", seed={trial.seed}, one thread per element of C.")


# --- exercise 2: tiled matmul ----------------------------------------------------------------

TILED_STUB_HINT = (
    "step along K one tile at a time: every thread copies one element of A and one of B into "
    "the shared tiles (0 past the edges), the block waits, every thread multiply-adds along the "
    "tiles, the block waits again; at the end each thread inside C writes its sum. The hints "
    "above the cell go step by step."
)


def _shared_names(source: KernelSource) -> set[str]:
    """Names the kernel binds to ``cuda.shared.array(...)``."""
    names = set()
    for node in source.walk():
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            if isinstance(func, ast.Attribute) and func.attr == "array" and \
                    isinstance(func.value, ast.Attribute) and func.value.attr == "shared":
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _uses_tile(statement: ast.AST, shared: set[str], how: type) -> bool:
    """True when ``statement`` stores into (``how``: ast.Store) or reads (ast.Load) a tile."""
    return any(isinstance(n, ast.Subscript) and isinstance(n.ctx, how)
               and isinstance(n.value, ast.Name) and n.value.id in shared
               for n in ast.walk(statement))


@dataclass
class TiledSource:
    """The tiled kernel's source and the ``tile`` it is checked with: the evidence
    :data:`TILED_SOURCE_MISTAKES` are told from, before anything runs."""

    source: KernelSource
    tile: int

    @property
    def where(self) -> str:
        """Nothing to repeat: read from the source, these fail whatever the seed."""
        return ""

    @cached_property
    def hard_coded(self) -> list[str]:
        """Lines of the kernel that write the tile's size as a number."""
        return [] if self.tile < 4 else lines_with_number(self.source, self.tile)

    @cached_property
    def steps_loops(self) -> list[tuple[ast.For, ast.AST]]:
        """(the loop, the end of its range) of each loop over the steps along K: a loop whose
        body has a barrier or stores into a shared array, and is inside no other such loop.
        A range that counts down (`range(steps - 1, -1, -1)`) ends where it starts."""
        if self.source.tree is None:
            return []
        shared, found, inner = _shared_names(self.source), [], set()
        for loop in self.source.walk():  # outer loops first
            if loop in inner or not (isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call)
                                     and getattr(loop.iter.func, "id", "") == "range"
                                     and loop.iter.args):
                continue
            if any(isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "syncthreads"
                   for statement in loop.body for n in ast.walk(statement)
                   ) or any(_uses_tile(statement, shared, ast.Store) for statement in loop.body):
                args = loop.iter.args
                down = len(args) == 3 and (
                    isinstance(args[2], ast.UnaryOp) and isinstance(args[2].op, ast.USub)
                    or isinstance(args[2], ast.Constant) and isinstance(args[2].value, int)
                    and args[2].value < 0)
                found.append((loop, args[0] if down else args[1 if len(args) > 1 else 0]))
                inner |= {n for statement in loop.body for n in ast.walk(statement)}
        return found

    @cached_property
    def fixed_steps(self) -> str | None:
        """The line of a loop over the steps along K that ends at a fixed number instead of
        at ``A.shape[1]``."""
        local = set(self.source.parameters) | {
            n.id for n in self.source.walk() if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Store)}
        for loop, stop in self.steps_loops:
            names = {n.id for n in ast.walk(stop) if isinstance(n, ast.Name)}
            if not (names & local) and not any(isinstance(n, ast.Attribute) and n.attr == "shape"
                                               for n in ast.walk(stop)):
                return self.source.line(loop)
        return None

    @cached_property
    def other_extent(self) -> tuple[str, str] | None:
        """(the line, "M" or "N") of a loop over the steps that ends at M or N (a shape's
        other axis, directly or through a name bound to it) and nowhere at K."""
        a, b, c = _names(self.source)
        extent = {(a, 0): "M", (c, 0): "M", (b, 1): "N", (c, 1): "N", (a, 1): "K", (b, 0): "K"}
        bound = {}  # the extents each name was computed from: `M = A.shape[0]`, `M, K = A.shape`

        def extents(node) -> set:
            return {extent.get(_axis(n)) for n in ast.walk(node)}.union(
                *(bound.get(n.id, ()) for n in ast.walk(node) if isinstance(n, ast.Name)))

        for node in self.source.walk():
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value = node.targets[0], node.value
                if isinstance(target, ast.Name):
                    bound[target.id] = extents(value)
                elif isinstance(target, ast.Tuple) and isinstance(value, ast.Attribute) and \
                        value.attr == "shape" and isinstance(value.value, ast.Name):
                    bound |= {t.id: {extent.get((value.value.id, i))}
                              for i, t in enumerate(target.elts) if isinstance(t, ast.Name)}
        for loop, stop in self.steps_loops:
            used = extents(stop)
            if "K" not in used and used & {"M", "N"}:
                return self.source.line(loop), min(used & {"M", "N"})
        return None


def _axis(node) -> tuple[str, int] | None:
    """(the array, the axis) of ``X.shape[i]``; None for anything else."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and \
            node.value.attr == "shape" and isinstance(node.value.value, ast.Name) and \
            isinstance(node.slice, ast.Constant) and type(node.slice.value) is int:
        return node.value.value.id, node.slice.value
    return None


# Read from the source before anything runs, in order.
TILED_SOURCE_MISTAKES = (
    Mistake("the tile's size written as a number", lambda e: e.hard_coded,
            lambda e: (f"`{e.hard_coded[0]}` has the tile's size written as the number {e.tile}: "
                       "change TILE and this line would be wrong (and on a GPU TILE is 16, in "
                       "the simulator 8)"), HARD_CODED_HINT, recognised_from="source"),
    Mistake("the loop over the steps ending at a number", lambda e: e.fixed_steps,
            lambda e: (f"`{e.fixed_steps}` ends at a fixed number: it is right only for the K it "
                       "was written for"),
            STEPS_HINT, recognised_from="source"),
    Mistake("the loop over the steps ending at M or N", lambda e: e.other_extent,
            lambda e: (f"`{e.other_extent[0]}` ends the steps at {e.other_extent[1]}, "
                       f"{'the rows of A' if e.other_extent[1] == 'M' else 'the columns of B'}"
                       f", not at K: right only when {e.other_extent[1]} and K need the same "
                       "number of steps"),
            STEPS_HINT, recognised_from="source"),
)


def _learner_line(cause: BaseException, source: KernelSource) -> str:
    """The line of the learner's kernel where ``cause`` was raised ('' if unknown)."""
    code = getattr(source.function, "__code__", None)
    traceback, line = cause.__traceback__, ""
    while traceback is not None:
        frame_code = traceback.tb_frame.f_code
        if code is not None and frame_code.co_name == code.co_name and \
                frame_code.co_filename == code.co_filename:
            offset = traceback.tb_lineno - code.co_firstlineno
            lines = (source.source or "").splitlines()
            line = lines[offset].strip() if 0 <= offset < len(lines) else ""
        traceback = traceback.tb_next
    return line


def _index_hint_for(error: IndexError, source: KernelSource, tile: int) -> str:
    """The hint for an IndexError: which array its line indexed (and the size of the axis it
    overran) says which guard or index is wrong."""
    a, b, c = _names(source)
    line, shared = _learner_line(error, source), _shared_names(source)

    def indexes(name):
        return re.search(rf"\b{re.escape(name)}\s*\[", line) is not None

    size = re.search(r"with size (\d+)", str(error))
    overran_tile = size is not None and int(size.group(1)) == tile
    if not line:
        return LOAD_GUARD_HINT + " " + WRITE_GUARD_HINT
    if any(indexes(name) for name in shared) and (overran_tile or not (indexes(a)
                                                                        or indexes(b))):
        return f"`{line}` indexed a tile past its end: {TILE_INDEX_HINT}"
    if re.match(rf"{re.escape(c)}\s*\[", line):
        return f"`{line}` wrote outside C: {WRITE_GUARD_HINT}"
    if indexes(a) or indexes(b):
        return f"`{line}` read outside A or B: {LOAD_GUARD_HINT}"
    return f"`{line}` went past the end of an array: {LOAD_GUARD_HINT}"


class _Threads:
    """What each thread of a traced tiled launch did, sorted by kind, with what it should have
    done; threads are ((block x, block y), (thread x, thread y)) as the trace names them."""

    def __init__(self, trace, trial: Trial, names: tuple[str, str, str]):
        self.trace, self.trial, self.names = trace, trial, names
        self.T = trial.block[0]
        self.steps = -(-trial.inner // self.T)
        shapes = {names[0]: (trial.rows, trial.inner), names[1]: (trial.inner, trial.cols)}
        self.global_reads = {name: {} for name in names[:2]}
        self.shared_writes: dict = {}
        self.shared_reads: dict = {}
        self.tile_of: dict = {}  # shared array -> the global array whose values it holds
        last_read: dict = {}
        for access in trace.accesses:
            t = access.thread
            if access.space == "global" and access.kind == "read" and access.array in shapes:
                index = tuple(i % s for i, s in zip(access.index, shapes[access.array],
                                                    strict=False))
                self.global_reads[access.array].setdefault(t, []).append(index)
                last_read[t] = access.array
            elif access.space == "shared" and access.kind == "write":
                self.shared_writes.setdefault(access.array, {}).setdefault(t, []).append(
                    access.index)
                if t in last_read:
                    self.tile_of.setdefault(access.array, last_read.pop(t))
            elif access.space == "shared" and access.kind == "read":
                self.shared_reads.setdefault(access.array, {}).setdefault(t, []).append(
                    access.index)

    def position(self, thread) -> tuple[int, int, int, int]:
        (bx, by), (tx, ty) = thread
        return by * self.T + ty, bx * self.T + tx, tx, ty

    def expected_loads(self, thread, name) -> list[tuple[int, int]]:
        row, col, tx, ty = self.position(thread)
        M, N, K, T = self.trial.rows, self.trial.cols, self.trial.inner, self.T
        if name == self.names[0]:
            return [(row, s * T + tx) for s in range(self.steps) if row < M and s * T + tx < K]
        return [(s * T + ty, col) for s in range(self.steps) if s * T + ty < K and col < N]

    def max_loads(self, name) -> int:
        return max((len(v) for v in self.global_reads[name].values()), default=0)

    @staticmethod
    def label(thread) -> str:
        (bx, by), (tx, ty) = thread
        return f"thread (x={tx}, y={ty}) of block (x={bx}, y={by})"


@dataclass
class Tiling:
    """What the traced tiled launch's threads did (``threads``, its trace among them), whether
    C came out ``right``, and the kernel's ``source``: the evidence :data:`TILING_MISTAKES`,
    :data:`BARRIER_MISTAKES` and :data:`TILE_ACCESS_MISTAKES` (the method) are told from."""

    threads: _Threads
    trial: Trial
    right: bool
    source: KernelSource | None = None

    @property
    def where(self) -> str:
        return str(self.trial)

    @cached_property
    def race(self):
        """The first (store, other) pair of one block's accesses to one tile slot by two
        threads between the same two barriers (:meth:`gpulab.instruments.KernelTrace.
        shared_races`); None when there is none."""
        return next(iter(self.threads.trace.shared_races()), None)

    @property
    def loads(self) -> dict[str, int]:
        return {name: self.threads.max_loads(name) for name in self.threads.names[:2]}

    @property
    def loaders(self) -> tuple[int, int]:
        """(threads that read A or B from global memory, threads in the launch)."""
        readers = set().union(*(set(r) for r in self.threads.global_reads.values()))
        return len(readers), len(self.threads.trace.threads)

    @property
    def heavy(self) -> list[str]:
        """A and/or B when a thread loaded more of it than one value per step (and slack)."""
        allowed = self.threads.steps + max(1, self.threads.steps // 2)
        return [name for name, count in self.loads.items() if count > allowed]

    @cached_property
    def barriers(self) -> list[int]:
        """The different numbers of barriers the threads passed, sorted."""
        trace = self.threads.trace
        return sorted(set(trace.barrier_counts.get(t, 0) for t in trace.threads))

    @property
    def steps_taken(self) -> int:
        """The steps the kernel took (one load of A and one of B per step), if fewer than K
        needs: a loop that stops early is the sum's mistake, not the barriers'."""
        return max(1, min(self.threads.steps, max(self.loads.values())))

    @property
    def too_few_barriers(self) -> bool:
        """Every thread passed the same barriers, fewer than two per step, and the trace shows
        a race: a tile slot one thread stored and another used between the same two barriers
        (:meth:`gpulab.instruments.KernelTrace.shared_races`). Tiles in two buffers, used in
        turn, need one barrier per step and show none."""
        return (len(self.barriers) == 1 and self.barriers[0] < 2 * self.steps_taken
                and bool(self.threads.trace.shared_races()))

    @cached_property
    def missing_barriers(self) -> list[str]:
        """Which of the step's two barriers the source lacks: SYNC_AFTER_LOADS and/or
        SYNC_AFTER_SUMS (both when the step's loop can't be found). The step's loop is the
        first whose statements store into a tile and read one; a barrier counts where it stands
        in the step, in a branch too (`if full: ...; cuda.syncthreads()`), but not inside a
        loop of its own."""
        return self._missing(every_step=False)

    @cached_property
    def missing_at_every_step(self) -> list[str]:
        """As :attr:`missing_barriers`, where a barrier in a branch counts only when each arm
        has one (`if k0 > 0: cuda.syncthreads()` leaves the first step without it)."""
        return self._missing(every_step=True)

    def _missing(self, every_step: bool) -> list[str]:
        shared = _shared_names(self.source)

        def barriers_in(statement) -> list[tuple[int, int]]:
            if isinstance(statement, ast.For | ast.While):
                return []
            if (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)
                    and getattr(statement.value.func, "attr", getattr(
                        statement.value.func, "id", "")) == "syncthreads"):
                return [(statement.lineno, statement.col_offset)]
            if isinstance(statement, ast.If):
                arms = [[b for inner in arm for b in barriers_in(inner)]
                        for arm in (statement.body, statement.orelse)]
                return [] if every_step and not all(arms) else arms[0] + arms[1]
            return [b for inner in ast.iter_child_nodes(statement)
                    if isinstance(inner, ast.stmt) for b in barriers_in(inner)]

        def where(statement) -> tuple[int, int]:
            return statement.lineno, statement.col_offset

        for loop in self.source.walk():
            if not isinstance(loop, ast.For | ast.While):
                continue
            body = loop.body
            stores = [max(where(n) for n in ast.walk(s) if isinstance(n, ast.Subscript)
                          and isinstance(n.ctx, ast.Store) and getattr(n.value, "id", "") in shared)
                      for s in body if _uses_tile(s, shared, ast.Store)]
            reads = [where(s) for s in body
                     if _uses_tile(s, shared, ast.Load) and not _uses_tile(s, shared, ast.Store)]
            if not stores or not reads:
                continue
            barriers = [b for s in body for b in barriers_in(s)]

            def between(first, then, barriers=barriers) -> bool:
                """A barrier after ``first`` and before ``then``, round the loop if ``then``
                comes first in the body (a step that loads the next tiles at its end)."""
                return any(first < i < then if first < then else (i > first or i < then)
                           for i in barriers)

            missing = []
            if not between(max(stores), min(reads)):
                missing.append(SYNC_AFTER_LOADS)
            if not between(max(reads), min(stores)):
                missing.append(SYNC_AFTER_SUMS)
            return missing
        return [SYNC_AFTER_LOADS, SYNC_AFTER_SUMS]

    @cached_property
    def wrong_load(self) -> tuple | None:
        """(A's or B's name, the thread, the loads it should make, those it made) of the first
        thread whose loads from A or B are not the tiled kernel's; None when all are."""
        threads = self.threads
        for name in threads.names[:2]:
            for thread in threads.trace.threads:
                expected = threads.expected_loads(thread, name)
                got = threads.global_reads[name].get(thread, [])
                if sorted(set(got)) != sorted(expected):
                    return name, thread, expected, got
        return None

    @property
    def load_skipped(self) -> bool:
        """The first wrong thread only skipped loads (none extra): a guard's bound."""
        if self.wrong_load is None:
            return False
        _, _, expected, got = self.wrong_load
        return bool(set(expected) - set(got)) and not set(got) - set(expected)

    @cached_property
    def wrong_store(self) -> tuple | None:
        """The first wrong store into a tile, array by array: ("nothing", the array, the
        threads that stored nothing at some step) or ("slots", the array, a thread that stored
        at another slot than its own [ty, tx]); None when all are right."""
        threads = self.threads
        for array, writers in threads.shared_writes.items():
            short = [t for t in threads.trace.threads if len(writers.get(t, [])) < threads.steps]
            if short:
                return "nothing", array, short
            for thread, indices in writers.items():
                _, _, tx, ty = threads.position(thread)
                if set(indices) != {(ty, tx)} and _two_d(indices):
                    return "slots", array, thread
        return None

    @cached_property
    def stale_read(self) -> tuple | None:
        """(the tile, the thread, the slot) of the first read of a tile slot by a thread inside
        C when no thread of its block had stored into the slot since that thread last read it,
        or ever (an earlier step's value, or what shared memory held); None when none was."""
        since_store: dict = {}  # (block, tile, slot) -> the threads that read it since a store
        for access in (a for a in self.threads.trace.accesses if a.space == "shared"):
            key = (access.thread[0], access.array, access.index)
            row, col, _, _ = self.threads.position(access.thread)
            if access.kind == "write":
                since_store[key] = set()
            elif key in since_store and access.thread not in since_store[key]:
                since_store[key].add(access.thread)
            elif row < self.trial.rows and col < self.trial.cols:
                return access.array, access.thread, access.index
        return None

    @cached_property
    def wrong_reads(self) -> tuple | None:
        """(the tile, the thread) of the first thread whose multiply-adds read the wrong slots
        of A's or B's tile; None when all read theirs."""
        threads = self.threads
        for array, readers in threads.shared_reads.items():
            if array not in threads.tile_of:
                continue
            holds_a = threads.tile_of[array] == threads.names[0]
            for thread, indices in readers.items():
                _, _, tx, ty = threads.position(thread)
                expected = ({(ty, k) for k in range(threads.T)} if holds_a
                            else {(k, tx) for k in range(threads.T)})
                if set(indices) != expected and _two_d(indices):
                    return array, thread
        return None


def _two_d(indices) -> bool:
    """Are these a 2-D tile's slots? A flat tile's (``tile[ty * T + tx]``) have one index,
    whose row length the trace cannot tell: the slot rules leave those to the values of C."""
    return all(len(index) == 2 for index in indices)


def _untiled_message(e: Tiling) -> str:
    (a, b), loads, heavy = e.threads.names[:2], e.loads, e.heavy
    start = "correct, but each" if e.right else "each"
    if len(heavy) == 2:
        what = (f"{start} thread read up to {loads[a] + loads[b]} values from global memory "
                f"({loads[a]} of {a}, {loads[b]} of {b}; 2K = {2 * e.trial.inner}): that's the "
                "naive kernel")
    else:
        what = (f"{start} thread read up to {loads[heavy[0]]} values of {heavy[0]} straight "
                f"from global memory (K = {e.trial.inner}): only "
                f"{(set((a, b)) - set(heavy)).pop()} goes through a tile")
    T = e.threads.T
    return (f"{what}. With {T} x {T} tiles a thread loads one value of each per step along K: "
            f"2 x ceil(K / {T}) = {2 * e.threads.steps} in all")


TILING_MISTAKES = (
    Mistake("one thread (or a few) loading a whole tile while the others wait",
            lambda e: bool(e.heavy) and 0 < e.loaders[0] <= e.loaders[1] // 4,
            lambda e: (f"{'correct, but only' if e.right else 'only'} {e.loaders[0]} of the "
                       f"{e.loaders[1]} threads read A or B from global memory, up to "
                       f"{sum(e.loads.values())} values each: a few threads load whole tiles "
                       f"while the others wait at the barrier. With {e.threads.T} x "
                       f"{e.threads.T} tiles every thread loads one value of each per step "
                       f"along K, {2 * e.threads.steps} in all"),
            "share the loading: at each step every thread copies one value of A's tile and "
            "one of B's (its own row and column in the tile), then all wait at the barrier.",
            recognised_from="trace"),
    Mistake("untiled: a thread loads A or B from global memory at every k (the naive kernel, "
            "or one matrix only through a tile)", lambda e: e.heavy, _untiled_message,
            UNTILED_HINT, recognised_from="trace"),
)


def _too_few_barriers_message(consequence: str) -> Callable[[Tiling], str]:
    def message(e: Tiling) -> str:
        result = ("The answer is right here only because the simulator happened to run the "
                  "threads in a lucky order: on a GPU the warps run at the same time, and"
                  if e.right else "That is why C is wrong:")
        return (f"each thread passed {e.barriers[0]} barrier(s) (`cuda.syncthreads()`) in "
                f"{e.steps_taken} steps along K; a tiled matmul needs two per step. {result} "
                f"{consequence}")
    return message


def _missing_barriers_hint(e: Tiling) -> str:
    return "; and ".join(e.missing_at_every_step or (SYNC_AFTER_LOADS, SYNC_AFTER_SUMS)) + "."


# The barriers, judged from the trace even when C is right (after TILING_MISTAKES), in order.
BARRIER_MISTAKES = (
    Mistake("threads passing different numbers of barriers", lambda e: len(e.barriers) > 1,
            lambda e: (f"not every thread passed the same barriers: from {e.barriers[0]} to "
                       f"{e.barriers[-1]} per thread. On a GPU the threads that skip one never "
                       "arrive"), BARRIER_HINT, recognised_from="trace"),
    Mistake("no barrier after the loads (also when the simulator's answer happens to be right)",
            lambda e: e.too_few_barriers and e.missing_at_every_step == [SYNC_AFTER_LOADS],
            _too_few_barriers_message("threads read tile slots that others have not stored "
                                      "yet"), _missing_barriers_hint, recognised_from="trace"),
    Mistake("two barriers per step, but none between the loads and the multiply-adds",
            lambda e: len(e.barriers) == 1 and e.missing_barriers == [SYNC_AFTER_LOADS],
            lambda e: (f"each thread passed {e.barriers[0]} barriers in {e.steps_taken} steps "
                       "along K, but none between its stores into the tiles and its "
                       "multiply-adds: " + ("right here only by luck; on a GPU " if e.right
                                            else "") + "threads read tile slots that others "
                       "have not stored yet"), _missing_barriers_hint, recognised_from="trace"),
    Mistake("no barrier after the multiply-adds (also when the simulator's answer happens to "
            "be right)",
            lambda e: e.too_few_barriers and e.missing_at_every_step == [SYNC_AFTER_SUMS],
            _too_few_barriers_message("a fast thread stores the next step's values into a tile "
                                      "that slower threads are still reading"),
            _missing_barriers_hint, recognised_from="trace"),
    Mistake("too few barriers: neither of the step's two, or not at every step (also when the "
            "simulator's answer happens to be right)", lambda e: e.too_few_barriers,
            _too_few_barriers_message("threads read tile slots that others have not stored "
                                      "yet, and overwrite slots others still read"),
            _missing_barriers_hint, recognised_from="trace"),
    Mistake("barriers in the wrong places: a tile slot stored by one thread and used by another "
            "between the same two barriers (a race)", lambda e: e.race is not None,
            lambda e: _race_message(e), "two barriers per step, each outside the loop over k: "
            "one after the stores into the tiles (before any multiply-add reads them), one "
            "after the multiply-adds (before the next step's stores overwrite them).",
            recognised_from="trace"),
)


def _race_message(e: Tiling) -> str:
    store, other = e.race
    slot = f"{store.array.split(':', 1)[-1]}[{', '.join(map(str, store.index))}]"
    used = "read" if other.kind == "read" else "stored into"
    return (f"{e.threads.label(store.thread)} stored {slot} and "
            f"{e.threads.label(other.thread)} {used} it with no barrier between the two: on a "
            "GPU their order is not fixed (a race), so a multiply-add may use a slot before it "
            "is stored, or after the next step overwrote it")


def _who(threads: _Threads, thread) -> str:
    row, col, _, _ = threads.position(thread)
    return f"{threads.label(thread)} (row {row}, column {col})"


def _skipped_load_message(e: Tiling) -> str:
    name, thread, expected, got = e.wrong_load
    matrix = "A" if name == e.threads.names[0] else "B"
    i, j = sorted(set(expected) - set(got))[0]
    return (f"{_who(e.threads, thread)} never loaded {name}[{i}, {j}], which lies inside "
            f"{matrix} ({e.trial.rows if matrix == 'A' else e.trial.inner} x "
            f"{e.trial.inner if matrix == 'A' else e.trial.cols}): a guard compares with the "
            "wrong size")


def _wrong_loads_message(e: Tiling) -> str:
    name, thread, expected, got = e.wrong_load
    extra = sorted(set(got) - set(expected))
    shown = ", ".join(f"{name}[{i}, {j}]" for i, j in (extra or got)[:3])
    should = ", ".join(f"{name}[{i}, {j}]" for i, j in expected[:3]) or "nothing"
    return (f"{_who(e.threads, thread)} loaded {shown}; in a tiled matmul, at the steps k0 = 0, "
            f"{e.threads.T}, ..., it loads {should}")


def _nothing_stored_message(e: Tiling) -> str:
    _, array, short = e.wrong_store
    threads, thread = e.threads, short[0]
    source = threads.tile_of.get(array)
    outside = (f" (its element of {source} lies outside {source} at some step)"
               if source else "")
    return (f"{len(short)} thread(s) stored nothing into {array.split(':', 1)[-1]} at one step "
            f"or more, e.g. {threads.label(thread)}{outside}: it stored "
            f"{len(threads.shared_writes[array].get(thread, []))} value(s) in {threads.steps} "
            "steps. That slot keeps what it held before (here, the large value the check fills "
            "shared memory with; on a GPU, the previous step's value), and the multiply-adds "
            "use it")


def _wrong_slots_message(e: Tiling) -> str:
    _, array, thread = e.wrong_store
    tile, indices = array.split(":", 1)[-1], e.threads.shared_writes[array][thread]
    _, _, tx, ty = e.threads.position(thread)
    slots = ", ".join(f"{tile}[{i}, {j}]" for i, j in sorted(set(indices))[:3])
    swapped = set(indices) == {(tx, ty)}
    return (f"{e.threads.label(thread)} stored into {slots}; each thread stores into its own "
            f"slot, {tile}[ty, tx] = {tile}[{ty}, {tx}]"
            f"{' (x and y are swapped)' if swapped else ''}")


def _wrong_reads_message(e: Tiling) -> str:
    array, thread = e.wrong_reads
    threads, tile = e.threads, array.split(":", 1)[-1]
    holds_a = threads.tile_of.get(array) == threads.names[0]
    _, _, tx, ty = threads.position(thread)
    want = f"{tile}[{ty}, k]" if holds_a else f"{tile}[k, {tx}]"
    slots = ", ".join(f"{tile}[{i}, {j}]"
                      for i, j in sorted(set(threads.shared_reads[array][thread]))[:3])
    return (f"{threads.label(thread)} multiplied {slots}, ...; its row of C needs {want} for k "
            f"in range({threads.T}), {'a row' if holds_a else 'a column'} of the tile")


def _stale_read_message(e: Tiling) -> str:
    array, thread, slot = e.stale_read
    matrix = e.threads.tile_of.get(array, "A or B")
    return (f"C is right, but {e.threads.label(thread)} multiplied {array.split(':', 1)[-1]}"
            f"[{', '.join(map(str, slot))}] at a step at which no thread had stored into that "
            f"slot: past the edge of {matrix} nothing is stored into its tile, so the slot "
            "keeps an earlier step's value, and only the 0 in the other tile made the product "
            "0. When K is below the tile, no step stores it, and on a GPU it holds whatever "
            "shared memory held before (NaN, say: 0 × NaN is NaN)")


# From the trace when C is right (when it is wrong, TILE_ACCESS_MISTAKES name missing stores).
UNSTORED_READ_MISTAKES = (
    Mistake("a tile not filled with 0 past the edge, hidden by the other tile's 0s (C right)",
            lambda e: e.right and e.stale_read is not None, _stale_read_message,
            ZERO_FILL_HINT, recognised_from="trace"),
)


# Each thread's loads, its stores into the tiles and its reads of them, from the trace: tried
# when C is wrong and neither MATMUL_MISTAKES nor STEP_SUM_MISTAKES say why, in order.
TILE_ACCESS_MISTAKES = (
    Mistake("a load guard with the wrong bound (a thread skips an element inside A or B)",
            lambda e: e.load_skipped, _skipped_load_message, LOAD_GUARD_HINT,
            recognised_from="trace"),
    Mistake("loads of the wrong elements of A or B (x and y swapped in the loads)",
            lambda e: e.wrong_load is not None, _wrong_loads_message, LOADS_HINT,
            recognised_from="trace"),
    Mistake("no zero fill at the edge (a thread stores nothing into a tile at some step)",
            lambda e: e.wrong_store is not None and e.wrong_store[0] == "nothing",
            _nothing_stored_message, ZERO_FILL_HINT, recognised_from="trace"),
    Mistake("stores into the wrong slots of a tile (x and y swapped in the stores)",
            lambda e: e.wrong_store is not None, _wrong_slots_message, TILE_INDEX_HINT,
            recognised_from="trace"),
    Mistake("multiply-adds reading the wrong slots of a tile (x and y swapped in them)",
            lambda e: e.wrong_reads is not None, _wrong_reads_message,
            "in the multiply-adds, the thread's y index picks the row of A's tile and its x "
            "index the column of B's tile.", recognised_from="trace"),
)


# The sums a tiled kernel leaves in C when its loop over the steps goes wrong, in order (told
# from a :class:`Product`).
STEP_SUM_MISTAKES = (
    Mistake("the sum restarted at every step", lambda e: e.holds(e.trial.inner, e.last),
            lambda e: (f"C holds only the last step's sum (k = {e.last} .. {e.trial.inner - 1}): "
                       "the sum starts again at every step"),
            "start `acc` at 0 once, before the loop over the steps, and write C after that "
            "loop."),
    Mistake("the loop over the steps stopped early", lambda e: e.stopped_after is not None,
            lambda e: (f"C holds the sum over k = 0 .. {e.stopped_after * e.T - 1} only: the "
                       f"loop over the steps stopped after {e.stopped_after} of the {e.steps} "
                       f"steps K = {e.trial.inner} needs"),
            STEPS_HINT),
)


TILED = CheckSpec(
    "matmul_tiled", "matmul_tiled(A, B, C)", TILED_STUB_HINT,
    TILED_SOURCE_MISTAKES + TILING_MISTAKES + BARRIER_MISTAKES + UNSTORED_READ_MISTAKES
    + MATMUL_MISTAKES + STEP_SUM_MISTAKES + TILE_ACCESS_MISTAKES, parameters=3,
    title="2. tiled matmul", call="check_matmul_tiled(my_matmul_tiled, tile=TILE)",
    holds="the answer on 6 blocks of TILE × TILE (2 × 3 or 3 × 2; on a GPU also on "
          f"{LARGE_TILED_BLOCKS[0] + 1} to {LARGE_TILED_BLOCKS[1]} blocks a side), and the "
          "method, from a trace of the same launch and the source: at most about one load of "
          "A and one of B per thread per step, 2·⌈K/TILE⌉ in all; every thread passing the "
          "same number of barriers, with one between a step's stores and its multiply-adds "
          "and one before the next step's stores (a tile slot read before it was stored, or "
          "stored over before all had read it, is named as a race)",
    also="the stub; a barrier inside a branch; an IndexError, with the line and whether a "
         "load, the write or a tile overran")


def _tile_given(given: dict) -> None:
    """The tile the check runs with: the one given, or the default, as an int; ValueError for a
    tile it cannot test."""
    tile = given["tile"] or default_side()
    if isinstance(tile, bool) or not isinstance(tile, (int, np.integer)) or not 3 <= tile <= 32:
        raise ValueError(f"tile must be a whole number from 3 to 32, not {tile!r}: a tile x tile "
                         "block has at most 1024 threads, and with smaller tiles there are no "
                         "test sizes that are not multiples of the tile")
    given["tile"] = int(tile)


@TILED.check(learners=("kernel",), arguments=_tile_given)
def check_matmul_tiled(kernel, tile: int | None = None, seed: int | None = None,
                       dtype=np.float32) -> str:
    """``tile`` is the kernel's ``TILE`` (by default 8 in the simulator, 16 on a GPU: from 3 to
    32). The source is read before anything runs. Then the kernel runs on 6 blocks
    (:func:`draw_tiled`; on a GPU also on 6 to 30 blocks a side, :data:`LARGE_TILED_BLOCKS`) and is
    traced in the simulator on the small launch, whose C counts too (the simulator's shared
    memory starts poisoned, a GPU's often with zeros). The trace's loads and barriers are
    judged even when C is right; a wrong C is told from the mistakes in the spec's order
    (:data:`MATMUL_MISTAKES` without the naive kernel's wrong sums), or else which elements
    are wrong."""
    source = TILED.start(kernel)
    reject(TILED_SOURCE_MISTAKES, TiledSource(source, tile))
    names = _names(source)
    trial = draw_tiled("check_matmul_tiled", seed, tile, dtype)
    runs = [trial]
    if device.tier() == "gpu":  # a large launch on the GPU as well: the trace stays small
        runs.append(draw_tiled("check_matmul_tiled", seed, tile, dtype, large=True))
    offer_trace(kernel, trial.blocks, trial.threads, *names,
                note=f"with {trial.size} (NumPy arrays), and "
                     "C = np.zeros((A.shape[0], B.shape[1]), np.float32)")
    results = []
    for run in runs:
        try:
            results.append((*_run(kernel, run), run))
        except KernelError as error:
            if isinstance(error.cause, IndexError):
                hint = _index_hint_for(error.cause, source, tile)
                raise KernelError(error.cause, run, hint) from None
            raise
    A, B, C, _ = results[0]
    trace = trace_trial(kernel, trial, A, B, np.full((trial.rows, trial.cols), np.nan, dtype),
                        races=False)  # its tiles' races have rules of their own
    if trace.error:
        raise CheckFailedError(
            f"traced in the simulator, your kernel stopped: {trace.error} ({trial}).",
            LOAD_GUARD_HINT + " " + TILE_INDEX_HINT)
    threads = _Threads(trace, trial, names)
    traced_C = trace.arrays.get(names[2])
    if traced_C is not None:  # the simulator's run counts too: its shared memory starts
        results.append((A, B, traced_C, trial))  # poisoned, a GPU's often with zeros
    right = not any(Product(*result).wrong.any() for result in results)
    tiling = Tiling(threads, trial, right, source)
    reject(TILING_MISTAKES + BARRIER_MISTAKES + UNSTORED_READ_MISTAKES, tiling)
    if not right:
        for result in results:
            failure = _diagnose(*result, TILE_INDEX_HINT, source, suspects=False)
            if failure is not None and failure.specific:
                raise failure
        reject(STEP_SUM_MISTAKES, Product(A, B, C, trial))
        reject(TILE_ACCESS_MISTAKES, tiling)
        raise next(f for f in (_diagnose(*result, TILE_INDEX_HINT, source) for result in results)
                   if f is not None)
    loads = threads.max_loads(names[0]) + threads.max_loads(names[1])
    barriers = trace.max_per_thread("barriers")
    return (f"C = A @ B right for {trial.size} with {tile} x {tile} tiles ({trial.launched}, "
            f"{threads.steps} steps along K" + "".join(f"; and for {run.size}" for run in runs[1:])
            + f"). Each thread loaded at most {loads} values from global memory "
            f"(2 x ceil(K / {tile}) = {2 * threads.steps}; the naive kernel loads 2K = "
            f"{2 * trial.inner}) and passed {barriers} barriers (seed={trial.seed}).")


__all__ = ["check_matmul_naive", "check_matmul_tiled", "default_side", "draw_naive", "draw_tiled",
           "operands"]
