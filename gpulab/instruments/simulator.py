"""Numba's CUDA simulator as the instruments see it: which simulated thread is running, and
patching the simulator's classes for the length of a block.

Numba's CUDA simulator runs every thread of a kernel as a Python thread, so code called from a
kernel (an instrumented array's ``__getitem__``, a patched ``syncthreads``) can ask which
simulated thread it runs in:

- :func:`simulated_thread` — ``(block, thread)`` of the simulated thread running now: the
  block's linear index in the grid and the thread's linear index in its block, computed the way
  CUDA does (x fastest, then y, then z) for 1-D, 2-D and 3-D launches alike;
  :func:`running_thread` is the simulator's thread object itself.
- :func:`simulator_thread` — the thread named at the start of a simulator's error message.
- :func:`patched` — set class attributes of the simulator for a block, then put them back.
- :func:`events_as_on_a_gpu` — the simulator's CUDA events with the real target's host API, so
  that a learner's timing written for a GPU runs in the simulator too.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


def dim3(value) -> tuple[int, int, int] | None:
    """(x, y, z) from the simulator's Dim3 or a tuple of up to three ints; None if unknown."""
    if value is None:
        return None
    if all(hasattr(value, axis) for axis in "xyz"):
        return int(value.x), int(value.y), int(value.z)
    values = tuple(int(v) for v in value) + (1, 1, 1)
    return values[0], values[1], values[2]


def linear_index(index: tuple[int, int, int], extent: tuple[int, int, int]) -> int:
    """CUDA's linear index of a 3-D ``index`` within ``extent``: ``x + X * (y + Y * z)``."""
    return index[0] + extent[0] * (index[1] + extent[1] * index[2])


def simulated_thread() -> tuple[int, int] | None:
    """``(block, thread)`` of the simulated CUDA thread running now, or None outside a kernel.

    ``block`` is the linear index of ``cuda.blockIdx`` in the grid and ``thread`` the linear
    index of ``cuda.threadIdx`` in the block (``x + blockDim.x * (y + blockDim.y * z)``), so
    threads ``32 w .. 32 w + 31`` of a block form its warp ``w`` in 1-D, 2-D and 3-D launches.
    """
    current = threading.current_thread()
    block, thread = dim3(getattr(current, "blockIdx", None)), dim3(
        getattr(current, "threadIdx", None))
    if block is None or thread is None:
        return None
    # The simulator keeps the launch's dimensions on the thread's block manager (numba 0.5x-0.6x).
    manager = getattr(current, "_manager", None)
    grid_dim = dim3(getattr(manager, "_grid_dim", None))
    block_dim = dim3(getattr(manager, "_block_dim", None))
    if grid_dim is None or block_dim is None:
        if block[1:] == (0, 0) and thread[1:] == (0, 0):  # 1-D: the x index is the answer
            return block[0], thread[0]
        raise RuntimeError("gpulab.instruments cannot find the launch's dimensions in this "
                           "version of numba's CUDA simulator; please report this")
    return linear_index(block, grid_dim), linear_index(thread, block_dim)


def running_thread():
    """The simulator's thread object running now, or None outside a simulated kernel."""
    current = threading.current_thread()
    return current if hasattr(current, "threadIdx") and hasattr(current, "blockIdx") else None


_SIM_PREFIX = re.compile(r"tid=\[([\d, ]+)\] ctaid=\[([\d, ]+)\]:?\s*")


def simulator_thread(text: str) -> tuple[str, str]:
    """Split an error message of the simulator's, ``"tid=[3, 0, 0] ctaid=[1, 0, 0]: index 5
    ..."``, into ``("block (1, 0, 0), thread (3, 0, 0) (x, y, z)", "index 5 ...")``; a message
    without that prefix gives ``("", text)``."""
    prefix = _SIM_PREFIX.match(text)
    if not prefix:
        return "", text
    thread = tuple(int(v) for v in prefix.group(1).split(","))
    block = tuple(int(v) for v in prefix.group(2).split(","))
    return f"block {block}, thread {thread} (x, y, z)", text[prefix.end():]


@contextmanager
def patched(patches: dict) -> Iterator[None]:
    """Set ``(owner, name) -> value`` class attributes for the block, then put them back."""
    originals = {key: key[0].__dict__[key[1]] for key in patches}
    try:
        for (owner, name), value in patches.items():
            setattr(owner, name, value)
        yield
    finally:
        for (owner, name), value in originals.items():
            setattr(owner, name, value)


def events_as_on_a_gpu() -> None:
    """Give the simulator's CUDA events what the real target has and the simulator lacks:
    ``cuda.event(timing=True)`` (its ``Event()`` takes no argument), ``cuda.event_elapsed_time(
    start, stop)`` (missing), and an ``elapsed_time`` in milliseconds (its own returns -1): the
    host time between the two records. The simulator runs launches synchronously, so that is
    the simulated work's time on this CPU, which says nothing about a GPU. Nothing changes on a
    GPU; a second call changes nothing."""
    from numba import cuda

    if "simulator" not in getattr(cuda.event, "__module__", "") or hasattr(cuda.event, "mended"):
        return
    # The clock as it is now: a check that records the learner's clock reads replaces
    # time.perf_counter later, and an event's record is not a clock read of the learner's.
    simulated, host_clock = cuda.event, time.perf_counter

    class Event(simulated):
        recorded_s: float | None = None

        def record(self, stream=0):
            self.recorded_s = host_clock()
            return super().record(stream)

        def elapsed_time(self, event) -> float:
            if self.recorded_s is None or event.recorded_s is None:
                raise ValueError("elapsed_time needs both events recorded (event.record())")
            return (event.recorded_s - self.recorded_s) * 1e3

    def event(timing: bool = True) -> Event:
        return Event()

    event.mended = True
    cuda.event = event
    cuda.event_elapsed_time = lambda start, stop: start.elapsed_time(stop)


__all__ = ["dim3", "events_as_on_a_gpu", "linear_index", "patched", "running_thread",
           "simulated_thread",
           "simulator_thread"]
