"""Chapter 04's exercises: decode a format's bits, accumulate in fp32, quantise to fp8.

Each check runs your code on random data, compares with :mod:`gpulab.formats` /
:mod:`gpulab.reference`, prints what it found and returns a
:class:`~gpulab.exercises.checks.CheckResult`; a failure names its seed so that
``check_...(your_code, seed=1234)`` repeats it.

- :func:`check_decode` — ``decode(sign, exponent, mantissa, exponent_bits, mantissa_bits)``
  must give the value of those bit fields, normal and subnormal, in fp16, bf16, fp8 and fp4.
  Diagnoses: subnormals decoded like normal numbers, the bias off by one, the implicit leading
  1 forgotten, the sign ignored.
- :func:`check_matvec_fp32` — a kernel ``(a, x, out)``, one thread per row, must compute
  ``out[row] = a[row, :] · x`` from fp16 inputs with an fp32 accumulator. Diagnoses: the
  stub, a missing guard, rows never written, the sums kept in fp16 (including the simulator's
  trap: a plain ``acc = 0.0`` takes float16's type there), products rounded to fp16 before
  they are added.
- :func:`check_quantise_fp8` — a host function ``quantise(x) -> (q, scale)`` must store x in
  FP8 E4M3 with a per-tensor scale so that ``q * scale`` is within fp8's rounding of x, for
  tensors of very different magnitudes. Diagnoses: no scale (overflow to NaN, or underflow to
  0), the scale used the wrong way round, a scale that wastes range or overflows, the wrong
  dtype.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from gpulab import device, formats, reference
from gpulab.exercises.checks import (
    GLOBAL_INDEX_HINT,
    GUARD_HINT,
    CheckFailedError,
    CheckResult,
    KernelSource,
    Trial,
    call_learner,
    run_check,
    run_elementwise,
    start_kernel,
)

# --- exercise 1: decode the bits ------------------------------------------------------------

DECODE_FORMATS = ("fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1")
DECODE_STUB_HINT = (
    "bias = 2**(exponent_bits - 1) - 1. Exponent field 0 means subnormal: "
    "value = 2**(1 - bias) * mantissa / 2**mantissa_bits. Otherwise normal: "
    "value = 2**(exponent - bias) * (1 + mantissa / 2**mantissa_bits). A sign of 1 makes it "
    "negative."
)


def _decode_cases(rng: np.random.Generator, per_format: int = 12) -> list[tuple]:
    """(format, sign, exponent, mantissa, expected value) for random codes of each format,
    plus zero, the smallest and the largest subnormal. Codes for inf/NaN are skipped."""
    cases = []
    for name in DECODE_FORMATS:
        fmt = formats.get_format(name)
        top = (1 << fmt.exponent_bits) - 1
        fields = [(0, 0, 0), (1, 0, 1), (0, 0, (1 << fmt.mantissa_bits) - 1)]
        while len(fields) < per_format:
            sign = int(rng.integers(0, 2))
            exponent = int(rng.integers(0, top + 1))
            if len(fields) < 5:
                exponent = 0  # more subnormals: they are the usual mistake
            fields.append((sign, exponent, int(rng.integers(0, 1 << fmt.mantissa_bits))))
        for sign, exponent, mantissa in fields:
            code = (sign << (fmt.exponent_bits + fmt.mantissa_bits)) \
                | (exponent << fmt.mantissa_bits) | mantissa
            container = np.uint16 if fmt.bits == 16 else np.uint8
            value = float(np.array([code], dtype=container).view(fmt.dtype)[0])
            if math.isfinite(value):
                cases.append((fmt, sign, exponent, mantissa, value))
    # Normal numbers first: a wrong bias or a missing leading 1 shows there unambiguously;
    # subnormals (and zero) then test the exponent-0 rule.
    return sorted(cases, key=lambda case: case[2] == 0)


def _decode_suspects(fmt, sign, exponent, mantissa) -> list[tuple[float, str, str]]:
    """Values that common mistakes give, with what they mean and a hint."""
    bias = fmt.exponent_bias
    fraction = mantissa / 2**fmt.mantissa_bits
    signed = -1.0 if sign else 1.0
    suspects = []
    if exponent == 0:
        suspects.append((signed * 2.0**(0 - bias) * (1 + fraction),
                         "a subnormal (exponent field 0) was decoded like a normal number",
                         "exponent field 0 has no implicit leading 1 and uses exponent "
                         "1 - bias: value = 2**(1 - bias) * mantissa / 2**mantissa_bits."))
        suspects.append((signed * 2.0**(0 - bias) * fraction,
                         "the subnormal's exponent is 0 - bias; it is 1 - bias",
                         "subnormals continue where the normals stop: 2**(1 - bias), the "
                         "same power as exponent field 1."))
    else:
        suspects.append((signed * 2.0**(exponent - bias) * fraction,
                         "the implicit leading 1 of a normal number is missing",
                         "normal numbers are 2**(exponent - bias) * (1 + mantissa / "
                         "2**mantissa_bits)."))
    for wrong_bias in (bias + 1, bias - 1, 2**(fmt.exponent_bits - 1)):
        if wrong_bias != bias:
            base = 1 - wrong_bias if exponent == 0 else exponent - wrong_bias
            lead = 0 if exponent == 0 else 1
            suspects.append((signed * 2.0**base * (lead + fraction),
                             f"the bias used was {wrong_bias}, not {bias}",
                             "bias = 2**(exponent_bits - 1) - 1: 15 for fp16, 127 for bf16, "
                             "7 for E4M3, 1 for E2M1."))
    if sign:
        magnitude = 2.0**(1 - bias) * fraction if exponent == 0 else \
            2.0**(exponent - bias) * (1 + fraction)
        suspects.append((magnitude, "the sign bit was ignored",
                         "a sign bit of 1 makes the value negative."))
    return suspects


def check_decode(decode, seed: int | None = None, show: bool = True) -> CheckResult:
    """Check ``decode(sign, exponent, mantissa, exponent_bits, mantissa_bits) -> float``
    against ml_dtypes on random bit fields of fp16, bf16, fp8 (E4M3, E5M2) and fp4 (E2M1),
    subnormals and zero included (inf and NaN codes are left out)."""

    def body(seed: int) -> str:
        rng = np.random.default_rng(seed)
        cases = _decode_cases(rng)
        for fmt, sign, exponent, mantissa, expected in cases:
            call = (f"decode({sign}, {exponent}, {mantissa}, {fmt.exponent_bits}, "
                    f"{fmt.mantissa_bits})")
            got = call_learner(decode, sign, exponent, mantissa, fmt.exponent_bits,
                               fmt.mantissa_bits, stub_hint=DECODE_STUB_HINT,
                               call=f"{call} for {fmt.name} (seed={seed})")
            try:
                got = float(got)
            except (TypeError, ValueError):
                raise CheckFailedError(f"{call} returned {got!r}, not a number (seed={seed}).",
                                       "return the value as a float.") from None
            if got == expected or math.isclose(got, expected, rel_tol=1e-12):
                continue
            where = f"{call} for {fmt.name} should be {expected!r} but is {got!r}"
            for value, meaning, hint in _decode_suspects(fmt, sign, exponent, mantissa):
                if math.isclose(got, value, rel_tol=1e-12, abs_tol=0.0):
                    raise CheckFailedError(f"{where}: {meaning} (seed={seed}).", hint)
            raise CheckFailedError(f"{where} (seed={seed}).", DECODE_STUB_HINT)
        names = ", ".join(DECODE_FORMATS)  # not `formats`: that is the module
        return (f"all {len(cases)} bit patterns decode right ({names}; subnormals and zero "
                f"included; seed={seed}).")

    return run_check("decode", body, seed, show)


# --- exercise 2: an fp32 accumulator --------------------------------------------------------

MATVEC_STUB_HINT = (
    "row = cuda.grid(1); inside `if row < out.shape[0]:` start `acc = np.float32(0)`, loop "
    "`for k in range(x.shape[0]):` adding `np.float32(a[row, k]) * np.float32(x[k])`, then "
    "write `out[row] = acc`."
)
FP16_ACCUMULATOR_HINT = (
    "start the sum as `acc = np.float32(0)`, not `0.0` or `a.dtype.type(0)`. In the simulator "
    "a plain `0.0` plus a float16 gives float16 (NumPy's rule for Python numbers), and on a GPU "
    "Numba would make it float64: name the type you want."
)
FP16_PRODUCT_HINT = (
    "convert each factor before multiplying: `np.float32(a[row, k]) * np.float32(x[k])`. The "
    "product of two fp16 numbers is exact in fp32, but `a[row, k] * x[k]` is computed in fp16 "
    "and rounded first."
)
# Rows are threads; k is each thread's chain of additions. Sizes per tier.
MATVEC_ROWS = {"sim": (40, 100), "gpu": (2_000, 20_000)}
MATVEC_K = {"sim": (900, 1_400), "gpu": (2_000, 4_000)}


def _matvec_emulations(a: np.ndarray, x: np.ndarray) -> dict[str, np.ndarray]:
    """What a one-thread-per-row kernel computes with each accumulator, in row order."""
    column = x.reshape(-1, 1)
    fp16_products = np.zeros(a.shape[0], dtype=np.float32)
    for k in range(a.shape[1]):
        fp16_products = fp16_products + (a[:, k] * x[k]).astype(np.float32)
    return {
        "fp32": reference.matmul_in_format(a, column, "fp32")[:, 0],
        "fp16": reference.matmul_in_format(a, column, "fp16")[:, 0].astype(np.float32),
        "fp16 products": fp16_products,
    }


def check_matvec_fp32(kernel, seed: int | None = None, threads_per_block: int | None = None,
                      show: bool = True) -> CheckResult:
    """Check ``kernel(a, x, out)``: a is fp16 (rows x k), x fp16 (k), out fp32 (rows); one
    thread per row must set ``out[row] = sum_k a[row, k] * x[k]`` with an fp32 accumulator.
    Launched with ceil(rows / threads_per_block) blocks; rows and k are random, rows not a
    multiple of the block size; values in [0.5, 1), so the sums reach several hundred, where
    fp16 numbers are 0.25 to 0.5 apart."""

    def body(seed: int) -> str:
        source = start_kernel(kernel, 3, MATVEC_STUB_HINT)
        tier = device.tier()
        tpb = threads_per_block or (256 if tier == "gpu" else 32)
        trial = Trial.draw("check_matvec_fp32", seed, tpb, np.float32,
                           size_range=MATVEC_ROWS[tier])
        rows = trial.n
        k = int(trial.rng.integers(*MATVEC_K[tier]))
        a = trial.rng.uniform(0.5, 1.0, (rows, k)).astype(np.float16)
        x = trial.rng.uniform(0.5, 1.0, k).astype(np.float16)
        # fill=1: the rows of a past the end hold ones (on a GPU, an unguarded thread reads them)
        got = run_elementwise(kernel, trial, a, x, fill=1, index_hint=GUARD_HINT + " Here i is "
                              "the row: guard with `if row < out.shape[0]:`.").astype(np.float64)
        _diagnose_matvec(source, got, a, x, trial, k)
        return (f"all {rows} rows right with an fp32 accumulator (k = {k} products per row, "
                f"{trial.launched}, seed={seed}).")

    return run_check("matvec_fp32", body, seed, show)


def _diagnose_matvec(source: KernelSource, got: np.ndarray, a: np.ndarray, x: np.ndarray,
                     trial: Trial, k: int) -> None:
    rows, tpb = trial.n, trial.threads_per_block
    unwritten = np.isnan(got)
    if unwritten.all():
        raise CheckFailedError(f"no row of out was written ({trial}, k={k}).",
                               "each thread writes `out[row] = acc` for its own row.")
    if unwritten.any():
        missing = np.flatnonzero(unwritten)
        if missing[0] == tpb and np.all(missing == np.arange(tpb, rows)):
            raise CheckFailedError(f"only the first block's rows were written; rows {tpb} to "
                                   f"{rows - 1} were not ({trial}).", GLOBAL_INDEX_HINT)
        raise CheckFailedError(f"{missing.size} of {rows} rows were never written, the first "
                               f"is out[{missing[0]}] ({trial}).",
                               "one thread per row: `row = cuda.grid(1)`, guarded by "
                               "`if row < out.shape[0]:` (not `<= ... - 1` or `- 1`).")
    emulated = _matvec_emulations(a, x)
    a64, x64 = a.astype(np.float64), x.astype(np.float64)
    exact = a64 @ x64
    magnitude = np.abs(a64) @ np.abs(x64)
    u32 = formats.get_format("fp32").unit_roundoff
    bound = (k + 1) * u32 / (1 - (k + 1) * u32) * magnitude  # Higham's gamma_(k+1)
    error = np.abs(got - exact)
    worst = int(np.argmax(error / bound))
    if np.all(error <= bound):
        if np.array_equal(got.astype(np.float32), emulated["fp16 products"]) and \
                not np.array_equal(got.astype(np.float32), emulated["fp32"]):
            raise CheckFailedError(
                f"the sums are kept in fp32, but every product was rounded to fp16 first: "
                f"out[{worst}] = {got[worst]:.7g}, exactly what fp16 products give ({trial}, "
                f"k={k}).", FP16_PRODUCT_HINT)
        return
    summary = (f"out[{worst}] = {got[worst]:.7g}, but the exact sum is {exact[worst]:.7g} "
               f"(off by {error[worst]:.3g}; an fp32 accumulator stays within "
               f"{bound[worst]:.2g})")
    fp16_error = np.abs(emulated["fp16"] - exact)
    if np.allclose(got, emulated["fp16"], rtol=2e-3, atol=0) or \
            (np.median(error) > 0.3 * np.median(fp16_error)):
        raise CheckFailedError(
            f"{summary}: the error is as large as summing in fp16 gives. Near "
            f"{float(np.median(exact)):.0f}, fp16 numbers are "
            f"{2.0 ** (math.floor(math.log2(float(np.median(exact)))) - 10):g} apart, so each "
            f"product of about 0.56 is rounded heavily ({trial}, k={k}).", FP16_ACCUMULATOR_HINT)
    raise CheckFailedError(f"{summary} ({trial}, k={k}).",
                           "each row is the dot product of a[row, :] with x: "
                           "sum a[row, k] * x[k] over every k, and nothing else.")


# --- exercise 3: quantise to fp8 with a per-tensor scale ------------------------------------

E4M3 = formats.get_format("fp8_e4m3")
QUANTISE_STUB_HINT = (
    "scale = max|x| / 448 maps the largest magnitude onto E4M3's largest value; then "
    "q = (x / scale).astype(ml_dtypes.float8_e4m3fn); return q, scale."
)
QUANTISE_TRIALS = (("activations with outliers", 3.0), ("tiny gradients", -5.0),
                   ("values near 1", 0.0))


def _quantise_trials(rng: np.random.Generator) -> list[tuple[str, np.ndarray]]:
    trials = []
    for name, log10_scale in QUANTISE_TRIALS:
        n = int(rng.integers(50, 400))
        values = rng.standard_normal(n) * 10.0 ** (log10_scale + rng.uniform(-0.5, 0.5))
        trials.append((name, values.astype(np.float32)))
    return trials


def check_quantise_fp8(quantise, seed: int | None = None, show: bool = True) -> CheckResult:
    """Check ``quantise(x) -> (q, scale)`` on three float32 tensors of very different size
    (activations around 1e3, gradients around 1e-5, values near 1), random length and values.
    ``q`` must be an ``ml_dtypes.float8_e4m3fn`` array shaped like x, ``scale`` a positive
    number, ``max|x| / scale`` between 224 and 448 (most of the range, no overflow), and every
    element of ``q * scale`` within E4M3's rounding of x: relative error <= 2^-4 for normal
    values, absolute error <= scale * 2^-10 in the subnormal range."""

    def body(seed: int) -> str:
        rng = np.random.default_rng(seed)
        worst_relative = 0.0
        for name, x in _quantise_trials(rng):
            q, scale = _call_quantise(quantise, x, name, seed)
            worst_relative = max(worst_relative, _check_quantised(x, q, scale, name, seed))
        return (f"three tensors (max|x| from ~1e-5 to ~1e3) quantised with the whole E4M3 range; "
                f"worst relative error of a normal value {worst_relative:.3f} "
                f"(E4M3 rounds by at most {E4M3.unit_roundoff:g}; seed={seed}).")

    return run_check("quantise_fp8", body, seed, show)


def _call_quantise(quantise, x: np.ndarray, name: str, seed: int):
    result = call_learner(quantise, x.copy(), stub_hint=QUANTISE_STUB_HINT,
                          call=f"quantise(x) for {name} (seed={seed})")
    if not (isinstance(result, tuple) and len(result) == 2):
        raise CheckFailedError(f"quantise(x) returned {type(result).__name__}, not a pair "
                               "(q, scale).", "end with `return q, scale`.")
    q, scale = result
    if not isinstance(q, np.ndarray) or q.dtype != np.dtype(ml_dtypes.float8_e4m3fn):
        found = getattr(q, "dtype", type(q).__name__)
        raise CheckFailedError(f"q has type {found}, not float8_e4m3fn: it must really be "
                               "stored in 1 byte per value.",
                               "convert with `.astype(ml_dtypes.float8_e4m3fn)` after "
                               "dividing by the scale.")
    if q.shape != x.shape:
        raise CheckFailedError(f"q has shape {q.shape}, but x has {x.shape}.",
                               "quantise every element of x, keeping its shape.")
    try:
        scale = float(scale)
    except (TypeError, ValueError):
        raise CheckFailedError(f"scale is {scale!r}, not a number.",
                               "return one number for the whole tensor: max|x| / 448.") from None
    if not (math.isfinite(scale) and scale > 0):
        raise CheckFailedError(f"scale is {scale!r}; it must be a positive number.",
                               QUANTISE_STUB_HINT)
    return q, scale


def _check_quantised(x: np.ndarray, q: np.ndarray, scale: float, name: str, seed: int) -> float:
    x64 = x.astype(np.float64)
    amax = float(np.max(np.abs(x64)))
    back = q.astype(np.float64) * scale
    where = f"for {name} (max|x| = {amax:.3g}, seed={seed})"
    if np.isnan(back).any():
        first = int(np.flatnonzero(np.isnan(back))[0])
        divided = x64[first] / scale
        clue = (f" (x / scale would be {divided:.4g}, which fits: did you multiply by the scale "
                "instead of dividing?)" if abs(divided) <= E4M3.max_value else "")
        raise CheckFailedError(
            f"q[{first}] is NaN {where}: the value stored for x[{first}] = {x64[first]:.4g} was "
            f"beyond E4M3's largest value, 448, and E4M3 has no infinity, so it overflowed to "
            f"NaN{clue}.",
            "choose the scale so that the largest |x| maps to 448: scale = max|x| / 448, and "
            "store x / scale.")
    ratio = amax / scale
    if ratio > E4M3.max_value * (1 + 1e-6):
        raise CheckFailedError(
            f"your scale maps max|x| to {ratio:.4g}, beyond 448 {where}: those values were "
            "clipped.", "scale = max|x| / 448.")
    if ratio < E4M3.max_value / 2:
        raise CheckFailedError(
            f"your scale maps max|x| to only {ratio:.4g} {where}, so less than half of E4M3's "
            "range (up to 448) is used and small values lose precision or flush to zero.",
            "scale = max|x| / 448 maps the largest magnitude onto the largest value." +
            (" (You may have computed 448 / max|x| and used it as a divisor.)"
             if ratio < 1 else ""))
    normal = np.abs(x64) >= E4M3.smallest_normal * scale
    relative = np.zeros_like(x64)
    relative[normal] = np.abs(back[normal] - x64[normal]) / np.abs(x64[normal])
    absolute = np.abs(back - x64)
    bad = (normal & (relative > E4M3.unit_roundoff * (1 + 1e-6))) | \
        (~normal & (absolute > scale * E4M3.smallest_subnormal / 2 * (1 + 1e-6)))
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise CheckFailedError(
            f"x[{first}] = {x64[first]:.6g} came back as {back[first]:.6g} {where}: more than "
            "E4M3's rounding error (1 part in 16).",
            "store x / scale, and make sure q * scale gives x back: "
            "q = (x / scale).astype(ml_dtypes.float8_e4m3fn).")
    return float(relative.max()) if normal.any() else 0.0


__all__ = ["check_decode", "check_matvec_fp32", "check_quantise_fp8"]
