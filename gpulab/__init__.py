"""gpulab: the kernels, references, timings and figures behind the course
"How neural networks use GPUs".

Importing gpulab decides the execution tier (``gpu`` or Numba's CUDA simulator, ``sim``)
before numba is imported; see :mod:`gpulab.device`. ``gpulab.info()`` says which and why.

Layout: one home for each idea, in layers. **The one rule of direction: a module imports only
from its own layer or the layers below it, never in a cycle, and never another module's private
(underscore) names** (``tests/test_architecture.py`` checks every import, those inside functions
too).

====================  ===================================================================
entry points          :mod:`~gpulab.cli` (``gpulab info | kernels | ptx | doctor | bench |
                      release``), :mod:`~gpulab.doctor`, this package's ``dot``,
                      ``kernel_source`` and ``trace``
chapters              :mod:`~gpulab.bench` (``gpulab bench``: one case per kernel, the suite,
                      reports and recorded runs), :mod:`~gpulab.experiments` (one module per
                      chapter experiment: logic, figures, dashboard), :mod:`~gpulab.exercises`
                      (``checks`` shared by all, one module of checks per chapter, ``release``)
library               :mod:`~gpulab.nn` (layers, losses, optimisers, MLP, trainer, data, cost,
                      memory, mixed precision), :mod:`~gpulab.parallel` (MPI data parallel,
                      collectives, link model), :mod:`~gpulab.serving` (server, load test,
                      energy)
services              :mod:`~gpulab.timing` (CPU and CUDA-event timing, estimates, the one
                      ``Measurement`` record), :mod:`~gpulab.plots` (shared figures),
                      :mod:`~gpulab.memory_model` (warp requests and sectors), :mod:`~gpulab.ptx`,
                      :mod:`~gpulab.kernel_resources` (registers, spills, occupancy),
                      :mod:`~gpulab.recorded_runs` (recorded GPU runs; predicted vs
                      measured)
kernels               :mod:`~gpulab.kernels` (one module per family, ``arrays``: the one
                      validator and output handler, ``launch``, ``registry``)
ground floor          :mod:`~gpulab.device`, :mod:`~gpulab.toolkit`, :mod:`~gpulab.hardware`,
                      :mod:`~gpulab.formats` (number formats), :mod:`~gpulab.reference` (NumPy
                      versions of every operation: the CPU side and the test oracle),
                      :mod:`~gpulab.instruments` (simulator instruments), :mod:`~gpulab.lazy`
====================  ===================================================================
"""

from gpulab.device import TierError, info, tier

__version__ = "0.1.0"


def dot(x, y, method: str = "shared_tree", **launch):
    """x · y with one of gpulab's dot-product kernels (see :mod:`gpulab.kernels.dot`)."""
    from gpulab.kernels.dot import dot as _dot

    return _dot(x, y, method=method, **launch)


def kernel_source(name: str) -> str:
    """The Python source of one of gpulab's kernels, e.g. ``print(kernel_source("dot_atomic"))``."""
    from gpulab.kernels.registry import kernel_spec

    return kernel_spec(name).source


def trace(kernel, blocks, threads, *args):
    """See your own kernel: run ``kernel[blocks, threads](*args)`` on small inputs in the
    simulator and record which thread read and wrote which element (global and shared memory),
    its atomics and barriers. ``print(trace(...))`` says it in words, ``trace(...).draw()``
    draws it. See :func:`gpulab.instruments.trace_kernel` and
    :class:`~gpulab.instruments.KernelTrace`."""
    import gpulab.plots  # noqa: F401 - registers KernelTrace.draw
    from gpulab.instruments import trace_kernel

    return trace_kernel(kernel, blocks, threads, *args)


__all__ = ["TierError", "dot", "info", "kernel_source", "tier", "trace", "__version__"]
