"""Everything the exercise checks share: results, the learner's code, random trials, launches,
diagnoses and the advice a failure gives. Chapter modules (``ch01`` … ``ch08``) hold only their
own exercises' checks and import what they share from here, never from each other.

A check takes a learner's ``@cuda.jit`` kernel (or plain Python function), runs it on random
data and compares the answer with :mod:`gpulab.reference`. It never raises: whatever goes wrong
(a stub, an index past the end of an array, a kernel that does not compile, a wrong answer)
becomes a :class:`CheckResult` that says, in plain words, what happened and what usually causes
it. The result is printed (so the learner sees it) and returned (so a solution notebook can
``assert result.passed``).

Every check has the same outline, on purpose (the chapter modules repeat it rather than hide it
behind a decorator, so that ``help(check_...)`` shows the real signature)::

    def check_thing(kernel, seed=None, ..., show=True) -> CheckResult:
        def body(seed):
            source = start_kernel(kernel, 3, THING_STUB_HINT)   # or call_learner(function, ...)
            trial = Trial.draw("check_thing", seed, threads_per_block, dtype)
            ...                                      # padded inputs, launch, read_back
            raise CheckFailedError(...)             # or return the message for a pass
        return run_check("thing", body, seed, show)

What makes a check hard to fool
- Sizes are random and never a multiple of the block size, so the last block is partial and a
  missing guard shows. Values are random (not all ones), from a seeded generator whose seed is
  reported on failure: ``check_...(kernel, seed=1234)`` repeats a failing trial exactly.
- Inputs and outputs are views of larger buffers (:func:`padded`): a thread past the end raises
  ``IndexError`` in the simulator, and on a GPU its write lands in padding that
  :func:`read_back` inspects instead of in someone else's memory.
- The simulator runs the threads of a block one after another, so it hides most races. For an
  output that many threads update, a check passes a :class:`gpulab.instruments.WatchedArray`
  that records which simulated thread wrote each element and whether through an atomic; and in
  both tiers it reads the kernel's source for plain (non-atomic) writes (:func:`plain_writes_to`).
- The simulator runs kernels as Python, so code that cannot compile for a GPU (lists, NumPy array
  creation, f-strings) would run there; :func:`start_kernel` reads the source and rejects it
  with the reason.
"""

from __future__ import annotations

import ast
import inspect
import re
import secrets
import textwrap
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field

import numpy as np

from gpulab import device
from gpulab.instruments import (
    is_device_function,
    launchable,
    poisoned_shared_memory,
    python_function,
)

PASSED = "passed"
NOT_ATTEMPTED = "not attempted"
FAILED = "failed"
STATUSES = (PASSED, NOT_ATTEMPTED, FAILED)

# Problem sizes a check draws from, per tier: the simulator costs ~0.1 ms per thread.
SIZE_RANGE = {"sim": (200, 700), "gpu": (2_000, 20_000)}

GUARD_HINT = (
    "a thread read or wrote past the end of an array: is your guard `if i < x.shape[0]:` there, "
    "and is it `<` not `<=`? The last block is only partly used, so its extra threads must do "
    "nothing."
)
GLOBAL_INDEX_HINT = (
    "each thread must handle its own element: compute the global index with "
    "`i = cuda.grid(1)` (the same as `cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x`), "
    "not `cuda.threadIdx.x` alone, which repeats in every block."
)
GRID_2D_HINT = (
    "`c, r = cuda.grid(2)` gives this thread's column (x) and row (y): x runs along the "
    "columns, so neighbouring threads of a warp read neighbouring elements of a row."
)
GUARD_2D_HINT = (
    "guard both directions: `if r < Z.shape[0] and c < Z.shape[1]:`. The blocks at the right "
    "and bottom edges are only partly used."
)
SIMULATOR_ONLY_HINT = (
    "kernels can't create lists or NumPy arrays or use f-strings: use "
    "`cuda.local.array(N, dtype)` or `cuda.shared.array(N, dtype)` for scratch space, and "
    "`print('i =', i)` without formatting."
)
STUB_MESSAGE = (
    "your {what} still raises NotImplementedError: write your code in place of "
    "`raise NotImplementedError()`."
)
READ_THE_ERROR_HINT = "read the error: the line it names in your code is where it stopped."


# --- results ----------------------------------------------------------------------------------


@dataclass
class CheckResult:
    """What a check found. ``bool(result)`` is ``result.passed``; ``print(result)`` explains it."""

    exercise: str
    passed: bool
    message: str
    status: str
    hint: str = ""
    seed: int | None = None
    exception: BaseException | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, not {self.status!r}")
        if self.passed != (self.status == PASSED):
            raise ValueError(f"passed={self.passed} contradicts status={self.status!r}")

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        if self.status == PASSED:
            return f"✅ PASSED — {self.exercise}: {self.message}"
        if self.status == NOT_ATTEMPTED:
            text = f"✏️ NOT ATTEMPTED YET — {self.exercise}: {self.message}"
            return text + (f"\n   Hint: {self.hint}" if self.hint else "")
        text = f"❌ NOT YET RIGHT — {self.exercise}: {self.message}"
        return text + (f"\n   Hint: {self.hint}" if self.hint else "")

    def __repr__(self) -> str:
        return f"CheckResult(exercise={self.exercise!r}, status={self.status!r})"


class CheckFailedError(Exception):
    """Raised inside a check body: the kernel ran but is wrong. Becomes a ``failed`` result."""

    def __init__(self, message: str, hint: str = "", specific: bool = True):
        super().__init__(message)
        self.message, self.hint = message, hint
        self.specific = specific  # False: a generic "wrong answer"; a closer look may say more


class NotAttemptedError(Exception):
    """Raised inside a check body: the kernel is still the stub. Becomes ``not attempted``."""

    def __init__(self, message: str, hint: str = ""):
        super().__init__(message)
        self.message, self.hint = message, hint


class KernelError(Exception):
    """The learner's kernel raised (or failed to compile) during a launch; wraps the cause."""

    def __init__(self, cause: BaseException, trial: Launched, index_hint: str = ""):
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.cause, self.trial, self.index_hint = cause, trial, index_hint or GUARD_HINT


# --- the learner's code: what it is and what its source says ---------------------------------


@dataclass
class KernelSource:
    """The kernel's Python function and, when available, its parsed source."""

    function: Callable
    source: str | None
    tree: ast.FunctionDef | None

    @property
    def parameters(self) -> list[str]:
        try:
            return list(inspect.signature(self.function).parameters)
        except (TypeError, ValueError):
            return []

    def line(self, node: ast.AST) -> str:
        lines = (self.source or "").splitlines()
        number = getattr(node, "lineno", 0)
        return lines[number - 1].strip() if 0 < number <= len(lines) else ""

    def walk(self):
        return ast.walk(self.tree) if self.tree is not None else iter(())


def kernel_source(kernel, parameter_count: int) -> KernelSource:
    """Check that ``kernel`` is a ``@cuda.jit`` kernel taking ``parameter_count`` arguments;
    raise :class:`CheckFailedError` or :class:`NotAttemptedError` with an explanation otherwise."""
    if kernel is None or kernel is Ellipsis:
        raise NotAttemptedError(
            "there is no kernel to check yet.",
            "write the kernel in the cell above, run that cell, then pass the kernel to the check.",
        )
    function = python_function(kernel)
    if function is None:
        if inspect.isfunction(kernel):
            raise CheckFailedError(
                f"`{kernel.__name__}` is a plain Python function, not a CUDA kernel.",
                "put `@cuda.jit` on the line above `def`, run the cell again, and pass the kernel.",
            )
        raise CheckFailedError(
            f"the check needs your `@cuda.jit` kernel, but got {type(kernel).__name__} "
            f"{kernel!r:.60}.",
            "pass the kernel itself, without launching it: `check(my_kernel)`, "
            "not `check(my_kernel[blocks, threads](...))`.",
        )
    if is_device_function(kernel):
        raise CheckFailedError(
            f"`{function.__name__}` is a device function (`@cuda.jit(device=True)`), which only "
            "other kernels can call.",
            "write it as a kernel: plain `@cuda.jit`, no return value, results written to `out`.",
        )
    try:
        source = textwrap.dedent(inspect.getsource(function))
        tree = next(
            node for node in ast.parse(source).body if isinstance(node, ast.FunctionDef)
        )
    except (OSError, TypeError, SyntaxError, StopIteration):
        source, tree = None, None
    result = KernelSource(function, source, tree)
    names = result.parameters
    if names and len(names) != parameter_count:
        raise CheckFailedError(
            f"`{function.__name__}` takes {len(names)} argument(s) ({', '.join(names)}), but "
            f"this exercise's kernel takes {parameter_count}.",
            "keep the signature the exercise gives.",
        )
    return result


def raises_not_implemented(kernel: KernelSource) -> bool:
    """True when the kernel still contains ``raise NotImplementedError`` (the stub)."""
    for node in kernel.walk():
        if isinstance(node, ast.Raise) and node.exc is not None:
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(target, ast.Name) and target.id == "NotImplementedError":
                return True
    return False


_ARRAY_FUNCTIONS = {
    "array", "asarray", "empty", "zeros", "ones", "full", "arange", "linspace", "empty_like",
    "zeros_like", "ones_like", "full_like", "copy", "concatenate", "stack", "sum", "dot",
    "matmul", "mean", "cumsum", "sort",
}
_PYTHON_CONTAINERS = {"list", "dict", "set", "sorted", "str", "format"}


def simulator_only_code(kernel: KernelSource) -> list[str]:
    """Lines of the kernel that run in the simulator (plain Python) but cannot compile for a
    GPU: Python lists/dicts/sets, NumPy array creation or reductions, string formatting."""
    found: list[str] = []

    def note(node, what):
        found.append(f"`{kernel.line(node)}` {what}")

    for node in kernel.walk():
        if isinstance(node, (ast.List, ast.ListComp)):
            note(node, "creates a Python list")
        elif isinstance(node, (ast.Dict, ast.DictComp, ast.Set, ast.SetComp)):
            note(node, "creates a Python dict or set")
        elif isinstance(node, ast.JoinedStr):
            note(node, "formats a string (f-string)")
        elif isinstance(node, ast.Call):
            func = node.func
            if (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id in ("np", "numpy")
                and func.attr in _ARRAY_FUNCTIONS
            ):
                note(node, f"calls np.{func.attr}, which needs NumPy arrays on the CPU")
            elif isinstance(func, ast.Name) and func.id in _PYTHON_CONTAINERS:
                note(node, f"calls {func.id}()")
            elif (
                isinstance(func, ast.Attribute)
                and func.attr == "format"
                and isinstance(func.value, ast.Constant)
            ):
                note(node, "formats a string (str.format)")
    return list(dict.fromkeys(found))  # keep order, drop repeats


def count_calls(kernel: KernelSource, name: str) -> int:
    """How many call sites of ``cuda.<name>`` / ``<name>`` the kernel's source has."""
    count = 0
    for node in kernel.walk():
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            count += called == name
    return count


def plain_writes_to(kernel: KernelSource, parameter: str) -> list[str]:
    """Source lines that write ``parameter[...]`` with a plain assignment (``=``, ``+=``), not
    through an atomic: when many threads do that to one element, it is a data race."""
    lines = []
    for node in kernel.walk():
        targets = (
            node.targets if isinstance(node, ast.Assign)
            else [node.target] if isinstance(node, ast.AugAssign)
            else []
        )
        for target in targets:
            if (
                isinstance(target, ast.Subscript)
                and isinstance(target.value, ast.Name)
                and target.value.id == parameter
            ):
                lines.append(kernel.line(node))
    return lines


def start_kernel(kernel, parameter_count: int, stub_hint: str) -> KernelSource:
    """Every kernel check's first steps: is it a ``@cuda.jit`` kernel with the right number of
    arguments (:func:`kernel_source`), is it still the stub (*not attempted*, with
    ``stub_hint``), and, in the simulator, is it code a GPU could compile
    (:func:`simulator_only_code`)? Returns the kernel's source for closer looks."""
    source = kernel_source(kernel, parameter_count)
    if raises_not_implemented(source):
        raise NotAttemptedError(STUB_MESSAGE.format(what="kernel"), stub_hint)
    if device.tier() == "sim":
        problems = simulator_only_code(source)
        if problems:
            raise CheckFailedError(
                "your kernel would run here, because the simulator executes it as plain Python, "
                "but it would not compile for a real GPU: " + "; ".join(problems) + ".",
                SIMULATOR_ONLY_HINT,
            )
    return source


def call_learner(function, *args, stub_hint: str = "", call: str = "your function"):
    """Call a learner's plain Python function with ``args``: nothing passed yet or the stub
    becomes *not attempted*, any exception a failure that names it (``call`` says which call,
    e.g. ``"decode(0, 3, 1, 5, 10) for fp16"``)."""
    if function is None or function is Ellipsis:
        raise NotAttemptedError(
            "there is no function to check yet.",
            stub_hint or "write the function in the cell above, run that cell, then pass it to "
            "the check.")
    if not callable(function):
        raise CheckFailedError(
            f"the check needs your function, not {type(function).__name__} {function!r:.40}.",
            "pass the function itself, without calling it.")
    try:
        return function(*args)
    except NotImplementedError:
        raise NotAttemptedError(STUB_MESSAGE.format(what="function"), stub_hint) from None
    except Exception as error:  # the learner's code: explain, don't crash
        raise CheckFailedError(f"{call} stopped with {type(error).__name__}: {error}",
                               READ_THE_ERROR_HINT) from None


# --- random trials ------------------------------------------------------------------------------


def new_seed() -> int:
    """A fresh seed for one check, small enough to type back in."""
    return secrets.randbelow(2**31)


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


def default_threads_per_block() -> int:
    """The block size of the 1-D checks: 64 in the simulator (few simulated threads), 256 on a
    GPU."""
    return 256 if device.tier() == "gpu" else 64


def describe_launch(blocks, threads) -> str:
    """'3 blocks of 64 threads', or '4 x 2 blocks of 8 x 8 threads' for a 2-D launch."""
    if isinstance(threads, int):
        return f"{blocks} blocks of {threads} threads"
    return (f"{' x '.join(str(b) for b in blocks)} blocks of "
            f"{' x '.join(str(t) for t in threads)} threads")


class Launched:
    """What every trial of a kernel check has (the trial dataclasses mix it in): ``check_name``
    and ``seed``; the launch, ``blocks`` and ``threads`` (ints for 1-D, ``(x, y)`` for 2-D);
    and ``extents``, the lengths of the axes of the arrays the kernel gets."""

    @property
    def padding(self) -> int:
        """Elements of padding after each axis of an array (:func:`padded`): as many as a block
        has threads along an axis, so that every thread of the last, partial block that runs
        past the end lands in padding."""
        return max(self.threads) if isinstance(self.threads, tuple) else self.threads

    @property
    def launched(self) -> str:
        return describe_launch(self.blocks, self.threads)

    @property
    def repeat(self) -> str:
        return f"seed={self.seed}; repeat it with {self.check_name}(kernel, seed={self.seed})"


@dataclass
class Trial(Launched):
    """One random 1-D problem: its size, launch, seed and the random generator its data come
    from. ``str(trial)`` says how to repeat it."""

    check_name: str
    seed: int
    n: int
    threads_per_block: int
    dtype: np.dtype
    rng: np.random.Generator = field(repr=False, compare=False)

    @classmethod
    def draw(cls, check_name: str, seed: int, threads_per_block: int, dtype,
             n: int | None = None, size_range: tuple[int, int] | None = None) -> Trial:
        """A trial of random size (or of size ``n``) whose data come from ``seed``."""
        rng = np.random.default_rng(seed)
        drawn = draw_size(rng, threads_per_block, size_range)
        return cls(check_name, seed, drawn if n is None else n, threads_per_block,
                   np.dtype(dtype), rng)

    @property
    def blocks(self) -> int:
        return -(-self.n // self.threads_per_block)

    @property
    def threads(self) -> int:
        return self.threads_per_block

    @property
    def extents(self) -> tuple[int, ...]:
        return (self.n,)

    @property
    def idle_threads(self) -> int:
        return self.blocks * self.threads_per_block - self.n

    def uniform(self, low: float, high: float) -> np.ndarray:
        """n random values in [low, high) of the trial's dtype."""
        return self.rng.uniform(low, high, self.n).astype(self.dtype)

    def __str__(self) -> str:
        return f"n={self.n}, {self.launched}, {self.dtype.name}, {self.repeat}"


def block_2d() -> tuple[int, int]:
    """Threads per block (x, y) of the 2-D checks: 8 x 8 in the simulator, 16 x 16 on a GPU."""
    return (16, 16) if device.tier() == "gpu" else (8, 8)


@dataclass
class Trial2D(Launched):
    """One random rows x cols problem for a 2-D grid (x along the columns): sizes not multiples
    of the block, the block, the seed and its random generator."""

    check_name: str
    seed: int
    rows: int
    cols: int
    block: tuple[int, int]
    dtype: np.dtype
    rng: np.random.Generator = field(repr=False)

    @classmethod
    def draw(cls, check_name: str, seed: int, dtype=np.float32) -> Trial2D:
        rng = np.random.default_rng(seed)
        block = block_2d()
        sizes = (9, 40 if device.tier() == "sim" else 300)
        rows = draw_size(rng, block[1], sizes, full_blocks=1)
        cols = draw_size(rng, block[0], sizes, full_blocks=1)
        return cls(check_name, seed, rows, cols, block, np.dtype(dtype), rng)

    @property
    def blocks(self) -> tuple[int, int]:
        return -(-self.cols // self.block[0]), -(-self.rows // self.block[1])

    @property
    def threads(self) -> tuple[int, int]:
        return self.block

    @property
    def extents(self) -> tuple[int, ...]:
        return self.rows, self.cols

    def normal(self, *shape, scale: float = 1.0) -> np.ndarray:
        return (self.rng.standard_normal(shape) * scale).astype(self.dtype)

    def __str__(self) -> str:
        return f"{self.rows} x {self.cols}, {self.launched}, {self.dtype.name}, {self.repeat}"


# --- device buffers and launches ----------------------------------------------------------------


def padded(values: np.ndarray, padding: int, fill):
    """Copy ``values`` to the device with ``padding`` extra elements of ``fill`` after the end of
    every axis; return ``(device buffer, device view of the values)``: the kernel gets the view.

    In the simulator, touching the view past its end raises ``IndexError``; on a GPU the stray
    access lands in the padding (not in another allocation), where :func:`read_back` sees it.
    """
    from numba import cuda

    inside = tuple(slice(0, extent) for extent in values.shape)
    buffer = np.full(tuple(extent + padding for extent in values.shape), fill,
                     dtype=values.dtype)
    buffer[inside] = values
    d_buffer = cuda.to_device(buffer)
    return d_buffer, d_buffer[inside]


def read_back(d_buffer, shape: tuple[int, ...], where, fill=np.nan, what: str = "out",
              hint: str = GUARD_HINT) -> np.ndarray:
    """Copy a :func:`padded` buffer back and return its ``shape`` corner, the kernel's output;
    raise :class:`CheckFailedError` if a thread changed the padding (still ``fill``), i.e.
    wrote past the end. ``where`` (a trial, usually) ends the message."""
    everything = d_buffer.copy_to_host()
    inside = tuple(slice(0, extent) for extent in shape)
    same = np.isnan(everything) if np.isnan(fill) else everything == fill
    changed = ~same
    changed[inside] = False
    if changed.any():
        first = tuple(int(i) for i in np.argwhere(changed)[0])
        if len(shape) == 1:
            raise CheckFailedError(
                f"threads past the end wrote to {what}[{first[0]}] and beyond, outside the "
                f"{shape[0]} elements of {what} ({where}).", hint)
        raise CheckFailedError(
            f"a thread wrote {what}[{', '.join(map(str, first))}], outside the "
            f"{' x '.join(map(str, shape))} {what} ({where}).", hint)
    return everything[inside]


def run_elementwise(kernel, trial: Launched, *inputs, fill=0, what: str = "out",
                    index_hint: str | None = None) -> np.ndarray:
    """Launch a one-thread-per-element ``kernel(*inputs, out)`` on the trial's grid and return
    ``out`` (of ``trial.extents``, NaN where never written).

    Each array input goes in as a view of a buffer padded with ``fill``, scalars as they are;
    ``out`` starts as NaN in a padded buffer, and a write into its padding fails the check
    (:func:`read_back`) with ``index_hint``, as an ``IndexError`` past the end does; by default
    :data:`GUARD_HINT`, or :data:`GUARD_2D_HINT` for a 2-D launch."""
    if index_hint is None:
        index_hint = GUARD_HINT if isinstance(trial.threads, int) else GUARD_2D_HINT
    arrays = [padded(value, trial.padding, fill)[1] if isinstance(value, np.ndarray) else value
              for value in inputs]
    d_all, d_out = padded(np.full(trial.extents, np.nan, trial.dtype), trial.padding, np.nan)
    launch(kernel, trial, *arrays, d_out, index_hint=index_hint)
    return read_back(d_all, trial.extents, trial, what=what, hint=index_hint)


def launch(kernel, trial: Launched, *args, index_hint: str = GUARD_HINT, blocks=None) -> None:
    """Launch the learner's kernel on the trial's grid (``blocks`` blocks instead, if given) and
    wait for it; anything it raises (or a compile error) becomes a :class:`KernelError` that
    knows the trial, for :func:`explain_exception`.

    In the simulator, shared memory starts poisoned (:func:`gpulab.instruments.
    poisoned_shared_memory`), so reading a shared slot before a barrier made it written gives a
    wrong answer every time, as it can on a GPU."""
    from numba import cuda

    try:
        with poisoned_shared_memory() if device.tier() == "sim" else nullcontext():
            launchable(kernel)[trial.blocks if blocks is None else blocks, trial.threads](*args)
            cuda.synchronize()
    except Exception as exc:  # the learner's code: any error is something to explain
        raise KernelError(exc, trial, index_hint) from exc


# --- comparing and diagnosing -------------------------------------------------------------------


def elementwise_tolerance(dtype) -> tuple[float, float]:
    """(rtol, atol) for results that are one rounding away from the exact answer."""
    eps = float(np.finfo(dtype).eps)
    return 4 * eps, float(np.finfo(dtype).tiny)


def _ranges(indices: np.ndarray) -> str:
    """'3, 7..12, 40' for a sorted index array (at most a few pieces)."""
    pieces, start = [], None
    for k, i in enumerate(indices):
        if start is None:
            start = i
        if k + 1 == len(indices) or indices[k + 1] != i + 1:
            pieces.append(f"{start}" if start == i else f"{start}..{i}")
            start = None
    return ", ".join(pieces[:4]) + (", ..." if len(pieces) > 4 else "")


def diagnose_vector(
    expected: np.ndarray, got: np.ndarray, trial: Trial, unwritten_marker: float = np.nan,
    patterns: dict[str, tuple[np.ndarray, str]] | None = None,
) -> CheckFailedError | None:
    """None when ``got`` matches ``expected``; otherwise a :class:`CheckFailedError` that says which
    elements are wrong (first one, how many, expected vs got) and what the pattern suggests.

    ``got`` must have started as ``unwritten_marker`` (NaN) everywhere, so that "never written"
    and "written wrong" can be told apart. ``patterns`` maps a description to an array a common
    mistake would produce, e.g. ``{"x[i] + y[i]": (x + y, hint)}``.
    """
    rtol, atol = elementwise_tolerance(trial.dtype)
    bad = ~np.isclose(got, expected, rtol=rtol, atol=atol)
    if not bad.any():
        return None
    n, tpb = trial.n, trial.threads_per_block
    unwritten = np.isnan(got) if np.isnan(unwritten_marker) else got == unwritten_marker
    bad_indices = np.flatnonzero(bad)
    first = int(bad_indices[0])
    last_block_start = (trial.blocks - 1) * tpb
    where = np.arange(n)

    if unwritten.all():
        return CheckFailedError(
            f"your kernel wrote nothing into out: all {n} elements still hold their starting "
            f"value ({trial}).",
            "each thread should assign `out[i] = ...` for its own i; check that the guard lets "
            "threads in (`if i < x.shape[0]:`, not `>`).",
        )
    written_bad = bad & ~unwritten
    for shift in (1, -1):
        inner = np.zeros(n, dtype=bool)
        inner[max(shift, 0): n + min(shift, 0)] = True
        shifted = np.roll(expected, shift)
        check = inner & ~unwritten
        if written_bad.any() and np.allclose(got[check], shifted[check], rtol=rtol, atol=atol):
            first_written = int(np.flatnonzero(written_bad)[0])
            return CheckFailedError(
                f"out[{first_written}] = {got[first_written]:.6g} but should be "
                f"{expected[first_written]:.6g}: every value is one position off "
                f"({'out[i] got element i - 1' if shift == 1 else 'out[i] got element i + 1'}; "
                f"{trial}).",
                "out[i] must get element i of x and y: check for a stray `+ 1` or `- 1` in the "
                "index, and let the guard be just `i < x.shape[0]`.",
            )
    if unwritten.any():
        missing = np.flatnonzero(unwritten)
        text = (
            f"{missing.size} of {n} elements of out were never written "
            f"(out[{_ranges(missing)}])"
        )
        if np.array_equal(missing, where[where >= tpb]):
            return CheckFailedError(
                f"{text}: only the first block's elements (out[0..{tpb - 1}]) were written, "
                f"so every block worked on the same elements ({trial}).",
                GLOBAL_INDEX_HINT,
            )
        if np.array_equal(missing, where[where >= last_block_start]):
            return CheckFailedError(
                f"{text}: every block except the last, partial one is right ({trial}).",
                "the guard should stop only threads with i >= n: write `if i < x.shape[0]:` "
                "(the last block still has real elements before n).",
            )
        if missing[-1] == n - 1 and missing.size <= 2:
            return CheckFailedError(
                f"{text}: the last element(s) were skipped ({trial}).",
                "compare with `i < x.shape[0]`, not `i < x.shape[0] - 1`.",
            )
        return CheckFailedError(f"{text} ({trial}).", GLOBAL_INDEX_HINT)

    text = (
        f"{bad_indices.size} of {n} elements are wrong; the first is out[{first}]: "
        f"expected {expected[first]:.6g}, got {got[first]:.6g}"
    )
    for description, (candidate, hint) in (patterns or {}).items():
        if np.allclose(got, candidate, rtol=rtol, atol=atol):
            return CheckFailedError(f"{text}. out looks like {description} ({trial}).", hint)
    if bad_indices.min() >= last_block_start:
        return CheckFailedError(
            f"{text}: only the last, partial block is wrong ({trial}).",
            "the last block is the only one where some threads have no element: check the guard "
            "and how those threads index.",
        )
    return CheckFailedError(f"{text} ({trial}).", "compare your formula with the exercise's.")


@dataclass
class Suspect:
    """A wrong answer a common mistake produces: if the result matches ``value`` (or any
    element of it, when it is an array), say why."""

    value: float | np.ndarray
    message: str
    hint: str


def matches(value: float, target, tolerance: float) -> bool:
    """True when ``value`` is within ``tolerance`` of ``target`` (of any element, if an array)."""
    if not np.isfinite(value):
        return False
    difference = np.abs(np.asarray(target, dtype=np.float64) - float(value))
    return bool(np.any(difference <= tolerance))


def diagnose_total(expected: float, got: float, tolerance: float, trial: Trial,
                   suspects: list[Suspect], too_small: tuple[str, str],
                   otherwise: tuple[str, str]) -> CheckFailedError | None:
    """None when the scalar result is within ``tolerance``; else the first matching suspect,
    then ``too_small`` (message, hint) when the result falls short, else ``otherwise``; those
    last two are marked ``specific=False``."""
    if matches(got, expected, tolerance):
        return None
    summary = f"out[0] = {float(got):.6g}, expected {float(expected):.6g}"
    for suspect in suspects:
        if matches(got, suspect.value, tolerance):
            return CheckFailedError(f"{summary}: {suspect.message} ({trial}).", suspect.hint)
    if not np.isfinite(got):
        return CheckFailedError(
            f"{summary}: the result is not a number, so the sum used values nobody wrote "
            f"({trial}).",
            otherwise[1],
        )
    message, hint = too_small if got < expected else otherwise
    return CheckFailedError(f"{summary}: {message} ({trial}).", hint, specific=False)




def diagnose_matrix(expected: np.ndarray, got: np.ndarray, trial: Trial2D,
                    patterns: dict[str, tuple[np.ndarray, str]], rtol: float, atol: float,
                    what: str = "out") -> None:
    """Raise CheckFailedError unless ``got`` (from :func:`read_back`, NaN where never written)
    holds ``expected``; the message says which part is wrong and, when ``got`` matches one of
    ``patterns`` (``{description: (what a mistake gives, hint)}``), which mistake it is."""
    unwritten = np.isnan(got)
    if unwritten.all():
        raise CheckFailedError(f"your kernel wrote nothing into {what} ({trial}).",
                               "each thread should assign its own element, inside the guard.")
    if unwritten.any():
        rows_missing = np.flatnonzero(unwritten.any(axis=1))
        cols_missing = np.flatnonzero(unwritten.any(axis=0))
        if unwritten[:, trial.block[0]:].all() and unwritten[trial.block[1]:, :].all():
            hint = ("only the first block's elements were written: use the global index "
                    "`c, r = cuda.grid(2)`, not `cuda.threadIdx` alone. " + GRID_2D_HINT)
        else:
            hint = GUARD_2D_HINT + " " + GRID_2D_HINT
        raise CheckFailedError(
            f"{int(unwritten.sum())} of {got.size} elements of {what} were never written (rows "
            f"{rows_missing[0]}..{rows_missing[-1]}, columns {cols_missing[0]}.."
            f"{cols_missing[-1]}; {trial}).", hint)
    bad = ~np.isclose(got, expected, rtol=rtol, atol=atol)
    if not bad.any():
        return
    r, c = map(int, np.argwhere(bad)[0])
    text = (f"{int(bad.sum())} of {got.size} elements are wrong; the first is {what}[{r}, {c}]: "
            f"expected {expected[r, c]:.6g}, got {got[r, c]:.6g}")
    for description, (candidate, hint) in patterns.items():
        if np.allclose(got, candidate, rtol=rtol, atol=atol):
            raise CheckFailedError(f"{text}. {what} looks like {description} ({trial}).", hint)
    raise CheckFailedError(f"{text} ({trial}).", "compare your formula with the exercise's.")


# --- turning errors into advice -----------------------------------------------------------------

# The simulator starts an exception raised in a kernel with the thread's and block's indices.
_SIM_PREFIX = re.compile(
    r"tid=\[(\d+), (\d+), (\d+)\] ctaid=\[(\d+), (\d+), (\d+)\]:?\s*")
_OUT_OF_BOUNDS = re.compile(r"index (-?\d+) is out of bounds for axis \d+ with size (\d+)")


def _first_informative_line(text: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("Failed in", "During:", "File ")):
            return line
    return text.strip()


def _thread_named(prefix: re.Match, trial: Launched) -> str:
    """'thread 3 of block 1 (global index 67)', or for a 2-D launch
    'thread (x=3, y=5) of block (x=1, y=0)'."""
    tx, ty, _, bx, by, _ = map(int, prefix.groups())
    if isinstance(trial.threads, int):
        return (f"thread {tx} of block {bx} "
                f"(global index {bx * trial.threads + tx})")
    return f"thread (x={tx}, y={ty}) of block (x={bx}, y={by})"


def explain_exception(error: KernelError, trial: Launched,
                      index_hint: str = GUARD_HINT) -> tuple[str, str, str]:
    """(status, message, hint) for an exception the learner's kernel raised."""
    cause = error.cause
    text = str(cause)
    where = ""
    prefix = _SIM_PREFIX.match(text)
    if prefix:
        where = _thread_named(prefix, trial)
        text = text[prefix.end():]
    if isinstance(cause, NotImplementedError):
        return NOT_ATTEMPTED, STUB_MESSAGE.format(what="kernel"), ""
    if isinstance(cause, IndexError):
        bounds = _OUT_OF_BOUNDS.search(text)
        detail = (
            f"used index {bounds.group(1)} on an array of {bounds.group(2)} elements"
            if bounds else f"raised IndexError ({text})"
        )
        if bounds and int(bounds.group(2)) not in trial.extents:
            sizes = " or ".join(str(e) for e in sorted(set(trial.extents)))
            detail += (
                f" (not one of the inputs or outputs, which have {sizes}: a shared or local "
                "array?)"
            )
        who = where or "a thread"
        return FAILED, f"{who} {detail} ({trial}).", index_hint
    try:
        from numba.core.errors import NumbaError
    except ImportError:  # pragma: no cover
        NumbaError = ()  # noqa: N806
    if isinstance(cause, NumbaError):  # a TypingError, usually
        return (
            FAILED,
            f"your kernel would not compile for the GPU: {_first_informative_line(text)}",
            SIMULATOR_ONLY_HINT,
        )
    who = f" in {where}" if where else ""
    spelling = ("check the spelling; CUDA's indices are `cuda.threadIdx.x`, `cuda.blockIdx.x`, "
                "`cuda.blockDim.x`, and `cuda.grid(1)` combines them.")
    hints = {
        NameError: spelling,
        AttributeError: spelling,
        ZeroDivisionError: "a thread divided by zero: check the divisor, e.g. a stride that "
        "reached 0.",
    }
    hint = next((h for kind, h in hints.items() if isinstance(cause, kind)), READ_THE_ERROR_HINT)
    return FAILED, f"your kernel stopped with {type(cause).__name__}{who}: {text} ({trial}).", hint


# --- running a check ----------------------------------------------------------------------------


def run_check(exercise: str, body: Callable[[int], str], seed: int | None = None,
              show: bool = True) -> CheckResult:
    """Run ``body(seed)`` and turn whatever happens into a printed, returned CheckResult.

    ``body`` returns the message for a pass, or raises :class:`CheckFailedError`,
    :class:`NotAttemptedError` or :class:`KernelError` (carrying a :class:`Trial` in ``.trial``).
    """
    seed = new_seed() if seed is None else int(seed)
    try:
        result = CheckResult(exercise, True, body(seed), PASSED, seed=seed)
    except NotAttemptedError as stop:
        result = CheckResult(exercise, False, stop.message, NOT_ATTEMPTED, stop.hint, seed)
    except CheckFailedError as failure:
        result = CheckResult(exercise, False, failure.message, FAILED, failure.hint, seed)
    except KernelError as error:
        status, message, hint = explain_exception(error, error.trial, error.index_hint)
        result = CheckResult(exercise, status == PASSED, message, status, hint, seed, error.cause)
    except Exception as exc:  # a problem in the check itself: still tell, never raise
        result = CheckResult(
            exercise, False,
            f"the check itself failed ({type(exc).__name__}: {exc}); this is probably a bug in "
            "gpulab, not in your kernel.",
            FAILED, "rerun the cell; if it happens again, tell your instructor.", seed, exc,
        )
    if show:
        print(result)
    return result


__all__ = [
    "FAILED", "GLOBAL_INDEX_HINT", "GRID_2D_HINT", "GUARD_2D_HINT", "GUARD_HINT",
    "NOT_ATTEMPTED", "PASSED", "SIMULATOR_ONLY_HINT", "CheckFailedError", "CheckResult",
    "KernelError", "KernelSource", "Launched", "NotAttemptedError", "Suspect", "Trial", "Trial2D",
    "block_2d", "call_learner", "count_calls", "default_threads_per_block", "describe_launch",
    "diagnose_matrix", "diagnose_total", "diagnose_vector", "draw_size", "explain_exception",
    "kernel_source", "launch", "new_seed", "padded", "plain_writes_to", "raises_not_implemented",
    "read_back", "run_check", "run_elementwise", "simulator_only_code", "start_kernel",
]
