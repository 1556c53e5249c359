"""Chapter 05's checks (the traffic napkin math, fused bias + activation, the stable softmax
with cross-entropy) against right answers over several seeds, the stub and the wrong answers a
learner writes: each wrong one must fail with the hint that names its mistake, the stub must
say "not attempted", and no check may raise."""

import math

import numba
import numpy as np
import pytest
from numba import cuda

from gpulab import toolkit
from gpulab.exercises import ch05
from gpulab.exercises.mistakes import diagnose
from gpulab.exercises.results import FAILED, NOT_ATTEMPTED, PASSED
from gpulab.exercises.trial import Trial

SEEDS = [3, 11, 12]
IDENTITY, RELU, TANH = ch05.IDENTITY, ch05.RELU, ch05.TANH

# --- fused bias + activation --------------------------------------------------------------------


@cuda.jit
def bias_activation(Z, b, act, out):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        z = Z[r, c] + b[c]
        if act == RELU:
            out[r, c] = z if z > 0 else 0
        elif act == TANH:
            out[r, c] = math.tanh(z)
        else:
            out[r, c] = z


@cuda.jit
def bias_activation_stub(Z, b, act, out):
    # YOUR CODE HERE
    raise NotImplementedError()


@cuda.jit
def no_guard(Z, b, act, out):
    c, r = cuda.grid(2)
    z = Z[r, c] + b[c]
    out[r, c] = z if z > 0 else 0


@cuda.jit
def guard_less_equal(Z, b, act, out):
    c, r = cuda.grid(2)
    if r <= Z.shape[0] and c <= Z.shape[1]:
        z = Z[r, c] + b[c]
        out[r, c] = z if z > 0 else 0


@cuda.jit
def guard_one_short(Z, b, act, out):
    c, r = cuda.grid(2)
    if r < Z.shape[0] - 1 and c < Z.shape[1] - 1:
        z = Z[r, c] + b[c]
        out[r, c] = z if z > 0 else 0


@cuda.jit
def swapped_grid(Z, b, act, out):
    r, c = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        z = Z[r, c] + b[c]
        out[r, c] = z if z > 0 else 0


@cuda.jit
def swapped_index(Z, b, act, out):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        z = Z[c, r] + b[c]
        out[r, c] = z if z > 0 else 0


@cuda.jit
def no_bias(Z, b, act, out):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        out[r, c] = Z[r, c] if Z[r, c] > 0 else 0


@cuda.jit
def act_ignored_identity(Z, b, act, out):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        out[r, c] = Z[r, c] + b[c]


@cuda.jit
def always_relu(Z, b, act, out):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        z = Z[r, c] + b[c]
        out[r, c] = z if z > 0 else 0


@cuda.jit
def relu_and_identity_only(Z, b, act, out):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        z = Z[r, c] + b[c]
        if act == RELU:
            out[r, c] = z if z > 0 else 0
        else:
            out[r, c] = z


@cuda.jit
def bias_by_row(Z, b, act, out):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        z = Z[r, c] + b[r % b.shape[0]]
        out[r, c] = z if z > 0 else 0


@cuda.jit
def thread_index_only(Z, b, act, out):
    c, r = cuda.threadIdx.x, cuda.threadIdx.y
    if r < Z.shape[0] and c < Z.shape[1]:
        z = Z[r, c] + b[c]
        out[r, c] = z if z > 0 else 0


@cuda.jit
def hard_coded_block(Z, b, act, out):
    r = cuda.blockIdx.y * 8 + cuda.threadIdx.y
    c = cuda.blockIdx.x * 8 + cuda.threadIdx.x
    if r < Z.shape[0] and c < Z.shape[1]:
        z = Z[r, c] + b[c]
        out[r, c] = z if z > 0 else 0


@cuda.jit
def in_place(Z, b, act, out):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        Z[r, c] = Z[r, c] + b[c]
        out[r, c] = Z[r, c] if Z[r, c] > 0 else 0


@cuda.jit
def uses_a_list(Z, b, act, out):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        values = [Z[r, c] + b[c], 0.0]
        out[r, c] = max(values)


@pytest.mark.parametrize("seed", SEEDS)
def test_bias_activation_passes_a_right_kernel(seed):
    result = ch05.check_bias_activation(bias_activation, seed=seed, show=False)
    assert result.status == PASSED, result
    assert "three" not in result.message and "tanh on" in result.message


@cuda.jit
def bias_activation_flat_index(Z, b, act, out):
    """Right, written differently: the index from blockIdx/blockDim/threadIdx, max() for ReLU."""
    c = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    r = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if c >= out.shape[1] or r >= out.shape[0]:
        return
    z = Z[r, c] + b[c]
    if act == IDENTITY:
        out[r, c] = z
    elif act == RELU:
        out[r, c] = max(z, 0.0)
    else:
        out[r, c] = math.tanh(z)


@cuda.jit
def bias_activation_tanh_by_exp(Z, b, act, out):
    """Right, written differently: tanh from exp, ReLU as z times (z > 0)."""
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        z = Z[r, c] + b[c]
        if act == TANH:
            e = math.exp(-2.0 * abs(z))
            t = (1.0 - e) / (1.0 + e)
            out[r, c] = t if z >= 0 else -t
        elif act == RELU:
            out[r, c] = z * (z > 0)
        else:
            out[r, c] = z


@cuda.jit
def bias_activation_bias_shared(Z, b, act, out):  # right: each block's biases read once
    bias = cuda.shared.array(64, numba.float32)
    c, r = cuda.grid(2)
    if cuda.threadIdx.y == 0 and c < Z.shape[1]:
        bias[cuda.threadIdx.x] = b[c]
    cuda.syncthreads()
    if r < Z.shape[0] and c < Z.shape[1]:
        z = Z[r, c] + bias[cuda.threadIdx.x]
        if act == RELU:
            out[r, c] = max(z, 0.0)
        elif act == TANH:
            out[r, c] = math.tanh(z)
        else:
            out[r, c] = z


@cuda.jit
def bias_activation_bias_shared_unsynced(Z, b, act, out):  # no barrier: rows read unset slots
    bias = cuda.shared.array(64, numba.float32)
    c, r = cuda.grid(2)
    if cuda.threadIdx.y == 0 and c < Z.shape[1]:
        bias[cuda.threadIdx.x] = b[c]
    if r < Z.shape[0] and c < Z.shape[1]:
        z = Z[r, c] + bias[cuda.threadIdx.x]
        if act == RELU:
            out[r, c] = max(z, 0.0)
        elif act == TANH:
            out[r, c] = math.tanh(z)
        else:
            out[r, c] = z


@pytest.mark.parametrize("kernel", [bias_activation_flat_index, bias_activation_tanh_by_exp,
                                    bias_activation_bias_shared])
def test_bias_activation_accepts_right_kernels_written_differently(kernel):
    for seed in (3, 4):
        result = ch05.check_bias_activation(kernel, seed=seed, show=False)
        assert result.status == PASSED, result


def test_bias_activation_refuses_gpulab_s_own_kernel():
    from gpulab.kernels.dense import bias_activation as gpulab_s

    result = ch05.check_bias_activation(gpulab_s, seed=1, show=False)
    assert result.status == FAILED and "gpulab's own" in result.message, result


@pytest.mark.parametrize("kernel, status, words", [
    (bias_activation_stub, NOT_ATTEMPTED, "2-D grid"),
    (None, NOT_ATTEMPTED, "write the kernel"),
    (no_guard, FAILED, "has no guard"),
    (guard_less_equal, FAILED, "`<=` lets through"),
    (guard_one_short, FAILED, "the guard is one short"),
    (swapped_grid, FAILED, "the first value it gives is the column"),
    (swapped_index, FAILED, "first in `Z[r, c]`"),
    (no_bias, FAILED, "the bias is missing"),
    (act_ignored_identity, FAILED, "apply it to z = Z + b"),
    (always_relu, FAILED, "read the code in act"),
    (relu_and_identity_only, FAILED, "act = 3 asks for tanh"),
    (bias_by_row, FAILED, "one bias per output column"),
    (thread_index_only, FAILED, "not `cuda.threadIdx` alone"),
    (hard_coded_block, FAILED, "hard-codes the block size"),
    (in_place, FAILED, "wrote into its input Z"),
    (uses_a_list, FAILED, "cuda.local.array"),
    (bias_activation_bias_shared_unsynced, FAILED, "has no `cuda.syncthreads()`"),
])
def test_bias_activation_names_the_mistake(kernel, status, words):
    for seed in (3, 4):
        result = ch05.check_bias_activation(kernel, seed=seed, show=False)
        assert result.status == status, result
        assert words in result.message + result.hint, result
        if status == FAILED:
            assert f"seed={seed}" in result.message or result.seed == seed


# --- napkin math --------------------------------------------------------------------------------


def _right(M, N, fused, itemsize):
    return itemsize * ((2 if fused else 4) * M * N + N)


def _right_by_passes(M, N, fused, itemsize):
    passes = [M * N, M * N] if fused else [M * N, M * N, M * N, M * N]  # reads and writes
    return (sum(passes) + N) * itemsize


def _right_as_float(M, N, fused, itemsize):
    return float(itemsize) * (M * N * (2.0 if fused else 4.0) + N)


TRAFFIC_WRONG = [
    (lambda M, N, fused, itemsize: (2 if fused else 4) * M * N + N, "values, not bytes"),
    (lambda M, N, fused, itemsize: itemsize * (2 if fused else 4) * M * N, "b is missing"),
    (lambda M, N, fused, itemsize: itemsize * (2 * M * N + N), "writes Z + b to memory"),
    (lambda M, N, fused, itemsize: itemsize * (3 * M * N + N), "count each pass"),
    (lambda M, N, fused, itemsize: itemsize * ((2 if fused else 4) * M * N + M),
     "one value per column"),
    (lambda M, N, fused, itemsize: itemsize * (3 if fused else 5) * M * N,
     "not once for every element"),
    (lambda M, N, fused, itemsize: itemsize * ((4 if fused else 2) * M * N + N),
     "moves less"),
    (lambda M, N, fused, itemsize: str(itemsize * ((2 if fused else 4) * M * N + N)),
     "not a number of bytes"),
    (lambda M, N, fused, itemsize: None, "not a number of bytes"),
    (lambda M, N, fused, itemsize: 4 * ((2 if fused else 4) * M * N + N),
     "the count for 4-byte values"),
    (lambda M, N, fused, itemsize: 8 * itemsize * ((2 if fused else 4) * M * N + N),
     "bits, not bytes"),
    (lambda M, N, fused, itemsize: itemsize * ((2 if fused else 4) * M * N + N) / 1000,
     "in kilobytes or megabytes"),
    (lambda M, N, fused, itemsize: itemsize * ((2 if fused else 4) * M * N + (1 if fused else 2)
                                               * N), "only the bias kernel reads b"),
    (lambda M, N, fused, itemsize: itemsize * ((2 if fused else 4) * M * N + N) // 8,
     "expected"),
    (lambda M, N, fused: 0, "TypeError"),
    (lambda M, N, fused, itemsize: (np.float32(itemsize)
                                    * np.float32((2 if fused else 4) * M * N + N)),
     "so the count was rounded"),
]


@pytest.mark.parametrize("function", [_right, _right_by_passes, _right_as_float])
def test_traffic_accepts_right_answers(function):
    for seed in SEEDS:
        assert ch05.check_traffic(function, seed=seed, show=False).passed


@pytest.mark.parametrize("function, words", TRAFFIC_WRONG)
def test_traffic_names_the_mistake(function, words):
    result = ch05.check_traffic(function, seed=1, show=False)
    assert result.status == FAILED and words in result.message + result.hint, result


def test_traffic_stub():
    def stub(M, N, fused, itemsize):
        raise NotImplementedError()

    assert ch05.check_traffic(stub, show=False).status == NOT_ATTEMPTED


# --- stable softmax with cross-entropy ----------------------------------------------------------


@cuda.jit
def softmax(logits, labels, probs, losses):
    r = cuda.grid(1)
    if r < logits.shape[0]:
        m = logits[r, 0]
        for c in range(1, logits.shape[1]):
            m = max(m, logits[r, c])
        total = 0.0
        for c in range(logits.shape[1]):
            total += math.exp(logits[r, c] - m)
        for c in range(logits.shape[1]):
            probs[r, c] = math.exp(logits[r, c] - m) / total
        losses[r] = math.log(total) + m - logits[r, labels[r]]


@cuda.jit
def softmax_stub(logits, labels, probs, losses):
    # YOUR CODE HERE
    raise NotImplementedError()


@cuda.jit
def unstable(logits, labels, probs, losses):
    r = cuda.grid(1)
    if r < logits.shape[0]:
        total = 0.0
        for c in range(logits.shape[1]):
            total += math.exp(logits[r, c])
        for c in range(logits.shape[1]):
            probs[r, c] = math.exp(logits[r, c]) / total
        losses[r] = -math.log(probs[r, labels[r]])


@cuda.jit
def max_from_zero(logits, labels, probs, losses):
    r = cuda.grid(1)
    if r < logits.shape[0]:
        m = 0.0
        for c in range(logits.shape[1]):
            m = max(m, logits[r, c])
        total = 0.0
        for c in range(logits.shape[1]):
            total += math.exp(logits[r, c] - m)
        for c in range(logits.shape[1]):
            probs[r, c] = math.exp(logits[r, c] - m) / total
        losses[r] = math.log(total) + m - logits[r, labels[r]]


@cuda.jit
def max_from_minus_1000(logits, labels, probs, losses):
    # a start "small enough" for the cases near -1000, but above a row near -3000
    r = cuda.grid(1)
    if r < logits.shape[0]:
        m = -1000.0
        for c in range(logits.shape[1]):
            if logits[r, c] > m:
                m = logits[r, c]
        total = 0.0
        for c in range(logits.shape[1]):
            total += math.exp(logits[r, c] - m)
        for c in range(logits.shape[1]):
            probs[r, c] = math.exp(logits[r, c] - m) / total
        losses[r] = math.log(total) + m - logits[r, labels[r]]


@cuda.jit
def subtract_first(logits, labels, probs, losses):
    r = cuda.grid(1)
    if r < logits.shape[0]:
        m = logits[r, 0]
        total = 0.0
        for c in range(logits.shape[1]):
            total += math.exp(logits[r, c] - m)
        for c in range(logits.shape[1]):
            probs[r, c] = math.exp(logits[r, c] - m) / total
        losses[r] = math.log(total) + m - logits[r, labels[r]]


@cuda.jit
def loss_from_log_p(logits, labels, probs, losses):
    r = cuda.grid(1)
    if r < logits.shape[0]:
        m = logits[r, 0]
        for c in range(1, logits.shape[1]):
            m = max(m, logits[r, c])
        total = 0.0
        for c in range(logits.shape[1]):
            total += math.exp(logits[r, c] - m)
        for c in range(logits.shape[1]):
            probs[r, c] = math.exp(logits[r, c] - m) / total
        losses[r] = -math.log(probs[r, labels[r]])


@cuda.jit
def not_normalised(logits, labels, probs, losses):
    r = cuda.grid(1)
    if r < logits.shape[0]:
        m = logits[r, 0]
        for c in range(1, logits.shape[1]):
            m = max(m, logits[r, c])
        total = 0.0
        for c in range(logits.shape[1]):
            total += math.exp(logits[r, c] - m)
            probs[r, c] = math.exp(logits[r, c] - m)
        losses[r] = math.log(total) + m - logits[r, labels[r]]


@cuda.jit
def loss_without_m(logits, labels, probs, losses):
    r = cuda.grid(1)
    if r < logits.shape[0]:
        m = logits[r, 0]
        for c in range(1, logits.shape[1]):
            m = max(m, logits[r, c])
        total = 0.0
        for c in range(logits.shape[1]):
            total += math.exp(logits[r, c] - m)
        for c in range(logits.shape[1]):
            probs[r, c] = math.exp(logits[r, c] - m) / total
        losses[r] = math.log(total) - logits[r, labels[r]]


@cuda.jit
def guard_on_classes(logits, labels, probs, losses):
    r = cuda.grid(1)
    if r < logits.shape[1]:
        m = logits[r, 0]
        for c in range(1, logits.shape[1]):
            m = max(m, logits[r, c])
        total = 0.0
        for c in range(logits.shape[1]):
            total += math.exp(logits[r, c] - m)
        for c in range(logits.shape[1]):
            probs[r, c] = math.exp(logits[r, c] - m) / total
        losses[r] = math.log(total) + m - logits[r, labels[r]]


@cuda.jit
def softmax_no_guard(logits, labels, probs, losses):
    r = cuda.grid(1)
    m = logits[r, 0]
    for c in range(1, logits.shape[1]):
        m = max(m, logits[r, c])
    total = 0.0
    for c in range(logits.shape[1]):
        total += math.exp(logits[r, c] - m)
    for c in range(logits.shape[1]):
        probs[r, c] = math.exp(logits[r, c] - m) / total
    losses[r] = math.log(total) + m - logits[r, labels[r]]


@cuda.jit
def exp_in_place(logits, labels, probs, losses):
    r = cuda.grid(1)
    if r < logits.shape[0]:
        m = logits[r, 0]
        for c in range(1, logits.shape[1]):
            m = max(m, logits[r, c])
        z_label = logits[r, labels[r]]
        total = 0.0
        for c in range(logits.shape[1]):
            logits[r, c] = math.exp(logits[r, c] - m)
            total += logits[r, c]
        for c in range(logits.shape[1]):
            probs[r, c] = logits[r, c] / total
        losses[r] = math.log(total) + m - z_label


@cuda.jit
def labels_ignored(logits, labels, probs, losses):
    r = cuda.grid(1)
    if r < logits.shape[0]:
        m = logits[r, 0]
        for c in range(1, logits.shape[1]):
            m = max(m, logits[r, c])
        total = 0.0
        for c in range(logits.shape[1]):
            total += math.exp(logits[r, c] - m)
        for c in range(logits.shape[1]):
            probs[r, c] = math.exp(logits[r, c] - m) / total
        losses[r] = math.log(total) + m - logits[r, 0]


@cuda.jit
def softmax_block_of_64(logits, labels, probs, losses):  # the block size typed in (round 16)
    r = cuda.blockIdx.x * 64 + cuda.threadIdx.x
    if r < logits.shape[0]:
        m = logits[r, 0]
        for c in range(1, logits.shape[1]):
            m = max(m, logits[r, c])
        total = 0.0
        for c in range(logits.shape[1]):
            total += math.exp(logits[r, c] - m)
        for c in range(logits.shape[1]):
            probs[r, c] = math.exp(logits[r, c] - m) / total
        losses[r] = math.log(total) + m - logits[r, labels[r]]


@cuda.jit
def builtin_max_of_row(logits, labels, probs, losses):
    r = cuda.grid(1)
    if r < logits.shape[0]:
        m = max(logits[r, :])
        total = 0.0
        for c in range(logits.shape[1]):
            total += math.exp(logits[r, c] - m)
        for c in range(logits.shape[1]):
            probs[r, c] = math.exp(logits[r, c] - m) / total
        losses[r] = math.log(total) + m - logits[r, labels[r]]


@cuda.jit
def builtin_max_of_row_index(logits, labels, probs, losses):
    r = cuda.grid(1)
    if r < logits.shape[0]:
        m = max(logits[r])
        total = 0.0
        for c in range(logits.shape[1]):
            total += math.exp(logits[r, c] - m)
        for c in range(logits.shape[1]):
            probs[r, c] = math.exp(logits[r, c] - m) / total
        losses[r] = math.log(total) + m - logits[r, labels[r]]


@cuda.jit
def ten_classes(logits, labels, probs, losses):
    r = cuda.grid(1)
    if r < logits.shape[0]:
        m = logits[r, 0]
        for c in range(1, 10):
            m = max(m, logits[r, c])
        total = 0.0
        for c in range(10):
            total += math.exp(logits[r, c] - m)
        for c in range(10):
            probs[r, c] = math.exp(logits[r, c] - m) / total
        losses[r] = math.log(total) + m - logits[r, labels[r]]


CLASSES = 10


@cuda.jit
def ten_classes_with_guard(logits, labels, probs, losses):
    r = cuda.grid(1)
    if r < logits.shape[0]:
        m = logits[r, 0]
        for c in range(10):
            if c < logits.shape[1]:
                m = max(m, logits[r, c])
        total = 0.0
        for c in range(10):
            if c < logits.shape[1]:
                total += math.exp(logits[r, c] - m)
        for c in range(10):
            if c < logits.shape[1]:
                probs[r, c] = math.exp(logits[r, c] - m) / total
        losses[r] = math.log(total) + m - logits[r, labels[r]]


@cuda.jit
def loss_negated(logits, labels, probs, losses):
    r = cuda.grid(1)
    if r < logits.shape[0]:
        m = logits[r, 0]
        for c in range(1, logits.shape[1]):
            m = max(m, logits[r, c])
        total = 0.0
        for c in range(logits.shape[1]):
            total += math.exp(logits[r, c] - m)
        for c in range(logits.shape[1]):
            probs[r, c] = math.exp(logits[r, c] - m) / total
        losses[r] = logits[r, labels[r]] - m - math.log(total)


@cuda.jit
def loss_without_label_logit(logits, labels, probs, losses):
    r = cuda.grid(1)
    if r < logits.shape[0]:
        m = logits[r, 0]
        for c in range(1, logits.shape[1]):
            m = max(m, logits[r, c])
        total = 0.0
        for c in range(logits.shape[1]):
            total += math.exp(logits[r, c] - m)
        for c in range(logits.shape[1]):
            probs[r, c] = math.exp(logits[r, c] - m) / total
        losses[r] = math.log(total) + m


@cuda.jit
def online_softmax(logits, labels, probs, losses):
    """Right, written differently: one pass keeps the running max and the rescaled sum."""
    r = cuda.grid(1)
    if r < logits.shape[0]:
        m = -math.inf
        total = 0.0
        for c in range(logits.shape[1]):
            z = logits[r, c]
            if z > m:
                total = total * math.exp(m - z) + 1.0
                m = z
            else:
                total += math.exp(z - m)
        for c in range(logits.shape[1]):
            probs[r, c] = math.exp(logits[r, c] - m) / total
        losses[r] = math.log(total) + m - logits[r, labels[r]]


@cuda.jit
def softmax_with_an_if_max(logits, labels, probs, losses):
    """Right, written differently: the max with an if, the label's logit read first, an
    early return for idle threads."""
    r = cuda.grid(1)
    if r >= logits.shape[0]:
        return
    z_label = logits[r, labels[r]]
    m = logits[r, logits.shape[1] - 1]
    for c in range(logits.shape[1]):
        if logits[r, c] > m:
            m = logits[r, c]
    total = 0.0
    for c in range(logits.shape[1]):
        total = total + math.exp(logits[r, c] - m)
    log_total = math.log(total)
    for c in range(logits.shape[1]):
        probs[r, c] = math.exp(logits[r, c] - m - log_total)
    losses[r] = log_total + m - z_label


@cuda.jit
def builtin_max_of_a_named_row(logits, labels, probs, losses):
    r = cuda.grid(1)
    if r < logits.shape[0]:
        row = logits[r]
        m = max(row)
        total = 0.0
        for c in range(logits.shape[1]):
            total += math.exp(logits[r, c] - m)
        for c in range(logits.shape[1]):
            probs[r, c] = math.exp(logits[r, c] - m) / total
        losses[r] = math.log(total) + m - logits[r, labels[r]]


@cuda.jit
def builtin_max_of_a_named_slice_of_an_alias(z, y, p, loss):
    r = cuda.grid(1)
    if r < z.shape[0]:
        scores = z
        row = scores[r, :]
        m = max(row[:])
        total = 0.0
        for c in range(z.shape[1]):
            total += math.exp(z[r, c] - m)
        for c in range(z.shape[1]):
            p[r, c] = math.exp(z[r, c] - m) / total
        loss[r] = math.log(total) + m - z[r, y[r]]


@cuda.jit
def builtin_min_of_a_named_row(logits, labels, probs, losses):
    r = cuda.grid(1)
    if r < logits.shape[0]:
        row = logits[r, :]
        low = min(row)
        m = logits[r, 0]
        for c in range(1, logits.shape[1]):
            m = max(m, logits[r, c])
        total = 0.0
        for c in range(logits.shape[1]):
            total += math.exp(logits[r, c] - m)
        for c in range(logits.shape[1]):
            probs[r, c] = math.exp(logits[r, c] - m) / total
        losses[r] = math.log(total) + m - logits[r, labels[r]] + 0.0 * low


NUM_CLASSES = 10


@cuda.jit
def ten_classes_through_a_global(logits, labels, probs, losses):
    r = cuda.grid(1)
    if r < logits.shape[0]:
        m = logits[r, 0]
        for c in range(1, NUM_CLASSES):
            m = max(m, logits[r, c])
        total = 0.0
        for c in range(NUM_CLASSES):
            total += math.exp(logits[r, c] - m)
        for c in range(NUM_CLASSES):
            probs[r, c] = math.exp(logits[r, c] - m) / total
        losses[r] = math.log(total) + m - logits[r, labels[r]]


@cuda.jit
def ten_classes_through_a_local_name(logits, labels, probs, losses):
    r = cuda.grid(1)
    C = 10
    if r < logits.shape[0]:
        m = logits[r, 0]
        for c in range(1, C):
            m = max(m, logits[r, c])
        total = 0.0
        for c in range(C):
            total += math.exp(logits[r, c] - m)
        for c in range(C):
            probs[r, c] = math.exp(logits[r, c] - m) / total
        losses[r] = math.log(total) + m - logits[r, labels[r]]


@cuda.jit
def softmax_with_named_counts_and_a_tuple_max(logits, labels, probs, losses):
    """Right, written differently: the row count and the class count in names, the max of a
    tuple literal, a module global (NUM_CLASSES) read but not used as a loop's end."""
    rows = logits.shape[0]
    C = logits.shape[1]
    r = cuda.grid(1)
    if r < rows:
        m = logits[r, 0]
        for c in range(1, C):
            m = max((m, logits[r, c]))
        total = 0.0
        for c in range(C):
            total += math.exp(logits[r, c] - m)
        for c in range(C):
            probs[r, c] = math.exp(logits[r, c] - m) / total
        losses[r] = math.log(total) + m - logits[r, labels[r]] + 0 * NUM_CLASSES


@pytest.mark.parametrize("kernel", [online_softmax, softmax_with_an_if_max,
                                    softmax_with_named_counts_and_a_tuple_max])
def test_softmax_accepts_right_kernels_written_differently(kernel):
    for seed in (5, 6):
        result = ch05.check_softmax_cross_entropy(kernel, seed=seed, show=False)
        assert result.status == PASSED, result


def test_softmax_never_draws_the_digits_ten_classes():
    assert min(ch05.CLASS_COUNTS) > 10


def test_softmax_refuses_gpulab_s_own_kernel():
    from gpulab.kernels.softmax import softmax_cross_entropy as gpulab_s

    result = ch05.check_softmax_cross_entropy(gpulab_s, seed=1, show=False)
    assert result.status == FAILED and "gpulab's own" in result.message, result


@pytest.mark.parametrize("seed", SEEDS)
def test_softmax_passes_the_stable_kernel(seed):
    result = ch05.check_softmax_cross_entropy(softmax, seed=seed, show=False)
    assert result.status == PASSED, result


@pytest.mark.parametrize("kernel, status, words", [
    (softmax_stub, NOT_ATTEMPTED, "one thread per row"),
    (unstable, FAILED, "subtract the row's largest logit m first"),
    (max_from_zero, FAILED, "not from 0"),
    (max_from_minus_1000, FAILED, "not from 0 or another number typed in"),
    (subtract_first, FAILED, "subtract the row's *largest* logit"),
    (loss_from_log_p, FAILED, "log-sum-exp"),
    (not_normalised, FAILED, "do not add up to 1"),
    (loss_without_m, FAILED, "m is missing"),
    (guard_on_classes, FAILED, "not the number of rows"),
    (softmax_no_guard, FAILED, "the guard must let through only"),
    (builtin_max_of_row, FAILED, "builtin function"),
    (builtin_max_of_row_index, FAILED, "builtin function"),
    (builtin_max_of_a_named_row, FAILED, "builtin function"),
    (builtin_max_of_a_named_slice_of_an_alias, FAILED, "builtin function"),
    (builtin_min_of_a_named_row, FAILED, "builtin function"),
    (ten_classes, FAILED, "never uses the digits"),
    (ten_classes_with_guard, FAILED, "fixed number of classes"),
    (ten_classes_through_a_global, FAILED, "fixed number of classes"),
    (ten_classes_through_a_local_name, FAILED, "fixed number of classes"),
    (loss_negated, FAILED, "the sign is wrong"),
    (loss_without_label_logit, FAILED, "label's logit is not subtracted"),
    (exp_in_place, FAILED, "wrote into its input logits"),
    (labels_ignored, FAILED, "use the row's label"),
    (softmax_block_of_64, FAILED, "`r = cuda.blockIdx.x * 64 + cuda.threadIdx.x` hard-codes the "
                                  "block size"),
])
def test_softmax_names_the_mistake(kernel, status, words):
    for seed in (5, 6, 7):
        result = ch05.check_softmax_cross_entropy(kernel, seed=seed, show=False)
        assert result.status == status, result
        assert words in result.message + result.hint, result


def test_the_unstable_softmax_fails_on_large_logits_in_float64_too():
    result = ch05.check_softmax_cross_entropy(unstable, seed=1, dtype="float64", show=False)
    assert result.status == FAILED and "1000" in result.message, result
    assert ch05.check_softmax_cross_entropy(softmax, seed=1, dtype="float64", show=False).passed


@pytest.mark.parametrize("kernel", [ten_classes_through_a_global, ten_classes_through_a_local_name])
def test_softmax_names_a_class_count_in_a_name_not_the_rows_never_written(kernel):
    for seed in (1, 2, 3):
        result = ch05.check_softmax_cross_entropy(kernel, seed=seed, show=False)
        assert result.status == FAILED, result
        assert "fixed number of classes" in result.message, result
        assert "never written" not in result.message + result.hint, result


def test_softmax_spec_lists_the_mistakes_it_diagnoses_in_the_order_they_are_tried():
    spec = ch05.SOFTMAX
    assert spec.mistakes == (ch05.SOFTMAX_SOURCE_MISTAKES + ch05.CRASH_MISTAKES
                             + ch05.UNWRITTEN_MISTAKES + ch05.VALUE_MISTAKES)
    table = spec.mistake_table()
    for words in ("the unstable softmax", "the max started from 0",
                  "a value other than the row's max subtracted", "the loss as -log p",
                  "a guard on the classes", "losses never written", "rows not normalised",
                  "the sign is wrong"):
        assert words in table, words
    assert "the max started from 0" not in spec.also


@pytest.mark.parametrize("missing, losses_written, words", [
    (range(13, 70), True, "as many as there are classes"),
    (range(32, 70), True, "each thread must handle its own element"),
    ([69], True, "it is one short"),
    (range(70), False, "write each row's loss"),
    (range(1, 70, 2), True, "one thread per row, from the global index"),
])
def test_softmax_names_how_rows_went_unwritten(missing, losses_written, words):
    trial = Trial("check_softmax_cross_entropy", 1, (70,), (32,), np.dtype("float32"),
                  np.random.default_rng(1), inner=13)
    losses = np.zeros(70) if losses_written else np.full(70, np.nan)
    failure = diagnose(ch05.UNWRITTEN_MISTAKES,
                       ch05.Unwritten(np.array(missing), losses, trial))
    assert failure is not None and words in failure.hint, failure
    assert "never written" in str(failure) and "seed=1" in str(failure), failure


# --- issue: more wrong answers (tanh by an exp that overflows, ReLU as a min, a row's classes
# partly written) and right ones written differently --------------------------------------------


@cuda.jit
def tanh_by_exp_of_2z(Z, b, act, out):  # exp(2 z) overflows for large z: inf / inf
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        z = Z[r, c] + b[c]
        if act == RELU:
            out[r, c] = max(z, 0.0)
        elif act == TANH:
            e = math.exp(2 * z)
            out[r, c] = (e - 1) / (e + 1)
        else:
            out[r, c] = z


@cuda.jit
def relu_as_min(Z, b, act, out):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        z = Z[r, c] + b[c]
        if act == RELU:
            out[r, c] = min(z, 0.0)
        elif act == TANH:
            out[r, c] = math.tanh(z)
        else:
            out[r, c] = z


@cuda.jit
def leaky_relu(Z, b, act, out):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        z = Z[r, c] + b[c]
        if act == RELU:
            out[r, c] = z if z > 0 else 0.01 * z
        elif act == TANH:
            out[r, c] = math.tanh(z)
        else:
            out[r, c] = z


@cuda.jit
def bias_subtracted(Z, b, act, out):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        z = Z[r, c] - b[c]
        if act == RELU:
            out[r, c] = max(z, 0.0)
        elif act == TANH:
            out[r, c] = math.tanh(z)
        else:
            out[r, c] = z


@cuda.jit(device=True)
def activation_of(z, act):
    if act == RELU:
        return max(z, 0.0)
    if act == TANH:
        return math.tanh(z)
    return z


@cuda.jit
def bias_activation_through_a_device_function(Z, b, act, out):  # right: a helper, early return
    r = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    c = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if r >= out.shape[0] or c >= out.shape[1]:
        return
    out[r, c] = activation_of(Z[r, c] + b[c], act)


@cuda.jit
def bias_activation_grid_stride(Z, b, act, out):  # right: 2-D grid-stride loops
    c0, r0 = cuda.grid(2)
    sc, sr = cuda.gridsize(2)
    for r in range(r0, Z.shape[0], sr):
        for c in range(c0, Z.shape[1], sc):
            z = Z[r, c] + b[c]
            if act == TANH:
                z = math.tanh(z)
            elif act == RELU and z < 0:
                z = 0.0
            out[r, c] = z


@pytest.mark.parametrize("kernel, words", [
    (tanh_by_exp_of_2z, "exp overflowed"),
    (relu_as_min, "ReLU's max turned into a min"),
    (leaky_relu, "elements are wrong"),
    (bias_subtracted, "elements are wrong"),
])
def test_more_bias_activation_mistakes_are_named(kernel, words):
    result = ch05.check_bias_activation(kernel, seed=5, show=False)
    assert result.status == FAILED and words in result.message, result


@cuda.jit
def tanh_as_one_minus_two_over_exp(Z, b, act, out):  # right: exp(2 z) = inf gives 1 on a GPU
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        z = Z[r, c] + b[c]
        if act == RELU:
            out[r, c] = max(z, 0.0)
        elif act == TANH:
            out[r, c] = 1.0 - 2.0 / (math.exp(2.0 * z) + 1.0)
        else:
            out[r, c] = z


@pytest.mark.parametrize("kernel", [bias_activation_through_a_device_function,
                                    bias_activation_grid_stride,
                                    tanh_as_one_minus_two_over_exp])
def test_more_bias_activation_right_answers_pass(kernel):
    assert ch05.check_bias_activation(kernel, seed=5, show=False).passed


def test_exp_is_put_back_after_a_check_that_overflowed():
    ch05.check_bias_activation(tanh_by_exp_of_2z, seed=5, show=False)
    with pytest.raises(OverflowError):
        math.exp(1000.0)


def _right_by_reads_and_writes(M, N, fused, itemsize):
    reads = M * N + N + (0 if fused else M * N)  # Z and b; then Z + b again
    writes = M * N + (0 if fused else M * N)  # A; and Z + b first
    return (reads + writes) * itemsize


@pytest.mark.parametrize("function, words", [
    (lambda M, N, fused, itemsize: itemsize * (2 if fused else 4) * M * N + N, "expected"),
    (lambda M, N, fused, itemsize: itemsize * ((2 if fused else 4) * M * N + (1 if fused else 2)
                                               * N), "expected"),
    (lambda M, N, fused, itemsize: (itemsize * ((2 if fused else 4) * M * N + N),), "not a number"),
])
def test_more_traffic_mistakes_fail(function, words):
    result = ch05.check_traffic(function, seed=5, show=False)
    assert result.status == FAILED and words in result.message, result


def test_traffic_counted_by_reads_and_writes_passes():
    assert ch05.check_traffic(_right_by_reads_and_writes, seed=5, show=False).passed


@cuda.jit
def probabilities_one_class_short(logits, labels, probs, losses):
    r = cuda.grid(1)
    if r < logits.shape[0]:
        m = logits[r, 0]
        for c in range(1, logits.shape[1] - 1):
            m = max(m, logits[r, c])
        total = 0.0
        for c in range(logits.shape[1] - 1):
            total += math.exp(logits[r, c] - m)
        for c in range(logits.shape[1] - 1):
            probs[r, c] = math.exp(logits[r, c] - m) / total
        losses[r] = math.log(total) + m - logits[r, labels[r]]


@cuda.jit
def probability_of_the_label_only(logits, labels, probs, losses):
    r = cuda.grid(1)
    if r < logits.shape[0]:
        m = logits[r, 0]
        for c in range(1, logits.shape[1]):
            m = max(m, logits[r, c])
        total = 0.0
        for c in range(logits.shape[1]):
            total += math.exp(logits[r, c] - m)
        probs[r, labels[r]] = math.exp(logits[r, labels[r]] - m) / total
        losses[r] = math.log(total) + m - logits[r, labels[r]]


@cuda.jit
def mean_subtracted(logits, labels, probs, losses):
    r = cuda.grid(1)
    if r < logits.shape[0]:
        m = 0.0
        for c in range(logits.shape[1]):
            m += logits[r, c]
        m /= logits.shape[1]
        total = 0.0
        for c in range(logits.shape[1]):
            total += math.exp(logits[r, c] - m)
        for c in range(logits.shape[1]):
            probs[r, c] = math.exp(logits[r, c] - m) / total
        losses[r] = math.log(total) + m - logits[r, labels[r]]


@cuda.jit
def loss_from_a_clamped_probability(logits, labels, probs, losses):  # -log max(p, 1e-30)
    r = cuda.grid(1)
    if r < logits.shape[0]:
        m = logits[r, 0]
        for c in range(1, logits.shape[1]):
            m = max(m, logits[r, c])
        total = 0.0
        for c in range(logits.shape[1]):
            total += math.exp(logits[r, c] - m)
        for c in range(logits.shape[1]):
            probs[r, c] = math.exp(logits[r, c] - m) / total
        losses[r] = -math.log(max(probs[r, labels[r]], 1e-30))


@cuda.jit
def softmax_through_the_log_total(logits, labels, probs, losses):  # right: log p first
    r = cuda.grid(1)
    if r >= logits.shape[0]:
        return
    classes = logits.shape[1]
    m = -math.inf
    for c in range(classes):
        m = max(m, logits[r, c])
    total = 0.0
    for c in range(classes):
        total += math.exp(logits[r, c] - m)
    log_total = math.log(total)
    for c in range(classes):
        probs[r, c] = math.exp(logits[r, c] - m - log_total)
    losses[r] = log_total - (logits[r, labels[r]] - m)


@pytest.mark.parametrize("kernel, words", [
    (probabilities_one_class_short, "probabilities in"),
    (probability_of_the_label_only, "misses classes"),
    (mean_subtracted, "subtract the row's *largest* logit"),
    (loss_from_a_clamped_probability, "not from a probability"),
])
def test_more_softmax_mistakes_are_named(kernel, words):
    result = ch05.check_softmax_cross_entropy(kernel, seed=5, show=False)
    assert result.status == FAILED and words in result.message + result.hint, result


def test_softmax_through_the_log_total_passes():
    result = ch05.check_softmax_cross_entropy(softmax_through_the_log_total, seed=6, show=False)
    assert result.passed, result


@cuda.jit
def softmax_exps_in_a_local_array_of_16(logits, labels, probs, losses):
    """Wrong: "the digits have 10 classes, 16 is plenty"."""
    r = cuda.grid(1)
    if r < logits.shape[0]:
        C = logits.shape[1]
        e = cuda.local.array(16, numba.float64)
        m = logits[r, 0]
        for c in range(1, C):
            m = max(m, logits[r, c])
        total = 0.0
        for c in range(C):
            e[c] = math.exp(logits[r, c] - m)
            total += e[c]
        for c in range(C):
            probs[r, c] = e[c] / total
        losses[r] = math.log(total) + m - logits[r, labels[r]]


@cuda.jit
def softmax_block_of_32_typed_in(logits, labels, probs, losses):
    """Wrong: the row from a block size of 32 typed in."""
    r = cuda.blockIdx.x * 32 + cuda.threadIdx.x
    if r < logits.shape[0]:
        m = logits[r, 0]
        for c in range(1, logits.shape[1]):
            m = max(m, logits[r, c])
        total = 0.0
        for c in range(logits.shape[1]):
            total += math.exp(logits[r, c] - m)
        for c in range(logits.shape[1]):
            probs[r, c] = math.exp(logits[r, c] - m) / total
        losses[r] = math.log(total) + m - logits[r, labels[r]]


@cuda.jit
def softmax_through_the_log_sum_exp(logits, labels, probs, losses):
    """Right: p = exp(z - lse), lse = m + log(total) (rounded to float32 near ±1000)."""
    r = cuda.grid(1)
    if r < logits.shape[0]:
        m = logits[r, 0]
        for c in range(1, logits.shape[1]):
            m = max(m, logits[r, c])
        total = 0.0
        for c in range(logits.shape[1]):
            total += math.exp(logits[r, c] - m)
        lse = m + math.log(total)
        for c in range(logits.shape[1]):
            probs[r, c] = math.exp(logits[r, c] - lse)
        losses[r] = lse - logits[r, labels[r]]


@pytest.mark.parametrize("seed", [1, 7, 12345])
def test_softmax_sizes_typed_in_fail_on_wider_rows_and_another_block(seed):
    result = ch05.check_softmax_cross_entropy(softmax_block_of_32_typed_in, seed=seed,
                                              show=False)
    assert result.status == FAILED, result
    assert ("`r = cuda.blockIdx.x * 32 + cuda.threadIdx.x` hard-codes the block size, but this "
            "launch's blocks have 64 threads") in result.message, result


@pytest.mark.parametrize("seed", [1, 7, 12345])
def test_softmax_with_a_local_array_of_a_length_typed_in_is_refused(seed):
    # whatever its length (16 fails on the wider rows; 48 would hold every count drawn)
    result = ch05.check_softmax_cross_entropy(softmax_exps_in_a_local_array_of_16, seed=seed,
                                              show=False)
    assert result.status == FAILED, result
    assert "in a local array of 16: right only while there are at most that many" in (
        result.message), result
    assert "keep no per-thread array of a fixed length for a row's classes" in result.hint


@pytest.mark.parametrize("seed", [1, 7, 12345])
def test_softmax_through_the_log_sum_exp_passes(seed):
    result = ch05.check_softmax_cross_entropy(softmax_through_the_log_sum_exp, seed=seed,
                                              show=False)
    assert result.passed, result


@cuda.jit
def bias_activation_a_row_per_thread(Z, b, act, out):
    """Wrong method, right values: the first thread of each row does the whole row."""
    c, r = cuda.grid(2)
    if c == 0 and r < Z.shape[0]:
        for cc in range(Z.shape[1]):
            z = Z[r, cc] + b[cc]
            if act == RELU:
                z = max(z, 0.0)
            elif act == TANH:
                z = math.tanh(z)
            out[r, cc] = z


@pytest.mark.parametrize("seed", [1, 7, 12345])
def test_bias_activation_a_row_per_thread_fails(seed):
    result = ch05.check_bias_activation(bias_activation_a_row_per_thread, seed=seed, show=False)
    assert result.status == FAILED and "7 elements written by one thread" in result.message, (
        result)


@cuda.jit
def softmax_in_float32(logits, labels, probs, losses):
    r = cuda.grid(1)
    if r < logits.shape[0]:
        m = logits[r, 0]
        for c in range(1, logits.shape[1]):
            m = max(m, logits[r, c])
        total = np.float32(0)
        for c in range(logits.shape[1]):
            total += math.exp(logits[r, c] - m)
        for c in range(logits.shape[1]):
            probs[r, c] = math.exp(logits[r, c] - m) / total
        losses[r] = math.log(total) + m - logits[r, labels[r]]


@pytest.mark.skipif(toolkit.installed_version() is None or bool(toolkit.unavailable_reason()),
                    reason="no CUDA toolkit wheels here: nothing is compiled")
def test_softmax_passes_a_float64_sum_and_notes_where_it_computes_in_float64():
    result = ch05.check_softmax_cross_entropy(softmax, seed=3, show=False)
    assert result.status == PASSED, result
    float64 = [note for note in result.notes if "computes in float64" in note]
    assert len(float64) == 1 and "`total += math.exp(logits[r, c] - m)` (add.f64)" in float64[0]
    assert "Note: `softmax` computes in float64 although no argument is float64" in str(result)
    result = ch05.check_softmax_cross_entropy(softmax_in_float32, seed=3, show=False)
    assert result.status == PASSED, result
    assert not [note for note in result.notes if "float64" in note], result.notes


@cuda.jit
def bias_activation_x_down_the_rows(Z, b, act, out):
    """Wrong method: x taken as the row, the grid strided so every element is still written:
    right values, but a warp's writes land a row apart."""
    r0, c0 = cuda.grid(2)
    rows_step, cols_step = cuda.gridsize(2)
    for r in range(r0, Z.shape[0], rows_step):
        for c in range(c0, Z.shape[1], cols_step):
            z = Z[r, c] + b[c]
            if act == 1:
                z = max(z, np.float32(0))
            elif act == 3:
                z = math.tanh(z)
            out[r, c] = z


@pytest.mark.parametrize("seed", [1, 7])
def test_bias_activation_names_x_down_the_rows(seed):
    result = ch05.check_bias_activation(bias_activation_x_down_the_rows, seed=seed, show=False)
    assert result.status == FAILED, result
    assert "threads side by side along x touched elements a row apart" in result.message, result
    assert "out[0, 0]" in result.message, result


@cuda.jit
def softmax_caching_16_exps_and_recomputing_the_rest(logits, labels, probs, losses):
    """Right, written differently: the first 16 exps kept in a local array, the others computed
    again: right for any class count, as the wide rows (33 or more classes) show."""
    r = cuda.grid(1)
    if r < logits.shape[0]:
        kept = cuda.local.array(16, numba.float32)
        m = logits[r, 0]
        for c in range(1, logits.shape[1]):
            m = max(m, logits[r, c])
        total = np.float32(0)
        for c in range(logits.shape[1]):
            e = math.exp(logits[r, c] - m)
            if c < 16:
                kept[c] = e
            total += e
        for c in range(logits.shape[1]):
            e = kept[c] if c < 16 else math.exp(logits[r, c] - m)
            probs[r, c] = e / total
        losses[r] = math.log(total) + m - logits[r, labels[r]]


@cuda.jit
def softmax_exps_in_a_local_array_of_64(logits, labels, probs, losses):
    """Wrong: a local array of 64 exps, right only while a row has at most 64 classes (every
    row the check draws has fewer, so only the source shows it)."""
    r = cuda.grid(1)
    if r < logits.shape[0]:
        e = cuda.local.array(64, numba.float32)
        m = logits[r, 0]
        for c in range(1, logits.shape[1]):
            m = max(m, logits[r, c])
        total = np.float32(0)
        for c in range(logits.shape[1]):
            e[c] = math.exp(logits[r, c] - m)
            total += e[c]
        for c in range(logits.shape[1]):
            probs[r, c] = e[c] / total
        losses[r] = math.log(total) + m - logits[r, labels[r]]


@pytest.mark.parametrize("seed", [1, 7])
def test_a_local_cache_with_a_way_round_it_passes_and_one_longer_than_the_rows_fails(seed):
    assert ch05.check_softmax_cross_entropy(softmax_caching_16_exps_and_recomputing_the_rest,
                                            seed=seed, show=False).passed
    result = ch05.check_softmax_cross_entropy(softmax_exps_in_a_local_array_of_64, seed=seed,
                                              show=False)
    assert result.status == FAILED, result
    assert "keeps a row's classes in a local array of 64" in result.message, result.message
