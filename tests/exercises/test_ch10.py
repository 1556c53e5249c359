"""Chapter 10's checks (the loss scaler's update rule, a delayed FP8 scale from an amax
history) against right answers over several seeds, the stub, and the wrong answers learners
write, each rejected with the hint that names its mistake."""

import numpy as np
import pytest

from gpulab.exercises import ch10
from gpulab.exercises.results import FAILED, NOT_ATTEMPTED, PASSED

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


def with_modulo(scale, clean_steps, found_inf, growth_interval):
    """Also right: the count wraps round with %, the scale times 2 or 1."""
    if found_inf:
        return scale * 2.0 ** -1, 0, False
    clean_steps = (clean_steps + 1) % growth_interval
    return scale * (2.0 if clean_steps == 0 else 1.0), clean_steps, True


def hard_coded_interval(scale, clean_steps, found_inf, growth_interval):
    return update_loss_scale(scale, clean_steps, found_inf, 2000)  # GradScaler's default


def backing_off_by_a_quarter(scale, clean_steps, found_inf, growth_interval):
    if found_inf:
        return scale * 0.25, 0, False
    return update_loss_scale(scale, clean_steps, found_inf, growth_interval)


def count_and_scale_swapped(scale, clean_steps, found_inf, growth_interval):
    new_scale, count, take = update_loss_scale(scale, clean_steps, found_inf, growth_interval)
    return count, new_scale, take


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
@pytest.mark.parametrize("function", [update_loss_scale, with_greater_equal, with_modulo])
def test_loss_scale_update_accepts_right_answers(function, seed):
    result = ch10.check_loss_scale_update(function, seed=seed, show=False)
    assert result.status == PASSED, result
    assert "growths" in result.message and f"seed={seed}" in result.message


def halved_by_floor_division(scale, clean_steps, found_inf, growth_interval):
    if found_inf:
        return scale // 2, 0, False
    clean_steps += 1
    if clean_steps == growth_interval:
        return scale * 2, 0, True
    return scale, clean_steps, True


@pytest.mark.parametrize("seed", SEEDS)
def test_loss_scale_halved_by_floor_division_fails_at_a_scale_of_1(seed):
    # every scale the steps reach is a power of two of 2**5 or more: 1 // 2 = 0 shows
    result = ch10.check_loss_scale_update(halved_by_floor_division, seed=seed, show=False)
    assert result.status == FAILED, result
    assert "scale 1," in result.message, result
    assert "1 // 2 is 0, a floor division" in result.message and "not `// 2`" in result.hint, (
        result)


def backing_off_to_a_floor_of_1(scale, clean_steps, found_inf, growth_interval):
    """Wrong: the back-off stops at 1 (GradScaler's has no floor)."""
    if found_inf:
        return max(scale * 0.5, 1.0), 0, False
    clean_steps += 1
    if clean_steps == growth_interval:
        return scale * 2.0, 0, True
    return scale, clean_steps, True


def growth_clamped_to_fp16s_largest(scale, clean_steps, found_inf, growth_interval):
    """Wrong: the growth clamped at fp16's largest value, 65504."""
    if found_inf:
        return scale * 0.5, 0, False
    clean_steps += 1
    if clean_steps == growth_interval:
        return min(scale * 2.0, 65504.0), 0, True
    return scale, clean_steps, True


@pytest.mark.parametrize("function, words", [
    (backing_off_to_a_floor_of_1, "a floor of its own"),
    (growth_clamped_to_fp16s_largest, "has no cap"),
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
    (hard_coded_interval, "ignored or hard-coded"),
    (backing_off_by_a_quarter, "a factor of 0.25"),
    (count_and_scale_swapped, "look swapped"),
])
@pytest.mark.parametrize("seed", SEEDS[:3])
def test_loss_scale_update_names_the_mistake(function, words, seed):
    result = ch10.check_loss_scale_update(function, seed=seed, show=False)
    assert result.status == FAILED, result
    assert words in result.message + " " + result.hint, result
    assert f"seed={seed}" in result.message



def test_loss_scale_spec_lists_its_mistakes_in_order():
    table = ch10.LOSS_SCALE.mistake_table()
    assert ch10.LOSS_SCALE.mistakes == ch10.SCALER_MISTAKES
    dids = [m.did for m in ch10.SCALER_MISTAKES]
    assert dids[0].startswith("found_inf tested by identity") and dids[-1] == "another result"
    assert dids[1] == "the step taken on an overflow"
    assert dids.index("growing on every clean step") < dids.index(
        "growing before growth_interval clean steps")
    assert all(f"| {did} |" in table for did in dids)
    assert "never growing" in ch10.check_loss_scale_update.__doc__

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


def rolled(amax_history, x, fp8_max, margin):
    """Also right: np.roll, the largest magnitude from max and min, the margin as 2**-margin."""
    new_history = np.roll(amax_history, -1)
    new_history[-1] = max(abs(x.max()), abs(x.min()))
    return new_history, fp8_max * 2.0**-margin / new_history.max()


def margin_doubled(amax_history, x, fp8_max, margin):
    new_history = np.append(amax_history[1:], np.max(np.abs(x)))
    return new_history, fp8_max / np.max(new_history) / max(2 * margin, 1)


def margin_xor(amax_history, x, fp8_max, margin):
    new_history = np.append(amax_history[1:], np.max(np.abs(x)))
    return new_history, fp8_max / np.max(new_history) / (2 ^ margin)


def amax_in_float32(amax_history, x, fp8_max, margin):
    new_history = np.append(amax_history[1:], np.float32(np.max(np.abs(x))))
    return new_history, fp8_max / np.max(new_history) / 2**margin


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
@pytest.mark.parametrize("function", [delayed_scale, in_place, rolled])
def test_delayed_scale_accepts_right_answers(function, seed):
    result = ch10.check_delayed_scale(function, seed=seed, show=False)
    assert result.status == PASSED, result


def with_the_entry_dropped(amax_history, x, fp8_max, margin):
    """Wrong: the scale from the old history and this step's amax: one entry too many."""
    amax = float(np.max(np.abs(x)))
    new = np.append(amax_history[1:], amax)
    return new, fp8_max / max(float(np.max(amax_history)), amax) / 2.0**margin


def scale_in_float32(amax_history, x, fp8_max, margin):
    """Wrong: the scale rounded to float32 (the history right)."""
    new = np.append(amax_history[1:], np.max(np.abs(x)))
    return new, np.float32(fp8_max / np.max(new) / 2**margin)


def pair_the_wrong_way_round(amax_history, x, fp8_max, margin):
    """Wrong: (scale, new_history)."""
    new = np.append(amax_history[1:], np.max(np.abs(x)))
    return fp8_max / np.max(new) / 2**margin, new


@pytest.mark.parametrize("function, words", [
    (pair_the_wrong_way_round, "the wrong way round"),
    (scale_in_float32, "the scale was rounded to float32"),
    (from_the_last_amax, "this step's amax"),
    (forgetting_the_margin, "without the margin"),
    (margin_the_wrong_way, "multiplies by 2**margin"),
    (max_not_max_abs, "largest *magnitude*"),
    (scale_before_recording, "the history before this step's amax was recorded"),
    (inverse_scale, "the inverse"),
    (always_448, "use the fp8_max argument"),
    (growing_history, "one more than"),
    (newest_first, "oldest first, newest last"),
    (dropping_the_newest, "history[0], should drop out"),
    (as_a_list, "not a NumPy array"),
    (only_the_scale, "not a pair"),
    (margin_doubled, "not by 2**margin = 8"),
    (margin_xor, "`^` is XOR"),
    (amax_in_float32, "rounded to float32"),
    (with_the_entry_dropped, "which this step drops"),
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


# --- exercise 3: amax and the inf/NaN count in one pass, as a kernel ---------------------------

import math  # noqa: E402

import numba  # noqa: E402
from numba import cuda  # noqa: E402 - gpulab (imported above) chose the tier first
from numba import float32 as numba_float32  # noqa: E402

SLOTS = 1024
PAIR_SLOTS = 2 * SLOTS  # a shared array's size must be a constant: not an expression in the kernel


@cuda.jit
def amax_tree(x, out):
    """Right: gpulab's shape (math.isnan / isinf, two shared arrays, thread 0 does both)."""
    largest = cuda.shared.array(SLOTS, x.dtype)
    bad = cuda.shared.array(SLOTS, x.dtype)
    t = cuda.threadIdx.x
    mine = 0.0
    count = 0.0
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        v = abs(x[i])
        if math.isnan(v):
            count += 1
        else:
            if math.isinf(v):
                count += 1
            mine = max(mine, v)
    largest[t] = mine
    bad[t] = count
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            largest[t] = max(largest[t], largest[t + stride])
            bad[t] += bad[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.max(out, 0, largest[0])
        cuda.atomic.add(out, 1, bad[0])


@cuda.jit
def amax_one_array_by_hand(x, out):
    """Right, written differently: indices by hand, x[i] read several times in one iteration
    (x != x for NaN, == inf for inf), one shared array of two halves, an `if` instead of max,
    threads 0 and 1 each make one atomic."""
    pairs = cuda.shared.array(PAIR_SLOTS, numba_float32)
    t = cuda.threadIdx.x
    half = cuda.blockDim.x
    start = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    step = cuda.blockDim.x * cuda.gridDim.x
    mine = numba_float32(0)
    count = numba_float32(0)
    i = start
    while i < x.shape[0]:
        if x[i] != x[i]:
            count += 1
        elif abs(x[i]) == math.inf:
            count += 1
            mine = math.inf
        elif abs(x[i]) > mine:
            mine = abs(x[i])
        i += step
    pairs[t] = mine
    pairs[SLOTS + t] = count
    cuda.syncthreads()
    s = half // 2
    while s >= 1:
        if t < s:
            if pairs[t + s] > pairs[t]:
                pairs[t] = pairs[t + s]
            pairs[SLOTS + t] = pairs[SLOTS + t] + pairs[SLOTS + t + s]
        cuda.syncthreads()
        s = s // 2
    if t == 0:
        cuda.atomic.max(out, 0, pairs[0])
    if t == 1:
        cuda.atomic.add(out, 1, pairs[SLOTS])


@cuda.jit
def amax_isfinite_first(x, out):
    """Right, written differently: `not isfinite` counts, `not isnan` keeps; fixed rounds."""
    largest = cuda.shared.array(SLOTS, numba_float32)
    bad = cuda.shared.array(SLOTS, numba_float32)
    t = cuda.threadIdx.x
    mine = numba_float32(0)
    count = numba_float32(0)
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        v = abs(x[i])
        if not math.isfinite(v):
            count += 1
        if not math.isnan(v) and v > mine:
            mine = v
    largest[t] = mine
    bad[t] = count
    cuda.syncthreads()
    stride = cuda.blockDim.x
    for _ in range(10):
        stride //= 2
        if t < stride:
            largest[t] = max(largest[t], largest[t + stride])
            bad[t] += bad[t + stride]
        cuda.syncthreads()
    if t == 0:
        cuda.atomic.add(out, 1, bad[0])
        cuda.atomic.max(out, 0, largest[0])




@cuda.jit
def max_not_magnitude(x, out):
    largest = cuda.shared.array(SLOTS, x.dtype)
    bad = cuda.shared.array(SLOTS, x.dtype)
    t = cuda.threadIdx.x
    mine = 0.0
    count = 0.0
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        v = x[i]
        if not math.isfinite(v):
            count += 1
        if not math.isnan(v):
            mine = max(mine, v)
    largest[t] = mine
    bad[t] = count
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            largest[t] = max(largest[t], largest[t + stride])
            bad[t] += bad[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.max(out, 0, largest[0])
        cuda.atomic.add(out, 1, bad[0])


@cuda.jit
def nan_into_the_amax(x, out):
    """Wrong: `not v <= mine` is True for NaN, so a NaN becomes the thread's amax (max(v, mine)
    would not let it in on a GPU: fmaxf leaves NaN out)."""
    largest = cuda.shared.array(SLOTS, x.dtype)
    bad = cuda.shared.array(SLOTS, x.dtype)
    t = cuda.threadIdx.x
    mine = 0.0
    count = 0.0
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        v = abs(x[i])
        if not math.isfinite(v):
            count += 1
        if not v <= mine:
            mine = v
    largest[t] = mine
    bad[t] = count
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            if not largest[t + stride] <= largest[t]:
                largest[t] = largest[t + stride]
            bad[t] += bad[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.max(out, 0, largest[0])
        cuda.atomic.add(out, 1, bad[0])


@cuda.jit
def counts_only_nan(x, out):
    largest = cuda.shared.array(SLOTS, x.dtype)
    bad = cuda.shared.array(SLOTS, x.dtype)
    t = cuda.threadIdx.x
    mine = 0.0
    count = 0.0
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        v = abs(x[i])
        if math.isnan(v):
            count += 1
        else:
            mine = max(mine, v)
    largest[t] = mine
    bad[t] = count
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            largest[t] = max(largest[t], largest[t + stride])
            bad[t] += bad[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.max(out, 0, largest[0])
        cuda.atomic.add(out, 1, bad[0])


@cuda.jit
def counts_only_inf(x, out):
    largest = cuda.shared.array(SLOTS, x.dtype)
    bad = cuda.shared.array(SLOTS, x.dtype)
    t = cuda.threadIdx.x
    mine = 0.0
    count = 0.0
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        v = abs(x[i])
        if math.isinf(v):
            count += 1
        if not math.isnan(v):
            mine = max(mine, v)
    largest[t] = mine
    bad[t] = count
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            largest[t] = max(largest[t], largest[t + stride])
            bad[t] += bad[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.max(out, 0, largest[0])
        cuda.atomic.add(out, 1, bad[0])


@cuda.jit
def misses_negative_inf(x, out):
    largest = cuda.shared.array(SLOTS, x.dtype)
    bad = cuda.shared.array(SLOTS, x.dtype)
    t = cuda.threadIdx.x
    mine = 0.0
    count = 0.0
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        if x[i] != x[i] or x[i] == math.inf:
            count += 1
        if x[i] == x[i]:
            mine = max(mine, abs(x[i]))
    largest[t] = mine
    bad[t] = count
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            largest[t] = max(largest[t], largest[t + stride])
            bad[t] += bad[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.max(out, 0, largest[0])
        cuda.atomic.add(out, 1, bad[0])


@cuda.jit
def count_overwritten(x, out):
    largest = cuda.shared.array(SLOTS, x.dtype)
    bad = cuda.shared.array(SLOTS, x.dtype)
    t = cuda.threadIdx.x
    mine = 0.0
    count = 0.0
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        v = abs(x[i])
        if math.isnan(v):
            count += 1
        else:
            if math.isinf(v):
                count += 1
            mine = max(mine, v)
    largest[t] = mine
    bad[t] = count
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            largest[t] = max(largest[t], largest[t + stride])
            bad[t] += bad[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.max(out, 0, largest[0])
        out[1] = bad[0]


@cuda.jit
def count_added_without_atomic(x, out):
    largest = cuda.shared.array(SLOTS, x.dtype)
    bad = cuda.shared.array(SLOTS, x.dtype)
    t = cuda.threadIdx.x
    mine = 0.0
    count = 0.0
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        v = abs(x[i])
        if math.isnan(v):
            count += 1
        else:
            if math.isinf(v):
                count += 1
            mine = max(mine, v)
    largest[t] = mine
    bad[t] = count
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            largest[t] = max(largest[t], largest[t + stride])
            bad[t] += bad[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.max(out, 0, largest[0])
        out[1] += bad[0]


@cuda.jit
def no_barrier_after_filling(x, out):
    largest = cuda.shared.array(SLOTS, x.dtype)
    bad = cuda.shared.array(SLOTS, x.dtype)
    t = cuda.threadIdx.x
    mine = 0.0
    count = 0.0
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        v = abs(x[i])
        if math.isnan(v):
            count += 1
        else:
            if math.isinf(v):
                count += 1
            mine = max(mine, v)
    largest[t] = mine
    bad[t] = count
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            largest[t] = max(largest[t], largest[t + stride])
            bad[t] += bad[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.max(out, 0, largest[0])
        cuda.atomic.add(out, 1, bad[0])


@cuda.jit
def stride_of_one_block(x, out):
    largest = cuda.shared.array(SLOTS, x.dtype)
    bad = cuda.shared.array(SLOTS, x.dtype)
    t = cuda.threadIdx.x
    mine = 0.0
    count = 0.0
    for i in range(cuda.grid(1), x.shape[0], cuda.blockDim.x):
        v = abs(x[i])
        if math.isnan(v):
            count += 1
        else:
            if math.isinf(v):
                count += 1
            mine = max(mine, v)
    largest[t] = mine
    bad[t] = count
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            largest[t] = max(largest[t], largest[t + stride])
            bad[t] += bad[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.max(out, 0, largest[0])
        cuda.atomic.add(out, 1, bad[0])


@cuda.jit
def starts_at_thread_index(x, out):
    largest = cuda.shared.array(SLOTS, x.dtype)
    bad = cuda.shared.array(SLOTS, x.dtype)
    t = cuda.threadIdx.x
    mine = 0.0
    count = 0.0
    for i in range(t, x.shape[0], cuda.gridsize(1)):
        v = abs(x[i])
        if math.isnan(v):
            count += 1
        else:
            if math.isinf(v):
                count += 1
            mine = max(mine, v)
    largest[t] = mine
    bad[t] = count
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            largest[t] = max(largest[t], largest[t + stride])
            bad[t] += bad[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.max(out, 0, largest[0])
        cuda.atomic.add(out, 1, bad[0])


@cuda.jit
def no_loop(x, out):
    largest = cuda.shared.array(SLOTS, x.dtype)
    bad = cuda.shared.array(SLOTS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    mine = 0.0
    count = 0.0
    if i < x.shape[0]:
        v = abs(x[i])
        if math.isnan(v):
            count += 1
        else:
            if math.isinf(v):
                count += 1
            mine = v
    largest[t] = mine
    bad[t] = count
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            largest[t] = max(largest[t], largest[t + stride])
            bad[t] += bad[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.max(out, 0, largest[0])
        cuda.atomic.add(out, 1, bad[0])


@cuda.jit
def atomics_from_every_thread(x, out):
    mine = 0.0
    count = 0.0
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        v = abs(x[i])
        if math.isnan(v):
            count += 1
        else:
            if math.isinf(v):
                count += 1
            mine = max(mine, v)
    cuda.atomic.max(out, 0, mine)
    cuda.atomic.add(out, 1, count)


@cuda.jit
def global_counter(x, out):
    largest = cuda.shared.array(SLOTS, x.dtype)
    t = cuda.threadIdx.x
    mine = 0.0
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        v = abs(x[i])
        if not math.isfinite(v):
            cuda.atomic.add(out, 1, 1)
        if not math.isnan(v):
            mine = max(mine, v)
    largest[t] = mine
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            largest[t] = max(largest[t], largest[t + stride])
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.max(out, 0, largest[0])


@cuda.jit
def two_passes(x, out):
    largest = cuda.shared.array(SLOTS, x.dtype)
    bad = cuda.shared.array(SLOTS, x.dtype)
    t = cuda.threadIdx.x
    mine = 0.0
    count = 0.0
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        if not math.isnan(x[i]):
            mine = max(mine, abs(x[i]))
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        if not math.isfinite(x[i]):
            count += 1
    largest[t] = mine
    bad[t] = count
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            largest[t] = max(largest[t], largest[t + stride])
            bad[t] += bad[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.max(out, 0, largest[0])
        cuda.atomic.add(out, 1, bad[0])


@cuda.jit(device=True)
def halve_into_out(largest, bad, out):
    """The block's tree and thread 0's two atomics, as a device function."""
    t = cuda.threadIdx.x
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            largest[t] = max(largest[t], largest[t + stride])
            bad[t] += bad[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.max(out, 0, largest[0])
        cuda.atomic.add(out, 1, bad[0])


@cuda.jit
def chunk_per_thread(x, out):  # right result; each thread a run of neighbours: uncoalesced
    largest = cuda.shared.array(SLOTS, x.dtype)
    bad = cuda.shared.array(SLOTS, x.dtype)
    mine = 0.0
    count = 0.0
    chunk = (x.shape[0] + cuda.gridsize(1) - 1) // cuda.gridsize(1)
    for i in range(cuda.grid(1) * chunk, min((cuda.grid(1) + 1) * chunk, x.shape[0])):
        v = abs(x[i])
        if not math.isfinite(v):
            count += 1
        if not math.isnan(v):
            mine = max(mine, v)
    largest[cuda.threadIdx.x] = mine
    bad[cuda.threadIdx.x] = count
    halve_into_out(largest, bad, out)


@cuda.jit
def one_thread_reads_all(x, out):  # right result; the grid's first thread does all the work
    if cuda.grid(1) == 0:
        mine = 0.0
        count = 0.0
        for i in range(x.shape[0]):
            v = abs(x[i])
            if not math.isfinite(v):
                count += 1
            if not math.isnan(v):
                mine = max(mine, v)
        cuda.atomic.max(out, 0, mine)
        cuda.atomic.add(out, 1, count)


@cuda.jit
def halving_stops_early(x, out):
    largest = cuda.shared.array(SLOTS, x.dtype)
    bad = cuda.shared.array(SLOTS, x.dtype)
    t = cuda.threadIdx.x
    mine = 0.0
    count = 0.0
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        v = abs(x[i])
        if math.isnan(v):
            count += 1
        else:
            if math.isinf(v):
                count += 1
            mine = max(mine, v)
    largest[t] = mine
    bad[t] = count
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 1:
        if t < stride:
            largest[t] = max(largest[t], largest[t + stride])
            bad[t] += bad[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.max(out, 0, largest[0])
        cuda.atomic.add(out, 1, bad[0])


@cuda.jit
def amaxes_added(x, out):
    largest = cuda.shared.array(SLOTS, x.dtype)
    bad = cuda.shared.array(SLOTS, x.dtype)
    t = cuda.threadIdx.x
    mine = 0.0
    count = 0.0
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        v = abs(x[i])
        if math.isnan(v):
            count += 1
        else:
            if math.isinf(v):
                count += 1
            mine = max(mine, v)
    largest[t] = mine
    bad[t] = count
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            largest[t] = max(largest[t], largest[t + stride])
            bad[t] += bad[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.add(out, 0, largest[0])
        cuda.atomic.add(out, 1, bad[0])


@cuda.jit
def counts_maxed(x, out):
    largest = cuda.shared.array(SLOTS, x.dtype)
    bad = cuda.shared.array(SLOTS, x.dtype)
    t = cuda.threadIdx.x
    mine = 0.0
    count = 0.0
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        v = abs(x[i])
        if math.isnan(v):
            count += 1
        else:
            if math.isinf(v):
                count += 1
            mine = max(mine, v)
    largest[t] = mine
    bad[t] = count
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            largest[t] = max(largest[t], largest[t + stride])
            bad[t] += bad[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.max(out, 0, largest[0])
        cuda.atomic.max(out, 1, bad[0])


@cuda.jit
def shared_atomics_per_thread(x, out):
    block = cuda.shared.array(2, numba_float32)
    t = cuda.threadIdx.x
    if t == 0:
        block[0] = 0
        block[1] = 0
    cuda.syncthreads()
    mine = 0.0
    count = 0.0
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        v = abs(x[i])
        if not math.isfinite(v):
            count += 1
        if not math.isnan(v):
            mine = max(mine, v)
    cuda.atomic.max(block, 0, mine)
    cuda.atomic.add(block, 1, count)
    cuda.syncthreads()
    if t == 0:
        cuda.atomic.max(out, 0, block[0])
        cuda.atomic.add(out, 1, block[1])


@cuda.jit
def barrier_inside_the_if(x, out):
    largest = cuda.shared.array(SLOTS, x.dtype)
    bad = cuda.shared.array(SLOTS, x.dtype)
    t = cuda.threadIdx.x
    mine = 0.0
    count = 0.0
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        v = abs(x[i])
        if not math.isfinite(v):
            count += 1
        if not math.isnan(v):
            mine = max(mine, v)
    largest[t] = mine
    bad[t] = count
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            largest[t] = max(largest[t], largest[t + stride])
            bad[t] += bad[t + stride]
            cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.max(out, 0, largest[0])
        cuda.atomic.add(out, 1, bad[0])


@cuda.jit
def shared_array_of_one_block(x, out):
    largest = cuda.shared.array(32, numba_float32)
    bad = cuda.shared.array(32, numba_float32)
    t = cuda.threadIdx.x
    mine = 0.0
    count = 0.0
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        v = abs(x[i])
        if not math.isfinite(v):
            count += 1
        if not math.isnan(v):
            mine = max(mine, v)
    largest[t] = mine
    bad[t] = count
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            largest[t] = max(largest[t], largest[t + stride])
            bad[t] += bad[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.max(out, 0, largest[0])
        cuda.atomic.add(out, 1, bad[0])


@cuda.jit
def loop_one_short(x, out):
    largest = cuda.shared.array(SLOTS, numba_float32)
    bad = cuda.shared.array(SLOTS, numba_float32)
    t = cuda.threadIdx.x
    mine = numba_float32(0)
    count = numba_float32(0)
    for i in range(cuda.grid(1), x.shape[0] - 1, cuda.gridsize(1)):
        v = abs(x[i])
        if math.isnan(v) or math.isinf(v):
            count += 1
        if not math.isnan(v):
            mine = max(mine, v)
    largest[t] = mine
    bad[t] = count
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            largest[t] = max(largest[t], largest[t + stride])
            bad[t] += bad[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.max(out, 0, largest[0])
        cuda.atomic.add(out, 1, bad[0])


@cuda.jit
def first_stride_the_whole_block(x, out):
    largest = cuda.shared.array(SLOTS, numba_float32)
    bad = cuda.shared.array(SLOTS, numba_float32)
    t = cuda.threadIdx.x
    mine = numba_float32(0)
    count = numba_float32(0)
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        v = abs(x[i])
        if math.isnan(v) or math.isinf(v):
            count += 1
        if not math.isnan(v):
            mine = max(mine, v)
    largest[t] = mine
    bad[t] = count
    cuda.syncthreads()
    stride = cuda.blockDim.x
    while stride > 0:
        if t < stride:
            largest[t] = max(largest[t], largest[t + stride])
            bad[t] += bad[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.max(out, 0, largest[0])
        cuda.atomic.add(out, 1, bad[0])


@cuda.jit
def no_barrier_in_the_halving(x, out):
    largest = cuda.shared.array(SLOTS, numba_float32)
    bad = cuda.shared.array(SLOTS, numba_float32)
    t = cuda.threadIdx.x
    mine = numba_float32(0)
    count = numba_float32(0)
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        v = abs(x[i])
        if math.isnan(v) or math.isinf(v):
            count += 1
        if not math.isnan(v):
            mine = max(mine, v)
    largest[t] = mine
    bad[t] = count
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            largest[t] = max(largest[t], largest[t + stride])
            bad[t] += bad[t + stride]
        stride //= 2
    if t == 0:
        cuda.atomic.max(out, 0, largest[0])
        cuda.atomic.add(out, 1, bad[0])


@cuda.jit
def atomics_from_the_grids_thread_0(x, out):
    largest = cuda.shared.array(SLOTS, numba_float32)
    bad = cuda.shared.array(SLOTS, numba_float32)
    t = cuda.threadIdx.x
    mine = numba_float32(0)
    count = numba_float32(0)
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        v = abs(x[i])
        if math.isnan(v) or math.isinf(v):
            count += 1
        if not math.isnan(v):
            mine = max(mine, v)
    largest[t] = mine
    bad[t] = count
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            largest[t] = max(largest[t], largest[t + stride])
            bad[t] += bad[t + stride]
        cuda.syncthreads()
        stride //= 2
    if cuda.grid(1) == 0:
        cuda.atomic.max(out, 0, largest[0])
        cuda.atomic.add(out, 1, bad[0])


@cuda.jit
def amax_interleaved_tree(x, out):
    """Right, written differently: x != x for NaN, a while loop, an interleaved tree (stride
    doubling from 1, threads t % 2s == 0)."""
    largest = cuda.shared.array(SLOTS, numba_float32)
    bad = cuda.shared.array(SLOTS, numba_float32)
    t = cuda.threadIdx.x
    mine = numba_float32(0)
    count = numba_float32(0)
    i = cuda.grid(1)
    while i < x.size:
        v = x[i]
        if v != v:
            count += 1
        else:
            a = abs(v)
            if a == math.inf:
                count += 1
            if a > mine:
                mine = a
        i += cuda.gridsize(1)
    largest[t] = mine
    bad[t] = count
    cuda.syncthreads()
    s = 1
    while s < cuda.blockDim.x:
        if t % (2 * s) == 0:
            largest[t] = max(largest[t], largest[t + s])
            bad[t] += bad[t + s]
        cuda.syncthreads()
        s *= 2
    if t == 0:
        cuda.atomic.max(out, 0, largest[0])
        cuda.atomic.add(out, 1, bad[0])


@cuda.jit
def amax_comparisons_leave_nan_out(x, out):
    """Right, written differently: `v > mine` is False for NaN, and `not v < inf` counts NaN and
    inf in one test."""
    largest = cuda.shared.array(SLOTS, numba_float32)
    bad = cuda.shared.array(SLOTS, numba_float32)
    t = cuda.threadIdx.x
    mine = numba_float32(0)
    count = numba_float32(0)
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        v = abs(x[i])
        if v > mine:
            mine = v
        if not (v < math.inf):
            count += 1
    largest[t] = mine
    bad[t] = count
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            if largest[t + stride] > largest[t]:
                largest[t] = largest[t + stride]
            bad[t] += bad[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.max(out, 0, largest[0])
        cuda.atomic.add(out, 1, bad[0])


@cuda.jit
def amax_builtin_max_nan_first(x, out):
    """Right on a GPU, written differently: no NaN test at all. Numba compiles max of two
    floats to fmaxf, which leaves a NaN out in either place; Python's max(nan, m) keeps the
    NaN, so the simulator's launch runs max as a GPU does."""
    largest = cuda.shared.array(SLOTS, numba_float32)
    bad = cuda.shared.array(SLOTS, numba_float32)
    t = cuda.threadIdx.x
    mine = numba_float32(0)
    count = numba_float32(0)
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        m = abs(x[i])
        if not math.isfinite(m):
            count += 1
        mine = max(m, mine)
    largest[t] = mine
    bad[t] = count
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            largest[t] = max(largest[t], largest[t + stride])
            bad[t] += bad[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.max(out, 0, largest[0])
        cuda.atomic.add(out, 1, bad[0])


@cuda.jit
def amax_started_from_the_first_element(x, out):
    """Wrong: each thread's maximum starts from its first element, which may be NaN: then every
    `m > mine` is False and the thread's maximum stays NaN."""
    largest = cuda.shared.array(SLOTS, x.dtype)
    bad = cuda.shared.array(SLOTS, x.dtype)
    t = cuda.threadIdx.x
    first = cuda.grid(1)
    mine = abs(x[first]) if first < x.shape[0] else 0.0
    count = 0.0
    for i in range(first, x.shape[0], cuda.gridsize(1)):
        m = abs(x[i])
        if m != m or m == math.inf:
            count += 1
        if m > mine:
            mine = m
    largest[t] = mine
    bad[t] = count
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            if largest[t + stride] > largest[t]:
                largest[t] = largest[t + stride]
            bad[t] += bad[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.max(out, 0, largest[0])
        cuda.atomic.add(out, 1, bad[0])


@cuda.jit
def amax_tail_for_one_warp(x, out):
    """Wrong: the tree's last five rounds unrolled for one warp, with no barrier between them
    (the threads of a warp need not run in step), and 16 typed in."""
    largest = cuda.shared.array(SLOTS, x.dtype)
    bad = cuda.shared.array(SLOTS, x.dtype)
    t = cuda.threadIdx.x
    mine = 0.0
    count = 0.0
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        m = abs(x[i])
        if math.isnan(m):
            count += 1
        else:
            if math.isinf(m):
                count += 1
            mine = max(mine, m)
    largest[t] = mine
    bad[t] = count
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 16:
        if t < stride:
            largest[t] = max(largest[t], largest[t + stride])
            bad[t] += bad[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t < 16:
        for k in (16, 8, 4, 2, 1):
            largest[t] = max(largest[t], largest[t + k])
            bad[t] += bad[t + k]
    if t == 0:
        cuda.atomic.max(out, 0, largest[0])
        cuda.atomic.add(out, 1, bad[0])


@cuda.jit
def amax_nan_wins_in_the_loop(x, out):
    """Wrong: `not m <= mine` is True for NaN, so a NaN takes the thread's maximum's place (the
    tree's `max`, fmaxf on a GPU, then leaves it out, and the thread's values with it)."""
    largest = cuda.shared.array(SLOTS, x.dtype)
    bad = cuda.shared.array(SLOTS, x.dtype)
    t = cuda.threadIdx.x
    mine = 0.0
    count = 0.0
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        m = abs(x[i])
        if not math.isfinite(m):
            count += 1
        if not m <= mine:
            mine = m
    largest[t] = mine
    bad[t] = count
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            largest[t] = max(largest[t], largest[t + stride])
            bad[t] += bad[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.max(out, 0, largest[0])
        cuda.atomic.add(out, 1, bad[0])


@pytest.mark.parametrize("seed", [0, 1, 2, 7, 12345])
def test_a_nan_winning_the_thread_s_comparison_fails_on_every_seed(seed):
    # thread 1 reads x's largest magnitude between two NaNs
    result = ch10.check_amax_nonfinite(amax_nan_wins_in_the_loop, seed=seed, show=False)
    assert result.status == FAILED, result.message
    assert "comparison that a NaN wins" in result.message, result.message


@pytest.mark.parametrize("seed", [1, 7, 12345])
def test_a_tail_unrolled_for_one_warp_is_named(seed):
    result = ch10.check_amax_nonfinite(amax_tail_for_one_warp, seed=seed, show=False)
    assert result.status == FAILED, result.message
    assert "compares a thread's index in its block with a fixed number" in result.message
    assert "not guaranteed to run in step" in result.message, result.message


@pytest.mark.parametrize("seed", [1, 5, 7, 12345])
def test_a_maximum_started_from_a_nan_first_element_is_named(seed):
    result = ch10.check_amax_nonfinite(amax_started_from_the_first_element, seed=seed,
                                       show=False)
    assert result.status == FAILED, result.message
    assert "a maximum started from a NaN first element stays NaN" in result.message, result.message


@cuda.jit
def amax_stub(x, out):
    raise NotImplementedError()


@pytest.mark.parametrize("seed", (0, 3))
@pytest.mark.parametrize("kernel", [amax_tree, amax_one_array_by_hand, amax_isfinite_first,
                                    amax_interleaved_tree, amax_comparisons_leave_nan_out,
                                    amax_builtin_max_nan_first])
def test_right_amax_kernels_pass(kernel, seed):
    result = ch10.check_amax_nonfinite(kernel, seed=seed, show=False)
    assert result.status == PASSED, result.message
    assert ch10.AMAX.passed(kernel)


@pytest.mark.parametrize("kernel, words", [
    (max_not_magnitude, "largest *value*"),
    (nan_into_the_amax, "comparison that a NaN wins"),
    (counts_only_nan, "only the"),
    (counts_only_inf, "NaN values were not counted"),
    (misses_negative_inf, "-inf value(s) were not counted"),
    (count_overwritten, "overwrote out[1]"),
    (count_added_without_atomic, "a data race between blocks"),
    (no_barrier_after_filling, "before the thread that owns it had written it"),
    (stride_of_one_block, "steps by one block"),
    (starts_at_thread_index, "every block read the elements of block 0's threads"),
    (no_loop, "one per thread of the grid"),
    (atomics_from_every_thread, "about one per thread"),
    (global_counter, "a counter in global memory"),
    (two_passes, "two passes over x"),
    (chunk_per_thread, "its own run of consecutive elements"),
    (one_thread_reads_all, "threads did nothing"),
    (halving_stops_early, "the halving stopped before its last round"),
    (amaxes_added, "sum of the blocks' amaxes"),
    (counts_maxed, "largest of the blocks' counts"),
    (shared_atomics_per_thread, "atomic updates of shared slots"),
    (barrier_inside_the_if, "barrier inside a branch"),
    (shared_array_of_one_block, "on an array of 32 elements"),
    (loop_one_short, "the loop stops one short"),
    (first_stride_the_whole_block, "t + stride must stay inside the block"),
    (no_barrier_in_the_halving, "lost on the way up the tree"),
    (atomics_from_the_grids_thread_0, "block 0's amax and count alone"),
])
def test_wrong_amax_kernels_fail_and_name_the_mistake(kernel, words):
    result = ch10.check_amax_nonfinite(kernel, seed=5, show=False)
    assert result.status == FAILED
    assert words in result.message, result.message
    assert ch10.AMAX_STUB_HINT not in result.hint or words == "", result.hint
    assert not ch10.AMAX.passed(kernel)


@pytest.mark.parametrize("seed", range(5))
def test_a_global_counter_fails_on_every_seed(seed):
    """Once let through on 2 of 5 seeds: the counter's race must not hide behind a lucky draw."""
    result = ch10.check_amax_nonfinite(global_counter, seed=seed, show=False)
    assert result.status == FAILED and "a counter in global memory" in result.message, result


def test_the_amax_stub_is_not_attempted_and_gpulab_own_refused():
    from gpulab.kernels.amax import amax_nonfinite

    assert ch10.check_amax_nonfinite(amax_stub, show=False).status == NOT_ATTEMPTED
    result = ch10.check_amax_nonfinite(amax_nonfinite, seed=0, show=False)
    assert result.status == FAILED and "gpulab's own" in result.message


def test_the_recipes_run_on_the_learners_kernel_once_it_passed(capsys):
    fresh = ch10.recipes_on_kernel(amax_stub, fp16_steps=3, fp8_steps=1)
    assert fresh.whose == "gpulab's amax_nonfinite" and "has not passed" in fresh.note
    assert ch10.check_amax_nonfinite(amax_tree, seed=2, show=False).passed
    mine = ch10.recipes_on_kernel(amax_tree, fp16_steps=8, fp8_steps=2)
    out = capsys.readouterr().out
    assert mine.whose == "your amax_tree" and mine.same
    assert mine.launches == 8 + 2 * 7  # the check per step; and x, w, g of two fp8 layers
    assert any(mine.fp16[0].skipped) and "identical, bit for bit" in out


# --- the scaler's state is its arguments'; the delayed scale's window and amax ---------------

_KEPT = {"clean": 0}


def scaler_with_a_count_of_its_own(scale, clean_steps, found_inf, growth_interval):
    """Wrong: ignores clean_steps and keeps its own count in a global."""
    if found_inf:
        _KEPT["clean"] = 0
        return scale / 2, 0, False
    _KEPT["clean"] += 1
    if _KEPT["clean"] == growth_interval:
        _KEPT["clean"] = 0
        return scale * 2, 0, True
    return scale, _KEPT["clean"], True


def test_a_scaler_with_a_count_of_its_own_fails():
    for seed in (1, 7, 12345):
        _KEPT["clean"] = 0
        result = ch10.check_loss_scale_update(scaler_with_a_count_of_its_own, seed=seed,
                                              show=False)
        assert result.status == "failed", result


def delayed_scale_window_one_short(amax_history, x, fp8_max, margin):
    """Wrong: the scale from the new history without its first (oldest kept) entry."""
    new = np.append(amax_history[1:], np.max(np.abs(x)))
    return new, fp8_max / np.max(new[1:]) / 2**margin


def delayed_scale_amax_without_the_last_element(amax_history, x, fp8_max, margin):
    """Wrong: this step's amax over x[:-1]."""
    new = np.append(amax_history[1:], np.max(np.abs(x[:-1])))
    return new, fp8_max / np.max(new) / 2**margin


def delayed_scale_last_16(amax_history, x, fp8_max, margin):
    """Wrong: the scale from the last 16 entries only."""
    new = np.append(amax_history[1:], np.max(np.abs(x)))
    return new, fp8_max / np.max(new[-16:]) / 2**margin


def delayed_scale_history_as_text(amax_history, x, fp8_max, margin):
    """Wrong: the history returned as strings."""
    new = np.append(amax_history[1:], np.max(np.abs(x)))
    return new.astype(str), fp8_max / np.max(new) / 2**margin


@pytest.mark.parametrize("function", [delayed_scale_window_one_short,
                                      delayed_scale_amax_without_the_last_element,
                                      delayed_scale_last_16, delayed_scale_history_as_text])
@pytest.mark.parametrize("seed", [1, 7, 12345])
def test_delayed_scale_window_and_amax_mistakes_fail(function, seed):
    result = ch10.check_delayed_scale(function, seed=seed, show=False)
    assert result.status == "failed", result


@cuda.jit
def amax_without_the_infinities(x, out):
    """Wrong: counts inf and NaN, but keeps ±inf out of the amax as well as NaN."""
    largest = cuda.shared.array(SLOTS, numba.float32)
    bad = cuda.shared.array(SLOTS, numba.float32)
    t = cuda.threadIdx.x
    m = numba.float32(0.0)
    c = numba.float32(0.0)
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        v = x[i]
        if not math.isfinite(v):
            c += 1
        else:
            m = max(m, abs(v))
    largest[t] = m
    bad[t] = c
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if t < s:
            largest[t] = max(largest[t], largest[t + s])
            bad[t] += bad[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        cuda.atomic.max(out, 0, largest[0])
        cuda.atomic.add(out, 1, bad[0])


@pytest.mark.parametrize("seed", [1, 7, 12345])
def test_amax_without_the_infinities_is_named(seed):
    result = ch10.check_amax_nonfinite(amax_without_the_infinities, seed=seed, show=False)
    assert result.status == "failed" and "largest *finite* magnitude" in result.message, result


@cuda.jit
def amax_tree_per_warp(x, out):
    """Wrong method, right result: the tree halves within each warp only, then lane 0 of every
    warp makes the atomics (two per block of 64)."""
    largest = cuda.shared.array(SLOTS, numba_float32)
    bad = cuda.shared.array(SLOTS, numba_float32)
    t = cuda.threadIdx.x
    lane = t % 32
    mine = numba_float32(0)
    count = numba_float32(0)
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        v = abs(x[i])
        if math.isfinite(v) or math.isinf(v):
            mine = max(mine, v)
        if not math.isfinite(v):
            count += 1
    largest[t] = mine
    bad[t] = count
    cuda.syncthreads()
    stride = 16
    while stride > 0:
        if lane < stride:
            largest[t] = max(largest[t], largest[t + stride])
            bad[t] += bad[t + stride]
        cuda.syncthreads()
        stride //= 2
    if lane == 0:
        cuda.atomic.max(out, 0, largest[t])
        cuda.atomic.add(out, 1, bad[t])


@cuda.jit
def amax_break_at_the_first_non_finite(x, out):
    """Wrong: each thread stops at its first inf or NaN, leaving the rest of its elements."""
    largest = cuda.shared.array(SLOTS, numba_float32)
    bad = cuda.shared.array(SLOTS, numba_float32)
    t = cuda.threadIdx.x
    mine = numba_float32(0)
    count = numba_float32(0)
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        v = abs(x[i])
        if not math.isfinite(v):
            count += 1
            if math.isinf(v):
                mine = v
            break
        mine = max(mine, v)
    largest[t] = mine
    bad[t] = count
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            largest[t] = max(largest[t], largest[t + stride])
            bad[t] += bad[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.max(out, 0, largest[0])
        cuda.atomic.add(out, 1, bad[0])


@pytest.mark.parametrize("seed", [1, 7, 12345])
def test_an_atomic_per_warp_fails(seed):
    result = ch10.check_amax_nonfinite(amax_tree_per_warp, seed=seed, show=False)
    assert result.status == FAILED and "one per warp" in result.message, result.message


@pytest.mark.parametrize("seed", [0, 1, 7, 12345])
def test_a_break_at_the_first_non_finite_fails_and_is_named(seed):
    result = ch10.check_amax_nonfinite(amax_break_at_the_first_non_finite, seed=seed,
                                       show=False)
    assert result.status == FAILED, result.message
    assert "stops its loop at its first inf or NaN" in result.message, result.message


def update_with_a_cap(scale, clean_steps, found_inf, growth_interval):
    """Wrong: the scale never grows past 2**16."""
    if found_inf:
        return scale * 0.5, 0, False
    if clean_steps + 1 == growth_interval:
        return min(scale * 2.0, 65536.0), 0, True
    return scale, clean_steps + 1, True


@pytest.mark.parametrize("seed", [1, 7, 12345])
def test_a_scale_with_a_cap_of_its_own_fails(seed):
    result = ch10.check_loss_scale_update(update_with_a_cap, seed=seed, show=False)
    assert result.status == FAILED and "has no cap" in result.message, result.message


def delayed_scale_with_min_over_the_rest(amax_history, x, fp8_max, margin):
    """Wrong: the magnitude from max(x) and min(x[1:]), missing a most negative x[0]."""
    amax = max(abs(float(np.max(x))), abs(float(np.min(x[1:]))))
    new = np.append(amax_history[1:], amax)
    return new, fp8_max / float(np.max(new)) / 2.0**margin


@pytest.mark.parametrize("seed", [1, 7, 12345])
def test_a_min_over_x1_fails(seed):
    assert ch10.check_delayed_scale(delayed_scale_with_min_over_the_rest, seed=seed,
                                    show=False).status == FAILED


def delayed_scale_taking_abs_in_place(amax_history, x, fp8_max, margin):
    """Wrong: right numbers, but the tensor it is asked to scale is overwritten by |x|."""
    np.abs(x, out=x)
    history = np.append(amax_history[1:], x.max())
    return history, fp8_max / history.max() / 2**margin


def delayed_scale_rolling_its_history_in_place(amax_history, x, fp8_max, margin):
    """Right, written differently: the history buffer updated in place and returned."""
    amax_history[:-1] = amax_history[1:].copy()
    amax_history[-1] = np.max(np.abs(x))
    return amax_history, fp8_max / amax_history.max() / 2**margin


def test_delayed_scale_names_x_changed_in_place_and_keeps_a_history_rolled_in_place():
    result = ch10.check_delayed_scale(delayed_scale_taking_abs_in_place, seed=1, show=False)
    assert result.status == FAILED, result
    assert "changed its argument `x` in place (the array came back different)" in (
        result.message), result.message
    assert ch10.check_delayed_scale(delayed_scale_rolling_its_history_in_place, seed=1,
                                    show=False).passed


def loss_scale_by_identity(scale, clean_steps, found_inf, growth_interval):
    """Wrong: `found_inf is True` misses NumPy's True (what np.isinf(g).any() returns)."""
    if found_inf is True:
        return scale / 2, 0, False
    clean_steps += 1
    if clean_steps == growth_interval:
        return scale * 2, 0, True
    return scale, clean_steps, True


@pytest.mark.parametrize("seed", [1, 7, 12345])
def test_loss_scale_names_found_inf_tested_by_identity(seed):
    result = ch10.check_loss_scale_update(loss_scale_by_identity, seed=seed, show=False)
    assert result.status == FAILED, result
    assert "found_inf NumPy's True" in result.message, result.message


@cuda.jit
def amax_counting_past_fp16s_largest(x, out):
    """Wrong: a value counted as inf when it is past fp16's largest (65,504), as if x were fp16;
    in float32 such values are finite."""
    largest = cuda.shared.array(SLOTS, x.dtype)
    bad = cuda.shared.array(SLOTS, x.dtype)
    t = cuda.threadIdx.x
    mine = x.dtype.type(0)
    count = x.dtype.type(0)
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        v = abs(x[i])
        if math.isnan(v) or v > 65504:
            count += 1
        if not math.isnan(v):
            mine = max(mine, v)
    largest[t] = mine
    bad[t] = count
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            largest[t] = max(largest[t], largest[t + stride])
            bad[t] += bad[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.max(out, 0, largest[0])
        cuda.atomic.add(out, 1, bad[0])


@pytest.mark.parametrize("seed", [1, 7])
def test_amax_names_finite_values_counted_past_a_threshold(seed):
    result = ch10.check_amax_nonfinite(amax_counting_past_fp16s_largest, seed=seed, show=False)
    assert result.status == FAILED, result
    assert "x holds no inf or NaN here, but" in result.message, result.message


@cuda.jit
def amax_count_tree_under_a_block_vote(x, out):
    """Right: the inf/NaN count's tree runs only `if cuda.syncthreads_or(count):`, a vote the
    block's threads all get the same answer to (most blocks have none)."""
    largest = cuda.shared.array(SLOTS, x.dtype)
    bad = cuda.shared.array(SLOTS, x.dtype)
    t = cuda.threadIdx.x
    mine = x.dtype.type(0)
    count = 0
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        magnitude = abs(x[i])
        if math.isnan(magnitude):
            count += 1
        else:
            if math.isinf(magnitude):
                count += 1
            mine = max(mine, magnitude)
    largest[t] = mine
    bad[t] = count
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            largest[t] = max(largest[t], largest[t + stride])
        cuda.syncthreads()
        stride //= 2
    if cuda.syncthreads_or(count):
        stride = cuda.blockDim.x // 2
        while stride > 0:
            if t < stride:
                bad[t] += bad[t + stride]
            cuda.syncthreads()
            stride //= 2
        if t == 0:
            cuda.atomic.add(out, 1, bad[0])
    if t == 0:
        cuda.atomic.max(out, 0, largest[0])


@cuda.jit(device=True)
def _thread_in_block():
    return cuda.threadIdx.x


@cuda.jit
def amax_barrier_under_a_device_function_s_index(x, out):
    """Wrong: t from a device function, and the tree's barrier inside `if t < stride:`: the
    source cannot show it varies, the trace shows threads passing different barriers."""
    largest = cuda.shared.array(SLOTS, x.dtype)
    bad = cuda.shared.array(SLOTS, x.dtype)
    t = _thread_in_block()
    mine = x.dtype.type(0)
    count = 0
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        magnitude = abs(x[i])
        if math.isnan(magnitude):
            count += 1
        else:
            if math.isinf(magnitude):
                count += 1
            mine = max(mine, magnitude)
    largest[t] = mine
    bad[t] = count
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            largest[t] = max(largest[t], largest[t + stride])
            bad[t] += bad[t + stride]
            cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.max(out, 0, largest[0])
        cuda.atomic.add(out, 1, bad[0])


@pytest.mark.parametrize("seed", [1, 7])
def test_amax_under_a_block_vote_passes_and_uneven_barriers_are_seen_in_the_trace(seed):
    right = ch10.check_amax_nonfinite(amax_count_tree_under_a_block_vote, seed=seed, show=False)
    assert right.passed, right.message
    wrong = ch10.check_amax_nonfinite(amax_barrier_under_a_device_function_s_index, seed=seed,
                                      show=False)
    assert wrong.status == "failed", wrong
    assert "some threads passed" in wrong.message and "never arrive" in wrong.message, (
        wrong.message)
