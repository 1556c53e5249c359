"""A race on shared memory fails every traced kernel check, even where the simulator's order
(a block's threads one after another up to each barrier) makes the results right; shared
memory used with a barrier, or one value every thread writes, passes."""

import gpulab  # noqa: F401  (must come before numba: it chooses the simulator or the GPU)

# isort: split

import math

import numba
import pytest
from numba import cuda

from gpulab import device
from gpulab.exercises import ch05, ch06, ch07
from gpulab.exercises.results import FAILED, PASSED
from gpulab.kernels import dense

RELU, TANH = dense.ACTIVATION_CODES["relu"], dense.ACTIVATION_CODES["tanh"]
SIM_ONLY = pytest.mark.skipif(device.tier() != "sim",
                              reason="the race is hidden by the simulator's order only")


@cuda.jit
def bias_activation_through_one_shared_slot(Z, b, act, out):  # z kept "on chip", shared
    z = cuda.shared.array(1, numba.float32)
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        z[0] = Z[r, c] + b[c]
        if act == RELU:
            out[r, c] = max(z[0], 0.0)
        elif act == TANH:
            out[r, c] = math.tanh(z[0])
        else:
            out[r, c] = z[0]


@cuda.jit
def bias_activation_bias_from_every_row(Z, b, act, out):  # right: the same value, then a barrier
    bias = cuda.shared.array(64, numba.float32)
    c, r = cuda.grid(2)
    if c < Z.shape[1]:
        bias[cuda.threadIdx.x] = b[c]  # every row of the block writes the same b[c]
    cuda.syncthreads()
    if r < Z.shape[0] and c < Z.shape[1]:
        z = Z[r, c] + bias[cuda.threadIdx.x]
        out[r, c] = max(z, 0.0) if act == RELU else (math.tanh(z) if act == TANH else z)


@cuda.jit
def softmax_row_in_shared_memory(logits, labels, probs, losses):  # one row's exps per block
    exps = cuda.shared.array(64, numba.float32)
    r = cuda.grid(1)
    if r < logits.shape[0]:
        n = logits.shape[1]
        m = logits[r, 0]
        for c in range(1, n):
            m = max(m, logits[r, c])
        total = 0.0
        for c in range(n):
            exps[c] = math.exp(logits[r, c] - m)
            total += exps[c]
        for c in range(n):
            probs[r, c] = exps[c] / total
        losses[r] = math.log(total) + m - logits[r, labels[r]]


@cuda.jit
def bias_grad_sum_in_a_shared_slot(dZ, db):
    acc = cuda.shared.array(1, numba.float32)
    c = cuda.grid(1)
    if c < dZ.shape[1]:
        acc[0] = 0
        for r in range(dZ.shape[0]):
            acc[0] += dZ[r, c]
        db[c] = acc[0]


@cuda.jit
def adam_state_in_shared_slots(param, grad, m, v, lr, beta1, beta2, eps, correction1,
                               correction2, weight_decay):
    s = cuda.shared.array(3, numba.float32)
    i = cuda.grid(1)
    if i < param.shape[0]:
        s[0] = grad[i] + weight_decay * param[i]
        s[1] = beta1 * m[i] + (1 - beta1) * s[0]
        s[2] = beta2 * v[i] + (1 - beta2) * s[0] * s[0]
        m[i] = s[1]
        v[i] = s[2]
        param[i] -= lr * (s[1] / correction1) / (math.sqrt(s[2] / correction2) + eps)


@cuda.jit
def loss_gradient_target_in_a_shared_slot(probs, labels, scale, dlogits):
    t = cuda.shared.array(1, numba.float32)
    c, r = cuda.grid(2)
    if r < probs.shape[0] and c < probs.shape[1]:
        t[0] = 1.0 if c == labels[r] else 0.0
        dlogits[r, c] = (probs[r, c] - t[0]) * scale


@SIM_ONLY
@pytest.mark.parametrize("check, kernel, slot", [
    (ch05.check_bias_activation, bias_activation_through_one_shared_slot, "z[0]"),
    (ch05.check_softmax_cross_entropy, softmax_row_in_shared_memory, "exps["),
    (ch06.check_bias_grad, bias_grad_sum_in_a_shared_slot, "acc[0]"),
    (ch07.check_adam, adam_state_in_shared_slots, "s["),
    (ch07.check_loss_gradient, loss_gradient_target_in_a_shared_slot, "t[0]"),
])
def test_a_per_thread_value_in_shared_memory_is_a_race(check, kernel, slot):
    result = check(kernel, seed=1, show=False)
    assert result.status == FAILED, result
    assert "the results are right here" in result.message, result.message
    assert slot in result.message and "is a shared array, one copy for the whole block" in (
        result.message), result.message
    assert "local variable" in result.hint and "syncthreads" in result.hint, result.hint


def test_one_value_every_row_writes_behind_a_barrier_is_no_race():
    for seed in (1, 2):
        result = ch05.check_bias_activation(bias_activation_bias_from_every_row, seed=seed,
                                            show=False)
        assert result.status == PASSED, result
