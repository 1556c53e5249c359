"""Running the learner's code safely (gpulab.exercises.running): plain functions called,
padded buffers read back, kernels compiled for a real GPU as the ptx tier does, a kernel that
never finishes stopped, and a trial traced."""

import gpulab  # noqa: F401  (must come before numba: it chooses the simulator or the GPU)

# isort: split

import numpy as np
import pytest
from learner_kernels import copy_unguarded, multiply
from numba import cuda

from gpulab import device
from gpulab.exercises import compiling, results, running
from gpulab.exercises.trial import Trial

SIM_ONLY = pytest.mark.skipif(device.tier() != "sim", reason="the simulator's behaviour")


# --- the learner's functions and buffers ------------------------------------------------------


def test_call_learner_turns_every_outcome_into_a_verdict():
    def stub(x):
        raise NotImplementedError()

    def crashes(x):
        return x / missing  # noqa: F821

    assert running.call_learner(lambda x: x + 1, 1) == 2
    for function, error, words in [
        (None, results.NotAttemptedError, "no function"),
        (stub, results.NotAttemptedError, "NotImplementedError"),
        (42, results.CheckFailedError, "not int"),
        (crashes, results.CheckFailedError, "square(2) stopped with NameError"),
    ]:
        with pytest.raises(error) as caught:
            running.call_learner(function, 2, stub_hint="the hint", call="square(2)")
        assert words in caught.value.message
        assert caught.value.hint


@pytest.mark.parametrize("shape", [(37,), (5, 7)])
def test_read_back_returns_the_output_and_reports_writes_into_the_padding(shape):
    values = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    d_all, d_view = running.padded(values, 3, np.nan)
    assert d_view.shape == shape and d_all.shape == tuple(s + 3 for s in shape)
    np.testing.assert_array_equal(running.read_back(d_all, shape, "here"), values)
    spoiled = d_all.copy_to_host()
    spoiled[(shape[0],) + (0,) * (len(shape) - 1)] = 1.0  # one element past the end
    with pytest.raises(results.CheckFailedError) as failure:
        running.read_back(cuda.to_device(spoiled), shape, "here", hint="guard it")
    assert f"out[{shape[0]}" in failure.value.message and "outside the" in failure.value.message
    assert failure.value.hint == "guard it"


def test_read_back_compares_with_a_finite_fill():
    d_all, _ = running.padded(np.zeros(10, np.float32), 4, 0)
    spoiled = d_all.copy_to_host()
    spoiled[12] = 2.0
    with pytest.raises(results.CheckFailedError, match=r"param\[12\]"):
        running.read_back(cuda.to_device(spoiled), (10,), "here", fill=0, what="param")


def test_run_elementwise_pads_the_arrays_and_passes_scalars_through():
    @cuda.jit
    def scale_and_multiply(a, x, y, out):
        i = cuda.grid(1)
        if i < x.shape[0]:
            out[i] = a * x[i] * y[i]

    trial = Trial.draw("check_demo", 6, np.float32, block=32)
    x, y = trial.uniform(-1, 1), trial.uniform(-1, 1)
    out = running.run_elementwise(scale_and_multiply, trial, np.float32(3), x, y)
    assert out.shape == (trial.n,)
    np.testing.assert_allclose(out, 3 * x * y, rtol=1e-6)


def test_run_elementwise_names_a_write_into_an_input_and_adding_into_out():
    @cuda.jit
    def multiply_into_y(x, y, out):
        i = cuda.grid(1)
        if i < x.shape[0]:
            y[i] *= x[i]
            out[i] = y[i]

    @cuda.jit
    def multiply_adding_into_out(x, y, out):
        i = cuda.grid(1)
        if i < x.shape[0]:
            out[i] += x[i] * y[i]

    trial = Trial.draw("check_demo", 7, np.float32, block=32)
    x, y = trial.uniform(-1, 1), trial.uniform(-1, 1)
    with pytest.raises(results.CheckFailedError, match=r"wrote into its input y: y\[0\]"):
        running.run_elementwise(multiply_into_y, trial, x, y)
    with pytest.raises(results.CheckFailedError, match=r"adds into out\[i\], which starts"):
        running.run_elementwise(multiply_adding_into_out, trial, x, y)


# --- compiled for a real GPU, as the ptx tier does --------------------------------------------


HAS_TOOLKIT = compiling.toolkit.installed_version() is not None and not (
    compiling.toolkit.unavailable_reason())


NEEDS_TOOLKIT = pytest.mark.skipif(not HAS_TOOLKIT, reason="no CUDA toolkit wheels here")


SIZE = 4


@cuda.jit
def copy_with_numpy_scratch(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        scratch = np.zeros(SIZE)  # noqa: F841 - simulator-only on purpose
        out[i] = x[i]


@cuda.jit
def copy_with_percent_print(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        print("i = %d" % i)  # noqa: UP031 - the simulator-only code under test
        out[i] = x[i]


@cuda.jit
def copy_with_fstring_print(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        print(f"i = {i}")
        out[i] = x[i]


@cuda.jit
def copy_with_generator(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = sum(x[i] for _ in range(1))


@cuda.jit
def copy_through_a_runtime_sized_shared_array(x, out):
    buffer = cuda.shared.array(x.shape[0], np.float32)
    i = cuda.grid(1)
    if i < x.shape[0]:
        buffer[cuda.threadIdx.x] = x[i]
        out[i] = buffer[cuda.threadIdx.x]


@cuda.jit
def copy_whole_array_into_one_element(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = x


def plain_helper(value):
    return value


@cuda.jit
def copy_through_a_plain_function(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = plain_helper(x[i])


@cuda.jit(device=True)
def device_helper(value):
    return value


@cuda.jit
def copy_through_a_device_function(x, out):
    shared = cuda.shared.array(SIZE, np.float32)
    i = cuda.grid(1)
    if i < x.shape[0]:
        shared[0] = device_helper(x[i])
        out[i] = shared[0]


COPY_TYPES = ["float32[:]", "float32[:]"]


@NEEDS_TOOLKIT
@pytest.mark.parametrize(("kernel", "said", "hint"), [
    (copy_with_numpy_scratch, "zeros", "NumPy"),
    (copy_with_percent_print, "mod", "print('i =', i)"),
    (copy_with_fstring_print, "str", "f-strings"),
    (copy_with_generator, "yield", "generator"),
    (copy_through_a_runtime_sized_shared_array, "array", "constant"),
    (copy_whole_array_into_one_element, "setitem", "wrong types"),
    (copy_through_a_plain_function, "plain_helper", "@cuda.jit(device=True)"),
])
def test_what_would_not_compile_for_a_gpu_is_named_with_its_cause(kernel, said, hint):
    error = running.compile_for_gpu(kernel, COPY_TYPES)
    assert error is not None
    message, advice = compiling.compiler_message(error)
    assert said in message and hint in advice
    assert "Failed in" not in message.split(" at ")[0]


@NEEDS_TOOLKIT
def test_what_compiles_for_a_gpu_is_accepted_once_and_remembered():
    import time

    assert running.compile_for_gpu(copy_through_a_device_function, COPY_TYPES) is None
    assert running.compile_for_gpu(copy_unguarded, [np.zeros(3, np.float32)] * 2) is None
    started = time.perf_counter()
    assert running.compile_for_gpu(copy_unguarded, "(float32[:], float32[:])") is None
    assert time.perf_counter() - started < 0.5  # cached: no second compiler process
    text = "def k(x, out):\n    out[0] = x[0] + math.sqrt(2.0)\n"
    assert running.compile_for_gpu(text, COPY_TYPES) is None


@NEEDS_TOOLKIT
def test_the_compiler_process_is_started_again_when_it_has_stopped(monkeypatch):
    monkeypatch.setattr(compiling, "_COMPILED", {})
    assert running.compile_for_gpu(copy_unguarded, COPY_TYPES) is None
    compiling._COMPILER.stop()  # e.g. killed
    monkeypatch.setattr(compiling, "_COMPILED", {})
    assert running.compile_for_gpu(copy_with_generator, COPY_TYPES) is not None


@SIM_ONLY
@NEEDS_TOOLKIT
def test_a_check_rejects_a_kernel_that_runs_only_in_the_simulator():
    def body(seed):
        trial = Trial.draw("check_demo", seed, np.float32, block=32)
        x = trial.uniform(-1, 1)
        running.run_elementwise(copy_with_percent_print, trial, x)
        return "ran"

    result = results.run_check("demo", body, seed=1, show=False)
    assert result.status == results.FAILED
    assert "does not compile for a real GPU (sm_75)" in result.message
    assert "print('i =', i)" in result.hint
    assert result.trace_call == ""  # a trace would not show the problem


@SIM_ONLY
def test_without_the_toolkit_the_compile_step_is_skipped_and_said(monkeypatch):
    monkeypatch.setattr(compiling.toolkit, "installed_version", lambda: None)
    monkeypatch.setattr(compiling, "_COMPILED", {})

    def body(seed):
        trial = Trial.draw("check_demo", seed, np.float32, block=32)
        running.run_elementwise(multiply, trial, trial.uniform(0, 1), trial.uniform(0, 1))
        return "ran"

    result = results.run_check("demo", body, seed=1, show=False)
    assert result.passed
    assert any("not compiled for a real GPU" in note for note in result.notes)
    assert "Note: your kernel was not compiled" in str(result)


# --- a kernel that never finishes fails the check ---------------------------------------------


@cuda.jit
def grid_stride_step_zero(x, out):
    i = cuda.grid(1)
    while i < x.shape[0]:
        out[i] = x[i]
        i += 0


@cuda.jit
def grid_stride_step_by_thread(x, out):
    i = cuda.grid(1)
    while i < x.shape[0]:
        out[i] = x[i]
        i += cuda.threadIdx.x


@cuda.jit
def spins_forever(x, out):
    i = cuda.grid(1)
    k = 1
    while k > 0:
        k = k + 0
    out[i] = x[i]


def _copy_check(kernel, seed=1):
    def body(seed):
        trial = Trial.draw("check_demo", seed, np.float32, block=32)
        out = running.run_elementwise(kernel, trial, trial.uniform(0, 1))
        return f"ran, {out.size} elements"

    return results.run_check("demo", body, seed=seed, show=False)


@SIM_ONLY
@pytest.mark.parametrize("kernel", [grid_stride_step_zero, grid_stride_step_by_thread])
def test_a_grid_stride_loop_with_a_wrong_step_fails_instead_of_hanging(kernel):
    import time

    started = time.perf_counter()
    result = _copy_check(kernel)
    assert result.status == results.FAILED
    assert result.message.startswith(results.DID_NOT_FINISH)
    assert result.hint.startswith(results.DID_NOT_FINISH_HINT)
    assert "one thread doing the work of many" in result.message
    assert result.trace_call == ""  # tracing it would stop the same way
    assert time.perf_counter() - started < 40


@SIM_ONLY
def test_a_loop_without_array_accesses_fails_at_the_time_limit(monkeypatch):
    monkeypatch.setitem(results.TIME_LIMIT_S, "sim", 1.5)
    result = _copy_check(spins_forever)
    assert result.status == results.FAILED and result.message.startswith(results.DID_NOT_FINISH)
    assert "more than 1.5 s" in result.message


# --- tracing the learner's kernel -------------------------------------------------------------


@SIM_ONLY
def test_trace_trial_counts_what_the_learners_kernel_did():
    trial = Trial.draw("check_demo", 3, np.float32, block=8, shape=(13,))
    x, y = trial.uniform(0, 1), trial.uniform(0, 1)
    trace = running.trace_trial(multiply, trial, x, y, np.zeros(13, np.float32))
    assert trace.launch == "2 blocks of 8 threads"
    assert trace.max_per_thread("global_reads") == 2
    assert trace.per_block("global_writes") == {0: 8, 1: 5}
    np.testing.assert_allclose(trace.arrays["out"], x * y)
    assert trace.draw() is not None  # gpulab.plots was loaded for it
