"""Chapter 12's checks (nearest-rank percentile, joules per thousand inferences) against a right
answer over several seeds, the stub and the wrong answers learners write."""

import math

import numpy as np
import pytest

from gpulab.exercises import ch12
from gpulab.exercises.checks import FAILED, NOT_ATTEMPTED, PASSED

SEEDS = (0, 1, 2, 3, 11)

# --- exercise 1: percentile --------------------------------------------------------------------


def percentile(latencies, q):
    ordered = sorted(latencies)
    return ordered[max(1, math.ceil(q * len(ordered) / 100)) - 1]


def mean_two_sigma(latencies, q):
    return float(np.mean(latencies) + 2 * np.std(latencies))


def rank_not_minus_one(latencies, q):
    ordered = sorted(latencies)
    return ordered[min(math.ceil(q * len(ordered) / 100), len(ordered) - 1)]


def floor_index(latencies, q):  # right unless q·n/100 is whole, then one too high
    ordered = sorted(latencies)
    return ordered[int(q * len(ordered) / 100)]


def floor_minus_one(latencies, q):
    ordered = sorted(latencies)
    return ordered[max(int(q * len(ordered) / 100) - 1, 0)]


def interpolated(latencies, q):
    return float(np.percentile(latencies, q))


def unsorted(latencies, q):
    return latencies[max(1, math.ceil(q * len(latencies) / 100)) - 1]


def stub(*args):
    raise NotImplementedError


@pytest.mark.parametrize("seed", SEEDS)
def test_percentile_accepts_the_solution(seed):
    result = ch12.check_percentile(percentile, seed=seed, show=False)
    assert result.status == PASSED, result.message


@pytest.mark.parametrize("wrong, words", [
    (mean_two_sigma, "mean + 2σ"), (rank_not_minus_one, "one too high"),
    (floor_index, "one too high"), (floor_minus_one, "one too low"),
    (interpolated, "interpolates"), (unsorted, "not sorted")])
def test_percentile_rejects_wrong_answers_with_the_right_hint(wrong, words):
    for seed in SEEDS:
        result = ch12.check_percentile(wrong, seed=seed, show=False)
        assert result.status == FAILED, (wrong.__name__, seed)
        assert words in result.hint, (wrong.__name__, seed, result.hint)


def test_percentile_stub_is_not_attempted():
    assert ch12.check_percentile(stub, seed=0, show=False).status == NOT_ATTEMPTED
    assert ch12.check_percentile(None, seed=0, show=False).status == NOT_ATTEMPTED


def test_percentile_matches_the_load_test_library():
    from gpulab.serving.loadtest import percentile as library

    rng = np.random.default_rng(5)
    for n in (1, 7, 100, 201):
        values = list(rng.lognormal(size=n))
        for q in (50, 99, 99.9):
            assert library(values, q) == ch12.nearest_rank(values, q)


# --- exercise 2: joules per thousand ------------------------------------------------------------


def joules_per_thousand(times_s, watts, n_inferences):
    t, w = np.asarray(times_s), np.asarray(watts)
    return float(np.sum(np.diff(t) * (w[1:] + w[:-1]) / 2)) / n_inferences * 1000


def left_rectangles(times_s, watts, n_inferences):  # a fine approximation: accepted
    t, w = np.asarray(times_s), np.asarray(watts)
    return float(np.sum(np.diff(t) * w[:-1])) / n_inferences * 1000


def watt_hours(times_s, watts, n_inferences):
    return joules_per_thousand(times_s, watts, n_inferences) / 3600


def per_inference(times_s, watts, n_inferences):
    return joules_per_thousand(times_s, watts, n_inferences) / 1000


def no_time(times_s, watts, n_inferences):
    return float(np.sum(watts)) / n_inferences * 1000


def minus_idle(times_s, watts, n_inferences):
    idle = float(np.min(watts[:5]))  # a learner's idle estimate: the first samples
    total = joules_per_thousand(times_s, watts, n_inferences) * n_inferences / 1000
    return (total - idle * (times_s[-1] - times_s[0])) / n_inferences * 1000


def busy_only(times_s, watts, n_inferences):
    t, w = np.asarray(times_s), np.asarray(watts)
    keep = w > 200
    return joules_per_thousand(t[keep], w[keep], n_inferences)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("right", [joules_per_thousand, left_rectangles])
def test_joules_accepts_the_solution(seed, right):
    result = ch12.check_joules_per_thousand(right, seed=seed, show=False)
    assert result.status == PASSED, result.message


@pytest.mark.parametrize("wrong, words", [
    (watt_hours, "watt-hours"), (per_inference, "per inference"), (no_time, "without time"),
    (busy_only, "idle"), (minus_idle, "idle")])
def test_joules_rejects_wrong_answers_with_the_right_hint(wrong, words):
    for seed in SEEDS:
        result = ch12.check_joules_per_thousand(wrong, seed=seed, show=False)
        assert result.status == FAILED, (wrong.__name__, seed)
        assert words in result.hint, (wrong.__name__, seed, result.hint)


def test_joules_stub_is_not_attempted():
    assert ch12.check_joules_per_thousand(stub, seed=0, show=False).status == NOT_ATTEMPTED
