"""Optimiser updates: after the backward pass, every parameter moves against its gradient.

Both kernels are elementwise over a parameter tensor seen as one flat vector (a weight matrix
``W`` is passed as ``W.reshape(-1)``, a view, not a copy), one thread per element, no
synchronisation. They are memory-bound: the arithmetic is a handful of FLOPs per element.

Variants
- ``sgd_momentum_update``: v = momentum * v + (g + weight_decay * p); p -= lr * v, as
  PyTorch's ``torch.optim.SGD`` (dampening 0, not Nesterov). Per element: reads p, g, v,
  writes p, v: 5 values moved, 5 FLOPs. One extra tensor of state (v) per parameter.
- ``adam_update``: Adam (Kingma and Ba, ICLR 2015, Algorithm 1), as ``torch.optim.Adam``:
  m and v are running averages of g and g², bias-corrected, p -= lr * m̂ / (sqrt(v̂) + eps).
  Per element: reads p, g, m, v, writes p, m, v: 7 values moved, about 14 FLOPs and a square
  root. Two tensors of state per parameter: chapter 09 counts what that costs in memory.

The scalars (learning rate, momentum, the bias corrections 1 - beta^t) are computed once on
the host per step and passed in the parameter's dtype.
"""

from __future__ import annotations

import math

from numba import cuda

from gpulab.kernels.arrays import InputError, as_number, is_device_array, matching, whole_number
from gpulab.kernels.dense import default_threads_1d
from gpulab.kernels.registry import for_float_dtypes, kernel

SGD_VALUES_MOVED = 5  # per element: read p, g, v; write p, v
SGD_FLOPS = 5
ADAM_VALUES_MOVED = 7  # per element: read p, g, m, v; write p, m, v
ADAM_FLOPS = 14


@kernel(*for_float_dtypes("void({t}[::1], {t}[::1], {t}[::1], {t}, {t}, {t})"))
def sgd_momentum_update(param, grad, velocity, lr, momentum, weight_decay):
    """SGD with momentum: v = momentum v + g (+ weight decay); param -= lr v. A thread each.

    velocity[i] = momentum * velocity[i] + grad[i] + weight_decay * param[i], then
    param[i] -= lr * velocity[i].

    Per thread: reads param, grad, velocity; writes param, velocity (5 values); 5 FLOPs.
    No synchronisation: each element has one owner.
    """
    i = cuda.grid(1)
    if i < param.shape[0]:
        g = grad[i] + weight_decay * param[i]
        v = momentum * velocity[i] + g
        velocity[i] = v
        param[i] -= lr * v


@kernel(*for_float_dtypes(
    "void({t}[::1], {t}[::1], {t}[::1], {t}[::1], {t}, {t}, {t}, {t}, {t}, {t}, {t})"))
def adam_update(param, grad, m, v, lr, beta1, beta2, eps, correction1, correction2,
                weight_decay):
    """Adam: running averages m, v of g and g², then a bias-corrected step. A thread each.

    m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g²;
    param -= lr * (m / correction1) / (sqrt(v / correction2) + eps), with
    correction_k = 1 - beta_k^step.

    Per thread: reads param, grad, m, v; writes param, m, v (7 values); about 14 FLOPs and a
    square root. No synchronisation.
    """
    i = cuda.grid(1)
    if i < param.shape[0]:
        one = param.dtype.type(1)
        g = grad[i] + weight_decay * param[i]
        m_i = beta1 * m[i] + (one - beta1) * g
        v_i = beta2 * v[i] + (one - beta2) * g * g
        m[i] = m_i
        v[i] = v_i
        param[i] -= lr * (m_i / correction1) / (math.sqrt(v_i / correction2) + eps)


def _flat(array):
    """A 1-D view of a contiguous array (a matrix W becomes W.reshape(-1), no copy)."""
    return array.reshape(-1) if len(getattr(array, "shape", ())) > 1 else array


def _state(**named):
    """The parameter, its gradient and its state tensors, flat, checked to agree in size and
    dtype (:func:`gpulab.kernels.arrays.matching`) and to be on the device."""
    flat = dict(zip(named, matching(**{name: _flat(v) for name, v in named.items()}),
                    strict=True))
    if not all(is_device_array(v) for v in flat.values()):
        raise InputError("the optimiser kernels update in place: pass device arrays "
                         "(cuda.to_device(...)) for the parameter, gradient and state")
    return flat


def run_sgd_momentum_update(param, grad, velocity, lr: float, momentum: float = 0.9,
                            weight_decay: float = 0.0) -> None:
    """One SGD-with-momentum step on device arrays, in place (``sgd_momentum_update``)."""
    flat = _state(param=param, grad=grad, velocity=velocity)
    t = flat["param"].dtype.type
    lr = as_number("lr", lr, 0.0)
    momentum = as_number("momentum", momentum, 0.0, 1.0, high_open=True)
    weight_decay = as_number("weight_decay", weight_decay, 0.0)
    threads = default_threads_1d()
    n = flat["param"].shape[0]
    sgd_momentum_update[-(-n // threads), threads](
        flat["param"], flat["grad"], flat["velocity"], t(lr), t(momentum), t(weight_decay))


def run_adam_update(param, grad, m, v, step: int, lr: float, beta1: float = 0.9,
                    beta2: float = 0.999, eps: float = 1e-8, weight_decay: float = 0.0) -> None:
    """One Adam step on device arrays, in place (``adam_update``); ``step`` counts from 1."""
    flat = _state(param=param, grad=grad, m=m, v=v)
    step = whole_number("step", step, 1, why=" (Adam's t counts from 1)")
    t = flat["param"].dtype.type
    lr = as_number("lr", lr, 0.0)
    beta1 = as_number("beta1", beta1, 0.0, 1.0, high_open=True)
    beta2 = as_number("beta2", beta2, 0.0, 1.0, high_open=True)
    eps = as_number("eps", eps, 0.0)
    weight_decay = as_number("weight_decay", weight_decay, 0.0)
    threads = default_threads_1d()
    n = flat["param"].shape[0]
    adam_update[-(-n // threads), threads](
        flat["param"], flat["grad"], flat["m"], flat["v"], t(lr), t(beta1), t(beta2), t(eps),
        t(1 - beta1**step), t(1 - beta2**step), t(weight_decay))


__all__ = [
    "ADAM_FLOPS", "ADAM_VALUES_MOVED", "SGD_FLOPS", "SGD_VALUES_MOVED", "adam_update",
    "run_adam_update", "run_sgd_momentum_update", "sgd_momentum_update",
]
