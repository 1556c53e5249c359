"""Chapter 01's exercises: one thread per element, an atomic dot product, a block sum.

Each check takes your ``@cuda.jit`` kernel (not launched), runs it on random data whose size is
not a multiple of the block size, compares with :mod:`gpulab.reference`, prints what it found
and returns a :class:`~gpulab.exercises.results.CheckResult`::

    from gpulab.exercises.ch01 import check_multiply
    check_multiply(multiply_kernel)

A failure names the seed: ``check_multiply(multiply_kernel, seed=1234)`` repeats that trial.

- :func:`check_multiply`: exercise 1, ``multiply(x, y, out)``.
- :func:`check_dot_atomic`: exercise 2, ``dot_atomic(x, y, out)``.
- :func:`check_block_sum`: exercise 3, ``block_sum(x, out)``, called with ``threads_per_block``
  equal to the kernel's ``THREADS``.

What must hold for a pass and what each check diagnoses is said once, in its spec
(:data:`MULTIPLY`, :data:`DOT_ATOMIC`, :data:`BLOCK_SUM`), which ``help(check_...)`` shows.

What the simulator hides, and how the checks see it anyway
- A racy ``out[0] += ...`` usually gives the right number in the simulator, which runs threads
  one after another; there ``out`` is a :class:`~gpulab.instruments.WatchedArray` that records
  plain (non-atomic) writes by different threads, and in both tiers the kernel's source is
  searched for plain writes to ``out``.
- A missing ``cuda.syncthreads()`` in the block sum is caught from the number alone: in the
  simulator a slot read before it is written holds poison
  (:func:`gpulab.instruments.poisoned_shared_memory`) or the previous block's values, every
  time. On a GPU it can go unseen at 64 threads per block, where the two warps often happen to
  run in step: the check reports what the number shows, and its message counts the kernel's
  ``syncthreads`` calls.
- A total cannot tell a tree from one thread adding up the whole block: once the block sum's
  total is right, the kernel is traced on a small launch, in both tiers.
"""

from __future__ import annotations

import ast
import types
from dataclasses import dataclass

import numpy as np

from gpulab import device, reference
from gpulab.exercises.evidence import InputReads, OutputWrites, TracedWrites
from gpulab.exercises.grid_stride import (
    grid_stride_mistakes,
    more_than_their_share,
    one_element_each,
)
from gpulab.exercises.mistakes import Mistake, diagnose, reject
from gpulab.exercises.outputs import looks_like, matches, vector_failure
from gpulab.exercises.races import shared_race_said
from gpulab.exercises.results import GLOBAL_INDEX_HINT, GUARD_HINT, CheckFailedError, KernelError
from gpulab.exercises.running import launch, padded, run_elementwise, trace_trial
from gpulab.exercises.source_rules import (
    KernelSource,
    adds_into,
    count_calls,
    guard_on,
    hard_coded_block,
    hard_coded_size,
    is_typed_in_count,
    plain_writes_to,
    shared_array_sizes,
    uneven_barriers,
)
from gpulab.exercises.spec import CheckSpec, traced, under_two_blocks
from gpulab.exercises.trial import Trial
from gpulab.instruments import WatchedArray, thread_label

# Each syncthreads() costs the simulator milliseconds: the block sum uses fewer blocks there.
BLOCK_SUM_SIZE_RANGE = {"sim": (150, 450)}
# Values past the end of the inputs (visible only to a kernel without a guard, on a GPU).
PAD_VALUE = 100.0
ATOMIC_HINT = (
    "an atomic add (`cuda.atomic.add`, section 3) makes the read, the add and the write one "
    "indivisible step, so no other thread can slip in between."
)
SYNCTHREADS_HINT = (
    "add `cuda.syncthreads()` after filling shared memory and after each halving step: without "
    "the barrier a thread can read a slot its neighbour has not written yet."
)
BLOCK_SUM_GUARD_HINT = (
    GUARD_HINT + " Threads past the end must not read x: they put 0 into shared memory instead."
)
OUT_INDEX_HINT = " If the array of 1 element is out: every atomic add goes into out[0]."
BLOCK_SUM_INDEX_HINT = (
    BLOCK_SUM_GUARD_HINT + " If the array is your shared array: it needs one slot per thread "
    "(THREADS must equal the check's threads_per_block), and `t + stride` must stay inside it, "
    "so the first stride is half the block, `cuda.blockDim.x // 2`." + OUT_INDEX_HINT
)
TREE_HINT = (
    "let the whole block add in rounds: every thread puts its value in shared memory; then, "
    "for stride = half the block, a quarter, …, 1, each thread t < stride adds the slot "
    "`t + stride` into slot t, with `cuda.syncthreads()` after every round; at the end thread 0 "
    "alone adds partial[0] into out[0] with one `cuda.atomic.add`."
)


@dataclass
class Race:
    """How ``out[0]`` was updated: the simulator's record of plain (non-atomic) writes by
    different threads (``race``: element, some writers, how many; None when there is none or
    on a GPU), the source's plain writes to it (``lines``), the total ``got`` and whether it
    is ``right``, what the simulator runs one after another (``runs``: threads, or blocks)
    and the trial: the evidence a race is told from."""

    name: str
    race: tuple | None
    lines: list
    got: float
    right: bool
    runs: str
    trial: Trial
    lone: tuple | None = None  # the one thread that wrote out[0], when only one did (simulator)
    plain: int = 0  # how many threads wrote out[0] with a plain (non-atomic) write (simulator)

    @property
    def outcome(self) -> str:
        if self.right:
            return (f"The simulator runs {self.runs} one after another, so the total happened to "
                    f"come out right here; on a GPU, {self.runs} that read {self.name}[0] at the "
                    "same time each add to the same old value and overwrite each other's "
                    "result, so additions are lost")
        return (f"That is why the total is wrong ({self.name}[0] = {self.got:.6g}): updates "
                "overwrote each other")


def _recorded_race(e: Race) -> str:
    element, writers, count = e.race  # writers: (block, thread) pairs
    said = " and ".join(f"thread {t} of block {b}" for b, t in writers)
    how = ("without an atomic" if e.plain >= count else
           f"{e.plain} of them without an atomic")
    return (f"{count} threads wrote {e.name}[{element}], {how} (e.g. {said}): a data race. "
            f"{e.outcome}")


# A plain `out[0] += ...` (tried after the total's own mistakes, when none explains it):
# recorded by the simulator's WatchedArray, else read in the source (both tiers).
RACE_MISTAKES = (
    Mistake("a right total written by one thread alone, the others idle",
            lambda e: e.right and e.lone is not None,
            lambda e: (f"the total is right, but {thread_label(e.lone)} alone wrote {e.name}[0], "
                       f"after adding up all {e.trial.n} values one after another while the "
                       "other threads had nothing to do: no race, but no parallel work either"),
            "spread the additions over the threads: each adds its own share into out[0] with an "
            "atomic add (section 3).", recognised_from="trace"),
    Mistake("a plain `out[0] += …` race, recorded in the simulator even when its total "
            "happens to be right", lambda e: e.race is not None, _recorded_race, ATOMIC_HINT,
            recognised_from="trace"),
    Mistake("a plain write to `out[0]` (a race), read in the source", lambda e: bool(e.lines),
            lambda e: (f"threads update {e.name} with a plain write (`{e.lines[0]}`), not an "
                       f"atomic: a data race. {e.outcome}"), ATOMIC_HINT,
            recognised_from="source"),
)


def _check_race(source: KernelSource, out, got: float, right: bool, runs: str,
                trial: Trial) -> None:
    """Fail if ``out[0]`` was updated without an atomic (:data:`RACE_MISTAKES`); ``runs``: what
    the simulator runs one after another (threads, or blocks) and so hides the race."""
    name = source.parameters[-1] if source.parameters else "out"
    race = out.race() if isinstance(out, WatchedArray) else None
    writers = out.plain_writers.get(0, set()) if isinstance(out, WatchedArray) else set()
    lone = next(iter(writers)) if len(writers) == 1 and not out.atomic_writers else None
    reject(RACE_MISTAKES, Race(name, race, plain_writes_to(source, name), got, right, runs,
                               trial, lone, len(writers)))


# --- exercise 1: multiply -------------------------------------------------------------------

MULTIPLY_STUB_HINT = (
    "each thread finds its own element from its block and thread index, does nothing if it is "
    "past the end of the arrays, and otherwise writes the product of the two inputs there. "
    "The hints above the cell go step by step."
)


# What multiply's usual wrong formulas give, in the order they are tried (after the elements
# never written: :func:`~gpulab.exercises.outputs.elementwise_mistakes`).
MULTIPLY_MISTAKES = (
    looks_like("x[i] + y[i]", lambda e: e.inputs["x"] + e.inputs["y"],
               "the exercise multiplies the inputs; yours adds them."),
    looks_like("x[i] * x[i]", lambda e: e.inputs["x"] * e.inputs["x"],
               "the second factor should be y[i]."),
    looks_like("y[i] * y[i]", lambda e: e.inputs["y"] * e.inputs["y"],
               "the first factor should be x[i]."),
    looks_like("a copy of x", lambda e: e.inputs["x"], "multiply x[i] by y[i]."),
    looks_like("a copy of y", lambda e: e.inputs["y"], "multiply x[i] by y[i]."),
)


# A right `out` by a loop stepping less than the grid, traced on 3 blocks of 40 threads for
# 117 elements: not a multiple of 32, so a step typed to fit the full-size launches
# (`2 * cuda.blockDim.x`, `cuda.gridDim.x * 32`) is less than the grid here, and meets others.
MULTIPLY_TRACE_THREADS, MULTIPLY_TRACE_SIZE = 40, 117
MULTIPLY_ONE_EACH_HINT = (
    "the exercise gives each thread one element, so it needs no loop; a loop must step by all "
    "the grid's threads, `cuda.gridsize(1)`, so that no two threads meet.")
MULTIPLY_METHOD_MISTAKES = grid_stride_mistakes(MULTIPLY_ONE_EACH_HINT) + (
    one_element_each(MULTIPLY_ONE_EACH_HINT),)


MULTIPLY = CheckSpec(
    "multiply", "multiply(x, y, out)", MULTIPLY_STUB_HINT,
    MULTIPLY_MISTAKES + MULTIPLY_METHOD_MISTAKES, parameters=3,
    title="1. multiply", call="check_multiply(my_multiply)",
    holds="`out[i] = x[i] * y[i]`, one thread per element, guarded, under two block sizes; "
          "traced on a small launch, each element written by one thread and no thread writing "
          "more than its share",
    also="the stub; the shared one-thread-per-element rules: missing or `<=` guard "
         "(IndexError in the simulator, writes into padding on a GPU); nothing written; "
         "`threadIdx.x` alone as the index (only the first block written); last partial block "
         "skipped; off-by-one shift; a hard-coded block size; simulator-only code (lists, "
         "`np.zeros`); gpulab's own kernel")


@MULTIPLY.check
def check_multiply(kernel, seed: int | None = None, threads_per_block: int | None = None,
                   dtype=np.float32) -> str:
    """Launched with ceil(n / threads_per_block) blocks, n random and not a multiple of
    threads_per_block, x and y uniform in [-2, 2); the block size is drawn too and the kernel
    is run again under another one, unless ``threads_per_block`` is given (then that one
    alone); then its writes are traced on a small launch (:data:`MULTIPLY_TRACE_THREADS`)."""
    source = MULTIPLY.start(kernel)

    def run(trial: Trial) -> Trial:
        x, y = trial.uniform(-2, 2), trial.uniform(-2, 2)
        out = run_elementwise(kernel, trial, x, y)
        out_name = source.parameters[2] if len(source.parameters) > 2 else "out"
        if np.isnan(out).all() and (adds_into(source, out_name) or count_calls(source, "add")):
            raise CheckFailedError(
                f"out holds NaN everywhere: your kernel adds into `{out_name}` (`+=` or an "
                "atomic add) instead of storing into it, and a new device array holds whatever "
                f"was in memory before (NaN in this check) ({trial}).",
                "store the product into out at your element with `=`: adding onto it needs a "
                "start of 0 that nothing here gives.")
        if failure := vector_failure(reference.multiply(x, y), out, trial,
                                     mistakes=MULTIPLY_MISTAKES, inputs={"x": x, "y": y}):
            raise failure
        return trial

    trial = Trial.draw("check_multiply", seed, dtype, block=threads_per_block)
    trial = under_two_blocks(run, trial, source, once=bool(threads_per_block))
    small = Trial.draw("check_multiply", seed, dtype, block=MULTIPLY_TRACE_THREADS,
                       shape=(MULTIPLY_TRACE_SIZE,))
    trace = trace_trial(kernel, small, small.uniform(-2, 2), small.uniform(-2, 2),
                        np.zeros(small.n, small.dtype))
    small.grid_blocks = small.blocks
    order = {} if trace.error else trace.elements_by_thread(trace.global_arrays[-1], "write")
    reject(MULTIPLY_METHOD_MISTAKES, OutputWrites(small, order))  # a stopped trace: runs alone
    return (f"all {trial.n} elements are right ({trial.launched}, seed={trial.seed}), each "
            "written by one thread.")


# --- exercise 2: dot product with atomics ----------------------------------------------------

DOT_STUB_HINT = (
    "start like your multiply kernel; instead of storing the product, each thread adds it into "
    "out[0] with an atomic. The hints above the cell go step by step."
)


@dataclass
class Total:
    """A reduction's result ``got`` (out[0]) against ``expected``, with the inputs (``y`` is
    None for a plain sum) and the trial: the evidence the total's mistakes are told from."""

    got: float
    expected: float
    tolerance: float
    trial: Trial
    x: np.ndarray
    y: np.ndarray | None = None
    guard_line: str | None = None  # a comparison with the output's length, from the source

    def near(self, value) -> bool:
        return matches(self.got, value, self.tolerance)

    @property
    def summary(self) -> str:
        return f"out[0] = {float(self.got):.6g}, expected {float(self.expected):.6g}"

    @property
    def terms(self) -> np.ndarray:
        """What each thread adds: x[i] * y[i], or x[i]."""
        if self.y is None:
            return self.x
        return (self.x.astype(np.float64) * self.y).astype(self.trial.dtype)

    @property
    def block_sums(self) -> list[float]:
        tpb = self.trial.threads_per_block
        return [self.terms[b * tpb:(b + 1) * tpb].sum(dtype=np.float64)
                for b in range(self.trial.blocks)]

    @property
    def first_block_again(self) -> list[float]:
        """What every block working on the first block's elements adds up to: all of them, or
        (a guard on the global index) as many as each block has."""
        tpb, n = self.trial.threads_per_block, self.trial.n
        return [self.trial.blocks * self.block_sums[0],
                sum(self.terms[:min(tpb, n - b * tpb)].sum(dtype=np.float64)
                    for b in range(self.trial.blocks))]

    def one_block(self) -> int | None:
        """The block whose total alone ``got`` is, if any."""
        return next((b for b, s in enumerate(self.block_sums) if self.near(s)), None)


NOT_A_NUMBER = Mistake(
    "a result that is not a number (values nobody wrote)", lambda e: not np.isfinite(e.got),
    lambda e: f"{e.summary}: the result is not a number, so the sum used values nobody wrote",
    "each value should be added exactly once: check the index and the guard.")
# First: a total that is wrong because the guard measures the output, not the input.
GUARD_ON_OUT = Mistake(
    "the guard compares the index with out's length (one element)",
    lambda e: e.guard_line is not None,
    lambda e: (f"{e.summary}: your guard `{e.guard_line}` measures the output, which holds one "
               "number, the total: only thread 0 gets past it"),
    "guard with the input's length (`x.shape[0]`): out has one element whatever n is.",
    recognised_from="source")
DOT_MISTAKES = (
    GUARD_ON_OUT,
    Mistake("nothing added", lambda e: e.near(0.0),
            lambda e: f"{e.summary}: nothing was added to out[0]",
            "each thread inside the array must add its product into out[0], with an atomic add "
            "(section 3): check that the add is reached and that it adds the product."),
    Mistake("`out[0] = ...` (each thread replaced the total)", lambda e: e.near(e.terms),
            lambda e: (f"{e.summary}: that is a single product x[i] * y[i]: each thread "
                       "replaced out[0] instead of adding to it"), ATOMIC_HINT),
    Mistake("`threadIdx.x` as the index (every block adds the first block's)",
            lambda e: e.near(e.first_block_again),
            lambda e: f"{e.summary}: every block added the first block's products",
            GLOBAL_INDEX_HINT),
    Mistake("only the first block's products", lambda e: e.near(e.block_sums[0]),
            lambda e: f"{e.summary}: only the first block's products were added",
            GLOBAL_INDEX_HINT),
    Mistake("the last, partial block skipped", lambda e: e.near(sum(e.block_sums[:-1])),
            lambda e: f"{e.summary}: the last, partial block added nothing",
            "the guard is too strict: it must stop only the threads whose index is past the "
            "end of the arrays, and let every index below n through."),
    Mistake("no guard (threads past the end add padding)",
            lambda e: e.near(float(e.expected) + e.trial.idle_threads * PAD_VALUE**2),
            lambda e: (f"{e.summary}: the {e.trial.idle_threads} threads past the end added "
                       "values beyond x and y"), GUARD_HINT),
    Mistake("x[i] * x[i] (or y[i] * y[i]) instead of x[i] * y[i]",
            lambda e: e.near([e.x @ e.x.astype(np.float64), e.y @ e.y.astype(np.float64)]),
            lambda e: f"{e.summary}: that is x · x (or y · y), a vector with itself",
            "each product takes one element of x and one of y."),
    Mistake("one product left out (the first or the last)",
            lambda e: e.near([e.expected - e.terms[0], e.expected - e.terms[-1]]),
            lambda e: (f"{e.summary}: that is x · y without the product of element "
                       f"{0 if e.near(e.expected - e.terms[0]) else e.trial.n - 1}: one product "
                       "was left out"),
            "every index from 0 to n - 1 must add its own product once: check the guard and "
            "the index for a stray `- 1` or `+ 1`."),
    Mistake("x[i] + y[i] instead of the product",
            lambda e: e.near(e.x.sum(dtype=np.float64) + e.y.sum(dtype=np.float64)),
            lambda e: f"{e.summary}: that is the sum of x[i] + y[i]",
            "multiply, don't add: `x[i] * y[i]`."),
    NOT_A_NUMBER,
)


@dataclass
class WholeBlocks:
    """The closer look at a total that is only "too small" or "wrong" (``first``, not
    specific): the kernel run again on ``trial``, with n a multiple of the block size, and the
    failure it gave ``again`` (None: that run was right)."""

    first: CheckFailedError
    trial: Trial
    again: CheckFailedError | None

    @property
    def where(self) -> str:
        return f"{self.trial.launched}, seed={self.trial.seed}"


def _only_partial_block(e: WholeBlocks) -> str:
    return (f"{e.first.message} With n = {e.trial.n}, a multiple of the block size, the answer "
            "is right: only the last, partial block goes wrong")


def _partial_block_mistakes(did: str, hint: str) -> tuple[Mistake, ...]:
    """The closer look's mistake: right with whole blocks, so the threads past the end (or
    the last block's) go wrong; ``hint`` says what they must do in this exercise."""
    return (Mistake(did, lambda e: e.again is None, _only_partial_block, hint),)


DOT_PARTIAL_BLOCK_MISTAKES = _partial_block_mistakes(
    "threads past the end adding (only the last, partial block wrong)",
    "threads past the end must add nothing: the atomic belongs inside the guard, and the guard "
    "must let every index below n through.")


@dataclass
class TreeTrace:
    """The block sum traced on a small launch (``trial``): the evidence its method's mistakes
    are told from, once the total is right."""

    trial: Trial
    trace: object
    where = TracedWrites.where

    @property
    def rounds(self) -> int:
        return int(np.log2(self.trial.threads_per_block))

    @property
    def races(self) -> list:
        """Shared slots one thread wrote and another used between the same two barriers
        (:meth:`gpulab.instruments.KernelTrace.shared_races`)."""
        return self.trace.shared_races()

    @property
    def atomics(self) -> dict:
        return self.trace.per_block("atomics")

    @property
    def uneven_barriers(self) -> tuple | None:
        return self.trace.uneven_barriers()

    @property
    def busiest_block(self) -> tuple:
        """(block, its atomic adds) for the block that made the most."""
        return max(self.atomics.items(), key=lambda item: item[1])

    @property
    def atomics_into(self) -> str:
        """Where the busiest block's atomic adds went: mostly a shared slot, or out[0]."""
        block, most = self.busiest_block
        shared = sum(1 for a in self.trace.accesses if a.kind == "atomic"
                     and a.space == "shared" and a.thread[0] == block)
        return "a shared slot" if shared > most // 2 else "out[0]"

    def busiest(self, key: str) -> tuple:
        """(thread, count) for the thread with the most ``key`` (global_reads, shared_reads)."""
        counts = {t: row[key] for t, row in self.trace.per_thread().items()}
        return max(counts.items(), key=lambda item: item[1])

    @property
    def global_reads(self) -> tuple:
        return self.busiest("global_reads")

    @property
    def shared_reads(self) -> tuple:
        return self.busiest("shared_reads")


def _one_atomic_per_thread(e: TreeTrace) -> str:
    block, most = e.busiest_block
    per = ("one per thread" if most >= e.trial.threads_per_block
           else f"one per {e.trial.threads_per_block // most} threads")
    return (f"the total is right, but block {block} made {most} atomic adds (into "
            f"{e.atomics_into}): {per}, so its {e.trial.threads_per_block} additions "
            "still wait for each other one at a time, as in exercise 2. A tree needs one atomic "
            "per block")


def _serial_global(e: TreeTrace) -> str:
    reader, reads = e.global_reads
    x = e.trace.global_arrays[0] if e.trace.global_arrays else "x"
    return (f"the total is right, but {thread_label(reader)} read {reads} values of {x} "
            f"from global memory: one thread added up the block one value after another "
            f"({reads} steps) while the others waited; the tree takes {e.rounds} rounds")


def _serial_shared(e: TreeTrace) -> str:
    reader, reads = e.shared_reads
    return (f"the total is right, but {thread_label(reader)} read {reads} shared slots: one "
            f"thread added up the block's {e.trial.threads_per_block} values one after "
            f"another, while a tree needs {e.rounds} rounds of at most 2 reads per thread")


# A right total by the wrong method, from a trace of a small launch (tried once the total is
# right): not a tree.
SHARED_RACE = Mistake(
    "a shared slot written by one thread and used by another between the same two barriers (a "
    "race the simulator's order hides)", lambda e: bool(e.races),
    lambda e: shared_race_said(e.races, "the total is right here"),
    "a thread may use a shared slot another thread wrote only after a `cuda.syncthreads()` "
    "that both pass in between (after the last round too, when a thread other than the "
    "writer reads the block's total); threads that all add into one slot at once need an "
    "atomic.", recognised_from="trace")
DOT_SHARE_MISTAKES = (more_than_their_share(
    "one thread per element: each thread multiplies x[i] * y[i] for its own i and adds it with "
    "the atomic; no thread loops over its block's elements."),)
UNEVEN_BARRIERS = uneven_barriers()
DOT_ATOMIC = CheckSpec(
    "dot_atomic", "dot_atomic(x, y, out)", DOT_STUB_HINT,
    DOT_MISTAKES + RACE_MISTAKES + DOT_PARTIAL_BLOCK_MISTAKES + DOT_SHARE_MISTAKES
    + (UNEVEN_BARRIERS, SHARED_RACE),
    parameters=3, title="2. dot with atomics", call="check_dot_atomic(my_dot_atomic)",
    holds="x · y added into `out[0]` with an atomic add, one thread per element, guarded, "
          "under two block sizes; traced on a small launch, no thread reading more than its "
          "share of x",
    also="a sum too small (updates lost) or too large that no mistake explains; the shared "
         "rules: a hard-coded block size, a loop stepping by a number typed in, "
         "simulator-only code, gpulab's own kernel")


@DOT_ATOMIC.check
def check_dot_atomic(kernel, seed: int | None = None, threads_per_block: int | None = None,
                     dtype=np.float32) -> str:
    """x and y uniform in [0.1, 1), padded with :data:`PAD_VALUE` past the end; the values are
    positive, so lost updates always make the sum smaller. ``out[0]`` starts at 0. The block
    size is drawn too and the kernel is run again under another one, unless
    ``threads_per_block`` is given (then that one alone). A wrong total no mistake explains is
    searched for the race first, then gets a closer look (:func:`_total_or_failure`: run again
    with n a multiple of the block size, to tell whether only the last, partial block goes
    wrong)."""
    source = DOT_ATOMIC.start(kernel)

    def run(each: Trial):
        x, y = each.uniform(0.1, 1.0), each.uniform(0.1, 1.0)
        return _run_total(
            source, kernel, each, (x, y), DOT_MISTAKES, "threads", index_hint=GUARD_HINT
            + OUT_INDEX_HINT,
            too_small=("the sum is too small, as if some products were lost or skipped",
                       "if threads update out[0] without an atomic, updates are lost: "
                       + ATOMIC_HINT),
            otherwise=("the sum is too large", "each product should be added exactly once: "
                       "check the index and the guard."))

    trial = Trial.draw("check_dot_atomic", seed, dtype, block=threads_per_block)
    got = under_two_blocks(lambda t: _total_or_failure(run, t, DOT_PARTIAL_BLOCK_MISTAKES),
                           trial, source, once=bool(threads_per_block))
    # the method: the products shared out among the threads, traced on a small launch
    small = Trial.draw("check_dot_atomic", seed, dtype, block=MULTIPLY_TRACE_THREADS,
                       shape=(MULTIPLY_TRACE_SIZE,))
    small.grid_blocks = small.blocks
    trace = trace_trial(kernel, small, small.uniform(0.1, 1.0), small.uniform(0.1, 1.0),
                        np.zeros(1, small.dtype))
    if not trace.error and trace.global_arrays:
        reject(DOT_SHARE_MISTAKES,
               InputReads(small, trace.elements_by_thread(trace.global_arrays[0], "read")))
    if not trace.error:
        reject((UNEVEN_BARRIERS, SHARED_RACE), TreeTrace(small, trace))
    return (f"x · y = {float(got):.6g}, as expected ({trial.launched}, n={trial.n}, "
            f"seed={trial.seed}), each product taken by one thread.")


def _run_total(source: KernelSource, kernel, trial: Trial, inputs: tuple, mistakes,
               runs: str, too_small: tuple[str, str], otherwise: tuple[str, str],
               index_hint: str = GUARD_HINT):
    """Launch the reduction ``kernel(*inputs, out)`` (the inputs padded with :data:`PAD_VALUE`,
    ``out[0]`` starting at 0) and judge its total, x · y (or the sum of x): return (got,
    failure or None). A wrong total none of ``mistakes`` explains fails as
    ``too_small`` or ``otherwise`` (message, hint) with ``specific=False``, which
    :func:`_total_or_failure` looks at closer; such a failure, or none, is first searched for
    a race (:func:`_check_race`)."""
    from numba import cuda

    zeros = np.zeros(1, dtype=trial.dtype)  # watched in the simulator, a device array on a GPU
    out = WatchedArray(zeros) if device.tier() == "sim" else cuda.to_device(zeros)
    launch(kernel, trial, *(padded(value, trial.threads_per_block, PAD_VALUE)[1]
                            for value in inputs), out, index_hint=index_hint)
    got = out.copy_to_host()[0]
    x, y = inputs[0], (inputs[1] if len(inputs) > 1 else np.ones_like(inputs[0]))
    expected, tolerance = reference.dot(x, y), reference.dot_tolerance(x, y)
    output = source.parameters[-1] if source.parameters else "out"
    total = Total(got, expected, tolerance, trial, *inputs,
                  guard_line=guard_on(source, output) if source.tree is not None else None)
    right = total.near(expected)
    failure = None if right else diagnose(mistakes, total)
    if not right and failure is None:
        message, hint = too_small if got < expected else otherwise
        failure = CheckFailedError(f"{total.summary}: {message} ({trial}).", hint,
                                   specific=False)
    if failure is None or not failure.specific:
        _check_race(source, out, float(got), right, runs, trial)
    return got, failure


def _total_or_failure(run, trial: Trial, partial_block_mistakes: tuple[Mistake, ...],
                      closer_look: bool = True) -> float:
    """``run(trial)`` gives (got, failure): return ``got`` if there is no failure,
    else raise it. A failure that is not specific (just "too small" or "wrong") gets a closer
    look first: run again with n a multiple of the block size, and if that passes, the fault is
    in how the threads past the end behave, which ``partial_block_mistakes`` then say."""
    got, failure = run(trial)
    if failure is not None and not failure.specific and closer_look:
        whole_blocks = Trial.draw(trial.check_name, trial.seed, trial.dtype, block=trial.block,
                                  shape=((trial.blocks - 1) * trial.threads_per_block,))
        try:
            again = run(whole_blocks)[1]
        except Exception:  # the closer look is only a diagnosis: keep the first failure
            again = failure
        failure = diagnose(partial_block_mistakes,
                           WholeBlocks(failure, whole_blocks, again)) or failure
    if failure is not None:
        raise failure
    return got


# --- exercise 3: block sum in shared memory --------------------------------------------------

BLOCK_SUM_STUB_HINT = (
    "three steps: fill the shared array (0 past the end) and wait; halve it in rounds, waiting "
    "after each; one thread adds the block's total into out[0]. The hints above the cell go "
    "step by step."
)


def _slot(e: Total) -> int | None:
    """The shared slot whose values, one per block, ``got`` is the sum of, if any."""
    tpb = e.trial.threads_per_block
    sums = [e.x[k::tpb].sum(dtype=np.float64) for k in range(tpb)]
    k = int(np.argmin(np.abs(np.subtract(sums, float(e.got)))))
    return k if e.near(sums[k]) else None


BLOCK_SUM_MISTAKES = (
    GUARD_ON_OUT,
    Mistake("nothing added", lambda e: e.near(0.0),
            lambda e: f"{e.summary}: nothing was added to out[0]",
            "after the tree, one thread of each block must add the block's total (slot 0 of the "
            "shared array) into out[0] with an atomic add: check that this add is reached."),
    Mistake("every thread added its block's total (not one thread per block)",
            lambda e: matches(e.got / e.trial.threads_per_block, e.expected, e.tolerance),
            lambda e: (f"{e.summary}: that is {e.trial.threads_per_block} times the total: every "
                       "thread of a block added the block's total, not one thread"),
            "after the tree, one thread of each block adds partial[0] into out[0]; the others "
            "add nothing."),
    Mistake("only block 0's total (the adding thread picked by its global index)",
            lambda e: e.one_block() == 0 and e.trial.blocks > 1,
            lambda e: (f"{e.summary}: that is block 0's total alone: one thread of the whole "
                       "grid added its block's total, not one thread of every block"),
            "pick the thread that adds by its index in the block, so that every block has one."),
    Mistake("`out[0] = ...` (the blocks overwrote each other)",
            lambda e: e.one_block() is not None,
            lambda e: (f"{e.summary}: that is block {e.one_block()}'s total alone: the blocks "
                       "overwrote each other"), ATOMIC_HINT),
    Mistake("the tree never reached partial[0] (each block's first value)",
            lambda e: _slot(e) == 0,
            lambda e: (f"{e.summary}: that is the sum of each block's first value only: the "
                       "halving steps never reached partial[0]"), SYNCTHREADS_HINT),
    Mistake("the total read from another slot than partial[0] (`partial[t]`, t not 0)",
            lambda e: bool(_slot(e)),
            lambda e: (f"{e.summary}: that is the sum of slot {_slot(e)} of each block's shared "
                       "array, which the halving never adds into: the block's total was read "
                       "from the wrong slot"),
            "the halving ends in slot 0: add that slot's value into out[0]."),
    Mistake("the halving stopped before stride 1 (`stride > 1`)",
            lambda e: e.near(e.x[::2].sum(dtype=np.float64)),
            lambda e: (f"{e.summary}: that is the sum of the even-numbered elements only: the "
                       "halving stopped before its last round (stride 1), which adds partial[1] "
                       "into partial[0]"),
            "run the halving loop while `stride > 0` (or `>= 1`), not `> 1`."),
    Mistake("`threadIdx.x` as the index (every block sums the first block's)",
            lambda e: e.near(e.first_block_again),
            lambda e: f"{e.summary}: every block summed the first block's values",
            GLOBAL_INDEX_HINT),
    Mistake("the last, partial block skipped", lambda e: e.near(sum(e.block_sums[:-1])),
            lambda e: f"{e.summary}: the last, partial block added nothing",
            "only threads with i >= n should put 0 in shared memory; the last block's total "
            "must still be added."),
    Mistake("no guard (threads past the end add padding)",
            lambda e: e.near(float(e.expected) + e.trial.idle_threads * PAD_VALUE),
            lambda e: (f"{e.summary}: the {e.trial.idle_threads} threads past the end added "
                       "values beyond x"), BLOCK_SUM_GUARD_HINT),
    NOT_A_NUMBER,
)
BLOCK_SUM_PARTIAL_BLOCK_MISTAKES = _partial_block_mistakes(
    "idle threads not writing 0 (only the last, partial block wrong)",
    "threads past the end must still fill their shared slot, with a value that adds nothing: "
    "shared memory starts with leftover values.")


TREE_METHOD_MISTAKES = (
    UNEVEN_BARRIERS,
    SHARED_RACE,
    Mistake("a right total by one atomic add per thread (into out[0] or a shared slot)",
            lambda e: e.busiest_block[1] > 1, _one_atomic_per_thread, TREE_HINT,
            recognised_from="trace"),
    Mistake("a right total by one thread reading its block's x one value after another",
            lambda e: e.global_reads[1] > 2, _serial_global, TREE_HINT,
            recognised_from="trace"),
    Mistake("a right total by one thread adding up its block's shared slots one after another",
            lambda e: e.shared_reads[1] > 2 * e.rounds + 3, _serial_shared, TREE_HINT,
            recognised_from="trace"),
)
BLOCK_SUM = CheckSpec(
    "block_sum", "block_sum(x, out)", BLOCK_SUM_STUB_HINT,
    BLOCK_SUM_MISTAKES + RACE_MISTAKES + BLOCK_SUM_PARTIAL_BLOCK_MISTAKES + TREE_METHOD_MISTAKES,
    parameters=2,
    title="3. block sum", call="check_block_sum(my_block_sum, threads_per_block=THREADS)",
    holds="the total, then the **method** from a trace of a small launch: at most one atomic "
          "per block, x read at most twice per thread (loading two values a thread is fine), at "
          "most ~2·log₂(block) shared reads per thread",
    also="a `threads_per_block` that is not a power of two; a barrier inside a branch; a "
         "missing barrier (a sum too small or wrong that no mistake explains, saying how many "
         "`cuda.syncthreads()` calls the kernel has); an index past the shared array (its "
         "hint names a first stride of the whole block and a shared array too small); a "
         "halving loop that never ends (fails with a message, not a "
         "hang); a first stride or block size typed in as a number (the total taken again with "
         "`THREADS` doubled)")


@BLOCK_SUM.check(learners=("kernel",))
def check_block_sum(kernel, threads_per_block: int = 64, seed: int | None = None,
                    dtype=np.float32) -> str:
    """``threads_per_block`` must equal the kernel's ``THREADS`` (its
    ``cuda.shared.array(THREADS, x.dtype)``) and be a power of two. x uniform in [0.5, 1.5),
    padded with :data:`PAD_VALUE`, ``out[0]`` starting at 0; fewer blocks in the simulator
    (:data:`BLOCK_SUM_SIZE_RANGE`). The total's closer look (:func:`_total_or_failure`) is
    skipped when the kernel has fewer than two ``syncthreads`` calls; once the total is right,
    the method is traced (:func:`_check_tree_method`), then the total taken again with the
    global that sizes the shared array (``THREADS``) doubled (:func:`_resized`)."""
    if threads_per_block < 2 or threads_per_block & (threads_per_block - 1):
        raise CheckFailedError(
            f"threads_per_block={threads_per_block} is not a power of two, but a tree "
            "reduction halves the block at every step.",
            "use THREADS = 64 (or 32, 128) and pass the same number as threads_per_block.",
        )
    source = BLOCK_SUM.start(kernel)
    trial = Trial.draw("check_block_sum", seed, dtype, block=threads_per_block,
                       size_range=BLOCK_SUM_SIZE_RANGE.get(device.tier()))
    barriers = count_calls(source, "syncthreads")
    few_barriers = source.tree is not None and barriers < 2
    said = (f" Your kernel has {barriers} `cuda.syncthreads()` call(s); it needs one after "
            "filling shared memory and one in the halving loop." if few_barriers else "")

    hint = SYNCTHREADS_HINT if few_barriers else (
        "check where your `cuda.syncthreads()` calls are (one after filling shared memory, one "
        "after every round) and the rounds themselves: in each, only the threads t < stride "
        "add, each the slot `t + stride` into slot t, the first stride half the block.")

    def run(each: Trial, kernel=kernel):
        return _run_total(
            source, kernel, each, (each.uniform(0.5, 1.5),), BLOCK_SUM_MISTAKES, "blocks",
            too_small=("the sum is too small: some values were lost on the way up the tree, "
                       "which happens when a thread reads a shared slot before another thread "
                       "has written it." + said, hint),
            otherwise=("the sum is wrong: some slots were read before they were written, or "
                       "hold leftover values." + said, hint),
            index_hint=BLOCK_SUM_INDEX_HINT)

    got = _total_or_failure(run, trial, BLOCK_SUM_PARTIAL_BLOCK_MISTAKES,
                            closer_look=not few_barriers)
    method = _check_tree_method(kernel, seed, threads_per_block, dtype)
    # (a shared array of at least a block's slots: one per thread; fewer, typed in, is scratch
    # of the block's own, a slot per warp or two for the block's counts)
    typed = next(((node, size) for node, size in shared_array_sizes(source) if is_typed_in_count(
        size) and threads_per_block <= size.value < 1024), None)
    if typed is not None:
        raise CheckFailedError(
            f"your kernel sums right with blocks of {threads_per_block}, but "
            f"`{source.line(typed[0])}` types in {typed[1].value} slots: with blocks of more "
            "threads (the caller chooses the block size) the block's threads write past its "
            "end.",
            "size the shared array with the module's global that holds the block size "
            "(THREADS): Numba compiles its value in, as it does a number.")
    if resized := _resized(source, threads_per_block):
        name, other, again = resized
        each = Trial.draw("check_block_sum", seed, dtype, block=other,
                          size_range=BLOCK_SUM_SIZE_RANGE.get(device.tier()))
        try:
            failure = run(each, again)[1]
        except (CheckFailedError, KernelError) as error:
            failure = error
        if failure is not None:
            detail = (failure.message.split(": ")[0] if isinstance(failure, CheckFailedError)
                      else f"it stopped with {type(failure.cause).__name__}")
            line = next((source.line(node) for node in source.walk() if isinstance(
                node, ast.Assign) and is_typed_in_count(node.value)), None) or hard_coded_size(
                source)
            said = (f"`{hard_coded_block(source)}` hard-codes the block size"
                    if hard_coded_block(source) else "the first step's stride is a fixed "
                    f"number{f' (`{line}`)' if line else ''}, not half the block")
            raise CheckFailedError(
                f"your kernel sums right with {name} = {threads_per_block} but not with {name} "
                f"= {other} (blocks of {other} threads): {said}, so it fits one block size "
                f"only. With {other}: {detail} ({each}).",
                "start the halving at half the block, `cuda.blockDim.x // 2`, whatever the "
                "block size: the caller chooses it.")
    return (f"sum = {float(got):.6g}, as expected ({trial.launched}, n={trial.n}, "
            f"seed={trial.seed}), and by a tree: {method}.")


def _resized(source: KernelSource, threads: int):
    """(name, size, kernel): the kernel compiled again with the module global that sizes its
    shared array (``THREADS``, equal to ``threads``) at another block size (double, or half at
    1024); None when the array's size is no such global."""
    from numba import cuda

    function = source.function
    name = next((size.id for _, size in shared_array_sizes(source) if isinstance(size, ast.Name)),
                None)
    if name is None or function.__globals__.get(name) != threads:
        return None
    other = threads * 2 if threads < 1024 else threads // 2
    return name, other, cuda.jit(types.FunctionType(
        function.__code__, {**function.__globals__, name: other}, function.__name__,
        function.__defaults__, function.__closure__))


def _check_tree_method(kernel, seed: int, threads_per_block: int, dtype) -> str:
    """Trace the block sum on a small launch (n from two blocks and one element to three
    blocks) and fail unless it sums like a tree (:data:`TREE_METHOD_MISTAKES`): at most one
    atomic per block, at most 2 global reads per thread, and at most 2·log₂(block) + 3 shared
    reads per thread (a tree's rounds, with some slack). Returns what the trace showed, for
    the pass message."""
    trial = Trial.draw("check_block_sum", seed, dtype, block=threads_per_block,
                       size_range=(2 * threads_per_block + 1, 3 * threads_per_block))
    x = trial.uniform(0.5, 1.5)
    evidence = TreeTrace(trial, traced(kernel, trial, x, np.zeros(1, dtype=trial.dtype),
                                        races=False))
    reject(TREE_METHOD_MISTAKES, evidence)
    barriers = evidence.trace.max_per_thread("barriers")
    return (f"{max(evidence.atomics.values())} atomic per block, at most "
            f"{evidence.shared_reads[1]} shared reads and {barriers} barriers per thread "
            f"({trial.launched} traced)")


__all__ = ["check_block_sum", "check_dot_atomic", "check_multiply"]
