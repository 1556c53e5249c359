"""Analytic against numeric gradients: chapter 06's experiment, as a dashboard.

For the chosen activation, a small MLP's backward pass is compared with central differences
over a range of step sizes eps, in float64 and float32 (:func:`gpulab.nn.gradcheck.eps_sweep`),
and, at the default eps, parameter by parameter (:func:`gpulab.nn.gradcheck.gradient_check`)
with the analytic gradients from the chosen backend: NumPy, or gpulab's kernels (run in the
simulator without a GPU). Nothing here is timed.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from gpulab.experiments.dashboard import Dashboard
from gpulab.nn import MLP
from gpulab.nn.gradcheck import eps_sweep, gradient_check

WIDTHS = (5, 7, 4)
BATCH = 4


def eps_plot(sweep: dict):
    """Largest relative error of central differences against eps (log-log), per dtype."""
    fig, ax = plt.subplots(figsize=(7.5, 4.5), layout="constrained")
    for name, style in (("float64", "o-"), ("float32", "s--")):
        ax.plot(sweep["eps"], sweep[name], style, ms=4,
                label=f"numeric gradient in {name} (best eps {sweep['best'][name]:.0e})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.invert_xaxis()
    ax.axhline(1e-6, color="grey", lw=0.8, ls=":")
    ax.text(sweep["eps"][0], 1.3e-6, "tolerance 1e-6", fontsize=8, color="grey")
    ax.set_xlabel("eps (smaller to the right)")
    ax.set_ylabel("largest relative error vs the backward pass")
    ax.set_title(f"Gradient check, {sweep['activation']} MLP: truncation (left) vs rounding "
                 "(right)", fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    return fig



class GradientExperiment:
    """The eps sweep and a gradient check for one activation and backend."""

    def __init__(self, activation: str = "tanh", backend: str = "numpy", seed: int = 0):
        self.activation, self.backend, self.seed = activation, backend, seed
        self.last_result: dict | None = None

    def run(self) -> dict:
        rng = np.random.default_rng(self.seed)
        X = rng.standard_normal((BATCH, WIDTHS[0]))
        y = rng.integers(0, WIDTHS[-1], BATCH)
        model = MLP(list(WIDTHS), self.activation, self.backend, np.float64, self.seed)
        self.last_result = {"sweep": eps_sweep(self.activation, seed=self.seed),
                            "check": gradient_check(model, X, y, seed=self.seed),
                            "activation": self.activation, "backend": self.backend}
        return self.last_result

    def explain(self) -> str:
        r = self.last_result if self.last_result is not None else self.run()
        sweep, check = r["sweep"], r["check"]
        best64, best32 = sweep["best"]["float64"], sweep["best"]["float32"]
        low64, low32 = min(sweep["float64"]), min(sweep["float32"])
        return "\n".join([
            f"float64: the numeric gradient is closest to the backward pass at eps = "
            f"{best64:.0e} (relative error {low64:.1e}). Larger eps: the difference quotient's "
            "truncation error (it shrinks like eps²); smaller eps: rounding error in L(p + eps) - "
            "L(p - eps) (it grows like 1/eps).",
            f"float32 is never better than {low32:.1e} (at eps = {best32:.0e}): its 7 digits are "
            "used up by the subtraction. Gradient checks run in float64; training can use "
            "float32.",
            f"At eps = {check.eps:g}, every parameter of the {r['activation']} network agrees to "
            f"{check.max_error:.1e} ({'passed' if check.passed else 'FAILED'}, tolerance "
            f"{check.tolerance:g}; analytic gradients from {check.backend}).",
        ])


class GradientDashboard(Dashboard):
    """Activation and backend; a Run button; the eps plot, the per-parameter table, words."""

    reports_status = False  # no status line; a failure shows in the explanation
    experiment: GradientExperiment | None

    def __init__(self):
        import ipywidgets as widgets

        self.activation_dropdown = widgets.Dropdown(
            options=["identity", "relu", "gelu", "tanh", "sigmoid"], value="tanh",
            description="activation")
        self.backend_toggle = widgets.ToggleButtons(options=["numpy", "kernels"],
                                                    value="numpy", description="backward on")
        self.run_button = widgets.Button(description="Check", button_style="primary",
                                         icon="play")
        self.output = widgets.Output()
        self.explanation = widgets.HTML()
        self.run_button.on_click(lambda _button: self.run())
        self.widget = widgets.VBox([
            widgets.HBox([self.activation_dropdown, self.backend_toggle, self.run_button]),
            self.output, self.explanation])

    def make_experiment(self) -> GradientExperiment:
        return GradientExperiment(self.activation_dropdown.value, self.backend_toggle.value)

    def _draw(self) -> None:
        """The eps plot, then the per-parameter table under it."""
        self.figure = eps_plot(self.last_result["sweep"])
        self._show(self.figure, text=self.last_result["check"].table())
        self.explanation.value = self._explanation_html()


__all__ = ["GradientDashboard", "GradientExperiment"]
