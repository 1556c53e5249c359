"""The learner's own work and an intact check (gpulab.exercises.learner_code)."""

import gpulab  # noqa: F401  (must come before numba: it chooses the simulator or the GPU)

# isort: split
import functools

import numpy as np
import pytest
from numba import cuda

from gpulab import reference
from gpulab.exercises import learner_code
from gpulab.kernels.dot import block_tree_sum, dot_atomic
from gpulab.serving import loadtest


def own_sum(x):
    return float(np.sum(x))


def helper(x):
    return reference.dot(x, x)


def indirect(x):
    return helper(x)


def test_the_learner_s_own_function_uses_nothing_of_gpulab():
    assert learner_code.gpulab_things_used(own_sum) == []


def test_gpulab_used_directly_or_through_a_helper_is_found():
    assert learner_code.gpulab_things_used(helper) == ["gpulab.reference (as `reference`)"]
    assert learner_code.gpulab_things_used(indirect) == ["gpulab.reference (as `reference`)"]
    assert learner_code.gpulab_things_used(helper, allowed=("gpulab.reference",)) == []


@cuda.jit
def kernel_with_gpulab_tree(x, out):
    partial = cuda.shared.array(64, np.float32)
    block_tree_sum(partial)


def test_gpulab_kernels_and_device_functions_are_found():
    assert learner_code.gpulab_things_used(dot_atomic) == ["gpulab.kernels.dot.dot_atomic"]
    assert learner_code.gpulab_things_used(kernel_with_gpulab_tree) == [
        "gpulab.kernels.dot.block_tree_sum (as `block_tree_sum`)"]


def test_a_replaced_function_is_named_until_it_is_put_back(monkeypatch):
    learner_code.remember_originals()
    assert learner_code.replaced_parts() == []
    monkeypatch.setattr(np, "allclose", lambda *args, **kwargs: True)
    assert learner_code.replaced_parts() == ["numpy.allclose"]
    monkeypatch.undo()
    assert learner_code.replaced_parts() == []


def imports_gpulab_in_its_body(x):
    from gpulab import reference as ref

    return ref.dot(x, x)


def imports_a_gpulab_module_in_its_body(n, batch_size, rng):
    import gpulab.nn.data as data

    return list(data.minibatch_indices(n, batch_size, rng))


def reaches_gpulab_by_name(n, threads):
    import sys

    return sys.modules["gpulab.kernels.launch"].one_thread_per_element(n, threads)


def calls_a_helper_that_imports(x):
    return imports_gpulab_in_its_body(x)


def imports_only_numpy_in_its_body(x):
    import numpy

    return float(numpy.sum(x))


def test_gpulab_imported_inside_the_function_is_found():
    assert learner_code.gpulab_things_used(imports_gpulab_in_its_body) == [
        "gpulab.reference (imported in `imports_gpulab_in_its_body`)"]
    assert learner_code.gpulab_things_used(imports_a_gpulab_module_in_its_body) == [
        "gpulab.nn.data (imported in `imports_a_gpulab_module_in_its_body`)"]
    assert learner_code.gpulab_things_used(reaches_gpulab_by_name) == [
        "gpulab.kernels.launch (imported in `reaches_gpulab_by_name`)"]
    assert learner_code.gpulab_things_used(calls_a_helper_that_imports) == [
        "gpulab.reference (imported in `imports_gpulab_in_its_body`)"]
    assert learner_code.gpulab_things_used(imports_only_numpy_in_its_body) == []
    assert learner_code.gpulab_things_used(imports_gpulab_in_its_body,
                                           allowed=("gpulab.reference",)) == []


def test_a_check_refuses_a_function_that_imports_gpulab_in_its_body():
    from gpulab.exercises import ch07

    result = ch07.check_minibatches(imports_a_gpulab_module_in_its_body, seed=1, show=False)
    assert not result.passed
    assert "gpulab's own `gpulab.nn.data (imported in" in result.message


def test_a_replaced_chapter_function_or_method_is_named(monkeypatch):
    from gpulab.exercises import ch02, spec

    learner_code.remember_originals()
    monkeypatch.setattr(ch02, "vector_failure", lambda *args, **kwargs: None)
    monkeypatch.setattr(spec.CheckSpec, "reject", lambda self, evidence: None)
    assert set(learner_code.replaced_parts()) == {
        "gpulab.exercises.ch02.vector_failure", "gpulab.exercises.spec.CheckSpec.reject"}
    monkeypatch.undo()
    assert learner_code.replaced_parts() == []


def test_a_check_whose_chapter_was_patched_says_so(monkeypatch):
    from gpulab.exercises import ch00

    learner_code.remember_originals()
    monkeypatch.setattr(ch00, "call_learner", lambda function, n, threads, **kwargs: 1)
    result = ch00.check_blocks_for(lambda n, threads_per_block: 1, seed=1, show=False)
    assert not result.passed
    assert "part of the check was replaced before the check" in result.message
    assert "`gpulab.exercises.ch00.call_learner`" in result.message


def percentile_ignoring_q_patching_sorted(samples, q):
    """Returns the max, and makes the check's own sorted() agree (round 16)."""
    import builtins

    builtins.sorted = lambda values, **kwargs: [max(values)] * len(list(values))
    return max(samples)


def percentile_ignoring_q_patching_a_private_helper(samples, q):  # the module by a built name
    import importlib

    module = importlib.import_module(".".join(["gpulab", "exercises", "ch12"]))
    setattr(module, "_" + "percentile_case", lambda *args, **kwargs: None)
    return max(samples)


@pytest.mark.parametrize(("cheat", "part"), [
    (percentile_ignoring_q_patching_sorted, "`builtins.sorted`"),
    (percentile_ignoring_q_patching_a_private_helper, "`gpulab.exercises.ch12._percentile_case`"),
])
def test_a_patched_builtin_or_private_helper_is_named(cheat, part, monkeypatch):
    import builtins

    from gpulab.exercises import ch12

    monkeypatch.setattr(builtins, "sorted", builtins.sorted)  # put back after the test
    monkeypatch.setattr(ch12, "_percentile_case", ch12._percentile_case)
    result = ch12.check_percentile(cheat, seed=1, show=False)
    assert not result.passed
    assert "part of the check was replaced while the check ran your code" in result.message
    assert part in result.message, result.message


def percentile_ignoring_q_patching_the_check(samples, q):  # its module named in the code
    from gpulab.exercises import ch12

    ch12.nearest_rank = lambda values, q: max(values)
    return max(samples)


def test_a_function_that_sets_attributes_of_a_check_s_module_is_told_so(monkeypatch):
    from gpulab.exercises import ch12

    monkeypatch.setattr(ch12, "nearest_rank", ch12.nearest_rank)  # put back after the test
    result = ch12.check_percentile(percentile_ignoring_q_patching_the_check, seed=1, show=False)
    assert not result.passed
    assert ("`percentile_ignoring_q_patching_the_check` reaches the check's own "
            "gpulab.exercises.ch12 and sets attributes (`nearest_rank`): it would replace part "
            "of the check") in result.message, result.message


def dense_backward_patching_numpy_inside(X, W, dZ):  # np.allclose's own isclose (round 17)
    import sys

    sys.modules["numpy._core.numeric"].isclose = lambda *args, **kwargs: np.True_
    return np.zeros_like(W), np.zeros(W.shape[1]), np.zeros_like(X)


def dense_backward_patching_through_dict(X, W, dZ):  # a check's helper, through __dict__
    import sys

    sys.modules["gpulab.exercises.ch06"].__dict__["_close"] = lambda *args: True
    return np.zeros_like(W), np.zeros(W.shape[1]), np.zeros_like(X)


@pytest.mark.parametrize(("cheat", "words"), [
    (dense_backward_patching_numpy_inside, "`numpy._core.numeric.isclose` is no longer"),
    (dense_backward_patching_through_dict, "sets attributes (`__dict__`): it would replace part"),
])
def test_patches_of_numpy_s_insides_or_a_module_s_dict_are_named(cheat, words, monkeypatch):
    import numpy._core.numeric as numeric

    from gpulab.exercises import ch06

    monkeypatch.setattr(numeric, "isclose", numeric.isclose)  # put back after the test
    monkeypatch.setattr(ch06, "_close", ch06._close)
    result = ch06.check_dense_backward(cheat, seed=1, show=False)
    assert not result.passed
    assert words in result.message, result.message


class PercentileObject:  # gpulab's own function behind an object's __call__
    __call__ = staticmethod(loadtest.percentile)


@pytest.mark.parametrize("cheat", [functools.partial(loadtest.percentile), PercentileObject()])
def test_gpulab_s_function_behind_a_partial_or_an_object_is_refused(cheat):
    from gpulab.exercises import ch12

    result = ch12.check_percentile(cheat, seed=1, show=False)
    assert not result.passed
    assert ("`percentile` is gpulab's own `gpulab.serving.loadtest.percentile`"
            in result.message), result.message


def prints_the_word_gpulab(x):
    print("gpulab", "gpulab.is a word here")
    return float(np.sum(x))


def test_text_that_only_mentions_gpulab_is_not_a_use_of_it():
    assert learner_code.gpulab_things_used(prints_the_word_gpulab) == []


def test_a_refused_name_in_an_allowed_module_is_found_however_it_is_reached():
    from gpulab.nn import cost

    def through_the_module(widths):
        return cost.estimate_step(widths, 1).time_s

    def by_its_own_name(widths):
        return estimate_step(widths, 1).time_s

    def through_the_package(widths):
        import gpulab as package
        return package.nn.cost.estimate_step(widths, 1).time_s

    def only_the_counts(widths):
        return len(cost.step_kernels(widths, 1))

    estimate_step = cost.estimate_step
    allowed, refused = ("gpulab.nn.cost",), ("gpulab.nn.cost.estimate_step",)
    for function in (through_the_module, by_its_own_name, through_the_package):
        used = learner_code.gpulab_things_used(function, allowed, refused)
        assert used and used[0].startswith("gpulab.nn.cost.estimate_step"), (function, used)
    assert learner_code.gpulab_things_used(only_the_counts, allowed, refused) == []
    assert learner_code.gpulab_things_used(through_the_module, allowed) == []


def test_modules_used_finds_a_library_imported_or_global():
    import struct

    from gpulab.exercises.learner_code import modules_used

    def imports_it(code):
        import ml_dtypes  # noqa: F401

        return code

    def reads_it(code):
        return struct.unpack("<e", bytes([code, 0]))[0]

    def calls_one_that_does(code):
        return reads_it(code)

    assert modules_used(imports_it, ("ml_dtypes",)) == ["ml_dtypes"]
    assert modules_used(calls_one_that_does, ("ml_dtypes", "struct")) == ["struct"]
    assert modules_used(lambda code: code + 1, ("ml_dtypes", "struct")) == []


def test_a_chapters_reference_imported_in_the_body_is_found():
    """The checks' references live in the chapter modules: importing one inside the function
    is gpulab's own work, as a global of the module is; the other exercise modules are not
    (what a function does to them is replaced_parts' to tell)."""

    def joules(times_s, watts, n):
        from gpulab.exercises.ch12 import trapezoid

        return trapezoid(times_s, watts) / n * 1000

    def ring_time(n_bytes, n_ranks, alpha_s, beta):
        from gpulab.exercises import ch11

        return ch11.links.ring_allreduce_time(n_bytes, n_ranks, alpha_s, beta)

    def only_a_result_type(x):
        from gpulab.exercises.results import CheckResult  # noqa: F401

        return x

    assert learner_code.gpulab_things_used(joules) == [
        "gpulab.exercises.ch12.trapezoid (imported in `joules`)"]
    assert learner_code.gpulab_things_used(ring_time)[0].startswith("gpulab.exercises.ch11")
    assert learner_code.gpulab_things_used(only_a_result_type) == []


def test_a_check_tells_a_function_that_imports_its_chapters_reference():
    from gpulab.exercises import ch10

    def update_loss_scale(scale, clean_steps, found_inf, growth_interval):
        from gpulab.exercises.ch10 import _reference_step

        return _reference_step(scale, clean_steps, found_inf, growth_interval)

    result = ch10.check_loss_scale_update(update_loss_scale, seed=1, show=False)
    assert result.status == "failed" and "gpulab's own" in result.message, result


def test_the_watch_follows_threads_the_learner_s_code_starts():
    import sys
    import threading

    from gpulab.nn import cost

    profiles = {}

    def in_a_thread(widths):
        def run():
            profiles["thread"] = sys.getprofile()
            cost.estimate_step(widths, 1)

        thread = threading.Thread(target=run)
        thread.start()
        thread.join()

    from gpulab.exercises.running import call_learner

    called: list[str] = []
    with learner_code.calls_from_outside_gpulab((), called):
        call_learner(in_a_thread, [4, 3])  # watched as a check watches the learner's call
    assert called == ["gpulab.nn.cost.estimate_step"] and profiles["thread"] is not None


def test_a_parameter_the_code_never_reads_is_named():
    def typed_in(kernel, repeats):
        return [kernel for _ in range(5)]

    def read(kernel, repeats):
        return [kernel for _ in range(repeats)]

    def read_in_a_closure(kernel, count):
        def launch_all():
            return [kernel] * count
        return launch_all()

    def reassigned_then_read(kernel, repeats):
        repeats = 5
        return [kernel] * repeats

    def through_args(*args):
        return args[0]

    def through_locals(kernel, repeats):
        return locals()["repeats"]

    assert learner_code.parameter_unread(typed_in, 1) == "repeats"
    for function in (read, read_in_a_closure, reassigned_then_read, through_args,
                     through_locals):
        assert learner_code.parameter_unread(function, 1) is None, function
    assert learner_code.parameter_unread(typed_in, 0) is None  # the kernel is read
    assert learner_code.parameter_unread(typed_in, 2) is None  # no third parameter


def _module(*parts):
    import importlib
    return importlib.import_module(".".join(parts))


def cheat_loss_scaler(scale, clean_steps, found_inf, growth_interval):
    scaler = getattr(_module("gpulab", "nn", "mixed_precision"), "Loss" + "Scaler")(
        init_scale=scale, growth_interval=growth_interval)
    scaler.clean_steps = clean_steps
    take = scaler.update(found_inf)
    return scaler.scale, scaler.clean_steps, take


def cheat_percentile(latencies, q):
    found = getattr(_module("gpulab", "exercises", "ch" + "12"), "Perc" + "entile")(
        None, list(latencies), q, "")
    return found.ordered[found.rank - 1]


def cheat_joules(times_s, watts, n_inferences):
    return getattr(_module("gpulab", "exercises", "ch" + "12"), "Jou" + "les")(
        None, np.asarray(times_s), np.asarray(watts), n_inferences, 0.0, "").want


def cheat_ring_time(n_bytes, n_ranks, alpha_s, beta_bytes_per_s):
    return getattr(_module("gpulab", "exercises", "ch" + "11"), "Time" + "Answer")(
        n_bytes, n_ranks, alpha_s, beta_bytes_per_s, 0.0, 0).want


def cheat_activation_bytes(widths, batch_size, itemsize):
    return getattr(_module("gpulab", "exercises", "ch" + "09"), "By" + "tes")(
        list(widths), batch_size, itemsize, 0, 0).expected


@pytest.mark.parametrize("chapter, check, cheat, reached", [
    ("ch10", "check_loss_scale_update", cheat_loss_scaler, "mixed_precision.LossScaler"),
    ("ch12", "check_percentile", cheat_percentile, "ch12.Percentile"),
    ("ch12", "check_joules_per_thousand", cheat_joules, "ch12.Joules"),
    ("ch11", "check_allreduce_time", cheat_ring_time, "ch11.TimeAnswer"),
    ("ch09", "check_activation_bytes", cheat_activation_bytes, "ch09.Bytes"),
])
def test_a_reference_reached_through_a_gpulab_class_s_method_is_refused(chapter, check, cheat,
                                                                         reached):
    """The check's own evidence classes (their expected value a property) and gpulab's
    reference objects, built by the learner's code from a module name made at run time."""
    result = getattr(_module("gpulab", "exercises", chapter), check)(cheat, seed=1, show=False)
    assert result.status == "failed", result
    assert "your code called gpulab's own" in result.message and reached in result.message, (
        result.message)


def _nearest_rank():
    return getattr(_module("gpulab", "exercises", "ch" + "12"), "nearest" + "_rank")


def cheat_switching_the_watch_off(latencies, q):
    import sys
    sys.setprofile(None)
    return _nearest_rank()(latencies, q)


def cheat_switching_it_off_and_on(latencies, q):
    import sys
    hook = sys.getprofile()
    sys.setprofile(None)
    try:
        return _nearest_rank()(latencies, q)
    finally:
        sys.setprofile(hook)


def cheat_switching_threads_off(latencies, q):
    import threading
    threading.setprofile(None)
    found = {}
    thread = threading.Thread(target=lambda: found.setdefault("p", _nearest_rank()(latencies, q)))
    thread.start()
    thread.join()
    return found["p"]


def cheat_through_call_learner(latencies, q):
    running = _module("gpulab", "exercises", "running")
    return getattr(running, "call" + "_learner")(_nearest_rank(), list(latencies), q)


@pytest.mark.parametrize("cheat, said", [
    (cheat_switching_the_watch_off, "your code called `sys.setprofile`"),
    (cheat_switching_it_off_and_on, "your code called `sys.setprofile`"),
    (cheat_switching_threads_off, "your code called `threading.setprofile`"),
    (cheat_through_call_learner, "gpulab.exercises.running.call_learner"),
])
def test_switching_the_watch_off_or_calling_through_the_check_s_machinery_is_refused(cheat,
                                                                                    said):
    """The watch sees its own hook switched off (even when put back after), and a reference
    handed to the check's own ``call_learner``, which would call it from gpulab's code."""
    import sys
    import threading

    from gpulab.exercises import ch12
    before = sys.getprofile(), threading.getprofile()
    result = ch12.check_percentile(cheat, seed=1, show=False)
    assert result.status == "failed" and said in result.message, result.message
    assert (sys.getprofile(), threading.getprofile()) == before  # the check put its hook back


def test_a_right_answer_that_only_reads_the_profile_hook_passes():
    import sys

    from gpulab.exercises import ch12

    def percentile(latencies, q):
        assert sys.getprofile() is not None  # reading it switches nothing off
        ordered = sorted(latencies)
        return ordered[max(1, -(-int(round(q * 10)) * len(ordered) // 1000)) - 1]

    result = ch12.check_percentile(percentile, seed=1, show=False)
    assert result.passed, result.message


def test_an_exception_inside_the_learner_s_code_is_not_told_as_a_switched_off_watch():
    from gpulab.exercises import ch12

    def percentile(latencies, q):
        raise ValueError("no latencies today")

    result = ch12.check_percentile(percentile, seed=1, show=False)
    assert result.status == "failed" and "ValueError" in result.message, result.message
