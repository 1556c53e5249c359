"""Chapter 05's checks (fused bias + ReLU, the traffic napkin math) against a right answer, the
stub and the typical wrong answers: each wrong one must fail with a hint a learner can act on,
the stub must say "not attempted", and no check may raise."""

import pytest
from numba import cuda

from gpulab.exercises import ch05
from gpulab.exercises.checks import FAILED, NOT_ATTEMPTED, PASSED

SEEDS = [3, 11]

# --- chapter 05: fused bias + ReLU -------------------------------------------------------------


@cuda.jit
def bias_relu(Z, b, out):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        z = Z[r, c] + b[c]
        out[r, c] = z if z > 0 else 0


@cuda.jit
def bias_relu_stub(Z, b, out):
    # YOUR CODE HERE
    raise NotImplementedError()


@cuda.jit
def bias_relu_no_guard(Z, b, out):
    c, r = cuda.grid(2)
    z = Z[r, c] + b[c]
    out[r, c] = z if z > 0 else 0


@cuda.jit
def bias_relu_no_bias(Z, b, out):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        out[r, c] = Z[r, c] if Z[r, c] > 0 else 0


@cuda.jit
def bias_relu_no_relu(Z, b, out):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        out[r, c] = Z[r, c] + b[c]


@cuda.jit
def bias_relu_thread_index(Z, b, out):
    c, r = cuda.threadIdx.x, cuda.threadIdx.y
    if r < Z.shape[0] and c < Z.shape[1]:
        z = Z[r, c] + b[c]
        out[r, c] = z if z > 0 else 0


@cuda.jit
def bias_relu_list(Z, b, out):
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        values = [Z[r, c] + b[c], 0.0]
        out[r, c] = max(values)


@pytest.mark.parametrize("seed", SEEDS)
def test_bias_relu_passes_a_right_kernel(seed):
    assert ch05.check_bias_relu(bias_relu, seed=seed, show=False).status == PASSED


@pytest.mark.parametrize("kernel, status, words", [
    (bias_relu_stub, NOT_ATTEMPTED, "cuda.grid(2)"),
    (bias_relu_no_guard, FAILED, "guard both directions"),
    (bias_relu_no_bias, FAILED, "add b[c] before the ReLU"),
    (bias_relu_no_relu, FAILED, "keep only positive values"),
    (bias_relu_thread_index, FAILED, "not `cuda.threadIdx` alone"),
    (bias_relu_list, FAILED, "cuda.local.array"),
    (None, NOT_ATTEMPTED, "write the kernel"),
])
def test_bias_relu_explains_mistakes(kernel, status, words):
    result = ch05.check_bias_relu(kernel, seed=3, show=False)
    assert result.status == status, result
    assert words in result.message + result.hint, result


def test_traffic():
    def right(M, N, fused, itemsize):
        return itemsize * ((2 if fused else 4) * M * N + N)

    def values_not_bytes(M, N, fused, itemsize):
        return (2 if fused else 4) * M * N + N

    def stub(M, N, fused, itemsize):
        raise NotImplementedError()

    assert ch05.check_traffic(right, show=False).passed
    result = ch05.check_traffic(values_not_bytes, seed=1, show=False)
    assert result.status == FAILED and "itemsize" in result.hint
    assert ch05.check_traffic(stub, show=False).status == NOT_ATTEMPTED
