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


class FusionDashboard:
    """Layer size, activation, GPU and dtype; a Run button; the figure and the explanation."""

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
        self.run_button = widgets.Button(description="Run", button_style="primary", icon="play")
        self.status = widgets.HTML(
            "CPU times are measured here (for relu); GPU times are "
            + ("measured on this GPU and estimated for the model chosen."
               if device.tier() == "gpu" else "roofline estimates (no GPU: simulator tier)."))
        self.output = widgets.Output()
        self.explanation = widgets.HTML()
        self.run_button.on_click(lambda _button: self.run())
        self.widget = widgets.VBox([
            widgets.HBox([self.batch_dropdown, self.width_dropdown, self.activation_dropdown]),
            widgets.HBox([self.gpu_dropdown, self.dtype_toggle, self.run_button]),
            self.status, self.output, self.explanation])
        self.experiment: FusionExperiment | None = None
        self.last_result: dict | None = None
        self.last_error: Exception | None = None

    def run(self) -> dict | None:
        try:
            self.experiment = FusionExperiment(
                self.batch_dropdown.value, self.width_dropdown.value,
                self.activation_dropdown.value, self.gpu_dropdown.value, self.dtype_toggle.value)
            self.last_result = self.experiment.run()
            self.last_error = None
        except Exception as error:  # shown in the dashboard, not lost in the callback
            self.last_error = error
            self.explanation.value = f"<b>Failed:</b> {type(error).__name__}: {error}"
            return None
        import html

        import matplotlib.pyplot as plt
        from IPython.display import display

        from gpulab.nn.plots import fusion_plot

        figure = fusion_plot(self.last_result)
        self.output.clear_output(wait=True)
        with self.output:
            display(figure)
        plt.close(figure)
        self.explanation.value = "".join(
            f"<p>{html.escape(p)}</p>" for p in self.experiment.explain().split("\n"))
        return self.last_result

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)


__all__ = ["FusionDashboard", "FusionExperiment"]
