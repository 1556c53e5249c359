"""Chapter 12's exercises: a latency percentile, and joules per thousand inferences.

- :func:`check_percentile` takes your ``percentile(latencies, q)``: the **nearest-rank**
  percentile — sort the values, take the ceil(q/100 · n)-th smallest (counting from 1). It is
  always one of the measured values.
- :func:`check_joules_per_thousand` takes your ``joules_per_thousand(times_s, watts,
  n_inferences)``: the board's energy over the whole trace of power samples (watts at the given
  times, idle stretches included: the board draws them too), integrated over time (the trapezoid
  rule, or anything within 1 % of it), per thousand inferences, in joules.

Values are random; a failure names the seed to repeat it.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from gpulab.exercises.checks import CheckFailedError, CheckResult, call_learner, run_check

# --- exercise 1: nearest-rank percentile ------------------------------------------------------

PERCENTILE_STUB_HINT = ("sort the latencies, compute the rank ceil(q/100 · n) (1-based), and "
                        "return the value at that rank (index rank - 1).")


def nearest_rank(values, q: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered) / 100)) - 1]


def _percentile_suspects(values, q) -> list[tuple[float, str]]:
    ordered = sorted(values)
    n = len(ordered)
    rank = max(1, math.ceil(q * n / 100))
    out = [
        (float(np.mean(values) + 2 * np.std(values)),
         "that is the mean + 2σ: latencies are skewed (a long tail), not normal; the "
         "percentile is a rank in the sorted values, not a formula on the mean."),
        (ordered[min(rank, n - 1)], "off by one rank (one too high): the rank ceil(q/100 · n) "
                                    "counts from 1, so its index is rank - 1."),
        (ordered[max(rank - 2, 0)], "off by one rank (one too low): the index of rank "
                                    "ceil(q/100 · n) is rank - 1, not rank - 2 (or use ceil, "
                                    "not int/floor)."),
        (float(np.percentile(values, q)), "that interpolates between two values (np.percentile's "
                                          "default): nearest-rank returns a measured value."),
        (list(values)[rank - 1], "the values were not sorted: sort them before taking a rank."),
        (float(np.mean(values)), "that is the mean, not a percentile."),
        (float(np.max(values)), "that is the maximum: take the rank ceil(q/100 · n), not n."),
    ]
    return out


def check_percentile(function, seed: int | None = None, show: bool = True) -> CheckResult:
    """Check ``function(latencies, q)`` on random skewed latency lists of random lengths (not
    multiples of 100) for q = 50, 90, 99 and a random q, including one list where q·n/100 is a
    whole number. Diagnoses the stub, mean + 2σ, off-by-one ranks, interpolation, unsorted
    input, the mean and the maximum."""

    def body(seed: int) -> str:
        rng = np.random.default_rng(seed)
        cases = []
        for q in (50, 90, 99, float(np.round(rng.uniform(60, 98), 1))):
            n = int(rng.integers(7, 480))
            if n % 100 == 0:
                n += 3
            cases.append((q, n))
        cases.append((99, 200))  # q·n/100 whole: the rank is exactly 198
        for q, n in cases:
            values = [float(v) for v in np.round(rng.lognormal(0.5, 0.8, n), 4)]
            given = list(values)
            got = call_learner(function, given, q, stub_hint=PERCENTILE_STUB_HINT,
                               call=f"percentile(<{n} latencies>, {q})")
            where = f"{n} latencies, q = {q} (seed={seed})"
            if isinstance(got, bool) or not isinstance(got, numbers.Real):
                raise CheckFailedError(f"for {where} you returned {got!r}: a number was "
                                       "expected.", "return the value: `return ...`.")
            want = nearest_rank(values, q)
            if float(got) == want:
                continue
            hint = next((h for v, h in _percentile_suspects(values, q)
                         if math.isclose(float(got), v, rel_tol=1e-9)), PERCENTILE_STUB_HINT)
            raise CheckFailedError(f"for {where}: expected {want}, got {got}.", hint)
        return f"all {len(cases)} lists right (seed={seed})."

    return run_check("percentile", body, seed, show)


# --- exercise 2: joules per thousand inferences -------------------------------------------------

JOULES_STUB_HINT = ("integrate power over time: for each pair of neighbouring samples add "
                    "(t[i+1] - t[i]) × (w[i] + w[i+1]) / 2; then divide by n_inferences and "
                    "multiply by 1000.")


def power_trace(rng: np.random.Generator) -> tuple[list[float], list[float], float]:
    """A board's power samples: idle, a busy stretch, idle again; uneven sampling; the idle
    power it drew."""
    n = int(rng.integers(60, 240))
    times = np.cumsum(rng.uniform(0.005, 0.02, n))
    times -= times[0]
    idle = float(rng.uniform(40, 100))
    busy = float(rng.uniform(250, 650))
    start, stop = np.quantile(times, [rng.uniform(0.15, 0.3), rng.uniform(0.6, 0.85)])
    watts = np.where((times >= start) & (times <= stop), busy, idle)
    watts = watts + rng.normal(0, 3, n)
    return [float(t) for t in np.round(times, 6)], [float(w) for w in np.round(watts, 3)], idle


def trapezoid(times, watts) -> float:
    t, w = np.asarray(times), np.asarray(watts)
    return float(np.sum(np.diff(t) * (w[1:] + w[:-1]) / 2))


def _joules_suspects(times, watts, n, idle) -> list[tuple[float, str]]:
    t, w = np.asarray(times), np.asarray(watts)
    right = trapezoid(times, watts)
    above = w > idle + 20
    busy_only = trapezoid(t[above], w[above]) if above.sum() >= 2 else 0.0
    minus_idle = right - idle * (t[-1] - t[0])
    return [
        (right / n * 1000 / 3600, "that is in watt-hours: 1 Wh = 3600 J; the answer is in "
                                  "joules (watts × seconds), do not divide by 3600."),
        (right / n, "that is per inference: multiply by 1000 for a thousand inferences."),
        (right * 1000, "divide by the number of inferences: joules per thousand = total / n × "
                       "1000."),
        (float(np.sum(w)) / n * 1000, "that adds up watts without time: multiply each power "
                                      "by the time between samples (W × s = J)."),
        (minus_idle / n * 1000, "the idle power is missing: the board draws it the whole "
                                "time, and the job pays for it (board boundary, idle included)."),
        (busy_only / n * 1000, "only the busy samples are counted: the idle stretches cost "
                               "energy too (board boundary, idle included)."),
        (float(np.mean(w)) * n, "mean power × the number of inferences is not energy: use the "
                                "time the samples cover."),
    ]


def check_joules_per_thousand(function, seed: int | None = None, show: bool = True
                              ) -> CheckResult:
    """Check ``function(times_s, watts, n_inferences)`` on random power traces (idle, busy,
    idle; uneven sampling; noise) against the trapezoid rule within 1 %. Diagnoses the stub,
    watt-hours, per inference, forgetting to divide by n, summing watts without time, idle power
    left out (subtracted or busy samples only)."""

    def body(seed: int) -> str:
        rng = np.random.default_rng(seed)
        for _trial in range(4):
            times, watts, idle = power_trace(rng)
            n = int(rng.integers(500, 50_000))
            got = call_learner(function, list(times), list(watts), n,
                               stub_hint=JOULES_STUB_HINT,
                               call=f"joules_per_thousand(<{len(times)} samples>, ..., {n})")
            where = f"{len(times)} samples over {times[-1]:.2f} s, {n} inferences (seed={seed})"
            if isinstance(got, bool) or not isinstance(got, numbers.Real) or not math.isfinite(
                    float(got)):
                raise CheckFailedError(f"for {where} you returned {got!r}: a number of joules "
                                       "was expected.", "return the number: `return ...`.")
            want = trapezoid(times, watts) / n * 1000
            if math.isclose(float(got), want, rel_tol=0.01):
                continue
            hint = next((h for v, h in _joules_suspects(times, watts, n, idle)
                         if math.isclose(float(got), v, rel_tol=0.01)), None)
            missing_watts = (want - float(got)) * n / 1000 / (times[-1] - times[0])
            if hint is None and 0.8 * idle <= missing_watts <= 1.2 * idle:
                hint = ("about the idle power is missing over the whole trace: the board draws "
                        "it the whole time, and the job pays for it (board boundary, idle "
                        "included).")
            hint = hint or JOULES_STUB_HINT
            raise CheckFailedError(f"for {where}: expected {want:.4g} J per thousand, got "
                                   f"{float(got):.4g}.", hint)
        return f"all 4 power traces right (seed={seed})."

    return run_check("joules_per_thousand", body, seed, show)


__all__ = ["check_joules_per_thousand", "check_percentile", "nearest_rank", "power_trace",
           "trapezoid"]
