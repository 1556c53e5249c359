"""Chapter 05's exercises: :func:`check_traffic` (the napkin math of a layer's traffic),
:func:`check_bias_activation` (a fused bias + activation kernel, with the signature of
``gpulab.kernels.dense.bias_activation``) and :func:`check_softmax_cross_entropy` (the stable
softmax with its cross-entropy loss, as ``gpulab.kernels.softmax.softmax_cross_entropy``).
Each check's spec says what it holds and diagnoses; a failure names the seed that repeats it.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass, replace

import numpy as np

from gpulab import device, reference
from gpulab.exercises.evidence import is_number, is_whole
from gpulab.exercises.grid_stride import one_per_thread
from gpulab.exercises.mistakes import Mistake, diagnose, reject
from gpulab.exercises.outputs import (
    ACTIVATIONS,
    IDENTITY,
    PAD_VALUE,
    RELU,
    SAID,
    TANH,
    check_matrix_output,
    looks_like,
    per_activation,
)
from gpulab.exercises.results import GLOBAL_INDEX_HINT, CheckFailedError, KernelError, offer_trace
from gpulab.exercises.running import (
    call_learner,
    changed_input_failure,
    launch,
    padded,
    read_back,
)
from gpulab.exercises.source_rules import (
    KernelSource,
    hard_coded_block,
    range_over_typed_in_count,
)
from gpulab.exercises.spec import CheckSpec, reject_unshared_work, traced
from gpulab.exercises.trial import Trial, draw_size
from gpulab.instruments import math_overflows_to_inf

# --- exercise 1: napkin math --------------------------------------------------------------------

TRAFFIC_STUB_HINT = (
    "count values: the unfused pair reads Z and b, writes Z + b, reads it back and writes A; "
    "the fused kernel reads Z and b and writes A. Multiply by itemsize."
)


@dataclass
class Traffic:
    """What ``bytes_moved(M, N, fused, itemsize)`` returned (``got``) against ``want``."""

    M: int
    N: int
    fused: bool
    itemsize: int
    got: object
    want: int
    seed: int

    @property
    def values(self) -> int:
        return 2 if self.fused else 4

    @property
    def summary(self) -> str:
        kind = "fused" if self.fused else "unfused"
        return (f"for M={self.M}, N={self.N}, {kind}, itemsize={self.itemsize}: expected "
                f"{int(self.want):,} bytes, got {self.got:,}")


def _traffic_mistake(did: str, value, hint: str) -> Mistake:
    return Mistake(did, lambda e: e.got == value(e), lambda e: f"{e.summary}: {did}", hint)


TRAFFIC_MISTAKES = (
    Mistake("not a number", lambda e: not is_number(e.got),
            lambda e: f"bytes_moved returned {e.got!r:.60}, not a number of bytes",
            "return one number: the bytes moved."),
    Mistake("counted in float32 (or float16): rounded past 2²⁴",
            lambda e: (isinstance(e.got, np.float32 | np.float16)
                       and math.isclose(float(e.got), e.want, rel_tol=1e-3)),
            lambda e: (f"{e.summary}: a {type(e.got).__name__} holds whole numbers exactly only "
                       "up to 2²⁴ (16,777,216), so the count was rounded"),
            "count bytes in Python's whole numbers (or np.int64), not in a float type."),
    _traffic_mistake("b left out", lambda e: e.itemsize * e.values * e.M * e.N,
                     "b is missing: it is read too (N values, once)."),
    _traffic_mistake("values, not bytes", lambda e: e.values * e.M * e.N + e.N,
                     "these are values, not bytes: multiply by itemsize."),
    _traffic_mistake("the unfused pair's extra pass left out",
                     lambda e: None if e.fused else e.itemsize * (2 * e.M * e.N + e.N),
                     "the unfused pair also writes Z + b to memory and reads it back: 4 M N "
                     "values in all."),
    _traffic_mistake("three passes counted", lambda e: e.itemsize * (3 * e.M * e.N + e.N),
                     "count each pass: the fused kernel reads Z (M N values) and writes A "
                     "(M N); the unfused pair reads Z, writes Z + b, reads Z + b, writes A."),
    _traffic_mistake("b counted per row (M values)",
                     lambda e: e.itemsize * (e.values * e.M * e.N + e.M),
                     "b has one value per column: N, not M."),
    _traffic_mistake("b counted once per element",
                     lambda e: e.itemsize * (e.values + 1) * e.M * e.N,
                     "b is read once, N values, not once for every element of Z."),
    _traffic_mistake("b counted twice in the unfused pair",
                     lambda e: None if e.fused else e.want + e.itemsize * e.N,
                     "in the unfused pair only the bias kernel reads b; the activation kernel "
                     "reads Z + b."),
    _traffic_mistake("bits, not bytes (8 times the count)", lambda e: 8 * e.want,
                     "itemsize is in bytes already (4 for float32): no factor of 8."),
    Mistake("kilobytes (or MB), not bytes",
            lambda e: is_number(e.got) and any(math.isclose(float(e.got) * unit, e.want,
                                                            rel_tol=1e-9)
                                               for unit in (1e3, 2**10, 1e6, 2**20)),
            lambda e: f"{e.summary}: that is the count in kilobytes or megabytes",
            "return plain bytes: no division by 1000 (or 1024)."),
    Mistake("one itemsize typed in (4 bytes, whatever itemsize says)",
            lambda e: e.itemsize != 4 and e.got == e.want // e.itemsize * 4,
            lambda e: f"{e.summary}: that is the count for 4-byte values",
            "multiply by the itemsize the caller gives (8 for float64, 2 for float16), not by "
            "4."),
    _traffic_mistake("fused and unfused swapped",
                     lambda e: e.itemsize * ((4 if e.fused else 2) * e.M * e.N + e.N),
                     "the fused kernel is the one that moves less: it never stores Z + b."),
    Mistake("another count", lambda e: True, lambda e: e.summary, TRAFFIC_STUB_HINT),
)
TRAFFIC = CheckSpec(
    "traffic", "bytes_moved(M, N, fused, itemsize)", TRAFFIC_STUB_HINT, TRAFFIC_MISTAKES,
    title="1. traffic", call="check_traffic(bytes_moved)",
    holds="the bytes that bias plus activation move on an M × N output, fused and unfused, "
          "for itemsizes 4, 8 and 2 (each value read or written once per pass, b once)",
    also="an exception (named)")


@TRAFFIC.check
def check_traffic(function, seed: int | None = None) -> str:
    """Six cases, fused then unfused, each with itemsize 4, 8 and 2, M and N random in 2..4999,
    compared with :func:`gpulab.kernels.dense.forward_traffic_bytes`; the first wrong one
    fails."""
    from gpulab.kernels.dense import forward_traffic_bytes
    rng = np.random.default_rng(seed)
    cases = [(int(rng.integers(2, 5000)), int(rng.integers(2, 5000)), fused, itemsize)
             for fused in (True, False) for itemsize in (4, 8, 2)]
    for M, N, fused, itemsize in cases:
        got = call_learner(function, M, N, fused, itemsize, stub_hint=TRAFFIC_STUB_HINT)
        want = forward_traffic_bytes(M, N, fused, itemsize)
        # compared as whole numbers: a count in float32 compares equal to its own rounding
        if not is_number(got) or not is_whole(got) or int(got) != want:
            TRAFFIC.reject(Traffic(M, N, fused, itemsize, got, want, seed))
    return f"all {len(cases)} cases right (seed={seed})."


# --- exercise 2: fused bias + activation --------------------------------------------------------

BIAS_ACTIVATION_STUB_HINT = (
    "start with this thread's column and row from the 2-D grid (x, the first, runs along the "
    "columns), and let only threads inside the matrix through; the hints above the exercise "
    "take it from there."
)

BIAS_ACTIVATION_HINT = (
    "inside the guard add the column's bias to the element, then apply the activation the code "
    "in act names (identity, ReLU or tanh) and write the result into this thread's element of "
    "out."
)


FUNCTIONS = {"relu": lambda z: np.maximum(z, 0), "tanh": np.tanh, "identity": lambda z: z}
_NAMES = {code: name for code, name, _ in ACTIVATIONS}


def _asked(e) -> str:
    """The name of the activation the code in act asks for (relu, tanh, identity)."""
    return _NAMES[e.inputs["act"]]


def _f(e):
    """The activation the code in act asks for, as a NumPy function."""
    return FUNCTIONS[_asked(e)]


def _another(other: str):
    """The mistake of applying ``other`` where act's code asks for another activation."""
    return looks_like(
        f"{other}(Z + b) where act asks for another activation",
        lambda e: (None if _asked(e) == other
                   else FUNCTIONS[other](e.inputs["Z"] + e.inputs["b"])),
        lambda e: (f"read the code in act: {e.inputs['act']} is {SAID[_asked(e)]} here "
                   f"({IDENTITY} identity, {RELU} ReLU, {TANH} tanh); compare act with "
                   "IDENTITY, RELU and TANH."),
        said=lambda e: f"{other}(Z + b), not {_asked(e)}")


# What the usual wrong forward formulas give, f being the activation act asks for, in the order
# they are tried (after the elements never written: outputs.matrix_mistakes).
BIAS_ACTIVATION_MISTAKES = (
    looks_like("f(Z): the bias is missing", lambda e: _f(e)(e.inputs["Z"]),
               "the bias is missing: add the column's bias before the activation.",
               said=lambda e: f"{_asked(e)}(Z): the bias is missing"),
    looks_like("f(Z + b[r]): the bias indexed by row",
               lambda e: _f(e)(e.inputs["Z"] + np.resize(e.inputs["b"], e.trial.rows)[:, None]),
               "there is one bias per output column: b[c].",
               said=lambda e: f"{_asked(e)}(Z + b[r]): the bias indexed by row"),
    looks_like("f(Z) + b: the bias added after the activation",
               lambda e: _f(e)(e.inputs["Z"]) + e.inputs["b"],
               "the order is backwards: the activation applies to the biased value, so the bias "
               "comes first.",
               said=lambda e: f"{_asked(e)}(Z) + b: the bias added after the activation"),
    looks_like("Z + b: the activation f is missing",
               lambda e: None if _asked(e) == "identity" else e.inputs["Z"] + e.inputs["b"],
               lambda e: (f"act = {e.inputs['act']} asks for {SAID[_asked(e)]}: apply it to "
                          "z = Z + b."),
               said=lambda e: f"Z + b: the {SAID[_asked(e)]} is missing"),
    *(_another(other) for other in FUNCTIONS),
    looks_like("min(Z + b, 0) for ReLU",
               lambda e: np.minimum(e.inputs["Z"] + e.inputs["b"], 0) if _asked(e) == "relu"
               else None, "ReLU keeps the positive part: the larger of z and 0.",
               said="min(Z + b, 0): ReLU's max turned into a min"),
)


BIAS_ACTIVATION_SHARE_HINT = (
    "one thread per element of out: each thread takes the one element its block and thread "
    "indices give; no thread loops over a row, a column or its block's tile.")
BIAS_ACTIVATION_SHARE_MISTAKES = one_per_thread(BIAS_ACTIVATION_SHARE_HINT, rows_of="out")
BIAS_ACTIVATION = CheckSpec(
    "bias_activation", "bias_activation(Z, b, act, out)", BIAS_ACTIVATION_STUB_HINT,
    BIAS_ACTIVATION_MISTAKES + BIAS_ACTIVATION_SHARE_MISTAKES, parameters=4,
    title="2. fused bias + activation",
    call="check_bias_activation(my_bias_activation)",
    holds="`out = f(Z + b)` for act = 1 (ReLU), 3 (tanh) and 0 (identity), each on its own "
          "random matrix (rows ≠ cols, not multiples of the block) and block shape (8×8, 16×4, "
          "4×16 in the simulator), one thread per element, x along the columns (traced on a "
          "small launch: no thread writing more than one element)",
    also="a stub; nothing written; a missing or `<=` guard, the guard one short (the last row "
         "or column skipped), rows and columns swapped, `threadIdx` alone (only the first "
         "block written), a hard-coded block size, a write into Z (the shared 2-D rules); "
         "simulator-only code; gpulab's own kernel")


@BIAS_ACTIVATION.check
def check_bias_activation(kernel, seed: int | None = None, dtype=np.float32) -> str:
    """One launch per activation (:func:`~gpulab.exercises.outputs.per_activation`), each
    judged by :func:`~gpulab.exercises.outputs.check_matrix_output`: inputs padded with 100,
    out starting as NaN, a value right within 1e-5 relative, 1e-6 absolute."""
    source = BIAS_ACTIVATION.start(kernel)

    def run(trial: Trial, code: int, name: str) -> None:
        Z = trial.normal(trial.rows, trial.cols)
        Z.flat[trial.rng.choice(Z.size, 2, replace=False)] = (800, -800)  # exp(2 z) overflows
        b = trial.normal(trial.cols, scale=0.5)
        def judged() -> None:
            check_matrix_output(kernel, trial, source, {"Z": Z, "b": b, "act": code},
                                reference.bias_activation(Z, b, name),
                                BIAS_ACTIVATION_MISTAKES, BIAS_ACTIVATION_HINT)

        try:
            judged()
        except KernelError as error:
            if not isinstance(error.cause, OverflowError):
                raise
            try:  # again with exp giving inf past its range, as on a GPU: 1 - 2 / (inf + 1) is 1
                with math_overflows_to_inf():
                    judged()
            except (CheckFailedError, KernelError):
                raise CheckFailedError(
                    "exp overflowed: Z + b reaches ±800 here, and exp of anything above 709.8 "
                    "overflows float64 (88.7 float32). On a GPU exp gives inf there, and your "
                    f"formula turns it into a wrong value (inf / inf is NaN) ({trial}).",
                    "tanh never overflows: use math.tanh, or a formula whose exp only ever "
                    "sees numbers <= 0 (tanh is odd: tanh(-z) = -tanh(z)).") from None

    result = per_activation("check_bias_activation", seed, dtype, run)
    # the method: one thread per element of out, traced on a small launch
    small = Trial("check_bias_activation", seed, (5, 7), (4, 4), np.dtype(dtype),
                  np.random.default_rng(seed))
    reject_unshared_work(BIAS_ACTIVATION_SHARE_MISTAKES, kernel, small, small.normal(5, 7),
                         small.normal(7), RELU, np.zeros((5, 7), small.dtype))
    return result


# --- exercise 3: stable softmax with cross-entropy ----------------------------------------------

SOFTMAX_STUB_HINT = (
    "one thread per row, guarded by the number of rows; each thread loops over its row's "
    "classes. The hints above the exercise say how to keep exp from overflowing."
)
SOFTMAX_FORMULA_HINT = (
    "three steps per row: its largest logit m; the total of exp(z - m) over the row; each "
    "probability as its exp(z - m) over that total. The loss comes from the same total, m and "
    "the label's logit (the log-sum-exp), not from a probability."
)
OVERFLOW_HINT = (
    "subtract the row's largest logit m first: softmax(z) = softmax(z - m), and every z - m is "
    "<= 0, so every exp(z - m) lies in (0, 1] and the largest is exactly 1. exp(1000) is far "
    "beyond float32's largest value, 3.4e38 (= e^88.7), and float64's, 1.8e308 (= e^709.8): "
    "chapter 04's ranges."
)
MAX_START_HINT = (
    "start m from one of the row's own logits, not from 0 or another number typed in: here "
    "the logits of a row lie near a level from -4000 to -1000, below such a start, so m "
    "stayed at it, every exp(z - m) underflowed to 0, the sum was 0 and p = 0 / 0."
)
LOW_CASE = "logits from -4000 to -1000"
LARGEST_HINT = (
    "subtract the row's *largest* logit: m = max over the row. Subtracting another value (the "
    "first logit, the mean) leaves some z - m far above 0, and exp of anything above 88.7 "
    "overflows float32 (709.8 for float64)."
)
LOG_P_HINT = (
    "take the loss from the log-sum-exp, not from log(p): -log p[label] = log(total) + m - "
    "z[label]. When z[label] is far below m, p[label] underflows to 0 and log(0) = -inf, but "
    "log(total) + m - z[label] is a large, finite number, the right loss."
)


# Classes per row the check draws from: more than 10, the digits' count, so that a kernel that
# hard-codes 10 (even one that skips the classes past the row's end) fails on every seed.
CLASS_COUNTS = (11, 12, 13, 14, 15)
WIDE_CLASS_COUNTS = (33, 48)  # a last case's classes, drawn from [33, 48)
ROWS_HINT = (
    "a thread read or wrote past an edge: the guard must let through only the threads whose "
    "row is inside logits (its number of rows, compared with `<`, not `<=`), and the loops "
    "over a row must stop at its number of classes, read from the array."
)


# How many dimensions each of the kernel's parameters has, by position: logits, labels, probs,
# losses.
_PARAMETER_DIMS = (2, 1, 2, 1)


def _dims(node: ast.AST, arrays: dict[str, int]) -> int:
    """How many dimensions the expression ``node`` has, when it is one of the kernel's arrays, a
    name bound to one, a subscript of one (``logits[r]``, ``row[:]``) or a local or shared
    array; 0 otherwise (a number, a tuple, anything the rule cannot tell)."""
    if isinstance(node, ast.Name):
        return arrays.get(node.id, 0)
    if isinstance(node, ast.Subscript):
        dims = _dims(node.value, arrays)
        if not dims:
            return 0
        index = node.slice
        parts = index.elts if isinstance(index, ast.Tuple) else [index]
        fixed = sum(not isinstance(part, ast.Slice) for part in parts)
        return max(dims - fixed, 0)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "array"):
        return 1  # cuda.local.array(...), cuda.shared.array(...)
    return 0


def _array_names(source: KernelSource) -> dict[str, int]:
    """The kernel's names that hold an array (its parameters, and every name bound to one of
    them or to a row or slice of one), with their number of dimensions."""
    arrays = {name: dims for name, dims in zip(source.parameters, _PARAMETER_DIMS, strict=False)}
    if not source.parameters:
        arrays["logits"] = 2
    changed = True
    while changed:
        changed = False
        for node in source.walk():
            if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                dims = _dims(node.value, arrays)
                for target in targets:
                    if dims and isinstance(target, ast.Name) and target.id not in arrays:
                        arrays[target.id] = dims
                        changed = True
    return arrays


def _whole_row_reductions(source: KernelSource) -> list[str]:
    """Lines that hand a whole row of logits (a slice, ``logits[r, :]``, or ``logits[r]``), a
    name bound to one, or any other array to Python's builtin ``max``, ``min`` or ``sum`` with
    that one argument (``max(m, x)`` over numbers and ``max((a, b))`` stay allowed)."""
    arrays = _array_names(source)
    found = []
    for node in source.walk():
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("max", "min", "sum") and len(node.args) == 1
                and _dims(node.args[0], arrays)):
            found.append(source.line(node))
    return found


@dataclass
class SoftmaxSource:
    """The softmax kernel's source and, after a failed launch, the trial it failed on."""

    source: KernelSource
    trial: Trial | None = None


SOFTMAX_SOURCE_MISTAKES = (
    Mistake("a builtin `max` (or `min`, `sum`) over a whole row slice",
            lambda e: e.trial is None and _whole_row_reductions(e.source),
            lambda e: (f"`{_whole_row_reductions(e.source)[0]}` hands a whole row of logits "
                       "(an array slice) to Python's builtin function: the simulator runs it "
                       "as Python over a NumPy view, which is not the method this exercise "
                       "teaches, and a GPU thread works on numbers, one element at a time"),
            "find the row's largest logit with a loop of your own over the row's classes, "
            "keeping the largest so far (section 5's hints), not with one call on the row.",
            "source"),
    Mistake("the class count hard-coded (`range(10)`)",
            lambda e: e.trial is not None and range_over_typed_in_count(e.source),
            lambda e: (f"`{range_over_typed_in_count(e.source)}` loops over a fixed number of "
                       f"classes, but these rows have {e.trial.inner} (the check never uses "
                       "the digits' 10): a kernel must work for any number of classes"),
            "read the number of classes from the logits array's shape, as you read the number "
            "of rows.", "source"),
)


def softmax_cases(trial: Trial) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(case, logits, labels): ordinary logits, logits near +1000, rows near a level from -4000
    to -1000 (below any running maximum started from a number typed in, 0 or -1000), and rows
    whose largest logit (never in column 0) stands 1000-1500 above the rest, with the label on
    one of the rest, so that its probability underflows to 0."""
    rng, n, C, dtype = trial.rng, trial.n, trial.inner, trial.dtype
    labels = rng.integers(0, C, n).astype(np.int64)
    # Gaps past 709.8, where exp overflows float64: the simulator runs math.exp in float64
    # whatever the arrays' dtype, and a GPU's float32 exp overflows much earlier (88.7).
    gap = (1000, 1500)
    top = rng.integers(1, C, n)  # never column 0: a kernel subtracting z[0] must fail
    base = rng.uniform(-20, 20, n)
    far = base[:, None] - rng.uniform(*gap, (n, C))
    far[np.arange(n), top] = base
    far_labels = (top + rng.integers(1, C, n)) % C  # any column but the largest
    return [
        ("ordinary logits", (rng.standard_normal((n, C)) * 2).astype(dtype), labels),
        ("logits near +1000", (1000 + rng.standard_normal((n, C)) * 2).astype(dtype), labels),
        (LOW_CASE, (-1000 * 2 ** rng.uniform(0, 2, (n, 1)) + rng.standard_normal((n, C)) * 2
                    ).astype(dtype), labels),
        ("rows whose largest logit is over 1000 above the rest", far.astype(dtype),
         far_labels.astype(np.int64)),
    ]


@dataclass
class Crash:
    """An arithmetic exception (``cause``) a launch raised in the simulator, which runs the kernel
    as Python (on a GPU the same mistakes give inf or NaN instead), with its ``case``, the trial
    and whether the case near +1000 had passed: the evidence :data:`CRASH_MISTAKES` are told
    from."""

    cause: BaseException
    case: str
    trial: Trial
    passed_high: bool

    @property
    def overflowed(self) -> bool:
        return isinstance(self.cause, OverflowError) or "math range error" in str(self.cause)

    @property
    def domain_error(self) -> bool:
        return isinstance(self.cause, ValueError) and "domain" in str(self.cause)


# What an arithmetic exception in the simulator means for each case, in the order they are
# tried; any other exception is the launch's own failure.
CRASH_MISTAKES = (
    Mistake("the unstable softmax, no max subtracted: exp overflows near +1000 (an "
            "OverflowError in the simulator)",
            lambda e: e.overflowed and e.case == "logits near +1000",
            "exp overflowed: OverflowError in the simulator, inf (then NaN) on a GPU",
            OVERFLOW_HINT),
    Mistake("a value other than the row's max subtracted: exp overflows (an OverflowError in "
            "the simulator)", lambda e: e.overflowed,
            "exp overflowed: OverflowError in the simulator, inf (then NaN) on a GPU",
            LARGEST_HINT),
    Mistake("the max started from 0 or another number typed in: below it (-4000 to -1000) "
            "every exp underflows and a row's sum is 0 (a ZeroDivisionError in the simulator)",
            lambda e: ((isinstance(e.cause, ZeroDivisionError) or e.domain_error)
                       and e.case == LOW_CASE),
            lambda e: (f"every exp underflowed to 0, so a row's sum was 0: "
                       f"{type(e.cause).__name__} in the simulator, NaN or inf on a GPU"),
            lambda e: MAX_START_HINT if e.passed_high else OVERFLOW_HINT),
    Mistake("the loss as -log p, which is log 0 when p underflows (a ValueError in the "
            "simulator)", lambda e: e.domain_error and e.case.startswith("rows whose"),
            "log(0): a probability underflowed to 0 and its log is -inf", LOG_P_HINT),
)


@dataclass
class Unwritten:
    """The rows of ``probs`` or ``losses`` a kernel left unwritten (``missing``, still NaN) on
    the ordinary logits, with its ``losses`` and the trial: the evidence
    :data:`UNWRITTEN_MISTAKES` are told from."""

    missing: np.ndarray
    losses: np.ndarray
    trial: Trial
    probs: np.ndarray | None = None

    @property
    def classes_missed(self) -> tuple[int, int] | None:
        """(a row, a class) never written in probs when every row's loss and some of its
        probabilities were written: the loops over the classes miss some."""
        holes = np.isnan(self.probs)
        if np.isnan(self.losses).any() or holes.all(axis=1).any() or not holes.any():
            return None
        return tuple(int(i) for i in np.argwhere(holes)[0])

    def only_the_first(self, rows: int) -> bool:
        """Are the rows missing exactly those from ``rows`` on?"""
        return np.array_equal(self.missing, np.arange(rows, self.trial.n))

    @property
    def text(self) -> str:
        return (f"rows {self.missing[0]}..{self.missing[-1]} ({self.missing.size} of "
                f"{self.trial.n}) of probs or losses were never written")


# Rows never written, in the order they are tried: the most specific first, any other last.
UNWRITTEN_MISTAKES = (
    Mistake("classes of a row never written (a loop over the classes one short, or only the "
            "label's)", lambda e: e.probs is not None and e.classes_missed,
            lambda e: (f"every loss was written, but {int(np.isnan(e.probs).sum())} "
                       f"probabilities in {e.missing.size} rows were not, e.g. "
                       f"probs{list(e.classes_missed)}: the loop that writes a row's "
                       "probabilities misses classes"),
            lambda e: (f"a row has {e.trial.inner} classes, 0 to {e.trial.inner - 1}: each "
                       "thread writes the probability of every one (loop to the logits' number "
                       "of columns, read from the array).")),
    Mistake("a guard on the classes, not the rows (only the first C rows written)",
            lambda e: e.only_the_first(e.trial.inner), lambda e: e.text,
            lambda e: (f"only the first {e.trial.inner} rows, as many as there are classes: "
                       "the guard compares the row with the number of classes, not the number "
                       "of rows.")),
    Mistake("`threadIdx.x` alone as the row (only the first block's rows written)",
            lambda e: e.only_the_first(e.trial.threads_per_block), lambda e: e.text,
            GLOBAL_INDEX_HINT),
    Mistake("the guard one short (the last row never written)",
            lambda e: np.array_equal(e.missing, [e.trial.n - 1]), lambda e: e.text,
            "the guard skips the last row: it is one short."),
    Mistake("losses never written", lambda e: np.isnan(e.losses).all(), lambda e: e.text,
            "write each row's loss into losses, at the row's index."),
    Mistake("other rows never written", lambda e: e.missing.size > 0, lambda e: e.text,
            "one thread per row, from the global index, and every thread inside the guard "
            "writes its whole row."),
)


@dataclass
class SoftmaxValues:
    """What a kernel wrote for one case (``probs``, ``losses``) with the case's logits and
    labels, the trial and whether the case near +1000 had passed; the right values
    (``want_p``, ``want``) and what is right within float rounding (``p_ok``, ``l_ok``) follow.
    The evidence :data:`VALUE_MISTAKES` are told from."""

    case: str
    logits: np.ndarray
    labels: np.ndarray
    probs: np.ndarray
    losses: np.ndarray
    trial: Trial
    passed_high: bool = False

    def __post_init__(self):
        self.want_p, self.want = reference.softmax_cross_entropy(self.logits, self.labels)
        eps = float(np.finfo(self.trial.dtype).eps)
        largest = float(np.abs(self.logits).max())
        # p = exp(z - lse), with lse = m + log(total) rounded to the dtype, is off by about
        # eps * |lse| relative: the log-sum-exp form, right, near ±1000 as much as 2e-4 in fp32
        self.p_ok = np.isclose(self.probs, self.want_p, rtol=64 * eps + 2 * eps * largest,
                               atol=8 * eps)
        self.atol = 16 * eps * (1 + largest)
        self.l_ok = np.isclose(self.losses, self.want, rtol=16 * eps, atol=self.atol)

    @property
    def right(self) -> bool:
        return bool(self.p_ok.all() and self.l_ok.all())

    @property
    def not_finite(self) -> bool:
        """A probability or a loss is inf or NaN, in a case other than the ordinary logits."""
        finite = np.isfinite(self.probs).all() and np.isfinite(self.losses).all()
        return bool(not finite and self.case != "ordinary logits")

    @property
    def which_not_finite(self) -> str:
        finite = np.isfinite(self.probs).all(axis=1) & np.isfinite(self.losses)
        r = int(np.flatnonzero(~finite)[0])
        return (f"row {r} gave probs {self.probs[r, :3]}... and loss {self.losses[r]:.6g}: not "
                "finite")

    @property
    def probs_wrong(self) -> bool:
        return not self.p_ok.all()

    @property
    def probs_at(self) -> str:
        r = int(np.flatnonzero(~self.p_ok.all(axis=1))[0])
        return (f"probs[{r}] should be {np.array2string(self.want_p[r], precision=4)} but is "
                f"{np.array2string(self.probs[r], precision=4)}")

    def probs_are(self, value) -> bool:
        return bool(np.allclose(self.probs, value, rtol=1e-4, atol=1e-6))

    @property
    def at(self) -> str:
        """The first wrong loss: which row, what it should be and what it is."""
        r = int(np.flatnonzero(~self.l_ok)[0])
        return f"losses[{r}] should be {self.want[r]:.6g} but is {self.losses[r]:.6g}"

    def are(self, value) -> bool:
        """Are the losses ``value``?"""
        return bool(np.allclose(self.losses, value, rtol=1e-4, atol=self.atol))


def _not_finite_mistake(did: str, seen, message: str, hint) -> Mistake:
    return Mistake(did, lambda e: e.not_finite and seen(e),
                   lambda e: f"{message}: {e.which_not_finite}", hint)


# A row that is not finite, in a case other than the ordinary logits: what a GPU gives where
# the simulator raises (:data:`CRASH_MISTAKES`), in the order they are tried.
NOT_FINITE_MISTAKES = (
    _not_finite_mistake("the unstable softmax, no max subtracted: a row not finite near +1000 "
                        "(inf on a GPU)", lambda e: e.case == "logits near +1000",
                        "exp overflowed to inf", OVERFLOW_HINT),
    _not_finite_mistake("the max started from 0 or another number typed in: a row not finite "
                        "from -4000 to -1000 (a sum of 0 on a GPU)",
                        lambda e: e.case == LOW_CASE,
                        "every exp underflowed to 0 and the sum was 0",
                        lambda e: MAX_START_HINT if e.passed_high else OVERFLOW_HINT),
    _not_finite_mistake("the loss as -log p: a loss not finite, the probabilities right "
                        "(log 0 on a GPU)", lambda e: e.p_ok.all(),
                        "the probabilities are right but a loss is not finite", LOG_P_HINT),
    _not_finite_mistake("a value other than the row's max subtracted: a row not finite (inf "
                        "on a GPU)", lambda e: True, "exp overflowed to inf", LARGEST_HINT),
)

# Wrong probabilities, in the order they are tried.
PROBS_MISTAKES = (
    Mistake("rows not normalised (exp(z - m), or exp(z), not divided by the row's total)",
            lambda e: e.probs_wrong and (
                e.probs_are(np.exp(e.logits.astype(np.float64)
                                   - e.logits.max(axis=1, keepdims=True)))
                or e.probs_are(np.exp(e.logits.astype(np.float64)))),
            lambda e: f"{e.probs_at}: the rows do not add up to 1",
            "a probability is the row's exp(z - m) divided by the row's total of them."),
    Mistake("probabilities that add up to 1 but are off",
            lambda e: e.probs_wrong and np.allclose(e.probs.sum(axis=1), 1, atol=1e-4),
            lambda e: f"{e.probs_at}: each row adds up to 1, but the values are off",
            SOFTMAX_FORMULA_HINT),
    Mistake("other wrong probabilities", lambda e: e.probs_wrong, lambda e: e.probs_at,
            SOFTMAX_FORMULA_HINT),
)


def _loss_mistake(did: str, value, hint: str) -> Mistake:
    return Mistake(did, lambda e: e.are(value(e)), lambda e: f"{e.at}: {did}", hint)


# The wrong losses of a kernel whose probabilities are right, in the order they are tried.
LOSS_MISTAKES = (
    _loss_mistake("the sign is wrong", lambda e: -e.want,
                  "the loss is -log p[label]: a probability is at most 1, so its log is <= 0 "
                  "and the loss >= 0."),
    _loss_mistake("m is missing", lambda e: e.want - e.logits.max(axis=1).astype(np.float64),
                  "after subtracting m, add it back: log(total) + m - z[label]."),
    _loss_mistake("the label's logit is not subtracted",
                  lambda e: (e.want + e.logits[np.arange(e.labels.size), e.labels]
                             .astype(np.float64)),
                  "the loss ends by subtracting the logit of the row's label."),
    _loss_mistake("it is -log p[0], the first class's, not the label's",
                  lambda e: -np.log(np.maximum(e.want_p[:, 0].astype(np.float64), 1e-300)),
                  "use the row's label: labels says which class is right for each row, not "
                  "always the first."),
    Mistake("other wrong losses", lambda e: not e.l_ok.all(), lambda e: e.at,
            SOFTMAX_FORMULA_HINT),
)

# Wrong values (:class:`SoftmaxValues`), in the order they are tried: rows not finite, then
# wrong probabilities, then wrong losses (the probabilities right).
VALUE_MISTAKES = NOT_FINITE_MISTAKES + PROBS_MISTAKES + LOSS_MISTAKES


SOFTMAX = CheckSpec(
    "softmax_cross_entropy", "softmax_cross_entropy(logits, labels, probs, losses)",
    SOFTMAX_STUB_HINT,
    SOFTMAX_SOURCE_MISTAKES + CRASH_MISTAKES + UNWRITTEN_MISTAKES + VALUE_MISTAKES,
    counted_from_the_arrays="a row's classes", surely_past=WIDE_CLASS_COUNTS[0],
    parameters=4,
    title="3. stable softmax with cross-entropy",
    call="check_softmax_cross_entropy(my_softmax_cross_entropy)",
    holds="one thread per row writes the row's softmax into `probs` and its loss "
          "−log probs[r, labels[r]] into `losses`, on ordinary logits, logits near +1000, rows "
          "near a level from −4000 to −1000, and rows whose largest logit is 1000–1500 above "
          "the rest (the label on one of the rest), with a class count drawn from 11–15 "
          "(never the digits' 10), then ordinary logits with 33–47 classes and twice the rows "
          "on another block size: probabilities and losses within float rounding (for "
          "p = exp(z − lse), the rounding of lse too); a one-pass (online) softmax is accepted",
    also="the stub; a thread past an edge (a missing or `<=` guard, loops past a row's "
         "classes: IndexError in the simulator); a write into logits; a block size or a "
         "class count typed in, which wider rows on another block size show")


@SOFTMAX.check
def check_softmax_cross_entropy(kernel, seed: int | None = None, dtype=np.float32) -> str:
    """A 1-D grid over the rows (blocks of 32 threads in the simulator, 128 on a GPU; the rows
    not a multiple of the block), one launch per case of :func:`softmax_cases`, in order:
    exp(1000) overflows float32 and float64, from -1000 down every exp(z) underflows to 0, and a
    label's probability 1000 below its row's largest underflows to 0 (-log p = inf), so only
    the stable version survives all four. The source is read before the first launch (a
    builtin reduction over a row) and again after a failed one (a class count typed in); a
    failed launch is judged by its case (:data:`CRASH_MISTAKES`)."""
    threads = 128 if device.tier() == "gpu" else 32
    source = SOFTMAX.start(kernel)
    reject(SOFTMAX_SOURCE_MISTAKES, SoftmaxSource(source))
    rng = np.random.default_rng(seed)
    n = draw_size(rng, threads, (40, 100) if threads == 32 else (300, 3000))
    trial = Trial("check_softmax_cross_entropy", seed, (n,), (threads,), np.dtype(dtype), rng,
                  inner=int(rng.choice(CLASS_COUNTS)))  # classes per row
    offer_trace(kernel, 2, 8, "logits", "labels", "probs", "losses",
                note="with NumPy arrays: logits of 13 x 4, labels of 13 int64, probs of "
                     "13 x 4, losses of 13")
    passed_high = False
    for case, logits, labels in softmax_cases(trial):
        trial.case = case
        try:
            _softmax_case(kernel, trial, case, logits, labels, passed_high)
        except (CheckFailedError, KernelError) as failure:
            reject(SOFTMAX_SOURCE_MISTAKES, SoftmaxSource(source, trial))
            _blame_hard_coded_block(source, trial, failure)
            raise
        passed_high = passed_high or case == "logits near +1000"
    wide = _wider_rows(kernel, trial, source)
    # a row's values in a shared array give right rows in the simulator, which runs a block's
    # threads one after another: traced on a small launch, a race on it shows
    small = Trial("check_softmax_cross_entropy", seed, (13,), (8,), np.dtype(dtype), rng,
                  inner=5, case="ordinary logits")
    _, logits, labels = softmax_cases(small)[0]
    traced(kernel, small, logits, labels, np.full(logits.shape, np.nan, small.dtype),
           np.full(small.n, np.nan, small.dtype))
    return (f"probabilities and losses right for ordinary logits, logits near +1000 and "
            f"from -4000 to -1000, and rows more than 1000 apart ({n} rows x {trial.inner} "
            f"classes, {trial.launched}), then {wide.inner} classes on {wide.launched} "
            f"(seed={seed}).")


def _blame_hard_coded_block(source: KernelSource, trial: Trial, failure: Exception) -> None:
    """Fail naming the line, when a failed launch's kernel hard-codes the block size."""
    line = hard_coded_block(source)
    if line:
        detail = (failure.message if isinstance(failure, CheckFailedError)
                  else f"it stopped with {type(failure.cause).__name__}")
        raise CheckFailedError(
            f"`{line}` hard-codes the block size, but this launch's blocks have "
            f"{trial.threads_per_block} threads: {detail}",
            "use `cuda.grid(1)` (or `cuda.blockDim.x`), never a number, for the block size: "
            "the caller chooses it at launch.") from None


def _wider_rows(kernel, trial: Trial, source) -> Trial:
    """Ordinary logits again, with more classes than :data:`CLASS_COUNTS` (33-47: more than a
    local array of 16 or 32 holds) and twice the rows (plus one) on another block size
    (:meth:`Trial.other_block`), so that a class count or a block size typed in fails. Returns
    that trial."""
    wide = replace(trial.other_block(), inner=int(trial.rng.integers(*WIDE_CLASS_COUNTS)),
                   shape=(2 * trial.n + 1,))  # rows a block size typed in leaves unwritten
    wide.case = "ordinary logits"
    _, logits, labels = softmax_cases(wide)[0]
    try:
        _softmax_case(kernel, wide, wide.case, logits, labels, True)
    except (CheckFailedError, KernelError) as failure:
        reject(SOFTMAX_SOURCE_MISTAKES, SoftmaxSource(source, wide))
        _blame_hard_coded_block(source, wide, failure)
        detail = (failure.message if isinstance(failure, CheckFailedError)
                  else f"it stopped with {type(failure.cause).__name__}")
        raise CheckFailedError(
            f"your kernel is right for {trial.inner} classes on {trial.launched}, but not for "
            f"{wide.inner} classes on {wide.launched}: it depends on a size typed in (the "
            f"block's, or the number of classes, as a local array's length?). With "
            f"{wide.inner} classes: {detail}",
            "read the rows and the classes from the arrays' shapes and the row from "
            "`cuda.grid(1)`, and keep no per-class array of a fixed length: loop over the row "
            "again where you need its values.") from None
    return wide


def _softmax_case(kernel, trial: Trial, case: str, logits, labels,
                  passed_high: bool) -> None:
    """Launch one case and fail with what went wrong, if anything."""
    n, threads = trial.n, trial.threads_per_block
    d_logits_all, d_logits = padded(logits, threads, PAD_VALUE)
    _, d_labels = padded(labels, threads, 0)
    d_probs_all, d_probs = padded(np.full(logits.shape, np.nan, trial.dtype), threads, np.nan)
    d_losses_all, d_losses = padded(np.full(n, np.nan, trial.dtype), threads, np.nan)
    before = d_logits_all.copy_to_host()
    try:
        launch(kernel, trial, d_logits, d_labels, d_probs, d_losses, index_hint=ROWS_HINT)
    except KernelError as error:
        failure = diagnose(CRASH_MISTAKES, Crash(error.cause, case, trial, passed_high))
        if failure is None:
            raise
        raise failure from None
    changed_input_failure("logits", before, d_logits_all.copy_to_host(), "probs and losses",
                          trial)
    probs = read_back(d_probs_all, logits.shape, trial, what="probs", hint=ROWS_HINT)
    losses = read_back(d_losses_all, (n,), trial, what="losses", hint=ROWS_HINT)
    unwritten = np.isnan(probs).any(axis=1) | np.isnan(losses)
    if case == "ordinary logits":
        reject(UNWRITTEN_MISTAKES, Unwritten(np.flatnonzero(unwritten), losses, trial, probs))
    values = SoftmaxValues(case, logits, labels, probs, losses, trial, passed_high)
    if not values.right:
        reject(VALUE_MISTAKES, values)


__all__ = ["check_bias_activation", "check_softmax_cross_entropy", "check_traffic"]
