"""The training loop: the quick answer "prepare data, move work to the GPU, compute in
parallel, compute errors and gradients, update, repeat", as code.

    for epoch in range(epochs):
        for batch in shuffled mini-batches of the training set:   # prepare data
            loss = model.loss(X[batch], y[batch])                  # move to the device, forward
            model.backward()                                       # errors and gradients
            optimiser.step(model)                                  # update
        evaluate on the held-out samples                           # repeat, and check

:class:`Trainer` adds what makes it usable: a seed for the shuffling, a progress bar, a
per-epoch :class:`History` (loss, accuracy, time, samples/s) whose timings say where they were
measured, evaluation on held-out data, and early, plain errors: inputs that do not fit the
model, labels out of range, and a loss that became NaN or infinite (the error names the epoch,
the step and the samples, and what usually causes it).
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from gpulab.nn.data import Dataset, minibatch_indices
from gpulab.nn.mlp import MLP, ShapeError
from gpulab.nn.optimisers import make_optimiser
from gpulab.tables import Column, Table


class TrainingError(RuntimeError):
    """Training cannot go on; the message says at which step and why."""


@dataclass
class EpochRecord:
    """One epoch. Losses are means over samples; ``seconds`` is the training time of the
    epoch (forward, backward, update, and the batch copies), evaluation excluded."""

    epoch: int
    train_loss: float
    train_accuracy: float
    seconds: float
    samples_per_s: float
    steps: int
    test_loss: float | None = None
    test_accuracy: float | None = None


@dataclass
class History:
    """Per-epoch records of a run, and where its times come from."""

    model: str
    optimiser: str
    batch_size: int
    seed: int
    backend: str
    timing: str  # e.g. "measured on this CPU (...)"
    records: list[EpochRecord] = field(default_factory=list)

    def column(self, name: str) -> list:
        """One field of every epoch, e.g. ``history.column("test_accuracy")``."""
        if name not in EpochRecord.__dataclass_fields__:
            raise KeyError(f"no column {name!r}; the columns are "
                           f"{', '.join(EpochRecord.__dataclass_fields__)}")
        return [getattr(record, name) for record in self.records]

    @property
    def final(self) -> EpochRecord:
        if not self.records:
            raise ValueError("the history is empty: no epoch has run")
        return self.records[-1]

    @property
    def total_seconds(self) -> float:
        return sum(record.seconds for record in self.records)

    def table(self) -> Table:
        """One row per epoch, with the timing's origin underneath."""
        return Table([Column("epoch"), Column("train loss", number_format="{:.4f}"),
                      Column("train acc", "%", "{:.2f}"),
                      Column("test loss", number_format="{:.4f}"),
                      Column("test acc", "%", "{:.2f}"), Column("time", "s", "{:.3f}"),
                      Column("throughput", "samples/s", "{:,.0f}")],
                     [[r.epoch, r.train_loss, 100 * r.train_accuracy, r.test_loss,
                       None if r.test_accuracy is None else 100 * r.test_accuracy, r.seconds,
                       r.samples_per_s] for r in self.records],
                     notes=[f"times: {self.timing}"])

    def to_dict(self) -> dict:
        return asdict(self)


class ProgressBar:
    """A one-line text progress bar per epoch, redrawn at most every ``interval_s`` seconds."""

    def __init__(self, epochs: int, steps: int, stream=None, width: int = 24,
                 interval_s: float = 0.25):
        self.epochs, self.steps, self.width = epochs, steps, width
        self.stream = stream or sys.stdout
        self.interval_s = interval_s
        self._last = 0.0

    def update(self, epoch: int, step: int, loss: float) -> None:
        now = time.perf_counter()
        if step < self.steps and now - self._last < self.interval_s:
            return
        self._last = now
        done = int(self.width * step / self.steps)
        bar = "#" * done + "." * (self.width - done)
        self.stream.write(f"\repoch {epoch}/{self.epochs} [{bar}] {step}/{self.steps} "
                          f"loss {loss:.4f}")
        self.stream.flush()

    def end_epoch(self, record: EpochRecord) -> None:
        text = (f"\repoch {record.epoch}/{self.epochs}: train loss {record.train_loss:.4f}, "
                f"accuracy {100 * record.train_accuracy:.1f}%")
        if record.test_accuracy is not None:
            text += (f"; held-out loss {record.test_loss:.4f}, "
                     f"accuracy {100 * record.test_accuracy:.1f}%")
        text += f"; {record.seconds:.3g} s, {record.samples_per_s:,.0f} samples/s"
        self.stream.write(text.ljust(self.width + 40) + "\n")
        self.stream.flush()


def timing_origin(backend) -> str:
    """How a History's times are labelled, per backend and tier."""
    if backend.name == "numpy":
        return f"measured on {backend.where()} with time.perf_counter (NumPy backend)"
    if backend.tier == "gpu":
        return (f"measured on {backend.where()} with time.perf_counter around the epoch "
                "(wall clock: includes Python's kernel launches and the batch copies)")
    return ("Numba's CUDA simulator on this CPU: simulator time is not GPU time (see "
            "gpulab.nn.cost for a roofline estimate on a named GPU)")


class Trainer:
    """Mini-batch training of an :class:`~gpulab.nn.mlp.MLP`.

    ``optimiser`` is "adam", "sgd" or an optimiser object; ``lr`` and other settings
    (``momentum``, ``weight_decay``, ...) go to it. ``seed`` fixes the shuffling; the model's
    own seed fixes its initial weights. ``progress``: True for a progress bar, False for
    silence.

    Memory (chapter 09), all off by default: ``accumulation_steps`` k splits each batch into k
    micro-batches whose gradients are summed, each weighted by its share of the samples, before
    one update (the same gradients as the whole batch, with the activations of one
    micro-batch); ``device_memory_bytes`` is a device memory budget: a step whose memory
    (:func:`gpulab.nn.memory.mlp_training_memory`) does not fit raises
    :class:`~gpulab.nn.memory.OutOfDeviceMemory` before it runs, showing the breakdown and the
    remedies.
    """

    def __init__(self, model: MLP, optimiser="adam", batch_size: int = 64, epochs: int = 10,
                 seed: int = 0, shuffle: bool = True, progress: bool = True,
                 eval_batch_size: int = 1024, accumulation_steps: int = 1,
                 device_memory_bytes: float | None = None, **optimiser_settings):
        if not isinstance(model, MLP):
            raise TypeError(f"model must be a gpulab.nn.MLP, not {type(model).__name__}")
        for what, value in (("batch_size", batch_size), ("epochs", epochs),
                            ("eval_batch_size", eval_batch_size),
                            ("accumulation_steps", accumulation_steps)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{what} must be a positive whole number, not {value!r}")
        self.model = model
        self.optimiser = make_optimiser(optimiser, **optimiser_settings)
        self.batch_size, self.epochs = int(batch_size), int(epochs)
        self.seed, self.shuffle, self.progress = seed, shuffle, progress
        self.eval_batch_size = int(eval_batch_size)
        self.accumulation_steps = int(accumulation_steps)
        if device_memory_bytes is not None and not float(device_memory_bytes) > 0:
            raise ValueError(f"device_memory_bytes must be a positive number of bytes or None, "
                             f"not {device_memory_bytes!r}")
        self.device_memory_bytes = device_memory_bytes
        self._predicted = None  # the classes predicted for the last batch, when accumulating
        self.rng = np.random.default_rng(seed)
        self.epochs_done = 0
        self.epochs_target = self.epochs
        self.history = History(repr(model), repr(self.optimiser), self.batch_size, seed,
                               model.backend.describe(), timing_origin(model.backend))

    # -- checks -----------------------------------------------------------------------------

    def _check_data(self, X, y, what: str) -> np.ndarray:
        X = np.asarray(X)
        try:
            self.model.check_inputs(X, what=f"X_{what}")
            labels = self.model.check_labels(y, X.shape[0])
        except ShapeError as error:
            raise ShapeError(f"{what} data: {error}") from None
        if not np.issubdtype(X.dtype, np.number):
            raise ShapeError(f"X_{what} must hold numbers, not {X.dtype}")
        finite = np.isfinite(X)
        if not finite.all():
            row = int(np.flatnonzero(~finite.all(axis=1))[0])
            raise ShapeError(f"X_{what} has a NaN or infinite value in sample {row}: fix or "
                             "drop that sample before training")
        return labels

    # -- one step, one epoch ----------------------------------------------------------------

    def step(self, X_batch, y_batch) -> float:
        """Forward, loss, backward, update on one batch; returns the batch's mean loss."""
        self.check_memory(len(y_batch))
        if self.accumulation_steps == 1:
            loss = self.model.loss(X_batch, y_batch)
            self.model.backward()
        else:
            loss = self.accumulate_gradients(X_batch, y_batch)
        self.optimiser.step(self.model)
        return loss

    def check_memory(self, batch_size: int) -> None:
        """Raise :class:`~gpulab.nn.memory.OutOfDeviceMemory` if a step on ``batch_size``
        samples does not fit ``device_memory_bytes`` (nothing to check without a budget)."""
        if self.device_memory_bytes is None:
            return
        from gpulab.nn.memory import check_budget, mlp_training_memory

        needed = mlp_training_memory(self.model, batch_size, self.optimiser,
                                     accumulation_steps=self.accumulation_steps)
        check_budget(needed, self.device_memory_bytes,
                     f"a training step of {batch_size} samples")

    def accumulate_gradients(self, X_batch, y_batch) -> float:
        """Forward and backward passes over ``accumulation_steps`` micro-batches of the batch;
        leaves in the model the gradients of the whole batch (the sum of the micro-batches'
        gradients, each weighted by its share of the samples, since each micro-batch's loss is
        a mean over its own samples) and returns the batch's mean loss. No update.

        On the NumPy backend the sums are done in place; on the kernel backend on the host (a
        copy each way per micro-batch: right, not fast)."""
        model, be = self.model, self.model.backend
        y_batch = np.asarray(y_batch)
        n = len(y_batch)
        parts = np.array_split(np.arange(n), min(self.accumulation_steps, n))
        total: dict[tuple[int, str], np.ndarray] = {}
        loss, predicted = 0.0, []
        for part in parts:
            share = len(part) / n
            loss += share * model.loss(X_batch[part], y_batch[part])
            predicted.append(np.argmax(be.to_host(model.loss_function.probs), axis=1))
            model.backward()
            for index, layer in enumerate(model.layers):
                for name in ("dW", "db"):
                    grad = getattr(layer, name)
                    grad = grad if be.name == "numpy" else be.to_host(grad)
                    if (index, name) in total:
                        total[index, name] += share * grad
                    else:
                        total[index, name] = share * grad
        for (index, name), grad in total.items():
            setattr(model.layers[index], name,
                    grad if be.name == "numpy" else be.asarray(grad, model.dtype))
        self._predicted = np.concatenate(predicted)
        return loss

    def _train_epoch(self, X: np.ndarray, y: np.ndarray, epoch: int) -> EpochRecord:
        model, backend = self.model, self.model.backend
        batches = minibatch_indices(len(y), self.batch_size,
                                    self.rng if self.shuffle else None)
        bar = ProgressBar(self.epochs_target, len(batches)) if self.progress else None
        loss_sum = correct = 0.0
        start = time.perf_counter()
        for step, batch in enumerate(batches, start=1):
            with np.errstate(over="ignore", invalid="ignore"):  # a non-finite loss is reported
                loss = self.step(X[batch], y[batch])
            if not math.isfinite(loss):
                before = (f"The mean loss before this step was "
                          f"{loss_sum / ((step - 1) * self.batch_size):.4g}." if step > 1
                          else "It was the very first step.")
                raise TrainingError(
                    f"epoch {epoch}, step {step} of {len(batches)} (a batch of {len(batch)} "
                    f"samples, the first being training sample {batch[0]}): the loss became "
                    f"{loss}. {before} This usually means the updates are too large: "
                    f"lower the learning rate ({self.optimiser!r}), or check the inputs' scale "
                    "(the digits are scaled to 0..1)."
                )
            loss_sum += loss * len(batch)
            if self.accumulation_steps > 1:
                predicted = self._predicted
            else:
                predicted = np.argmax(backend.to_host(model.loss_function.probs), axis=1)
            correct += float(np.sum(predicted == y[batch]))
            if bar:
                bar.update(epoch, step, loss)
        backend.synchronize()
        seconds = time.perf_counter() - start
        return EpochRecord(epoch, loss_sum / len(y), correct / len(y), seconds,
                           len(y) / seconds if seconds > 0 else math.inf, len(batches))

    def evaluate(self, X, y) -> tuple[float, float]:
        """(mean loss, accuracy) on X, y, in batches of ``eval_batch_size``; no updates."""
        labels = self._check_data(X, y, "eval")
        X = np.asarray(X)
        loss_sum = correct = 0.0
        for start in range(0, len(labels), self.eval_batch_size):
            part = slice(start, start + self.eval_batch_size)
            loss = self.model.loss(X[part], labels[part])
            loss_sum += loss * len(labels[part])
            probs = self.model.backend.to_host(self.model.loss_function.probs)
            correct += float(np.sum(np.argmax(probs, axis=1) == labels[part]))
        return loss_sum / len(labels), correct / len(labels)

    def fit(self, data: Dataset | tuple, test: tuple | None = None,
            epochs: int | None = None) -> History:
        """Train for ``epochs`` (default: the trainer's) more epochs on ``data`` (a
        :class:`~gpulab.nn.data.Dataset`, or ``(X, y)`` with ``test=(X_test, y_test)``),
        evaluating on the held-out samples after every epoch. Returns the history so far."""
        if isinstance(data, Dataset):
            X, y, test = data.X_train, data.y_train, (data.X_test, data.y_test)
        else:
            X, y = data
        y = self._check_data(X, y, "train")
        X = np.asarray(X)
        if test is not None:
            self._check_data(*test, "test")
        epochs = self.epochs if epochs is None else epochs
        self.epochs_target = self.epochs_done + epochs
        for _ in range(epochs):
            self.epochs_done += 1
            record = self._train_epoch(X, y, self.epochs_done)
            if test is not None:
                record.test_loss, record.test_accuracy = self.evaluate(*test)
            self.history.records.append(record)
            if self.progress:
                ProgressBar(self.epochs_target, 1).end_epoch(record)
        return self.history


def check_kernel_step(X, y, widths, activation: str = "relu", optimiser: str = "adam",
                      lr: float = 1e-2, dtype=np.float32, seed: int = 0) -> dict:
    """One real training step (forward, loss, backward, update) of the same fresh MLP on the
    kernel backend and on the NumPy backend; how far apart the two are afterwards.

    In the ``sim`` tier this is how a chapter shows that the kernels train correctly without
    timing them: keep X small (a batch of 8-16) and the widths narrow.
    """
    numpy_model = MLP(list(widths), activation, "numpy", dtype, seed)
    kernel_model = numpy_model.copy(backend="kernels")
    losses = {}
    for name, model in (("numpy", numpy_model), ("kernels", kernel_model)):
        losses[name] = Trainer(model, optimiser, lr=lr, progress=False).step(X, y)
    want, got = numpy_model.state(), kernel_model.state()
    difference = max(float(np.max(np.abs(got[k] - want[k]))) for k in want)
    scale = max(float(np.max(np.abs(want[k]))) for k in want)
    tolerance = _parameter_tolerance(dtype, scale)
    return {"loss_numpy": losses["numpy"], "loss_kernels": losses["kernels"],
            "max_parameter_difference": difference, "tolerance": tolerance,
            "ok": difference <= tolerance and math.isclose(losses["numpy"], losses["kernels"],
                                                            rel_tol=1e-5),
            "batch_size": len(y), "widths": list(widths),
            "kernels": kernel_model.backend.describe()}


def _parameter_tolerance(dtype, scale: float, reference: str = "numpy") -> float:
    """How far two runs' parameters may drift apart by rounding alone, as a share of the
    largest parameter (``scale``, at least 1): against NumPy (another matmul, another order of
    every sum), 1e-5 in float32; between two kernel backends (``reference="kernels"``), which
    differ only in the kernels swapped in, 1e-6. Over chapter 07's first two compared steps
    (64 -> 16 -> 10, batches of 16, training seeds 0-9, in the simulator), right kernels written
    differently (sums in another order or in float64, a two-pass softmax, torch's form of Adam)
    parted from gpulab's by at most 2.3e-7 of it; updates that are not Adam's (AMSGrad's
    running max of v, eps inside the square root) by 6e-6 or more, under 1e-5 on some seeds.
    In float64, 1e-12."""
    if np.dtype(dtype) != np.float32:
        return 1e-12 * max(scale, 1.0)
    return (1e-6 if reference == "kernels" else 1e-5) * max(scale, 1.0)


@dataclass
class SideBySide:
    """The same network trained for a few steps on two backends, on the same batches from the
    same initial weights, compared after every step (:func:`train_side_by_side`).

    ``losses``: each step's mean batch loss on ``backend``; ``reference_losses``: the same for
    the compared steps (the first :attr:`compared`, which may be fewer than :attr:`steps`: the
    model can train on alone after them); ``differences``: after each compared step, the
    largest |parameter - reference parameter| over the network, and ``worst`` the parameter
    (``"layer0.W"``, ...) where it is. ``model`` is the network trained on ``backend``,
    ``trainer`` its :class:`Trainer` (the optimiser's state included)."""

    backend: str
    reference: str
    widths: list[int]
    batch_size: int
    seed: int
    optimiser: str
    losses: list[float] = field(default_factory=list)
    reference_losses: list[float] = field(default_factory=list)
    differences: list[float] = field(default_factory=list)
    worst: list[str] = field(default_factory=list)
    tolerance: float = 0.0
    model: MLP | None = field(default=None, repr=False, compare=False)
    trainer: Trainer | None = field(default=None, repr=False, compare=False)

    @property
    def steps(self) -> int:
        """The steps the model trained."""
        return len(self.losses)

    @property
    def compared(self) -> int:
        """The first steps, compared with the reference after each."""
        return len(self.reference_losses)

    @property
    def reference_name(self) -> str:
        """The reference backend in a few words: "gpulab's CUDA kernels" or "NumPy"."""
        return self.reference.split(" in ")[0].split(" on ")[0]

    def step_matches(self, k: int) -> bool:
        """Step ``k`` (from 0): equal parameters and loss, to rounding."""
        return (self.differences[k] <= self.tolerance
                and math.isclose(self.losses[k], self.reference_losses[k], rel_tol=1e-5,
                                 abs_tol=1e-6))

    @property
    def first_mismatch(self) -> int | None:
        """The first step (counted from 1) after which the two runs differ, or None."""
        return next((k + 1 for k in range(self.compared) if not self.step_matches(k)), None)

    @property
    def matches(self) -> bool:
        """Every compared step (at least one) matched."""
        return self.compared > 0 and self.first_mismatch is None

    def table(self) -> str:
        """The compared steps, one row each, as text (chapter 07's report joins it into its
        lines)."""
        return str(Table(
            [Column("step"), Column("loss", number_format="{:.5f}"),
             Column("reference", number_format="{:.5f}"),
             Column("largest difference", number_format="{:.2e}"), Column("where"),
             Column("")],
            [[k + 1, self.losses[k], self.reference_losses[k], self.differences[k],
              self.worst[k], "" if self.step_matches(k) else "<- differs"]
             for k in range(self.compared)],
            notes=[f"reference: {self.reference_name}; rounding allows differences up to "
                   f"{self.tolerance:.1e}"]))


def train_side_by_side(backend, X, y, widths, reference="kernels", steps: int = 4,
                       batch_size: int = 8, activation: str = "relu",
                       optimiser: str = "adam", lr: float = 1e-2, dtype=np.float32,
                       seed: int = 0, compared_steps: int | None = None,
                       after_step=None) -> SideBySide:
    """Train the same fresh MLP (``widths``, weights from ``seed``) for ``steps`` steps on
    ``backend`` and on ``reference``, on the same shuffled mini-batches of (X, y), and compare
    their losses and every parameter after each step.

    ``compared_steps`` (default: all): only the first k steps run on the reference too and
    are compared; then the model trains on alone (in the ``sim`` tier that halves the cost of
    a longer run). ``after_step(record)``, if given, is called with the :class:`SideBySide` so
    far after every step; returning False stops the training there.

    This is how a chapter shows that kernels of your own train the network exactly as gpulab's
    do: ``train_side_by_side(KernelBackend(kernels={...}), X, y, [64, 16, 10])``. In the
    ``sim`` tier every step runs in the simulator: keep the batch small (8-16) and the widths
    narrow.
    """
    compared_steps = steps if compared_steps is None else min(int(compared_steps), steps)
    reference_model = MLP(list(widths), activation, reference, dtype, seed)
    model = reference_model.copy(backend=backend)
    y = reference_model.check_labels(y, np.asarray(X).shape[0])
    X = np.asarray(X)
    trainers = [Trainer(m, optimiser, batch_size=batch_size, seed=seed, progress=False, lr=lr)
                for m in (model, reference_model)]
    record = SideBySide(model.backend.describe(), reference_model.backend.describe(),
                        list(widths), int(batch_size), seed, repr(trainers[0].optimiser),
                        model=model, trainer=trainers[0])
    rng = np.random.default_rng(seed)
    batches: list[np.ndarray] = []
    while len(batches) < steps:
        batches += minibatch_indices(len(y), batch_size, rng)
    scale = 0.0
    for k, batch in enumerate(batches[:steps]):
        with np.errstate(over="ignore", invalid="ignore"):  # a diverging run is reported
            record.losses.append(trainers[0].step(X[batch], y[batch]))
        if k < compared_steps:
            record.reference_losses.append(trainers[1].step(X[batch], y[batch]))
            got, want = model.state(), reference_model.state()
            gaps = {name: float(np.max(np.abs(got[name].astype(np.float64) - want[name]),
                                       initial=0.0)) for name in want}
            gaps = {name: (np.inf if np.isnan(gap) else gap) for name, gap in gaps.items()}
            worst = max(gaps, key=gaps.get)
            record.differences.append(gaps[worst])
            record.worst.append(worst)
            scale = max(scale, *(float(np.max(np.abs(w))) for w in want.values()))
            record.tolerance = _parameter_tolerance(dtype, scale, reference)
        if after_step is not None and after_step(record) is False:
            break
    return record


__all__ = ["EpochRecord", "History", "ProgressBar", "SideBySide", "Trainer", "TrainingError",
           "check_kernel_step", "timing_origin", "train_side_by_side"]
