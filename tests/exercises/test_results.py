"""What a check says and how it runs (gpulab.exercises.results): results and their markers,
a bug in the check reported rather than raised, the advice a kernel's exception becomes, and
the trace call a failure ends with."""

import gpulab  # noqa: F401  (must come before numba: it chooses the simulator or the GPU)

# isort: split
import re

import numpy as np
import pytest
from learner_kernels import copy_unguarded, multiply, multiply_stub
from numba import cuda

from gpulab import device
from gpulab.exercises import outputs, results, running
from gpulab.exercises.trial import Trial

SIM_ONLY = pytest.mark.skipif(device.tier() != "sim", reason="the simulator's behaviour")


@cuda.jit
def copy_2d_unguarded(x, out):
    c, r = cuda.grid(2)
    out[r, c] = x[r, c]


@cuda.jit
def column_sums_rows_from_out(x, out):  # the loop over x's rows bounded by out's length
    c = cuda.grid(1)
    if c < x.shape[1]:
        total = 0.0
        for r in range(out.shape[0]):
            total += x[r, c]
        out[c] = total


@cuda.jit
def copy_off_by_one(x, out):
    i = cuda.grid(1)
    if i < x.shape[0] - 1:
        out[i] = x[i + 1]


# --- results ----------------------------------------------------------------------------------


def test_a_bug_in_the_check_itself_is_reported_not_raised():
    def broken(seed):
        raise RuntimeError("boom")

    result = results.run_check("demo", broken, seed=1, show=False)
    assert result.status == "failed" and "bug in gpulab" in result.message
    assert isinstance(result.exception, RuntimeError)


def test_check_result_markers_and_truth():
    passed = results.CheckResult("demo", True, "all right", "passed")
    assert str(passed) == "✅ PASSED — demo: all right" and bool(passed)
    todo = results.CheckResult("demo", False, "write it", "not attempted", hint="start here")
    assert str(todo).startswith("✏️ NOT ATTEMPTED YET — demo: write it") and not todo
    wrong = results.CheckResult("demo", False, "out[3] wrong", "failed", hint="check i")
    assert str(wrong) == "❌ NOT YET RIGHT — demo: out[3] wrong\n   Hint: check i"
    with pytest.raises(ValueError):
        results.CheckResult("demo", True, "x", "failed")
    with pytest.raises(ValueError):
        results.CheckResult("demo", False, "x", "maybe")


# --- the advice an exception becomes ----------------------------------------------------------


def test_a_numba_typing_error_is_explained_in_plain_words():
    from numba.core.errors import TypingError

    error = TypingError(
        "Failed in cuda mode pipeline (step: nopython frontend)\n"
        "No implementation of function Function(<built-in function empty>) found for signature:"
    )
    trial = Trial.draw("check_demo", 1, np.float32, block=64)
    status, message, hint = results.explain_exception(results.KernelError(error, trial), trial)
    assert status == "failed"
    assert "No implementation of function" in message and "Failed in" not in message
    assert "lists" in hint and "f-strings" in hint


def kernel_error(kernel, trial, *args) -> tuple[str, str, str]:
    with pytest.raises(results.KernelError) as caught:
        running.launch(kernel, trial, *args, index_hint="the guard")
    return results.explain_exception(caught.value, trial, caught.value.index_hint)


@SIM_ONLY
def test_an_index_error_names_the_thread_of_a_1d_launch():
    trial = Trial.draw("check_demo", 3, np.float32, block=32)
    x = np.zeros(trial.n, np.float32)
    status, message, hint = kernel_error(copy_unguarded, trial, x, np.zeros_like(x))
    assert status == results.FAILED and hint == "the guard"
    # the first thread past the end to fail (threads of a block run concurrently) is named
    found = re.search(r"thread (\d+) of block (\d+) \(global index (\d+)\) used index (\d+) "
                      rf"on an array of {trial.n} elements", message)
    thread, block, index, used = map(int, found.groups())
    assert index == used == block * 32 + thread >= trial.n
    assert "shared or local" not in message  # the array is one of the inputs


@SIM_ONLY
def test_an_index_error_names_both_coordinates_of_a_2d_launch():
    trial = Trial.draw("check_demo", 4, dims=2)
    x = np.zeros(trial.extents, np.float32)
    status, message, _ = kernel_error(copy_2d_unguarded, trial, x, np.zeros_like(x))
    assert status == results.FAILED
    assert "thread (x=" in message and "of block (x=" in message and str(trial) in message


@SIM_ONLY
def test_an_index_past_one_axis_that_fits_another_names_the_array_and_the_axis():
    trial = Trial.draw("check_demo", 3, np.float32, block=32)
    x = np.zeros((5, trial.n), np.float32)  # 5 rows: out's length overruns them
    status, message, _ = kernel_error(column_sums_rows_from_out, trial, x, np.zeros(trial.n))
    assert status == results.FAILED and "shared or local" not in message
    assert (f"x has shape (5, {trial.n}): the index ran past its axis 0 (5) but fits its axis 1 "
            f"({trial.n}): a bound taken from another axis or array?") in message


def test_a_stub_that_raises_at_launch_is_not_attempted():
    trial = Trial.draw("check_demo", 3, np.float32, block=32)
    x = np.zeros(trial.n, np.float32)
    status, message, _ = kernel_error(multiply_stub, trial, x, x, np.zeros_like(x))
    assert status == results.NOT_ATTEMPTED and "NotImplementedError" in message


# --- a failure offers the trace ---------------------------------------------------------------


def test_a_wrong_answer_ends_with_the_call_that_traces_the_kernel():
    def body(seed):
        trial = Trial.draw("check_demo", seed, np.float32, block=32)
        x = trial.uniform(0, 1)
        out = running.run_elementwise(copy_off_by_one, trial, x)
        failure = outputs.vector_failure(x, out, trial)
        if failure:
            raise failure
        return "right"

    result = results.run_check("demo", body, seed=2, show=False)
    assert result.status == results.FAILED
    call = "gpulab.trace(copy_off_by_one, 2, 8, x, out).draw()"
    assert result.trace_call.startswith(call)
    assert str(result).splitlines()[-1] == f"   See what your kernel did: {result.trace_call}"
    passed = results.run_check("demo", lambda seed: "fine", seed=1, show=False)
    assert passed.trace_line == "" and "See what" not in str(passed)


def test_a_check_can_offer_its_own_trace_call():
    def body(seed):
        results.offer_trace(multiply, 1, 4, "x", "y", "out", note="x, y, out of 4 elements")
        raise results.CheckFailedError("wrong", "look")

    result = results.run_check("demo", body, seed=1, show=False)
    assert result.trace_call == ("gpulab.trace(multiply, 1, 4, x, y, out).draw()  "
                                 "(x, y, out of 4 elements)")


@cuda.jit
def kernel_with_le_guard(x, y, out):
    """Wrong: `<=` in the guard: the thread at index n reads one past the end."""
    i = cuda.grid(1)
    if i <= x.shape[0]:
        out[i] = x[i] * y[i]


def test_an_index_one_past_the_end_names_the_usual_guard_too():
    from gpulab.exercises import ch01

    result = ch01.check_multiply(kernel_with_le_guard, seed=3, show=False)
    assert result.status == "failed", result
    assert "one past the end of axis 0" in result.message and "`<=`" in result.message, result
