"""Optimisers: how a parameter moves once its gradient is known.

- :class:`SGD` with momentum: a velocity accumulates the gradients, the parameter follows it
  (``torch.optim.SGD`` semantics).
- :class:`Adam`: per-parameter step sizes from running averages of the gradient and its
  square (``torch.optim.Adam`` semantics; Kingma and Ba, ICLR 2015).

Both keep their state (velocity; m and v) next to each parameter, on the model's backend, and
update in place with one kernel launch per parameter tensor (``sgd_momentum_update``,
``adam_update`` on the kernel backend; :mod:`gpulab.reference` on NumPy).
"""

from __future__ import annotations

import math


def _positive(name: str, value, allow_zero: bool = False) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, not {value!r}") from None
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name} must be a finite number {'>=' if allow_zero else '>'} 0, "
                         f"not {value!r}")
    return value


def _fraction(name: str, value) -> float:
    value = _positive(name, value, allow_zero=True)
    if value >= 1:
        raise ValueError(f"{name} must be in [0, 1), not {value!r}")
    return value


class SGD:
    """Stochastic gradient descent with momentum: v = momentum v + g; p -= lr v."""

    name = "sgd"

    def __init__(self, lr: float = 0.1, momentum: float = 0.9, weight_decay: float = 0.0):
        self.lr = _positive("lr", lr)
        self.momentum = _fraction("momentum", momentum)
        self.weight_decay = _positive("weight_decay", weight_decay, allow_zero=True)
        self.state: dict[str, object] = {}
        self.steps = 0

    def step(self, model) -> None:
        """Update every parameter of ``model`` from the gradients of its last backward pass."""
        be = model.backend
        for name, param, grad in model.parameters():
            if grad is None:
                raise RuntimeError(f"{name} has no gradient: call model.backward() first")
            if name not in self.state:
                self.state[name] = be.zeros_like(param)
            be.sgd_momentum(param, grad, self.state[name], self.lr, self.momentum,
                            self.weight_decay)
        self.steps += 1

    def state_tensors(self) -> int:
        """Tensors of state per parameter tensor (for memory counts)."""
        return 1

    def __repr__(self) -> str:
        return f"SGD(lr={self.lr:g}, momentum={self.momentum:g})"


class Adam:
    """Adam: m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; p -= lr m_hat / (sqrt(v_hat) + eps)."""

    name = "adam"

    def __init__(self, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0):
        self.lr = _positive("lr", lr)
        self.beta1, self.beta2 = (_fraction("betas[0]", betas[0]),
                                  _fraction("betas[1]", betas[1]))
        self.eps = _positive("eps", eps)
        self.weight_decay = _positive("weight_decay", weight_decay, allow_zero=True)
        self.state: dict[str, tuple] = {}
        self.steps = 0

    def step(self, model) -> None:
        be = model.backend
        self.steps += 1
        for name, param, grad in model.parameters():
            if grad is None:
                raise RuntimeError(f"{name} has no gradient: call model.backward() first")
            if name not in self.state:
                self.state[name] = (be.zeros_like(param), be.zeros_like(param))
            m, v = self.state[name]
            be.adam(param, grad, m, v, self.steps, self.lr, self.beta1, self.beta2, self.eps,
                    self.weight_decay)

    def state_tensors(self) -> int:
        return 2

    def __repr__(self) -> str:
        return f"Adam(lr={self.lr:g}, betas=({self.beta1:g}, {self.beta2:g}))"


OPTIMISERS = {"sgd": SGD, "adam": Adam}


def make_optimiser(optimiser="adam", **settings):
    """An optimiser from its name (``"sgd"`` or ``"adam"``) and settings, or the object."""
    if isinstance(optimiser, (SGD, Adam)):
        if settings:
            raise ValueError("pass settings (lr=...) with an optimiser's name, not with an "
                             "optimiser object")
        return optimiser
    if optimiser not in OPTIMISERS:
        raise ValueError(f"optimiser must be one of {', '.join(OPTIMISERS)}, not {optimiser!r}")
    return OPTIMISERS[optimiser](**settings)


__all__ = ["OPTIMISERS", "SGD", "Adam", "make_optimiser"]
