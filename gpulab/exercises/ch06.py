"""Chapter 06's exercises: the chain rule as code.

- :func:`check_dense_backward` takes your NumPy ``dense_backward(X, W, dZ)`` returning
  ``(dW, db, dX)``.
- :func:`check_bias_activation_backward` takes your ``@cuda.jit`` kernel ``(dA, Z, b, act, dZ)``
  with gpulab's signature (``gpulab.kernels.dense.bias_activation_backward``): ``dZ[r, c] =
  dA[r, c] * f'(Z[r, c] + b[c])`` for the activation code ``act`` (0 identity, 1 ReLU, 3 tanh),
  one thread per element of a 2-D grid, x along the columns, guarded.
- :func:`check_bias_grad` takes your ``@cuda.jit`` kernel ``(dZ, db)`` with gpulab's signature
  (``gpulab.kernels.dense.bias_grad``): ``db[c]`` = the sum of column c of dZ, launched with
  one thread per column (a 1-D grid over the columns). The method is checked: every column
  has one owner that sums in a register and writes ``db[c]`` once; no two threads write one
  element (in the simulator every write is recorded, so a race shows even when the sum happens
  to come out right), and a traced run counts each thread's writes.
- :func:`check_transpose_tiled` takes your ``@cuda.jit`` kernel ``(A, out)`` with gpulab's
  signature (``gpulab.kernels.dense.transpose_tiled``): ``out = A^T`` through a TILE x TILE
  tile in shared memory, launched with blocks of TILE x TILE threads, x along A's columns. In
  the simulator every read of A and write of out is recorded and grouped into warp requests
  (:mod:`gpulab.memory_model`): a transpose that is right but writes (or reads) with a stride
  fails, as the naive one does.
- :func:`check_numeric_gradient` takes your ``numeric_gradient(f, x, eps)``: the central
  difference of ``f`` with respect to every entry of the array ``x``.

Sizes and values are random (the kernel checks draw shapes with rows != cols that are not
multiples of the block, and several block shapes); a failure names the seed to repeat it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import numpy as np

from gpulab import device, memory_model, reference
from gpulab.exercises.checks import (
    ACTIVATIONS,
    GLOBAL_INDEX_HINT,
    IDENTITY,
    PAD_VALUE,
    RELU,
    SAID,
    TANH,
    Case2D,
    CheckFailedError,
    CheckResult,
    KernelSource,
    Trial,
    call_learner,
    changed_input_failure,
    check_matrix_output,
    count_calls,
    draw_2d,
    draw_size,
    launch,
    offer_trace,
    padded,
    read_back,
    run_check,
    start_kernel,
    trace_trial,
)
from gpulab.instruments import RecordingArray, WatchedArray, poison_value
from gpulab.kernels.dense import ACTIVATION_CODES

# --- exercise 1: a dense layer's backward pass, in NumPy ----------------------------------------

DENSE_BACKWARD_STUB_HINT = (
    "each gradient has the shape of what it is the gradient of: dW like W (a matmul of X "
    "transposed and dZ), db like b (a sum of dZ over the batch), dX like X (a matmul of dZ and W "
    "transposed)."
)


def check_dense_backward(function, seed: int | None = None, show: bool = True) -> CheckResult:
    """Check ``function(X, W, dZ) -> (dW, db, dX)`` for a dense layer Z = X @ W + b, against
    :func:`gpulab.reference.dense_backward` (identity activation: dA = dZ), on random sizes.

    Diagnoses: the stub; not three results; a wrong shape (a missing or extra transpose);
    db averaged over the batch instead of summed; db summed over the wrong axis; results in
    the wrong order."""

    def body(seed: int) -> str:
        rng = np.random.default_rng(seed)
        # three different sizes, so that a wrong transpose shows as a wrong shape
        batch, n_in, n_out = (int(n) for n in rng.choice(np.arange(3, 12), 3, replace=False))
        X = rng.standard_normal((batch, n_in))
        W = rng.standard_normal((n_in, n_out))
        dZ = rng.standard_normal((batch, n_out))
        result = call_learner(function, X, W, dZ, stub_hint=DENSE_BACKWARD_STUB_HINT)
        if not isinstance(result, (tuple, list)) or len(result) != 3:
            raise CheckFailedError("return three arrays: `return dW, db, dX`.",
                                   DENSE_BACKWARD_STUB_HINT)
        dW, db, dX = (np.asarray(r, dtype=np.float64) for r in result)
        want_dX, want_dW, want_db = reference.dense_backward(dZ, X, W, np.zeros_like(dZ),
                                                             np.zeros(n_out), "identity")
        sizes = f"(batch {batch}, n_in {n_in}, n_out {n_out}; seed={seed})"
        for name, got, want in (("dW", dW, want_dW), ("db", db, want_db), ("dX", dX, want_dX)):
            if got.shape != want.shape:
                shapes = {a.shape for a in (want_dW, want_db, want_dX)}
                order = (" Your results look like they are in another order: return "
                         "dW, db, dX." if got.shape in shapes else "")
                raise CheckFailedError(
                    f"{name} has shape {got.shape} but should have {want.shape}, the shape of "
                    f"{'W' if name == 'dW' else 'b' if name == 'db' else 'X'} {sizes}.{order}",
                    DENSE_BACKWARD_STUB_HINT)
            if np.allclose(got, want, rtol=1e-10, atol=1e-12):
                continue
            if name == "db" and np.allclose(got, want / batch, rtol=1e-10):
                raise CheckFailedError(f"db is the mean of dZ's rows, not their sum {sizes}.",
                                       "every sample used the same b, so their gradients add "
                                       "up: db = dZ.sum(axis=0). (dZ already carries the "
                                       "1/batch of the mean loss.)")
            raise CheckFailedError(f"{name} has the right shape but wrong values {sizes}.",
                                   DENSE_BACKWARD_STUB_HINT)
        return f"dW, db and dX are right {sizes}."

    return run_check("dense_backward", body, seed, show)


# --- exercise 2: bias and activation backward ---------------------------------------------------

BACKWARD_STUB_HINT = (
    "start with this thread's column and row, `c, r = cuda.grid(2)`, and a guard; the hints "
    "above the exercise say which derivative each code needs."
)
BACKWARD_HINT = (
    "with `c, r = cuda.grid(2)` and a guard, compute z = Z[r, c] + b[c] and the activation's "
    "derivative d = f'(z) (ReLU: 1 if z > 0 else 0; tanh: 1 - tanh(z)^2; identity: 1), then "
    "write `dZ[r, c] = dA[r, c] * d`."
)
DERIVATIVES = {
    "relu": lambda z: (z > 0).astype(z.dtype),
    "tanh": lambda z: 1 - np.tanh(z) ** 2,
    "identity": lambda z: np.ones_like(z),
}


def _backward_patterns(name: str, dA, Z, b) -> dict:
    """What the usual mistakes give for the activation ``name``: {description: (array, hint)}."""
    z = Z + b
    code = ACTIVATION_CODES[name]
    patterns = {}
    if name != "identity":
        patterns[f"dA: the {SAID[name]}'s derivative is missing"] = (
            dA, f"the chain rule multiplies dA by the activation's derivative: dZ = dA * "
                f"f'(z), and for {SAID[name]} f'(z) is " +
                ("1 where z > 0 and 0 elsewhere." if name == "relu" else "1 - tanh(z)^2."))
        patterns["f'(Z + b) without dA: the mask or slope alone"] = (
            DERIVATIVES[name](z), "the chain rule multiplies: dZ = dA * f'(z); f'(z) alone "
                                  "forgets the gradient that came from above.")
        patterns["dA * f'(Z): the bias is left out of z"] = (
            dA * DERIVATIVES[name](Z), "the activation's input was z = Z + b: compute "
                                       "`z = Z[r, c] + b[c]` before the derivative.")
        patterns[f"dA * {name}(Z + b): f instead of f'"] = (
            dA * {"relu": lambda v: np.maximum(v, 0), "tanh": np.tanh}[name](z),
            f"multiply by the derivative f'(z), not by f(z) itself: for {SAID[name]} f'(z) is " +
            ("1 where z > 0, else 0." if name == "relu" else "1 - tanh(z)^2."))
    if name == "relu":
        patterns["dA where dA > 0"] = (
            np.maximum(dA, 0), "the test is on the forward input z = Z + b, not on dA.")
    if name == "tanh":
        patterns["dA * (1 - z^2): tanh is not applied"] = (
            dA * (1 - z * z), "the derivative of tanh is 1 - tanh(z)^2: square tanh(z), "
                              "not z.")
        patterns["dA * (1 - tanh(z)): the square is missing"] = (
            dA * (1 - np.tanh(z)), "the derivative of tanh is 1 - tanh(z)^2.")
    for other in ("relu", "tanh", "identity"):
        if other != name:
            patterns[f"dA * {other}'(Z + b), not {name}'"] = (
                dA * DERIVATIVES[other](z),
                f"read the code in act: {code} is {SAID[name]} here ({IDENTITY} identity, {RELU} "
                f"ReLU, {TANH} tanh); compare act with IDENTITY, RELU and TANH.")
    return patterns


def check_bias_activation_backward(kernel, seed: int | None = None, dtype=np.float32,
                                   show: bool = True) -> CheckResult:
    """Check ``kernel(dA, Z, b, act, dZ)``: ``dZ = dA * f'(Z + b)`` with f chosen by ``act``
    (1 ReLU, 3 tanh, 0 identity: each is tried, each with its own block shape), one thread per
    element, x along the columns, guarded, on matrices with rows != cols.

    Diagnoses: the stub; the activation's derivative missing (dA passed through), f instead
    of f', the derivative without dA, the bias left out of z, tanh's derivative as 1 - z^2 or
    without the square, the wrong activation for the code, ReLU tested on dA; writes past the
    edges, swapped rows and columns, the last row or column skipped, a hard-coded block size;
    writing into dA, Z or b; simulator-only code. ``>= 0`` for ReLU is accepted (the two
    differ only at exactly 0)."""

    def body(seed: int) -> str:
        source = start_kernel(kernel, 5, BACKWARD_STUB_HINT)
        shapes = []
        for case, (code, name, words) in enumerate(ACTIVATIONS):
            trial = draw_2d("check_bias_activation_backward", seed, dtype, case)
            trial.case = f"act = {code} ({words})"
            dA = trial.normal(trial.rows, trial.cols)
            Z = trial.normal(trial.rows, trial.cols)
            b = trial.normal(trial.cols, scale=0.7)
            check_matrix_output(kernel, trial, source,
                                {"dA": dA, "Z": Z, "b": b, "act": code},
                                reference.bias_activation_backward(dA, Z, b, name),
                                _backward_patterns(name, dA, Z, b), BACKWARD_HINT, what="dZ")
            shapes.append(f"{words} on {trial.rows} x {trial.cols} in blocks of "
                          f"{trial.block[0]} x {trial.block[1]}")
        return f"all right: {'; '.join(shapes)} (seed={seed})."

    return run_check("bias_activation_backward", body, seed, show)


# --- exercise 3: the bias gradient, a column reduction ------------------------------------------

BIAS_GRAD_STUB_HINT = (
    "the launch has one thread per column of dZ: `c = cuda.grid(1)`, guarded by the number of "
    "columns; the hints above the exercise take it from there."
)
BIAS_GRAD_HINT = (
    "one thread per column: `c = cuda.grid(1)`, guarded with `c < dZ.shape[1]`; add up "
    "dZ[r, c] for every row r in a local variable, then write `db[c]` once."
)
OWNER_HINT = (
    "give each column one owner: `c = cuda.grid(1)`, a loop over the rows that adds dZ[r, c] "
    "into a local variable, and one write `db[c] = total`. Then no two threads ever write the "
    "same element, and no atomics are needed."
)
BIAS_GRAD_THREADS = {"sim": 32, "gpu": 128}


@dataclass
class ColumnTrial(Trial):
    """A random ``rows`` x ``n`` dZ, one thread per column (the 1-D grid runs over the n
    columns)."""

    rows: int = 0

    @property
    def extents(self) -> tuple[int, ...]:
        return self.rows, self.n

    def __str__(self) -> str:
        return (f"dZ of {self.rows} x {self.n}, {self.launched}, {self.dtype.name}, "
                f"{self.repeat}")


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


def _race_failure(watched: WatchedArray, trial: ColumnTrial) -> CheckFailedError | None:
    """A failure naming the race when two threads wrote one element of db without atomics."""
    race = watched.race()
    if race is None:
        return None
    element, _, count = race
    writers = sorted(watched.plain_writers[element] | watched.atomic_writers.get(element, set()))
    if len({thread for _, thread in writers}) == 1:  # the same thread number in every block
        return CheckFailedError(
            f"db[{element}] was written by thread {writers[0][1]} of {count} different blocks "
            f"({trial}).", GLOBAL_INDEX_HINT)
    who = ", ".join(f"thread {t} of block {b}" for b, t in writers[:3])
    more = ", ..." if count > 3 else ""
    return CheckFailedError(
        f"{count} threads wrote db[{element}] with plain stores ({who}{more}): on a GPU those "
        f"read-modify-writes race, and additions get lost. The simulator ran "
        f"them one after another, so its total may even look right ({trial}).", OWNER_HINT)


def check_bias_grad(kernel, seed: int | None = None, dtype=np.float32,
                    show: bool = True) -> CheckResult:
    """Check ``kernel(dZ, db)``: ``db[c] = sum over r of dZ[r, c]``, launched with one thread
    per column (``ceil(N / threads)`` blocks; the number of columns N is not a multiple of the
    block, and the batch has fewer rows than there are columns). ``db`` starts as NaN, as
    fresh device memory holds whatever was there, so the kernel must set every ``db[c]``.

    Diagnoses: the stub; no guard or ``<=`` (a thread past the last column); swapped indices;
    the last column skipped; only the first block; db averaged over the batch (the wrong
    normalisation: dZ already carries the loss's 1/batch); the first or last row skipped;
    no accumulation; adding into db without a start value; atomics into a db nobody zeroed;
    a racy ``db[c] +=`` from many threads (a thread per row, say: caught from the recorded
    writes in the simulator); db written more than once per thread (the trace counts it);
    writing into dZ; simulator-only code."""
    tier = "gpu" if device.tier() == "gpu" else "sim"
    threads = BIAS_GRAD_THREADS[tier]

    def body(seed: int) -> str:
        source = start_kernel(kernel, 2, BIAS_GRAD_STUB_HINT)
        rng = np.random.default_rng(seed)
        cols = draw_size(rng, threads, (40, 100) if tier == "sim" else (300, 3000))
        rows = int(rng.integers(5, 30))  # the batch: fewer rows than columns
        trial = ColumnTrial("check_bias_grad", seed, cols, threads, np.dtype(dtype), rng,
                            rows=rows)
        dZ = rng.standard_normal((rows, cols)).astype(dtype)
        d_dZ_all, d_dZ = padded(dZ, threads, PAD_VALUE)
        before = d_dZ_all.copy_to_host()
        watched = WatchedArray(np.full(cols, np.nan, dtype)) if tier == "sim" else None
        if watched is None:
            d_db_all, d_db = padded(np.full(cols, np.nan, dtype), threads, np.nan)
        else:
            d_db = watched
        offer_trace(kernel, 2, 8, "dZ", "db", note="with dZ a NumPy array of 5 x 13 and db of 13")
        hint = ("a thread ran past an edge of dZ or db. dZ[r, c] is row r (a sample; dZ has "
                "dZ.shape[0] of them) and column c (an output; dZ.shape[1]): guard "
                "`if c < dZ.shape[1]:` (`<`, not `<=`) and loop `for r in "
                "range(dZ.shape[0])`.")
        launch(kernel, trial, d_dZ, d_db, index_hint=hint)
        changed_input_failure("dZ", before, d_dZ_all.copy_to_host(), "db", trial)
        if watched is not None:
            failure = _race_failure(watched, trial)
            if failure:
                raise failure
            db = watched.copy_to_host()
        else:
            db = read_back(d_db_all, (cols,), trial, what="db", hint=hint)
        unwritten = np.isnan(db)
        if unwritten.all():
            if watched is not None and watched.atomic_writers:
                raise CheckFailedError(
                    f"db holds NaN: your kernel added into db with atomics, but db starts with "
                    f"whatever memory held (NaN in this check) and nobody set it to 0 first "
                    f"({trial}).", OWNER_HINT)
            adds = [line for line in _writes_in_loops(source, "db") if "+=" in line]
            if adds or any("+=" in line for line in _plain_db_writes(source)):
                raise CheckFailedError(
                    f"db holds NaN: your kernel added into db[c] without giving it a start "
                    f"value, and db starts with whatever memory held (NaN here) ({trial}).",
                    "sum into a local variable that starts at 0 (`total = 0.0`), then write "
                    "`db[c] = total` once.")
            raise CheckFailedError(f"your kernel wrote nothing into db ({trial}).",
                                   BIAS_GRAD_HINT)
        if unwritten.any():
            missing = np.flatnonzero(unwritten)
            text = f"{missing.size} of {cols} elements of db were never written ({trial})."
            if np.array_equal(missing, np.arange(threads, cols)):
                raise CheckFailedError(text + " Only the first block's columns were written.",
                                       GLOBAL_INDEX_HINT)
            if np.array_equal(missing, [cols - 1]):
                raise CheckFailedError(text + " The last column was skipped.",
                                       "guard with `c < dZ.shape[1]`, not `c < dZ.shape[1] - "
                                       "1`.")
            if np.array_equal(missing, np.arange(rows, cols)):
                raise CheckFailedError(text + f" Only the first {rows} columns (as many as dZ "
                                       "has rows) were written.",
                                       "guard the columns with `c < dZ.shape[1]`, not "
                                       "`dZ.shape[0]` (the rows).")
            raise CheckFailedError(text, BIAS_GRAD_HINT)
        want = reference.bias_grad(dZ).astype(np.float64)
        scale = np.abs(dZ.astype(np.float64)).sum(axis=0)
        tolerance = 2 * rows * float(np.finfo(dtype).eps) * scale + 1e-30
        wrong = np.abs(db - want) > tolerance
        if wrong.any():
            c = int(np.flatnonzero(wrong)[0])
            text = (f"db[{c}] should be {want[c]:.6g} but is {db[c]:.6g} ({int(wrong.sum())} of "
                    f"{cols} wrong; {trial})")
            d64 = dZ.astype(np.float64)
            suspects = [
                (want / rows, "db is the mean of the column, not its sum",
                 "db = the sum over the batch, not the mean: every sample used the same b, so "
                 "their gradients add up, and the loss's 1/batch is already inside dZ (the "
                 "loss gradient (p - y) / batch). Dividing again shrinks db by the batch size."),
                (d64[:-1].sum(axis=0), "the last row is missing from the sum",
                 "loop over every row: `for r in range(dZ.shape[0])`."),
                (d64[1:].sum(axis=0), "the first row is missing from the sum",
                 "start the loop at row 0: `for r in range(dZ.shape[0])`."),
                (d64[-1], "db holds only the last row", "add every row into the total: "
                 "`total += dZ[r, c]`, not `total = dZ[r, c]`."),
                (d64[0], "db holds only the first row", "loop over every row of dZ."),
                (want * rows, "the sum is batch times too large",
                 "db is the plain sum of the column: no factor of the batch size."),
            ]
            for value, words, hint in suspects:
                if np.allclose(db, value, rtol=1e-5, atol=1e-5):
                    raise CheckFailedError(f"{text}: {words}.", hint)
            raise CheckFailedError(text + ".", BIAS_GRAD_HINT)
        # The method: one write of db per thread, checked on a small traced launch.
        small = ColumnTrial("check_bias_grad", seed, 13, 8, np.dtype(dtype), rng, rows=5)
        traced = trace_trial(kernel, small, dZ[:5, :13].copy(), np.zeros(13, dtype))
        writes = traced.max_per_thread("global_writes")
        if traced.error is None and writes > 1:
            lines = _writes_in_loops(source, "db")
            where = f" (`{lines[0]}` is inside the loop)" if lines else ""
            raise CheckFailedError(
                f"db is right, but a thread wrote its db[c] {writes} times (traced on a 5 x 13 "
                f"dZ, 2 blocks of 8 threads){where}: each of those is a store to device memory.",
                "sum in a local variable (a register) and write `db[c] = total` once, after "
                "the loop: one store per thread instead of one per row.")
        return (f"all {cols} column sums right, one owner per column, one write each "
                f"({trial}).")

    return run_check("bias_grad", body, seed, show)


def _plain_db_writes(source: KernelSource) -> list[str]:
    lines = []
    for node in source.walk():
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Subscript) and \
                isinstance(node.target.value, ast.Name) and node.target.value.id == "db":
            lines.append("+= " + source.line(node))
    return lines


# --- exercise 4: a tiled transpose through shared memory ----------------------------------------

TRANSPOSE_STUB_HINT = (
    "each block transposes one TILE x TILE tile of A through a shared array; the hints above "
    "the exercise take it step by step."
)
TRANSPOSE_HINT = (
    "load A[r0 + ty, c0 + tx] into tile[ty, tx] (guarded), `cuda.syncthreads()`, then write "
    "tile[tx, ty] to out[c0 + ty, r0 + tx] (guarded by out's own sizes), with r0 = "
    "cuda.blockIdx.y * TILE and c0 = cuda.blockIdx.x * TILE."
)
TRANSPOSE_EDGE_HINT = (
    "a thread read or wrote past an edge. Guard the load with A's sizes (`r0 + ty < "
    "A.shape[0] and c0 + tx < A.shape[1]`) and the store with out's: out[c0 + ty, r0 + tx] "
    "needs `c0 + ty < A.shape[1] and r0 + tx < A.shape[0]`. The two guards differ when A is "
    "not square."
)
STRIDED_WRITES_HINT = (
    "neighbouring threads (neighbouring tx) must write neighbouring elements of a row of out: "
    "after the barrier, thread (tx, ty) writes out[c0 + ty, r0 + tx] = tile[tx, ty], reading "
    "the tile crosswise. Writing out[c, r] = A[r, c] straight, or out[c0 + tx, r0 + ty], puts "
    "each thread of a warp on a different row of out: one memory transaction each."
)
COALESCED_SHARE = 0.45  # below this share of the fetched bytes used, an access is strided
TRANSPOSE_SIDES = {"sim": (17, 44), "gpu": (300, 2000)}


@dataclass
class TileTrial(Case2D):
    """A :class:`Case2D` whose repeat call names the tile too."""

    tile: int = 16

    @property
    def repeat(self) -> str:
        return (f"seed={self.seed}; repeat it with {self.check_name}(kernel, tile={self.tile}, "
                f"seed={self.seed})")


def _untransposed_tiles(A: np.ndarray, tile: int) -> np.ndarray:
    """What a kernel that loads and stores the tile with the same indices writes: every tile in
    its transposed place, but its content not transposed (NaN where that would fall outside)."""
    rows, cols = A.shape
    out = np.full((cols, rows), np.nan)
    for r0 in range(0, rows, tile):
        for c0 in range(0, cols, tile):
            for i in range(tile):
                for j in range(tile):
                    if (c0 + i < cols and r0 + j < rows and r0 + i < rows and c0 + j < cols):
                        out[c0 + i, r0 + j] = A[r0 + i, c0 + j]
    return out


def _writes_by_thread(watched: WatchedArray) -> dict:
    """{(block, thread): [flat elements written]}, for :func:`memory_model.summarise`."""
    writes: dict = {}
    for element, writers in watched.plain_writers.items():
        for writer in writers:
            if writer is not None and isinstance(element, int):
                writes.setdefault(writer, []).append(element)
    return {who: sorted(elements) for who, elements in writes.items()}


def _uses_shared_memory(source: KernelSource) -> bool:
    return any(isinstance(node, ast.Attribute) and node.attr == "array"
               and isinstance(node.value, ast.Attribute) and node.value.attr == "shared"
               for node in source.walk())


def check_transpose_tiled(kernel, tile: int = 16, seed: int | None = None, dtype=np.float32,
                          show: bool = True) -> CheckResult:
    """Check ``kernel(A, out)``: ``out[c, r] = A[r, c]`` through a ``tile`` x ``tile`` tile in
    shared memory, launched as ``kernel[(ceil(cols / tile), ceil(rows / tile)), (tile, tile)]``
    on a random A with rows != cols, neither a multiple of the tile, and partial edge tiles of
    different sizes (so a store guarded with the load's bounds fails).

    In the simulator every read of A and write of out is recorded and grouped into warp
    requests of 32 threads: if less than 45 % of the bytes fetched for either are used, the
    access is strided and the check fails even though out is right (the naive transpose's
    writes use about a quarter; a tiled one's reads and writes about two thirds or more with
    16 x 16 tiles, the rest lost to rows that do not start on a 32-byte boundary). On a GPU,
    where accesses cannot be recorded, the kernel must use shared memory.

    Diagnoses: the stub; a tile below 16 (a warp would span several rows of it); the load or
    store guard (past an edge, or elements never written); a missing barrier (a slot of the
    tile read before it was written: poison in the simulator); the tile read with the same
    indices it was written with (tiles moved but not transposed); strided writes (the naive
    transpose); strided reads; writing into A; simulator-only code; barriers in branches."""
    tier = "gpu" if device.tier() == "gpu" else "sim"

    def body(seed: int) -> str:
        source = start_kernel(kernel, 2, TRANSPOSE_STUB_HINT)
        if tile not in (16, 32):
            raise CheckFailedError(
                f"TILE is {tile}: use 16 or 32. A warp is 32 threads, and with a tile narrower "
                "than 16 each warp spans more rows of the tile than the check (or a GPU) can "
                "coalesce.", "set `TILE = 16` (or 32 on a GPU) and run the cells again.")
        rng = np.random.default_rng(seed)
        low, high = TRANSPOSE_SIDES[tier]
        while True:
            rows = draw_size(rng, tile, (max(low, tile + 1), high), full_blocks=1)
            cols = draw_size(rng, tile, (max(low, tile + 1), high), full_blocks=1)
            if rows != cols and rows % tile != cols % tile:
                break
        trial = TileTrial("check_transpose_tiled", seed, rows, cols, (tile, tile),
                          np.dtype(dtype), rng, case=f"TILE = {tile}", tile=tile)
        A = trial.normal(rows, cols)
        offer_trace(kernel, (2, 2), (tile, tile), "A", "out",
                    note=f"with A a NumPy array of {tile + 3} x {tile + 9} and out of "
                         f"{tile + 9} x {tile + 3}")
        if tier == "sim":
            d_A = RecordingArray(A.copy())
            d_out = WatchedArray(np.full((cols, rows), np.nan, dtype))
        else:
            d_A_all, d_A = padded(A, tile, PAD_VALUE)
            d_out_all, d_out = padded(np.full((cols, rows), np.nan, dtype), tile, np.nan)
        launch(kernel, trial, d_A, d_out, index_hint=TRANSPOSE_EDGE_HINT)
        if tier == "sim":
            changed_input_failure("A", A, d_A.copy_to_host(), "out", trial)
            out = d_out.copy_to_host()
        else:
            changed_input_failure("A", padded(A, tile, PAD_VALUE)[0].copy_to_host(),
                                  d_A_all.copy_to_host(), "out", trial)
            out = read_back(d_out_all, (cols, rows), trial, hint=TRANSPOSE_EDGE_HINT)
        expected = A.T
        poison = poison_value(dtype)
        barriers = count_calls(source, "syncthreads")
        if np.isnan(out).all():
            raise CheckFailedError(f"your kernel wrote nothing into out ({trial}).",
                                   TRANSPOSE_HINT)
        if poison is not None and (out == poison).any():
            r, c = (int(i) for i in np.argwhere(out == poison)[0])
            text = (f"out[{r}, {c}] holds {out[r, c]:.6g}, the value fresh shared memory "
                    f"holds in this check: a thread read a slot of the tile before any thread "
                    f"wrote it ({trial}).")
            if barriers == 0:
                raise CheckFailedError(text, "call `cuda.syncthreads()` after filling the tile "
                                       "and before reading it crosswise: thread (tx, ty) reads "
                                       "the slot that thread (ty, tx) wrote.")
            raise CheckFailedError(text, TRANSPOSE_EDGE_HINT)
        unwritten = np.isnan(out)
        if unwritten.any():
            raise CheckFailedError(
                f"{int(unwritten.sum())} of {out.size} elements of out were never written "
                f"({trial}).", TRANSPOSE_EDGE_HINT)
        bad = out != expected
        if bad.any():
            r, c = (int(i) for i in np.argwhere(bad)[0])
            text = (f"{int(bad.sum())} of {out.size} elements of out are wrong; the first is "
                    f"out[{r}, {c}]: expected A[{c}, {r}] = {expected[r, c]:.6g}, got "
                    f"{out[r, c]:.6g} ({trial})")
            same = _untransposed_tiles(A, tile)
            known = ~np.isnan(same)
            if np.array_equal(out[known], same[known]):
                raise CheckFailedError(
                    text + ": each tile went to its transposed place, but its content was not "
                    "transposed.", "store the tile crosswise: thread (tx, ty) writes "
                    "tile[tx, ty] (the slot thread (ty, tx) filled), not tile[ty, tx].")
            raise CheckFailedError(text + ".", TRANSPOSE_HINT)
        if tier == "gpu":
            if not _uses_shared_memory(source):
                raise CheckFailedError(
                    f"out is right, but your kernel uses no shared memory, so its writes (or "
                    f"reads) go down the columns of a matrix: strided ({trial}). The simulator "
                    "tier measures this; here the source is read.", STRIDED_WRITES_HINT)
            return f"out = A^T for a {rows} x {cols} A, through shared memory ({trial})."
        itemsize = np.dtype(dtype).itemsize
        reads = memory_model.summarise(d_A.reads, itemsize, "traced in the simulator")
        writes = memory_model.summarise(_writes_by_thread(d_out), itemsize,
                                        "traced in the simulator")
        for access, name, hint in (
                (writes, "writes of out", STRIDED_WRITES_HINT),
                (reads, "reads of A", "neighbouring threads (neighbouring tx) must read "
                 "neighbouring elements of a row of A: thread (tx, ty) loads A[r0 + ty, c0 + tx] "
                 "into tile[ty, tx].")):
            if access.efficiency < COALESCED_SHARE:
                worst = max(access.requests, key=lambda request: len(request.sectors))
                raise CheckFailedError(
                    f"out is right, but the {name} are strided: a warp request touches "
                    f"{access.sectors_per_request:.3g} sectors of 32 bytes on average, and "
                    f"{access.efficiency * 100:.3g} % of the bytes fetched are used (one "
                    f"request of warp {worst.warp} touches {len(worst.sectors)} sectors for "
                    f"{len(worst.element_indices)} elements; {trial}).", hint)
        return (f"out = A^T for a {rows} x {cols} A, and coalesced: "
                f"{reads.efficiency * 100:.3g} % of the bytes fetched for the reads of A and "
                f"{writes.efficiency * 100:.3g} % for the writes of out are used (traced in "
                f"the simulator; {trial.launched}, seed={seed}).")

    return run_check("transpose_tiled", body, seed, show)


# --- exercise 5: numeric gradient -------------------------------------------------------------

NUMERIC_STUB_HINT = (
    "for each index i of x: save x[i], set x[i] = saved + eps and evaluate f(), set x[i] = "
    "saved - eps and evaluate f(), put x[i] back, and store (plus - minus) / (2 * eps). "
    "np.ndindex(x.shape) gives every index of an array of any shape."
)


def check_numeric_gradient(function, seed: int | None = None, show: bool = True) -> CheckResult:
    """Check ``function(f, x, eps)``, which must return an array shaped like ``x`` holding
    (f(x + eps e_i) - f(x - eps e_i)) / (2 eps) for every entry i, and leave ``x`` as it found
    it. Tried on a quadratic-plus-cubic function of a random 2-D array.

    Diagnoses: the stub; a one-sided difference; dividing by eps instead of 2 eps; x left
    changed; the wrong shape; perturbing every entry at once."""

    def body(seed: int) -> str:
        rng = np.random.default_rng(seed)
        shape = (int(rng.integers(2, 5)), int(rng.integers(2, 6)))
        x = rng.standard_normal(shape)
        original = x.copy()
        weights = rng.standard_normal(shape)

        def f() -> float:
            return float(np.sum(weights * x**2) + np.sum(x**3) / 3)

        eps = 1e-5
        got = call_learner(function, f, x, eps, stub_hint=NUMERIC_STUB_HINT)
        exact = 2 * weights * original + original**2
        if not np.array_equal(x, original):
            raise CheckFailedError("x was changed by your function: after perturbing an entry, "
                                   "put its saved value back.", NUMERIC_STUB_HINT)
        got = np.asarray(got, dtype=np.float64)
        if got.shape != shape:
            raise CheckFailedError(f"your function returned shape {got.shape}, but x has shape "
                                   f"{shape}: one derivative per entry of x.",
                                   "start from `grad = np.zeros_like(x)` and fill it.")
        if np.allclose(got, exact, rtol=1e-6, atol=1e-8):
            return f"the numeric gradient matches the exact one for a {shape[0]} x {shape[1]} x."
        if np.allclose(got, 2 * exact, rtol=1e-3, atol=1e-6):
            raise CheckFailedError("your values are twice the derivative.",
                                   "the two evaluations are 2 eps apart: divide by 2 * eps.")
        if np.allclose(got, exact, rtol=1e-2, atol=1e-3):
            raise CheckFailedError(
                "your values are close to the derivative but off by more than a central "
                "difference would be (a one-sided difference (f(x + eps) - f(x)) / eps?).",
                "use both sides: (f(x + eps) - f(x - eps)) / (2 * eps): its error shrinks like "
                "eps^2 instead of eps.")
        total = np.sum(exact)
        if np.allclose(got, total, rtol=1e-3, atol=1e-6):
            raise CheckFailedError("every entry holds the same value, the sum of all the "
                                   "derivatives: all entries were perturbed at once.",
                                   "perturb one entry at a time: x[i] only.")
        i = np.unravel_index(int(np.argmax(np.abs(got - exact))), shape)
        raise CheckFailedError(f"at index {tuple(int(k) for k in i)} the derivative is "
                               f"{exact[i]:.6g} but your function gave {got[i]:.6g}.",
                               NUMERIC_STUB_HINT)

    return run_check("numeric_gradient", body, seed, show)


__all__ = ["check_bias_activation_backward", "check_bias_grad", "check_dense_backward",
           "check_numeric_gradient", "check_transpose_tiled"]
