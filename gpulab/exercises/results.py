"""What a check says, and how it is run: a :class:`CheckResult` (passed, not attempted,
failed) with its message, hint, seed and notes; the exceptions a check's body raises
(:class:`CheckFailedError`, :class:`NotAttemptedError`, :class:`KernelError`); the advice an
exception of the learner's kernel becomes (:func:`explain_exception`); and :func:`run_check`,
which runs a check's body and never raises: whatever goes wrong (a stub, an index past the end
of an array, a kernel that does not compile, a wrong answer) becomes a result that says, in
plain words, what happened and what usually causes it. The result is printed (so the learner
sees it) and returned (so a solution notebook can ``assert result.passed``).

While a check runs, it gathers notes for its result (:func:`add_note`, e.g. that the kernel was
not compiled for a real GPU here) and the call that traces the learner's kernel, which a
failure ends with (:func:`offer_trace`, :attr:`CheckResult.trace_call`). The hints that several
checks give (:data:`GUARD_HINT`, :data:`GLOBAL_INDEX_HINT`, ...) live here too.
"""

from __future__ import annotations

import contextvars
import inspect
import os
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

from gpulab import device
from gpulab.exercises.compiling import SIMULATOR_ONLY_HINT
from gpulab.exercises.trial import Trial
from gpulab.instruments import KernelDidNotFinishError, python_function

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


# --- what the check running now gathers: notes, the trace a failure offers --------------------


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


def offer_trace(kernel, blocks, threads, *arguments: str, note: str = "",
                default: bool = False) -> None:
    """Make a failure of the check running now end with the call that traces the learner's
    kernel on a small launch: ``offer_trace(kernel, 2, 8, "x", "out")`` gives "See what your
    kernel did: gpulab.trace(my_kernel, 2, 8, x, out).draw()"; ``note`` follows it (e.g.
    "with x of 13 elements"). :func:`gpulab.exercises.running.launch` offers a ``default``
    one (2 blocks of 8 threads, or (2, 2) of (4, 4), the kernel's parameter names), which
    never overrides one the check offered itself."""
    state = _STATE.get()
    if state is None or (default and state.offered):
        return
    call = trace_call_text(kernel, blocks, threads, *arguments)
    state.trace_call = call + (f"  ({note})" if note else "")
    state.offered = not default


# --- turning errors into advice ---------------------------------------------------------------


# The simulator starts an exception raised in a kernel with the thread's and block's indices.
_SIM_PREFIX = re.compile(
    r"tid=\[(\d+), (\d+), (\d+)\] ctaid=\[(\d+), (\d+), (\d+)\]:?\s*")


_OUT_OF_BOUNDS = re.compile(r"index (-?\d+) is out of bounds for axis (\d+) with size (\d+)")


def _overrun_axis(cause: BaseException, index: int, axis: int, size: int) -> str:
    """'dZ has shape (5, 13): ...' when an array parameter of the learner's kernel (or device
    function: the innermost frame outside gpulab with one) has ``size`` on ``axis`` and the
    index fits another of its axes, a bound taken from the wrong axis or array; 'one past the
    end of axis 1 (13 elements) of B or C: ...' when the index is exactly ``size`` (a `<=`
    guard, or an access no guard covers), after the first when both may be; 'b1 has 9 elements
    on axis 0, and the index was 29: ...' when the index is past the end of such an array
    and fits none of its axes (another loop's variable); else ''."""
    traceback, found, ours = cause.__traceback__, "", os.path.dirname(device.__file__) + os.sep
    just_past: list[str] = []  # the arrays whose axis ``axis`` has ``size`` elements
    fitting: list[str] = []  # those the index fits on another axis
    while traceback is not None:
        frame = traceback.tb_frame
        for name in frame.f_code.co_varnames[:frame.f_code.co_argcount]:
            shape = tuple(int(n) for n in getattr(frame.f_locals.get(name), "shape", ()))
            if (name == "self" or axis >= len(shape) or shape[axis] != size
                    or frame.f_code.co_filename.startswith(ours)):
                continue
            just_past = [*just_past, name] if name not in just_past else just_past
            other = [a for a, n in enumerate(shape) if a != axis and 0 <= index < n]
            if other:
                fitting.append(name)
                found = (f"{name} has shape {shape}: the index ran past its axis {axis} "
                         f"({size}) but fits its axis {other[0]} ({shape[other[0]]}): a bound "
                         "taken from another axis or array?")
        traceback = traceback.tb_next
    others = [name for name in just_past if name not in fitting]
    if found and others:  # e.g. labels[c] with c a column: labels has the rows' count too
        found += (f" Or the index went into {' or '.join(others)}, whose axis {axis} also has "
                  f"{size} elements: an index meant for another array?")
    if index == size and just_past:  # one past the end: the usual `<=`, or a write unguarded
        past = (f"one past the end of axis {axis} ({size} elements) of "
                f"{' or '.join(just_past)}: a `<=` where `<` belongs, or an access the guard "
                "does not cover?")
        return f"{found} Or {past}" if found else past
    if not found and just_past:  # well past the end of a small array, fitting none of its axes
        return (f"{' or '.join(just_past)} has {size} elements on axis {axis}, and the index "
                f"was {index}: an index meant for another array, or another loop's variable?")
    return found


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
        hint = DID_NOT_FINISH_HINT
        if "array accesses" in detail:  # a budget per thread: also what one thread doing all does
            detail = (detail.replace("many more than the arrays hold",
                                     "more than this launch should need")
                      + "; or one thread doing the work of many (every element, or every "
                        "sample, in one thread's loop)")
            hint += " And each thread takes its own share of the work, not everyone's."
        who = f" ({where}: {detail})" if where else f" ({detail})"
        return FAILED, f"{DID_NOT_FINISH}{who} ({trial}).", hint
    if isinstance(cause, IndexError):
        bounds = _OUT_OF_BOUNDS.search(text)
        detail = (
            f"used index {bounds.group(1)} on an array of {bounds.group(3)} elements"
            if bounds else f"raised IndexError ({text})"
        )
        overrun = bounds and _overrun_axis(cause, *map(int, bounds.groups()))
        if overrun:
            detail += f" ({overrun})"
        elif bounds and int(bounds.group(3)) not in trial.extents:
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
    missing = re.search(r"FakeCUDA\w*'? object has no attribute '(\w+)'", text)
    if isinstance(cause, AttributeError) and missing:
        return FAILED, (
            f"your kernel calls `cuda.{missing.group(1)}`{who}, which Numba's CUDA simulator "
            "(where this check runs, without a GPU) does not have: the simulator cannot run "
            "the kernel, so the check cannot judge it here. That is the simulator's gap, not "
            f"necessarily a mistake of yours ({trial})."), (
            f"in the simulator, write it with what the chapter uses (shared memory and "
            f"`cuda.syncthreads()` for a block's reduction, atomics); on a machine with a GPU "
            f"the check runs your kernel with `cuda.{missing.group(1)}` as it is.")
    return FAILED, f"your kernel stopped with {type(cause).__name__}{who}: {text} ({trial}).", hint


# --- running a check --------------------------------------------------------------------------


def new_seed() -> int:
    """A fresh seed for one check, small enough to type back in."""
    return secrets.randbelow(2**31)


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


__all__ = [
    "DID_NOT_FINISH", "DID_NOT_FINISH_HINT", "FAILED", "GLOBAL_INDEX_HINT", "GRID_2D_HINT",
    "GUARD_2D_HINT", "GUARD_HINT", "NOT_ATTEMPTED", "PASSED", "READ_THE_ERROR_HINT", "STATUSES",
    "STUB_MESSAGE", "TIME_LIMIT_S", "add_note", "CheckFailedError", "CheckResult",
    "explain_exception", "has_passed", "KernelError", "new_seed", "NotAttemptedError",
    "offer_trace", "run_check", "trace_call_text"
]
