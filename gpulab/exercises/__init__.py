"""Exercises: automatic checks with hints, and the learner notebooks generated from solutions.

- :mod:`gpulab.exercises.checks` — everything the checks share: :class:`CheckResult`, the
  learner's code (``start_kernel``, ``call_learner``), random 1-D and 2-D trials, padded
  buffers and launches, diagnoses of common mistakes, the advice an error becomes.
- :mod:`gpulab.exercises.ch00` … :mod:`gpulab.exercises.ch12` — one module per chapter, holding
  only that chapter's checks (``ch01``: ``check_multiply``, ``check_dot_atomic``,
  ``check_block_sum``); notebooks import the module (``from gpulab.exercises import ch03``).
  Chapter modules import from ``checks`` only, never from each other.
- :mod:`gpulab.exercises.reveal` — around an exercise: ``compare_yours`` shows gpulab's version
  only after the learner's check passed; ``try_it`` turns a failing try-it cell into a few lines.
- :mod:`gpulab.exercises.release` — writes ``course/`` (learner versions) from ``solutions/``.
- :mod:`gpulab.exercises.export` — writes a learners' copy of the course for a class
  repository, without ``solutions/`` or hidden tests (``gpulab export-learner``).

The simulator instruments the checks use (arrays that record which thread read or wrote what,
poisoned shared memory) live in :mod:`gpulab.instruments`, shared with
:mod:`gpulab.memory_model`.

Chapter modules import numba, so they are loaded on first use: ``from gpulab.exercises import
check_multiply`` works, and ``python -m gpulab.exercises.release`` stays fast.
"""

from __future__ import annotations

from gpulab.lazy import exported_names, lazy_exports

_MODULES = {
    "checks": ("CheckResult",),
    "reveal": ("compare_yours", "try_it"),
    "ch00": ("check_blocks_for", "check_first_launch", "check_launch_by_hand"),
    "ch01": ("check_multiply", "check_dot_atomic", "check_block_sum"),
    "ch02": ("check_saxpy", "check_time_saxpy", "check_copy_grid_stride"),
    "ch03": ("check_matmul_naive", "check_matmul_tiled"),
    "ch04": ("check_decode", "check_matvec_fp32", "check_quantise_fp8"),
    "ch05": ("check_traffic", "check_bias_activation", "check_softmax_cross_entropy"),
    "ch06": ("check_dense_backward", "check_bias_activation_backward", "check_bias_grad",
             "check_transpose_tiled", "check_numeric_gradient"),
    "ch07": ("check_minibatches", "check_loss_gradient", "check_adam", "check_training"),
    "ch08": ("check_launch_bound", "check_throughput", "check_evaluate_batch"),
    "ch09": ("check_activation_bytes", "check_accumulated_gradients", "check_accumulate"),
    "ch10": ("check_loss_scale_update", "check_delayed_scale", "check_amax_nonfinite"),
    "ch11": ("check_ring_allreduce", "check_add_chunk", "check_allreduce_time"),
    "ch12": ("check_percentile", "check_inference", "check_joules_per_thousand"),
}


__getattr__, __dir__ = lazy_exports(__name__, _MODULES)
__all__ = exported_names(_MODULES)
