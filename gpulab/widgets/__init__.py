"""One ipywidgets dashboard per comparison; the logic of each is a plain class that tests
drive without a browser.

- :mod:`gpulab.widgets.independence` — a chain of dependent additions vs independent ones
  (chapter 00).
- :mod:`gpulab.widgets.crossover` — CPU vs GPU as n grows (chapter 01).
- :mod:`gpulab.widgets.bandwidth` — a memory-bound kernel with and without the host↔device
  copies, and what a strided read costs (chapter 02).
- :mod:`gpulab.widgets.matmul` — matrix multiplication: what the tile size changes (chapter 03).
- :mod:`gpulab.widgets.precision` — number formats: error, memory and speed per format
  (chapter 04).
- :mod:`gpulab.widgets.fusion` — fused vs unfused bias + activation (chapter 05).
- :mod:`gpulab.widgets.gradients` — analytic vs numeric gradients (chapter 06).
- :mod:`gpulab.widgets.training` — a full training run with its curves (chapter 07).
- :mod:`gpulab.widgets.batch_size` — batch size: throughput vs memory vs convergence
  (chapter 08).

The dashboards share their Run logic (:class:`gpulab.widgets._dashboard.Dashboard`).

Importing this package is cheap: the modules (and ipywidgets, numba) load when a name is first
used, e.g. ``from gpulab.widgets import CrossoverDashboard``.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "IndependenceDashboard": "independence",
    "IndependenceExperiment": "independence",
    "CrossoverDashboard": "crossover",
    "CrossoverExperiment": "crossover",
    "BandwidthDashboard": "bandwidth",
    "BandwidthExperiment": "bandwidth",
    "MatmulDashboard": "matmul",
    "MatmulExperiment": "matmul",
    "PrecisionDashboard": "precision",
    "DotErrorExperiment": "precision",
    "FusionDashboard": "fusion",
    "FusionExperiment": "fusion",
    "GradientDashboard": "gradients",
    "GradientExperiment": "gradients",
    "TrainingDashboard": "training",
    "TrainingExperiment": "training",
    "BatchSizeDashboard": "batch_size",
    "BatchSizeExperiment": "batch_size",
}


def __getattr__(name: str):
    if name in _EXPORTS:
        module = importlib.import_module(f"{__name__}.{_EXPORTS[name]}")
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_EXPORTS])


__all__ = sorted(_EXPORTS)
