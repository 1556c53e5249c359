"""Judging a kernel's output (gpulab.exercises.outputs): the known mistakes of a kernel with one
thread per element, 1-D and 2-D, are walked in order by gpulab.exercises.mistakes.diagnose and
each is named in the message."""

import gpulab  # noqa: F401  (must come before numba: it chooses the simulator or the GPU)

# isort: split
import numpy as np
import pytest

from gpulab.exercises import outputs, results
from gpulab.exercises.mistakes import diagnose
from gpulab.exercises.trial import Trial

TRIAL = Trial.draw("check_demo", 3, np.float32, block=32)
X = TRIAL.uniform(-1, 1)
N, TPB = TRIAL.n, TRIAL.threads_per_block


TWICE = outputs.looks_like("2 x", lambda e: 2 * e.inputs["x"], "halve it")


def unwritten(start, stop=None):
    got = X.copy()
    got[start:stop] = np.nan
    return got


@pytest.mark.parametrize(("got", "did", "words"), [
    (np.full_like(X, np.nan), "nothing written", "wrote nothing into out"),
    (np.roll(X, 1), "an index one off", "out[i] got element i - 1"),
    (np.roll(X, -1), "an index one off", "out[i] got element i + 1"),
    (unwritten(TPB), "every block on the first block's elements", "only the first block's"),
    (unwritten((TRIAL.blocks - 1) * TPB), "the last, partial block skipped",
     "every block except the last"),
    (unwritten(-1), "the last element skipped", "the last element(s) were skipped"),
    (unwritten(5, 6), "elements never written", "were never written (out[5])"),
    (2 * X, "2 x", "out looks like 2 x"),
    (np.where(np.arange(N) >= N - 3, X + 1, X), "only the last, partial block wrong",
     "only the last, partial block is wrong"),
    (np.where(np.arange(N) == 7, X + 1, X), "wrong values", "the first is out[7]"),
])
def test_each_elementwise_mistake_is_named(got, did, words):
    failure = outputs.vector_failure(X, got, TRIAL, mistakes=(TWICE,), inputs={"x": X})
    assert isinstance(failure, results.CheckFailedError)
    assert words in failure.message and failure.message.endswith(f"({TRIAL}).")
    evidence = outputs.Elementwise(X, got, TRIAL, inputs={"x": X})
    mistakes = outputs.elementwise_mistakes((TWICE,))
    seen = next(m for m in mistakes if m.seen(evidence))
    assert seen.did == did
    assert diagnose(mistakes, evidence).message == failure.message


def test_a_known_formula_comes_after_the_elements_never_written():
    mistakes = outputs.elementwise_mistakes((TWICE,))
    assert mistakes == (*outputs.ELEMENTWISE_UNWRITTEN, TWICE, *outputs.ELEMENTWISE_WRONG)
    assert outputs.matrix_mistakes((TWICE,)) == (*outputs.MATRIX_UNWRITTEN, TWICE,
                                                 outputs.MATRIX_SHARED_RACE, outputs.MATRIX_WRONG)


def test_a_right_output_has_no_failure():
    assert outputs.vector_failure(X, X.copy(), TRIAL) is None


GRID = Trial.draw("check_demo", 4, np.float32, dims=2)
Z = GRID.normal()


TWICE_Z = outputs.looks_like("Z twice", lambda e: 2 * e.inputs["Z"], "once")


def matrix_failure(got):
    with pytest.raises(results.CheckFailedError) as failure:
        outputs.reject_matrix(Z, got, GRID, (TWICE_Z,), rtol=1e-5, atol=1e-6, what="out",
                                inputs={"Z": Z})
    return failure.value


def test_each_matrix_mistake_is_named():
    first_block = np.full_like(Z, np.nan)
    first_block[:GRID.block[1], :GRID.block[0]] = Z[:GRID.block[1], :GRID.block[0]]
    last_row = Z.copy()
    last_row[-1] = np.nan
    one_wrong = Z.copy()
    one_wrong[2, 3] += 1
    cases = [(np.full_like(Z, np.nan), "wrote nothing into out", "inside the guard"),
             (first_block, "were never written: rows 0..", "only the first block's"),
             (last_row, f"were never written: rows {GRID.rows - 1}..", "guard both"),
             (2 * Z, "out looks like Z twice", "once"),
             (one_wrong, "the first is out[2, 3]", outputs.GENERIC_MATRIX_HINT)]
    for got, words, hint in cases:
        failure = matrix_failure(got)
        assert words in failure.message and hint in failure.hint, failure.message
        assert failure.message.endswith(f"({GRID}).")
    outputs.reject_matrix(Z, Z.copy(), GRID, (), rtol=1e-5, atol=1e-6)  # right: no failure


def test_per_activation_runs_each_activation_on_its_own_labelled_case():
    seen = []
    said = outputs.per_activation("check_demo", 3, np.float32,
                                  lambda trial, code, name: seen.append((str(trial), code, name)))
    assert [(code, name) for _, code, name in seen] == [
        (code, name) for code, name, _ in outputs.ACTIVATIONS]
    assert seen[0][0].startswith(f"act = {outputs.RELU} (ReLU); ")
    assert len({label.split("; ")[1] for label, _, _ in seen}) == 3  # three shapes and blocks
    assert said.startswith("all right: ReLU on ") and said.endswith("(seed=3).")
