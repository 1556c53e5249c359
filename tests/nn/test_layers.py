"""Dense layers and the MLP: the NumPy backend equals the reference formulas, the kernel backend
equals the NumPy backend, and bad shapes or labels are named."""

import numpy as np
import pytest

from gpulab import reference
from gpulab.kernels.arrays import InputError
from gpulab.nn import MLP, Dense
from gpulab.nn.mlp import ShapeError


def data(batch=5, n_in=6, n_classes=3, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((batch, n_in)).astype(dtype), rng.integers(0, n_classes, batch)


@pytest.mark.parametrize("activation", reference.ACTIVATIONS)
def test_dense_numpy_is_the_reference(activation):
    X, _ = data()
    layer = Dense(6, 4, activation, "numpy", np.float64, np.random.default_rng(1))
    A = layer.forward(X)
    Z, expected = reference.dense_forward(X, layer.W, layer.b, activation)
    np.testing.assert_array_equal(A, expected)
    dA = np.random.default_rng(2).standard_normal(A.shape)
    dX = layer.backward(dA)
    want_dX, want_dW, want_db = reference.dense_backward(dA, X, layer.W, Z, layer.b, activation)
    np.testing.assert_allclose(dX, want_dX, rtol=1e-12)
    np.testing.assert_allclose(layer.dW, want_dW, rtol=1e-12)
    np.testing.assert_allclose(layer.db, want_db, rtol=1e-12)


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_kernel_backend_forward_and_backward_equal_numpy(activation):
    X, y = data(batch=4, n_in=5)
    numpy_model = MLP([5, 6, 3], activation, "numpy", np.float64, seed=3)
    kernel_model = numpy_model.copy(backend="kernels")
    for model in (numpy_model, kernel_model):
        model.loss(X, y)
        model.backward()
    np.testing.assert_allclose(kernel_model.backend.to_host(kernel_model.logits),
                               numpy_model.logits, rtol=1e-12)
    want = numpy_model.gradients()
    for name, got in kernel_model.gradients().items():
        np.testing.assert_allclose(got, want[name], rtol=1e-11, atol=1e-14, err_msg=name)


def test_initial_loss_on_digits_is_near_chance():
    from gpulab.nn import load_digits

    digits = load_digits()
    model = MLP([64, 128, 10], seed=0)
    assert abs(model.loss(digits.X_train, digits.y_train) - np.log(10)) < 0.5


def test_models_from_one_seed_are_identical_and_copies_keep_parameters():
    a, b = MLP([6, 8, 3], seed=7), MLP([6, 8, 3], seed=7)
    for name, value in a.state().items():
        np.testing.assert_array_equal(value, b.state()[name])
    twin = a.copy(dtype=np.float64)
    assert twin.dtype == np.float64
    np.testing.assert_allclose(twin.state()["layer0.W"], a.state()["layer0.W"])
    assert MLP([6, 8, 3], seed=8).state()["layer0.W"][0, 0] != a.state()["layer0.W"][0, 0]


def test_hidden_layers_use_the_activation_and_the_last_none():
    model = MLP([4, 5, 6, 3], "tanh")
    assert [layer.activation for layer in model.layers] == ["tanh", "tanh", "identity"]
    assert model.n_parameters == 4 * 5 + 5 + 5 * 6 + 6 + 6 * 3 + 3
    assert "tanh" in repr(model) and "4 -> 5 -> 6 -> 3" in repr(model)


def test_predict_and_accuracy():
    X, y = data(batch=7)
    model = MLP([6, 4, 3], seed=1)
    predicted = model.predict(X)
    assert predicted.shape == (7,) and set(predicted) <= {0, 1, 2}
    assert model.accuracy(X, predicted) == 1.0
    np.testing.assert_allclose(model.probabilities(X).sum(axis=1), 1)


@pytest.mark.parametrize("X_shape, labels, words", [
    ((5, 7), [0] * 5, "7 features per sample but the model's first layer takes 6"),
    ((5,), [0] * 5, "must be 2-D"),
    ((0, 6), [], "no samples"),
    ((5, 6), [0, 1, 2, 3, 0], "label 3 .* out of range"),
    ((5, 6), [0, 1, 2], "5 rows of logits but 3 labels"),
])
def test_bad_inputs_are_named(X_shape, labels, words):
    model = MLP([6, 4, 3])
    with pytest.raises(ShapeError, match=words):
        model.loss(np.zeros(X_shape, np.float32), np.array(labels))
    assert issubclass(ShapeError, InputError)


@pytest.mark.parametrize("widths, words", [
    ([10], "at least two"), ([10, 0, 3], "at least two positive"), ([10, 1], "2 classes"),
    ([10, 2.5, 3], "whole numbers"),
])
def test_bad_widths_are_named(widths, words):
    with pytest.raises(ValueError, match=words):
        MLP(widths)


def test_other_bad_settings_are_named():
    with pytest.raises(ValueError, match="activation must be one of"):
        MLP([4, 3], "swish")
    with pytest.raises(ValueError, match="backend must be one of"):
        MLP([4, 3], backend="torch")
    with pytest.raises(ValueError, match="float32 or float64"):
        MLP([4, 3], dtype=np.float16)
    with pytest.raises(RuntimeError, match="forward"):
        Dense(3, 2).backward(np.zeros((1, 2)))
