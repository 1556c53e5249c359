"""A multi-layer perceptron: dense layers, then softmax cross-entropy.

``MLP([64, 128, 10])`` maps 64 inputs through a hidden layer of 128 units to 10 class scores
(logits). Hidden layers use ``activation``; the last layer has none (identity): the loss turns
its logits into probabilities.

    model = MLP([64, 128, 10], backend="numpy", seed=0)
    loss = model.loss(X, y)      # forward: logits, then the mean loss
    model.backward()             # every layer's dW, db
    optimiser.step(model)        # update
"""

from __future__ import annotations

import numpy as np

from gpulab.kernels.arrays import InputError, is_device_array
from gpulab.nn.activations import check_activation
from gpulab.nn.backends import get_backend
from gpulab.nn.layers import Dense
from gpulab.nn.losses import SoftmaxCrossEntropy

SUPPORTED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


class ShapeError(InputError):
    """Inputs or labels that do not fit the model; the message says what fits."""


class MLP:
    """Dense layers of the given widths (inputs first, classes last) with a softmax
    cross-entropy loss, on the ``backend`` ("numpy" or "kernels").

    ``checkpointing`` (activation checkpointing, chapter 09; off by default): the forward pass
    keeps only each layer's input, and the backward pass recomputes the layer's Z = X @ W
    from it just before using it. Less memory between the passes, one more matmul per layer
    (counted in ``recomputed_flops``); the gradients are the same."""

    def __init__(self, widths, activation: str = "relu", backend="numpy", dtype=np.float32,
                 seed: int = 0, checkpointing: bool = False):
        widths = [int(w) for w in widths] if _whole_numbers(widths) else None
        if widths is None or len(widths) < 2 or min(widths) < 1:
            raise ValueError("widths must list at least two positive whole numbers: the inputs "
                             "and the classes, e.g. [64, 128, 10]")
        if widths[-1] < 2:
            raise ValueError(f"a classifier needs at least 2 classes, not {widths[-1]}")
        self.dtype = np.dtype(dtype)
        if self.dtype not in SUPPORTED_DTYPES:
            raise ValueError(f"dtype must be float32 or float64, not {self.dtype}")
        self.widths = widths
        self.activation = check_activation(activation)
        self.backend = get_backend(backend)
        self.seed = seed
        rng = np.random.default_rng(seed)
        self.layers = [
            Dense(n_in, n_out, activation if k < len(widths) - 2 else "identity",
                  self.backend, self.dtype, rng)
            for k, (n_in, n_out) in enumerate(zip(widths[:-1], widths[1:], strict=True))
        ]
        self.loss_function = SoftmaxCrossEntropy(self.backend)
        self.logits = None
        self.checkpointing = bool(checkpointing)
        self.recomputed_flops = 0

    @property
    def n_inputs(self) -> int:
        return self.widths[0]

    @property
    def n_classes(self) -> int:
        return self.widths[-1]

    @property
    def n_parameters(self) -> int:
        return sum(layer.n_parameters for layer in self.layers)

    # -- checks -----------------------------------------------------------------------------

    def check_inputs(self, X, what: str = "X") -> None:
        shape = tuple(X.shape)
        if len(shape) != 2:
            raise ShapeError(f"{what} must be 2-D (samples x features), not shape {shape}; a "
                             f"single sample x is x.reshape(1, -1)")
        if shape[1] != self.n_inputs:
            raise ShapeError(f"{what} has {shape[1]} features per sample but the model's first "
                             f"layer takes {self.n_inputs} (widths {self.widths})")
        if shape[0] == 0:
            raise ShapeError(f"{what} has no samples")

    def check_labels(self, y, n_rows: int) -> np.ndarray:
        from gpulab import reference

        try:
            return reference.check_labels(y, self.n_classes, n_rows)
        except ValueError as error:
            raise ShapeError(f"{error}") from None

    # -- forward and backward ---------------------------------------------------------------

    def forward(self, X):
        """Logits for a batch X (backend array or NumPy; NumPy is moved to the backend)."""
        self.check_inputs(X)
        A = self.backend.asarray(X, self.dtype)
        for layer in self.layers:
            A = layer.forward(A)
            if self.checkpointing:
                layer.Z = None  # recomputed from layer.X in the backward pass
        self.logits = A
        return A

    def loss(self, X, y) -> float:
        """Forward pass and mean softmax cross-entropy over the batch."""
        logits = self.forward(X)
        if not is_device_array(y):
            y = self.backend.labels(self.check_labels(y, X.shape[0]))
        return self.loss_function.forward(logits, y)

    def backward(self) -> None:
        """Gradients of the last :meth:`loss` for every parameter (each layer's dW, db)."""
        d = self.loss_function.backward()
        for k in range(len(self.layers) - 1, -1, -1):
            layer = self.layers[k]
            recompute = self.checkpointing and layer.Z is None and layer.X is not None
            if recompute:
                layer.Z = self.backend.matmul(layer.X, layer.W)
                self.recomputed_flops += 2 * layer.X.shape[0] * layer.n_in * layer.n_out
            d = layer.backward(d, need_dX=k > 0)
            if recompute:
                layer.Z = None

    def parameters(self) -> list[tuple[str, object, object]]:
        """("layer{k}.W", W, dW) and ("layer{k}.b", b, db) for every layer, first to last."""
        return [(f"layer{k}.{name}", param, grad)
                for k, layer in enumerate(self.layers)
                for name, param, grad in layer.parameters()]

    # -- using it ---------------------------------------------------------------------------

    def probabilities(self, X) -> np.ndarray:
        """Softmax probabilities for X, on the host."""
        from gpulab import reference

        return reference.softmax(self.backend.to_host(self.forward(X)).astype(np.float64))

    def predict(self, X) -> np.ndarray:
        """The most likely class of each row of X."""
        return np.argmax(self.backend.to_host(self.forward(X)), axis=1)

    def accuracy(self, X, y) -> float:
        y = self.check_labels(y, X.shape[0])
        return float(np.mean(self.predict(X) == y))

    # -- moving between backends ------------------------------------------------------------

    def state(self) -> dict[str, np.ndarray]:
        """Every parameter, copied to the host: {"layer0.W": ..., ...}."""
        return {name: self.backend.to_host(param).copy() for name, param, _ in self.parameters()}

    def gradients(self) -> dict[str, np.ndarray]:
        """Every gradient of the last backward pass, copied to the host."""
        return {name: self.backend.to_host(grad).copy() for name, _, grad in self.parameters()
                if grad is not None}

    def load_state(self, state: dict) -> MLP:
        """Set every parameter from ``state`` (as :meth:`state` returns), as each layer's
        backend stores it; returns self."""
        for layer_index, layer in enumerate(self.layers):
            for name in ("W", "b"):
                key = f"layer{layer_index}.{name}"
                if key not in state:
                    raise KeyError(f"state has no {key!r}")
                value = np.asarray(state[key])
                current = getattr(layer, name)
                if tuple(value.shape) != tuple(current.shape):
                    raise ShapeError(f"{key} has shape {value.shape}, the model's is "
                                     f"{tuple(current.shape)}")
                setattr(layer, name, layer.backend.asarray(value, self.dtype))
        return self

    def copy(self, backend=None, dtype=None) -> MLP:
        """The same network (same parameters) on another backend and/or dtype."""
        twin = MLP(self.widths, self.activation, backend or self.backend,
                   dtype or self.dtype, self.seed, self.checkpointing)
        return twin.load_state(self.state())

    def __repr__(self) -> str:
        hidden = " -> ".join(map(str, self.widths))
        checkpointing = ", checkpointing" if self.checkpointing else ""
        return (f"MLP({hidden}, {self.activation}, {self.n_parameters:,} parameters, "
                f"{self.dtype.name}, backend={self.backend.name!r}{checkpointing})")


def _whole_numbers(values) -> bool:
    try:
        return all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values)
    except TypeError:
        return False


__all__ = ["MLP", "ShapeError"]
