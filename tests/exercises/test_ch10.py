"""Chapter 10's checks (the loss scaler's update rule, a delayed FP8 scale from an amax
history) against right answers over several seeds, the stub, and the wrong answers learners
write, each rejected with the hint that names its mistake."""

import numpy as np
import pytest

from gpulab.exercises import ch10
from gpulab.exercises.checks import FAILED, NOT_ATTEMPTED, PASSED

SEEDS = (0, 1, 2, 7, 12345)

# --- exercise 1: the loss scaler's update rule ----------------------------------------------


def update_loss_scale(scale, clean_steps, found_inf, growth_interval):
    if found_inf:
        return scale * 0.5, 0, False
    clean_steps += 1
    if clean_steps == growth_interval:
        return scale * 2, 0, True
    return scale, clean_steps, True


def with_greater_equal(scale, clean_steps, found_inf, growth_interval):
    """Also right: >= instead of == (the count never passes the interval)."""
    if found_inf:
        return scale / 2, 0, False
    if clean_steps + 1 >= growth_interval:
        return scale * 2.0, 0, True
    return scale, clean_steps + 1, True


def not_skipping(scale, clean_steps, found_inf, growth_interval):
    new_scale, count, _ = update_loss_scale(scale, clean_steps, found_inf, growth_interval)
    return new_scale, count, True


def growing_every_step(scale, clean_steps, found_inf, growth_interval):
    if found_inf:
        return scale * 0.5, 0, False
    return scale * 2, clean_steps + 1, True


def backoff_without_reset(scale, clean_steps, found_inf, growth_interval):
    if found_inf:
        return scale * 0.5, clean_steps, False
    return update_loss_scale(scale, clean_steps, found_inf, growth_interval)


def growing_one_step_late(scale, clean_steps, found_inf, growth_interval):
    if found_inf:
        return scale * 0.5, 0, False
    clean_steps += 1
    if clean_steps > growth_interval:
        return scale * 2, 0, True
    return scale, clean_steps, True


def growth_without_reset(scale, clean_steps, found_inf, growth_interval):
    if found_inf:
        return scale * 0.5, 0, False
    clean_steps += 1
    if clean_steps >= growth_interval:
        return scale * 2, clean_steps, True
    return scale, clean_steps, True


def doubling_on_overflow(scale, clean_steps, found_inf, growth_interval):
    if found_inf:
        return scale * 2, 0, False
    return update_loss_scale(scale, clean_steps, found_inf, growth_interval)


def never_backing_off(scale, clean_steps, found_inf, growth_interval):
    if found_inf:
        return scale, 0, False
    return update_loss_scale(scale, clean_steps, found_inf, growth_interval)


def float_count(scale, clean_steps, found_inf, growth_interval):
    new_scale, count, take = update_loss_scale(scale, clean_steps, found_inf, growth_interval)
    return new_scale, float(count), take


def two_values(scale, clean_steps, found_inf, growth_interval):
    return update_loss_scale(scale, clean_steps, found_inf, growth_interval)[:2]


def step_as_number(scale, clean_steps, found_inf, growth_interval):
    new_scale, count, take = update_loss_scale(scale, clean_steps, found_inf, growth_interval)
    return new_scale, count, int(take)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("function", [update_loss_scale, with_greater_equal])
def test_loss_scale_update_accepts_right_answers(function, seed):
    result = ch10.check_loss_scale_update(function, seed=seed, show=False)
    assert result.status == PASSED, result
    assert "growths" in result.message and f"seed={seed}" in result.message


@pytest.mark.parametrize("function, words", [
    (not_skipping, "must be skipped"),
    (growing_every_step, "doubled after only 1 clean step"),
    (backoff_without_reset, "start the count of clean steps again from 0"),
    (growing_one_step_late, "off-by-one"),
    (growth_without_reset, "when the scale grows, start the count again"),
    (doubling_on_overflow, "must be halved"),
    (never_backing_off, "stayed the same on an overflow"),
    (float_count, "a count of steps is a whole number"),
    (two_values, "not three values"),
    (step_as_number, "return True or False"),
])
@pytest.mark.parametrize("seed", SEEDS[:3])
def test_loss_scale_update_names_the_mistake(function, words, seed):
    result = ch10.check_loss_scale_update(function, seed=seed, show=False)
    assert result.status == FAILED, result
    assert words in result.message + " " + result.hint, result
    assert f"seed={seed}" in result.message


# --- exercise 2: a delayed FP8 scale from an amax history ------------------------------------


def delayed_scale(amax_history, x, fp8_max, margin):
    amax = float(np.max(np.abs(x)))
    new_history = np.append(amax_history[1:], amax)
    return new_history, fp8_max / np.max(new_history) / 2**margin


def in_place(amax_history, x, fp8_max, margin):
    """Also right: roll the array in place."""
    amax_history[:-1] = amax_history[1:]
    amax_history[-1] = np.abs(x).max()
    return amax_history, float(fp8_max / amax_history.max() * 0.5**margin)


def from_the_last_amax(amax_history, x, fp8_max, margin):
    amax = float(np.max(np.abs(x)))
    return np.append(amax_history[1:], amax), fp8_max / amax / 2**margin


def forgetting_the_margin(amax_history, x, fp8_max, margin):
    new_history = np.append(amax_history[1:], np.max(np.abs(x)))
    return new_history, fp8_max / np.max(new_history)


def margin_the_wrong_way(amax_history, x, fp8_max, margin):
    new_history = np.append(amax_history[1:], np.max(np.abs(x)))
    return new_history, fp8_max / np.max(new_history) * 2**margin


def max_not_max_abs(amax_history, x, fp8_max, margin):
    new_history = np.append(amax_history[1:], np.max(x))
    return new_history, fp8_max / np.max(new_history) / 2**margin


def scale_before_recording(amax_history, x, fp8_max, margin):
    scale = fp8_max / np.max(amax_history) / 2**margin
    return np.append(amax_history[1:], np.max(np.abs(x))), scale


def inverse_scale(amax_history, x, fp8_max, margin):
    new_history = np.append(amax_history[1:], np.max(np.abs(x)))
    return new_history, np.max(new_history) / fp8_max * 2**margin


def always_448(amax_history, x, fp8_max, margin):
    new_history = np.append(amax_history[1:], np.max(np.abs(x)))
    return new_history, 448 / np.max(new_history) / 2**margin


def growing_history(amax_history, x, fp8_max, margin):
    new_history = np.append(amax_history, np.max(np.abs(x)))
    return new_history, fp8_max / np.max(new_history) / 2**margin


def newest_first(amax_history, x, fp8_max, margin):
    new_history = np.append(np.max(np.abs(x)), amax_history[:-1])
    return new_history, fp8_max / np.max(new_history) / 2**margin


def dropping_the_newest(amax_history, x, fp8_max, margin):
    new_history = np.append(amax_history[:-1], np.max(np.abs(x)))
    return new_history, fp8_max / np.max(new_history) / 2**margin


def as_a_list(amax_history, x, fp8_max, margin):
    new_history = list(amax_history[1:]) + [float(np.max(np.abs(x)))]
    return new_history, fp8_max / max(new_history) / 2**margin


def only_the_scale(amax_history, x, fp8_max, margin):
    return delayed_scale(amax_history, x, fp8_max, margin)[1]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("function", [delayed_scale, in_place])
def test_delayed_scale_accepts_right_answers(function, seed):
    result = ch10.check_delayed_scale(function, seed=seed, show=False)
    assert result.status == PASSED, result


@pytest.mark.parametrize("function, words", [
    (from_the_last_amax, "this step's amax"),
    (forgetting_the_margin, "without the margin"),
    (margin_the_wrong_way, "multiplies by 2**margin"),
    (max_not_max_abs, "largest *magnitude*"),
    (scale_before_recording, "before* this step's amax"),
    (inverse_scale, "the inverse"),
    (always_448, "use the fp8_max argument"),
    (growing_history, "one more than"),
    (newest_first, "oldest first, newest last"),
    (dropping_the_newest, "history[0], should drop out"),
    (as_a_list, "not a NumPy array"),
    (only_the_scale, "not a pair"),
])
@pytest.mark.parametrize("seed", SEEDS[:3])
def test_delayed_scale_names_the_mistake(function, words, seed):
    result = ch10.check_delayed_scale(function, seed=seed, show=False)
    assert result.status == FAILED, result
    assert words in result.message + " " + result.hint, result
    assert f"seed={seed}" in result.message


@pytest.mark.parametrize("check", [ch10.check_loss_scale_update, ch10.check_delayed_scale])
def test_stubs_are_not_attempted(check):
    def stub(*args):
        raise NotImplementedError()

    result = check(stub, show=False)
    assert result.status == NOT_ATTEMPTED
    assert result.hint


@pytest.mark.parametrize("check", [ch10.check_loss_scale_update, ch10.check_delayed_scale])
def test_a_crashing_answer_is_explained(check):
    def broken(*args):
        return undefined_name  # noqa: F821

    result = check(broken, seed=0, show=False)
    assert result.status == FAILED and "NameError" in result.message
