"""Gradients against finite differences, for every layer type (every activation, and the
softmax cross-entropy loss), on both backends; and the check itself catches a wrong backward."""

import numpy as np
import pytest

from gpulab import reference
from gpulab.nn import MLP
from gpulab.nn.gradcheck import TOLERANCE, gradient_check, numeric_gradient, relative_error


def batch(n=6, features=5, classes=4, seed=1):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, features)), rng.integers(0, classes, n)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("activation", reference.ACTIVATIONS)
def test_numpy_backend_matches_finite_differences(activation, seed):
    X, y = batch(seed=seed)
    model = MLP([5, 7, 6, 4], activation, dtype=np.float64, seed=seed)
    result = gradient_check(model, X, y, entries_per_parameter=20, seed=seed)
    assert result.passed, result.table()
    assert result.max_error < TOLERANCE
    assert len(result.parameters) == 6  # W and b of 3 layers: the identity output layer too


@pytest.mark.parametrize("activation", reference.ACTIVATIONS)
def test_kernel_backend_matches_finite_differences(activation):
    """The backward kernels (in the simulator, or on the GPU) against numeric gradients."""
    X, y = batch(n=3, features=4, classes=3)
    model = MLP([4, 5, 3], activation, backend="kernels", dtype=np.float64, seed=4)
    result = gradient_check(model, X, y, entries_per_parameter=8)
    assert result.passed, result.table()
    assert "CUDA kernels" in result.backend


def test_a_wrong_backward_pass_is_caught(monkeypatch):
    """Forget the activation's derivative (dZ = dA): the check must fail loudly."""
    X, y = batch()
    model = MLP([5, 7, 4], "tanh", dtype=np.float64, seed=0)
    monkeypatch.setattr(model.backend, "bias_activation_backward",
                        lambda dA, Z, b, activation: dA)
    result = gradient_check(model, X, y)
    assert not result.passed
    assert result.max_error > 1e-3
    assert "FAILED" in result.table()


def test_gradient_checks_refuse_float32():
    X, y = batch()
    with pytest.raises(ValueError, match="float64"):
        gradient_check(MLP([5, 3, 4]), X, y)


def test_numeric_gradient_of_a_known_function():
    x = np.array([1.0, -2.0, 0.5])

    def f():
        return float(np.sum(x**3))

    np.testing.assert_allclose(numeric_gradient(f, x, [0, 1, 2]), 3 * x**2, rtol=1e-8)
    np.testing.assert_array_equal(x, [1.0, -2.0, 0.5])  # restored


def test_relative_error_has_a_floor():
    assert relative_error(1.0, 1.0) == 0
    assert relative_error(1.0, -1.0) == 1
    assert relative_error(1e-9, 2e-9) == pytest.approx(1e-9 / 1e-3)  # tiny: judged absolutely
