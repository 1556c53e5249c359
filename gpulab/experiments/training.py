"""A full training run with its curves: chapter 07's experiment.

Train an MLP on the digits (or the spirals) with the settings chosen, evaluate it on held-out
samples after every epoch, and compare: training against held-out accuracy (a model can learn
its training samples by heart), and time per epoch on the CPU against a GPU. Where numbers come
from:

- the training run itself: NumPy backend on this CPU, epochs timed (measured); in the ``gpu``
  tier the same run also on gpulab's kernels on the GPU (measured, wall clock);
- in the ``sim`` tier, the kernels run **one real training step** on a small batch, checked
  against the NumPy step (:func:`gpulab.nn.trainer.check_kernel_step`), and the GPU's time per
  epoch is **estimated** by gpulab's GPU model of a named GPU (:mod:`gpulab.nn.cost`).

**Precision** (chapter 04 in a training run): ``precision="fp32"`` is the trainer above;
``"bf16"`` and ``"fp16"`` store the weights the products read, the activations and the
gradients in that format, with fp32 master weights for Adam and fp32 sums inside every product
(fp16 adds dynamic loss scaling): chapter 10's recipes (:data:`gpulab.nn.mixed_precision.RECIPES`,
:func:`~gpulab.nn.mixed_precision.train_mixed`), emulated with NumPy and ml_dtypes on this CPU,
and one real step of them on chapter 04's kernels checked against the emulation
(:func:`~gpulab.nn.mixed_precision.compare_engines`).

:class:`TrainingExperiment` is the logic; :class:`TrainingDashboard` the ipywidgets view.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from gpulab import device, hardware
from gpulab.experiments.dashboard import Dashboard
from gpulab.experiments.experiment import Experiment
from gpulab.nn import cost
from gpulab.nn import mixed_precision as mp
from gpulab.nn.data import load_digits, spirals
from gpulab.nn.mlp import MLP
from gpulab.nn.recipes import DIGITS
from gpulab.nn.trainer import EpochRecord, History, Trainer, check_kernel_step
from gpulab.tables import Column, Table
from gpulab.timing import cpu_device

DATASETS = ("digits", "spirals")
PRECISIONS = ("fp32", "bf16", "fp16")  # the storage formats the playground offers
CHECK_BATCH = 8  # the simulator's one real kernel step
CHECK_HIDDEN = 16
COMPARED_FORMATS = ("fp32", "tf32", "fp16", "bf16", "fp8")


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


# --- tables the chapter prints ------------------------------------------------------------------


def compare_runs(runs: dict) -> Table:
    """One row per run ({label: History}): the first epoch's training loss, the updates made,
    the training time and the held-out accuracy at the end; where the times were measured
    underneath."""
    return Table([Column("run"), Column("epoch-1 loss", number_format="{:.3f}"),
                  Column("updates"), Column("seconds", number_format="{:.2f}"),
                  Column("held-out", "%", "{:.1f}")],
                 [[label, history.records[0].train_loss, sum(history.column("steps")),
                   history.total_seconds, 100 * history.final.test_accuracy]
                  for label, history in runs.items()],
                 notes=["times: " + "; ".join(dict.fromkeys(h.timing for h in runs.values()))])


def _compared(value: float, other: float, less: str, more: str, same: str = "the same as") -> str:
    return less if value < other else more if value > other else same


def versus(runs: dict, reference: str | None = None) -> str:
    """For every run ({label: History}) but ``reference`` (default: the first), a sentence
    computed from the two: the first epoch's training loss, the updates and the measured
    training time, and the held-out accuracy at the end."""
    reference = reference or next(iter(runs))
    ref = runs[reference]
    ref_loss, ref_s = ref.records[0].train_loss, ref.total_seconds
    ref_updates, ref_acc = sum(ref.column("steps")), 100 * ref.final.test_accuracy
    lines = []
    for label, run in runs.items():
        if label == reference:
            continue
        loss, seconds = run.records[0].train_loss, run.total_seconds
        updates, acc = sum(run.column("steps")), 100 * run.final.test_accuracy
        lines.append(
            f"{label}: first-epoch training loss {loss:.3f}, "
            f"{_compared(loss, ref_loss, 'lower', 'higher')} than {ref_loss:.3f}; "
            + (f"the same {updates} updates" if updates == ref_updates
               else f"{updates} updates instead of {ref_updates}")
            + f", in {seconds:.2f} s instead of "
            f"{ref_s:.2f} s ({_compared(seconds, ref_s, 'less', 'more', 'the same')} time, "
            f"measured); held-out accuracy {acc:.1f}%, "
            f"{_compared(acc, ref_acc, 'worse than', 'better than')} the reference's "
            f"{ref_acc:.1f}%.")
    return "\n".join([f"reference: {reference}", *lines])


def gpu_ratios(faster=hardware.COURSE_GPU, slower="T4") -> dict[str, float]:
    """How many times ``faster``'s datasheet peak is ``slower``'s, per number format both have
    a rate for (fp32: CUDA cores; tf32, fp16, bf16, fp8: tensor cores; dense, from
    :mod:`gpulab.hardware`), and for memory bandwidth (``"memory bandwidth"``)."""
    a, b = hardware.get_gpu(faster), hardware.get_gpu(slower)
    ratios = {fmt: a.peak_flops_for(fmt) / b.peak_flops_for(fmt) for fmt in COMPARED_FORMATS
              if fmt in a.peak_flops and fmt in b.peak_flops}
    ratios["memory bandwidth"] = a.memory_bandwidth_bytes_per_s / b.memory_bandwidth_bytes_per_s
    return ratios


def ratios_table(faster=hardware.COURSE_GPU, slower="T4") -> Table:
    """:func:`gpu_ratios` as a table, with each GPU's figure (datasheet peaks)."""
    a, b = hardware.get_gpu(faster), hardware.get_gpu(slower)
    rows = []
    for what, ratio in gpu_ratios(faster, slower).items():
        if what == "memory bandwidth":
            va, vb = (hardware.format_rate(g.memory_bandwidth_bytes_per_s, "B/s") for g in (a, b))
            name = what
        else:
            va, vb = (hardware.format_rate(g.peak_flops_for(what), "FLOP/s") for g in (a, b))
            name = f"{what} ({'CUDA cores' if what == 'fp32' else 'tensor cores'})"
        rows.append([name, va, vb, ratio])
    return Table([Column(""), Column(a.name), Column(b.name), Column("ratio", "×", "{:.1f}")],
                 rows, notes=["datasheet peaks (dense), gpulab.hardware; a plain Numba kernel "
                              "runs on the CUDA cores, so the fp32 row is the one gpulab's "
                              "kernels can use"])


def epoch_times(history: History, n_train: int, gpus=(hardware.COURSE_GPU, "T4"),
                widths=DIGITS["widths"], batch_size: int = DIGITS["batch_size"]) -> dict:
    """Seconds per epoch, keyed by where each came from: the median measured epoch (after the
    first) of ``history``, and gpulab's GPU model of its kernels on each GPU named."""
    times = {}
    for gpu in gpus:
        spec = hardware.get_gpu(gpu)
        times[cost.estimate_step(list(widths), batch_size, spec).label] = \
            cost.estimate_epoch_s(list(widths), batch_size, n_train, spec)
    measured = [r.seconds for r in history.records[1:]] or [history.final.seconds]
    times[history.timing] = float(np.median(measured))
    return times


def times_table(times: dict) -> Table:
    """``{where: seconds}`` as a table: each epoch time (ms) and where it came from."""
    return Table([Column("epoch", "ms", "{:.2f}"), Column("where it comes from")],
                 [[seconds * 1e3, where] for where, seconds in times.items()])


# --- the precision choice: chapter 10's recipes ---------------------------------------------------


def check_precision(precision: str) -> str:
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    return precision


def precision_label(precision: str) -> str:
    """What a precision of the playground stores, in words."""
    if check_precision(precision) == "fp32":
        return "fp32 (everything stored and computed in fp32)"
    recipe = mp.RECIPES[precision]
    return (f"{precision} storage: {recipe.title} (weights the products read, activations and "
            f"gradients stored in {precision}; fp32 sums in every product; chapter 10's recipe)")


def history_of_mixed(run: mp.MixedRun, n_train: int, n_parameters: int) -> History:
    """A :class:`~gpulab.nn.mixed_precision.MixedRun` as a trainer's
    :class:`~gpulab.nn.trainer.History` (so that the same curves and tables show it)."""
    steps = -(-n_train // run.batch_size)
    records = [EpochRecord(k + 1, run.train_loss[k], run.train_accuracy[k],
                           run.epoch_seconds[k], n_train / run.epoch_seconds[k], steps,
                           run.test_loss[k], run.test_accuracy[k])
               for k in range(len(run.test_accuracy))]
    model = (f"MLP({' -> '.join(map(str, run.widths))}, relu, {n_parameters:,} parameters, "
             f"{run.recipe.title})")
    timing = (f"measured on {cpu_device()} with time.perf_counter ({run.recipe.storage} "
              "storage emulated with NumPy and ml_dtypes: a CPU's time, not a GPU's "
              f"{run.recipe.storage} speed)")
    return History(model, f"Adam(lr={run.lr:g})", run.batch_size, run.seed, run.where, timing,
                   records)


class TrainingExperiment(Experiment):
    """One training run with the given settings, evaluated after every epoch.

    ``precision``: "fp32", or "bf16" / "fp16" storage with chapter 10's recipe (ReLU layers and
    Adam only; see the module docstring)."""

    def __init__(self, dataset: str = "digits", hidden=(128,), activation: str = "relu",
                 optimiser: str = "adam", lr: float = DIGITS["lr"],
                 batch_size: int = DIGITS["batch_size"], epochs: int = DIGITS["epochs"],
                 gpu: str = hardware.COURSE_GPU, seed: int = 0, precision: str = "fp32"):
        self.precision = check_precision(precision)
        if precision != "fp32" and (activation, optimiser) != ("relu", "adam"):
            raise ValueError(
                f"{precision} storage runs chapter 10's recipe, which trains ReLU layers with "
                f"Adam: choose relu and adam (not {activation} and {optimiser}), or fp32")
        self.data = load(dataset)
        self.hidden = [int(h) for h in hidden]
        self.widths = [self.data.n_features, *self.hidden, self.data.n_classes]
        self.activation, self.optimiser, self.lr = activation, optimiser, float(lr)
        self.batch_size, self.epochs, self.seed = int(batch_size), int(epochs), seed
        self.gpu = hardware.get_gpu(gpu)
        self.tier = device.tier()
        self.model: MLP | None = None

    def _train(self, backend: str, epochs: int):
        model = MLP(self.widths, self.activation, backend, np.float32, self.seed)
        trainer = Trainer(model, self.optimiser, batch_size=self.batch_size, epochs=epochs,
                          seed=self.seed, progress=False, lr=self.lr)
        return model, trainer.fit(self.data)

    def _check_widths(self) -> list[int]:
        return [self.data.n_features, min(CHECK_HIDDEN, *self.hidden), self.data.n_classes]

    def _run_fp32(self) -> tuple[dict, dict]:
        self.model, history = self._train("numpy", self.epochs)
        histories = {"NumPy on this CPU": history}
        if self.tier == "gpu":
            _, on_gpu = self._train("kernels", self.epochs)
            histories["gpulab kernels on the GPU"] = on_gpu
        X, y = self.data.X_train[:CHECK_BATCH], self.data.y_train[:CHECK_BATCH]
        check = check_kernel_step(X, y, self._check_widths(), self.activation, self.optimiser,
                                  self.lr, seed=self.seed)
        check["text"] = (
            f"One real training step of the kernels ({check['kernels']}, batch "
            f"{check['batch_size']}, widths {check['widths']}) matches NumPy's: loss "
            f"{check['loss_kernels']:.6f} vs {check['loss_numpy']:.6f}, parameters within "
            f"{check['max_parameter_difference']:.1e}." if check["ok"] else
            f"WARNING: the kernel step differs from NumPy's by "
            f"{check['max_parameter_difference']:.1e}.")
        return histories, check

    def _run_narrow(self) -> tuple[dict, dict]:
        recipe = mp.RECIPES[self.precision]
        run = mp.train_mixed(recipe, data=self.data, epochs=self.epochs,
                             batch_size=self.batch_size, lr=self.lr, seed=self.seed,
                             widths=self.widths)
        self.model = MLP(self.widths, "relu", "numpy", np.float32, self.seed).load_state(
            run.state)  # the fp32 master weights
        history = history_of_mixed(run, self.data.n_train, self.model.n_parameters)
        X, y = self.data.X_train[:CHECK_BATCH], self.data.y_train[:CHECK_BATCH]
        comparison = mp.compare_engines(recipe, X, y, self._check_widths(), self.seed, self.lr)
        check = {"ok": comparison.matches, "comparison": comparison,
                 "text": f"One real {self.precision} step on chapter 04's kernels against the "
                         f"emulation: {comparison}" if comparison.matches else
                         f"WARNING: the {self.precision} kernel step differs from the "
                         f"emulation: {comparison}"}
        return {f"{self.precision} storage, emulated on this CPU": history}, check

    def run(self) -> dict:
        histories, step_check = (self._run_fp32() if self.precision == "fp32"
                                 else self._run_narrow())
        history = next(iter(histories.values()))
        epoch_estimate_s = cost.estimate_epoch_s(self.widths, self.batch_size,
                                                 self.data.n_train, self.gpu,
                                                 activation=self.activation,
                                                 optimiser=self.optimiser)
        step = cost.estimate_step(self.widths, self.batch_size, self.gpu,
                                  activation=self.activation, optimiser=self.optimiser)
        matmuls = {  # the products' own time, without their launches
            fmt: sum(max(e.compute_s, e.memory_s) for e in mp.estimate_step_matmuls(
                fmt, self.widths, self.batch_size, self.gpu)[1])
            for fmt in ("fp32", "bf16") if fmt in self.gpu.peak_flops}
        test_loss = history.column("test_loss")
        self.last_result = {
            "histories": histories, "history": history, "kernel_step": step_check,
            "precision": self.precision, "precision_label": precision_label(self.precision),
            "gpu_epoch_estimate_s": epoch_estimate_s, "gpu_step_launch_s": step.launch_s,
            "gpu_step_launches": step.launches, "gpu_step_matmul_s": matmuls,
            "gpu_label": step.label,
            "best_epoch": int(np.argmin(test_loss)) + 1, "tier": self.tier,
            "dataset": str(self.data), "model": repr(self.model),
        }
        return self.last_result

    def explain(self) -> str:
        r = self._result()
        h = r["history"]
        final = h.final
        gap = final.train_accuracy - final.test_accuracy
        epoch_s = [rec.seconds for rec in h.records[1:]] or [h.final.seconds]
        cpu_s = float(np.median(epoch_s))
        lines = [
            f"Precision: {r['precision_label']}.",
            f"After {len(h.records)} epoch{'s' if len(h.records) != 1 else ''}: "
            f"{100 * final.train_accuracy:.1f}% of the training "
            f"samples and {100 * final.test_accuracy:.1f}% of the held-out samples are right. "
            + (f"The {100 * gap:.1f}-point gap is what the model learned by heart rather than "
               "learned to generalise. " if gap > 0.005 else "")
            + f"The held-out loss was lowest after epoch {r['best_epoch']}.",
            f"An epoch takes {cpu_s * 1e3:.3g} ms here ({h.timing}); gpulab's fp32 kernels on "
            f"the {self.gpu.name} would need about {r['gpu_epoch_estimate_s'] * 1e3:.3g} ms "
            f"({r['gpu_label']}).",
        ]
        matmuls = r["gpu_step_matmul_s"]
        if "bf16" in matmuls:
            lines.append(
                f"Per step on the {self.gpu.name} ({r['gpu_label']}): the matrix products "
                f"themselves would take {hardware.format_seconds(matmuls['fp32'])} in fp32 and "
                f"{hardware.format_seconds(matmuls['bf16'])} in bf16 on tensor cores, against "
                f"{hardware.format_seconds(r['gpu_step_launch_s'])} for the step's "
                f"{r['gpu_step_launches']} launches: "
                + ("at this size the launches, not the number format, set the time."
                   if r["gpu_step_launch_s"] > matmuls["fp32"] else
                   "here the products outweigh the launches, and a narrower format helps."))
        main = next(iter(r["histories"]))
        for label, other in r["histories"].items():
            if label != main:
                other_s = float(np.median([rec.seconds for rec in other.records[1:]]
                                          or [other.final.seconds]))
                lines.append(f"{label}: {other_s * 1e3:.3g} ms per epoch ({other.timing}); "
                             f"held-out accuracy {100 * other.final.test_accuracy:.1f}%.")
        lines.append(r["kernel_step"]["text"])
        return "\n".join(lines)


class TrainingDashboard(Dashboard):
    """Settings, a Run button, the training curves and the explanation.

    Drive it from Python: ``d.lr_dropdown.value = 0.03; d.run_button.click()``;
    ``d.precision_toggle.value = "bf16"`` trains with bf16 storage (chapter 10's recipe).
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
        self.precision_toggle = widgets.ToggleButtons(
            options=list(PRECISIONS), value="fp32", description="storage",
            tooltips=["fp32 everywhere", "bf16 weights, activations and gradients (fp32 master "
                      "weights)", "fp16 weights, activations and gradients (fp32 master "
                      "weights, loss scaling)"])
        self.lr_dropdown = widgets.Dropdown(options=[1e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 1.0],
                                            value=DIGITS["lr"], description="learning rate",
                                            style=style)
        self.batch_dropdown = widgets.Dropdown(options=[8, 32, 128, 512],
                                               value=DIGITS["batch_size"],
                                               description="batch size", style=style)
        self.epochs_slider = widgets.IntSlider(value=DIGITS["epochs"], min=1, max=60,
                                               description="epochs")
        self._add_parts("Train")
        self._lay_out(widgets.HBox([self.dataset_toggle, self.optimiser_toggle]),
                      self.precision_toggle,
                      widgets.HBox([self.hidden_dropdown, self.activation_dropdown]),
                      widgets.HBox([self.lr_dropdown, self.batch_dropdown]),
                      widgets.HBox([self.epochs_slider, self.run_button]))

    def make_experiment(self) -> TrainingExperiment:
        return TrainingExperiment(
            dataset=self.dataset_toggle.value, hidden=self.hidden_dropdown.value,
            activation=self.activation_dropdown.value, optimiser=self.optimiser_toggle.value,
            lr=self.lr_dropdown.value, batch_size=self.batch_dropdown.value,
            epochs=self.epochs_slider.value, precision=self.precision_toggle.value)

    def make_figure(self, result: dict):
        return training_curves(result["histories"],
                               title=f"Training with {result['precision']} storage: solid = "
                                     "training samples, dashed = held-out samples")


__all__ = ["DATASETS", "PRECISIONS", "TrainingDashboard", "TrainingExperiment", "compare_runs",
           "decision_regions", "epoch_times", "gpu_ratios", "history_of_mixed",
           "precision_label", "ratios_table", "times_table", "training_curves", "versus"]
