"""Numba CUDA kernels, one module per topic. Each kernel has a launch wrapper that validates
its input, chooses the launch configuration and accepts NumPy or device arrays.

- :mod:`gpulab.kernels.elementwise` — one thread per element (chapter 01).
- :mod:`gpulab.kernels.dot` — dot products: atomics, shared-memory tree, grid-stride; and a race.
"""
