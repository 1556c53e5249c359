"""The machinery behind every exercise check: results, random trials, safe launches, diagnoses.

A check takes a learner's ``@cuda.jit`` kernel, launches it on random data and compares the
answer with :mod:`gpulab.reference`. It never raises: whatever goes wrong (a stub, an index past
the end of an array, a kernel that does not compile, a wrong answer) becomes a
:class:`CheckResult` that says, in plain words, what happened and what usually causes it.
The result is printed (so the learner sees it) and returned (so a solution notebook can
``assert result.passed``).

What makes a check hard to fool
- Sizes are random and never a multiple of the block size, so the last block is partial and a
  missing guard shows. Values are random (not all ones), from a seeded generator whose seed is
  reported on failure: ``check_...(kernel, seed=1234)`` repeats a failing trial exactly.
- Inputs are views of larger buffers: a thread past the end raises ``IndexError`` in the
  simulator, and on a GPU its write lands in padding the check inspects instead of in
  someone else's memory.
- The simulator runs the threads of a block one after another, so it hides most races. For an
  output that many threads update, the check passes a :class:`WatchedArray` that records which
  simulated thread wrote each element and whether through an atomic; and in both tiers it reads
  the kernel's source for plain (non-atomic) writes to that output.
- The simulator runs kernels as Python, so code that cannot compile for a GPU (lists, NumPy array
  creation, f-strings) would run there; the check reads the source and rejects it with the reason.
"""

from __future__ import annotations

import ast
import inspect
import re
import secrets
import sys
import textwrap
import threading
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from gpulab import device

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
ATOMIC_HINT = (
    "use `cuda.atomic.add(out, 0, value)`: it makes the read, the add and the write one "
    "indivisible step, so no other thread can slip in between."
)
SIMULATOR_ONLY_HINT = (
    "kernels can't create lists or NumPy arrays or use f-strings: use "
    "`cuda.local.array(N, dtype)` or `cuda.shared.array(N, dtype)` for scratch space, and "
    "`print('i =', i)` without formatting."
)


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

    def __init__(self, cause: BaseException, trial: Trial, index_hint: str = ""):
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.cause, self.trial, self.index_hint = cause, trial, index_hint or GUARD_HINT


# --- the learner's kernel: what it is and what its source says -----------------------------


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
    kernel = getattr(kernel, "dispatcher", kernel)  # kernel[blocks, threads] on a GPU
    function = getattr(kernel, "py_func", None)
    if function is None or not hasattr(kernel, "__getitem__"):
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
    is_device_function = getattr(kernel, "_device", False) or getattr(
        kernel, "targetoptions", {}
    ).get("device", False)
    if is_device_function:
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


# --- random trials --------------------------------------------------------------------------


def new_seed() -> int:
    """A fresh seed for one check, small enough to type back in."""
    return secrets.randbelow(2**31)


def draw_size(rng: np.random.Generator, threads_per_block: int,
              size_range: tuple[int, int] | None = None) -> int:
    """A random n that is **not** a multiple of ``threads_per_block`` and spans at least two
    full blocks plus a partial one, so block-index and guard mistakes both show."""
    low, high = size_range or SIZE_RANGE[device.tier()]
    low, high = max(low, 2 * threads_per_block + 1), max(high, 4 * threads_per_block)
    if threads_per_block <= 1:  # every size is a multiple of 1
        return int(rng.integers(low, max(high, low + 2)))
    while True:
        n = int(rng.integers(low, high))
        if n % threads_per_block:
            return n


@dataclass
class Trial:
    """One random problem: its size, launch, seed and the random generator its data come from.
    ``str(trial)`` says how to repeat it."""

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
    def idle_threads(self) -> int:
        return self.blocks * self.threads_per_block - self.n

    def uniform(self, low: float, high: float) -> np.ndarray:
        """n random values in [low, high) of the trial's dtype."""
        return self.rng.uniform(low, high, self.n).astype(self.dtype)

    def __str__(self) -> str:
        return (
            f"n={self.n}, {self.blocks} blocks of {self.threads_per_block} threads, "
            f"{self.dtype.name}, seed={self.seed}; "
            f"repeat it with {self.check_name}(kernel, seed={self.seed})"
        )


def padded(values: np.ndarray, padding: int, fill) -> tuple[object, object]:
    """A device buffer holding ``values`` followed by ``padding`` copies of ``fill``, and the
    device view of its first ``len(values)`` elements, which is what the kernel gets.

    In the simulator, touching the view past its end raises ``IndexError``; on a GPU the stray
    access lands in the padding (not in another allocation) where the check can see it.
    """
    from numba import cuda

    buffer = np.concatenate([values, np.full(padding, fill, dtype=values.dtype)])
    d_buffer = cuda.to_device(buffer)
    return d_buffer, d_buffer[: values.shape[0]]


def launch(kernel, trial: Trial, *args, index_hint: str = GUARD_HINT) -> None:
    """Launch the learner's kernel with the trial's grid and wait for it; anything it raises
    (or a compile error) becomes a :class:`KernelError` that knows the trial."""
    from numba import cuda

    try:
        kernel[trial.blocks, trial.threads_per_block](*args)
        cuda.synchronize()
    except Exception as exc:  # the learner's code: any error is something to explain
        raise KernelError(exc, trial, index_hint) from exc


# --- watching the writes in the simulator ---------------------------------------------------


def _atomic_code_objects() -> frozenset:
    try:
        from numba.cuda.simulator.kernelapi import FakeCUDAAtomic
    except ImportError:  # pragma: no cover - the simulator's layout changed
        return frozenset()
    return frozenset(
        member.__code__ for member in vars(FakeCUDAAtomic).values() if inspect.isfunction(member)
    )


def _simulated_thread() -> tuple[int, int] | None:
    """(block, thread) of the simulated CUDA thread running now, or None outside a kernel."""
    current = threading.current_thread()
    block, thread = getattr(current, "blockIdx", None), getattr(current, "threadIdx", None)
    return None if block is None or thread is None else (block.x, thread.x)


def _element(index) -> object:
    if isinstance(index, tuple) and len(index) == 1:
        index = index[0]
    try:
        return int(index)
    except TypeError:
        return repr(index)


class WatchedArray:
    """A stand-in for a 1-D device array, for the simulator only, that records which simulated
    thread wrote each element and whether it wrote through a ``cuda.atomic`` function.

    The simulator runs one block at a time and, within a block, lets each thread run until it
    waits at a barrier, so racing read-modify-writes rarely collide there. Recording the writes
    shows the race anyway: two threads writing one element without an atomic is a race on a GPU
    whatever order the simulator happened to use.
    """

    def __init__(self, array: np.ndarray):
        self._array = array
        self.shape, self.dtype = array.shape, array.dtype
        self.size, self.ndim = array.size, array.ndim
        self.plain_writers: dict[object, set] = defaultdict(set)
        self.atomic_writers: dict[object, set] = defaultdict(set)
        self._lock = threading.Lock()
        self._atomic_codes = _atomic_code_objects()

    def __len__(self) -> int:
        return len(self._array)

    def __getitem__(self, index):
        return self._array[index]

    def __setitem__(self, index, value) -> None:
        self._array[index] = value
        atomic = sys._getframe(1).f_code in self._atomic_codes
        writer = _simulated_thread()
        with self._lock:
            (self.atomic_writers if atomic else self.plain_writers)[_element(index)].add(writer)

    def copy_to_host(self) -> np.ndarray:
        return self._array.copy()

    def race(self) -> tuple[object, list, int] | None:
        """(element, some plain writers, number of writers) for the first element that more
        than one thread wrote with at least one plain write; None if there is no such element."""
        for element, plain in self.plain_writers.items():
            writers = plain | self.atomic_writers.get(element, set())
            if len(writers) > 1:
                return element, sorted(w for w in plain if w is not None)[:2], len(writers)
        return None


def describe_threads(threads: list[tuple[int, int]]) -> str:
    return " and ".join(f"thread {t} of block {b}" for b, t in threads)


# --- comparing and diagnosing ---------------------------------------------------------------


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


# --- turning errors into advice -------------------------------------------------------------

_SIM_PREFIX = re.compile(r"tid=\[(\d+), \d+, \d+\] ctaid=\[(\d+), \d+, \d+\]:?\s*")
_OUT_OF_BOUNDS = re.compile(r"index (-?\d+) is out of bounds for axis \d+ with size (\d+)")


def _first_informative_line(text: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("Failed in", "During:", "File ")):
            return line
    return text.strip()


def explain_exception(error: KernelError, trial: Trial,
                      index_hint: str = GUARD_HINT) -> tuple[str, str, str]:
    """(status, message, hint) for an exception the learner's kernel raised."""
    cause = error.cause
    text = str(cause)
    where = ""
    prefix = _SIM_PREFIX.match(text)
    if prefix:
        thread, block = int(prefix.group(1)), int(prefix.group(2))
        global_index = block * trial.threads_per_block + thread
        where = f"thread {thread} of block {block} (global index {global_index})"
        text = text[prefix.end():]
    if isinstance(cause, NotImplementedError):
        return (
            NOT_ATTEMPTED,
            "your kernel still raises NotImplementedError: write your code in place of "
            "`raise NotImplementedError()`.",
            "",
        )
    if isinstance(cause, IndexError):
        bounds = _OUT_OF_BOUNDS.search(text)
        detail = (
            f"used index {bounds.group(1)} on an array of {bounds.group(2)} elements"
            if bounds else f"raised IndexError ({text})"
        )
        if bounds and int(bounds.group(2)) != trial.n:
            detail += (
                f" (not one of the inputs or outputs, which have {trial.n}: a shared or local "
                "array?)"
            )
        who = where or "a thread"
        return FAILED, f"{who} {detail} ({trial}).", index_hint
    try:
        from numba.core.errors import NumbaError, TypingError
    except ImportError:  # pragma: no cover
        NumbaError = TypingError = ()  # noqa: N806
    if isinstance(cause, TypingError):
        return (
            FAILED,
            f"your kernel would not compile for the GPU: {_first_informative_line(text)}",
            SIMULATOR_ONLY_HINT,
        )
    if isinstance(cause, NumbaError):
        return (
            FAILED,
            f"your kernel would not compile for the GPU: {_first_informative_line(text)}",
            SIMULATOR_ONLY_HINT,
        )
    who = f" in {where}" if where else ""
    hints = {
        NameError: "check the spelling; CUDA's indices are `cuda.threadIdx.x`, "
        "`cuda.blockIdx.x`, `cuda.blockDim.x`, and `cuda.grid(1)` combines them.",
        AttributeError: "check the spelling; CUDA's indices are `cuda.threadIdx.x`, "
        "`cuda.blockIdx.x`, `cuda.blockDim.x`, and `cuda.grid(1)` combines them.",
        ZeroDivisionError: "a thread divided by zero: check the divisor, e.g. a stride that "
        "reached 0.",
    }
    hint = next((h for kind, h in hints.items() if isinstance(cause, kind)),
                "read the error: the line it names in your kernel is where it stopped.")
    return FAILED, f"your kernel stopped with {type(cause).__name__}{who}: {text} ({trial}).", hint


# --- running a check ------------------------------------------------------------------------


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
    "CheckResult", "CheckFailedError", "KernelError", "NotAttemptedError", "Suspect", "Trial",
    "WatchedArray", "diagnose_total", "diagnose_vector", "draw_size", "explain_exception",
    "kernel_source", "launch", "new_seed", "padded", "run_check",
]
