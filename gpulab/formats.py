"""Number formats: what each one can hold, computed from the types themselves.

:data:`FORMATS` describes fp64, fp32, tf32, fp16, bf16, fp8 (E4M3 and E5M2) and fp4 (E2M1):
sign, exponent and mantissa bits, the largest value, the smallest normal and subnormal value,
machine epsilon and bytes per value. Nothing in the table is typed in: every figure is read
from the type (``numpy.finfo`` for the IEEE formats, ``ml_dtypes.finfo`` for bfloat16, fp8 and
fp4), and ``tests/test_formats.py`` checks each against the published value.

tf32 has no NumPy type: it is NVIDIA's tensor-core input format, fp32's 8 exponent bits with
only 10 mantissa bits, stored in a 32-bit container. Its row is **derived** from fp32's limits
and the 10-bit mantissa, and :func:`round_to` emulates it by rounding fp32 to 10 mantissa bits
(round to nearest, ties to even).

Helpers
- :func:`round_to` — the nearest value a format can hold (what storing a number does).
- :func:`quantise` / :func:`dequantise` — round with a scale factor, as fp8 and fp4 need: the
  per-tensor scale maps the largest magnitude onto the format's largest value.
- :func:`bits_of` — the bit layout of any value in any format, with its decoding.
- :func:`memory_bytes` — how much memory a model's parameters take in a format.

Conventions: *machine epsilon* is the gap between 1 and the next larger value,
``2**-mantissa_bits``; rounding to nearest makes a relative error of at most half of it (the
*unit roundoff*). "Bytes per value" counts bits / 8, so fp4 is 0.5 (ml_dtypes keeps each fp4
value in a byte of its own; packed storage puts two in a byte).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from gpulab.tables import Column, Table

# ---------------------------------------------------------------------------------------------
# Where the published values come from
# ---------------------------------------------------------------------------------------------

IEEE_754 = (
    "IEEE Std 754-2019, IEEE Standard for Floating-Point Arithmetic, Table 3.5 (binary16, "
    "binary32, binary64: precision p and emax; bias = emax)"
)
BF16_SOURCE = (
    "bfloat16: the upper 16 bits of IEEE binary32 (1 sign, 8 exponent, 7 mantissa bits); "
    "Intel, 'BFLOAT16 - Hardware Numerics Definition', document 338302-001US, 2018; "
    "Google Cloud TPU documentation, 'The bfloat16 numerical format'"
)
TF32_SOURCE = (
    "TF32: 1 sign, 8 exponent and 10 mantissa bits, fp32's range with fp16's precision, used "
    "inside tensor cores and stored as fp32 (NVIDIA A100 Tensor Core GPU Architecture "
    "whitepaper, 2020, 'TF32'). DERIVED row: NVIDIA publishes the layout, not the limits; they "
    "are computed from fp32's exponent range and a 10-bit mantissa, assuming IEEE-style "
    "subnormals."
)
OFP8_SOURCE = (
    "Open Compute Project, 'OCP 8-bit Floating Point Specification (OFP8)', Revision 1.0, "
    "2023, Table 1 (E4M3: bias 7, max 448, no infinities; E5M2: bias 15, max 57344, IEEE-like "
    "infinities and NaNs); Micikevicius et al., 'FP8 Formats for Deep Learning', "
    "arXiv:2209.05433"
)
MX_SOURCE = (
    "Open Compute Project, 'OCP Microscaling Formats (MX) Specification', Version 1.0, 2023, "
    "section 5.3.3, FP4 (E2M1): bias 1, max 6.0, min normal 1.0, min subnormal 0.5, no "
    "infinities or NaN. MX blocks of 32 values share one 8-bit (E8M0) scale."
)

FORMAT_NAMES = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1")

# The name each format has in gpulab.hardware's peak-FLOP table.
_HARDWARE_PRECISION = {"fp64": "fp64", "fp32": "fp32", "tf32": "tf32", "fp16": "fp16",
                       "bf16": "bf16", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "fp4_e2m1": "fp4"}

_ALIASES = {"float64": "fp64", "double": "fp64", "float32": "fp32", "single": "fp32",
            "float16": "fp16", "half": "fp16", "bfloat16": "bf16", "fp8": "fp8_e4m3",
            "e4m3": "fp8_e4m3", "float8_e4m3fn": "fp8_e4m3", "e5m2": "fp8_e5m2",
            "float8_e5m2": "fp8_e5m2", "fp4": "fp4_e2m1", "e2m1": "fp4_e2m1",
            "float4_e2m1fn": "fp4_e2m1"}

TF32_MANTISSA_BITS = 10


# ---------------------------------------------------------------------------------------------
# The format record
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NumberFormat:
    """One floating-point format's layout and limits (all computed; see the module docstring).

    ``dtype`` is the NumPy / ml_dtypes type that holds values of the format (float32 for tf32,
    whose values are fp32 numbers with the low 13 mantissa bits zero).
    """

    name: str
    title: str
    sign_bits: int
    exponent_bits: int
    mantissa_bits: int
    exponent_bias: int
    max_value: float
    smallest_normal: float
    smallest_subnormal: float
    epsilon: float
    has_infinity: bool
    has_nan: bool
    dtype: np.dtype
    derived: bool
    source: str

    @property
    def bits(self) -> int:
        return self.sign_bits + self.exponent_bits + self.mantissa_bits

    @property
    def bytes_per_value(self) -> float:
        """Bits / 8 (tf32: 4, because it is stored as fp32)."""
        return 4.0 if self.name == "tf32" else self.bits / 8

    @property
    def unit_roundoff(self) -> float:
        """The largest relative error of rounding to nearest (for normal values): epsilon / 2."""
        return self.epsilon / 2

    @property
    def hardware_precision(self) -> str:
        """The key of this format in :mod:`gpulab.hardware`'s peak-FLOP tables."""
        return _HARDWARE_PRECISION[self.name]

    @property
    def label(self) -> str:
        return ("derived from fp32's limits and a 10-bit mantissa" if self.derived
                else f"computed from {self.dtype.name} by {_finfo_module(self.dtype)}.finfo")

    def as_row(self) -> dict:
        return {"format": self.name, "sign": self.sign_bits, "exponent": self.exponent_bits,
                "mantissa": self.mantissa_bits, "bias": self.exponent_bias,
                "max": self.max_value, "smallest normal": self.smallest_normal,
                "smallest subnormal": self.smallest_subnormal, "epsilon": self.epsilon,
                "bytes": self.bytes_per_value}

    def __str__(self) -> str:
        return (f"{self.name}: {self.sign_bits}+{self.exponent_bits}+{self.mantissa_bits} bits, "
                f"max {self.max_value:.5g}, smallest normal {self.smallest_normal:.3g}, "
                f"smallest subnormal {self.smallest_subnormal:.3g}, epsilon {self.epsilon:.3g}, "
                f"{self.bytes_per_value:g} bytes ({self.label})")


def _finfo_module(dtype: np.dtype) -> str:
    return "numpy" if dtype in (np.dtype(np.float16), np.dtype(np.float32),
                                np.dtype(np.float64)) else "ml_dtypes"


def _finfo(dtype: np.dtype):
    return np.finfo(dtype) if _finfo_module(dtype) == "numpy" else ml_dtypes.finfo(dtype)


def _survives(dtype: np.dtype, special: float, test) -> bool:
    """Does storing ``special`` (inf or nan) in ``dtype`` keep it? (e4m3: inf -> NaN; e2m1:
    inf -> 6, nan -> -0)."""
    with np.errstate(all="ignore"):
        stored = np.array([special], dtype=np.float64).astype(dtype).astype(np.float64)
    return bool(test(stored[0]))


def _from_type(name: str, title: str, dtype, source: str) -> NumberFormat:
    dtype = np.dtype(dtype)
    info = _finfo(dtype)
    return NumberFormat(
        name=name,
        title=title,
        sign_bits=1,
        exponent_bits=int(info.nexp),
        mantissa_bits=int(info.nmant),
        exponent_bias=1 - int(info.minexp),  # minexp is the exponent of the smallest normal
        max_value=float(info.max),
        smallest_normal=float(info.smallest_normal),
        smallest_subnormal=float(info.smallest_subnormal),
        epsilon=float(info.eps),
        has_infinity=_survives(dtype, math.inf, math.isinf),
        has_nan=_survives(dtype, math.nan, math.isnan),
        dtype=dtype,
        derived=False,
        source=source,
    )


def _tf32() -> NumberFormat:
    fp32 = np.finfo(np.float32)
    m = TF32_MANTISSA_BITS
    largest_exponent = int(fp32.maxexp) - 1  # 127
    return NumberFormat(
        name="tf32",
        title="TensorFloat-32 (NVIDIA tensor cores)",
        sign_bits=1,
        exponent_bits=int(fp32.nexp),
        mantissa_bits=m,
        exponent_bias=1 - int(fp32.minexp),
        max_value=(2 - 2.0**-m) * 2.0**largest_exponent,
        smallest_normal=float(fp32.smallest_normal),
        smallest_subnormal=float(fp32.smallest_normal) * 2.0**-m,
        epsilon=2.0**-m,
        has_infinity=True,
        has_nan=True,
        dtype=np.dtype(np.float32),
        derived=True,
        source=TF32_SOURCE,
    )


FORMATS: dict[str, NumberFormat] = {
    f.name: f for f in (
        _from_type("fp64", "IEEE binary64 (double)", np.float64, IEEE_754),
        _from_type("fp32", "IEEE binary32 (single)", np.float32, IEEE_754),
        _tf32(),
        _from_type("fp16", "IEEE binary16 (half)", np.float16, IEEE_754),
        _from_type("bf16", "bfloat16 (brain float)", ml_dtypes.bfloat16, BF16_SOURCE),
        _from_type("fp8_e4m3", "OCP FP8 E4M3", ml_dtypes.float8_e4m3fn, OFP8_SOURCE),
        _from_type("fp8_e5m2", "OCP FP8 E5M2", ml_dtypes.float8_e5m2, OFP8_SOURCE),
        _from_type("fp4_e2m1", "OCP MX FP4 E2M1", ml_dtypes.float4_e2m1fn, MX_SOURCE),
    )
}


def get_format(name: str | NumberFormat) -> NumberFormat:
    """The format called ``name`` ("fp16", "bf16", "fp8_e4m3", ...; "float16", "e4m3" and
    "fp8" (= E4M3) work too). ValueError names the known formats."""
    if isinstance(name, NumberFormat):
        return name
    key = str(name).strip().lower().replace("-", "_")
    key = _ALIASES.get(key, key)
    if key not in FORMATS:
        raise ValueError(f"no number format called {name!r}; the formats are: "
                         f"{', '.join(FORMAT_NAMES)}")
    return FORMATS[key]


def table(formats=FORMAT_NAMES) -> list[dict]:
    """One dict per format (layout, limits, bytes), for printing or a DataFrame."""
    return [get_format(name).as_row() for name in formats]


def format_table(formats=FORMAT_NAMES) -> Table:
    """The table as a :class:`~gpulab.tables.Table`; the derived tf32 row is marked with a *."""
    general = "{:.4g}"
    columns = [Column("format"), Column("sign", "bits"), Column("exponent", "bits"),
               Column("mantissa", "bits"), Column("max", number_format=general),
               Column("min normal", number_format=general),
               Column("min subnormal", number_format=general),
               Column("epsilon", number_format="{:.3g}"), Column("bytes")]
    rows = []
    for name in formats:
        f = get_format(name)
        rows.append([f.name + ("*" if f.derived else ""), f.sign_bits, f.exponent_bits,
                     f.mantissa_bits, f.max_value, f.smallest_normal, f.smallest_subnormal,
                     f.epsilon, f.bytes_per_value])
    derived = any(get_format(name).derived for name in formats)
    return Table(columns, rows, notes=[
        "* derived: tf32 has no NumPy type; its limits follow from fp32's exponent range and a "
        "10-bit mantissa." if derived else ""])


# ---------------------------------------------------------------------------------------------
# Rounding
# ---------------------------------------------------------------------------------------------


def round_tf32(x) -> np.ndarray:
    """fp32 values rounded to tf32's 10 mantissa bits (round to nearest, ties to even), as
    float32. NaN and infinity stay; values too large for tf32 become infinity."""
    x32 = np.array(x, dtype=np.float32, copy=True, ndmin=1)
    bits = x32.view(np.uint32)
    finite = np.isfinite(x32)
    drop = 23 - TF32_MANTISSA_BITS  # 13 low mantissa bits go
    keep_lsb = (bits >> drop) & 1
    rounded = (bits + np.uint32((1 << (drop - 1)) - 1) + keep_lsb) & ~np.uint32((1 << drop) - 1)
    bits[finite] = rounded[finite]  # a carry into the exponent is correct rounding (to inf)
    return x32.reshape(np.shape(x))


def to_format(x, fmt, saturate: bool = False) -> np.ndarray:
    """``x`` stored in ``fmt``: an array of the format's dtype (float32 for tf32).

    Rounds to nearest, ties to even (ml_dtypes' casts, which do not saturate). Values that
    round beyond the largest finite value (for e4m3: |x| > 464, halfway to the next step)
    become what the format does with them: infinity (fp16, bf16, e5m2), NaN (e4m3, which has
    no infinity) or the largest value (fp4, which has neither). ``saturate=True`` clips to
    +-max first (infinities too; NaN stays NaN), as CUDA's ``__NV_SATFINITE`` fp8 conversions
    and the course's ``quantize_fp8_e4m3`` kernel do.
    """
    fmt = get_format(fmt)
    values = np.asarray(x, dtype=np.float64)
    if saturate:
        values = np.clip(values, -fmt.max_value, fmt.max_value)  # NaN passes through
    with np.errstate(over="ignore", invalid="ignore"):
        if fmt.name == "tf32":
            return round_tf32(values.astype(np.float32))
        return values.astype(fmt.dtype)


def round_to(x, fmt, saturate: bool = False) -> np.ndarray:
    """The values ``fmt`` would store for ``x``, as float64 (see :func:`to_format`)."""
    return to_format(x, fmt, saturate).astype(np.float64)


def relative_error(approx, exact) -> np.ndarray:
    """|approx - exact| / |exact| elementwise (inf where exact is 0 and approx is not)."""
    approx, exact = np.asarray(approx, np.float64), np.asarray(exact, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        error = np.abs(approx - exact) / np.abs(exact)
    return np.where((exact == 0) & (approx == exact), 0.0, error)


# ---------------------------------------------------------------------------------------------
# Quantisation with a scale factor
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Quantised:
    """Values stored in a narrow format plus the scale that maps them back:
    ``original ~= values * scale``."""

    values: np.ndarray
    scale: float
    fmt: NumberFormat

    def dequantise(self) -> np.ndarray:
        return dequantise(self)

    @property
    def bytes_moved(self) -> float:
        """Bytes to store the values (bits / 8 each) plus one float32 scale."""
        return self.values.size * self.fmt.bytes_per_value + 4


def per_tensor_scale(x, fmt) -> float:
    """The scale that maps max|x| onto the format's largest value (1.0 for an all-zero x).
    Dividing by it uses the whole range, so small values underflow as little as possible."""
    fmt = get_format(fmt)
    amax = float(np.max(np.abs(np.asarray(x, np.float64)))) if np.size(x) else 0.0
    if not math.isfinite(amax):
        raise ValueError("x holds inf or NaN: a per-tensor scale needs finite values")
    return amax / fmt.max_value if amax > 0 else 1.0


def quantise(x, fmt="fp8_e4m3", scale: float | str | None = "amax",
             saturate: bool = True) -> Quantised:
    """Store ``x / scale`` in ``fmt``. ``scale="amax"`` picks :func:`per_tensor_scale`;
    ``None`` means 1 (a plain cast); a number is used as given. ``saturate`` clips to the
    format's range instead of overflowing (to NaN in e4m3)."""
    fmt = get_format(fmt)
    if isinstance(scale, str):
        if scale != "amax":
            raise ValueError(f"scale must be 'amax', None or a positive number, not {scale!r}")
        scale = per_tensor_scale(x, fmt)
    scale = 1.0 if scale is None else float(scale)
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a positive finite number, not {scale!r}")
    values = to_format(np.asarray(x, np.float64) / scale, fmt, saturate=saturate)
    return Quantised(values, scale, fmt)


def dequantise(q: Quantised) -> np.ndarray:
    """``q.values * q.scale`` as float64."""
    return q.values.astype(np.float64) * q.scale


def round_trip(x, fmt="fp8_e4m3", scale: float | str | None = "amax",
               saturate: bool = True) -> np.ndarray:
    """``dequantise(quantise(x, ...))``: what survives a trip through ``fmt``."""
    return dequantise(quantise(x, fmt, scale, saturate))


def decode_table(fmt="fp8_e4m3") -> np.ndarray:
    """The float32 value of every code of an 8-bit (or 4-bit) format, indexed by the code.
    The fp8 kernels look their inputs up in it: the same conversion an FP8 GPU does in
    hardware, computed here by ml_dtypes."""
    fmt = get_format(fmt)
    if fmt.bits > 8:
        raise ValueError(f"{fmt.name} has {fmt.bits}-bit codes; a decode table is for 8-bit "
                         "and 4-bit formats")
    codes = np.arange(2**fmt.bits, dtype=np.uint8)
    return codes.view(fmt.dtype).astype(np.float32)


# ---------------------------------------------------------------------------------------------
# Bits
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BitLayout:
    """How one value is stored in one format: its code, fields and what they mean."""

    fmt: NumberFormat
    original: float
    stored: float
    code: int
    sign: int
    exponent: int
    mantissa: int

    @property
    def kind(self) -> str:
        """'zero', 'subnormal', 'normal', 'infinity' or 'nan'."""
        if math.isnan(self.stored):
            return "nan"
        if math.isinf(self.stored):
            return "infinity"
        if self.stored == 0:
            return "zero"
        return "subnormal" if self.exponent == 0 else "normal"

    @property
    def fields(self) -> tuple[str, str, str]:
        """The sign, exponent and mantissa bits as strings of 0 and 1."""
        f = self.fmt
        return (f"{self.sign:0{f.sign_bits}b}", f"{self.exponent:0{f.exponent_bits}b}",
                f"{self.mantissa:0{f.mantissa_bits}b}")

    @property
    def formula(self) -> str:
        """The decoding, e.g. ``+1 × 2^(15 - 15) × (1 + 512/1024) = 1.5``."""
        f = self.fmt
        sign = "-1" if self.sign else "+1"
        scale = 2**f.mantissa_bits
        if self.kind in ("nan", "infinity"):
            return f"all-ones exponent: {self.kind}" + ("" if f.has_infinity else
                                                        " (this format's special code)")
        if self.kind in ("zero", "subnormal"):
            return (f"{sign} × 2^(1 - {f.exponent_bias}) × ({self.mantissa}/{scale}) "
                    f"= {self.stored:.9g}  (exponent field 0: subnormal, no leading 1)")
        return (f"{sign} × 2^({self.exponent} - {f.exponent_bias}) × "
                f"(1 + {self.mantissa}/{scale}) = {self.stored:.9g}")

    @property
    def error(self) -> float:
        """stored - original (0 when the value is held exactly)."""
        if not (math.isfinite(self.stored) and math.isfinite(self.original)):
            return math.nan
        return self.stored - self.original

    def __str__(self) -> str:
        sign, exponent, mantissa = self.fields
        exact = "exactly" if self.error == 0 else f"rounded, error {self.error:+.3g}"
        return (f"{self.fmt.name}: {self.original!r} is stored as {self.stored:.9g} ({exact})\n"
                f"  sign {sign} | exponent {exponent} | mantissa {mantissa}   "
                f"(code 0x{self.code:0{-(-self.fmt.bits // 4)}X}, {self.kind})\n"
                f"  {self.formula}")

    def _repr_html_(self) -> str:
        import html

        sign, exponent, mantissa = self.fields
        cell = "<span style='font-family:monospace;padding:2px 4px;background:{}'>{}</span>"
        bits = (cell.format("#f4cccc", sign) + cell.format("#cfe2f3", exponent)
                + cell.format("#d9ead3", mantissa))
        return (f"<div><b>{self.fmt.name}</b>: {html.escape(repr(self.original))} &rarr; "
                f"{self.stored:.9g} ({self.kind})<br>{bits} "
                "<small>sign | exponent | mantissa</small><br>"
                f"<code>{html.escape(self.formula)}</code></div>")


def _code_of(stored: np.ndarray, fmt: NumberFormat) -> int:
    """The integer bit pattern of a single stored value."""
    if fmt.name == "tf32":
        return int(stored.view(np.uint32)[0]) >> (23 - TF32_MANTISSA_BITS)
    unsigned = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[fmt.dtype.itemsize]
    code = int(stored.view(unsigned)[0])
    return code & ((1 << fmt.bits) - 1)  # fp4 sits in the low 4 bits of its byte


def bits_of(value: float, fmt="fp16") -> BitLayout:
    """The bit layout of ``value`` rounded to ``fmt`` (a plain cast: no scale, no saturation).

    >>> print(bits_of(1.5, "fp16").formula)
    +1 × 2^(15 - 15) × (1 + 512/1024) = 1.5
    """
    fmt = get_format(fmt)
    original = float(value)
    stored = to_format(np.array([original]), fmt).reshape(1)
    code = _code_of(stored, fmt)
    mantissa = code & ((1 << fmt.mantissa_bits) - 1)
    exponent = (code >> fmt.mantissa_bits) & ((1 << fmt.exponent_bits) - 1)
    sign = code >> (fmt.mantissa_bits + fmt.exponent_bits)
    return BitLayout(fmt, original, float(stored.astype(np.float64)[0]), code, sign, exponent,
                     mantissa)


def value_of_fields(sign: int, exponent: int, mantissa: int, fmt) -> float:
    """Decode sign, exponent and mantissa fields of ``fmt`` by the IEEE rule (normal and
    subnormal values; the all-ones exponent is not interpreted here)."""
    fmt = get_format(fmt)
    fraction = mantissa / 2**fmt.mantissa_bits
    magnitude = (2.0 ** (1 - fmt.exponent_bias) * fraction if exponent == 0
                 else 2.0 ** (exponent - fmt.exponent_bias) * (1 + fraction))
    return -magnitude if sign else magnitude


# ---------------------------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------------------------

MX_BLOCK_SIZE = 32  # OCP MX: 32 values share one 8-bit E8M0 scale


def memory_bytes(parameters: float, fmt, scale_block: int | None = None,
                 scale_bytes: float = 1.0) -> float:
    """Bytes to hold ``parameters`` values in ``fmt``; with ``scale_block``, one scale of
    ``scale_bytes`` per block of that many values is added (OCP MX: 32 values per 1-byte
    scale, :data:`MX_BLOCK_SIZE`)."""
    if isinstance(parameters, bool) or not isinstance(parameters, (int, float)) \
            or not parameters >= 0 or not math.isfinite(parameters):
        raise ValueError(f"parameters must be a finite number >= 0, not {parameters!r}")
    fmt = get_format(fmt)
    total = parameters * fmt.bytes_per_value
    if scale_block is not None:
        if not isinstance(scale_block, int) or scale_block < 1:
            raise ValueError(f"scale_block must be a positive int, not {scale_block!r}")
        total += math.ceil(parameters / scale_block) * scale_bytes
    return total


def memory_table(parameters: float = 7e9, formats=FORMAT_NAMES) -> list[dict]:
    """Weights-only memory of a model with ``parameters`` parameters in each format (decimal
    GB, like GPU datasheets). tf32 is left out: it is a compute format stored as fp32."""
    rows = []
    for name in formats:
        fmt = get_format(name)
        if fmt.name == "tf32":
            continue
        rows.append({"format": fmt.name, "bytes_per_value": fmt.bytes_per_value,
                     "bytes": memory_bytes(parameters, fmt),
                     "gb": memory_bytes(parameters, fmt) / 1e9})
    return rows


__all__ = [
    "FORMATS",
    "FORMAT_NAMES",
    "MX_BLOCK_SIZE",
    "BitLayout",
    "NumberFormat",
    "Quantised",
    "bits_of",
    "decode_table",
    "dequantise",
    "format_table",
    "get_format",
    "memory_bytes",
    "memory_table",
    "per_tensor_scale",
    "quantise",
    "relative_error",
    "round_tf32",
    "round_to",
    "round_trip",
    "table",
    "to_format",
    "value_of_fields",
]
