"""Two backends, one interface: where the layers, the loss and the optimisers do their work.

- :class:`NumpyBackend` (``"numpy"``): :mod:`gpulab.reference` on this CPU. NumPy calls BLAS
  for the matmuls (several cores), so this is the honest CPU baseline.
- :class:`KernelBackend` (``"kernels"``): gpulab's CUDA kernels. Arrays live on the device;
  the matmuls are chapter 03's kernels, the rest come from :mod:`gpulab.kernels.dense`,
  :mod:`~gpulab.kernels.softmax` and :mod:`~gpulab.kernels.optim`. In the ``gpu`` tier they
  run on the GPU; in the ``sim`` tier in Numba's CUDA simulator, one Python thread per CUDA
  thread: the same code, checked against NumPy, but far too slow to time (use small batches).

Both compute in the arrays' dtype. The backward matmuls need a transposed operand
(``X^T @ dZ``, ``dZ @ W^T``): NumPy hands BLAS the transposed view (no copy); the kernel
backend copies it with ``transpose_tiled`` and then calls the ordinary matmul kernel.
"""

from __future__ import annotations

import numpy as np

from gpulab import device, reference

BACKENDS = ("numpy", "kernels")


class NumpyBackend:
    """Every operation as :mod:`gpulab.reference` computes it, on NumPy arrays."""

    name = "numpy"

    def describe(self) -> str:
        from gpulab.timing import cpu_device

        return f"NumPy (BLAS) on {cpu_device()}"

    def where(self) -> str:
        """Where a time measured with this backend was measured."""
        from gpulab.timing import cpu_device

        return cpu_device()

    # arrays
    def asarray(self, array: np.ndarray, dtype=None) -> np.ndarray:
        return np.ascontiguousarray(array, dtype=dtype)

    def to_host(self, array) -> np.ndarray:
        return np.asarray(array)

    def zeros_like(self, array) -> np.ndarray:
        return np.zeros_like(array)

    def labels(self, labels: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(labels, dtype=np.int64)

    def synchronize(self) -> None:
        """Nothing to wait for: NumPy returns when the work is done."""

    # the forward and backward pass
    def matmul(self, A, B):
        return reference.matmul(A, B)

    def matmul_transposed_a(self, A, B):
        """A^T @ B: BLAS reads A transposed in place."""
        return np.matmul(A.T, B)

    def matmul_transposed_b(self, A, B):
        """A @ B^T: BLAS reads B transposed in place."""
        return np.matmul(A, B.T)

    def bias_activation(self, Z, b, activation: str):
        return reference.bias_activation(Z, b, activation)

    def bias_activation_backward(self, dA, Z, b, activation: str):
        return reference.bias_activation_backward(dA, Z, b, activation)

    def bias_grad(self, dZ):
        return reference.bias_grad(dZ)

    def softmax_cross_entropy(self, logits, labels):
        return reference.softmax_cross_entropy(logits, labels)

    def softmax_cross_entropy_backward(self, probs, labels, scale: float):
        return reference.softmax_cross_entropy_backward(probs, labels, scale)

    # optimiser updates, in place
    def sgd_momentum(self, param, grad, velocity, lr, momentum, weight_decay) -> None:
        new_param, new_velocity = reference.sgd_momentum_update(
            param, grad, velocity, lr, momentum, weight_decay)
        param[...] = new_param
        velocity[...] = new_velocity

    def adam(self, param, grad, m, v, step, lr, beta1, beta2, eps, weight_decay) -> None:
        new_param, new_m, new_v = reference.adam_update(
            param, grad, m, v, step, lr, beta1, beta2, eps, weight_decay)
        param[...] = new_param
        m[...] = new_m
        v[...] = new_v


def default_matmul() -> tuple[str, int | None]:
    """(method, tile) of the matmul kernel the kernel backend uses in this tier.

    In the simulator, ``naive``: it has no barriers, and each ``syncthreads`` costs the
    simulator tens of milliseconds. On a GPU, ``tiled`` with 16 x 16 tiles: an MLP's matrices
    are small (a batch of 256 by 128 units), and 16 x 16 tiles give many more blocks to spread
    over the GPU's SMs than the register-blocked kernel's 128 x 128 tiles.
    """
    return ("tiled", 16) if device.tier() == "gpu" else ("naive", None)


class KernelBackend:
    """Every operation on gpulab's CUDA kernels, on device arrays.

    ``matmul_method`` and ``tile`` choose the chapter-03 kernel (default: :func:`default_matmul`).
    """

    name = "kernels"

    def __init__(self, matmul_method: str | None = None, tile: int | None = None):
        from gpulab.kernels import matmul as matmul_kernels

        method, default_tile = default_matmul()
        self.matmul_method = matmul_method or method
        if self.matmul_method not in matmul_kernels.METHODS:
            raise ValueError(f"matmul_method must be one of {', '.join(matmul_kernels.METHODS)}"
                             f", not {self.matmul_method!r}")
        self.tile = tile if tile is not None else (
            default_tile if self.matmul_method != "register_blocked" else None)
        self.tier = device.tier()

    def describe(self) -> str:
        where = self.where()
        if self.tier == "gpu":
            return f"gpulab's CUDA kernels on {where} (matmul_{self.matmul_method})"
        return (f"gpulab's CUDA kernels in {where} (matmul_{self.matmul_method}): the same code "
                "a GPU runs, one Python thread per CUDA thread")

    def where(self) -> str:
        if self.tier == "gpu":
            return device.PROBE.device_name or "unknown GPU"
        return "Numba's CUDA simulator on this CPU"

    # arrays
    def asarray(self, array, dtype=None):
        from numba import cuda

        from gpulab.kernels.arrays import is_device_array

        if is_device_array(array) and (dtype is None or np.dtype(array.dtype) == dtype):
            return array
        return cuda.to_device(np.ascontiguousarray(array, dtype=dtype))

    def to_host(self, array) -> np.ndarray:
        return array.copy_to_host() if hasattr(array, "copy_to_host") else np.asarray(array)

    def zeros_like(self, array):
        from numba import cuda

        return cuda.to_device(np.zeros(array.shape, dtype=array.dtype))

    def labels(self, labels):
        return self.asarray(labels, dtype=np.int64)

    def synchronize(self) -> None:
        from numba import cuda

        cuda.synchronize()

    # the forward and backward pass
    def matmul(self, A, B):
        from gpulab.kernels.matmul import matmul

        return matmul(A, B, method=self.matmul_method, tile=self.tile)

    def transpose(self, A):
        from gpulab.kernels.dense import transpose

        return transpose(A)

    def matmul_transposed_a(self, A, B):
        """A^T @ B: ``transpose_tiled`` copies A^T, then the matmul kernel."""
        return self.matmul(self.transpose(A), B)

    def matmul_transposed_b(self, A, B):
        """A @ B^T: ``transpose_tiled`` copies B^T, then the matmul kernel."""
        return self.matmul(A, self.transpose(B))

    def bias_activation(self, Z, b, activation: str):
        from gpulab.kernels.dense import run_bias_activation

        return run_bias_activation(Z, b, activation)

    def bias_activation_backward(self, dA, Z, b, activation: str):
        from gpulab.kernels.dense import run_bias_activation_backward

        return run_bias_activation_backward(dA, Z, b, activation)

    def bias_grad(self, dZ):
        from gpulab.kernels.dense import run_bias_grad

        return run_bias_grad(dZ)

    def softmax_cross_entropy(self, logits, labels):
        from gpulab.kernels.softmax import run_softmax_cross_entropy

        return run_softmax_cross_entropy(logits, labels)

    def softmax_cross_entropy_backward(self, probs, labels, scale: float):
        from gpulab.kernels.softmax import run_softmax_cross_entropy_backward

        return run_softmax_cross_entropy_backward(probs, labels, scale)

    # optimiser updates, in place
    def sgd_momentum(self, param, grad, velocity, lr, momentum, weight_decay) -> None:
        from gpulab.kernels.optim import run_sgd_momentum_update

        run_sgd_momentum_update(param, grad, velocity, lr, momentum, weight_decay)

    def adam(self, param, grad, m, v, step, lr, beta1, beta2, eps, weight_decay) -> None:
        from gpulab.kernels.optim import run_adam_update

        run_adam_update(param, grad, m, v, step, lr, beta1, beta2, eps, weight_decay)


def get_backend(backend="numpy"):
    """A backend from its name (``"numpy"`` or ``"kernels"``) or a backend object."""
    if isinstance(backend, (NumpyBackend, KernelBackend)):
        return backend
    if backend == "numpy":
        return NumpyBackend()
    if backend == "kernels":
        return KernelBackend()
    raise ValueError(f"backend must be one of {', '.join(BACKENDS)} (or a backend object), "
                     f"not {backend!r}")


__all__ = ["BACKENDS", "KernelBackend", "NumpyBackend", "default_matmul", "get_backend"]
