"""Compiling every learner kernel for a real GPU (gpulab.exercises.compiling): what the
simulator runs but the ptx tier refuses fails here too, never skipped, whatever the import
spelling; only a missing toolkit (or source) skips the step, with a note."""

import gpulab  # noqa: F401  (must come before numba: it chooses the simulator or the GPU)

# isort: split
import math
from math import sqrt

import numpy as np
import pytest
from numba import cuda
from numpy import sqrt as np_sqrt

from gpulab.exercises import compiling

HAS_TOOLKIT = compiling.toolkit.installed_version() is not None and not (
    compiling.toolkit.unavailable_reason())
NEEDS_TOOLKIT = pytest.mark.skipif(not HAS_TOOLKIT, reason="no CUDA toolkit wheels here")
TYPES = ["float32[:]", "float32[:]"]


@cuda.jit
def root_from_numpy(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = np_sqrt(x[i])


@cuda.jit
def percent_print_after_math_import(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        print("root %f" % sqrt(x[i]))  # noqa: UP031 - the simulator-only code under test
        out[i] = x[i]


@cuda.jit
def root_from_math(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = sqrt(x[i])


@cuda.jit(device=True)
def half(value):
    return value / 2


@cuda.jit(device=True)
def third(value):
    return value / 3


STEPS = [half, third]
STEP_TABLE = {"half": half}


@cuda.jit
def through_a_list_of_device_functions(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = STEPS[0](x[i])


@cuda.jit
def through_a_dict(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = STEP_TABLE["half"](x[i])


@pytest.mark.parametrize(("ufunc", "advice"), [
    ("sqrt", "the math module's `math.sqrt(...)`"), ("absolute", "`abs(...)` or `math.fabs(...)`"),
    ("power", "`x ** y`"), ("multiply", "`x * y`"), ("arctan2", "`math.atan2(...)`"),
])
def test_a_numpy_function_in_a_kernel_is_told_what_to_use_instead(ufunc, advice):
    # math has no absolute or power: the hint names what a kernel can use (round 16)
    _, hint = compiling.compiler_message(f"KeyError: <ufunc '{ufunc}'>")
    assert f"`np.{ufunc}`" in hint and f"use {advice} instead" in hint, hint


def test_imported_functions_go_to_the_compiler_as_what_they_are():
    recipe = compiling.recipe_of(root_from_numpy)
    assert recipe["globals"]["np_sqrt"] == {"kind": "attribute", "module": "numpy",
                                            "name": "sqrt"}
    assert compiling.recipe_of(root_from_math)["globals"]["sqrt"]["module"] == "math"
    assert compiling.unusable_globals(compiling.recipe_of(through_a_list_of_device_functions)) == [
        ("STEPS", "list")]


@NEEDS_TOOLKIT
@pytest.mark.parametrize(("kernel", "said", "hint"), [
    (root_from_numpy, "ufunc 'sqrt'", "`math.sqrt(...)`"),
    (percent_print_after_math_import, "mod", "print('i =', i)"),
    (through_a_list_of_device_functions, "'STEPS': a Python list", "by its name"),
    (through_a_dict, "'STEP_TABLE': a Python dict", "by its name"),
])
def test_what_the_ptx_tier_refuses_is_never_skipped(kernel, said, hint):
    error, note = compiling.compile_verdict(kernel, TYPES)
    assert note is None and error is not None
    message, advice = compiling.compiler_message(error)
    assert said in message and hint in advice, (message, advice)


@NEEDS_TOOLKIT
def test_an_imported_math_function_compiles():
    assert compiling.compile_verdict(root_from_math, TYPES) == (None, None)
    assert compiling.signature_of([np.zeros(2, np.float32), 3]) == "(float32[:], int64)"


def test_without_the_toolkit_the_step_is_skipped_with_a_note(monkeypatch):
    monkeypatch.setattr(compiling.toolkit, "installed_version", lambda: None)
    error, note = compiling.compile_verdict(root_from_math, TYPES)
    assert error is None and "CUDA toolkit wheels are not installed" in note


def test_an_import_inside_a_kernel_gets_its_own_hint():
    error = ("UnsupportedBytecodeError: Use of unsupported opcode (IMPORT_NAME) found\n\n"
             'File "kernels.py", line 6:\n    def multiply(x, y, out):\n        import math\n')
    message, advice = compiling.compiler_message(error)
    assert "IMPORT_NAME" in message
    assert "`import` inside a kernel" in advice and "f-string" not in advice


def test_a_tuple_index_where_a_number_goes_gets_its_own_hint():
    """Numba's error for ``cuda.atomic.add(out, (0,), v)`` on a 1-D out, as compile_ptx gives it
    (round 9 saw it told as "kernels can't create lists or NumPy arrays")."""
    error = ("LoweringError: Failed in cuda mode pipeline (step: native lowering)\n"
             'Cannot cast UniTuple(Literal[int](0) x 1) to int64: %".142" = insertvalue [1 x '
             "i64] undef, i64 0, 0")
    message, advice = compiling.compiler_message(error)
    assert "UniTuple" in message and "a tuple stands where one whole number goes" in advice


# --- float64 the arguments did not ask for (compiling.float64_note) ---------------------------


@cuda.jit
def sum_from_a_float_literal(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        total = 0.0
        for j in range(i + 1):
            total += x[j]
        out[i] = total


@cuda.jit
def sum_from_a_float32_zero(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        total = np.float32(0)
        for j in range(i + 1):
            total += x[j]
        out[i] = total


@cuda.jit
def derivative_times_a_float_literal(z, out):
    i = cuda.grid(1)
    if i < z.shape[0]:
        out[i] = z[i] * (1.0 if z[i] > 0 else 0.0)


@cuda.jit
def sine_doubled(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = math.sin(x[i]) * 2.0  # the literal's multiply compiles to float32


@cuda.jit
def doubled(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = x[i] * 2.0


@cuda.jit
def chooses_with_a_float_literal(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = x[i] if x[i] > 0.1 else -x[i]  # a float64 comparison, float32 values


@cuda.jit(device=True)
def halved_in_float64(z):
    t = z
    u = t
    v = u
    return v * 0.5 + 1.0  # float64, on this helper's line 6


@cuda.jit
def through_a_float64_helper(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        scaled = x[i] * np.float32(3)
        out[i] = halved_in_float64(scaled)  # line 6: float32 here


@NEEDS_TOOLKIT
@pytest.mark.parametrize(("kernel", "line", "opcode"), [
    (sum_from_a_float_literal, "`total += x[j]` (add.f64)", "add.f64"),
    (derivative_times_a_float_literal, "`out[i] = z[i] * (1.0 if z[i] > 0 else 0.0)`",
     "mul.f64"),
    (chooses_with_a_float_literal, "`out[i] = x[i] if x[i] > 0.1 else -x[i]`", "setp"),
])
def test_float64_arithmetic_from_a_literal_is_noted_with_its_line(kernel, line, opcode):
    note = compiling.float64_note(kernel, TYPES)
    assert note is not None and line in note and opcode in note, note
    assert note.startswith(f"`{kernel.py_func.__name__}` computes in float64 although no "
                           "argument is float64: `")
    assert "float literal such as `0.0`" in note and "`1 - beta`" in note
    assert "On a T4 float64 arithmetic runs at 1/32 of float32's rate" in note
    assert "L4 at 1/64" in note and "H100 SXM at 1/2" in note


@NEEDS_TOOLKIT
def test_float64_inside_a_device_function_is_not_put_on_a_line_of_the_kernel():
    # the helper's float64 multiply is on its own line 6; the kernel's line 6 is float32
    assert compiling.float64_note(through_a_float64_helper, TYPES) is None


@NEEDS_TOOLKIT
@pytest.mark.parametrize("kernel", [sum_from_a_float32_zero, sine_doubled, doubled,
                                    root_from_math])
def test_what_compiles_to_float32_is_not_noted(kernel):
    # sine_doubled: libdevice's sin has a float64 multiply of its own; doubled: typed float64,
    # compiled to a float32 multiply
    assert compiling.float64_note(kernel, TYPES) is None


@NEEDS_TOOLKIT
def test_float64_the_arguments_ask_for_is_not_noted():
    assert compiling.float64_note(sum_from_a_float_literal, ["float64[:]", "float64[:]"]) is None
