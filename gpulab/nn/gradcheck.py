"""Gradient checking: are the backward pass's gradients the derivatives of the loss?

The analytic gradient (the backward pass) is compared with a numeric one, the central
difference

    dL/dp  ~  (L(p + eps) - L(p - eps)) / (2 eps)

for a sample of the entries of every parameter. The central difference's own error is
O(eps^2) (truncation) plus about machine-epsilon * |L| / eps (rounding): in float64, eps between
1e-6 and 1e-5 balances them, and a correct backward pass agrees to a relative error of 1e-7 or
better. In float32 no eps is good: the best is about 1e-3 (:func:`eps_sweep` shows it), which
is why gradient checks run in float64.

Relative error per entry: |a - n| / max(|a| + |n|, 1e-3) (a: analytic, n: numeric). The floor
keeps tiny gradients from failing on noise: for a loss near 1, the central difference's
rounding error in float64 at eps = 1e-6 is ~1e-10, which is a relative error of 1e-5 on a
gradient of 1e-5 although nothing is wrong; below 1e-3 the error is measured against 1e-3.

Documented tolerance (:data:`TOLERANCE`, float64, eps = 1e-6, inputs of order 1): the largest
relative error over the checked entries of every parameter must stay below 1e-6 for every
activation (identity, ReLU, GELU, tanh, sigmoid) and for the softmax cross-entropy loss. When
this was written, the largest error over 20 random networks per activation (5-7-6-4, batch 6,
20 entries per parameter) was 3.1e-7 (sigmoid); ``tests/nn/test_nn_gradcheck.py`` asserts the
tolerance on both backends. ReLU has a kink at 0: an entry whose perturbation moves some ReLU
input across 0 gets a numeric gradient between the two one-sided slopes. That almost never
happens with random float64 inputs at eps = 1e-6; :func:`gradient_check` compares the on/off
pattern of every ReLU at p + eps and p - eps and reports such entries (``kinks``) instead of
failing on them.

The analytic gradients may come from any backend (the kernels in the simulator, for a
small network); the numeric ones always come from a NumPy float64 copy of the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gpulab.nn.mlp import MLP
from gpulab.tables import Column, ShownAsTable, Table

TOLERANCE = 1e-6
DEFAULT_EPS = 1e-6
FLOOR = 1e-3


def relative_error(analytic, numeric, floor: float = FLOOR) -> np.ndarray:
    """|a - n| / max(|a| + |n|, floor), elementwise."""
    a = np.asarray(analytic, np.float64)
    n = np.asarray(numeric, np.float64)
    return np.abs(a - n) / np.maximum(np.abs(a) + np.abs(n), floor)


def numeric_gradient(loss_of, param: np.ndarray, entries, eps: float = DEFAULT_EPS) -> np.ndarray:
    """Central differences of ``loss_of()`` with respect to ``param`` at the flat ``entries``;
    ``param`` (a float64 NumPy array that ``loss_of`` reads) is perturbed in place and
    restored."""
    flat = param.reshape(-1)
    result = np.empty(len(entries))
    for k, index in enumerate(entries):
        saved = flat[index]
        flat[index] = saved + eps
        plus = loss_of()
        flat[index] = saved - eps
        minus = loss_of()
        flat[index] = saved
        result[k] = (plus - minus) / (2 * eps)
    return result


@dataclass
class ParameterCheck:
    name: str
    layer_activation: str
    entries: np.ndarray
    analytic: np.ndarray
    numeric: np.ndarray
    kinks: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))

    @property
    def errors(self) -> np.ndarray:
        return relative_error(self.analytic, self.numeric)

    @property
    def max_error(self) -> float:
        """The largest relative error, entries at a ReLU kink left out."""
        keep = ~np.isin(self.entries, self.kinks)
        return float(self.errors[keep].max()) if keep.any() else 0.0


@dataclass(repr=False)
class GradientCheck(ShownAsTable):
    """Per-parameter results of :func:`gradient_check`."""

    parameters: list[ParameterCheck]
    eps: float
    backend: str
    tolerance: float = TOLERANCE

    @property
    def max_error(self) -> float:
        return max(p.max_error for p in self.parameters)

    @property
    def passed(self) -> bool:
        return self.max_error < self.tolerance

    def table(self) -> Table:
        """One row per parameter, the verdict underneath."""
        verdict = "passed" if self.passed else "FAILED"
        return Table([Column("parameter"), Column("layer"), Column("entries"),
                      Column("max rel. error", number_format="{:.2e}"), Column("")],
                     [[p.name, p.layer_activation, len(p.entries), p.max_error,
                       f"({len(p.kinks)} at a ReLU kink, skipped)" if len(p.kinks) else ""]
                      for p in self.parameters],
                     notes=[f"{verdict}: largest relative error {self.max_error:.2e} (tolerance "
                            f"{self.tolerance:g}, eps {self.eps:g}, analytic gradients from "
                            f"{self.backend})"])


def _relu_signs(model: MLP, X: np.ndarray) -> np.ndarray:
    """Which ReLU inputs are positive, for every ReLU layer of a float64 NumPy model, as one
    flat boolean array: if it differs between p + eps and p - eps, the difference quotient
    straddles a kink."""
    from gpulab import reference

    signs, A = [], X
    for layer in model.layers:
        Z = A @ layer.W + layer.b
        if layer.activation == "relu":
            signs.append((Z > 0).ravel())
        A = reference.activation(Z, layer.activation)
    return np.concatenate(signs) if signs else np.zeros(0, dtype=bool)


def gradient_check(model: MLP, X, y, eps: float = DEFAULT_EPS, entries_per_parameter: int = 12,
                   seed: int = 0, tolerance: float = TOLERANCE) -> GradientCheck:
    """Compare ``model``'s backward pass on (X, y) with central differences.

    Up to ``entries_per_parameter`` entries of each parameter are checked (all of a small
    one), chosen with ``seed``. The model itself is not changed.
    """
    if not isinstance(model, MLP):
        raise TypeError(f"model must be a gpulab.nn.MLP, not {type(model).__name__}")
    if model.dtype != np.float64:
        raise ValueError(f"gradient checks need float64 (the model is {model.dtype}): in "
                         "float32 the central difference's rounding error is ~1e-4, as large "
                         "as the mistakes it should find. Use model.copy(dtype=np.float64)")
    model.loss(X, y)
    model.backward()
    analytic = model.gradients()
    twin = model.copy(backend="numpy", dtype=np.float64)
    X64 = np.asarray(X, np.float64)
    rng = np.random.default_rng(seed)
    checks = []
    for k, layer in enumerate(twin.layers):
        for name in ("W", "b"):
            key = f"layer{k}.{name}"
            flat = getattr(layer, name).reshape(-1)  # a view: perturbing it changes the model
            chosen = (np.arange(flat.size) if flat.size <= entries_per_parameter
                      else np.sort(rng.choice(flat.size, entries_per_parameter, replace=False)))
            numeric, kinks = np.empty(len(chosen)), []
            for j, index in enumerate(chosen):
                saved = flat[index]
                flat[index] = saved + eps
                plus, plus_signs = twin.loss(X64, y), _relu_signs(twin, X64)
                flat[index] = saved - eps
                minus, minus_signs = twin.loss(X64, y), _relu_signs(twin, X64)
                flat[index] = saved
                numeric[j] = (plus - minus) / (2 * eps)
                if not np.array_equal(plus_signs, minus_signs):
                    kinks.append(index)
            checks.append(ParameterCheck(key, layer.activation, chosen,
                                         analytic[key].reshape(-1)[chosen], numeric,
                                         np.array(kinks, dtype=int)))
    return GradientCheck(checks, eps, model.backend.describe(), tolerance)


def eps_sweep(activation: str = "tanh", eps_values=None, widths=(5, 7, 4), batch: int = 6,
              entries: int = 10, seed: int = 0) -> dict:
    """How the central difference's error depends on eps, in float64 and float32.

    A small MLP's analytic gradients (float64, NumPy) are compared with central differences
    computed in each dtype for every eps: the largest relative error over ``entries`` entries
    of every parameter. Large eps: truncation error, shrinking like eps^2. Small eps: rounding
    error, growing like (machine epsilon) / eps. Returns ``{"eps": [...], "float64": [...],
    "float32": [...], "best": {dtype: eps}}``.
    """
    eps_values = list(eps_values if eps_values is not None else np.logspace(-1, -11, 21))
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((batch, widths[0]))
    y = rng.integers(0, widths[-1], batch)
    model = MLP(list(widths), activation, dtype=np.float64, seed=seed)
    model.loss(X, y)
    model.backward()
    analytic = model.gradients()
    result: dict = {"eps": eps_values, "activation": activation}
    for dtype in (np.float64, np.float32):
        twin = model.copy(dtype=dtype)
        Xd = X.astype(dtype)
        picks = {}
        for name, param, _ in twin.parameters():
            size = param.size
            picks[name] = (np.arange(size) if size <= entries
                           else np.sort(rng.choice(size, entries, replace=False)))
        errors = []

        def loss_of(model=twin, inputs=Xd) -> float:
            return model.loss(inputs, y)

        for eps in eps_values:
            worst = 0.0
            for name, param, _ in twin.parameters():
                numeric = numeric_gradient(loss_of, param, picks[name], eps)
                a = analytic[name].reshape(-1)[picks[name]]
                worst = max(worst, float(relative_error(a, numeric).max()))
            errors.append(worst)
        result[np.dtype(dtype).name] = errors
    result["best"] = {name: float(eps_values[int(np.argmin(result[name]))])
                      for name in ("float64", "float32")}
    return result


__all__ = ["DEFAULT_EPS", "FLOOR", "TOLERANCE", "GradientCheck", "ParameterCheck", "eps_sweep",
           "gradient_check",
           "numeric_gradient", "relative_error"]
