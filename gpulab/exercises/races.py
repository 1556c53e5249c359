"""Races on shared memory, told from a trace: a shared slot that one thread wrote and another
used between the same two barriers (:meth:`gpulab.instruments.KernelTrace.shared_races`). On
a GPU the two need not come in the order the simulator ran them (it runs a block's threads one
after another up to each barrier), so a kernel with such a race can give right results here and
wrong ones on a GPU. Every traced kernel check applies :data:`SHARED_RACE` (through
:func:`gpulab.exercises.running.trace_trial`); chapter 01's block sum words it for its tree.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpulab.exercises.mistakes import Mistake
from gpulab.instruments import thread_label

SHARED_RACE_HINT = (
    "a value that belongs to one thread stays in a local variable (or a `cuda.local.array`): a "
    "`cuda.shared.array` is one copy for the whole block. A thread may use a shared slot "
    "another thread wrote only after a `cuda.syncthreads()` that both pass in between."
)


def shared_race_said(races: list, right: str) -> str:
    """The first race of ``races`` ((write, other) accesses), after ``right`` (what was right
    in spite of it: "the total is right here")."""
    write, other = races[0]
    name = write.array.removeprefix("shared:")
    slot = f"{name}[{', '.join(map(str, write.index))}]"
    did = "read" if other.kind == "read" else "wrote"
    return (f"{right}, but {thread_label(write.thread)} wrote {slot} and "
            f"{thread_label(other.thread)} {did} it between the same two barriers (after "
            f"{write.epoch} of them): `{name}` is a shared array, one copy for the whole block, "
            "and on a GPU the two need not come in that order, so the "
            f"{'read may see the other value' if did == 'read' else 'last write may be either'}"
            ". The simulator runs a block's threads one after another up to each barrier, "
            "which hides it")


@dataclass
class SharedRaces:
    """A traced launch's shared-memory races (``races``: (write, other) pairs) and where it
    ran (``where``: the launch and the seed)."""

    races: list
    where: str


SHARED_RACE = Mistake(
    "a shared slot written by one thread and used by another between the same two barriers (a "
    "race the simulator's order hides)", lambda e: bool(e.races),
    lambda e: shared_race_said(e.races, "the results are right here"), SHARED_RACE_HINT,
    recognised_from="trace")

__all__ = ["SHARED_RACE", "SHARED_RACE_HINT", "SharedRaces", "shared_race_said"]
