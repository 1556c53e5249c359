"""Chapter 06's exercises: the chain rule as code.

- :func:`check_relu_backward` takes your ``@cuda.jit`` kernel ``(dA, Z, b, dZ)``; it must write
  ``dZ[r, c] = dA[r, c]`` where ``Z[r, c] + b[c] > 0`` and 0 elsewhere (one thread per element,
  2-D grid, x along the columns, guarded).
- :func:`check_numeric_gradient` takes your ``numeric_gradient(f, x, eps)``: the central
  difference of ``f`` with respect to every entry of the array ``x``.
- :func:`check_dense_backward` takes your NumPy ``dense_backward(X, W, dZ)`` returning
  ``(dW, db, dX)``.

Sizes and values are random; a failure names the seed to repeat it.
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

# --- exercise 1: ReLU backward ----------------------------------------------------------------

RELU_BACKWARD_STUB_HINT = (
    "with `c, r = cuda.grid(2)` and a guard, compute z = Z[r, c] + b[c] and write "
    "`dZ[r, c] = dA[r, c]` if z > 0, else 0: ReLU passes the gradient where it was on."
)


def check_relu_backward(kernel, seed: int | None = None, dtype=np.float32,
                        show: bool = True) -> CheckResult:
    """Check ``kernel(dA, Z, b, dZ)``: dZ = dA * relu'(Z + b), one thread per element.

    Diagnoses: the stub; writes past the edges; nothing or part written; the bias left out of
    the test (``Z > 0``); the mask without dA; dA everywhere (no mask); testing dA instead of
    Z + b; ``>= 0`` is accepted (the two differ only at exactly 0)."""

    def body(seed: int) -> str:
        start_kernel(kernel, 4, RELU_BACKWARD_STUB_HINT)
        trial = Trial2D.draw("check_relu_backward", seed, dtype)
        dA = trial.normal(trial.rows, trial.cols)
        Z = trial.normal(trial.rows, trial.cols)
        b = trial.normal(trial.cols, scale=0.7)
        dZ = run_elementwise(kernel, trial, dA, Z, b, what="dZ")
        on = (Z + b) > 0
        diagnose_matrix(reference.bias_activation_backward(dA, Z, b, "relu"), dZ, trial, {
            "dA where Z > 0: the bias is left out of the test": (
                dA * (Z > 0), "ReLU's input was Z + b: test `Z[r, c] + b[c] > 0`."),
            "1 where Z + b > 0: the mask without dA": (
                on.astype(dtype), "the chain rule multiplies: dZ = dA * f'(z), and f'(z) is 1 "
                                  "or 0, so pass dA[r, c] through where z > 0."),
            "dA everywhere: the ReLU's derivative is missing": (
                dA, "where z <= 0 the ReLU output did not depend on z: the gradient there is 0."),
            "dA where dA > 0": (
                np.maximum(dA, 0), "the test is on the forward input z = Z + b, not on dA."),
        }, rtol=1e-6, atol=1e-7, what="dZ")
        return (f"all {trial.rows * trial.cols} elements are right (seed={trial.seed}; "
                f"{int(on.sum())} of them passed the gradient through).")

    return run_check("relu_backward", body, seed, show)


# --- exercise 2: numeric gradient -------------------------------------------------------------

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


# --- exercise 3: a dense layer's backward pass --------------------------------------------------

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


__all__ = ["check_dense_backward", "check_numeric_gradient", "check_relu_backward"]
