"""A full training run with its curves: chapter 07's experiment.

Train an MLP on the digits (or the spirals) with the settings chosen, evaluate it on held-out
samples after every epoch, and compare: training against held-out accuracy (a model can learn
its training samples by heart), and time per epoch on the CPU against a GPU. Where numbers come
from:

- the training run itself: NumPy backend on this CPU, epochs timed (measured); in the ``gpu``
  tier the same run also on gpulab's kernels on the GPU (measured, wall clock);
- in the ``sim`` tier, the kernels run **one real training step** on a small batch, checked
  against the NumPy step (:func:`gpulab.nn.trainer.check_kernel_step`), and the GPU's time per
  epoch is **estimated** from a roofline model of a named GPU (:mod:`gpulab.nn.cost`).

:class:`TrainingExperiment` is the logic; :class:`TrainingDashboard` the ipywidgets view.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from gpulab import device, hardware
from gpulab.experiments.dashboard import Dashboard
from gpulab.nn import cost
from gpulab.nn.data import load_digits, spirals
from gpulab.nn.mlp import MLP
from gpulab.nn.recipes import DIGITS
from gpulab.nn.trainer import Trainer, check_kernel_step

DATASETS = ("digits", "spirals")
CHECK_BATCH = 8  # the simulator's one real kernel step
CHECK_HIDDEN = 16


def load(name: str):
    if name == "digits":
        return load_digits(seed=0)
    if name == "spirals":
        return spirals(seed=0)
    raise ValueError(f"dataset must be one of {', '.join(DATASETS)}, not {name!r}")


def training_curves(histories, title: str | None = None):
    """Loss (left) and accuracy (right) per epoch: training solid, held-out dashed.

    ``histories``: one :class:`~gpulab.nn.trainer.History` or ``{label: History}``.
    """
    if not isinstance(histories, dict):
        histories = {"": histories}
    fig, (loss_ax, acc_ax) = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, (label, history) in enumerate(histories.items()):
        colour = colours[k % len(colours)]
        epochs = history.column("epoch")
        prefix = f"{label}: " if label else ""
        loss_ax.plot(epochs, history.column("train_loss"), "-", color=colour,
                     label=f"{prefix}training")
        acc_ax.plot(epochs, 100 * np.array(history.column("train_accuracy")), "-",
                    color=colour, label=f"{prefix}training")
        if history.final.test_loss is not None:
            loss_ax.plot(epochs, history.column("test_loss"), "--", color=colour,
                         label=f"{prefix}held-out")
            acc_ax.plot(epochs, 100 * np.array(history.column("test_accuracy")), "--",
                        color=colour, label=f"{prefix}held-out")
    loss_ax.set_yscale("log")
    loss_ax.set_ylabel("mean cross-entropy loss (log scale)")
    acc_ax.set_ylabel("accuracy (%)")
    for ax in (loss_ax, acc_ax):
        ax.set_xlabel("epoch")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title or "Training: solid = training samples, dashed = held-out samples",
                 fontsize=11)
    return fig


def decision_regions(model, data, resolution: int = 200, ax=None):
    """The class ``model`` predicts at every point of the plane, with the held-out samples
    on top (2-feature data only, e.g. :func:`gpulab.nn.data.spirals`)."""
    if data.n_features != 2:
        raise ValueError(f"decision regions need 2 features; {data.name} has {data.n_features}")
    if ax is None:
        fig, ax = plt.subplots(figsize=(5.5, 5), layout="constrained")
    fig = ax.figure
    X = np.concatenate([data.X_train, data.X_test])
    low, high = X.min(axis=0) - 0.1, X.max(axis=0) + 0.1
    xs, ys = np.meshgrid(np.linspace(low[0], high[0], resolution),
                         np.linspace(low[1], high[1], resolution))
    grid = np.column_stack([xs.ravel(), ys.ravel()]).astype(model.dtype)
    predicted = model.predict(grid).reshape(xs.shape)
    colours = [plt.get_cmap("tab10")(k % 10) for k in range(data.n_classes)]
    ax.contourf(xs, ys, predicted, levels=np.arange(data.n_classes + 1) - 0.5,
                colors=colours, alpha=0.25)
    ax.scatter(data.X_test[:, 0], data.X_test[:, 1], c=[colours[k] for k in data.y_test], s=14,
               edgecolors="black", linewidths=0.3)
    accuracy = model.accuracy(data.X_test, data.y_test)
    ax.set_title(f"{data.name}: shading = predicted class; dots = held-out samples\n(coloured "
                 f"by their true class, {100 * accuracy:.0f}% right)", fontsize=9)
    ax.set_aspect("equal")
    return fig



class TrainingExperiment:
    """One training run with the given settings, evaluated after every epoch."""

    def __init__(self, dataset: str = "digits", hidden=(128,), activation: str = "relu",
                 optimiser: str = "adam", lr: float = DIGITS["lr"],
                 batch_size: int = DIGITS["batch_size"], epochs: int = DIGITS["epochs"],
                 gpu: str = "H100-SXM", seed: int = 0):
        self.data = load(dataset)
        self.hidden = [int(h) for h in hidden]
        self.widths = [self.data.n_features, *self.hidden, self.data.n_classes]
        self.activation, self.optimiser, self.lr = activation, optimiser, float(lr)
        self.batch_size, self.epochs, self.seed = int(batch_size), int(epochs), seed
        self.gpu = hardware.get_gpu(gpu)
        self.tier = device.tier()
        self.model: MLP | None = None
        self.last_result: dict | None = None

    def _train(self, backend: str, epochs: int):
        model = MLP(self.widths, self.activation, backend, np.float32, self.seed)
        trainer = Trainer(model, self.optimiser, batch_size=self.batch_size, epochs=epochs,
                          seed=self.seed, progress=False, lr=self.lr)
        return model, trainer.fit(self.data)

    def run(self) -> dict:
        self.model, history = self._train("numpy", self.epochs)
        histories = {"NumPy on this CPU": history}
        if self.tier == "gpu":
            _, on_gpu = self._train("kernels", self.epochs)
            histories["gpulab kernels on the GPU"] = on_gpu
        X = self.data.X_train[:CHECK_BATCH]
        y = self.data.y_train[:CHECK_BATCH]
        check_widths = [self.data.n_features, min(CHECK_HIDDEN, *self.hidden),
                        self.data.n_classes]
        step_check = check_kernel_step(X, y, check_widths, self.activation, self.optimiser,
                                       self.lr, seed=self.seed)
        epoch_estimate_s = cost.estimate_epoch_s(self.widths, self.batch_size,
                                                 self.data.n_train, self.gpu,
                                                 activation=self.activation,
                                                 optimiser=self.optimiser)
        test_loss = history.column("test_loss")
        self.last_result = {
            "histories": histories, "history": history, "kernel_step": step_check,
            "gpu_epoch_estimate_s": epoch_estimate_s,
            "gpu_label": f"estimated from a roofline model of the {self.gpu.name}",
            "best_epoch": int(np.argmin(test_loss)) + 1, "tier": self.tier,
            "dataset": str(self.data), "model": repr(self.model),
        }
        return self.last_result

    def _result(self) -> dict:
        return self.last_result if self.last_result is not None else self.run()

    def explain(self) -> str:
        r = self._result()
        h = r["history"]
        final = h.final
        gap = final.train_accuracy - final.test_accuracy
        epoch_s = [rec.seconds for rec in h.records[1:]] or [h.final.seconds]
        cpu_s = float(np.median(epoch_s))
        lines = [
            f"After {len(h.records)} epochs: {100 * final.train_accuracy:.1f}% of the training "
            f"samples and {100 * final.test_accuracy:.1f}% of the held-out samples are right. "
            + (f"The {100 * gap:.1f}-point gap is what the model learned by heart rather than "
               "learned to generalise. " if gap > 0.005 else "")
            + f"The held-out loss was lowest after epoch {r['best_epoch']}.",
            f"An epoch takes {cpu_s * 1e3:.3g} ms on this CPU (median, measured, NumPy); the "
            f"{self.gpu.name} would need about {r['gpu_epoch_estimate_s'] * 1e3:.3g} ms "
            f"({r['gpu_label']}; mostly kernel launches at this size).",
        ]
        for label, other in r["histories"].items():
            if label != "NumPy on this CPU":
                other_s = float(np.median([rec.seconds for rec in other.records[1:]]
                                          or [other.final.seconds]))
                lines.append(f"{label}: {other_s * 1e3:.3g} ms per epoch ({other.timing}); "
                             f"held-out accuracy {100 * other.final.test_accuracy:.1f}%.")
        check = r["kernel_step"]
        lines.append(
            f"One real training step of the kernels ({check['kernels']}, batch "
            f"{check['batch_size']}, widths {check['widths']}) matches NumPy's: loss "
            f"{check['loss_kernels']:.6f} vs {check['loss_numpy']:.6f}, parameters within "
            f"{check['max_parameter_difference']:.1e}." if check["ok"] else
            f"WARNING: the kernel step differs from NumPy's by "
            f"{check['max_parameter_difference']:.1e}.")
        return "\n".join(lines)


class TrainingDashboard(Dashboard):
    """Settings, a Run button, the training curves and the explanation.

    Drive it from Python: ``d.lr_dropdown.value = 0.03; d.run_button.click()``.
    """

    running_text = "training…"  # the status line is otherwise empty: the curves say it all
    experiment: TrainingExperiment | None

    def __init__(self):
        import ipywidgets as widgets

        self.tier = device.tier()
        style = {"description_width": "initial"}
        self.dataset_toggle = widgets.ToggleButtons(options=list(DATASETS), value="digits",
                                                    description="data")
        self.hidden_dropdown = widgets.Dropdown(
            options=[("16", (16,)), ("128", (128,)), ("512", (512,)), ("128, 64", (128, 64))],
            value=(128,), description="hidden units", style=style)
        self.activation_dropdown = widgets.Dropdown(
            options=["relu", "gelu", "tanh", "sigmoid"], value="relu", description="activation",
            style=style)
        self.optimiser_toggle = widgets.ToggleButtons(options=["adam", "sgd"], value="adam",
                                                      description="optimiser")
        self.lr_dropdown = widgets.Dropdown(options=[1e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 1.0],
                                            value=DIGITS["lr"], description="learning rate",
                                            style=style)
        self.batch_dropdown = widgets.Dropdown(options=[8, 32, 128, 512],
                                               value=DIGITS["batch_size"],
                                               description="batch size", style=style)
        self.epochs_slider = widgets.IntSlider(value=DIGITS["epochs"], min=1, max=60,
                                               description="epochs")
        self._add_parts("Train")
        self.widget = widgets.VBox([
            widgets.HBox([self.dataset_toggle, self.optimiser_toggle]),
            widgets.HBox([self.hidden_dropdown, self.activation_dropdown]),
            widgets.HBox([self.lr_dropdown, self.batch_dropdown]),
            widgets.HBox([self.epochs_slider, self.run_button]),
            self.status, self.output, self.explanation])

    def make_experiment(self) -> TrainingExperiment:
        return TrainingExperiment(
            dataset=self.dataset_toggle.value, hidden=self.hidden_dropdown.value,
            activation=self.activation_dropdown.value, optimiser=self.optimiser_toggle.value,
            lr=self.lr_dropdown.value, batch_size=self.batch_dropdown.value,
            epochs=self.epochs_slider.value)

    def make_figure(self, result: dict):
        return training_curves(result["histories"])


__all__ = ["DATASETS", "TrainingDashboard", "TrainingExperiment"]
