"""Chapter 00's exercises: how many blocks, and a first kernel you launch yourself.

Each check runs your code on random sizes, prints what it found and returns a
:class:`~gpulab.exercises.results.CheckResult`; a failure names its seed so that
``check_...(your_code, seed=1234)`` repeats it.

- :func:`check_blocks_for`: exercise 1, ``blocks_for(n, threads_per_block)``.
- :func:`check_first_launch`: exercise 2, the kernel ``add_one(x, out)`` and the host function
  that launches it by hand, ``add_one_on_gpu(x) -> numpy array`` (copy x in, allocate out,
  choose the grid, launch, synchronise, copy out back); :func:`watch_host_code` records what
  the host function does.

What must hold for a pass and what each check diagnoses is said once, in its spec
(:data:`BLOCKS_FOR`, :data:`ADD_ONE_KERNEL`, :data:`HOST`), which ``help(check_...)`` shows.
"""

from __future__ import annotations

import ast
import inspect
import math
import numbers
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from gpulab.exercises.grid_stride import one_per_thread
from gpulab.exercises.host_code import (
    LAUNCHED_BY_FORALL,
    HostCodeWatch,
    HostLaunch,
    KernelSpy,
    watch_host_code,
)
from gpulab.exercises.learner_code import learner_functions
from gpulab.exercises.mistakes import Mistake
from gpulab.exercises.outputs import looks_like, vector_failure
from gpulab.exercises.results import CheckFailedError, NotAttemptedError
from gpulab.exercises.running import call_learner, run_elementwise
from gpulab.exercises.spec import CheckSpec, reject_unshared_work, under_two_blocks
from gpulab.exercises.trial import Trial, draw_size, tier_key
from gpulab.instruments import launchable
from gpulab.kernels.launch import MAX_THREADS_PER_BLOCK

# --- exercise 1: how many blocks? --------------------------------------------------------------

BLOCKS_STUB_HINT = (
    "return how many blocks of threads_per_block threads it takes to give each of n elements "
    "a thread: a whole number, rounded up. The hints above the cell go step by step."
)
ROUND_UP_HINT = (
    "round up, not down: dividing with `//` alone drops the last, partial block, and its "
    "elements get no thread. A partial block needs a whole block of its own; work it out "
    "with whole numbers only (no floats)."
)


def _block_cases(rng: np.random.Generator) -> list[tuple[int, int]]:
    """(n, threads_per_block) pairs: partial last blocks, exact multiples, n smaller than one
    block, n = 1, a billion elements, block sizes that are not powers of two (96, 192) nor
    multiples of 32 (100), and a remainder of one element in a block of 1024."""
    cases = []
    for _ in range(6):
        threads = int(rng.choice([32, 64, 96, 128, 256, 512, 1024]))
        blocks = int(rng.integers(1, 5000))
        cases.append((blocks * threads + int(rng.integers(1, threads)), threads))  # partial
        cases.append((blocks * threads, threads))  # an exact multiple
    threads = int(rng.choice([128, 256]))
    cases += [(int(rng.integers(2, threads)), threads), (1, threads), (1_000_000_007, 256)]
    # a shift (>>) divides only by a power of two; counting in warps only by a multiple of 32
    for threads in (96, 192, int(rng.choice([50, 100, 200, 300]))):
        blocks = int(rng.integers(2, 5000))
        cases += [(blocks * threads + int(rng.integers(1, threads)), threads),
                  (blocks * threads, threads)]
    # an odd number of whole blocks of 100 (never a multiple of 32: rounding n up to a warp
    # first adds a block), and one element past whole blocks of 1024 (a remainder of 1/1024 of
    # a block: rounding up by adding 0.999 first misses it)
    cases += [((2 * int(rng.integers(1, 2500)) + 1) * 100, 100),
              (int(rng.integers(1, 5000)) * 1024 + 1, 1024)]
    order = rng.permutation(len(cases))
    return [cases[k] for k in order]


@dataclass
class BlocksAnswer:
    """What ``blocks_for(n, threads)`` returned, for the mistakes below."""

    n: int
    threads: int
    got: object
    seed: int
    fixed: int | None = None  # the block size every answer divided by instead, if one did
    shift: tuple[str, int] | None = None  # a shift by a number typed in (fixed_shift)
    rounded: bool = False  # every answer round(n / threads), some of them rounded up

    @property
    def expected(self) -> int:
        return -(-self.n // self.threads)

    @property
    def call(self) -> str:
        return f"blocks_for({self.n}, {self.threads})"

    @property
    def whole(self) -> bool:
        return not isinstance(self.got, bool) and isinstance(self.got, numbers.Integral)

    @property
    def summary(self) -> str:
        return f"{self.call} returned {self.got}, expected {self.expected}"

    def shifted(self) -> bool:
        """Right for a power of two, wrong for this block size: a shift by log2(threads)."""
        t, n, got = self.threads, self.n, int(self.got)
        if t & (t - 1) == 0:
            return False
        shifts = {int(math.log2(t)), int(math.log2(t)) + 1}
        return any(got in (n >> k, (n + t - 1) >> k, (n >> k) + 1, -(-n // 2**k))
                   for k in shifts)


def fixed_shift(function) -> tuple[str, int] | None:
    """(line, k) of the first right shift by a number typed in (``(n + 255) >> 8``, ``b >>= 8``)
    in the learner's ``function`` or a function of theirs it calls: a division by 2**k whatever
    block size the launch has. None when there is none, or the source cannot be read."""
    for each in learner_functions(function):
        found = _shift_in(each)
        if found is not None:
            return found
    return None


def _shift_in(function) -> tuple[str, int] | None:
    try:
        source = textwrap.dedent(inspect.getsource(function))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError):
        return None
    lines = source.splitlines()
    for node in ast.walk(tree):
        operand = (node.right if isinstance(node, ast.BinOp) else
                   node.value if isinstance(node, ast.AugAssign) else None)
        if (isinstance(getattr(node, "op", None), ast.RShift)
                and isinstance(operand, ast.Constant) and isinstance(operand.value, int)
                and not isinstance(operand.value, bool)):
            return lines[node.lineno - 1].strip(), operand.value
    return None


def _by_the_shift(shift: tuple[str, int] | None, n: int, threads: int, got) -> bool:
    """Is ``got`` (a number of blocks) what ``shift``'s fixed power of two gives for n, and not
    the block size's own? (A shift elsewhere in the code, ``half = threads >> 1``, is not the
    mistake.)"""
    if shift is None or 2 ** shift[1] == threads or not isinstance(got, numbers.Integral):
        return False
    k = shift[1]
    return int(got) in {n >> k, (n + threads - 1) >> k, (n + 2 ** k - 1) >> k, (n >> k) + 1}


def _shift_said(shift: tuple[str, int], threads: int) -> str:
    line, k = shift
    return (f"`{line}` shifts by {k}, which divides by 2**{k} = {2 ** k} whatever the block size "
            f"is ({threads} threads here)")


SHIFT_HINT = ("divide by the block size itself, rounding up with integer division: a shift by a "
              "number typed in divides by one fixed power of two, right for one block size only.")


def _divided_in_float32(n: int, threads: int) -> int:
    """n / threads rounded up, worked out in float32 (``np.ceil(np.float32(n) / threads)``)."""
    return int(np.ceil(np.float32(n) / np.float32(threads)))


def _whole_but(condition):
    return lambda a: a.whole and int(a.got) != a.expected and condition(a, int(a.got))


BLOCKS_MISTAKES = (
    Mistake("the right number as a float (`/`, `math.ceil` of a NumPy float)",
            lambda a: (not a.whole and isinstance(a.got, numbers.Real)
                       and float(a.got) == a.expected),
            lambda a: (f"{a.call} returned {a.got!r}, the right number but a "
                       f"{type(a.got).__name__}: a launch needs a whole number of blocks, and "
                       f"`kernel[{a.got!r}, {a.threads}]` fails"),
            "use integer division `//` (or wrap the result in `int(...)`)."),
    Mistake("not a whole number",
            lambda a: not a.whole,
            lambda a: (f"{a.call} returned {a.got!r} ({type(a.got).__name__}); it should return "
                       f"the whole number {a.expected}"),
            "return an int: the number of blocks, rounded up."),
    Mistake("a shift by a number typed in (`>> 8` divides by 256 whatever the block size)",
            _whole_but(lambda a, got: _by_the_shift(a.shift, a.n, a.threads, got)),
            lambda a: f"{a.summary}: {_shift_said(a.shift, a.threads)}", SHIFT_HINT),
    Mistake("threads_per_block ignored (a block size of its own)",
            _whole_but(lambda a, got: a.fixed not in (None, a.threads)),
            lambda a: (f"{a.summary}: that is {a.n} divided by {a.fixed}, not by {a.threads}: on "
                       f"every case your function divided by {a.fixed}, whatever "
                       "threads_per_block it was given"),
            "divide by the threads_per_block the caller passes, not by a block size of your "
            "own: a launch may use any block size."),
    Mistake("divided in float32, which rounds n above 2**24",
            _whole_but(lambda a, got: got == _divided_in_float32(a.n, a.threads)),
            lambda a: (f"{a.summary}: that is n / threads_per_block worked out in float32, where "
                       f"{a.n:,} becomes {float(np.float32(a.n)):,.0f}"),
            "float32 holds every whole number only up to 2**24 = 16,777,216; above that it "
            "rounds n before the division, and the count of blocks comes out wrong. Integer "
            "arithmetic on Python ints is exact at any size."),
    Mistake("rounded to the nearest (`round(n / threads_per_block)`)",
            _whole_but(lambda a, got: a.rounded),
            lambda a: (f"{a.summary}: that is n / threads_per_block rounded to the nearest "
                       f"whole number, which rounds down here: the last, partial block holds "
                       f"{a.n % a.threads} of {a.threads}, less than half, so its elements get "
                       "no thread"),
            "round() goes to the nearest whole number, down when the last block is less than "
            "half full: a partial block needs a whole block of its own, whatever its size. Work "
            "it out with whole numbers only (no floats)."),
    Mistake("rounded down (`n // threads_per_block`)",
            _whole_but(lambda a, got: got == a.n // a.threads and a.n % a.threads),
            lambda a: (f"{a.summary}: {a.got} blocks of {a.threads} threads are "
                       f"{int(a.got) * a.threads} threads, so the last "
                       f"{a.n - int(a.got) * a.threads} of the {a.n} elements get no thread"),
            ROUND_UP_HINT),
    Mistake("one block too many when n divides evenly (`n // threads_per_block + 1`)",
            _whole_but(lambda a, got: got == a.n // a.threads + 1 and a.n % a.threads == 0),
            lambda a: (f"{a.summary}: {a.n} is exactly {a.n // a.threads} blocks of {a.threads}, "
                       f"so block {int(a.got) - 1} would have no element at all"),
            "adding one block every time adds it even when n divides evenly: add a block for the "
            "last, partial block only: when n divides evenly there is no partial block, and an "
            "extra block gets no element at all."),
    Mistake("a shift (`>>`) that assumes the block size is a power of two",
            _whole_but(lambda a, got: a.shifted()),
            lambda a: (f"{a.summary}: that is n divided by a power of two near {a.threads}. A "
                       "shift `>> k` divides by 2**k, right for 32, 64 or 128 threads per "
                       f"block, but {a.threads} is not a power of two"),
            "divide by threads_per_block itself, not by a power of two near it: a shift divides "
            "only by a power of two, and the function must work for every block size."),
    Mistake("the arguments swapped",
            _whole_but(lambda a, got: got == -(-a.threads // a.n)),
            lambda a: (f"{a.summary}: that is threads_per_block divided by n, the arguments the "
                       "wrong way round"),
            "divide n by threads_per_block."),
    Mistake("too few blocks",
            _whole_but(lambda a, got: got * a.threads < a.n),
            lambda a: (f"{a.summary}: {a.got} blocks of {a.threads} threads are too few for "
                       f"{a.n} elements"),
            ROUND_UP_HINT),
    Mistake("more blocks than needed",
            _whole_but(lambda a, got: True),
            lambda a: (f"{a.summary}: {a.got} blocks of {a.threads} threads are "
                       f"{int(a.got) * a.threads - a.n} threads more than {a.n} elements need; "
                       "one block fewer would still cover them"),
            "round up to the next whole block only: the blocks must cover n, and one block fewer "
            "must not cover it already."),
)
BLOCKS_FOR = CheckSpec(
    "blocks_for", "blocks_for(n, threads_per_block) -> int", BLOCKS_STUB_HINT, BLOCKS_MISTAKES,
    title="1. how many blocks?", call="check_blocks_for(blocks_for)",
    holds="`blocks_for(n, threads_per_block)` = n / threads_per_block rounded up, an `int`, on "
          f"{len(_block_cases(np.random.default_rng(0)))} random cases from n = 1 to a "
          "billion, exact multiples of the block and block "
          "sizes that are not powers of two, nor multiples of 32, included",
    also="an exception (named)")


@BLOCKS_FOR.check
def check_blocks_for(function, seed: int | None = None) -> str:
    """Called on the cases :func:`_block_cases` draws from the seed, in a shuffled order;
    the first wrong answer fails."""
    cases = _block_cases(np.random.default_rng(seed))
    answers = [(n, threads, call_learner(function, n, threads, stub_hint=BLOCKS_STUB_HINT,
                                         call=f"blocks_for({n}, {threads}) (seed={seed})"))
               for n, threads in cases]
    fixed = next((k for k in (32, 64, 128, 256, 512, 1024) if all(
        isinstance(got, numbers.Integral) and got in (-(-n // k), n // k)
        for n, _, got in answers)), None)
    shift = fixed_shift(function)  # named only where it explains every wrong answer
    if shift and not all(_by_the_shift(shift, n, threads, got) or got == -(-n // threads)
                         for n, threads, got in answers):
        shift = None
    rounded = (all(got == round(n / threads) for n, threads, got in answers)
               and any(n % threads > threads / 2 for n, threads, _ in answers))
    for n, threads, got in answers:
        BLOCKS_FOR.reject(BlocksAnswer(n, threads, got, seed, fixed, shift, rounded))
    return (f"all {len(cases)} cases right, from n = 1 to {max(n for n, _ in cases):,} "
            f"(exact multiples of the block size included; seed={seed}).")


# --- exercise 2: your first kernel, launched by hand ----------------------------------------------

ADD_ONE_STUB_HINT = (
    "each thread finds its own element from its block and thread index, does nothing if that "
    "element is past the end of x, and otherwise writes the element plus one into out. The "
    "hints above the cell go step by step."
)
HOST_STUB_HINT = (
    "do the five steps of section 5 in order (copy in, allocate, choose the grid, launch and "
    "wait, copy back) and return the result as a NumPy array."
)
# Host-function sizes: odd, so no power-of-two block size divides them; more than 1024 in the
# simulator too, so that one block of 1024 threads typed in fails.
HOST_SIZE_RANGE = {"sim": (1_025, 1_601), "gpu": (100_001, 1_000_001)}


# What add_one's usual wrong formulas give, in the order they are tried (after the elements
# never written: :func:`~gpulab.exercises.outputs.elementwise_mistakes`).
ADD_ONE_MISTAKES = (
    looks_like("a copy of x", lambda e: e.inputs["x"],
               "each element must be one more than the input's."),
    looks_like("x[i] - 1", lambda e: e.inputs["x"] - np.float32(1),
               "the exercise adds one; your kernel subtracts."),
    looks_like("x[i] + 2", lambda e: e.inputs["x"] + np.float32(2), "add 1, not 2."),
    looks_like("2 * x[i]", lambda e: e.inputs["x"] * np.float32(2),
               "the exercise adds one; your kernel doubles."),
)


ADD_ONE_SHARE_HINT = (
    "one thread per element: each thread adds one to the element its global index gives, and "
    "no thread loops over the elements of others.")
ADD_ONE_SHARE_MISTAKES = one_per_thread(ADD_ONE_SHARE_HINT)
ADD_ONE_KERNEL = CheckSpec(
    "first_launch", "add_one(x, out)", ADD_ONE_STUB_HINT, ADD_ONE_MISTAKES + ADD_ONE_SHARE_MISTAKES,
    parameters=2,
    title="2. the first launch: the kernel", call="check_first_launch(add_one, add_one_on_gpu)",
    holds="`out[i] = x[i] + 1`, one thread per element, guarded, checked like every kernel "
          "(random n not a multiple of the block, two block sizes, padding); traced on a small "
          "launch, each element written by one thread, one element each",
    also="the shared one-thread-per-element rules: missing or `<=` guard, `threadIdx.x` alone, "
         "a hard-coded block size, simulator-only code")


def _check_add_one_kernel(kernel, seed: int) -> Trial:
    """The kernel, checked like every kernel of the course (:data:`ADD_ONE_KERNEL`); returns
    the first trial."""
    source = ADD_ONE_KERNEL.start(kernel)

    def run(trial: Trial) -> Trial:
        x = trial.uniform(-5, 5)
        out = run_elementwise(kernel, trial, x)
        if failure := vector_failure(x + np.float32(1), out, trial, mistakes=ADD_ONE_MISTAKES,
                                     inputs={"x": x}):
            raise failure
        return trial

    trial = under_two_blocks(run, Trial.draw("check_first_launch", seed, np.float32), source)
    # the method: one thread per element, traced on 3 blocks of 40 threads for 117 elements
    small = Trial.draw("check_first_launch", seed, np.float32, block=40, shape=(117,))
    reject_unshared_work(ADD_ONE_SHARE_MISTAKES, kernel, small, small.uniform(-5, 5),
                         np.zeros(small.n, small.dtype))
    return trial


# Each watched step, in the singular and the plural.
_STEP_NAMES = {
    "to_device": ("copy to the device", "copies to the device"),
    "allocate": ("allocation on the device", "allocations on the device"),
    "launch": ("launch", "launches"),
    "synchronize": ("synchronize", "synchronizes"),
    "copy_to_host": ("copy back", "copies back"),
}


def _describe_events(watch: HostCodeWatch) -> str:
    return ", ".join(f"{count} {one if count == 1 else many}"
                     for kind, (one, many) in _STEP_NAMES.items()
                     if (count := watch.count(kind))) or "no copies, allocations or launches"


@dataclass
class HostRun:
    """What the learner's host function did with x (float32, n values): what it returned, its
    launches and copies (:class:`HostCodeWatch`), and whether it changed x."""

    call: str
    name: str  # the kernel's
    x: np.ndarray
    got: object
    watch: HostCodeWatch
    changed_input: bool
    where: str
    # the threads per block the same host function launches for another n (None: no launch);
    # None when not asked (check_launch_by_hand with ask_again=False)
    threads_for_another_n: Callable[[int], int | None] | None = None
    shift: tuple[str, int] | None = None  # a shift by a number typed in (fixed_shift)

    @cached_property
    def block_size_follows_n(self) -> bool:
        """Does the block size change with n? Asked again with 130 more elements: a block size
        worked out from n (or the number of blocks and threads swapped) changes, a chosen one
        does not. Without a second call, taken as yes."""
        if self.threads_for_another_n is None:
            return True
        return self.threads_for_another_n(self.n + 130) != self.biggest.threads_per_block

    @cached_property
    def from_device(self) -> bool:
        """Is ``got`` the copy back of an output a launch wrote
        (:meth:`~gpulab.exercises.host_code.HostCodeWatch.copied_back`)?"""
        return self.watch.copied_back(self.got)

    @property
    def output_copied_in(self) -> str | None:
        """How the output of the launch with the most threads (its second argument) was filled,
        when ``cuda.to_device`` copied a host array into it while another is its input: "x's
        values", "zeros", or "a host array's values" (``np.empty_like(x)``: whatever memory
        held); None when the output was allocated on the device."""
        arguments = self.biggest.arguments
        if len(arguments) < 2 or arguments[1] is arguments[0]:
            return None
        host = next((host for host, device in self.watch.copies_in
                     if arguments[1] is device and isinstance(host, np.ndarray)), None)
        if host is None:
            return None
        if host.shape == self.x.shape and np.array_equal(host, self.x):
            return "x's values"
        with np.errstate(all="ignore"):  # np.empty_like's garbage may hold anything
            zeros = not np.any(host != 0)
        return "zeros" if zeros else "a host array's values"

    @cached_property
    def kernel_output(self) -> np.ndarray | None:
        """What the launch with the most threads left in its output (its second argument);
        None when that cannot be told."""
        try:  # no launch, a grid that can't be counted, an output not readable: None
            out = self.biggest.arguments[1] if len(self.biggest.arguments) > 1 else None
            return np.asarray(out.copy_to_host()) if hasattr(out, "copy_to_host") else None
        except Exception:  # noqa: BLE001 - the check then goes by what was returned
            return None

    @property
    def n(self) -> int:
        return self.x.shape[0]

    @property
    def launches(self) -> list[HostLaunch]:
        return self.watch.launches

    @property
    def biggest(self) -> HostLaunch:
        return max(self.launches, key=lambda launch: launch.total_threads)

    @property
    def right_values(self) -> bool:
        return (isinstance(self.got, np.ndarray) and self.got.shape == self.x.shape
                and bool(np.allclose(self.got, self.x + np.float32(1))))

    @property
    def kernel_covered(self) -> bool:
        """Did the kernel write every element (x + 1) into its output? When its output could
        not be read: were the right values returned, copied back from the device?"""
        if self.kernel_output is None or self.kernel_output.shape != self.x.shape:
            return self.right_values and self.from_device
        return bool(np.allclose(self.kernel_output, self.x + np.float32(1)))

    def launched_with(self, predicate) -> HostLaunch | None:
        return next((launch for launch in self.launches if predicate(launch)), None)


def _as_int(value) -> int | None:
    value = value[0] if isinstance(value, tuple) and len(value) == 1 else value
    return int(value) if isinstance(value, numbers.Integral) else None


def _shape_as_blocks(h) -> bool:
    """As many blocks as elements, more than the elements need (one block for n = 1 is right)."""
    threads = h.biggest.threads_per_block
    return (_as_int(h.biggest.blocks) == h.n and threads > 1
            and h.n > -(-h.n // threads))


HOST_MISTAKES = (
    Mistake("returned nothing", lambda h: h.got is None,
            lambda h: f"{h.call} returned None",
            "the caller needs the result on the host: the last step copies it back and returns it.",
            "host code"),
    Mistake("returned the device array",
            lambda h: not isinstance(h.got, np.ndarray) and hasattr(h.got, "copy_to_host"),
            lambda h: (f"{h.call} returned the device array itself: its values are still in the "
                       "GPU's memory, where NumPy and the rest of your program cannot read them"),
            "copy the output back to the host (section 5's last step) and return that copy.",
            "host code"),
    LAUNCHED_BY_FORALL,
    Mistake("never launched the kernel", lambda h: not h.launches,
            lambda h: (f"{h.call} never launched `{h.name}`"
                       + (": it returned the right values, computed without the GPU"
                          if h.right_values else "")),
            lambda h: f"the function must launch your kernel `{h.name}` on the GPU (section 5).",
            "host code"),
    Mistake("returned a copy made on a stream without waiting for it",
            lambda h: h.watch.count("copy_back_on_stream") and not h.watch.after_last(
                "copy_back_on_stream", "synchronize"),
            lambda h: (f"{h.call} copied back on a stream and returned without waiting for "
                       "it: a copy given a stream returns at once (into pinned memory it runs "
                       "while the CPU goes on), so the array it returned may not hold the "
                       "values yet. (The simulator copies at once, which hides this.)"),
            "wait for the stream (`stream.synchronize()`) after the copy back, before you "
            "return its array.", "host code"),
    Mistake("passed NumPy arrays to the launch",
            lambda h: h.launched_with(lambda launch: launch.numpy_arguments),
            lambda h: (f"{h.call} launched `{h.name}` with NumPy arrays (argument(s) "
                       + ", ".join(str(k + 1) for k in h.launched_with(
                           lambda launch: launch.numpy_arguments).numpy_arguments)
                       + "): Numba then copies each of them to the GPU before the launch and "
                       "back after it, hidden from you — the copies this exercise asks you to "
                       "write"),
            "revisit section 5's first two steps: the launch must be given arrays that already "
            "live on the device (the input copied there, the output allocated there), not NumPy "
            "arrays.", "host code"),
    Mistake("one block as big as x",
            lambda h: h.biggest.blocks in (1, (1,)) and h.biggest.threads_per_block == h.n,
            lambda h: (f"{h.call} launched one block of {h.biggest.threads_per_block} threads "
                       f"for {h.n} elements: that works only while n is at most "
                       f"{MAX_THREADS_PER_BLOCK} (a GPU refuses bigger blocks), and one block "
                       "runs on one of the GPU's many multiprocessors"),
            "choose a fixed number of threads per block (128 or 256) and as many blocks as n "
            "needs (exercise 1).", "host code"),
    Mistake("blocks smaller than a warp, or blocks and threads swapped",
            lambda h: (h.biggest.threads_per_block < 32 and not _shape_as_blocks(h)) or (
                h.biggest.threads_per_block % 32
                and h.biggest.threads_per_block == -(-h.n // (_as_int(h.biggest.blocks) or h.n))
                and h.block_size_follows_n),
            lambda h: (f"{h.call} launched {h.biggest.blocks} block(s) of "
                       f"{h.biggest.threads_per_block} thread(s): "
                       + ("a GPU runs each block in warps of 32 threads, so most of every warp "
                          "sat idle" if h.biggest.threads_per_block < 32 else
                          "a block size worked out from n, not a multiple of the warp's 32 "
                          "threads: the block size is chosen and the number of blocks worked "
                          "out, not the other way round (or are the two numbers swapped?)")),
            "`kernel[blocks, threads]` takes the number of blocks first, then the threads per "
            "block: choose the threads per block (128 or 256), then the blocks (exercise 1).",
            "host code"),
    Mistake("more than 1024 threads per block",
            lambda h: h.launched_with(
                lambda launch: launch.threads_per_block > MAX_THREADS_PER_BLOCK),
            lambda h: (f"{h.call} launched blocks of {h.biggest.threads_per_block} threads. The "
                       "simulator runs that, but a GPU refuses blocks of more than "
                       f"{MAX_THREADS_PER_BLOCK} threads"),
            "use 128 or 256 threads per block.", "host code"),
    Mistake("the blocks worked out with a shift by a number typed in (`>> 8` for 128 threads)",
            lambda h: (_by_the_shift(h.shift, h.n, h.biggest.threads_per_block,
                                     _as_int(h.biggest.blocks))
                       and not h.n <= h.biggest.total_threads < h.n + h.biggest.threads_per_block),
            lambda h: (f"{h.call} launched {h.biggest.blocks} block(s) of {h.biggest.threads} "
                       f"threads = {h.biggest.total_threads} threads for n = {h.n} elements: "
                       f"{_shift_said(h.shift, h.biggest.threads_per_block)}"),
            SHIFT_HINT, "host code"),
    Mistake("too few blocks (`n // threads`)",
            lambda h: h.biggest.total_threads < h.n and not h.kernel_covered,
            lambda h: (f"{h.call} launched {h.biggest.blocks} block(s) of {h.biggest.threads} "
                       f"threads = {h.biggest.total_threads} threads for n = {h.n} elements: the "
                       f"launch covered only {h.biggest.total_threads} of them, so the last "
                       f"{h.n - h.biggest.total_threads} elements got no thread"
                       + ("; the right values it returned did not come from the GPU"
                          if h.right_values else "")),
            "the number of blocks must be rounded up, as in exercise 1.", "host code"),
    Mistake("the array's shape (n) used as the number of blocks",
            _shape_as_blocks,
            lambda h: (f"{h.call} launched {h.n} blocks of {h.biggest.threads_per_block} "
                       f"threads = {h.biggest.total_threads} threads for {h.n} elements: "
                       "`x.shape` is the number of elements, not of blocks, so "
                       f"{h.biggest.total_threads - h.n} threads had nothing to do"),
            "the number of blocks is how many blocks of `threads` cover n elements (exercise 1).",
            "host code"),
    Mistake("whole blocks more than needed",
            lambda h: h.biggest.total_threads >= h.n + h.biggest.threads_per_block,
            lambda h: (f"{h.call} launched {h.biggest.blocks} blocks of {h.biggest.threads} "
                       f"threads = {h.biggest.total_threads} threads for {h.n} elements: at "
                       "least one whole block had nothing to do"),
            "round up, but only to the next whole block (exercise 1).",
            "host code"),
    Mistake("returned something else than a NumPy array",
            lambda h: not isinstance(h.got, np.ndarray),
            lambda h: f"{h.call} returned {type(h.got).__name__}, not a NumPy array",
            "return the output copied back to the host, a NumPy array.", "host code"),
    Mistake("changed its input", lambda h: h.changed_input,
            lambda h: f"{h.call} changed its input x",
            "leave x as it is: the kernel writes into a separate output array.", "host code"),
    Mistake("returned another shape", lambda h: h.got.shape != h.x.shape,
            lambda h: f"{h.call} returned an array of shape {h.got.shape}, not {h.x.shape}",
            "allocate the output like the input: `cuda.device_array_like(d_x)`.", "host code"),
    Mistake("made float64 copies of float32 data",
            lambda h: h.got.dtype != h.x.dtype or h.launched_with(
                lambda launch: any(d is not None and d != h.x.dtype for d in launch.dtypes)),
            lambda h: (f"{h.call} worked in "
                       + ", ".join(sorted({str(d) for launch in h.launches for d in launch.dtypes
                                           if d is not None and d != h.x.dtype}
                                          | ({str(h.got.dtype)} if h.got.dtype != h.x.dtype
                                             else set())))
                       + f", but x holds {h.x.dtype}: the copies to and from the GPU then carry "
                       "twice the bytes, and a GPU does float64 arithmetic many times slower"),
            "copy x as it is: `cuda.to_device(x)` and `cuda.device_array_like(d_x)` keep its "
            "dtype (no `astype`, no `np.array(x, dtype=float)`).", "host code"),
    Mistake("the output made by copying a host array (x, zeros, np.empty_like) to the device "
            "(a copy over the host link for nothing)",
            lambda h: h.output_copied_in is not None,
            lambda h: (f"{h.call} gave `{h.name}` an output that `cuda.to_device` filled with "
                       f"{h.output_copied_in}, so {h.n:,} values crossed the host link for "
                       "nothing: the kernel overwrites every element of the output, which "
                       "needs room on the device, not values from the host"),
            "allocate the output on the device without copying anything into it "
            "(`cuda.device_array_like`, section 5's second step).", "host code"),
    Mistake("returned values computed on the host, not the kernel's output copied back",
            lambda h: not h.from_device,
            lambda h: (f"{h.call} "
                       + ("never copied anything back from the device"
                          if not h.watch.count("copy_to_host") else
                          "copied back from the device, but returned another array, not the "
                          f"copy of the output `{h.name}` wrote (nor a view of it)")
                       + (": its values are right, but as far as the check can see they were "
                          "worked out on the host, so they did not come from the GPU"
                          if h.right_values else
                          ": the array it returned did not come from the GPU")),
            "return the copy back of the kernel's output itself: the result must be what the "
            "kernel computed on the GPU, not values worked out again on the host.", "host code"),
)
HOST = CheckSpec(
    "first_launch", "add_one_on_gpu(x) -> numpy array", HOST_STUB_HINT, HOST_MISTAKES,
    title="2. the first launch: the host code",
    call="check_first_launch(add_one, add_one_on_gpu)",
    holds="run on another random, odd n, then on a multiple of the block size it chose at "
          "least one block larger, "
          "while its host code is watched "
          "(`ch00.watch_host_code`: copies, allocations, launches with their grid, "
          "`synchronize`, copies back), it must copy x in, launch `add_one` with device arrays "
          "and enough blocks, and return the copy back of the array the kernel wrote, x + 1",
    also="a missing `cuda.synchronize()` passes with a note (the copy back waits anyway); a "
         "launch too small for n fails even when the values returned are right")


def check_launch_by_hand(run, kernel, n: int, seed: int, call: str, ask_again: bool = True):
    """Run the learner's host function ``run(x)`` on n random float32 values while watching its
    host code; fail with the mistake it made (:data:`HOST_MISTAKES`, in order) or return
    ``(x, result, watch)``. With ``ask_again``, a block size that looks worked out from n is
    confirmed by a second, watched call with 130 more elements (a chosen block size stays)."""
    rng = np.random.default_rng([seed, 1])
    x = rng.uniform(-5, 5, n).astype(np.float32)
    given = x.copy()
    where = f"n={n}, seed={seed}"
    with watch_host_code(run, [kernel]) as watch:
        got = call_learner(run, given, stub_hint=HOST_STUB_HINT, call=f"{call} ({where})")
    name = getattr(getattr(launchable(kernel), "py_func", None), "__name__", "your kernel")
    again = (lambda other_n: _threads_launched(run, kernel, other_n, seed)) if ask_again else None
    HOST.reject(HostRun(call, name, x, got, watch, not np.array_equal(given, x), where, again,
                        fixed_shift(run)))
    return x, got, watch


def _threads_launched(run, kernel, n: int, seed: int) -> int | None:
    """The threads per block of the biggest launch ``run(x)`` makes for n random values; None
    when it launches nothing or raises (the first call's verdict stands then)."""
    x = np.random.default_rng([seed, 2]).uniform(-5, 5, n).astype(np.float32)
    try:
        with watch_host_code(run, [kernel]) as watch:
            run(x)
    except Exception:  # noqa: BLE001 - the learner's code; only its launch is asked
        return None
    return max((launch.threads_per_block for launch in watch.launches), default=None)


@HOST.check
def check_first_launch(kernel, run, seed: int | None = None) -> str:
    """The kernel first (:func:`_check_add_one_kernel`), then the host function, on an odd n
    (:data:`HOST_SIZE_RANGE`: 1,025 to 1,599 in the simulator, more than one block of 1024
    threads; up to 999,999 on a GPU) and x uniform in [-5, 5), float32, inside
    :func:`watch_host_code`; after its mistakes, what it returned is compared with x + 1
    element by element under the block size it launched; then once more with n a multiple of
    that block size and larger than the first by at least one block, where one block more
    than n needs (``n // threads + 1``), and a block count typed in, show."""
    if run is None or run is Ellipsis:
        raise NotAttemptedError("there is no host function to check yet.", HOST_STUB_HINT)
    trial = _check_add_one_kernel(kernel, seed)
    n = draw_size(np.random.default_rng([seed, 0]), 2, HOST_SIZE_RANGE[tier_key()])
    n += 1 - n % 2
    call = f"{getattr(run, '__name__', 'your function')}(x) with n = {n}"
    x, got, watch = check_launch_by_hand(run, kernel, n, seed, call)
    launch = watch.launches[-1]
    as_launched = Trial("check_first_launch", seed, (n,), (launch.threads_per_block,),
                        np.dtype(np.float32), np.random.default_rng(seed))
    if failure := vector_failure(x + np.float32(1), got.astype(np.float32, copy=False),
                                 as_launched):
        raise CheckFailedError(f"{call}: {failure.message}", failure.hint)
    # then n a multiple of its own block size: rounding up must not add a block (n // t + 1);
    # and two blocks past the first n, so that a block count typed in (2 blocks of 1024 cover
    # every first n in the simulator) falls short
    whole = (n // launch.threads_per_block + 2) * launch.threads_per_block
    check_launch_by_hand(run, kernel, whole, seed,
                         f"{getattr(run, '__name__', 'your function')}(x) with n = {whole} "
                         f"(a multiple of its {launch.threads_per_block} threads per block)")
    note = ("" if watch.after_last_launch("synchronize") else
            " You did not call `cuda.synchronize()`: `copy_to_host` waited for the kernel "
            "anyway, but when you time a kernel (chapter 02) you need it.")
    return (f"the kernel is right ({trial.launched}, n={trial.n}), and your host code gave "
            f"{n} right values: {_describe_events(watch)}; {launch.blocks} blocks of "
            f"{launch.threads} threads for n = {n} (seed={seed}).{note}")


check_first_launch.__doc__ = ADD_ONE_KERNEL.described() + "\n\n" + check_first_launch.__doc__


__all__ = [
    "HostCodeWatch", "HostLaunch", "KernelSpy", "check_blocks_for", "check_first_launch",
    "check_launch_by_hand", "watch_host_code",
]
