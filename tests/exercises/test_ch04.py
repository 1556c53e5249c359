"""Chapter 04's exercise checks against right and typical wrong answers."""

import gpulab  # noqa: F401  (must come before numba: it chooses the simulator or the GPU)

# isort: split

import math

import ml_dtypes
import numba
import numpy as np
import pytest
from numba import cuda

from gpulab import formats, toolkit
from gpulab.exercises import ch04

# --- chapter 04's exercise checks -----------------------------------------------------------


def decode_right(sign, exponent, mantissa, exponent_bits, mantissa_bits):
    bias = 2 ** (exponent_bits - 1) - 1
    top = 2**exponent_bits - 1
    if exponent_bits >= 5 and exponent == top:  # IEEE: inf and NaN
        return math.nan if mantissa else (-math.inf if sign else math.inf)
    if (exponent_bits, mantissa_bits) == (4, 3) and exponent == top and mantissa == 7:
        return math.nan  # E4M3's only special code
    fraction = mantissa / 2**mantissa_bits
    value = 2.0 ** (1 - bias) * fraction if exponent == 0 else \
        2.0 ** (exponent - bias) * (1 + fraction)
    return -value if sign else value


def decode_numbers_only(sign, exponent, mantissa, exponent_bits, mantissa_bits):
    """Right for every number, but no special codes at all."""
    bias = 2 ** (exponent_bits - 1) - 1
    fraction = mantissa / 2**mantissa_bits
    value = 2.0 ** (1 - bias) * fraction if exponent == 0 else \
        2.0 ** (exponent - bias) * (1 + fraction)
    return -value if sign else value


def decode_no_subnormals(sign, exponent, mantissa, exponent_bits, mantissa_bits):
    if exponent == 0:
        bias = 2 ** (exponent_bits - 1) - 1
        value = 2.0 ** (exponent - bias) * (1 + mantissa / 2**mantissa_bits)
        return -value if sign else value
    return decode_right(sign, exponent, mantissa, exponent_bits, mantissa_bits)


def decode_wrong_bias(sign, exponent, mantissa, exponent_bits, mantissa_bits):
    return decode_right(sign, exponent, mantissa, exponent_bits, mantissa_bits) / 2


def decode_no_leading_one(sign, exponent, mantissa, exponent_bits, mantissa_bits):
    bias = 2 ** (exponent_bits - 1) - 1
    power = 1 - bias if exponent == 0 else exponent - bias
    value = 2.0**power * mantissa / 2**mantissa_bits
    return -value if sign else value


def decode_unsigned(sign, exponent, mantissa, exponent_bits, mantissa_bits):
    return abs(decode_right(sign, exponent, mantissa, exponent_bits, mantissa_bits))


def decode_ieee_everywhere(sign, exponent, mantissa, exponent_bits, mantissa_bits):
    """IEEE's all-ones rule for every format, E4M3 and E2M1 included."""
    if exponent == 2**exponent_bits - 1:
        return math.nan if mantissa else (-math.inf if sign else math.inf)
    return decode_numbers_only(sign, exponent, mantissa, exponent_bits, mantissa_bits)


def decode_ieee_but_e2m1(sign, exponent, mantissa, exponent_bits, mantissa_bits):
    """E4M3 right, but E2M1 given IEEE's special codes."""
    if exponent_bits == 2 and exponent == 3:
        return math.nan if mantissa else (-math.inf if sign else math.inf)
    return decode_right(sign, exponent, mantissa, exponent_bits, mantissa_bits)


def decode_e4m3_nan_as_number(sign, exponent, mantissa, exponent_bits, mantissa_bits):
    if exponent_bits == 4:
        return decode_numbers_only(sign, exponent, mantissa, exponent_bits, mantissa_bits)
    return decode_right(sign, exponent, mantissa, exponent_bits, mantissa_bits)


def decode_inf_and_nan_swapped(sign, exponent, mantissa, exponent_bits, mantissa_bits):
    if exponent_bits >= 5 and exponent == 2**exponent_bits - 1:
        return math.nan if mantissa == 0 else math.inf
    return decode_right(sign, exponent, mantissa, exponent_bits, mantissa_bits)


def decode_unsigned_infinity(sign, exponent, mantissa, exponent_bits, mantissa_bits):
    if exponent_bits >= 5 and exponent == 2**exponent_bits - 1:
        return math.nan if mantissa else math.inf
    return decode_right(sign, exponent, mantissa, exponent_bits, mantissa_bits)


def decode_returns_strings(sign, exponent, mantissa, exponent_bits, mantissa_bits):
    value = decode_right(sign, exponent, mantissa, exponent_bits, mantissa_bits)
    return str(value) if not math.isfinite(value) else value


def decode_returns_a_list(sign, exponent, mantissa, exponent_bits, mantissa_bits):
    return [decode_right(sign, exponent, mantissa, exponent_bits, mantissa_bits)]


def decode_forgets_to_return(sign, exponent, mantissa, exponent_bits, mantissa_bits):
    decode_right(sign, exponent, mantissa, exponent_bits, mantissa_bits)


def decode_stub(sign, exponent, mantissa, exponent_bits, mantissa_bits):
    # YOUR CODE HERE
    raise NotImplementedError()


def decode_with_ldexp(sign, exponent, mantissa, exponent_bits, mantissa_bits):
    """Right, written differently: math.ldexp on whole numbers, the specials tested last."""
    bias = (1 << (exponent_bits - 1)) - 1
    top = (1 << exponent_bits) - 1
    if exponent == 0:
        value = math.ldexp(mantissa, 1 - bias - mantissa_bits)
    else:
        value = math.ldexp((1 << mantissa_bits) + mantissa, exponent - bias - mantissa_bits)
    if exponent == top and exponent_bits >= 5:
        value = math.inf if mantissa == 0 else math.nan
    elif exponent == top and exponent_bits == 4 and mantissa == (1 << mantissa_bits) - 1:
        value = math.nan
    return math.copysign(value, -1.0 if sign else 1.0)


def decode_with_a_table(sign, exponent, mantissa, exponent_bits, mantissa_bits):
    """Right, written differently: the bias from a table of the formats, an int for +0."""
    bias = {5: 15, 8: 127, 4: 7, 2: 1}[exponent_bits]
    if exponent == 2**exponent_bits - 1 and exponent_bits >= 5:
        if mantissa:
            return float("nan")
        return float("-inf") if sign else float("inf")
    if exponent_bits == 4 and exponent == 15 and mantissa == 7:
        return float("nan")
    if exponent == 0 and mantissa == 0 and not sign:
        return 0
    significand = (mantissa if exponent == 0 else mantissa + 2**mantissa_bits) / 2**mantissa_bits
    value = significand * 2.0 ** (max(exponent, 1) - bias)
    return -value if sign else value


def decode_unsigned_zero(sign, exponent, mantissa, exponent_bits, mantissa_bits):
    if exponent == 0 and mantissa == 0:
        return 0.0
    return decode_right(sign, exponent, mantissa, exponent_bits, mantissa_bits)


def decode_int_zero(sign, exponent, mantissa, exponent_bits, mantissa_bits):
    """-0 is the int 0: wrong, an int cannot carry the code's sign bit (the value is -0.0)."""
    if exponent == 0 and mantissa == 0:
        return -0 if sign else 0
    return decode_right(sign, exponent, mantissa, exponent_bits, mantissa_bits)


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("function", [decode_with_ldexp, decode_with_a_table])
def test_check_decode_accepts_right_answers_written_differently(function, seed):
    result = ch04.check_decode(function, seed=seed, show=False)
    assert result.passed, result.message


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_check_decode_accepts_the_solution(seed):
    result = ch04.check_decode(decode_right, seed=seed, show=False)
    assert result.passed, result.message
    assert "infinities and NaN" in result.message


@pytest.mark.parametrize("function, status, words, hint_words", [
    (decode_numbers_only, "failed", "all-ones exponent field was decoded as a number",
     "mantissa 0 is infinity"),
    (decode_no_subnormals, "failed", "subnormal", "no implicit leading 1"),
    (decode_wrong_bias, "failed", "bias used was 16", "127 for bf16"),
    (decode_no_leading_one, "failed", "implicit leading 1", "1 plus the mantissa"),
    (decode_unsigned, "failed", "sign bit was ignored", "negative"),
    (decode_unsigned_zero, "failed", "sign bit of a zero was ignored: -0.0 is a value",
     "zero included"),
    (decode_int_zero, "failed", "zero was ignored: -0.0 is a value of its own (an int 0 has no",
     "zero included"),
    (decode_ieee_everywhere, "failed", "E4M3 was decoded with IEEE's rule", "no infinity"),
    (decode_ieee_but_e2m1, "failed", "E2M1 was given special codes", "4 and 6"),
    (decode_e4m3_nan_as_number, "failed", "S.1111.111 is E4M3's NaN, not the number 480",
     "no infinity"),
    (decode_inf_and_nan_swapped, "failed", "is infinity, not NaN", "mantissa 0 is infinity"),
    (decode_unsigned_infinity, "failed", "sign of infinity", "-inf"),
    (decode_returns_strings, "failed", "(a str), not a number", "not a string"),
    (decode_returns_a_list, "failed", "(a list), not a number", "one number"),
    (decode_forgets_to_return, "failed", "(a NoneType), not a number", "returning the value"),
    (decode_stub, "not attempted", "NotImplementedError", "bias"),
    (None, "not attempted", "no function", "bias"),
    (42, "failed", "not int", "without calling"),
])
def test_check_decode_names_the_mistake(function, status, words, hint_words):
    result = ch04.check_decode(function, seed=11, show=False)
    assert result.status == status, result.message
    assert words in result.message, result.message
    assert hint_words in result.hint, result.hint


def test_decode_cases_cover_every_kind_of_code():
    cases = ch04._decode_cases(np.random.default_rng(0))
    values = [case[-1] for case in cases]
    assert any(math.isnan(v) for v in values) and math.inf in values and -math.inf in values
    assert any(v == 0 for v in values)
    assert sum(v == 0 and math.copysign(1, v) < 0 for v in values) == len(ch04.DECODE_FORMATS)
    e4m3 = [case for case in cases if case[0].name == "fp8_e4m3" and case[2] == 15]
    assert {math.isnan(case[-1]) for case in e4m3} == {True, False}
    e2m1 = [case[-1] for case in cases if case[0].name == "fp4_e2m1" and case[2] == 3]
    assert sorted(abs(v) for v in e2m1) == [4.0, 6.0]


@cuda.jit
def matvec_right(a, x, out):
    row = cuda.grid(1)
    if row < out.shape[0]:
        acc = np.float32(0)
        for k in range(x.shape[0]):
            acc += np.float32(a[row, k]) * np.float32(x[k])
        out[row] = acc


@cuda.jit
def matvec_plain_zero(a, x, out):
    row = cuda.grid(1)
    if row < out.shape[0]:
        acc = 0.0
        for k in range(x.shape[0]):
            acc += a[row, k] * x[k]
        out[row] = acc


@cuda.jit
def matvec_fp16_accumulator(a, x, out):
    row = cuda.grid(1)
    if row < out.shape[0]:
        acc = a.dtype.type(0)
        for k in range(x.shape[0]):
            acc += a[row, k] * x[k]
        out[row] = acc


@cuda.jit
def matvec_fp16_products(a, x, out):
    row = cuda.grid(1)
    if row < out.shape[0]:
        acc = np.float32(0)
        for k in range(x.shape[0]):
            acc += a[row, k] * x[k]
        out[row] = acc


@cuda.jit
def matvec_no_guard(a, x, out):
    row = cuda.grid(1)
    acc = np.float32(0)
    for k in range(x.shape[0]):
        acc += np.float32(a[row, k]) * np.float32(x[k])
    out[row] = acc


@cuda.jit
def matvec_thread_index(a, x, out):
    row = cuda.threadIdx.x
    if row < out.shape[0]:
        acc = np.float32(0)
        for k in range(x.shape[0]):
            acc += np.float32(a[row, k]) * np.float32(x[k])
        out[row] = acc


@cuda.jit
def matvec_half_the_sum(a, x, out):
    row = cuda.grid(1)
    if row < out.shape[0]:
        acc = np.float32(0)
        for k in range(0, x.shape[0], 2):
            acc += np.float32(a[row, k]) * np.float32(x[k])
        out[row] = acc


@cuda.jit
def matvec_float64_accumulator(a, x, out):
    """Wrong for this exercise (fp32 asked for): a float64 sum, right values, a while loop."""
    row = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if row >= out.shape[0]:
        return
    acc = np.float64(0)
    k = 0
    while k < a.shape[1]:
        acc += np.float64(a[row, k]) * np.float64(x[k])
        k += 1
    out[row] = acc


@cuda.jit
def matvec_float32_after_load(a, x, out):
    """Right, written differently: each factor loaded into a float32 variable first."""
    row = cuda.grid(1)
    if row < out.shape[0]:
        acc = np.float32(0.0)
        for k in range(a.shape[1]):
            ak = np.float32(a[row, k])
            xk = np.float32(x[k])
            acc = acc + ak * xk
        out[row] = acc


@cuda.jit
def matvec_guard_one_short(a, x, out):
    row = cuda.grid(1)
    if row < out.shape[0] - 1:
        acc = np.float32(0)
        for k in range(x.shape[0]):
            acc += np.float32(a[row, k]) * np.float32(x[k])
        out[row] = acc


@cuda.jit
def matvec_last_k_missing(a, x, out):
    row = cuda.grid(1)
    if row < out.shape[0]:
        acc = np.float32(0)
        for k in range(x.shape[0] - 1):
            acc += np.float32(a[row, k]) * np.float32(x[k])
        out[row] = acc


@cuda.jit
def matvec_never_writes(a, x, out):
    row = cuda.grid(1)
    if row < out.shape[0]:
        acc = np.float32(0)
        for k in range(x.shape[0]):
            acc += np.float32(a[row, k]) * np.float32(x[k])


@cuda.jit
def matvec_column_sums(a, x, out):
    row = cuda.grid(1)
    if row < out.shape[0]:
        acc = np.float32(0)
        for k in range(x.shape[0]):
            acc += np.float32(a[row, k])
        out[row] = acc


@cuda.jit
def matvec_builds_a_list(a, x, out):
    row = cuda.grid(1)
    if row < out.shape[0]:
        products = [np.float32(a[row, k]) * np.float32(x[k]) for k in range(x.shape[0])]
        out[row] = sum(products)


@cuda.jit
def matvec_stub(a, x, out):
    # YOUR CODE HERE
    raise NotImplementedError()


SIM = gpulab.tier() != "gpu"


@pytest.mark.parametrize("kernel, status, words", [
    (matvec_right, "passed", "fp32 accumulator"),
    pytest.param(matvec_plain_zero, "failed", "summing in fp16", marks=pytest.mark.skipif(
        not SIM, reason="on a GPU `0.0` is float64, which is right (and passes)")),
    (matvec_fp16_accumulator, "failed", "summing in fp16"),
    (matvec_fp16_products, "failed", "rounded to fp16 first"),
    (matvec_no_guard, "failed", "index"),
    (matvec_thread_index, "failed", "first block"),
    (matvec_half_the_sum, "failed", "exact sum"),
    (matvec_stub, "not attempted", "NotImplementedError"),
    (matvec_float32_after_load, "passed", "rows right"),
    (matvec_guard_one_short, "failed", "never written"),
    (matvec_last_k_missing, "failed", "exact sum"),
    (matvec_never_writes, "failed", "no row of out was written"),
    (matvec_column_sums, "failed", "exact sum"),
    (matvec_builds_a_list, "failed", "compile for a real GPU"),
])
def test_check_matvec_fp32(kernel, status, words):
    result = ch04.check_matvec_fp32(kernel, seed=21, show=False)
    assert result.status == status, result.message
    assert words in result.message, result.message
    assert status == "passed" or result.hint


def test_check_matvec_names_the_simulator_trap():
    if not SIM:
        pytest.skip("the simulator's float16 rule")
    result = ch04.check_matvec_fp32(matvec_plain_zero, seed=22, show=False)
    assert "float32 zero" in result.hint and "simulator" in result.hint
    assert "np.float32(0)" not in result.hint  # the mistake named, not the fix written


def test_the_matvec_spec_lists_its_mistakes_in_the_order_they_are_tried():
    assert ch04.MATVEC.mistakes == (ch04.MATVEC_MISTAKES + ch04.MATVEC_SHARE_MISTAKES
                                    + ch04.MATVEC_PRECISION_MISTAKES)
    rows = ch04.MATVEC.mistake_table().splitlines()[4:]
    assert len(rows) == len(ch04.MATVEC_MISTAKES) + 5 == 14
    assert rows[0].startswith("| no row written") and rows[8] == "| a wrong sum | outputs |"
    assert all(row.endswith("| trace |") for row in rows[9:12])
    assert "fp16 arithmetic" in rows[12] and rows[12].endswith("| compiled code |")
    assert "float64" in rows[13] and rows[13].endswith("| compiled code |")
    assert "fp16 first" in rows[3] and "rounded to fp16" in rows[4]
    assert "products left out" in rows[5] and "kept in fp16" in rows[6]
    assert rows[7].startswith("| a shared array with no barrier") and rows[7].endswith(
        "| source |")


def quantise_right(x):
    scale = float(np.max(np.abs(x))) / 448
    return (x / scale).astype(ml_dtypes.float8_e4m3fn), scale


def quantise_float32_scale(x):
    scale = np.max(np.abs(x)) / np.float32(448)  # a NumPy float32 scalar: fine
    return (x / scale).astype(ml_dtypes.float8_e4m3fn), scale


def quantise_power_of_two(x):
    scale = 2.0 ** np.ceil(np.log2(np.max(np.abs(x)) / 448))
    return (x / scale).astype(ml_dtypes.float8_e4m3fn), scale


def quantise_by_reciprocal(x):
    scale = float(np.max(np.abs(x))) / 448
    return (x * np.float32(1 / scale)).astype(ml_dtypes.float8_e4m3fn), scale


def quantise_in_float64(x):
    scale = float(np.max(np.abs(x))) / 448
    return (x.astype(np.float64) / scale).astype(ml_dtypes.float8_e4m3fn), scale


def quantise_through_fp16(x):
    scale = float(np.max(np.abs(x))) / 448
    return (x / scale).astype(np.float16).astype(ml_dtypes.float8_e4m3fn), scale


def quantise_through_bf16(x):
    scale = float(np.max(np.abs(x))) / 448
    return (x / scale).astype(ml_dtypes.bfloat16).astype(ml_dtypes.float8_e4m3fn), scale


def quantise_truncates(x):
    # toward zero: the E4M3 value below |x / scale|, by its bits
    scale = float(np.max(np.abs(x))) / 448
    scaled = (x / scale).astype(np.float32)
    nearest = scaled.astype(ml_dtypes.float8_e4m3fn)
    over = np.abs(nearest.astype(np.float32)) > np.abs(scaled)
    bits = nearest.view(np.uint8).copy()
    bits[over] -= 1
    return bits.view(ml_dtypes.float8_e4m3fn), scale


def quantise_unscaled(x):
    return x.astype(ml_dtypes.float8_e4m3fn), 1.0


def quantise_multiplies(x):
    scale = float(np.max(np.abs(x))) / 448
    return (x * scale).astype(ml_dtypes.float8_e4m3fn), scale


def quantise_wastes_range(x):
    scale = float(np.max(np.abs(x)))
    return (x / scale).astype(ml_dtypes.float8_e4m3fn), scale


def quantise_clips(x):
    scale = float(np.max(np.abs(x))) / 1000
    return np.clip(x / scale, -448, 448).astype(ml_dtypes.float8_e4m3fn), scale


def quantise_from_max(x):
    scale = float(np.max(x)) / 448  # max, not max-abs
    return (x / scale).astype(ml_dtypes.float8_e4m3fn), scale


def quantise_from_min(x):
    scale = abs(float(np.min(x))) / 448
    return (x / scale).astype(ml_dtypes.float8_e4m3fn), scale


def quantise_from_range(x):
    scale = float(np.max(x) - np.min(x)) / 448
    return (x / scale).astype(ml_dtypes.float8_e4m3fn), scale


def quantise_from_std(x):
    scale = 3 * float(np.std(x)) / 448  # "3 sigma covers almost everything"
    return (x / scale).astype(ml_dtypes.float8_e4m3fn), scale


def quantise_from_std_saturating(x):
    scale = 4 * float(np.std(x)) / 448
    return np.clip(x / scale, -448, 448).astype(ml_dtypes.float8_e4m3fn), scale


def quantise_e5m2_max(x):
    scale = float(np.max(np.abs(x))) / 57344
    return (x / scale).astype(ml_dtypes.float8_e4m3fn), scale


def quantise_240(x):
    scale = float(np.max(np.abs(x))) / 240
    return (x / scale).astype(ml_dtypes.float8_e4m3fn), scale


def quantise_safety_margin(x):
    scale = float(np.max(np.abs(x))) / 400
    return (x / scale).astype(ml_dtypes.float8_e4m3fn), scale


def quantise_inverted(x):
    multiplier = 448 / float(np.max(np.abs(x)))
    return (x * multiplier).astype(ml_dtypes.float8_e4m3fn), multiplier


def quantise_to_fp16(x):
    scale = float(np.max(np.abs(x))) / 448
    return (x / scale).astype(np.float16), scale


def quantise_float64(x):
    scale = float(np.max(np.abs(x))) / 448
    return x.astype(np.float64) / scale, scale


def quantise_to_a_list(x):
    scale = float(np.max(np.abs(x))) / 448
    return [ml_dtypes.float8_e4m3fn(v / scale) for v in x], scale


def quantise_other_e4m3(x):
    scale = float(np.max(np.abs(x))) / 240
    return (x / scale).astype(ml_dtypes.float8_e4m3fnuz), scale


def quantise_scale_per_element(x):
    scale = np.full(x.shape, float(np.max(np.abs(x))) / 448)
    return (x / scale).astype(ml_dtypes.float8_e4m3fn), scale


def quantise_scale_keepdims(x):
    scale = np.max(np.abs(x), keepdims=True) / 448
    return (x / scale).astype(ml_dtypes.float8_e4m3fn), scale


def quantise_scale_as_string(x):
    q, scale = quantise_right(x)
    return q, f"{scale:.6g}"


def quantise_half_scale(x):
    scale = np.float16(np.max(np.abs(x)) / 448)
    return (x / np.float32(scale)).astype(ml_dtypes.float8_e4m3fn), scale


def quantise_flat(x):
    q, scale = quantise_right(x)
    return q[:-1], scale


def quantise_drops_the_scale(x):
    return quantise_right(x)[0]


def quantise_stub(x):
    # YOUR CODE HERE
    raise NotImplementedError()


def quantise_crashes(x):
    return x / undefined_name  # noqa: F821


@pytest.mark.parametrize("seed", [31, 32, 33, 34])
@pytest.mark.parametrize("function", [quantise_right, quantise_float32_scale,
                                      quantise_power_of_two, quantise_by_reciprocal,
                                      quantise_in_float64])
def test_check_quantise_fp8_accepts_right_answers(function, seed):
    result = ch04.check_quantise_fp8(function, seed=seed, show=False)
    assert result.passed, result.message
    assert "whole E4M3 range" in result.message


@pytest.mark.parametrize("function, status, words, hint_words", [
    (quantise_unscaled, "failed", "maps max|x| to", "absolute maximum"),
    (quantise_multiplies, "failed", "multiply by the scale instead of dividing",
     "divided by the scale"),
    (quantise_wastes_range, "failed", "less than half", "448"),
    (quantise_clips, "failed", "beyond E4M3's largest value", "448"),
    (quantise_from_max, "failed", "It is max(x) / 448", "absolute maximum"),
    (quantise_from_min, "failed", "It is |min(x)| / 448", "absolute maximum"),
    (quantise_from_range, "failed", "the range", "absolute maximum"),
    (quantise_from_std, "failed", "3 x the standard deviation", "absolute maximum"),
    (quantise_from_std_saturating, "failed", "4 x the standard deviation", "absolute maximum"),
    (quantise_e5m2_max, "failed", "E5M2's largest value", "448"),
    (quantise_240, "failed", "other E4M3 variants", "448"),
    (quantise_safety_margin, "failed", "maps max|x| to 400, not to E4M3's largest value", "448"),
    (quantise_inverted, "failed", "the wrong way round", "max|x| / 448"),
    (quantise_to_fp16, "failed", "float16 array", "float8_e4m3fn"),
    (quantise_truncates, "failed", "rounded toward zero", "round"),
    (quantise_float64, "failed", "float64 array", "float8_e4m3fn"),
    (quantise_to_a_list, "failed", "q is a list", "no Python loop"),
    (quantise_other_e4m3, "failed", "float8_e4m3fnuz", "float8_e4m3fn"),
    (quantise_scale_per_element, "failed", "scale is an array of shape", "one number"),
    (quantise_scale_keepdims, "failed", "shape (1,)", "one number"),
    (quantise_scale_as_string, "failed", "(a str), not a number", "one number"),
    (quantise_half_scale, "failed", "float16", "Python float"),
    (quantise_flat, "failed", "q has shape", "keeping its shape"),
    (quantise_drops_the_scale, "failed", "not a pair", "the quantised array, then the scale"),
    (quantise_stub, "not attempted", "NotImplementedError", "largest magnitude"),
    (quantise_crashes, "failed", "NameError", "read the error"),
])
def test_check_quantise_fp8_names_the_mistake(function, status, words, hint_words):
    result = ch04.check_quantise_fp8(function, seed=31, show=False)
    assert result.status == status, result.message
    assert words in result.message, result.message
    assert hint_words in result.hint, result.hint


@pytest.mark.parametrize("seed", [1, 7, 31, 12345])
@pytest.mark.parametrize("function, through", [(quantise_through_fp16, "float16"),
                                               (quantise_through_bf16, "bfloat16")])
def test_check_quantise_fp8_names_rounding_twice_on_every_seed(function, through, seed):
    # through float16 a value fails only when it sits within float16's half step of a halfway
    # point between two E4M3 values: the trial plants six such values
    result = ch04.check_quantise_fp8(function, seed=seed, show=False)
    assert result.status == "failed", result.message
    assert f"rounded twice, to {through} first" in result.message, result.message
    assert "round once" in result.hint, result.hint


@pytest.mark.parametrize("seed", range(4))
def test_the_planted_values_go_wrong_only_through_float16(seed):
    x = dict(ch04._quantise_trials(np.random.default_rng(seed)))[
        "values near 1 (some E4M3 subnormals once scaled)"]
    scaled = x / (float(np.max(np.abs(x))) / 448)
    once = scaled.astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
    twice = scaled.astype(np.float16).astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
    assert np.sum(once != twice) >= 6


@pytest.mark.parametrize("seed", range(6))
def test_the_outlier_trial_really_has_outliers_of_both_signs(seed):
    trials = dict(ch04._quantise_trials(np.random.default_rng(seed)))
    x = trials["activations with outliers"].astype(np.float64)
    amax, spread = np.max(np.abs(x)), np.std(x)
    assert x[np.argmax(np.abs(x))] < 0  # the largest magnitude is negative ...
    assert 0 < np.max(x) <= 0.6 * amax  # ... and the largest positive value much smaller
    assert amax > 8 * spread  # far beyond what a few standard deviations cover
    assert np.sum(np.abs(x) > 10 * np.median(np.abs(x))) >= 3  # several outliers, not one
    gradients = trials["tiny gradients"]
    assert gradients[np.argmax(np.abs(gradients))] > 0 and np.min(gradients) < 0


def test_a_check_prints_its_result(capsys):
    ch04.check_decode(decode_stub, seed=1)
    assert "NOT ATTEMPTED" in capsys.readouterr().out


# --- matvec under two drawn block sizes: a hard-coded one fails on every seed ----------------


@cuda.jit
def matvec_block_of_32(a, x, out):
    row = cuda.blockIdx.x * 32 + cuda.threadIdx.x
    if row < out.shape[0]:
        acc = np.float32(0)
        for k in range(x.shape[0]):
            acc += np.float32(a[row, k]) * np.float32(x[k])
        out[row] = acc


@cuda.jit
def matvec_block_of_16(a, x, out):
    row = cuda.threadIdx.x + 16 * cuda.blockIdx.x
    if row < out.shape[0]:
        acc = np.float32(0)
        for k in range(x.shape[0]):
            acc += np.float32(a[row, k]) * np.float32(x[k])
        out[row] = acc


@cuda.jit
def matvec_block_of_8(a, x, out):
    row = cuda.blockIdx.x * 8 + cuda.threadIdx.x
    if row < out.shape[0]:
        acc = np.float32(0)
        for k in range(x.shape[0]):
            acc += np.float32(a[row, k]) * np.float32(x[k])
        out[row] = acc


@cuda.jit
def matvec_index_spelled_out(a, x, out):  # right: the index written out, a while loop
    row = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if row >= out.shape[0]:
        return
    acc = np.float32(0.0)
    k = 0
    while k < x.shape[0]:
        acc += np.float32(a[row, k]) * np.float32(x[k])
        k += 1
    out[row] = acc


@pytest.mark.parametrize("kernel", [matvec_block_of_32, matvec_block_of_16, matvec_block_of_8])
@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6])
def test_a_hard_coded_block_size_fails_on_every_seed(kernel, seed):
    result = ch04.check_matvec_fp32(kernel, seed=seed, show=False)
    assert result.status == "failed", str(result)
    assert "hard-codes the block size" in result.message, str(result)
    assert "threads per block" in result.message and "never a number" in result.hint


def _rows_written(literal: int, threads: int, rows: int) -> set[int]:
    """The rows `row = blockIdx.x * literal + threadIdx.x` writes on a one-row-per-thread grid."""
    blocks = -(-rows // threads)
    return {b * literal + t for b in range(blocks) for t in range(threads)
            if b * literal + t < rows}


def test_the_matvec_launches_leave_no_hard_coded_block_size_a_way_through():
    seen = set()
    for seed in range(40):
        trial = ch04._matvec_trial(seed, None)
        sizes = (trial.threads_per_block, trial.other_block().threads_per_block)
        seen.update(sizes)
        assert max(sizes) == 2 * min(sizes), sizes
        assert trial.n > 2 * max(sizes) and all(trial.n % size for size in sizes)
        for literal in (4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 512):
            assert any(len(_rows_written(literal, size, trial.n)) < trial.n for size in sizes), (
                seed, literal, sizes, trial.n)
    assert len(seen) > 3  # drawn, not one fixed pair


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_matvec_right_answers_pass_under_both_block_sizes(seed):
    for kernel in (matvec_right, matvec_index_spelled_out):
        result = ch04.check_matvec_fp32(kernel, seed=seed, show=False)
        assert result.passed, str(result)
        assert result.message.count(" threads") == 2, result.message  # both launches named


def test_matvec_with_a_chosen_block_size_launches_once():
    result = ch04.check_matvec_fp32(matvec_right, seed=4, threads_per_block=32, show=False)
    assert result.passed, str(result)
    assert "of 32 threads" in result.message and " and " not in result.message.split("(")[1]


# --- issue: more wrong answers (a lost fraction, another format's bias, adding into out, a sum
# rounded to fp16, a swapped pair, x changed in place) and right ones written differently -------


def _decode_with(fraction, bias_of):
    """A decoder right but for how it takes the fraction and the bias."""
    def decode(sign, exponent, mantissa, exponent_bits, mantissa_bits):
        bias, top = bias_of(exponent_bits), 2**exponent_bits - 1
        if exponent == top and exponent_bits >= 5:
            return math.nan if mantissa else (-math.inf if sign else math.inf)
        if exponent == top and exponent_bits == 4 and mantissa == 7:
            return math.nan
        f = fraction(mantissa, mantissa_bits)
        value = 2.0 ** (1 - bias) * f if exponent == 0 else 2.0 ** (exponent - bias) * (1 + f)
        return -value if sign else value
    return decode


def decode_significand_by_ldexp(sign, exponent, mantissa, exponent_bits, mantissa_bits):
    """Right, written differently: the whole significand scaled once by ldexp."""
    bias = (1 << (exponent_bits - 1)) - 1
    if exponent == (1 << exponent_bits) - 1:
        if exponent_bits >= 5:
            return math.nan if mantissa else (-math.inf if sign else math.inf)
        if exponent_bits == 4 and mantissa == (1 << mantissa_bits) - 1:
            return math.nan
    significand = mantissa if exponent == 0 else mantissa + (1 << mantissa_bits)
    return (-1) ** sign * math.ldexp(significand, max(exponent, 1) - bias - mantissa_bits)


@pytest.mark.parametrize("function, words, hint_words", [
    (_decode_with(lambda m, bits: m // 2**bits, lambda e: 2 ** (e - 1) - 1),
     "the value has no fraction", "`//` would round it"),
    (_decode_with(lambda m, bits: m / 2**bits, lambda e: 15), "the bias used was 15, not 127",
     "127 for bf16"),
    (_decode_with(lambda m, bits: m / (2**bits - 1), lambda e: 2 ** (e - 1) - 1),
     "the fraction as mantissa / (2**M - 1)", "steps of 1 / 2**M"),
    (_decode_with(lambda m, bits: float(f"0.{m}") if m else 0.0, lambda e: 2 ** (e - 1) - 1),
     "the mantissa's decimal digits", "a binary fraction"),
    (_decode_with(lambda m, bits: m / 2**10, lambda e: 2 ** (e - 1) - 1), "for bf16 should be",
     "one case at a time"),
])
def test_more_decode_mistakes_are_named(function, words, hint_words):
    result = ch04.check_decode(function, seed=1, show=False)
    assert result.status == "failed", result.message
    assert words in result.message and hint_words in result.hint, str(result)


@pytest.mark.parametrize("seed", [1, 2])
def test_decode_by_ldexp_of_the_significand_passes(seed):
    result = ch04.check_decode(decode_significand_by_ldexp, seed=seed, show=False)
    assert result.passed, result.message


@cuda.jit
def matvec_adds_into_out(a, x, out):
    row = cuda.grid(1)
    if row < out.shape[0]:
        for k in range(x.shape[0]):
            out[row] += np.float32(a[row, k]) * np.float32(x[k])


@cuda.jit
def matvec_sum_rounded_to_fp16(a, x, out):  # the fp32 sum stored as fp16 at the end
    row = cuda.grid(1)
    if row < out.shape[0]:
        acc = np.float32(0)
        for k in range(x.shape[0]):
            acc += np.float32(a[row, k]) * np.float32(x[k])
        out[row] = np.float16(acc)


@cuda.jit
def matvec_compensated_fp16_sum(a, x, out):  # Kahan's sum, but in fp16
    row = cuda.grid(1)
    if row < out.shape[0]:
        total = np.float16(0)
        carry = np.float16(0)
        for k in range(x.shape[0]):
            y = np.float16(a[row, k] * x[k] - carry)
            t = np.float16(total + y)
            carry = np.float16((t - total) - y)
            total = t
        out[row] = total


@cuda.jit
def matvec_over_the_rows_not_k(a, x, out):  # the loop over the rows' count, not k
    row = cuda.grid(1)
    if row < out.shape[0]:
        acc = np.float32(0)
        for k in range(out.shape[0]):
            acc += np.float32(a[row, k]) * np.float32(x[k])
        out[row] = acc


@cuda.jit
def matvec_grid_stride(a, x, out):  # right: a grid-stride loop over the rows
    for row in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        acc = np.float32(0)
        for k in range(a.shape[1]):
            acc += np.float32(a[row, k]) * np.float32(x[k])
        out[row] = acc


@cuda.jit
def matvec_two_fp32_accumulators(a, x, out):  # right: even and odd k apart, k from a's shape
    row = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
    if row < a.shape[0]:
        even = np.float32(0)
        odd = np.float32(0)
        for k in range(0, a.shape[1] - 1, 2):
            even += np.float32(a[row, k]) * np.float32(x[k])
            odd += np.float32(a[row, k + 1]) * np.float32(x[k + 1])
        if a.shape[1] % 2:
            even += np.float32(a[row, a.shape[1] - 1]) * np.float32(x[a.shape[1] - 1])
        out[row] = even + odd


@pytest.mark.parametrize("kernel, words, absent", [
    (matvec_adds_into_out, "adds into out[row], which starts with whatever", "no row"),
    (matvec_sum_rounded_to_fp16, "rounded to fp16 before it was written", "as summing in fp16"),
    (matvec_compensated_fp16_sum, "rounded to fp16 before it was written", "as summing in fp16"),
    (matvec_over_the_rows_not_k, "exact sum", "as summing in fp16"),
])
def test_more_matvec_mistakes_are_named(kernel, words, absent):
    result = ch04.check_matvec_fp32(kernel, seed=21, show=False)
    assert result.status == "failed", result.message
    assert words in result.message and absent not in result.message, result.message


@pytest.mark.parametrize("kernel", [matvec_grid_stride, matvec_two_fp32_accumulators])
def test_more_matvec_right_answers_pass(kernel):
    result = ch04.check_matvec_fp32(kernel, seed=21, show=False)
    assert result.passed, result.message


def quantise_returns_scale_first(x):
    scale = float(np.max(np.abs(x))) / 448
    return scale, (x / scale).astype(ml_dtypes.float8_e4m3fn)


def quantise_in_place(x):
    scale = float(np.max(np.abs(x))) / 448
    x /= scale
    return x.astype(ml_dtypes.float8_e4m3fn), scale


def quantise_from_a_percentile(x):  # the 99.9th percentile: the outliers overflow
    scale = float(np.percentile(np.abs(x), 99.9)) / 448
    return (x / scale).astype(ml_dtypes.float8_e4m3fn), scale


def quantise_power_of_two_below(x):  # rounded down to a power of two: max|x| lands past 448
    scale = 2.0 ** math.floor(math.log2(float(np.max(np.abs(x))) / 448))
    return (x / scale).astype(ml_dtypes.float8_e4m3fn), scale


def quantise_by_a_multiplier(x):  # right: multiply by 448 / max|x|, return its inverse
    multiplier = 448.0 / float(np.max(np.abs(x)))
    return (x.astype(np.float64) * multiplier).astype(ml_dtypes.float8_e4m3fn), 1.0 / multiplier


def quantise_from_finfo_with_clip(x):  # right: the largest value from finfo, a NumPy scale
    scale = np.float64(np.abs(x).max()) / float(ml_dtypes.finfo(ml_dtypes.float8_e4m3fn).max)
    return np.clip(x / scale, -448, 448).astype(ml_dtypes.float8_e4m3fn), scale


@pytest.mark.parametrize("function, words, hint_words", [
    (quantise_returns_scale_first, "returned (scale, q)", "in the order (q, scale)"),
    (quantise_in_place, "changed its argument x", "in-place operation"),
    (quantise_from_a_percentile, "beyond E4M3's largest value", "absolute maximum"),
    (quantise_power_of_two_below, "beyond E4M3's largest value", "absolute maximum"),
])
def test_more_quantise_mistakes_are_named(function, words, hint_words):
    result = ch04.check_quantise_fp8(function, seed=31, show=False)
    assert result.status == "failed", result.message
    assert words in result.message and hint_words in result.hint, str(result)


def quantise_with_gpulab_formats_largest(x):  # right: Hint 2's own gpulab.formats max_value
    largest = formats.get_format("fp8_e4m3").max_value
    scale = float(np.abs(x).max()) / largest
    return (x / np.float32(scale)).astype(ml_dtypes.float8_e4m3fn), scale


def quantise_with_gpulab_formats_quantise(x):  # gpulab's own quantiser does the work
    q = formats.quantise(x, "fp8_e4m3")
    return q.values, q.scale


@pytest.mark.parametrize("function", [quantise_by_a_multiplier, quantise_from_finfo_with_clip,
                                      quantise_with_gpulab_formats_largest])
def test_more_quantise_right_answers_pass(function):
    result = ch04.check_quantise_fp8(function, seed=32, show=False)
    assert result.passed, result.message


def test_quantise_may_read_the_largest_value_from_gpulab_but_not_quantise_with_it():
    result = ch04.check_quantise_fp8(quantise_with_gpulab_formats_quantise, seed=32, show=False)
    assert result.status == "failed", result.message
    assert "gpulab.formats.quantise" in result.message, result.message


# --- the top binade in full, a library's decode, subnormals and the scale's max ----------------


def decode_e4m3_nan_on_the_top_bits(sign, exponent, mantissa, exponent_bits, mantissa_bits):
    """Wrong: E4M3's S.1111.11x taken as NaN (448 is a number)."""
    if (exponent_bits, mantissa_bits) == (4, 3) and exponent == 15 and mantissa >= 6:
        return math.nan
    return decode_right(sign, exponent, mantissa, exponent_bits, mantissa_bits)


def decode_e5m2_low_mantissa_as_inf(sign, exponent, mantissa, exponent_bits, mantissa_bits):
    """Wrong: E5M2's all-ones exponent with mantissa 1 taken as infinity."""
    if (exponent_bits, mantissa_bits) == (5, 2) and exponent == 31 and mantissa == 1:
        return -math.inf if sign else math.inf
    return decode_right(sign, exponent, mantissa, exponent_bits, mantissa_bits)


def decode_through_ml_dtypes(sign, exponent, mantissa, exponent_bits, mantissa_bits):
    """A library's decode: the bits viewed as ml_dtypes' float types."""
    types = {(5, 10): np.float16, (8, 7): ml_dtypes.bfloat16, (4, 3): ml_dtypes.float8_e4m3fn,
             (5, 2): ml_dtypes.float8_e5m2, (2, 1): ml_dtypes.float4_e2m1fn}
    code = (sign << (exponent_bits + mantissa_bits)) | (exponent << mantissa_bits) | mantissa
    bits = np.uint16 if exponent_bits + mantissa_bits == 15 else np.uint8
    return float(np.array([code], dtype=bits).view(types[exponent_bits, mantissa_bits])[0])


@pytest.mark.parametrize("decode, words", [
    (decode_e4m3_nan_on_the_top_bits, "448.0 but is"),
    (decode_e5m2_low_mantissa_as_inf, "NaN, not infinity"),
    (decode_through_ml_dtypes, "uses `ml_dtypes`"),
])
@pytest.mark.parametrize("seed", [1, 7, 12345])
def test_decode_top_binade_and_library_mistakes(decode, words, seed):
    result = ch04.check_decode(decode, seed=seed, show=False)
    assert result.status == "failed" and words in result.message, result


def quantise_subnormals_flushed(x):
    """Wrong: values E4M3 stores as subnormals flushed to 0."""
    scale = float(np.max(np.abs(x))) / 448
    scaled = x / scale
    scaled[np.abs(scaled) < 2.0**-6] = 0
    return scaled.astype(ml_dtypes.float8_e4m3fn), scale


def quantise_scale_from_all_but_the_first(x):
    """Wrong: max|x| over x[1:]."""
    scale = float(np.max(np.abs(x[1:]))) / 448
    return (x / scale).astype(ml_dtypes.float8_e4m3fn), scale


@pytest.mark.parametrize("quantise, words", [
    (quantise_subnormals_flushed, "were flushed to 0"),
    (quantise_scale_from_all_but_the_first, "your scale is"),
])
@pytest.mark.parametrize("seed", [1, 7, 12345])
def test_quantise_subnormal_and_scale_mistakes(quantise, words, seed):
    result = ch04.check_quantise_fp8(quantise, seed=seed, show=False)
    assert result.status == "failed" and words in result.message, result


@cuda.jit
def matvec_in_blocks_of_128_products(a, x, out):
    """Right, written differently: each row's products summed in blocks of 128 along k (a
    fixed step along k is not a grid's size typed in)."""
    row = cuda.grid(1)
    if row < out.shape[0]:
        total = numba.float32(0)
        for start in range(0, x.shape[0], 128):
            part = numba.float32(0)
            for k in range(start, min(start + 128, x.shape[0])):
                part += numba.float32(a[row, k]) * numba.float32(x[k])
            total += part
        out[row] = total


@cuda.jit
def matvec_without_the_unrolled_tail(a, x, out):
    """Wrong: unrolled by 4 without the last k % 4 products."""
    row = cuda.grid(1)
    if row < out.shape[0]:
        total = numba.float32(0)
        for k in range(0, x.shape[0] - 3, 4):
            for j in range(4):
                total += numba.float32(a[row, k + j]) * numba.float32(x[k + j])
        out[row] = total


@pytest.mark.parametrize("seed", [1, 7, 12345])
def test_matvec_in_blocks_along_k_passes_and_an_unrolled_loop_needs_its_tail(seed):
    assert ch04.check_matvec_fp32(matvec_in_blocks_of_128_products, seed=seed,
                                  show=False).passed
    result = ch04.check_matvec_fp32(matvec_without_the_unrolled_tail, seed=seed, show=False)
    assert result.status == "failed", result
    assert "the exact sum without the last" in result.message, result  # not "as fp16 gives"
    assert "fp16" not in result.message, result


@cuda.jit
def matvec_from_the_second_product(a, x, out):
    """Wrong: the loop over k starts at 1."""
    row = cuda.grid(1)
    if row < out.shape[0]:
        total = numba.float32(0)
        for k in range(1, x.shape[0]):
            total += numba.float32(a[row, k]) * numba.float32(x[k])
        out[row] = total


@pytest.mark.parametrize("seed", [1, 7, 12345])
def test_matvec_that_skips_the_first_product_is_told_so(seed):
    result = ch04.check_matvec_fp32(matvec_from_the_second_product, seed=seed, show=False)
    assert result.status == "failed", result
    assert "without the first product (k = 0)" in result.message, result


def _decode_by_the_rule(sign, exponent, mantissa, exponent_bits, mantissa_bits):
    bias = (1 << (exponent_bits - 1)) - 1
    top = (1 << exponent_bits) - 1
    if exponent == top and exponent_bits >= 5:
        return math.nan if mantissa else (-1) ** sign * math.inf
    if exponent == top and exponent_bits == 4 and mantissa == (1 << mantissa_bits) - 1:
        return math.nan
    if exponent == 0:
        return (-1.0) ** sign * mantissa / 2 ** mantissa_bits * 2.0 ** (1 - bias)
    return (-1) ** sign * (1 + mantissa / 2 ** mantissa_bits) * 2.0 ** (exponent - bias)


def decode_e4m3_nan_fields_in_every_format(sign, exponent, mantissa, exponent_bits,
                                           mantissa_bits):
    """Wrong: E4M3's NaN fields (exponent 15, mantissa 7) taken as NaN in every format."""
    if exponent == 15 and mantissa == 7:
        return math.nan
    return _decode_by_the_rule(sign, exponent, mantissa, exponent_bits, mantissa_bits)


def decode_only_the_positive_e4m3_nan(sign, exponent, mantissa, exponent_bits, mantissa_bits):
    """Wrong: only 0x7F is E4M3's NaN; 0xFF decodes as -480."""
    if exponent_bits == 4 and exponent == 15 and mantissa == 7:
        return math.nan if sign == 0 else -480.0
    return _decode_by_the_rule(sign, exponent, mantissa, exponent_bits, mantissa_bits)


def decode_through_a_dtype_named_by_text(sign, exponent, mantissa, exponent_bits,
                                         mantissa_bits):
    """Wrong (the library decodes): the bits viewed as a NumPy dtype named by its text."""
    if (exponent_bits, mantissa_bits) == (4, 3):
        code = np.array([(sign << 7) | (exponent << 3) | mantissa], np.uint8)
        return float(code.view(np.dtype("float8_e4m3fn"))[0])
    return _decode_by_the_rule(sign, exponent, mantissa, exponent_bits, mantissa_bits)


@pytest.mark.parametrize("seed", [1, 7, 12345])
@pytest.mark.parametrize("decode, words", [
    (decode_e4m3_nan_fields_in_every_format, "decode(%, 15, 7, 5, 10) for fp16 should be"),
    (decode_only_the_positive_e4m3_nan, "for fp8_e4m3"),
    (decode_through_a_dtype_named_by_text, "hands the bits to NumPy as `float8_e4m3fn`"),
])
def test_decode_special_codes_and_views_fail_on_every_seed(decode, words, seed):
    result = ch04.check_decode(decode, seed=seed, show=False)
    assert result.status == "failed", result
    before, _, after = words.partition("%")
    assert before in result.message and after in result.message, result


def test_decode_by_the_rule_passes():
    assert ch04.check_decode(_decode_by_the_rule, seed=3, show=False).passed


@cuda.jit
def matvec_in_thread_0(a, x, out):
    """Wrong method, right sums: thread 0 sums every row."""
    if cuda.grid(1) == 0:
        for row in range(out.shape[0]):
            total = numba.float32(0)
            for k in range(x.shape[0]):
                total += numba.float32(a[row, k]) * numba.float32(x[k])
            out[row] = total


@pytest.mark.parametrize("seed", [1, 7])
def test_matvec_in_one_thread_fails(seed):
    result = ch04.check_matvec_fp32(matvec_in_thread_0, seed=seed, show=False)
    assert result.status == "failed" and "13 rows written by one thread" in result.message, (
        result)


X_SLOTS = 4096  # more than any k the checks draw


@cuda.jit
def matvec_x_shared_without_a_barrier(a, x, out):
    # wrong: x staged in shared memory by the block's threads, read before all have written it
    xs = cuda.shared.array(X_SLOTS, np.float16)
    t = cuda.threadIdx.x
    for k in range(t, x.shape[0], cuda.blockDim.x):
        xs[k] = x[k]
    row = cuda.grid(1)
    if row < out.shape[0]:
        total = numba.float32(0)
        for k in range(x.shape[0]):
            total += numba.float32(a[row, k]) * numba.float32(xs[k])
        out[row] = total


@cuda.jit
def matvec_x_shared_with_a_barrier(a, x, out):
    # right, written differently: x staged in shared memory, a barrier before it is read
    xs = cuda.shared.array(X_SLOTS, np.float16)
    t = cuda.threadIdx.x
    for k in range(t, x.shape[0], cuda.blockDim.x):
        xs[k] = x[k]
    cuda.syncthreads()
    row = cuda.grid(1)
    if row < out.shape[0]:
        total = numba.float32(0)
        for k in range(x.shape[0]):
            total += numba.float32(a[row, k]) * numba.float32(xs[k])
        out[row] = total


@pytest.mark.parametrize("seed", [1, 7, 12345])
def test_matvec_with_x_in_shared_memory_needs_its_barrier(seed):
    result = ch04.check_matvec_fp32(matvec_x_shared_without_a_barrier, seed=seed, show=False)
    assert result.status == "failed", result.message
    assert "has no `cuda.syncthreads()`" in result.message, result.message
    assert ch04.check_matvec_fp32(matvec_x_shared_with_a_barrier, seed=seed, show=False).passed


HAS_TOOLKIT = toolkit.installed_version() is not None and not toolkit.unavailable_reason()


@cuda.jit
def matvec_float64_products(a, x, out):
    """Wrong for this exercise: the products and the sum in float64 (right values)."""
    row = cuda.grid(1)
    if row < out.shape[0]:
        acc = np.float64(0)
        for k in range(x.shape[0]):
            acc += np.float64(a[row, k]) * np.float64(x[k])
        out[row] = acc


@cuda.jit
def matvec_plain_zero_float32_products(a, x, out):
    """Wrong for this exercise: fp32 products, but a plain `0.0` start makes the sum float64 on
    a GPU (in the simulator a Python float plus a float32 stays float32)."""
    row = cuda.grid(1)
    if row < out.shape[0]:
        acc = 0.0
        for k in range(x.shape[0]):
            acc += np.float32(a[row, k]) * np.float32(x[k])
        out[row] = acc


@cuda.jit
def matvec_kahan_fp32(a, x, out):
    """Right, written differently: a compensated (Kahan) sum, all in fp32."""
    row = cuda.grid(1)
    if row < out.shape[0]:
        total = np.float32(0)
        carry = np.float32(0)
        for k in range(x.shape[0]):
            term = np.float32(a[row, k]) * np.float32(x[k]) - carry
            step = total + term
            carry = (step - total) - term
            total = step
        out[row] = total


@pytest.mark.skipif(not HAS_TOOLKIT, reason="no CUDA toolkit wheels here: nothing is compiled")
@pytest.mark.parametrize("kernel, line", [
    (matvec_float64_products, "acc += np.float64(a[row, k]) * np.float64(x[k])"),
    (matvec_plain_zero_float32_products, "acc += np.float32(a[row, k]) * np.float32(x[k])"),
    (matvec_float64_accumulator, "acc += np.float64(a[row, k]) * np.float64(x[k])"),
])
def test_matvec_names_a_float64_accumulator(kernel, line):
    result = ch04.check_matvec_fp32(kernel, seed=3, show=False)
    assert result.status == "failed", result
    assert "every row is right, but the kernel computes in float64, not fp32" in result.message
    assert line in result.message and ".f64" in result.message, result.message


@pytest.mark.skipif(not HAS_TOOLKIT, reason="no CUDA toolkit wheels here: nothing is compiled")
@pytest.mark.parametrize("seed", [1, 7])
def test_matvec_passes_a_compensated_fp32_sum_and_says_it_was_compiled(seed):
    result = ch04.check_matvec_fp32(matvec_kahan_fp32, seed=seed, show=False)
    assert result.passed, result.message
    assert "no float64 or fp16 arithmetic in the kernel compiled for a GPU" in result.message


@cuda.jit
def matvec_fp16_pairs(a, x, out):
    """Wrong: two products summed in fp16 before they join the fp32 accumulator (within fp32's
    bound, which is loose at k ~ 1,000: only the compiled code shows it)."""
    row = cuda.grid(1)
    if row < out.shape[0]:
        acc = np.float32(0)
        k = 0
        while k + 1 < x.shape[0]:
            pair = a[row, k] * x[k] + a[row, k + 1] * x[k + 1]
            acc += np.float32(pair)
            k += 2
        if k < x.shape[0]:
            acc += np.float32(a[row, k]) * np.float32(x[k])
        out[row] = acc


@cuda.jit
def matvec_fp16_chunks_of_four(a, x, out):
    """Wrong: unrolled by four, each chunk multiplied and summed in fp16, then converted."""
    row = cuda.grid(1)
    if row < out.shape[0]:
        acc = np.float32(0)
        k = 0
        while k + 3 < x.shape[0]:
            acc += np.float32(a[row, k] * x[k] + a[row, k + 1] * x[k + 1]
                              + a[row, k + 2] * x[k + 2] + a[row, k + 3] * x[k + 3])
            k += 4
        while k < x.shape[0]:
            acc += np.float32(a[row, k]) * np.float32(x[k])
            k += 1
        out[row] = acc


@pytest.mark.skipif(not HAS_TOOLKIT, reason="no CUDA toolkit wheels here: nothing is compiled")
@pytest.mark.parametrize("kernel, line", [
    (matvec_fp16_pairs, "pair = a[row, k] * x[k] + a[row, k + 1] * x[k + 1]"),
    (matvec_fp16_chunks_of_four, "acc += np.float32(a[row, k] * x[k] + a[row, k + 1] * x[k + 1]"),
])
@pytest.mark.parametrize("seed", [1, 7])
def test_matvec_names_fp16_arithmetic_before_the_fp32_sum(kernel, line, seed):
    result = ch04.check_matvec_fp32(kernel, seed=seed, show=False)
    assert result.status == "failed", result
    assert "computes in fp16 before the fp32 accumulator" in result.message, result.message
    assert line in result.message and "__half *" in result.message, result.message


def quantise_with_the_largest_row_sum(x):
    """Wrong: np.linalg.norm(x, np.inf) is max|x| for a vector but a matrix's largest row sum."""
    scale = float(np.linalg.norm(x, np.inf)) / 448
    return (x / scale).astype(ml_dtypes.float8_e4m3fn), scale


def quantise_a_flat_view(x):
    """Right, written differently: max|x| over the tensor flattened, in Python."""
    scale = max(abs(float(value)) for value in x.reshape(-1)) / 448
    return (x / scale).astype(ml_dtypes.float8_e4m3fn), scale


@pytest.mark.parametrize("seed", [1, 2])
def test_quantise_takes_one_scale_for_a_whole_matrix(seed):
    wrong = ch04.check_quantise_fp8(quantise_with_the_largest_row_sum, seed=seed, show=False)
    assert wrong.status == "failed", wrong
    assert "for a weight matrix" in wrong.message and "max|x| / 448" in wrong.message, (
        wrong.message)
    right = ch04.check_quantise_fp8(quantise_a_flat_view, seed=seed, show=False)
    assert right.passed and "four tensors" in right.message, right.message
