"""The machinery every exercise check shares (gpulab.exercises.checks): results, the learner's
code, random sizes, padded buffers, launches and the advice an error becomes; and the rule that
chapter modules take what they share from checks, never from each other."""

import ast
import re
from pathlib import Path
from time import perf_counter as now_from_time_import  # a clock imported by name

import numpy as np
import pytest
from numba import cuda

from gpulab import device
from gpulab.exercises import checks, compiling
from gpulab.exercises.trial import Trial

SIM_ONLY = pytest.mark.skipif(device.tier() != "sim", reason="the simulator's behaviour")
EXERCISES = Path(checks.__file__).parent


# Small kernels of its own (not chapter 01's), so that these tests need no chapter module.


@cuda.jit
def multiply(x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = x[i] * y[i]


@cuda.jit
def multiply_stub(x, y, out):
    # YOUR CODE HERE
    raise NotImplementedError()


@cuda.jit
def multiply_with_list(x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        pair = [x[i], y[i]]
        out[i] = pair[0] * pair[1]


@cuda.jit
def copy_unguarded(x, out):
    i = cuda.grid(1)
    out[i] = x[i]


@cuda.jit
def copy_2d_unguarded(x, out):
    c, r = cuda.grid(2)
    out[r, c] = x[r, c]


# --- results ---------------------------------------------------------------------------------


def test_sizes_are_never_a_multiple_of_the_block_size():
    rng = np.random.default_rng(0)
    for threads in (32, 64, 128):
        sizes = [checks.draw_size(rng, threads) for _ in range(300)]
        assert all(n % threads for n in sizes)
        assert min(sizes) > 2 * threads


def test_a_bug_in_the_check_itself_is_reported_not_raised():
    def broken(seed):
        raise RuntimeError("boom")

    result = checks.run_check("demo", broken, seed=1, show=False)
    assert result.status == "failed" and "bug in gpulab" in result.message
    assert isinstance(result.exception, RuntimeError)


def test_check_result_markers_and_truth():
    passed = checks.CheckResult("demo", True, "all right", "passed")
    assert str(passed) == "✅ PASSED — demo: all right" and bool(passed)
    todo = checks.CheckResult("demo", False, "write it", "not attempted", hint="start here")
    assert str(todo).startswith("✏️ NOT ATTEMPTED YET — demo: write it") and not todo
    wrong = checks.CheckResult("demo", False, "out[3] wrong", "failed", hint="check i")
    assert str(wrong) == "❌ NOT YET RIGHT — demo: out[3] wrong\n   Hint: check i"
    with pytest.raises(ValueError):
        checks.CheckResult("demo", True, "x", "failed")
    with pytest.raises(ValueError):
        checks.CheckResult("demo", False, "x", "maybe")


def test_a_numba_typing_error_is_explained_in_plain_words():
    from numba.core.errors import TypingError

    error = TypingError(
        "Failed in cuda mode pipeline (step: nopython frontend)\n"
        "No implementation of function Function(<built-in function empty>) found for signature:"
    )
    trial = Trial.draw("check_demo", 1, np.float32, block=64)
    status, message, hint = checks.explain_exception(checks.KernelError(error, trial), trial)
    assert status == "failed"
    assert "No implementation of function" in message and "Failed in" not in message
    assert "lists" in hint and "f-strings" in hint


def test_simulator_only_code_is_named():
    @cuda.jit
    def uses_numpy_and_fstrings(x, y, out):
        i = cuda.grid(1)
        scratch = np.zeros(4)
        print(f"thread {i}")
        out[i] = scratch[0]

    source = checks.kernel_source(uses_numpy_and_fstrings, 3)
    found = " ".join(checks.simulator_only_code(source))
    assert "np.zeros" in found and "f-string" in found
    assert checks.simulator_only_code(checks.kernel_source(multiply, 3)) == []




# --- the learner's code ----------------------------------------------------------------------


def test_start_kernel_returns_the_source_of_a_right_kernel():
    source = checks.start_kernel(multiply, 3, "stub hint")
    assert source.parameters == ["x", "y", "out"] and "x[i] * y[i]" in source.source


def test_start_kernel_says_not_attempted_for_the_stub():
    with pytest.raises(checks.NotAttemptedError) as stop:
        checks.start_kernel(multiply_stub, 3, "write out[i] = x[i] * y[i]")
    assert "NotImplementedError" in stop.value.message
    assert stop.value.hint == "write out[i] = x[i] * y[i]"


@SIM_ONLY
def test_start_kernel_rejects_code_only_the_simulator_runs():
    with pytest.raises(checks.CheckFailedError) as failure:
        checks.start_kernel(multiply_with_list, 3, "")
    assert "would not compile" in failure.value.message and "list" in failure.value.message
    assert failure.value.hint == checks.SIMULATOR_ONLY_HINT


def test_start_kernel_unwraps_a_launch_configuration():
    assert checks.start_kernel(multiply[2, 32], 3, "").parameters == ["x", "y", "out"]


def test_call_learner_turns_every_outcome_into_a_verdict():
    def stub(x):
        raise NotImplementedError()

    def crashes(x):
        return x / missing  # noqa: F821

    assert checks.call_learner(lambda x: x + 1, 1) == 2
    for function, error, words in [
        (None, checks.NotAttemptedError, "no function"),
        (stub, checks.NotAttemptedError, "NotImplementedError"),
        (42, checks.CheckFailedError, "not int"),
        (crashes, checks.CheckFailedError, "square(2) stopped with NameError"),
    ]:
        with pytest.raises(error) as caught:
            checks.call_learner(function, 2, stub_hint="the hint", call="square(2)")
        assert words in caught.value.message
        assert caught.value.hint


# --- random sizes and launches -----------------------------------------------------------------


def test_draw_size_spans_the_full_blocks_asked_for():
    rng = np.random.default_rng(1)
    for block in (8, 16):
        sizes = [checks.draw_size(rng, block, (9, 40), full_blocks=1) for _ in range(200)]
        assert all(n % block and n > block for n in sizes)


def test_launches_are_described_in_one_way():
    assert checks.describe_launch(3, 64) == "3 blocks of 64 threads"
    assert checks.describe_launch((4, 2), (8, 8)) == "4 x 2 blocks of 8 x 8 threads"
    trial = Trial.draw("check_demo", 5, np.float32, block=64)
    assert f"{trial.blocks} blocks of 64 threads" in str(trial)
    assert str(trial).endswith("repeat it with check_demo(kernel, seed=5)")
    grid = Trial.draw("check_demo", 5, dims=2)
    assert grid.launched in str(grid) and grid.threads == grid.block


@pytest.mark.parametrize("shape", [(37,), (5, 7)])
def test_read_back_returns_the_output_and_reports_writes_into_the_padding(shape):
    values = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    d_all, d_view = checks.padded(values, 3, np.nan)
    assert d_view.shape == shape and d_all.shape == tuple(s + 3 for s in shape)
    np.testing.assert_array_equal(checks.read_back(d_all, shape, "here"), values)
    spoiled = d_all.copy_to_host()
    spoiled[(shape[0],) + (0,) * (len(shape) - 1)] = 1.0  # one element past the end
    with pytest.raises(checks.CheckFailedError) as failure:
        checks.read_back(cuda.to_device(spoiled), shape, "here", hint="guard it")
    assert f"out[{shape[0]}" in failure.value.message and "outside the" in failure.value.message
    assert failure.value.hint == "guard it"


def test_read_back_compares_with_a_finite_fill():
    d_all, _ = checks.padded(np.zeros(10, np.float32), 4, 0)
    spoiled = d_all.copy_to_host()
    spoiled[12] = 2.0
    with pytest.raises(checks.CheckFailedError, match=r"param\[12\]"):
        checks.read_back(cuda.to_device(spoiled), (10,), "here", fill=0, what="param")


def kernel_error(kernel, trial, *args) -> tuple[str, str, str]:
    with pytest.raises(checks.KernelError) as caught:
        checks.launch(kernel, trial, *args, index_hint="the guard")
    return checks.explain_exception(caught.value, trial, caught.value.index_hint)


@SIM_ONLY
def test_an_index_error_names_the_thread_of_a_1d_launch():
    trial = Trial.draw("check_demo", 3, np.float32, block=32)
    x = np.zeros(trial.n, np.float32)
    status, message, hint = kernel_error(copy_unguarded, trial, x, np.zeros_like(x))
    assert status == checks.FAILED and hint == "the guard"
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
    assert status == checks.FAILED
    assert "thread (x=" in message and "of block (x=" in message and str(trial) in message


def test_a_stub_that_raises_at_launch_is_not_attempted():
    trial = Trial.draw("check_demo", 3, np.float32, block=32)
    x = np.zeros(trial.n, np.float32)
    status, message, _ = kernel_error(multiply_stub, trial, x, x, np.zeros_like(x))
    assert status == checks.NOT_ATTEMPTED and "NotImplementedError" in message


# --- one home for each idea ----------------------------------------------------------------------


def imports_of(path: Path) -> list[tuple[str, list[str]]]:
    """(module, imported names) for every ``import`` / ``from ... import`` in a file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.module, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
    return found


# What chapter modules may share: the machinery and the core a check is declared with.
SHARED = {"gpulab.exercises.checks", "gpulab.exercises.mistakes", "gpulab.exercises.spec",
          "gpulab.exercises.trial"}


@pytest.mark.parametrize("path", sorted(EXERCISES.glob("ch[0-9]*.py")), ids=lambda p: p.name)
def test_chapter_modules_share_only_through_checks(path):
    for module, names in imports_of(path):
        if module.startswith("gpulab.exercises"):
            assert module in SHARED, f"{path.name} imports {module}"
        if module.startswith("gpulab"):
            private = [name for name in names if name.startswith("_")]
            assert not private, f"{path.name} imports private names {private} from {module}"


def test_run_elementwise_pads_the_arrays_and_passes_scalars_through():
    @cuda.jit
    def scale_and_multiply(a, x, y, out):
        i = cuda.grid(1)
        if i < x.shape[0]:
            out[i] = a * x[i] * y[i]

    trial = Trial.draw("check_demo", 6, np.float32, block=32)
    x, y = trial.uniform(-1, 1), trial.uniform(-1, 1)
    out = checks.run_elementwise(scale_and_multiply, trial, np.float32(3), x, y)
    assert out.shape == (trial.n,)
    np.testing.assert_allclose(out, 3 * x * y, rtol=1e-6)


# --- compiled for a real GPU, as the ptx tier does ------------------------------------------------

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
    error = checks.compile_for_gpu(kernel, COPY_TYPES)
    assert error is not None
    message, advice = checks.compiler_message(error)
    assert said in message and hint in advice
    assert "Failed in" not in message.split(" at ")[0]


@NEEDS_TOOLKIT
def test_what_compiles_for_a_gpu_is_accepted_once_and_remembered():
    import time

    assert checks.compile_for_gpu(copy_through_a_device_function, COPY_TYPES) is None
    assert checks.compile_for_gpu(copy_unguarded, [np.zeros(3, np.float32)] * 2) is None
    started = time.perf_counter()
    assert checks.compile_for_gpu(copy_unguarded, "(float32[:], float32[:])") is None
    assert time.perf_counter() - started < 0.5  # cached: no second compiler process
    text = "def k(x, out):\n    out[0] = x[0] + math.sqrt(2.0)\n"
    assert checks.compile_for_gpu(text, COPY_TYPES) is None


@NEEDS_TOOLKIT
def test_the_compiler_process_is_started_again_when_it_has_stopped(monkeypatch):
    monkeypatch.setattr(compiling, "_COMPILED", {})
    assert checks.compile_for_gpu(copy_unguarded, COPY_TYPES) is None
    compiling._COMPILER.stop()  # e.g. killed
    monkeypatch.setattr(compiling, "_COMPILED", {})
    assert checks.compile_for_gpu(copy_with_generator, COPY_TYPES) is not None


@SIM_ONLY
@NEEDS_TOOLKIT
def test_a_check_rejects_a_kernel_that_runs_only_in_the_simulator():
    def body(seed):
        trial = Trial.draw("check_demo", seed, np.float32, block=32)
        x = trial.uniform(-1, 1)
        checks.run_elementwise(copy_with_percent_print, trial, x)
        return "ran"

    result = checks.run_check("demo", body, seed=1, show=False)
    assert result.status == checks.FAILED
    assert "does not compile for a real GPU (sm_75)" in result.message
    assert "print('i =', i)" in result.hint
    assert result.trace_call == ""  # a trace would not show the problem


@SIM_ONLY
def test_without_the_toolkit_the_compile_step_is_skipped_and_said(monkeypatch):
    monkeypatch.setattr(compiling.toolkit, "installed_version", lambda: None)
    monkeypatch.setattr(compiling, "_COMPILED", {})

    def body(seed):
        trial = Trial.draw("check_demo", seed, np.float32, block=32)
        checks.run_elementwise(multiply, trial, trial.uniform(0, 1), trial.uniform(0, 1))
        return "ran"

    result = checks.run_check("demo", body, seed=1, show=False)
    assert result.passed
    assert any("not compiled for a real GPU" in note for note in result.notes)
    assert "Note: your kernel was not compiled" in str(result)


# --- barriers every thread reaches -------------------------------------------------------------


@cuda.jit
def barrier_inside_the_guard(x, out):
    shared = cuda.shared.array(64, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < x.shape[0]:
        shared[t] = x[i]
        cuda.syncthreads()
        out[i] = shared[63 - t]


@cuda.jit
def barrier_in_the_else(x, out):
    shared = cuda.shared.array(64, np.float32)
    t = cuda.threadIdx.x
    if t >= x.shape[0]:
        shared[t] = 0
    else:
        shared[t] = x[t]
        cuda.syncthreads()
    out[t] = shared[0]


@cuda.jit
def barrier_in_a_thread_dependent_loop(x, out):
    shared = cuda.shared.array(64, np.float32)
    t = cuda.threadIdx.x
    shared[t] = x[t]
    stride = t + 1
    while stride < 64:
        shared[t] += shared[(t + stride) % 64]
        cuda.syncthreads()
        stride *= 2
    out[t] = shared[t]


@cuda.jit
def barrier_after_an_early_return(x, out):
    shared = cuda.shared.array(64, np.float32)
    i = cuda.grid(1)
    if i >= x.shape[0]:
        return
    shared[cuda.threadIdx.x] = x[i]
    cuda.syncthreads()
    out[i] = shared[0]


@cuda.jit
def barrier_skipped_by_break(x, out):
    shared = cuda.shared.array(64, np.float32)
    t = cuda.threadIdx.x
    for step in range(6):
        if t > step:
            break
        shared[t] = x[t]
        cuda.syncthreads()
    out[t] = shared[0]


@cuda.jit
def tree_with_uniform_barriers(x, out):
    shared = cuda.shared.array(64, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    shared[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            shared[t] += shared[t + stride]
        cuda.syncthreads()
        stride //= 2
    for _ in range(3):
        cuda.syncthreads()
    if t == 0:
        cuda.atomic.add(out, 0, shared[0])


@pytest.mark.parametrize(("kernel", "words", "hint"), [
    (barrier_inside_the_guard, "inside `if i < x.shape[0]:`", checks.BARRIER_HINT),
    (barrier_in_the_else, "inside `if t >= x.shape[0]:`", checks.BARRIER_HINT),
    (barrier_in_a_thread_dependent_loop, "depends on the thread", checks.BARRIER_LOOP_HINT),
    (barrier_after_an_early_return, "leave before a barrier", checks.BARRIER_EXIT_HINT),
    (barrier_skipped_by_break, "skip a barrier in the loop", checks.BARRIER_EXIT_HINT),
])
def test_a_barrier_that_some_threads_skip_is_rejected(kernel, words, hint):
    with pytest.raises(checks.CheckFailedError) as failure:
        checks.start_kernel(kernel, 2, "")
    assert failure.value.message.startswith(checks.BARRIER_IN_BRANCH)
    assert words in failure.value.message
    assert failure.value.hint == hint


def test_barriers_that_every_thread_reaches_are_accepted():
    assert checks.barrier_problems(checks.kernel_source(tree_with_uniform_barriers, 2)) == []


def test_no_gpulab_kernel_has_a_barrier_some_threads_skip():
    import inspect
    import textwrap

    from gpulab.kernels.registry import DEVICE_FUNCTIONS, load_all

    functions = [spec.python_function for spec in load_all().values()]
    for function in [*functions, *DEVICE_FUNCTIONS.values()]:
        source = textwrap.dedent(inspect.getsource(function))
        tree = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef))
        kernel = checks.KernelSource(function, source, tree)
        assert checks.barrier_problems(kernel) == [], function.__name__


# --- a kernel that never finishes fails the check -------------------------------------------------


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
        out = checks.run_elementwise(kernel, trial, trial.uniform(0, 1))
        return f"ran, {out.size} elements"

    return checks.run_check("demo", body, seed=seed, show=False)


@SIM_ONLY
@pytest.mark.parametrize("kernel", [grid_stride_step_zero, grid_stride_step_by_thread])
def test_a_grid_stride_loop_with_a_wrong_step_fails_instead_of_hanging(kernel):
    import time

    started = time.perf_counter()
    result = _copy_check(kernel)
    assert result.status == checks.FAILED
    assert result.message.startswith(checks.DID_NOT_FINISH)
    assert result.hint == checks.DID_NOT_FINISH_HINT
    assert result.trace_call == ""  # tracing it would stop the same way
    assert time.perf_counter() - started < 40


@SIM_ONLY
def test_a_loop_without_array_accesses_fails_at_the_time_limit(monkeypatch):
    monkeypatch.setitem(checks.TIME_LIMIT_S, "sim", 1.5)
    result = _copy_check(spins_forever)
    assert result.status == checks.FAILED and result.message.startswith(checks.DID_NOT_FINISH)
    assert "more than 1.5 s" in result.message


# --- a failure offers the trace -----------------------------------------------------------------


@cuda.jit
def copy_off_by_one(x, out):
    i = cuda.grid(1)
    if i < x.shape[0] - 1:
        out[i] = x[i + 1]


def test_a_wrong_answer_ends_with_the_call_that_traces_the_kernel():
    def body(seed):
        trial = Trial.draw("check_demo", seed, np.float32, block=32)
        x = trial.uniform(0, 1)
        out = checks.run_elementwise(copy_off_by_one, trial, x)
        failure = checks.diagnose_vector(x, out, trial)
        if failure:
            raise failure
        return "right"

    result = checks.run_check("demo", body, seed=2, show=False)
    assert result.status == checks.FAILED
    call = "gpulab.trace(copy_off_by_one, 2, 8, x, out).draw()"
    assert result.trace_call.startswith(call)
    assert str(result).splitlines()[-1] == f"   See what your kernel did: {result.trace_call}"
    passed = checks.run_check("demo", lambda seed: "fine", seed=1, show=False)
    assert passed.trace_line == "" and "See what" not in str(passed)


def test_a_check_can_offer_its_own_trace_call():
    def body(seed):
        checks.offer_trace(multiply, 1, 4, "x", "y", "out", note="x, y, out of 4 elements")
        raise checks.CheckFailedError("wrong", "look")

    result = checks.run_check("demo", body, seed=1, show=False)
    assert result.trace_call == ("gpulab.trace(multiply, 1, 4, x, y, out).draw()  "
                                 "(x, y, out of 4 elements)")


@SIM_ONLY
def test_trace_trial_counts_what_the_learners_kernel_did():
    trial = Trial.draw("check_demo", 3, np.float32, block=8, shape=(13,))
    x, y = trial.uniform(0, 1), trial.uniform(0, 1)
    trace = checks.trace_trial(multiply, trial, x, y, np.zeros(13, np.float32))
    assert trace.launch == "2 blocks of 8 threads"
    assert trace.max_per_thread("global_reads") == 2
    assert trace.per_block("global_writes") == {0: 8, 1: 5}
    np.testing.assert_allclose(trace.arrays["out"], x * y)
    assert trace.draw() is not None  # gpulab.plots was loaded for it


def test_watch_host_code_records_clocks_however_imported_and_cuda_events():
    import time

    def host(clock_module=time):
        now_from_time_import()  # `from time import perf_counter as ...`, a global
        clock_module.process_time_ns()
        start = cuda.event()
        start.record()
        start.synchronize()
        start.elapsed_time(start)

    with checks.watch_host_code(host) as watch:
        host()
    kinds = [kind for kind, _ in watch.events]
    assert kinds == ["clock", "cpu_clock", "clock", "synchronize", "elapsed"], kinds
    assert watch.events[0][1][0] == "perf_counter" and watch.events[1][1][0] == "process_time_ns"
    assert watch.events[2][1] == ("event", None)
    assert now_from_time_import is time.perf_counter  # restored


def test_every_chapters_checks_are_exported_from_the_package():
    import importlib

    import gpulab.exercises as exercises

    for chapter in range(13):
        module = importlib.import_module(f"gpulab.exercises.ch{chapter:02d}")
        for name in (n for n in module.__all__ if n.startswith("check_")):
            assert getattr(exercises, name) is getattr(module, name), name
