"""The activation functions a dense layer can use, and how to initialise its weights for each.

The functions themselves are :func:`gpulab.reference.activation` (NumPy) and the ``act``
code of the kernels in :mod:`gpulab.kernels.dense`; this module holds what the layers need to
know about them.
"""

from __future__ import annotations

import math

from gpulab.reference import ACTIVATIONS

FORMULAS = {
    "identity": "f(z) = z",
    "relu": "f(z) = max(z, 0)",
    "gelu": "f(z) = 0.5 z (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3)))",
    "tanh": "f(z) = tanh(z)",
    "sigmoid": "f(z) = 1 / (1 + exp(-z))",
}


def check_activation(name: str) -> str:
    if name not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}, not {name!r}")
    return name


def init_std(activation: str, fan_in: int, fan_out: int) -> float:
    """Standard deviation of the normal distribution a layer's weights are drawn from.

    ReLU and GELU: He et al., "Delving Deep into Rectifiers", ICCV 2015: sqrt(2 / fan_in),
    which keeps the variance of the activations steady from layer to layer when half the units
    are off. tanh, sigmoid, identity: Glorot and Bengio, "Understanding the difficulty of
    training deep feedforward neural networks", AISTATS 2010: sqrt(2 / (fan_in + fan_out)).
    """
    check_activation(activation)
    if activation in ("relu", "gelu"):
        return math.sqrt(2.0 / fan_in)
    return math.sqrt(2.0 / (fan_in + fan_out))


__all__ = ["ACTIVATIONS", "FORMULAS", "check_activation", "init_std"]
