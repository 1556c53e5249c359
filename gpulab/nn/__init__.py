"""A small neural-network library on gpulab's kernels: the trainer of chapters 05-08.

A multi-layer perceptron (MLP) of dense layers, a softmax cross-entropy loss, SGD with
momentum and Adam, and a training loop, written so that one page of each can be read end to
end. Every operation runs on one of two backends, chosen with ``backend=``:

- ``"numpy"``: :mod:`gpulab.reference` on this CPU (NumPy, which calls BLAS for the matmuls);
- ``"kernels"``: gpulab's CUDA kernels (:mod:`gpulab.kernels.matmul`, ``dense``, ``softmax``,
  ``optim``), on the GPU in the ``gpu`` tier, in Numba's CUDA simulator in the ``sim`` tier.

Modules, one idea each
- :mod:`~gpulab.nn.backends` — the two backends, one interface.
- :mod:`~gpulab.nn.layers` — ``Dense``: forward, backward.
- :mod:`~gpulab.nn.losses` — ``SoftmaxCrossEntropy``.
- :mod:`~gpulab.nn.optimisers` — ``SGD`` (with momentum) and ``Adam``.
- :mod:`~gpulab.nn.mlp` — ``MLP``: layers + loss, parameters, predictions.
- :mod:`~gpulab.nn.trainer` — ``Trainer``: mini-batches, history, evaluation, early errors.
- :mod:`~gpulab.nn.data` — scikit-learn's bundled digits, and spirals for pictures.
- :mod:`~gpulab.nn.gradcheck` — analytic gradients against finite differences.
- :mod:`~gpulab.nn.cost` — FLOPs, bytes, memory and roofline time of a training step.
- :mod:`~gpulab.nn.recipes` — the digits recipe the chapters and the bench train.
- :mod:`~gpulab.nn.memory` — the memory-budget calculator (MLP and GPT-style transformer;
  ZeRO, Korthikanti et al.) and the device budget the trainer enforces (chapter 09).
- :mod:`~gpulab.nn.mixed_precision` — mixed-precision training: master weights, loss
  scaling, FP8 with delayed scaling (chapter 10).

This package is the library only. The chapters' experiments on it (fusion, gradients,
training, batch size) and their figures live in :mod:`gpulab.experiments`; the training rows of
``gpulab bench`` in :mod:`gpulab.bench.training`.

Names load on first use (``from gpulab.nn import MLP``), so ``import gpulab.nn`` is cheap.
"""

from __future__ import annotations

from gpulab.lazy import exported_names, lazy_exports

_MODULES = {
    "optimisers": ("Adam", "SGD"),
    "data": ("Dataset", "load_digits", "spirals"),
    "layers": ("Dense",),
    "trainer": ("History", "Trainer", "TrainingError"),
    "mlp": ("MLP",),
    "losses": ("SoftmaxCrossEntropy",),
    "backends": ("get_backend",),
    "gradcheck": ("gradient_check",),
}


__getattr__, __dir__ = lazy_exports(__name__, _MODULES)
__all__ = exported_names(_MODULES)
