"""The chapter 05-08 figures draw what they are given and say where the numbers came from."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from gpulab.nn import MLP, Trainer, load_digits, plots, spirals  # noqa: E402
from gpulab.nn.gradcheck import eps_sweep  # noqa: E402


def texts(fig) -> str:
    found = [t.get_text() for t in fig.findobj(matplotlib.text.Text)]
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend:
            found += [t.get_text() for t in legend.get_texts()]
    return " ".join(found)


@pytest.fixture(scope="module")
def spiral_run():
    data = spirals(n_per_class=30, seed=0)
    model = MLP([2, 16, 3], seed=0)
    history = Trainer(model, lr=1e-2, epochs=3, progress=False).fit(data)
    return data, model, history


def test_training_curves_show_training_and_held_out(spiral_run):
    _, _, history = spiral_run
    fig = plots.training_curves({"run": history})
    assert "run: training" in texts(fig) and "run: held-out" in texts(fig)
    assert len(fig.axes[0].get_lines()) == 2
    plt.close(fig)


def test_decision_regions(spiral_run):
    data, model, _ = spiral_run
    fig = plots.decision_regions(model, data, resolution=40)
    assert "% right" in texts(fig)
    plt.close(fig)
    with pytest.raises(ValueError, match="2 features"):
        plots.decision_regions(MLP([64, 10]), load_digits())


def test_eps_plot_has_both_dtypes():
    fig = plots.eps_plot(eps_sweep(eps_values=np.logspace(-2, -8, 4), entries=3))
    words = texts(fig)
    assert "float64" in words and "float32" in words and "tolerance" in words
    plt.close(fig)


def test_fusion_and_batch_size_plots_label_their_origins():
    result = {"bytes": {"unfused": 4000, "fused": 2000}, "shape": (10, 100), "dtype": "float32",
              "activation": "relu", "rows": [
                  {"what": "GPU", "variant": v, "seconds": s, "label": "estimated from a "
                   "roofline model of the NVIDIA T4 16GB"} for v, s in (("unfused", 2e-6),
                                                                       ("fused", 1e-6))]}
    fig = plots.fusion_plot(result)
    assert "estimated from a" in texts(fig) and "counted" in texts(fig)
    plt.close(fig)
    history = spiral_history()
    batch = {"batch_sizes": [8, 64], "samples_per_s": {"x — measured on this CPU": [1.0, 2.0]},
             "memory": [{"weights": 1, "gradients": 1, "optimiser state": 2, "activations": a}
                        for a in (8, 64)], "histories": [history, history], "model": "MLP"}
    fig = plots.batch_size_plot(batch)
    assert "measured on this CPU" in texts(fig) and "batch 64" in texts(fig)
    plt.close(fig)


def spiral_history():
    data = spirals(n_per_class=10, seed=1)
    return Trainer(MLP([2, 4, 3]), epochs=2, progress=False).fit(data)
