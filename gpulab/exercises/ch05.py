"""Chapter 05's exercises: a fused bias + ReLU kernel, and the napkin math of its traffic.

- :func:`check_bias_relu` takes your ``@cuda.jit`` kernel ``(Z, b, out)``; it must write
  ``out[r, c] = max(Z[r, c] + b[c], 0)`` with one thread per element of a 2-D grid (x along
  the columns) and a guard for both directions.
- :func:`check_traffic` takes your function ``bytes_moved(M, N, fused, itemsize)``.

Each check uses random sizes that are not multiples of the block and random values, prints a
:class:`~gpulab.exercises.checks.CheckResult` and returns it; a failure names the seed:
``check_bias_relu(kernel, seed=1234)`` repeats the trial.
"""

from __future__ import annotations

import numpy as np

from gpulab import reference
from gpulab.exercises.checks import (
    CheckFailedError,
    CheckResult,
    Trial2D,
    call_learner,
    diagnose_matrix,
    run_check,
    run_elementwise,
    start_kernel,
)

# --- exercise 1: fused bias + ReLU ------------------------------------------------------------

BIAS_RELU_STUB_HINT = (
    "find this thread's row and column with `c, r = cuda.grid(2)`, let only threads inside the "
    "matrix through, and write `out[r, c]` = Z[r, c] + b[c] if that is positive, else 0."
)


def check_bias_relu(kernel, seed: int | None = None, dtype=np.float32,
                    show: bool = True) -> CheckResult:
    """Check ``kernel(Z, b, out)``: ``out[r, c] = max(Z[r, c] + b[c], 0)``, one thread per
    element, x along the columns, guarded; launched on a 2-D grid that overhangs both edges.

    Diagnoses: the stub; writes past the edges; nothing written; only the first block; rows
    and columns swapped; the bias left out; the ReLU left out; ``b[r]`` instead of ``b[c]``;
    simulator-only code."""

    def body(seed: int) -> str:
        start_kernel(kernel, 3, BIAS_RELU_STUB_HINT)
        trial = Trial2D.draw("check_bias_relu", seed, dtype)
        Z = trial.normal(trial.rows, trial.cols)
        b = trial.normal(trial.cols, scale=0.5)
        out = run_elementwise(kernel, trial, Z, b)
        expected = reference.bias_activation(Z, b, "relu")
        b_by_row = np.resize(b, trial.rows)[:, None]  # what b[r] would read (when it can)
        diagnose_matrix(expected, out, trial, {
            "max(Z, 0): the bias is missing": (np.maximum(Z, 0), "add b[c] before the ReLU."),
            "Z + b: the ReLU is missing": (Z + b, "keep only positive values: `z if z > 0 "
                                                  "else 0`."),
            "max(Z + b[r], 0): the bias indexed by row": (
                np.maximum(Z + b_by_row, 0), "there is one bias per output column: b[c]."),
            "max(Z, 0) + b: the bias added after the ReLU": (
                np.maximum(Z, 0) + b, "add the bias first, then apply the ReLU."),
        }, rtol=1e-6, atol=1e-6)
        return (f"all {trial.rows * trial.cols} elements are right ({trial.launched}, "
                f"seed={trial.seed}).")

    return run_check("bias_relu", body, seed, show)


# --- exercise 2: napkin math --------------------------------------------------------------------

TRAFFIC_STUB_HINT = (
    "count values: the unfused pair reads Z and b, writes Z + b, reads it back and writes A; "
    "the fused kernel reads Z and b and writes A. Multiply by itemsize."
)


def check_traffic(function, seed: int | None = None, show: bool = True) -> CheckResult:
    """Check ``function(M, N, fused, itemsize)``: the bytes bias + activation move on an
    M x N matmul output, each value read or written once per pass (b counted once), as
    :func:`gpulab.kernels.dense.forward_traffic_bytes`."""
    from gpulab.kernels.dense import forward_traffic_bytes

    def body(seed: int) -> str:
        rng = np.random.default_rng(seed)
        cases = [(int(rng.integers(2, 5000)), int(rng.integers(2, 5000)), fused, itemsize)
                 for fused in (True, False) for itemsize in (4, 8, 2)]
        for M, N, fused, itemsize in cases:
            got = call_learner(function, M, N, fused, itemsize, stub_hint=TRAFFIC_STUB_HINT)
            want = forward_traffic_bytes(M, N, fused, itemsize)
            if not isinstance(got, (int, float, np.integer, np.floating)):
                raise CheckFailedError(f"bytes_moved returned {got!r}: return a number of bytes.")
            if got == want:
                continue
            kind = "fused" if fused else "unfused"
            values = 2 if fused else 4
            suspects = {
                itemsize * values * M * N: "b is missing: it is read too (N values, once).",
                values * M * N + N: "these are values, not bytes: multiply by itemsize.",
                itemsize * (2 * M * N + N) if not fused else None:
                    "the unfused pair also writes Z + b to memory and reads it back: 4 M N "
                    "values in all.",
                itemsize * (3 * M * N + N):
                    "count each pass: the fused kernel reads Z (M N values) and writes A "
                    "(M N); the unfused pair reads Z, writes Z + b, reads Z + b, writes A.",
                itemsize * (values * M * N + M): "b has one value per column: N, not M.",
            }
            hint = suspects.get(got, TRAFFIC_STUB_HINT)
            raise CheckFailedError(
                f"for M={M}, N={N}, {kind}, itemsize={itemsize}: expected {want:,} bytes, got "
                f"{got:,}.", hint)
        return f"all {len(cases)} cases right (seed={seed})."

    return run_check("traffic", body, seed, show)


__all__ = ["check_bias_relu", "check_traffic"]
