"""Fused vs unfused bias + activation: chapter 05's experiment, as a dashboard.

The numbers come from :func:`gpulab.nn.fusion.compare`: bytes counted, GPU time measured (in
the ``gpu`` tier) or estimated from a roofline model of the chosen GPU, CPU time measured
(NumPy's two passes against a one-pass loop compiled by Numba). :class:`FusionExperiment` is
the logic; :class:`FusionDashboard` the view.
"""

from __future__ import annotations

import numpy as np

from gpulab import device, hardware
from gpulab.nn import fusion
from gpulab.widgets._dashboard import Dashboard


class FusionExperiment:
    """Fused against unfused bias + activation on a batch_size x width layer output."""

    def __init__(self, batch_size: int = 4096, width: int = 1024, activation: str = "relu",
                 gpu: str = "H100-SXM", dtype=np.float32):
        self.batch_size, self.width = int(batch_size), int(width)
        self.activation, self.gpu, self.dtype = activation, gpu, np.dtype(dtype)
        self.last_result: dict | None = None

    def run(self) -> dict:
        self.last_result = fusion.compare(self.batch_size, self.width, self.activation,
                                          self.gpu, self.dtype)
        return self.last_result

    def speedup(self, what: str = "GPU") -> float:
        """Unfused time / fused time for the first pair of ``what`` ("GPU" or "CPU") rows."""
        result = self.last_result if self.last_result is not None else self.run()
        pairs: dict[str, dict] = {}
        for row in result["rows"]:
            if row["what"] == what:
                pairs.setdefault(row["label"], {})[row["variant"]] = row["seconds"]
        for times in pairs.values():
            if len(times) == 2:
                return times["unfused"] / times["fused"]
        raise KeyError(f"no {what} rows (the CPU is measured for relu only)")

    def explain(self) -> str:
        return fusion.explain(self.last_result if self.last_result is not None else self.run())


class FusionDashboard(Dashboard):
    """Layer size, activation, GPU and dtype; a Run button; the figure and the explanation."""

    reports_status = False  # the status says where the numbers come from, and stays
    experiment: FusionExperiment | None

    def __init__(self):
        import ipywidgets as widgets

        style = {"description_width": "initial"}
        self.batch_dropdown = widgets.Dropdown(options=[64, 256, 1024, 4096, 16384],
                                               value=4096, description="batch", style=style)
        self.width_dropdown = widgets.Dropdown(options=[128, 512, 1024, 4096], value=1024,
                                               description="units", style=style)
        self.activation_dropdown = widgets.Dropdown(
            options=["relu", "gelu", "tanh", "sigmoid"], value="relu",
            description="activation", style=style)
        self.gpu_dropdown = widgets.Dropdown(
            options=[(spec.name, key) for key, spec in hardware.GPUS.items()],
            value="H100-SXM", description="GPU model", style=style)
        self.dtype_toggle = widgets.ToggleButtons(options=["float32", "float64"],
                                                  value="float32", description="dtype")
        self._add_parts()
        self.widget = widgets.VBox([
            widgets.HBox([self.batch_dropdown, self.width_dropdown, self.activation_dropdown]),
            widgets.HBox([self.gpu_dropdown, self.dtype_toggle, self.run_button]),
            self.status, self.output, self.explanation])

    def _where(self) -> str:
        return ("CPU times are measured here (for relu); GPU times are "
                + ("measured on this GPU and estimated for the model chosen."
                   if device.tier() == "gpu" else "roofline estimates (no GPU: simulator tier)."))

    def make_experiment(self) -> FusionExperiment:
        return FusionExperiment(
            self.batch_dropdown.value, self.width_dropdown.value,
            self.activation_dropdown.value, self.gpu_dropdown.value, self.dtype_toggle.value)

    def make_figure(self, result: dict):
        from gpulab.nn.plots import fusion_plot

        return fusion_plot(result)


__all__ = ["FusionDashboard", "FusionExperiment"]
