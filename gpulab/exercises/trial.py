"""One random problem of a kernel check, for any shape: its sizes, its launch, its seed.

A :class:`Trial` draws the block size too (from :data:`BLOCK_CHOICES` of the tier), then sizes
that are not multiples of it, so that a kernel which hard-codes a block size (``blockIdx.x *
64``) or a problem size fails, as does a missing guard. Every draw comes from the seed, which a
failure reports: ``check_...(kernel, seed=1234)`` repeats it exactly. :meth:`Trial.with_block`
gives the same problem under another block size (a check runs a kernel under two, so that no
hard-coded size passes by luck).

A 1-D trial has ``n``, ``threads_per_block`` and int ``blocks``/``threads``; a 2-D one (x along
the columns) ``rows``, ``cols`` and ``(x, y)`` tuples, never square, and such that a kernel with
rows and columns swapped misses part of the output. Both work with
:func:`gpulab.exercises.running.launch`, :func:`~gpulab.exercises.running.run_elementwise`,
:func:`~gpulab.exercises.running.read_back` and the diagnoses of
:mod:`gpulab.exercises.outputs`. The same class covers the other shapes a check needs, by its
optional fields: ``grid_blocks`` launches a fixed grid whatever n is (a grid-stride loop),
``inner`` is the length of the axis a kernel sums over (a matmul's K, a softmax row's classes),
``case`` names which of a check's problems it is (``act = 1 (ReLU)``), ``repeat_with`` what
else its repeat call needs (``tile=16``), and ``other_size`` the block size of
:meth:`Trial.other_block` when the check drew a pair.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from gpulab import device

# Problem sizes a 1-D check draws from, per tier: the simulator costs ~0.1 ms per thread.
SIZE_RANGE = {"sim": (200, 700), "gpu": (2_000, 20_000)}
# Threads per block a 1-D check draws from, per tier: multiples of a warp (32), one of them not
# a power of two, so a kernel that only works for one block size, or for powers of two, fails.
BLOCK_CHOICES = {"sim": (32, 64, 96, 128), "gpu": (128, 256, 384, 512)}
# Per axis (x, y) of a 2-D check.
BLOCK_CHOICES_2D = {"sim": ((8, 8), (16, 4), (4, 16)), "gpu": ((16, 16), (32, 8), (8, 32))}
# Rows and columns of a 2-D check, per tier.
SIZE_RANGE_2D = {"sim": (9, 40), "gpu": (9, 300)}


def tier_key() -> str:
    """The key of the checks' per-tier tables (sizes, block choices): "gpu" on a GPU, "sim"
    otherwise (the simulator; the ptx tier runs no kernel)."""
    return "gpu" if device.tier() == "gpu" else "sim"


def draw_size(rng: np.random.Generator, threads_per_block: int,
              size_range: tuple[int, int] | None = None, full_blocks: int = 2) -> int:
    """A random n from ``size_range`` (default: the tier's :data:`SIZE_RANGE`) that is **not** a
    multiple of ``threads_per_block`` and spans at least ``full_blocks`` full blocks plus a
    partial one, so block-index and guard mistakes both show. The range is widened when it is
    too narrow for that, so a size is always found."""
    low, high = size_range or SIZE_RANGE[device.tier()]
    low = max(low, full_blocks * threads_per_block + 1)
    high = max(high, low + 2 * threads_per_block)
    if threads_per_block <= 1:  # every size is a multiple of 1
        return int(rng.integers(low, max(high, low + 2)))
    while True:
        n = int(rng.integers(low, high))
        if n % threads_per_block:
            return n


def describe_launch(blocks, threads) -> str:
    """'3 blocks of 64 threads', or '4 x 2 blocks of 8 x 8 threads' for a 2-D launch."""
    if isinstance(threads, int):
        return f"{blocks} blocks of {threads} threads"
    return (f"{' x '.join(str(b) for b in blocks)} blocks of "
            f"{' x '.join(str(t) for t in threads)} threads")


def _swap_shows(rows: int, cols: int, block: tuple[int, ...]) -> bool:
    """True when rows != cols and a kernel with rows and columns swapped (``r, c =
    cuda.grid(2)``) would miss part of a rows x cols output on this block's grid."""
    grid_x = -(-cols // block[0]) * block[0]  # threads along x (columns)
    grid_y = -(-rows // block[1]) * block[1]
    return rows != cols and (rows > grid_x or cols > grid_y)


@dataclass
class Trial:
    """One random problem: ``shape`` (the arrays' extents), ``block`` (threads per block along
    x, y), the element dtype, the seed and the random generator its data come from; and, where
    a check needs them, ``grid_blocks`` (a fixed grid of that many blocks, whatever n),
    ``inner`` (the length of the summed axis, not in ``shape``), ``case``, ``repeat_with`` and
    ``other_size`` (see the module's docstring). ``str(trial)`` says what it was and how to
    repeat it."""

    check_name: str
    seed: int
    shape: tuple[int, ...]
    block: tuple[int, ...]
    dtype: np.dtype
    rng: np.random.Generator = field(repr=False, compare=False)
    grid_blocks: int | None = None
    inner: int = 0
    case: str = ""
    repeat_with: str = ""
    other_size: int = 0

    @classmethod
    def draw(cls, check_name: str, seed: int, dtype=np.float32, *, dims: int = 1,
             block: int | tuple[int, ...] | None = None,
             size_range: tuple[int, int] | None = None,
             shape: tuple[int, ...] | None = None, case: int = 0) -> Trial:
        """A trial whose block (unless ``block`` is given) and sizes (unless ``shape`` is) are
        drawn from ``seed``; sizes are never a multiple of the block along their axis.

        A 2-D trial is problem number ``case`` of its check (a check may run several, e.g. one
        per activation): its block is the tier's :data:`BLOCK_CHOICES_2D` number ``seed +
        case`` (so cases 0, 1, 2 of one seed use all three, and a hard-coded block fails), its
        data come from their own random stream, and it is never square and never a shape that
        a kernel with rows and columns swapped would cover."""
        tier = tier_key()
        if dims == 1:
            if case:
                raise ValueError("case numbers a 2-D check's problems; a 1-D trial has none")
            rng = np.random.default_rng(seed)
            if block is None:
                block = BLOCK_CHOICES[tier][int(rng.integers(len(BLOCK_CHOICES[tier])))]
        else:
            rng = np.random.default_rng([seed, case])
            if block is None:
                choices = BLOCK_CHOICES_2D[tier]
                block = choices[(seed + case) % len(choices)]
        block = (block,) if isinstance(block, int) else tuple(block)
        if shape is None and dims == 1:
            shape = (draw_size(rng, block[0], size_range),)
        while shape is None:
            sizes = size_range or SIZE_RANGE_2D[tier]
            rows = draw_size(rng, block[1], sizes, full_blocks=1)
            cols = draw_size(rng, block[0], sizes, full_blocks=1)
            if _swap_shows(rows, cols, block):
                shape = (rows, cols)
        return cls(check_name, seed, tuple(shape), block, np.dtype(dtype), rng)

    def with_block(self, block: int | tuple[int, ...]) -> Trial:
        """The same problem (shape, dtype, seed: the same data; the same fixed grid, if any)
        under another block size."""
        block = (block,) if isinstance(block, int) else tuple(block)
        return replace(self, block=block, rng=np.random.default_rng(self.seed))

    def other_block(self) -> Trial:
        """The same problem under another block size: ``other_size`` when the check drew a
        pair, else the smallest of :data:`BLOCK_CHOICES` (1-D), or the next when this one is
        the smallest. So one of the two launches has blocks smaller than a size a kernel
        hard-codes (it leaves gaps: elements no thread writes), or, if the kernel hard-codes
        the smallest, one has larger blocks (it then covers only part of the array)."""
        if self.other_size:
            return self.with_block(self.other_size)
        choices = sorted(BLOCK_CHOICES[tier_key()])
        return self.with_block(choices[1] if self.block[0] == choices[0] else choices[0])

    @property
    def n(self) -> int:
        """Elements of a 1-D trial (of all its arrays' elements, for 2-D)."""
        return int(np.prod(self.shape))

    @property
    def rows(self) -> int:
        return self.shape[0]

    @property
    def cols(self) -> int:
        return self.shape[-1]

    @property
    def threads_per_block(self) -> int:
        return int(np.prod(self.block))

    @property
    def threads(self) -> int | tuple[int, ...]:
        """The launch's threads per block: an int for 1-D, ``(x, y)`` for 2-D."""
        return self.block[0] if len(self.block) == 1 else self.block

    @property
    def blocks(self) -> int | tuple[int, ...]:
        """The launch's blocks: an int for 1-D (``grid_blocks`` on a fixed grid), ``(x, y)``
        for 2-D (x along the columns)."""
        if self.grid_blocks is not None:
            return self.grid_blocks
        if len(self.shape) == 1:
            return -(-self.shape[0] // self.block[0])
        return -(-self.cols // self.block[0]), -(-self.rows // self.block[1])

    @property
    def grid_threads(self) -> int:
        """All the launch's threads (of a 1-D launch: blocks times threads per block)."""
        return int(np.prod(self.launch_threads))

    @property
    def extents(self) -> tuple[int, ...]:
        """The lengths of the axes of the arrays the kernel gets: ``shape``, then ``inner``
        when there is one (a matmul's (M, N, K); a softmax's (rows, classes))."""
        return self.shape + ((self.inner,) if self.inner else ())

    @property
    def launch_threads(self) -> tuple[int, ...]:
        """The launch's threads along each axis, x first: blocks times threads per block."""
        blocks = (self.blocks,) if isinstance(self.blocks, int) else self.blocks
        return tuple(b * t for b, t in zip(blocks, self.block, strict=True))

    @property
    def idle_threads(self) -> int:
        """Threads of the launch that have no element (the last, partial block's extra ones)."""
        blocks = self.blocks if isinstance(self.blocks, int) else int(np.prod(self.blocks))
        return blocks * self.threads_per_block - self.n

    @property
    def padding(self) -> int:
        """Elements of padding after each axis of an array
        (:func:`gpulab.exercises.running.padded`): as many as a block has threads along an
        axis, so that every thread of the last, partial block that runs past the end lands in
        padding."""
        return max(self.block)

    @property
    def launched(self) -> str:
        return describe_launch(self.blocks, self.threads)

    @property
    def repeat(self) -> str:
        extra = f", {self.repeat_with}" if self.repeat_with else ""
        return (f"seed={self.seed}; repeat it with {self.check_name}(kernel{extra}, "
                f"seed={self.seed})")

    def uniform(self, low: float, high: float) -> np.ndarray:
        """Random values in [low, high) of the trial's shape and dtype."""
        return self.rng.uniform(low, high, self.shape).astype(self.dtype)

    def normal(self, *shape: int, scale: float = 1.0) -> np.ndarray:
        """Normal random values (of ``shape``, default the trial's) times ``scale``."""
        return (self.rng.standard_normal(shape or self.shape) * scale).astype(self.dtype)

    @property
    def size(self) -> str:
        """The problem's size in words: ``n=517``; ``23 x 31``; ``517 rows x 12 columns`` (rows of
        ``inner``); ``A 23x17 @ B 17x31`` (a product summed over ``inner``)."""
        if len(self.shape) == 1:
            return f"{self.n} rows x {self.inner} columns" if self.inner else f"n={self.n}"
        if self.inner:
            return f"A {self.rows}x{self.inner} @ B {self.inner}x{self.cols}"
        return " x ".join(map(str, self.shape))

    def __str__(self) -> str:
        launch = (f"a fixed grid of {self.launched} = {self.grid_threads} threads"
                  if self.grid_blocks is not None else self.launched)
        case = f"{self.case}; " if self.case else ""
        return f"{case}{self.size}, {launch}, {self.dtype.name}, {self.repeat}"


def draw_case(check_name: str, seed: int, dtype, case: int = 0) -> Trial:
    """Random problem number ``case`` of a 2-D check: rows x cols, not multiples of the block,
    rows != cols, and such that a kernel with r and c swapped (``r, c = cuda.grid(2)``) misses
    part of the matrix. Cases 0, 1, 2 of one seed use the tier's three block shapes
    (:data:`BLOCK_CHOICES_2D`), so a hard-coded block size fails: a 2-D :meth:`Trial.draw`."""
    return Trial.draw(check_name, seed, dtype, dims=2, case=case)


__all__ = ["BLOCK_CHOICES", "BLOCK_CHOICES_2D", "SIZE_RANGE", "SIZE_RANGE_2D", "Trial",
           "describe_launch", "draw_case", "draw_size", "tier_key"]
