"""Exercises: automatic checks with hints, and the learner notebooks generated from solutions.

- One check is declared as data: :mod:`gpulab.exercises.spec` (a
  :class:`~gpulab.exercises.spec.CheckSpec`: what the learner writes, the hint a stub gets, the
  known mistakes),
  :mod:`gpulab.exercises.mistakes` (a :class:`~gpulab.exercises.mistakes.Mistake` record and
  ``diagnose``, which walks a check's mistakes in order) and :mod:`gpulab.exercises.trial` (one
  :class:`~gpulab.exercises.trial.Trial` for any shape: a random problem, its block size drawn
  too, repeatable from its seed).
- What every check shares, one idea per module: :mod:`gpulab.exercises.results` (a
  :class:`CheckResult`, the exceptions a check raises, ``run_check``, the advice an error
  becomes), :mod:`gpulab.exercises.source_rules` (what the kernel's source says: the stub,
  simulator-only code, barriers some threads skip, plain writes, hard-coded sizes),
  :mod:`gpulab.exercises.running` (running the learner's code safely: padded buffers, launches
  compiled for a real GPU and under a time limit, traces), :mod:`gpulab.exercises.outputs`
  (comparing outputs and naming the mistake), :mod:`gpulab.exercises.host_code` (watching the
  learner's host code: copies, launches, clocks), :mod:`gpulab.exercises.compiling` (compiling
  a kernel for a real GPU as the ``ptx`` tier does) and :mod:`gpulab.exercises.learner_code`
  (is the learner's code their own, is the check intact).
- :mod:`gpulab.exercises.ch00` … :mod:`gpulab.exercises.ch12` — one module per chapter, holding
  only that chapter's checks (``ch01``: ``check_multiply``, ``check_dot_atomic``,
  ``check_block_sum``); notebooks import the module (``from gpulab.exercises import ch03``).
  Chapter modules import from the shared modules only, never from each other.
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

from gpulab.instruments.simulator import mend
from gpulab.lazy import exported_names, lazy_exports

# In the simulator (gpulab.instruments.simulator.mend): one shared array per block, launches
# from several host threads in turn, and CUDA events with the GPU's API for a learner's timing.
# Before any check is imported, so before a check replaces the clocks. It imports numba's
# simulator (about a second), in the sim tier only.
mend()

_MODULES = {
    "results": ("CheckResult",),
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
