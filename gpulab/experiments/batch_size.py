"""Batch size: throughput against memory against convergence, chapter 08's experiment.

For each batch size the digits recipe (:mod:`gpulab.nn.recipes`) is trained from the same seed
for the same number of epochs, and three things are recorded:

- **samples per second** (of the fastest epoch after the first): measured on this CPU (NumPy
  backend); in the ``gpu`` tier also
  measured on the GPU (kernel backend, wall clock); for a named GPU, estimated by gpulab's GPU
  model of one training step (:mod:`gpulab.nn.cost`: every kernel, every launch, the batch's
  copies);
- **memory**: parameters, gradients, optimiser state, activations and workspace, counted
  (:func:`gpulab.nn.memory.mlp_training_memory`, the calculator chapter 09 checks);
- **convergence**: the held-out loss after every epoch. Same learning rate for every batch
  size, so a larger batch makes fewer (if better-averaged) updates per epoch.

:class:`BatchSizeExperiment` is the logic (no browser needed); :class:`BatchSizeDashboard` is
its ipywidgets view, with the heavy work behind a Run button.

With ``evaluate_kernel`` (chapter 08's exercise 3, or gpulab's
:func:`gpulab.kernels.evaluate.evaluate_batch`), the held-out loss and accuracy after every epoch
are computed by that kernel on one fixed grid, and the result says how far they are from the
trainer's own NumPy evaluation. :func:`evaluation_sweep` times one launch of such a kernel over
batch sizes, on the same grid, next to gpulab's GPU model of it on a named GPU.

Chapter 08's napkin math, as text: :func:`napkin_inputs` (what gpulab gives you to predict a
step's time), :func:`throughput_table` (the step model's samples/s, next to a prediction of
yours) and :func:`memory_table` (what a step keeps on the device, counted).
"""

from __future__ import annotations

import time

import matplotlib.pyplot as plt
import numpy as np

from gpulab import device, hardware, recorded_runs
from gpulab.experiments.dashboard import Dashboard
from gpulab.experiments.experiment import Experiment
from gpulab.nn import cost, memory
from gpulab.nn.data import load_digits
from gpulab.nn.memory import BATCH_SIZES, largest_batch_within
from gpulab.nn.recipes import DIGITS, digits_model, train_digits
from gpulab.nn.trainer import Trainer
from gpulab.plots import wrap_title
from gpulab.tables import Column, Table


def default_batch_sizes(tier: str | None = None) -> list[int]:
    """8 to 512 in both tiers: the CPU trains every one of them in about a second."""
    return [8, 32, 128, 512]


def default_epochs(tier: str | None = None) -> int:
    return 10


def batch_size_plot(result: dict):
    """Three panels against batch size: samples/s (CPU measured, GPU measured or estimated),
    memory (counted), and held-out loss after each epoch (convergence)."""
    fig, (speed, memory, convergence) = plt.subplots(1, 3, figsize=(15, 4.5),
                                                     layout="constrained")
    batches = result["batch_sizes"]
    for label, values in result["samples_per_s"].items():
        hollow = "estimated" in label
        speed.plot(batches, values, "o-" if not hollow else "o--", mfc="white" if hollow else None,
                   label=wrap_title(label, 48))
    speed.set_xscale("log", base=2)
    speed.set_yscale("log")
    speed.set_xlabel("batch size")
    speed.set_ylabel("training samples per second")
    speed.set_title("throughput", fontsize=10)
    speed.legend(fontsize=7)
    speed.grid(True, which="major", alpha=0.3)
    parts = result["memory"]
    bottom = np.zeros(len(batches))
    for kind in MEMORY_COLUMNS:
        values = np.array([m[kind] for m in parts]) / 1e6
        memory.bar(range(len(batches)), values, bottom=bottom, label=kind)
        bottom += values
    memory.set_xticks(range(len(batches)), [str(b) for b in batches])
    memory.set_xlabel("batch size")
    memory.set_ylabel("MB (counted by gpulab.nn.memory)")
    memory.set_title(wrap_title(f"memory of a training step, {result['model']}", 50), fontsize=10)
    memory.legend(fontsize=8)
    for batch, history in zip(batches, result["histories"], strict=True):
        convergence.plot(history.column("epoch"), history.column("test_loss"), "o-", ms=3,
                         label=f"batch {batch}")
    convergence.set_yscale("log")
    convergence.set_xlabel("epoch")
    convergence.set_ylabel("held-out loss (log scale)" + (
        f", by {result['evaluated_by']}" if result.get("evaluated_by") else ""))
    convergence.set_title("convergence per epoch (same learning rate)", fontsize=10)
    convergence.legend(fontsize=8)
    convergence.grid(True, alpha=0.3)
    return fig



def napkin_inputs(widths, gpu=hardware.COURSE_GPU) -> str:
    """What gpulab gives you to predict a training step's time, for an MLP with ``widths`` on
    ``gpu``. Reads :data:`gpulab.hardware.LAUNCH_OVERHEAD_SOURCE` and ``LAUNCH_OVERHEAD_S`` (a
    model constant, with its source), :func:`gpulab.nn.cost.step_kernels` and
    :func:`~gpulab.nn.cost.step_transfer_bytes` at a batch of 1 (counted), and the GPU's
    datasheet figures from :mod:`gpulab.hardware`. Returns text that names each call or
    attribute next to its value."""
    spec = hardware.get_gpu(gpu)
    widths = list(widths)
    kernels = cost.step_kernels(widths, 1)
    return "\n".join([
        hardware.LAUNCH_OVERHEAD_SOURCE, "",
        f"cost.step_kernels({widths}, 1): {len(kernels)} kernels, "
        f"{sum(k.flops for k in kernels):,.0f} FLOPs and "
        f"{sum(k.bytes_moved for k in kernels):,.0f} bytes of device memory traffic in all "
        "(each kernel has .flops and .bytes_moved)",
        f"cost.step_transfer_bytes({widths}, 1): {cost.step_transfer_bytes(widths, 1):,} bytes "
        "copied between host and GPU per step",
        f"hardware.LAUNCH_OVERHEAD_S = {hardware.LAUNCH_OVERHEAD_S} s per launch",
        f"{spec.name}: peak_flops_for('fp32') = {spec.peak_flops_for('fp32'):.3g} FLOP/s, "
        f"memory_bandwidth_bytes_per_s = {spec.memory_bandwidth_bytes_per_s:.3g}, "
        f"host_pageable_bytes_per_s = {spec.host_pageable_bytes_per_s:.3g} (a NumPy batch; the "
        f"{spec.host_link} link's peak, host_link_bytes_per_s, is "
        f"{spec.host_link_bytes_per_s:.3g})",
        "GPUs in gpulab.hardware.GPUS: " + ", ".join(hardware.GPUS),
    ])


THROUGHPUT_GPUS = (hardware.COURSE_GPU, "T4")
THROUGHPUT_BATCHES = (8, 256, 8192, 262144)


def throughput_table(widths, predict=None, gpus=THROUGHPUT_GPUS,
                     batches=THROUGHPUT_BATCHES) -> Table:
    """Samples per second of one training step, estimated by the step model
    (:func:`gpulab.nn.cost.estimate_step`, gpulab's GPU model) for each GPU and batch, next
    to ``predict(widths, batch, gpu)`` (your napkin, exercise 2) and its ratio to the model;
    "-" where ``predict`` is None or raises NotImplementedError. Then, per GPU, where the model
    levels off: 1 / (the time one more sample adds, from
    :func:`gpulab.nn.cost.per_sample_seconds`), and which part of it is largest."""
    from gpulab.nn.cost import per_sample_seconds

    widths = list(widths)
    rows = []
    for gpu in gpus:
        for batch in batches:
            model = cost.estimate_step(widths, batch, gpu).samples_per_s
            yours, ratio = "-", "-"
            if predict is not None:
                try:
                    yours = predict(widths, batch, gpu)
                    ratio = yours / model
                except NotImplementedError:
                    pass
            rows.append([gpu, batch, model, yours, ratio])
    notes = []
    for gpu in gpus:
        parts = per_sample_seconds(widths, gpu)
        per_sample = max(parts["compute"], parts["memory"]) + parts["transfer"]
        largest = max(("compute", "memory", "transfer"), key=parts.get)
        notes.append(f"{gpu}: levels off near {1 / per_sample:,.0f} samples/s (the model); one "
                     f"more sample adds {1e9 * per_sample:.1f} ns, most of it {largest}")
    return Table([Column("GPU", align="right"), Column("batch", number_format="{:,}"),
                  Column("model", "samples/s", "{:,.0f}"), Column("yours", "samples/s", "{:,.0f}"),
                  Column("ratio", "yours / model", "{:.2f}")], rows, notes=notes)


MEMORY_BATCHES = (8, 32, 64, 512, 4096)
MEMORY_COLUMNS = ("parameters", "gradients", "optimiser state", "activations", "workspace")


def memory_table(widths, batches=MEMORY_BATCHES, gpu=hardware.COURSE_GPU,
                 optimiser: str = "adam") -> Table:
    """What one training step needs, per batch size, counted by
    :func:`gpulab.nn.memory.mlp_training_memory` (the calculator chapter 09 checks against a
    real step, and the trainer's budget): parameters, gradients, optimiser state, activations
    (kept between the passes), workspace (the temporaries of the backward pass and the update,
    NumPy backend) and the total, in kB; then the largest batch's total as a share of ``gpu``'s
    nominal memory (the datasheet's figure, :mod:`gpulab.hardware`)."""
    spec = hardware.get_gpu(gpu)
    widths = list(widths)
    rows = []
    for batch in batches:
        m = memory.mlp_training_memory(widths, batch, optimiser)
        parts = m.as_dict()
        rows.append([batch, *(v / 1e3 for v in (*(parts[k] for k in MEMORY_COLUMNS), m.total))])
    m = memory.mlp_training_memory(widths, max(batches), optimiser)
    return Table([Column("batch"), *(Column(kind, "kB", "{:,.1f}")
                                     for kind in (*MEMORY_COLUMNS, "total"))], rows,
                 notes=[f"batch {max(batches):,}: {m.total / 1e6:.2f} MB (counted by "
                        f"gpulab.nn.memory), {100 * m.total / spec.memory_bytes:.3f} % of the "
                        f"{spec.name}'s nominal {spec.memory_bytes / 1e9:.0f} GB"])


class BatchSizeExperiment(Experiment):
    """Train the digits recipe once per batch size; collect samples/s, memory and losses.

    >>> result = BatchSizeExperiment(batch_sizes=[16, 256], epochs=3).run()  # doctest: +SKIP
    """

    def __init__(self, batch_sizes=None, epochs: int | None = None, gpu: str = hardware.COURSE_GPU,
                 lr: float = DIGITS["lr"], seed: int = 0, evaluate_kernel=None,
                 evaluated_by: str | None = None):
        sizes = sorted({int(b) for b in (batch_sizes or default_batch_sizes())})
        if not sizes or sizes[0] < 1:
            raise ValueError(f"batch_sizes must be positive whole numbers, not {batch_sizes!r}")
        self.batch_sizes = sizes
        self.epochs = int(epochs or default_epochs())
        if self.epochs < 1:
            raise ValueError(f"epochs must be at least 1, not {epochs!r}")
        self.gpu = hardware.get_gpu(gpu)
        self.lr, self.seed = float(lr), seed
        self.tier = device.tier()
        self.widths = list(DIGITS["widths"])
        self.evaluate_kernel = evaluate_kernel
        self.evaluated_by = evaluated_by or ("the kernel given" if evaluate_kernel else None)

    def _train(self, data, batch: int):
        """(history, largest difference between the kernel's held-out loss and NumPy's): the
        recipe trained at this batch, evaluated after every epoch by ``evaluate_kernel`` when
        there is one (else by the trainer, and the difference is None)."""
        if self.evaluate_kernel is None:
            _, history = train_digits("numpy", data=data, batch_size=batch, epochs=self.epochs,
                                      lr=self.lr, seed=self.seed)
            return history, None
        trainer = KernelEvaluatedTrainer(
            self.evaluate_kernel, digits_model("numpy", seed=self.seed), DIGITS["optimiser"],
            batch_size=batch, epochs=self.epochs, seed=self.seed, progress=False, lr=self.lr)
        return trainer.fit(data), trainer.largest_difference

    def run(self) -> dict:
        data = load_digits(seed=0)
        cpu_label = "NumPy on this CPU — measured"
        histories, cpu, gpu_measured, estimated, needed, updates = [], [], [], [], [], []
        differences = []
        run = recorded_runs.latest_gpu_run()  # its measured launch overhead, when one ships
        measured_launch_s = run.launch_overhead_s if run is not None else None
        gpu_label = None
        for batch in self.batch_sizes:
            history, difference = self._train(data, batch)
            differences.append(difference)
            histories.append(history)
            cpu_label = (f"NumPy backend — {history.timing.split(' with ')[0]} (fastest "
                         "epoch)")
            cpu.append(_steady_samples_per_s(history))
            if self.tier == "gpu":
                _, on_gpu = train_digits("kernels", data=data, batch_size=batch,
                                         epochs=min(self.epochs, 2), lr=self.lr, seed=self.seed)
                gpu_measured.append(_steady_samples_per_s(on_gpu))
                gpu_label = (f"gpulab kernels — {on_gpu.timing.split(' with ')[0]} (wall clock, "
                             "fastest epoch)")
            epoch_s = cost.estimate_epoch_s(self.widths, batch, data.n_train, self.gpu,
                                            launch_overhead_s=measured_launch_s)
            estimated.append(data.n_train / epoch_s)
            needed.append(memory.mlp_training_memory(self.widths, batch, "adam").as_dict())
            updates.append(-(-data.n_train // batch))
        samples = {cpu_label: cpu}
        if gpu_label:
            samples[gpu_label] = gpu_measured
        estimate_label = (f"gpulab kernels — estimated by gpulab's GPU model of the "
                          f"{self.gpu.name}"
                          + (f" (launch overhead measured on {run.device})" if measured_launch_s
                             else ""))
        samples[estimate_label] = estimated
        self.last_result = {
            "batch_sizes": self.batch_sizes, "epochs": self.epochs, "samples_per_s": samples,
            "cpu_label": cpu_label, "estimate_label": estimate_label, "memory": needed,
            "histories": histories, "updates_per_epoch": updates,
            "final_test_loss": [h.final.test_loss for h in histories],
            "final_test_accuracy": [h.final.test_accuracy for h in histories],
            "model": f"MLP {'-'.join(map(str, self.widths))}, Adam, float32",
            "gpu": self.gpu.name, "tier": self.tier, "lr": self.lr,
            "step_bound": [cost.estimate_step(self.widths, b, self.gpu).bound()
                           for b in self.batch_sizes],
            "recorded": recorded_comparison(),
            "evaluated_by": self.evaluated_by, "n_test": len(data.y_test),
            "evaluation_difference": (max(differences) if self.evaluate_kernel is not None
                                      else None),
        }
        return self.last_result

    def best_batch(self, by: str = "final_test_loss") -> int:
        """The batch size with the lowest held-out loss (or the highest samples/s on the CPU,
        ``by="cpu_samples_per_s"``) after the experiment's epochs."""
        result = self._result()
        if by == "final_test_loss":
            return result["batch_sizes"][int(np.argmin(result["final_test_loss"]))]
        if by == "cpu_samples_per_s":
            values = result["samples_per_s"][result["cpu_label"]]
            return result["batch_sizes"][int(np.argmax(values))]
        raise ValueError(f"by must be 'final_test_loss' or 'cpu_samples_per_s', not {by!r}")

    def explain(self) -> str:
        r = self._result()
        small, large = r["batch_sizes"][0], r["batch_sizes"][-1]
        cpu = r["samples_per_s"][r["cpu_label"]]
        est = r["samples_per_s"][r["estimate_label"]]
        mem = [sum(m.values()) for m in r["memory"]]
        acts = [m["activations"] for m in r["memory"]]
        lines = [
            f"Throughput: on this CPU (measured) {cpu[0]:,.0f} samples/s at batch {small} and "
            f"{cpu[-1]:,.0f} at batch {large}. The {r['gpu']} model gives {est[0]:,.0f} and "
            f"{est[-1]:,.0f} samples/s: at batch {small} a step is {r['step_bound'][0]}-bound "
            f"(its {len(cost.step_kernels(self.widths, small))} launches cost the same whatever "
            "the batch), so throughput grows almost in proportion to the batch until the "
            "kernels themselves take longer than their launches.",
            f"Memory (counted): {mem[0] / 1e6:.2f} MB at batch {small}, {mem[-1] / 1e6:.2f} MB "
            f"at batch {large}. Parameters, gradients and Adam's state do not depend on the "
            f"batch; the activations kept for the backward pass grow with it "
            f"({acts[0] / 1e3:,.0f} kB to {acts[-1] / 1e3:,.0f} kB), and so does the backward "
            "pass's workspace. For this small MLP all are tiny next to a GPU's "
            "memory; chapter 09 does it for models where they are not.",
            f"Convergence: after {r['epochs']} epochs at learning rate {r['lr']:g}, the held-out "
            f"loss is {r['final_test_loss'][0]:.3f} at batch {small} ({r['updates_per_epoch'][0]}"
            f" updates per epoch) and {r['final_test_loss'][-1]:.3f} at batch {large} "
            f"({r['updates_per_epoch'][-1]} updates per epoch). Per epoch, small batches learn "
            "more (more updates); per second on a GPU, large batches get through more samples. "
            f"Lowest held-out loss here: batch {self.best_batch()}.",
        ]
        if r.get("evaluated_by"):
            from gpulab.kernels.evaluate import evaluation_grid

            blocks, threads = evaluation_grid()
            lines.append(
                f"Held-out loss and accuracy after every epoch: computed by {r['evaluated_by']} "
                f"for the {r['n_test']} held-out digits in one launch of {blocks} blocks of "
                f"{threads} threads (a fixed grid, whatever the batch); the largest difference "
                f"from the trainer's NumPy evaluation of the same epochs: "
                f"{r['evaluation_difference']:.1e}"
                + (" (float32 rounding)." if r["evaluation_difference"] < 1e-4 else
                   ": more than float32 rounding, so the kernel's results differ."))
        if r.get("recorded"):
            lines.append(str(r["recorded"]))
        return "\n".join(lines)


def recorded_comparison(run=None):
    """The recorded run's training epochs (kernel backend, several batch sizes) against the
    step model of the same GPU (:mod:`gpulab.nn.cost`, an estimate), or None when no run
    ships."""
    def rows_of(run, recorded):
        for batch, data in sorted(recorded.items(), key=lambda item: int(item[0])):
            measured = run.measurement(data)
            predicted = cost.estimate_epoch_s(list(DIGITS["widths"]), int(batch), measured.n,
                                              run.gpu_key)
            yield (f"one epoch of {measured.n:,} digits, batch {int(batch)}", predicted,
                   measured.median_s)

    return recorded_runs.series_comparison(
        "training epoch",
        "Training epochs measured on a real GPU (gpulab kernels), against the step model",
        rows_of, run)


def _steady_samples_per_s(history) -> float:
    """Samples/s of the fastest epoch after the first (the first warms up: allocations,
    compilation). The fastest, not the median: on a shared machine other processes only ever
    slow an epoch down, so the fastest is the closest to what the training itself costs."""
    values = history.column("samples_per_s")
    return float(max(values[1:] if len(values) > 1 else values))


class KernelEvaluatedTrainer(Trainer):
    """The trainer, with the held-out evaluation after every epoch done by an evaluation kernel
    (``kernel(logits, labels, losses, correct)``, chapter 08's exercise 3) on one fixed grid:
    the model's logits go to the device, the kernel writes each sample's loss and 0/1, and their
    means are the epoch's held-out loss and accuracy. The trainer's own NumPy evaluation runs
    too, for ``largest_difference`` (the largest gap between the two losses so far)."""

    def __init__(self, kernel, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.kernel = kernel
        self.largest_difference = 0.0

    def evaluate(self, X, y) -> tuple[float, float]:
        from gpulab.kernels.evaluate import mean_loss_and_accuracy

        numpy_loss, _ = super().evaluate(X, y)
        logits = self.model.backend.to_host(self.model.forward(X))
        loss, accuracy = mean_loss_and_accuracy(np.ascontiguousarray(logits), y, self.kernel)
        self.largest_difference = max(self.largest_difference, abs(loss - numpy_loss))
        return loss, accuracy


EVALUATION_BATCHES = (8, 64, 512, 4096, 32768)
MODEL_ONLY_BATCHES = (1 << 20, 1 << 23)  # estimated only: too many samples for the simulator


def evaluation_sweep(kernel=None, batches=EVALUATION_BATCHES, gpu=hardware.COURSE_GPU,
                     classes: int = 10, repeats: int = 3, seed: int = 0,
                     model_only=MODEL_ONLY_BATCHES) -> dict:
    """One launch of an evaluation kernel (``kernel(logits, labels, losses, correct)``; default
    gpulab's :func:`~gpulab.kernels.evaluate.evaluate_batch`) at each batch size, always on the
    same grid (:func:`~gpulab.kernels.evaluate.evaluation_grid`): random logits of ``classes``
    classes, already on the device, the launch timed with the host's clock to the end of
    ``cuda.synchronize()``, the fastest of ``repeats`` (one above 4,096 samples in the
    simulator). In the simulator that is Numba's simulator on this CPU, not GPU time; on a GPU
    it is measured there. Beside it, gpulab's GPU model (:func:`gpulab.hardware.estimate_time`)
    of the same launch on ``gpu``, with that GPU's evaluation grid (4 blocks of 256 threads per
    SM): its FLOPs, bytes and blocks, the host's issue cost included. Every batch's results are
    checked against NumPy. ``model_only`` batches are estimated, not run. Returns a dict for
    :func:`evaluation_sweep_table`."""
    from numba import cuda

    from gpulab import reference
    from gpulab.kernels import evaluate

    kernel = kernel or evaluate.evaluate_batch
    spec = hardware.get_gpu(gpu)
    blocks, threads = evaluate.evaluation_grid()
    model_blocks = 4 * (spec.sm_count or 1)
    rng = np.random.default_rng(seed)
    measured, modelled, bounds, kinds, largest_difference = [], [], [], set(), 0.0

    def estimated(batch: int):
        return hardware.estimate_time(
            spec, evaluate.EVALUATE_FLOPS_PER_CLASS * classes * batch,
            evaluate.evaluate_bytes(batch, classes), blocks=model_blocks, threads_per_block=256)

    for batch in batches:
        logits = rng.normal(0.0, 3.0, (batch, classes)).astype(np.float32)
        labels = rng.integers(0, classes, batch)
        d_logits, d_labels = cuda.to_device(logits), cuda.to_device(labels)
        d_losses = cuda.device_array(batch, np.float32)
        d_correct = cuda.device_array(batch, np.int32)
        times = []
        for _ in range(repeats if device.tier() == "gpu" or batch <= 4096 else 1):
            start = time.perf_counter()
            kernel[blocks, threads](d_logits, d_labels, d_losses, d_correct)
            cuda.synchronize()
            times.append(time.perf_counter() - start)
        _, want = reference.softmax_cross_entropy(logits.astype(np.float64), labels)
        largest_difference = max(largest_difference,
                                 float(np.max(np.abs(d_losses.copy_to_host() - want))))
        if not np.array_equal(d_correct.copy_to_host(),
                              (np.argmax(logits, axis=1) == labels).astype(np.int32)):
            raise AssertionError(f"the kernel's correct is wrong at batch {batch}")
        measured.append(min(times))
    for batch in [*batches, *model_only]:
        estimate = estimated(batch)
        modelled.append(estimate.time_s)
        bounds.append(estimate.bound)
        kinds.add(estimate.kind)
    where = ("Numba's CUDA simulator on this CPU (measured; not GPU time)"
             if device.tier() != "gpu" else f"{device.PROBE.device_name} (measured, wall clock)")
    return {"batches": [*batches, *model_only], "measured_s": measured, "modelled_s": modelled,
            "measured_label": where, "grid": (blocks, threads), "gpu": spec.name,
            "model_grid": (model_blocks, 256), "classes": classes,
            "largest_difference": largest_difference, "bounds": bounds,
            "model_label": f"gpulab's GPU model of the {spec.name}, an estimate (its measured "
                           "error: " + ", ".join(f"{hardware.band_text(kind)} {kind}"
                                                 for kind in sorted(kinds)) + ")"}


def evaluation_sweep_table(sweep: dict) -> Table:
    """The sweep as a table: per batch, the launch's time and samples per second, measured here
    and estimated for the named GPU, and how many samples each thread of the grid handles."""
    blocks, threads = sweep["grid"]
    model_blocks, model_threads = sweep["model_grid"]
    grid, model_grid = blocks * threads, model_blocks * model_threads
    measured = list(sweep["measured_s"]) + [None] * (len(sweep["batches"])
                                                     - len(sweep["measured_s"]))
    rows = []
    for batch, here, model, bound in zip(sweep["batches"], measured, sweep["modelled_s"],
                                         sweep["bounds"], strict=True):
        ran = here is not None
        rows.append([batch, -(-batch // grid) if ran else "-", -(-batch // model_grid),
                     here * 1e3 if ran else "-", batch / here if ran else "-", model * 1e6,
                     batch / model, bound])
    return Table(
        [Column("batch", number_format="{:,}"),
         Column("each thread: here", "samples", "{:,}"),
         Column("each thread: GPU", "samples", "{:,}"), Column("here", "ms", "{:.2f}"),
         Column("here", "samples/s", "{:,.0f}"), Column("model", "µs", "{:.1f}"),
         Column("model", "samples/s", "{:,.0f}"), Column("bound", align="right")], rows,
        title=f"one launch, the same grid at every batch: here {blocks} x {threads} = {grid} "
              f"threads; on the {sweep['gpu']} {model_blocks} x {model_threads} = "
              f"{model_grid:,} (samples per thread: the most any thread takes)",
        notes=[f"here: {sweep['measured_label']}, every batch's losses within "
               f"{sweep['largest_difference']:.1e} of NumPy's ('-': not run here, too many "
               f"samples for the simulator); model: {sweep['model_label']}"])


class BatchSizeDashboard(Dashboard):
    """Controls for :class:`BatchSizeExperiment`, a Run button, the figure and the explanation.

    Drive it from Python: ``d.batch_select.value = (16, 256); d.run_button.click()``.
    """

    WHERE_GPU = (
        "Training runs on this CPU and on this machine's {gpu} (both measured); the GPU model "
        "chosen is added as a roofline estimate."
    )
    WHERE_SIM = (
        "No GPU here (simulator tier): training runs on this CPU (measured); GPU throughput is "
        "a roofline estimate for the model chosen."
    )

    running_text = "training…"
    experiment: BatchSizeExperiment | None

    def __init__(self):
        import ipywidgets as widgets

        self.tier = device.tier()
        self.batch_select = widgets.SelectMultiple(
            options=list(BATCH_SIZES), value=tuple(default_batch_sizes(self.tier)),
            description="batch sizes", rows=len(BATCH_SIZES),
            style={"description_width": "initial"})
        self.epochs_slider = widgets.IntSlider(value=default_epochs(self.tier), min=1, max=30,
                                               description="epochs")
        self.lr_dropdown = widgets.Dropdown(options=[1e-3, 3e-3, 1e-2, 3e-2],
                                            value=DIGITS["lr"], description="learning rate",
                                            style={"description_width": "initial"})
        self.gpu_dropdown = self._gpu_dropdown()
        self._add_parts()
        self._lay_out(widgets.HBox([self.batch_select,
                                    widgets.VBox([self.epochs_slider, self.lr_dropdown,
                                                  self.gpu_dropdown, self.run_button])]))

    def make_experiment(self) -> BatchSizeExperiment:
        return BatchSizeExperiment(
            batch_sizes=list(self.batch_select.value), epochs=self.epochs_slider.value,
            gpu=self.gpu_dropdown.value, lr=self.lr_dropdown.value)

    def make_figure(self, result: dict):
        return batch_size_plot(result)


__all__ = ["BATCH_SIZES", "EVALUATION_BATCHES", "BatchSizeDashboard", "BatchSizeExperiment",
           "KernelEvaluatedTrainer", "default_batch_sizes", "evaluation_sweep",
           "evaluation_sweep_table", "largest_batch_within", "memory_table", "napkin_inputs",
           "throughput_table"]
