"""Chapter 08's exercises: napkin math about a GPU, checked against gpulab's roofline model of a
training step (:func:`gpulab.nn.cost.estimate_step`), and a kernel whose one launch handles any
batch.

- :func:`check_launch_bound` takes your ``first_batch_not_launch_bound(widths, gpu)``: the
  smallest batch size at which one training step of an MLP with these widths, on the named
  GPU, is no longer **launch-bound** (its kernels' launches no longer the largest part of its
  time). Checked against the model's answer (the smallest batch where
  ``estimate_step(...).bound()`` is not ``"launch"``).
- :func:`check_throughput` takes your ``samples_per_second(widths, batch, gpu)``: the training
  samples one step gets through per second at that batch, checked against the model's
  ``estimate_step(...).samples_per_s`` from a batch of 1 to a million.
- :func:`check_bias_relu_batch` takes your ``@cuda.jit`` kernel ``bias_relu_batch(Z, b, out)``:
  ``out = ReLU(Z + b)`` for a batch of samples (rows) with a **fixed grid** that does not
  depend on the batch: the grid's rows of threads step through the samples (a grid-stride loop
  over the batch). :func:`batch_sweep` then runs the digits network's hidden layer on it at
  every batch size of the chapter.

The first two are predictions from a few numbers per step (launches, FLOPs, bytes, bytes
copied) and the GPU's datasheet (``gpulab.hardware``), so they are judged within a tolerance,
not exactly: :data:`TOLERANCE`. Networks, GPUs and batches are random; besides a few drawn as
before, the check draws cases where each known mistake (:data:`LAUNCH_BOUND_MISTAKES`,
:data:`THROUGHPUT_MISTAKES`) gives an answer clearly outside the tolerance, and a mistake is
named only when it explains the answers in every case. A failure names the seed.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from gpulab import hardware
from gpulab.exercises.checks import CheckFailedError, CheckResult, call_learner
from gpulab.exercises.mistakes import Mistake
from gpulab.exercises.spec import CheckSpec
from gpulab.nn import cost

# A prediction within this factor of the model's answer is right: the napkin leaves out what a
# step does whatever the batch (reading the weights, the optimiser's update), which shifts the
# answer by up to ~25 % for the networks drawn here.
TOLERANCE = 1.3
WIDTH_RANGE = (16, 257)  # the networks drawn at random
WIDE_RANGE = (16, 1025)  # ... and those drawn so that a mistake shows
CASES = 6
# A case shows a mistake when the mistake's answer is this factor away from the napkin's (and
# so, the napkin being within ~25 % of the model, well outside TOLERANCE of the model's).
SHOWS = 1.7
AGREES = 1.15  # ... and on which the napkin is this close to the model
CANDIDATES = 400  # cases drawn, at most, to find one that shows each mistake
NEAR = 1.05  # an answer this close to a mistake's (or within 1 of it) is that mistake


def plain(value) -> str:
    """A number as a learner reads it: 15,793 or 0.0042 or 3.1e+06 (never np.int64(...))."""
    value = float(value)
    if value != value or value in (math.inf, -math.inf):
        return str(value)
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:,.4g}" if 1e-3 <= abs(value) < 1e7 else f"{value:.3g}"


def a_number(got, what: str, where: str) -> float:
    """``got`` as a float if it is one real, finite, positive number (a Python or NumPy int
    or float, not a bool, an array, a string or None); otherwise a plain-words failure."""
    if isinstance(got, np.ndarray) and got.size == 1:
        got = got.item()
    if isinstance(got, bool) or not isinstance(got, numbers.Real):
        kind = "None (did you forget `return`?)" if got is None else \
            f"a {type(got).__name__} ({str(got)[:40]})"
        raise CheckFailedError(f"{what} must be a number; your function returned {kind} "
                               f"{where}.", f"return a single number: {what}.")
    value = float(got)
    if not math.isfinite(value) or value <= 0:
        raise CheckFailedError(f"{what} must be a positive, finite number; your function "
                               f"returned {plain(value)} {where}.",
                               "check for a division by zero or a subtraction the wrong way "
                               "round.")
    return value


def model_crossover(widths, gpu) -> int:
    """The model's answer to exercise 1: the smallest batch at which
    ``cost.estimate_step(widths, batch, gpu).bound()`` is not "launch" (1 if even a batch of
    1 is not launch-bound). The parts grow with the batch and the launches do not, so a
    doubling search and a bisection find it."""
    def launch_bound(batch: int) -> bool:
        return cost.estimate_step(widths, batch, gpu).bound() == "launch"

    if not launch_bound(1):
        return 1
    low, high = 1, 2
    while launch_bound(high):
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if launch_bound(middle) else (low, middle)
    return high


def within(got: float, want: float, factor: float = TOLERANCE) -> bool:
    return want / factor <= got <= want * factor


def near(got: float, value: float | None) -> bool:
    """Is ``got`` this value, as a learner's own arithmetic (rounded up, or not) gives it?"""
    return value is not None and (within(got, value, NEAR) or abs(got - value) <= 1)


def cost_launches(widths) -> int:
    """Kernel launches of one training step (Adam), as the model counts them."""
    return len(cost.step_kernels(widths, 1))


@dataclass(frozen=True)
class Parts:
    """One case (an MLP's ``widths`` on a named ``gpu``) as a napkin sees it: the step's
    launches' time, and what one more sample adds to each part (seconds), with the variants the
    known mistakes use: the forward pass's FLOPs alone, the bf16 peak (None where the GPU has
    none), the copy at the link's peak."""

    widths: tuple[int, ...]
    gpu: str
    launches: int
    launch: float
    compute: float
    memory: float
    transfer: float
    forward_compute: float
    bf16_compute: float | None
    peak_transfer: float

    @classmethod
    def of(cls, widths, gpu) -> Parts:
        spec = hardware.get_gpu(gpu)
        one, two = cost.step_kernels(widths, 1), cost.step_kernels(widths, 2)

        def added(kernels_one, kernels_two, what):
            return sum(getattr(k, what) for k in kernels_two) - sum(getattr(k, what)
                                                                    for k in kernels_one)

        flops = added(one, two, "flops")
        forward = added([k for k in one if k.phase == "forward"],
                        [k for k in two if k.phase == "forward"], "flops")
        copied = cost.step_transfer_bytes(widths, 2) - cost.step_transfer_bytes(widths, 1)
        try:
            bf16 = flops / spec.peak_flops_for("bf16")
        except (KeyError, ValueError):
            bf16 = None
        return cls(tuple(int(w) for w in widths), str(gpu), len(one),
                   len(one) * hardware.LAUNCH_OVERHEAD_S, flops / spec.peak_flops_for("fp32"),
                   added(one, two, "bytes_moved") / spec.memory_bandwidth_bytes_per_s,
                   copied / spec.host_pageable_bytes_per_s,
                   forward / spec.peak_flops_for("fp32"), bf16,
                   copied / spec.host_link_bytes_per_s)

    @property
    def work(self) -> float:
        """Per sample, the kernels' work: compute and memory overlap, the larger counts."""
        return max(self.compute, self.memory)

    @property
    def largest(self) -> str:
        return max(("compute", "memory", "transfer"), key=lambda part: getattr(self, part))

    def napkin_crossover(self) -> float:
        return self.launch / max(self.compute, self.memory, self.transfer)

    def napkin_throughput(self, batch: int) -> float:
        return batch / (max(self.launch, batch * self.work) + batch * self.transfer)

    def batches(self) -> list[int]:
        """Exercise 2's batches: 1, a quarter of the napkin's crossover, it, 16 times it, and
        a million (where only the per-sample parts matter)."""
        crossover = max(int(math.ceil(self.napkin_crossover())), 1)
        return sorted({1, max(crossover // 4, 1), crossover, 16 * crossover, 1 << 20})

    def __str__(self) -> str:
        return f"widths {list(self.widths)}, {self.gpu}"


def _random_widths(rng: np.random.Generator, sizes: tuple[int, int]) -> list[int]:
    low, high = np.log(sizes[0]), np.log(sizes[1])
    return [int(np.exp(rng.uniform(low, high))) for _ in range(int(rng.integers(2, 6)))]


def _random_case(rng: np.random.Generator, sizes=WIDTH_RANGE) -> Parts:
    """A small MLP on a random GPU that is launch-bound for the first few batch sizes (so that
    the question has an answer above 1)."""
    while True:
        widths = ([int(w) for w in rng.integers(*sizes, size=int(rng.integers(2, 5)))]
                  if sizes == WIDTH_RANGE else _random_widths(rng, sizes))
        parts = Parts.of(widths, str(rng.choice(list(hardware.GPUS))))
        if parts.napkin_crossover() >= 6:
            return parts


def _drawn_cases(rng: np.random.Generator, random_cases: int, answers, shows: Callable,
                 agrees: Callable) -> list[Parts]:
    """The digits network on the course GPU, ``random_cases`` random ones, then, for each of
    the wrong ``answers`` that ``shows(answer, parts)`` says none of them shows, the first of
    up to :data:`CANDIDATES` wider random cases that shows it and on which the per-sample
    napkin ``agrees`` with the model (one case may show several)."""
    cases = [Parts.of([64, 128, 10], hardware.COURSE_GPU)]
    cases += [_random_case(rng) for _ in range(random_cases)]
    candidates = (_random_case(rng, WIDE_RANGE) for _ in range(CANDIDATES))
    for mistake in answers:
        if any(shows(mistake, case) for case in cases):
            continue
        for candidate in candidates:
            if shows(mistake, candidate) and agrees(candidate):
                cases.append(candidate)
                break
    return cases


@dataclass(frozen=True)
class WrongAnswer:
    """A known wrong answer: what the learner did, its ``value`` for a case (exercise 1:
    ``value(parts)``; exercise 2: ``value(parts, batch)``; None where it does not apply) and
    the hint."""

    did: str
    value: Callable
    hint: str


# --- exercise 1: where a step stops being launch-bound ------------------------------------------

LAUNCH_BOUND_STUB_HINT = (
    "the launches cost the same at every batch; every other part grows with it. Find what one "
    "more sample adds to each part's time, and the batch at which the largest of those, times "
    "the batch, reaches the launches' time."
)
COMPARE_EACH = ("the model compares each part with the launches on its own: the step stops "
                "being launch-bound when the largest one part catches up")


def _over(parts: Parts, *per_sample: float | None) -> float | None:
    return None if None in per_sample else parts.launch / max(per_sample)


CROSSOVER_ANSWERS = (
    WrongAnswer("one launch instead of the step's",
                lambda p: _over(p, p.compute, p.memory, p.transfer) / p.launches,
                "a step launches every kernel of cost.step_kernels, each costing "
                "hardware.LAUNCH_OVERHEAD_S of the host's time."),
    WrongAnswer("the launch overhead in microseconds instead of seconds",
                lambda p: _over(p, p.compute, p.memory, p.transfer) * 1e6,
                f"keep every time in seconds: hardware.LAUNCH_OVERHEAD_S is "
                f"{hardware.LAUNCH_OVERHEAD_S:.3g} s."),
    WrongAnswer("the sum of all three parts instead of the largest",
                lambda p: p.launch / (p.compute + p.memory + p.transfer),
                COMPARE_EACH + " (section 1), not all of them added."),
    WrongAnswer("compute + memory instead of the larger of the two",
                lambda p: _over(p, p.compute + p.memory, p.transfer),
                "inside a kernel the arithmetic and the memory traffic overlap: a kernel takes "
                "the larger of the two, not their sum."),
    WrongAnswer("the copy added to the kernels' work",
                lambda p: p.launch / (p.work + p.transfer),
                COMPARE_EACH + ": the copy is one part, the kernels' work (the larger of "
                "compute and memory) another."),
    WrongAnswer("the forward pass's FLOPs alone",
                lambda p: _over(p, p.forward_compute, p.memory, p.transfer),
                "a training step also runs the backward pass and the optimiser's update: count "
                "the FLOPs of every kernel the step launches, not only the forward ones."),
    WrongAnswer("the bf16 peak for an fp32 model",
                lambda p: _over(p, p.bf16_compute, p.memory, p.transfer),
                "the model trains in float32: use the GPU's fp32 peak, not its bf16 (tensor "
                "core) one, which is many times higher."),
    WrongAnswer("the kernels' work without the copy from the host",
                lambda p: _over(p, p.compute, p.memory),
                "each step also copies its batch from the host (cost.step_transfer_bytes) from "
                "pageable memory (gpu.host_pageable_bytes_per_s): for a small network that copy "
                "is often the largest per-sample part."),
    WrongAnswer("the copy at the link's peak (host_link_bytes_per_s)",
                lambda p: _over(p, p.compute, p.memory, p.peak_transfer),
                "the batch is an ordinary NumPy array (pageable memory): the driver copies it "
                "through a staging buffer at gpu.host_pageable_bytes_per_s, well below the "
                "link's peak gpu.host_link_bytes_per_s (which pinned memory nears)."),
    WrongAnswer("the FLOPs alone (compute)", lambda p: _over(p, p.compute),
                "compare all three per-sample parts (compute, device memory, the copy from the "
                "host) and take the largest."),
    WrongAnswer("device memory alone", lambda p: _over(p, p.memory),
                "compare compute, device memory and the copy from the host."),
    WrongAnswer("the copy from the host alone", lambda p: _over(p, p.transfer),
                "compare all three per-sample parts, not only the copy."),
)


@dataclass
class Crossovers:
    """Exercise 1's evidence: the learner's answer (``got``) and the model's (``want``) for
    every case."""

    seed: int
    cases: list[Parts]
    got: list[float]
    want: list[int]

    @property
    def wrong(self) -> int:
        """The first case the answer is wrong in (-1 if none)."""
        return next((k for k, (p, g, w) in enumerate(zip(self.cases, self.got, self.want,
                                                         strict=True))
                     if not within(g, w) and not within(g, p.napkin_crossover())), -1)

    @property
    def case(self) -> Parts:
        return self.cases[self.wrong]

    @property
    def where(self) -> str:
        return f"{self.case}; seed={self.seed}"

    def explained_by(self, answer: WrongAnswer) -> bool:
        values = [answer.value(p) for p in self.cases]
        return (any(v is not None for v in values)
                and all(v is None or near(g, v) for g, v in zip(self.got, values, strict=True)))

    def said(self) -> str:
        k = self.wrong
        return (f"for widths {list(self.case.widths)} on the {self.case.gpu}, the model stops "
                f"being launch-bound at batch {plain(self.want[k])}; you predicted "
                f"{plain(self.got[k])}")


def _named(answer: WrongAnswer, evidence_type: str) -> Mistake:
    return Mistake(answer.did, lambda e: e.explained_by(answer),
                   lambda e: f"{e.said()}, which is what {answer.did} gives, in every case drawn",
                   answer.hint)


LAUNCH_BOUND_MISTAKES = tuple(_named(a, "crossover") for a in CROSSOVER_ANSWERS) + (
    Mistake("a time (or a share of one) instead of a batch size",
            lambda e: e.got[e.wrong] < 1,
            lambda e: f"{e.said()}: less than one sample",
            "a batch size is a count of samples (1 or more): did you return a time, or the "
            "launches' share of it?"),
    Mistake("samples per second instead of a batch size",
            lambda e: e.got[e.wrong] > 1000 * e.want[e.wrong],
            lambda e: f"{e.said()}: far too large",
            "did you return samples per second? The question is the batch size."),
    Mistake("another answer", lambda e: True,
            lambda e: f"{e.said()} (more than a factor {TOLERANCE} away)",
            LAUNCH_BOUND_STUB_HINT),
)
LAUNCH_BOUND = CheckSpec(
    "launch_bound", "first_batch_not_launch_bound(widths, gpu) -> number",
    LAUNCH_BOUND_STUB_HINT, LAUNCH_BOUND_MISTAKES, allowed_gpulab=("gpulab",),
    title="1. where a step stops being launch-bound",
    call="check_launch_bound(first_batch_not_launch_bound)",
    holds=f"within a factor {TOLERANCE} of the roofline model's batch at which "
          "`cost.estimate_step(...).bound()` stops being `\"launch\"` (or of the per-sample "
          "napkin), for the digits network on an H100, five random small networks and GPUs, "
          "and wider ones drawn so that each known mistake is clearly outside the tolerance",
    also="a result that is not a positive number (None, an array, a string); numbers are "
         "printed plainly; a mistake is named only when it explains every case")


def _shows_crossover(answer: WrongAnswer, parts: Parts) -> bool:
    value = answer.value(parts)
    return value is not None and not within(value, parts.napkin_crossover(), SHOWS)


def check_launch_bound(function, seed: int | None = None, show: bool = True) -> CheckResult:
    """Check ``function(widths, gpu)`` (``gpu`` a key of :data:`gpulab.hardware.GPUS`, e.g.
    ``gpulab.hardware.COURSE_GPU``) on random MLPs and GPUs: the answer must be a number
    within a factor :data:`TOLERANCE` of :func:`model_crossover` (or of the per-sample napkin).

    Diagnoses (:data:`LAUNCH_BOUND_MISTAKES`, in order): one launch instead of the step's; the
    overhead in microseconds; the sum of the parts; compute + memory; the copy added to the
    kernels' work; the forward FLOPs alone; the bf16 peak; the copy left out, or at the link's
    peak; compute, memory or the copy alone; a time or samples per second instead of a batch;
    not a number (None, an array, a string). Each is drawn a case where it is clearly
    wrong."""

    def body(seed: int) -> str:
        rng = np.random.default_rng(seed)
        cases = _drawn_cases(rng, CASES - 1, CROSSOVER_ANSWERS, _shows_crossover,
                             lambda p: within(p.napkin_crossover(),
                                              model_crossover(list(p.widths), p.gpu), AGREES))
        got = []
        for parts in cases:
            call = f"first_batch_not_launch_bound({list(parts.widths)}, {parts.gpu!r})"
            got.append(a_number(call_learner(function, list(parts.widths), parts.gpu,
                                             stub_hint=LAUNCH_BOUND_STUB_HINT, call=call),
                                "the batch size", f"({parts}; seed={seed})"))
        evidence = Crossovers(seed, cases, got,
                              [model_crossover(list(p.widths), p.gpu) for p in cases])
        if evidence.wrong >= 0:
            LAUNCH_BOUND.reject(evidence)
        return (f"all {len(cases)} predictions within a factor {TOLERANCE} of the model "
                f"(seed={seed}).")

    return LAUNCH_BOUND.run(body, seed, show, learner=(function,))


# --- exercise 2: samples per second ---------------------------------------------------------------

THROUGHPUT_STUB_HINT = (
    "the host issues the step's launches (the same at every batch) ahead, while the GPU runs "
    "the kernels before: the two overlap, so that part takes the larger of the launches and "
    "the kernels' work (compute and memory overlap too: the larger of the two, per sample); "
    "then add every sample's copy from the host, which does not overlap; samples per second = "
    "batch / step time."
)
NO_OVERLAP = ("a copy from pageable memory keeps the host busy until it is done: in the model it "
              "comes before the kernels and overlaps nothing, so its time adds")


def _step(parts: Parts, batch: int, launch: float | None = None, work: float | None = None,
          copy: float | None = None) -> float:
    launch = parts.launch if launch is None else launch
    work = parts.work if work is None else work
    copy = parts.transfer if copy is None else copy
    return max(launch, batch * work) + batch * copy


THROUGHPUT_ANSWERS = (
    WrongAnswer("the launches left out", lambda p, b: 1 / (p.work + p.transfer),
                "the host's time to issue the step's launches (every kernel of "
                "cost.step_kernels, each hardware.LAUNCH_OVERHEAD_S) is the same at every "
                "batch: at small batches the GPU waits for it most of the time."),
    WrongAnswer("the launches and the kernels' work added",
                lambda p, b: b / (p.launch + b * (p.work + p.transfer)),
                "launches are asynchronous: the host issues the next while the GPU runs the "
                "last, so the launches and the kernels overlap, and the step takes the larger "
                "of the two (chapter 07's timeline)."),
    WrongAnswer("every part added (launches, compute, memory and the copy)",
                lambda p, b: b / (p.launch + b * (p.compute + p.memory + p.transfer)),
                "only the copy adds: the launches overlap the kernels, and inside a kernel "
                "the arithmetic overlaps the memory traffic."),
    WrongAnswer("compute + memory instead of the larger of the two",
                lambda p, b: b / _step(p, b, work=p.compute + p.memory),
                "inside a kernel the arithmetic and the memory traffic overlap: per sample the "
                "kernels' work is the larger of the two, not their sum."),
    WrongAnswer("the copy from the host left out",
                lambda p, b: b / max(p.launch, b * p.work),
                "every step copies its batch from the host first (cost.step_transfer_bytes at "
                "gpu.host_pageable_bytes_per_s: the batch is an ordinary NumPy array)."),
    WrongAnswer("the copy overlapping the launches and the kernels",
                lambda p, b: b / max(p.launch, b * p.work, b * p.transfer),
                NO_OVERLAP + "."),
    WrongAnswer("the copy at the link's peak instead of the pageable rate",
                lambda p, b: b / _step(p, b, copy=p.peak_transfer),
                "the batch is an ordinary NumPy array (pageable memory), copied at "
                "gpu.host_pageable_bytes_per_s, well below the link's peak "
                "gpu.host_link_bytes_per_s."),
    WrongAnswer("the forward pass's FLOPs alone",
                lambda p, b: b / _step(p, b, work=max(p.forward_compute, p.memory)),
                "a training step also runs the backward pass and the optimiser's update: count "
                "the FLOPs of every kernel the step launches."),
    WrongAnswer("the bf16 peak for an fp32 model",
                lambda p, b: None if p.bf16_compute is None else
                b / _step(p, b, work=max(p.bf16_compute, p.memory)),
                "the model trains in float32: use the GPU's fp32 peak, not its bf16 one."),
    WrongAnswer("one launch per step",
                lambda p, b: b / _step(p, b, launch=p.launch / p.launches),
                "a step launches every kernel of cost.step_kernels, each "
                "hardware.LAUNCH_OVERHEAD_S."),
    WrongAnswer("the step's time in seconds, not samples per second",
                lambda p, b: _step(p, b), "divide the batch by the step's time."),
    WrongAnswer("samples per millisecond", lambda p, b: b / _step(p, b) / 1e3,
                "per second: keep times in seconds."),
    WrongAnswer("samples per microsecond", lambda p, b: b / _step(p, b) / 1e6,
                "per second: keep times in seconds."),
)


@dataclass
class Throughputs:
    """Exercise 2's evidence: per case, the learner's samples/s (``got``) and the model's
    (``want``) at each batch."""

    seed: int
    cases: list[Parts]
    got: list[dict]
    want: list[dict]
    first: tuple[int, int] = field(init=False, default=(-1, 0))

    def __post_init__(self):
        for k, (got, want) in enumerate(zip(self.got, self.want, strict=True)):
            wrong = [b for b in got if not within(got[b], want[b])]
            if wrong:
                self.first = (k, wrong[0])
                return

    @property
    def where(self) -> str:
        k, batch = self.first
        return f"{self.cases[k]}, batch {plain(batch)}; seed={self.seed}"

    def explained_by(self, answer: WrongAnswer) -> bool:
        defined = False
        for parts, got in zip(self.cases, self.got, strict=True):
            for batch, value in got.items():
                mistake = answer.value(parts, batch)
                if mistake is None:
                    continue
                defined = True
                if not within(value, mistake, NEAR):
                    return False
        return defined

    def said(self) -> str:
        k, batch = self.first
        return (f"the model says {plain(self.want[k][batch])} samples/s; you predicted "
                f"{plain(self.got[k][batch])}")


THROUGHPUT_MISTAKES = tuple(_named(a, "throughput") for a in THROUGHPUT_ANSWERS) + (
    Mistake("another answer", lambda e: True,
            lambda e: f"{e.said()} (more than a factor {TOLERANCE} away)", THROUGHPUT_STUB_HINT),
)
THROUGHPUT = CheckSpec(
    "throughput", "samples_per_second(widths, batch, gpu) -> number", THROUGHPUT_STUB_HINT,
    THROUGHPUT_MISTAKES, allowed_gpulab=("gpulab",), title="2. samples per second",
    call="check_throughput(samples_per_second)",
    holds=f"within a factor {TOLERANCE} of the model's `cost.estimate_step(...).samples_per_s` "
          "at batches from 1 to a million, for the digits network on an H100, random small "
          "networks and GPUs, and wider ones drawn so that each known mistake is clearly "
          "outside the tolerance",
    also="a result that is not a positive number; a mistake is named only when it explains "
         "every case and batch")


def _shows_throughput(answer: WrongAnswer, parts: Parts) -> bool:
    for batch in parts.batches():
        value = answer.value(parts, batch)
        if value is not None and not within(value, parts.napkin_throughput(batch), SHOWS):
            return True
    return False


def _napkin_agrees(parts: Parts) -> bool:
    return all(within(parts.napkin_throughput(b), cost.estimate_step(
        list(parts.widths), b, parts.gpu).samples_per_s, AGREES) for b in parts.batches())


def check_throughput(function, seed: int | None = None, show: bool = True) -> CheckResult:
    """Check ``function(widths, batch, gpu)``: samples per second within a factor
    :data:`TOLERANCE` of ``cost.estimate_step(widths, batch, gpu).samples_per_s`` for random
    MLPs and GPUs, at batches from 1 to a million.

    Diagnoses (:data:`THROUGHPUT_MISTAKES`, in order): the launches left out; the launches
    added to the kernels' work (they overlap); every part added; compute + memory; the copy
    left out; the copy overlapping; the copy at the link's peak; the forward FLOPs alone; the
    bf16 peak; one launch per step; the step's time instead of samples per second; samples
    per millisecond or per microsecond; not a number. Each is drawn a case where it is
    clearly wrong."""

    def body(seed: int) -> str:
        rng = np.random.default_rng(seed)
        cases = _drawn_cases(rng, 3, THROUGHPUT_ANSWERS, _shows_throughput, _napkin_agrees)
        got, want = [], []
        for parts in cases:
            widths = list(parts.widths)
            got.append({})
            for batch in parts.batches():
                call = f"samples_per_second({widths}, {batch}, {parts.gpu!r})"
                got[-1][batch] = a_number(
                    call_learner(function, list(widths), batch, parts.gpu,
                                 stub_hint=THROUGHPUT_STUB_HINT, call=call),
                    "samples per second", f"({parts}, batch {plain(batch)}; seed={seed})")
            want.append({b: cost.estimate_step(widths, b, parts.gpu).samples_per_s
                         for b in got[-1]})
        evidence = Throughputs(seed, cases, got, want)
        if evidence.first[0] >= 0:
            THROUGHPUT.reject(evidence)
        checked = sum(len(g) for g in got)
        return (f"all {checked} predictions within a factor {TOLERANCE} of the model, "
                f"batches 1 to {plain(1 << 20)} (seed={seed}).")

    return THROUGHPUT.run(body, seed, show, learner=(function,))


__all__ = [
    "CASES", "LAUNCH_BOUND", "LAUNCH_BOUND_MISTAKES", "THROUGHPUT", "THROUGHPUT_MISTAKES",
    "TOLERANCE", "a_number", "check_launch_bound", "check_throughput", "cost_launches",
    "model_crossover", "plain",
]
