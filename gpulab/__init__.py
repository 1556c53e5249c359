"""gpulab: the kernels, references, timings and figures behind the course
"How neural networks use GPUs".

Importing gpulab decides the execution tier (``gpu`` or Numba's CUDA simulator, ``sim``)
before numba is imported; see :mod:`gpulab.device`. ``gpulab.info()`` says which and why.
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


__all__ = ["TierError", "dot", "info", "kernel_source", "tier", "__version__"]
