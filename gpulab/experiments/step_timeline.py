"""One training step on a timeline: every kernel launch, and the gaps between them (chapters 07
and 08).

:func:`record_step` runs one training step of the course's MLP on the kernel backend
(:class:`gpulab.nn.backends.KernelBackend`) and records every kernel it launches, in order:
the kernel's name and its grid and block sizes, as the backend really launched them (the
launch ``kernel[blocks, threads](...)`` is intercepted on its way to Numba). Each launch is
matched to its entry in :func:`gpulab.nn.cost.step_kernels`, which counts its FLOPs and the
bytes it moves; a step whose launches do not match that list is an error, so the cost model
and the backend cannot drift apart.

:func:`step_timeline` turns the record into a :class:`StepTimeline`, kernels as bars and the
gaps between launches as gaps:

- tier ``gpu``: **measured**. Each launch is timed with CUDA events (events the GPU records in
  its stream when it reaches them: :func:`gpulab.timing.time_gpu`), so a bar is the launch
  and the kernel together, as the GPU's clock sees them; the gap before it is the host's time
  between the end of one launch and the start of the next (argument checks, allocations, the
  batch's copies, Python), measured with ``time.perf_counter``. Each launch is waited for so
  that it can be timed alone: the time spent waiting and timing is in neither.
- tier ``sim``: **estimated**, by gpulab's GPU model of a named GPU (default the H100 SXM):
  each kernel's GPU time is the largest of FLOPs / (peak fp32 × the share of the GPU its
  launch fills), bytes / (bandwidth × that share) and the minimum kernel time
  (:data:`gpulab.hardware.KERNEL_MIN_S`); the host issues each launch in
  :data:`gpulab.hardware.HOST_LAUNCH_S` (Numba's by default; CUDA C++ and CUDA Graphs for
  comparison) and goes on to the next without waiting (launches are asynchronous), and the GPU
  starts a kernel when the host has issued it and the previous kernel has finished
  (:func:`gpulab.hardware.stream_timeline`). A gap is the GPU waiting for the host: it appears
  only where kernels are shorter than the host's issue cost.
  In the simulator the launches are recorded without running the kernels' bodies (their
  order and sizes do not depend on the values; ``execute=True`` runs them, and the tests check
  that the record is the same).

:func:`draw_timelines` draws one or more timelines (one row each, on its own time scale) with
the totals and the share of the step spent in gaps in each title; :func:`timelines_table`
puts the same totals in a table.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import matplotlib.pyplot as plt
import numpy as np

from gpulab import device, hardware, recorded_runs, timing
from gpulab.instruments import launchable, python_function
from gpulab.nn import cost
from gpulab.nn.backends import OVERRIDE_ALIASES, KernelBackend
from gpulab.nn.mlp import MLP
from gpulab.nn.recipes import DIGITS
from gpulab.nn.trainer import Trainer
from gpulab.plots import wrap_title
from gpulab.tables import Column, Table

PHASE_COLOURS = {"forward": "tab:blue", "loss": "tab:purple", "backward": "tab:orange",
                 "update": "tab:green"}
GAP_COLOUR = "0.85"
# gpulab.nn.cost names the optimiser launches "<optimiser>_update"; the kernels' own names:
COST_NAME_OF_KERNEL = {"sgd_momentum_update": "sgd_update"}


class TimelineMismatchError(RuntimeError):
    """The kernel backend launched other kernels than :func:`gpulab.nn.cost.step_kernels`
    counts: the cost model no longer describes the step."""


@dataclass(frozen=True)
class RecordedLaunch:
    """One kernel launch as the backend made it. ``blocks`` and ``threads`` are (x, y, z).
    On a GPU, ``measured_s`` is its CUDA-event time (launch + kernel) and ``gap_before_s``
    the host's time since the previous launch ended (since the step began, for the first)."""

    kernel: str
    blocks: tuple[int, int, int]
    threads: tuple[int, int, int]
    measured_s: float | None = None
    gap_before_s: float | None = None

    @property
    def total_threads(self) -> int:
        return int(np.prod(self.blocks) * np.prod(self.threads))


def _dim3(value) -> tuple[int, int, int]:
    values = tuple(int(v) for v in (value if isinstance(value, tuple) else (value,)))
    return (values + (1, 1, 1))[:3]


def _kernel_class():
    """The class of gpulab's kernel objects in this process: Numba's CUDA dispatcher on a GPU,
    the simulator's kernel in the simulator."""
    from gpulab.kernels.optim import adam_update

    return type(launchable(adam_update))


def _name_of(kernel) -> str:
    function = python_function(kernel)
    return getattr(function or kernel, "__name__", type(kernel).__name__)


@contextmanager
def recording_launches(execute: bool = True, timed: bool = False):
    """Within this block, every ``kernel[blocks, threads](...)`` launch is recorded in the
    list it yields, as a :class:`RecordedLaunch`. ``execute=False`` records without running
    the kernel; ``timed=True`` (GPU tier) times each launch with CUDA events
    (:func:`gpulab.timing.time_gpu`) and the gaps between launches with
    ``time.perf_counter``. The original launch is restored on exit."""
    cls = _kernel_class()
    owned = "__getitem__" in vars(cls)
    original = cls.__getitem__
    launches: list[RecordedLaunch] = []
    clock = {"last_end": time.perf_counter()}

    def configured(kernel, configuration):
        configuration = configuration if isinstance(configuration, tuple) else (configuration,)
        blocks, threads = _dim3(configuration[0]), _dim3(configuration[1])

        def launch(*args):
            name = _name_of(kernel)
            if not execute:
                launches.append(RecordedLaunch(name, blocks, threads))
                return None
            if not timed:
                launches.append(RecordedLaunch(name, blocks, threads))
                return original(kernel, configuration)(*args)
            gap = time.perf_counter() - clock["last_end"]
            measured = timing.time_gpu(lambda: original(kernel, configuration)(*args),
                                       repeats=1, warmup=0, name=name)
            clock["last_end"] = time.perf_counter()
            launches.append(RecordedLaunch(name, blocks, threads, measured.median_s, gap))
            return None

        return launch

    cls.__getitem__ = configured
    try:
        yield launches
    finally:
        if owned:
            cls.__getitem__ = original
        else:
            del cls.__getitem__


def batch_of(widths, batch_size: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A batch of random inputs in [0, 1) and random labels for an MLP of ``widths`` (a step's
    launches depend on the sizes only; random data allows batches larger than the digits)."""
    rng = np.random.default_rng(seed)
    X = rng.random((int(batch_size), int(widths[0])), dtype=np.float32)
    y = rng.integers(0, int(widths[-1]), int(batch_size))
    return X, y


def record_step(batch_size: int = DIGITS["batch_size"], widths=DIGITS["widths"],
                activation: str = DIGITS["activation"], optimiser: str = DIGITS["optimiser"],
                seed: int = 0, execute: bool | None = None,
                timed: bool | None = None) -> list[RecordedLaunch]:
    """The kernel launches of one training step (forward, loss, backward, update) of an MLP of
    ``widths`` on the kernel backend, on a random batch of ``batch_size``.

    ``timed`` (default: in the ``gpu`` tier) times every launch and gap (see
    :func:`recording_launches`); a first, untimed step compiles the kernels and allocates the
    optimiser's state. ``execute`` (default: in the ``gpu`` tier) runs the kernels; in the
    simulator the default records without running them."""
    on_gpu = device.tier() == "gpu"
    timed = on_gpu if timed is None else bool(timed)
    execute = (on_gpu if execute is None else bool(execute)) or timed
    cost.step_kernels(widths, batch_size, activation, optimiser)  # checks the arguments
    X, y = batch_of(widths, batch_size, seed)
    model = MLP(list(widths), activation, KernelBackend(), np.float32, seed)
    trainer = Trainer(model, optimiser, batch_size=int(batch_size), progress=False)
    with np.errstate(all="ignore"):  # without execution the outputs hold no values
        if timed:
            trainer.step(X, y)  # compile, allocate the optimiser's state
            model.backend.synchronize()
        with recording_launches(execute=execute, timed=timed) as launches:
            trainer.step(X, y)
    return launches


@dataclass(frozen=True)
class TimelineEntry:
    """One kernel of the timeline: what it is, where it starts, how long it and the gap
    before it take (seconds)."""

    index: int
    kernel: str
    phase: str
    shape: str
    blocks: tuple[int, int, int]
    threads: tuple[int, int, int]
    flops: float
    bytes_moved: float
    gap_s: float
    kernel_s: float
    start_s: float
    bound: str  # "compute", "memory" or "latency" (estimated), "measured" on a GPU


@dataclass
class StepTimeline:
    """One training step's kernels and gaps, where they come from, and their totals."""

    widths: list[int]
    batch_size: int
    optimiser: str
    entries: list[TimelineEntry]
    origin: str  # "gpu" (measured) or "model" (estimated)
    device: str
    label: str
    kernel_label: str
    gap_label: str
    copy_s: float | None = None  # model: the batch's host copies, not drawn
    meta: dict = field(default_factory=dict)

    @property
    def launches(self) -> int:
        return len(self.entries)

    @property
    def kernels_s(self) -> float:
        return float(sum(e.kernel_s for e in self.entries))

    @property
    def gaps_s(self) -> float:
        return float(sum(e.gap_s for e in self.entries))

    @property
    def step_s(self) -> float:
        """From the start of the step to the end of its last kernel: kernels plus gaps."""
        return self.kernels_s + self.gaps_s

    @property
    def gap_fraction(self) -> float:
        """The share of the step spent in gaps between kernels, not in kernels."""
        return self.gaps_s / self.step_s if self.step_s > 0 else 0.0

    @property
    def flops(self) -> float:
        return float(sum(e.flops for e in self.entries))

    def summary(self) -> str:
        """The totals in one line."""
        return (f"batch {self.batch_size:,}: {self.launches} launches; kernels "
                f"{_us(self.kernels_s)}, gaps {_us(self.gaps_s)}, step {_us(self.step_s)}: "
                f"{100 * self.gap_fraction:.1f}% of the step in gaps")

    def table(self) -> Table:
        """Every launch: kernel, grid, block, what it computes, FLOPs, bytes, gap, kernel."""
        rows = [[e.index, e.kernel, e.phase, _dims(e.blocks), _dims(e.threads), e.flops,
                 e.bytes_moved, e.gap_s * 1e6, e.kernel_s * 1e6, e.shape] for e in self.entries]
        rows.append([None, "total", "", "", "", self.flops,
                     sum(e.bytes_moved for e in self.entries), self.gaps_s * 1e6,
                     self.kernels_s * 1e6, ""])
        return Table([Column("#"), Column("kernel"), Column("phase"),
                      Column("blocks", align="right"), Column("threads", align="right"),
                      Column("FLOPs", number_format="{:,.0f}"),
                      Column("bytes", number_format="{:,.0f}"),
                      Column("gap", "µs", "{:.2f}"), Column("kernel", "µs", "{:.3f}"),
                      Column("what")], rows,
                     notes=[f"kernels: {self.kernel_label}; gaps: {self.gap_label}; "
                            f"{self.label}"])

    def draw(self, ax=None):
        """This timeline as one row of bars (see :func:`draw_timelines`)."""
        if ax is None:
            return draw_timelines([self])
        _draw_row(self, ax)
        return ax.figure


def _us(seconds: float) -> str:
    """Microseconds with three significant digits (whole numbers from 100 µs)."""
    value = seconds * 1e6
    return f"{value:,.0f} µs" if value >= 100 else f"{value:.3g} µs"


def _dims(values) -> str:
    shown = list(values)
    while len(shown) > 1 and shown[-1] == 1:
        shown.pop()
    return " x ".join(map(str, shown))


def _match(launches: list[RecordedLaunch], costs: list[cost.KernelCost]) -> None:
    names = [COST_NAME_OF_KERNEL.get(k, OVERRIDE_ALIASES.get(k, k))
             for k in (launch.kernel for launch in launches)]
    counted = [c.kernel for c in costs]
    if names != counted:
        raise TimelineMismatchError(
            f"the kernel backend launched {len(names)} kernels ({', '.join(names)}) where "
            f"gpulab.nn.cost.step_kernels counts {len(counted)} ({', '.join(counted)})")


def step_timeline(batch_size: int = DIGITS["batch_size"], widths=DIGITS["widths"],
                  gpu=hardware.COURSE_GPU, activation: str = DIGITS["activation"],
                  optimiser: str = DIGITS["optimiser"], seed: int = 0,
                  host_api: str = "numba") -> StepTimeline:
    """The timeline of one training step: measured on this GPU (tier ``gpu``), otherwise
    estimated by gpulab's GPU model of ``gpu``, launched through ``host_api`` (see the
    module docstring)."""
    widths = [int(w) for w in widths]
    batch_size = int(batch_size)
    costs = cost.step_kernels(widths, batch_size, activation, optimiser)
    measured = device.tier() == "gpu"
    launches = record_step(batch_size, widths, activation, optimiser, seed)
    _match(launches, costs)
    entries, clock = [], 0.0
    if measured:
        spec = timing.local_gpu_spec()
        name = device.PROBE.device_name or "unknown GPU"
        for k, (launch, c) in enumerate(zip(launches, costs, strict=True), start=1):
            clock += launch.gap_before_s
            entries.append(TimelineEntry(k, launch.kernel, c.phase, c.shape, launch.blocks,
                                         launch.threads, c.flops, c.bytes_moved,
                                         launch.gap_before_s, launch.measured_s, clock,
                                         "measured"))
            clock += launch.measured_s
        return StepTimeline(
            widths, batch_size, optimiser, entries, "gpu", name,
            f"measured on {name}, each launch waited for so that it could be timed alone",
            "launch + kernel, timed with CUDA events",
            "host work between launches (checks, allocations, copies, Python), timed with "
            "time.perf_counter; on a free-running stream the host issues the next launch "
            "while the GPU runs, hiding what is shorter than the kernel",
            meta={"spec": spec.key if spec else None})
    return _modelled_timeline(launches, costs, widths, batch_size, optimiser, gpu, activation,
                              host_api)


def _modelled_timeline(launches, costs, widths, batch_size, optimiser, gpu, activation,
                       host_api) -> StepTimeline:
    spec = hardware.get_gpu(gpu)
    run = recorded_runs.latest_gpu_run() if host_api == "numba" else None
    measured = run is not None and bool(run.launch_overhead_s)
    issue_s = run.launch_overhead_s if measured else hardware.HOST_LAUNCH_S[host_api]
    issue_source = (f"measured on {run.device} in a recorded run ({run.date[:10]})" if measured
                    else f"gpulab.hardware.HOST_LAUNCH_S[{host_api!r}]")
    estimates = [hardware.estimate_time(spec, c.flops, c.bytes_moved, "fp32", launches=1,
                                        blocks=int(np.prod(launch.blocks)),
                                        threads_per_block=int(np.prod(launch.threads)))
                 for launch, c in zip(launches, costs, strict=True)]
    events = hardware.stream_timeline([e.gpu_s for e in estimates], issue_s)
    entries, previous_end = [], 0.0
    for k, (launch, c, est, event) in enumerate(zip(launches, costs, estimates, events,
                                                     strict=True), start=1):
        parts = {"memory": est.memory_s, "compute": est.compute_s, "latency": est.floor_s}
        entries.append(TimelineEntry(k, launch.kernel, c.phase, c.shape, launch.blocks,
                                     launch.threads, c.flops, c.bytes_moved,
                                     event.start_s - previous_end, event.gpu_s, event.start_s,
                                     max(parts, key=parts.get)))
        previous_end = event.end_s
    copy_s = cost.estimate_step(widths, batch_size, spec, activation, optimiser).transfer_s
    api = hardware.HOST_LAUNCH_NAMES[host_api]
    return StepTimeline(
        widths, batch_size, optimiser, entries, "model", spec.name,
        f"estimated by gpulab's GPU model of the {spec.name}, launched through {api}",
        "the largest of FLOPs / fp32 peak, bytes / memory bandwidth (both over the share of "
        f"the GPU the launch fills) and the {hardware.KERNEL_MIN_S * 1e6:.3g} µs minimum "
        "kernel time",
        f"the GPU waiting for the host, which issues each launch in {issue_s * 1e6:.3g} µs "
        f"({issue_source}) while the GPU runs the previous kernel", copy_s=copy_s,
        meta={"spec": spec.key, "host_api": host_api, "issue_s": issue_s,
              "launches": "recorded without running the kernels' bodies"})


def host_api_timelines(batch_size: int = DIGITS["batch_size"], widths=DIGITS["widths"],
                       gpu=hardware.COURSE_GPU, apis=hardware.HOST_APIS,
                       **options) -> list[StepTimeline]:
    """The same step modelled with each way of launching in ``apis`` (Numba, CUDA C++, a CUDA
    Graph): the kernels are the same; only the host's issue cost per launch changes."""
    widths = [int(w) for w in widths]
    activation = options.get("activation", DIGITS["activation"])
    optimiser = options.get("optimiser", DIGITS["optimiser"])
    costs = cost.step_kernels(widths, int(batch_size), activation, optimiser)
    launches = record_step(int(batch_size), widths, activation, optimiser,
                           options.get("seed", 0), execute=False, timed=False)
    _match(launches, costs)
    return [_modelled_timeline(launches, costs, widths, int(batch_size), optimiser, gpu,
                               activation, api) for api in apis]


def _draw_row(timeline: StepTimeline, ax) -> None:
    scale = 1e6  # µs
    for e in timeline.entries:
        gap_start = (e.start_s - e.gap_s) * scale
        ax.broken_barh([(gap_start, e.gap_s * scale)], (0.3, 0.4), facecolors=GAP_COLOUR,
                       edgecolor="0.6", linewidth=0.4, hatch="///")
        colour = PHASE_COLOURS.get(e.phase, "tab:gray")
        # the edge keeps a kernel visible even where it is far shorter than a pixel
        ax.broken_barh([(e.start_s * scale, e.kernel_s * scale)], (0.1, 0.8), facecolors=colour,
                       edgecolor=colour, linewidth=1.2)
    ax.set_xlim(0, timeline.step_s * scale * 1.01)
    ax.set_ylim(0, 1)
    ax.set_yticks([])
    ax.set_xlabel("time since the step began (µs)")
    ax.set_title(wrap_title(f"{timeline.summary()} — {timeline.label}", 110), fontsize=9)
    ax.grid(True, axis="x", alpha=0.3)


def draw_timelines(timelines, title: str | None = None):
    """One row per timeline (each on its own time scale): kernels as bars coloured by phase,
    gaps hatched grey; each title gives the totals and the share of the step in gaps."""
    from matplotlib.patches import Patch

    timelines = [timelines] if isinstance(timelines, StepTimeline) else list(timelines)
    if not timelines:
        raise ValueError("draw_timelines needs at least one StepTimeline")
    fig, axes = plt.subplots(len(timelines), 1, figsize=(12, 1.9 * len(timelines) + 0.9),
                             layout="constrained", squeeze=False)
    for timeline, ax in zip(timelines, axes[:, 0], strict=True):
        _draw_row(timeline, ax)
    first = timelines[0]
    handles = [Patch(color=c, label=f"{phase} kernel") for phase, c in PHASE_COLOURS.items()
               if any(e.phase == phase for t in timelines for e in t.entries)]
    handles.append(Patch(facecolor=GAP_COLOUR, edgecolor="0.6", hatch="///",
                         label=f"gap: {first.gap_label}"))
    fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 5),
               fontsize=8)
    fig.suptitle(title or wrap_title(f"One training step of MLP {'-'.join(map(str, first.widths))}"
                                     f" ({first.optimiser}); kernels: {first.kernel_label}",
                                     120), fontsize=10)
    return fig


def timelines_table(timelines) -> Table:
    """The totals of each timeline, one row each, with where they come from underneath."""
    timelines = [timelines] if isinstance(timelines, StepTimeline) else list(timelines)
    rows = [[t.batch_size, t.launches, _us(t.kernels_s), _us(t.gaps_s), _us(t.step_s),
             100 * t.gap_fraction] for t in timelines]
    copies = [t for t in timelines if t.copy_s is not None]
    notes = ["; ".join(dict.fromkeys(t.label for t in timelines))]
    if copies:
        notes.append("not drawn: the batch's copies between host and GPU, " + ", ".join(
            f"{_us(t.copy_s)} at batch {t.batch_size:,}" for t in copies)
            + " (pageable memory, gpulab.nn.cost)")
    return Table([Column("batch", number_format="{:,}"), Column("launches"), Column("kernels"),
                  Column("gaps"), Column("step"), Column("in gaps", "%", "{:.1f}")],
                 rows, notes=notes)


def describe_gaps(small: StepTimeline, large: StepTimeline) -> str:
    """A sentence, computed from two timelines of the same step at two batch sizes, on how the
    gaps' share of the step changes with the batch."""
    shares = (f"at batch {small.batch_size:,}, {100 * small.gap_fraction:.1f}% of the step is "
              f"gaps between launches; at batch {large.batch_size:,}, "
              f"{100 * large.gap_fraction:.1f}% ({small.label})")
    if small.gap_fraction > 0.5 >= large.gap_fraction:
        verdict = (f"The gaps dominate the small batch; at the large one the kernels' work "
                   f"outweighs its {large.launches} launches.")
    elif small.gap_fraction > 0.5:
        verdict = ("The gaps dominate both: even the large batch leaves the kernels less work "
                   "than their launches cost.")
    else:
        verdict = "Even the small batch gives the kernels more work than their launches cost."
    return f"{shares[0].upper()}{shares[1:]}. {verdict}"


def step_estimates_table(widths, batch_sizes, gpu=hardware.COURSE_GPU) -> Table:
    """One training step at each batch size by gpulab's GPU model (:func:`gpulab.nn.cost.
    estimate_step`): step time, samples per second, the launches, the kernels' own work
    without their launches, the batch's host copy (pageable memory), and what bounds it."""
    spec = hardware.get_gpu(gpu)
    rows = []
    for batch in batch_sizes:
        step = cost.estimate_step(list(widths), int(batch), spec)
        alone = step.gpu_s  # the kernels' own GPU time, without the waits for launches
        rows.append([batch, _us(step.time_s), step.samples_per_s, _us(step.launch_s),
                     _us(alone), _us(step.transfer_s), step.bound()])
    return Table([Column("batch", number_format="{:,}"), Column("step"),
                  Column("samples/s", number_format="{:,.0f}"), Column("launches"),
                  Column("kernels alone"), Column("copy"), Column("bound")], rows,
                 notes=[cost.estimate_step(list(widths), 1, spec).label])


__all__ = ["COST_NAME_OF_KERNEL", "PHASE_COLOURS", "RecordedLaunch", "StepTimeline",
           "TimelineEntry", "TimelineMismatchError", "batch_of", "describe_gaps", "draw_timelines",
           "host_api_timelines",
           "record_step", "recording_launches", "step_estimates_table", "step_timeline",
           "timelines_table"]
