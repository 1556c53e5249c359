"""The grid-stride loop's method rules, one set for every exercise whose kernel walks data
longer than its grid (chapter 02's copy, 08's evaluation, 10's amax): traced on a small fixed
grid (:class:`gpulab.exercises.evidence.GridStride`), every thread starts at its global index,
``cuda.grid(1)``, and steps by the grid's size, ``cuda.gridsize(1)``, so that each element is
taken by exactly one thread and a warp's threads take neighbouring elements at every step.

The rules come in the order a check walks them; the usual wrong steps (the block's size, the
number of blocks) are named before the general case. A right result reached this way still
fails: the work is done several times over, or the reads are not coalesced.
"""

from __future__ import annotations

from gpulab.exercises.mistakes import Mistake
from gpulab.instruments import thread_label

START_AT_THE_GLOBAL_INDEX = ("start at the thread's global index, `cuda.grid(1)`, not "
                             "`cuda.threadIdx.x`, which repeats in every block; ")


def _stepped_by(what: str):
    return lambda e: (f"{e.overlap()}: each thread steps by {what(e)}, but the grid has "
                      f"{e.grid} threads, so the threads redo each other's {e.ITEM}s: the "
                      f"work is done {e.work} times instead of {e.trial.n}")


def step_past_the_grid(hint: str) -> Mistake:
    """A step larger than the grid: the elements between are skipped, so the result is wrong.
    Chapter 02's rule; the other checks leave it to their outputs' rules, which come after the
    source rules that name a hard-coded block size (it too gives such a step)."""
    return Mistake("a step larger than the grid (elements skipped)",
                   lambda e: e.step is not None and e.step > e.grid,
                   lambda e: (f"each thread steps by {e.step}, more than the {e.grid} threads "
                              f"of the grid, so {e.trial.n - len(e.touched)} {e.ITEM}s between "
                              f"them were never {e.DONE}"), hint, recognised_from="trace")


def more_than_their_share(hint: str) -> Mistake:
    """A few threads did the work of many: one took more than ceil(n / grid) + 1 elements while
    others did nothing (one thread of each block looping over the block's elements, a thread
    per row of a matrix). Every kernel traced with a
    :class:`~gpulab.exercises.evidence.GridStride`, one element per thread or a grid-stride
    loop."""
    return Mistake(
        "a few threads do the work of many (more than their share: ceil(n / grid))",
        lambda e: e.grid > 1 and e.most > e.share + 1 and len(e.busy) < e.grid,
        lambda e: (f"{e.most} {e.ITEM}s {e.DONE} by one thread ({e.longest_run()}), but the "
                   f"grid has {e.grid} threads for {e.trial.n}, at most {e.share} each; "
                   f"{e.grid - len(e.busy)} threads did nothing: one thread loops over elements "
                   "other threads should take"),
        hint, recognised_from="trace")


def one_element_each(hint: str) -> Mistake:
    """A thread took more than one element although the grid has a thread for every element
    (two per thread, ``i = 2 * cuda.grid(1)``: half the grid idles and a warp's accesses are
    strided). For a launch of one thread per element; a grid-stride loop takes one each there."""
    return Mistake(
        "more than one element per thread on a grid with a thread for each",
        lambda e: e.grid >= e.trial.n and e.most > 1,
        lambda e: (f"{e.most} {e.ITEM}s {e.DONE} by one thread ({e.longest_run()}), but the "
                   f"grid has {e.grid} threads for {e.trial.n} {e.ITEM}s, one each; "
                   f"{e.grid - len(e.busy)} threads did nothing"),
        hint, recognised_from="trace")


X_ALONG_A_ROW_HINT = ("the 2-D grid's x index runs along a row: x gives the column (the last "
                     "index) and y the row, so that threads side by side touch elements side "
                     "by side.")


def x_along_a_row(name: str) -> Mistake:
    """Threads side by side along x touched elements a row apart (x taken as the row index,
    the work still shared one element a thread, e.g. by loops that stride the grid): right
    in the simulator, but a warp's 32 accesses land a row apart each, 32 memory transactions
    where one or two would do on a GPU. For 2-D kernels whose launch runs x along a row."""
    return Mistake(
        "x taken as the row index (threads side by side touch a column: not coalesced)",
        lambda e: e.x_down_a_column is not None,
        lambda e: (lambda left, at, right, below: (
            f"threads side by side along x touched elements a row apart: "
            f"{thread_label(left)} took {name}[{at[0]}, {at[1]}] and thread "
            f"({right[1][0]}, {right[1][1]}) {name}[{below[0]}, {below[1]}]. x runs down the "
            "columns here, so a warp's neighbouring threads touch elements a whole row apart "
            "(on a GPU, a transaction each instead of one for the warp: not coalesced)"))(
                *e.x_down_a_column),
        X_ALONG_A_ROW_HINT, recognised_from="trace")


def written_by_several(hint: str) -> Mistake:
    """An element of the output written by more than one thread: on a GPU those threads run at
    once, so which write lands is a race (the simulator, one thread after another, hides it)."""
    return Mistake(
        "an element written by more than one thread (a race on a GPU)",
        lambda e: bool(e.shared),
        lambda e: (f"{e.overlap()}: on a GPU those threads run at the same time, so which "
                   "value lands is a race (the simulator runs them one after another, which "
                   "hides it)"),
        hint, recognised_from="trace")


def one_per_thread(hint: str, race: bool = True,
                   rows_of: str | None = None) -> tuple[Mistake, ...]:
    """The rules of a one-thread-per-element kernel traced on a small launch, each ending on
    ``hint``: an element written by several threads (``race``), a few threads doing the work of
    many, more than one element per thread on a grid with a thread for each; with ``rows_of``
    (a 2-D output's name, its launch running x along a row), last :func:`x_along_a_row`."""
    return (((written_by_several(hint),) if race else ())
            + (more_than_their_share(hint), one_element_each(hint))
            + ((x_along_a_row(rows_of),) if rows_of else ()))


def _scattered_said(e) -> str:
    left, first, right, second = e.scattered_neighbours
    return (f"threads side by side start {abs(second - first)} {e.ITEM}s apart: "
            f"{thread_label(left)} first {e.DONE} {e.SPELLED.format(first)} and "
            f"{thread_label(right)} {e.SPELLED.format(second)}, so at every step the threads of "
            f"a warp take {e.ITEM}s far apart: not coalesced (chapter 02); each is taken once, "
            "but a warp's 32 reads become many")


def grid_stride_mistakes(hint: str, coalesced_hint: str | None = None) -> tuple[Mistake, ...]:
    """The rules, each ending on ``hint`` (how the loop should step): threads that overlap,
    the usual wrong steps named first. With ``coalesced_hint``, then one thread doing all the
    work and a run of consecutive elements per thread (not coalesced; other steps that overlap
    nothing, such as a block's chunk walked by its threads, stay coalesced and pass); without
    it (chapter 02, where a full-size run's warp requests judge coalescing), then
    :func:`step_past_the_grid`; last, in both, a thread that took more than its share, ceil(n /
    grid) (one thread of each block looping over the block's elements). Threads that overlap
    without a loop (no step) are left to the outputs' rules: one element per thread."""
    rules = (
        Mistake("every block starts at `threadIdx.x` (the blocks redo each other's work)",
                lambda e: e.shared and e.step == e.grid,
                lambda e: (f"{e.overlap()}: the step is right ({e.grid}, the whole grid), but "
                           f"threads of different blocks start at the same {e.ITEM}"),
                START_AT_THE_GLOBAL_INDEX + hint, recognised_from="trace"),
        Mistake("a step of the block's size, `cuda.blockDim.x`, not the grid's",
                lambda e: e.shared and e.step == e.threads,
                _stepped_by(lambda e: f"the block size, `cuda.blockDim.x` = {e.threads}"),
                hint, recognised_from="trace"),
        Mistake("a step of the number of blocks, `cuda.gridDim.x`, not the grid's size",
                lambda e: e.shared and e.step == e.blocks,
                _stepped_by(lambda e: f"the number of blocks, `cuda.gridDim.x` = {e.blocks}"),
                hint, recognised_from="trace"),
        Mistake("another step smaller than the grid (threads overlap)",
                lambda e: bool(e.shared) and e.step is not None,
                _stepped_by(lambda e: e.step), hint,
                recognised_from="trace"),
    )
    more_than_a_share = more_than_their_share(hint)
    if coalesced_hint is None:
        return rules + (step_past_the_grid(hint), more_than_a_share)
    return rules + (
        Mistake("one thread does all the work",
                lambda e: len(e.busy) == 1 and e.trial.n > 1,
                lambda e: (f"{thread_label(e.busy[0])} {e.DONE} all {e.trial.n} {e.ITEM}s "
                           f"while the other {e.grid - 1} threads did nothing"), hint,
                recognised_from="trace"),
        Mistake("a run of consecutive elements per thread (a step of 1): not coalesced",
                lambda e: e.step == 1 and e.grid > 1,
                lambda e: (f"each thread {e.DONE} its own run of "
                           f"consecutive {e.ITEM}s ({e.longest_run()}), so at every step the "
                           "threads of a warp read addresses a whole run apart: not coalesced "
                           "(chapter 02)"),
                coalesced_hint, recognised_from="trace"),
        Mistake("neighbouring threads start far apart (a start other than the global index):"
                " not coalesced",
                lambda e: e.scattered_neighbours is not None, _scattered_said,
                START_AT_THE_GLOBAL_INDEX + coalesced_hint, recognised_from="trace"),
        more_than_a_share,
    )


__all__ = ["START_AT_THE_GLOBAL_INDEX", "X_ALONG_A_ROW_HINT", "grid_stride_mistakes",
           "more_than_their_share", "one_element_each", "one_per_thread", "step_past_the_grid",
           "written_by_several", "x_along_a_row"]
