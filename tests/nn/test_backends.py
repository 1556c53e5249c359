"""Your kernels in the network: KernelBackend(kernels={...}) launches them in place of gpulab's,
refuses what cannot fit with a clear error, and a step-for-step comparison finds a bug."""

import inspect
import math

import numpy as np
import pytest
from numba import cuda

from gpulab.kernels import dense, matmul, optim, softmax
from gpulab.nn import MLP, Trainer
from gpulab.nn.backends import (
    OVERRIDABLE,
    OVERRIDE_LAUNCH,
    KernelBackend,
    KernelOverrideError,
    get_backend,
)
from gpulab.nn.trainer import train_side_by_side

# gpulab's own kernels, by the name each replaces: a run with all of them as "yours" must be
# the same run, bit for bit
GPULABS_OWN = {
    "matmul": matmul.matmul_naive,
    "transpose_tiled": dense.transpose_tiled,
    "bias_activation": dense.bias_activation,
    "bias_activation_backward": dense.bias_activation_backward,
    "bias_grad": dense.bias_grad,
    "softmax_cross_entropy": softmax.softmax_cross_entropy,
    "softmax_cross_entropy_backward": softmax.softmax_cross_entropy_backward,
    "adam_update": optim.adam_update,
    "sgd_momentum_update": optim.sgd_momentum_update,
}


def small_problem(seed=0, batch=5, widths=(7, 6, 4)):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((batch, widths[0])), rng.integers(0, widths[-1], batch)


def test_every_replaceable_kernel_has_a_launch_and_gpulabs_parameters():
    from gpulab.kernels.registry import kernel_spec

    assert set(OVERRIDE_LAUNCH) == set(OVERRIDABLE)
    for name, parameters in OVERRIDABLE.items():
        gpulab_name = {"matmul": "matmul_naive", "transpose": "transpose_tiled"}.get(name, name)
        spec = kernel_spec(gpulab_name)
        assert tuple(inspect.signature(spec.python_function).parameters) == parameters, name


@pytest.mark.parametrize("optimiser", ["adam", "sgd"])
@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_gpulabs_own_kernels_as_overrides_train_identically(optimiser, activation):
    X, y = small_problem()
    plain = MLP([7, 6, 4], activation, backend="kernels", dtype=np.float64, seed=1)
    mine = plain.copy(backend=KernelBackend(kernels=GPULABS_OWN))
    assert set(mine.backend.overrides) == set(OVERRIDABLE)
    assert mine.backend.origin("transpose") == "yours (transpose_tiled)"
    trainers = [Trainer(m, optimiser, lr=0.05, progress=False) for m in (plain, mine)]
    for _ in range(2):
        losses = [t.step(X, y) for t in trainers]
        assert losses[0] == losses[1]
        want, got = plain.state(), mine.state()
        for name in want:
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_train_side_by_side_of_identical_kernels_matches():
    X, y = small_problem(batch=12)
    side = train_side_by_side(KernelBackend(kernels={"adam_update": optim.adam_update}), X, y,
                              [7, 6, 4], steps=3, batch_size=4)
    assert side.matches and side.first_mismatch is None and side.steps == 3
    assert side.differences == [0.0, 0.0, 0.0]
    assert "rounding allows" in side.table() and "differs" not in side.table()


def test_train_side_by_side_compares_the_first_steps_then_trains_on_alone():
    X, y = small_problem(batch=12)
    seen = []

    def after_step(record):
        seen.append((record.steps, record.compared))
        return record.steps < 3  # stop after step 3 of 4

    side = train_side_by_side(KernelBackend(), X, y, [7, 6, 4], steps=4, batch_size=4,
                              compared_steps=1, after_step=after_step)
    assert seen == [(1, 1), (2, 1), (3, 1)]
    assert side.steps == 3 and side.compared == 1 and side.matches
    assert len(side.differences) == len(side.reference_losses) == 1
    assert side.trainer.model is side.model and side.trainer.optimiser.steps == 3
    assert side.table().count("\n") == 2  # the header, one compared step, the reference line


@cuda.jit
def adam_without_correction(param, grad, m, v, lr, beta1, beta2, eps, correction1, correction2,
                            weight_decay):
    i = cuda.grid(1)
    if i < param.shape[0]:
        g = grad[i] + weight_decay * param[i]
        m[i] = beta1 * m[i] + (1 - beta1) * g
        v[i] = beta2 * v[i] + (1 - beta2) * g * g
        param[i] -= lr * m[i] / (math.sqrt(v[i]) + eps)


@cuda.jit
def bias_grad_skipping_the_last_column(dZ, db):
    c = cuda.grid(1)
    if c < dZ.shape[1] - 1:
        acc = 0.0
        for r in range(dZ.shape[0]):
            acc += dZ[r, c]
        db[c] = acc


@pytest.mark.parametrize("kernels, first_mismatch, worst", [
    ({"adam_update": adam_without_correction}, 1, None),
    ({"bias_grad": bias_grad_skipping_the_last_column}, 1, ".b"),
])
def test_a_learner_like_bug_shows_in_the_step_for_step_comparison(kernels, first_mismatch,
                                                                   worst):
    X, y = small_problem(batch=8)
    side = train_side_by_side(KernelBackend(kernels=kernels), X, y, [7, 6, 4], steps=2,
                              batch_size=4)
    assert not side.matches and side.first_mismatch == first_mismatch
    assert side.losses[0] == side.reference_losses[0]  # the forward pass is gpulab's
    if worst:
        assert side.worst[0].endswith(worst) and side.differences[0] == np.inf  # NaN: unwritten
    assert "<- differs" in side.table()


def plain_function(param, grad, velocity, lr, momentum, weight_decay):
    pass


@cuda.jit(device=True)
def device_function(x):
    return x


@cuda.jit
def three_parameters(Z, b, out):
    pass


@cuda.jit
def stub(Z, b, act, A):
    raise NotImplementedError()


@pytest.mark.parametrize("kernels, words", [
    ({"adam": optim.adam_update}, "'adam' is not a kernel the network launches"),
    ({"relu": three_parameters}, "the names are matmul, transpose"),
    ({"sgd_momentum_update": plain_function}, "plain Python function, not a CUDA kernel"),
    ({"bias_activation": device_function}, "device function"),
    ({"bias_activation": three_parameters}, "takes 3 parameters (Z, b, out), but "
                                            "bias_activation takes 4: (Z, b, act, A)"),
    ({"bias_activation": stub}, "still raises NotImplementedError"),
    ({"adam_update": 42}, "needs a @cuda.jit kernel, not int"),
    ({"matmul": matmul.matmul_naive, "matmul_tiled": matmul.matmul_tiled}, "two kernels given"),
    ({1: optim.adam_update}, "name each kernel"),
    ([optim.adam_update], "must be a dict"),
])
def test_a_kernel_that_cannot_fit_is_refused_with_a_clear_error(kernels, words):
    with pytest.raises(KernelOverrideError) as error:
        KernelBackend(kernels=kernels)
    assert words in str(error.value)


def test_get_backend_takes_kernels_with_the_kernel_backend_only():
    backend = get_backend("kernels", kernels={"adam_update": optim.adam_update,
                                              "bias_grad": None})
    assert list(backend.overrides) == ["adam_update"]  # None: gpulab's
    assert backend.origin("bias_grad") == "gpulab's"
    assert "with yours for adam_update" in backend.describe()
    with pytest.raises(ValueError, match="backend='kernels'"):
        get_backend("numpy", kernels={"adam_update": optim.adam_update})
    with pytest.raises(ValueError, match="not with a backend object"):
        get_backend(KernelBackend(), kernels={"adam_update": optim.adam_update})
    with pytest.raises(KeyError, match="no kernel 'relu'"):
        backend.origin("relu")


@cuda.jit
def softmax_without_guard(logits, labels, probs, losses):
    r = cuda.grid(1)
    m = logits[r, 0]  # rows past the end: IndexError in the simulator
    probs[r, 0] = m
    losses[r] = m


def test_an_error_inside_your_kernel_names_it():
    X, y = small_problem()
    model = MLP([7, 6, 4], backend=KernelBackend(kernels={
        "softmax_cross_entropy": softmax_without_guard}), dtype=np.float64)
    with pytest.raises(KernelOverrideError, match="your kernel 'softmax_without_guard', "
                                                  "launched for softmax_cross_entropy"):
        model.loss(X, y)


def test_unwritten_elements_are_nan_not_last_steps_values():
    @cuda.jit
    def bias_activation_first_row_only(Z, b, act, A):
        c, r = cuda.grid(2)
        if r == 0 and c < Z.shape[1]:
            A[r, c] = Z[r, c] + b[c]

    backend = KernelBackend(kernels={"bias_activation": bias_activation_first_row_only})
    Z = backend.asarray(np.ones((3, 2)))
    b = backend.asarray(np.zeros(2))
    for _ in range(2):
        A = backend.to_host(backend.bias_activation(Z, b, "identity"))
        assert np.isnan(A[1:]).all() and (A[0] == 1).all()


def test_your_kernels_launch_on_the_gpu_tiers_grids(stand_in_gpu):
    """On a GPU the launches are bigger (2-D blocks of 32 x 8, 1-D of 256, matmul and transpose
    tiles of 16): run there (in the simulator, with the stand-in GPU), gpulab's own kernels as
    overrides still give NumPy's step."""
    X, y = small_problem(batch=3, widths=(5, 4, 3))
    numpy_model = MLP([5, 4, 3], "relu", "numpy", np.float64, seed=2)
    backend = KernelBackend(kernels={**GPULABS_OWN, "matmul": matmul.matmul_tiled})
    assert backend.tier == "gpu" and backend.tile == 16
    mine = numpy_model.copy(backend=backend)
    for model in (numpy_model, mine):
        Trainer(model, "adam", lr=0.05, progress=False).step(X, y)
    want, got = numpy_model.state(), mine.state()
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-12, atol=1e-13, err_msg=name)
