"""Figures for chapters 05-08. Each function draws on new axes and returns the Figure (no
``plt.show()``); every time axis or legend says where its numbers came from.

- :func:`fusion_plot` — bytes moved and time, fused vs unfused (chapter 05).
- :func:`eps_plot` — a gradient check's error against eps, float64 and float32 (chapter 06).
- :func:`training_curves` — loss and accuracy per epoch, training vs held-out (chapter 07).
- :func:`decision_regions` — what a 2-feature classifier predicts everywhere (chapter 07).
- :func:`batch_size_plot` — samples/s, memory and convergence against batch size (chapter 08).
"""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np


def _wrap(text: str, width: int = 60) -> str:
    return "\n".join(textwrap.wrap(text, width, break_on_hyphens=False))


def fusion_plot(result: dict):
    """Left: bytes moved per variant (counted). Right: time per variant and processor, one bar
    group per origin (measured / estimated), labelled."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
    variants = ["unfused", "fused"]
    megabytes = [result["bytes"][v] / 1e6 for v in variants]
    left.bar(variants, megabytes, color=["#e69f00", "#0072b2"])
    for x, value in enumerate(megabytes):
        left.text(x, value, f"{value:,.1f} MB", ha="center", va="bottom", fontsize=9)
    M, N = result["shape"]
    left.set_title(f"device-memory traffic, {M:,} x {N:,} {result['dtype']} (counted)",
                   fontsize=10)
    left.set_ylabel("MB moved")
    groups: dict[tuple[str, str], dict] = {}
    for row in result["rows"]:
        groups.setdefault((row["what"], row["label"]), {})[row["variant"]] = row["seconds"]
    width = 0.38
    names = []
    for k, ((what, label), times) in enumerate(groups.items()):
        for j, variant in enumerate(variants):
            if variant in times:
                right.bar(k + (j - 0.5) * width, times[variant] * 1e3, width,
                          color="#e69f00" if variant == "unfused" else "#0072b2",
                          label=variant if k == 0 else None)
        names.append(_wrap(f"{what}: {label}", 34))
    right.set_xticks(range(len(names)), names, fontsize=7.5)
    right.set_yscale("log")
    right.set_ylabel("time (ms, log scale)")
    right.set_title(f"bias + {result['activation']}: time per call", fontsize=10)
    right.legend(fontsize=8)
    return fig


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


def batch_size_plot(result: dict):
    """Three panels against batch size: samples/s (CPU measured, GPU measured or estimated),
    memory (counted), and held-out loss after each epoch (convergence)."""
    fig, (speed, memory, convergence) = plt.subplots(1, 3, figsize=(15, 4.5),
                                                     layout="constrained")
    batches = result["batch_sizes"]
    for label, values in result["samples_per_s"].items():
        hollow = "estimated" in label
        speed.plot(batches, values, "o-" if not hollow else "o--", mfc="white" if hollow else None,
                   label=_wrap(label, 48))
    speed.set_xscale("log", base=2)
    speed.set_yscale("log")
    speed.set_xlabel("batch size")
    speed.set_ylabel("training samples per second")
    speed.set_title("throughput", fontsize=10)
    speed.legend(fontsize=7)
    speed.grid(True, which="major", alpha=0.3)
    parts = result["memory"]
    bottom = np.zeros(len(batches))
    for kind in ("weights", "gradients", "optimiser state", "activations"):
        values = np.array([m[kind] for m in parts]) / 1e6
        memory.bar(range(len(batches)), values, bottom=bottom, label=kind)
        bottom += values
    memory.set_xticks(range(len(batches)), [str(b) for b in batches])
    memory.set_xlabel("batch size")
    memory.set_ylabel("MB on the device (counted)")
    memory.set_title(_wrap(f"memory of a training step, {result['model']}", 50), fontsize=10)
    memory.legend(fontsize=8)
    for batch, history in zip(batches, result["histories"], strict=True):
        convergence.plot(history.column("epoch"), history.column("test_loss"), "o-", ms=3,
                         label=f"batch {batch}")
    convergence.set_yscale("log")
    convergence.set_xlabel("epoch")
    convergence.set_ylabel("held-out loss (log scale)")
    convergence.set_title("convergence per epoch (same learning rate)", fontsize=10)
    convergence.legend(fontsize=8)
    convergence.grid(True, alpha=0.3)
    return fig


__all__ = ["batch_size_plot", "decision_regions", "eps_plot", "fusion_plot",
           "training_curves"]
