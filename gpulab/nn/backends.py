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

**Your kernels in the network.** ``KernelBackend(kernels={"adam_update": my_adam, ...})`` (or
``get_backend("kernels", kernels={...})``) launches your ``@cuda.jit`` kernels in place of
gpulab's, by the name of the gpulab kernel each replaces (:data:`OVERRIDABLE`; one table,
:data:`REPLACEABLE`, says each one's parameters, launch and outputs), and gpulab's for the rest.
Each must take the same parameters as gpulab's kernel (``gpulab.kernel_source`` shows them); it
is launched as :data:`OVERRIDE_LAUNCH` says, into a fresh output filled with NaN, so an element
your kernel skips shows as NaN instead of as last step's value. A name gpulab does not know,
something that is not a ``@cuda.jit`` kernel, a kernel with the wrong number of parameters or
one that still raises ``NotImplementedError`` is refused at once with a
:class:`KernelOverrideError` that says what to change; an error inside your kernel while the
network runs is re-raised as one that names it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

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


# --- your kernels in place of gpulab's ----------------------------------------------------------

@dataclass(frozen=True)
class Replaceable:
    """One kernel a :class:`KernelBackend` launches that yours may replace: what yours takes, how
    it is launched, and the fresh outputs it writes."""

    parameters: tuple[str, ...]  # gpulab's kernel's, in order: the inputs, then the outputs
    launch: str  # how the backend launches it, in words (error messages, chapter 07)
    blocks: str  # "matmul" or "transpose" (square tiles), "2d" (grid_2d), "1d" (flat)
    over: str  # the parameter whose elements the threads cover
    outputs: Callable[..., tuple] = lambda **inputs: ()  # their shapes, from the inputs by name
    like: str = ""  # the parameter whose dtype the outputs take


# The kernels a KernelBackend launches that you may replace, by gpulab's name. Written in place
# (the optimiser updates) when a kernel has no outputs; else into fresh outputs, filled with NaN.
REPLACEABLE: dict[str, Replaceable] = {
    "matmul": Replaceable(
        ("A", "B", "C"),
        "one thread per element of C (M x N), square blocks of tile x tile threads, x along C's "
        "columns; tile = KernelBackend(tile=...), else 16 on a GPU, 8 in the simulator, so a "
        "tiled kernel's tile is cuda.blockDim.x",
        "matmul", "C", lambda A, B: ((A.shape[0], B.shape[1]),), "A"),
    "transpose": Replaceable(
        ("A", "out"),
        "one thread per element of A (M x N), out is N x M, square blocks (16 x 16 on a GPU, "
        "8 x 8 in the simulator), x along A's columns",
        "transpose", "A", lambda A: (A.shape[::-1],), "A"),
    "bias_activation": Replaceable(
        ("Z", "b", "act", "A"),
        "one thread per element of Z, 2-D blocks (32 x 8 on a GPU, 8 x 8 in the simulator), x "
        "along the columns; act is an activation code (gpulab.kernels.dense.ACTIVATION_CODES)",
        "2d", "Z", lambda Z, **_: (Z.shape,), "Z"),
    "bias_activation_backward": Replaceable(
        ("dA", "Z", "b", "act", "dZ"),
        "as bias_activation: one thread per element of Z",
        "2d", "Z", lambda Z, **_: (Z.shape,), "Z"),
    "bias_grad": Replaceable(
        ("dZ", "db"),
        "one thread per column of dZ, 1-D blocks (256 on a GPU, 32 in the simulator)",
        "1d", "db", lambda dZ: ((dZ.shape[1],),), "dZ"),
    "softmax_cross_entropy": Replaceable(
        ("logits", "labels", "probs", "losses"),
        "one thread per row (sample), 1-D blocks",
        "1d", "losses", lambda logits, labels: (logits.shape, logits.shape[:1]), "logits"),
    "softmax_cross_entropy_backward": Replaceable(
        ("probs", "labels", "scale", "dlogits"),
        "one thread per element of probs, 2-D blocks, x along the classes; scale = 1 / batch",
        "2d", "probs", lambda probs, **_: (probs.shape,), "probs"),
    "sgd_momentum_update": Replaceable(
        ("param", "grad", "velocity", "lr", "momentum", "weight_decay"),
        "one thread per element of the parameter, seen as a flat vector, 1-D blocks",
        "1d", "param"),
    "adam_update": Replaceable(
        ("param", "grad", "m", "v", "lr", "beta1", "beta2", "eps", "correction1", "correction2",
         "weight_decay"),
        "one thread per element of the parameter, seen as a flat vector, 1-D blocks; "
        "correction_k = 1 - beta_k ** step, computed on the host",
        "1d", "param"),
}

# The parameters yours must take (gpulab's own, in order), and how the backend launches it (the
# same grids as gpulab's own launches), by name.
OVERRIDABLE: dict[str, tuple[str, ...]] = {name: k.parameters for name, k in REPLACEABLE.items()}
OVERRIDE_LAUNCH: dict[str, str] = {name: k.launch for name, k in REPLACEABLE.items()}

# gpulab's variants of a kernel that override one entry of OVERRIDABLE
OVERRIDE_ALIASES = {"matmul_naive": "matmul", "matmul_tiled": "matmul",
                    "transpose_naive": "transpose", "transpose_tiled": "transpose"}


class KernelOverrideError(ValueError):
    """A kernel given to replace one of gpulab's cannot, or failed while the network ran it;
    the message names the kernel and says what to change."""


def _kernel_name(kernel) -> str:
    from gpulab.instruments import python_function

    function = python_function(kernel)
    return getattr(function or kernel, "__name__", type(kernel).__name__)


def check_override(name: str, kernel) -> str:
    """The :data:`OVERRIDABLE` name that ``kernel`` replaces, once it is known to fit there: a
    ``@cuda.jit`` kernel (not a device function, not a plain function) with that kernel's
    number of parameters, not the exercise's stub. Raises :class:`KernelOverrideError`."""
    from gpulab.instruments import is_device_function, python_function

    if not isinstance(name, str):
        raise KernelOverrideError(f"name each kernel by the gpulab kernel it replaces (a "
                                  f"string such as 'adam_update'), not {name!r}")
    slot = OVERRIDE_ALIASES.get(name, name)
    if slot not in OVERRIDABLE:
        raise KernelOverrideError(
            f"{name!r} is not a kernel the network launches; the names are "
            f"{', '.join(OVERRIDABLE)} (plus {', '.join(OVERRIDE_ALIASES)} for matmul and "
            "transpose)")
    expected = OVERRIDABLE[slot]
    function = python_function(kernel)
    if function is None:
        if callable(kernel) and hasattr(kernel, "__code__"):
            raise KernelOverrideError(
                f"{kernel.__name__!r}, given for {slot}, is a plain Python function, not a CUDA "
                "kernel: put @cuda.jit on the line above its def")
        raise KernelOverrideError(
            f"{slot} needs a @cuda.jit kernel, not {type(kernel).__name__} {kernel!r:.60}; "
            "pass the kernel itself, without launching it")
    if is_device_function(kernel):
        raise KernelOverrideError(
            f"{function.__name__!r}, given for {slot}, is a device function "
            "(@cuda.jit(device=True)): the network launches kernels, so write it as a kernel "
            "that stores its result in its last argument")
    parameters = list(inspect.signature(function).parameters)
    if len(parameters) != len(expected):
        raise KernelOverrideError(
            f"{function.__name__!r}, given for {slot}, takes {len(parameters)} parameters "
            f"({', '.join(parameters)}), but {slot} takes {len(expected)}: "
            f"({', '.join(expected)}), in that order")
    if "NotImplementedError" in function.__code__.co_names:
        raise KernelOverrideError(
            f"{function.__name__!r}, given for {slot}, still raises NotImplementedError: write "
            "it first (or leave it out, and gpulab's kernel is used)")
    return slot


def check_overrides(kernels) -> dict[str, object]:
    """``{name: kernel}`` checked with :func:`check_override`; a kernel of None is left out
    (gpulab's is used). Returns ``{OVERRIDABLE name: kernel}``."""
    if kernels is None:
        return {}
    if not isinstance(kernels, dict):
        raise KernelOverrideError("kernels must be a dict {gpulab kernel name: your kernel}, "
                                  f"not {type(kernels).__name__}")
    checked: dict[str, object] = {}
    for name, kernel in kernels.items():
        if kernel is None:
            continue
        slot = check_override(name, kernel)
        if slot in checked:
            raise KernelOverrideError(f"two kernels given for {slot}: give one")
        checked[slot] = kernel
    return checked


class KernelBackend:
    """Every operation on gpulab's CUDA kernels, on device arrays.

    ``matmul_method`` and ``tile`` choose the chapter-03 kernel (default: :func:`default_matmul`).
    ``kernels``: your kernels in place of gpulab's, ``{gpulab kernel name: kernel}`` (see the
    module docstring; None values are ignored).
    """

    name = "kernels"

    def __init__(self, matmul_method: str | None = None, tile: int | None = None,
                 kernels: dict | None = None):
        from gpulab.kernels import matmul as matmul_kernels

        method, default_tile = default_matmul()
        self.matmul_method = matmul_method or method
        if self.matmul_method not in matmul_kernels.METHODS:
            raise ValueError(f"matmul_method must be one of {', '.join(matmul_kernels.METHODS)}"
                             f", not {self.matmul_method!r}")
        self.tile = tile if tile is not None else (
            default_tile if self.matmul_method != "register_blocked" else None)
        self.tier = device.tier()
        self.overrides = check_overrides(kernels)

    def origin(self, name: str) -> str:
        """Whose kernel runs for ``name`` (an :data:`OVERRIDABLE` name): "yours (my_adam)" or
        "gpulab's"."""
        slot = OVERRIDE_ALIASES.get(name, name)
        if slot not in OVERRIDABLE:
            raise KeyError(f"no kernel {name!r}; the names are {', '.join(OVERRIDABLE)}")
        kernel = self.overrides.get(slot)
        return "gpulab's" if kernel is None else f"yours ({_kernel_name(kernel)})"

    def describe(self) -> str:
        where = self.where()
        yours = (f", with yours for {', '.join(self.overrides)}" if self.overrides else "")
        if self.tier == "gpu":
            return f"gpulab's CUDA kernels on {where} (matmul_{self.matmul_method}){yours}"
        return (f"gpulab's CUDA kernels in {where} (matmul_{self.matmul_method}){yours}: the "
                "same code a GPU runs, one Python thread per CUDA thread")

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

    # your kernels
    def _yours(self, name: str, *inputs):
        """Launch your kernel for ``name`` on ``inputs`` and fresh NaN-filled outputs, as
        :data:`REPLACEABLE` says, and wait for it; an error inside it becomes a
        KernelOverrideError that names it. Returns the output (several: a tuple; none: None)."""
        from numba import cuda

        from gpulab.instruments import launchable

        replaceable, kernel = REPLACEABLE[name], self.overrides[name]
        named = dict(zip(replaceable.parameters[:len(inputs)], inputs, strict=True))
        dtype = named[replaceable.like].dtype if replaceable.like else None
        outputs = tuple(cuda.to_device(np.full(shape, np.nan, dtype=dtype))
                        for shape in replaceable.outputs(**named))
        named.update(zip(replaceable.parameters[len(inputs):], outputs, strict=True))
        blocks, threads = self._grid(replaceable.blocks, named[replaceable.over].shape)
        try:
            launchable(kernel)[blocks, threads](*inputs, *outputs)
            cuda.synchronize()
        except Exception as error:  # the learner's kernel: say whose it was
            raise KernelOverrideError(
                f"your kernel {_kernel_name(kernel)!r}, launched for {name} "
                f"({replaceable.launch}), stopped with {type(error).__name__}: {error}"
            ) from error
        return outputs[0] if len(outputs) == 1 else (outputs or None)

    def _grid(self, blocks: str, shape) -> tuple:
        """(blocks, threads) of a launch of kind ``blocks`` (:class:`Replaceable`) over an array
        of ``shape``: the same grids as gpulab's own launches."""
        from gpulab.kernels import dense, matmul

        if blocks == "2d":
            return dense.grid_2d(*shape)
        if blocks == "1d":
            threads = dense.default_threads_1d()
            return -(-int(np.prod(shape)) // threads), threads
        side = (self.tile or matmul.default_tile() if blocks == "matmul"
                else dense.default_transpose()[1])
        M, N = shape
        return (-(-N // side), -(-M // side)), (side, side)

    # the forward and backward pass
    def matmul(self, A, B):
        if "matmul" in self.overrides:
            return self._yours("matmul", self.asarray(A), self.asarray(B))
        from gpulab.kernels.matmul import matmul

        return matmul(A, B, method=self.matmul_method, tile=self.tile)

    def transpose(self, A):
        if "transpose" in self.overrides:
            return self._yours("transpose", self.asarray(A))
        from gpulab.kernels.dense import transpose

        return transpose(A)

    def matmul_transposed_a(self, A, B):
        """A^T @ B: ``transpose_tiled`` copies A^T, then the matmul kernel."""
        return self.matmul(self.transpose(A), B)

    def matmul_transposed_b(self, A, B):
        """A @ B^T: ``transpose_tiled`` copies B^T, then the matmul kernel."""
        return self.matmul(A, self.transpose(B))

    def bias_activation(self, Z, b, activation: str):
        if "bias_activation" in self.overrides:
            from gpulab.kernels.dense import activation_code

            return self._yours("bias_activation", self.asarray(Z), self.asarray(b),
                               activation_code(activation))
        from gpulab.kernels.dense import run_bias_activation

        return run_bias_activation(Z, b, activation)

    def bias_activation_backward(self, dA, Z, b, activation: str):
        if "bias_activation_backward" in self.overrides:
            from gpulab.kernels.dense import activation_code

            return self._yours("bias_activation_backward", self.asarray(dA), self.asarray(Z),
                               self.asarray(b), activation_code(activation))
        from gpulab.kernels.dense import run_bias_activation_backward

        return run_bias_activation_backward(dA, Z, b, activation)

    def bias_grad(self, dZ):
        if "bias_grad" in self.overrides:
            return self._yours("bias_grad", self.asarray(dZ))
        from gpulab.kernels.dense import run_bias_grad

        return run_bias_grad(dZ)

    def softmax_cross_entropy(self, logits, labels):
        if "softmax_cross_entropy" in self.overrides:
            return self._yours("softmax_cross_entropy", self.asarray(logits), self.labels(labels))
        from gpulab.kernels.softmax import run_softmax_cross_entropy

        return run_softmax_cross_entropy(logits, labels)

    def softmax_cross_entropy_backward(self, probs, labels, scale: float):
        if "softmax_cross_entropy_backward" in self.overrides:
            probs = self.asarray(probs)
            return self._yours("softmax_cross_entropy_backward", probs, self.labels(labels),
                               probs.dtype.type(scale))
        from gpulab.kernels.softmax import run_softmax_cross_entropy_backward

        return run_softmax_cross_entropy_backward(probs, labels, scale)

    # optimiser updates, in place (yours: on the arrays seen as flat vectors)
    def sgd_momentum(self, param, grad, velocity, lr, momentum, weight_decay) -> None:
        if "sgd_momentum_update" in self.overrides:
            t = param.dtype.type
            self._yours("sgd_momentum_update", *_flat(param, grad, velocity), t(lr), t(momentum),
                        t(weight_decay))
            return
        from gpulab.kernels.optim import run_sgd_momentum_update

        run_sgd_momentum_update(param, grad, velocity, lr, momentum, weight_decay)

    def adam(self, param, grad, m, v, step, lr, beta1, beta2, eps, weight_decay) -> None:
        if "adam_update" in self.overrides:
            t = param.dtype.type
            self._yours("adam_update", *_flat(param, grad, m, v), t(lr), t(beta1), t(beta2),
                        t(eps), t(1 - beta1**step), t(1 - beta2**step), t(weight_decay))
            return
        from gpulab.kernels.optim import run_adam_update

        run_adam_update(param, grad, m, v, step, lr, beta1, beta2, eps, weight_decay)


def _flat(*arrays) -> list:
    """The arrays as flat vectors (views)."""
    return [a.reshape(-1) if len(a.shape) > 1 else a for a in arrays]


def get_backend(backend="numpy", kernels: dict | None = None):
    """A backend from its name (``"numpy"`` or ``"kernels"``) or a backend object.

    ``kernels``: with ``"kernels"``, your kernels in place of gpulab's (see
    :class:`KernelBackend`), e.g. ``get_backend("kernels", kernels={"adam_update": my_adam})``.
    """
    if isinstance(backend, (NumpyBackend, KernelBackend)):
        if kernels:
            raise ValueError("pass kernels= with the name 'kernels', not with a backend object "
                             "(KernelBackend(kernels=...) takes them directly)")
        return backend
    if backend == "numpy":
        if kernels:
            raise ValueError("kernels= replaces gpulab's CUDA kernels: use it with "
                             "backend='kernels', not 'numpy'")
        return NumpyBackend()
    if backend == "kernels":
        return KernelBackend(kernels=kernels)
    raise ValueError(f"backend must be one of {', '.join(BACKENDS)} (or a backend object), "
                     f"not {backend!r}")


__all__ = ["BACKENDS", "OVERRIDABLE", "OVERRIDE_ALIASES", "OVERRIDE_LAUNCH", "REPLACEABLE",
           "KernelBackend", "KernelOverrideError", "NumpyBackend", "Replaceable",
           "check_override", "check_overrides", "default_matmul", "get_backend"]
