"""The memory budget, chapter 09's experiment: where the bytes of a training step go, measured
on the course's MLP, and which real models fit which real GPUs.

- :func:`measure_mlp_step` trains one step of an MLP on the NumPy backend with
  :mod:`tracemalloc` watching (NumPy reports every array it allocates to it) and compares the
  bytes still allocated after the step, and the peak during the next one, with the
  calculator's prediction (:func:`gpulab.nn.memory.mlp_training_memory`). Measured on this
  CPU: in the simulator, "device memory" is this process's memory.
- :func:`compare_checkpointing` runs the same forward and backward passes with and without
  activation checkpointing: activations kept, peak memory, time and FLOPs, all measured or
  counted.
- :func:`compare_accumulation` computes one batch's gradients whole and as k micro-batches:
  the largest difference, and the activation memory of each.
- :func:`run_out_of_memory` trains under a device budget that a step does not fit, catches the
  named error (:class:`gpulab.nn.memory.OutOfDeviceMemory`) and tries the remedies, each run.
- :func:`measure_on_gpu` and :func:`cuda_out_of_memory` do it for real on a GPU: device memory
  reported by the driver (``numba.cuda.current_context().get_memory_info()``) and a real
  CUDA out-of-memory error, caught and explained. In the ``sim`` tier they say they need a GPU.

:class:`ModelFitExperiment` is the fit table of real model sizes against real GPUs (no browser
needed); :class:`MemoryBudgetDashboard` is its ipywidgets view.
"""

from __future__ import annotations

import contextlib
import math
import time
import tracemalloc

import matplotlib.pyplot as plt
import numpy as np

from gpulab import device
from gpulab.experiments.dashboard import Dashboard
from gpulab.experiments.experiment import Experiment
from gpulab.nn import cost, memory
from gpulab.nn.memory import OutOfDeviceMemory, format_bytes
from gpulab.nn.mlp import MLP
from gpulab.nn.trainer import Trainer
from gpulab.plots import wrap_title

CPU_LABEL = "measured on this CPU with tracemalloc (NumPy backend)"


def _batch(widths, batch_size: int, seed: int = 0, rows: int | None = None):
    rng = np.random.default_rng(seed)
    rows = rows or batch_size
    X = rng.random((rows, widths[0]), dtype=np.float32)
    y = rng.integers(0, widths[-1], rows)
    return X, y


def _warm_up(widths, optimiser: str) -> None:
    """One step on a throwaway model, so that first-use imports and caches are not measured."""
    X, y = _batch(widths, 4)
    Trainer(MLP(list(widths), seed=0, checkpointing=True), optimiser, progress=False,
            accumulation_steps=2).step(X, y)
    Trainer(MLP(list(widths), seed=0), optimiser, progress=False).step(X, y)


def measure_mlp_step(widths=(64, 128, 10), batch_size: int = 256, optimiser: str = "adam",
                     checkpointing: bool = False, accumulation_steps: int = 1,
                     seed: int = 0) -> dict:
    """Bytes a real training step allocates, against the calculator.

    tracemalloc starts before the model is built; then one step runs on a batch indexed out of
    the data as the trainer does (a copy). ``held_bytes``: what is still allocated after it
    (weights, gradients, optimiser state, the activations of the last forward pass, and a few
    kB of Python objects); ``peak_bytes``: the most allocated at once during a second step
    (temporaries included). Both relative to before the model existed."""
    widths = [int(w) for w in widths]
    _warm_up(widths, optimiser)
    X, y = _batch(widths, batch_size, seed, rows=2 * batch_size)
    order = np.random.default_rng(seed).permutation(2 * batch_size)
    first, second = order[:batch_size], order[batch_size:]
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        model = MLP(widths, seed=seed, checkpointing=checkpointing)
        trainer = Trainer(model, optimiser, batch_size=batch_size, progress=False, lr=1e-3,
                          accumulation_steps=accumulation_steps)
        trainer.step(X[first], y[first])
        held = tracemalloc.get_traced_memory()[0] - base
        tracemalloc.reset_peak()
        trainer.step(X[second], y[second])
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    predicted = memory.mlp_training_memory(model, batch_size, optimiser,
                                           accumulation_steps=accumulation_steps)
    return {"widths": widths, "batch_size": batch_size, "optimiser": optimiser,
            "checkpointing": checkpointing, "accumulation_steps": accumulation_steps,
            "predicted": predicted, "held_bytes": held, "peak_bytes": peak,
            "held_ratio": held / predicted.held, "peak_ratio": peak / predicted.total,
            "label": CPU_LABEL}


def _forward_backward(model, X, y) -> None:
    model.loss(X, y)
    model.backward()


TIME_LABEL = ("CPU time of this thread, measured on this CPU, with BLAS limited to one thread "
              "(threadpoolctl), best of the repeats, the variants interleaved")


def _interleaved_cpu_seconds(runs: dict, repeats: int) -> dict:
    """The fastest of ``repeats`` CPU times of each of ``runs`` (name -> callable), run in
    turn. CPU time of this thread with BLAS on one thread: other programs on a shared machine
    barely change it, whereas they can make wall-clock times vary tenfold."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - scikit-learn brings it
        threadpool_limits = None
    limit = threadpool_limits(1) if threadpool_limits else contextlib.nullcontext()
    best = {name: math.inf for name in runs}
    with limit:
        for _ in range(repeats):
            for name, run in runs.items():
                start = time.thread_time()
                run()
                best[name] = min(best[name], time.thread_time() - start)
    return best


def compare_checkpointing(widths=(64, 256, 256, 256, 256, 10), batch_size: int = 512,
                          repeats: int = 7, seed: int = 0) -> dict:
    """The same forward and backward passes of an MLP, without and with activation
    checkpointing, on one batch: per variant the activations kept after the forward pass and
    the peak during forward + backward (tracemalloc), the best of ``repeats`` times (this CPU),
    the FLOPs (counted: the step's kernels plus the recomputed matmuls) and the gradients."""
    widths = [int(w) for w in widths]
    X, y = _batch(widths, batch_size, seed)
    _warm_up(widths, "adam")
    step_flops = sum(k.flops for k in cost.step_kernels(widths, batch_size,
                                                        include_update=False))
    rows, models = {}, {}
    for checkpointing in (False, True):
        model = MLP(widths, seed=seed, checkpointing=checkpointing)
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            model.loss(X, y)
            kept = tracemalloc.get_traced_memory()[0] - before
            model.backward()
            peak = tracemalloc.get_traced_memory()[1] - before
        finally:
            tracemalloc.stop()
        models[checkpointing] = model
        rows[checkpointing] = {
            "activations_kept_bytes": kept, "peak_bytes": peak,
            "gradients": model.gradients(),
            # the input batch and labels existed before: only what the passes allocate
            "predicted_kept_bytes": 4 * (memory.mlp_activation_values(
                widths, batch_size, checkpointing) - batch_size * widths[0]),
        }
    seconds = _interleaved_cpu_seconds(
        {key: (lambda m=m: _forward_backward(m, X, y)) for key, m in models.items()}, repeats)
    for key, model in models.items():
        model.recomputed_flops = 0
        _forward_backward(model, X, y)
        rows[key].update(seconds=seconds[key], flops=step_flops + model.recomputed_flops)
    plain, ckpt = rows[False], rows[True]
    gap = max(float(np.max(np.abs(plain["gradients"][k] - ckpt["gradients"][k])))
              for k in plain["gradients"])
    return {"widths": widths, "batch_size": batch_size, "plain": plain, "checkpointed": ckpt,
            "activation_saving": 1 - ckpt["activations_kept_bytes"]
            / plain["activations_kept_bytes"],
            "peak_saving": 1 - ckpt["peak_bytes"] / plain["peak_bytes"],
            "extra_flops": ckpt["flops"] / plain["flops"] - 1,
            "extra_time": ckpt["seconds"] / plain["seconds"] - 1,
            "largest_gradient_difference": gap, "label": CPU_LABEL, "time_label": TIME_LABEL}


def compare_accumulation(widths=(64, 128, 10), batch_size: int = 512,
                         accumulation_steps: int = 4, seed: int = 0) -> dict:
    """One batch's gradients computed whole and as ``accumulation_steps`` micro-batches
    (:meth:`gpulab.nn.trainer.Trainer.accumulate_gradients`), from the same weights: the
    largest difference (rounding only), and the activations each keeps after its forward
    passes (measured with tracemalloc on the NumPy backend)."""
    widths = [int(w) for w in widths]
    X, y = _batch(widths, batch_size, seed)
    _warm_up(widths, "adam")
    results = {}
    for k in (1, accumulation_steps):
        model = MLP(widths, seed=seed)
        trainer = Trainer(model, "adam", progress=False, accumulation_steps=k)
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            Xb, yb = X[np.arange(batch_size)], y[np.arange(batch_size)]
            if k == 1:
                model.loss(Xb, yb)
                model.backward()
            else:
                trainer.accumulate_gradients(Xb, yb)
            del Xb, yb
            held = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        results[k] = {"gradients": model.gradients(), "held_bytes": held,
                      "predicted": memory.mlp_training_memory(model, batch_size, "adam",
                                                              accumulation_steps=k)}
    whole, parts = results[1], results[accumulation_steps]
    gap = max(float(np.max(np.abs(whole["gradients"][k] - parts["gradients"][k])))
              for k in whole["gradients"])
    scale = max(float(np.max(np.abs(g))) for g in whole["gradients"].values())
    return {"widths": widths, "batch_size": batch_size,
            "accumulation_steps": accumulation_steps, "whole": whole, "accumulated": parts,
            "largest_gradient_difference": gap, "largest_gradient": scale,
            "label": CPU_LABEL}


def run_out_of_memory(widths=(64, 256, 256, 10), batch_size: int = 2048,
                      budget_bytes: float = 8e6, seed: int = 0) -> dict:
    """Train one step of ``batch_size`` under a device budget of ``budget_bytes``: the named
    error it raises (:class:`~gpulab.nn.memory.OutOfDeviceMemory`), then the remedies, each
    run: gradient accumulation with the smallest number of micro-batches that fits, without
    and with activation checkpointing. Each remedy: what the calculator says it needs, whether
    the trainer ran it under the budget, and the bytes measured after and during a step
    (:func:`measure_mlp_step`)."""
    widths = [int(w) for w in widths]
    X, y = _batch(widths, batch_size, seed)
    _warm_up(widths, "adam")
    error = None
    try:
        Trainer(MLP(widths, seed=seed), "adam", progress=False,
                device_memory_bytes=budget_bytes).step(X, y)
    except OutOfDeviceMemory as caught:
        error = caught
    remedies = []
    for checkpointing in (False, True):
        steps = next((k for k in (1, 2, 4, 8, 16, 32, 64) if memory.mlp_training_memory(
            widths, batch_size, "adam", checkpointing=checkpointing,
            accumulation_steps=k).total <= budget_bytes), None)
        if steps is None:
            remedies.append({"checkpointing": checkpointing, "accumulation_steps": None,
                             "ran": False})
            continue
        needed = memory.mlp_training_memory(widths, batch_size, "adam",
                                            checkpointing=checkpointing,
                                            accumulation_steps=steps)
        Trainer(MLP(widths, seed=seed, checkpointing=checkpointing), "adam", progress=False,
                accumulation_steps=steps, device_memory_bytes=budget_bytes).step(X, y)
        measured = measure_mlp_step(widths, batch_size, "adam", checkpointing, steps, seed)
        remedies.append({"checkpointing": checkpointing, "accumulation_steps": steps,
                         "needed": needed, "ran": True, "held_bytes": measured["held_bytes"],
                         "peak_bytes": measured["peak_bytes"]})
    return {"widths": widths, "batch_size": batch_size, "budget_bytes": budget_bytes,
            "error": error, "needed": memory.mlp_training_memory(widths, batch_size, "adam"),
            "remedies": remedies, "label": CPU_LABEL}


# --- on a real GPU -------------------------------------------------------------------------------


def _driver_memory() -> tuple[float, float]:
    """(free, total) bytes of device memory as the driver reports them, after numba has
    released what it was waiting to free."""
    from numba import cuda

    context = cuda.current_context()
    cuda.synchronize()
    # numba frees device arrays in batches; release the pending ones before asking
    pending = getattr(getattr(context, "memory_manager", None), "deallocations", None)
    if pending is not None:
        pending.clear()
    info = context.get_memory_info()
    return float(info.free), float(info.total)


def measure_on_gpu(widths=(1024, 4096, 4096, 10), batch_size: int = 4096,
                   optimiser: str = "adam", seed: int = 0) -> dict:
    """One training step of an MLP on the kernel backend, with the device memory the driver
    reports before the model exists and after the step, against the calculator (kernel
    backend). Needs a GPU (the ``gpu`` tier); the driver allocates in pages of a few MiB, so use
    a model of at least tens of MB."""
    if device.tier() != "gpu":
        return {"measured": False, "reason": "needs a GPU: the simulator has no device memory "
                                             "to report (get_memory_info says inf)"}
    widths = [int(w) for w in widths]
    X, y = _batch(widths, batch_size, seed)
    small = [min(w, 16) for w in widths]  # load every kernel's code before measuring
    Trainer(MLP(small, backend="kernels", seed=seed), optimiser, progress=False).step(
        *_batch(small, 8, seed))
    free_before, total = _driver_memory()
    if not math.isfinite(free_before):
        return {"measured": False, "reason": "the driver reported no memory figures"}
    model = MLP(widths, backend="kernels", seed=seed)
    trainer = Trainer(model, optimiser, progress=False, lr=1e-3)
    trainer.step(X, y)
    free_after, _ = _driver_memory()
    predicted = memory.mlp_training_memory(model, batch_size, optimiser, backend="kernels")
    used = free_before - free_after
    return {"measured": True, "widths": widths, "batch_size": batch_size,
            "used_bytes": used, "predicted": predicted, "ratio": used / predicted.held,
            "total_bytes": total, "free_bytes": free_after, "model": model,
            "label": f"measured on {device.PROBE.device_name or 'this GPU'} (driver's free "
                     "memory before and after)"}


def context_overhead() -> dict:
    """What the driver says is in use on this GPU before gpulab allocates anything: the CUDA
    context of this process and whatever else runs on the GPU. GPU only."""
    if device.tier() != "gpu":
        return {"measured": False, "reason": "needs a GPU"}
    free, total = _driver_memory()
    if not math.isfinite(free):
        return {"measured": False, "reason": "the driver reported no memory figures"}
    return {"measured": True, "used_bytes": total - free, "total_bytes": total,
            "free_bytes": free,
            "label": f"measured on {device.PROBE.device_name or 'this GPU'}: total minus free "
                     "memory, as the driver reports them"}


def cuda_out_of_memory(extra_bytes: float = 2**30) -> dict:
    """Ask the GPU for more memory than it has free (free + ``extra_bytes``, as one float32
    array), catch the driver's out-of-memory error and say what it was. GPU only."""
    if device.tier() != "gpu":
        return {"raised": False, "reason": "needs a GPU"}
    from numba import cuda

    free, total = _driver_memory()
    if not math.isfinite(free):
        return {"raised": False, "reason": "the driver reported no memory figures"}
    wanted = int(free + extra_bytes)
    try:
        array = cuda.device_array(wanted // 4, dtype=np.float32)
    except Exception as error:  # numba's CudaAPIError: [CUDA_ERROR_OUT_OF_MEMORY] ...
        return {"raised": True, "error": error, "type": type(error).__name__,
                "message": str(error), "out_of_memory": memory.is_out_of_memory(error),
                "requested_bytes": wanted, "free_bytes": free, "total_bytes": total}
    del array
    return {"raised": False, "reason": f"the driver gave {wanted:,} bytes: more than it "
                                       "reported free (unified memory?)"}


# --- real models on real GPUs --------------------------------------------------------------------


class ModelFitExperiment(Experiment):
    """Which of :data:`gpulab.nn.memory.KNOWN_MODELS` fit which of
    :data:`gpulab.nn.memory.GPU_MEMORY`, for inference or for training, from the calculator.

    >>> ModelFitExperiment("training", recompute="full").run()["rows"][0]["model"]
    'GPT-3 Small (125M)'
    """

    def __init__(self, purpose: str = "inference", weight_format: str = "bf16",
                 kv_cache: bool = True, batch_size: int = 1, precision: str = "bf16-mixed",
                 recompute: str = "full", zero_ranks: int = 1,
                 overhead_bytes: float = memory.RUNTIME_OVERHEAD_BYTES,
                 attention: str = "flash"):
        if purpose not in ("inference", "training"):
            raise ValueError(f"purpose must be 'inference' or 'training', not {purpose!r}")
        if attention not in memory.ATTENTION:
            raise ValueError(f"attention must be one of {', '.join(memory.ATTENTION)}, not "
                             f"{attention!r}")
        self.purpose, self.weight_format, self.kv_cache = purpose, weight_format, kv_cache
        self.batch_size, self.precision, self.recompute = int(batch_size), precision, recompute
        self.zero_ranks = int(zero_ranks)
        self.overhead_bytes = float(overhead_bytes)
        self.attention = attention

    def run(self) -> dict:
        sharded = self.purpose == "training" and self.zero_ranks > 1
        rows = memory.fit_table(self.purpose, batch_size=self.batch_size,
                                weight_format=self.weight_format, kv_cache=self.kv_cache,
                                precision=self.precision, recompute=self.recompute,
                                overhead_bytes=self.overhead_bytes, attention=self.attention,
                                zero_stage=3 if sharded else 0,
                                ranks=self.zero_ranks if sharded else 1)
        if self.purpose == "inference":
            setting = (f"weights in {self.weight_format}"
                       + (f", KV cache of {self.batch_size} full-length sequence(s) in bf16"
                          if self.kv_cache else ", no KV cache"))
        else:
            setting = (f"{self.precision} Adam, micro-batch {self.batch_size}, "
                       f"recompute={self.recompute}, attention={self.attention}"
                       + (f", ZeRO-3 over {self.zero_ranks} GPUs (per GPU, with its gathered "
                          "blocks)" if sharded else ", one GPU"))
        self.last_result = {"purpose": self.purpose, "rows": rows, "setting": setting,
                            "gpus": dict(memory.GPU_MEMORY),
                            "overhead_bytes": self.overhead_bytes,
                            "label": "computed by gpulab.nn.memory (published formulas, "
                                     "datasheet memory sizes, runtime overhead estimated)"}
        return self.last_result

    def row(self, model_name: str) -> dict:
        """The result's row for ``model_name`` (its name in :data:`memory.KNOWN_MODELS`)."""
        rows = self._result()["rows"]
        found = [r for r in rows if r["model"] == model_name]
        if not found:
            raise ValueError(f"no model {model_name!r}: the rows are "
                             f"{', '.join(r['model'] for r in rows)}")
        return found[0]

    def smallest_gpu(self, model_name: str, native: bool = False) -> str | None:
        """The key of the smallest GPU that holds ``model_name``, or None; with ``native``,
        the smallest that also has arithmetic in the format."""
        row = self.row(model_name)
        return next((key for key, fits in row["fits"].items()
                     if fits and (row["native"][key] or not native)), None)

    def share(self, model_name: str, gpu: str) -> float:
        """The share of ``gpu``'s nominal memory that ``model_name`` needs."""
        return self.row(model_name)["bytes"] / memory.GPU_MEMORY[gpu].memory_bytes

    def explain(self) -> str:
        r = self._result()
        lines = [f"{r['purpose'].capitalize()}, {r['setting']}, plus "
                 f"{format_bytes(r['overhead_bytes'])} for the runtime (an estimate)."]
        number_format = (self.weight_format if r["purpose"] == "inference"
                         else memory.get_precision(self.precision).name.split("-")[0])
        without = sorted(key for key, gpu in r["gpus"].items() if not gpu.runs(number_format))
        if without:
            lines.append(f"Fitting is about bytes: {', '.join(without)} have no "
                         f"{number_format} arithmetic (no {number_format} peak in "
                         "gpulab.hardware), so the values would be widened before every "
                         "operation there, or another format used.")
        for row in r["rows"]:
            gpu = self.smallest_gpu(row["model"])
            parts = row["breakdown"].as_dict()
            largest = max(parts, key=parts.get)
            where = (f"the smallest GPU that holds it is the {r['gpus'][gpu].name}" if gpu
                     else "no single GPU here holds it")
            native = self.smallest_gpu(row["model"], native=True)
            if gpu and native != gpu:
                where += (f", which has no {number_format} arithmetic; the smallest that has "
                          f"is the {r['gpus'][native].name}" if native else
                          f", which has no {number_format} arithmetic")
            lines.append(f"{row['model']}: {format_bytes(row['bytes'])} "
                         f"({row['bytes'] / memory.GIB:,.1f} GiB), mostly {largest}; {where}.")
        return "\n".join(lines)


# --- figures -------------------------------------------------------------------------------------

KIND_COLOURS = {"parameters": "#4e79a7", "gradients": "#f28e2b", "optimiser state": "#e15759",
                "master weights": "#76b7b2", "activations": "#59a14f", "KV cache": "#edc948",
                "workspace": "#b07aa1", "runtime overhead": "#9c9c9c"}


def breakdown_plot(breakdowns, labels=None, ax=None, unit: float = 1e9, unit_name: str = "GB",
                   title: str = "where the bytes go"):
    """Stacked bars, one per :class:`~gpulab.nn.memory.MemoryBreakdown`, one colour per kind."""
    if ax is None:
        fig, ax = plt.subplots(figsize=(max(5, 1.3 * len(breakdowns) + 3), 4),
                               layout="constrained")
    labels = labels or [b.model for b in breakdowns]
    bottom = np.zeros(len(breakdowns))
    for kind in memory.KINDS:
        values = np.array([b.as_dict()[kind] for b in breakdowns]) / unit
        if values.any():
            ax.bar(range(len(breakdowns)), values, bottom=bottom, label=kind,
                   color=KIND_COLOURS[kind])
            bottom += values
    ax.set_xticks(range(len(breakdowns)), [wrap_title(str(label), 14) for label in labels],
                  fontsize=8)
    ax.set_ylabel(f"{unit_name} (computed)")
    ax.set_title(wrap_title(title, 60), fontsize=10)
    ax.legend(fontsize=7, loc="upper left")
    return ax.figure


def fit_plot(result: dict, ax=None):
    """Models (rows) against GPUs (columns): green where it fits, red where not, with the GB
    needed and each GPU's memory in GB and GiB."""
    rows, gpus = result["rows"], result["gpus"]
    if ax is None:
        fig, ax = plt.subplots(figsize=(11, 0.6 * len(rows) + 2.2), layout="constrained")
    def native(row, key):
        return row.get("native", {}).get(key, True)

    grid = np.array([[(1.0 if native(row, key) else 0.6) if row["fits"][key] else 0.0
                      for key in gpus] for row in rows])
    ax.imshow(grid, cmap="RdYlGn", vmin=-0.3, vmax=1.3, aspect="auto")
    for i, row in enumerate(rows):
        for j, key in enumerate(gpus):
            share = row["bytes"] / gpus[key].memory_bytes
            word = ("fits" if native(row, key) else "fits*") if row["fits"][key] else "no"
            ax.text(j, i, f"{word}\n{100 * share:,.0f} %", ha="center", va="center",
                    fontsize=8)
    ax.set_xticks(range(len(gpus)), [f"{key}\n{g.gb:.0f} GB = {g.gib:.1f} GiB"
                                      for key, g in gpus.items()], fontsize=7)
    ax.set_yticks(range(len(rows)), [f"{row['model']}\n{row['bytes'] / 1e9:,.1f} GB"
                                     for row in rows], fontsize=8)
    starred = any(row["fits"][key] and not native(row, key) for row in rows for key in gpus)
    ax.set_title(wrap_title(f"{result['purpose']}: {result['setting']} (share of each GPU's "
                            f"memory; {result['label']})"
                            + ("; * the bytes fit, but the GPU has no arithmetic in this format"
                               if starred else ""), 110), fontsize=9)
    return ax.figure


class MemoryBudgetDashboard(Dashboard):
    """Real model sizes against real GPUs: inference or training, the formats, the KV cache,
    recomputation and ZeRO; Run redraws the table.

    Drive it from Python: ``d.purpose.value = "training"; d.run_button.click()``."""

    WHERE_GPU = ("Computed by the calculator (gpulab.nn.memory) from published formulas and "
                 "datasheet memory sizes; this machine's {gpu} is measured in the chapter's "
                 "GPU cells.")
    WHERE_SIM = ("Computed by the calculator (gpulab.nn.memory) from published formulas and "
                 "datasheet memory sizes; the runtime's share is an estimate.")
    running_text = "computing…"
    experiment: ModelFitExperiment | None

    def __init__(self):
        import ipywidgets as widgets

        style = {"description_width": "initial"}
        self.purpose = widgets.ToggleButtons(options=["inference", "training"],
                                             value="inference", description="purpose")
        self.weight_format = widgets.Dropdown(options=["fp32", "bf16", "fp8"], value="bf16",
                                              description="weights (inference)", style=style)
        self.kv_cache = widgets.Checkbox(value=True, description="KV cache (full context)")
        self.batch_size = widgets.Dropdown(options=[1, 2, 4, 8, 16, 32], value=1,
                                           description="batch (sequences)", style=style)
        self.precision = widgets.Dropdown(options=["bf16-mixed", "fp8-mixed", "fp32"],
                                          value="bf16-mixed", description="training precision",
                                          style=style)
        self.recompute = widgets.Dropdown(options=list(memory.RECOMPUTE), value="full",
                                          description="recompute", style=style)
        self.zero_ranks = widgets.Dropdown(options=[1, 8, 64, 512], value=1,
                                           description="ZeRO-3 over GPUs", style=style)
        self.attention = widgets.Dropdown(options=list(memory.ATTENTION), value="flash",
                                          description="attention scores", style=style)
        self._add_parts()
        self._lay_out(
            self.purpose,
            widgets.HBox([widgets.VBox([self.weight_format, self.kv_cache, self.batch_size]),
                          widgets.VBox([self.precision, self.recompute, self.attention,
                                        self.zero_ranks]),
                          self.run_button]))

    def make_experiment(self) -> ModelFitExperiment:
        return ModelFitExperiment(self.purpose.value, self.weight_format.value,
                                  self.kv_cache.value, self.batch_size.value,
                                  self.precision.value, self.recompute.value,
                                  self.zero_ranks.value, attention=self.attention.value)

    def make_figure(self, result: dict):
        return fit_plot(result)


__all__ = [
    "CPU_LABEL", "MemoryBudgetDashboard", "ModelFitExperiment", "breakdown_plot",
    "compare_accumulation", "compare_checkpointing", "context_overhead", "cuda_out_of_memory",
    "fit_plot", "measure_mlp_step", "measure_on_gpu", "run_out_of_memory",
]
