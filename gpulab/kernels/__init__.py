"""Numba CUDA kernels, one module per topic, each kernel with a launch wrapper that checks its
input, chooses the launch configuration and accepts NumPy or device arrays.

- :mod:`gpulab.kernels.elementwise` — one thread per element (chapter 01).
- :mod:`gpulab.kernels.dot` — dot products: atomics, shared-memory tree, grid-stride; and a race.
- :mod:`gpulab.kernels.memory` — saxpy, coalesced and strided copies (chapter 02).
- :mod:`gpulab.kernels.matmul` — naive, shared-memory tiled, register-blocked matmul (chapter 03).
- :mod:`gpulab.kernels.narrow_formats` — fp16/bf16/fp8 dot products and matmuls (chapter 04).
- :mod:`gpulab.kernels.dense` — bias + activation (fused), their backward, transposes (05–06).
- :mod:`gpulab.kernels.softmax` — stable softmax with cross-entropy and its gradient (06).
- :mod:`gpulab.kernels.optim` — SGD with momentum and Adam updates (07).
- :mod:`gpulab.kernels.evaluate` — each sample's loss and whether it is right, one grid for
  any batch (08).
- :mod:`gpulab.kernels.accumulate` — micro-batch gradients added in place (09).
- :mod:`gpulab.kernels.amax` — amax and the count of inf/NaN in one reduction (10).
- :mod:`gpulab.kernels.ring` — the ring all-reduce's reduce step (11).
- :mod:`gpulab.kernels.inference` — a two-layer forward pass and its argmax in one launch (12).

Shared by all of them: :mod:`~gpulab.kernels.arrays` (the one home of input checks,
:class:`~gpulab.kernels.arrays.InputError`, and of how a result is handed back),
:mod:`~gpulab.kernels.launch` (1-D launch configurations) and :mod:`~gpulab.kernels.registry`
(every kernel with its ``ptx`` signatures; shared device code, always inlined).

Names
- A kernel is named for its operation and, where a family has several, its variant:
  ``dot_atomic``, ``matmul_tiled``, ``copy_strided``, ``dot_fp16_acc32``; alone, ``saxpy``.
- ``run_<kernel>`` is the wrapper that launches exactly that kernel: ``run_saxpy``,
  ``run_copy_strided``, ``run_bias_activation``, ``run_adam_update``, ``run_sum_racy``.
- A wrapper named for an operation, with no ``run_``, computes it with the kernel(s) its
  arguments choose: ``dot(method=)`` runs ``dot_<method>``, ``matmul(method=)``,
  ``transpose(method=)``, ``dot_fp16(accumulate=)`` runs ``dot_fp16_acc16`` or ``_acc32``;
  ``dot_fp8`` quantises, then runs ``dot_fp8_acc32``; ``dot_in_format(storage, accumulate)``
  picks among all the dot kernels.
- ``launch_config(...)`` returns the launch configuration a module's wrappers use (``dot``,
  ``memory``, ``matmul``); ``launch(config, ...)`` launches a kernel with a given configuration
  on device arrays, unchecked (``elementwise``, ``matmul``: for benchmarks).

Every wrapper hands its result back by one rule (:mod:`~gpulab.kernels.arrays`): into ``out``
when given; device arrays in, device array out; NumPy in, NumPy out. The narrow-format wrappers
return a :class:`~gpulab.kernels.narrow_formats.PrecisionResult` that says where it ran.

``gpulab kernels`` lists every kernel; ``gpulab ptx --all`` compiles them for real GPUs.
"""
