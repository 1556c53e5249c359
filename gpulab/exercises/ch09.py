"""Chapter 09's exercises: the activation memory of the MLP, and gradient accumulation.

- :func:`check_activation_bytes` takes your ``activation_bytes(widths, batch_size,
  itemsize)``: the bytes of the values the course's MLP keeps for its backward pass — the
  input batch, every layer's matmul output Z, every hidden layer's output A, the logits, the
  probabilities and one loss per sample — each ``itemsize`` bytes (labels not counted), as
  :func:`gpulab.nn.memory.mlp_activation_values` counts them.
- :func:`check_accumulated_gradients` takes your ``accumulated_gradients(model, X, y,
  micro_batches)``: the gradients of the mean loss over the whole batch, computed by running
  ``micro_batches`` smaller forward and backward passes (never the whole batch at once) and
  combining their gradients, each weighted by its micro-batch's share of the samples. It
  returns ``{"layer0.W": ..., ...}`` as ``model.gradients()`` does and must not update the
  model.

Widths, batches and values are random; a failure names the seed to repeat it.
"""

from __future__ import annotations

import numbers

import numpy as np

from gpulab.exercises.checks import CheckFailedError, CheckResult, call_learner, run_check
from gpulab.nn import memory
from gpulab.nn.mlp import MLP

# --- exercise 1: the activation memory of the MLP ---------------------------------------------

ACTIVATION_STUB_HINT = (
    "per sample, add up the values kept: the input (widths[0]), one Z per layer (widths[1:]), "
    "one output A per hidden layer (widths[1:-1]), the logits and the probabilities "
    "(widths[-1] each) and one loss; then multiply by batch_size and by itemsize."
)


def _random_widths(rng: np.random.Generator, hidden_layers: int) -> list[int]:
    return ([int(rng.integers(20, 800))] + [int(w) for w in rng.integers(5, 600, hidden_layers)]
            + [int(rng.integers(2, 50))])


def _activation_suspects(widths: list[int], B: int, itemsize: int) -> dict[float, str]:
    """Wrong-but-plausible answers for one case, each with the hint that names its mistake."""
    n_in, hidden, C = widths[0], widths[1:-1], widths[-1]
    Z, A = sum(widths[1:]), sum(hidden)
    right = memory.mlp_activation_values(widths, B)
    first_only = n_in + 2 * widths[1] + 2 * C + 1 if hidden else None
    candidates = {
        right * itemsize * 8: "that is in bits: itemsize is already bytes per value, so do not "
                              "multiply by 8.",
        right * 8: "that counts 8 bytes per value: use the itemsize you are given (4 for "
                   "float32, 2 for 16-bit formats).",
        right // B * itemsize: "that is one sample's worth: multiply by batch_size, every "
                               "sample keeps its own activations.",
        right: "that is a count of values: multiply by itemsize to get bytes.",
        (right - B * n_in) * itemsize: "the input batch is missing: the first layer's input X "
                                       "is kept too (its dW = X^T dZ needs it).",
        (right - B * A) * itemsize: "the hidden layers' outputs A are missing: each one is the "
                                    "next layer's input X, which its backward pass needs.",
        (right - B * Z) * itemsize: "the matmul outputs Z are missing: every layer keeps its Z "
                                    "for the activation's derivative (checkpointing is what "
                                    "drops them).",
        (right - B * (2 * C + 1)) * itemsize: "the loss's values are missing: the logits, the "
                                              "probabilities and one loss per sample.",
        (right - B * (C + 1)) * itemsize: "the logits or the per-sample losses are missing: the "
                                          "loss keeps the logits, the probabilities and one "
                                          "loss per sample.",
        (right - B * C) * itemsize: "one of the logits and the probabilities is missing: both "
                                    "are kept (C values each).",
        (right - B) * itemsize: "the per-sample losses are missing: one value per sample.",
        (right + B * C) * itemsize: "the logits are counted twice: the last layer's output A "
                                    "is the logits, count it once.",
    }
    if first_only is not None and len(hidden) > 1:
        candidates[B * first_only * itemsize] = (
            "that counts one hidden layer: count Z (and A, for hidden layers) for every layer "
            "of the network, not once.")
    return candidates


def check_activation_bytes(function, seed: int | None = None, show: bool = True
                           ) -> CheckResult:
    """Check ``function(widths, batch_size, itemsize)`` on random networks of 1 to 4 hidden
    layers, random batch sizes and itemsizes 4, 2 and 8.

    Diagnoses: the stub; a result that is not a whole number; bits instead of bytes; values
    instead of bytes; one sample instead of the batch; the input, the hidden outputs, the
    matmul outputs Z, the logits, the probabilities or the losses left out; one layer counted
    instead of every layer; the logits counted twice."""

    def body(seed: int) -> str:
        rng = np.random.default_rng(seed)
        cases = [(_random_widths(rng, hidden), int(rng.integers(2, 5000)), itemsize)
                 for hidden, itemsize in ((2, 4), (1, 2), (3, 8), (4, 4), (2, 2))]
        for widths, B, itemsize in cases:
            got = call_learner(function, list(widths), B, itemsize,
                               stub_hint=ACTIVATION_STUB_HINT,
                               call=f"activation_bytes({widths}, {B}, {itemsize})")
            want = memory.mlp_activation_values(widths, B) * itemsize
            where = f"widths {widths}, batch {B}, itemsize {itemsize} (seed={seed})"
            if isinstance(got, bool) or not isinstance(got, numbers.Real):
                raise CheckFailedError(f"for {where} you returned {got!r}: a number of bytes "
                                       "was expected.", "return the number: `return ...`.")
            if float(got) != int(got):
                raise CheckFailedError(f"for {where} you returned {got!r}: bytes come in whole "
                                       "numbers.", "use whole numbers throughout (no `/`).")
            if int(got) == want:
                continue
            hint = _activation_suspects(widths, B, itemsize).get(int(got), ACTIVATION_STUB_HINT)
            raise CheckFailedError(f"for {where}: expected {want:,} bytes, got {int(got):,}.",
                                   hint)
        return f"all {len(cases)} networks right (seed={seed})."

    return run_check("activation_bytes", body, seed, show)


# --- exercise 2: gradient accumulation ---------------------------------------------------------

ACCUMULATION_STUB_HINT = (
    "cut X and y into micro_batches parts (np.array_split); for each part run model.loss and "
    "model.backward, and add model.gradients() into a running total, each weighted by "
    "len(part) / len(y); return the total."
)
WEIGHT_HINT = (
    "each micro-batch's loss is a mean over its own samples, so its gradient must be weighted "
    "by its share of the batch, len(y_part) / len(y): that also works when the parts are not "
    "all the same size."
)


def _split_styles(n: int, k: int) -> dict[str, list[np.ndarray]]:
    """The ways a learner may cut n samples into k micro-batches."""
    size = -(-n // k)
    return {"array_split": np.array_split(np.arange(n), k),
            "slices": [np.arange(start, min(start + size, n)) for start in range(0, n, size)]}


def _gradients(model: MLP, X, y) -> dict[str, np.ndarray]:
    model.loss(X, y)
    model.backward()
    return model.gradients()


def _combine(parts: list[dict[str, np.ndarray]], weights) -> dict[str, np.ndarray]:
    return {name: sum(w * p[name] for w, p in zip(weights, parts, strict=True))
            for name in parts[0]}


def _close(got: dict, want: dict, scale: float) -> bool:
    return all(np.allclose(got[name], want[name], rtol=1e-7, atol=1e-9 * scale)
               for name in want)


class _Recorder:
    """Wraps a model's ``loss`` to record the batch size of every forward pass."""

    def __init__(self, model: MLP):
        self.sizes: list[int] = []
        self.inputs: list[np.ndarray] = []
        self.model_loss = model.loss

    def __call__(self, X, y):
        self.sizes.append(int(np.asarray(X).shape[0]))
        self.inputs.append(np.array(X, copy=True))
        return self.model_loss(X, y)

    @property
    def repeated_inputs(self) -> bool:
        """Several forward passes, all on the same samples."""
        return len(self.inputs) > 1 and all(
            x.shape == self.inputs[0].shape and np.array_equal(x, self.inputs[0])
            for x in self.inputs[1:])


def check_accumulated_gradients(function, seed: int | None = None, show: bool = True
                                ) -> CheckResult:
    """Check ``function(model, X, y, micro_batches)`` against the whole batch's gradients, on
    random float64 networks and batches whose size is not a multiple of ``micro_batches``.

    Diagnoses: the stub; a result that is not a dict of the model's gradients; the whole batch
    in one forward pass; the model updated; the micro-batches' gradients summed without their
    weights; averaged with equal weights although the parts differ in size; only the last (or
    the first) micro-batch kept; the same samples used for every micro-batch."""

    def body(seed: int) -> str:
        rng = np.random.default_rng(seed)
        cases = []
        for k in (3, 4, 2):
            widths = [int(rng.integers(4, 20)), int(rng.integers(3, 16)),
                      int(rng.integers(2, 7))]
            n = k * int(rng.integers(2, 6)) + int(rng.integers(1, k))  # not a multiple of k
            cases.append((widths, n, k))
        for widths, n, k in cases:
            X = rng.normal(0.0, 1.0, (n, widths[0]))
            y = rng.integers(0, widths[-1], n)
            where = f"widths {widths}, {n} samples, {k} micro-batches (seed={seed})"
            reference = MLP(widths, dtype=np.float64, seed=seed)
            model = reference.copy()
            recorder = _Recorder(model)
            model.loss = recorder
            before = model.state()
            got = call_learner(function, model, X.copy(), y.copy(), k,
                               stub_hint=ACCUMULATION_STUB_HINT,
                               call=f"accumulated_gradients(model, X, y, {k})")
            want = _gradients(reference, X, y)
            if not isinstance(got, dict) or set(got) != set(want):
                shown = sorted(got)[:4] if isinstance(got, dict) else type(got).__name__
                raise CheckFailedError(
                    f"expected a dict with the keys {sorted(want)} (as model.gradients() "
                    f"returns), got {shown} ({where}).",
                    "start from `total = {}` and add each micro-batch's model.gradients() "
                    "into it, name by name.")
            got = {name: np.asarray(value, dtype=np.float64) for name, value in got.items()}
            for name, value in got.items():
                if value.shape != want[name].shape:
                    raise CheckFailedError(f"{name} has shape {value.shape}, expected "
                                           f"{want[name].shape} ({where}).",
                                           ACCUMULATION_STUB_HINT)
            after = model.state()
            if any(not np.array_equal(before[p], after[p]) for p in before):
                raise CheckFailedError(f"the model's parameters changed ({where}).",
                                       "only compute the gradients: no optimiser step, no "
                                       "update of the weights.")
            if not recorder.sizes:
                raise CheckFailedError(f"the model never ran a forward pass ({where}).",
                                       "call model.loss(X_part, y_part), then model.backward(), "
                                       "for each part.")
            if max(recorder.sizes) > -(-n // k):
                raise CheckFailedError(
                    f"a forward pass took {max(recorder.sizes)} samples at once, more than a "
                    f"micro-batch of {-(-n // k)} ({where}).",
                    "the point is never to run the whole batch at once (its activations are "
                    "what does not fit): run one part at a time and combine the gradients.")
            scale = max(float(np.max(np.abs(g))) for g in want.values())
            if _close(got, want, scale):
                continue
            raise CheckFailedError(f"your gradients differ from the whole batch's ({where}).",
                                   _accumulation_diagnosis(got, reference, X, y, k, scale,
                                                           recorder))
        return f"all {len(cases)} batches give the whole batch's gradients (seed={seed})."

    return run_check("accumulated_gradients", body, seed, show)


def _accumulation_diagnosis(got, reference: MLP, X, y, k: int, scale: float,
                            recorder: _Recorder) -> str:
    if recorder.repeated_inputs:
        return ("every micro-batch used the same samples: take a different slice of X and y "
                "for each part.")
    for parts in _split_styles(len(y), k).values():
        grads = [_gradients(reference, X[p], y[p]) for p in parts]
        shares = [len(p) / len(y) for p in parts]
        if _close(got, _combine(grads, [1.0] * len(parts)), scale):
            return ("forgot to divide by the number of micro-batches: you added up the "
                    "micro-batches' gradients, each of which is already a mean. " + WEIGHT_HINT)
        if _close(got, _combine(grads, [1.0 / len(parts)] * len(parts)), scale):
            return ("every micro-batch got the same weight 1/k, but these parts differ in size "
                    f"({', '.join(str(len(p)) for p in parts)} samples). " + WEIGHT_HINT)
        if _close(got, grads[-1], scale) or _close(got, _combine(grads[-1:], shares[-1:]), scale):
            return ("only the last micro-batch's gradient is left: add each one into the "
                    "total (`+=`), don't overwrite it.")
        if _close(got, grads[0], scale) or _close(got, _combine(grads[:1], shares[:1]), scale):
            return ("only the first micro-batch's gradient is there: loop over every part "
                    "and add each one's gradients into the total.")
    return ACCUMULATION_STUB_HINT


__all__ = ["check_accumulated_gradients", "check_activation_bytes"]
