"""Chapter 08's checks (where a step stops being launch-bound, samples per second) against right
answers over several seeds, the stub, and the wrong-but-plausible answers learners write."""

import math

import numpy as np
import pytest

from gpulab import hardware
from gpulab.exercises import ch08
from gpulab.exercises.results import FAILED, NOT_ATTEMPTED, PASSED
from gpulab.hardware import H100_SXM
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


def by_own_search(widths, gpu):
    """Right, written differently: double, then bisect, until the largest part catches up."""
    launches, compute, memory, copy = parts(widths, gpu)
    low, high = 0, 1
    while high * max(compute, memory, copy) < launches:
        low, high = high, 2 * high
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if middle * max(compute, memory, copy) < launches else (low,
                                                                                        middle)
    return high


def with_step_flops(widths, gpu):
    """Right, written differently: the FLOPs from cost.step_flops, the copy rate from
    hardware.link_bytes_per_s, the per-sample parts from a batch of 100."""
    spec = hardware.get_gpu(gpu)
    kernels = cost.step_kernels(widths, 100)
    compute = (cost.step_flops(widths, 100) - cost.step_flops(widths, 1)) / 99
    memory = (sum(k.bytes_moved for k in kernels)
              - sum(k.bytes_moved for k in cost.step_kernels(widths, 1))) / 99
    copy = cost.step_transfer_bytes(widths, 1) / hardware.link_bytes_per_s(gpu, "pageable")
    per_sample = max(compute / spec.peak_flops_for("fp32"),
                     memory / spec.memory_bandwidth_bytes_per_s, copy)
    return len(kernels) * hardware.LAUNCH_OVERHEAD_S / per_sample


def with_constant_parts(widths, gpu):
    """The model's own estimate, parts fitted as a + b * batch: it calls the model."""
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
    """Asks the model itself at each batch."""
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


def copy_at_pinned_rate(widths, gpu):
    launches, compute, memory, copy = parts(widths, gpu, "host_pinned_bytes_per_s")
    return launches / max(compute, memory, copy)


def compute_only(widths, gpu):
    launches, compute, _, _ = parts(widths, gpu)
    return launches / compute


def without_copy(widths, gpu):
    launches, compute, memory, _ = parts(widths, gpu)
    return launches / max(compute, memory)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
@pytest.mark.parametrize("function", [
    napkin, by_own_search, with_step_flops,
    # the last batch that is still launch-bound: one less, within the tolerance
    lambda w, g: max(napkin(w, g) - 1, 1),
])
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
    (copy_at_pinned_rate, "the copy at the pinned rate"),
    (lambda w, g: None, "forget `return`"),
    (lambda w, g: "1024", "must be a number"),
    (lambda w, g: [napkin(w, g)], "must be a number"),
    (lambda w, g: -napkin(w, g), "positive, finite"),
    (lambda w, g: throughput(w, napkin(w, g), g), "samples per second"),
    (lambda w, g: parts(w, g)[0], "a time"),
    (lambda w, g: parts(w, g)[0] / min(parts(w, g)[1:]), "more than a factor 1.3 away"),
])
def test_launch_bound_diagnoses(function, words):
    assert_result(ch08.check_launch_bound(function, seed=5, show=False), FAILED, words)


def model_samples_per_second(widths, batch, gpu):
    return cost.estimate_step(widths, batch, gpu).samples_per_s


def model_through_the_package(widths, batch, gpu):
    import gpulab
    return gpulab.nn.cost.estimate_step(widths, batch, gpu).samples_per_s


def per_sample_from_the_model(widths, batch, gpu):
    from gpulab.nn.cost import per_sample_seconds
    part = per_sample_seconds(widths, gpu)
    return batch / (max(part["launch"], batch * max(part["compute"], part["memory"]))
                    + batch * part["transfer"])


def kernels_timed_by_the_roofline(widths, batch, gpu):
    times = [hardware.estimate_time(gpu, k.flops, k.bytes_moved).gpu_s
             for k in cost.step_kernels(widths, batch)]
    return batch / sum(times)


@pytest.mark.parametrize("function, used", [
    (with_constant_parts, "gpulab.nn.cost.estimate_step"),
    (by_search, "gpulab.nn.cost.estimate_step"),
])
def test_launch_bound_refuses_an_answer_that_asks_the_model(function, used):
    assert_result(ch08.check_launch_bound(function, seed=1, show=False), FAILED, used)


@pytest.mark.parametrize("function, used", [
    (model_samples_per_second, "gpulab.nn.cost.estimate_step"),
    (model_through_the_package, "gpulab.nn.cost.estimate_step"),
    (per_sample_from_the_model, "gpulab.nn.cost.per_sample_seconds"),
    (kernels_timed_by_the_roofline, "gpulab.hardware.estimate_time"),
])
def test_throughput_refuses_an_answer_that_asks_the_model(function, used):
    result = ch08.check_throughput(function, seed=1, show=False)
    assert_result(result, FAILED, used)
    assert "comparing gpulab with itself" in result.message


def test_the_model_crossover_is_where_the_bound_changes():
    for widths, gpu in (([64, 128, 10], H100_SXM.key), ([32, 200, 10], "T4")):
        batch = ch08.model_crossover(widths, gpu)
        assert cost.estimate_step(widths, batch, gpu).bound() != "launch"
        assert batch == 1 or cost.estimate_step(widths, batch - 1, gpu).bound() == "launch"
    assert ch08.model_crossover([64, 128, 10], H100_SXM.key) == 11_012  # chapter 08's number
    # The chapter passes the GPU's spec, not its key; both give the same answer.
    assert ch08.model_crossover([64, 128, 10], hardware.get_gpu(hardware.COURSE_GPU)) == \
        ch08.model_crossover([64, 128, 10], hardware.COURSE_GPU)


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


def throughput_copy_at_pinned_rate(widths, batch, gpu):
    launches, compute, memory, copy = parts(widths, gpu, "host_pinned_bytes_per_s")
    return batch / (max(launches, batch * max(compute, memory)) + batch * copy)


def throughput_max(widths, batch, gpu):
    launches, compute, memory, copy = parts(widths, gpu)
    return batch / max(launches, batch * max(compute, memory), batch * copy)


def throughput_compute_only(widths, batch, gpu):
    launches, compute, _, copy = parts(widths, gpu)
    return batch / (max(launches, batch * compute) + batch * copy)


def throughput_memory_only(widths, batch, gpu):
    launches, _, memory, copy = parts(widths, gpu)
    return batch / (max(launches, batch * memory) + batch * copy)


def throughput_one_sample_copied(widths, batch, gpu):
    launches, compute, memory, copy = parts(widths, gpu)
    return batch / (max(launches, batch * max(compute, memory)) + copy)


def step_time(widths, batch, gpu):
    return batch / throughput(widths, batch, gpu)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("function", [
    throughput,
    # per sample: the launches' share or the work, whichever is larger, then the copy
    lambda w, b, g: 1 / (max(parts(w, g)[0] / b, max(parts(w, g)[1:3])) + parts(w, g)[3]),
    # the whole batch's copy from cost.step_transfer_bytes(widths, batch)
    lambda w, b, g: b / (max(parts(w, g)[0], b * max(parts(w, g)[1:3]))
                         + cost.step_transfer_bytes(w, b) / hardware.get_gpu(g)
                         .host_pageable_bytes_per_s),
])
def test_throughput_accepts_right_answers_over_seeds(function, seed):
    assert_result(ch08.check_throughput(function, seed=seed, show=False), PASSED,
                  "predictions within a factor")


@pytest.mark.parametrize("function, words", [
    (throughput_no_launches, "the launches left out"),
    (throughput_no_copy, "the copy from the host left out"),
    # one sample's copy per step: next to the launches it is nothing, so the copy left out
    (throughput_one_sample_copied, "the copy's time grows with the batch"),
    (throughput_copy_at_link_peak, "the copy at the link's peak"),
    (throughput_copy_at_pinned_rate, "the copy at the pinned rate"),
    (throughput_max, "the copy overlapping"),
    (step_time, "the step's time in seconds"),
    (lambda w, b, g: throughput(w, b, g) / 1e3, "samples per millisecond"),
    (lambda w, b, g: np.array([throughput(w, b, g)] * 2), "must be a number"),
    (lambda w, b, g: math.nan, "positive, finite"),
])
def test_throughput_diagnoses(function, words):
    assert_result(ch08.check_throughput(function, seed=6, show=False), FAILED, words)


def forward_flops_only(widths, gpu):
    """The forward pass's FLOPs alone: a learner who counts only the kernels of phase
    "forward"."""
    spec = hardware.get_gpu(gpu)
    one, two = ([k for k in cost.step_kernels(widths, b) if k.phase == "forward"] for b in (1, 2))
    launches, _, memory, copy = parts(widths, gpu)
    compute = (sum(k.flops for k in two) - sum(k.flops for k in one)) / spec.peak_flops_for("fp32")
    return launches, compute, memory, copy


def forward_pass_only(widths, gpu):
    """The forward pass alone, its FLOPs and its bytes (round 16)."""
    spec = hardware.get_gpu(gpu)
    one, two = ([k for k in cost.step_kernels(widths, b) if k.phase == "forward"] for b in (1, 2))
    launches, _, _, copy = parts(widths, gpu)
    compute = (sum(k.flops for k in two) - sum(k.flops for k in one)) / spec.peak_flops_for("fp32")
    memory = ((sum(k.bytes_moved for k in two) - sum(k.bytes_moved for k in one))
              / spec.memory_bandwidth_bytes_per_s)
    return launches, compute, memory, copy


def bf16_peak_everywhere(widths, gpu):
    """The bf16 peak asked of every GPU, the T4 (which has none) too."""
    spec = hardware.get_gpu(gpu)
    launches, compute, memory, copy = parts(widths, gpu)
    return (launches, compute * spec.peak_flops_for("fp32") / spec.peak_flops_for("bf16"),
            memory, copy)


def bf16_peak(widths, gpu):
    """The parts with the bf16 peak where the GPU has one (the learner's code falls back to fp32
    where it does not)."""
    spec = hardware.get_gpu(gpu)
    launches, compute, memory, copy = parts(widths, gpu)
    try:
        compute *= spec.peak_flops_for("fp32") / spec.peak_flops_for("bf16")
    except (KeyError, ValueError):
        pass
    return launches, compute, memory, copy


def crossover_from(parts_of):
    def first_batch(widths, gpu):
        launches, compute, memory, copy = parts_of(widths, gpu)
        return math.ceil(launches / max(compute, memory, copy))
    return first_batch


def throughput_from(parts_of):
    def samples_per_second(widths, batch, gpu):
        launches, compute, memory, copy = parts_of(widths, gpu)
        return batch / (max(launches, batch * max(compute, memory)) + batch * copy)
    return samples_per_second


def throughput_all_added(widths, batch, gpu):
    launches, compute, memory, copy = parts(widths, gpu)
    return batch / (launches + batch * (compute + memory + copy))


def throughput_compute_plus_memory(widths, batch, gpu):
    # within the tolerance of the model on most networks (the model adds each kernel's larger
    # part, which lands near compute + memory): told by its formula, not by its numbers
    launches, compute, memory, copy = parts(widths, gpu)
    return batch / (max(launches, batch * (compute + memory)) + batch * copy)


SEEDS = [0, 3, 7, 11, 19]


def without_memory(widths, gpu):
    launches, compute, _, copy = parts(widths, gpu)
    return launches, compute, 0.0, copy


def memory_bandwidth_in_bits(widths, gpu):
    launches, compute, memory, copy = parts(widths, gpu)
    return launches, compute, memory / 8, copy


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("function, words", [
    (crossover_from(without_memory), "device memory's traffic left out"),
    (crossover_from(memory_bandwidth_in_bits), "the memory bandwidth taken in bits"),
    (crossover_from(forward_flops_only), "the forward pass's FLOPs alone"),
    (crossover_from(forward_pass_only), "the forward pass alone (its FLOPs and its bytes)"),
    (crossover_from(bf16_peak), "a tensor-core peak (bf16 or tf32) for an fp32 model"),
    (lambda w, g: parts(w, g)[0] / (parts(w, g)[1] + parts(w, g)[2] + parts(w, g)[3]),
     "the sum of all three parts instead of the largest"),
    (lambda w, g: parts(w, g)[0] / max(parts(w, g)[1] + parts(w, g)[2], parts(w, g)[3]),
     "compute + memory instead of the larger"),
])
def test_launch_bound_names_the_issue_s_mistakes_on_every_seed(function, words, seed):
    # Each is drawn a case where the napkin agrees with the model and the mistake is clearly off
    # both, told apart from the mistakes listed before it (the bf16 peak from the copy alone).
    assert_result(ch08.check_launch_bound(function, seed=seed, show=False), FAILED, words)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("function, words", [
    (throughput_from(forward_flops_only), "the forward pass's FLOPs alone"),
    (throughput_from(forward_pass_only), "the forward pass alone (its FLOPs and its bytes)"),
    (throughput_from(bf16_peak), "a tensor-core peak (bf16 or tf32) for an fp32 model"),
    (throughput_added, "the launches and the kernels' work added"),
    (throughput_all_added, "every part added"),
    (throughput_max, "the copy overlapping"),
    (throughput_compute_plus_memory, "what compute + memory instead of the larger of the two "
                                     "gives, to rounding"),
    # device memory alone was named the bf16 peak where no case told the two apart
    (throughput_compute_only, "what the FLOPs alone (compute) gives"),
    (throughput_memory_only, "what device memory alone gives"),
])
def test_throughput_names_the_issue_s_mistakes_on_every_seed(function, words, seed):
    assert_result(ch08.check_throughput(function, seed=seed, show=False), FAILED, words)


@pytest.mark.parametrize("check, function", [
    (ch08.check_launch_bound, crossover_from(bf16_peak_everywhere)),
    (ch08.check_throughput, throughput_from(bf16_peak_everywhere)),
])
def test_a_bf16_peak_asked_of_a_gpu_without_one_is_told_the_model_is_fp32(check, function):
    for seed in SEEDS:
        result = check(function, seed=seed, show=False)
        assert result.status == FAILED, result
        if "has no 'bf16' rate" in result.message:  # a T4 drawn: the error, and what it means
            assert "asked for the bf16 peak, a tensor-core rate" in result.message, result
            assert "the model trains in float32" in result.hint, result
            break
    else:
        raise AssertionError("no seed drew the T4")


@pytest.mark.parametrize("seed", SEEDS)
def test_the_napkin_is_right_even_where_the_model_adds_each_kernels_larger_part(seed):
    # The drawn wide networks include ones where the napkin is over 1.3 times off the model at
    # some batch (kernels of both kinds matter); the notebook's formula is still right there.
    assert_result(ch08.check_throughput(throughput, seed=seed, show=False), PASSED,
                  "or the napkin")
    assert_result(ch08.check_launch_bound(napkin, seed=seed, show=False), PASSED, "or the napkin")


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


# --- exercise 3: one launch for any batch (a kernel) --------------------------------------------

from numba import cuda  # noqa: E402


@cuda.jit
def evaluate_grid_stride(logits, labels, losses, correct):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for s in range(start, logits.shape[0], stride):
        m = logits[s, 0]
        predicted = 0
        for c in range(1, logits.shape[1]):
            if logits[s, c] > m:
                m = logits[s, c]
                predicted = c
        total = 0.0
        for c in range(logits.shape[1]):
            total += math.exp(logits[s, c] - m)
        losses[s] = math.log(total) + m - logits[s, labels[s]]
        correct[s] = 1 if predicted == labels[s] else 0


@cuda.jit
def evaluate_while_online(logits, labels, losses, correct):
    """Written differently: a while loop, the indices by hand, a one-pass (online) log-sum-exp
    that rescales the running sum whenever the max grows."""
    s = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    step = cuda.blockDim.x * cuda.gridDim.x
    n, classes = logits.shape
    while s < n:
        m = logits[s, 0]
        total = 1.0
        best = 0
        for c in range(1, classes):
            z = logits[s, c]
            if z > m:
                total = total * math.exp(m - z) + 1.0
                m = z
                best = c
            else:
                total += math.exp(z - m)
        label = labels[s]
        losses[s] = m + math.log(total) - logits[s, label]
        correct[s] = best == label
        s += step


@cuda.jit
def evaluate_rounds_guarded(logits, labels, losses, correct):
    """Written differently: a fixed number of rounds, each guarded; the loss from the log of
    the label's probability's denominator."""
    g = cuda.grid(1)
    threads = cuda.gridsize(1)
    rounds = (logits.shape[0] + threads - 1) // threads
    for r in range(rounds):
        s = g + r * threads
        if s < logits.shape[0]:
            top = 0
            for c in range(logits.shape[1]):
                if logits[s, c] > logits[s, top]:
                    top = c
            m = logits[s, top]
            total = 0.0
            for c in range(logits.shape[1]):
                total += math.exp(logits[s, c] - m)
            losses[s] = -(logits[s, labels[s]] - m - math.log(total))
            correct[s] = 1 if top == labels[s] else 0


@cuda.jit
def evaluate_one_per_thread(logits, labels, losses, correct):
    s = cuda.grid(1)
    if s < logits.shape[0]:
        m = logits[s, 0]
        predicted = 0
        for c in range(1, logits.shape[1]):
            if logits[s, c] > m:
                m = logits[s, c]
                predicted = c
        total = 0.0
        for c in range(logits.shape[1]):
            total += math.exp(logits[s, c] - m)
        losses[s] = math.log(total) + m - logits[s, labels[s]]
        correct[s] = 1 if predicted == labels[s] else 0


def _evaluation(step: str = "cuda.gridsize(1)", start: str = "cuda.grid(1)",
                end: str = "logits.shape[0]", classes: str = "logits.shape[1]",
                loss: str = "math.log(total) + m - logits[s, labels[s]]",
                right: str = "1 if predicted == labels[s] else 0", shift: str = "m"):
    """A wrong kernel made from the right one with one part changed (built as source, so each
    mistake is one line of difference)."""
    source = f'''
@cuda.jit
def evaluate(logits, labels, losses, correct):
    start = {start}
    stride = {step}
    for s in range(start, {end}, stride):
        m = logits[s, 0]
        predicted = 0
        for c in range(1, {classes}):
            if logits[s, c] > m:
                m = logits[s, c]
                predicted = c
        total = 0.0
        for c in range({classes}):
            total += math.exp(logits[s, c] - {shift})
        losses[s] = {loss}
        correct[s] = {right}
'''
    import linecache

    name = f"<ch08 wrong kernel {abs(hash(source))}>"
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    scope = {"cuda": cuda, "math": math}
    exec(compile(source, name, "exec"), scope)
    return scope["evaluate"]


@cuda.jit
def evaluate_chunks(logits, labels, losses, correct):
    g = cuda.grid(1)
    threads = cuda.gridsize(1)
    n = logits.shape[0]
    chunk = (n + threads - 1) // threads
    for s in range(g * chunk, min(g * chunk + chunk, n)):
        m = logits[s, 0]
        predicted = 0
        for c in range(1, logits.shape[1]):
            if logits[s, c] > m:
                m = logits[s, c]
                predicted = c
        total = 0.0
        for c in range(logits.shape[1]):
            total += math.exp(logits[s, c] - m)
        losses[s] = math.log(total) + m - logits[s, labels[s]]
        correct[s] = 1 if predicted == labels[s] else 0


@cuda.jit
def evaluate_one_thread(logits, labels, losses, correct):
    if cuda.grid(1) == 0:
        for s in range(logits.shape[0]):
            m = logits[s, 0]
            predicted = 0
            for c in range(1, logits.shape[1]):
                if logits[s, c] > m:
                    m = logits[s, c]
                    predicted = c
            total = 0.0
            for c in range(logits.shape[1]):
                total += math.exp(logits[s, c] - m)
            losses[s] = math.log(total) + m - logits[s, labels[s]]
            correct[s] = 1 if predicted == labels[s] else 0


@cuda.jit
def evaluate_no_guard(logits, labels, losses, correct):
    g = cuda.grid(1)
    threads = cuda.gridsize(1)
    for r in range((logits.shape[0] + threads - 1) // threads):
        s = g + r * threads
        m = logits[s, 0]
        predicted = 0
        for c in range(1, logits.shape[1]):
            if logits[s, c] > m:
                m = logits[s, c]
                predicted = c
        total = 0.0
        for c in range(logits.shape[1]):
            total += math.exp(logits[s, c] - m)
        losses[s] = math.log(total) + m - logits[s, labels[s]]
        correct[s] = 1 if predicted == labels[s] else 0


@cuda.jit
def evaluate_reads_first_sample(logits, labels, losses, correct):
    i = cuda.grid(1)
    for s in range(i, logits.shape[0], cuda.gridsize(1)):
        m = logits[i, 0]
        predicted = 0
        for c in range(1, logits.shape[1]):
            if logits[i, c] > m:
                m = logits[i, c]
                predicted = c
        total = 0.0
        for c in range(logits.shape[1]):
            total += math.exp(logits[i, c] - m)
        losses[s] = math.log(total) + m - logits[i, labels[i]]
        correct[s] = 1 if predicted == labels[i] else 0


@cuda.jit
def evaluate_losses_only(logits, labels, losses, correct):
    for s in range(cuda.grid(1), logits.shape[0], cuda.gridsize(1)):
        m = logits[s, 0]
        for c in range(1, logits.shape[1]):
            m = max(m, logits[s, c])
        total = 0.0
        for c in range(logits.shape[1]):
            total += math.exp(logits[s, c] - m)
        losses[s] = math.log(total) + m - logits[s, labels[s]]


WRONG_KERNELS = {
    "one per thread": (evaluate_one_per_thread,
                       "one element per thread: samples past the grid's first"),
    "stride of the block": (_evaluation(step="cuda.blockDim.x"), "`cuda.blockDim.x`"),
    "stride of the blocks' count": (_evaluation(step="cuda.gridDim.x"), "number of blocks"),
    "stride twice the grid": (_evaluation(step="2 * cuda.gridsize(1)"), "more than the grid's"),
    "every block from threadIdx": (_evaluation(start="cuda.threadIdx.x"),
                                   "start at the same sample"),
    # no loop, so the trace has no step: the outputs say it, not "steps by None"
    "threadIdx, no loop": (_evaluation(start="cuda.threadIdx.x",
                                       end="min(cuda.threadIdx.x + 1, logits.shape[0])"),
                           "as if every block started at the same sample"),
    "hard-coded batch": (_evaluation(end="1000"), "uses a fixed number"),
    "hard-coded classes": (_evaluation(classes="10"), "uses a fixed number"),
    "hard-coded block": (_evaluation(start="cuda.blockIdx.x * 64 + cuda.threadIdx.x",
                                     step="64 * cuda.gridDim.x"), "hard-codes the block size"),
    "loop to the class count": (_evaluation(end="logits.shape[1]"), "number of classes"),
    "a run per thread": (evaluate_chunks, "run of consecutive samples"),
    # each sample taken once, but a warp's threads start gridDim.x samples apart
    "start scattered across the grid": (
        _evaluation(start="cuda.threadIdx.x * cuda.gridDim.x + cuda.blockIdx.x"),
        "threads side by side start"),
    "one thread does it all": (evaluate_one_thread, "handled all"),
    "no guard": (evaluate_no_guard, "missing guard"),
    "first sample read again": (evaluate_reads_first_sample, "first sample's row again"),
    "unstable exp": (_evaluation(shift="0.0"), "subtract the row's largest logit before exp"),
    "m not added back": (_evaluation(loss="math.log(total) - logits[s, labels[s]]"),
                         "not added back"),
    "sign reversed": (_evaluation(loss="-(math.log(total) + m - logits[s, labels[s]])"),
                      "wrong sign"),
    "loss of class 0": (_evaluation(loss="math.log(total) + m - logits[s, 0]"), "class 0"),
    "correct as the class": (_evaluation(right="predicted"), "predicted class"),
    "correct inverted": (_evaluation(right="0 if predicted == labels[s] else 1"),
                         "wrong and 0 where it is right"),
    "correct never written": (evaluate_losses_only, "correct still holds"),
    # a step that fits the check's 2 full-size blocks (or a block of 32) is not the trace's grid
    "stride of two blocks": (_evaluation(step="2 * cuda.blockDim.x"), "redo each other's"),
    "stride of 32 per block": (_evaluation(step="cuda.gridDim.x * 32"), "redo each other's"),
    "loop ends one early": (_evaluation(end="logits.shape[0] - 1"), "ends one sample early"),
    # an IndexError on the classes' axis is not a missing guard
    "row and column swapped": (_evaluation(loss="math.log(total) + m - logits[labels[s], s]"),
                               "the row and the column of logits swapped"),
    "class loop to the batch": (_evaluation(classes="logits.shape[0]"),
                                "the batch's size, was used where a class's belongs"),
    "correct only when right": (_evaluation(right="1 if predicted == labels[s] else correct[s]"),
                                "no 0 was written there"),
}


@cuda.jit
def evaluate_sum_in_losses(logits, labels, losses, correct):  # right: the sum kept in losses[s]
    start = cuda.grid(1)
    for s in range(start, logits.shape[0], cuda.gridsize(1)):
        m = logits[s, 0]
        best = 0
        for c in range(1, logits.shape[1]):
            if logits[s, c] > m:
                m = logits[s, c]
                best = c
        losses[s] = 0.0
        for c in range(logits.shape[1]):
            losses[s] += math.exp(logits[s, c] - m)
        losses[s] = math.log(losses[s]) + m - logits[s, labels[s]]
        correct[s] = 1 if best == labels[s] else 0


@cuda.jit(device=True)
def row_argmax(logits, s):
    best = 0
    for c in range(1, logits.shape[1]):
        if logits[s, c] > logits[s, best]:
            best = c
    return best


@cuda.jit
def evaluate_by_device_functions(logits, labels, losses, correct):
    """Right, written differently: the argmax in a device function, the loss as log(total) -
    (z[label] - m)."""
    for s in range(cuda.grid(1), logits.shape[0], cuda.gridsize(1)):
        best = row_argmax(logits, s)
        m = logits[s, best]
        total = 0.0
        for c in range(logits.shape[1]):
            total += math.exp(logits[s, c] - m)
        losses[s] = math.log(total) - (logits[s, labels[s]] - m)
        correct[s] = int(best == labels[s])


@cuda.jit
def evaluate_loss_from_the_probability(logits, labels, losses, correct):
    """Wrong: the loss as -log of the label's probability, which underflows to 0 when the
    label's logit is far below the row's largest (a confidently wrong prediction)."""
    for s in range(cuda.grid(1), logits.shape[0], cuda.gridsize(1)):
        best = row_argmax(logits, s)
        m = logits[s, best]
        total = 0.0
        for c in range(logits.shape[1]):
            total += math.exp(logits[s, c] - m)
        losses[s] = -math.log(math.exp(logits[s, labels[s]] - m) / total)
        correct[s] = int(best == labels[s])


@cuda.jit
def evaluate_shifted_by_the_label(logits, labels, losses, correct):
    """Wrong: the log-sum-exp shifted by the label's logit, not the row's largest."""
    for s in range(cuda.grid(1), logits.shape[0], cuda.gridsize(1)):
        best = row_argmax(logits, s)
        z = logits[s, labels[s]]
        total = 0.0
        for c in range(logits.shape[1]):
            total += math.exp(logits[s, c] - z)
        losses[s] = math.log(total)
        correct[s] = int(best == labels[s])


@cuda.jit
def evaluate_correct_by_thread_0(logits, labels, losses, correct):
    """Wrong: the losses by a grid-stride loop, `correct` by thread 0 alone."""
    for s in range(cuda.grid(1), logits.shape[0], cuda.gridsize(1)):
        m = logits[s, row_argmax(logits, s)]
        total = 0.0
        for c in range(logits.shape[1]):
            total += math.exp(logits[s, c] - m)
        losses[s] = math.log(total) + m - logits[s, labels[s]]
    if cuda.grid(1) == 0:
        for s in range(logits.shape[0]):
            correct[s] = int(row_argmax(logits, s) == labels[s])


@cuda.jit
def evaluate_shifted_by_the_mean(logits, labels, losses, correct):
    """Wrong: the log-sum-exp shifted by the row's mean logit, not its largest."""
    for s in range(cuda.grid(1), logits.shape[0], cuda.gridsize(1)):
        best = row_argmax(logits, s)
        mean = 0.0
        for c in range(logits.shape[1]):
            mean += logits[s, c]
        mean /= logits.shape[1]
        total = 0.0
        for c in range(logits.shape[1]):
            total += math.exp(logits[s, c] - mean)
        losses[s] = math.log(total) + mean - logits[s, labels[s]]
        correct[s] = int(best == labels[s])


@pytest.mark.parametrize("kernel, words", [
    (evaluate_loss_from_the_probability, "never as the log of a probability"),
    (evaluate_shifted_by_the_label, "never as the log of a probability"),
    (evaluate_shifted_by_the_mean, "exp of the raw logits overflowed"),
    (evaluate_correct_by_thread_0, "did nothing"),
])
@pytest.mark.parametrize("seed", [0, 1, 7])
def test_evaluation_loss_forms_and_correct_s_method(kernel, words, seed):
    result = ch08.check_evaluate_batch(kernel, seed=seed, show=False)
    assert result.status == "failed" and words in result.message, result


@pytest.mark.parametrize("kernel", [evaluate_grid_stride, evaluate_while_online,
                                    evaluate_rounds_guarded, evaluate_sum_in_losses,
                                    evaluate_by_device_functions])
@pytest.mark.parametrize("seed", [0, 1])
def test_right_evaluation_kernels_pass(kernel, seed):
    result = ch08.check_evaluate_batch(kernel, seed=seed, show=False)
    assert result.status == PASSED, result


@pytest.mark.parametrize("seed", [0, 1])
def test_a_grid_stride_walked_from_the_end_is_coalesced_and_passes(seed):
    kernel = _evaluation(start="logits.shape[0] - 1 - cuda.grid(1)", end="-1",
                         step="-cuda.gridsize(1)")
    result = ch08.check_evaluate_batch(kernel, seed=seed, show=False)
    assert result.status == PASSED, result


@pytest.mark.parametrize("name", list(WRONG_KERNELS))
def test_wrong_evaluation_kernels_fail_and_say_why(name):
    kernel, words = WRONG_KERNELS[name]
    result = ch08.check_evaluate_batch(kernel, seed=3, show=False)
    assert result.status == FAILED, result
    assert words in result.message + " " + result.hint, (result.message, result.hint)


def test_the_evaluation_spec_lists_the_crash_and_block_size_mistakes_in_the_order_tried():
    table = ch08.EVALUATE.mistake_table()
    # the method is traced before any launch, so its mistakes are tried first
    assert ch08.EVALUATE.mistakes == (ch08.EVALUATE_METHOD_MISTAKES
                                      + ch08.EVALUATE_CRASH_MISTAKES + ch08.EVALUATE_MISTAKES
                                      + ch08.EVALUATE_BLOCK_MISTAKES)
    for mistake in ch08.EVALUATE_CRASH_MISTAKES + ch08.EVALUATE_BLOCK_MISTAKES:
        assert mistake in ch08.EVALUATE.mistakes and mistake.did in table
    assert "missing guard" in table and "right under one block size only" in table
    assert "unstable exp" not in ch08.EVALUATE.also


def test_a_failure_under_the_other_block_size_only_is_said_once_with_its_case():
    from gpulab.exercises.mistakes import diagnose
    from gpulab.exercises.results import CheckFailedError

    inner = CheckFailedError("3 of 40 losses are wrong (11 classes, n=40, seed=3).", "its hint")
    failure = diagnose(ch08.EVALUATE_BLOCK_MISTAKES, ch08.OneBlockSizeOnly(128, 32, inner))
    assert failure.message == ("your kernel is right with 128 threads per block but not with 32. "
                               "With 32: 3 of 40 losses are wrong (11 classes, n=40, seed=3).")
    assert failure.hint == "its hint"


def test_gpulab_own_evaluation_kernel_is_refused_and_the_stub_not_attempted():
    from gpulab.kernels import evaluate

    assert "gpulab's own" in ch08.check_evaluate_batch(evaluate.evaluate_batch,
                                                       show=False).message

    @cuda.jit
    def stub(logits, labels, losses, correct):
        raise NotImplementedError()

    assert ch08.check_evaluate_batch(stub, show=False).status == NOT_ATTEMPTED


def test_the_chapter_runs_the_learners_kernel_once_it_passed(capsys):
    from gpulab.kernels import evaluate

    @cuda.jit
    def mine(logits, labels, losses, correct):
        for s in range(cuda.grid(1), logits.shape[0], cuda.gridsize(1)):
            m = logits[s, 0]
            predicted = 0
            for c in range(1, logits.shape[1]):
                if logits[s, c] > m:
                    m = logits[s, c]
                    predicted = c
            total = 0.0
            for c in range(logits.shape[1]):
                total += math.exp(logits[s, c] - m)
            losses[s] = math.log(total) + m - logits[s, labels[s]]
            correct[s] = 1 if predicted == labels[s] else 0

    kernel, whose = ch08.kernel_to_use(mine)
    assert kernel is evaluate.evaluate_batch and whose == "gpulab's evaluate_batch"
    assert "has not passed" in capsys.readouterr().out
    assert ch08.check_evaluate_batch(mine, seed=0, show=False).passed
    kernel, whose = ch08.kernel_to_use(mine)
    assert kernel is mine and whose == "your mine"


def test_the_sweep_and_the_experiment_run_on_an_evaluation_kernel():
    from gpulab.experiments.batch_size import (
        BatchSizeExperiment,
        evaluation_sweep,
        evaluation_sweep_table,
    )

    sweep = evaluation_sweep(evaluate_while_online, batches=(8, 100), gpu=H100_SXM.key,
                             repeats=1, model_only=(1 << 22,))
    assert sweep["batches"] == [8, 100, 1 << 22] and len(sweep["measured_s"]) == 2
    assert sweep["modelled_s"][0] == sweep["modelled_s"][1]  # launch-bound: the same launch
    assert sweep["bounds"][-1] == "memory" and sweep["largest_difference"] < 1e-4
    table = evaluation_sweep_table(sweep)
    assert "simulator" in table or "measured" in table
    assert "estimate" in table and "not run here" in table

    mine = BatchSizeExperiment(batch_sizes=[64], epochs=2, evaluate_kernel=evaluate_while_online,
                               evaluated_by="your evaluate_while_online").run()
    plain = BatchSizeExperiment(batch_sizes=[64], epochs=2).run()
    assert mine["evaluation_difference"] < 1e-5 and plain["evaluation_difference"] is None
    assert mine["final_test_loss"][0] == pytest.approx(plain["final_test_loss"][0], rel=1e-5)
    assert mine["final_test_accuracy"] == plain["final_test_accuracy"]


def without_the_update_launches(widths, gpu):
    """The parts with the optimiser's update kernels left out of the launches."""
    launches, compute, memory, copy = parts(widths, gpu)
    kernels = cost.step_kernels(widths, 1)
    return (launches * sum(k.phase != "update" for k in kernels) / len(kernels), compute,
            memory, copy)


@pytest.mark.parametrize("check, function", [
    (ch08.check_launch_bound, crossover_from(without_the_update_launches)),
    (ch08.check_throughput, throughput_from(without_the_update_launches)),
])
@pytest.mark.parametrize("seed", [1, 7, 12345])
def test_the_update_launches_left_out_is_named_within_the_tolerance(check, function, seed):
    result = check(function, seed=seed, show=False)
    assert result.status == "failed", result
    assert "the optimiser's update launches left out" in result.message, result


def without_the_launches_of(phase):
    def left_out(widths, gpu):
        launches, compute, memory, copy = parts(widths, gpu)
        kernels = cost.step_kernels(widths, 1)
        return (launches * sum(k.phase != phase for k in kernels) / len(kernels), compute,
                memory, copy)
    return left_out


@pytest.mark.parametrize("check, answer", [(ch08.check_launch_bound, crossover_from),
                                           (ch08.check_throughput, throughput_from)])
@pytest.mark.parametrize("phase, did", [("loss", "the loss kernels' launches left out"),
                                        ("forward", "(or the forward pass's: as many)")])
@pytest.mark.parametrize("seed", [1, 7, 12345])
def test_the_launches_of_one_phase_left_out_are_named_within_the_tolerance(check, answer, phase,
                                                                          did, seed):
    # 17 or 15 of the digits network's 19 launches: inside the factor 1.3, told by the formula
    # (the forward pass launches as many kernels as the update: named as one)
    result = check(answer(without_the_launches_of(phase)), seed=seed, show=False)
    assert result.status == "failed", result
    assert did in result.message, result


# --- the model reached where the code does not show it: watched while the check runs ----------


def launch_bound_through_getattr(widths, gpu):
    """Wrong: the model itself, its name put together at run time."""
    estimate = getattr(cost, "estimate_" + "step")
    batch = 1
    while estimate(widths, batch, gpu).bound() == "launch":
        batch += max(1, batch // 64)
    return batch


def launch_bound_through_the_modules_dict(widths, gpu):
    """Wrong: the model's per-sample seconds, read from the module's __dict__."""
    seconds = cost.__dict__["per_sample_seconds"](widths, gpu)
    return math.ceil(seconds["launch"] / max(seconds["compute"], seconds["memory"],
                                             seconds["transfer"]))


def throughput_through_getattr(widths, batch, gpu):
    return getattr(cost, "estimate_" + "step")(widths, batch, gpu).samples_per_s


@pytest.mark.parametrize("seed", [1, 7, 12345])
@pytest.mark.parametrize("check, function, name", [
    (ch08.check_launch_bound, launch_bound_through_getattr, "estimate_step"),
    (ch08.check_launch_bound, launch_bound_through_the_modules_dict, "per_sample_seconds"),
    (ch08.check_throughput, throughput_through_getattr, "estimate_step"),
])
def test_the_model_called_at_run_time_is_told(check, function, name, seed):
    result = check(function, seed=seed, show=False)
    assert result.status == FAILED, result
    assert f"called gpulab's own `gpulab.nn.cost.{name}`" in result.message, result
    assert cost.estimate_step.__module__ == "gpulab.nn.cost"
    assert "spy" not in cost.estimate_step.__code__.co_name  # put back after the check


def launch_bound_copy_at_device_bandwidth(widths, gpu):
    """Wrong: the copy from the host at the GPU's own memory bandwidth."""
    spec = hardware.get_gpu(gpu)
    one, two = cost.step_kernels(widths, 1), cost.step_kernels(widths, 2)
    launch = len(one) * hardware.LAUNCH_OVERHEAD_S
    flops = sum(k.flops for k in two) - sum(k.flops for k in one)
    moved = sum(k.bytes_moved for k in two) - sum(k.bytes_moved for k in one)
    copied = cost.step_transfer_bytes(widths, 2) - cost.step_transfer_bytes(widths, 1)
    per_sample = max(flops / spec.peak_flops_for("fp32"),
                     moved / spec.memory_bandwidth_bytes_per_s,
                     copied / spec.memory_bandwidth_bytes_per_s)
    return math.ceil(launch / per_sample)


def test_answers_that_give_the_same_predictions_are_named_together():
    result = ch08.check_launch_bound(launch_bound_copy_at_device_bandwidth, seed=1, show=False)
    assert result.status == FAILED, result
    assert "the copy at the GPU's memory bandwidth" in result.message, result.message


def model_through_its_wrapped_original(widths, batch, gpu):
    """A cheat: the model reached by a name built at run time, unwrapped (a watch that
    replaced the function with a wrapper would hand back the original here)."""
    estimate = getattr(cost, "_".join(["estimate", "step"]))
    estimate = getattr(estimate, "__wrapped__", estimate)
    return estimate(widths, batch, gpu).samples_per_s


def the_checks_own_answer_through_sys_modules(widths, batch, gpu):
    """A cheat: the check's own reference, from its module in sys.modules."""
    import sys
    return sys.modules[".".join(["gpulab", "exercises", "ch08"])].model_samples_per_s(
        tuple(widths), batch, gpu)


def the_checks_own_crossover_through_sys_modules(widths, gpu):
    import sys
    return sys.modules[".".join(["gpulab", "exercises", "ch08"])].model_crossover(widths, gpu)


def the_models_step_built_by_hand(widths, batch, gpu):
    """A cheat: the model's own step (`StepEstimate`, whose timeline is the model), built from
    estimates made by hand, its class reached by a name made at run time."""
    spec = hardware.get_gpu(gpu)
    estimates = [(k, hardware.RooflineEstimate(
        gpu=spec, flops=k.flops, bytes_moved=k.bytes_moved, precision="fp32",
        compute_s=k.flops / spec.peak_flops_for("fp32"),
        memory_s=k.bytes_moved / spec.memory_bandwidth_bytes_per_s,
        launch_s=hardware.LAUNCH_OVERHEAD_S, transfer_s=0.0, floor_s=hardware.KERNEL_MIN_S))
        for k in cost.step_kernels(widths, batch)]
    copy_s = cost.step_transfer_bytes(widths, batch) / spec.host_pageable_bytes_per_s
    step = getattr(cost, "Step" + "Estimate")
    return step(spec, batch, estimates, copy_s).samples_per_s


@pytest.mark.parametrize("function, check, used", [
    (model_through_its_wrapped_original, ch08.check_throughput, "gpulab.nn.cost.estimate_step"),
    (the_models_step_built_by_hand, ch08.check_throughput, "gpulab.nn.cost.StepEstimate`"),
    (the_checks_own_answer_through_sys_modules, ch08.check_throughput,
     "gpulab.exercises.ch08.model_samples_per_s"),
    (the_checks_own_crossover_through_sys_modules, ch08.check_launch_bound,
     "gpulab.exercises.ch08.model_crossover"),
])
def test_the_model_is_refused_however_it_is_reached(function, check, used):
    result = check(function, seed=7, show=False)
    assert_result(result, FAILED, used)
    assert "comparing gpulab with itself" in result.message


@cuda.jit
def evaluate_batch_last_of_ties(logits, labels, losses, correct):
    """Wrong on ties: the search keeps the last of equal largest logits (`>=`)."""
    start, step = cuda.grid(1), cuda.gridsize(1)
    for s in range(start, logits.shape[0], step):
        m, best = logits[s, 0], 0
        for c in range(1, logits.shape[1]):
            if logits[s, c] >= m:
                m, best = logits[s, c], c
        total = np.float32(0)
        for c in range(logits.shape[1]):
            total += math.exp(logits[s, c] - m)
        losses[s] = math.log(total) + m - logits[s, labels[s]]
        correct[s] = 1 if best == labels[s] else 0


@cuda.jit
def evaluate_batch_label_at_least_the_largest(logits, labels, losses, correct):
    """Wrong on ties: right when the label's logit is at least the largest (ties count)."""
    start, step = cuda.grid(1), cuda.gridsize(1)
    for s in range(start, logits.shape[0], step):
        m = logits[s, 0]
        for c in range(1, logits.shape[1]):
            m = max(m, logits[s, c])
        total = np.float32(0)
        for c in range(logits.shape[1]):
            total += math.exp(logits[s, c] - m)
        losses[s] = math.log(total) + m - logits[s, labels[s]]
        correct[s] = 1 if logits[s, labels[s]] >= m else 0


@pytest.mark.parametrize("seed", [1, 7, 12345])
@pytest.mark.parametrize("kernel, words", [
    (evaluate_batch_last_of_ties, "there it takes the later of them as the prediction"),
    (evaluate_batch_label_at_least_the_largest, "with another class's: there it is 1"),
])
def test_evaluate_batch_names_ties_decided_the_wrong_way(kernel, words, seed):
    assert_result(ch08.check_evaluate_batch(kernel, seed=seed, show=False), FAILED, words)
