"""Chapter 08's checks (parameter memory, the largest batch that fits) against a right
answer, the stub and the typical wrong answers."""

import pytest

from gpulab.exercises import ch08
from gpulab.exercises.checks import FAILED, NOT_ATTEMPTED, PASSED
from gpulab.nn import cost

# --- chapter 08 ------------------------------------------------------------------------------


def parameter_memory(widths, optimiser, itemsize):
    P = sum(a * b + b for a, b in zip(widths[:-1], widths[1:], strict=True))
    return (2 + {"sgd": 1, "adam": 2}[optimiser]) * P * itemsize


def no_biases(widths, optimiser, itemsize):
    P = sum(a * b for a, b in zip(widths[:-1], widths[1:], strict=True))
    return (2 + {"sgd": 1, "adam": 2}[optimiser]) * P * itemsize


@pytest.mark.parametrize("function, status, words", [
    (parameter_memory, PASSED, "right"),
    (no_biases, FAILED, "biases are missing"),
    (lambda w, o, i: parameter_memory(w, "sgd", i), FAILED, "two tensors"),
])
def test_parameter_memory(function, status, words):
    result = ch08.check_parameter_memory(function, seed=9, show=False)
    assert result.status == status, result
    assert words in result.message + result.hint, result


def largest_batch(budget, widths, candidates):
    fitting = [b for b in sorted(candidates) if cost.training_memory(widths, b).total <= budget]
    return fitting[-1] if fitting else None


def smallest_batch(budget, widths, candidates):
    fitting = [b for b in sorted(candidates) if cost.training_memory(widths, b).total <= budget]
    return fitting[0] if fitting else None


@pytest.mark.parametrize("function, status, words", [
    (largest_batch, PASSED, "right"),
    (smallest_batch, FAILED, "smallest batch that fits"),
    (lambda budget, widths, candidates: max(candidates), FAILED, "nothing fits"),
])
def test_largest_batch(function, status, words):
    result = ch08.check_largest_batch(function, seed=10, show=False)
    assert result.status == status, result
    assert words in result.message + result.hint, result


@pytest.mark.parametrize("check", [ch08.check_parameter_memory, ch08.check_largest_batch])
def test_stubs_are_not_attempted(check):
    def stub(*args):
        raise NotImplementedError()

    assert check(stub, show=False).status == NOT_ATTEMPTED
