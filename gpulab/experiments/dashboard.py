"""What every dashboard in :mod:`gpulab.experiments` does the same way: Run builds the experiment
the controls describe, runs it, shows a failure instead of raising, draws the figure and the
explanation.

A dashboard subclasses :class:`Dashboard`, builds its controls in ``__init__`` (with
:meth:`Dashboard._add_parts` for the Run button, status, plot and explanation, and
:meth:`Dashboard._lay_out` to put its controls above them) and fills in the hooks:

- :meth:`~Dashboard.make_experiment` — the experiment the controls describe (required);
- :meth:`~Dashboard.make_figure` — the figure of a result (or override ``_draw``);
- :meth:`~Dashboard._where` — the status line: where the numbers come from in this tier.

Importing this module is cheap: ipywidgets, matplotlib and IPython load when a dashboard is
built or drawn.
"""

from __future__ import annotations

import html

from gpulab import device, hardware


def failure_html(error: Exception) -> str:
    """How a dashboard shows an exception: its type and message, in bold "Failed:"."""
    return f"<b>Failed:</b> {type(error).__name__}: {error}"


def paragraphs_html(text: str) -> str:
    """Plain text, one paragraph a line, as escaped ``<p>`` elements."""
    return "".join(f"<p>{p}</p>" for p in html.escape(text).split("\n"))


class Dashboard:
    """A Run button over an experiment: controls in, figure and explanation out.

    Subclasses set the widgets ``widget``, ``output``, ``explanation`` (and ``status`` when
    ``reports_status``) with :meth:`_add_parts` and :meth:`_lay_out`, and implement
    :meth:`make_experiment` and :meth:`make_figure`.
    """

    #: The status while the experiment runs.
    running_text = "running…"
    #: Whether Run updates ``status`` (running text, failure, then :meth:`_where`). Where it is
    #: False, the status (if any) is left alone and a failure shows in the explanation.
    reports_status = True

    # The state Run leaves behind, None until the first run.
    experiment = None
    last_result: dict | None = None
    last_error: Exception | None = None
    figure = None

    # -- hooks ------------------------------------------------------------------------------------

    def make_experiment(self):
        """The experiment the controls describe; Run calls its ``run()``."""
        raise NotImplementedError

    def make_figure(self, result: dict):
        """The matplotlib figure of ``result`` (the experiment's last result)."""
        raise NotImplementedError

    #: The status line after a run, saying where the numbers come from: ``WHERE_GPU`` in the
    #: ``gpu`` tier (``{gpu}`` is replaced by the device's name), ``WHERE_SIM`` without a GPU.
    WHERE_GPU = ""
    WHERE_SIM = ""

    def _where(self) -> str:
        """The status line after a run: where the numbers come from in this tier."""
        if device.tier() == "gpu":
            return self.WHERE_GPU.format(gpu=device.PROBE.device_name or "GPU")
        return self.WHERE_SIM

    # -- building ---------------------------------------------------------------------------------

    @staticmethod
    def _gpu_dropdown(description: str = "GPU model", keep=None):
        """A dropdown of the GPUs in :data:`gpulab.hardware.GPUS` (those whose spec ``keep``
        accepts, if given) by name, :data:`gpulab.hardware.COURSE_GPU` chosen."""
        import ipywidgets as widgets

        return widgets.Dropdown(
            options=[(spec.name, key) for key, spec in hardware.GPUS.items()
                     if keep is None or keep(spec)],
            value=hardware.COURSE_GPU, description=description,
            style={"description_width": "initial"})

    def _add_parts(self, run_label: str = "Run") -> None:
        """The Run button (wired to :meth:`run`), the status line (showing :meth:`_where`; only
        where the dashboard ``reports_status``), the plot output and the explanation."""
        import ipywidgets as widgets

        self.run_button = widgets.Button(description=run_label, button_style="primary",
                                         icon="play")
        if self.reports_status:
            self.status = widgets.HTML(value=self._where())
        self.output = widgets.Output()
        self.explanation = widgets.HTML()
        self.run_button.on_click(lambda _button: self.run())

    def _lay_out(self, *controls) -> None:
        """Set ``widget``: ``controls`` (widgets or rows of them, the Run button among them) one
        under another, then the status line (only where the dashboard ``reports_status``), the
        plot and the explanation. Call it after :meth:`_add_parts`."""
        import ipywidgets as widgets

        status = [self.status] if self.reports_status else []
        self.widget = widgets.VBox([*controls, *status, self.output, self.explanation])

    # -- running ----------------------------------------------------------------------------------

    def run(self) -> dict | None:
        """Run the experiment the controls describe and redraw; what the Run button does.
        Returns the result, or None (with ``last_error`` set and shown) if it failed."""
        if self.reports_status:
            self.status.value = self.running_text
        try:
            self.experiment = self.make_experiment()
            self.last_result = self.experiment.run()
            self.last_error = None
        except Exception as error:  # shown in the dashboard, not swallowed by the callback
            self.last_error = error
            self._show_failure(failure_html(error))
            return None
        self._draw()
        if self.reports_status:
            self.status.value = self._where()
        return self.last_result

    def _show_failure(self, message: str) -> None:
        if self.reports_status:
            self.status.value = message
        else:
            self.explanation.value = message

    # -- drawing ----------------------------------------------------------------------------------

    def _draw(self) -> None:
        self.figure = self.make_figure(self.last_result)
        self._show(self.figure)
        self.explanation.value = self._explanation_html()

    def _show(self, *figures, text: str | None = None) -> None:
        """Replace what ``output`` shows with ``figures`` (then ``text``, printed), and close
        the figures so that the notebook does not show them a second time."""
        import matplotlib.pyplot as plt
        from IPython.display import display

        self.output.clear_output(wait=True)
        with self.output:
            for figure in figures:
                display(figure)
            if text is not None:
                print(text)
        for figure in figures:
            plt.close(figure)

    def _explanation_html(self) -> str:
        return paragraphs_html(self.experiment.explain())

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)


__all__ = ["Dashboard", "failure_html", "paragraphs_html"]
