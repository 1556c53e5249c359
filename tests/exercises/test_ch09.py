"""Chapter 09's checks (the MLP's activation memory, gradient accumulation) against a right
answer over several seeds, the stub and the wrong answers learners write."""

import numpy as np
import pytest

from gpulab.exercises import ch09
from gpulab.exercises.checks import FAILED, NOT_ATTEMPTED, PASSED

# --- exercise 1: activation bytes --------------------------------------------------------------


def activation_bytes(widths, batch_size, itemsize):
    per_sample = (widths[0] + sum(widths[1:]) + sum(widths[1:-1]) + 2 * widths[-1] + 1)
    return batch_size * per_sample * itemsize


def in_bits(widths, batch_size, itemsize):
    return 8 * activation_bytes(widths, batch_size, itemsize)


def per_sample(widths, batch_size, itemsize):
    return activation_bytes(widths, 1, itemsize)


def values_not_bytes(widths, batch_size, itemsize):
    return activation_bytes(widths, batch_size, 1)


def no_hidden_outputs(widths, batch_size, itemsize):
    return activation_bytes(widths, batch_size, itemsize) - batch_size * sum(widths[1:-1]) \
        * itemsize


def no_z(widths, batch_size, itemsize):
    return activation_bytes(widths, batch_size, itemsize) - batch_size * sum(widths[1:]) \
        * itemsize


def no_input(widths, batch_size, itemsize):
    return activation_bytes(widths, batch_size, itemsize) - batch_size * widths[0] * itemsize


def no_loss_values(widths, batch_size, itemsize):
    return batch_size * (widths[0] + sum(widths[1:]) + sum(widths[1:-1])) * itemsize


def one_layer_only(widths, batch_size, itemsize):
    """Counted activations once instead of per layer: the first hidden layer's Z and A."""
    return batch_size * (widths[0] + 2 * widths[1] + 2 * widths[-1] + 1) * itemsize


def logits_twice(widths, batch_size, itemsize):
    return activation_bytes(widths, batch_size, itemsize) + batch_size * widths[-1] * itemsize


def as_float(widths, batch_size, itemsize):
    return activation_bytes(widths, batch_size, itemsize) / 3


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_activation_bytes_accepts_the_right_answer(seed):
    result = ch09.check_activation_bytes(activation_bytes, seed=seed, show=False)
    assert result.status == PASSED, result


@pytest.mark.parametrize("function, words", [
    (in_bits, "bits"),
    (per_sample, "multiply by batch_size"),
    (values_not_bytes, "multiply by itemsize"),
    (no_hidden_outputs, "outputs A are missing"),
    (no_z, "matmul outputs Z are missing"),
    (no_input, "input batch is missing"),
    (no_loss_values, "loss's values are missing"),
    (one_layer_only, "for every layer"),
    (logits_twice, "counted twice"),
    (as_float, "whole numbers"),
    (lambda w, b, i: None, "number of bytes"),
])
def test_activation_bytes_names_the_mistake(function, words):
    result = ch09.check_activation_bytes(function, seed=5, show=False)
    assert result.status == FAILED, result
    assert words in result.message + result.hint, result


# --- exercise 2: gradient accumulation ---------------------------------------------------------


def accumulated_gradients(model, X, y, micro_batches):
    total = {}
    for part in np.array_split(np.arange(len(y)), micro_batches):
        model.loss(X[part], y[part])
        model.backward()
        for name, grad in model.gradients().items():
            total[name] = total.get(name, 0) + len(part) / len(y) * grad
    return total


def with_slices(model, X, y, micro_batches):
    size = -(-len(y) // micro_batches)
    total = {}
    for start in range(0, len(y), size):
        model.loss(X[start:start + size], y[start:start + size])
        model.backward()
        for name, grad in model.gradients().items():
            total[name] = total.get(name, 0) + grad * len(y[start:start + size]) / len(y)
    return total


def not_divided(model, X, y, micro_batches):
    total = {}
    for part in np.array_split(np.arange(len(y)), micro_batches):
        model.loss(X[part], y[part])
        model.backward()
        for name, grad in model.gradients().items():
            total[name] = total.get(name, 0) + grad
    return total


def equal_weights(model, X, y, micro_batches):
    size = -(-len(y) // micro_batches)
    total = {}
    for start in range(0, len(y), size):
        model.loss(X[start:start + size], y[start:start + size])
        model.backward()
        for name, grad in model.gradients().items():
            total[name] = total.get(name, 0) + grad / micro_batches
    return total


def overwritten(model, X, y, micro_batches):
    total = {}
    for part in np.array_split(np.arange(len(y)), micro_batches):
        model.loss(X[part], y[part])
        model.backward()
        for name, grad in model.gradients().items():
            total[name] = grad
    return total


def same_slice(model, X, y, micro_batches):
    size = -(-len(y) // micro_batches)
    total = {}
    for _ in range(micro_batches):
        model.loss(X[:size], y[:size])
        model.backward()
        for name, grad in model.gradients().items():
            total[name] = total.get(name, 0) + grad / micro_batches
    return total


def whole_batch(model, X, y, micro_batches):
    model.loss(X, y)
    model.backward()
    return model.gradients()


def updates_the_model(model, X, y, micro_batches):
    from gpulab.nn.optimisers import SGD

    grads = accumulated_gradients(model, X, y, micro_batches)
    SGD(lr=0.1).step(model)
    return grads


def a_list(model, X, y, micro_batches):
    return list(accumulated_gradients(model, X, y, micro_batches).values())


@pytest.mark.parametrize("function", [accumulated_gradients, with_slices])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_accumulation_accepts_right_answers(function, seed):
    result = ch09.check_accumulated_gradients(function, seed=seed, show=False)
    assert result.status == PASSED, result


@pytest.mark.parametrize("function, words", [
    (not_divided, "forgot to divide by the number of micro-batches"),
    (equal_weights, "differ in size"),
    (overwritten, "only the last micro-batch"),
    (same_slice, "same samples"),
    (whole_batch, "more than a micro-batch"),
    (updates_the_model, "parameters changed"),
    (a_list, "expected a dict"),
])
def test_accumulation_names_the_mistake(function, words):
    result = ch09.check_accumulated_gradients(function, seed=7, show=False)
    assert result.status == FAILED, result
    assert words in result.message + result.hint, result


@pytest.mark.parametrize("check", [ch09.check_activation_bytes,
                                   ch09.check_accumulated_gradients])
def test_stubs_are_not_attempted(check):
    def stub(*args):
        raise NotImplementedError()

    assert check(stub, show=False).status == NOT_ATTEMPTED
