"""Everything the exercise checks share: results, the learner's code, random trials, launches,
diagnoses and the advice a failure gives. Chapter modules (``ch00`` … ``ch12``) hold only their
own exercises' checks and import what they share from here and from the core a check is
declared with, never from each other: :mod:`gpulab.exercises.spec` (:class:`~gpulab.exercises.
spec.CheckSpec`), :mod:`gpulab.exercises.trial` (one :class:`~gpulab.exercises.trial.Trial`
for any shape, block sizes drawn too) and :mod:`gpulab.exercises.mistakes` (a
:class:`~gpulab.exercises.mistakes.Mistake` record and ``diagnose``); ch00 and ch01 are
declared that way, the other chapters still use this module's trial classes. Compiling for a
real GPU lives in :mod:`gpulab.exercises.compiling`.

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
  with the reason, and :func:`launch` compiles the kernel for a real GPU (sm_75, as the ``ptx``
  tier does, in a child process: :func:`compile_for_gpu`) before the first simulated launch,
  once per kernel source and argument types, every kernel, whatever it imports (a global no GPU
  kernel can use, such as a list of device functions, is a compile error). Only where the CUDA
  toolkit wheels are missing (macOS) is that step skipped, and the result's note says so.
- ``cuda.syncthreads()`` inside a branch, or in a loop whose trip count depends on the thread,
  is a deadlock or undefined behaviour on a GPU but runs in the simulator, which lets threads
  that skip a barrier go: :func:`start_kernel` rejects it from the source
  (:func:`barrier_problems`).
- A kernel that never finishes (a grid-stride loop whose step is 0) would hang the check:
  :func:`launch` runs it under a time limit (:func:`gpulab.instruments.limited` in the
  simulator: a budget of array accesses and barriers per thread, and a wall-clock limit; on a
  GPU the launch is polled), and the check fails with a message instead.
- Checks can judge the method, not only the answer: :func:`trace_trial` traces the learner's
  kernel (:func:`gpulab.instruments.trace_kernel`) and gives per-thread counts of global and
  shared reads and writes, atomics and barriers. A failure offers the learner the same trace:
  the result's last line is the call to run (:attr:`CheckResult.trace_call`, set by
  :func:`launch` or :func:`offer_trace`).
"""

from __future__ import annotations

import ast
import contextvars
import inspect
import math
import re
import secrets
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field

import numpy as np

from gpulab import device
from gpulab.exercises.compiling import (
    ARRAY_FUNCTIONS,
    COMPILE_FOR,
    SIMULATOR_ONLY_HINT,
    compile_verdict,
    compiler_message,
    numba_type,
)
from gpulab.exercises.trial import SIZE_RANGE, Trial, describe_launch, draw_size
from gpulab.instruments import (
    KernelDidNotFinishError,
    KernelTrace,
    access_budget,
    is_device_function,
    launchable,
    limited,
    poisoned_shared_memory,
    python_function,
    trace_kernel,
)
from gpulab.kernels.dense import ACTIVATION_CODES

PASSED = "passed"
NOT_ATTEMPTED = "not attempted"
FAILED = "failed"
STATUSES = (PASSED, NOT_ATTEMPTED, FAILED)

GUARD_HINT = (
    "a thread read or wrote past the end of an array: is there a guard, and does it stop the "
    "index that equals the length too? The last block is only partly used, so its extra "
    "threads must do nothing."
)
GLOBAL_INDEX_HINT = (
    "each thread must handle its own element: the thread's index within its block repeats in "
    "every block, so the global index also needs the block's index and size (chapter 00, "
    "section 4)."
)
GRID_2D_HINT = (
    "`cuda.grid(2)` gives this thread's x first, then its y: x runs along the columns (so "
    "neighbouring threads of a warp read neighbouring elements of a row), y along the rows."
)
GUARD_2D_HINT = (
    "guard both directions: the row index against the number of rows and the column index "
    "against the number of columns, both read from the array's shape. The blocks at the right "
    "and bottom edges are only partly used."
)
STUB_MESSAGE = (
    "your {what} still raises NotImplementedError: write your code in place of "
    "`raise NotImplementedError()`."
)
READ_THE_ERROR_HINT = "read the error: the line it names in your code is where it stopped."
BARRIER_IN_BRANCH = (
    "barrier inside a branch: on a GPU the threads that skip it never arrive — a deadlock or "
    "undefined behaviour"
)
BARRIER_HINT = (
    "put `cuda.syncthreads()` outside any `if`: every thread of the block must reach it. Let "
    "the `if` guard only the memory accesses (threads past the end can write 0 to shared "
    "memory), and put the barrier after it."
)
BARRIER_LOOP_HINT = (
    "every thread must run a loop that holds a barrier the same number of times: take its bounds "
    "from `cuda.blockDim`, the arguments or constants (the same for every thread of the block), "
    "not from `cuda.threadIdx` or `cuda.grid`."
)
BARRIER_EXIT_HINT = (
    "a thread that returns (or breaks out of the loop) early never arrives at the barrier the "
    "others wait at: instead of leaving, let it skip only its memory accesses (or write 0 to "
    "shared memory) and still reach every barrier."
)
DID_NOT_FINISH = (
    "your kernel did not finish: a loop that never ends? (look at the loop's increment)"
)
DID_NOT_FINISH_HINT = (
    "every loop must move towards its end in every thread: a grid-stride loop steps by the "
    "whole grid (never 0, and the same for every thread), and a halving loop must halve its "
    "stride on every round."
)
# The wall-clock limit of one launch in a check: generous, since a loop that touches arrays is
# stopped much sooner by the simulator's access budget (gpulab.instruments.limited).
TIME_LIMIT_S = {"sim": 60.0, "gpu": 20.0}


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
    trace_call: str = ""  # on a failure: the call that traces the learner's kernel
    notes: list[str] = field(default_factory=list)  # e.g. "not compiled for a real GPU here"

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, not {self.status!r}")
        if self.passed != (self.status == PASSED):
            raise ValueError(f"passed={self.passed} contradicts status={self.status!r}")

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        notes = "".join(f"\n   Note: {note}" for note in self.notes)
        if self.status == PASSED:
            return f"✅ PASSED — {self.exercise}: {self.message}{notes}"
        if self.status == NOT_ATTEMPTED:
            text = f"✏️ NOT ATTEMPTED YET — {self.exercise}: {self.message}"
            return text + (f"\n   Hint: {self.hint}" if self.hint else "") + notes
        text = f"❌ NOT YET RIGHT — {self.exercise}: {self.message}"
        text += f"\n   Hint: {self.hint}" if self.hint else ""
        return text + notes + (f"\n   {self.trace_line}" if self.trace_line else "")

    @property
    def trace_line(self) -> str:
        """'See what your kernel did: gpulab.trace(...).draw()' on a failure that a trace can
        explain; empty otherwise."""
        if self.status != FAILED or not self.trace_call:
            return ""
        return f"See what your kernel did: {self.trace_call}"

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
                and func.attr in ARRAY_FUNCTIONS
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


_BARRIERS = {"syncthreads", "syncthreads_count", "syncthreads_and", "syncthreads_or"}


def _called_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        func = node.func
        return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    return None


def _assigned_names(target: ast.AST) -> set[str]:
    """The variables an assignment target binds (``a``, ``a, b``), not those it only reads
    (``out[i] = ...`` binds nothing)."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, ast.Tuple | ast.List):
        return set().union(*(_assigned_names(item) for item in target.elts))
    if isinstance(target, ast.Starred):
        return _assigned_names(target.value)
    return set()


def thread_varying_names(tree: ast.AST) -> set[str]:
    """Variables whose value can differ between the threads of one block: those computed from
    ``cuda.threadIdx``, ``cuda.grid``, ``cuda.laneid`` or an atomic's return value, directly or
    through other such variables. (``blockIdx``, ``blockDim`` and arguments are the same for
    every thread of a block.)"""
    varying: set[str] = set()

    def varies(expression: ast.AST | None) -> bool:
        for node in ast.walk(expression) if expression is not None else ():
            if isinstance(node, ast.Attribute) and node.attr in ("threadIdx", "laneid"):
                return True
            if _called_name(node) in ("grid",) or (
                    isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Attribute)
                    and node.func.value.attr == "atomic"):
                return True
            if isinstance(node, ast.Name) and node.id in varying:
                return True
        return False

    while True:
        before = len(varying)
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and varies(node.value):
                for target in node.targets:
                    varying |= _assigned_names(target)
            elif isinstance(node, ast.AugAssign | ast.AnnAssign) and varies(node.value):
                varying |= _assigned_names(node.target)
            elif isinstance(node, ast.For) and varies(node.iter):
                varying |= _assigned_names(node.target)
            elif isinstance(node, ast.NamedExpr) and varies(node.value):
                varying |= _assigned_names(node.target)
        if len(varying) == before:
            return varying


def barrier_problems(kernel: KernelSource) -> list[str]:
    """Why some thread of a block might skip a barrier this kernel has, one sentence per
    problem: a ``syncthreads`` inside an ``if`` (or ``else``), inside a loop whose trip count
    depends on the thread, or after a ``return``/``break`` that only some threads take. On a
    GPU the threads that skip it never arrive (a deadlock, or undefined behaviour); the
    simulator lets them go. Barriers in loops with the same bounds for every thread
    (``for k in range(steps)``, ``while stride > 0``) are fine."""
    return [text for _, text in _barrier_findings(kernel)]


def _barrier_findings(kernel: KernelSource) -> list[tuple[str, str]]:
    """(hint, sentence) for each problem :func:`barrier_problems` names."""
    if kernel.tree is None:
        return []
    parents = {child: node for node in ast.walk(kernel.tree)
               for child in ast.iter_child_nodes(node)}
    varying = thread_varying_names(kernel.tree)

    def varies(expression: ast.AST) -> bool:
        return any(
            (isinstance(n, ast.Attribute) and n.attr in ("threadIdx", "laneid"))
            or _called_name(n) == "grid" or (isinstance(n, ast.Name) and n.id in varying)
            for n in ast.walk(expression))

    def ancestors(node):
        while node in parents:
            child, node = node, parents[node]
            yield child, node

    barriers = [node for node in kernel.walk() if _called_name(node) in _BARRIERS]
    if not barriers:
        return []
    problems: list[tuple[str, str]] = []
    for barrier in barriers:
        for child, node in ancestors(barrier):
            if isinstance(node, ast.If) and child is not node.test:
                problems.append((BARRIER_HINT, f"`{kernel.line(barrier)}` is inside "
                                               f"`{kernel.line(node)}`"))
                break
            if isinstance(node, ast.IfExp | ast.BoolOp):
                problems.append((BARRIER_HINT, f"`{kernel.line(barrier)}` is only reached by "
                                               "some threads"))
                break
            if isinstance(node, ast.While | ast.For):
                bounds = node.test if isinstance(node, ast.While) else node.iter
                if child is not bounds and varies(bounds):
                    problems.append((BARRIER_LOOP_HINT,
                                     f"`{kernel.line(barrier)}` is inside `{kernel.line(node)}`, "
                                     "whose number of iterations depends on the thread"))
                    break
    last_barrier = max(getattr(b, "lineno", 0) for b in barriers)
    loops_with_barriers = {
        node for barrier in barriers for _, node in ancestors(barrier)
        if isinstance(node, ast.For | ast.While)}
    for node in kernel.walk():
        if not isinstance(node, ast.Return | ast.Break | ast.Continue):
            continue
        branch = next((parent for _, parent in ancestors(node) if isinstance(parent, ast.If)),
                      None)
        if branch is None or not varies(branch.test):
            continue
        if isinstance(node, ast.Return) and node.lineno < last_barrier:
            problems.append((BARRIER_EXIT_HINT,
                             f"`{kernel.line(node)}` under `{kernel.line(branch)}` lets some "
                             "threads leave before a barrier that the others wait at"))
        elif not isinstance(node, ast.Return):
            loop = next((parent for _, parent in ancestors(node)
                         if isinstance(parent, ast.For | ast.While)), None)
            if loop in loops_with_barriers:
                problems.append((BARRIER_EXIT_HINT,
                                 f"`{kernel.line(node)}` under `{kernel.line(branch)}` makes "
                                 "some threads skip a barrier in the loop"))
    return list(dict.fromkeys(problems))


def start_kernel(kernel, parameter_count: int, stub_hint: str) -> KernelSource:
    """Every kernel check's first steps: is it a ``@cuda.jit`` kernel with the right number of
    arguments (:func:`kernel_source`), is it still the stub (*not attempted*, with
    ``stub_hint``), is every barrier reached by every thread (:func:`barrier_problems`), and,
    in the simulator, is it code a GPU could compile (:func:`simulator_only_code`; the kernel
    is also compiled for a real GPU by :func:`launch`)? Returns the kernel's source for closer
    looks."""
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
    barriers = _barrier_findings(source)
    if barriers:
        raise CheckFailedError(
            f"{BARRIER_IN_BRANCH}: " + "; ".join(text for _, text in barriers) + ".",
            barriers[0][0])
    return source


# --- compiling the learner's kernel for a real GPU (gpulab.exercises.compiling) ----------------


def compile_for_gpu(kernel_source, arg_types) -> str | None:
    """Compile a kernel for a real GPU the way the ``ptx`` tier does
    (:func:`gpulab.exercises.compiling.compile_verdict`): None when it compiles, else the
    compiler's text. Where it cannot be judged (no CUDA toolkit wheels, e.g. on macOS; no
    source) it answers None and the check running now gets a note saying so."""
    error, note = compile_verdict(kernel_source, arg_types)
    if note:
        add_note(note)
    return error


def _reject_what_would_not_compile(kernel, args) -> None:
    """In the simulator, compile the kernel for a real GPU with the launch's argument types and
    fail the check if it does not compile (:func:`compile_for_gpu`)."""
    if device.tier() != "sim":
        return  # on a GPU the launch compiles it for real
    try:
        types = [numba_type(value) for value in args]
    except TypeError:
        return
    error = compile_for_gpu(kernel, types)
    if error:
        said, hint = compiler_message(error)
        raise CheckFailedError(
            "your kernel runs in the simulator, which executes it as plain Python, but it does "
            f"not compile for a real GPU (sm_{COMPILE_FOR[0]}{COMPILE_FOR[1]}): {said}", hint)


# --- what a failure offers: the trace of the learner's kernel -------------------------------------


@dataclass
class _CheckState:
    """What the check running now has gathered for its result (see :func:`run_check`)."""

    notes: list[str] = field(default_factory=list)
    trace_call: str = ""
    offered: bool = False  # trace_call set by the check itself (offer_trace)


_STATE: contextvars.ContextVar[_CheckState | None] = contextvars.ContextVar(
    "gpulab_check_state", default=None)


def add_note(note: str) -> None:
    """Add a note (said on a pass too) to the result of the check running now."""
    state = _STATE.get()
    if state is not None and note not in state.notes:
        state.notes.append(note)


def trace_call_text(kernel, blocks, threads, *arguments: str) -> str:
    """``gpulab.trace(name, blocks, threads, a, b, out).draw()`` for the learner's kernel."""
    function = python_function(kernel)
    name = function.__name__ if function is not None else "my_kernel"
    if not arguments and function is not None:
        arguments = tuple(inspect.signature(function).parameters)
    return (f"gpulab.trace({name}, {blocks!r}, {threads!r}, {', '.join(arguments)}).draw()")


def offer_trace(kernel, blocks, threads, *arguments: str, note: str = "") -> None:
    """Make a failure of the check running now end with the call that traces the learner's
    kernel on a small launch: ``offer_trace(kernel, 2, 8, "x", "out")`` gives "See what your
    kernel did: gpulab.trace(my_kernel, 2, 8, x, out).draw()"; ``note`` follows it (e.g.
    "with x of 13 elements"). :func:`launch` offers a default one (2 blocks of 8 threads, or
    (2, 2) of (4, 4), the kernel's parameter names); this overrides it."""
    state = _STATE.get()
    if state is not None:
        call = trace_call_text(kernel, blocks, threads, *arguments)
        state.trace_call = call + (f"  ({note})" if note else "")
        state.offered = True


def _offer_default_trace(kernel, trial) -> None:
    state = _STATE.get()
    if state is None or state.offered:
        return
    if isinstance(trial.threads, int):
        call = trace_call_text(kernel, 2, 8)
        note = "with small NumPy arrays, e.g. 13 elements"
    else:
        call = trace_call_text(kernel, (2, 2), (4, 4))
        note = "with small NumPy arrays, e.g. 6 x 7"
    state.trace_call = f"{call}  ({note})"


def trace_trial(kernel, trial, *args, blocks=None) -> KernelTrace:
    """Trace the learner's kernel on the trial's launch (``blocks`` instead of the trial's, if
    given) with ``args`` (NumPy or device arrays and scalars; arrays are copied), for checks
    that judge the method: e.g. ``trace_trial(kernel, trial, A, B, C).max_per_thread(
    "global_reads")`` for the tiled matmul's loads per thread, or ``.per_block("atomics")`` for
    a block sum. Keep the trial small: every access is recorded. See
    :class:`gpulab.instruments.KernelTrace`; ``.draw()`` works (gpulab.plots is loaded)."""
    import gpulab.plots  # noqa: F401 - registers KernelTrace.draw

    return trace_kernel(kernel, trial.blocks if blocks is None else blocks, trial.threads, *args)


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


def run_elementwise(kernel, trial: Trial, *inputs, fill=0, what: str = "out",
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


def launch(kernel, trial: Trial, *args, index_hint: str = GUARD_HINT, blocks=None) -> None:
    """Launch the learner's kernel on the trial's grid (``blocks`` blocks instead, if given) and
    wait for it; anything it raises (or a compile error) becomes a :class:`KernelError` that
    knows the trial, for :func:`explain_exception`.

    In the simulator the kernel is first compiled for a real GPU with these arguments' types
    (once per kernel and types: :func:`compile_for_gpu`), and what would not compile fails the
    check (:class:`CheckFailedError`) before anything runs. Shared memory starts poisoned
    (:func:`gpulab.instruments.poisoned_shared_memory`), so reading a shared slot before a
    barrier made it written gives a wrong answer every time, as it can on a GPU.

    A kernel that does not finish fails instead of hanging: in the simulator each thread gets a
    budget of array accesses and barriers (:func:`gpulab.instruments.limited`) and the launch a
    wall-clock limit (:data:`TIME_LIMIT_S`); on a GPU the launch is polled up to its limit.
    A failure after this point offers the learner a trace of the kernel (:func:`offer_trace`).
    """
    from numba import cuda

    _reject_what_would_not_compile(kernel, args)
    _offer_default_trace(kernel, trial)
    grid = trial.blocks if blocks is None else blocks
    try:
        if device.tier() == "sim":
            budget = access_budget(*args, factor=4, minimum=1_000)
            barriers = 1_000 + sum(int(getattr(a, "size", 0) or 0) for a in args
                                   if hasattr(a, "shape"))
            with ExitStack() as stack:
                stack.enter_context(poisoned_shared_memory())
                stack.enter_context(limited(budget, barriers, TIME_LIMIT_S["sim"]))
                launchable(kernel)[grid, trial.threads](*args)
        else:
            launchable(kernel)[grid, trial.threads](*args)
            _wait_for_gpu(TIME_LIMIT_S["gpu"])
        cuda.synchronize()
    except Exception as exc:  # the learner's code: any error is something to explain
        raise KernelError(exc, trial, index_hint) from exc


def _wait_for_gpu(seconds: float) -> None:
    """Wait for the GPU to finish what was launched, at most ``seconds``; then raise
    :class:`~gpulab.instruments.KernelDidNotFinishError`."""
    from numba import cuda

    done = cuda.event()
    done.record()
    deadline = time.monotonic() + seconds
    pause = 1e-4
    while not done.query():
        if time.monotonic() > deadline:
            raise KernelDidNotFinishError(
                f"it was still running after {seconds:g} s. The GPU is still busy with it: "
                "restart the notebook's kernel (Kernel → Restart) before running more cells.")
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


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
            "each thread should write its own element of out; check that the guard lets the "
            "threads inside the array in (the comparison's direction).",
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
                "the guard is too strict: it must stop only the threads whose index is n or "
                "more (the last block still has real elements before n).",
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


def matches(value: float, target, tolerance: float) -> bool:
    """True when ``value`` is within ``tolerance`` of ``target`` (of any element, if an array)."""
    if not np.isfinite(value):
        return False
    difference = np.abs(np.asarray(target, dtype=np.float64) - float(value))
    return bool(np.any(difference <= tolerance))


def diagnose_matrix(expected: np.ndarray, got: np.ndarray, trial: Trial,
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
            hint = ("only the first block's elements were written: each thread needs its "
                    "global indices, not `cuda.threadIdx` alone. " + GRID_2D_HINT)
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


def _thread_named(prefix: re.Match, trial: Trial) -> str:
    """'thread 3 of block 1 (global index 67)', or for a 2-D launch
    'thread (x=3, y=5) of block (x=1, y=0)'."""
    tx, ty, _, bx, by, _ = map(int, prefix.groups())
    if isinstance(trial.threads, int):
        return (f"thread {tx} of block {bx} "
                f"(global index {bx * trial.threads + tx})")
    return f"thread (x={tx}, y={ty}) of block (x={bx}, y={by})"


def explain_exception(error: KernelError, trial: Trial,
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
    if isinstance(cause, KernelDidNotFinishError):
        detail = (text.replace(": a loop that never ends?", "")
                  or f"it ran for more than {TIME_LIMIT_S[device.tier()]:g} s")
        follower = "stopped with another thread: "
        if detail.startswith(follower):  # the thread named is not the one that looped
            where, detail = "", detail[len(follower):]
        who = f" ({where}: {detail})" if where else f" ({detail})"
        return FAILED, f"{DID_NOT_FINISH}{who} ({trial}).", DID_NOT_FINISH_HINT
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


# The exercises whose check has passed in this process (a notebook's kernel): what
# :func:`gpulab.exercises.reveal.compare_yours` asks before it shows gpulab's version.
_PASSED_EXERCISES: set[str] = set()


def has_passed(exercise: str) -> bool:
    """Has the check of ``exercise`` (its name, as results say it) passed in this process?"""
    return exercise in _PASSED_EXERCISES


def run_check(exercise: str, body: Callable[[int], str], seed: int | None = None,
              show: bool = True) -> CheckResult:
    """Run ``body(seed)`` and turn whatever happens into a printed, returned CheckResult.

    ``body`` returns the message for a pass, or raises :class:`CheckFailedError`,
    :class:`NotAttemptedError` or :class:`KernelError` (carrying a :class:`Trial` in ``.trial``).
    """
    seed = new_seed() if seed is None else int(seed)
    state = _CheckState()
    token = _STATE.set(state)
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
    finally:
        _STATE.reset(token)
    result.notes = list(state.notes)
    if result.passed:
        _PASSED_EXERCISES.add(exercise)
    timed_out = isinstance(result.exception, KernelDidNotFinishError)
    if result.status == FAILED and not timed_out:
        result.trace_call = state.trace_call
    if show:
        print(result)
    return result


# --- what the 2-D kernel checks share (chapters 05, 06, 07) ------------------------------------

# The activations the 2-D exercises handle (chapters 05 and 06).
IDENTITY, RELU, TANH = (ACTIVATION_CODES[name] for name in ("identity", "relu", "tanh"))
# As (code, reference name, how to say it):
SAID = {"relu": "ReLU", "tanh": "tanh", "identity": "identity"}  # names as the text says them
ACTIVATIONS = ((RELU, "relu", "ReLU"), (TANH, "tanh", "tanh"), (IDENTITY, "identity",
                                                                  "identity"))


PAD_VALUE = 100.0  # beyond the edges of the inputs (seen only by a kernel without guards)
GENERIC_MATRIX_HINT = "compare your formula with the exercise's."  # diagnose_matrix's last word


def hard_coded_block(source: KernelSource) -> str | None:
    """The first line that multiplies ``cuda.blockIdx`` by a number (a hard-coded block size)."""
    for node in source.walk():
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            sides = (node.left, node.right)
            if (any("blockIdx" in ast.dump(side) for side in sides)
                    and any(isinstance(side, ast.Constant) for side in sides)):
                return source.line(node)
    return None


def blame_hard_coded_block(source: KernelSource, trial: Trial, error: Exception) -> None:
    """If the kernel hard-codes the block size, make the failure ``error`` say so."""
    line = hard_coded_block(source)
    if line:
        hint = (f"`{line}` hard-codes the block size, but this launch's blocks have "
                f"{trial.block[0]} x {trial.block[1]} threads: use `cuda.grid(2)` (or "
                "`cuda.blockDim.x` and `.y`) so that the kernel works for any block.")
        if isinstance(error, KernelError):
            error.index_hint = hint
        else:
            error.hint = hint


def compares_with_shape(source: KernelSource) -> list[ast.Compare]:
    """The comparisons in the kernel that involve an array's ``.shape``: its guards."""
    return [node for node in source.walk() if isinstance(node, ast.Compare)
            and any(isinstance(n, ast.Attribute) and n.attr == "shape" for n in ast.walk(node))]


def index_hint_2d(source: KernelSource, rows: int, cols: int, first: str = "Z") -> str:
    """The hint for an index past an edge of a 2-D launch, from what the kernel's guard is."""
    guards = compares_with_shape(source)
    if source.tree is not None and not guards:
        return "your kernel has no guard: " + GUARD_2D_HINT
    if any(isinstance(op, (ast.LtE, ast.GtE)) for node in guards for op in node.ops):
        return ("a guard with `<=` lets through the thread whose index equals the size, one "
                f"past the end of {first}: the last valid index is one less than the size.")
    return (f"{first} has {rows} rows and {cols} columns here. Check that the row index goes "
            f"with `.shape[0]` and first in `{first}[r, c]`, the column index with `.shape[1]`, "
            "and that the first value `cuda.grid(2)` gives (x) is the column; then "
            + GUARD_2D_HINT)


def coverage_failure(unwritten: np.ndarray, trial: Trial, what: str) -> CheckFailedError | None:
    """A specific diagnosis when the elements never written form a known pattern: r and c
    swapped, or the last row and column skipped; None otherwise."""
    rows, cols = trial.rows, trial.cols
    if not unwritten.any():
        return None
    grid_x = trial.blocks[0] * trial.block[0]
    grid_y = trial.blocks[1] * trial.block[1]
    r, c = np.indices((rows, cols))
    if np.array_equal(unwritten, ~((r < grid_x) & (c < grid_y))):
        return CheckFailedError(
            f"{int(unwritten.sum())} of {unwritten.size} elements of {what} were never written, "
            f"exactly those a kernel with rows and columns swapped misses: the grid has "
            f"{grid_x} threads along x for the {cols} columns and {grid_y} along y for the "
            f"{rows} rows ({trial}).",
            "`cuda.grid(2)` returns x first, and x runs along the columns: the first value it "
            "gives is the column index, the second the row index.")
    edge = (r == rows - 1) | (c == cols - 1)
    for skipped, words in ((edge, "the last row and the last column"),
                           (r == rows - 1, "the last row"), (c == cols - 1, "the last column")):
        if np.array_equal(unwritten, skipped):
            return CheckFailedError(
                f"{words} of {what} were never written ({trial}).",
                f"the guard is one short: the last row's index is one less than {what}'s "
                "number of rows, and it must still pass the guard (likewise for the columns).")
    return None


def run_2d(kernel, trial: Trial, source: KernelSource, inputs: dict, what: str = "out"
           ) -> np.ndarray:
    """Launch ``kernel(*inputs.values(), out)`` on the trial's grid and return ``out`` (NaN where
    never written). Array inputs go in as views of padded buffers; the check fails if the kernel
    wrote into an input (or its padding) or past the edges of ``out``."""
    hint = index_hint_2d(source, trial.rows, trial.cols, next(iter(inputs)))
    buffers, args = {}, []
    for name, value in inputs.items():
        if isinstance(value, np.ndarray):
            d_all, d_view = padded(value, trial.padding, PAD_VALUE)
            buffers[name] = (d_all, d_all.copy_to_host())
            args.append(d_view)
        else:
            args.append(value)
    d_out_all, d_out = padded(np.full(trial.extents, np.nan, trial.dtype), trial.padding,
                              np.nan)
    launch(kernel, trial, *args, d_out, index_hint=hint)
    for name, (d_all, before) in buffers.items():
        changed_input_failure(name, before, d_all.copy_to_host(), what, trial)
    return read_back(d_out_all, trial.extents, trial, what=what, hint=hint)


def check_matrix_output(kernel, trial: Trial, source: KernelSource, inputs: dict,
                        expected: np.ndarray, patterns: dict, hint: str,
                        what: str = "out") -> None:
    """One trial of a 2-D kernel with one thread per element of ``what``: run it
    (:func:`run_2d`), diagnose elements never written (:func:`coverage_failure`) and wrong
    values against ``expected`` and the usual mistakes in ``patterns``
    (:func:`diagnose_matrix`, to 1e-5 relative, 1e-6 absolute). A failure whose hint is only the
    generic one gets the exercise's ``hint``, and says so if the kernel hard-codes the block
    size (:func:`blame_hard_coded_block`)."""
    try:
        out = run_2d(kernel, trial, source, inputs, what=what)
        failure = coverage_failure(np.isnan(out), trial, what)
        if failure:
            raise failure
        diagnose_matrix(expected, out, trial, patterns, rtol=1e-5, atol=1e-6, what=what)
    except (CheckFailedError, KernelError) as error:
        if getattr(error, "hint", None) == GENERIC_MATRIX_HINT:
            error.hint = hint
        blame_hard_coded_block(source, trial, error)
        raise


def changed_input_failure(name: str, before: np.ndarray, after: np.ndarray, what: str,
                          where) -> None:
    """Raise CheckFailedError if the kernel changed the input ``name``."""
    changed = ~((before == after) | (np.isnan(before) & np.isnan(after)))
    if changed.any():
        index = tuple(int(i) for i in np.argwhere(changed)[0])
        at = ", ".join(map(str, index))
        raise CheckFailedError(
            f"your kernel wrote into its input {name}: {name}[{at}] was {before[index]:.6g} and "
            f"is now {after[index]:.6g} ({where}).",
            f"write the result into {what} only and leave {name} as it is: the layer still "
            f"needs {name} afterwards (the backward pass reads it), and the caller's copy is "
            "not yours to change.")


# --- the learner's host code (chapters 00 and 02) -----------------------------------------------


@dataclass
class HostLaunch:
    """One launch the learner's host code made: its grid, and which arguments were NumPy
    arrays (Numba copies each of those to the device before the launch and back after it)."""

    blocks: object
    threads: object
    numpy_arguments: tuple[int, ...]
    dtypes: tuple = ()  # each argument's dtype (None for a scalar without one)

    @property
    def total_threads(self) -> int:
        def product(value) -> int:
            return math.prod(value) if isinstance(value, tuple) else int(value)

        return product(self.blocks) * product(self.threads)

    @property
    def threads_per_block(self) -> int:
        return math.prod(self.threads) if isinstance(self.threads, tuple) else int(self.threads)


@dataclass
class HostCodeWatch:
    """What :func:`watch_host_code` saw, in order: ``events`` holds ``(kind, detail)`` pairs,
    kind one of ``"to_device"``, ``"allocate"`` (detail: the shape), ``"launch"`` (detail: a
    :class:`HostLaunch`), ``"synchronize"``, ``"copy_to_host"`` (detail: the shape), ``"clock"``
    (a wall-clock read: detail ``(name, seconds)``, or ``("event", None)`` for a CUDA event's
    ``record()``), ``"cpu_clock"`` (``time.process_time`` and the like: CPU time, which stops
    while the CPU waits for the GPU), ``"elapsed"`` (an event's ``elapsed_time``: detail the
    seconds it gave). The copies
    Numba makes itself for NumPy arguments are not events: they show in
    :attr:`HostLaunch.numpy_arguments`."""

    events: list = field(default_factory=list)
    launching: bool = False

    def count(self, kind: str) -> int:
        return sum(1 for event, _ in self.events if event == kind)

    @property
    def launches(self) -> list[HostLaunch]:
        return [detail for event, detail in self.events if event == "launch"]

    def positions(self, kind: str) -> list[int]:
        """Where in :attr:`events` the events of ``kind`` are."""
        return [k for k, (event, _) in enumerate(self.events) if event == kind]

    def after_last_launch(self, kind: str) -> bool:
        """True when an event of ``kind`` follows the last launch."""
        kinds = [event for event, _ in self.events]
        if "launch" not in kinds:
            return False
        last = len(kinds) - 1 - kinds[::-1].index("launch")
        return kind in kinds[last + 1:]

    def spy(self, kernel) -> KernelSpy:
        """A stand-in for ``kernel`` that records each launch, then launches the real kernel."""
        return KernelSpy(launchable(kernel), self)


class KernelSpy:
    """``spy[blocks, threads](*args)`` records a :class:`HostLaunch` and launches the kernel it
    stands for; any other attribute is the kernel's."""

    def __init__(self, kernel, watch: HostCodeWatch):
        self.kernel, self.watch = kernel, watch

    def __getitem__(self, configuration):
        configuration = configuration if isinstance(configuration, tuple) else (configuration,)

        def launch(*args):
            numpy_arguments = tuple(k for k, value in enumerate(args)
                                    if isinstance(value, np.ndarray) and value.ndim > 0)
            blocks, threads = (configuration + (None, None))[:2]
            dtypes = tuple(getattr(value, "dtype", None) for value in args)
            self.watch.events.append(("launch", HostLaunch(blocks, threads, numpy_arguments,
                                                           dtypes)))
            self.watch.launching = True
            try:
                return self.kernel[configuration](*args)
            finally:
                self.watch.launching = False

        return launch

    def __getattr__(self, name):
        return getattr(self.kernel, name)


# The clocks of the `time` module a host-code check records: wall clocks (seconds; the _ns ones
# in nanoseconds), and CPU-time clocks, which do not tick while the CPU waits for the GPU.
WALL_CLOCKS = ("perf_counter", "perf_counter_ns", "time", "time_ns", "monotonic",
               "monotonic_ns")
CPU_CLOCKS = ("process_time", "process_time_ns", "thread_time", "thread_time_ns")


def _recorded_clock(watch: HostCodeWatch, name: str, original, owner_thread: int):
    kind = "cpu_clock" if name in CPU_CLOCKS else "clock"

    def recorded(*args, **kwargs):
        value = original(*args, **kwargs)
        if not watch.launching and threading.get_ident() == owner_thread:
            seconds = value / 1e9 if name.endswith("_ns") else value
            watch.events.append((kind, (name, float(seconds))))
        return value

    return recorded


def _patch_events(watch: HostCodeWatch, owner_thread: int, patched: list) -> None:
    """Record CUDA events' ``record`` (a ``"clock"`` event), ``synchronize`` and
    ``elapsed_time``. The simulator's events keep no time (``elapsed_time`` is -1): there it
    gives the host time between the two records, as the simulator runs launches synchronously."""
    import time

    from numba import cuda

    event_class = type(cuda.event())
    host_clock = time.perf_counter  # called before the clocks are replaced by recording ones
    recorded_at: dict[int, float] = {}
    originals = {name: getattr(event_class, name)
                 for name in ("record", "synchronize", "elapsed_time")}
    mine = lambda: not watch.launching and threading.get_ident() == owner_thread  # noqa: E731

    def record(self, *args, **kwargs):
        if mine():
            watch.events.append(("clock", ("event", None)))
        recorded_at[id(self)] = host_clock()
        return originals["record"](self, *args, **kwargs)

    def synchronize(self, *args, **kwargs):
        if mine():
            watch.events.append(("synchronize", None))
        return originals["synchronize"](self, *args, **kwargs)

    def elapsed_time(self, other, *args, **kwargs):
        ms = originals["elapsed_time"](self, other, *args, **kwargs)
        if device.tier() == "sim" and id(self) in recorded_at and id(other) in recorded_at:
            ms = (recorded_at[id(other)] - recorded_at[id(self)]) * 1e3
        if mine():
            watch.events.append(("elapsed", float(ms) / 1e3))
        return ms

    for name, replacement in (("record", record), ("synchronize", synchronize),
                              ("elapsed_time", elapsed_time)):
        patched.append((event_class, name, originals[name]))
        setattr(event_class, name, replacement)


@contextmanager
def watch_host_code(function=None, kernels=()) -> Iterator[HostCodeWatch]:
    """Within this block, record what the learner's host code does: ``cuda.to_device``,
    ``cuda.device_array`` / ``cuda.device_array_like``, ``cuda.synchronize``, device arrays'
    ``copy_to_host``, clock reads (:data:`WALL_CLOCKS`, :data:`CPU_CLOCKS`, however imported:
    ``from time import perf_counter`` is rebound in ``function``'s globals too), CUDA events'
    records and waits, and every launch of one of ``kernels`` made through a global name of
    ``function`` (bound to a :class:`KernelSpy` meanwhile). Only calls from the thread that
    entered the block count, and none made by Numba during a launch. Everything is restored on
    exit. Numba's own functions still do the work, so it behaves the same in both tiers."""
    import time

    from numba import cuda

    watch = HostCodeWatch()
    owner_thread = threading.get_ident()
    patched: list[tuple[object, str, object]] = []

    def patch(owner, name, kind, with_shape=True):
        original = getattr(owner, name)

        def recorded(*args, **kwargs):
            if not watch.launching and threading.get_ident() == owner_thread:
                detail = getattr(args[0], "shape", args[0]) if with_shape and args else None
                watch.events.append((kind, detail))
            return original(*args, **kwargs)

        patched.append((owner, name, original))
        setattr(owner, name, recorded)

    array_type = type(cuda.device_array(1))
    array_class = next(k for k in array_type.__mro__ if "copy_to_host" in vars(k))
    namespace = getattr(function, "__globals__", {})
    rebound: list[tuple[str, object]] = []
    try:
        patch(cuda, "to_device", "to_device")
        patch(cuda, "device_array", "allocate")
        patch(cuda, "device_array_like", "allocate")
        patch(cuda, "synchronize", "synchronize", with_shape=False)
        patch(array_class, "copy_to_host", "copy_to_host")  # args[0] is the device array
        _patch_events(watch, owner_thread, patched)
        clocks = {name: getattr(time, name) for name in WALL_CLOCKS + CPU_CLOCKS
                  if hasattr(time, name)}
        for name, original in clocks.items():
            setattr(time, name, _recorded_clock(watch, name, original, owner_thread))
            patched.append((time, name, original))
        for name, value in list(namespace.items()):  # `from time import perf_counter as pc`
            for clock, original in clocks.items():
                if value is original:
                    rebound.append((name, value))
                    namespace[name] = getattr(time, clock)
        targets = [launchable(kernel) for kernel in kernels]
        for name, value in list(namespace.items()):
            if any(value is kernel or value is target
                   for kernel, target in zip(kernels, targets, strict=True)):
                rebound.append((name, value))
                namespace[name] = watch.spy(value)
        yield watch
    finally:
        for name, value in rebound:
            namespace[name] = value
        for owner, name, original in reversed(patched):
            setattr(owner, name, original)


__all__ = [
    "BARRIER_EXIT_HINT", "BARRIER_HINT", "BARRIER_IN_BRANCH", "BARRIER_LOOP_HINT",
    "COMPILE_FOR", "CPU_CLOCKS", "DID_NOT_FINISH", "DID_NOT_FINISH_HINT", "WALL_CLOCKS",
    "FAILED", "GLOBAL_INDEX_HINT", "GRID_2D_HINT", "GUARD_2D_HINT", "GUARD_HINT",
    "NOT_ATTEMPTED", "PASSED", "SIMULATOR_ONLY_HINT", "TIME_LIMIT_S", "CheckFailedError",
    "CheckResult", "KernelError", "KernelSource", "NotAttemptedError",
    "SIZE_RANGE", "add_note", "barrier_problems", "call_learner",
    "compile_for_gpu", "compiler_message", "count_calls",
    "describe_launch", "diagnose_matrix", "diagnose_vector", "draw_size",
    "explain_exception", "has_passed", "kernel_source", "launch", "new_seed", "numba_type",
    "offer_trace",
    "padded", "plain_writes_to", "raises_not_implemented", "read_back", "run_check",
    "run_elementwise", "simulator_only_code", "start_kernel", "thread_varying_names",
    "trace_call_text", "trace_trial",
    "PAD_VALUE",
    "GENERIC_MATRIX_HINT",
    "check_matrix_output",
    "hard_coded_block",
    "blame_hard_coded_block",
    "compares_with_shape",
    "index_hint_2d",
    "coverage_failure",
    "run_2d",
    "changed_input_failure",
    "HostLaunch",
    "HostCodeWatch",
    "KernelSpy",
    "watch_host_code",
    "IDENTITY",
    "RELU",
    "TANH",
    "SAID",
    "ACTIVATIONS",
]
