"""The chapters' experiments: one module per experiment, holding its logic (a plain class that
tests drive without a browser), its figures and its ipywidgets dashboard.

- :mod:`~gpulab.experiments.independence` — twelve questions shared by p helpers, a chain of
  dependent additions vs independent ones (chapter 00).
- :mod:`~gpulab.experiments.crossover` — CPU vs GPU as n grows (chapter 01).
- :mod:`~gpulab.experiments.bandwidth` — a memory-bound kernel with and without the host↔device
  copies, and what a strided read costs (chapter 02).
- :mod:`~gpulab.experiments.matmul` — matrix multiplication: what the tile size changes
  (chapter 03).
- :mod:`~gpulab.experiments.number_formats` — number formats: error, memory and speed per
  format (chapter 04).
- :mod:`~gpulab.experiments.fusion` — fused vs unfused bias + activation (chapter 05).
- :mod:`~gpulab.experiments.gradients` — analytic vs numeric gradients (chapter 06).
- :mod:`~gpulab.experiments.training` — a full training run with its curves (chapter 07).
- :mod:`~gpulab.experiments.step_timeline` — one training step's kernels and the gaps
  between their launches, on a timeline (chapters 07 and 08).
- :mod:`~gpulab.experiments.batch_size` — batch size: throughput vs memory vs convergence
  (chapter 08).
- :mod:`~gpulab.experiments.memory_budget` — where GPU memory goes; which models fit
  (chapter 09).
- :mod:`~gpulab.experiments.mixed_precision` — fp32, bf16, fp16 + loss scaling, fp8 recipes
  (chapter 10).
- :mod:`~gpulab.experiments.many_gpus` — data parallel over MPI ranks; scaling by link
  (chapter 11).
- :mod:`~gpulab.experiments.inference` — latency, throughput, serving and energy (chapter 12).

The dashboards share their Run logic (:class:`gpulab.experiments.dashboard.Dashboard`). The
kernels the experiments launch, and how they are counted and checked, come from
:mod:`gpulab.bench.cases` where ``gpulab bench`` measures the same kernels.

Importing this package is cheap: the modules (and ipywidgets, numba) load when a name is first
used, e.g. ``from gpulab.experiments import CrossoverDashboard``.
"""

from __future__ import annotations

from gpulab.lazy import exported_names, lazy_exports

_MODULES = {
    "independence": ("HelpersDashboard", "HelpersExperiment",
                     "IndependenceExperiment"),
    "crossover": ("CrossoverDashboard", "CrossoverExperiment"),
    "bandwidth": ("BandwidthDashboard", "BandwidthExperiment"),
    "matmul": ("MatmulDashboard", "MatmulExperiment"),
    "number_formats": ("PrecisionDashboard", "DotErrorExperiment"),
    "fusion": ("FusionDashboard", "FusionExperiment"),
    "gradients": ("GradientDashboard", "GradientExperiment"),
    "training": ("TrainingDashboard", "TrainingExperiment"),
    "step_timeline": ("StepTimeline", "draw_timelines", "timelines_table"),
    "batch_size": ("BatchSizeDashboard", "BatchSizeExperiment"),
    "mixed_precision": ("MixedPrecisionDashboard", "MixedPrecisionExperiment"),
    "memory_budget": ("MemoryBudgetDashboard", "ModelFitExperiment"),
    "many_gpus": ("ManyGPUsExperiment", "ScalingDashboard", "ScalingExperiment"),
}


__getattr__, __dir__ = lazy_exports(__name__, _MODULES)
__all__ = exported_names(_MODULES)
