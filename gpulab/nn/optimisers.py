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


class Optimiser:
    """What SGD and Adam do the same way: state tensors next to each parameter, on the model's
    backend, made at the first step; one update per parameter tensor. A subclass validates its
    settings, then calls ``super().__init__()``, and says how to make one parameter's state
    (:meth:`new_state`) and to update it (:meth:`step` over :meth:`updates`)."""

    name = ""

    def __init__(self):
        self.state: dict[str, object] = {}
        self.steps = 0

    def new_state(self, backend, param):
        """One parameter's state, made on ``backend`` at the first step."""
        raise NotImplementedError

    def updates(self, model):
        """(backend, parameter, gradient, state) of every parameter of ``model``, from its last
        backward pass; the state is made at the first step."""
        backend = model.backend
        for name, param, grad in model.parameters():
            if grad is None:
                raise RuntimeError(f"{name} has no gradient: call model.backward() first")
            if name not in self.state:
                self.state[name] = self.new_state(backend, param)
            yield backend, param, grad, self.state[name]

    def step(self, model) -> None:
        """Update every parameter of ``model`` from the gradients of its last backward pass."""
        raise NotImplementedError


class SGD(Optimiser):
    """Stochastic gradient descent with momentum: v = momentum v + g; p -= lr v."""

    name = "sgd"

    def __init__(self, lr: float = 0.1, momentum: float = 0.9, weight_decay: float = 0.0):
        self.lr = _positive("lr", lr)
        self.momentum = _fraction("momentum", momentum)
        self.weight_decay = _positive("weight_decay", weight_decay, allow_zero=True)
        super().__init__()

    def new_state(self, backend, param):
        return backend.zeros_like(param)  # the velocity

    def step(self, model) -> None:
        for be, param, grad, velocity in self.updates(model):
            be.sgd_momentum(param, grad, velocity, self.lr, self.momentum, self.weight_decay)
        self.steps += 1

    def state_tensors(self) -> int:
        """Tensors of state per parameter tensor (for memory counts)."""
        return 1

    def __repr__(self) -> str:
        return f"SGD(lr={self.lr:g}, momentum={self.momentum:g})"


class Adam(Optimiser):
    """Adam: m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; p -= lr m_hat / (sqrt(v_hat) + eps)."""

    name = "adam"

    def __init__(self, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0):
        self.lr = _positive("lr", lr)
        self.beta1, self.beta2 = (_fraction("betas[0]", betas[0]),
                                  _fraction("betas[1]", betas[1]))
        self.eps = _positive("eps", eps)
        self.weight_decay = _positive("weight_decay", weight_decay, allow_zero=True)
        super().__init__()

    def new_state(self, backend, param):
        return backend.zeros_like(param), backend.zeros_like(param)  # m and v

    def step(self, model) -> None:
        self.steps += 1  # Adam's bias correction counts this step
        for be, param, grad, (m, v) in self.updates(model):
            be.adam(param, grad, m, v, self.steps, self.lr, self.beta1, self.beta2, self.eps,
                    self.weight_decay)

    def state_tensors(self) -> int:
        return 2

    def __repr__(self) -> str:
        return f"Adam(lr={self.lr:g}, betas=({self.beta1:g}, {self.beta2:g}))"


OPTIMISERS = {"sgd": SGD, "adam": Adam}


def make_optimiser(optimiser="adam", **settings):
    """An optimiser from its name (``"sgd"`` or ``"adam"``) and settings, or the object."""
    if isinstance(optimiser, Optimiser):
        if settings:
            raise ValueError("pass settings (lr=...) with an optimiser's name, not with an "
                             "optimiser object")
        return optimiser
    if optimiser not in OPTIMISERS:
        raise ValueError(f"optimiser must be one of {', '.join(OPTIMISERS)}, not {optimiser!r}")
    return OPTIMISERS[optimiser](**settings)


__all__ = ["OPTIMISERS", "SGD", "Adam", "Optimiser", "make_optimiser"]
