"""Numba CUDA kernels, one module per topic. Each kernel has a launch wrapper that validates
its input, chooses the launch configuration and accepts NumPy or device arrays.

- :mod:`gpulab.kernels.elementwise` — one thread per element (chapter 01).
- :mod:`gpulab.kernels.dot` — dot products: atomics, shared-memory tree, grid-stride; and a race.
- :mod:`gpulab.kernels.memory` — saxpy, coalesced and strided copies (chapter 02).
- :mod:`gpulab.kernels.matmul` — naive, shared-memory tiled, register-blocked matmul (chapter 03).
- :mod:`gpulab.kernels.precision` — fp16/bf16/fp8 dot products and matmuls (chapter 04).
- :mod:`gpulab.kernels.dense` — bias + activation (fused), their backward, transposes (05–06).
- :mod:`gpulab.kernels.softmax` — stable softmax with cross-entropy and its gradient (06).
- :mod:`gpulab.kernels.optim` — SGD with momentum and Adam updates (07).

``gpulab kernels`` lists every kernel; ``gpulab ptx --all`` compiles them for real GPUs.
"""
