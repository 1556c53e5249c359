"""Chapter 07's exercises: the update and the mini-batches of the training loop.

- :func:`check_sgd_momentum` takes your ``@cuda.jit`` kernel ``(param, grad, velocity, lr,
  momentum)``: one thread per element, ``velocity[i] = momentum * velocity[i] + grad[i]`` then
  ``param[i] -= lr * velocity[i]`` (PyTorch's SGD with momentum), guarded.
- :func:`check_minibatches` takes your ``minibatches(n_samples, batch_size, rng)``: a list of
  index arrays that, together, hold every sample exactly once, in an order shuffled by ``rng``.

Sizes and values are random; a failure names the seed to repeat it.
"""

from __future__ import annotations

import numpy as np

from gpulab import reference
from gpulab.exercises.checks import (
    CheckFailedError,
    CheckResult,
    Trial,
    call_learner,
    default_threads_per_block,
    diagnose_vector,
    launch,
    padded,
    read_back,
    run_check,
    start_kernel,
)

SGD_STUB_HINT = (
    "with `i = cuda.grid(1)` and the guard `if i < param.shape[0]:`, compute "
    "v = momentum * velocity[i] + grad[i], store it in velocity[i], then param[i] -= lr * v."
)


def check_sgd_momentum(kernel, seed: int | None = None, threads_per_block: int | None = None,
                       dtype=np.float32, show: bool = True) -> CheckResult:
    """Check ``kernel(param, grad, velocity, lr, momentum)`` against
    :func:`gpulab.reference.sgd_momentum_update` (no weight decay), two steps in a row, so a
    velocity that is not stored shows.

    Diagnoses: the stub; a missing guard; the velocity not stored; plain SGD (the gradient
    instead of the velocity); ``+=`` instead of ``-=``; the old velocity used for the update;
    momentum applied to the gradient instead of the velocity."""

    def body(seed: int) -> str:
        start_kernel(kernel, 5, SGD_STUB_HINT)
        tpb = threads_per_block or default_threads_per_block()
        trial = Trial.draw("check_sgd_momentum", seed, tpb, dtype)
        p0, g1, g2 = trial.uniform(-1, 1), trial.uniform(-1, 1), trial.uniform(-1, 1)
        v0 = trial.uniform(-0.5, 0.5)
        scalar = trial.dtype.type
        lr, momentum = scalar(trial.rng.uniform(0.05, 0.2)), scalar(trial.rng.uniform(0.5, 0.95))
        # The padding of param and velocity starts at 0 and grad's at 1, so an unguarded thread
        # past the end changes it (the velocity becomes 1), which read_back reports.
        d_p_all, d_p = padded(p0.copy(), tpb, 0)
        d_v_all, d_v = padded(v0.copy(), tpb, 0)
        for grad in (g1, g2):
            _, d_g = padded(grad, tpb, 1)
            launch(kernel, trial, d_p, d_g, d_v, lr, momentum)
        p1, v1 = reference.sgd_momentum_update(p0, g1, v0, lr, momentum)
        p2, v2 = reference.sgd_momentum_update(p1, g2, v1, lr, momentum)
        got_p = read_back(d_p_all, (trial.n,), trial, fill=0, what="param")
        got_v = read_back(d_v_all, (trial.n,), trial, fill=0, what="velocity")
        # what common mistakes give after the same two steps
        plain = p0 - lr * g1 - lr * g2
        unstored = (p0 - lr * (momentum * v0 + g1)) - lr * (momentum * v0 + g2)
        plus = p0 + lr * (momentum * v0 + g1) + lr * (momentum * (momentum * v0 + g1) + g2)
        old_v = p0 - lr * v0 - lr * (momentum * v0 + g1)
        failure = diagnose_vector(p2, got_p, trial, patterns={
            "plain SGD, p -= lr * grad: the velocity is not used": (
                plain, "update with the velocity: param[i] -= lr * v, where v = momentum * "
                       "velocity[i] + grad[i]."),
            "an update whose velocity was never stored": (
                unstored, "write the new velocity back: `velocity[i] = v`, so the next step "
                          "remembers it."),
            "param moved up the gradient": (plus, "subtract: param[i] -= lr * v (down the "
                                                  "gradient, to lower the loss)."),
            "an update with the old velocity": (
                old_v, "compute the new velocity first, then update param with it."),
        })
        if failure is not None:
            raise failure
        failure = diagnose_vector(v2, got_v, trial)
        if failure is not None:
            raise CheckFailedError("param is right but velocity is not: " + failure.message,
                                   "store v = momentum * velocity[i] + grad[i] in velocity[i].")
        return (f"param and velocity are right after two steps ({trial.launched}, "
                f"n={trial.n}, seed={trial.seed}).")

    return run_check("sgd_momentum", body, seed, show)


# --- exercise 2: mini-batches ----------------------------------------------------------------

MINIBATCH_STUB_HINT = (
    "shuffle all the indices with rng.permutation(n_samples), then cut the shuffled order into "
    "slices of batch_size (the last slice may be shorter)."
)


def check_minibatches(function, seed: int | None = None, show: bool = True) -> CheckResult:
    """Check ``function(n_samples, batch_size, rng)``: batches of ``batch_size`` indices (the
    last one may be smaller), every sample exactly once, shuffled by ``rng`` (two different
    generators give different orders; the same seed, the same order).

    Diagnoses: the stub; the last, partial batch dropped; a sample missing or repeated;
    batches of the wrong size; no shuffling; shuffling that ignores ``rng``."""

    def body(seed: int) -> str:
        rng = np.random.default_rng(seed)
        batch_size = int(rng.integers(5, 40))
        n = batch_size * int(rng.integers(3, 9)) + int(rng.integers(1, batch_size))
        batches = call_learner(function, n, batch_size, np.random.default_rng(seed),
                               stub_hint=MINIBATCH_STUB_HINT)
        try:
            batches = [np.asarray(b).ravel() for b in batches]
        except TypeError:
            raise CheckFailedError(f"return a list of index arrays, not {type(batches).__name__}"
                                   ".", MINIBATCH_STUB_HINT) from None
        where = f"(n_samples={n}, batch_size={batch_size}, seed={seed})"
        everything = np.concatenate(batches) if batches else np.zeros(0, int)
        full, rest = divmod(n, batch_size)
        if len(everything) == full * batch_size and rest:
            raise CheckFailedError(f"{rest} samples are never used: the last, partial batch is "
                                   f"missing {where}.",
                                   "keep the remainder as a smaller last batch: every sample "
                                   "must be seen once per epoch.")
        counts = np.bincount(everything.astype(int), minlength=n) if everything.size else []
        if len(everything) != n or np.any(np.asarray(counts) != 1):
            raise CheckFailedError(f"the batches hold {len(everything)} indices for {n} samples "
                                   f"and some samples are missing or repeated {where}.",
                                   MINIBATCH_STUB_HINT)
        sizes = [len(b) for b in batches]
        if sizes != [batch_size] * full + ([rest] if rest else []):
            shown = f"{sizes[:6]}{'...' if len(sizes) > 6 else ''}"
            raise CheckFailedError(f"the batch sizes are {shown}: expected {full} batches of "
                                   f"{batch_size} then one of {rest} {where}.",
                                   MINIBATCH_STUB_HINT)
        if np.array_equal(everything, np.arange(n)):
            raise CheckFailedError(f"the samples come in their stored order {where}.",
                                   "shuffle with rng.permutation(n_samples): digits stored "
                                   "class by class would give batches of one class each.")
        again = call_learner(function, n, batch_size, np.random.default_rng(seed))
        other = call_learner(function, n, batch_size, np.random.default_rng(seed + 1))
        if not np.array_equal(np.concatenate([np.asarray(b).ravel() for b in again]),
                              everything):
            raise CheckFailedError(f"the same seed gave a different order {where}.",
                                   "shuffle with the rng you are given (rng.permutation), not "
                                   "np.random: a seed must repeat a run exactly.")
        if np.array_equal(np.concatenate([np.asarray(b).ravel() for b in other]), everything):
            raise CheckFailedError(f"two different generators gave the same order {where}.",
                                   "use the rng argument to shuffle.")
        return f"{len(batches)} batches, every sample once, shuffled by rng {where}."

    return run_check("minibatches", body, seed, show)


__all__ = ["check_minibatches", "check_sgd_momentum"]
