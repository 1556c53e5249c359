"""What a learner sees around an exercise, before and after the check.

- :func:`compare_yours` shows gpulab's version of an exercise (a kernel's source, a function's
  source) only once the learner's check for it has passed in this Python process — a notebook
  run with "Run All" over unwritten stubs shows one line saying how to see it, never the answer.
  ``compare_yours(ch01.MULTIPLY, "elementwise_multiply")`` (a check spec, or its exercise name;
  then gpulab kernel names or Python objects). A dashboard, which has no exercises, shows them
  (:func:`show_gpulabs_versions`).
- :func:`try_it` wraps a try-it cell: an unwritten stub prints "not written yet"; any other
  error prints a short paragraph (what went wrong in plain words, the line of the learner's code
  it happened in, the thread in the simulator) instead of the simulator's 60-line traceback;
  :func:`full_traceback` prints the whole traceback of the last one. In the simulator a kernel
  that never finishes is stopped after a time limit, so "Run All" goes on to the check.
"""

from __future__ import annotations

import inspect
import linecache
import sys
import sysconfig
import traceback
from contextlib import contextmanager, nullcontext
from pathlib import Path

from gpulab import device
from gpulab.exercises.results import TIME_LIMIT_S, CheckResult, has_passed
from gpulab.instruments import KernelDidNotFinishError, limited, simulator_thread
from gpulab.kernels.registry import kernel_spec

NOT_WRITTEN = "not written yet"
MAX_LINE_CHARS = 200  # a longer error text is cut: the full one is a call away
_PACKAGE = Path(__file__).resolve().parents[1]
_LIBRARY_DIRS = tuple({str(Path(p).resolve()) for p in (
    sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"],
    sysconfig.get_paths()["platlib"], sys.prefix, sys.base_prefix)})
_last_error: list[BaseException] = []
# Set by a chapter's dashboard (gpulab.dashboard), which leaves the exercises out: there is no
# attempt to wait for, so gpulab's versions are shown as the chapter's lesson.
_show_always = [False]


def show_gpulabs_versions() -> None:
    """From now on, :func:`compare_yours` shows gpulab's versions without waiting for a check:
    for a notebook without exercises (a dashboard)."""
    _show_always[0] = True


def _exercise_name(exercise) -> str:
    if isinstance(exercise, str):
        return exercise
    if isinstance(exercise, CheckResult):
        return exercise.exercise
    name = getattr(exercise, "exercise", None)  # a CheckSpec
    if isinstance(name, str):
        return name
    raise TypeError("compare_yours takes the check's spec (e.g. ch01.MULTIPLY), its result or "
                    f"its exercise name, not {type(exercise).__name__}")


def _how_to_show(thing) -> str:
    if isinstance(thing, str):
        return f'print(gpulab.kernel_source("{thing}"))'
    module = getattr(thing, "__module__", None) or "…"
    name = getattr(thing, "__qualname__", None) or getattr(thing, "__name__", repr(thing))
    return f"print(inspect.getsource({module}.{name}))"


def _source(thing) -> str:
    if isinstance(thing, str):
        return kernel_spec(thing).source
    return inspect.getsource(getattr(thing, "py_func", thing))


def compare_yours(exercise, *shown) -> bool:
    """Print the sources of ``shown`` (gpulab kernel names, or functions and classes) if the
    check of ``exercise`` (a :class:`~gpulab.exercises.spec.CheckSpec`, a
    :class:`~gpulab.exercises.results.CheckResult` or the exercise's name) has passed in this
    process; otherwise print one line that says how to see them now. Returns whether it showed
    them."""
    if not shown:
        raise TypeError("compare_yours needs at least one kernel name or function to show")
    name = _exercise_name(exercise)
    if _show_always[0] or has_passed(name):
        for thing in shown:
            print(_source(thing))
        return True
    calls = "; ".join(_how_to_show(thing) for thing in shown)
    print(f"gpulab's version appears here once your check of '{name}' above has passed "
          f"(to see it before that: {calls}).")
    return False


def _is_learner_file(filename: str) -> bool:
    """A notebook cell or a script of the learner's: not Python's, not an installed package's,
    not gpulab's own."""
    if filename.startswith("<") and not filename.startswith("<ipython-input"):
        return False
    try:
        path = str(Path(filename).resolve())
    except (OSError, ValueError):
        return False
    return not (path.startswith(_LIBRARY_DIRS) or path.startswith(str(_PACKAGE)))


def _learner_line(error: BaseException) -> str | None:
    """'line N: <code>' of the deepest frame in the learner's own code, if any."""
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if _is_learner_file(f.filename)]
    if not frames:
        return None
    frame = frames[-1]
    code = (frame.line or linecache.getline(frame.filename, frame.lineno)).strip()
    where = f"in `{frame.name}`, " if frame.name not in ("<module>", "") else ""
    return f"{where}line {frame.lineno}: {code}" if code else f"{where}line {frame.lineno}"


def short_failure(error: BaseException) -> str:
    """A few plain lines about an error a try-it cell raised."""
    text = str(error)
    where, text = simulator_thread(text)
    text = text.strip().splitlines()[0] if text.strip() else ""
    if len(text) > MAX_LINE_CHARS:
        text = text[:MAX_LINE_CHARS] + " …"
    kind = type(error).__name__
    lines = [f"Your code stopped with {kind}" + (f": {text}" if text else "") + "."]
    line = _learner_line(error)
    if line:
        lines.append(f"  where: {line}")
    if where:
        lines.append(f"  who:   {where} (the simulator runs each thread in turn and stops at "
                     "the first error)")
    if isinstance(error, IndexError):
        lines.append("  An index past the end of an array: is every thread's index guarded "
                     "against the array's length?")
    if isinstance(error, KernelDidNotFinishError):
        lines.append("  The kernel was stopped: it ran past the time limit. A loop that never "
                     "ends? (a step that is 0 for some thread, a halving that never halves)")
    lines.append("  The check below tells you more; the whole traceback: "
                 "gpulab.exercises.reveal.full_traceback()")
    return "\n".join(lines)


# A try-it cell's whole body is timed, a first compile for a real GPU (up to the compiler's
# 120 s) included: five times the checks' limit for a launch, to stop a hang, never a slow cell.
TRY_IT_LIMIT_S = 5 * TIME_LIMIT_S["sim"]


@contextmanager
def try_it(not_written: str = NOT_WRITTEN, seconds: float = TRY_IT_LIMIT_S):
    """Run a try-it cell's body: a stub's NotImplementedError prints ``not_written``; any other
    exception prints :func:`short_failure` (at most 7 lines) and is kept for
    :func:`full_traceback`. The cell itself does not fail, so "Run All" goes on to the check.

    In the simulator the body runs under :func:`~gpulab.instruments.limited`'s wall-clock limit
    of ``seconds`` (:data:`TRY_IT_LIMIT_S`): a kernel still running then is stopped with
    :class:`~gpulab.instruments.KernelDidNotFinishError` instead of hanging the notebook. A
    try-it cell's inputs are small; its launches take a few seconds at most."""
    limit = limited(seconds=seconds) if device.tier() == "sim" else nullcontext()
    try:
        with limit:
            yield
    except NotImplementedError:
        print(not_written)
    except Exception as error:  # the learner's code failed: tell it briefly
        _last_error[:] = [error]
        print(short_failure(error))


def full_traceback() -> None:
    """Print the whole traceback of the last error a try-it cell caught."""
    if not _last_error:
        print("no try-it cell has failed in this notebook yet.")
        return
    error = _last_error[0]
    traceback.print_exception(type(error), error, error.__traceback__, file=sys.stdout)


__all__ = ["NOT_WRITTEN", "TRY_IT_LIMIT_S", "compare_yours", "full_traceback", "short_failure",
           "show_gpulabs_versions", "try_it"]
