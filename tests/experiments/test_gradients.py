"""Chapter 06's gradient experiment: the eps trade-off, the kernels' gradients; its figure."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from gpulab import device  # noqa: E402
from gpulab.experiments.gradients import (  # noqa: E402
    GradientDashboard,
    GradientExperiment,
    eps_plot,
)
from gpulab.nn.gradcheck import eps_sweep  # noqa: E402

SIM = device.tier() != "gpu"


def texts(fig) -> str:
    """Every text of a figure: titles, labels, annotations and legends."""
    found = [t.get_text() for t in fig.findobj(matplotlib.text.Text)]
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend:
            found += [t.get_text() for t in legend.get_texts()]
    return " ".join(found)


def test_gradient_experiment_shows_the_eps_tradeoff():
    result = GradientExperiment("tanh").run()
    sweep = result["sweep"]
    assert 1e-8 <= sweep["best"]["float64"] <= 1e-3
    assert min(sweep["float64"]) < 1e-8 < min(sweep["float32"])  # float32 cannot check
    assert sweep["float64"][0] > 100 * min(sweep["float64"])  # truncation at large eps
    assert sweep["float64"][-1] > 100 * min(sweep["float64"])  # rounding at small eps
    assert result["check"].passed


def test_gradient_dashboard_checks_the_kernels():
    dashboard = GradientDashboard()
    dashboard.activation_dropdown.value = "sigmoid"
    dashboard.backend_toggle.value = "kernels"
    dashboard.run_button.click()
    assert dashboard.last_error is None
    check = dashboard.last_result["check"]
    assert check.passed and "CUDA kernels" in check.backend
    assert "sigmoid" in dashboard.explanation.value


def test_eps_plot_has_both_dtypes():
    fig = eps_plot(eps_sweep(eps_values=np.logspace(-2, -8, 4), entries=3))
    words = texts(fig)
    assert "float64" in words and "float32" in words and "tolerance" in words
    plt.close(fig)
