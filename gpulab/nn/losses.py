"""Softmax cross-entropy: how wrong a classifier's scores (logits) are, and which way to move
them.

For a batch of B samples with logits z (B x C) and true classes y:

    p = softmax(z) row by row;   loss = mean over the batch of -log p[i, y_i]
    dloss/dz = (p - onehot(y)) / B

The gradient is that simple because softmax and cross-entropy are differentiated together;
computing the loss from the log-sum-exp (not from log p) keeps it finite for any logits.
"""

from __future__ import annotations

import math

import numpy as np

from gpulab.nn.backends import get_backend


class SoftmaxCrossEntropy:
    """The loss of a classifier; keeps the probabilities and labels for :meth:`backward`."""

    def __init__(self, backend="numpy"):
        self.backend = get_backend(backend)
        self.probs = self.labels = None
        self.losses = None

    def forward(self, logits, labels) -> float:
        """The mean loss over the batch (a Python float; copies B losses to the host)."""
        self.probs, self.losses = self.backend.softmax_cross_entropy(logits, labels)
        self.labels = labels
        per_sample = self.backend.to_host(self.losses)
        return float(np.mean(per_sample, dtype=np.float64))

    def backward(self):
        """dloss/dlogits = (p - onehot(labels)) / batch."""
        if self.probs is None:
            raise RuntimeError("backward() before forward(): compute the loss first")
        batch = self.probs.shape[0]
        return self.backend.softmax_cross_entropy_backward(self.probs, self.labels, 1.0 / batch)


def chance_loss(n_classes: int) -> float:
    """The loss of a classifier that gives every class the same probability: log(C). A fresh
    network should start near it (2.30 for 10 classes)."""
    return math.log(n_classes)


__all__ = ["SoftmaxCrossEntropy", "chance_loss"]
