"""Chapter 06's exercises: the chain rule as code. Each check is described once, by its
:class:`~gpulab.exercises.spec.CheckSpec` (:data:`DENSE`, :data:`BACKWARD`, :data:`BIAS_GRAD`,
:data:`TRANSPOSE`, :data:`NUMERIC`), which ``help(check_...)`` shows. The three kernels have
gpulab's signatures (``gpulab.kernels.dense.bias_activation_backward``,
``gpulab.kernels.dense.bias_grad``, ``gpulab.kernels.dense.transpose_tiled``); in the simulator
the transpose's accesses are grouped into warp requests by :mod:`gpulab.memory_model`.

Sizes and values are random (the kernel checks draw shapes with rows != cols that are not
multiples of the block, and several block shapes); a failure names the seed to repeat it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import numpy as np

from gpulab import memory_model, reference
from gpulab.exercises.evidence import as_numbers, writes_of
from gpulab.exercises.grid_stride import one_per_thread
from gpulab.exercises.mistakes import Mistake, diagnose, reject
from gpulab.exercises.outputs import (
    IDENTITY,
    MATRIX_SHARED_RACE,
    PAD_VALUE,
    RELU,
    SAID,
    TANH,
    MatrixOutput,
    blame_hard_coded_block,
    coverage_failure,
    per_activation,
    run_2d,
)
from gpulab.exercises.results import (
    GLOBAL_INDEX_HINT,
    CheckFailedError,
    KernelError,
    add_note,
    offer_trace,
)
from gpulab.exercises.running import (
    call_learner,
    changed_input_failure,
    launch,
    padded,
    read_back,
    trace_trial,
)
from gpulab.exercises.source_rules import (
    KernelSource,
    adds_into,
    count_calls,
    hard_coded_block,
    lines_with_number,
    shared_array_without_barrier,
)
from gpulab.exercises.spec import CheckSpec, reject_unshared_work, under_two_blocks
from gpulab.exercises.trial import Trial, draw_size, tier_key
from gpulab.hardware import SHARED_BANK_BYTES, SHARED_BANKS
from gpulab.instruments import RecordingArray, WatchedArray, poison_value
from gpulab.kernels.dense import ACTIVATION_CODES


def _close(got, want, rtol=1e-10, atol=1e-12) -> bool:
    got, want = np.asarray(got), np.asarray(want)
    return got.shape == want.shape and bool(np.allclose(got, want, rtol=rtol, atol=atol))


# --- exercise 1: a dense layer's backward pass, in NumPy ----------------------------------------

DENSE_BACKWARD_STUB_HINT = (
    "each gradient has the shape of what it is the gradient of: dW like W (a product of X, "
    "transposed, and dZ), db like b (dZ added up over the batch), dX like X (a product of dZ "
    "and W, transposed)."
)
OF = {"dW": "W", "db": "b", "dX": "X"}


@dataclass
class DenseGrads:
    """What the learner's ``dense_backward`` returned (``got``: name -> array, None when it did
    not return three arrays) against the right gradients ``want``."""

    got: dict | None
    want: dict
    batch: int
    where: str
    returned: str = ""
    row_sums: np.ndarray | None = None
    changed: str = ""  # the inputs the function wrote into
    dtypes: dict | None = None  # name -> the dtype returned, before as float64

    def first(self, test) -> str | None:
        """The first gradient name (dW, db, dX) for which ``test(got, want)`` holds."""
        return next((n for n in self.want if test(self.got[n], self.want[n])), None)

    @property
    def in_float32(self) -> str | None:
        """The first gradient returned as float32, right to float32's rounding only."""
        for name, want in self.want.items():
            got = self.got[name]
            if ((self.dtypes or {}).get(name) == np.float32 and not _close(got, want)
                    and _close(got, want, rtol=1e-4,
                               atol=1e-5 * float(np.abs(want).max() or 1))):
                return name
        return None

    @property
    def misshapen(self) -> str | None:
        return self.first(lambda got, want: got.shape != want.shape)

    def shape_text(self, name: str) -> str:
        return (f"{name} has shape {self.got[name].shape} but should have "
                f"{self.want[name].shape}, the shape of {OF[name]}")


def _order_swapped(e: DenseGrads) -> bool:
    shapes = [g.shape for g in e.got.values()]
    return e.misshapen is not None and sorted(shapes) == sorted(w.shape for w in e.want.values())


def _transposed(got, want) -> bool:
    return got.shape != want.shape and _close(got, want.T)


DENSE_MISTAKES = (
    Mistake("an input changed in place (dZ /= batch, X -= ...)", lambda e: e.changed,
            lambda e: f"your function changed its input {e.changed}: the gradients must come "
                      "from the arrays as given, and the caller still uses them",
            "compute new arrays from X, W and dZ, and write into none of them (no `/=`, `-=` "
            "or item assignment on an input).", recognised_from="host code"),
    Mistake("not three results", lambda e: e.got is None,
            lambda e: f"your function returned {e.returned}: it must return three arrays, dW, "
                      "db and dX, in that order", DENSE_BACKWARD_STUB_HINT),
    Mistake("results in another order", _order_swapped,
            lambda e: f"{e.shape_text(e.misshapen)}. Your results look like they are in another "
                      "order: the check expects dW, then db, then dX", DENSE_BACKWARD_STUB_HINT),
    Mistake("db summed over the outputs (each row) instead of over the batch",
            lambda e: _close(e.got["db"], e.row_sums),
            "db holds the sum of each row of dZ (over the outputs), not of each column (over "
            "the batch): db has the shape of b, one value per output",
            "b is added to every sample's row, so its gradient collects one column of dZ per "
            "output, added over the samples."),
    Mistake("db kept as a 1 x n_out row", lambda e: e.got["db"].shape == (1,) + e.want["db"].shape,
            lambda e: f"{e.shape_text('db')}: the sum kept the batch axis, with length 1",
            "b is a vector: its gradient has one axis too, not a row of a matrix."),
    Mistake("a gradient transposed (dW = dZ^T X)",
            lambda e: e.first(_transposed) is not None,
            lambda e: f"{e.shape_text(e.first(_transposed))}: it is the right gradient, "
                      "transposed",
            "write the shapes of the factors next to each other: the product's shape must come "
            "out as that of the array the gradient belongs to."),
    Mistake("db not a vector (a sum over both axes, or a column)",
            lambda e: e.got["db"].ndim != 1,
            lambda e: f"{e.shape_text('db')}: db is a vector, one value per output" + (
                ", but dZ was added up over both axes into one number" * (e.got["db"].ndim == 0)),
            "b is a vector: add dZ up over the batch axis only, one total per output."),
    Mistake("a missing or extra transpose (a wrong shape)", lambda e: e.misshapen is not None,
            lambda e: f"{e.shape_text(e.misshapen)}: a transpose is missing, extra or on the "
                      "wrong factor", DENSE_BACKWARD_STUB_HINT),
    Mistake("db averaged over the batch (the wrong normalisation)",
            lambda e: _close(e.got["db"], e.want["db"] / e.batch),
            "db is the mean of dZ's rows, not their sum",
            "every sample used the same b, so their gradients add up; dZ already carries the "
            "1/batch of the mean loss, and dividing again shrinks db by the batch size."),
    Mistake("dW or dX averaged over the batch",
            lambda e: e.first(lambda got, want: _close(got, want / e.batch)),
            lambda e: f"{e.first(lambda got, want: _close(got, want / e.batch))} is the right "
                      "one divided by the batch size",
            "dZ already carries the 1/batch of the mean loss: the product over the batch is "
            "the whole gradient, with no further division."),
    Mistake("a sign flipped", lambda e: e.first(lambda got, want: _close(got, -want)) is not None,
            lambda e: f"{e.first(lambda got, want: _close(got, -want))} has the opposite sign of "
                      "the gradient",
            "the backward pass computes the gradient itself; the minus sign belongs to the "
            "update step (chapter 07), not here."),
    Mistake("computed in float32 (the float64 inputs' digits lost)",
            lambda e: e.in_float32 is not None,
            lambda e: (f"{e.in_float32} is float32 and off by float32's rounding: X, W and dZ "
                       "are float64, and a float32 copy of them keeps about 7 of their 16 "
                       "digits"),
            "compute with the arrays as given (float64): no astype(np.float32)."),
    Mistake("wrong values", lambda e: e.first(lambda got, want: not _close(got, want)),
            lambda e: f"{e.first(lambda got, want: not _close(got, want))} has the right shape "
                      "but wrong values", DENSE_BACKWARD_STUB_HINT),
)
DENSE = CheckSpec(
    "dense_backward", "dense_backward(X, W, dZ) -> (dW, db, dX)", DENSE_BACKWARD_STUB_HINT,
    DENSE_MISTAKES, title="1. dense backward", call="check_dense_backward(dense_backward)",
    holds="dW, db and dX of a dense layer Z = X @ W + b, in NumPy, equal gpulab's reference "
          "to 1e-10 on random sizes (batch, n_in and n_out all different)",
    also="a stub; an exception in the function (named)")


@DENSE.check
def check_dense_backward(function, seed: int | None = None) -> str:
    """Compared with :func:`gpulab.reference.dense_backward` (identity activation: dA = dZ),
    on random sizes from 3 to 11 (three different ones, so that a wrong transpose shows as a
    wrong shape)."""
    rng = np.random.default_rng(seed)
    batch, n_in, n_out = (int(n) for n in rng.choice(np.arange(3, 12), 3, replace=False))
    X = rng.standard_normal((batch, n_in))
    W = rng.standard_normal((n_in, n_out))
    dZ = rng.standard_normal((batch, n_out))
    want_dX, want_dW, want_db = reference.dense_backward(dZ, X, W, np.zeros_like(dZ),
                                                         np.zeros(n_out), "identity")
    given = {"X": X.copy(), "W": W.copy(), "dZ": dZ.copy()}
    result = call_learner(function, X, W, dZ, stub_hint=DENSE_BACKWARD_STUB_HINT,
                          may_change=(0, 1, 2))  # told with the gradients, below
    changed = " and ".join(n for n, a in (("X", X), ("W", W), ("dZ", dZ))
                           if not np.array_equal(a, given[n]))
    want = {"dW": want_dW, "db": want_db, "dX": want_dX}
    got, returned = None, f"a {type(result).__name__}"
    if isinstance(result, (tuple, list)):
        returned = f"{len(result)} value{'s' * (len(result) != 1)}"
        if len(result) == 3:
            got = {n: as_numbers(r, n, f" (batch {batch}, seed={seed})")
                   for n, r in zip(want, result, strict=True)}
            dtypes = {n: getattr(r, "dtype", None) for n, r in zip(want, result, strict=True)}
    sizes = f"batch {batch}, n_in {n_in}, n_out {n_out}; seed={seed}"
    evidence = DenseGrads(got, want, batch, sizes, returned, given["dZ"].sum(axis=1), changed,
                          dtypes if got is not None else None)
    if changed or got is None or evidence.first(lambda got, want: not _close(got, want)):
        raise diagnose(DENSE.mistakes, evidence)
    return f"dW, db and dX are right ({sizes})."


# --- exercise 2: bias and activation backward ---------------------------------------------------

BACKWARD_STUB_HINT = (
    "one thread per element of dZ: this thread's column and row from the 2-D grid, and a "
    "guard; the hints above the exercise say which derivative each code needs."
)
BACKWARD_HINT = (
    "revisit the chain rule (section 2): dZ is dA times the activation's derivative, taken at "
    "the activation's input z = Z + b (the bias of this column); each activation code has its "
    "own derivative."
)
DERIVATIVES = {
    "relu": lambda z: (z > 0).astype(z.dtype),
    "tanh": lambda z: 1 - np.tanh(z) ** 2,
    "identity": lambda z: np.ones_like(z),
}
F_PRIME = {"relu": "1 where z > 0 and 0 elsewhere", "tanh": "1 - tanh(z)^2", "identity": "1"}


@dataclass
class Backward(MatrixOutput):
    """dZ as the kernel wrote it (``got``) for the activation ``name`` against the right one,
    with the ``inputs`` dA, Z, b (to 1e-5 relative, 1e-6 absolute)."""

    name: str = "identity"
    source: KernelSource | None = None

    @property
    def dA(self) -> np.ndarray:
        return self.inputs["dA"]

    @property
    def Z(self) -> np.ndarray:
        return self.inputs["Z"]

    @property
    def z(self) -> np.ndarray:
        return self.Z + self.inputs["b"]

    @property
    def other(self) -> str | None:
        """The other activation whose derivative dZ holds, if any."""
        return next((o for o in DERIVATIVES if o != self.name
                     and self.close_to(self.dA * DERIVATIVES[o](self.z))), None)


def _codes_compared(source: KernelSource) -> list[int]:
    """The whole numbers the kernel compares ``act`` with that are none of this exercise's
    codes (IDENTITY, RELU, TANH): a code guessed."""
    sides = [(node.left, *node.comparators) for node in source.walk()
             if isinstance(node, ast.Compare)]
    return sorted({s.value for pair in sides if "act" in [getattr(s, "id", "") for s in pair]
                   for s in pair if isinstance(s, ast.Constant) and type(s.value) is int
                   and s.value not in (IDENTITY, RELU, TANH)})


def _read_the_code(e) -> str:
    return (f"read the code in act: {ACTIVATION_CODES[e.name]} is {SAID[e.name]} here "
            f"({IDENTITY} identity, {RELU} ReLU, {TANH} tanh); compare act with IDENTITY, RELU "
            "and TANH.")


def _activated(name: str):
    return {"relu": lambda v: np.maximum(v, 0), "tanh": np.tanh}.get(name, lambda v: v)


BACKWARD_MISTAKES = (
    Mistake("nothing written (for one code: its branch missing)", lambda e: e.unwritten.all(),
            lambda e: "your kernel wrote nothing into dZ" + (
                f" for act = {ACTIVATION_CODES[e.name]}, though it did for ReLU (tried first)"
                * (e.name != "relu")),
            lambda e: "each thread assigns its own element of dZ, inside the guard." + (
                f" Every code needs its branch, {SAID[e.name]} too: its f'(z) is "
                f"{F_PRIME[e.name]}." * (e.name != "relu"))),
    Mistake("only the first block written (`threadIdx` alone)", lambda e: e.first_block_only,
            lambda e: f"only the first block's {e.trial.block[0]} x {e.trial.block[1]} elements "
                      "of dZ were written", GLOBAL_INDEX_HINT),
    Mistake("part of dZ never written", lambda e: e.unwritten.any(),
            lambda e: f"{int(e.unwritten.sum())} of {e.got.size} elements of dZ were never "
                      "written",
            "every element needs a thread: the grid's x index runs along the columns, y along "
            "the rows, and the guard compares each with its own size."),
    Mistake("act compared with a guessed number, not its constant",
            lambda e: e.source is not None and _codes_compared(e.source),
            lambda e: f"{e.wrong}. Your kernel compares act with "
                      f"{', '.join(map(str, _codes_compared(e.source)))}, which is none of "
                      "this exercise's codes", _read_the_code, recognised_from="source"),
    Mistake("the activation's derivative missing (dA passed through)",
            lambda e: e.name != "identity" and e.close_to(e.dA),
            lambda e: f"{e.wrong}. dZ looks like dA: the {SAID[e.name]}'s derivative is missing",
            lambda e: f"the chain rule multiplies dA by the activation's derivative, and for "
                      f"{SAID[e.name]} f'(z) is {F_PRIME[e.name]}."),
    Mistake("f'(z) without dA (the mask or slope alone)",
            lambda e: e.name != "identity" and e.close_to(DERIVATIVES[e.name](e.z)),
            lambda e: f"{e.wrong}. dZ looks like f'(Z + b) without dA: the mask or slope alone",
            "the chain rule multiplies: f'(z) alone forgets the gradient that came from above "
            "(dA)."),
    Mistake("the bias left out of z", lambda e: e.name != "identity" and e.close_to(
                e.dA * DERIVATIVES[e.name](e.Z)),
            lambda e: f"{e.wrong}. dZ looks like dA * f'(Z): the bias is left out of z",
            "the activation's input was Z plus this column's bias: the derivative is taken at "
            "that sum, not at Z."),
    Mistake("f instead of f'", lambda e: e.name != "identity" and e.close_to(
                e.dA * _activated(e.name)(e.z)),
            lambda e: f"{e.wrong}. dZ looks like dA * {e.name}(Z + b): f instead of f'",
            lambda e: f"multiply by the derivative f'(z), not by f(z) itself: for "
                      f"{SAID[e.name]} f'(z) is {F_PRIME[e.name]}."),
    Mistake("ReLU tested on dA instead of z", lambda e: e.name == "relu" and e.close_to(
                np.maximum(e.dA, 0)),
            lambda e: f"{e.wrong}. dZ looks like dA where dA > 0",
            "ReLU's test is on the forward input z = Z + b, not on the gradient dA."),
    Mistake("tanh' as 1 - z^2", lambda e: e.name == "tanh" and e.close_to(
                e.dA * (1 - e.z * e.z)),
            lambda e: f"{e.wrong}. dZ looks like dA * (1 - z^2): tanh is not applied",
            "the derivative of tanh is 1 - tanh(z)^2: square tanh(z), not z."),
    Mistake("tanh' without the square", lambda e: e.name == "tanh" and e.close_to(
                e.dA * (1 - np.tanh(e.z))),
            lambda e: f"{e.wrong}. dZ looks like dA * (1 - tanh(z)): the square is missing",
            "the derivative of tanh is 1 - tanh(z)^2: the square is part of it."),
    Mistake("the bias of the row (b[r]), not of the column", lambda e: e.name != "identity"
            and e.Z.shape[0] <= e.Z.shape[1] and e.close_to(
                e.dA * DERIVATIVES[e.name](e.Z + e.inputs["b"][:e.Z.shape[0], None])),
            lambda e: f"{e.wrong}. dZ looks like dA * f'(Z + b) with the bias of each row, not "
                      "of each column",
            "b has one value per output, a column of Z: z takes the bias of its column."),
    Mistake("the wrong activation for the code", lambda e: e.other is not None,
            lambda e: f"{e.wrong}. dZ looks like dA * {e.other}'(Z + b), not {e.name}'",
            _read_the_code),
    MATRIX_SHARED_RACE,
    Mistake("wrong values", lambda e: True, lambda e: e.wrong, BACKWARD_HINT),
)
BACKWARD_SHARE_HINT = (
    "one thread per element of dZ: each thread takes the one element its block and thread "
    "indices give; no thread loops over a row or a column."
)
BACKWARD_SHARE_MISTAKES = one_per_thread(BACKWARD_SHARE_HINT, rows_of="dZ")
BACKWARD = CheckSpec(
    "bias_activation_backward", "bias_activation_backward(dA, Z, b, act, dZ)", BACKWARD_STUB_HINT,
    BACKWARD_MISTAKES + BACKWARD_SHARE_MISTAKES, parameters=5,
    title="2. bias and activation backward",
    call="check_bias_activation_backward(my_bias_activation_backward)",
    holds="dZ = dA · f′(Z + b) to 1e-5 for act = 1 (ReLU), 3 (tanh) and 0 (identity), each on "
          "its own random matrix (rows ≠ cols, not multiples of the block) and block shape "
          "(8×8, 16×4, 4×16 in the simulator), one thread per element, x along the columns "
          "(traced on a small launch: no thread writing more than its share); `>=` for ReLU "
          "is accepted",
    also="missing or `<=` guards, the guard one short (the last row or column skipped), rows "
         "and columns swapped, a hard-coded block size (shared 2-D rules); a write into dA, Z "
         "or b")


# Planted in Z (as z = Z + b): some |z| of BIG_Z, where tanh is ±1 and its derivative 0 but
# e^(2z) overflows (a tanh from exp gives inf / inf = NaN), and some z just either side of 0,
# within NEAR_ZERO_Z (a ReLU mask with a margin, `z > -1e-3`, lets the negative ones through).
BIG_Z, NEAR_ZERO_Z = 60.0, 5e-4


def _planted_z(rng: np.random.Generator, Z: np.ndarray, b: np.ndarray) -> None:
    """Set a few elements of ``Z`` (float32, in place) so that z = Z + b is ±BIG_Z at some and
    ±NEAR_ZERO_Z at others, in different rows and columns."""
    count = max(2, Z.size // 40)
    places = rng.choice(Z.size, size=min(Z.size, 4 * count), replace=False)
    rows, cols = np.unravel_index(places, Z.shape)
    for k, (r, c) in enumerate(zip(rows, cols, strict=True)):
        target = (BIG_Z, -BIG_Z, NEAR_ZERO_Z, -NEAR_ZERO_Z)[k % 4]
        Z[r, c] = Z.dtype.type(target - float(b[c]))


@BACKWARD.check
def check_bias_activation_backward(kernel, seed: int | None = None, dtype=np.float32) -> str:
    """One launch per activation, in the order ReLU, tanh, identity
    (:func:`~gpulab.exercises.outputs.per_activation`). The shared 2-D rules (an index past an
    edge, a write into an input, the patterns of elements never written) are tried before
    :data:`BACKWARD_MISTAKES`; any failure names a hard-coded block size if the source has
    one."""
    source = BACKWARD.start(kernel)

    def run(trial: Trial, code: int, name: str) -> None:
        dA = trial.normal(trial.rows, trial.cols)
        Z = trial.normal(trial.rows, trial.cols)
        b = trial.normal(trial.cols, scale=0.7)
        _planted_z(trial.rng, Z, b)
        inputs = {"dA": dA, "Z": Z, "b": b, "act": code}
        try:
            out = run_2d(kernel, trial, source, inputs, what="dZ")
            failure = coverage_failure(np.isnan(out), trial, "dZ")
            evidence = Backward(reference.bias_activation_backward(dA, Z, b, name), out, trial,
                                1e-5, 1e-6, "dZ", inputs, name, source,
                                shared_line=shared_array_without_barrier(source))
            if failure is None and evidence.bad.any():
                failure = diagnose(BACKWARD.mistakes, evidence)
            if failure is not None:
                raise failure
        except (CheckFailedError, KernelError) as error:
            blame_hard_coded_block(source, trial, error)
            raise

    result = per_activation("check_bias_activation_backward", seed, dtype, run)
    # the method: one thread per element of dZ, traced on a small launch
    small = Trial("check_bias_activation_backward", seed, (5, 7), (4, 4), np.dtype(dtype),
                  np.random.default_rng(seed))
    reject_unshared_work(BACKWARD_SHARE_MISTAKES, kernel, small, small.normal(5, 7),
                         small.normal(5, 7), small.normal(7), 1, np.zeros((5, 7), small.dtype))
    return result


# --- exercise 3: the bias gradient, a column reduction ------------------------------------------

BIAS_GRAD_STUB_HINT = (
    "the launch has one thread per column of dZ, guarded by the number of columns; the hints "
    "above the exercise take it from there."
)
BIAS_GRAD_HINT = (
    "revisit the column reduction (section 3): one thread per column, guarded by the number of "
    "columns; it adds up its column over every row in a local variable and writes db once."
)
OWNER_HINT = (
    "give each column one owner: the thread of column c adds up the column in a local variable "
    "and writes db[c] once. Then no two threads ever write the same element, and no atomics "
    "are needed."
)
START_VALUE_HINT = (
    "sum into a local variable that starts at 0, then write db once: memory from the device "
    "holds whatever was there until the kernel writes it."
)
BIAS_GRAD_EDGE_HINT = (
    "a thread ran past an edge of dZ or db. dZ[r, c] is row r (a sample; dZ has dZ.shape[0] of "
    "them) and column c (an output; dZ.shape[1]): the guard compares the column with the "
    "number of columns (strictly less than), and the loop runs over the rows."
)
BIAS_GRAD_SIZES = {"sim": (40, 100), "gpu": (300, 3000)}


def _writes_in_loops(source: KernelSource, name: str) -> list[str]:
    """Lines that write ``name[...]`` inside a ``for`` or ``while`` loop."""
    found = []
    for loop in source.walk():
        if isinstance(loop, (ast.For, ast.While)):
            for node in ast.walk(loop):
                targets = (node.targets if isinstance(node, ast.Assign) else
                           [node.target] if isinstance(node, ast.AugAssign) else [])
                if any(isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
                       and t.value.id == name for t in targets):
                    found.append(source.line(node))
    return list(dict.fromkeys(found))


@dataclass
class ColumnSums:
    """db as the kernel wrote it (NaN where never written) against dZ's column sums, with what
    the simulator recorded of the writes (``watched``, None on a GPU) and the kernel's source;
    ``writes``: the most writes of db one thread made on a small traced launch (0 untraced)."""

    db: np.ndarray
    dZ: np.ndarray  # noqa: N815 - the chapter's name
    trial: Trial
    source: KernelSource
    watched: WatchedArray | None
    writes: int = 0

    @property
    def rows(self) -> int:
        return self.dZ.shape[0]

    @property
    def cols(self) -> int:
        return self.dZ.shape[1]

    @property
    def race(self):
        return None if self.watched is None else self.watched.race()

    @property
    def writers(self) -> list:
        element = self.race[0]
        return sorted(self.watched.plain_writers[element]
                      | self.watched.atomic_writers.get(element, set()))

    @property
    def missing(self) -> np.ndarray:
        return np.flatnonzero(np.isnan(self.db))

    @property
    def never_written(self) -> str:
        return f"{self.missing.size} of {self.cols} elements of db were never written"

    @property
    def want(self) -> np.ndarray:
        return reference.bias_grad(self.dZ).astype(np.float64)

    @property
    def wrong(self) -> np.ndarray:
        scale = np.abs(self.dZ.astype(np.float64)).sum(axis=0)
        tolerance = 2 * self.rows * float(np.finfo(self.dZ.dtype).eps) * scale + 1e-30
        return ~(np.abs(self.db - self.want) <= tolerance)

    @property
    def summary(self) -> str:
        c = int(np.flatnonzero(self.wrong)[0])
        return (f"db[{c}] should be {self.want[c]:.6g} but is {self.db[c]:.6g} "
                f"({int(self.wrong.sum())} of {self.cols} wrong)")

    def holds(self, candidate) -> bool:
        return bool(np.allclose(self.db, candidate, rtol=1e-5, atol=1e-5))

    def sum_of(self, rows: slice) -> np.ndarray:
        return self.dZ[rows].astype(np.float64).sum(axis=0)


def _racers(e: ColumnSums) -> str:
    who = ", ".join(f"thread {t} of block {b}" for b, t in e.writers[:3])
    return who + (", ..." if e.race[2] > 3 else "")


BIAS_GRAD_MISTAKES = (
    Mistake("a hard-coded block size (blockIdx.x times a number)", lambda e: hard_coded_block(
                e.source) and (e.race is not None or e.missing.size > 0 or e.wrong.any()),
            lambda e: f"`{hard_coded_block(e.source)}` hard-codes the block size, but this "
                      f"launch's blocks have {e.trial.threads_per_block} threads",
            GLOBAL_INDEX_HINT, recognised_from="source"),
    Mistake("the thread's index within its block used as the column (`threadIdx` alone)",
            lambda e: e.race is not None and len({t for _, t in e.writers}) == 1,
            lambda e: f"db[{e.race[0]}] was written by thread {e.writers[0][1]} of {e.race[2]} "
                      "different blocks", GLOBAL_INDEX_HINT, recognised_from="trace"),
    Mistake("a racy `db[c] +=` from many threads (a thread per row)",
            lambda e: e.race is not None,
            lambda e: f"{e.race[2]} threads wrote db[{e.race[0]}] with plain stores "
                      f"({_racers(e)}): on a GPU those read-modify-writes race, and additions "
                      "get lost. The simulator ran them one after another, so its total may "
                      "even look right", OWNER_HINT, recognised_from="trace"),
    Mistake("atomics into a db nobody zeroed",
            lambda e: np.isnan(e.db).all() and e.watched is not None
            and bool(e.watched.atomic_writers),
            "db holds NaN: your kernel added into db with atomics, but db starts with whatever "
            "memory held (NaN in this check) and nobody set it to 0 first", OWNER_HINT,
            recognised_from="trace"),
    Mistake("adding into db without a start value",
            lambda e: np.isnan(e.db).all() and adds_into(e.source, "db"),
            "db holds NaN: your kernel added into db[c] without giving it a start value, and db "
            "starts with whatever memory held (NaN here)", START_VALUE_HINT,
            recognised_from="source"),
    Mistake("every db[c] written from its own starting value",
            lambda e: np.isnan(e.db).all() and e.watched is not None
            and len(e.watched.plain_writers) == e.cols,
            "db holds NaN, though your kernel wrote every db[c]: what it wrote started from "
            "db[c]'s own value (read before any store), and db starts with whatever memory "
            "held (NaN here)", START_VALUE_HINT, recognised_from="outputs"),
    Mistake("nothing written", lambda e: np.isnan(e.db).all(), "your kernel wrote nothing into db",
            BIAS_GRAD_HINT),
    Mistake("only the first block's columns", lambda e: np.array_equal(
                e.missing, np.arange(e.trial.threads_per_block, e.cols)),
            lambda e: f"{e.never_written}. Only the first block's columns were written",
            GLOBAL_INDEX_HINT),
    Mistake("the last column skipped (the guard one short)",
            lambda e: np.array_equal(e.missing, [e.cols - 1]),
            lambda e: f"{e.never_written}. The last column was skipped",
            "the guard is one short: the last column's index is one less than the number of "
            "columns, and it must pass the guard."),
    Mistake("the guard on the number of rows", lambda e: e.rows < e.cols and np.array_equal(
                e.missing, np.arange(e.rows, e.cols)),
            lambda e: f"{e.never_written}. Only the first {e.rows} columns (as many as dZ has "
                      "rows) were written",
            "the guard compares the column with the number of columns (dZ.shape[1]), not with "
            "dZ.shape[0], the number of rows."),
    Mistake("part of db never written", lambda e: e.missing.size > 0,
            lambda e: e.never_written, BIAS_GRAD_HINT),
    Mistake("the mean of the column, not its sum (the wrong normalisation)",
            lambda e: e.holds(e.want / e.rows),
            lambda e: f"{e.summary}: db is the mean of the column, not its sum",
            "db = the sum over the batch, not the mean: every sample used the same b, so their "
            "gradients add up, and the loss's 1/batch is already inside dZ (the loss gradient "
            "(p - y) / batch). Dividing again shrinks db by the batch size."),
    Mistake("the last row left out of the sum", lambda e: e.holds(e.sum_of(slice(None, -1))),
            lambda e: f"{e.summary}: the last row is missing from the sum",
            "the loop over the rows stops one early: every row of dZ is a sample, and each "
            "adds to db."),
    Mistake("the first row left out of the sum", lambda e: e.holds(e.sum_of(slice(1, None))),
            lambda e: f"{e.summary}: the first row is missing from the sum",
            "the loop over the rows starts at row 1: rows are counted from 0."),
    Mistake("the first row counted twice", lambda e: e.holds(e.want + e.sum_of(slice(0, 1))),
            lambda e: f"{e.summary}: the first row is counted twice",
            "the total starts at 0 and the loop takes every row once; starting from the first "
            "row as well counts it twice."),
    Mistake("no accumulation: only the last row", lambda e: e.holds(e.sum_of(slice(-1, None))),
            lambda e: f"{e.summary}: db holds only the last row",
            "each row must be added into the running total; assigning replaces it."),
    Mistake("only the first row", lambda e: e.holds(e.sum_of(slice(0, 1))),
            lambda e: f"{e.summary}: db holds only the first row",
            "the sum runs over every row of dZ, not just the first."),
    Mistake("the sum batch times too large", lambda e: e.holds(e.want * e.rows),
            lambda e: f"{e.summary}: the sum is batch times too large",
            "db is the plain sum of the column: no factor of the batch size."),
    Mistake("the loop over the rows bounded by the columns (or the smaller of the two)",
            lambda e: e.rows > e.cols and e.holds(e.sum_of(slice(0, e.cols))),
            lambda e: (f"{e.summary}: each column's sum stops after its first {e.cols} rows, "
                       f"as many as dZ has columns, of its {e.rows}"),
            "a column's sum runs over all of dZ's rows (dZ.shape[0]), however many columns "
            "there are.", recognised_from="outputs"),
    Mistake("wrong sums", lambda e: e.wrong.any(), lambda e: e.summary, BIAS_GRAD_HINT),
    Mistake("db written once per row instead of once (traced)", lambda e: e.writes > 1,
            lambda e: "db is right, but a thread wrote its db[c] " + str(e.writes) + " times "
                      "(traced on a 5 x 13 dZ, 2 blocks of 8 threads)" + (
                          f"; `{_writes_in_loops(e.source, 'db')[0]}` is inside the loop"
                          if _writes_in_loops(e.source, "db") else "") +
                      ": each of those is a store to device memory",
            "sum in a local variable (a register) and write db once, after the loop: one store "
            "per thread instead of one per row.", recognised_from="trace"),
)
BIAS_GRAD_SHARE_HINT = (
    "one thread per column: each thread sums the column its global index gives, and no thread "
    "loops over the columns of others.")
BIAS_GRAD_SHARE_MISTAKES = one_per_thread(BIAS_GRAD_SHARE_HINT, race=False)
ColumnWrites = writes_of("column", "db[{}]")


BIAS_GRAD = CheckSpec(
    "bias_grad", "bias_grad(dZ, db)", BIAS_GRAD_STUB_HINT,
    BIAS_GRAD_MISTAKES + BIAS_GRAD_SHARE_MISTAKES, parameters=2,
    counted_from_the_arrays="a column's rows",
    title="3. bias gradient", call="check_bias_grad(my_bias_grad)",
    holds="db = dZ's column sums, one thread per column (under two block sizes, the number "
          "of columns not a multiple of the first, fewer rows than columns, an odd number of "
          "them, over 32 on odd seeds; then a batch with more rows than columns), db starting "
          "as NaN; in the simulator every write is recorded (one writer per element) and a "
          "traced launch must show one write of db per thread",
    also="missing or `<=` guards (the line of the IndexError); a write into dZ; a hard-coded "
         "block size")


@BIAS_GRAD.check
def check_bias_grad(kernel, seed: int | None = None, dtype=np.float32) -> str:
    """Launched with ``ceil(N / threads)`` blocks for dZ's N columns, and an odd number of
    rows, 5 to 29 (37 to 61 on odd seeds, fewer than the columns); then a batch with more rows
    than columns (:func:`_check_tall_bias_grad`).
    ``db`` starts as NaN, as fresh device memory holds whatever was there, so the kernel must
    set every ``db[c]``. The mistakes are told from the outputs, the writes the simulator
    records (a race shows even when the simulator's sum is right) and the source; once those
    pass, a traced run (a 5 x 13 dZ, 2 blocks of 8 threads) counts each thread's writes."""
    source = BIAS_GRAD.start(kernel)

    def run(trial: Trial) -> ColumnSums:
        # the batch: fewer rows than columns, odd (a loop unrolled by 2 without its tail
        # shows), more than 32 in half the seeds (a local array of 32 rows typed in shows)
        cols, rows = trial.n, int(trial.rng.integers(5, 30)) | 1
        if seed % 2:
            rows = min(rows + 32, cols - 2) | 1
        trial.case = f"dZ of {rows} x {cols}"
        dZ = trial.rng.standard_normal((rows, cols)).astype(dtype)
        d_dZ_all, d_dZ = padded(dZ, trial.padding, PAD_VALUE)
        before = d_dZ_all.copy_to_host()
        if tier_key() == "sim":
            watched = d_db = WatchedArray(np.full(cols, np.nan, dtype))
        else:
            watched = None
            d_db_all, d_db = padded(np.full(cols, np.nan, dtype), trial.padding, np.nan)
        launch(kernel, trial, d_dZ, d_db, index_hint=BIAS_GRAD_EDGE_HINT)
        changed_input_failure("dZ", before, d_dZ_all.copy_to_host(), "db", trial)
        db = (watched.copy_to_host() if watched is not None else
              read_back(d_db_all, (cols,), trial, what="db", hint=BIAS_GRAD_EDGE_HINT))
        evidence = ColumnSums(db.astype(np.float64), dZ, trial, source, watched)
        reject(BIAS_GRAD_MISTAKES, evidence)
        return evidence

    offer_trace(kernel, 2, 8, "dZ", "db", note="with dZ a NumPy array of 5 x 13 and db of 13")
    trial = Trial.draw("check_bias_grad", seed, dtype, size_range=BIAS_GRAD_SIZES[tier_key()])
    evidence = under_two_blocks(run, trial, source)  # the same sizes under two block sizes
    trial, dZ, cols = evidence.trial, evidence.dZ, evidence.trial.n
    _check_tall_bias_grad(kernel, trial, source, dtype)
    # the method: one write of db per thread, on a small traced launch
    small = Trial("check_bias_grad", seed, (13,), (8,), np.dtype(dtype), trial.rng)
    reject_unshared_work(BIAS_GRAD_SHARE_MISTAKES, kernel, small, dZ[:5, :13].copy(),
                         np.zeros(13, dtype), evidence=ColumnWrites)  # columns of others first
    traced = trace_trial(kernel, small, dZ[:5, :13].copy(), np.zeros(13, dtype))
    evidence.writes = 0 if traced.error is not None else max(  # an atomic is a write too
        (c["global_writes"] + c["atomics"] for c in traced.per_thread().values()), default=0)
    reject(BIAS_GRAD_MISTAKES, evidence)
    return (f"all {cols} column sums right, one owner per column, one write each "
            f"({trial}).")


def _check_tall_bias_grad(kernel, trial: Trial, source: KernelSource, dtype) -> None:
    """Then a batch with more rows than columns (one block and a part of another of columns,
    21 to 40 more rows, on the trial's block size), so that a loop bounded by the columns, or
    by the smaller of the two, shows."""
    threads = trial.threads_per_block
    cols = threads + int(trial.rng.integers(1, threads))
    tall = Trial("check_bias_grad", trial.seed, (cols,), trial.block, np.dtype(dtype), trial.rng)
    rows = cols + int(trial.rng.integers(21, 41)) | 1
    tall.case = f"dZ of {rows} x {cols}, more rows than columns"
    dZ = trial.rng.standard_normal((rows, cols)).astype(dtype)
    _, d_dZ = padded(dZ, tall.padding, PAD_VALUE)
    d_db_all, d_db = padded(np.full(cols, np.nan, dtype), tall.padding, np.nan)
    launch(kernel, tall, d_dZ, d_db, index_hint=BIAS_GRAD_EDGE_HINT)
    db = read_back(d_db_all, (cols,), tall, what="db", hint=BIAS_GRAD_EDGE_HINT)
    reject(BIAS_GRAD_MISTAKES, ColumnSums(db.astype(np.float64), dZ, tall, source, None))


# --- exercise 4: a tiled transpose through shared memory ----------------------------------------

TRANSPOSE_STUB_HINT = (
    "each block transposes one TILE x TILE tile of A through a shared array; the hints above "
    "the exercise take it step by step."
)
TRANSPOSE_HINT = (
    "revisit the tiled transpose (section 3): a block loads its tile of A row by row into shared "
    "memory (neighbouring threads, neighbouring columns of A), waits at a barrier, then writes "
    "the tile's transposed place in out row by row, reading the tile crosswise. The tile's row "
    "of A comes from the block's y index, its column from x."
)
TRANSPOSE_EDGE_HINT = (
    "a thread read or wrote past an edge. The load needs a guard on A's sizes and the store a "
    "guard on out's (out has A's sizes the other way round, and the storing thread's indices "
    "play the other roles). The two guards differ when A is not square."
)
STRIDED_WRITES_HINT = (
    "neighbouring threads (neighbouring x) must write neighbouring elements of a row of out: "
    "after the barrier each thread writes an element of out chosen by its x index along out's "
    "row, and takes its value from the tile crosswise. Writing straight from A's element, or "
    "with x choosing out's row, puts each thread of a warp on a different row of out: one "
    "memory transaction each."
)
STRIDED_READS_HINT = (
    "neighbouring threads (neighbouring x) must read neighbouring elements of a row of A: the "
    "load's column of A comes from the thread's x index."
)
BARRIER_MISSING_HINT = (
    "the block must wait at a barrier (`cuda.syncthreads()`) after filling the tile and before "
    "reading it crosswise, in every block (no `if` around it): each thread reads a slot "
    "another thread wrote."
)
COALESCED_SHARE = 0.45  # below this share of the fetched bytes used, an access is strided
TRANSPOSE_SIDES = {"sim": (17, 44), "gpu": (300, 2000)}


def _transpose_shape(rng: np.random.Generator, tile: int) -> tuple[int, int]:
    """rows != cols, neither a multiple of the tile, with partial edge tiles of different sizes
    (a store guarded with the load's bounds fails) and a different number of tiles down than
    across (a kernel with the block indices swapped leaves part of out unwritten)."""
    low, high = TRANSPOSE_SIDES[tier_key()]
    low, high = max(low, tile + 1), max(high, 3 * tile - 1)
    while True:
        rows, cols = (draw_size(rng, tile, (low, high), full_blocks=1) for _ in range(2))
        if rows % tile != cols % tile and -(-rows // tile) != -(-cols // tile):
            return rows, cols


def _uses_shared_memory(source: KernelSource) -> bool:
    return any(isinstance(node, ast.Attribute) and node.attr == "array"
               and isinstance(node.value, ast.Attribute) and node.value.attr == "shared"
               for node in source.walk())


def _barrier_after_fill(source: KernelSource) -> bool:
    """A ``syncthreads`` call on a line after the first store into a shared array, outside
    any ``if`` (False for none, for one only before the tile is filled, or for one some blocks
    skip: ``if cuda.blockIdx.x > 0: cuda.syncthreads()``)."""
    branched = {id(inner) for node in source.walk() if isinstance(node, ast.If)
                for statement in node.body + node.orelse for inner in ast.walk(statement)}
    shared = {t.id for node in source.walk() if isinstance(node, ast.Assign)
              and "shared" in ast.dump(node.value) for t in node.targets
              if isinstance(t, ast.Name)}
    fills = [node.lineno for node in source.walk() if isinstance(node, ast.Assign) and any(
        isinstance(t, ast.Subscript) and getattr(t.value, "id", None) in shared
        for t in node.targets)]
    barriers = [node.lineno for node in source.walk() if isinstance(node, ast.Call)
                and "syncthreads" in ast.dump(node.func) and id(node) not in branched]
    return bool(fills and barriers and max(barriers) > min(fills))


@dataclass
class Transposed:
    """out as the kernel wrote it (NaN where never written) against A^T; ``reads``/``writes``:
    the simulator's warp-request summaries (None on a GPU)."""

    out: np.ndarray
    A: np.ndarray
    trial: Trial
    source: KernelSource
    tile: int
    reads: object = None
    writes: object = None

    @property
    def hard_coded(self) -> list[str]:
        """Lines of the kernel that write the tile's size as a number."""
        return lines_with_number(self.source, self.tile)

    @property
    def poisoned(self) -> np.ndarray:
        poison = poison_value(self.trial.dtype)
        return np.zeros(self.out.shape, bool) if poison is None else self.out == poison

    @property
    def unwritten(self) -> np.ndarray:
        return np.isnan(self.out)

    @property
    def swapped_blocks(self) -> bool:
        """Exactly the part of out a kernel with blockIdx.x and blockIdx.y exchanged misses."""
        across, down = self.trial.blocks
        r, c = np.indices(self.out.shape)  # r: a column of A, c: a row of A
        covered = (r < down * self.tile) & (c < across * self.tile)
        return bool(self.unwritten.any() and np.array_equal(self.unwritten, ~covered))

    @property
    def bad(self) -> np.ndarray:
        return self.out != self.A.T

    @property
    def written_wrong(self) -> bool:
        return bool((self.bad & ~self.unwritten).any())

    @property
    def summary(self) -> str:
        r, c = (int(i) for i in np.argwhere(self.bad)[0])
        return (f"{int(self.bad.sum())} of {self.out.size} elements of out are wrong; the first "
                f"is out[{r}, {c}]: expected A[{c}, {r}] = {self.A[c, r]:.6g}, got "
                f"{self.out[r, c]:.6g}")

    @property
    def not_transposed(self) -> bool:
        """out is what a kernel that loads and stores the tile with the same indices writes:
        every tile in its transposed place, but its content not transposed."""
        (rows, cols), t = self.A.shape, self.tile
        p, q = np.indices((cols, rows))
        r, c = q - q % t + p % t, p - p % t + q % t  # the element of A out[p, q] then holds
        inside = (r < rows) & (c < cols)
        return bool(np.array_equal(self.out[inside], self.A[r[inside], c[inside]]))

    @property
    def poisoned_text(self) -> str:
        r, c = (int(i) for i in np.argwhere(self.poisoned)[0])
        return (f"out[{r}, {c}] holds {self.out[r, c]:.6g}, the value fresh shared memory holds "
                "in this check: a thread read a slot of the tile before any thread wrote it")

    def strided(self, access) -> bool:
        return access is not None and access.efficiency < COALESCED_SHARE


def _strided_text(access, name: str) -> str:
    worst = max(access.requests, key=lambda request: len(request.sectors))
    return (f"out is right, but the {name} are strided: a warp request touches "
            f"{access.sectors_per_request:.3g} sectors of 32 bytes on average, and "
            f"{access.efficiency * 100:.3g} % of the bytes fetched are used (one request of warp "
            f"{worst.warp} touches {len(worst.sectors)} sectors for "
            f"{len(worst.element_indices)} elements)")


TRANSPOSE_MISTAKES = (
    Mistake("nothing written", lambda e: e.unwritten.all(), "your kernel wrote nothing into out",
            TRANSPOSE_HINT),
    Mistake("a missing barrier (a tile slot read before it was written)",
            lambda e: e.poisoned.any() and (count_calls(e.source, "syncthreads") == 0 or (
                e.source.tree is not None and not _barrier_after_fill(e.source))),
            lambda e: e.poisoned_text, BARRIER_MISSING_HINT),
    Mistake("a tile slot read that no thread filled (the guards)", lambda e: e.poisoned.any(),
            lambda e: e.poisoned_text, TRANSPOSE_EDGE_HINT),
    Mistake("the block indices swapped (blockIdx.x as the tile's row)",
            lambda e: e.swapped_blocks and not e.written_wrong,
            lambda e: f"{int(e.unwritten.sum())} of {e.out.size} elements of out were never "
                      "written, exactly those a kernel with the block indices swapped misses: "
                      f"the grid has {e.trial.blocks[0]} blocks across A's {e.A.shape[1]} columns "
                      f"(x) and {e.trial.blocks[1]} down its {e.A.shape[0]} rows (y), and your "
                      "kernel took blockIdx.x for the tile's row of A",
            "the launch runs x along A's columns: the tile's first column of A comes from the "
            "block's x index and its first row from y."),
    Mistake("the store guarded with the load's bounds (elements never written)",
            lambda e: e.unwritten.any() and not e.written_wrong,
            lambda e: f"{int(e.unwritten.sum())} of {e.out.size} elements of out were never "
                      "written", TRANSPOSE_EDGE_HINT),
    Mistake("the tile not read crosswise (tiles moved, not transposed)",
            lambda e: e.bad.any() and e.not_transposed,
            lambda e: f"{e.summary}: each tile went to its transposed place, but its content was "
                      "not transposed",
            "the tile must be read crosswise on the way out: the slot a thread reads is the one "
            "the thread with its x and y exchanged filled."),
    Mistake("wrong values", lambda e: e.bad.any(), lambda e: e.summary, TRANSPOSE_HINT),
    Mistake("no shared memory (GPU: the source is read)",
            lambda e: e.writes is None and not _uses_shared_memory(e.source),
            "out is right, but your kernel uses no shared memory, so its writes (or reads) go "
            "down the columns of a matrix: strided. The simulator tier measures this; here the "
            "source is read", STRIDED_WRITES_HINT, recognised_from="source"),
    Mistake("strided writes (the naive transpose)", lambda e: e.strided(e.writes),
            lambda e: _strided_text(e.writes, "writes of out"), STRIDED_WRITES_HINT,
            recognised_from="trace"),
    Mistake("strided reads", lambda e: e.strided(e.reads),
            lambda e: _strided_text(e.reads, "reads of A"), STRIDED_READS_HINT,
            recognised_from="trace"),
    Mistake("the tile's size written as a number", lambda e: e.hard_coded,
            lambda e: (f"out is right, but `{e.hard_coded[0]}` has the tile's size written as "
                       f"the number {e.tile}: change TILE and this line would be wrong"),
            "write TILE wherever the tile's size is meant (the shared array's shape, the "
            "tile's first row and column), never the number itself.", recognised_from="source"),
)
TRANSPOSE = CheckSpec(
    "transpose_tiled", "transpose_tiled(A, out)", TRANSPOSE_STUB_HINT, TRANSPOSE_MISTAKES,
    parameters=2, title="4. tiled transpose",
    call="check_transpose_tiled(my_transpose_tiled, tile=TILE)",
    holds="out = A^T through a TILE × TILE shared tile (TILE 16 or 32) on rows ≠ cols with "
          "different partial tiles and a different number of tiles down than across; in the "
          "simulator every read of A and write of out is grouped into warp requests, and "
          "strided reads or writes fail even when out is right (at least 45 % of the fetched "
          "bytes used); the tile's shared-memory bank conflicts counted from a trace of one "
          "block and said, with a note above 2 passes per warp access (never a failure)",
    also="a tile other than 16 or 32; a barrier inside a branch (shared rule); an index "
         "past an edge of A "
         "or out (the guards); a write into A")


@TRANSPOSE.check(learners=("kernel",))
def check_transpose_tiled(kernel, tile: int = 16, seed: int | None = None, dtype=np.float32) -> str:
    """Launched as ``kernel[(ceil(cols / tile), ceil(rows / tile)), (tile, tile)]``, x along
    A's columns, on a random A (:func:`_transpose_shape`: a kernel with the block indices
    swapped always fails).

    In the simulator every read of A and write of out is recorded and grouped into warp
    requests of 32 threads (:data:`COALESCED_SHARE`: the naive transpose's writes use about a
    quarter of the bytes fetched; a tiled one's about two thirds or more with 16 x 16 tiles).
    On a GPU, where accesses cannot be recorded, the source is read for shared memory
    instead."""
    tier = tier_key()
    source = TRANSPOSE.start(kernel)
    if tile not in (16, 32):
        raise CheckFailedError(
            f"TILE is {tile}: use 16 or 32. A warp is 32 threads, and with a tile narrower "
            "than 16 each warp spans more rows of the tile than the check (or a GPU) can "
            "coalesce.", "set TILE to 16 (or 32 on a GPU) and run the cells again.")
    rng = np.random.default_rng(seed)
    rows, cols = _transpose_shape(rng, tile)
    trial = Trial("check_transpose_tiled", seed, (rows, cols), (tile, tile), np.dtype(dtype),
                  rng, case=f"TILE = {tile}", repeat_with=f"tile={tile}")
    A = trial.normal(rows, cols)
    offer_trace(kernel, (2, 2), (tile, tile), "A", "out",
                note=f"with A a NumPy array of {tile + 3} x {tile + 9} and out of "
                     f"{tile + 9} x {tile + 3}")
    if tier == "sim":
        d_A_all = d_A = RecordingArray(A.copy())
        d_out = WatchedArray(np.full((cols, rows), np.nan, dtype))
    else:
        d_A_all, d_A = padded(A, tile, PAD_VALUE)
        d_out_all, d_out = padded(np.full((cols, rows), np.nan, dtype), tile, np.nan)
    before = d_A_all.copy_to_host()
    launch(kernel, trial, d_A, d_out, index_hint=TRANSPOSE_EDGE_HINT)
    changed_input_failure("A", before, d_A_all.copy_to_host(), "out", trial)
    if tier == "sim":  # the reads' and the writes' warp requests
        out, size = d_out.copy_to_host(), np.dtype(dtype).itemsize
        requests = [memory_model.summarise(recorded, size, "traced in the simulator")
                    for recorded in (d_A.reads, d_out.writes_by_thread())]
    else:
        out, requests = read_back(d_out_all, (cols, rows), trial, hint=TRANSPOSE_EDGE_HINT), []
    evidence = Transposed(out, A, trial, source, tile, *requests)
    TRANSPOSE.reject(evidence)
    banks = _tile_bank_passes(kernel, trial, tile)
    if tier == "gpu":
        return f"out = A^T for a {rows} x {cols} A, through shared memory ({trial}).{banks}"
    return (f"out = A^T for a {rows} x {cols} A, and coalesced: "
            f"{evidence.reads.efficiency * 100:.3g} % of the bytes fetched for the reads of "
            f"A and {evidence.writes.efficiency * 100:.3g} % for the writes of out are used "
            f"(traced in the simulator; {trial.launched}, seed={seed}).{banks}")


# More passes than this for one warp's access of the tile is a bank conflict worth a note: a
# padded 16-wide tile's column takes 2 (a warp spans two of its rows), a padded 32-wide one 1.
TILE_BANK_PASSES_NOTED = 2


def _tile_bank_passes(kernel, trial: Trial, tile: int) -> str:
    """A sentence on the tile's shared-memory bank conflicts, counted from a trace of one block
    on a tile-sized A (:func:`gpulab.memory_model.worst_bank_conflict`), and a note when a
    warp's access takes more than :data:`TILE_BANK_PASSES_NOTED` passes; "" where the kernel
    cannot be traced, or a shared array's elements are not 4 bytes (the model's one word per
    element: a warp's 8-byte elements need two passes at least). Never a failure: the simulator
    has no banks, and out is right."""
    A = np.arange(tile * tile, dtype=trial.dtype).reshape(tile, tile)
    try:
        traced = trace_trial(kernel, trial, A, np.zeros_like(A), blocks=(1, 1))
    except (RuntimeError, TypeError, ValueError):
        return ""
    worst = {kind: memory_model.worst_bank_conflict(traced, kind) for kind in ("read", "write")}
    if (traced.error is not None or None in worst.values() or any(
            traced.itemsizes.get(name) != SHARED_BANK_BYTES for name in traced.shared_arrays)):
        return ""
    passes = {kind: request.ways for kind, request in worst.items()}
    if max(passes.values()) > TILE_BANK_PASSES_NOTED:
        kind = max(passes, key=passes.get)
        bank, words = worst[kind].busiest_bank
        add_note(
            f"one warp's {kind} of your tile asks a single shared-memory bank for "
            f"{len(words)} different words, so on a GPU it takes {len(words)} passes where a "
            f"conflict-free access takes one (a bank conflict, {len(words)} ways). Shared "
            f"memory has {SHARED_BANKS} banks of {SHARED_BANK_BYTES} bytes, word w in bank "
            f"w % {SHARED_BANKS}: the tile's words {', '.join(str(w) for w in words[:3])}"
            f"{', ...' if len(words) > 3 else ''} (row-major) all sit in bank {bank}. The "
            "simulator has no banks: this is counted from a trace of one block. The notebook's "
            "\"Compare yours\", after this check, says how gpulab's kernel avoids it.")
    warp_rows = memory_model.WARP_SIZE // tile
    return (f" Shared memory (counted from a trace of one {tile} x {tile} block, "
            f"{SHARED_BANKS} banks): a warp's read of the tile takes up to {passes['read']} "
            f"pass{'es' if passes['read'] > 1 else ''}, a write up to {passes['write']} (1: no "
            "bank conflict" + (f"; a warp spans {warp_rows} rows of a {tile}-wide tile, so a "
                               f"tile padded by one column still takes {warp_rows})."
                               if warp_rows > 1 else ")."))


# --- exercise 5: numeric gradient -------------------------------------------------------------

NUMERIC_STUB_HINT = (
    "for each index of x, one at a time: save the entry, evaluate f with the entry raised by "
    "eps and again with it lowered by eps, put the saved value back, and store the central "
    "difference. np.ndindex gives every index of an array of any shape."
)


@dataclass
class NumericGrad:
    """What the learner's ``numeric_gradient`` returned (``got``) against the exact derivative,
    for ``f = sum(w x^2) + sum(x^3) / 3`` at ``x`` (``changed``: the most any entry of x was
    left changed by)."""

    got: np.ndarray
    x: np.ndarray
    weights: np.ndarray
    eps: float
    changed: float
    returned_dtype: np.dtype = np.dtype(np.float64)  # what the function returned, as given

    @property
    def exact(self) -> np.ndarray:
        return 2 * self.weights * self.x + self.x ** 2

    def one_sided(self, sign: int) -> np.ndarray:
        """(f(x + sign eps) - f(x)) / (sign eps), worked out exactly for this f."""
        return self.exact + sign * self.eps * (self.weights + self.x) + self.eps ** 2 / 3

    def holds(self, candidate, rtol=1e-6, atol=1e-8) -> bool:
        return self.got.shape == np.shape(candidate) and bool(
            np.allclose(self.got, candidate, rtol=rtol, atol=atol))

    @property
    def worst(self) -> tuple[int, ...]:
        return np.unravel_index(int(np.argmax(np.abs(self.got - self.exact))), self.x.shape)


NUMERIC_MISTAKES = (
    Mistake("x restored by adding and subtracting eps (left off by rounding)",
            lambda e: 0 < e.changed < 1e-9,
            lambda e: f"x was changed by your function, by up to {e.changed:.2g}: moving an "
                      "entry by eps and back by arithmetic does not give back the same float",
            "save the entry before moving it, and put that saved value back: then x is exactly "
            "as it was.", recognised_from="host code"),
    Mistake("x left changed (an entry not put back)", lambda e: e.changed,
            "x was changed by your function: after perturbing an entry, put its saved value "
            "back", "f reads x itself, so every later evaluation sees an entry left moved.",
            recognised_from="host code"),
    Mistake("the wrong shape", lambda e: e.got.shape != e.x.shape,
            lambda e: f"your function returned shape {e.got.shape}, but x has shape "
                      f"{e.x.shape}: one derivative per entry of x",
            "start from an array of zeros shaped like x and fill it one entry at a time."),
    Mistake("a copy of x perturbed (f never sees it)",
            lambda e: e.holds(np.zeros_like(e.exact), atol=1e-12) and np.abs(e.exact).max() > 0,
            "every entry is 0: f did not change when you moved the entry, so the entry moved "
            "was not in the x that f reads (a copy?)",
            "f takes no arguments: it reads the array x you were given. Perturb that array "
            "itself, in place, and put each entry back afterwards."),
    Mistake("dividing by eps instead of 2 eps", lambda e: e.holds(2 * e.exact, 1e-3, 1e-6),
            "your values are twice the derivative",
            "the two evaluations are 2 * eps apart, and the difference is divided by the "
            "distance between them."),
    Mistake("one of the two points taken at x itself (f() outside the loop)",
            lambda e: e.holds(e.one_sided(1) / 2, 1e-9, 1e-9)
            or e.holds(e.one_sided(-1) / 2, 1e-9, 1e-9),
            "your values are half a one-sided difference: one of the two evaluations was at x "
            "itself, not at the entry moved by eps the other way",
            "evaluate f twice for every entry, once with it raised by eps and once lowered by "
            "eps, both inside the loop."),
    Mistake("dividing by 4 eps (or steps of eps / 2)", lambda e: e.holds(e.exact / 2, 1e-3, 1e-6),
            "your values are half the derivative",
            "the difference of the two evaluations is divided by the distance between the two "
            "points, which is 2 * eps."),
    Mistake("the sign flipped (f(x - eps) - f(x + eps))", lambda e: e.holds(-e.exact, 1e-3, 1e-6),
            "your values have the opposite sign of the derivative",
            "the central difference subtracts the lower point's value from the upper one's."),
    Mistake("a one-sided difference", lambda e: e.holds(e.one_sided(1), 1e-9, 1e-9)
            or e.holds(e.one_sided(-1), 1e-9, 1e-9),
            "your values are those of a one-sided difference ((f(x + eps) - f(x)) / eps or "
            "the same on the other side): off by about eps times the curvature",
            "use both sides: the central difference's error shrinks like eps^2 instead of eps."),
    Mistake("every entry perturbed at once", lambda e: e.holds(
                np.full(e.x.shape, e.exact.sum()), 1e-3, 1e-6),
            "every entry holds the same value, the sum of all the derivatives: all entries were "
            "perturbed at once", "perturb one entry at a time: the others stay as they are."),
    Mistake("a whole row perturbed at once (a loop over len(x) of a 2-D x)", lambda e: e.holds(
                np.broadcast_to(e.exact.sum(axis=1, keepdims=True), e.x.shape), 1e-3, 1e-6),
            "each row holds one value, the sum of that row's derivatives: x[i] of a 2-D x is a "
            "whole row, so a row was moved at once", NUMERIC_STUB_HINT),
    Mistake("close but not the central difference with this eps",
            lambda e: e.holds(e.exact, 1e-2, 1e-3),
            "your values are close to the derivative but off by more than a central difference "
            "with the eps given would be (a one-sided difference, or another step?)",
            "use both sides with the eps you are given: the central difference's error shrinks "
            "like eps^2 instead of eps."),
    Mistake("a gradient array of whole numbers (the derivatives truncated)",
            lambda e: (np.issubdtype(e.returned_dtype, np.integer)
                       and e.holds(np.trunc(e.exact), 0, 1.0)),
            lambda e: (f"your function returned an array of {e.returned_dtype} (whole numbers): "
                       "each derivative lost its fraction when stored into it"),
            "make the gradient a float64 array (np.zeros_like(x, dtype=float) or np.zeros("
            "x.shape)): an int array stores only whole numbers."),
    Mistake("wrong values", lambda e: not e.holds(e.exact),
            lambda e: f"at index {tuple(int(k) for k in e.worst)} the derivative is "
                      f"{e.exact[e.worst]:.6g} but your function gave {e.got[e.worst]:.6g}",
            NUMERIC_STUB_HINT),
)
NUMERIC = CheckSpec(
    "numeric_gradient", "numeric_gradient(f, x, eps)", NUMERIC_STUB_HINT, NUMERIC_MISTAKES,
    title="5. numeric gradient", call="check_numeric_gradient(numeric_gradient)",
    holds="central differences (f(x + εeᵢ) − f(x − εeᵢ)) / 2ε for every entry of a random "
          "2-D x, then a 1-D x, to 1e-6 of the exact derivative, leaving x unchanged; then, "
          "with eps = 0.1 on a 2-D x that is a view of a larger array, the central difference "
          "itself (so the step is the eps given, and x itself is changed, not a copy); then "
          "f = Σ x_k·x_(k+1), whose terms mix two entries",
    also="a stub; an exception in the function (named); a step of its own; a copy of x "
         "changed instead of x; an entry left moved while the next one is probed (x put "
         "back only at the end: right on the first f, wrong on the mixed terms)")


def _check_mixed_terms(function, rng: np.random.Generator, shape: tuple[int, int],
                       seed: int | None) -> None:
    """Then f = Σ x_k·x_(k+1) over x's entries in order: terms that mix two entries, so that
    an entry left moved while the next one is probed (x put back only at the end) shifts the
    next difference by eps; on the first f, each term reads one entry, and that never shows."""
    x = rng.standard_normal(shape)

    def f() -> float:
        flat = x.reshape(-1)
        return float(np.sum(flat[:-1] * flat[1:]))

    try:
        got = np.asarray(function(f, x, 1e-5), dtype=np.float64)
    except Exception:  # noqa: BLE001 - the learner's code: said below
        got = None
    flat = x.reshape(-1)
    exact = (np.concatenate([[0.0], flat[:-1]]) + np.concatenate([flat[1:], [0.0]]))
    if got is None or got.shape != x.shape or not np.allclose(
            got.reshape(-1), exact, rtol=1e-6, atol=1e-8):
        raise CheckFailedError(
            "your function is right for f = sum(w x^2) + sum(x^3) / 3, whose terms each read "
            "one entry of x, but not for f = sum of x[k] * x[k + 1] over x's entries in order "
            f"(a {shape[0]} x {shape[1]} x), whose terms mix two: an entry left moved while "
            f"the next one is probed shifts that difference (seed={seed}).",
            "put each entry back (its saved value) before you move the next one: every "
            "difference must start from x as it was given.")


@NUMERIC.check
def check_numeric_gradient(function, seed: int | None = None) -> str:
    """Tried with eps = 1e-5 on f = sum(w x^2) + sum(x^3) / 3 of a random 2-D x (2 to 4 by 2
    to 5), against the exact derivative; once right, on f = Σ x_k·x_(k+1) (terms that mix two
    entries: :func:`_check_mixed_terms`), on a 1-D x (3 to 6 entries) too; then with
    eps = 0.1 on a 2-D x that is a view of a larger array, against the central difference
    itself (2 w x + x^2 + eps^2 / 3)."""
    rng = np.random.default_rng(seed)
    shape = (int(rng.integers(2, 5)), int(rng.integers(2, 6)))
    x = rng.standard_normal(shape)
    original = x.copy()
    weights = rng.standard_normal(shape)

    def f() -> float:
        return float(np.sum(weights * x**2) + np.sum(x**3) / 3)

    got = call_learner(function, f, x, 1e-5, stub_hint=NUMERIC_STUB_HINT,
                       may_change=(1,))  # told below, with how far x moved
    evidence = NumericGrad(as_numbers(got, "the gradient", f" (seed={seed})"), original,
                           weights, 1e-5,
                           float(np.max(np.abs(x - original))),
                           np.dtype(getattr(got, "dtype", np.float64)))
    if evidence.changed or not evidence.holds(evidence.exact):
        raise diagnose(NUMERIC.mistakes, evidence)
    _check_mixed_terms(function, rng, shape, seed)
    x = rng.standard_normal(int(rng.integers(3, 7)))  # then a 1-D x: f reads the new x
    weights = rng.standard_normal(x.shape)
    try:
        got = np.asarray(function(f, x, 1e-5), dtype=np.float64)
    except Exception:  # noqa: BLE001 - any error here is the shape's fault: said so
        got = None
    if got is None or not NumericGrad(got, x, weights, 1e-5, 0.0).holds(2 * weights * x + x * x):
        raise CheckFailedError(
            f"your function is right for a {shape[0]} x {shape[1]} x but not for a 1-D x of "
            f"{x.size} entries: it assumes two axes (seed={seed}).",
            "loop over every index of x whatever its number of axes: np.ndindex(x.shape) gives "
            "them all, as tuples.")
    size = x.size
    # then eps = 0.1 on a 2-D x that is a view (a larger array but its last column): the
    # central difference of x^3 / 3 is x^2 + eps^2 / 3 there, so a step of its own shows, and a
    # copy of x (reshape(-1) of a view) perturbs what f never reads
    x = rng.standard_normal((shape[0], shape[1] + 1))[:, :-1]
    weights = rng.standard_normal(x.shape)
    exact = 2 * weights * x + x * x
    try:
        got = np.asarray(function(f, x, 0.1), dtype=np.float64)
    except Exception:  # noqa: BLE001 - the learner's code: said below
        got = None
    fits = got is not None and got.shape == x.shape
    if not (fits and np.allclose(got, exact + 0.1**2 / 3, rtol=1e-7, atol=1e-9)):
        where = (f"eps = 0.1, x a {x.shape[0]} x {x.shape[1]} view (a larger array but its "
                 f"last column; seed={seed})")
        if fits and np.allclose(got, exact, rtol=1e-4, atol=1e-6):
            raise CheckFailedError(
                f"with {where}, your function gave the derivative itself, not the central "
                "difference at that step (for x³/3 it is x² + eps²/3): it steps by a number of "
                "its own, not by eps.", "use the eps you are given: (f(x + eps·eᵢ) − "
                "f(x − eps·eᵢ)) / (2·eps).")
        if fits and np.allclose(got, 0):
            raise CheckFailedError(
                f"with {where}, your gradient is all 0: the x you changed is a copy "
                "(x.reshape(-1) or x.flatten() of a view copies it), so f never saw the change.",
                "change x itself, x[index] with index from np.ndindex(x.shape), and put it back.")
        raise CheckFailedError(
            f"with {where}, your function does not give the central difference"
            + ("" if fits else " (it raised, or its result has another shape)") + ".",
            NUMERIC_STUB_HINT)
    return (f"the numeric gradient matches the exact one for a {shape[0]} x {shape[1]} x and a "
            f"1-D x of {size}, and the central difference for eps = 0.1 on a view of x.")


__all__ = ["BACKWARD", "BIAS_GRAD", "DENSE", "NUMERIC", "TRANSPOSE",
           "check_bias_activation_backward", "check_bias_grad", "check_dense_backward",
           "check_numeric_gradient", "check_transpose_tiled"]
