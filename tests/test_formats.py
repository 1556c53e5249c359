"""gpulab.formats against the published constants.

The constants below are typed in from the standards on purpose: the table in gpulab.formats is
computed from the types, and this is where the two must agree exactly.
"""

import gpulab  # noqa: F401  (must come before numba: it chooses the simulator or the GPU)

# isort: split
import math

import ml_dtypes
import numpy as np
import pytest

from gpulab import formats

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


@pytest.mark.parametrize("name", list(PUBLISHED))
def test_the_table_matches_the_published_values_exactly(name):
    fmt = formats.get_format(name)
    (sign, exponent, mantissa, bias, largest, normal, subnormal, eps, nbytes, inf,
     nan) = PUBLISHED[name]
    assert (fmt.sign_bits, fmt.exponent_bits, fmt.mantissa_bits) == (sign, exponent, mantissa)
    assert fmt.exponent_bias == bias
    assert fmt.max_value == largest
    assert fmt.smallest_normal == normal
    assert fmt.smallest_subnormal == subnormal
    assert fmt.epsilon == eps
    assert fmt.bytes_per_value == nbytes
    assert (fmt.has_infinity, fmt.has_nan) == (inf, nan)
    assert fmt.derived == (name == "tf32")


def test_every_format_is_in_the_table_in_order():
    assert tuple(formats.FORMATS) == formats.FORMAT_NAMES
    assert [row["format"] for row in formats.table()] == list(formats.FORMAT_NAMES)
    text = formats.format_table()
    assert "tf32*" in text and "derived" in text


@pytest.mark.parametrize("name", ["fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1"])
def test_limits_agree_with_every_bit_pattern_of_the_type(name):
    """A second, independent computation: decode every code the type has."""
    fmt = formats.get_format(name)
    container = np.uint16 if fmt.bits == 16 else np.uint8
    codes = np.arange(2**fmt.bits, dtype=container)
    with np.errstate(invalid="ignore"):  # NaN codes
        values = codes.view(fmt.dtype).astype(np.float64)
    finite = values[np.isfinite(values)]
    assert finite.max() == fmt.max_value
    assert finite[finite > 0].min() == fmt.smallest_subnormal
    exponent_field = (codes.astype(np.int64) >> fmt.mantissa_bits) & ((1 << fmt.exponent_bits) - 1)
    assert values[(exponent_field == 1) & (values > 0)].min() == fmt.smallest_normal
    one = np.flatnonzero(values == 1.0)[0]
    assert values[one + 1] - 1.0 == fmt.epsilon  # the next value after 1


def test_sources_name_the_documents():
    assert "IEEE Std 754-2019" in formats.get_format("fp16").source
    assert "OFP8" in formats.get_format("fp8_e4m3").source
    assert "Microscaling" in formats.get_format("fp4_e2m1").source
    assert "DERIVED" in formats.get_format("tf32").source
    assert formats.get_format("tf32").label.startswith("derived")
    assert "ml_dtypes.finfo" in formats.get_format("bf16").label


def test_names_and_aliases():
    assert formats.get_format("float16").name == "fp16"
    assert formats.get_format("fp8").name == "fp8_e4m3"
    assert formats.get_format("E5M2").name == "fp8_e5m2"
    assert formats.get_format(formats.FORMATS["bf16"]).name == "bf16"
    with pytest.raises(ValueError, match="no number format called 'fp7'"):
        formats.get_format("fp7")


# --- rounding -------------------------------------------------------------------------------


def test_tf32_rounds_to_nearest_even_on_ten_bits():
    one_ulp = 2.0**-10
    values = [1 + one_ulp, 1 + one_ulp / 2, 1 + 3 * one_ulp / 2, 1 + one_ulp / 4,
              -(1 + 3 * one_ulp / 2), 0.0]
    expected = [1 + one_ulp, 1.0, 1 + 2 * one_ulp, 1.0, -(1 + 2 * one_ulp), 0.0]
    assert formats.round_to(values, "tf32").tolist() == expected
    special = formats.round_tf32(np.array([np.inf, -np.inf, np.nan, 3.4028e38], np.float32))
    assert np.isinf(special[0]) and np.isinf(special[1]) and np.isnan(special[2])
    assert np.isinf(special[3])  # beyond tf32's largest value (3.4012e38): rounds to infinity
    assert formats.round_to([3.4e38], "tf32")[0] == (2 - 2**-9) * 2.0**127


def test_overflow_follows_each_format():
    big = [1e6]
    assert np.isinf(formats.round_to(big, "fp16")[0])
    assert np.isinf(formats.round_to(big, "fp8_e5m2")[0])
    assert np.isnan(formats.round_to(big, "fp8_e4m3")[0])  # no infinity: NaN
    assert formats.round_to(big, "fp4_e2m1")[0] == 6.0  # neither: saturates
    assert formats.round_to(big, "fp8_e4m3", saturate=True)[0] == 448.0
    assert formats.round_to([-1e6], "fp16", saturate=True)[0] == -65504.0


def test_quantise_round_trip_with_a_per_tensor_scale():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1000) * 1e4
    q = formats.quantise(x, "fp8_e4m3")
    assert q.values.dtype == np.dtype(ml_dtypes.float8_e4m3fn)
    assert q.scale == np.abs(x).max() / 448
    back = q.dequantise()
    normal = np.abs(x) >= q.scale * 2.0**-6
    assert np.all(np.abs(back - x)[normal] <= np.abs(x)[normal] * 2.0**-4)
    assert np.all(np.abs(back - x)[~normal] <= q.scale * 2.0**-10)
    assert np.array_equal(formats.round_trip(x, "fp8_e4m3"), back)
    unscaled = formats.quantise(x, "fp8_e4m3", scale=None, saturate=False)
    assert np.isnan(unscaled.dequantise()).any()  # without a scale, 1e4 overflows E4M3
    assert q.bytes_moved == 1000 * 1 + 4


def test_quantise_edge_cases():
    assert formats.per_tensor_scale(np.zeros(4), "fp8_e4m3") == 1.0
    assert formats.quantise(np.zeros(3), "fp4").dequantise().tolist() == [0, 0, 0]
    with pytest.raises(ValueError, match="positive"):
        formats.quantise([1.0], "fp8", scale=0.0)
    with pytest.raises(ValueError, match="'amax'"):
        formats.quantise([1.0], "fp8", scale="max")
    with pytest.raises(ValueError, match="inf or NaN"):
        formats.per_tensor_scale([1.0, np.inf], "fp8")


def test_decode_tables():
    e4m3 = formats.decode_table("fp8_e4m3")
    assert e4m3.dtype == np.float32 and e4m3.shape == (256,)
    assert e4m3[0x7E] == 448 and np.isnan(e4m3[0x7F]) and e4m3[0x01] == 2.0**-9
    assert e4m3[0x80 | 0x38] == -1.0
    assert formats.decode_table("fp4").tolist()[:8] == [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    with pytest.raises(ValueError, match="16-bit codes"):
        formats.decode_table("fp16")


# --- bits -----------------------------------------------------------------------------------

BIT_CASES = [
    (1.5, "fp16", 0x3E00, "normal"),
    (0.1, "fp16", 0x2E66, "normal"),
    (-2.0, "fp16", 0xC000, "normal"),
    (65504.0, "fp16", 0x7BFF, "normal"),
    (2.0**-24, "fp16", 0x0001, "subnormal"),
    (1e6, "fp16", 0x7C00, "infinity"),
    (0.0, "bf16", 0x0000, "zero"),
    (1.0, "bf16", 0x3F80, "normal"),
    (448.0, "fp8_e4m3", 0x7E, "normal"),
    (1000.0, "fp8_e4m3", 0x7F, "nan"),
    (57344.0, "fp8_e5m2", 0x7B, "normal"),
    (6.0, "fp4_e2m1", 0x7, "normal"),
    (-0.5, "fp4_e2m1", 0x9, "subnormal"),
    (1.0, "tf32", 0x1FC00, "normal"),  # exponent 127 << 10 mantissa bits
]


@pytest.mark.parametrize("value, name, code, kind", BIT_CASES)
def test_bits_of_known_values(value, name, code, kind):
    layout = formats.bits_of(value, name)
    assert layout.code == code
    assert layout.kind == kind
    sign, exponent, mantissa = layout.fields
    fmt = formats.get_format(name)
    assert (len(sign), len(exponent), len(mantissa)) == (1, fmt.exponent_bits, fmt.mantissa_bits)
    assert int(sign + exponent + mantissa, 2) == code
    if kind in ("normal", "subnormal", "zero"):
        decoded = formats.value_of_fields(layout.sign, layout.exponent, layout.mantissa, name)
        assert decoded == layout.stored


def test_bit_layout_text():
    layout = formats.bits_of(0.1, "fp16")
    assert layout.formula == "+1 × 2^(11 - 15) × (1 + 614/1024) = 0.0999755859"
    assert layout.stored == 0.0999755859375
    assert "rounded" in str(layout) and "0x2E66" in str(layout)
    assert "sign | exponent | mantissa" in layout._repr_html_()
    assert "exactly" in str(formats.bits_of(1.5, "fp16"))
    assert "subnormal" in formats.bits_of(2.0**-24, "fp16").formula


def test_value_of_fields_matches_ml_dtypes_on_random_codes():
    rng = np.random.default_rng(3)
    for name in ("fp16", "bf16", "fp8_e4m3", "fp8_e5m2"):
        fmt = formats.get_format(name)
        container = np.uint16 if fmt.bits == 16 else np.uint8
        for code in rng.integers(0, 2**fmt.bits, 200):
            value = float(np.array([code], container).view(fmt.dtype)[0])
            if not math.isfinite(value):
                continue
            m = int(code) & ((1 << fmt.mantissa_bits) - 1)
            e = (int(code) >> fmt.mantissa_bits) & ((1 << fmt.exponent_bits) - 1)
            s = int(code) >> (fmt.bits - 1)
            assert formats.value_of_fields(s, e, m, fmt) == value


# --- memory ---------------------------------------------------------------------------------


def test_memory_per_format():
    assert formats.memory_bytes(7e9, "fp16") == 14e9
    assert formats.memory_bytes(7e9, "fp32") == 28e9
    assert formats.memory_bytes(7e9, "fp4_e2m1") == 3.5e9
    assert formats.memory_bytes(64, "fp4", scale_block=32) == 32 + 2
    rows = {row["format"]: row for row in formats.memory_table(7e9)}
    assert "tf32" not in rows and rows["fp8_e4m3"]["gb"] == 7.0
    with pytest.raises(ValueError, match="parameters"):
        formats.memory_bytes(-1, "fp16")
    with pytest.raises(ValueError, match="scale_block"):
        formats.memory_bytes(10, "fp4", scale_block=0)
