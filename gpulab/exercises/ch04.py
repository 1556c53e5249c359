"""Chapter 04's exercises: decode a format's bits, accumulate in fp32, quantise to fp8, each
checked on random data against :mod:`gpulab.formats` / :mod:`gpulab.reference`.

- :func:`check_decode`: exercise 1, ``decode(sign, exponent, mantissa, exponent_bits,
  mantissa_bits) -> float``.
- :func:`check_matvec_fp32`: exercise 2, the kernel ``matvec_fp32(a, x, out)``.
- :func:`check_quantise_fp8`: exercise 3, the host function ``quantise_e4m3(x) -> (q, scale)``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from gpulab import device, formats, reference
from gpulab.exercises.compiling import (
    float16_lines,
    float64_cost,
    float64_lines,
    lines_said,
    numba_type,
)
from gpulab.exercises.evidence import is_number, shown_apart, writes_of
from gpulab.exercises.grid_stride import one_per_thread
from gpulab.exercises.learner_code import modules_used, words_used
from gpulab.exercises.mistakes import Mistake, reject
from gpulab.exercises.results import GLOBAL_INDEX_HINT, GUARD_HINT, CheckFailedError
from gpulab.exercises.running import call_learner, run_elementwise
from gpulab.exercises.source_rules import SHARED_BARRIER_HINT, shared_array_without_barrier
from gpulab.exercises.spec import CheckSpec, reject_unshared_work, under_two_blocks
from gpulab.exercises.trial import Trial, draw_size, tier_key

# --- exercise 1: decode the bits ------------------------------------------------------------

DECODE_FORMATS = ("fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1")
# Libraries that decode the bits themselves (the check's yardstick among them).
DECODE_LIBRARIES = ("ml_dtypes", "struct")
# The float types NumPy (with ml_dtypes' types registered) decodes bits as, by name or text:
# viewing the code's bits as one of them is the library decoding.
DECODE_VIEWS = frozenset({"float16", "half", "bfloat16", "float8_e4m3fn", "float8_e5m2",
                          "float8_e4m3", "float4_e2m1fn", "e"})
DECODE_STUB_HINT = (
    "start with the bias, 2**(exponent_bits - 1) - 1, and the normal rule of section 1; then "
    "handle exponent field 0 (subnormals) and the all-ones exponent field (inf and NaN), as the "
    "exercise describes. The hints above the cell go step by step."
)
RESERVED_HINT = (
    "in fp16, bf16 and E5M2 (5 or more exponent bits, IEEE 754's rule) an exponent field of all "
    "ones is not a number: mantissa 0 is infinity (negative with sign 1), any other mantissa is "
    "NaN (the math module has both)."
)
E4M3_HINT = (
    "E4M3 (4 exponent bits, 3 mantissa bits) has no infinity: exponent field 1111 holds normal "
    "numbers (256 to 448) except for the one code S.1111.111, which is NaN."
)
E2M1_HINT = (
    "E2M1 (2 exponent bits) has no special codes at all: exponent field 11 holds the normal "
    "numbers 4 and 6."
)


def _code_value(fmt, sign: int, exponent: int, mantissa: int) -> float:
    """The value of the fields, from ml_dtypes (the yardstick)."""
    code = (sign << (fmt.exponent_bits + fmt.mantissa_bits)) | (exponent << fmt.mantissa_bits) \
        | mantissa
    container = np.uint16 if fmt.bits == 16 else np.uint8
    return float(np.array([code], dtype=container).view(fmt.dtype)[0])


def _decode_cases(rng: np.random.Generator, per_format: int = 10) -> list[tuple]:
    """(format, sign, exponent, mantissa, expected value) for random codes of each format, in
    three groups: normal numbers (a wrong bias or a missing leading 1 shows there first), then
    subnormals, +0 and -0 (the exponent-0 rule), then the top binade (inf and NaN in fp16, bf16
    and E5M2; E4M3's one NaN code and its numbers up to 448; E2M1's 4 and 6)."""
    normal, subnormal, top_binade = [], [], []
    for name in DECODE_FORMATS:
        fmt = formats.get_format(name)
        top, mantissas = (1 << fmt.exponent_bits) - 1, 1 << fmt.mantissa_bits
        for _ in range(per_format):
            exponent = int(rng.integers(1, top))  # 1 .. top - 1: normal in every format
            normal.append((fmt, int(rng.integers(0, 2)), exponent,
                           int(rng.integers(0, mantissas))))
        subnormal += [(fmt, 0, 0, 0), (fmt, 1, 0, 1), (fmt, 1, 0, 0), (fmt, 0, 0, mantissas - 1)]
        subnormal += [(fmt, int(rng.integers(0, 2)), 0, int(rng.integers(1, mantissas)))
                      for _ in range(2)]
        if fmt.exponent_bits >= 5:  # IEEE's inf and NaN (fp16, bf16, E5M2): every NaN
            # mantissa of a small format; of a large one the lowest, the top bit alone, all
            # ones and one at random
            nans = (range(1, mantissas) if mantissas <= 8 else
                    (1, mantissas >> 1, mantissas - 1, int(rng.integers(2, mantissas - 1))))
            top_binade += [(fmt, 0, top, 0), (fmt, 1, top, 0)]
            top_binade += [(fmt, int(rng.integers(0, 2)), top, int(m)) for m in nans]
        elif name == "fp8_e4m3":  # every code of its top binade: numbers up to 448, one NaN
            top_binade += [(fmt, int(rng.integers(0, 2)), top, m) for m in range(mantissas)]
            top_binade.append((fmt, 1 - top_binade[-1][1], top, mantissas - 1))  # both NaNs
        else:  # E2M1
            top_binade += [(fmt, int(rng.integers(0, 2)), top, m) for m in range(mantissas)]
        if fmt.exponent_bits > 4 and fmt.mantissa_bits >= 3:  # E4M3's NaN fields are a number
            normal.append((fmt, int(rng.integers(0, 2)), 15, 7))
    return [(fmt, s, e, m, _code_value(fmt, s, e, m))
            for fmt, s, e, m in normal + subnormal + top_binade]


@dataclass
class Decoded:
    """What ``decode(sign, exponent, mantissa, ...)`` returned (``got``) for one code of
    ``fmt``, against ``expected``: the evidence :data:`DECODE_MISTAKES` are told from."""

    fmt: object
    sign: int
    exponent: int
    mantissa: int
    got: object
    expected: float
    seed: int

    def __post_init__(self):
        fmt = self.fmt
        self.call = (f"decode({self.sign}, {self.exponent}, {self.mantissa}, "
                     f"{fmt.exponent_bits}, {fmt.mantissa_bits}) for {fmt.name}")
        self.bias = fmt.exponent_bias
        self.fraction = self.mantissa / 2**fmt.mantissa_bits
        self.signed = -1.0 if self.sign else 1.0
        self.all_ones = self.exponent == (1 << fmt.exponent_bits) - 1
        self.ieee_top = self.all_ones and fmt.exponent_bits >= 5  # inf and NaN there
        self.normal_rule = self.signed * 2.0**(self.exponent - self.bias) * (1 + self.fraction)

    @property
    def summary(self) -> str:
        return f"{self.call} should be {self.expected!r} but is {self.got!r}"

    def gave(self, value: float) -> bool:
        return is_number(self.got) and _same(float(self.got), value)

    def special(self) -> bool:
        return is_number(self.got) and not math.isfinite(float(self.got))

    def with_fraction(self, fraction: float) -> float:
        """The value with another ``fraction`` of the mantissa (subnormal or normal rule)."""
        if self.exponent == 0:
            return self.signed * 2.0**(1 - self.bias) * fraction
        return self.signed * 2.0**(self.exponent - self.bias) * (1 + fraction)

    def wrong_bias(self) -> int | None:
        """The bias that gives ``got``, if one of the usual wrong ones does."""
        for bias in (self.bias + 1, self.bias - 1, 2**(self.fmt.exponent_bits - 1), 15, 127, 7):
            power = 1 - bias if self.exponent == 0 else self.exponent - bias
            lead = 0 if self.exponent == 0 else 1
            if bias != self.bias and self.gave(self.signed * 2.0**power * (lead + self.fraction)):
                return bias
        return None


def _not_a_number(did: str, kind, hint: str) -> Mistake:
    return Mistake(did, lambda e: not is_number(e.got) and kind(e.got),
                   lambda e: (f"{e.call} returned {e.got!r:.60} (a {type(e.got).__name__}), not "
                              "a number"), hint)


BIAS_HINT = (
    "the bias is one less than half of 2 to the number of exponent bits: 15 for fp16, 127 for "
    "bf16, 7 for E4M3, 1 for E2M1."
)
DECODE_MISTAKES = (
    _not_a_number("a string such as `'inf'`", lambda got: isinstance(got, str),
                  "return the number itself (the math module has inf and nan), not a string."),
    _not_a_number("a list", lambda got: isinstance(got, (list, tuple, np.ndarray)),
                  "return one number, not a sequence."),
    _not_a_number("`None` (no return)", lambda got: got is None,
                  "end every path through the function by returning the value."),
    _not_a_number("another object", lambda got: True, "return the value as a float."),
    Mistake("the all-ones exponent field decoded as a number",
            lambda e: e.ieee_top and e.gave(e.normal_rule),
            lambda e: f"{e.summary}: the all-ones exponent field was decoded as a number",
            RESERVED_HINT),
    Mistake("inf and NaN confused (mantissa 0)",
            lambda e: e.ieee_top and e.mantissa == 0 and e.gave(math.nan),
            lambda e: (f"{e.summary}: a zero mantissa with the all-ones exponent is infinity, "
                       "not NaN"), RESERVED_HINT),
    Mistake("the sign of infinity",
            lambda e: e.ieee_top and e.mantissa == 0 and e.gave(-e.signed * math.inf),
            lambda e: f"{e.summary}: the sign of infinity is wrong",
            "a sign bit of 1 makes it -inf, 0 makes it +inf."),
    Mistake("inf and NaN confused (a non-zero mantissa)",
            lambda e: e.ieee_top and e.mantissa and e.special() and not math.isnan(e.got),
            lambda e: (f"{e.summary}: a non-zero mantissa with the all-ones exponent is NaN, "
                       "not infinity"), RESERVED_HINT),
    Mistake("E4M3's NaN decoded as 480",
            lambda e: (e.fmt.name == "fp8_e4m3" and e.all_ones and e.mantissa == 7
                       and e.gave(e.normal_rule)),
            lambda e: f"{e.summary}: S.1111.111 is E4M3's NaN, not the number {e.normal_rule:g}",
            E4M3_HINT),
    Mistake("E4M3 given IEEE's special codes",
            lambda e: e.fmt.name == "fp8_e4m3" and e.all_ones and e.mantissa != 7 and e.special(),
            lambda e: (f"{e.summary}: E4M3 was decoded with IEEE's rule for the all-ones "
                       "exponent field"), E4M3_HINT),
    Mistake("E2M1 given special codes",
            lambda e: e.fmt.name == "fp4_e2m1" and e.all_ones and e.special(),
            lambda e: f"{e.summary}: E2M1 was given special codes it does not have", E2M1_HINT),
    Mistake("subnormals decoded as normal numbers",
            lambda e: e.exponent == 0 and e.gave(e.signed * 2.0**-e.bias * (1 + e.fraction)),
            lambda e: (f"{e.summary}: a subnormal (exponent field 0) was decoded like a normal "
                       "number"),
            "exponent field 0 has no implicit leading 1, and it uses the same power of two as "
            "exponent field 1: the value is the mantissa's fraction alone times that power."),
    Mistake("subnormals with exponent −bias",
            lambda e: e.exponent == 0 and e.gave(e.signed * 2.0**-e.bias * e.fraction),
            lambda e: f"{e.summary}: the subnormal's exponent is 0 - bias; it is 1 - bias",
            "subnormals continue where the normals stop: the same power of two as exponent "
            "field 1."),
    Mistake("the implicit 1 missing",
            lambda e: e.exponent != 0 and e.gave(
                e.signed * 2.0**(e.exponent - e.bias) * e.fraction),
            lambda e: f"{e.summary}: the implicit leading 1 of a normal number is missing",
            "a normal number's significand is 1 plus the mantissa's fraction: the leading 1 is "
            "not stored, but it is there."),
    Mistake("the mantissa's fraction lost (`mantissa // 2**M`, a whole number)",
            lambda e: e.exponent != 0 and e.mantissa and e.gave(
                e.signed * 2.0**(e.exponent - e.bias)),
            lambda e: f"{e.summary}: the value has no fraction: the mantissa's bits are lost",
            "the fraction is mantissa / 2**mantissa_bits, between 0 and 1: `//` would round it "
            "down to 0."),
    Mistake("the fraction as mantissa / (2**M - 1), not / 2**M",
            lambda e: e.mantissa and e.gave(e.with_fraction(
                e.mantissa / (2**e.fmt.mantissa_bits - 1))),
            lambda e: (f"{e.summary}: that takes the fraction as mantissa / (2**M - 1) = "
                       f"{e.mantissa} / {2**e.fmt.mantissa_bits - 1}"),
            "the M mantissa bits count in steps of 1 / 2**M: the fraction is mantissa / 2**M "
            "(the largest mantissa, all ones, is just under 1)."),
    Mistake("the mantissa read as decimal digits (0.<mantissa>)",
            lambda e: e.mantissa and e.gave(e.with_fraction(float(f"0.{e.mantissa}"))),
            lambda e: (f"{e.summary}: that takes the fraction as 0.{e.mantissa}, the mantissa's "
                       "decimal digits"),
            "the mantissa is a binary fraction: its value is mantissa / 2**M, not the digits of "
            "the number written after a decimal point."),
    Mistake("the bias off by one, or another format's", lambda e: e.wrong_bias() is not None,
            lambda e: f"{e.summary}: the bias used was {e.wrong_bias()}, not {e.bias}",
            BIAS_HINT),
    Mistake("the sign ignored (of every value, or only of zero: -0.0 expected)",
            lambda e: e.sign and e.gave(abs(e.expected)) if math.isfinite(e.expected) else False,
            lambda e: f"{e.summary}: the sign bit was ignored" if e.expected else (
                f"{e.summary}: the sign bit of a zero was ignored: -0.0 is a value of its own"
                + (" (an int 0 has no sign)" if isinstance(e.got, int) else "")),
            "a sign bit of 1 makes the value negative, zero included."),
    Mistake("another value", lambda e: True, lambda e: e.summary,
            "compare your function with the rules in the exercise, one case at a time: sign, "
            "exponent field 0, all ones, anything else."),
)
DECODE = CheckSpec(
    "decode", "decode(sign, exponent, mantissa, exponent_bits, mantissa_bits) -> float",
    DECODE_STUB_HINT, DECODE_MISTAKES, title="1. decode the bits", call="check_decode(decode)",
    holds="the value of random bit fields of fp16, bf16, E4M3, E5M2 and E2M1 as ml_dtypes gives "
          "it: normal numbers, subnormals and ±0, and the all-ones exponent field (±inf and "
          "NaN in fp16, bf16 and E5M2; E4M3's numbers up to 448 and its one NaN code; E2M1's 4 "
          "and 6); the answer a number",
    also="a library that decodes the bits (ml_dtypes, struct); an exception (named)")


def _same(got: float, expected: float) -> bool:
    if math.isnan(expected) or math.isnan(got):
        return math.isnan(expected) and math.isnan(got)
    if expected == 0:  # -0.0 is not 0.0: the exercise's sign rule holds for zero, as in ml_dtypes
        return got == 0 and math.copysign(1, got) == math.copysign(1, expected)
    return got == expected or math.isclose(got, expected, rel_tol=1e-12)


@DECODE.check
def check_decode(decode, seed: int | None = None) -> str:
    """The codes are tried in three groups, in this order (:func:`_decode_cases`): normal
    numbers, then subnormals and zero (+0 and -0 on every seed), then the all-ones exponent
    field; the first code that decodes wrong fails. A float or an int counts as a number, but
    only the float -0.0 as -0: an int 0 has no sign, so it loses the code's sign bit."""
    if decode is not None and decode is not Ellipsis and (
            used := modules_used(decode, DECODE_LIBRARIES)):
        raise CheckFailedError(
            f"your decode uses `{used[0]}`, which decodes the bits itself: the check compares "
            "with ml_dtypes, so it would be comparing a library with itself.",
            "decode with the rule of section 1 yourself: the sign, the exponent field less the "
            "bias, the mantissa with its leading 1 (or 0 for subnormals), and the all-ones "
            "exponent field's special cases.")
    words = words_used(decode) if decode not in (None, Ellipsis) else set()
    if words & DECODE_VIEWS and words & {"view", "frombuffer"}:
        raise CheckFailedError(
            f"your decode hands the bits to NumPy as `{sorted(words & DECODE_VIEWS)[0]}` (a "
            "view, or an array read from bytes), and NumPy decodes them itself: the check "
            "compares with the same decoding, so it would be comparing a library with itself.",
            "decode with the rule of section 1 yourself: the sign, the exponent field less the "
            "bias, the mantissa with its leading 1 (or 0 for subnormals), and the all-ones "
            "exponent field's special cases.")
    cases = _decode_cases(np.random.default_rng(seed))
    for fmt, sign, exponent, mantissa, expected in cases:
        answer = Decoded(fmt, sign, exponent, mantissa, None, expected, seed)
        answer.got = call_learner(decode, sign, exponent, mantissa, fmt.exponent_bits,
                                  fmt.mantissa_bits, stub_hint=DECODE_STUB_HINT,
                                  call=f"{answer.call} (seed={seed})")
        if not answer.gave(expected):
            DECODE.reject(answer)
    names = ", ".join(DECODE_FORMATS)  # not `formats`: that is the module
    return (f"all {len(cases)} bit patterns decode right ({names}; subnormals, ±0, "
            f"infinities and NaN included; seed={seed}).")


# --- exercise 2: an fp32 accumulator --------------------------------------------------------

MATVEC_STUB_HINT = (
    "one thread per row: find the thread's row, let only rows inside `out` work, add up that "
    "row's products in an fp32 variable, write it to out. The hints above the cell go step by "
    "step."
)
FP16_ACCUMULATOR_HINT = (
    "start the sum as a float32 zero, named as such: not a plain `0.0` or the inputs' own type. "
    "In the simulator a plain `0.0` plus a float16 gives float16 (NumPy's rule for Python "
    "numbers), and on a GPU Numba would make it float64: name the type you want."
)
FP16_PRODUCT_HINT = (
    "convert each factor to fp32 before multiplying, not the product after: the product of two "
    "fp16 numbers is exact in fp32, but a product of two fp16 values is computed in fp16 and "
    "rounded first."
)
# Rows are threads; k is each thread's chain of additions. Sizes per tier.
MATVEC_ROWS = {"sim": (40, 100), "gpu": (2_000, 20_000)}
MATVEC_K = {"sim": (900, 1_400), "gpu": (2_000, 4_000)}
# The two block sizes of the check's launches, one pair drawn per seed: the second twice the
# first, and more than two blocks of the larger, so a kernel that hard-codes any block size L
# fails on every seed: with blocks smaller than L it leaves rows between blocks unwritten, and
# with blocks at least twice L it never reaches the last rows.
MATVEC_BLOCKS = {"sim": ((8, 16), (12, 24), (16, 32)),
                 "gpu": ((64, 128), (96, 192), (128, 256))}


@dataclass
class MatvecSums:
    """What the learner's ``matvec_fp32`` wrote to ``out`` (``got``, float64, NaN where never
    written) for ``a`` (rows x k) and ``x`` under ``trial``: the evidence
    :data:`MATVEC_MISTAKES` are told from."""

    got: np.ndarray
    a: np.ndarray
    x: np.ndarray
    trial: Trial
    k: int
    shared_line: str | None = None  # a shared array made in a kernel without a barrier

    def __post_init__(self):
        self.where = f"{self.trial}, k={self.k}"
        self.unwritten = np.isnan(self.got)
        self.missing = np.flatnonzero(self.unwritten)
        a, x = self.a.astype(np.float64), self.x.astype(np.float64)
        self.exact = a @ x
        u32 = formats.get_format("fp32").unit_roundoff  # fp32's bound: Higham's gamma_(k+1)
        self.bound = (self.k + 1) * u32 / (1 - (self.k + 1) * u32) * (np.abs(a) @ np.abs(x))
        self.error = np.abs(self.got - self.exact)
        self.worst = int(np.argmax(self.error / self.bound))
        self.within_bound = bool(np.all(self.error <= self.bound))

    @property
    def first_block_only(self) -> bool:
        """Only the first block's rows were written (``threadIdx`` alone as the row)."""
        rows, tpb = self.trial.n, self.trial.threads_per_block
        return self.missing.size == rows - tpb and self.missing[0] == tpb

    @functools.cached_property
    def emulated(self) -> dict[str, np.ndarray]:
        """What a one-thread-per-row kernel computes with each accumulator, in row order."""
        column = self.x.reshape(-1, 1)
        fp16_products = np.zeros(self.a.shape[0], dtype=np.float32)
        for k in range(self.a.shape[1]):
            fp16_products = fp16_products + (self.a[:, k] * self.x[k]).astype(np.float32)
        return {
            "fp32": reference.matmul_in_format(self.a, column, "fp32")[:, 0],
            "fp16": reference.matmul_in_format(self.a, column, "fp16")[:, 0].astype(np.float32),
            "fp16 products": fp16_products,
        }

    @property
    def fp16_products(self) -> bool:
        """Exactly what fp32 sums of products rounded to fp16 give (and not what fp32 gives)."""
        got = self.got.astype(np.float32)
        return (np.array_equal(got, self.emulated["fp16 products"])
                and not np.array_equal(got, self.emulated["fp32"]))

    @property
    def fp16_sized_error(self) -> bool:
        """The outputs are fp16 sums, or the errors are as large as fp16 sums' (typically; a
        sum of the wrong products is off by far more)."""
        fp16_error = np.median(np.abs(self.emulated["fp16"] - self.exact))
        return bool(np.allclose(self.got, self.emulated["fp16"], rtol=2e-3, atol=0)
                    or 0.3 * fp16_error < np.median(self.error) < 3 * fp16_error)

    @functools.cached_property
    def products_left_out(self) -> str | None:
        """Which products every row's sum misses, to fp32's bound, when the sums are the exact
        ones without them: the first (a loop from 1) or the last 1 to 7 (an unrolled loop
        without its tail); None otherwise."""
        a, x = self.a.astype(np.float64), self.x.astype(np.float64)
        left_out = {"the first product (k = 0)": a[:, 0] * x[0]}
        left_out |= {(f"the last product (k = {self.k - 1})" if t == 1 else
                      f"the last {t} products (k = {self.k - t} to {self.k - 1})"):
                     a[:, -t:] @ x[-t:] for t in range(1, 8)}
        return next((which for which, missing in left_out.items()
                     if np.all(np.abs(self.got - (self.exact - missing)) <= self.bound)), None)

    @property
    def rounded_to_fp16(self) -> bool:
        """Every sum is the exact sum rounded to an fp16 number (to fp32's bound)."""
        with np.errstate(over="ignore"):  # a sum past fp16's range is not one rounded to it
            in_fp16 = np.array_equal(self.got.astype(np.float16), self.got)
        return bool(in_fp16 and np.all(self.error <= np.abs(self.exact) * 2.0**-11 + self.bound))

    @property
    def right(self) -> bool:
        return not self.unwritten.any() and self.within_bound and not self.fp16_products

    @property
    def summary(self) -> str:
        w = self.worst
        return (f"out[{w}] = {self.got[w]:.7g}, but the exact sum is {self.exact[w]:.7g}: "
                f"off by {self.error[w]:.3g}, where an fp32 accumulator stays within "
                f"{self.bound[w]:.2g}")

    @property
    def median_spacing(self) -> str:
        """Near the median sum: the sum, and fp16's spacing there."""
        median = float(np.median(self.exact))
        return (f"Near {median:.0f}, fp16 numbers are "
                f"{2.0 ** (math.floor(math.log2(median)) - 10):g} apart")


# In the order they are tried: rows never written (none, the first block's only, some), then
# sums within fp32's bound but from fp16 products, sums with fp16-sized errors, any other sum.
MATVEC_MISTAKES = (
    Mistake("no row written", lambda e: e.unwritten.all(), "no row of out was written",
            "each thread writes its row's sum into out at its own row."),
    Mistake("`threadIdx` alone (only the first block's rows written)",
            lambda e: e.unwritten.any() and e.first_block_only,
            lambda e: (f"only the first block's rows were written; rows "
                       f"{e.trial.threads_per_block} to {e.trial.n - 1} were not"),
            GLOBAL_INDEX_HINT),
    Mistake("rows never written (a guard one short)", lambda e: e.unwritten.any(),
            lambda e: (f"{e.missing.size} of {e.trial.n} rows were never written, the first "
                       f"is out[{e.missing[0]}]"),
            "one thread per row, from the global index, and a guard that lets every row below "
            "out's length through (not one short)."),
    Mistake("products rounded to fp16 first (sums in fp32)",
            lambda e: e.within_bound and e.fp16_products,
            lambda e: (f"the sums are kept in fp32, but every product was rounded to fp16 "
                       f"first: out[{e.worst}] = {e.got[e.worst]:.7g}, exactly what fp16 "
                       "products give"), FP16_PRODUCT_HINT),
    Mistake("the sum rounded to fp16 (at the end, or kept there with a compensated sum)",
            lambda e: e.rounded_to_fp16,
            lambda e: (f"{e.summary}: every row's sum is the exact sum rounded to an fp16 number"
                       f", so it was rounded to fp16 before it was written. {e.median_spacing}"),
            "keep the sum in fp32 all the way into out (an fp32 array): converting it to fp16, "
            "even once at the end, rounds it to fp16's spacing."),
    Mistake("products left out (a loop from 1, an unrolled loop without its tail)",
            lambda e: not e.within_bound and e.products_left_out,
            lambda e: (f"{e.summary}: every row's sum is the exact sum without "
                       f"{e.products_left_out}, which your loop over k never adds"),
            "each row adds every product, k = 0 to k - 1, each once: check where the loop "
            "starts, and that an unrolled loop finishes the products left over after its last "
            "whole step."),
    Mistake("the sums kept in fp16 (including the simulator's trap: a plain `acc = 0.0` takes "
            "float16's type there)",
            lambda e: not e.within_bound and e.fp16_sized_error,
            lambda e: (f"{e.summary}: the error is as large as summing in fp16 gives. "
                       f"{e.median_spacing}, so each product of about 0.56 is rounded "
                       "heavily"), FP16_ACCUMULATOR_HINT),
    Mistake("a shared array with no barrier (slots read before other threads wrote them)",
            lambda e: e.shared_line is not None,
            lambda e: (f"{e.summary}. `{e.shared_line}` makes an array the block's threads "
                       "share, but the kernel has no `cuda.syncthreads()`: a thread read slots "
                       "that the threads filling them had not written yet"),
            SHARED_BARRIER_HINT, "source"),
    Mistake("a wrong sum", lambda e: True, lambda e: e.summary,
            "each row is the dot product of its row of a with x: every product, each once, and "
            "nothing else."),
)
MATVEC_SHARE_HINT = (
    "one thread per row: each thread sums the row its global index gives, and no thread loops "
    "over the rows of others.")
MATVEC_SHARE_MISTAKES = one_per_thread(MATVEC_SHARE_HINT)
RowWrites = writes_of("row", "out[{}]")


@dataclass
class CompiledSums:
    """The lines of the learner's kernel that compute in float64 and in float16, as compiled
    for a real GPU (:func:`gpulab.exercises.compiling.float64_lines`, :func:`~gpulab.exercises.
    compiling.float16_lines`: None where the compile step cannot run), once every sum is within
    fp32's bound: the evidence of :data:`MATVEC_PRECISION_MISTAKES`."""

    float64_lines: list | None
    where: str
    float16_lines: list | None = None


# Last, once the sums are right: a float64 accumulator is within fp32's bound, and the
# simulator (where a plain `0.0` plus a float16 stays float16) cannot show it; the kernel as
# compiled for a GPU does.
MATVEC_PRECISION_MISTAKES = (
    Mistake("fp16 arithmetic before the fp32 sum (products, or a few of them summed, in fp16)",
            lambda e: bool(e.float16_lines),
            lambda e: (f"every row is within fp32's bound, but the kernel computes in fp16 "
                       "before the fp32 accumulator sees the values: "
                       f"{lines_said(e.float16_lines)}, as compiled for a GPU. Each fp16 "
                       "product or sum is rounded to fp16's 11 significant bits first, and "
                       "those errors add up over a long row"),
            FP16_PRODUCT_HINT, "compiled code"),
    Mistake("the sums kept in float64 (right, but not the fp32 accumulator asked for)",
            lambda e: bool(e.float64_lines),
            lambda e: (f"every row is right, but the kernel computes in float64, not fp32: "
                       f"{lines_said(e.float64_lines)}, as compiled for a GPU. "
                       f"{float64_cost()}"),
            "keep the sum in fp32: a float32 zero to start from and float32 products (in "
            "Numba a plain `0.0` and anything converted to np.float64 are float64).",
            "compiled code"),
)


MATVEC = CheckSpec(
    "matvec_fp32", "matvec_fp32(a, x, out)", MATVEC_STUB_HINT,
    MATVEC_MISTAKES + MATVEC_SHARE_MISTAKES + MATVEC_PRECISION_MISTAKES, parameters=3,
    title="2. accumulate in fp32", call="check_matvec_fp32(matvec_fp32)",
    holds="an fp16 matrix-vector product, one thread per row, within fp32's rounding bound "
          "(Higham's γ_(k+1)), on random rows not a multiple of the block and "
          f"{MATVEC_K['sim'][0]:,}–{MATVEC_K['sim'][1] - 1:,} products per row in the simulator "
          f"({MATVEC_K['gpu'][0]:,}–{MATVEC_K['gpu'][1] - 1:,} on a GPU), under two block "
          "sizes (one twice the other, drawn); traced on a small "
          "launch, one row per thread; and, where the CUDA toolkit can compile it, no float64 "
          "or fp16 arithmetic in the kernel as compiled for a GPU",
    also="a stub; guards; a hard-coded block size (the line named)")


def _matvec_trial(seed: int, threads_per_block: int | None) -> Trial:
    """Rows not a multiple of either block size, more than two blocks of the larger: under
    ``threads_per_block`` alone when given, otherwise under a pair drawn from
    :data:`MATVEC_BLOCKS`, in a drawn order."""
    tier = device.tier()
    rng = np.random.default_rng([seed, 4])
    if threads_per_block:
        sizes = (threads_per_block,)
    else:
        pairs = MATVEC_BLOCKS[tier_key()]
        sizes = pairs[int(rng.integers(len(pairs)))]
        sizes = sizes[::-1] if rng.integers(2) else sizes
    while True:
        rows = draw_size(rng, max(sizes), MATVEC_ROWS[tier])
        if all(rows % size for size in sizes):
            break
    return Trial("check_matvec_fp32", seed, (rows,), (sizes[0],), np.dtype(np.float32), rng,
                 other_size=sizes[-1])


@MATVEC.check
def check_matvec_fp32(kernel, seed: int | None = None, threads_per_block: int | None = None) -> str:
    """a is fp16 (rows x k), x fp16 (k), out fp32 (rows), one row per thread; the pair of block
    sizes is drawn from :data:`MATVEC_BLOCKS` (``threads_per_block``: one launch with that
    size). Values in [0.5, 1), so the sums reach several hundred, where fp16 numbers are 0.25
    to 0.5 apart."""
    source = MATVEC.start(kernel)
    trial = _matvec_trial(seed, threads_per_block)
    rows = trial.n
    k = int(trial.rng.integers(*MATVEC_K[device.tier()])) | 1  # odd: an unrolled loop's tail
    a = trial.rng.uniform(0.5, 1.0, (rows, k)).astype(np.float16)
    x = trial.rng.uniform(0.5, 1.0, k).astype(np.float16)

    def run(each: Trial) -> Trial:
        # fill=1: the rows of a past the end hold ones (on a GPU, an unguarded thread reads them)
        got = run_elementwise(kernel, each, a, x, fill=1, index_hint=GUARD_HINT + " Here the "
                              "index is the row: compare it with out's length."
                              ).astype(np.float64)
        answer = MatvecSums(got, a, x, each, k, shared_array_without_barrier(source))
        if not answer.right:
            MATVEC.reject(answer)
        return each

    runs = [under_two_blocks(run, trial, source, once=bool(threads_per_block))]
    if not threads_per_block:
        runs.append(trial.other_block())
    # the method: one thread per row, traced on 2 blocks of 8 threads for 13 rows of 5
    small = Trial.draw("check_matvec_fp32", seed, np.float32, block=8, shape=(13,))
    reject_unshared_work(MATVEC_SHARE_MISTAKES, kernel, small,
                         small.rng.uniform(0.5, 1.0, (13, 5)).astype(np.float16),
                         small.rng.uniform(0.5, 1.0, 5).astype(np.float16),
                         np.zeros(13, np.float32), evidence=RowWrites)
    types = [numba_type(a), numba_type(x), "float32[:]"]
    lines = float64_lines(source, types)
    reject(MATVEC_PRECISION_MISTAKES,
           CompiledSums(lines, f"{trial}, k={k}", float16_lines(source, types)))
    kept = ("with an fp32 accumulator (no float64 or fp16 arithmetic in the kernel compiled "
            "for a GPU)" if lines == [] else "within fp32's rounding bound")
    return (f"all {rows} rows right {kept} (k = {k} products per row, "
            + " and ".join(each.launched for each in runs) + f", seed={seed}).")


# --- exercise 3: quantise to fp8 with a per-tensor scale ------------------------------------

E4M3 = formats.get_format("fp8_e4m3")
QUANTISE_STUB_HINT = (
    "choose one scale for the whole tensor so that its largest magnitude lands on E4M3's "
    "largest finite value (the format table of section 1), store x / scale in E4M3, and "
    "return (q, scale). The hints above the cell go step by step."
)
SCALE_HINT = (
    "the scale maps the tensor's absolute maximum, max|x| (the largest magnitude, of either "
    "sign), onto E4M3's largest finite value, 448."
)
# Other formats' largest values, which a scale may have been computed with by mistake.
OTHER_MAXIMA = {
    57344.0: "E5M2's largest value (the other fp8 format)",
    65504.0: "fp16's largest value",
    240.0: "the largest value of the other E4M3 variants (ml_dtypes.float8_e4m3 and "
           "float8_e4m3fnuz), not of float8_e4m3fn",
    6.0: "E2M1's (fp4's) largest value",
    127.0: "int8's largest value",
    255.0: "uint8's largest value",
    256.0: "2**8",
}
FP8_VARIANTS = ("float8_e4m3", "float8_e4m3fnuz", "float8_e4m3b11fnuz", "float8_e5m2",
                "float8_e5m2fnuz", "float8_e3m4", "float8_e8m0fnu")



@dataclass
class ScaleGuess:
    """A wrong scale from the learner's quantiser with the tensor x (float64) it was for; ``at``
    starts the message (which tensor, the seed, the scale against the right one). The evidence
    :data:`SCALE_MISTAKES` are told from."""

    scale: float
    x: np.ndarray
    at: str
    trials: list  # every tensor (name, x) of the check
    scales: list  # the learner's scale for each

    def __post_init__(self):
        self.amax = float(np.max(np.abs(self.x)))
        self.largest, self.smallest = float(np.max(self.x)), float(np.min(self.x))
        self.ratio = self.amax / self.scale  # where the scale maps max|x| (448 when right)
        # the other format's largest value the scale maps max|x| to, if any
        self.other_maximum = next((other for other in OTHER_MAXIMA
                                   if _close(self.ratio, other, 1e-4)), None)

    def same_multiple(self, how) -> list[float] | None:
        """The scale / how(x) of every tensor when it is the same in all of them, else None."""
        ratios = [scale / float(how(x.astype(np.float64)))
                  for (_, x), scale in zip(self.trials, self.scales, strict=True)]
        return ratios if max(ratios) <= min(ratios) * 1.005 else None

    def gave(self, value: float) -> bool:
        return _close(self.scale, value)


# The wrong scales, in the order they are tried: from the wrong statistic of x, from another
# format's largest value, then where the scale maps max|x| (the last one a catch-all).
SCALE_MISTAKES = (
    Mistake("a scale from max(x) instead of max|x|",
            lambda e: e.gave(e.largest / E4M3.max_value),
            lambda e: (f"{e.at}. It is max(x) / 448: the largest value, {e.largest:.4g}, not "
                       f"the largest magnitude, {e.amax:.4g} (x has negative values too), so "
                       f"the values below -{e.largest:.4g} "
                       f"{'overflow' if e.amax / e.scale > E4M3.max_value else 'lose range'}"),
            SCALE_HINT),
    Mistake("a scale from |min(x)|", lambda e: e.gave(abs(e.smallest) / E4M3.max_value),
            lambda e: (f"{e.at}. It is |min(x)| / 448, but here the largest magnitude is "
                       f"max(x) = {e.largest:.4g}"), SCALE_HINT),
    Mistake("a scale from the range",
            lambda e: e.gave((e.largest - e.smallest) / E4M3.max_value),
            lambda e: (f"{e.at}. It is (max(x) - min(x)) / 448, the range: a symmetric format "
                       "(as many negative values as positive ones) needs the largest "
                       "magnitude"), SCALE_HINT),
    Mistake("a scale from half the range",
            lambda e: e.gave((e.largest - e.smallest) / (2 * E4M3.max_value)),
            lambda e: (f"{e.at}. It is (max(x) - min(x)) / 896, half the range: with values of "
                       "both signs the largest magnitude can be larger than that"), SCALE_HINT),
    Mistake("the wrong way round (448 / max|x|)", lambda e: e.gave(E4M3.max_value / e.amax),
            lambda e: (f"{e.at}. It is 448 / max|x|, the multiplier, the wrong way round: the "
                       "check needs the scale such that x = q * scale"),
            "return the scale as max|x| / 448 (and store x divided by it)."),
    *(Mistake(f"a scale from the {what} (the same multiple in every tensor)",
              lambda e, how=how: e.same_multiple(how) is not None,
              lambda e, how=how, what=what: (
                  f"{e.at}. In every tensor your scale is "
                  f"{e.same_multiple(how)[0] * E4M3.max_value:.3g} x the {what} / 448: a {what} "
                  "says how wide the bulk of the values is, not how far the largest goes. Here "
                  f"max|x| is {e.amax / float(how(e.x)):.1f} {what}s: "
                  + ("those outliers overflow" if e.ratio > E4M3.max_value else
                     "part of E4M3's range is wasted")), SCALE_HINT)
      for how, what in ((np.std, "standard deviation"),
                        (lambda v: np.sqrt(np.mean(v * v)), "root mean square"))),
    Mistake("a scale from another format's largest value (E5M2's 57 344, 240, int8's 127 …)",
            lambda e: e.other_maximum is not None,
            lambda e: (f"{e.at}. It maps max|x| to {e.other_maximum:g}, "
                       f"{OTHER_MAXIMA[e.other_maximum]}; E4M3 (ml_dtypes.float8_e4m3fn) goes "
                       "up to 448"), SCALE_HINT),
    Mistake("max|x| mapped to 1", lambda e: _close(e.ratio, 1.0, 1e-4),
            lambda e: (f"{e.at}. It maps max|x| to 1, so only E4M3's values up to 1 are used, "
                       "less than half of its range (up to 448): small values lose precision or "
                       "flush to zero"), SCALE_HINT),
    Mistake("max|x| mapped beyond 448 (overflow)", lambda e: e.ratio > E4M3.max_value,
            lambda e: (f"{e.at}. It maps max|x| to {shown_apart(e.ratio, 448)}, beyond "
                       "E4M3's largest value, 448: those values overflow (to NaN) or are "
                       "clipped"), SCALE_HINT),
    Mistake("max|x| mapped below 448", lambda e: True,
            lambda e: (f"{e.at}. It maps max|x| to {shown_apart(e.ratio, 448)}, not to "
                       "E4M3's largest value, 448" + (", so less than half of E4M3's range "
                                "is used: small values lose precision or flush to zero"
                                if e.ratio < E4M3.max_value / 2 else
                                ": the top of the range goes unused, and with it precision for "
                                "the small values")),
            lambda e: SCALE_HINT + (" (You may have computed 448 / max|x| and used it as a "
                                    "divisor.)" if e.ratio < 1 else "")),
)


# Hint 2 reads E4M3's largest value from gpulab.formats; what quantises is refused.
FORMATS_THAT_QUANTISE = tuple(f"gpulab.formats.{name}" for name in (
    "quantise", "round_trip", "to_format", "round_to", "per_tensor_scale", "dequantise",
    "Quantised", "Quantised.__init__"))
QUANTISE = CheckSpec(
    "quantise_fp8", "quantise_e4m3(x) -> (q, scale)", QUANTISE_STUB_HINT, SCALE_MISTAKES,
    allowed_gpulab=("gpulab.formats",), refused_gpulab=FORMATS_THAT_QUANTISE,
    title="3. quantise to fp8", call="check_quantise_fp8(quantise_e4m3)",
    holds="on activations with outliers of both signs (the largest magnitude negative), tiny "
          "gradients, values near 1 and a weight matrix: `q` an `ml_dtypes.float8_e4m3fn` "
          "array shaped like x, `scale` one positive number equal to max|x| / 448 (or the "
          "power of two just above "
          "it), each stored value the E4M3 value nearest to x / scale (for the scale "
          "max|x| / 448, six values planted where rounding through float16 first goes the "
          "other way)",
    also="a list, a float32/float64/float16 array or another fp8 variant instead of "
         "float8_e4m3fn; an array of scales; a float16 scale; overflow to NaN; x multiplied by "
         "the scale; not a pair; rounded twice (through float16 or bfloat16); rounded toward "
         "zero; subnormals flushed to 0")


def _activations_with_outliers(rng: np.random.Generator, n: int) -> np.ndarray:
    """A bulk of N(0, sigma) values and 3-5 outliers of 15 to 60 sigma of both signs, as large
    language models' activations have (Dettmers et al., "LLM.int8()", 2022). The largest
    magnitude is negative, and the largest positive value is at most 0.6 of it: a scale from
    max(x) instead of max|x| is far off, and so is one from the standard deviation."""
    sigma = 10.0 ** rng.uniform(0.5, 1.5)
    values = rng.standard_normal(n) * sigma
    count = int(rng.integers(3, 6))
    where = rng.choice(n, size=count, replace=False)
    largest = rng.uniform(40, 60)
    others = rng.uniform(15, 0.6 * largest, size=count - 1)
    signs = rng.choice([-1.0, 1.0], size=count - 1)
    signs[0] = 1.0  # at least one positive outlier
    values[where] = np.concatenate([[-largest], signs * others]) * sigma
    return values


def _quantise_trials(rng: np.random.Generator) -> list[tuple[str, np.ndarray]]:
    """Three float32 tensors: activations with outliers (~1e2 to 1e3, the largest magnitude
    negative), tiny gradients (~1e-5, the largest magnitude positive and last), values near 1
    (the largest magnitude first, 8 values that E4M3 stores as subnormals once scaled, and 6
    that rounding through float16 first puts on the wrong side: :func:`_double_rounding_traps`)."""
    n = [int(rng.integers(200, 400)) for _ in range(3)]
    gradients = rng.standard_normal(n[1]) * 10.0 ** (-5 + rng.uniform(-0.5, 0.5))
    if gradients[np.argmax(np.abs(gradients))] < 0:
        gradients = -gradients
    _largest_at(gradients, -1)  # a max over x[:-1] misses it
    near_one = rng.standard_normal(n[2])
    # a few values E4M3 stores as subnormals once scaled (below 2^-6 of 448 / max|x|)
    tiny = rng.choice(n[2], 8, replace=False)
    near_one[tiny] = (rng.choice([-1, 1], 8) * np.abs(near_one).max()
                      * rng.uniform(1e-6, 3e-5, 8))
    _largest_at(near_one, 0)  # a max over x[1:] misses it
    near_one = near_one.astype(np.float32)
    others = np.setdiff1d(np.arange(1, n[2]), tiny)
    near_one[rng.choice(others, 6, replace=False)] = _double_rounding_traps(
        rng, float(np.abs(near_one[0])) / E4M3.max_value, 6)
    return [("activations with outliers", _activations_with_outliers(rng, n[0]).astype(np.float32)),
            ("tiny gradients", gradients.astype(np.float32)),
            ("values near 1 (some E4M3 subnormals once scaled)", near_one)]


def _weight_matrix(rng: np.random.Generator) -> np.ndarray:
    """A float32 weight matrix (20-39 rows, 30-59 columns, N(0, 0.05)) whose largest magnitude
    is one weight planted at 3 to 5 times the rest, negative: one scale for the whole matrix
    is max|x| / 448, not a norm of the matrix (``np.linalg.norm(x, np.inf)`` is its largest
    row sum) nor a scale per row or column."""
    rows, cols = int(rng.integers(20, 40)), int(rng.integers(30, 60))
    weights = rng.normal(0.0, 0.05, (rows, cols))
    weights[int(rng.integers(rows)), int(rng.integers(cols))] = (
        -np.abs(weights).max() * rng.uniform(3, 5))
    return weights.astype(np.float32)


def _double_rounding_traps(rng: np.random.Generator, scale: float, count: int) -> np.ndarray:
    """``count`` float32 values x whose x / scale lies just above a point halfway between two
    E4M3 values, closer than float16's half step: rounded to E4M3 at once they go up, but
    rounded to float16 first they land on the halfway point, whose tie goes to the even
    neighbour below. Random signs, magnitudes from 1 to 400 once scaled."""
    traps = []
    while len(traps) < count:
        exponent = int(rng.integers(0, 9))  # E4M3's binades [2^e, 2^(e+1)) from 1 to 256
        step = 2.0 ** (exponent - E4M3.mantissa_bits)
        below = 2.0 ** exponent + step * int(rng.integers(0, 8))
        if (below / step) % 2:  # the tie must go down: the value below must be the even one
            continue
        halfway = below + step / 2
        scaled = halfway + rng.uniform(0.2, 0.8) * 2.0 ** (exponent - 11)  # float16's half step
        x = np.float32(rng.choice([-1.0, 1.0]) * scaled * scale)
        once = np.float64(x) / scale
        if (abs(float(once.astype(ml_dtypes.float8_e4m3fn))) > halfway
                and abs(float(once.astype(np.float16).astype(ml_dtypes.float8_e4m3fn))) < halfway):
            traps.append(x)
    return np.array(traps, np.float32)


def _largest_at(x: np.ndarray, where: int) -> None:
    """Swap the largest magnitude of x into position ``where``."""
    k = int(np.argmax(np.abs(x)))
    x[k], x[where] = x[where], x[k]


@QUANTISE.check
def check_quantise_fp8(quantise, seed: int | None = None) -> str:
    """Three float32 vectors of random lengths and values (:func:`_quantise_trials`; the
    activations around 1e2 to 1e3, the gradients around 1e-5), then a weight matrix
    (:func:`_weight_matrix`). What comes back is checked for
    every tensor first (a pair, then q's type, dtype and shape, then the scale's type), then
    each tensor's scale, then its stored values. E4M3's rounding: a relative error <= 2^-4 for
    normal values, an absolute error <= scale * 2^-10 in the subnormal range."""
    rng = np.random.default_rng(seed)
    trials = _quantise_trials(rng)
    trials.append(("a weight matrix", _weight_matrix(rng)))  # drawn after the three above
    answers = [_call_quantise(quantise, x, name, seed) for name, x in trials]
    scales = [scale for _, scale in answers]
    worst_relative = 0.0
    for (name, x), (q, scale) in zip(trials, answers, strict=True):
        x64 = x.astype(np.float64)
        _check_scale(x64, scale, name, seed, trials, scales)
        worst_relative = max(worst_relative, _check_quantised(x64, q, scale, name, seed))
    return (f"four tensors (max|x| from ~1e-5 to ~1e3, outliers of both signs, a matrix) "
            "quantised "
            "with the whole E4M3 range; worst relative error of a normal value "
            f"{worst_relative:.3f} (E4M3 rounds by at most {E4M3.unit_roundoff:g}; "
            f"seed={seed}).")


def _call_quantise(quantise, x: np.ndarray, name: str, seed: int):
    """Call the learner's function on a copy of x; check the types of what comes back."""
    given = x.copy()
    result = call_learner(quantise, given, stub_hint=QUANTISE_STUB_HINT,
                          call=f"quantise(x) for {name} (seed={seed})",
                          may_change=(0,))  # told below, in the exercise's words
    if not np.array_equal(given, x):
        raise CheckFailedError(
            f"quantise(x) changed its argument x ({name}, seed={seed}): the caller's tensor is "
            "no longer what it was.", "leave x as it is: an in-place operation (`x /= ...`, "
            "`x[:] = ...`) overwrites the caller's tensor; divide into a new array.")
    if not (isinstance(result, tuple) and len(result) == 2):
        raise CheckFailedError(f"quantise(x) returned {type(result).__name__}, not a pair "
                               "(q, scale).",
                               "return both: the quantised array, then the scale, as one pair.")
    q, scale = result
    if is_number(q) and isinstance(scale, np.ndarray) and scale.shape == x.shape:
        raise CheckFailedError("quantise(x) returned (scale, q): a number first, then an array "
                               "shaped like x.", "return the pair in the order (q, scale).")
    if not isinstance(q, np.ndarray):
        raise CheckFailedError(
            f"q is a {type(q).__name__}, not a NumPy array: it must be stored in 1 byte per "
            "value.", "work on the whole array at once: NumPy's division and conversion "
            "give an array; no Python loop or list is needed.")
    if q.dtype != np.dtype(ml_dtypes.float8_e4m3fn):
        name = q.dtype.name
        if name in FP8_VARIANTS:
            detail = (f"q has dtype {name}, a different 1-byte format from E4M3 as the "
                      "exercise asks (ml_dtypes.float8_e4m3fn: 4 exponent bits, 3 mantissa "
                      "bits, no infinity, largest value 448).")
        else:
            detail = (f"q is a {name} array ({q.dtype.itemsize} byte(s) per value), not "
                      "float8_e4m3fn: the values were scaled but never stored in fp8, so "
                      "nothing was rounded or saved.")
        raise CheckFailedError(detail, "convert to ml_dtypes' float8_e4m3fn after dividing by "
                                       "the scale.")
    if q.shape != x.shape:
        raise CheckFailedError(f"q has shape {q.shape}, but x has {x.shape}.",
                               "quantise every element of x, keeping its shape.")
    if isinstance(scale, np.ndarray) and scale.ndim > 0:
        raise CheckFailedError(
            f"scale is an array of shape {scale.shape}: a per-tensor scale is one number for "
            "the whole tensor.", "reduce over the whole tensor (a maximum over all its elements "
                                 "gives one number), and return it as a float.")
    if isinstance(scale, bool) or not isinstance(
            scale, (int, float, np.integer, np.floating, np.ndarray)):
        raise CheckFailedError(f"scale is {scale!r:.60} (a {type(scale).__name__}), not a "
                               "number.", "return one number for the whole tensor.")
    if isinstance(scale, (np.floating, np.ndarray)) and scale.dtype.itemsize < 4:
        raise CheckFailedError(
            f"scale is a {scale.dtype.name} ({float(scale)!r}): too coarse for a scale, which "
            "should be exact to about 7 digits.", "keep the scale as a Python float (or at "
            "least float32), not in a 2-byte format.")
    value = float(scale)
    if not (math.isfinite(value) and value > 0):
        raise CheckFailedError(f"scale is {value!r}; it must be a positive, finite number.",
                               SCALE_HINT)
    return q, value


def _close(a: float, b: float, rel: float = 1e-5) -> bool:
    return b > 0 and abs(a - b) <= rel * b


def _check_scale(x64: np.ndarray, scale: float, name: str, seed: int, trials, scales) -> None:
    """Fail unless ``scale`` is max|x| / 448 (or the power of two just above it); name where a
    wrong scale came from when one of the usual mistakes gives it."""
    right = float(np.max(np.abs(x64))) / E4M3.max_value
    power_of_two = scale > 0 and math.frexp(scale)[0] == 0.5
    if _close(scale, right) or (power_of_two and right * (1 - 1e-6) <= scale < 2 * right):
        return
    where = (f"for {name} (seed={seed}): your scale is {scale:.4g}, but max|x| / 448 = "
             f"{right:.4g}")
    reject(SCALE_MISTAKES, ScaleGuess(scale, x64, where, trials, scales))


def _check_quantised(x64: np.ndarray, q: np.ndarray, scale: float, name: str, seed: int
                     ) -> float:
    """The scale is right: check the stored values; return the worst relative error."""
    amax = float(np.max(np.abs(x64)))
    back = q.astype(np.float64) * scale
    where = f"for {name} (max|x| = {amax:.3g}, seed={seed})"
    if np.isnan(back).any():
        first = int(np.flatnonzero(np.isnan(back))[0])
        divided = x64[first] / scale
        clue = (f" (x / scale would be {divided:.4g}, which fits: did you multiply by the scale "
                "instead of dividing?)" if abs(divided) <= E4M3.max_value * (1 + 1e-6) else "")
        raise CheckFailedError(
            f"q[{first}] is NaN {where}: the value stored for x[{first}] = {x64[first]:.4g} "
            "rounded beyond E4M3's largest value, 448; E4M3 has no infinity, and ml_dtypes' "
            f"cast does not saturate, so it became NaN{clue}.",
            "store x divided by the scale: then every value fits within E4M3's 448.")
    normal = np.abs(x64) >= E4M3.smallest_normal * scale
    relative = np.zeros_like(x64)
    relative[normal] = np.abs(back[normal] - x64[normal]) / np.abs(x64[normal])
    absolute = np.abs(back - x64)
    bad = (normal & (relative > E4M3.unit_roundoff * (1 + 1e-6))) | \
        (~normal & (absolute > scale * E4M3.smallest_subnormal / 2 * (1 + 1e-6)))
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        divided = x64[first] / scale
        multiplied = x64[first] * scale
        clue = (" It looks like x * scale was stored, not x / scale: did you multiply by the "
                "scale instead of dividing?"
                if abs(float(q.astype(np.float64)[first]) - multiplied) <= abs(multiplied) / 8
                and abs(divided - multiplied) > abs(divided) / 8 else "")
        if not clue:
            _check_nearest(x64, q, scale, where, named_only=True)
        raise CheckFailedError(
            f"x[{first}] = {x64[first]:.6g} came back as {back[first]:.6g} {where}: more than "
            f"E4M3's rounding error (1 part in 16).{clue}",
            "store x divided by the scale, converted to E4M3, so that q times the scale gives "
            "x back.")
    _check_nearest(x64, q, scale, where)
    return float(relative.max()) if normal.any() else 0.0


def _check_nearest(x64: np.ndarray, q: np.ndarray, scale: float, where: str,
                   named_only: bool = False) -> None:
    """Fail unless every stored value is an E4M3 value nearest to x / scale: within half a
    step of E4M3 (2^(e-3) in the binade [2^e, 2^(e+1)), 2^-9 below 2^-6), give or take 2^-14 of
    a step: a quotient computed in float32 (a float32 scale, a reciprocal, then the division)
    moves by about 2^-19 of a step, rounding through float16 by up to 2^-8. Rounding
    twice (through float16 or bfloat16) and rounding toward zero are named; with
    ``named_only``, only those fail here."""
    scaled = x64 / scale
    stored = q.astype(np.float64)
    binade = np.floor(np.log2(np.maximum(np.abs(scaled), E4M3.smallest_normal)))
    step = 2.0 ** (binade - E4M3.mantissa_bits)
    far = np.abs(stored - scaled) > step * (0.5 + 2.0 ** -14)
    if not far.any():
        return
    first = int(np.flatnonzero(far)[0])
    nearer = float(scaled[first].astype(ml_dtypes.float8_e4m3fn))
    through = {name: (scaled.astype(np.float32).astype(dtype)
                      .astype(ml_dtypes.float8_e4m3fn).astype(np.float64))
               for name, dtype in (("float16", np.float16), ("bfloat16", ml_dtypes.bfloat16))}
    twice = [name for name, values in through.items() if np.array_equal(values[far], stored[far])]
    if twice:
        how = (f"it was rounded twice, to {twice[0]} first and then to E4M3: x / scale sat "
               f"just past a point halfway between two E4M3 values, {twice[0]} rounded it onto "
               "that point, and the tie went to the even neighbour, the farther one")
        hint = ("round once: convert x / scale to E4M3 from the float32 (or float64) it was "
                "computed in; every conversion rounds, and a second one can undo the first.")
    elif np.all((stored[far] == 0) & (np.abs(scaled[far]) < E4M3.smallest_normal)):
        how = ("values below E4M3's smallest normal number, 2^-6, were flushed to 0, where E4M3 "
               "keeps subnormal values down to 2^-9")
        hint = ("let the conversion to E4M3 handle small values: it keeps subnormals, and only "
                "magnitudes at or below 2^-10 (half the smallest subnormal) become 0.")
    elif np.all(np.abs(stored[far]) <= np.abs(scaled[far])):
        how = "values were rounded toward zero (truncated), not to the nearest E4M3 value"
        hint = "let the conversion to E4M3 round: it rounds to the nearest value."
    elif named_only:
        return
    else:
        how = "it is not the E4M3 value nearest to x / scale"
        hint = "convert x / scale to E4M3 in one step: the conversion rounds to nearest."
    raise CheckFailedError(
        f"x[{first}] / scale = {scaled[first]:.7g} was stored as {stored[first]:.6g}, but "
        f"{nearer:.6g} is nearer ({int(far.sum())} of {far.size} values stored so {where}): "
        f"{how}.", hint)


__all__ = ["check_decode", "check_matvec_fp32", "check_quantise_fp8"]
