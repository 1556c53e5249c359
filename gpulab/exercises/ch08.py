"""Chapter 08's exercises: what a batch costs in memory, and the largest batch that fits.

- :func:`check_parameter_memory` takes your ``parameter_memory_bytes(widths, optimiser,
  itemsize)``: the bytes of an MLP's weights and biases, their gradients, and the optimiser's
  state (SGD with momentum: one tensor per parameter; Adam: two), as
  :func:`gpulab.nn.cost.training_memory` counts them.
- :func:`check_largest_batch` takes your ``largest_batch(budget_bytes, widths, candidates)``:
  the largest of the candidate batch sizes whose training step fits in the budget (use
  ``gpulab.nn.cost.training_memory(widths, batch).total``), or None if none fits.

Widths, budgets and candidates are random; a failure names the seed to repeat it.
"""

from __future__ import annotations

import numpy as np

from gpulab.exercises.checks import CheckFailedError, CheckResult, call_learner, run_check
from gpulab.nn import cost

MEMORY_STUB_HINT = (
    "count the parameters: every layer has n_in * n_out weights and n_out biases. Then "
    "weights + gradients + optimiser state = (1 + 1 + state tensors) * parameters * itemsize, "
    "with 1 state tensor for 'sgd' (the velocity) and 2 for 'adam' (m and v)."
)
LARGEST_STUB_HINT = (
    "go through the candidates from small to large, keep the last one whose "
    "cost.training_memory(widths, batch).total is <= budget_bytes; None if none fits."
)


def _random_widths(rng: np.random.Generator) -> list[int]:
    return [int(w) for w in rng.integers(3, 300, size=int(rng.integers(2, 5)))]


def check_parameter_memory(function, seed: int | None = None, show: bool = True) -> CheckResult:
    """Check ``function(widths, optimiser, itemsize)`` on random widths, both optimisers and
    three number formats.

    Diagnoses: the stub; the biases left out; the gradients left out; Adam's state counted
    once; no optimiser state; parameters instead of bytes."""

    def body(seed: int) -> str:
        rng = np.random.default_rng(seed)
        cases = [(_random_widths(rng), optimiser, itemsize)
                 for optimiser in ("sgd", "adam") for itemsize in (4, 2, 8)]
        for widths, optimiser, itemsize in cases:
            got = call_learner(function, list(widths), optimiser, itemsize,
                               stub_hint=MEMORY_STUB_HINT)
            m = cost.training_memory(widths, 1, optimiser, itemsize)
            want = m.weights + m.gradients + m.optimiser_state
            if got == want:
                continue
            P = cost.n_parameters(widths)
            weights_only = sum(a * b for a, b in zip(widths[:-1], widths[1:], strict=True))
            state = cost.OPTIMISER_STATE_TENSORS[optimiser]
            suspects = {
                (2 + state) * weights_only * itemsize: "the biases are missing: each layer "
                                                       "has n_out of them.",
                (1 + state) * P * itemsize: "the gradients are missing: one per parameter.",
                3 * P * itemsize if optimiser == "adam" else -1:
                    "Adam keeps two tensors per parameter (m and v), not one.",
                2 * P * itemsize: "the optimiser's state is missing (SGD's velocity; Adam's m "
                                  "and v).",
                (2 + state) * P: "these are parameters, not bytes: multiply by itemsize.",
            }
            raise CheckFailedError(
                f"for widths {widths}, {optimiser}, itemsize {itemsize}: expected {want:,} "
                f"bytes, got {got!r}.", suspects.get(got, MEMORY_STUB_HINT))
        return f"all {len(cases)} cases right (seed={seed})."

    return run_check("parameter_memory", body, seed, show)


def check_largest_batch(function, seed: int | None = None, show: bool = True) -> CheckResult:
    """Check ``function(budget_bytes, widths, candidates)`` against
    :func:`gpulab.nn.cost.largest_batch_within`, with budgets that land between two
    candidates, exactly on one, and below all of them.

    Diagnoses: the stub; the smallest fitting batch instead of the largest; the first batch
    that no longer fits; a batch that is not one of the candidates; no None when nothing fits."""

    def body(seed: int) -> str:
        rng = np.random.default_rng(seed)
        widths = _random_widths(rng)
        candidates = sorted({int(2 ** k) for k in rng.integers(0, 14, size=6)})
        totals = [cost.training_memory(widths, b).total for b in candidates]
        budgets = [totals[0] - 1, totals[-1] * 2, totals[len(totals) // 2]]
        if len(totals) > 1:
            budgets.append((totals[0] + totals[1]) // 2)
        shuffled = list(rng.permutation(candidates).astype(int))
        for budget in budgets:
            got = call_learner(function, budget, list(widths), list(shuffled),
                               stub_hint=LARGEST_STUB_HINT)
            want = cost.largest_batch_within(budget, widths, candidates=candidates)
            if got == want:
                continue
            where = (f"budget {budget:,} bytes, widths {widths}, candidates {shuffled} "
                     f"(seed={seed})")
            if want is None:
                raise CheckFailedError(f"nothing fits ({where}), but you returned {got!r}.",
                                       "return None when even the smallest batch is too big.")
            fitting = [b for b, t in zip(candidates, totals, strict=True) if t <= budget]
            if got == fitting[0] and len(fitting) > 1:
                hint = "that is the smallest batch that fits: keep going to the largest."
            elif got in candidates and got > want:
                hint = ("that batch needs more than the budget: check `<=` against the total "
                        "before accepting it.")
            elif got not in candidates:
                hint = "return one of the candidates."
            else:
                hint = LARGEST_STUB_HINT + " The candidates may come in any order: sort them."
            raise CheckFailedError(f"expected batch {want}, got {got!r} ({where}).", hint)
        return f"right for {len(budgets)} budgets (seed={seed})."

    return run_check("largest_batch", body, seed, show)


__all__ = ["check_largest_batch", "check_parameter_memory"]
