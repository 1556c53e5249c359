"""Chapter 08's exercises: napkin math about a GPU, checked against gpulab's roofline model of a
training step (:func:`gpulab.nn.cost.estimate_step`), and a kernel whose one launch handles any
batch.

- :func:`check_launch_bound`: exercise 1, ``first_batch_not_launch_bound(widths, gpu)``, the
  smallest batch at which a training step is no longer **launch-bound** (its kernels'
  launches no longer the largest part of its time).
- :func:`check_throughput`: exercise 2, ``samples_per_second(widths, batch, gpu)``.
- :func:`check_evaluate_batch`: exercise 3, the kernel ``evaluate_batch(logits, labels,
  losses, correct)``, whose one launch of a **fixed grid** handles a batch of 8 or of 65,536.
  Once it passes, :func:`kernel_to_use` hands it to the chapter: the batch sweep's held-out
  evaluation (:class:`gpulab.experiments.batch_size.BatchSizeExperiment`) and the timing of
  one launch over batch sizes (:func:`gpulab.experiments.batch_size.evaluation_sweep`) run on
  it.

The first two are predictions from a few numbers per step (launches, FLOPs, bytes, bytes
copied) and the GPU's datasheet (``gpulab.hardware``), so they are judged within a tolerance,
not exactly: within :data:`TOLERANCE` of the model's answer, or of the per-sample napkin the
notebook teaches (:class:`Parts`), is right. The two differ where kernels of both kinds matter:
the model adds each kernel's larger part, the napkin takes the larger of the step's totals.
Networks, GPUs and batches are random; besides a few drawn as before, the check draws, afresh
for each known mistake (:data:`LAUNCH_BOUND_MISTAKES`, :data:`THROUGHPUT_MISTAKES`), a case
where its answer is clearly outside the tolerance of both, where the napkin agrees with the
model, and where it differs from every mistake listed before it. A mistake is named only when
it explains the answers in every case. A failure names the seed.

Adding compute and memory (instead of the larger) is caught by exercise 1 but not by exercise
2: a step's kernels run one after another, each the larger of its own two parts, so the model's
time lies between the napkin's larger part and the sum. Over 20,000 drawn cases, wherever the
sum differed from the napkin and the napkin agreed with the model, the sum was at most 1.39
times off the model: never clearly outside the tolerance of both.
"""

from __future__ import annotations

import ast
import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from gpulab import hardware, reference
from gpulab.exercises.evidence import GridStride, is_number
from gpulab.exercises.grid_stride import grid_stride_mistakes
from gpulab.exercises.mistakes import Mistake, diagnose, reject
from gpulab.exercises.results import CheckFailedError, KernelError, explain_exception, offer_trace
from gpulab.exercises.running import call_learner, launch, padded, read_back, trace_trial
from gpulab.exercises.source_rules import (
    KernelSource,
    hard_coded_block,
    hard_coded_size,
    range_over_typed_in_count,
)
from gpulab.exercises.spec import CheckSpec
from gpulab.exercises.trial import Trial, tier_key
from gpulab.nn import cost

# A prediction within this factor of the model's answer is right: the napkin leaves out what a
# step does whatever the batch (reading the weights, the optimiser's update), which shifts the
# answer by up to ~25 % for the networks drawn here.
TOLERANCE = 1.3
WIDTH_RANGE = (16, 257)  # the networks drawn at random
WIDE_RANGE = (16, 8193)  # ... and those drawn so that a mistake shows
CASES = 6
# A case shows a mistake when, for some batch, the mistake's answer is this factor away from the
# napkin's, the napkin agrees with the model, the answer is more than TOLERANCE (times NEAR, a
# learner's rounding) away from the model's, and it differs from every mistake listed before it
# (so that the first mistake that explains every case is it).
SHOWS = 1.7
AGREES = 1.15  # ... where the napkin is this close to the model (so the right answer is clear)
CANDIDATES = 400  # cases drawn, at most, to find one that shows a mistake (afresh for each)
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
    if not is_number(got):
        kind = "None (did you forget `return`?)" if got is None else \
            f"a {type(got).__name__} ({str(got)[:40]})"
        raise CheckFailedError(f"{what} must be a number; your function returned {kind} "
                               f"{where}.", f"return a single number: {what}.")
    try:
        value = float(got)
    except OverflowError:  # an int past float's range
        value = math.inf
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
    doubling search and a bisection find it. ``gpu``: a key of :data:`gpulab.hardware.GPUS`
    (whose answers are kept, :func:`_kept_crossover`) or a :class:`~gpulab.hardware.GPUSpec`."""
    if isinstance(gpu, str):
        return _kept_crossover(tuple(int(w) for w in widths), gpu)
    return _crossover(widths, gpu)


# A check asks the model about one case once for each known mistake it tries: kept, not redone.
MODEL_ANSWERS_KEPT = 4096


def model_samples_per_s(widths: tuple[int, ...], batch: int, gpu: str) -> float:
    """The model's answer to exercise 2: ``cost.estimate_step(widths, batch, gpu)``'s
    samples per second, for ``gpu`` a key of :data:`gpulab.hardware.GPUS` (kept). A plain
    function over the cache, so that a call from a learner's code runs Python code that the
    check's watch sees (:func:`gpulab.exercises.learner_code.calls_from_outside_gpulab`)."""
    return _kept_samples_per_s(tuple(widths), batch, gpu)


@functools.lru_cache(maxsize=MODEL_ANSWERS_KEPT)
def _kept_samples_per_s(widths: tuple[int, ...], batch: int, gpu: str) -> float:
    return cost.estimate_step(list(widths), batch, gpu).samples_per_s


@functools.lru_cache(maxsize=MODEL_ANSWERS_KEPT)
def _kept_crossover(widths: tuple[int, ...], gpu: str) -> int:
    return _crossover(widths, gpu)


def _crossover(widths, gpu) -> int:
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


@dataclass(frozen=True)
class Parts:
    """One case (an MLP's ``widths`` on a named ``gpu``) as a napkin sees it: the step's
    launches' time, and what one more sample adds to each part (seconds), with the variants the
    known mistakes use: the forward pass's FLOPs alone, the bf16 peak (None where the GPU has
    none), the copy at the link's peak, or at the pinned rate."""

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
    update_launches: int = 0  # the optimiser's update kernels among ``launches``
    device_transfer: float = 0.0  # the copy at the GPU's own memory bandwidth (a mistake)
    loss_launches: int = 0  # the loss kernels among ``launches``
    pinned_transfer: float = 0.0  # the copy at the pinned rate (a mistake: the batch is pageable)
    forward_memory: float = 0.0  # the forward pass's bytes alone (a mistake)

    @classmethod
    def of(cls, widths, gpu) -> Parts:
        spec = hardware.get_gpu(gpu)
        one, two = cost.step_kernels(widths, 1), cost.step_kernels(widths, 2)

        def added(kernels_one, kernels_two, what):
            return sum(getattr(k, what) for k in kernels_two) - sum(getattr(k, what)
                                                                    for k in kernels_one)

        flops = added(one, two, "flops")
        forward_one, forward_two = ([k for k in kernels if k.phase == "forward"]
                                    for kernels in (one, two))
        forward = added(forward_one, forward_two, "flops")
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
                   copied / spec.host_link_bytes_per_s,
                   sum(k.phase == "update" for k in one),
                   copied / spec.memory_bandwidth_bytes_per_s,
                   sum(k.phase == "loss" for k in one),
                   copied / spec.host_pinned_bytes_per_s,
                   added(forward_one, forward_two, "bytes_moved")
                   / spec.memory_bandwidth_bytes_per_s)

    @property
    def launch_without_loss(self) -> float:
        """The step's launch time with the loss kernels' launches left out (a mistake)."""
        return self.launch * (1 - self.loss_launches / self.launches)

    @property
    def work(self) -> float:
        """Per sample, the kernels' work: compute and memory overlap, the larger counts."""
        return max(self.compute, self.memory)

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


def _random_case(rng: np.random.Generator, sizes=WIDTH_RANGE) -> Parts:
    """A small MLP on a random GPU that is launch-bound for the first few batch sizes (so that
    the question has an answer above 1); the wide ones' widths are drawn log-uniform."""
    low, high = np.log(sizes[0]), np.log(sizes[1])
    while True:
        widths = ([int(w) for w in rng.integers(*sizes, size=int(rng.integers(2, 5)))]
                  if sizes == WIDTH_RANGE else
                  [int(np.exp(rng.uniform(low, high))) for _ in range(int(rng.integers(2, 6)))])
        parts = Parts.of(widths, str(rng.choice(list(hardware.GPUS))))
        if parts.napkin_crossover() >= 6:
            return parts


def _drawn_cases(rng: np.random.Generator, random_cases: int, answers,
                 shows: Callable) -> list[Parts]:
    """The digits network on the course GPU, ``random_cases`` random ones, then, for each of
    the wrong ``answers`` that ``shows(answer, parts, earlier_answers)`` says none of them
    shows, the first of up to :data:`CANDIDATES` wider random cases, drawn afresh for each
    answer, that shows it (one case may show several)."""
    cases = [Parts.of([64, 128, 10], hardware.COURSE_GPU)]
    cases += [_random_case(rng) for _ in range(random_cases)]
    for k, answer in enumerate(answers):
        if any(shows(answer, case, answers[:k]) for case in cases):
            continue
        for _ in range(CANDIDATES):
            candidate = _random_case(rng, WIDE_RANGE)
            if shows(answer, candidate, answers[:k]):
                cases.append(candidate)
                break
    return cases


def _clearly_off(value: float | None, napkin: float, model: Callable[[], float]) -> bool:
    """Is ``value`` clearly wrong where the right answer is clear: :data:`SHOWS` away from the
    napkin's, which is within :data:`AGREES` of the ``model``'s (computed only if needed), and
    outside the tolerance (with a learner's rounding) of the model's too?"""
    if value is None or within(value, napkin, SHOWS):
        return False
    want = model()
    return within(napkin, want, AGREES) and not within(value, want, TOLERANCE * NEAR)


def _differs(value: float | None, others) -> bool:
    """Does ``value`` tell itself apart from each of the ``others``? One whose value is None
    here (the bf16 peak on a GPU without one) is not told apart: a mistake that does not
    apply to a case is not refuted by it."""
    return value is not None and all(o is not None and not near(value, o) for o in others)


@dataclass(frozen=True)
class WrongAnswer:
    """A known wrong answer: what the learner did, its ``value`` for a case (exercise 1:
    ``value(parts)``; exercise 2: ``value(parts, batch)``; None where it does not apply) and
    the hint."""

    did: str
    value: Callable
    hint: str


# What the napkin is made from (the kernels' counts, the GPU's datasheet), and the model itself,
# which the checks compare with: a function that returns the model's answer has not done the
# exercise. The model's step, `StepEstimate`, is refused as a name and, however it is reached,
# when built (its `__init__`).
NAPKIN_MODULES = ("gpulab.hardware", "gpulab.nn.cost")
THE_MODEL = ("gpulab.nn.cost.estimate_step", "gpulab.nn.cost.estimate_epoch_s",
             "gpulab.nn.cost.per_sample_seconds", "gpulab.hardware.estimate_time",
             "gpulab.hardware.stream_timeline", "gpulab.nn.cost.StepEstimate",
             "gpulab.nn.cost.StepEstimate.__init__")


# --- exercise 1: where a step stops being launch-bound ------------------------------------------

LAUNCH_BOUND_STUB_HINT = (
    "the launches cost the same at every batch; every other part grows with it. Find what one "
    "more sample adds to each part's time, and the batch at which the largest of those, times "
    "the batch, reaches the launches' time."
)
PAGEABLE_NOT_PINNED = (
    "the batch is an ordinary NumPy array, in pageable memory: the driver stages it through a "
    "pinned buffer, at gpu.host_pageable_bytes_per_s; the pinned rate "
    "(gpu.host_pinned_bytes_per_s) is for page-locked arrays (cuda.pinned_array).")
FP32_PEAK = ("the model trains in float32: use the GPU's fp32 peak, not a tensor-core one (bf16, "
             "tf32), which is many times higher.")
FORWARD_ALONE = ("a training step also runs the loss, the backward pass and the optimiser's "
                 "update: count the FLOPs and the bytes of every kernel of "
                 "cost.step_kernels, not only the forward ones.")
COMPARE_EACH = ("the model compares each part with the launches on its own: the step stops "
                "being launch-bound when the largest one part catches up")


# What GPUSpec.peak_flops_for says of a precision a GPU has no rate for (the T4 and bf16).
NO_RATE = re.compile(r"has no '(bf16|tf32|fp16|fp8)' rate")


def _napkin_call(function, *args, stub_hint: str, call: str):
    """:func:`call_learner`; a function that stopped asking a GPU for a tensor-core rate it
    lacks (bf16 on a T4) is told that the model trains in float32."""
    try:
        return call_learner(function, *args, stub_hint=stub_hint, call=call)
    except CheckFailedError as failure:
        found = NO_RATE.search(failure.message)
        if found is None:
            raise
        raise CheckFailedError(
            f"{failure.message}: your function asked for the {found.group(1)} peak, a "
            "tensor-core rate, for a model that trains in float32", FP32_PEAK) from None


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
    WrongAnswer("the forward pass alone (its FLOPs and its bytes)",
                lambda p: _over(p, p.forward_compute, p.forward_memory, p.transfer),
                FORWARD_ALONE),
    WrongAnswer("a tensor-core peak (bf16 or tf32) for an fp32 model",
                lambda p: _over(p, p.bf16_compute, p.memory, p.transfer), FP32_PEAK),
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
    WrongAnswer("the copy at the pinned rate (host_pinned_bytes_per_s)",
                lambda p: _over(p, p.compute, p.memory, p.pinned_transfer),
                PAGEABLE_NOT_PINNED),
    WrongAnswer("the copy at the GPU's memory bandwidth",
                lambda p: _over(p, p.compute, p.memory, p.device_transfer),
                "the copy from the host crosses the host link (PCIe or NVLink-C2C), from "
                "pageable memory at gpu.host_pageable_bytes_per_s: the GPU's own memory "
                "bandwidth (memory_bandwidth_bytes_per_s) is for the kernels' traffic."),
    WrongAnswer("device memory's traffic left out",
                lambda p: _over(p, p.compute, p.transfer),
                "a kernel also reads and writes device memory (the bytes_moved of "
                "cost.step_kernels, at gpu.memory_bandwidth_bytes_per_s): compare compute, "
                "device memory and the copy from the host, and take the largest."),
    WrongAnswer("the memory bandwidth taken in bits (8 times too fast)",
                lambda p: _over(p, p.compute, p.memory / 8, p.transfer),
                "memory_bandwidth_bytes_per_s is in bytes per second, as the kernels' "
                "bytes_moved counts bytes: no factor of 8."),
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
    every case, and the first ``case`` the answer is wrong in (its index ``wrong``; -1 if
    none)."""

    seed: int
    cases: list[Parts]
    got: list[float]
    want: list[int]

    def __post_init__(self):
        self.wrong = next((k for k, (p, g, w) in enumerate(zip(self.cases, self.got, self.want,
                                                               strict=True))
                           if not within(g, w) and not within(g, p.napkin_crossover())), -1)
        self.case = self.cases[self.wrong]
        self.where = f"{self.case}; seed={self.seed}"

    def explained_by(self, answer: WrongAnswer) -> bool:
        values = [answer.value(p) for p in self.cases]
        return (any(v is not None for v in values)
                and all(v is None or near(g, v) for g, v in zip(self.got, values, strict=True)))

    def said(self) -> str:
        k = self.wrong
        return (f"for widths {list(self.case.widths)} on the {self.case.gpu}, the model stops "
                f"being launch-bound at batch {plain(self.want[k])}; you predicted "
                f"{plain(self.got[k])}")


def _named(answer: WrongAnswer, answers: tuple[WrongAnswer, ...] = ()) -> Mistake:
    """The mistake of ``answer``; its message also names the others of ``answers`` that give
    the same predictions in every case drawn (the cases cannot tell them apart)."""
    def message(e) -> str:
        alike = [other.did for other in answers
                 if other is not answer and e.explained_by(other)]
        also = f" (or {', or '.join(alike)}: here they give the same)" if alike else ""
        return f"{e.said()}, which is what {answer.did} gives{also}, in every case drawn"

    return Mistake(answer.did, lambda e: e.explained_by(answer), message, answer.hint)


# Tried when every prediction is within the tolerance: a mistake whose answers land inside
# it, recognised when it explains every case (to a learner's rounding, NEAR) and the napkin's
# right answer does not.
# The forward pass launches as many kernels as the update (two per layer): the same count.
UPDATE_OR_FORWARD_LEFT_OUT = ("the optimiser's update launches left out (or the forward pass's: "
                              "as many)")
EVERY_LAUNCH = ("a step launches every kernel of cost.step_kernels: forward, loss, backward and "
                "the optimiser's update, each costing hardware.LAUNCH_OVERHEAD_S of the host's "
                "time.")
CROSSOVER_NEAR_ANSWERS = (
    WrongAnswer(UPDATE_OR_FORWARD_LEFT_OUT,
                lambda p: _over(p, p.compute, p.memory, p.transfer)
                * (1 - p.update_launches / p.launches), EVERY_LAUNCH),
    WrongAnswer("the loss kernels' launches left out",
                lambda p: _over(p, p.compute, p.memory, p.transfer)
                * p.launch_without_loss / p.launch, EVERY_LAUNCH),
)
CROSSOVER_NEAR_MISTAKES = tuple(
    Mistake(f"{answer.did} (within the tolerance)",
            lambda e, answer=answer: e.explained_by(answer) and not all(
                near(g, p.napkin_crossover()) for p, g in zip(e.cases, e.got, strict=True)),
            lambda e, answer=answer: (
                f"every prediction is what {answer.did} gives, to rounding: for "
                f"{e.cases[0]} you predicted {plain(e.got[0])}, where the napkin gives "
                f"{plain(e.cases[0].napkin_crossover())} and the model {plain(e.want[0])}. "
                f"Those land within a factor {TOLERANCE} of the model, but the count is not "
                "the step's"), answer.hint)
    for answer in CROSSOVER_NEAR_ANSWERS)
LAUNCH_BOUND_MISTAKES = tuple(_named(a, CROSSOVER_ANSWERS) for a in CROSSOVER_ANSWERS) + (
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
    LAUNCH_BOUND_STUB_HINT, LAUNCH_BOUND_MISTAKES + CROSSOVER_NEAR_MISTAKES,
    allowed_gpulab=NAPKIN_MODULES,
    refused_gpulab=THE_MODEL,
    title="1. where a step stops being launch-bound",
    call="check_launch_bound(first_batch_not_launch_bound)",
    holds=f"within a factor {TOLERANCE} of the roofline model's batch at which "
          "`cost.estimate_step(...).bound()` stops being `\"launch\"` (or of the per-sample "
          "napkin), for the digits network on an H100, five random small networks and GPUs, "
          "and wider ones drawn so that each known mistake is clearly outside the tolerance "
          "of both where the napkin agrees with the model",
    also="a result that is not a positive number (None, an array, a string); an answer that "
         "asks the model itself (`THE_MODEL`); numbers are printed plainly; a mistake is named "
         "only when it explains every case")


def _shows_crossover(answer: WrongAnswer, parts: Parts, earlier=()) -> bool:
    value = answer.value(parts)
    return (_differs(value, [e.value(parts) for e in earlier])
            and _clearly_off(value, parts.napkin_crossover(),
                             lambda: model_crossover(list(parts.widths), parts.gpu)))


@LAUNCH_BOUND.check
def check_launch_bound(function, seed: int | None = None) -> str:
    """``gpu`` is a key of :data:`gpulab.hardware.GPUS`, e.g. ``gpulab.hardware.COURSE_GPU``.
    The cases (:func:`_drawn_cases`): the digits network on the course GPU, ``CASES - 1``
    random ones, then one for each of :data:`CROSSOVER_ANSWERS` that none of them shows. The
    model's answer is :func:`model_crossover`, the napkin's :meth:`Parts.napkin_crossover`."""
    rng = np.random.default_rng(seed)
    cases = _drawn_cases(rng, CASES - 1, CROSSOVER_ANSWERS, _shows_crossover)
    got = []
    for parts in cases:
        call = f"first_batch_not_launch_bound({list(parts.widths)}, {parts.gpu!r})"
        got.append(a_number(_napkin_call(function, list(parts.widths), parts.gpu,
                                         stub_hint=LAUNCH_BOUND_STUB_HINT, call=call),
                            "the batch size", f"({parts}; seed={seed})"))
    evidence = Crossovers(seed, cases, got,
                          [model_crossover(list(p.widths), p.gpu) for p in cases])
    if evidence.wrong >= 0:
        LAUNCH_BOUND.reject(evidence)
    reject(CROSSOVER_NEAR_MISTAKES, evidence)
    return (f"all {len(cases)} predictions within a factor {TOLERANCE} of the model (or the "
            f"napkin) (seed={seed}).")


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
                "gpu.host_pageable_bytes_per_s: the batch is an ordinary NumPy array), every "
                "sample's bytes: the copy's time grows with the batch."),
    WrongAnswer("the copy overlapping the launches and the kernels",
                lambda p, b: b / max(p.launch, b * p.work, b * p.transfer),
                NO_OVERLAP + "."),
    WrongAnswer("the copy counted once per step, not per sample",
                lambda p, b: b / (max(p.launch, b * p.work) + p.transfer),
                "the copy moves every sample of the batch: its time is the batch times one "
                "sample's copy (cost.step_transfer_bytes grows with the batch)."),
    WrongAnswer("the copy at the GPU's memory bandwidth",
                lambda p, b: b / _step(p, b, copy=p.device_transfer),
                "the copy from the host crosses the host link, from pageable memory at "
                "gpu.host_pageable_bytes_per_s; memory_bandwidth_bytes_per_s is the GPU's own "
                "memory, for the kernels' traffic."),
    WrongAnswer("the copy at the link's peak instead of the pageable rate",
                lambda p, b: b / _step(p, b, copy=p.peak_transfer),
                "the batch is an ordinary NumPy array (pageable memory), copied at "
                "gpu.host_pageable_bytes_per_s, well below the link's peak "
                "gpu.host_link_bytes_per_s."),
    WrongAnswer("the copy at the pinned rate instead of the pageable one",
                lambda p, b: b / _step(p, b, copy=p.pinned_transfer), PAGEABLE_NOT_PINNED),
    WrongAnswer(UPDATE_OR_FORWARD_LEFT_OUT,
                lambda p, b: b / _step(p, b, launch=p.launch * (1 - p.update_launches
                                                                / p.launches)),
                "a step launches every kernel of cost.step_kernels: forward, loss, backward and "
                "the optimiser's update, each costing hardware.LAUNCH_OVERHEAD_S of the host's "
                "time."),
    WrongAnswer("the forward pass's FLOPs alone",
                lambda p, b: b / _step(p, b, work=max(p.forward_compute, p.memory)),
                "a training step also runs the backward pass and the optimiser's update: count "
                "the FLOPs of every kernel the step launches."),
    WrongAnswer("the forward pass alone (its FLOPs and its bytes)",
                lambda p, b: b / _step(p, b, work=max(p.forward_compute, p.forward_memory)),
                FORWARD_ALONE),
    WrongAnswer("a tensor-core peak (bf16 or tf32) for an fp32 model",
                lambda p, b: None if p.bf16_compute is None else
                b / _step(p, b, work=max(p.bf16_compute, p.memory)), FP32_PEAK),
    WrongAnswer("the FLOPs alone (compute)", lambda p, b: b / _step(p, b, work=p.compute),
                "compare the arithmetic with the device-memory traffic: per sample the kernels' "
                "work is the larger of the two."),
    WrongAnswer("device memory alone", lambda p, b: b / _step(p, b, work=p.memory),
                "count the arithmetic too (FLOPs at the fp32 peak): per sample the kernels' work "
                "is the larger of compute and device memory."),
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
    first: tuple[int, int] = field(init=False, default=(-1, 0))  # (case, batch) first wrong

    def __post_init__(self):
        for k, (parts, got, want) in enumerate(zip(self.cases, self.got, self.want,
                                                   strict=True)):
            wrong = [b for b in got if not within(got[b], want[b])
                     and not within(got[b], parts.napkin_throughput(b))]
            if wrong:
                self.first = (k, wrong[0])
                break
        k, batch = self.first
        self.where = (f"{self.cases[k]}, batch {plain(batch)}; seed={self.seed}" if k >= 0 else
                      f"seed={self.seed}")

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

    def follows(self, answer: WrongAnswer) -> tuple[int, int] | None:
        """Where a prediction that lies within the tolerance is still ``answer``'s formula: the
        (case, batch) at which that formula is furthest from the napkin, when every prediction
        is what ``answer`` gives (to rounding, :data:`FOLLOWS`) and it is more than
        :data:`NEAR` away from the napkin there; None otherwise."""
        furthest, where = NEAR, None
        for k, (parts, got) in enumerate(zip(self.cases, self.got, strict=True)):
            for batch, value in got.items():
                mistake = answer.value(parts, batch)
                if mistake is None:
                    continue
                if abs(value - mistake) > FOLLOWS * abs(mistake):
                    return None
                off = max(mistake, napkin := parts.napkin_throughput(batch)) / min(mistake,
                                                                                   napkin)
                if off > furthest:
                    furthest, where = off, (k, batch)
        return where

    def following(self, answer: WrongAnswer) -> str:
        k, batch = self.follows(answer)
        return (f"every prediction is what {answer.did} gives, to rounding: for "
                f"{self.cases[k]} at batch {plain(batch)} you predicted "
                f"{plain(self.got[k][batch])} samples/s, where the napkin gives "
                f"{plain(self.cases[k].napkin_throughput(batch))} and the model "
                f"{plain(self.want[k][batch])}. Those land within a factor {TOLERANCE} of the "
                "model on these networks, but the formula is not the step's")


# A prediction this close (relative) to a known wrong formula's, at every case and batch, is
# that formula, however close to the model the numbers land.
FOLLOWS = 1e-6
THROUGHPUT_MISTAKES = tuple(_named(a, THROUGHPUT_ANSWERS) for a in THROUGHPUT_ANSWERS) + (
    Mistake("another answer", lambda e: True,
            lambda e: f"{e.said()} (more than a factor {TOLERANCE} away)", THROUGHPUT_STUB_HINT),
)
# Tried when every prediction is within the tolerance: on some networks the model, which takes
# each kernel's larger part and adds the kernels up, lands near compute + memory, so the numbers
# alone cannot tell that mistake; the formula can.
# Slips that stay within the tolerance on every network (the loss kernels' launches left out:
# 17 of the digits network's 19), told only by the formula followed exactly.
THROUGHPUT_NEAR_ANSWERS = (
    WrongAnswer("the loss kernels' launches left out",
                lambda p, b: b / _step(p, b, launch=p.launch_without_loss), EVERY_LAUNCH),
)
THROUGHPUT_FORMULA_MISTAKES = tuple(
    Mistake(f"{answer.did}, followed exactly (within the tolerance)",
            lambda e, answer=answer: e.follows(answer) is not None,
            lambda e, answer=answer: e.following(answer), answer.hint)
    for answer in THROUGHPUT_ANSWERS + THROUGHPUT_NEAR_ANSWERS)
THROUGHPUT = CheckSpec(
    "throughput", "samples_per_second(widths, batch, gpu) -> number", THROUGHPUT_STUB_HINT,
    THROUGHPUT_MISTAKES, allowed_gpulab=NAPKIN_MODULES,
    refused_gpulab=THE_MODEL, title="2. samples per second",
    call="check_throughput(samples_per_second)",
    holds=f"within a factor {TOLERANCE} of the model's `cost.estimate_step(...).samples_per_s` "
          "(or of the per-sample napkin) at batches from 1 to a million, for the digits "
          "network on an H100, random small networks and GPUs, and wider ones drawn so that "
          "each known mistake is clearly outside the tolerance of both at a batch where the "
          "napkin agrees with the model",
    also="a result that is not a positive number; an answer that asks the model itself "
         "(`THE_MODEL`); a mistake is named only when it explains every case and batch; "
         "within the tolerance, a known wrong formula followed exactly (to 1e-6) where it is "
         "over 5 % from the napkin (compute + memory lands near the model on some networks)")


def _shows_throughput(answer: WrongAnswer, parts: Parts, earlier=()) -> bool:
    """Is there a batch at which ``answer`` is clearly off and told apart from ``earlier``?"""
    def model(batch: int) -> Callable[[], float]:
        return lambda: model_samples_per_s(parts.widths, batch, parts.gpu)

    return any(_differs(answer.value(parts, b), [e.value(parts, b) for e in earlier])
               and _clearly_off(answer.value(parts, b), parts.napkin_throughput(b), model(b))
               for b in parts.batches())


@THROUGHPUT.check
def check_throughput(function, seed: int | None = None) -> str:
    """The cases (:func:`_drawn_cases`): the digits network on the course GPU, three random
    ones, then one for each of :data:`THROUGHPUT_ANSWERS` that none of them shows; each at the
    batches of :meth:`Parts.batches`. The napkin's answer is
    :meth:`Parts.napkin_throughput`."""
    rng = np.random.default_rng(seed)
    cases = _drawn_cases(rng, 3, THROUGHPUT_ANSWERS, _shows_throughput)
    got, want = [], []
    for parts in cases:
        widths = list(parts.widths)
        got.append({})
        for batch in parts.batches():
            call = f"samples_per_second({widths}, {batch}, {parts.gpu!r})"
            got[-1][batch] = a_number(
                _napkin_call(function, list(widths), batch, parts.gpu,
                             stub_hint=THROUGHPUT_STUB_HINT, call=call),
                "samples per second", f"({parts}, batch {plain(batch)}; seed={seed})")
        want.append({b: model_samples_per_s(parts.widths, b, parts.gpu) for b in got[-1]})
    evidence = Throughputs(seed, cases, got, want)
    if evidence.first[0] >= 0:
        THROUGHPUT.reject(evidence)
    reject(THROUGHPUT_FORMULA_MISTAKES, evidence)
    checked = sum(len(g) for g in got)
    return (f"all {checked} predictions within a factor {TOLERANCE} of the model (or the "
            f"napkin), batches 1 to {plain(1 << 20)} (seed={seed}).")


# --- exercise 3: one launch for any batch ------------------------------------------------------

EVALUATE_STUB_HINT = (
    "the grid is fixed and the batch may be smaller or far larger than it: each thread starts "
    "at a sample of its own and steps through the batch, and for each of its samples finds the "
    "row's largest logit (the prediction) and the loss from the log-sum-exp. The hints above "
    "the cell go step by step."
)
STEP_BY_GRID_HINT = (
    "revisit the grid-stride loop (chapter 01, section 5; chapter 02, exercise 3): a thread "
    "starts at its global index and steps by the number of threads in the whole grid, the grid's "
    "size (`cuda.gridsize(1)`), so that together the threads take every sample exactly once, "
    "whatever the batch."
)
MANY_PER_THREAD_HINT = (
    "the grid is fixed and the batch is larger than it: one sample per thread leaves the rest "
    "undone. Each thread must go on to further samples, stepping through the batch until its "
    "end; " + STEP_BY_GRID_HINT
)
EVALUATE_GUARD_HINT = (
    "the loop over a thread's samples must stop at the batch's last sample: a batch smaller "
    "than the grid leaves some threads with no sample at all. Bound the loop (or guard the "
    "sample's index) by the number of rows of logits."
)
SHAPES_HINT = (
    "read the batch's size and the number of classes from the arrays' shapes (rows and "
    "columns of logits): the same kernel serves every batch, and the check draws 11 to 15 "
    "classes, not the digits' 10."
)
LOSS_HINT = (
    "the loss of a sample is the log of the sum of exp(z - m) over its row, plus m, minus the "
    "label's logit, with m the row's largest logit (chapter 05's stable softmax): it is "
    "-log p[label], computed without ever forming p."
)
CORRECT_HINT = (
    "correct[s] is 1 when the row's largest logit is the label's (the prediction is right) and "
    "0 otherwise: a count to add up, not the class itself."
)
TIE_HINT = (
    "the prediction is one class: on a tie, the first of the largest logits, as np.argmax "
    "takes it. Find the predicted class, then compare it with the label; a running maximum "
    "that an equal logit replaces ends on the last of them."
)
BLOCK_HINT = (
    "use `cuda.grid(1)` and `cuda.gridsize(1)` (or `cuda.blockDim.x`), never a number, for "
    "the block size: the caller chooses it at launch."
)
COALESCED_HINT = (
    "with the grid's size as the step, at every round of the loop a warp's 32 threads take 32 "
    "neighbouring samples, so together they read one stretch of logits; a run of consecutive "
    "samples per thread puts neighbouring threads a whole run apart, and the run grows with "
    "the batch; " + STEP_BY_GRID_HINT
)
# The fixed grid every launch of the check uses, per tier: blocks of the drawn block size.
EVALUATE_BLOCKS = {"sim": 2, "gpu": 6}
EVALUATE_CLASSES = (11, 16)  # drawn: never the digits' 10, so a typed-in 10 fails
BIG_LOGIT = 800.0  # some rows shifted by + or - this: e^800 overflows, e^-800 underflows to 0
UNWRITTEN = -7  # correct's starting value (and its padding's): no thread wrote it
# The small launch the method is traced on (every access is recorded): 3 blocks of 40, unlike
# the full-size launches' 2 blocks of a multiple of 32, so a step typed to fit them
# (`2 * cuda.blockDim.x`, `cuda.gridDim.x * 32`, `64`) is not the grid's size here.
EVALUATE_TRACE_BLOCKS, EVALUATE_TRACE_THREADS = 3, 40
EVALUATE_TRACE_BATCH, EVALUATE_TRACE_CLASSES = (150, 230), 4


def _hard_coded_count(source: KernelSource | None) -> str | None:
    """The first line that types a count into the kernel: a whole number > 1 in a call to
    ``range`` or in a comparison (``range(first, 1000, step)``, ``if s < 300``)."""
    if source is None:
        return None
    return range_over_typed_in_count(source, any_argument=True) or hard_coded_size(source)


def _unused_loop_index(source: KernelSource | None) -> str | None:
    """The first ``for`` loop whose index is never read in its body (it repeats one piece of
    work instead of stepping through the samples)."""
    if source is None:
        return None
    for node in source.walk():
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name):
            used = {n.id for part in node.body for n in ast.walk(part) if isinstance(n, ast.Name)}
            if node.target.id not in used and node.target.id != "_":
                return source.line(node)
    return None


@dataclass
class BatchCase:
    """A batch the learner's kernel ran on: its ``trial`` (the launch, n samples, the seed)
    and the number of ``classes``; what the evaluation's evidence records share."""

    trial: Trial
    classes: int

    def __post_init__(self):
        self.where = f"{self.classes} classes, {self.trial}"
        self.n = self.trial.n


@dataclass
class Evaluated(BatchCase):
    """One launch of the learner's kernel on a batch: what it wrote (``losses``, NaN where
    never written; ``correct``, :data:`UNWRITTEN` where never written) and the right answer."""

    logits: np.ndarray
    labels: np.ndarray
    losses: np.ndarray
    correct: np.ndarray
    source: KernelSource | None = None

    def __post_init__(self):
        super().__post_init__()
        self.grid = self.trial.grid_threads
        self.wide = self.logits.astype(np.float64)
        self.row_max = self.wide.max(axis=1)
        self.big_rows = np.abs(self.row_max) > BIG_LOGIT / 2
        # log(sum exp(z - m)) per row (without m added back)
        self.log_sum_exp = np.log(np.exp(self.wide - self.row_max[:, None]).sum(axis=1))
        self.want_losses = self.loss_with(self.wide[np.arange(self.n), self.labels])
        self.predicted = np.argmax(self.logits, axis=1)
        self.want_correct = (self.predicted == self.labels).astype(np.int32)
        at_max = self.wide == self.row_max[:, None]
        tied = at_max.sum(axis=1) > 1
        label_at_max = at_max[np.arange(self.n), self.labels]
        # rows whose largest logit is tied: the label the first of the tied (1 is right), or
        # another of them (0 is right); what a prediction of the last of them, or a label's
        # logit compared with the largest by >=, would write
        self.tied_later = tied & label_at_max & (self.predicted != self.labels)
        last = self.wide.shape[1] - 1 - np.argmax(at_max[:, ::-1], axis=1)
        self.correct_if_last = (last == self.labels).astype(np.int32)
        self.correct_if_any = (self.want_correct | (tied & label_at_max)).astype(np.int32)
        self.unhandled = np.isnan(self.losses) & (self.correct == UNWRITTEN)
        self.bad_losses = ~self.same(self.want_losses)
        self.bad_correct = self.correct != self.want_correct
        self.wrong = bool(self.bad_losses.any() or self.bad_correct.any())

    def loss_with(self, logit_of: np.ndarray) -> np.ndarray:
        """The loss if the logit subtracted were ``logit_of`` (one per row)."""
        return self.log_sum_exp + self.row_max - logit_of

    def same(self, values, row_max=None) -> np.ndarray:
        """Which losses written are ``values`` (to float32 rounding of the scale of the rows
        they come from: ``row_max``, by default each sample's own)?"""
        row_max = self.row_max if row_max is None else row_max
        tolerance = 32 * float(np.finfo(np.float32).eps) * (np.abs(row_max) + np.abs(values)
                                                            + 1)
        with np.errstate(invalid="ignore"):
            return np.abs(self.losses - values) <= tolerance

    def close(self, values, mask=None, row_max=None) -> bool:
        """Are all the losses written (those of ``mask``) ``values`` (:meth:`same`)?"""
        same = self.same(values, row_max)
        return bool(same.all() if mask is None else same[mask].all())

    def handled_exactly(self, handled: np.ndarray) -> bool:
        return bool(self.unhandled.any()) and np.array_equal(~self.unhandled, handled)

    def step_larger_than_grid(self) -> int | None:
        """The step P > grid if exactly the samples s with s mod P < grid were handled."""
        index = np.arange(self.n)
        later = np.flatnonzero(~self.unhandled & (index >= self.grid))
        if not self.unhandled.any() or not len(later):
            return None
        step = int(later[0])
        return step if self.handled_exactly(index % step < self.grid) else None

    def first_sample_again(self) -> bool:
        """Samples past the grid hold the loss of the thread's first sample (s mod grid)."""
        index = np.arange(self.n)
        later = index >= self.grid
        if not later.any() or self.unhandled.any():
            return False
        first = index % self.grid
        again = self.want_losses[first]
        return (self.close(again, later, self.row_max[first])
                and not self.close(self.want_losses, later))

    def first_unhandled(self, count: int = 4) -> str:
        missing = np.flatnonzero(self.unhandled)
        shown = ", ".join(str(int(s)) for s in missing[:count])
        return shown + (", ..." if len(missing) > count else "")

    def said_losses(self) -> str:
        bad = np.flatnonzero(self.bad_losses)
        s = int(bad[0])
        return (f"{len(bad)} of {self.n} losses are wrong; the first is losses[{s}]: expected "
                f"{self.want_losses[s]:.6g}, got {self.losses[s]:.6g}")

    @staticmethod
    def first_of(rows: np.ndarray) -> int:
        return int(np.flatnonzero(rows)[0])

    def said_tie(self, s: int) -> str:
        classes = np.flatnonzero(self.wide[s] == self.row_max[s])
        return (f"classes {', '.join(map(str, classes))} share the largest logit, "
                f"{self.row_max[s]:g}; the label is {int(self.labels[s])}, the prediction "
                f"class {int(self.predicted[s])}, so correct should be "
                f"{int(self.want_correct[s])}, got {int(self.correct[s])}")

    def said_correct(self) -> str:
        bad = np.flatnonzero(self.bad_correct)
        s = int(bad[0])
        return (f"{len(bad)} of {self.n} values of correct are wrong; the first is correct[{s}]: "
                f"the label is {int(self.labels[s])}, the row's largest logit is class "
                f"{int(self.predicted[s])}, so it should be {int(self.want_correct[s])}, "
                f"got {int(self.correct[s])}")


EVALUATE_MISTAKES = (
    Mistake("nothing written", lambda e: e.unhandled.all(),
            "losses and correct still hold their starting values: no sample was handled",
            "each thread must handle samples of the batch and write both results for each: "
            "check that the loop runs (its start, its end) and that it writes losses and "
            "correct."),
    Mistake("a hard-coded block size",
            lambda e: e.wrong and e.source is not None and hard_coded_block(e.source) is not None,
            lambda e: (f"`{hard_coded_block(e.source)}` hard-codes the block size, but this "
                       f"launch has {e.trial.threads_per_block} threads per block"),
            BLOCK_HINT, recognised_from="source"),
    Mistake("a hard-coded size (a batch or class count typed in)",
            lambda e: e.wrong and _hard_coded_count(e.source) is not None,
            lambda e: (f"`{_hard_coded_count(e.source)}` uses a fixed number, but this batch has "
                       f"{e.n} samples of {e.classes} classes"), SHAPES_HINT,
            recognised_from="source"),
    Mistake("a loop whose index is never used (the same work at every step)",
            lambda e: e.wrong and _unused_loop_index(e.source) is not None,
            lambda e: (f"`{_unused_loop_index(e.source)}`: the loop's index is never used in its "
                       "body, so every step repeats the same sample's work instead of moving "
                       "on to the next"), MANY_PER_THREAD_HINT, recognised_from="source"),
    Mistake("one element per thread: samples past the grid's first N were never handled",
            lambda e: e.n > e.grid and e.handled_exactly(np.arange(e.n) < e.grid),
            lambda e: (f"one element per thread: samples past the grid's first {e.grid} were "
                       f"never handled (samples 0..{e.grid - 1} are right, {e.grid}.."
                       f"{e.n - 1} untouched: the grid has {e.grid} threads for {e.n} "
                       "samples)"), MANY_PER_THREAD_HINT),
    Mistake("the loop over the samples ends at the number of classes",
            lambda e: e.classes < e.n and e.handled_exactly(np.arange(e.n) < e.classes),
            lambda e: (f"only the first {e.classes} samples were handled, as many as there are "
                       f"classes: the loop over the batch stopped at the number of classes "
                       f"({e.classes}), not the number of samples ({e.n})"), SHAPES_HINT),
    Mistake("every block starts at `threadIdx.x` (the blocks redo the same samples)",
            lambda e: e.grid > e.trial.threads_per_block and e.handled_exactly(
                np.arange(e.n) % e.grid < e.trial.threads_per_block),
            lambda e: (f"{int(e.unhandled.sum())} samples were never handled (the first: "
                       f"{e.first_unhandled()}): in every stretch of {e.grid} samples only the "
                       f"first {e.trial.threads_per_block} were, as if every block started at "
                       "the same sample as the first block"),
            "start at the thread's global index (`cuda.grid(1)`), not `cuda.threadIdx.x`, "
            "which repeats in every block; " + STEP_BY_GRID_HINT),
    Mistake("a step larger than the grid", lambda e: e.step_larger_than_grid() is not None,
            lambda e: (f"{int(e.unhandled.sum())} samples were never handled (the first: "
                       f"{e.first_unhandled()}): each thread stepped by "
                       f"{e.step_larger_than_grid()} samples, more than the grid's "
                       f"{e.grid} threads, so the samples in between were skipped"),
            STEP_BY_GRID_HINT),
    Mistake("the loop's sample used to write but the thread's first sample read",
            lambda e: e.first_sample_again(),
            lambda e: (f"samples {e.grid}..{e.n - 1} hold the loss of sample s mod {e.grid}: at "
                       "every step of the loop the thread read its first sample's row again "
                       "instead of the sample the loop reached"), MANY_PER_THREAD_HINT),
    Mistake("losses never written", lambda e: bool(np.isnan(e.losses).all()),
            "losses still holds its starting values (NaN): no loss was written",
            "write each sample's loss into losses[s] as well as its 0/1 into correct[s]."),
    Mistake("correct never written", lambda e: bool((e.correct == UNWRITTEN).all()),
            f"correct still holds its starting values ({UNWRITTEN}): nothing was written into it",
            CORRECT_HINT),
    Mistake("the batch's last sample never handled (the loop ends one sample early)",
            lambda e: e.handled_exactly(np.arange(e.n) < e.n - 1),
            lambda e: (f"only sample {e.n - 1}, the batch's last, was never handled: the loop "
                       "over the samples ends one sample early"),
            "a range stops before its end: ending it at the batch's size takes every sample, "
            "the last one too."),
    Mistake("samples never handled", lambda e: bool(e.unhandled.any()),
            lambda e: (f"{int(e.unhandled.sum())} of {e.n} samples were never handled (the "
                       f"first: {e.first_unhandled()})"), STEP_BY_GRID_HINT),
    Mistake("exp overflowed: the row's largest logit not subtracted first",
            lambda e: (~np.isfinite(e.losses[e.big_rows])).any() and np.isfinite(
                e.losses[~e.big_rows]).all(),
            lambda e: (f"the losses of the rows with logits near ±{BIG_LOGIT:g} are not finite "
                       f"({int((~np.isfinite(e.losses)).sum())} of them): e^{BIG_LOGIT:g} "
                       f"overflows and e^-{BIG_LOGIT:g} is 0"), LOSS_HINT),
    Mistake("the row's largest logit subtracted but not added back",
            lambda e: e.close(e.want_losses - e.row_max),
            "every loss is short by its row's largest logit: m was subtracted inside the exps "
            "but not added back", LOSS_HINT),
    Mistake("the loss's sign reversed", lambda e: e.close(-e.want_losses),
            "every loss has the wrong sign (a loss is never negative)", LOSS_HINT),
    Mistake("the loss of the predicted class, not the label's",
            lambda e: e.close(e.loss_with(e.row_max)),
            "the losses are those of the predicted class (the row's largest logit), whatever "
            "the label", "the loss measures how unlikely the *label* is: subtract the label's "
            "logit, labels[s] picks its column."),
    Mistake("the loss of class 0, not the label's", lambda e: e.close(e.loss_with(e.wide[:, 0])),
            "the losses are those of class 0, whatever the label",
            "the loss measures how unlikely the *label* is: labels[s] picks its column."),
    Mistake("any other wrong losses", lambda e: bool(e.bad_losses.any()),
            lambda e: e.said_losses(), LOSS_HINT),
    Mistake("correct holds the predicted class, not 1 or 0",
            lambda e: np.array_equal(e.correct, e.predicted),
            "correct holds each row's predicted class, not whether it is right",
            CORRECT_HINT),
    Mistake("correct the wrong way round (1 for a wrong prediction)",
            lambda e: np.array_equal(e.correct, 1 - e.want_correct),
            "correct is 1 exactly where the prediction is wrong and 0 where it is right",
            CORRECT_HINT),
    Mistake("correct written only where the prediction is right (0 never written)",
            lambda e: bool((e.want_correct == 0).any()) and np.array_equal(
                e.correct, np.where(e.want_correct == 1, 1, UNWRITTEN)),
            f"correct is 1 where the prediction is right, but where it is wrong it still holds "
            f"its starting value ({UNWRITTEN}): no 0 was written there",
            "write correct[s] for every sample, 0 as well as 1: a new device array is not "
            "zeroed, it holds whatever was there."),
    Mistake("the last of tied largest logits taken as the prediction (a `>=` in the search)",
            lambda e: bool(e.tied_later.any()) and np.array_equal(e.correct, e.correct_if_last),
            lambda e: (f"correct is right but where a row's largest logit is tied between two "
                       f"classes: there it takes the later of them as the prediction (row "
                       f"{e.first_of(e.tied_later)}: {e.said_tie(e.first_of(e.tied_later))})"),
            TIE_HINT),
    Mistake("a label tied for the largest logit counted as right (its logit compared with the "
            "largest by `>=`)",
            lambda e: bool(e.tied_later.any()) and np.array_equal(e.correct, e.correct_if_any),
            lambda e: (f"correct is right but where the label's logit is tied for the largest "
                       f"with another class's: there it is 1 (row {e.first_of(e.tied_later)}: "
                       f"{e.said_tie(e.first_of(e.tied_later))}). With logits that all tie, as "
                       "a network's can at the start, every sample would count as right"),
            TIE_HINT),
    Mistake("any other wrong correct", lambda e: bool(e.bad_correct.any()),
            lambda e: e.said_correct(), CORRECT_HINT),
)


@dataclass
class EvaluateCrash(BatchCase):
    """An exception (``cause``) a launch of the learner's kernel raised in the simulator, which
    runs the kernel as Python, with what :func:`~gpulab.exercises.results.explain_exception`
    ``said`` of it (without the trial), and the kernel's source: the evidence
    :data:`EVALUATE_CRASH_MISTAKES` are told from."""

    cause: BaseException
    said: str
    source: KernelSource | None = None

    @property
    def overflowed(self) -> bool:
        """exp overflowed (OverflowError), or the log of a sum that underflowed to 0."""
        return isinstance(self.cause, OverflowError) or (
            isinstance(self.cause, ValueError) and "math domain" in str(self.cause))

    @property
    def past_the_end(self) -> bool:
        return isinstance(self.cause, IndexError)

    @property
    def past_the_classes(self) -> bool:
        """An index out of bounds on an axis of ``classes`` elements (a row's classes)."""
        found = re.search(r"out of bounds for axis \d+ with size (\d+)", str(self.cause))
        return self.past_the_end and found is not None and int(found[1]) == self.classes != self.n


# What an exception in the simulator means here, in the order they are tried; any other
# exception is the launch's own failure.
EVALUATE_CRASH_MISTAKES = (
    Mistake("exp of the raw logits overflowed, or the log of an underflowed sum or "
            "probability: not log(Σ exp(z − m)) + m − z[label] (an OverflowError, or a log of "
            "0, in the simulator)", lambda e: e.overflowed,
            lambda e: (f"{e.said}, on a row whose logits are near ±{BIG_LOGIT:g}, or whose "
                       f"label's logit is {1.5 * BIG_LOGIT:,g} below its largest: exp of the raw "
                       f"logits overflowed (e^{BIG_LOGIT:g}), or a sum or the label's "
                       f"probability underflowed to 0 (e^-{BIG_LOGIT:g}) and its log is "
                       "undefined: subtract the row's largest logit before exp (a running "
                       "maximum starts at the row's first logit: one that starts at 0 stays 0 "
                       f"on a row near -{BIG_LOGIT:g}), and take the loss as "
                       "log(Σ exp(z − m)) + m − z[label], never as the log of a probability"),
            LOSS_HINT),
    Mistake("a hard-coded batch or class count that runs past the batch's end (an IndexError "
            "in the simulator)",
            lambda e: e.past_the_end and _hard_coded_count(e.source) is not None,
            lambda e: (f"`{_hard_coded_count(e.source)}` uses a fixed number, but this batch has "
                       f"{e.n} samples of {e.classes} classes"), SHAPES_HINT,
            recognised_from="source"),
    Mistake("a sample's index or count used on the classes' axis (an IndexError there in the "
            "simulator): rows and columns of logits swapped, or a loop over the classes run to "
            "the batch's size", lambda e: e.past_the_classes,
            lambda e: (f"{e.said.split(' (not one of')[0]}: that axis holds a row's {e.classes} "
                       "classes, so a sample's index, or the batch's size, was used where a "
                       "class's belongs (the row and the column of logits swapped?)"),
            "logits[s, c] is sample s's logit for class c: the row is the sample, the column "
            "the class, and a row has logits.shape[1] classes."),
    Mistake("a missing guard: a thread past the batch's last sample (an IndexError in the "
            "simulator)", lambda e: e.past_the_end,
            lambda e: ("a thread went past the batch's last sample: the loop over the samples "
                       "is not stopped at the batch's end (a missing guard). "
                       f"{e.said[0].upper()}{e.said[1:]}"), EVALUATE_GUARD_HINT),
)


@dataclass
class OneBlockSizeOnly:
    """The check's batches right with ``right`` threads per block but not with ``wrong``: the
    ``failure`` there, and the kernel's source: the evidence :data:`EVALUATE_BLOCK_MISTAKES` are
    told from. Its ``where`` is empty: the failure under the other block size names its case."""

    right: int
    wrong: int
    failure: CheckFailedError
    source: KernelSource | None = None
    where: str = ""

    @property
    def line(self) -> str | None:
        """The source's line that hard-codes the block size, if any."""
        return hard_coded_block(self.source) if self.source is not None else None

    def said(self) -> str:
        line = self.line
        named = (f": `{line}` hard-codes the block size" if line
                 and "hard-codes the block size" not in self.failure.message else "")
        detail = self.failure.message
        detail = detail[:-1] if detail.endswith(".") else detail  # the failure adds it back
        return (f"your kernel is right with {self.right} threads per block but not with "
                f"{self.wrong}{named}. With {self.wrong}: {detail}")


# A kernel right under the first block size but not under the other, in the order tried.
EVALUATE_BLOCK_MISTAKES = (
    Mistake("right under one block size only: the block size typed into the kernel",
            lambda e: e.line is not None, OneBlockSizeOnly.said, BLOCK_HINT,
            recognised_from="source"),
    Mistake("right under one block size only (any other reason)", lambda e: True,
            OneBlockSizeOnly.said, lambda e: e.failure.hint),
)


class SampleOwners(GridStride):
    """The kernel traced on a small fixed grid: which threads wrote each sample's loss, in the
    order each thread wrote them (``order``)."""

    ITEM, SPELLED, DONE = "sample", "sample {}", "handled"


EVALUATE_METHOD_MISTAKES = grid_stride_mistakes(STEP_BY_GRID_HINT, COALESCED_HINT)
EVALUATE = CheckSpec(
    "evaluate_batch", "evaluate_batch(logits, labels, losses, correct)", EVALUATE_STUB_HINT,
    EVALUATE_METHOD_MISTAKES + EVALUATE_CRASH_MISTAKES + EVALUATE_MISTAKES
    + EVALUATE_BLOCK_MISTAKES, parameters=4,  # the trace runs before the launches
    counted_from_the_arrays="a sample's classes",
    title="3. one launch for any batch", call="check_evaluate_batch(evaluate_batch)",
    holds="each sample's cross-entropy loss (from the log-sum-exp) and correct (1 when its "
          "largest logit is its label's, else 0; on a tie the first of the largest, as "
          "np.argmax, with some rows tied on purpose), for "
          "batches smaller than one block, between one block and the grid, and 2-4 times the "
          "grid (never a multiple of the block), 11-15 classes, some rows near ±800 and some "
          "confidently wrong (the label's logit 1,200 below the largest), all on the same fixed "
          "grid (2 blocks in the simulator) under two block sizes; traced: every sample's "
          "loss and correct each handled by one thread, no thread doing the work of many (a "
          "step of the grid's size; a block's own chunk of the batch passes too)",
    also="a thread past the batch's end on a GPU (the padding written); simulator-only code "
         "(compiled for a real GPU); a kernel that never finishes (the time limit); gpulab's "
         "own kernel refused")


def _batches(rng: np.random.Generator, threads: int, grid: int) -> list[int]:
    """Three batch sizes for one fixed grid: fewer samples than one block, more than a block
    but fewer than the grid, and 2-4 times the grid; none a multiple of the block."""
    def drawn(low: int, high: int) -> int:
        while True:
            batch = int(rng.integers(low, high))
            if batch % threads:
                return batch

    return [drawn(3, threads), drawn(threads + 1, max(grid, threads + 3)),
            drawn(int(2.2 * grid), int(3.8 * grid))]


def _batch_problem(rng: np.random.Generator, batch: int, classes: int):
    """Random logits (float32) with every fifth row or so shifted to near +800 or -800, and
    labels; no two logits of a row equal but on purpose; every tenth other row 1,200 wide, its
    label's logit at -400 and another at +800; and from the fifth other row on, every tenth
    with its largest logit tied exactly between two classes, the label the second of the two
    (then 0 is right: the prediction is the first, as ``np.argmax`` takes it) or the first (1
    is right), in turn."""
    logits = rng.normal(0.0, 3.0, (batch, classes))
    shifted = rng.random(batch) < 0.2
    logits[shifted] += rng.choice([-BIG_LOGIT, BIG_LOGIT], int(shifted.sum()))[:, None]
    logits = logits.astype(np.float32)
    for _ in range(100):  # near ±800 float32 steps are 6e-5 apart: redraw rows with a tie
        ordered = np.sort(logits, axis=1)
        tied = np.any(np.diff(ordered, axis=1) == 0, axis=1)
        if not tied.any():
            break
        logits[tied] = (logits[tied].astype(np.float64) + rng.normal(
            0.0, 3.0, (int(tied.sum()), classes))).astype(np.float32)
    labels = rng.integers(0, classes, batch).astype(np.int64)
    # every tenth unshifted row confidently wrong: its label's logit -BIG_LOGIT / 2, another's
    # +BIG_LOGIT, so that a log-sum-exp shifted by anything but the row's largest logit (the
    # label's, or the row's mean: 800 - 400 / classes and more above it, past e^709) overflows,
    # in float64 as in float32
    for r in np.flatnonzero(~shifted)[::10]:
        logits[r, labels[r]] = -BIG_LOGIT / 2
        logits[r, (labels[r] + 1) % classes] = BIG_LOGIT
    for turn, r in enumerate(np.flatnonzero(~shifted)[5::10]):
        first, second = np.sort(rng.choice(classes, 2, replace=False))
        logits[r, [first, second]] = logits[r].max() + np.float32(1)
        labels[r] = second if turn % 2 == 0 else first
    return logits, labels


def _launch_evaluate(kernel, trial: Trial, source: KernelSource, classes: int
                     ) -> Evaluated:
    """One launch on padded arrays; an error in the simulator is named
    (:data:`EVALUATE_CRASH_MISTAKES`) or raised as it is."""
    logits, labels = _batch_problem(trial.rng, trial.n, classes)
    _, d_logits = padded(logits, trial.padding, np.float32(0))
    _, d_labels = padded(labels, trial.padding, np.int64(0))
    d_losses_all, d_losses = padded(np.full(trial.n, np.nan, np.float32), trial.padding, np.nan)
    d_correct_all, d_correct = padded(np.full(trial.n, UNWRITTEN, np.int32), trial.padding,
                                      UNWRITTEN)
    try:
        launch(kernel, trial, d_logits, d_labels, d_losses, d_correct,
               index_hint=EVALUATE_GUARD_HINT)
    except KernelError as error:
        _, said, _ = explain_exception(error, trial, EVALUATE_GUARD_HINT)
        failure = diagnose(EVALUATE_CRASH_MISTAKES, EvaluateCrash(
            trial, classes, error.cause, said.replace(f" ({trial}).", ""), source))
        if failure is None:
            raise
        raise failure from None
    losses = read_back(d_losses_all, (trial.n,), trial, what="losses", hint=EVALUATE_GUARD_HINT)
    correct = read_back(d_correct_all, (trial.n,), trial, fill=UNWRITTEN, what="correct",
                        hint=EVALUATE_GUARD_HINT)
    return Evaluated(trial, classes, logits, labels, losses, correct, source)


def _check_evaluate_method(kernel, seed: int, source: KernelSource) -> None:
    """Trace the kernel on a small fixed grid and fail if its threads do not step by the
    grid's size (:data:`EVALUATE_METHOD_MISTAKES`)."""
    rng = np.random.default_rng(seed)
    batch = int(rng.integers(*EVALUATE_TRACE_BATCH))
    while batch % EVALUATE_TRACE_THREADS == 0:
        batch += 1
    logits, labels = _batch_problem(rng, batch, EVALUATE_TRACE_CLASSES)
    losses = np.full(batch, np.nan, np.float32)
    correct = np.full(batch, UNWRITTEN, np.int32)
    trial = Trial("check_evaluate_batch", seed, (batch,), (EVALUATE_TRACE_THREADS,),
                  np.dtype(np.float32), rng, EVALUATE_TRACE_BLOCKS)
    trace = trace_trial(kernel, trial, logits, labels, losses, correct)
    offer_trace(kernel, 2, 4, "logits", "labels", "losses", "correct",
                note="with 19 rows of 3 logits: 8 threads for 19 samples")
    if trace.error:
        return  # the full-size runs explain errors
    names = source.parameters
    # both outputs, losses then correct; a sum kept in losses[s]: one sample, however many
    # writes
    for k, default in ((2, "losses"), (3, "correct")):
        name = names[k] if len(names) > k else default
        order = trace.elements_by_thread(name, "write", repeats=False)
        reject(EVALUATE_METHOD_MISTAKES, SampleOwners(trial, order))


@EVALUATE.check
def check_evaluate_batch(kernel, seed: int | None = None,
                         threads_per_block: int | None = None) -> str:
    """First traced on a small launch (3 blocks of 40 threads, 150-229 samples of 4 classes),
    so a mistake of :data:`EVALUATE_METHOD_MISTAKES` fails the check before the launches look
    for :data:`EVALUATE_CRASH_MISTAKES` (an exception in the simulator) and
    :data:`EVALUATE_MISTAKES` (the outputs). Then launched on one fixed grid
    (:data:`EVALUATE_BLOCKS` blocks of the drawn block size) with three batches, on padded
    arrays; then all again under another block size, unless ``threads_per_block`` is given
    (a failure only there: :data:`EVALUATE_BLOCK_MISTAKES`)."""
    tier = tier_key()
    source = EVALUATE.start(kernel)
    _check_evaluate_method(kernel, seed, source)
    first = Trial.draw("check_evaluate_batch", seed, np.float32, block=threads_per_block,
                       shape=(1,))
    classes = int(first.rng.integers(*EVALUATE_CLASSES))
    batches: list[int] = []

    def run(trial: Trial) -> None:
        threads = trial.threads_per_block
        grid = EVALUATE_BLOCKS[tier] * threads
        rng = np.random.default_rng([seed, threads])
        for batch in _batches(rng, threads, grid):
            each = Trial(trial.check_name, seed, (batch,), trial.block, trial.dtype, rng,
                         EVALUATE_BLOCKS[tier])
            reject(EVALUATE_MISTAKES, _launch_evaluate(kernel, each, source, classes))
            batches.append(batch)

    run(first)
    if not threads_per_block:
        other = first.other_block()
        try:
            run(other)
        except CheckFailedError as failure:
            raise diagnose(EVALUATE_BLOCK_MISTAKES, OneBlockSizeOnly(
                first.threads_per_block, other.threads_per_block, failure, source)) from None
    sizes = ", ".join(map(str, batches))
    return (f"every sample's loss and correct right for batches of {sizes} samples "
            f"({classes} classes), all on one fixed grid of {EVALUATE_BLOCKS[tier]} blocks, "
            "under two block sizes; traced: every sample handled by one thread, none doing the "
            f"work of many (seed={seed}).")


def try_evaluate_batch(kernel) -> None:
    """Run your kernel on two tiny batches of 3 classes, 5 samples then 11, both on one fixed
    grid of 2 blocks of 4 threads (8 threads: fewer than the second batch has samples), and
    print its losses and correct next to NumPy's. Errors are left to the try-it cell."""
    from numba import cuda

    rng = np.random.default_rng(8)
    for batch in (5, 11):
        logits = rng.normal(0.0, 2.0, (batch, 3)).astype(np.float32)
        labels = rng.integers(0, 3, batch)
        d_losses = cuda.to_device(np.full(batch, np.nan, np.float32))
        d_correct = cuda.to_device(np.full(batch, UNWRITTEN, np.int32))
        kernel[2, 4](cuda.to_device(logits), cuda.to_device(labels), d_losses, d_correct)
        cuda.synchronize()
        _, want = reference.softmax_cross_entropy(logits.astype(np.float64), labels)
        right = (np.argmax(logits, axis=1) == labels).astype(np.int32)
        print(f"batch of {batch} on 8 threads (NaN / {UNWRITTEN}: never written)")
        print(f"  losses  yours {np.array2string(d_losses.copy_to_host(), precision=3)}")
        print(f"          NumPy {np.array2string(want.astype(np.float32), precision=3)}")
        print(f"  correct yours {d_correct.copy_to_host()}  NumPy {right}")


def kernel_to_use(kernel) -> tuple[object, str]:
    """(the kernel the chapter runs, whose it is): yours once it has passed
    :func:`check_evaluate_batch` in this session; otherwise gpulab's ``evaluate_batch``, with a
    line printed that says why."""
    from gpulab.kernels import evaluate

    mine, whose, note = EVALUATE.yours_or_gpulabs(kernel, "evaluate_batch")
    if mine is None:
        print(note or "no kernel given: gpulab's evaluate_batch runs instead.")
    return (evaluate.evaluate_batch if mine is None else mine), whose


__all__ = [
    "EVALUATE", "EVALUATE_BLOCK_MISTAKES", "EVALUATE_CRASH_MISTAKES", "EVALUATE_METHOD_MISTAKES",
    "EVALUATE_MISTAKES", "EvaluateCrash", "Evaluated", "OneBlockSizeOnly",
    "check_evaluate_batch", "kernel_to_use", "try_evaluate_batch",
    "CASES", "LAUNCH_BOUND", "LAUNCH_BOUND_MISTAKES", "THROUGHPUT", "THROUGHPUT_MISTAKES",
    "TOLERANCE", "a_number", "check_launch_bound", "check_throughput",
    "model_crossover", "plain",
]
