"""Chapter 10's exercises: the two rules that keep narrow formats safe, and the kernel they
need.

- :func:`check_loss_scale_update`: exercise 1, ``update_loss_scale(scale, clean_steps,
  found_inf, growth_interval) -> (scale, clean_steps, take_step)``: one step of dynamic loss
  scaling.
- :func:`check_delayed_scale`: exercise 2, ``delayed_scale(amax_history, x, fp8_max, margin) ->
  (new_history, scale)``: delayed scaling for one tensor.
- :func:`check_amax_nonfinite`: exercise 3, the kernel ``amax_nonfinite(x, out)``: the one pass
  over a tensor that both need (the scaler's inf/NaN check, delayed scaling's amax). Once it
  passes, :func:`recipes_on_kernel` runs the chapter's fp16 and fp8 recipes with it.

A failure names the mistake and the seed to repeat it.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass

import numpy as np

from gpulab import device, formats
from gpulab.exercises.evidence import GridStride, shown_apart
from gpulab.exercises.grid_stride import grid_stride_mistakes
from gpulab.exercises.mistakes import Mistake, reject
from gpulab.exercises.results import CheckFailedError, offer_trace
from gpulab.exercises.running import call_learner, launch, padded
from gpulab.exercises.source_rules import (
    KernelSource,
    count_calls,
    plain_writes_to,
    uneven_barriers,
)
from gpulab.exercises.spec import CheckSpec, traced, under_two_blocks
from gpulab.exercises.trial import Trial, tier_key
from gpulab.instruments import WatchedArray, poison_value, thread_label
from gpulab.nn.mixed_precision import LossScaler, scale_from_history
from gpulab.nn.mixed_precision import amax as recorded_amax

# --- exercise 1: the loss scaler's update rule ----------------------------------------------

GROWTH, BACKOFF = 2.0, 0.5
FP16_LARGEST = float(np.finfo(np.float16).max)  # 65504: a cap learners give the scale
SCALER_STUB_HINT = (
    "two cases, decided by found_inf. An inf or NaN: halve the scale, start the count of clean "
    "steps again from 0, and do not take the step. A clean step: count it; if the count "
    "reaches growth_interval, double the scale and start the count again from 0; take the "
    "step. Return (scale, clean_steps, take_step)."
)
SKIP_HINT = (
    "a step whose gradients hold inf or NaN must be skipped (take_step False): applying it "
    "would write inf or NaN into the weights. GradScaler skips it and tries again with half "
    "the scale."
)
RESET_ON_BACKOFF_HINT = (
    "on an overflow, start the count of clean steps again from 0: the scale should grow only "
    "after growth_interval clean steps *in a row* since the last overflow."
)
RESET_ON_GROWTH_HINT = (
    "when the scale grows, start the count again from 0; otherwise the count stays at or "
    "above growth_interval and the scale doubles on every later step until it overflows."
)
COUNT_HINT = (
    "count this clean step first (clean_steps + 1), then compare the new count with "
    "growth_interval: the scale doubles on the step that makes it equal to growth_interval."
)


def _reference_step(scale: float, clean: int, found_inf: bool, interval: int):
    scaler = LossScaler(init_scale=scale, growth_interval=interval)
    scaler.clean_steps = clean
    take = scaler.update(found_inf)
    return scaler.scale, scaler.clean_steps, take


def _scaler_steps(rng: np.random.Generator, interval: int) -> list[bool]:
    """found_inf per step: a growth, an overflow in the middle of a count, two in a row, a
    growth right after, then a random tail."""
    middle = int(rng.integers(1, interval))  # 1 .. interval - 1 clean steps before overflowing
    steps = [False] * interval + [False] * middle + [True, True] + [False] * interval
    steps += [False] * int(rng.integers(0, interval)) + [True]
    steps += list(rng.random(3 * interval + 10) < 0.2)
    return [bool(s) for s in steps]


def _check_scaler_result(result, where: str, given_scale: float | None = None):
    if not (isinstance(result, tuple) and len(result) == 3):
        raise CheckFailedError(
            f"{where}: your function returned {result!r:.80} (a {type(result).__name__}), not "
            "three values.", "end with `return scale, clean_steps, take_step` (a tuple of "
                             "three).")
    scale, clean, take = result
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.integer, np.floating)):
        raise CheckFailedError(f"{where}: the scale is {scale!r:.60} (a {type(scale).__name__}), "
                               "not a number.", "return the new scale as a float first.")
    if not (math.isfinite(float(scale)) and float(scale) > 0):
        floored = given_scale is not None and float(scale) == given_scale // GROWTH
        raise CheckFailedError(
            f"{where}: the scale became {scale!r}; a loss scale is a positive, finite number"
            + (f": {given_scale:g} // 2 is {given_scale // GROWTH:g}, a floor division "
               "rounds the half down to a whole number" if floored else "") + ".",
            "halve with `* 0.5` (or `/ 2`), not `// 2`: a scale below 2 is a fraction after the "
            "halving." if floored else SCALER_STUB_HINT)
    if isinstance(clean, bool) or not isinstance(clean, (int, np.integer)):
        what = f"{where}: the count of clean steps"
        if isinstance(clean, (float, np.floating)) and isinstance(scale, (int, np.integer)):
            raise CheckFailedError(f"{where}: your function returned {result!r:.80}: the scale "
                                   "and the count look swapped.", "return (scale, clean_steps, "
                                                                 "take_step), in that order.")
        if isinstance(clean, (float, np.floating)) and float(clean).is_integer():
            raise CheckFailedError(
                f"{what} is {clean!r}, a float: a count of steps is a whole number.",
                "keep the count an int: `clean_steps + 1` and `0`, not `1.0` or a division.")
        raise CheckFailedError(f"{what} is {clean!r:.60} (a {type(clean).__name__}), not a whole "
                               "number.", "return the count of clean steps as an int.")
    if not isinstance(take, (bool, np.bool_)):
        raise CheckFailedError(
            f"{where}: take_step is {take!r:.40} (a {type(take).__name__}); return True or "
            "False.", "take_step says whether the optimiser applies this step: a bool.")
    return float(scale), int(clean), bool(take)


@dataclass
class ScalerStep:
    """One step of the scaler where the learner's ``got`` (scale, clean_steps, take_step) is not
    the reference's ``want``: the state it was fed (``scale``, ``clean`` steps, ``found_inf``,
    the growth ``interval``), the step's ``number`` and the ``seed``. The evidence
    :data:`SCALER_MISTAKES` are told from."""

    scale: float
    clean: int
    found_inf: bool
    interval: int
    got: tuple
    want: tuple
    number: int
    seed: int | None
    later: bool | None = None  # on a missed growth: does it grow when fed one more clean step?
    grows_small: bool | None = None  # on a missed growth at 2**16 or more: does 2**10 grow?

    @property
    def where(self) -> str:
        return (f"step {self.number}: scale {self.scale:g}, clean_steps {self.clean}, found_inf "
                f"{self.found_inf}, growth_interval {self.interval}; seed={self.seed}")

    @property
    def summary(self) -> str:
        (w_scale, w_clean, w_take), (g_scale, g_clean, g_take) = self.want, self.got
        return (f"expected (scale {w_scale:g}, clean_steps {w_clean}, take_step {w_take}), got "
                f"({g_scale:g}, {g_clean}, {g_take})")

    @property
    def grows(self) -> bool:
        """Does the reference double the scale on this step?"""
        return self.want[0] == self.scale * GROWTH

    def gave_scale(self, factor: float) -> bool:
        """Is the learner's scale the scale it was fed times ``factor``?"""
        return self.got[0] == self.scale * factor


def _clean(seen):
    """``seen`` on a clean step (found_inf False) only."""
    return lambda e: not e.found_inf and seen(e)


def _overflow(seen):
    """``seen`` on an overflow (found_inf True) only."""
    return lambda e: e.found_inf and seen(e)


def _too_early(e: ScalerStep) -> bool:
    return not e.grows and e.gave_scale(GROWTH) and e.clean + 1 < e.interval


# The wrong steps, in the order they are tried (the last a catch-all): an overflow's first,
# then a clean step's.
SCALER_MISTAKES = (
    Mistake("found_inf tested by identity (`is True`): NumPy's True, which np.isinf(g).any() "
            "gives, is not Python's",
            lambda e: (isinstance(e.found_inf, np.bool_) and bool(e.found_inf)
                       and e.got == _reference_step(e.scale, e.clean, False, e.interval)),
            lambda e: (f"{e.summary}: with found_inf NumPy's True (np.True_, what "
                       "np.isinf(grads).any() returns) your function did what it does on a "
                       "clean step"),
            "test found_inf for truth, not for identity with Python's True: `is True` is false "
            "for NumPy's booleans, and a trainer's found_inf often is one."),
    Mistake("the step taken on an overflow", _overflow(lambda e: e.got[2]),
            lambda e: f"{e.summary}: the step was taken although a gradient was inf or NaN",
            SKIP_HINT),
    Mistake("doubling on an overflow", _overflow(lambda e: e.gave_scale(GROWTH)),
            lambda e: f"{e.summary}: the scale doubled on an overflow; it must be halved",
            "on inf/NaN, multiply the scale by 0.5: a smaller scale keeps the gradients in "
            "range."),
    Mistake("a floor under the scale (no back-off below 1)",
            _overflow(lambda e: e.scale <= 1 and e.want[0] < e.got[0] <= e.scale),
            lambda e: (f"{e.summary}: the scale stayed at {e.got[0]:g} on an overflow at "
                       f"{e.scale:g}, though it halves at larger scales: a floor of its own? "
                       "GradScaler's scale has none: it halves on every overflow, below 1 too "
                       "(a scale under 1 shrinks a loss whose gradients overflow even "
                       "unscaled)"),
            "on inf/NaN, multiply the scale by 0.5, whatever it is: no floor."),
    Mistake("no back-off on an overflow", _overflow(lambda e: e.gave_scale(1)),
            lambda e: (f"{e.summary}: the scale stayed the same on an overflow, so the next "
                       "step overflows again"), "on inf/NaN, multiply the scale by 0.5."),
    Mistake("back-off without resetting the count",
            _overflow(lambda e: e.got[0] == e.want[0] and e.got[1] != 0),
            lambda e: (f"{e.summary}: the scale backed off, but the count of clean steps was "
                       f"not reset to 0 (it was {e.clean})"), RESET_ON_BACKOFF_HINT),
    Mistake("a clean step skipped", _clean(lambda e: not e.got[2]),
            lambda e: f"{e.summary}: a clean step (no inf or NaN) was skipped",
            "take every step whose gradients are finite: take_step is True there."),
    Mistake("a clean step halved", _clean(lambda e: e.gave_scale(BACKOFF)),
            lambda e: f"{e.summary}: the scale was halved on a clean step",
            "halve only on an overflow (found_inf True)."),
    Mistake("growing on every clean step", _clean(lambda e: _too_early(e) and e.clean == 0),
            lambda e: (f"{e.summary}: the scale doubled after only 1 clean step(s); it should "
                       f"wait for growth_interval = {e.interval}; growing on every clean step "
                       "overflows within a few steps"), COUNT_HINT),
    Mistake("growing before growth_interval clean steps", _clean(_too_early),
            lambda e: (f"{e.summary}: the scale doubled after only {e.clean + 1} clean step(s); "
                       f"it should wait for growth_interval = {e.interval}"), COUNT_HINT),
    Mistake("doubling again after a growth (the count not reset)",
            _clean(lambda e: not e.grows and e.gave_scale(GROWTH)),
            lambda e: (f"{e.summary}: the scale doubled again although the count had just been "
                       "reset by a growth"), RESET_ON_GROWTH_HINT),
    Mistake("a growth or back-off factor other than 2",
            lambda e: e.want[0] != e.scale and e.got[0] not in (e.scale, e.want[0], FP16_LARGEST)
            and (e.got[0] > e.scale) == (e.want[0] > e.scale),
            lambda e: (f"{e.summary}: the scale changed by a factor of {e.got[0] / e.scale:g}; "
                       "GradScaler's factors are 2 (growth) and 0.5 (back-off)"),
            SCALER_STUB_HINT),
    Mistake("growing one step late (`>` for `==`)",
            _clean(lambda e: e.grows and e.gave_scale(1) and e.got[1] == e.clean + 1
                   and e.later),
            lambda e: (f"{e.summary}: this is the {e.interval}th clean step in a row, so the "
                       "scale should double now; yours waits (an off-by-one: growing when the "
                       f"count exceeds {e.interval} instead of when it reaches it?)"), COUNT_HINT),
    Mistake("a cap on the scale (no growth past 2**16, or a growth clamped to fp16's largest "
            "value)",
            _clean(lambda e: e.grows and (e.gave_scale(1) and e.grows_small
                                          or e.got[0] == FP16_LARGEST < e.want[0])),
            lambda e: (f"{e.summary}: the scale "
                       + (f"stopped at {e.got[0]:g}, fp16's largest value, instead of growing"
                          if e.got[0] == FP16_LARGEST else
                          f"did not grow past {e.scale:g}, though it grows at 1024")
                       + ": GradScaler's scale has no cap (it is a float32 that multiplies the "
                       "loss; fp16's largest value bounds the gradients, not the scale)"),
            COUNT_HINT),
    Mistake("never growing", _clean(lambda e: e.grows and e.gave_scale(1)),
            lambda e: (f"{e.summary}: the scale did not grow on the {e.interval}th clean step "
                       "in a row, nor when fed one more: is growth_interval (the argument) "
                       "ignored or hard-coded?"), COUNT_HINT),
    Mistake("no reset after a growth",
            _clean(lambda e: e.grows and e.got[0] == e.want[0] and e.got[1] != 0),
            lambda e: f"{e.summary}: the scale grew, but the count was not reset to 0",
            RESET_ON_GROWTH_HINT),
    Mistake("a clean step not counted", _clean(lambda e: e.got[1] == e.clean and not e.grows),
            lambda e: f"{e.summary}: the clean step was not counted", COUNT_HINT),
    Mistake("another result", lambda e: True,
            lambda e: f"{e.summary}: a result none of the scaler's rules gives",
            SCALER_STUB_HINT),
)


LOSS_SCALE = CheckSpec(
    "loss_scale_update", "update_loss_scale(scale, clean_steps, found_inf, growth_interval)",
    SCALER_STUB_HINT, SCALER_MISTAKES, title="1. the loss scaler's update rule",
    call="check_loss_scale_update(update_loss_scale)",
    holds="`(scale, clean_steps, take_step)` after one step, as PyTorch's `GradScaler`: on "
          "inf/NaN halve, reset the count, skip; else count, and at `growth_interval` double and "
          "reset. Checked step by step along 29–67 steps (random interval 3–8, random start "
          "2¹⁰–2²⁰) built to hit every rule, then 4 states out of order, each asked twice (the "
          "answer the arguments' alone), against `gpulab.nn.mixed_precision.LossScaler`; "
          "found_inf is NumPy's boolean on every other step",
    also="the stub; a scale that is not a positive, finite number; a count that is not an int "
         "(a float named as such), a non-bool `take_step`, not three values")


SCALER_STATES = 4  # states asked out of order after the steps, each twice
SCALER_STATELESS_HINT = (
    "compute the new scale and the new count from the arguments alone: the trainer keeps the "
    "state and passes clean_steps in, so a count kept in a global (or an attribute) drifts "
    "from the trainer's as soon as it skips, restarts or runs two scalers.")


def _grows_small(update, want: tuple, scale: float, interval: int, where: str) -> bool | None:
    """On a growth missed at a scale of 2**16 or more: does the learner's function grow 2**10
    on its growth_interval-th clean step (then the scale is capped)? None otherwise."""
    if want[0] <= scale or scale < 2.0**16:
        return None
    result = call_learner(update, 2.0**10, interval - 1, False, interval)
    return _check_scaler_result(result, where)[0] == 2.0**11


@LOSS_SCALE.check
def check_loss_scale_update(update, seed: int | None = None) -> str:
    """Along the steps of :func:`_scaler_steps`, the function is fed at every step the state the
    reference is in, so that a mistake is reported where it happens."""
    rng = np.random.default_rng(seed)
    interval = int(rng.integers(3, 9))
    scale, clean = 2.0 ** int(rng.integers(10, 21)), 0
    steps = _scaler_steps(rng, interval)
    grown = backed_off = 0
    for number, found_inf in enumerate(steps, start=1):
        # every other step's found_inf is NumPy's boolean, as np.isinf(g).any() gives it
        found_inf = np.bool_(found_inf) if number % 2 == 0 else found_inf
        where = (f"step {number} (scale {scale:g}, clean_steps {clean}, found_inf "
                 f"{found_inf}, growth_interval {interval}; seed={seed})")
        result = call_learner(update, scale, clean, found_inf, interval,
                              stub_hint=SCALER_STUB_HINT,
                              call=f"update_loss_scale({scale:g}, {clean}, {found_inf}, "
                                   f"{interval})")
        got = _check_scaler_result(result, where)
        want = _reference_step(scale, clean, found_inf, interval)
        if got != want:
            later = None if found_inf or want[0] <= scale else _check_scaler_result(call_learner(
                update, scale, clean + 1, False, interval), where)[0] > scale
            LOSS_SCALE.reject(ScalerStep(scale, clean, found_inf, interval, got, want, number,
                                         seed, later, _grows_small(update, want, scale,
                                                                   interval, where)))
        grown += want[0] > scale
        backed_off += want[0] < scale
        scale, clean = want[0], want[1]
    # then states out of order, each asked twice: the answer is the arguments' alone
    # the first two at fp16's largest power of two about to grow, and at 2**10 with an inf:
    # a scale kept under a cap, or over a floor, of its own shows there
    # then a scale of 1 with an inf: halved, it is 0.5 (`scale // 2` gives 0)
    states = [(2.0 ** 16, interval - 1, False), (2.0 ** 10, int(rng.integers(0, interval)), True),
              (1.0, int(rng.integers(0, interval)), True)]
    states += [(2.0 ** int(rng.integers(5, 25)), int(rng.integers(0, interval)),
                bool(rng.random() < 0.3)) for _ in range(SCALER_STATES - 3)]
    for number, (scale, clean, found_inf) in enumerate(states, start=len(steps) + 1):
        where = (f"a state out of order (scale {scale:g}, clean_steps {clean}, found_inf "
                 f"{found_inf}, growth_interval {interval}; seed={seed})")
        call = f"update_loss_scale({scale:g}, {clean}, {found_inf}, {interval})"
        first, second = (_check_scaler_result(call_learner(
            update, scale, clean, found_inf, interval, call=call), where, scale)
            for _ in range(2))
        if first != second:
            raise CheckFailedError(
                f"{call} gave {first}, then {second} when asked again ({where}): your function "
                "keeps something of its own between calls (a global count?), so its answer "
                "is not the arguments' alone.", SCALER_STATELESS_HINT)
        want = _reference_step(scale, clean, found_inf, interval)
        if first != want:
            LOSS_SCALE.reject(ScalerStep(scale, clean, found_inf, interval, first, want,
                                         number, seed, None, _grows_small(update, want, scale,
                                                                          interval, where)))
    return (f"{len(steps)} steps right, growth_interval {interval}: {grown} growths, "
            f"{backed_off} back-offs with the step skipped; {SCALER_STATES} states out of "
            f"order right, each twice (seed={seed}).")


# --- exercise 2: a per-tensor FP8 scale from an amax history --------------------------------

E4M3 = formats.get_format("fp8_e4m3")
E5M2 = formats.get_format("fp8_e5m2")
DELAYED_STUB_HINT = (
    "three lines of work: this step's amax (the largest magnitude of x), the history with it "
    "(drop the first, oldest entry; append the new one last; same length), and the scale "
    "fp8_max / max(new history) / 2**margin. Return (new_history, scale)."
)
HISTORY_MAX_HINT = (
    "delayed scaling divides by the largest amax of the whole history (this step's included), "
    "not by this step's alone: a spike a few steps ago must keep the scale down, or the next "
    "spike overflows."
)
ABS_HINT = (
    "amax is the largest *magnitude*: `np.max(np.abs(x))`. FP8 formats are symmetric, so a "
    "large negative value needs the range as much as a large positive one."
)
MARGIN_HINT = (
    "the margin leaves headroom: divide by 2 ** margin as well, so that the largest amax lands "
    "2**margin below fp8_max (with margin 0, amax * scale == fp8_max)."
)


def _delayed_trials(rng: np.random.Generator):
    """(history, x, fp8_max, margin, what) cases: an old spike above this step's amax, in the
    oldest entry kept, and a negative largest magnitude last in x (E4M3, margin 0); the same
    with a margin, a history of 20-40 and the spike more than 16 entries back; E5M2 gradients
    with a margin and a larger spike in the oldest entry, which this step drops (a window one
    entry too long counts it); a step whose amax is the largest ever."""
    trials = []
    for k, (fmt, margin) in enumerate(((E4M3, 0), (E4M3, int(rng.integers(1, 4))),
                                       (E5M2, 3), (E4M3, 0))):  # 3: 2*3, 3**2 differ from 2**3
        length = int(rng.integers(20, 41)) if k == 1 else int(rng.integers(4, 17))
        size = 10.0 ** rng.uniform(-6, 2) if fmt is E5M2 else 10.0 ** rng.uniform(-1, 3)
        history = size * rng.uniform(0.2, 1.0, length)
        n = int(rng.integers(20, 200))
        x = rng.standard_normal(n) * size / 20
        # largest magnitude negative; in the first case x's last element (a max over x[:-1]
        # misses it), in the third its first (a min over x[1:] misses it)
        x[n - 1 if k == 0 else 0 if k == 2 else int(rng.integers(0, n - 1))] = (
            -size * rng.uniform(0.5, 0.9))
        x[int(rng.integers(0, n - 1))] = size * rng.uniform(0.1, 0.3)
        if k < 3:
            # an old spike: in the first case the oldest entry kept (the new history's first),
            # in the second more than 16 entries back (a window of the last 16 misses it)
            spike = (1 if k == 0 else int(rng.integers(1, length - 16)) if k == 1
                     else int(rng.integers(1, length - 1)))
            history[spike] = size * rng.uniform(3, 6)
            if fmt is E5M2:  # a larger spike in the entry this step drops: it no longer counts
                history[0] = size * rng.uniform(8, 12)
            what = "an old spike in the history" + (
                ", a larger one in the entry dropped, E5M2 gradients" if fmt is E5M2 else "")
        else:
            x *= 20 * float(np.max(history)) / float(np.max(np.abs(x)))  # the largest ever
            what = "this step's amax larger than any in the history"
        trials.append((history, x, fmt.max_value, margin, what))
    return trials


def _margin_readings(factor: int, margin: int) -> str:
    """What a wrong whole-number margin factor reads as: 2**(margin + 1), or 2 ^ margin."""
    readings = ([f"2**(margin + 1) = {factor}: one factor of 2 too many"]
                if factor == 2 ** (margin + 1) else [])
    readings += ([f"2 ^ margin = {factor}: in Python, `^` is XOR, not a power"]
                 if factor == 2 ^ margin else [])
    return f" ({'; or '.join(readings)})" if readings else ""


@dataclass
class HistoryAnswer:
    """A wrong new amax history ``got`` (the right shape), with the ``history`` before this step,
    x, its recorded amax and the right new history ``want``; ``at`` says which case (and seed).
    The evidence :data:`HISTORY_MISTAKES` are told from."""

    got: np.ndarray
    history: np.ndarray
    x: np.ndarray
    amax: float
    want: np.ndarray
    at: str

    def is_(self, value: np.ndarray) -> bool:
        return bool(np.allclose(self.got, value, rtol=1e-12, atol=0))


# The wrong new histories, in the order they are tried (the last a catch-all).
HISTORY_MISTAKES = (
    Mistake("max instead of max-abs in the history",
            lambda e: (math.isclose(e.got[-1], float(np.max(e.x)), rel_tol=1e-12)
                       and float(np.max(e.x)) != e.amax),
            lambda e: (f"{e.at}: the newest entry is max(x) = {e.got[-1]:.6g}, but the largest "
                       f"magnitude is |min(x)| = {e.amax:.6g}"), ABS_HINT),
    Mistake("a history that puts the newest first",
            lambda e: e.is_(np.append(e.amax, e.history[:-1])),
            lambda e: (f"{e.at}: the newest amax went first and the last entry was dropped; "
                       "this exercise keeps the history oldest first, newest last"),
            "drop history[0] (the oldest) and append the new amax at the end."),
    Mistake("a history that drops the newest",
            lambda e: e.is_(np.append(e.history[:-1], e.amax)),
            lambda e: (f"{e.at}: the last entry (the newest before this step) was replaced; the "
                       "oldest, history[0], should drop out"),
            "keep history[1:] and append the new amax."),
    Mistake("a history rounded to float32",
            lambda e: bool(np.allclose(e.got, e.want, rtol=1e-6, atol=0)),
            lambda e: (f"{e.at}: the new history is right to about 7 digits only, float32's "
                       "precision: its values were rounded to float32"),
            "keep the history and the amax in float64, as x is: no np.float32 on the way."),
    Mistake("another history", lambda e: True,
            lambda e: (f"{e.at}: expected the new history "
                       f"{np.array2string(e.want, precision=4)}, got "
                       f"{np.array2string(e.got, precision=4)}"), DELAYED_STUB_HINT),
)


def _check_history(new_history, history: np.ndarray, x: np.ndarray, where: str) -> np.ndarray:
    if not isinstance(new_history, np.ndarray):
        raise CheckFailedError(f"{where}: the new history is a {type(new_history).__name__}, "
                               "not a NumPy array.", "build it with np.append or "
                                                     "np.concatenate: both give an array.")
    if new_history.dtype.kind not in "fiu":
        raise CheckFailedError(f"{where}: the new history holds {new_history.dtype} values, not "
                               "numbers.", "keep the amaxes as floats: np.append of the old "
                                           "history and this step's amax gives them.")
    new_history = np.asarray(new_history, dtype=np.float64)
    amax = recorded_amax(x)  # as DelayedScaling records it (Transformer Engine's)
    want = np.append(history[1:], amax)
    if new_history.shape != history.shape:
        if new_history.size == history.size + 1:
            raise CheckFailedError(
                f"{where}: the new history has {new_history.size} entries, one more than "
                f"the {history.size} it had.", "the history keeps its length: drop the oldest "
                                               "entry (the first) when the new one comes in.")
        raise CheckFailedError(f"{where}: the new history has shape {new_history.shape}, "
                               f"the old one {history.shape}.", DELAYED_STUB_HINT)
    if np.allclose(new_history, want, rtol=1e-12, atol=0):
        return new_history
    reject(HISTORY_MISTAKES, HistoryAnswer(new_history, history, x, amax, want, where))


@dataclass
class ScaleAnswer:
    """A delayed scale ``got`` from the learner's function, with what it was computed from: the
    ``history`` before this step, the right ``new_history``, x, fp8_max and the margin; ``at``
    says which case (and seed) it was. The evidence :data:`SCALE_MISTAKES` are told from."""

    got: float
    history: np.ndarray
    new_history: np.ndarray
    x: np.ndarray
    fp8_max: float
    margin: int
    at: str

    @property
    def want(self) -> float:
        return scale_from_history(self.new_history, self.fp8_max, self.margin)

    @property
    def amax(self) -> float:
        return recorded_amax(self.x)  # as DelayedScaling records it (Transformer Engine's)

    @property
    def history_max(self) -> float:
        return float(np.max(self.new_history))

    @property
    def old_max(self) -> float:
        return float(np.max(self.history))

    @property
    def summary(self) -> str:
        return (f"{self.at}: expected scale {shown_apart(self.want, self.got)}, got "
                f"{shown_apart(self.got, self.want)}")

    @property
    def margin_factor(self) -> float:
        return self.fp8_max / self.history_max / self.got if self.got else 0.0

    def gave(self, value: float) -> bool:
        """True when the scale is ``value`` (a wrong formula's; not positive: never)."""
        return value > 0 and math.isclose(self.got, value, rel_tol=1e-9)


def _gave(formula):
    return lambda e: e.gave(formula(e))


# The wrong delayed scales learners compute, in the order they are tried.
SCALE_MISTAKES = (
    Mistake("the scale from this step's amax instead of the history's",
            _gave(lambda e: e.fp8_max / e.amax / 2.0**e.margin),
            lambda e: (f"{e.summary}: that is fp8_max / (this step's amax) / 2**margin; the "
                       f"history's largest amax is {e.history_max:.4g}"), HISTORY_MAX_HINT),
    Mistake("max instead of max-abs",
            _gave(lambda e: e.fp8_max / float(np.max(e.x)) / 2.0**e.margin if np.max(e.x) > 0
                  else -1),
            lambda e: (f"{e.summary}: that is fp8_max / max(x); x's largest magnitude is "
                       f"negative ({-e.amax:.4g})"), ABS_HINT),
    Mistake("the margin forgotten", _gave(lambda e: e.fp8_max / e.history_max),
            lambda e: (f"{e.summary}: that is fp8_max / max(history) without the margin "
                       f"(margin {e.margin})"), MARGIN_HINT),
    Mistake("the margin multiplied", _gave(lambda e: e.fp8_max / e.history_max * 2.0**e.margin),
            lambda e: (f"{e.summary}: that multiplies by 2**margin; the margin makes the scale "
                       "smaller (headroom), so divide by it"), MARGIN_HINT),
    Mistake("the inverse scale (amax / fp8_max)",
            _gave(lambda e: e.history_max / e.fp8_max * 2.0**e.margin),
            lambda e: (f"{e.summary}: that is amax / fp8_max, the inverse: this scale multiplies "
                       "x before the cast, so it maps the largest amax onto fp8_max: fp8_max / "
                       "amax"), "scale = fp8_max / max(new_history) / 2**margin."),
    Mistake("the entry this step drops still counted (a window one entry too long)",
            lambda e: e.history[0] > max(e.history_max, e.amax) and e.gave(
                e.fp8_max / e.history[0] / 2.0**e.margin),
            lambda e: (f"{e.summary}: that is the scale from the history's oldest entry, "
                       f"{e.history[0]:.4g}, which this step drops (the history before "
                       "this step's amax was recorded, or a window one entry too long): the "
                       f"new history is the last {e.history.size - 1} entries and this step's "
                       f"amax (largest {e.history_max:.4g})"),
            "compute the scale from the new history alone, after appending this step's amax: "
            "the oldest entry leaves it as this step's amax comes in."),
    Mistake("the scale from the history before this step's amax",
            lambda e: e.amax > e.old_max and e.gave(e.fp8_max / e.old_max / 2.0**e.margin),
            lambda e: (f"{e.summary}: that is the scale from the history *before* this step's "
                       f"amax was recorded ({e.old_max:.4g}); this step's amax, {e.amax:.4g}, "
                       "is larger"),
            "compute the scale from the new history, after appending this step's amax."),
    Mistake("448 hard-coded",
            _gave(lambda e: E4M3.max_value / e.history_max / 2.0**e.margin
                  if e.fp8_max != E4M3.max_value else -1),
            lambda e: (f"{e.summary}: that uses 448 (E4M3's largest value), but this tensor's "
                       f"format has fp8_max = {e.fp8_max:g}"), "use the fp8_max argument, not a "
                                                              "constant."),
    Mistake("another factor for the margin (2 * margin, 2 ^ margin, 2**(margin + 1))",
            lambda e: e.got > 0 and e.margin_factor >= 1
            and math.isclose(e.margin_factor, round(e.margin_factor), rel_tol=1e-9),
            lambda e: (f"{e.summary}: that divides fp8_max / max(history) by "
                       f"{e.margin_factor:.4g}, not by 2**margin = {2**e.margin}"
                       + _margin_readings(round(e.margin_factor), e.margin)), MARGIN_HINT),
    Mistake("a scale rounded to float32",
            lambda e: math.isclose(e.got, e.want, rel_tol=1e-6),
            lambda e: (f"{e.summary}: right to about 7 digits only, float32's precision: the "
                       "scale was rounded to float32"),
            "keep the scale in float64, as x and the history are: no np.float32 on the way."),
)


def _check_scale(scale, history: np.ndarray, x: np.ndarray, fp8_max: float, margin: int,
                 where: str, new_history: np.ndarray) -> None:
    if isinstance(scale, np.ndarray) and scale.ndim > 0:
        raise CheckFailedError(f"{where}: the scale is an array of shape {scale.shape}; one "
                               "tensor has one scale.", "reduce with np.max to one number.")
    if isinstance(scale, bool) or not isinstance(
            scale, (int, float, np.integer, np.floating, np.ndarray)):
        raise CheckFailedError(f"{where}: the scale is {scale!r:.60} (a "
                               f"{type(scale).__name__}), not a number.", DELAYED_STUB_HINT)
    answer = ScaleAnswer(float(scale), history, new_history, x, fp8_max, margin, where)
    if math.isclose(answer.got, answer.want, rel_tol=1e-9):
        return
    reject(SCALE_MISTAKES, answer)
    raise CheckFailedError(f"{answer.summary}.", DELAYED_STUB_HINT)


DELAYED_SCALE = CheckSpec(
    "delayed_scale", "delayed_scale(amax_history, x, fp8_max, margin)", DELAYED_STUB_HINT,
    HISTORY_MISTAKES[:-1] + SCALE_MISTAKES, title="2. a delayed FP8 scale",
    call="check_delayed_scale(delayed_scale)",
    holds="Transformer Engine's delayed scaling for one tensor: the history, oldest first, with "
          "max|x| appended and the oldest dropped; scale = fp8_max / max(new history) / "
          "2^margin. Four cases: an old spike in the history (the oldest entry kept, then "
          "more than 16 back in a history of 20–40), the largest magnitude negative (last in "
          "x once), margins 0–3, E4M3 (448) and E5M2 (57344), a step whose amax is the largest "
          "ever",
    also="a history that grows; a list for an array; a history of text; only the scale "
         "returned")


@DELAYED_SCALE.check
def check_delayed_scale(delayed_scale, seed: int | None = None) -> str:
    """Four random cases (:func:`_delayed_trials`), each given copies of the history and x; the
    new history is compared within a relative 1e-12, the scale within a relative 1e-9."""
    rng = np.random.default_rng(seed)
    trials = _delayed_trials(rng)
    for number, (history, x, fp8_max, margin, what) in enumerate(trials, start=1):
        where = (f"case {number} ({what}; history of {history.size}, fp8_max {fp8_max:g}, "
                 f"margin {margin}; seed={seed})")
        result = call_learner(delayed_scale, history.copy(), x.copy(), fp8_max, margin,
                              stub_hint=DELAYED_STUB_HINT,
                              call=f"delayed_scale(...) in {where}",
                              may_change=(0,))  # a history rolled in place is returned
        if not (isinstance(result, tuple) and len(result) == 2):
            raise CheckFailedError(f"{where}: your function returned {result!r:.80}, not a "
                                   "pair (new_history, scale).",
                                   "return a pair: the new history first, then the scale.")
        if (np.ndim(result[0]) == 0 and np.ndim(result[1]) == 1
                and np.shape(result[1]) == history.shape):
            raise CheckFailedError(
                f"{where}: your function returned a number, then an array of the history's "
                "length: the pair looks the wrong way round.",
                "return the new history first, then the scale: (new_history, scale).")
        new_history = _check_history(result[0], history, x, where)
        _check_scale(result[1], history, x, fp8_max, margin, where, new_history)
    return (f"{len(trials)} cases right: old spikes kept the scale down, negative amaxes "
            f"counted, margins 0-3, E4M3 and E5M2 (seed={seed}).")


# --- exercise 3: amax and the inf/NaN count in one pass, as a kernel ---------------------------

AMAX_STUB_HINT = (
    "one pass over x on a fixed grid: each thread loops over its elements keeping its largest "
    "magnitude (NaN left out) and its count of inf and NaN values; each block combines its "
    "threads' pairs in shared memory by halving; one thread of the block then updates out[0] "
    "and out[1] with one atomic each. The hints above the cell go step by step."
)
NAN_AMAX_HINT = (
    "a comparison with NaN is always False, so a maximum written with a comparison keeps or "
    "drops a NaN depending on which side it stands (CUDA compiles `max` of two floats to "
    "fmaxf, which drops it): test each value for NaN first, count it, and leave it out of the "
    "amax (Transformer Engine's cast kernels leave it out too)."
)
MAGNITUDE_HINT = (
    "the amax is the largest *magnitude*: take each element's absolute value before comparing "
    "(-6 counts as 6, and -inf as inf)."
)
KINDS_HINT = (
    "a value is non-finite when it is NaN, +inf or -inf, and all three count in out[1]; the "
    "math module tests each kind, and the absolute value turns -inf into +inf."
)
ONE_ATOMIC_HINT = (
    "out[0] and out[1] are shared by every block: each block updates each of them exactly once, "
    "after its tree, with an atomic (a maximum into out[0], an addition into out[1]); a plain "
    "write from several blocks loses all but one."
)
FEWER_ATOMICS_HINT = (
    "combine in the block first (the halving tree of chapter 01's block sum), then one atomic "
    "per output per block: atomics on one address from every thread wait for each other one "
    "at a time, and a training step runs this over millions of gradients."
)
TREE_BARRIER_HINT = (
    "every shared slot must be written before another thread reads it: a barrier after the "
    "threads fill shared memory, and one after every round of the halving, outside any `if` so "
    "that every thread of the block reaches it."
)
AMAX_INDEX_HINT = (
    "an index past the end of an array: of x (the loop must stop at x's length), or of a "
    "shared array (it needs a slot for every thread of the block, whatever the block size the "
    "caller launches with: up to 1024)."
)
AMAX_STRIDE_HINT = (
    "the grid is fixed and smaller than x: a thread starts at its global index and steps by the "
    "number of threads in the whole grid, so that every element is read by exactly one thread, "
    "once (chapter 02's grid-stride loop)."
)
AMAX_TREE_HINT = (
    "combine the block's pairs as chapter 01's block sum did: the stride goes from half the "
    "block down to 1, halving; in each round a thread below the stride merges the slot one "
    "stride above its own into its own (the larger magnitude, the sum of the counts)."
)
# Two block sizes per tier (powers of two: the tree halves), a fixed grid with fewer threads than
# elements (so the loop matters), the sizes of x; the small launch the method is traced on.
AMAX_BLOCKS = {"sim": (32, 64), "gpu": (128, 256)}
AMAX_GRID = {"sim": 3, "gpu": 24}
AMAX_SIZES = {"sim": (400, 800), "gpu": (20_000, 60_000)}
AMAX_TRACE_GRID, AMAX_TRACE_THREADS, AMAX_TRACE_SIZES = 2, 64, (260, 360)
# After x's end, larger than any value of x (up to about 1e12) and far below the shared-memory
# poison (about 1.9e24): seen only by a kernel reading past the end.
AMAX_PAD = 1.0e18
AMAX_POISON = float(poison_value(np.float32))  # what shared memory holds before it is written


def _amax_cases(trial: Trial) -> list[tuple[str, np.ndarray]]:
    """The cases of one launch configuration, in the order they run: all finite (most past
    fp16's largest, 65,504; the largest magnitude negative, in the last block's elements);
    NaN among them (the largest magnitude in
    block 0's elements, a NaN the last element thread 0 of block 0 reads, and one at x's end);
    NaN, +inf and -inf;
    NaN and -inf only. The largest magnitude is read by an odd-numbered thread after the grid's
    first pass (in the cases with NaN, thread 1), and every block holds a different number (at
    least 4) of non-finite values, among them thread 1's first element, x[1], and the element
    thread 1 reads right after the largest: a maximum started from a NaN first element stays
    NaN, and a comparison that a NaN wins (`not v <= m`) replaces the largest with it.
    Positive values are a quarter the size of negative ones, so that x's largest *value* is
    not the largest magnitude of any part of x a wrong kernel might reduce."""
    rng, n, grid_threads, threads = trial.rng, trial.n, trial.grid_threads, trial.threads_per_block
    index = np.arange(n)
    owner = index % grid_threads
    block, thread = owner // threads, owner % threads
    blocks = trial.grid_blocks

    def finite(largest_in: int, reader=None) -> tuple[np.ndarray, int]:
        x = rng.standard_normal(n) * 10.0 ** rng.uniform(-1, 1)
        x = np.where(x > 0, x / 4, x)  # so the largest value is far below most magnitudes
        odd = (thread % 2 == 1) & (index < n - 1) if reader is None else (
            (owner == reader) & (index + grid_threads < n - 1))  # read again after it
        where = np.flatnonzero((block == largest_in) & odd & (index >= grid_threads))
        p = int(rng.choice(where))
        x[p] = -float(np.max(np.abs(x))) * rng.uniform(1.3, 1.6)
        return x, p

    def bad_positions(p: int) -> list[int]:
        counts = rng.permutation(np.arange(4, blocks + 4))  # x[1], after p, x[-1], one more
        top = int(np.argmax(counts))
        if top == blocks - 1:  # the last block (the one that writes last) never holds the most
            counts[[0, top]] = counts[[top, 0]]
        last_of_thread0 = int(np.flatnonzero(owner == 0)[-1])
        chosen = [last_of_thread0] + [n - 1] * (n - 1 != last_of_thread0)  # a loop one short
        chosen.append(1)  # thread 1's first element: a running max that starts from it
        chosen.append(p + grid_threads)  # what thread 1 reads after the largest, p
        for b in range(blocks):
            pool = np.flatnonzero((block == b) & (index != p) & ~np.isin(index, chosen))
            have = sum(block[i] == b for i in chosen)
            chosen += [int(i) for i in rng.choice(pool, counts[b] - have, replace=False)]
        return chosen

    cases = []
    x, _ = finite(blocks - 1)
    # finite values far past fp16's largest (65,504) and E4M3's (448): what a count of |v|
    # above either, rather than of inf and NaN, would count
    x *= 10.0 ** np.random.default_rng([trial.seed or 0, 10]).uniform(5, 10)  # (rng's own
    # draws, which the later cases are built from, stay as they were)
    cases.append(("all finite, many past fp16's largest, the largest magnitude negative", x))
    for name, infs in (("NaN among finite values", ()), ("NaN, +inf and -inf", (np.inf, -np.inf)),
                       ("NaN and -inf, no +inf", (-np.inf, -np.inf))):
        x, p = finite(0, reader=1)  # thread 1, after x[1]
        chosen = bad_positions(p)
        x[chosen] = np.nan
        for k, value in enumerate(infs):  # in block 1's and the last block's elements
            b = 1 if k == 0 else blocks - 1
            spot = next(i for i in sorted(chosen[1:], key=lambda i: i == n - 1)  # x's end: NaN
                        if block[i] == b and np.isnan(x[i]))
            x[spot] = value
        cases.append((name, x))
    return [(name, x.astype(np.float32)) for name, x in cases]


def _stats(values: np.ndarray) -> tuple[float, int]:
    """(amax with NaN left out, number of inf or NaN values) of ``values``, as gpulab takes
    them (:func:`gpulab.nn.mixed_precision.amax`)."""
    return recorded_amax(values), int(np.count_nonzero(~np.isfinite(values)))


@dataclass
class AmaxRun:
    """One launch of the learner's kernel on one case: x, what out held after it, and what the
    source and the simulator's record of writes said about out."""

    trial: Trial
    case: str
    x: np.ndarray
    got: tuple[float, float]
    plain_writes: list[str]
    race: tuple | None
    barriers: int
    has_tree: bool
    atomic_max_calls: int

    @property
    def where(self) -> str:
        return f"case: {self.case}; {self.trial}"

    @property
    def owner(self) -> np.ndarray:
        return np.arange(self.trial.n) % self.trial.grid_threads

    @property
    def block(self) -> np.ndarray:
        return self.owner // self.trial.threads_per_block

    @property
    def thread(self) -> np.ndarray:
        return self.owner % self.trial.threads_per_block

    def stats(self, mask) -> tuple[float, int]:
        return _stats(self.x[mask])

    @property
    def want(self) -> tuple[float, int]:
        return _stats(self.x)

    @property
    def amax(self) -> float:
        return float(self.got[0])

    @property
    def count(self) -> float:
        return float(self.got[1])

    def is_(self, pair) -> bool:
        amax, count = pair
        same_amax = self.amax == amax or (math.isnan(self.amax) and math.isnan(amax))
        return same_amax and self.count == count

    @property
    def right(self) -> bool:
        return self.is_(self.want)

    @property
    def summary(self) -> str:
        amax, count = self.want
        return f"out = [{self.amax:.6g}, {self.count:g}], expected [{amax:.6g}, {count}]"

    def kinds(self) -> tuple[int, int, int]:
        """(NaN, +inf, -inf) values in x."""
        return (int(np.isnan(self.x).sum()), int(np.isposinf(self.x).sum()),
                int(np.isneginf(self.x).sum()))

    @property
    def stopped_at_first_non_finite(self) -> tuple[float, int]:
        """(amax, count) of a kernel whose threads each stop their loop at their first inf or
        NaN, counting it (an inf still entering the amax)."""
        read = []
        for start in range(min(self.trial.grid_threads, self.trial.n)):
            mine = self.x[start::self.trial.grid_threads]
            bad = np.flatnonzero(~np.isfinite(mine))
            read.append(mine[:bad[0] + 1] if len(bad) else mine)
        return _stats(np.concatenate(read))

    @property
    def nan_first(self) -> np.ndarray:
        """The threads whose first element is NaN (thread 1 among them: x[1] is NaN)."""
        first = np.arange(min(self.trial.grid_threads, self.trial.n))
        return first[np.isnan(self.x[first])]

    def nan_first_lost(self) -> bool:
        """out[0] is the amax of every element but those of the threads whose first element is
        NaN: a running maximum started from a thread's first element stays NaN."""
        if self.right or not len(self.nan_first) or self.count != self.want[1]:
            return False  # (a loop that breaks at a NaN also loses what comes after it)
        amax = self.stats(~np.isin(self.owner, self.nan_first))[0]
        return self.amax == amax and amax != self.want[0]

    def per_block(self) -> list[tuple[float, int]]:
        return [self.stats(self.block == b) for b in range(self.trial.grid_blocks)]

    @property
    def largest_at(self) -> int:
        magnitudes = np.where(np.isnan(self.x), -1.0, np.abs(self.x.astype(np.float64)))
        return int(np.argmax(magnitudes))

    @property
    def poisoned(self) -> bool:
        return any(abs(v) >= AMAX_POISON / 2 and math.isfinite(v) for v in self.got)

    @property
    def barrier_text(self) -> str:
        if self.has_tree and self.barriers < 2:
            return (f" Your kernel has {self.barriers} `cuda.syncthreads()` call(s); it needs one "
                    "after filling shared memory and one in the halving loop.")
        return ""

    def nan_entered(self) -> bool:
        if math.isnan(self.amax):
            return True
        nan, _, _ = self.kinds()
        if not nan or not self.amax < self.want[0] or self.plain_writes or self.barrier_text:
            return False  # (a tree without its halving barrier loses values whatever they are)
        # every block holds a NaN: the blocks whose amax became NaN drop out of out[0]
        return self.amax in [amax for amax, _ in self.per_block()]

    def counted_by_block_stride(self) -> int:
        """out[1] of a loop that steps by one block instead of the grid: element i is read by
        every block b <= i // blockDim."""
        times = np.minimum(np.arange(self.trial.n) // self.trial.threads_per_block,
                           self.trial.grid_blocks - 1) + 1
        return int((times * ~np.isfinite(self.x)).sum())

    def one_block(self, which: int) -> int | None:
        """The block whose own amax (which=0) or count (1) out holds, when it is not the
        answer."""
        values = [pair[which] for pair in self.per_block()]
        got = self.got[which]
        if got == self.want[which] or values.count(got) != 1:
            return None
        return values.index(got)

    def race_text(self) -> str:
        if self.race is not None:
            element, writers, count = self.race
            who = " and ".join(f"thread {t} of block {b}" for b, t in writers)
            what = f"{count} threads wrote out[{element}] without an atomic (e.g. {who})"
        else:
            what = f"threads update out with a plain write (`{self.plain_writes[0]}`)"
        outcome = ("The simulator runs the blocks one after another, so the result happened to "
                   "come out right here; on a GPU, blocks that read out at the same time "
                   "overwrite each other's update." if self.right else
                   f"That is why the result is wrong ({self.summary}).")
        return f"{what}: a data race between blocks. {outcome}"


def _first_few(numbers, shown: int = 4) -> str:
    """The first ``shown`` of ``numbers``, joined by commas, with "…" when there are more."""
    return ", ".join(map(str, numbers[:shown])) + "…" * (len(numbers) > shown)


def _counts_only(e: AmaxRun, nan: bool, posinf: bool, neginf: bool) -> bool:
    kinds = e.kinds()
    counted = kinds[0] * nan + kinds[1] * posinf + kinds[2] * neginf
    return e.count != e.want[1] and e.count == counted


def _lost_up_the_tree(e) -> str:
    return (f"{e.summary}: some values were lost on the way up the tree, as when a thread reads "
            "a slot before its neighbour has written it." + e.barrier_text)


AMAX_MISTAKES = (
    Mistake("nothing written into out", lambda e: e.got == (0.0, 0.0) and e.want != (0.0, 0),
            "out is still [0, 0]: nothing was written into it", ONE_ATOMIC_HINT),
    Mistake("a missing barrier (a shared slot read before it was written)",
            lambda e: e.poisoned,
            lambda e: (f"{e.summary}: {max(e.got):.3g} is neither a value of x nor a count: it "
                       "is what shared memory held before anyone wrote it, so a thread read a "
                       "slot before the thread that owns it had written it." + e.barrier_text
                       + (" Or a slot no thread writes: in the first round, t + stride must stay "
                          "inside the block." if e.barriers >= 2 else "")),
            lambda e: AMAX_TREE_HINT if e.barriers >= 2 else TREE_BARRIER_HINT),
    Mistake("a tree without its barrier in the halving loop (values lost, as it happens)",
            lambda e: not e.right and bool(e.barrier_text), _lost_up_the_tree, TREE_BARRIER_HINT,
            "source"),
    Mistake("reads past the end of x", lambda e: e.amax == AMAX_PAD,
            lambda e: (f"out[0] = {e.amax:g}, the value after the end of x: a thread read past "
                       f"x's last element (x has {e.trial.n})"), AMAX_STRIDE_HINT),
    Mistake("±inf left out of the amax (only finite values compared)",
            lambda e: (math.isinf(e.want[0]) and math.isfinite(e.amax)
                       and e.amax == float(np.max(np.abs(e.x[np.isfinite(e.x)])))),
            lambda e: (f"out[0] = {e.amax:.6g}, the largest *finite* magnitude, but x holds ±inf "
                       "(counted in out[1]), so its amax is inf: ±inf counts as non-finite "
                       "and still enters the maximum; only NaN stays out of it"),
            "leave only NaN out of the amax: an infinite value is a magnitude like any other "
            "(and the amax then says the tensor overflowed), while NaN has none."),
    Mistake("the values of threads whose first element is NaN lost (a maximum started from "
            "it, a comparison a NaN wins, a loop stopped at it)",
            lambda e: e.nan_first_lost(),
            lambda e: (f"out[0] = {e.amax:.6g}, the largest magnitude of every element but "
                       f"those of the threads whose first element is NaN (thread"
                       f"{'s' * (len(e.nan_first) > 1)} {_first_few(e.nan_first)}); "
                       f"x's is {e.want[0]:.6g}, x[{e.largest_at}], which thread 1 reads between "
                       "two NaNs. A NaN lost those threads' values: a maximum started from a NaN "
                       "first element stays NaN, since every comparison with NaN is false; a "
                       "comparison that a NaN wins (`not v <= m` is True for NaN) puts it in "
                       "the largest value's place; a loop that stops at a NaN (a `break`) never "
                       "reads what follows"),
            NAN_AMAX_HINT),
    Mistake("NaN let into the amax",
            lambda e: e.nan_entered() and not e.is_(e.stopped_at_first_non_finite),
            lambda e: ("out[0] is NaN: a NaN of x entered the amax" if math.isnan(e.amax) else
                       f"out[0] = {e.amax:.6g}, but x's largest magnitude is {e.want[0]:.6g} "
                       f"(x[{e.largest_at}], among block {e.block[e.largest_at]}'s elements, "
                       "which also hold a NaN): that block's amax became NaN, and the atomic "
                       "maximum then passed over it; every block here holds a NaN (or a loop "
                       "that stops at a NaN, a `break`, never read the values after it)"),
            NAN_AMAX_HINT),
    Mistake("values lost only where x holds NaN (a comparison a NaN wins, a loop that stops at "
            "a NaN)",
            lambda e: (e.kinds()[0] > 0 and e.amax < e.want[0] and e.count == e.want[1]
                       and not e.plain_writes and not e.barrier_text),
            lambda e: (f"out[0] = {e.amax:.6g}, but x's largest magnitude is {e.want[0]:.6g} "
                       f"(x[{e.largest_at}]): values were lost in a case with NaN, after the "
                       "case without one was right. A comparison that a NaN wins (`not v <= "
                       "m` is True for NaN) drops the value it replaces, and a loop that stops "
                       "at a NaN (a `break`) never read what follows it"),
            NAN_AMAX_HINT),
    Mistake("the largest value instead of the largest magnitude",
            lambda e: (not e.right and e.amax == float(np.nanmax(e.x))
                       and e.amax != e.want[0]),
            lambda e: (f"out[0] = {e.amax:.6g} is x's largest *value*, but its largest "
                       f"magnitude is {e.want[0]:.6g} (x[{e.largest_at}] = "
                       f"{float(e.x[e.largest_at]):.6g}, negative)"), MAGNITUDE_HINT),
    Mistake("no loop: one element per thread",
            lambda e: e.trial.n > e.trial.grid_threads and e.is_(
                _stats(e.x[:e.trial.grid_threads])),
            lambda e: (f"{e.summary}: that is the answer for x's first {e.trial.grid_threads} "
                       f"elements only, one per thread of the grid; the {e.trial.grid_threads} "
                       f"threads must cover all {e.trial.n}"), AMAX_STRIDE_HINT),
    Mistake("every block starts at `threadIdx.x` (all read block 0's elements)",
            lambda e: e.trial.grid_blocks > 1 and e.stats(e.block == 0)[1] > 0
            and e.amax == e.stats(e.block == 0)[0]
            and e.count == e.trial.grid_blocks * e.stats(e.block == 0)[1] and not e.right,
            lambda e: (f"{e.summary}: every block read the elements of block 0's threads "
                       f"(each counted {e.trial.grid_blocks} times) and none of the others': the "
                       "loop's start repeats in every block"), AMAX_STRIDE_HINT),
    Mistake("a loop stepping by one block, not the grid (elements read by several blocks)",
            lambda e: (e.amax == e.want[0] and e.count != e.want[1]
                       and e.count == e.counted_by_block_stride()),
            lambda e: (f"{e.summary}: inf and NaN values were counted more than once: the loop "
                       f"steps by one block ({e.trial.threads_per_block}), not the whole grid "
                       f"({e.trial.grid_threads}), so later blocks re-read elements earlier ones "
                       "already read"), AMAX_STRIDE_HINT),
    Mistake("-inf not counted", lambda e: e.kinds()[2] > 0 and _counts_only(e, True, True, False),
            lambda e: (f"{e.summary}: the {e.kinds()[2]} -inf value(s) were not counted (the "
                       f"NaN and +inf were)"), KINDS_HINT),
    Mistake("inf not counted (only NaN)",
            lambda e: sum(e.kinds()[1:]) > 0 and _counts_only(e, True, False, False),
            lambda e: (f"{e.summary}: only the {e.kinds()[0]} NaN values were counted, not the "
                       f"{sum(e.kinds()[1:])} infinite ones"), KINDS_HINT),
    Mistake("NaN not counted (only inf)",
            lambda e: e.kinds()[0] > 0 and _counts_only(e, False, True, True),
            lambda e: (f"{e.summary}: the {e.kinds()[0]} NaN values were not counted" +
                       (" (the infinite ones were)" if sum(e.kinds()[1:]) else "")), KINDS_HINT),
    Mistake("NaN counted twice", lambda e: e.kinds()[0] > 0 and e.count == e.want[1] + e.kinds()[0],
            lambda e: f"{e.summary}: every NaN was counted twice", KINDS_HINT),
    Mistake("a loop that stops at the first inf or NaN (a break)",
            lambda e: e.kinds()[0] > 0 and e.is_(e.stopped_at_first_non_finite),
            lambda e: (f"{e.summary}: exactly what the threads give if each stops its loop at "
                       "its first inf or NaN (a `break`?): the values, infs and NaNs after it "
                       "were never read"),
            "read every element of x once: each thread's loop runs to the end of x, whatever it "
            "has found; the count needs every inf and NaN, the amax every finite value."),
    Mistake("x's last element never read (a loop one short)",
            lambda e: not e.right and e.is_(_stats(e.x[:-1])),
            lambda e: (f"{e.summary}: that is the answer for x without its last element, x["
                       f"{e.trial.n - 1}] = {float(e.x[-1]):g}: the loop stops one short"),
            AMAX_STRIDE_HINT),
    Mistake("the halving stopped before stride 1",
            lambda e: not e.right and e.is_(e.stats(e.thread % 2 == 0)),
            lambda e: (f"{e.summary}: that is what the even-numbered threads found, without "
                       "the odd ones': the halving stopped before its last round (stride 1), "
                       "which merges slot 1 into slot 0"), AMAX_TREE_HINT),
    Mistake("only thread 0's values per block (the tree never reached slot 0)",
            lambda e: not e.right and e.is_(e.stats(e.thread == 0)),
            lambda e: (f"{e.summary}: that is what thread 0 of each block found alone: the "
                       "other threads' values never reached slot 0"), AMAX_TREE_HINT),
    Mistake("the counts combined with an atomic maximum, not added",
            lambda e: (e.atomic_max_calls >= 2 and e.count != e.want[1]
                       and e.count == max(c for _, c in e.per_block())),
            lambda e: (f"{e.summary}: out[1] is the largest of the blocks' counts "
                       f"({', '.join(str(c) for _, c in e.per_block())}), not their sum"),
            ONE_ATOMIC_HINT),
    Mistake("out[1] overwritten by each block (the last block wins)",
            lambda e: (e.plain_writes or e.race is not None) and e.one_block(1) is not None,
            lambda e: (f"{e.summary}: out[1] is block {e.one_block(1)}'s count alone (the "
                       f"blocks found {', '.join(str(c) for _, c in e.per_block())}): the blocks "
                       "overwrote out[1] instead of adding to it"), ONE_ATOMIC_HINT),
    Mistake("out[0] overwritten by each block (the last block wins)",
            lambda e: (e.plain_writes or e.race is not None) and e.one_block(0) is not None,
            lambda e: (f"{e.summary}: out[0] is block {e.one_block(0)}'s amax alone: the "
                       "blocks overwrote out[0] instead of keeping the largest"),
            ONE_ATOMIC_HINT),
    Mistake("only block 0's result reaches out (the atomics from one thread of the grid)",
            lambda e: (e.trial.grid_blocks > 1 and e.barriers >= 2 and not e.right
                       and e.per_block()[0][1] > 0 and e.is_(e.per_block()[0])),
            lambda e: (f"{e.summary}: out holds block 0's amax and count alone; the other "
                       "blocks' never reached out: is the `if` before the atomics on the global "
                       "index (true for one thread of the whole grid), not the thread's index in "
                       "its block?"), ONE_ATOMIC_HINT),
    Mistake("the blocks' amaxes added (an atomic add into out[0])",
            lambda e: (e.amax != e.want[0] and math.isfinite(e.amax) and math.isclose(
                e.amax, sum(a for a, _ in e.per_block()), rel_tol=1e-5)),
            lambda e: f"{e.summary}: out[0] is the sum of the blocks' amaxes, not the largest",
            ONE_ATOMIC_HINT),
    Mistake("a plain write to out from several blocks (a race)",
            lambda e: e.race is not None or bool(e.plain_writes),
            lambda e: e.race_text(), ONE_ATOMIC_HINT, "source"),
    Mistake("finite values counted as inf (a threshold such as fp16's largest, 65,504, or "
            "E4M3's, 448)",
            lambda e: e.want[1] == 0 and e.count > 0 and e.amax == e.want[0],
            lambda e: (f"{e.summary}: x holds no inf or NaN here, but {int(e.count)} of its "
                       f"values were counted, finite values up to {e.want[0]:.3g}: past fp16's "
                       "largest (65,504) or E4M3's (448) a value cannot be stored in those "
                       "formats, but in float32 it is finite"),
            "count a value only when it is inf or NaN: float32 holds finite values up to "
            "3.4e38, and a scale is what brings them into an 8-bit format's range."),
    Mistake("inf or NaN counted more than once",
            lambda e: e.amax == e.want[0] and e.count > e.want[1],
            lambda e: (f"{e.summary}: some inf or NaN values were counted more than once: two "
                       "threads read the same element?"), AMAX_STRIDE_HINT),
    Mistake("values lost on the way up the tree",
            lambda e: e.amax < e.want[0] or e.count < e.want[1], _lost_up_the_tree,
            TREE_BARRIER_HINT),
    Mistake("another result", lambda e: not e.right, lambda e: e.summary, AMAX_STUB_HINT),
)


@dataclass
class AmaxTrace(GridStride):
    """The kernel traced on a small launch: the elements of x each thread read (``order``,
    repeats in a row removed), atomics per block and output, shared atomics, shared reads per
    thread; who read each element is derived from ``order`` (:class:`GridStride`)."""

    atomics: dict  # (block, index of out) -> atomic updates
    shared_atomics: dict  # block -> atomics on shared slots
    bad_per_block: dict  # block -> inf/NaN values among its elements
    shared_reads: dict  # thread -> shared reads
    uneven_barriers: tuple | None = None  # KernelTrace.uneven_barriers
    ITEM, SPELLED, DONE = "element", "x[{}]", "read"

    @property
    def where(self) -> str:
        return f"traced on {self.trial}"

    def busiest_output(self) -> tuple[tuple[int, int], int]:
        return max(self.atomics.items(), key=lambda item: item[1], default=((0, 0), 0))

    def reread(self) -> tuple | None:
        """(thread, element) of a thread that read an element again after others: a second
        pass."""
        for thread, order in self.order.items():
            seen = set()
            for i in order:
                if i in seen:
                    return thread, i
                seen.add(i)
        return None

    @property
    def rounds(self) -> int:
        return int(np.log2(self.trial.threads_per_block))

    def most_shared_reads(self) -> tuple:
        return max(self.shared_reads.items(), key=lambda item: item[1], default=((0, 0), 0))


def _atomics_text(e: AmaxTrace) -> str:
    (block, index), count = e.busiest_output()
    warps = e.trial.threads_per_block // 32
    per = ("one per inf or NaN value it found: a counter in global memory"
           if index == 1 and count == e.bad_per_block.get(block) else
           "one per warp: a tree within each warp, then an atomic from each"
           if 1 < count == warps else "about one per thread")
    return (f"the result is right, but block {block} made {count} atomic updates of out[{index}] "
            f"({per}); all of them wait for each other on one address")


AMAX_METHOD_MISTAKES = (
    uneven_barriers(),
    Mistake("atomics from every thread, or per inf/NaN (a global counter), not one per block",
            lambda e: e.busiest_output()[1] > 1, _atomics_text, FEWER_ATOMICS_HINT, "trace"),
    Mistake("atomics on a shared slot from every thread instead of the tree",
            lambda e: max(e.shared_atomics.values(), default=0) > 2,
            lambda e: (f"the result is right, but block "
                       f"{max(e.shared_atomics, key=e.shared_atomics.get)} made "
                       f"{max(e.shared_atomics.values())} atomic updates of shared slots: its "
                       "threads queued on the same slots one at a time; this exercise asks for "
                       "the halving tree"), AMAX_TREE_HINT, "trace"),
    *grid_stride_mistakes(AMAX_STRIDE_HINT, AMAX_STRIDE_HINT),
    Mistake(
        "elements never read (a loop that stops early: a break at the first inf or NaN)",
        lambda e: len(e.touched) < e.trial.n,
        lambda e: (f"{e.trial.n - len(e.touched)} of the {e.trial.n} elements of x were never "
                   f"read, e.g. x[{min(set(range(e.trial.n)) - set(e.touched))}]: a loop that "
                   "stops early (a `break` at the first inf or NaN?) misses a larger magnitude "
                   "or another inf or NaN after it"),
        "read every element of x once: each thread's loop runs to the end of x, whatever it "
        "has found; the count needs every inf and NaN, the amax every finite value.", "trace"),
    Mistake("two passes over x (one loop for the amax, another for the count)",
            lambda e: e.reread() is not None,
            lambda e: (f"the result is right, but {thread_label(e.reread()[0])} read "
                       f"x[{e.reread()[1]}] again after reading other elements: two passes over "
                       "x, where one pass can find both (that is the point of fusing them)"),
            "keep both running results, the largest magnitude and the count, in the same loop: "
            "each element is read once and tested for both.", "trace"),
    Mistake("one thread combining the block's slots one by one",
            lambda e: e.most_shared_reads()[1] > 6 * e.rounds + 6,
            lambda e: (f"the result is right, but {thread_label(e.most_shared_reads()[0])} read "
                       f"{e.most_shared_reads()[1]} shared slots: one thread worked through the "
                       f"block's slots while the others waited; a tree takes {e.rounds} rounds"),
            AMAX_TREE_HINT, "trace"),
)
AMAX = CheckSpec(
    "amax_nonfinite", "amax_nonfinite(x, out)", AMAX_STUB_HINT,
    AMAX_MISTAKES + AMAX_METHOD_MISTAKES, parameters=2,
    title="3. amax and inf/NaN in one pass (a kernel)",
    call="check_amax_nonfinite(amax_nonfinite)",
    holds="`out[0]` = max|x| with NaN left out (inf kept), `out[1]` += the number of inf "
          "and NaN values, on a fixed grid (3 blocks in the simulator) smaller than x, float32, "
          "n not a multiple of the block, under two block sizes; four cases: all finite with the "
          "largest magnitude negative, NaN, NaN with +inf and -inf, NaN with -inf only; then the "
          "**method** from a trace: at most one atomic per output per block, every element read "
          "by one thread in one pass, a step of the grid's size, a tree's shared reads",
    also="the stub; simulator-only code (the compile-for-GPU step); a barrier inside a branch; "
         "a kernel that never finishes (the time limit); a block size or a shared array that "
         "fits one block size only (run under two); gpulab's own `amax_nonfinite` refused")


def _run_amax(kernel, trial: Trial, source: KernelSource) -> Trial:
    """Launch the kernel on each case of ``trial`` and reject the first wrong result; if every
    result was right, a plain write to out (a race the simulator's order of blocks hid)."""
    from numba import cuda

    names = source.parameters
    out_name = names[1] if len(names) > 1 else "out"
    plain = plain_writes_to(source, out_name)
    barriers = count_calls(source, "syncthreads")
    atomic_max_calls = count_calls(source, "max") - sum(
        1 for node in source.walk() if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name) and node.func.id == "max")
    raced = deferred = None
    for case, x in _amax_cases(trial):
        _, d_x = padded(x, trial.grid_threads, np.float32(AMAX_PAD))
        zeros = np.zeros(2, dtype=np.float32)
        out = WatchedArray(zeros) if device.tier() == "sim" else cuda.to_device(zeros)
        launch(kernel, trial, d_x, out, index_hint=AMAX_INDEX_HINT)
        got = out.copy_to_host()
        race = out.race() if isinstance(out, WatchedArray) else None
        run = AmaxRun(trial, case, x, (float(got[0]), float(got[1])), plain, race, barriers,
                      source.tree is not None, atomic_max_calls)
        if not run.right and run.want[1] == 0 and run.is_(run.per_block()[0]):
            deferred = deferred or run  # block 0's result alone: a case with inf/NaN tells why
            continue
        if not run.right:
            reject(AMAX_MISTAKES, run)
        if raced is None and (race is not None or plain):
            raced = run
    if deferred is not None:
        reject(AMAX_MISTAKES, deferred)
    if raced is not None:  # every result right: a race the simulator's block order hid
        reject(AMAX_MISTAKES, raced)
    return trial


def _amax_trace(kernel, seed: int) -> AmaxTrace:
    """The kernel traced on a small launch (2 blocks of 64 threads, two warps each, so that an
    atomic per warp shows; x of 260-360 values with NaN and inf: its cases need a second pass
    over the last block): what it read, its atomics and shared reads."""
    trial = Trial.draw("check_amax_nonfinite", seed, np.float32, block=AMAX_TRACE_THREADS,
                       size_range=AMAX_TRACE_SIZES)
    trial.grid_blocks = AMAX_TRACE_GRID
    x = _amax_cases(trial)[2][1]
    offer_trace(kernel, 2, 8, "x", "out",
                note="with x = np.float32 values, 40 of them, a few NaN and inf, and out = "
                     "np.zeros(2, np.float32)")
    trace = traced(kernel, trial, x, np.zeros(2, dtype=np.float32), where=str(trial))
    names = trace.global_arrays
    x_name = names[0] if names else "x"
    out_name = names[1] if len(names) > 1 else "out"
    atomics: dict = {}
    shared_atomics: dict = {}
    orders: dict = {}
    for access in trace.accesses:
        block = access.thread[0]
        if access.kind == "atomic" and access.array == out_name:
            key = (block, access.index[0])
            atomics[key] = atomics.get(key, 0) + 1
        elif access.kind == "atomic" and access.space == "shared":
            shared_atomics[block] = shared_atomics.get(block, 0) + 1
        elif access.kind == "read" and access.array == x_name:
            order = orders.setdefault(access.thread, [])
            if not order or order[-1] != access.index[0]:
                order.append(access.index[0])
    owner_block = (np.arange(trial.n) % trial.grid_threads) // trial.threads_per_block
    bad = ~np.isfinite(x)
    evidence = AmaxTrace(
        trial, orders, atomics, shared_atomics,
        {b: int(bad[owner_block == b].sum()) for b in range(trial.grid_blocks)},
        {t: row["shared_reads"] for t, row in trace.per_thread().items()},
        trace.uneven_barriers())
    return evidence


def _check_amax_method(kernel, seed: int) -> str:
    """Reject a right result reached by the wrong method (:data:`AMAX_METHOD_MISTAKES`, from
    :func:`_amax_trace`). Returns what the trace showed."""
    evidence = _amax_trace(kernel, seed)
    reject(AMAX_METHOD_MISTAKES, evidence)
    trial = evidence.trial
    most = max(evidence.atomics.values(), default=0)
    return (f"at most {most} atomic per output per block, every element read once, by one "
            f"thread, a step of {trial.grid_threads} (traced on {trial.grid_blocks} blocks of "
            f"{trial.threads_per_block})")


@AMAX.check
def check_amax_nonfinite(kernel, seed: int | None = None,
                         threads_per_block: int | None = None) -> str:
    """out starts at [0, 0]. Launched on a fixed grid (:data:`AMAX_GRID`) with a block size drawn
    from the tier's two (:data:`AMAX_BLOCKS`; a given one must be a power of two, as the tree
    halves it), then under the other, on each case of :func:`_amax_cases`, x padded past its end
    with :data:`AMAX_PAD`; then traced for the method (:func:`_check_amax_method`). A plain write
    to out is a race, found from the source and the simulator's record of writes even when the
    simulator's answer is right."""
    tier = tier_key()
    if threads_per_block is not None and (
            threads_per_block < 2 or threads_per_block & (threads_per_block - 1)):
        raise CheckFailedError(
            f"threads_per_block={threads_per_block} is not a power of two, but the tree "
            "halves the block at every round.", "leave threads_per_block out (the check "
                                                "draws one), or pass 32, 64 or 128.")
    source = AMAX.start(kernel)
    choices = AMAX_BLOCKS[tier]
    block = threads_per_block or choices[int(np.random.default_rng(seed).integers(2))]
    trial = Trial.draw("check_amax_nonfinite", seed, np.float32, block=block,
                       size_range=AMAX_SIZES[tier])
    trial.grid_blocks = AMAX_GRID[tier]
    under_two_blocks(lambda t: _run_amax(kernel, t, source), trial, source,
                     once=bool(threads_per_block))
    method = _check_amax_method(kernel, seed)
    return (f"amax and inf/NaN count right in all four cases ({trial}, and under "
            f"{'the given block size' if threads_per_block else 'a second block size'}); "
            f"by the method: {method}.")


# --- the chapter's recipes on your kernel --------------------------------------------------------

@dataclass
class KernelRecipes:
    """The fp16 and fp8 runs of :func:`recipes_on_kernel`, on a kernel and on NumPy."""

    whose: str
    launches: int
    fp16: tuple  # (run on the kernel, run on NumPy)
    fp8: tuple
    note: str = ""

    @property
    def same(self) -> bool:
        def equal(a, b) -> bool:
            return (a.loss_scales == b.loss_scales and a.skipped == b.skipped
                    and a.fp8_scales == b.fp8_scales
                    and all(np.array_equal(a.state[n], b.state[n]) for n in a.state))
        return equal(*self.fp16) and equal(*self.fp8)

    def report(self) -> str:
        kernel16, kernel8 = self.fp16[0], self.fp8[0]
        skipped = [k + 1 for k, s in enumerate(kernel16.skipped) if s]
        lines = [self.note] if self.note else []
        lines += [
            f"fp16 with loss scaling, {kernel16.steps} steps from a scale of "
            f"2^{math.log2(kernel16.loss_scales[0]):.0f}: the inf/NaN check of every step's "
            f"gradients ran on {self.whose}; steps skipped on inf/NaN: {skipped or 'none'}; "
            f"loss scale 2^{math.log2(kernel16.loss_scales[-1]):.0f} at the last step",
            f"fp8 (delayed scaling), {kernel8.steps} steps: every cast's amax (x, w and g of "
            f"each layer) and the gradients' inf/NaN check taken by {self.whose}; the scales "
            f"the last step used: "
            + ", ".join(f"{name} {values[-1]:.4g}" for name, values in kernel8.fp8_scales.items()),
            f"{self.launches} launches in all; the same runs with NumPy's check and amax "
            f"(gpulab.nn.mixed_precision): "
            + ("identical, bit for bit (loss scales, skipped steps, fp8 scales, weights)"
               if self.same else "DIFFERENT (see .fp16 and .fp8)"),
        ]
        return "\n".join(lines)

    __str__ = report


def recipes_on_kernel(kernel=None, data=None, fp16_steps: int = 8, fp8_steps: int = 3,
                      show: bool = True) -> KernelRecipes:
    """The chapter's fp16 and fp8 recipes for a few steps of the digits (a narrow 64 → 16 → 10
    network, batches of 32) with the fused reduction ``kernel`` (yours, once it has passed
    :func:`check_amax_nonfinite` in this session; otherwise gpulab's ``amax_nonfinite``, and
    the report says so) providing the loss scaler's inf/NaN check (all gradients as one array,
    one launch per step) and every fp8 cast's amax, next to the same runs on NumPy. The fp16
    run starts at a loss scale of 2^22, so that its first steps overflow and are skipped."""
    from gpulab.kernels.amax import amax_and_nonfinite
    from gpulab.nn.data import load_digits
    from gpulab.nn.mixed_precision import train_mixed

    kernel, whose, note = AMAX.yours_or_gpulabs(kernel, "amax_nonfinite", "ran")
    data = data or load_digits(seed=0)
    launches = [0]

    def on_kernel(x: np.ndarray) -> tuple[float, int]:
        launches[0] += 1
        return amax_and_nonfinite(np.ascontiguousarray(x, dtype=np.float32), kernel=kernel)

    runs = {}
    for recipe, steps, stats in (("fp16", fp16_steps, on_kernel), ("fp16", fp16_steps, None),
                                 ("fp8", fp8_steps, on_kernel), ("fp8", fp8_steps, None)):
        with np.errstate(over="ignore", invalid="ignore"):
            run = train_mixed(recipe, data, epochs=1, max_steps=steps, widths=(64, 16, 10),
                              init_scale=2.0**22, tensor_stats=stats)
        runs.setdefault(recipe, []).append(run)
    result = KernelRecipes(whose, launches[0], tuple(runs["fp16"]), tuple(runs["fp8"]), note)
    if show:
        print(result.report())
    return result


__all__ = ["AMAX", "AMAX_METHOD_MISTAKES", "AMAX_MISTAKES", "DELAYED_SCALE", "LOSS_SCALE",
           "KernelRecipes",
           "check_amax_nonfinite", "check_delayed_scale", "check_loss_scale_update",
           "recipes_on_kernel"]
