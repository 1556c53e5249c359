"""Chapter 08's exercises: napkin math about a GPU, checked against gpulab's roofline model of a
training step (:func:`gpulab.nn.cost.estimate_step`).

- :func:`check_launch_bound` takes your ``first_batch_not_launch_bound(widths, gpu)``: the
  smallest batch size at which one training step of an MLP with these widths, on the named
  GPU, is no longer **launch-bound** (its kernels' launches no longer the largest part of its
  time). Checked against the model's answer (the smallest batch where
  ``estimate_step(...).bound()`` is not ``"launch"``).
- :func:`check_throughput` takes your ``samples_per_second(widths, batch, gpu)``: the training
  samples one step gets through per second at that batch, checked against the model's
  ``estimate_step(...).samples_per_s`` from a batch of 1 to a million.

Both are predictions from a few numbers per step (launches, FLOPs, bytes, bytes copied) and
the GPU's datasheet (``gpulab.hardware``), so they are judged within a tolerance, not
exactly: :data:`TOLERANCE`. Networks, GPUs and batches are random; a failure names the seed.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from gpulab import hardware
from gpulab.exercises.checks import CheckFailedError, CheckResult, call_learner, run_check
from gpulab.nn import cost
from gpulab.nn.cost import per_sample_seconds

# A prediction within this factor of the model's answer is right: the napkin leaves out what a
# step does whatever the batch (reading the weights, the optimiser's update), which shifts the
# answer by up to ~25 % for the networks drawn here (widths 16-256).
TOLERANCE = 1.3
WIDTH_RANGE = (16, 257)
CASES = 6


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


def _gpu_spec(gpu) -> hardware.GPUSpec:
    return hardware.get_gpu(gpu)


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


def _random_case(rng: np.random.Generator, minimum_crossover: int = 4):
    """(widths, gpu key) of a small MLP that is launch-bound for the first few batch sizes on
    that GPU (so that the question has an answer above 1)."""
    while True:
        widths = [int(w) for w in rng.integers(*WIDTH_RANGE, size=int(rng.integers(2, 5)))]
        gpu = str(rng.choice(list(hardware.GPUS)))
        if model_crossover(widths, gpu) >= minimum_crossover:
            return widths, gpu


def within(got: float, want: float, factor: float = TOLERANCE) -> bool:
    return want / factor <= got <= want * factor


# --- exercise 1: where a step stops being launch-bound ------------------------------------------

LAUNCH_BOUND_STUB_HINT = (
    "the launches cost the same at every batch; every other part grows with it. Find what one "
    "more sample adds to each part's time, and the batch at which the largest of those, times "
    "the batch, reaches the launches' time."
)


def check_launch_bound(function, seed: int | None = None, show: bool = True) -> CheckResult:
    """Check ``function(widths, gpu)`` (``gpu`` a key of :data:`gpulab.hardware.GPUS`, e.g.
    ``gpulab.hardware.COURSE_GPU``) on random small MLPs and GPUs: the answer must be a number
    within a factor :data:`TOLERANCE` of :func:`model_crossover`.

    Diagnoses: the stub; not a number (None, an array, a string); one launch instead of the
    step's; the launch overhead in microseconds; FLOPs alone; device memory alone; the copy
    from the host left out; the copy alone where the kernels' work is larger; the
    samples per second or a time instead of a batch size."""

    def body(seed: int) -> str:
        rng = np.random.default_rng(seed)
        cases = ([([64, 128, 10], hardware.COURSE_GPU)]
                 + [_random_case(rng) for _ in range(CASES - 1)])
        for widths, gpu in cases:
            where = f"(widths {widths}, {gpu}; seed={seed})"
            got = a_number(call_learner(function, list(widths), gpu,
                                        stub_hint=LAUNCH_BOUND_STUB_HINT,
                                        call=f"first_batch_not_launch_bound({widths}, "
                                             f"{gpu!r})"),
                           "the batch size", where)
            want = model_crossover(widths, gpu)
            parts = per_sample_seconds(widths, gpu)
            launch = parts["launch"]
            napkin = launch / max(parts["compute"], parts["memory"], parts["transfer"])
            if within(got, want) or within(got, napkin):
                continue
            largest = max(("compute", "memory", "transfer"), key=parts.get)
            suspects = {
                "one launch instead of the step's": (
                    napkin / cost_launches(widths),
                    f"a step launches {cost_launches(widths)} kernels "
                    "(len(cost.step_kernels(widths, batch))), each costing "
                    "hardware.LAUNCH_OVERHEAD_S."),
                "the launch overhead in microseconds instead of seconds": (
                    napkin * 1e6, "keep every time in seconds: hardware.LAUNCH_OVERHEAD_S is "
                                  f"{hardware.LAUNCH_OVERHEAD_S:.3g} s."),
                "the kernels' work without the copy from the host": (
                    launch / max(parts["compute"], parts["memory"]),
                    "each step also copies its batch from the host (cost.step_transfer_bytes) "
                    "from pageable memory (gpu.host_pageable_bytes_per_s): for a small network "
                    "that copy is often the largest per-sample part."),
                "the copy at the link's peak (host_link_bytes_per_s)": (
                    launch / max(parts["compute"], parts["memory"],
                                 parts["transfer"] * _gpu_spec(gpu).host_pageable_bytes_per_s
                                 / _gpu_spec(gpu).host_link_bytes_per_s),
                    "the batch is an ordinary NumPy array (pageable memory): the driver copies "
                    "it through a staging buffer at gpu.host_pageable_bytes_per_s, well below "
                    "the link's peak gpu.host_link_bytes_per_s (which pinned memory nears)."),
                "the FLOPs alone (compute)": (
                    launch / parts["compute"],
                    f"here the largest per-sample part is {largest}, not compute: compare all "
                    "three (compute, device memory, the copy from the host) and take the "
                    "largest."),
                "device memory alone": (
                    launch / parts["memory"],
                    f"here the largest per-sample part is {largest}: compare compute, device "
                    "memory and the copy from the host."),
                "the copy from the host alone": (
                    launch / parts["transfer"],
                    f"here the largest per-sample part is {largest}, not the copy: compare "
                    "all three."),
            }
            for description, (value, hint) in suspects.items():
                if value != napkin and within(got, value, 1.05):
                    raise CheckFailedError(
                        f"for widths {widths} on the {gpu}, the model stops being "
                        f"launch-bound at batch {plain(want)}; you predicted {plain(got)}, "
                        f"which is what {description} gives {where}.", hint)
            if got < 1:
                hint = ("a batch size is a count of samples (1 or more): did you return a "
                        "time, or the launches' share of it?")
            elif got > 1000 * want:
                hint = ("that is far too large: did you return samples per second? The "
                        "question is the batch size.")
            else:
                hint = LAUNCH_BOUND_STUB_HINT
            raise CheckFailedError(
                f"for widths {widths} on the {gpu}, the model stops being launch-bound at "
                f"batch {plain(want)}; you predicted {plain(got)} (more than a factor "
                f"{TOLERANCE} away) {where}.", hint)
        return (f"all {len(cases)} predictions within a factor {TOLERANCE} of the model "
                f"(seed={seed}).")

    return run_check("launch_bound", body, seed, show)


def _peak_share(gpu) -> float:
    """The pageable copy rate as a share of the link's peak (a copy at the peak takes this
    fraction of the pageable copy's time)."""
    spec = _gpu_spec(gpu)
    return spec.host_pageable_bytes_per_s / spec.host_link_bytes_per_s


def cost_launches(widths) -> int:
    """Kernel launches of one training step (Adam), as the model counts them."""
    return len(cost.step_kernels(widths, 1))


# --- exercise 2: samples per second ---------------------------------------------------------------

THROUGHPUT_STUB_HINT = (
    "the host issues the step's launches (the same at every batch) ahead, while the GPU runs "
    "the kernels before: the two overlap, so that part takes the larger of the launches and "
    "the kernels' work (compute and memory overlap too: the larger of the two, per sample); "
    "then add every sample's copy from the host, which does not overlap; samples per second = "
    "batch / step time."
)


def _throughput_batches(widths, gpu) -> list[int]:
    """Batches on both sides of the crossover: 1, a quarter of it, it, 16 times it, and a
    million (where only the per-sample parts matter)."""
    crossover = model_crossover(widths, gpu)
    return sorted({1, max(crossover // 4, 1), crossover, 16 * crossover, 1 << 20})


def _throughput_mistakes(widths, gpu) -> dict:
    """{description: (samples/s as a function of the batch, hint)} for the usual mistakes."""
    parts = per_sample_seconds(widths, gpu)
    launch, copy = parts["launch"], parts["transfer"]
    work = max(parts["compute"], parts["memory"])
    launches = cost_launches(widths)

    def step(batch):
        return max(launch, batch * work) + batch * copy

    return {
        "the launches left out": (
            lambda b: 1 / (work + copy),
            "the host's time to issue the step's launches (len(cost.step_kernels(...)) x "
            "hardware.LAUNCH_OVERHEAD_S) is the same at every batch: at small batches the GPU "
            "waits for it most of the time."),
        "the launches and the kernels' work added": (
            lambda b: b / (launch + b * (work + copy)),
            "launches are asynchronous: the host issues the next while the GPU runs the last, "
            "so the launches and the kernels overlap, and the step takes the larger of the two "
            "(chapter 07's timeline)."),
        "the copy from the host left out": (
            lambda b: b / max(launch, b * work),
            "every step copies its batch from the host first (cost.step_transfer_bytes at "
            "gpu.host_pageable_bytes_per_s: the batch is an ordinary NumPy array)."),
        "the copy at the link's peak instead of the pageable rate": (
            lambda b: b / (max(launch, b * work) + b * copy * _peak_share(gpu)),
            "the batch is an ordinary NumPy array (pageable memory), copied at "
            "gpu.host_pageable_bytes_per_s, well below the link's peak "
            "gpu.host_link_bytes_per_s."),
        "the largest part alone, the copy overlapping too": (
            lambda b: b / max(launch, b * work, b * copy),
            "a copy from pageable memory keeps the host busy until it is done: it does not "
            "overlap the launches or the kernels, so add its time."),
        "one launch per step": (
            lambda b: b / (max(launch / launches, b * work) + b * copy),
            f"a step launches {launches} kernels, each hardware.LAUNCH_OVERHEAD_S."),
        "the step's time in seconds, not samples per second": (
            step, "divide the batch by the step's time."),
        "samples per millisecond": (lambda b: b / step(b) / 1e3,
                                    "per second: keep times in seconds."),
        "samples per microsecond": (lambda b: b / step(b) / 1e6,
                                    "per second: keep times in seconds."),
    }


def check_throughput(function, seed: int | None = None, show: bool = True) -> CheckResult:
    """Check ``function(widths, batch, gpu)``: samples per second within a factor
    :data:`TOLERANCE` of ``cost.estimate_step(widths, batch, gpu).samples_per_s`` for random
    small MLPs and GPUs, at batches from 1 to a million.

    Diagnoses: the stub; not a number; the launches left out (far too fast at small
    batches); the launches added to the kernels' work (they overlap); the copy from the host
    left out; the copy overlapping too; one launch per step; the step's time instead of
    samples per second; samples per millisecond or per microsecond."""

    def body(seed: int) -> str:
        rng = np.random.default_rng(seed)
        cases = [([64, 128, 10], hardware.COURSE_GPU)] + [_random_case(rng) for _ in range(3)]
        checked = 0
        for widths, gpu in cases:
            batches = _throughput_batches(widths, gpu)
            got = {}
            for batch in batches:
                where = f"(widths {widths}, batch {plain(batch)}, {gpu}; seed={seed})"
                got[batch] = a_number(call_learner(function, list(widths), batch, gpu,
                                                   stub_hint=THROUGHPUT_STUB_HINT,
                                                   call=f"samples_per_second({widths}, "
                                                        f"{batch}, {gpu!r})"),
                                      "samples per second", where)
            want = {b: cost.estimate_step(widths, b, gpu).samples_per_s for b in batches}
            checked += len(batches)
            wrong = [b for b in batches if not within(got[b], want[b])]
            if not wrong:
                continue
            batch = wrong[0]
            where = f"(widths {widths}, batch {plain(batch)}, {gpu}; seed={seed})"
            said = (f"the model says {plain(want[batch])} samples/s; you predicted "
                    f"{plain(got[batch])}")
            for description, (mistake, hint) in _throughput_mistakes(widths, gpu).items():
                if all(within(got[b], mistake(b), 1.05) for b in batches):
                    raise CheckFailedError(f"{said}, which is what {description} gives {where}.",
                                           hint)
            raise CheckFailedError(f"{said} (more than a factor {TOLERANCE} away) {where}.",
                                   THROUGHPUT_STUB_HINT)
        return (f"all {checked} predictions within a factor {TOLERANCE} of the model, "
                f"batches 1 to {plain(1 << 20)} (seed={seed}).")

    return run_check("throughput", body, seed, show)


__all__ = [
    "CASES", "TOLERANCE", "a_number", "check_launch_bound", "check_throughput",
    "cost_launches", "model_crossover", "plain",
]
