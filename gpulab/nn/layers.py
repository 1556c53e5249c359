"""A dense (fully connected) layer: ``A = f(X @ W + b)`` on a batch, and its backward pass.

Rows are samples: X is (batch, n_in), W is (n_in, n_out), b is (n_out,), A is (batch, n_out).
One matmul does the whole batch at once; that is what gives a GPU enough independent work.

Backward, from dA = dL/dA (the chain rule, one line each):

    dZ = dA * f'(Z + b)       elementwise (``bias_activation_backward``)
    dW = X^T @ dZ             a matmul: every sample's contribution, summed over the batch
    db = sum of dZ's rows     a reduction (``bias_grad``)
    dX = dZ @ W^T             a matmul: what the layer below receives as its dA

The forward pass keeps X and Z (the matmul output before the bias) for this; Z + b is
recomputed in the backward kernel instead of being stored.
"""

from __future__ import annotations

import numpy as np

from gpulab.nn.activations import check_activation, init_std
from gpulab.nn.backends import get_backend


class Dense:
    """One dense layer with its parameters (W, b), their gradients (dW, db) after
    :meth:`backward`, and what the forward pass kept for the backward pass."""

    def __init__(self, n_in: int, n_out: int, activation: str = "relu", backend="numpy",
                 dtype=np.float32, rng: np.random.Generator | None = None):
        for what, value in (("n_in", n_in), ("n_out", n_out)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{what} must be a positive whole number, not {value!r}")
        self.n_in, self.n_out = int(n_in), int(n_out)
        self.activation = check_activation(activation)
        self.backend = get_backend(backend)
        self.dtype = np.dtype(dtype)
        rng = rng if rng is not None else np.random.default_rng(0)
        std = init_std(activation, self.n_in, self.n_out)
        W = rng.normal(0.0, std, (self.n_in, self.n_out))
        self.W = self.backend.asarray(W, self.dtype)
        self.b = self.backend.asarray(np.zeros(self.n_out), self.dtype)
        self.dW = self.db = None
        self.X = self.Z = None

    def forward(self, X):
        """A = f(X @ W + b). Keeps X and Z = X @ W for :meth:`backward`."""
        be = self.backend
        self.X = X
        self.Z = be.matmul(X, self.W)
        return be.bias_activation(self.Z, self.b, self.activation)

    def backward(self, dA, need_dX: bool = True):
        """Set dW and db from dA = dL/dA; return dX = dL/dX (None if not ``need_dX``: the
        first layer's input is the data, which has no use for a gradient)."""
        if self.Z is None:
            raise RuntimeError("backward() before forward(): run the forward pass first, it "
                               "keeps the values the backward pass needs")
        be = self.backend
        if self.activation == "identity":
            dZ = dA  # f'(z) = 1: nothing to launch
        else:
            dZ = be.bias_activation_backward(dA, self.Z, self.b, self.activation)
        self.dW = be.matmul_transposed_a(self.X, dZ)
        self.db = be.bias_grad(dZ)
        return be.matmul_transposed_b(dZ, self.W) if need_dX else None

    def parameters(self) -> list[tuple[str, object, object]]:
        """(name, parameter, gradient) for W and b."""
        return [("W", self.W, self.dW), ("b", self.b, self.db)]

    @property
    def n_parameters(self) -> int:
        return self.n_in * self.n_out + self.n_out

    def __repr__(self) -> str:
        return f"Dense({self.n_in} -> {self.n_out}, {self.activation})"


__all__ = ["Dense"]
