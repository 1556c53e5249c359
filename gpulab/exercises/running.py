"""Running the learner's code safely: whatever it does, the check gets a verdict, never a
crash, a hang or memory corrupted outside the learner's arrays.

- :func:`call_learner` calls a plain Python function: nothing passed or the stub is *not
  attempted*, any exception a failure that names it.
- :func:`launch` launches a kernel on a :class:`~gpulab.exercises.trial.Trial`'s grid. In the
  simulator it first compiles the kernel for a real GPU (sm_75, as the ``ptx`` tier does, in a
  child process: :func:`compile_for_gpu`), once per kernel source and argument types, every
  kernel, whatever it imports (a global no GPU kernel can use, such as a list of device
  functions, is a compile error); only where the CUDA toolkit wheels are missing (macOS) is that
  step skipped, and the result's note says so. In the simulator and on a GPU, the same compile
  notes float64 arithmetic no argument asked for (``total = 0.0``:
  :func:`gpulab.exercises.compiling.float64_note`). Shared memory starts poisoned, so a read before
  the barrier that makes a slot written gives a wrong answer every time. A kernel that never
  finishes (a grid-stride loop whose step is 0) fails instead of hanging: in the simulator each
  thread gets a budget of array accesses and barriers (:func:`gpulab.instruments.limited`) and
  the launch a wall-clock limit; on a GPU the launch is polled.
- Inputs and outputs are views of larger buffers (:func:`padded`): a thread past the end raises
  ``IndexError`` in the simulator, and on a GPU its write lands in padding that
  :func:`read_back` inspects instead of in someone else's memory. :func:`run_elementwise` does
  all of it for a kernel with one thread per element.
- :func:`trace_trial` traces the learner's kernel (:func:`gpulab.instruments.trace_kernel`):
  per-thread counts of global and shared reads and writes, atomics and barriers, for the checks
  that judge the method.
"""

from __future__ import annotations

import ast
import inspect
import time
from contextlib import ExitStack

import numpy as np

from gpulab import device
from gpulab.exercises.compiling import (
    COMPILE_FOR,
    compile_verdict,
    compiler_message,
    float64_note,
    numba_type,
)
from gpulab.exercises.learner_code import watching_calls
from gpulab.exercises.mistakes import reject
from gpulab.exercises.races import SHARED_RACE, SharedRaces
from gpulab.exercises.results import (
    GUARD_2D_HINT,
    GUARD_HINT,
    READ_THE_ERROR_HINT,
    STUB_MESSAGE,
    TIME_LIMIT_S,
    CheckFailedError,
    KernelError,
    NotAttemptedError,
    add_note,
    offer_trace,
)
from gpulab.exercises.source_rules import adds_into, kernel_source
from gpulab.exercises.trial import Trial, describe_launch
from gpulab.instruments import (
    KernelDidNotFinishError,
    KernelTrace,
    access_budget,
    float_max_min_as_on_a_gpu,
    launchable,
    limited,
    poisoned_shared_memory,
    python_function,
    trace_kernel,
)

# --- the learner's plain Python functions -----------------------------------------------------


def _kept(value):
    """A copy of an argument to compare with after the call (an array, or a list or tuple of
    numbers, text and arrays), or None for what is not compared (a generator, a model)."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, (list, tuple)) and all(
            isinstance(item, (int, float, str, np.generic, np.ndarray)) for item in value):
        return [item.copy() if isinstance(item, np.ndarray) else item for item in value]
    return None


def _same(before, value) -> bool:
    if isinstance(before, np.ndarray):
        return (isinstance(value, np.ndarray) and value.shape == before.shape
                and value.dtype == before.dtype and np.array_equal(
                    value, before, equal_nan=value.dtype.kind in "fc"))
    return len(value) == len(before) and all(
        _same(old, new) if isinstance(old, np.ndarray) else old == new or old != old
        for old, new in zip(before, value, strict=True))


def _parameter_name(function, index: int) -> str:
    try:
        names = [p.name for p in inspect.signature(function).parameters.values()]
    except (TypeError, ValueError):
        names = []
    return f"`{names[index]}`" if index < len(names) else f"number {index + 1}"


def call_learner(function, *args, stub_hint: str = "", call: str = "your function",
                 may_change: tuple[int, ...] = ()):
    """Call a learner's plain Python function with ``args``: nothing passed yet or the stub
    becomes *not attempted*, any exception a failure that names it (``call`` says which call,
    e.g. ``"decode(0, 3, 1, 5, 10) for fp16"``). An argument that is an array or a list of
    numbers must come back as it was given (a caller still needs its data: ``x.sort()`` or
    ``np.abs(x, out=x)`` on it is a failure), but those at the positions ``may_change`` (an
    exercise that updates a buffer in place)."""
    if function is None or function is Ellipsis:
        raise NotAttemptedError(
            "there is no function to check yet.",
            stub_hint or "write the function in the cell above, run that cell, then pass it to "
            "the check.")
    if not callable(function):
        raise CheckFailedError(
            f"the check needs your function, not {type(function).__name__} {function!r:.40}.",
            "pass the function itself, without calling it.")
    kept = {index: copy for index, value in enumerate(args)
            if index not in may_change and (copy := _kept(value)) is not None}
    try:
        with watching_calls(handed=args):
            returned = function(*args)
    except NotImplementedError:
        raise NotAttemptedError(STUB_MESSAGE.format(what="function"), stub_hint) from None
    except Exception as error:  # the learner's code: explain, don't crash
        raise CheckFailedError(f"{call} stopped with {type(error).__name__}: {error}",
                               READ_THE_ERROR_HINT) from None
    changed = [index for index, before in kept.items() if not _same(before, args[index])]
    if changed:
        name = _parameter_name(function, changed[0])
        raise CheckFailedError(
            f"{call} changed its argument {name} in place (the "
            f"{'array' if isinstance(args[changed[0]], np.ndarray) else 'list'} came back "
            "different): the caller still needs the data it handed over.",
            f"leave {name} as it was given: sort it, take its absolute values or pop from it "
            "in a copy of your own, never in the argument itself.")
    return returned


# --- compiling the learner's kernel for a real GPU (gpulab.exercises.compiling) ---------------


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
    fail the check if it does not compile (:func:`compile_for_gpu`). In the simulator and on a
    GPU, note float64 arithmetic the arguments did not ask for
    (:func:`gpulab.exercises.compiling.float64_note`); nothing in the ``ptx`` tier."""
    if device.tier() not in ("sim", "gpu"):
        return
    try:
        types = [numba_type(value) for value in args]
    except TypeError:
        return
    error = compile_for_gpu(kernel, types) if device.tier() == "sim" else None
    note = None if error else float64_note(kernel, types)
    if note:
        add_note(note)
    if error:
        said, hint = compiler_message(error)
        raise CheckFailedError(
            "your kernel runs in the simulator, which executes it as plain Python, but it does "
            f"not compile for a real GPU (sm_{COMPILE_FOR[0]}{COMPILE_FOR[1]}): {said}", hint)


# --- device buffers and launches --------------------------------------------------------------


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
    :data:`GUARD_HINT`, or :data:`GUARD_2D_HINT` for a 2-D launch. A write into an input
    fails it too (:func:`changed_input_failure`), named by the kernel's parameter."""
    if index_hint is None:
        index_hint = GUARD_HINT if isinstance(trial.threads, int) else GUARD_2D_HINT
    buffers = [padded(value, trial.padding, fill) if isinstance(value, np.ndarray) else None
               for value in inputs]
    arrays = [value if buffer is None else buffer[1]
              for value, buffer in zip(inputs, buffers, strict=True)]
    d_all, d_out = padded(np.full(trial.extents, np.nan, trial.dtype), trial.padding, np.nan)
    launch(kernel, trial, *arrays, d_out, index_hint=index_hint)
    out = read_back(d_all, trial.extents, trial, what=what, hint=index_hint)
    names = list(inspect.signature(python_function(kernel) or kernel).parameters)
    added = (adds_into(kernel_source(kernel, len(inputs) + 1), names[-1])
             if np.isnan(out).all() and names else [])
    if added:
        raise CheckFailedError(
            f"your kernel adds into {ast.unparse(added[0].target)}, which starts with whatever "
            f"was in memory (NaN here): every element of {what} is still NaN ({trial}).",
            f"{what} is an output, not a running total: a new device array holds garbage until "
            "it is written, so compute each value (a sum in a local variable) and write it "
            "once.")
    for k, (value, buffer) in enumerate(zip(inputs, buffers, strict=True)):
        if buffer is not None:
            inside = tuple(slice(0, extent) for extent in value.shape)
            changed_input_failure(names[k] if k < len(names) else f"input {k + 1}", value,
                                  buffer[0].copy_to_host()[inside], what, trial)
    return out


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
            f"write the result into {what} only and leave {name} as it is: the caller's {name} "
            "is not yours to change (the program may read it again, as a layer's backward pass "
            "reads its inputs).")


def launch(kernel, trial: Trial, *args, index_hint: str = GUARD_HINT, blocks=None) -> None:
    """Launch the learner's kernel on the trial's grid (``blocks`` blocks instead, if given) and
    wait for it; anything it raises (or a compile error) becomes a :class:`KernelError` that
    knows the trial, for :func:`gpulab.exercises.results.explain_exception`.

    In the simulator the kernel is first compiled for a real GPU with these arguments' types
    (once per kernel and types: :func:`compile_for_gpu`), and what would not compile fails the
    check (:class:`CheckFailedError`) before anything runs; in both tiers the result gets a note
    where the compiled kernel computes in float64 though no argument is float64. Shared memory
    starts poisoned
    (:func:`gpulab.instruments.poisoned_shared_memory`), so reading a shared slot before a
    barrier made it written gives a wrong answer every time, as it can on a GPU; ``max`` and
    ``min`` of two floats leave a NaN out, as a GPU's ``fmaxf`` does
    (:func:`gpulab.instruments.float_max_min_as_on_a_gpu`).

    A kernel that does not finish fails instead of hanging: in the simulator each thread gets a
    budget of array accesses and barriers (:func:`gpulab.instruments.limited`) and the launch a
    wall-clock limit (:data:`TIME_LIMIT_S`); on a GPU the launch is polled up to its limit.
    A failure after this point offers the learner a trace of the kernel (:func:`offer_trace`).
    """
    from numba import cuda

    _reject_what_would_not_compile(kernel, args)
    if isinstance(trial.threads, int):
        offer_trace(kernel, 2, 8, note="with small NumPy arrays, e.g. 13 elements",
                    default=True)
    else:
        offer_trace(kernel, (2, 2), (4, 4), note="with small NumPy arrays, e.g. 6 x 7",
                    default=True)
    grid = trial.blocks if blocks is None else blocks
    try:
        if device.tier() == "sim":
            budget = access_budget(*args, factor=4, minimum=1_000)
            barriers = 1_000 + sum(int(getattr(a, "size", 0) or 0) for a in args
                                   if hasattr(a, "shape"))
            with ExitStack() as stack:
                stack.enter_context(poisoned_shared_memory())
                stack.enter_context(float_max_min_as_on_a_gpu())
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


# --- tracing the learner's kernel -------------------------------------------------------------


def trace_trial(kernel, trial, *args, blocks=None, races: bool = True) -> KernelTrace:
    """Trace the learner's kernel on the trial's launch (``blocks`` instead of the trial's, if
    given) with ``args`` (NumPy or device arrays and scalars; arrays are copied), for checks
    that judge the method: e.g. ``trace_trial(kernel, trial, A, B, C).max_per_thread(
    "global_reads")`` for the tiled matmul's loads per thread, or ``.per_block("atomics")`` for
    a block sum. Keep the trial small: every access is recorded. See
    :class:`gpulab.instruments.KernelTrace`; ``.draw()`` works (gpulab.plots is loaded).

    A trace that finished with a race on shared memory fails
    (:data:`~gpulab.exercises.races.SHARED_RACE`) unless ``races`` is False: a check that words
    its own race rules (chapter 01's tree, chapter 03's tiles) reads them from the trace."""
    import gpulab.plots  # noqa: F401 - registers KernelTrace.draw

    trace = trace_kernel(kernel, trial.blocks if blocks is None else blocks, trial.threads,
                         *args)
    if races and not trace.error:
        launched = describe_launch(trial.blocks if blocks is None else blocks, trial.threads)
        seed = getattr(trial, "seed", None)
        reject((SHARED_RACE,), SharedRaces(trace.shared_races(), f"traced on {launched}" + (
            f", seed={seed}" if seed is not None else "")))
    return trace


__all__ = [
    "call_learner", "changed_input_failure", "compile_for_gpu", "launch", "padded", "read_back",
    "run_elementwise",
    "trace_trial"
]
