"""A served model whose every batch is one fused kernel launch (chapter 12).

:class:`KernelModel` wraps a trained two-layer :class:`~gpulab.nn.mlp.MLP` (a ReLU hidden
layer, then the logits) for :class:`~gpulab.serving.server.InferenceServer`: its weights are
copied to the device once, and ``predict(X)`` launches one kernel per batch — gpulab's
:func:`~gpulab.kernels.inference.fused_mlp_argmax`, or the learner's kernel of the same
parameters from chapter 12's exercise — that writes each row's class. The server's batcher
calls ``predict`` from its executor thread; launches are taken one at a time (the simulator
runs one launch at a time in a process, and on a GPU the batches share one stream anyway).
"""

from __future__ import annotations

import threading

import numpy as np

from gpulab.kernels.inference import check_shapes, run_fused_inference


class KernelModel:
    """``model``'s classes from one launch of ``kernel`` (default gpulab's fused kernel) per
    batch; ``whose`` says whose kernel it is, in the chapter's sentences. ``n_inputs`` and
    ``widths`` are the model's; ``launches`` and ``rows`` count what was served."""

    def __init__(self, model, kernel=None, whose: str | None = None,
                 threads_per_block: int | None = None):
        layers = getattr(model, "layers", None)
        if not layers or len(layers) != 2:
            raise ValueError("the fused kernel serves a network of two dense layers (one hidden "
                             f"layer), not {len(layers or [])}")
        if layers[0].activation != "relu" or layers[1].activation != "identity":
            raise ValueError("the fused kernel computes relu(X @ W1 + b1) @ W2 + b2: the hidden "
                             f"layer must be ReLU (this one is {layers[0].activation})")
        from numba import cuda

        to_host = model.backend.to_host
        host = [np.ascontiguousarray(to_host(a), dtype=np.float32)
                for layer in layers for a in (layer.W, layer.b)]
        X_probe = np.zeros((1, host[0].shape[0]), np.float32)
        check_shapes(X_probe, *host)
        self.weights = tuple(cuda.to_device(a) for a in host)  # W1, b1, W2, b2: copied once
        self.kernel = kernel
        self.whose = whose or ("gpulab's fused_mlp_argmax" if kernel is None else "your kernel")
        self.threads_per_block = threads_per_block
        self.n_inputs = int(host[0].shape[0])
        self.widths = (self.n_inputs, int(host[0].shape[1]), int(host[2].shape[1]))
        self.launches = 0
        self.rows = 0
        self._lock = threading.Lock()

    def predict(self, X) -> np.ndarray:
        """The class of each row of X (a 2-D array of ``n_inputs`` columns): one launch."""
        X = np.ascontiguousarray(X, dtype=np.float32)
        if X.ndim != 2 or X.shape[1] != self.n_inputs or X.shape[0] < 1:
            raise ValueError(f"X must have shape (rows >= 1, {self.n_inputs}), not {X.shape}")
        with self._lock:
            classes = run_fused_inference(X, *self.weights, kernel=self.kernel,
                                          threads_per_block=self.threads_per_block)
            self.launches += 1
            self.rows += X.shape[0]
        return classes

    def __repr__(self) -> str:
        return (f"KernelModel({' → '.join(map(str, self.widths))}, {self.whose}, "
                f"{self.launches} launches, {self.rows} rows)")


__all__ = ["KernelModel"]
