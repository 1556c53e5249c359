"""Many GPUs, chapter 11's experiment: data-parallel training over MPI ranks that matches one
process, all-reduce times measured here with α and β fitted to them, and the speed-up measured
here next to the speed-up modelled for named systems.

One launch of ``mpiexec`` (a second or two to start) runs every measurement
(:mod:`gpulab.parallel.tasks`):

- ``MPI_Allreduce`` over message sizes on 2 and on 4 ranks: α and β are fitted to the 2-rank
  times (:func:`gpulab.parallel.links.fit_alpha_beta`) and the 4-rank times compared with what
  that fit predicts;
- gpulab's ring all-reduce (point-to-point messages) checked against ``MPI_Allreduce``;
- the digits MLP trained data-parallel on 1, 2 and 4 ranks from the same seed, the same
  global batch: the parameters are compared with one process's (:class:`gpulab.nn.Trainer`),
  and the time per step gives the measured speed-up;
- a matmul split by columns and by rows over 2 ranks, checked against NumPy.

Every number says where it comes from: measured here (MPI processes on this CPU, shared
memory; oversubscribed when there are more ranks than cores), or estimated from the models of
:mod:`gpulab.parallel.scaling` for named systems (estimates, not measurements). Where no MPI is
installed the same phases run on threads (:mod:`gpulab.parallel.simulated`) and their times are
not used.

:class:`ManyGPUsExperiment` is the logic; :class:`ScalingExperiment` the model alone (instant),
behind :class:`ScalingDashboard`; :func:`run_your_ring` runs a learner's ring all-reduce on real
MPI ranks.

The model's step computes at the GPU's peak and sends at the links' line rate.
:func:`at_rates` runs it again slower on either side, to show which way each moves the
efficiency (compute / (compute + exposed communication)): slower compute *raises* it (the same
all-reduce is a smaller share of a longer step, though every step takes longer), slower links
lower it. :func:`model_state_fit` says whether a workload's model states fit the system's GPUs
with plain data parallelism, or with which ZeRO stage (chapter 09's calculator).
"""

from __future__ import annotations

import inspect
import math
import tempfile
import textwrap
from dataclasses import replace
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from gpulab import device, hardware
from gpulab.experiments.dashboard import Dashboard
from gpulab.experiments.experiment import Experiment
from gpulab.nn import memory
from gpulab.nn.data import load_digits
from gpulab.parallel import data_parallel, launch, links, scaling
from gpulab.plots import wrap_title
from gpulab.tables import Column, Table

SWEEP_BYTES = (8, 64, 512, 4096, 32768, 262144, 1048576)
TRAIN_SETTINGS = {"global_batch": 512, "epochs": 6}
RANKS = (1, 2, 4)
MODEL_COUNTS = (1, 2, 4, 8)

# What the compute of a large training reaches, against the bf16 peak the model assumes.
ACHIEVED_MFU = 0.43
ACHIEVED_MFU_SOURCE = (
    "Llama Team, AI @ Meta, 'The Llama 3 Herd of Models', 2024 "
    "(https://arxiv.org/abs/2407.21783), Table 4: 43 % BF16 model FLOPs utilisation (MFU, 430 "
    "TFLOP/s per GPU) pre-training Llama 3 405B on 8,192 H100s, 41 % and 38 % on 16,384. The "
    "MFU of the whole step, communication and pipeline bubbles included, so the compute alone "
    "ran at least this fast")

# Plain data parallelism and the ZeRO stages that send what it sends (one all-reduce of the
# gradients per step), so that the modelled step holds for them; stage 3 sends 1.5 times as much.
SAME_TRAFFIC_ZERO_STAGES = (0, 1, 2)


def experiment_spec(ranks: int = 4, sweep_bytes=SWEEP_BYTES, settings=None) -> dict:
    """The phases of the experiment's one launch."""
    sizes = [n for n in RANKS if n <= ranks]
    settings = {**TRAIN_SETTINGS, **(settings or {})}
    return {"backend": settings.get("backend", "numpy"), "phases": [
        {"name": "allreduce", "kind": "allreduce", "ranks": [n for n in sizes if n > 1],
         "sizes_bytes": list(sweep_bytes)},
        {"name": "ring", "kind": "ring", "ranks": [sizes[-1]], "sizes_bytes": [8192, 1 << 20]},
        {"name": "train", "kind": "train", "ranks": sizes, "settings": settings},
        {"name": "tensor", "kind": "tensor", "ranks": [min(2, ranks)]},
    ]}


def _median_step(training: dict) -> float:
    steps = np.add(np.add(training["compute_s"], training["communicate_s"]), training["update_s"])
    return float(np.median(steps[1:] if len(steps) > 1 else steps))


class ManyGPUsExperiment(Experiment):
    """The chapter's measurements, in one launch of ``ranks`` ranks (1, 2 and 4 at most).

    Each rank trains on this CPU with NumPy (``backend="numpy"``); ``backend="kernels"`` gives
    each rank gpulab's CUDA kernels on its own GPU (rank on this node modulo the GPUs), and
    the one-process reference runs on the kernels too.

    >>> result = ManyGPUsExperiment().run()   # doctest: +SKIP
    """

    def __init__(self, ranks: int = 4, launcher: str = "auto", sweep_bytes=SWEEP_BYTES,
                 timeout_s: float = 180.0, **settings):
        if ranks not in (2, 3, 4):
            raise ValueError(f"ranks must be 2, 3 or 4 (the runs use 1, 2 and 4), not {ranks!r}")
        self.ranks, self.launcher, self.timeout_s = int(ranks), launcher, timeout_s
        self.sweep_bytes = tuple(int(b) for b in sweep_bytes)
        self.settings = data_parallel.settings_with(**{**TRAIN_SETTINGS, **settings})

    def run(self) -> dict:
        data = load_digits(seed=0)
        spec = experiment_spec(self.ranks, self.sweep_bytes, self.settings)
        raw, run = launch.run_phases(spec, self.ranks, data=(data.X_train, data.y_train),
                                     launcher=self.launcher, timeout_s=self.timeout_s)
        phases = raw["phases"]
        reference = data_parallel.train_one_process(data.X_train, data.y_train, **self.settings)
        tolerance = data_parallel.rounding_tolerance(self.settings["dtype"], reference["state"])
        training = {int(n): value for n, value in phases["train"].items()}
        equivalence = {n: data_parallel.largest_difference(t["state"], reference["state"])
                       for n, t in training.items()}
        step_s = {n: _median_step(t) for n, t in training.items()}
        comm_s = {n: float(np.median(t["communicate_s"][1:] or t["communicate_s"]))
                  for n, t in training.items()}
        measured = run.launcher == launch.MPI_LAUNCHER
        sweep = {int(n): v["rows"] for n, v in phases.get("allreduce", {}).items()}
        fit = check = None
        if measured and 2 in sweep:
            rows = sweep[2]
            fit = links.fit_alpha_beta([r["bytes"] for r in rows], [r["min_s"] for r in rows],
                                       2, where="MPI processes on this CPU, shared memory")
            largest = max(sweep)
            if largest > 2:
                predicted = fit.predict([r["bytes"] for r in sweep[largest]], largest)
                check = {"ranks": largest,
                         "ratios": [r["min_s"] / p for r, p in zip(sweep[largest], predicted,
                                                                   strict=True)]}
        modelled = {}
        for key, system in scaling.SYSTEMS.items():
            counts = list(MODEL_COUNTS) + ([system.domain_size]
                                           if system.domain_size not in MODEL_COUNTS else [])
            modelled[key] = {n: scaling.data_parallel_step("digits", system, n).speedup
                             for n in counts}
        self.last_result = {
            "launch": run, "label": run.label, "measured": measured,
            "library": raw.get("library", ""), "ranks": self.ranks, "settings": self.settings,
            "sweep": sweep, "fit": fit, "fit_check": check,
            "training": training, "reference_loss": reference["final_train_loss"],
            "equivalence": equivalence, "tolerance": tolerance,
            "step_s": step_s, "communicate_s": comm_s,
            "speedup": {n: step_s[1] / s for n, s in step_s.items()} if 1 in step_s else {},
            "ring": next(iter(phases.get("ring", {}).values()), None),
            "tensor": next(iter(phases.get("tensor", {}).values()), None),
            "modelled_speedup": modelled,
            "devices": training[max(training)].get("devices", []),
            "tier": device.tier(), "phase_seconds": raw.get("phase_seconds", {}),
        }
        return self.last_result

    @property
    def matches(self) -> bool:
        """Every rank count's parameters equal one process's, to rounding."""
        r = self._result()
        return all(gap <= r["tolerance"] for gap, _ in r["equivalence"].values())

    def equivalence_table(self) -> Table:
        """Per rank count: steps, the largest parameter difference from one process and where,
        the final loss; the reference and the rounding allowed beneath."""
        r = self._result()
        rows = [[n, r["training"][n]["steps"], gap, where or "-", r["training"][n]["losses"][-1]]
                for n, (gap, where) in sorted(r["equivalence"].items())]
        return Table([Column("ranks"), Column("steps"),
                      Column("largest |difference|", number_format="{:.2e}"),
                      Column("where", align="left"), Column("final loss", number_format="{:.5f}")],
                     rows, notes=[f"reference: one process, global batch "
                                  f"{r['settings']['global_batch']}, {r['settings']['dtype']}; "
                                  f"rounding allows up to {r['tolerance']:.1e}"])

    def speed_table(self) -> Table:
        """Per rank count: the median step, its Allreduce, the speed-up over one rank."""
        r = self._result()
        rows = [[n, r["step_s"][n] * 1e3, r["communicate_s"][n] * 1e3,
                 r["speedup"].get(n, float("nan"))] for n in sorted(r["step_s"])]
        return Table([Column("ranks"), Column("step (median)", "ms", "{:.3f}"),
                      Column("of it: Allreduce", "ms", "{:.3f}"),
                      Column("speed-up", "×", "{:.2f}")], rows, notes=[r["label"]])

    def explain(self) -> str:
        r = self._result()
        lines = []
        gaps = {n: gap for n, (gap, _) in r["equivalence"].items()}
        ranks = ", ".join(str(n) for n in sorted(gaps))
        if self.matches:
            lines.append(f"Same training: on {ranks} ranks the parameters after "
                         f"{r['training'][1]['steps']} steps equal one process's with the "
                         f"whole global batch, to at most {max(gaps.values()):.1e} (rounding "
                         f"allows {r['tolerance']:.1e}).")
        else:
            worst = max(gaps, key=gaps.get)
            lines.append(f"NOT the same training: on {worst} ranks the parameters differ from "
                         f"one process's by {gaps[worst]:.1e}, more than rounding allows "
                         f"({r['tolerance']:.1e}).")
        if r["measured"] and r["speedup"]:
            most = max(r["speedup"])
            speed = r["speedup"][most]
            share = r["communicate_s"][most] / r["step_s"][most]
            verdict = ("faster" if speed > 1.05 else "slower" if speed < 0.95
                       else "no faster")
            lines.append(
                f"Speed, measured here ({r['launch'].short}): {most} ranks ran a step "
                f"{speed:.2f}× as fast as one rank — {verdict}, not {most}× — and the Allreduce "
                f"was {100 * share:.0f} % of their step.")
        elif not r["measured"]:
            lines.append("No MPI here: the ranks ran as threads, whose times say nothing about "
                         "communication, so no speed-up was measured.")
        h100 = r["modelled_speedup"]["hgx-h100"]
        nvl = r["modelled_speedup"]["gb200-nvl72"]
        lines.append(
            f"Modelled (an estimate) for the same digits training: {h100[8]:.2f}× on 8 H100s "
            f"over NVLink, {nvl[72]:.2f}× on the 72 GPUs of a GB200 NVL72. Split 72 ways, a "
            f"batch of {r['settings']['global_batch']} leaves each GPU "
            f"{-(-r['settings']['global_batch'] // 72)} samples: every kernel still costs its "
            "launch, so a step hardly gets shorter, and the all-reduce is added on top.")
        if r["fit"] is not None:
            fit = r["fit"]
            lines.append(f"Talking here: {fit}. For comparison NVLink 4's model is α = 0.6 µs, "
                         f"β = 450 GB/s.")
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# The model alone: what the dashboard explores
# ---------------------------------------------------------------------------------------------


class ScalingExperiment(Experiment):
    """Modelled efficiency of data-parallel training against GPU count, for some workloads on
    one system, with and without overlapping the all-reduce with the backward pass."""

    def __init__(self, system: str = "hgx-h100", workloads=("124m", "1.3b", "8b"),
                 counts=scaling.GPU_COUNTS):
        self.system = scaling.get_system(system)
        self.workloads = [scaling.get_workload(w) for w in workloads]
        if not self.workloads:
            raise ValueError("choose at least one workload")
        self.counts = tuple(int(n) for n in counts)

    def run(self) -> dict:
        curves, fits = {}, {}
        for workload in self.workloads:
            for overlap in (False, True):
                curves[(workload.key, overlap)] = scaling.scaling_curve(
                    workload, self.system, self.counts, overlap)
            for n in self.counts:
                fits[(workload.key, n)] = model_state_fit(workload, self.system, n)
        self.last_result = {"system": self.system, "workloads": self.workloads,
                            "counts": self.counts, "curves": curves, "fits": fits}
        return self.last_result

    def efficiency(self, workload: str, n_gpus: int, overlap: bool) -> float:
        return scaling.data_parallel_step(workload, self.system, n_gpus, overlap).efficiency

    def explain(self) -> str:
        r = self._result()
        system = r["system"]
        big = max(r["counts"])
        lines = []
        for workload in r["workloads"]:
            parts = []
            for n in dict.fromkeys((8, system.domain_size, big)):
                fit = r["fits"].get((workload.key, n)) or model_state_fit(workload, system, n)
                if fit["stage"] is None:
                    parts.append(f"{n:,} GPUs: its model states do not fit "
                                 f"({fit['plain_bytes'] / 1e9:.0f} GB per GPU, ZeRO-2's share "
                                 f"{fit['bytes_per_gpu'] / 1e9:.0f} GB, against the "
                                 f"{fit['memory_bytes'] / 1e9:g} GB of the {fit['gpu']})")
                    continue
                a, b = (self.efficiency(workload.key, n, o) for o in (False, True))
                how = "" if fit["stage"] == 0 else f", with ZeRO stage {fit['stage']}"
                parts.append(f"{n:,} GPUs {100 * a:.0f} % ({100 * b:.0f} % with overlap{how})")
            lines.append(f"{workload.name}: {', '.join(parts)}.")
        lines.append(f"All estimated for {system.name} ({system.note}): compute by gpulab's "
                     "GPU model (the transformers at the GPU's bf16 peak), the all-reduce by the "
                     "α–β model at the links' line rate, which NCCL does not reach (about "
                     f"{100 * hardware.NCCL_NVLINK_EFFICIENCY:.0f} % of it over NVLink); "
                     "model states by gpulab.nn.memory (ZeRO stage 1 or 2 where plain data "
                     "parallelism's do not fit: the same traffic).")
        worst = min(r["workloads"], key=lambda w: self.efficiency(w.key, big, False))
        lines.append(compute_and_links_text(worst, system, big))
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# What the model assumes, moved: compute below peak, links below line rate; does it fit?
# ---------------------------------------------------------------------------------------------


def _share(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            math.isfinite(value) and 0 < value <= 1):
        raise ValueError(f"{name} must be a number in (0, 1], not {value!r}")
    return float(value)


def at_rates(step: scaling.DataParallelStep, compute_share: float = 1.0,
             link_share: float = 1.0) -> scaling.DataParallelStep:
    """``step`` again with its compute (forward, backward, update; one GPU's too) at
    ``compute_share`` of the rate the model assumed (an MFU, for the transformers modelled at
    the bf16 peak) and every all-reduce at ``link_share`` of the links' line rate (its latency
    slowed alike: an approximation). Efficiency = compute / (compute + exposed communication),
    so a lower ``compute_share`` raises it and a lower ``link_share`` lowers it."""
    c, k = _share("compute_share", compute_share), _share("link_share", link_share)
    return replace(step, compute_s=step.compute_s / c, backward_s=step.backward_s / c,
                   single_gpu_s=step.single_gpu_s / c, communicate_s=step.communicate_s / k,
                   last_bucket_s=step.last_bucket_s / k)


def model_state_fit(workload, system, n_gpus: int) -> dict:
    """Whether ``workload``'s model states fit one GPU of ``system`` when ``n_gpus`` train it
    data-parallel: the first of plain data parallelism and ZeRO stages 1 and 2 (which send
    what plain data parallelism sends, so the modelled step holds for them) whose bytes per
    GPU (:func:`gpulab.nn.memory.zero_bytes_per_parameter`: mixed-precision Adam, the digits
    in fp32) are below the GPU's nominal memory. Model states only: activations come on top
    (chapter 09).

    Keys: ``stage`` (None when none of them fits: ZeRO-3, with 1.5 times the traffic, or
    tensor and pipeline parallelism would be needed, which the modelled step leaves out),
    ``bytes_per_gpu`` (at that stage; ZeRO-2's, the smallest, when none fits),
    ``plain_bytes`` (plain data parallelism's), ``memory_bytes`` (the GPU's) and ``gpu``."""
    workload, system = scaling.get_workload(workload), scaling.get_system(system)
    n = int(n_gpus)
    if n < 1:
        raise ValueError(f"n_gpus must be >= 1, not {n_gpus!r}")
    precision = "fp32" if workload.gradient_bytes == 4 else "bf16-mixed"
    per_gpu = {stage: workload.parameters
               * memory.zero_bytes_per_parameter(stage, n, precision, "adam")
               for stage in SAME_TRAFFIC_ZERO_STAGES}
    limit = system.spec.memory_bytes
    stage = next((s for s, b in per_gpu.items() if b < limit), None)
    smallest = SAME_TRAFFIC_ZERO_STAGES[-1]
    return {"stage": stage, "bytes_per_gpu": per_gpu[smallest if stage is None else stage],
            "plain_bytes": per_gpu[0], "memory_bytes": limit, "gpu": system.spec.name}


def _fit_mark(fit: dict) -> str:
    return ("" if fit["stage"] == 0 else "no fit" if fit["stage"] is None
            else f"ZeRO-{fit['stage']}")


def scaling_table(counts=(8, 72, 4608), workloads=("124m", "1.3b", "8b"), systems=None) -> Table:
    """Modelled efficiency without / with overlap for each system and workload at ``counts``
    GPUs, each marked with what it takes to fit the model states (:func:`model_state_fit`):
    nothing (plain data parallelism), a ZeRO stage that sends the same, or "no fit" (the
    efficiency is then left out: the modelled step is not one that could run)."""
    systems = list(scaling.SYSTEMS) if systems is None else list(systems)
    counts = tuple(int(n) for n in counts)
    rows, too_big = [], {}
    for key in systems:
        system = scaling.get_system(key)
        for w in workloads:
            workload = scaling.get_workload(w)
            cells = [system.key, workload.key]
            for n in counts:
                fit = model_state_fit(workload, system, n)
                if fit["stage"] != 0:
                    too_big[(workload.key, system.key)] = fit
                if fit["stage"] is None:
                    cells += [None, _fit_mark(fit)]
                    continue
                plain = scaling.data_parallel_step(workload, system, n).efficiency
                overlapped = scaling.data_parallel_step(workload, system, n,
                                                        overlap=True).efficiency
                cells += [f"{100 * plain:.0f}/{100 * overlapped:.0f}", _fit_mark(fit)]
            rows.append(cells)
    notes = []
    if too_big:
        notes.append("Model states per GPU (gpulab.nn.memory, mixed-precision Adam; activations "
                     "come on top, chapter 09):")
        for (w, key), fit in too_big.items():
            workload = scaling.get_workload(w)
            notes.append(f"  {workload.key} on {key}: plain data parallelism keeps "
                         f"{fit['plain_bytes'] / 1e9:.0f} GB on every GPU, more than the "
                         f"{fit['gpu']}'s {fit['memory_bytes'] / 1e9:g} GB (nominal)")
        notes.append(textwrap.fill(
            "ZeRO-1, ZeRO-2: the first stage whose share fits; both send what plain data "
            "parallelism sends, so the modelled step holds (its efficiency still counts against "
            "one GPU's rate, though one GPU could not hold the model). no fit: not even "
            "ZeRO-2's share fits (ZeRO-3 sends 1.5 times as much; not modelled).", 100))
    columns = [Column("system"), Column("model", align="right")]
    for n in counts:
        columns += [Column(f"{n:,} GPUs", "%", align="right"),
                    Column("to fit", align="left")]
    return Table(columns, rows, title="Efficiency of data parallelism without / with overlap, "
                 "estimated (gpulab.parallel.scaling)", notes=notes)


def compute_and_links(workload, system, n_gpus: int, overlap: bool = False,
                      mfu: float = ACHIEVED_MFU,
                      link_share: float = hardware.NCCL_NVLINK_EFFICIENCY) -> dict:
    """The modelled step of ``workload`` on ``n_gpus`` of ``system`` as assumed (compute at
    peak, links at line rate), with compute at ``mfu`` of peak (:data:`ACHIEVED_MFU`), with
    every all-reduce at ``link_share`` of line rate (NCCL's share over NVLink, applied to every
    link), and with both: ``{"model", "slower_compute", "slower_links", "both"}`` of
    :class:`gpulab.parallel.scaling.DataParallelStep`."""
    step = scaling.data_parallel_step(workload, system, n_gpus, overlap)
    return {"model": step, "slower_compute": at_rates(step, compute_share=mfu),
            "slower_links": at_rates(step, link_share=link_share),
            "both": at_rates(step, compute_share=mfu, link_share=link_share)}


def compute_and_links_text(workload, system, n_gpus: int, overlap: bool = False,
                           mfu: float = ACHIEVED_MFU) -> str:
    """:func:`compute_and_links` in sentences, every figure from the model."""
    r = compute_and_links(workload, system, n_gpus, overlap, mfu)
    model, slow, links_slow, both = (r[k] for k in ("model", "slower_compute", "slower_links",
                                                    "both"))
    name = scaling.get_workload(workload).name
    share = 100 * hardware.NCCL_NVLINK_EFFICIENCY
    direction = "raises" if slow.efficiency > model.efficiency else "does not raise"
    return (
        f"The model computes at the GPU's peak. At {100 * mfu:.0f} % of it (the MFU of Llama 3 "
        f"405B's whole pre-training step on 8,192 H100s, arXiv:2407.21783), {name} on "
        f"{n_gpus:,} GPUs"
        f"{' with overlap' if overlap else ''} goes from {100 * model.efficiency:.0f} % to "
        f"{100 * slow.efficiency:.0f} % efficiency: slower compute {direction} it, because the "
        f"same all-reduce is a smaller share of a longer step — while every step takes "
        f"{slow.time_s / model.time_s:.1f}× as long, so the training is slower. With every "
        f"all-reduce at {share:.0f} % of line rate (NCCL's share over NVLink) it is "
        f"{100 * links_slow.efficiency:.0f} %, and with both {100 * both.efficiency:.0f} %. "
        "Two things the model leaves out only lower it: communication overlapped with the "
        "backward pass slows the kernels it runs beside (they share the SMs and memory), and "
        "every all-reduce waits for the slowest GPU (stragglers).")


def scaling_plot(result: dict, axes=None):
    """Efficiency (speed-up / N) against GPU count, without and with overlap, one line per
    workload; the end of the NVLink domain marked."""
    if axes is None:
        fig, axes = plt.subplots(1, 2, figsize=(13, 4.2), sharey=True, layout="constrained")
    else:
        fig = axes[0].figure
    system = result["system"]
    for ax, overlap in zip(axes, (False, True), strict=True):
        for workload in result["workloads"]:
            steps = result["curves"][(workload.key, overlap)]
            fits = [result["fits"][(workload.key, s.n_gpus)]["stage"] for s in steps]
            name = workload.name + ("" if all(f == 0 for f in fits)
                                    else " (ZeRO-1/2 where needed; a gap: no fit)")
            ax.plot([s.n_gpus for s in steps],  # a point whose model states fit nowhere: a gap
                    [math.nan if f is None else 100 * s.efficiency
                     for s, f in zip(steps, fits, strict=True)], "o--",
                    mfc="white", ms=4, label=wrap_title(name, 40))
        ax.axvline(system.domain_size, color="grey", lw=0.8, ls=":")
        ax.text(system.domain_size * 1.1, 30, f"end of the\n{system.inside.name}\ndomain "
                f"({system.domain_size} GPUs)", fontsize=7, color="grey")
        ax.set_xscale("log")
        ticks = [n for n in (1, 8, 72, 576, 4608) if n <= max(result["counts"])]
        ax.set_xticks(ticks, [f"{n:,}" for n in ticks])
        ax.set_ylim(0, 105)
        ax.set_xlabel("GPUs")
        ax.set_title(("the all-reduce overlaps the backward pass" if overlap
                      else "the all-reduce after the backward pass"), fontsize=10)
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("scaling efficiency, % (estimated)")
    axes[0].legend(fontsize=8, loc="lower left")
    fig.suptitle(wrap_title(f"Data-parallel efficiency on {system.name}, estimated (gpulab's "
                            "GPU model for compute, α–β communication at line rate)", 110),
                 fontsize=10)
    return fig


def allreduce_plot(result: dict, ax=None, links_shown=("pcie4", "nvlink4", "ib-ndr"),
                   ranks_modelled: int = 8):
    """All-reduce time against message size: measured here (2 and 4 ranks) with the fitted
    α–β line, next to the model of real links for ``ranks_modelled`` GPUs."""
    if ax is None:
        fig, ax = plt.subplots(figsize=(8.5, 5), layout="constrained")
    else:
        fig = ax.figure
    sizes = np.logspace(0, 9, 60)
    markers = {2: "o", 3: "^", 4: "s"}
    for n, rows in sorted(result["sweep"].items()):
        if not result["measured"]:
            break
        ax.plot([r["bytes"] for r in rows], [r["min_s"] for r in rows], markers.get(n, "o"),
                ms=7, label=f"measured here, {n} ranks (fastest of the repeats)")
    fit = result.get("fit")
    if fit is not None:
        ax.plot(sizes, fit.predict(sizes, 2), "-", color="C0", lw=1,
                label=wrap_title(f"fitted to 2 ranks: α = {fit.alpha_s * 1e6:.2g} µs, "
                                 f"β = {fit.beta_bytes_per_s / 1e9:.2g} GB/s", 60))
        if result.get("fit_check"):
            n = result["fit_check"]["ranks"]
            ax.plot(sizes, fit.predict(sizes, n), "-", color="C1", lw=1,
                    label=f"the same α, β predicting {n} ranks")
    for key in links_shown:
        link = links.get_link(key)
        ax.plot(sizes, [link.allreduce_time(b, ranks_modelled) for b in sizes], "--", lw=1.2,
                label=wrap_title(f"estimated: {ranks_modelled} GPUs, {link.name} (α–β model)",
                                 60))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("message size, bytes (the vector each rank contributes)")
    ax.set_ylabel("all-reduce time, s")
    ax.set_title(wrap_title(f"All-reduce time: {result['label']} vs modelled links", 100),
                 fontsize=9)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7)
    return fig


def speedup_plot(result: dict, ax=None):
    """Speed-up against ranks/GPUs for the digits training: measured here, modelled for the
    named systems, and the perfect line."""
    if ax is None:
        fig, ax = plt.subplots(figsize=(8, 4.5), layout="constrained")
    else:
        fig = ax.figure
    counts = [1, 2, 4, 8, 72]
    ax.plot(counts, counts, ":", color="grey", label="perfect: N GPUs, N× as fast")
    for key, speeds in result["modelled_speedup"].items():
        ns = sorted(speeds)
        ax.plot(ns, [speeds[n] for n in ns], "o--", mfc="white",
                label=wrap_title(f"estimated: {scaling.SYSTEMS[key].name}", 60))
    if result["measured"] and result["speedup"]:
        ns = sorted(result["speedup"])
        ax.plot(ns, [result["speedup"][n] for n in ns], "s-", color="black", ms=8,
                label=wrap_title(result["label"], 60))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(counts, [str(n) for n in counts])
    low = min([0.5] + [v for v in result["speedup"].values() if v > 0])
    ax.set_ylim(low / 1.5, 100)
    ax.set_xlabel("ranks / GPUs")
    ax.set_ylabel("speed-up over one (×)")
    ax.set_title(wrap_title("The digits MLP, same global batch split N ways (strong scaling)",
                            90), fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    return fig


# ---------------------------------------------------------------------------------------------
# The learner's ring on real ranks
# ---------------------------------------------------------------------------------------------


def run_your_ring(function, ranks: int = 4, sizes_bytes=(8192, 1 << 20),
                  launcher: str = "auto", timeout_s: float = 90.0) -> dict:
    """Run ``function(comm, x)`` (a ring all-reduce returning the mean) on ``ranks`` MPI
    processes: its source is written to a file that every rank executes (so it must need only
    NumPy, as ``np``), then checked against ``MPI_Allreduce`` and timed next to it. Where no MPI
    is installed it runs on threads."""
    try:
        source = textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError) as error:
        raise ValueError(f"cannot read the source of {function!r}: {error}") from None
    with tempfile.TemporaryDirectory(prefix="gpulab-ring-") as folder:
        path = Path(folder) / "learner_ring.py"
        path.write_text("import numpy as np\n\n" + source, encoding="utf-8")
        spec = {"ring": {"source": str(path), "name": function.__name__},
                "phases": [{"name": "ring", "kind": "ring", "ranks": [ranks],
                            "sizes_bytes": list(sizes_bytes)}]}
        raw, run = launch.run_phases(spec, ranks, launcher=launcher, timeout_s=timeout_s)
    result = dict(raw["phases"]["ring"][str(ranks)])
    result["label"] = run.label
    result["launch"] = run
    return result


# ---------------------------------------------------------------------------------------------
# The dashboard
# ---------------------------------------------------------------------------------------------


class ScalingDashboard(Dashboard):
    """Choose a system, workloads and the largest GPU count; Run draws the modelled efficiency
    with and without overlap. Drive it from Python: ``d.system_dropdown.value = "pcie-box";
    d.run_button.click()``."""

    WHERE_GPU = (
        "Estimated from models (roofline compute, α–β links) of the system chosen; this "
        "machine's {gpu} is not used by the model. The measurements are in the cells above."
    )
    WHERE_SIM = (
        "Estimated from models (roofline compute, α–β links) of the system chosen: no GPU is "
        "needed. The measurements on this CPU are in the cells above."
    )
    running_text = "modelling…"

    def __init__(self):
        import ipywidgets as widgets

        self.system_dropdown = widgets.Dropdown(
            options=[(s.name, key) for key, s in scaling.SYSTEMS.items()], value="hgx-h100",
            description="system", layout=widgets.Layout(width="560px"),
            style={"description_width": "initial"})
        self.workload_select = widgets.SelectMultiple(
            options=[(w.name, key) for key, w in scaling.WORKLOADS.items()],
            value=("124m", "1.3b", "8b"), description="workloads", rows=4,
            layout=widgets.Layout(width="560px"), style={"description_width": "initial"})
        self.max_gpus = widgets.SelectionSlider(
            options=[n for n in scaling.GPU_COUNTS if n >= 8], value=scaling.GPU_COUNTS[-1],
            description="up to GPUs", style={"description_width": "initial"})
        self._add_parts()
        self._lay_out(self.system_dropdown, self.workload_select,
                      widgets.HBox([self.max_gpus, self.run_button]))

    def make_experiment(self) -> ScalingExperiment:
        counts = [n for n in scaling.GPU_COUNTS if n <= self.max_gpus.value]
        return ScalingExperiment(self.system_dropdown.value, list(self.workload_select.value),
                                 counts)

    def make_figure(self, result: dict):
        return scaling_plot(result)


__all__ = ["ACHIEVED_MFU", "ACHIEVED_MFU_SOURCE", "SAME_TRAFFIC_ZERO_STAGES",
           "ManyGPUsExperiment", "ScalingDashboard", "ScalingExperiment", "allreduce_plot",
           "at_rates", "compute_and_links", "compute_and_links_text", "experiment_spec",
           "model_state_fit", "run_your_ring", "scaling_plot", "scaling_table", "speedup_plot"]
