"""Chapter 09's checks (the MLP's activation memory, gradient accumulation, the accumulation
kernel) against right answers written several ways, the stub, and the wrong answers learners
write: each wrong one must fail with a message that names its mistake."""

import gpulab  # noqa: F401  (must come before numba: it chooses the simulator or the GPU)

# isort: split
import numpy as np
import pytest
from numba import cuda

from gpulab.exercises import ch09
from gpulab.exercises.results import FAILED, NOT_ATTEMPTED, PASSED
from gpulab.kernels.accumulate import accumulate as gpulab_accumulate

# --- exercise 1: activation bytes --------------------------------------------------------------


def activation_bytes(widths, batch_size, itemsize):
    per_sample = (widths[0] + sum(widths[1:]) + sum(widths[1:-1]) + 2 * widths[-1] + 1)
    return batch_size * per_sample * itemsize


def activation_bytes_by_layer(widths, batch_size, itemsize):
    """Right, written as a loop over the layers."""
    values = widths[0]
    for k, width in enumerate(widths[1:], start=1):
        values += width if k == len(widths) - 1 else 2 * width
    values += 2 * widths[-1] + 1
    return int(np.int64(values) * batch_size * itemsize)


def activation_bytes_numpy(widths, batch_size, itemsize):
    """Right, with NumPy integers (a numpy.int64 comes back)."""
    w = np.array(widths)
    return (w[0] + w[1:].sum() + w[1:-1].sum() + 2 * w[-1] + 1) * batch_size * itemsize


def activation_bytes_by_arrays(widths, batch_size, itemsize):
    """Right, written as the shapes of the arrays kept, their sizes added up."""
    shapes = ([(batch_size, widths[0])] + [(batch_size, w) for w in widths[1:]]
              + [(batch_size, w) for w in widths[1:-1]] + [(batch_size, widths[-1])] * 2
              + [(batch_size,)])
    return sum(int(np.prod(shape)) for shape in shapes) * itemsize


def in_bits(widths, batch_size, itemsize):
    return 8 * activation_bytes(widths, batch_size, itemsize)


def eight_bytes(widths, batch_size, itemsize):
    return activation_bytes(widths, batch_size, 8)


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


def no_losses(widths, batch_size, itemsize):
    return activation_bytes(widths, batch_size, itemsize) - batch_size * itemsize


def no_probabilities(widths, batch_size, itemsize):
    return activation_bytes(widths, batch_size, itemsize) - batch_size * widths[-1] * itemsize


def last_z_as_the_logits(widths, batch_size, itemsize):
    """The last layer's Z taken for the logits (Z + b, an array of its own)."""
    return activation_bytes(widths, batch_size, itemsize) - batch_size * widths[-1] * itemsize


def one_layer_only(widths, batch_size, itemsize):
    """Counted activations once instead of per layer: the first hidden layer's Z and A."""
    return batch_size * (widths[0] + 2 * widths[1] + 2 * widths[-1] + 1) * itemsize


def logits_twice(widths, batch_size, itemsize):
    return activation_bytes(widths, batch_size, itemsize) + batch_size * widths[-1] * itemsize


def as_float(widths, batch_size, itemsize):
    return activation_bytes(widths, batch_size, itemsize) / 3


@pytest.mark.parametrize("function", [activation_bytes, activation_bytes_by_layer,
                                      activation_bytes_numpy, activation_bytes_by_arrays])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_activation_bytes_accepts_right_answers(function, seed):
    result = ch09.check_activation_bytes(function, seed=seed, show=False)
    assert result.status == PASSED, result


@pytest.mark.parametrize("function, words", [
    (in_bits, "in bits"),
    (eight_bytes, "8 bytes per value"),
    (per_sample, "one sample's worth"),
    (values_not_bytes, "count of values"),
    (no_hidden_outputs, "outputs A are missing"),
    (no_z, "matmul outputs Z are missing"),
    (no_input, "input batch is missing"),
    (no_loss_values, "loss's values are missing"),
    (no_losses, "per-sample losses are missing"),
    (no_probabilities, "probabilities is missing"),
    (last_z_as_the_logits, "one of the last layer's Z, the logits and the probabilities"),
    (one_layer_only, "one hidden layer only"),
    (logits_twice, "counted twice"),
    (as_float, "whole numbers"),
    (lambda w, b, i: None, "number of bytes"),
    # float32's 4 bytes typed in: right for the first case, not for the 2-byte one
    (lambda w, b, i: activation_bytes(w, b, 4), "counts 4 bytes per value"),
    (lambda w, b, i: activation_bytes(w, b, i) + b * 8, "the labels?"),
    (lambda w, b, i: activation_bytes(w, b, i) / 1e6, "the bytes in MB"),
    (lambda w, b, i: activation_bytes(w, b, i) - (b - 1) * i, "per-sample losses are missing"),
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


def weighted_at_the_end(model, X, y, micro_batches):
    """Right: every part's gradients kept, combined by np.average with the sizes as weights."""
    grads, sizes = [], []
    for X_part, y_part in zip(np.array_split(X, micro_batches),
                              np.array_split(y, micro_batches), strict=True):
        model.loss(X_part, y_part)
        model.backward()
        grads.append(model.gradients())
        sizes.append(len(y_part))
    return {name: np.average([g[name] for g in grads], axis=0, weights=sizes)
            for name in grads[0]}


def backwards_order(model, X, y, micro_batches):
    """Right: the parts in reverse order."""
    total = {}
    for part in reversed(np.array_split(np.arange(len(y)), micro_batches)):
        model.loss(X[part], y[part])
        model.backward()
        for name, grad in model.gradients().items():
            total[name] = total.get(name, 0) + grad * (len(part) / len(y))
    return total


def strided_parts(model, X, y, micro_batches):
    """Right: part k takes every micro_batches-th sample from k on."""
    total = {}
    for k in range(micro_batches):
        model.loss(X[k::micro_batches], y[k::micro_batches])
        model.backward()
        for name, grad in model.gradients().items():
            total[name] = total.get(name, 0) + grad * len(y[k::micro_batches]) / len(y)
    return total


def remainder_in_the_last(model, X, y, micro_batches):
    """Parts of n // micro_batches, the leftover samples all in the last: it is the largest."""
    size, total = len(y) // micro_batches, {}
    for k in range(micro_batches):
        part = slice(k * size, (k + 1) * size if k < micro_batches - 1 else len(y))
        model.loss(X[part], y[part])
        model.backward()
        for name, grad in model.gradients().items():
            total[name] = total.get(name, 0) + grad * len(y[part]) / len(y)
    return total


def shuffles_X_only(model, X, y, micro_batches):
    """The samples shuffled, their labels left in place."""
    X, total = X[np.random.default_rng(0).permutation(len(y))], {}
    for part in np.array_split(np.arange(len(y)), micro_batches):
        model.loss(X[part], y[part])
        model.backward()
        for name, grad in model.gradients().items():
            total[name] = total.get(name, 0) + grad * len(part) / len(y)
    return total


def weighted(share):
    """The notebook's loop with another weight, ``share(part_size, n, micro_batches)``, and
    the total's dtype converted to float32 when ``share`` is None."""
    def accumulate(model, X, y, micro_batches):
        total = {}
        for part in np.array_split(np.arange(len(y)), micro_batches):
            model.loss(X[part], y[part])
            model.backward()
            for name, grad in model.gradients().items():
                weight = len(part) / len(y) if share is None else share(len(part), len(y),
                                                                        micro_batches)
                total[name] = total.get(name, 0) + weight * grad
                if share is None:
                    total[name] = total[name].astype(np.float32)
        return total
    return accumulate


def count_as_size(model, X, y, micro_batches):
    """micro_batches samples per part, weighted right: the sum is the whole batch's."""
    total = {}
    for start in range(0, len(y), micro_batches):
        part = slice(start, start + micro_batches)
        model.loss(X[part], y[part])
        model.backward()
        for name, grad in model.gradients().items():
            total[name] = total.get(name, 0) + grad * len(y[part]) / len(y)
    return total


def count_as_size_equal_weights(model, X, y, micro_batches):
    total = {}
    for start in range(0, len(y), micro_batches):
        part = slice(start, start + micro_batches)
        model.loss(X[part], y[part])
        model.backward()
        for name, grad in model.gradients().items():
            total[name] = total.get(name, 0) + grad / micro_batches
    return total


def size_as_count(model, X, y, micro_batches):
    """n // micro_batches parts: the size used as the count."""
    size = len(y) // micro_batches
    total = {}
    for part in np.array_split(np.arange(len(y)), size):
        model.loss(X[part], y[part])
        model.backward()
        for name, grad in model.gradients().items():
            total[name] = total.get(name, 0) + grad * len(part) / len(y)
    return total


def drops_remainder(model, X, y, micro_batches):
    size = len(y) // micro_batches
    total = {}
    for k in range(micro_batches):
        part = slice(k * size, (k + 1) * size)
        model.loss(X[part], y[part])
        model.backward()
        for name, grad in model.gradients().items():
            total[name] = total.get(name, 0) + grad * size / len(y)
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


def per_part_size(model, X, y, micro_batches):
    total = {}
    for part in np.array_split(np.arange(len(y)), micro_batches):
        model.loss(X[part], y[part])
        model.backward()
        for name, grad in model.gradients().items():
            total[name] = total.get(name, 0) + grad / len(part)
    return total


def overwritten(model, X, y, micro_batches):
    total = {}
    for part in np.array_split(np.arange(len(y)), micro_batches):
        model.loss(X[part], y[part])
        model.backward()
        for name, grad in model.gradients().items():
            total[name] = grad
    return total


def backward_once(model, X, y, micro_batches):
    for part in np.array_split(np.arange(len(y)), micro_batches):
        model.loss(X[part], y[part])
    model.backward()
    return model.gradients()


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
    """Takes a step of plain SGD itself (an optimiser imported from gpulab would be refused as
    gpulab's own code first)."""
    grads = accumulated_gradients(model, X, y, micro_batches)
    for _, param, grad in model.parameters():
        param -= 0.1 * grad
    return grads


def a_list(model, X, y, micro_batches):
    return list(accumulated_gradients(model, X, y, micro_batches).values())


def stacked(model, X, y, micro_batches):
    parts = []
    for part in np.array_split(np.arange(len(y)), micro_batches):
        model.loss(X[part], y[part])
        model.backward()
        parts.append({n: g * len(part) / len(y) for n, g in model.gradients().items()})
    return {name: np.stack([p[name] for p in parts]) for name in parts[0]}


@pytest.mark.parametrize("function", [accumulated_gradients, with_slices, weighted_at_the_end,
                                      backwards_order, strided_parts])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_accumulation_accepts_right_answers(function, seed):
    result = ch09.check_accumulated_gradients(function, seed=seed, show=False)
    assert result.status == PASSED, result


@pytest.mark.parametrize("function, words", [
    (count_as_size, "the count was used as the size"),
    (count_as_size_equal_weights, "the count was used as the size"),
    (size_as_count, "the count was used as the size"),
    (drops_remainder, "were never used"),
    (not_divided, "added up"),
    (equal_weights, "differ in size"),
    (per_part_size, "divided by its own size"),
    (overwritten, "only the last micro-batch"),
    (backward_once, "backward pass"),
    (same_slice, "same"),
    (whole_batch, "all"),
    (updates_the_model, "parameters changed"),
    (a_list, "expected a dict"),
    (stacked, "has shape"),
    (remainder_in_the_last, "the leftover samples all went to one part"),
    (weighted(lambda size, n, k: size // n), "all zero"),
    (weighted(lambda size, n, k: size), "weighted in proportion to its size"),
    (weighted(lambda size, n, k: size / k), "weighted in proportion to its size"),
    (weighted(None), "float32, right only to its rounding"),
    (shuffles_X_only, "with another sample's label"),
])
@pytest.mark.parametrize("seed", [7, 8])
def test_accumulation_names_the_mistake(function, words, seed):
    result = ch09.check_accumulated_gradients(function, seed=seed, show=False)
    assert result.status == FAILED, result
    assert words in result.message + result.hint, result


def on_a_copy_per_part(model, X, y, micro_batches):  # right: the model itself never runs
    total = {}
    for part in np.array_split(np.arange(len(y)), micro_batches):
        twin = model.copy()
        twin.loss(X[part], y[part])
        twin.backward()
        for name, g in twin.gradients().items():
            total[name] = total.get(name, 0) + len(part) / len(y) * g
    return total


def remainder_in_the_first(model, X, y, micro_batches):  # n // k each, the rest in the first
    n, k = len(y), micro_batches
    size, first = n // k, n // k + n % k
    bounds = [0, first] + [first + size * j for j in range(1, k)]
    total = {}
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        model.loss(X[a:b], y[a:b])
        model.backward()
        for name, g in model.gradients().items():
            total[name] = total.get(name, 0) + (b - a) / n * g
    return total


def on_a_deep_copy_per_part(model, X, y, micro_batches):
    import copy

    total = {}
    for part in np.array_split(np.arange(len(y)), micro_batches):
        twin = copy.deepcopy(model)
        twin.loss(X[part], y[part])
        twin.backward()
        for name, g in twin.gradients().items():
            total[name] = total.get(name, 0) + len(part) / len(y) * g
    return total


def on_a_pickled_copy_per_part(model, X, y, micro_batches):
    import pickle

    total = {}
    for part in np.array_split(np.arange(len(y)), micro_batches):
        twin = pickle.loads(pickle.dumps(model))
        twin.loss(X[part], y[part])
        twin.backward()
        for name, g in twin.gradients().items():
            total[name] = total.get(name, 0) + len(part) / len(y) * g
    return total


def through_the_class(model, X, y, micro_batches):
    total = {}
    for part in np.array_split(np.arange(len(y)), micro_batches):
        type(model).loss(model, X[part], y[part])
        type(model).backward(model)
        for name, g in model.gradients().items():
            total[name] = total.get(name, 0) + len(part) / len(y) * g
    return total


def whole_batch_through_the_class(model, X, y, micro_batches):
    type(model).loss(model, X, y)
    type(model).backward(model)
    return model.gradients()


@pytest.mark.parametrize("seed", [1, 7])
def test_accumulation_on_deep_copies_or_through_the_class_passes(seed):
    """The recorder sees the passes of a ``copy.deepcopy`` (or a pickled copy) of the model
    and of its class's methods called with the model (it is the model's class, not wrappers
    on the object)."""
    for right in (on_a_deep_copy_per_part, on_a_pickled_copy_per_part, through_the_class):
        result = ch09.check_accumulated_gradients(right, seed=seed, show=False)
        assert result.status == PASSED, (right.__name__, result.message)
    result = ch09.check_accumulated_gradients(whole_batch_through_the_class, seed=seed,
                                              show=False)
    assert result.status == FAILED and "forward pass" in result.message, result.message
    assert "never ran" not in result.message, result.message


@pytest.mark.parametrize("seed", [1, 2, 7, 12345])
def test_accumulation_on_a_copy_of_the_model_passes_and_the_remainder_in_one_part_fails(seed):
    result = ch09.check_accumulated_gradients(on_a_copy_per_part, seed=seed, show=False)
    assert result.status == PASSED, result
    result = ch09.check_accumulated_gradients(remainder_in_the_first, seed=seed, show=False)
    assert result.status == FAILED, result
    assert "the leftover samples all went to one part" in result.message, result


def test_count_and_size_differ_in_every_case():
    """The hole of issue 22: the count used as the size only shows when n / k is far from k."""
    for k, (low, high) in ch09.ACCUMULATION_CASES:
        for m in range(low, high + 1):
            for r in range(1, k):
                n = k * m + r
                assert abs(-(-n // k) - k) >= 2, (n, k)


# --- exercise 3: the accumulation kernel -------------------------------------------------------


@cuda.jit
def accumulate_solution(grad_sum, grad_micro, weight):
    i = cuda.grid(1)
    if i < grad_sum.shape[0]:
        grad_sum[i] += weight * grad_micro[i]


@cuda.jit
def accumulate_atomic(grad_sum, grad_micro, weight):  # right, if more than needed
    i = cuda.grid(1)
    if i < grad_sum.shape[0]:
        cuda.atomic.add(grad_sum, i, weight * grad_micro[i])


@cuda.jit
def accumulate_grid_stride(grad_sum, grad_micro, weight):  # right: a grid-stride loop
    start = cuda.grid(1)
    for i in range(start, grad_sum.shape[0], cuda.gridsize(1)):
        grad_sum[i] = grad_sum[i] + grad_micro[i] * weight


@cuda.jit
def accumulate_early_return(grad_sum, grad_micro, weight):  # right: spelled out, early exit
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i >= grad_micro.size:
        return
    g = grad_micro[i]
    grad_sum[i] = grad_sum[i] + weight * g


@cuda.jit(device=True)
def axpy(a, x, y):
    return y + a * x


@cuda.jit
def accumulate_device_function(grad_sum, grad_micro, weight):  # right: a device function
    i = cuda.grid(1)
    if i < min(grad_sum.shape[0], grad_micro.shape[0]):
        grad_sum[i] = axpy(weight, grad_micro[i], grad_sum[i])


@cuda.jit
def accumulate_while(grad_sum, grad_micro, weight):  # right: a while loop over the grid
    i = cuda.grid(1)
    while i < grad_sum.size:
        grad_sum[i] += grad_micro[i] * weight
        i += cuda.gridsize(1)


@cuda.jit
def accumulate_stub(grad_sum, grad_micro, weight):
    # YOUR CODE HERE
    raise NotImplementedError()


@cuda.jit
def overwrites(grad_sum, grad_micro, weight):
    i = cuda.grid(1)
    if i < grad_sum.shape[0]:
        grad_sum[i] = weight * grad_micro[i]


@cuda.jit
def no_weight(grad_sum, grad_micro, weight):
    i = cuda.grid(1)
    if i < grad_sum.shape[0]:
        grad_sum[i] += grad_micro[i]


@cuda.jit
def divides(grad_sum, grad_micro, weight):
    i = cuda.grid(1)
    if i < grad_sum.shape[0]:
        grad_sum[i] += grad_micro[i] / weight


@cuda.jit
def weight_on_both(grad_sum, grad_micro, weight):
    i = cuda.grid(1)
    if i < grad_sum.shape[0]:
        grad_sum[i] = weight * (grad_sum[i] + grad_micro[i])


@cuda.jit
def weight_on_sum(grad_sum, grad_micro, weight):
    i = cuda.grid(1)
    if i < grad_sum.shape[0]:
        grad_sum[i] = weight * grad_sum[i] + grad_micro[i]


@cuda.jit
def subtracts(grad_sum, grad_micro, weight):
    i = cuda.grid(1)
    if i < grad_sum.shape[0]:
        grad_sum[i] -= weight * grad_micro[i]


@cuda.jit
def grid_dim_offset(grad_sum, grad_micro, weight):
    i = cuda.blockIdx.x * cuda.gridDim.x + cuda.threadIdx.x
    if i < grad_sum.shape[0]:
        grad_sum[i] += weight * grad_micro[i]


@cuda.jit
def index_one_high(grad_sum, grad_micro, weight):
    i = cuda.grid(1) + 1
    if i < grad_sum.shape[0]:
        grad_sum[i] += weight * grad_micro[i]


@cuda.jit
def no_guard(grad_sum, grad_micro, weight):
    i = cuda.grid(1)
    grad_sum[i] += weight * grad_micro[i]


@cuda.jit
def thread_index_only(grad_sum, grad_micro, weight):
    i = cuda.threadIdx.x
    if i < grad_sum.shape[0]:
        grad_sum[i] += weight * grad_micro[i]


@cuda.jit
def skips_last_block(grad_sum, grad_micro, weight):
    i = cuda.grid(1)
    if i < (grad_sum.shape[0] // cuda.blockDim.x) * cuda.blockDim.x:
        grad_sum[i] += weight * grad_micro[i]


@cuda.jit
def guard_minus_one(grad_sum, grad_micro, weight):
    i = cuda.grid(1)
    if i < grad_sum.shape[0] - 1:
        grad_sum[i] += weight * grad_micro[i]


@cuda.jit
def off_by_one(grad_sum, grad_micro, weight):
    i = cuda.grid(1)
    if 0 < i < grad_sum.shape[0]:
        grad_sum[i] += weight * grad_micro[i - 1]


@cuda.jit
def writes_micro(grad_sum, grad_micro, weight):
    i = cuda.grid(1)
    if i < grad_sum.shape[0]:
        grad_micro[i] += weight * grad_sum[i]


@cuda.jit
def scales_micro_in_place(grad_sum, grad_micro, weight):
    i = cuda.grid(1)
    if i < grad_sum.shape[0]:
        grad_micro[i] *= weight
        grad_sum[i] += grad_micro[i]


@cuda.jit
def block_stride(grad_sum, grad_micro, weight):
    for i in range(cuda.grid(1), grad_sum.shape[0], cuda.blockDim.x):
        grad_sum[i] += weight * grad_micro[i]


@cuda.jit
def hard_coded_block(grad_sum, grad_micro, weight):
    i = cuda.blockIdx.x * 64 + cuda.threadIdx.x
    if i < grad_sum.shape[0]:
        grad_sum[i] += weight * grad_micro[i]


@cuda.jit
def hard_coded_size(grad_sum, grad_micro, weight):
    i = cuda.grid(1)
    if i < 200:
        grad_sum[i] += weight * grad_micro[i]


@cuda.jit
def one_thread_does_all(grad_sum, grad_micro, weight):
    if cuda.grid(1) == 0:
        for i in range(grad_sum.shape[0]):
            grad_sum[i] += weight * grad_micro[i]


@cuda.jit
def adds_nothing(grad_sum, grad_micro, weight):
    i = cuda.grid(1)
    if i < grad_sum.shape[0]:
        step = weight * grad_micro[i]  # noqa: F841  (computed, never added)


@cuda.jit
def with_a_list(grad_sum, grad_micro, weight):  # runs in the simulator only
    i = cuda.grid(1)
    if i < grad_sum.shape[0]:
        pair = [weight, grad_micro[i]]
        grad_sum[i] += pair[0] * pair[1]


@pytest.mark.parametrize("kernel", [accumulate_solution, accumulate_atomic,
                                    accumulate_grid_stride, accumulate_early_return,
                                    accumulate_device_function, accumulate_while])
@pytest.mark.parametrize("seed", [1, 2])
def test_accumulate_accepts_right_kernels(kernel, seed):
    result = ch09.check_accumulate(kernel, seed=seed, show=False)
    assert result.status == PASSED, result
    assert ch09.ACCUMULATE.passed(kernel)


@pytest.mark.parametrize("kernel, words", [
    (overwrites, "what the earlier launches added is gone"),
    (no_weight, "without its weight"),
    (divides, "divided by the weight"),
    (weight_on_both, "multiplied the running sum too"),
    (weight_on_sum, "instead of the micro-batch's gradient"),
    (no_guard, "guard"),
    (thread_index_only, "only the first block's elements"),
    (skips_last_block, "last, partial block"),
    (guard_minus_one, "last element"),
    (off_by_one, "neighbour"),
    (writes_micro, "writes grad_micro"),
    (scales_micro_in_place, "must only read it"),
    (block_stride, "2 or more times in one launch (up to"),
    (hard_coded_block, "hard-codes the block size"),
    (hard_coded_size, "fixed number"),
    (one_thread_does_all, "one thread worked through the array"),
    (adds_nothing, "nothing was added"),
    (with_a_list, "compile"),
    (gpulab_accumulate, "gpulab's own"),
    (subtracts, "subtracted from the sum"),
    (grid_dim_offset, "the blocks' elements overlap"),
    (index_one_high, "the first element(s) were never updated"),
])
def test_accumulate_names_the_mistake(kernel, words):
    result = ch09.check_accumulate(kernel, seed=11, show=False)
    assert result.status == FAILED, result
    assert words in result.message + result.hint, result
    assert not ch09.ACCUMULATE.passed(kernel)


@pytest.mark.parametrize("check, stub", [
    (ch09.check_activation_bytes, lambda *args: (_ for _ in ()).throw(NotImplementedError())),
    (ch09.check_accumulated_gradients,
     lambda *args: (_ for _ in ()).throw(NotImplementedError())),
    (ch09.check_accumulate, accumulate_stub),
])
def test_stubs_are_not_attempted(check, stub):
    assert check(stub, show=False).status == NOT_ATTEMPTED


def test_failure_messages_hold_no_solution_code():
    """Issue 23: no message or hint gives the update's line away."""
    for kernel in (overwrites, no_weight, weight_on_sum, thread_index_only, block_stride):
        result = ch09.check_accumulate(kernel, seed=3, show=False)
        text = result.message + result.hint
        assert "+=" not in text and "grad_micro[i]" not in text, text


def test_try_it_runs_and_is_short(capsys):
    ch09.try_accumulate(accumulate_solution)
    assert "after launch 3" in capsys.readouterr().out
    ch09.try_accumulate(no_guard)
    out = capsys.readouterr().out
    assert "stopped" in out and len(out.splitlines()) <= 8, out
    ch09.try_accumulate(accumulate_stub)
    assert "not written yet" in capsys.readouterr().out


def test_the_demo_runs_your_kernel_only_after_its_check(capsys):
    def my_accumulate(grad_sum, grad_micro, weight):
        i = cuda.grid(1)
        if i < grad_sum.shape[0]:
            grad_sum[i] += weight * grad_micro[i]

    fresh = cuda.jit(my_accumulate)
    run = ch09.accumulate_on_device(fresh, widths=(8, 5, 3), batch_size=22, micro_batches=4,
                                    show=False)
    assert run.whose == "gpulab's accumulate" and "has not passed" in run.note and run.matches
    assert ch09.check_accumulate(fresh, seed=1, show=False).passed
    run = ch09.accumulate_on_device(fresh, widths=(8, 5, 3), batch_size=22, micro_batches=4)
    assert run.whose.startswith("your") and run.matches and not run.note
    assert run.buffers == 4 and run.launches == 16
    assert "updated in place" in capsys.readouterr().out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_accumulate_counts_the_elements_added_again_rightly(seed):
    """With a stride of one block, elements get the gradient 2, 3, ... times: the message says
    how many got it 2 or more times and the most, never "N times or more" with N the most."""
    result = ch09.check_accumulate(block_stride, seed=seed, show=False)
    assert result.status == FAILED, result
    assert "2 or more times in one launch (up to" in result.message, result
    assert "times or more" not in result.message, result


def _sums_added(times):
    from types import SimpleNamespace

    n = len(times)
    trial = SimpleNamespace(n=n, dtype=np.dtype(np.float32), threads_per_block=32, blocks=1)
    g = np.linspace(1, 2, n, dtype=np.float32)
    w = np.float32(0.5)
    got = (w * g * np.asarray(times, np.float32)).astype(np.float32)
    return ch09.Sums(trial, 1, 3, got, np.zeros(n, np.float32), g[None, :],
                     np.array([w], np.float32))


def test_the_added_again_message_states_the_count_and_the_most():
    evidence = _sums_added([1, 2, 2, 3, 5, 1, 1, 1, 1, 1])
    assert evidence.added_twice()
    text = ch09._added_again(evidence)
    assert text.startswith("4 elements got this micro-batch's gradient 2 or more times"), text
    assert "(up to 5 times)" in text, text
    evidence = _sums_added([1, 2, 1, 2, 2, 1])
    assert ch09._added_again(evidence) == ("3 elements got this micro-batch's gradient twice "
                                           "in one launch")


@cuda.jit
def accumulate_two_per_thread(grad_sum, grad_micro, weight):
    """Wrong method, right values: thread i adds elements 2i and 2i + 1."""
    i = 2 * cuda.grid(1)
    for j in (i, i + 1):
        if j < grad_sum.shape[0]:
            grad_sum[j] += weight * grad_micro[j]


@pytest.mark.parametrize("seed", [1, 7, 12345])
def test_accumulate_two_per_thread_fails(seed):
    result = ch09.check_accumulate(accumulate_two_per_thread, seed=seed, show=False)
    assert result.status == "failed", result
    assert "2 elements written by one thread" in result.message, result


def activation_bytes_losses_in_float32(widths, batch_size, itemsize):
    """Wrong: the per-sample losses counted as 4 bytes each, whatever the itemsize."""
    values = widths[0] + sum(widths[1:]) + sum(widths[1:-1]) + 2 * widths[-1]
    return batch_size * (values * itemsize + 4)


@pytest.mark.parametrize("seed", [1, 7])
def test_losses_counted_in_float32_are_named(seed):
    result = ch09.check_activation_bytes(activation_bytes_losses_in_float32, seed=seed,
                                         show=False)
    assert result.status == "failed" and "4-byte float32" in result.message, result.message


def accumulated_on_float32_copies(model, X, y, micro_batches):
    """Wrong: each micro-batch cast to float32 before the model sees it."""
    total = None
    for part in np.array_split(np.arange(len(y)), micro_batches):
        model.loss(X[part].astype(np.float32), y[part])
        model.backward()
        grads = {k: v * (len(part) / len(y)) for k, v in model.gradients().items()}
        total = grads if total is None else {k: total[k] + grads[k] for k in total}
    return total


def test_micro_batches_cast_to_another_dtype_are_named():
    result = ch09.check_accumulated_gradients(accumulated_on_float32_copies, seed=1, show=False)
    assert result.status == "failed" and "reached the model as float32" in result.message, (
        result.message)


def activation_bytes_in_int32(widths, batch_size, itemsize):
    """Wrong: the right count, in 32-bit whole numbers (wraps past 2**31 - 1)."""
    w = [np.int32(width) for width in widths]
    per_sample = w[0] + 2 * sum(w[1:-1], np.int32(0)) + 3 * w[-1] + np.int32(1)
    with np.errstate(over="ignore"):
        return per_sample * np.int32(batch_size) * np.int32(itemsize)


def activation_bytes_in_float32(widths, batch_size, itemsize):
    """Wrong: the right count, in float32 (rounds past 2**24)."""
    per_sample = np.float32(widths[0] + 2 * sum(widths[1:-1]) + 3 * widths[-1] + 1)
    return per_sample * np.float32(batch_size) * np.float32(itemsize)


@pytest.mark.parametrize("seed", [1, 7, 1561])  # 1561: the widths alone fall short of 2³¹
@pytest.mark.parametrize("function, words", [
    (activation_bytes_in_int32, "off by a multiple of 2³²"),
    (activation_bytes_in_float32, "the rounding of a float32"),
])
def test_activation_bytes_names_narrow_number_types(function, words, seed):
    result = ch09.check_activation_bytes(function, seed=seed, show=False)
    assert result.status == FAILED, result
    assert words in result.message, result.message


def accumulated_through_float32(model, X, y, micro_batches):
    """Wrong: the batch rounded to float32 and back before it is cut (every sample once)."""
    rounded = X.astype(np.float32).astype(X.dtype)
    total = {}
    for part in np.array_split(np.arange(len(y)), micro_batches):
        model.loss(rounded[part], y[part])
        model.backward()
        for name, grad in model.gradients().items():
            total[name] = total.get(name, 0) + grad * len(part) / len(y)
    return total


def test_accumulated_gradients_name_samples_rounded_through_float32():
    result = ch09.check_accumulated_gradients(accumulated_through_float32, seed=1, show=False)
    assert result.status == FAILED, result
    assert "rounded to float32 and back to float64" in result.message, result.message


def accumulated_with_float32_shares(model, X, y, micro_batches):
    """Wrong: each part's share rounded to float32 (the float64 gradients are off by 1e-7)."""
    total = {}
    for part in np.array_split(np.arange(len(y)), micro_batches):
        model.loss(X[part], y[part])
        model.backward()
        share = np.float32(len(part) / len(y))
        for name, grad in model.gradients().items():
            total[name] = total.get(name, 0) + share * grad
    return total


@pytest.mark.parametrize("seed", [1, 7])
def test_shares_rounded_to_float32_are_named(seed):
    result = ch09.check_accumulated_gradients(accumulated_with_float32_shares, seed=seed,
                                              show=False)
    assert result.status == "failed", result
    assert "shares of the batch rounded to float32" in result.message, result.message
