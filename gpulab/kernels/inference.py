"""A fused inference kernel: a two-layer network's whole forward pass and its argmax in one
launch, one thread per sample (chapter 12).

Unfused, the forward pass of the digits network is five launches (a matmul and a bias + ReLU per
layer, then the argmax), each writing its result to global memory for the next to read back. Here
each thread computes its sample's hidden units one at a time, adds each one's share into its row
of ``logits`` (a scratch the caller provides; the hidden units never leave the thread), and
writes the index of the largest logit, the first on a tie (as ``np.argmax``). One launch, and
the only traffic is the inputs, the weights and one row of logits per sample.

:func:`run_fused_inference` launches it (or a kernel of the same signature: chapter 12's
exercise) on host arrays; :class:`gpulab.serving.kernel_model.KernelModel` serves with it.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from gpulab.kernels.registry import for_float_dtypes, kernel


@kernel(*for_float_dtypes("void({t}[:, ::1], {t}[:, ::1], {t}[::1], {t}[:, ::1], {t}[::1], "
                          "{t}[:, ::1], int32[::1])"))
def fused_mlp_argmax(X, W1, b1, W2, b2, logits, out):
    """out[i] = argmax(relu(X[i] @ W1 + b1) @ W2 + b2), one thread per sample."""
    i = cuda.grid(1)
    if i < X.shape[0]:
        for c in range(W2.shape[1]):
            logits[i, c] = b2[c]
        for j in range(W1.shape[1]):
            h = b1[j]
            for k in range(X.shape[1]):
                h += X[i, k] * W1[k, j]
            if h > 0:  # the ReLU: a unit at 0 adds nothing
                for c in range(W2.shape[1]):
                    logits[i, c] += h * W2[j, c]
        best = 0
        for c in range(1, W2.shape[1]):
            if logits[i, c] > logits[i, best]:
                best = c
        out[i] = best


def default_threads() -> int:
    from gpulab import device

    return 128 if device.tier() == "gpu" else 32


def check_shapes(X, W1, b1, W2, b2) -> None:
    """A clear error for arrays that do not make a two-layer network with X."""
    if X.ndim != 2 or W1.ndim != 2 or W2.ndim != 2 or b1.ndim != 1 or b2.ndim != 1:
        raise ValueError("X, W1 and W2 must be 2-D, b1 and b2 1-D")
    if W1.shape[0] != X.shape[1] or b1.shape[0] != W1.shape[1] or W2.shape[0] != W1.shape[1] \
            or b2.shape[0] != W2.shape[1]:
        raise ValueError(f"shapes do not chain: X {X.shape}, W1 {W1.shape}, b1 {b1.shape}, "
                         f"W2 {W2.shape}, b2 {b2.shape} (X @ W1 + b1, then @ W2 + b2)")
    if W2.shape[1] < 1 or X.shape[0] < 1:
        raise ValueError("need at least one sample and one class")


def _on_device(array) -> bool:
    return hasattr(array, "copy_to_host")


def run_fused_inference(X, W1, b1, W2, b2, kernel=None, threads_per_block: int | None = None
                        ) -> np.ndarray:
    """The class of each row of X (int64, on the host) from one launch of ``kernel`` (default
    :func:`fused_mlp_argmax`) with float32 copies of the arrays, which may be device arrays
    already (weights kept on the GPU between calls)."""
    arrays = [a if _on_device(a) else np.ascontiguousarray(a, dtype=np.float32)
              for a in (X, W1, b1, W2, b2)]
    check_shapes(*arrays)
    X, W1, b1, W2, b2 = (a if _on_device(a) else cuda.to_device(a) for a in arrays)
    threads = threads_per_block or default_threads()
    if threads < 1:
        raise ValueError("threads_per_block must be >= 1")
    batch = X.shape[0]
    logits = cuda.device_array((batch, W2.shape[1]), np.float32)
    out = cuda.device_array(batch, np.int32)
    (kernel or fused_mlp_argmax)[-(-batch // threads), threads](X, W1, b1, W2, b2, logits, out)
    return out.copy_to_host().astype(np.int64)


__all__ = ["check_shapes", "default_threads", "fused_mlp_argmax", "run_fused_inference"]
