"""Chapter 06's experiments: a step's cost by phase, the transposes' warp requests, the eps
trade-off and its napkin rule, the kernels' gradients; the figure."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from gpulab import device  # noqa: E402
from gpulab.experiments.gradients import (  # noqa: E402
    GradientDashboard,
    GradientExperiment,
    backward_ratio,
    eps_plot,
    eps_prediction,
    eps_table,
    phase_costs,
    phase_table,
    transpose_access,
    transpose_table,
)
from gpulab.nn import cost  # noqa: E402
from gpulab.nn.gradcheck import eps_sweep  # noqa: E402

SIM = device.tier() != "gpu"


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


def test_eps_plot_has_both_dtypes(figure_texts):
    fig = eps_plot(eps_sweep(eps_values=np.logspace(-2, -8, 4), entries=3))
    words = figure_texts(fig)
    assert "float64" in words and "float32" in words and "tolerance" in words
    plt.close(fig)


def test_phase_costs_add_up_the_step_kernels():
    kernels = cost.step_kernels([64, 128, 10], 256, "relu", "adam")
    totals = phase_costs([64, 128, 10], 256)
    assert list(totals) == ["forward", "loss", "backward", "update"]
    assert sum(t["launches"] for t in totals.values()) == len(kernels)
    assert sum(t["flops"] for t in totals.values()) == pytest.approx(sum(k.flops for k in kernels))
    # the matmuls alone: forward 2B(64*128 + 128*10); backward both dW and only layer 2's dX
    matmuls = (64 * 128 + 2 * 128 * 10) / (64 * 128 + 128 * 10)
    assert 1 < matmuls < backward_ratio([64, 128, 10]) < backward_ratio([64, 512, 512, 10]) < 2
    table = phase_table([64, 128, 10], 256)
    assert "backward / forward FLOPs: " + f"{backward_ratio([64, 128, 10]):.2f}" in table


@pytest.mark.parametrize(("method", "write_sectors", "write_share"),
                         [("naive", 16, 0.25), ("tiled", 4, 1.0)])
def test_transpose_requests_as_the_chapter_predicts(method, write_sectors, write_share):
    """16 x 16 blocks: a warp is two rows of 16 threads. Both kernels read two runs of 16
    floats (4 sectors); the naive one writes 16 rows of out, 2 neighbouring floats in each."""
    model = transpose_access(method, traced=False)
    assert model["reads"].sectors_per_request == 4 and model["reads"].efficiency == 1
    assert model["writes"].sectors_per_request == write_sectors
    assert model["writes"].efficiency == pytest.approx(write_share)
    if SIM:  # the real kernel, traced, makes exactly the requests the index arithmetic says
        traced = transpose_access(method, traced=True)
        assert traced["reads"].requests == model["reads"].requests
        assert traced["writes"].requests == model["writes"].requests
        assert "traced" in transpose_table((method,))


def test_transpose_access_refuses_an_unknown_method():
    with pytest.raises(ValueError, match="naive, tiled"):
        transpose_access("diagonal")


def test_eps_napkin_rule_and_table():
    f64, f32 = eps_prediction(np.float64), eps_prediction(np.float32)
    assert f64["unit_roundoff"] == 2.0 ** -53 and f32["unit_roundoff"] == 2.0 ** -24
    assert 1e-6 < f64["eps"] < 1e-5 and 1e-3 < f32["eps"] < 1e-2
    sweep = eps_sweep("tanh", eps_values=np.logspace(-1, -9, 9), entries=3)
    table = eps_table(sweep)
    assert "float64" in table and "float32" in table and "tanh" in table
    # the measured best eps is within a factor 10 of the napkin's (the sweep's grid is 10x)
    for name, napkin in (("float64", f64), ("float32", f32)):
        assert napkin["eps"] / 30 < sweep["best"][name] < napkin["eps"] * 30
