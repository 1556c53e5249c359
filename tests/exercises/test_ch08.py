"""Chapter 08's checks (where a step stops being launch-bound, samples per second) against right
answers over several seeds, the stub, and the wrong-but-plausible answers learners write."""

import math

import numpy as np
import pytest

from gpulab import hardware
from gpulab.exercises import ch08
from gpulab.exercises.checks import FAILED, NOT_ATTEMPTED, PASSED
from gpulab.nn import cost


def assert_result(result, status, words):
    assert result.status == status, result
    assert words in result.message + result.hint, result


def parts(widths, gpu, copy_rate="host_pageable_bytes_per_s"):
    """(launches' time, compute, memory and copy time per sample) as a learner computes them:
    the batch is a NumPy array, copied from pageable memory."""
    spec = hardware.get_gpu(gpu)
    one, two = cost.step_kernels(widths, 1), cost.step_kernels(widths, 2)
    launches = len(one) * hardware.LAUNCH_OVERHEAD_S
    compute = (sum(k.flops for k in two) - sum(k.flops for k in one)) / spec.peak_flops_for("fp32")
    memory = ((sum(k.bytes_moved for k in two) - sum(k.bytes_moved for k in one))
              / spec.memory_bandwidth_bytes_per_s)
    copy = cost.step_transfer_bytes(widths, 1) / getattr(spec, copy_rate)
    return launches, compute, memory, copy


# --- exercise 1 --------------------------------------------------------------------------------


def napkin(widths, gpu):
    launches, compute, memory, copy = parts(widths, gpu)
    return math.ceil(launches / max(compute, memory, copy))


def with_constant_parts(widths, gpu):
    """Exact: every part is a + b * batch; the first batch where one exceeds the launches."""
    spec = hardware.get_gpu(gpu)
    est1, est2 = cost.estimate_step(widths, 1, spec), cost.estimate_step(widths, 2, spec)
    launches = est1.launch_s
    best = math.inf
    for part in ("memory_s", "compute_s"):
        a1 = sum(getattr(e, part) for _, e in est1.kernels)
        a2 = sum(getattr(e, part) for _, e in est2.kernels)
        slope = a2 - a1
        best = min(best, (launches - (a1 - slope)) / slope)
    best = min(best, launches / (est2.transfer_s - est1.transfer_s))
    return max(1, math.floor(best) + 1)


def by_search(widths, gpu):
    batch = 1
    while cost.estimate_step(widths, batch, gpu).bound() == "launch":
        batch += 1 if batch < 64 else batch // 64
    return batch


def one_launch(widths, gpu):
    _, compute, memory, copy = parts(widths, gpu)
    return hardware.LAUNCH_OVERHEAD_S / max(compute, memory, copy)


def microseconds(widths, gpu):
    launches, compute, memory, copy = parts(widths, gpu)
    return launches * 1e6 / max(compute, memory, copy)


def copy_at_link_peak(widths, gpu):
    launches, compute, memory, copy = parts(widths, gpu, "host_link_bytes_per_s")
    return launches / max(compute, memory, copy)


def compute_only(widths, gpu):
    launches, compute, _, _ = parts(widths, gpu)
    return launches / compute


def without_copy(widths, gpu):
    launches, compute, memory, _ = parts(widths, gpu)
    return launches / max(compute, memory)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
@pytest.mark.parametrize("function", [napkin, with_constant_parts, by_search])
def test_launch_bound_accepts_right_answers_over_seeds(function, seed):
    assert_result(ch08.check_launch_bound(function, seed=seed, show=False), PASSED,
                  "predictions within a factor")


def test_launch_bound_accepts_numpy_numbers_and_prints_them_plainly():
    result = ch08.check_launch_bound(lambda w, g: np.int64(napkin(w, g)), seed=1, show=False)
    assert result.passed
    wrong = ch08.check_launch_bound(lambda w, g: np.int64(256), seed=1, show=False)
    assert wrong.status == FAILED and "np.int64" not in str(wrong) and "256" in wrong.message


@pytest.mark.parametrize("function, words", [
    (one_launch, "one launch instead of the step's"),
    (microseconds, "microseconds"),
    (compute_only, "FLOPs alone"),
    (without_copy, "without the copy from the host"),
    (copy_at_link_peak, "the copy at the link's peak"),
    (lambda w, g: None, "forget `return`"),
    (lambda w, g: "1024", "must be a number"),
    (lambda w, g: [napkin(w, g)], "must be a number"),
    (lambda w, g: -napkin(w, g), "positive, finite"),
    (lambda w, g: cost.estimate_step(w, napkin(w, g), g).samples_per_s, "samples per second"),
    (lambda w, g: cost.estimate_step(w, 1, g).launch_s, "a time"),
])
def test_launch_bound_diagnoses(function, words):
    assert_result(ch08.check_launch_bound(function, seed=5, show=False), FAILED, words)


def test_the_model_crossover_is_where_the_bound_changes():
    for widths, gpu in (([64, 128, 10], "H100-SXM"), ([32, 200, 10], "T4")):
        batch = ch08.model_crossover(widths, gpu)
        assert cost.estimate_step(widths, batch, gpu).bound() != "launch"
        assert batch == 1 or cost.estimate_step(widths, batch - 1, gpu).bound() == "launch"
    assert ch08.model_crossover([64, 128, 10], "H100-SXM") == 11_012  # chapter 08's number


def test_numbers_are_printed_plainly():
    assert ch08.plain(np.int64(256)) == "256"
    assert ch08.plain(15793.0) == "15,793"
    assert ch08.plain(np.float32(0.125)) == "0.125"
    assert ch08.plain(3.2e-9) == "3.2e-09"


# --- exercise 2 --------------------------------------------------------------------------------


def throughput(widths, batch, gpu):
    launches, compute, memory, copy = parts(widths, gpu)
    return batch / (max(launches, batch * max(compute, memory)) + batch * copy)


def throughput_added(widths, batch, gpu):
    launches, compute, memory, copy = parts(widths, gpu)
    return batch / (launches + batch * (max(compute, memory) + copy))


def throughput_no_launches(widths, batch, gpu):
    _, compute, memory, copy = parts(widths, gpu)
    return 1 / (max(compute, memory) + copy)


def throughput_no_copy(widths, batch, gpu):
    launches, compute, memory, _ = parts(widths, gpu)
    return batch / max(launches, batch * max(compute, memory))


def throughput_copy_at_link_peak(widths, batch, gpu):
    launches, compute, memory, copy = parts(widths, gpu, "host_link_bytes_per_s")
    return batch / (max(launches, batch * max(compute, memory)) + batch * copy)


def throughput_max(widths, batch, gpu):
    launches, compute, memory, copy = parts(widths, gpu)
    return batch / max(launches, batch * max(compute, memory), batch * copy)


def step_time(widths, batch, gpu):
    return batch / throughput(widths, batch, gpu)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("function", [
    throughput,
    lambda w, b, g: cost.estimate_step(w, b, g).samples_per_s,
    # per sample: the launches' share or the work, whichever is larger, then the copy
    lambda w, b, g: 1 / (max(parts(w, g)[0] / b, max(parts(w, g)[1:3])) + parts(w, g)[3]),
])
def test_throughput_accepts_right_answers_over_seeds(function, seed):
    assert_result(ch08.check_throughput(function, seed=seed, show=False), PASSED,
                  "predictions within a factor")


@pytest.mark.parametrize("function, words", [
    (throughput_no_launches, "the launches left out"),
    (throughput_no_copy, "the copy from the host left out"),
    (throughput_copy_at_link_peak, "the copy at the link's peak"),
    (throughput_max, "the copy overlapping"),
    (step_time, "the step's time in seconds"),
    (lambda w, b, g: throughput(w, b, g) / 1e3, "samples per millisecond"),
    (lambda w, b, g: np.array([throughput(w, b, g)] * 2), "must be a number"),
    (lambda w, b, g: math.nan, "positive, finite"),
])
def test_throughput_diagnoses(function, words):
    assert_result(ch08.check_throughput(function, seed=6, show=False), FAILED, words)


def test_throughput_names_launches_added_to_work_where_it_matters():
    # On networks whose per-sample copy outweighs their kernels' work, the launches overlap a
    # small share of the step and adding them is within the tolerance; seed 3 draws one whose
    # kernels' work matters, and there the mistake is named.
    assert_result(ch08.check_throughput(throughput_added, seed=3, show=False), FAILED,
                  "the launches and the kernels' work added")


@pytest.mark.parametrize("check", [ch08.check_launch_bound, ch08.check_throughput])
def test_stubs_are_not_attempted(check):
    def stub(*args):
        raise NotImplementedError()

    assert check(stub, show=False).status == NOT_ATTEMPTED
