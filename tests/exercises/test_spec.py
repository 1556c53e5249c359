"""A check declared as a spec (gpulab.exercises.spec): the steps every check shares around its
body, the rule that a kernel works under any block size, and the instructors' table."""

import gpulab  # noqa: F401  (must come before numba: it chooses the simulator or the GPU)

# isort: split
import importlib
import inspect
import re

import numpy as np
import pytest
from learner_kernels import copy_guarded
from numba import cuda

from gpulab import reference
from gpulab.exercises import outputs, results, running, source_rules
from gpulab.exercises.mistakes import Mistake
from gpulab.exercises.results import CheckFailedError
from gpulab.exercises.spec import CheckSpec, under_two_blocks
from gpulab.exercises.trial import Trial
from gpulab.kernels.elementwise import elementwise_multiply

SPEC = CheckSpec("demo", "demo(x) -> int", "write demo.",
                 (Mistake("returned one", lambda e: e == 1, "one is not it", "try two."),))


def test_a_spec_runs_its_body_as_a_check_with_its_seed():
    result = SPEC.run(lambda seed: f"fine (seed={seed})", seed=3, show=False)
    assert result.passed and result.message == "fine (seed=3)" and result.seed == 3
    result = SPEC.run(lambda seed: SPEC.reject(1), seed=3, show=False)
    assert result.status == "failed" and result.message == "one is not it."


def test_gpulab_s_own_code_is_not_the_learner_s():
    result = SPEC.run(lambda seed: "fine", seed=1, show=False, learner=(reference.multiply,))
    assert result.status == "failed"
    assert "`multiply` is gpulab's own `gpulab.reference.multiply`" in result.message

    def calls_the_reference(x, y):
        return reference.multiply(x, y)

    result = SPEC.run(lambda seed: "fine", seed=1, show=False, learner=(calls_the_reference,))
    assert "uses gpulab's own `gpulab.reference (as `reference`)`" in result.message
    allowed = CheckSpec("demo", "demo", "", allowed_gpulab=("gpulab.reference",))
    assert allowed.run(lambda seed: "fine", seed=1, show=False,
                       learner=(calls_the_reference,)).passed


def test_a_replaced_part_of_the_check_is_named(monkeypatch):
    def body(seed):
        monkeypatch.setattr(outputs, "matches", lambda *args: True)
        return "fine"

    result = SPEC.run(body, seed=1, show=False)
    assert result.status == "failed"
    assert "replaced while the check ran your code: `gpulab.exercises.outputs.matches`" in (
        result.message)


def test_the_mistake_table_lists_each_mistake_in_order():
    assert SPEC.mistake_table().splitlines()[-1] == "| returned one | outputs |"


@cuda.jit
def copy_for_64(x, out):
    i = cuda.blockIdx.x * 64 + cuda.threadIdx.x
    if i < x.shape[0]:
        out[i] = x[i]


def run_copy(kernel):
    def run(trial):
        x = trial.uniform(0, 1)
        failure = outputs.vector_failure(x, running.run_elementwise(kernel, trial, x), trial)
        if failure:
            raise failure
        return trial.threads_per_block
    return run


def test_a_kernel_right_under_one_block_size_only_fails_and_is_named():
    trial = Trial.draw("check_demo", 1, block=64, size_range=(150, 250))
    source = source_rules.kernel_source(copy_for_64, 2)
    result = results.run_check("demo", lambda seed: str(under_two_blocks(
        run_copy(copy_for_64), trial, source)), seed=1, show=False)
    assert "right with 64 threads per block but not with 32" in result.message
    assert "`i = cuda.blockIdx.x * 64 + cuda.threadIdx.x` hard-codes the block size" in (
        result.message)
    assert under_two_blocks(run_copy(copy_guarded), trial,
                            source_rules.kernel_source(copy_guarded, 2)) == 64


def test_gpulab_s_own_kernel_is_named():
    spec = CheckSpec("demo", "demo", "", parameters=3)
    result = spec.run(lambda seed: "fine", seed=1, show=False, learner=(elementwise_multiply,))
    assert "is gpulab's own `gpulab.kernels.elementwise.elementwise_multiply`" in result.message
    assert np.isfinite(result.seed)


def test_a_body_becomes_the_check_function_with_its_signature():
    import inspect

    @SPEC.check(learners=("function",))
    def check_demo(function, times: int = 2, seed: int | None = None) -> str:
        return f"{function(times)} (seed={seed})"

    def doubled(n):
        return 2 * n

    assert list(inspect.signature(check_demo).parameters) == ["function", "times", "seed", "show"]
    result = check_demo(doubled, 3, seed=5, show=False)
    assert result.passed and result.message == "6 (seed=5)"
    assert SPEC.passed(doubled) and not SPEC.passed(lambda n: n)
    assert SPEC.unpassed_note(doubled, "gpulab's demo runs") == ""
    assert SPEC.unpassed_note(None, "gpulab's demo runs") == ""
    note = SPEC.unpassed_note(lambda n: n, "gpulab's demo runs")
    assert note == ("your kernel has not passed its check since you last changed it (run its "
                    "check again): gpulab's demo runs instead.")


def test_a_check_function_is_described_by_its_spec_first():
    spec = CheckSpec("demo", "demo(x) -> int", "write demo.", SPEC.mistakes, title="1. demo",
                     holds="demo(x) is 2x", also="an exception (named)")

    @spec.check
    def check_demo(function, seed: int | None = None) -> str:
        """Tried on 3 random x."""
        return "fine"

    assert check_demo.__doc__ == ("1. demo: checks ``demo(x) -> int``.\n\n"
                                  "Passes when: demo(x) is 2x.\n\n"
                                  "Diagnoses: returned one; an exception (named).\n\n"
                                  "Tried on 3 random x.")


def test_every_check_is_described_in_one_place():
    """Each chapter's check functions show their spec's description, and a body's own
    docstring says how the check works, not a second list of what it diagnoses."""
    from gpulab.exercises import instructors

    for chapter in instructors.CHAPTERS:
        module = __import__(f"gpulab.exercises.{chapter}", fromlist=["_"])
        specs = instructors.specs(chapter)
        checks = [value for name, value in vars(module).items()
                  if name.startswith("check_") and callable(value)]
        for spec in specs:
            assert any(spec.described() in (check.__doc__ or "") for check in checks), (
                f"{chapter}: no check function is described by {spec.exercise!r}")
        for check in checks:
            how = check.__doc__ or ""
            for spec in specs:
                how = how.replace(spec.described(), "")
            assert "Diagnoses:" not in how and "Diagnoses " not in how, (
                f"{chapter}.{check.__name__} lists what it diagnoses a second time")


def test_try_launch_says_what_stopped_the_kernel(capsys):
    from gpulab.exercises.spec import try_launch

    @cuda.jit
    def stub(x, out):
        raise NotImplementedError

    @cuda.jit
    def no_guard(x, out):
        i = cuda.grid(1)
        out[i] = x[i] + 1

    trial = Trial.draw("try_it", 0, np.float32, block=8, shape=(10,))
    x = np.arange(10, dtype=np.float32)
    assert not try_launch(stub, trial, x, np.zeros(10, np.float32))
    assert capsys.readouterr().out == "not written yet\n"
    assert not try_launch(no_guard, trial, x, np.zeros(10, np.float32), label="launch 1")
    assert capsys.readouterr().out.startswith("launch 1 stopped: ")


def test_a_block_size_the_caller_chose_runs_once():
    ran = []
    trial = Trial.draw("check_demo", 2, np.float32, block=32)
    assert under_two_blocks(lambda t: ran.append(t.threads_per_block) or "first", trial, None,
                            once=True) == "first"
    assert ran == [32]


def test_yours_or_gpulab_s_kernel():
    def mine(n):
        return n

    assert SPEC.yours_or_gpulabs(None, "demo") == (None, "gpulab's demo", "")
    kernel, whose, note = SPEC.yours_or_gpulabs(mine, "demo", "ran")
    assert kernel is None and whose == "gpulab's demo"
    assert note.endswith("gpulab's demo ran instead.")
    SPEC.check(lambda function, seed=None: "fine")(mine, show=False)
    assert SPEC.yours_or_gpulabs(mine, "demo") == (mine, "your mine", "")


def _every_check():
    """(check function, the names of its learner's code) for every spec of every chapter whose
    check runs the learner's code (ch07's check_training judges a finished run instead)."""
    from gpulab.exercises import instructors

    for chapter in instructors.CHAPTERS:
        module = importlib.import_module(f"gpulab.exercises.{chapter}")
        for spec in instructors.specs(chapter):
            check = getattr(module, re.match(r"(\w+)\(", spec.call).group(1))
            parameters = inspect.signature(check).parameters
            learners = [name for name, p in parameters.items() if p.default is p.empty]
            if "seed" in parameters:
                yield pytest.param(check, learners, id=f"{chapter}.{spec.exercise}")


def _calls_the_reference(*args, **kwargs):
    return reference.dot(*args)


def _does_nothing(*args, **kwargs):
    return None


@pytest.mark.parametrize(("check", "learners"), list(_every_check()))
def test_every_check_refuses_gpulab_s_own_work_and_a_patched_check(check, learners,
                                                                   monkeypatch):
    """Whatever the exercise: a learner function that only calls gpulab's reference is told
    so, and so is one handed in after a part of the check was replaced."""
    result = check(**dict.fromkeys(learners, _calls_the_reference), seed=1, show=False)
    assert result.status == "failed" and "uses gpulab's own `gpulab.reference" in (
        result.message), result
    monkeypatch.setattr(reference, "dot", lambda *args: 0.0)
    result = check(**dict.fromkeys(learners, _does_nothing), seed=1, show=False)
    assert result.status == "failed" and (
        "part of the check was replaced before the check: `gpulab.reference.dot`" in
        result.message), result


@pytest.mark.parametrize("options", [{"threads_per_block": 0}, {"threads_per_block": 2048},
                                     {"threads_per_block": 32.5}, {"seed": "one"},
                                     {"seed": -1}])
def test_a_seed_or_block_a_check_cannot_run_with_is_a_clear_error(options):
    from gpulab.exercises import ch01

    with pytest.raises(ValueError, match="seed|threads_per_block"):
        ch01.check_multiply(None, **options)


def test_a_number_past_float_s_range_is_told_not_a_bug():
    from gpulab.exercises import ch08

    result = ch08.check_launch_bound(lambda widths, gpu: 10**400, seed=1, show=False)
    assert result.status == "failed" and "bug" not in result.message, result
    assert "positive, finite number" in result.message, result


LOCAL_SLOTS = 48


@cuda.jit
def copy_through_a_local_array(x, out):
    kept = cuda.local.array(LOCAL_SLOTS, np.float32)  # a slot per element: 48 at most
    if cuda.grid(1) == 0:
        for i in range(x.shape[0]):
            kept[i] = x[i]
        for i in range(x.shape[0]):
            out[i] = kept[i]


def test_a_spec_that_counts_from_the_arrays_refuses_a_local_array_of_a_length_typed_in():
    spec = CheckSpec("demo", "copy(x, out)", "", parameters=2,
                     counted_from_the_arrays="a row's values")
    with pytest.raises(CheckFailedError, match="in a local array of 48: right only while"):
        spec.start(copy_through_a_local_array)
    assert spec.tried[0].did == "a local array of a length typed in, for a row's values"
    assert "| a local array of a length typed in, for a row's values | source |" in (
        spec.mistake_table())
    assert spec.start(copy_guarded) is not None  # no local array
    plain = CheckSpec("demo", "copy(x, out)", "", parameters=2)
    assert plain.start(copy_through_a_local_array) is not None and plain.tried == ()
