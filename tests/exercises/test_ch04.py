"""Chapter 04's exercise checks against right and typical wrong answers."""

import gpulab  # noqa: F401  (must come before numba: it chooses the simulator or the GPU)

# isort: split

import ml_dtypes
import numpy as np
import pytest
from numba import cuda

from gpulab.exercises import ch04

# (sign, exponent, mantissa bits, bias, max, smallest normal, smallest subnormal, epsilon,
#  bytes per value, has infinity, has NaN)
PUBLISHED = {
    # IEEE 754-2019, Table 3.5: binary64 p = 53, emax = 1023
    "fp64": (1, 11, 52, 1023, (2 - 2**-52) * 2.0**1023, 2.0**-1022, 2.0**-1074, 2.0**-52, 8,
             True, True),
    # binary32: p = 24, emax = 127
    "fp32": (1, 8, 23, 127, (2 - 2**-23) * 2.0**127, 2.0**-126, 2.0**-149, 2.0**-23, 4,
             True, True),
    # TF32 (NVIDIA A100 whitepaper): 8 exponent, 10 mantissa bits, fp32's range, stored as fp32
    "tf32": (1, 8, 10, 127, (2 - 2**-10) * 2.0**127, 2.0**-126, 2.0**-136, 2.0**-10, 4,
             True, True),
    # binary16: p = 11, emax = 15; max 65504
    "fp16": (1, 5, 10, 15, 65504.0, 2.0**-14, 2.0**-24, 2.0**-10, 2, True, True),
    # bfloat16: binary32's exponent, 7 stored mantissa bits
    "bf16": (1, 8, 7, 127, (2 - 2**-7) * 2.0**127, 2.0**-126, 2.0**-133, 2.0**-7, 2,
             True, True),
    # OCP OFP8 v1.0, Table 1: E4M3 max S.1111.110 = 448, no infinities
    "fp8_e4m3": (1, 4, 3, 7, 448.0, 2.0**-6, 2.0**-9, 2.0**-3, 1, False, True),
    # E5M2 max S.11110.11 = 57344, IEEE-like infinities and NaN
    "fp8_e5m2": (1, 5, 2, 15, 57344.0, 2.0**-14, 2.0**-16, 2.0**-2, 1, True, True),
    # OCP MX v1.0, 5.3.3: FP4 E2M1 max 6.0, min normal 1.0, min subnormal 0.5, no inf/NaN
    "fp4_e2m1": (1, 2, 1, 1, 6.0, 1.0, 0.5, 0.5, 0.5, False, False),
}


# --- chapter 04's exercise checks -----------------------------------------------------------


def decode_right(sign, exponent, mantissa, exponent_bits, mantissa_bits):
    bias = 2 ** (exponent_bits - 1) - 1
    fraction = mantissa / 2**mantissa_bits
    value = 2.0 ** (1 - bias) * fraction if exponent == 0 else \
        2.0 ** (exponent - bias) * (1 + fraction)
    return -value if sign else value


def decode_no_subnormals(sign, exponent, mantissa, exponent_bits, mantissa_bits):
    bias = 2 ** (exponent_bits - 1) - 1
    value = 2.0 ** (exponent - bias) * (1 + mantissa / 2**mantissa_bits)
    return -value if sign else value


def decode_wrong_bias(sign, exponent, mantissa, exponent_bits, mantissa_bits):
    return decode_right(sign, exponent, mantissa, exponent_bits, mantissa_bits) / 2


def decode_no_leading_one(sign, exponent, mantissa, exponent_bits, mantissa_bits):
    bias = 2 ** (exponent_bits - 1) - 1
    power = 1 - bias if exponent == 0 else exponent - bias
    value = 2.0**power * mantissa / 2**mantissa_bits
    return -value if sign else value


def decode_unsigned(sign, exponent, mantissa, exponent_bits, mantissa_bits):
    return abs(decode_right(sign, exponent, mantissa, exponent_bits, mantissa_bits))


def decode_stub(sign, exponent, mantissa, exponent_bits, mantissa_bits):
    # YOUR CODE HERE
    raise NotImplementedError()


@pytest.mark.parametrize("function, status, words", [
    (decode_right, "passed", "decode right"),
    (decode_no_subnormals, "failed", "subnormal"),
    (decode_wrong_bias, "failed", "bias used was 16"),
    (decode_no_leading_one, "failed", "implicit leading 1"),
    (decode_unsigned, "failed", "sign bit was ignored"),
    (decode_stub, "not attempted", "NotImplementedError"),
    (None, "not attempted", "no function"),
    (42, "failed", "not int"),
])
def test_check_decode(function, status, words):
    result = ch04.check_decode(function, seed=11, show=False)
    assert result.status == status, result.message
    assert words in result.message
    assert status == "passed" or result.hint


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
    assert "np.float32(0)" in result.hint and "simulator" in result.hint


def quantise_right(x):
    scale = float(np.max(np.abs(x))) / 448
    return (x / scale).astype(ml_dtypes.float8_e4m3fn), scale


def quantise_power_of_two(x):
    scale = 2.0 ** np.ceil(np.log2(np.max(np.abs(x)) / 448))
    return (x / scale).astype(ml_dtypes.float8_e4m3fn), scale


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


def quantise_to_fp16(x):
    scale = float(np.max(np.abs(x))) / 448
    return (x / scale).astype(np.float16), scale


def quantise_drops_the_scale(x):
    return quantise_right(x)[0]


def quantise_stub(x):
    # YOUR CODE HERE
    raise NotImplementedError()


def quantise_crashes(x):
    return x / undefined_name  # noqa: F821


@pytest.mark.parametrize("function, status, words", [
    (quantise_right, "passed", "whole E4M3 range"),
    (quantise_power_of_two, "passed", "whole E4M3 range"),
    (quantise_unscaled, "failed", "NaN"),
    (quantise_multiplies, "failed", "multiply by the scale instead of dividing"),
    (quantise_wastes_range, "failed", "less than half"),
    (quantise_clips, "failed", "beyond 448"),
    (quantise_to_fp16, "failed", "not float8_e4m3fn"),
    (quantise_drops_the_scale, "failed", "not a pair"),
    (quantise_stub, "not attempted", "NotImplementedError"),
    (quantise_crashes, "failed", "NameError"),
])
def test_check_quantise_fp8(function, status, words):
    result = ch04.check_quantise_fp8(function, seed=31, show=False)
    assert result.status == status, result.message
    assert words in result.message, result.message
    assert status == "passed" or result.hint


def test_a_check_prints_its_result(capsys):
    ch04.check_decode(decode_stub, seed=1)
    assert "NOT ATTEMPTED" in capsys.readouterr().out
