"""Chapter 10's exercises: the two rules that keep narrow formats safe.

- :func:`check_loss_scale_update` takes your ``update_loss_scale(scale, clean_steps, found_inf,
  growth_interval) -> (scale, clean_steps, take_step)``: one step of dynamic loss scaling as
  PyTorch's ``GradScaler`` does it (halve the scale, reset the count and skip the step on an
  inf/NaN gradient; count a clean step and double the scale when the count reaches
  ``growth_interval``, starting the count again). The check walks a long sequence of steps
  from a random starting scale with a random growth interval, built so that every rule is
  exercised (a growth, an overflow in the middle of a count, two overflows in a row, a growth
  right after a back-off), and compares every step with
  :class:`gpulab.nn.mixed_precision.LossScaler`.
- :func:`check_delayed_scale` takes your ``delayed_scale(amax_history, x, fp8_max, margin) ->
  (new_history, scale)``: Transformer Engine's delayed scaling for one tensor. Record max|x| as
  the newest entry of the history (the oldest, first entry drops out; the newest goes last),
  and return scale = fp8_max / max(new history) / 2^margin. The check uses random histories
  with an old spike, tensors whose largest magnitude is negative, margins 0 to 3, both FP8
  formats' largest values, and a step whose amax is the largest ever.

A failure names the mistake (the usual ones: not skipping on overflow, growing every step or
one step late, backing off without resetting the count; the last amax instead of the history's
largest, max instead of max-abs, a forgotten or inverted margin, the scale from the history
before this step's amax) and the seed to repeat it.
"""

from __future__ import annotations

import math

import numpy as np

from gpulab import formats
from gpulab.exercises.checks import CheckFailedError, CheckResult, call_learner, run_check
from gpulab.nn.mixed_precision import LossScaler, scale_from_history
from gpulab.nn.mixed_precision import amax as recorded_amax

# --- exercise 1: the loss scaler's update rule ----------------------------------------------

GROWTH, BACKOFF = 2.0, 0.5
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


def _as_count(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            raise CheckFailedError(
                f"{what} is {value!r}, a float: a count of steps is a whole number.",
                "keep the count an int: `clean_steps + 1` and `0`, not `1.0` or a division.")
        raise CheckFailedError(f"{what} is {value!r:.60} (a {type(value).__name__}), not a whole "
                               "number.", "return the count of clean steps as an int.")
    return int(value)


def _check_scaler_result(result, where: str):
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
        raise CheckFailedError(f"{where}: the scale became {scale!r}; a loss scale is a "
                               "positive, finite number.", SCALER_STUB_HINT)
    clean = _as_count(clean, f"{where}: the count of clean steps")
    if not isinstance(take, (bool, np.bool_)):
        raise CheckFailedError(
            f"{where}: take_step is {take!r:.40} (a {type(take).__name__}); return True or "
            "False.", "take_step says whether the optimiser applies this step: a bool.")
    return float(scale), clean, bool(take)


def _diagnose_scaler(state, got, want, interval: int, where: str) -> CheckFailedError:
    scale, clean, found_inf = state
    g_scale, g_clean, g_take = got
    w_scale, w_clean, w_take = want
    summary = (f"{where}: expected (scale {w_scale:g}, clean_steps {w_clean}, take_step "
               f"{w_take}), got ({g_scale:g}, {g_clean}, {g_take})")
    if found_inf:
        if g_take:
            return CheckFailedError(f"{summary}: the step was taken although a gradient was "
                                    "inf or NaN.", SKIP_HINT)
        if g_scale == scale * GROWTH:
            return CheckFailedError(f"{summary}: the scale doubled on an overflow; it must be "
                                    "halved.", "on inf/NaN, multiply the scale by 0.5: a "
                                               "smaller scale keeps the gradients in range.")
        if g_scale == scale:
            return CheckFailedError(f"{summary}: the scale stayed the same on an overflow, so "
                                    "the next step overflows again.",
                                    "on inf/NaN, multiply the scale by 0.5.")
        if g_scale == w_scale and g_clean != 0:
            return CheckFailedError(f"{summary}: the scale backed off, but the count of clean "
                                    f"steps was not reset (it was {clean}).",
                                    RESET_ON_BACKOFF_HINT)
    else:
        if not g_take:
            return CheckFailedError(f"{summary}: a clean step (no inf or NaN) was skipped.",
                                    "take every step whose gradients are finite: "
                                    "take_step is True there.")
        if g_scale == scale * BACKOFF:
            return CheckFailedError(f"{summary}: the scale was halved on a clean step.",
                                    "halve only on an overflow (found_inf True).")
        grows = w_scale == scale * GROWTH
        if not grows and g_scale == scale * GROWTH:
            if clean + 1 < interval:
                message = (f"{summary}: the scale doubled after only {clean + 1} clean step(s); "
                           f"it should wait for growth_interval = {interval}.")
                if clean == 0:
                    message += " Growing on every clean step overflows within a few steps."
                return CheckFailedError(message, COUNT_HINT)
            return CheckFailedError(f"{summary}: the scale doubled again although the count "
                                    "had just been reset by a growth.", RESET_ON_GROWTH_HINT)
        if grows and g_scale == scale:
            if g_clean == clean + 1:
                return CheckFailedError(
                    f"{summary}: this is the {interval}th clean step in a row, so the scale "
                    "should double now; yours waits (an off-by-one: growing when the count "
                    f"exceeds {interval} instead of when it reaches it?).", COUNT_HINT)
            return CheckFailedError(f"{summary}: the scale never grows.", COUNT_HINT)
        if grows and g_scale == w_scale and g_clean != 0:
            return CheckFailedError(f"{summary}: the scale grew, but the count was not reset.",
                                    RESET_ON_GROWTH_HINT)
        if g_clean == clean and not grows:
            return CheckFailedError(f"{summary}: the clean step was not counted.", COUNT_HINT)
    return CheckFailedError(f"{summary}.", SCALER_STUB_HINT)


def check_loss_scale_update(update, seed: int | None = None, show: bool = True) -> CheckResult:
    """Check ``update(scale, clean_steps, found_inf, growth_interval) -> (scale, clean_steps,
    take_step)`` step by step along a sequence of clean and overflowing steps (random growth
    interval 3-8, random starting scale 2^10-2^20), fed at every step the state the reference
    (:class:`gpulab.nn.mixed_precision.LossScaler`) is in, so that one mistake is reported where
    it happens.

    Diagnoses: the stub; not three values, a count that is not an int, a take_step that is not a
    bool; not skipping the step on overflow; not halving (or doubling) on overflow; backing off
    without resetting the count; skipping or halving on a clean step; growing every step (or
    before growth_interval clean steps); growing one step late; not resetting the count after a
    growth; not counting."""

    def body(seed: int) -> str:
        rng = np.random.default_rng(seed)
        interval = int(rng.integers(3, 9))
        scale, clean = 2.0 ** int(rng.integers(10, 21)), 0
        steps = _scaler_steps(rng, interval)
        grown = backed_off = 0
        for number, found_inf in enumerate(steps, start=1):
            where = (f"step {number} (scale {scale:g}, clean_steps {clean}, found_inf "
                     f"{found_inf}, growth_interval {interval}; seed={seed})")
            result = call_learner(update, scale, clean, found_inf, interval,
                                  stub_hint=SCALER_STUB_HINT,
                                  call=f"update_loss_scale({scale:g}, {clean}, {found_inf}, "
                                       f"{interval})")
            got = _check_scaler_result(result, where)
            want = _reference_step(scale, clean, found_inf, interval)
            if got != want:
                raise _diagnose_scaler((scale, clean, found_inf), got, want, interval, where)
            grown += want[0] > scale
            backed_off += want[0] < scale
            scale, clean = want[0], want[1]
        return (f"{len(steps)} steps right, growth_interval {interval}: {grown} growths, "
                f"{backed_off} back-offs with the step skipped (seed={seed}).")

    return run_check("loss_scale_update", body, seed, show)


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
    """(history, x, fp8_max, margin, what) cases: an old spike above this step's amax and a
    negative largest magnitude (E4M3, margin 0); the same with a margin; E5M2 gradients with a
    margin; a step whose amax is the largest ever."""
    trials = []
    for k, (fmt, margin) in enumerate(((E4M3, 0), (E4M3, int(rng.integers(1, 4))),
                                       (E5M2, int(rng.integers(1, 4))), (E4M3, 0))):
        length = int(rng.integers(4, 17))
        size = 10.0 ** rng.uniform(-6, 2) if fmt is E5M2 else 10.0 ** rng.uniform(-1, 3)
        history = size * rng.uniform(0.2, 1.0, length)
        n = int(rng.integers(20, 200))
        x = rng.standard_normal(n) * size / 20
        x[int(rng.integers(0, n))] = -size * rng.uniform(0.5, 0.9)  # largest magnitude: negative
        x[int(rng.integers(0, n))] = size * rng.uniform(0.1, 0.3)
        if k < 3:
            history[int(rng.integers(1, length - 1))] = size * rng.uniform(3, 6)  # an old spike
            what = "an old spike in the history" + (", E5M2 gradients" if fmt is E5M2 else "")
        else:
            x *= 20 * float(np.max(history)) / float(np.max(np.abs(x)))  # the largest ever
            what = "this step's amax larger than any in the history"
        trials.append((history, x, fmt.max_value, margin, what))
    return trials


def _check_history(new_history, history: np.ndarray, x: np.ndarray, where: str) -> np.ndarray:
    if not isinstance(new_history, np.ndarray):
        raise CheckFailedError(f"{where}: the new history is a {type(new_history).__name__}, "
                               "not a NumPy array.", "build it with np.append or "
                                                     "np.concatenate: both give an array.")
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
    newest = new_history[-1]
    if math.isclose(newest, float(np.max(x)), rel_tol=1e-12) and float(np.max(x)) != amax:
        raise CheckFailedError(
            f"{where}: the newest entry is max(x) = {newest:.6g}, but the largest magnitude "
            f"is |min(x)| = {amax:.6g}.", ABS_HINT)
    if np.allclose(new_history, np.append(amax, history[:-1]), rtol=1e-12, atol=0):
        raise CheckFailedError(
            f"{where}: the newest amax went first and the last entry was dropped; this "
            "exercise keeps the history oldest first, newest last.",
            "drop history[0] (the oldest) and append the new amax at the end.")
    if np.allclose(new_history, np.append(history[:-1], amax), rtol=1e-12, atol=0):
        raise CheckFailedError(
            f"{where}: the last entry (the newest before this step) was replaced; the oldest, "
            "history[0], should drop out.", "keep history[1:] and append the new amax.")
    raise CheckFailedError(
        f"{where}: expected the new history {np.array2string(want, precision=4)}, got "
        f"{np.array2string(new_history, precision=4)}.", DELAYED_STUB_HINT)


def _check_scale(scale, history: np.ndarray, x: np.ndarray, fp8_max: float, margin: int,
                 where: str, new_history: np.ndarray) -> None:
    if isinstance(scale, np.ndarray) and scale.ndim > 0:
        raise CheckFailedError(f"{where}: the scale is an array of shape {scale.shape}; one "
                               "tensor has one scale.", "reduce with np.max to one number.")
    if isinstance(scale, bool) or not isinstance(
            scale, (int, float, np.integer, np.floating, np.ndarray)):
        raise CheckFailedError(f"{where}: the scale is {scale!r:.60} (a "
                               f"{type(scale).__name__}), not a number.", DELAYED_STUB_HINT)
    got = float(scale)
    amax = recorded_amax(x)  # as DelayedScaling records it (Transformer Engine's)
    want = scale_from_history(new_history, fp8_max, margin)
    if math.isclose(got, want, rel_tol=1e-9):
        return
    summary = f"{where}: expected scale {want:.6g}, got {got:.6g}"
    history_max = float(np.max(new_history))
    old_max = float(np.max(history))
    candidates = [
        (fp8_max / amax / 2.0**margin,
         f"{summary}: that is fp8_max / (this step's amax) / 2**margin; the history's largest "
         f"amax is {history_max:.4g}.", HISTORY_MAX_HINT),
        (fp8_max / float(np.max(x)) / 2.0**margin if np.max(x) > 0 else -1,
         f"{summary}: that is fp8_max / max(x); x's largest magnitude is negative "
         f"({-amax:.4g}).", ABS_HINT),
        (fp8_max / history_max,
         f"{summary}: that is fp8_max / max(history) without the margin (margin {margin}).",
         MARGIN_HINT),
        (fp8_max / history_max * 2.0**margin,
         f"{summary}: that multiplies by 2**margin; the margin makes the scale smaller "
         "(headroom), so divide by it.", MARGIN_HINT),
        (history_max / fp8_max * 2.0**margin,
         f"{summary}: that is amax / fp8_max, the inverse: this scale multiplies x before the "
         "cast, so it maps the largest amax onto fp8_max: fp8_max / amax.",
         "scale = fp8_max / max(new_history) / 2**margin."),
        (fp8_max / old_max / 2.0**margin,
         f"{summary}: that is the scale from the history *before* this step's amax was "
         f"recorded ({old_max:.4g}); this step's amax, {amax:.4g}, is larger.",
         "compute the scale from the new history, after appending this step's amax."),
        (E4M3.max_value / history_max / 2.0**margin if fp8_max != E4M3.max_value else -1,
         f"{summary}: that uses 448 (E4M3's largest value), but this tensor's format has "
         f"fp8_max = {fp8_max:g}.", "use the fp8_max argument, not a constant."),
    ]
    for value, message, hint in candidates:
        if value > 0 and math.isclose(got, value, rel_tol=1e-9):
            raise CheckFailedError(message, hint)
    raise CheckFailedError(f"{summary}.", DELAYED_STUB_HINT)


def check_delayed_scale(delayed_scale, seed: int | None = None,
                        show: bool = True) -> CheckResult:
    """Check ``delayed_scale(amax_history, x, fp8_max, margin) -> (new_history, scale)`` on
    four random cases (see :func:`_delayed_trials`): the history must come back the same
    length, oldest first, with max|x| appended and the first entry dropped; the scale must be
    fp8_max / max(new history) / 2**margin (relative error 1e-9). The inputs are copies."""

    def body(seed: int) -> str:
        rng = np.random.default_rng(seed)
        trials = _delayed_trials(rng)
        for number, (history, x, fp8_max, margin, what) in enumerate(trials, start=1):
            where = (f"case {number} ({what}; history of {history.size}, fp8_max {fp8_max:g}, "
                     f"margin {margin}; seed={seed})")
            result = call_learner(delayed_scale, history.copy(), x.copy(), fp8_max, margin,
                                  stub_hint=DELAYED_STUB_HINT,
                                  call=f"delayed_scale(...) in {where}")
            if not (isinstance(result, tuple) and len(result) == 2):
                raise CheckFailedError(f"{where}: your function returned {result!r:.80}, not a "
                                       "pair (new_history, scale).",
                                       "end with `return new_history, scale`.")
            new_history = _check_history(result[0], history, x, where)
            _check_scale(result[1], history, x, fp8_max, margin, where, new_history)
        return (f"{len(trials)} cases right: old spikes kept the scale down, negative amaxes "
                f"counted, margins 0-3, E4M3 and E5M2 (seed={seed}).")

    return run_check("delayed_scale", body, seed, show)


__all__ = ["check_delayed_scale", "check_loss_scale_update"]
