"""SGD with momentum and Adam: a step on the kernel backend equals the NumPy step, settings are
checked, and the state lives next to each parameter."""

import numpy as np
import pytest

from gpulab.nn import MLP, SGD, Adam
from gpulab.nn.optimisers import make_optimiser


def two_steps(model, optimiser, X, y):
    for _ in range(2):
        model.loss(X, y)
        model.backward()
        optimiser.step(model)
    return model.state()


@pytest.mark.parametrize("make", [lambda: SGD(lr=0.1, momentum=0.9, weight_decay=1e-3),
                                  lambda: Adam(lr=1e-2, weight_decay=1e-3)],
                         ids=["sgd", "adam"])
def test_kernel_step_equals_numpy_step(make):
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((3, 4)), rng.integers(0, 3, 3)
    numpy_model = MLP([4, 5, 3], dtype=np.float64, seed=1)
    kernel_model = numpy_model.copy(backend="kernels")
    want = two_steps(numpy_model, make(), X, y)
    got = two_steps(kernel_model, make(), X, y)
    for name, value in got.items():
        np.testing.assert_allclose(value, want[name], rtol=1e-12, atol=1e-15, err_msg=name)
    assert not np.array_equal(want["layer0.W"], MLP([4, 5, 3], dtype=np.float64,
                                                    seed=1).state()["layer0.W"])


def test_state_per_parameter_and_step_count():
    X, y = np.ones((2, 4)), np.array([0, 1])
    model, adam = MLP([4, 5, 3]), Adam()
    model.loss(X, y)
    model.backward()
    adam.step(model)
    assert adam.steps == 1
    assert set(adam.state) == {"layer0.W", "layer0.b", "layer1.W", "layer1.b"}
    assert adam.state_tensors() == 2 and SGD().state_tensors() == 1


def test_a_step_before_backward_is_explained():
    with pytest.raises(RuntimeError, match="backward"):
        SGD().step(MLP([4, 3]))


@pytest.mark.parametrize("make, words", [
    (lambda: SGD(lr=0), "lr must be"), (lambda: SGD(lr=float("nan")), "lr must be"),
    (lambda: SGD(momentum=1.0), r"momentum must be in \[0, 1\)"),
    (lambda: Adam(betas=(0.9, 1.5)), "betas"), (lambda: Adam(eps=-1), "eps must be"),
    (lambda: make_optimiser("rmsprop"), "optimiser must be one of"),
    (lambda: make_optimiser(SGD(), lr=0.1), "settings"),
])
def test_bad_settings_are_named(make, words):
    with pytest.raises(ValueError, match=words):
        make()
