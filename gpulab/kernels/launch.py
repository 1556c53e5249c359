"""Launch configurations: how many blocks of how many threads, and which element each thread
handles. The diagrams in :mod:`gpulab.plots` are drawn from these objects, so what a learner
sees is the launch that actually ran."""

from __future__ import annotations

from dataclasses import dataclass

from gpulab.device import DEVICE_LIMITS
from gpulab.kernels.arrays import InputError, whole_number

WARP_SIZE = DEVICE_LIMITS["WARP_SIZE"]
MAX_THREADS_PER_BLOCK = DEVICE_LIMITS["MAX_THREADS_PER_BLOCK"]


@dataclass(frozen=True)
class LaunchConfig:
    """A 1-D launch: ``blocks`` blocks of ``threads_per_block`` threads over ``n_elements``.

    With ``grid_stride`` the threads loop: thread ``t`` handles ``t, t + total_threads, ...``;
    otherwise thread ``t`` handles element ``t`` and threads with ``t >= n_elements`` idle.
    """

    n_elements: int
    threads_per_block: int
    blocks: int
    grid_stride: bool = False

    @property
    def total_threads(self) -> int:
        return self.blocks * self.threads_per_block

    @property
    def idle_threads(self) -> int:
        return max(self.total_threads - self.n_elements, 0)

    @property
    def warps_per_block(self) -> int:
        return -(-self.threads_per_block // WARP_SIZE)

    def elements_of(self, block: int, thread: int) -> range:
        """The element indices that thread ``thread`` of block ``block`` handles."""
        global_index = block * self.threads_per_block + thread
        if self.grid_stride:
            return range(global_index, self.n_elements, self.total_threads)
        return range(global_index, min(global_index + 1, self.n_elements))

    def __str__(self) -> str:
        kind = "grid-stride" if self.grid_stride else "one element per thread"
        return (
            f"{self.blocks} block(s) x {self.threads_per_block} threads = {self.total_threads} "
            f"threads for {self.n_elements} elements ({kind}, {self.idle_threads} idle)"
        )


def check_threads_per_block(threads_per_block: int, power_of_two: bool = False) -> int:
    """A block size CUDA accepts (1..1024), and a power of two where a tree halves it."""
    threads_per_block = whole_number(
        "threads_per_block", threads_per_block, 1, MAX_THREADS_PER_BLOCK,
        why=", the limit of every CUDA GPU since compute capability 2.0")
    if power_of_two and threads_per_block & (threads_per_block - 1):
        raise InputError(
            f"threads_per_block={threads_per_block} must be a power of two for a tree reduction "
            "(it halves the active threads at each step); try 128 or 256"
        )
    return threads_per_block


def one_thread_per_element(n_elements: int, threads_per_block: int = 256) -> LaunchConfig:
    """Enough blocks that every element gets its own thread: ``ceil(n / threads_per_block)``."""
    threads_per_block = check_threads_per_block(threads_per_block)
    blocks = max(-(-n_elements // threads_per_block), 1)
    return LaunchConfig(n_elements, threads_per_block, blocks)


def grid_stride(n_elements: int, threads_per_block: int, blocks: int) -> LaunchConfig:
    """A fixed grid of ``blocks`` blocks whose threads loop over the elements."""
    threads_per_block = check_threads_per_block(threads_per_block)
    blocks = whole_number("blocks", blocks, 1)
    return LaunchConfig(n_elements, threads_per_block, blocks, grid_stride=True)
