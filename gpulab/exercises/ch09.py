"""Chapter 09's exercises: the activation memory of the MLP, gradient accumulation, and the
kernel that accumulates on the device.

- :func:`check_activation_bytes`: exercise 1, ``activation_bytes(widths, batch_size,
  itemsize)``, the bytes the course's MLP keeps for its backward pass.
- :func:`check_accumulated_gradients`: exercise 2, ``accumulated_gradients(model, X, y,
  micro_batches)``, the whole batch's gradients, one micro-batch at a time.
- :func:`check_accumulate`: exercise 3, the kernel ``accumulate(grad_sum, grad_micro,
  weight)``. Once it passes, :func:`accumulate_on_device` runs the chapter's micro-batches
  with it (:func:`gpulab.kernels.accumulate.accumulate_gradients`).
"""

from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass, field

import numpy as np

from gpulab import device
from gpulab.exercises.evidence import OutputWrites, TracedWrites, is_number, is_whole
from gpulab.exercises.grid_stride import one_element_each
from gpulab.exercises.learner_code import machinery
from gpulab.exercises.mistakes import Mistake, reject
from gpulab.exercises.outputs import PAD_VALUE
from gpulab.exercises.results import GLOBAL_INDEX_HINT, offer_trace
from gpulab.exercises.running import call_learner, launch, padded, read_back
from gpulab.exercises.source_rules import KernelSource, plain_writes_to
from gpulab.exercises.spec import CheckSpec, traced, try_launch, under_two_blocks
from gpulab.exercises.trial import Trial
from gpulab.instruments import thread_label
from gpulab.nn import memory
from gpulab.nn.mlp import MLP

# --- exercise 1: the activation memory of the MLP ---------------------------------------------

ACTIVATION_STUB_HINT = (
    "per sample, add up the values kept: the input, one Z per layer, one output A per hidden "
    "layer, the logits and the probabilities and one loss; then scale to the batch and to "
    "bytes. The hints above the cell go step by step."
)


def _random_widths(rng: np.random.Generator, hidden_layers: int) -> list[int]:
    return ([int(rng.integers(20, 800))] + [int(w) for w in rng.integers(5, 600, hidden_layers)]
            + [int(rng.integers(2, 50))])


def _large_case(rng: np.random.Generator) -> tuple[list[int], int, int]:
    """A network as wide as real ones (two hidden layers of 4,096-16,383, an input of
    1,024-8,191, 1,000-49,999 classes) on an odd batch of 20,001-99,999 in 2-byte values, the
    batch raised by 20,000 at a time where the draw falls short of 2³¹ bytes (an int32 wraps
    past it; the smallest draw is 8·10⁸ bytes): past 2²⁴ values too (float32 rounds)."""
    widths = ([int(rng.integers(1024, 8192))] + [int(w) for w in rng.integers(4096, 16384, 2)]
              + [int(rng.integers(1000, 50000))])
    batch, itemsize = int(rng.integers(10_000, 50_000)) * 2 + 1, 2
    while memory.mlp_activation_values(widths, batch) * itemsize <= 2**31:
        batch += 20_000
    return widths, batch, itemsize


@dataclass
class Bytes:
    """What ``activation_bytes(widths, batch, itemsize)`` returned, for the mistakes below."""

    widths: list[int]
    batch: int
    itemsize: int
    got: object
    seed: int

    def __post_init__(self):
        self.where = (f"widths {self.widths}, batch {self.batch}, itemsize {self.itemsize}, "
                      f"seed={self.seed}")
        self.values = memory.mlp_activation_values(self.widths, self.batch)  # the whole batch's
        self.expected = self.values * self.itemsize
        self.hidden = self.widths[1:-1]

    @property
    def summary(self) -> str:
        return f"expected {self.expected:,} bytes, got {int(self.got):,}"

    def is_(self, values: int, itemsize: int | None = None) -> bool:
        """Did the learner return ``values`` (for the batch) times ``itemsize`` bytes?"""
        return is_whole(self.got) and int(self.got) == values * (self.itemsize if itemsize is None
                                                         else itemsize)

    def without(self, per_sample: int) -> bool:
        """The right count less ``per_sample`` values for every sample (and not the right one)."""
        return per_sample > 0 and self.is_(self.values - self.batch * per_sample)

    def fixed_itemsize(self) -> int | None:
        """The bytes per value typed in (2, 4 or 8), if that is what the answer counts."""
        return next((k for k in (2, 4, 8) if k != self.itemsize and self.is_(self.values, k)),
                    None)

    def in_unit(self) -> str | None:
        """The unit (MB ... GiB) the answer is in, if it is the bytes in a larger unit."""
        got = float(self.got) if is_number(self.got) else 0.0
        return next((name for name, unit in UNITS.items() if got > 0 and abs(
            got - self.expected / unit) < 1 and got * 2 > self.expected / unit > got / 2), None)

    def one_layer(self) -> bool:
        """Z and A counted for the first hidden layer only, in a network with several."""
        per_sample = self.widths[0] + 2 * self.widths[1] + 2 * self.widths[-1] + 1
        return len(self.hidden) >= 2 and self.is_(self.batch * per_sample)


UNITS = {"MB": 1e6, "MiB": 2**20, "GB": 1e9, "GiB": 2**30}  # none a batch size (< 5,000)
ACTIVATION_MISTAKES = (
    Mistake("not a number", lambda e: not is_number(e.got),
            lambda e: f"you returned {e.got!r}: a number of bytes was expected",
            "return the number of bytes from the function, a whole number."),
    Mistake("a larger unit (MB, MiB, GB, GiB) instead of bytes", lambda e: e.in_unit(),
            lambda e: f"{e.summary}: that is the bytes in {e.in_unit()}",
            "return the count in bytes, not converted to a larger unit."),
    Mistake("not a whole number (`/` somewhere)", lambda e: not is_whole(e.got),
            lambda e: f"you returned {e.got!r}: bytes come in whole numbers",
            "every count here is a whole number of values times a whole number of bytes: "
            "keep to whole numbers throughout (integer arithmetic, no true division)."),
    Mistake("32-bit whole numbers (the count wrapped past 2³¹: np.int32 arithmetic)",
            lambda e: (is_whole(e.got) and e.expected >= 2**31 and int(e.got) != e.expected
                       and (int(e.got) - e.expected) % 2**32 == 0),
            lambda e: (f"{e.summary}: off by a multiple of 2³², what 32-bit whole numbers give "
                       f"when a count passes 2³¹ - 1 = 2,147,483,647 and wraps round"),
            "count with Python's whole numbers (or np.int64): a real model's activations pass "
            "2 GiB, past what an int32 holds."),
    Mistake("a float32 count (rounded to 24 significant bits)",
            lambda e: (is_whole(e.got) and int(e.got) != e.expected and e.expected > 2**24
                       and abs(int(e.got) - e.expected) <= 4 * 2.0**-24 * e.expected),
            lambda e: (f"{e.summary}: off by {abs(int(e.got) - e.expected):,}, the rounding of "
                       "a float32, whose 24 significant bits hold whole numbers exactly only "
                       "up to 2²⁴ = 16,777,216"),
            "count with Python's whole numbers (or np.int64), not in float32: above 2²⁴ "
            "float32 skips whole numbers."),
    Mistake("bits instead of bytes (times 8)", lambda e: e.is_(e.values, 8 * e.itemsize),
            lambda e: f"{e.summary}, 8 times too many: that is in bits",
            "itemsize is already bytes per value: the 8 bits of a byte do not come in."),
    Mistake("a fixed bytes per value whatever the itemsize (8, 4 or 2 typed in)",
            lambda e: e.fixed_itemsize() is not None,
            lambda e: f"{e.summary}: that counts {e.fixed_itemsize()} bytes per value, but these "
                      f"are {e.itemsize}-byte values",
            "use the itemsize you are given (4 for float32, 2 for the 16-bit formats)."),
    Mistake("one sample instead of the batch",
            lambda e: e.is_(e.values // e.batch),
            lambda e: f"{e.summary}: that is one sample's worth",
            "every sample of the batch keeps its own activations: scale by batch_size."),
    Mistake("values, not bytes", lambda e: e.is_(e.values, 1),
            lambda e: f"{e.summary}: that is a count of values, not of bytes",
            "each value takes itemsize bytes: scale the count by itemsize."),
    Mistake("the input batch left out", lambda e: e.without(e.widths[0]),
            lambda e: f"{e.summary}: the input batch is missing",
            "the first layer's input X is kept too: its dW = Xᵀ·dZ needs it."),
    Mistake("the hidden layers' outputs A left out", lambda e: e.without(sum(e.hidden)),
            lambda e: f"{e.summary}: the hidden layers' outputs A are missing",
            "each hidden output A is the next layer's input X, which its backward pass needs."),
    Mistake("the matmul outputs Z left out", lambda e: e.without(sum(e.widths[1:])),
            lambda e: f"{e.summary}: the matmul outputs Z are missing",
            "every layer keeps its Z for the activation's derivative (checkpointing is what "
            "drops them, section 7)."),
    Mistake("the loss's values left out (logits, probabilities, losses)",
            lambda e: e.without(2 * e.widths[-1] + 1),
            lambda e: f"{e.summary}: the loss's values are missing",
            "the loss keeps the logits, the probabilities and one loss per sample."),
    Mistake("the logits (or probabilities) and the losses left out",
            lambda e: e.without(e.widths[-1] + 1),
            lambda e: f"{e.summary}: the logits or the probabilities, and the per-sample "
                      "losses, are missing",
            "the loss keeps the logits, the probabilities and one loss per sample."),
    Mistake("the logits, the probabilities or the last layer's Z left out",
            lambda e: e.without(e.widths[-1]),
            lambda e: (f"{e.summary}: one of the last layer's Z, the logits and the "
                       "probabilities is missing"),
            "the last layer's Z (X @ W), the logits (Z + b) and the probabilities are three "
            "arrays, C values per sample each (C = widths[-1])."),
    Mistake("the per-sample losses left out (or one loss for the batch)",
            lambda e: e.without(1) or e.is_(e.values - e.batch + 1),
            lambda e: f"{e.summary}: the per-sample losses are missing",
            "the loss keeps one value per sample too."),
    Mistake("the logits counted twice", lambda e: e.is_(e.values + e.batch * e.widths[-1]),
            lambda e: f"{e.summary}: the logits are counted twice",
            "the last layer's Z (X @ W) and the logits (Z + b) are two arrays: count each "
            "once, then the probabilities once."),
    Mistake("the losses counted as float32 whatever the itemsize",
            lambda e: e.itemsize != 4 and e.is_(e.expected + e.batch * (4 - e.itemsize), 1),
            lambda e: (f"{e.summary}: that counts the per-sample losses as 4-byte float32 "
                       f"values, but these are {e.itemsize}-byte values"
                       + (" (or the labels were counted too: here the two give the same)"
                          if e.itemsize == 2 else "")),
            "every value kept, the per-sample losses too, takes itemsize bytes."),
    Mistake("the labels counted", lambda e: any(e.is_(e.expected + e.batch * k, 1)
                                                 for k in (e.itemsize, 8)),
            lambda e: f"{e.summary}: one value per sample too many, the labels?",
            "leave the labels out, as the exercise says: count only the values listed."),
    Mistake("one hidden layer counted instead of every layer", Bytes.one_layer,
            lambda e: f"{e.summary}: that counts Z and A of one hidden layer only",
            "count a Z for every layer and an A for every hidden layer, whatever the depth "
            "(the check draws one to four hidden layers)."),
    Mistake("another count", lambda e: int(e.got) != e.expected,
            lambda e: f"{e.summary}",
            ACTIVATION_STUB_HINT),
)
ACTIVATION_BYTES = CheckSpec(
    "activation_bytes", "activation_bytes(widths, batch_size, itemsize) -> int",
    ACTIVATION_STUB_HINT, ACTIVATION_MISTAKES,
    title="1. activation bytes", call="check_activation_bytes(activation_bytes)",
    holds="the bytes of the values the MLP keeps for its backward pass (input, every Z, every "
          "hidden A, logits, probabilities, one loss per sample; labels not counted), as "
          "`memory.mlp_activation_values` counts them, on networks of 1–4 hidden layers, "
          "random batches, itemsizes 4, 2 and 8, and one network as wide as real ones on a "
          "batch of 20,001–99,999 (over 2³¹ bytes)",
    also="an exception (named)")


@ACTIVATION_BYTES.check
def check_activation_bytes(function, seed: int | None = None) -> str:
    """Five cases, as (hidden layers, itemsize): (2, 4), (1, 2), (3, 8), (4, 4), (2, 2); batch
    sizes from 2 to 4,999; then a large network (:func:`_large_case`: more than 2³¹ bytes, and
    more than 2²⁴ values); the first case with a wrong answer is judged."""
    rng = np.random.default_rng(seed)
    cases = [(_random_widths(rng, hidden), int(rng.integers(2, 5000)), itemsize)
             for hidden, itemsize in ((2, 4), (1, 2), (3, 8), (4, 4), (2, 2))]
    cases.append(_large_case(rng))
    for widths, batch, itemsize in cases:
        got = call_learner(function, list(widths), batch, itemsize,
                           stub_hint=ACTIVATION_STUB_HINT,
                           call=f"activation_bytes({widths}, {batch}, {itemsize})")
        answer = Bytes(list(widths), batch, itemsize, got, seed)
        if not (is_whole(got) and int(got) == answer.expected):
            ACTIVATION_BYTES.reject(answer)
    return f"all {len(cases)} networks right (seed={seed})."


# --- exercise 2: gradient accumulation ---------------------------------------------------------

ACCUMULATION_STUB_HINT = (
    "cut the batch into micro_batches parts; for each part run a forward and a backward pass "
    "and add its gradients, weighted by its share of the samples, into a running total. The "
    "hints above the cell go step by step."
)
WEIGHT_HINT = (
    "each micro-batch's loss is a mean over its own samples, so its gradient must be weighted "
    "by its share of the batch (its size over the batch's size): that also works when the parts "
    "are not all the same size."
)
COUNT_NOT_SIZE_HINT = (
    "micro_batches is how many parts to cut the batch into; each part then holds about "
    "len(y) / micro_batches samples."
)


def _gradients(model: MLP, X, y) -> dict[str, np.ndarray]:
    model.loss(X, y)
    model.backward()
    return model.gradients()


def _close(got: dict, want: dict, scale: float) -> bool:
    return all(np.allclose(got[name], want[name], rtol=1e-7, atol=1e-9 * scale)
               for name in want)


class _Recorder:
    """Records every forward pass (its samples) and counts the backward passes of a model, and of
    every model made from it (``model.copy()``, ``copy.deepcopy(model)``), however their
    methods are reached (``type(model).loss(model, X, y)`` too): the model's class becomes a
    subclass of its own, of the same name, whose ``loss`` and ``backward`` record first."""

    def __init__(self, model: MLP):
        self.inputs: list[np.ndarray] = []
        self.labels: list[np.ndarray] = []
        self.backwards = 0
        model.__class__ = self._recording(type(model))

    def _recording(self, base: type) -> type:
        recorder = self

        class Recorded(base):
            def loss(self, X, y):
                recorder.inputs.append(np.array(X, copy=True))
                recorder.labels.append(np.array(y, copy=True))
                return super().loss(X, y)

            def backward(self, *args, **kwargs):
                recorder.backwards += 1
                return super().backward(*args, **kwargs)

            def copy(self, *args, **kwargs):
                twin = super().copy(*args, **kwargs)
                twin.__class__ = type(self)
                return twin

            def __reduce_ex__(self, protocol):
                # pickled as the model's own class (this one is made here: pickle cannot name
                # it), and made a recording one again when loaded in this process
                return _recording_again, (key, base, dict(vars(self)))

        Recorded.__name__, Recorded.__qualname__ = base.__name__, base.__qualname__
        key = id(Recorded)
        _RECORDING_CLASSES[key] = Recorded
        return Recorded


# The recording classes made so far (each lives as long as a model of it): a pickled model is
# loaded as one again.
_RECORDING_CLASSES: weakref.WeakValueDictionary[int, type] = weakref.WeakValueDictionary()


@machinery
def _recording_again(key: int, base: type, state: dict):
    """A pickled (or copied) recording model, loaded: an object of the model's ``base`` class
    with its ``state``, made a recording one again while its recorder lives."""
    model = object.__new__(base)
    model.__dict__.update(state)
    recording = _RECORDING_CLASSES.get(key)
    if recording is not None and issubclass(recording, base):
        model.__class__ = recording
    return model


@dataclass
class Accumulation:
    """One batch of the accumulation check: what the learner's function returned (``got``),
    the whole batch's gradients (``want``), and what the recorder saw."""

    widths: list[int]
    X: np.ndarray
    y: np.ndarray
    k: int
    seed: int
    reference: MLP
    recorder: _Recorder
    got: object
    want: dict
    changed: bool = False

    def __post_init__(self):
        self.n = len(self.y)
        self.where = (f"widths {self.widths}, {self.n} samples, {self.k} micro-batches, "
                      f"seed={self.seed}")
        self.size = -(-self.n // self.k)  # the largest part of a right split
        self.sizes = [int(x.shape[0]) if x.ndim else 1 for x in self.recorder.inputs]
        self.passes = len(self.sizes)
        self.parts = ", ".join(map(str, self.sizes))
        self.samples_seen = sum(self.sizes)
        self.keys_right = isinstance(self.got, dict) and set(self.got) == set(self.want)
        self.scale = max(float(np.max(np.abs(g))) for g in self.want.values())

    @property
    def shapes_wrong(self) -> list[str]:
        return [name for name in self.want if np.shape(self.got[name]) != self.want[name].shape]

    @property
    def parts_of_k(self) -> bool:
        """Parts of about k samples each (the last may be smaller), though the split is not
        right (at most k passes, none larger than a right micro-batch): k used as the size of
        a part (or n / k as the number of parts)."""
        split_right = 0 < self.passes <= self.k and max(self.sizes) <= self.size
        return (not split_right and self.passes != self.k and self.passes > 1
                and all(self.k - 1 <= s <= self.k + 1 for s in self.sizes[:-1])
                and self.sizes[-1] <= self.k + 1)

    @property
    def cast_to(self) -> str | None:
        """The dtype the learner's micro-batches had instead of the batch's, if any."""
        return next((str(x.dtype) for x in self.recorder.inputs
                     if getattr(x, "dtype", self.X.dtype) != self.X.dtype), None)

    @staticmethod
    def _rows(arrays) -> list[bytes]:
        return sorted(np.ascontiguousarray(row).tobytes() for a in arrays for row in a)

    @property
    def each_sample_once(self) -> bool:
        return self._rows(self.recorder.inputs) == self._rows([self.X])

    @property
    def rounded_through(self) -> str | None:
        """The narrower type (float32, float16) the samples went through and came back from,
        each sample once, when that is what the model got instead of X's own values."""
        if self.each_sample_once:
            return None
        got = self._rows(self.recorder.inputs)
        return next((name for name in ("float32", "float16") if np.dtype(name) != self.X.dtype
                     and got == self._rows([self.X.astype(name).astype(self.X.dtype)])), None)

    @property
    def labels_moved(self) -> int:
        """How many samples a forward pass got with another sample's label (0 if none)."""
        row = {np.ascontiguousarray(x).tobytes(): k for k, x in enumerate(self.X)}
        return sum(int((self.y[[row[np.ascontiguousarray(x).tobytes()] for x in X]] != y).sum())
                   for X, y in zip(self.recorder.inputs, self.recorder.labels, strict=True))

    @property
    def same_samples(self) -> bool:
        inputs = self.recorder.inputs
        return len(inputs) > 1 and all(
            x.shape == inputs[0].shape and np.array_equal(x, inputs[0]) for x in inputs[1:])

    @functools.cached_property
    def part_gradients(self) -> list[dict]:
        """The gradients of each forward pass the learner ran, from the same weights."""
        return [_gradients(self.reference.copy(), x, y)
                for x, y in zip(self.recorder.inputs, self.recorder.labels, strict=True)]

    def weighted(self, weights) -> bool:
        """Are the learner's gradients, though wrong, the parts' gradients with these
        weights?"""
        if not self.keys_right or self.right:
            return False
        parts = self.part_gradients
        combined = {name: sum(w * p[name] for w, p in zip(weights, parts, strict=True))
                    for name in parts[0]}
        return _close(self.floats, combined, self.scale)

    @property
    def right(self) -> bool:
        return _close(self.floats, self.want, self.scale)

    @property
    def scaled(self) -> float | None:
        """c (not 1) when the learner's gradients are c times the whole batch's."""
        want = np.concatenate([w.ravel() for w in self.want.values()])
        got = np.concatenate([self.floats[name].ravel() for name in self.want])
        c = float(got @ want / (want @ want))
        return c if abs(c - 1) > 1e-6 and np.allclose(got, c * want, rtol=1e-7, atol=1e-9 * abs(
            c) * self.scale) else None

    @property
    def rounded(self) -> str | None:
        """The dtype (float32, float16) of the learner's gradients, if right to its rounding."""
        dtypes = {np.asarray(value).dtype for value in self.got.values()}
        low = next((d for d in dtypes if d.kind == "f" and d.itemsize < 8), None)
        return str(low) if low and _close(self.floats, self.want, self.scale * 1e4) else None

    @property
    def floats(self) -> dict:
        return {name: np.asarray(value, dtype=np.float64) for name, value in self.got.items()}


ACCUMULATION_MISTAKES = (
    Mistake("not a dict of the model's gradients", lambda e: not e.keys_right,
            lambda e: (f"expected a dict with the keys {sorted(e.want)} (as model.gradients() "
                       "returns), got " + (f"the keys {sorted(e.got)[:4]}" if isinstance(
                           e.got, dict) else f"a {type(e.got).__name__}")),
            "return one total per gradient name, in a dict like model.gradients()."),
    Mistake("a gradient of the wrong shape", lambda e: bool(e.shapes_wrong),
            lambda e: (f"{e.shapes_wrong[0]} has shape {np.shape(e.got[e.shapes_wrong[0]])}, "
                       f"expected {e.want[e.shapes_wrong[0]].shape}"),
            "each total has the shape of the gradient it sums: add arrays, don't stack them."),
    Mistake("the model updated", lambda e: e.changed, "the model's parameters changed",
            "only compute the gradients: no optimiser step, no update of the weights."),
    Mistake("no forward pass", lambda e: e.passes == 0, "the model never ran a forward pass",
            "run the model's loss on each part, then its backward pass."),
    Mistake("the samples cast to another dtype", lambda e: e.cast_to is not None,
            lambda e: (f"your micro-batches reached the model as {e.cast_to}, but the batch is "
                       f"{e.X.dtype}: a cast changes the values, and so the gradients"),
            "pass the model slices of X itself (X[part], y[part]), as they are."),
    Mistake("the samples rounded through a narrower type and back (each sample once)",
            lambda e: e.rounded_through is not None,
            lambda e: (f"every sample reached the model once, but rounded to {e.rounded_through} "
                       f"and back to {e.X.dtype}: the values changed, and so the gradients"),
            "pass the model slices of X itself (X[part], y[part]), as they are."),
    Mistake("the micro-batch count used as the micro-batch size (or the other way round)",
            lambda e: e.parts_of_k,
            lambda e: (f"you ran {e.passes} forward passes of about {e.k} samples ({e.parts}), "
                       f"but micro_batches = {e.k} asks for {e.k} parts of about {e.size} "
                       "samples: the count was used as the size of a part"),
            COUNT_NOT_SIZE_HINT),
    Mistake("the whole batch in one forward pass", lambda e: max(e.sizes) >= e.n,
            lambda e: f"a forward pass took all {e.n} samples at once",
            "the point is never to run the whole batch at once (its activations are what does "
            "not fit): run one part at a time and combine the gradients."),
    Mistake("the leftover samples all in one part, larger than a micro-batch",
            lambda e: e.passes == e.k and e.each_sample_once and max(e.sizes) > e.size,
            lambda e: (f"your {e.k} parts ({e.parts}) hold every sample once, but the leftover "
                       f"samples all went to one part of {max(e.sizes)}, more than a micro-batch "
                       f"of {e.size}"),
            "spread the leftover samples over the parts, one to each, so that no part holds "
            "more than len(y) / micro_batches rounded up: the largest part's activations are "
            "what must fit."),
    Mistake("parts larger than a micro-batch", lambda e: max(e.sizes) > e.size,
            lambda e: (f"a forward pass took {max(e.sizes)} samples at once, more than a "
                       f"micro-batch of {e.size} (parts: {e.parts})"), COUNT_NOT_SIZE_HINT),
    Mistake("the same samples for every micro-batch", lambda e: e.same_samples,
            lambda e: f"every micro-batch used the same {e.sizes[0]} samples",
            "each part is a different slice of the batch; together they hold every sample once."),
    Mistake("samples left out (the remainder dropped)", lambda e: e.samples_seen < e.n,
            lambda e: (f"the forward passes saw {e.samples_seen} of the {e.n} samples "
                       f"(parts: {e.parts}): {e.n - e.samples_seen} were never used"),
            "when the batch is not a multiple of micro_batches, the leftover samples still "
            "belong to a part: the parts may differ in size."),
    Mistake("more forward passes than micro-batches", lambda e: e.passes > e.k,
            lambda e: f"{e.passes} forward passes for {e.k} micro-batches (parts: {e.parts})",
            "one forward pass per part, micro_batches parts in all."),
    Mistake("some samples used twice, others never", lambda e: not e.each_sample_once,
            lambda e: (f"the parts ({e.parts}) hold {e.samples_seen} samples, but not each of "
                       "the batch's once"),
            "cut the batch into parts that do not overlap: each sample in exactly one part."),
    Mistake("labels that do not go with their samples (X and y cut differently)",
            lambda e: e.labels_moved > 0,
            lambda e: (f"{e.labels_moved} of the {e.n} samples went into a forward pass with "
                       "another sample's label"),
            "cut X and y with the same indices: each part's labels are its samples' own."),
    Mistake("backward run once, not after each forward pass",
            lambda e: e.recorder.backwards < e.passes,
            lambda e: (f"{e.passes} forward passes but {e.recorder.backwards} backward "
                       "pass(es)"),
            "each micro-batch needs its own backward pass, right after its forward pass: the "
            "model keeps only the last forward pass's activations."),
    Mistake("the gradients summed without weights",
            lambda e: e.weighted([1.0] * e.passes),
            "your gradients are the micro-batches' gradients added up, about "
            "micro_batches times too large: each of them is already a mean", WEIGHT_HINT),
    Mistake("every weight 0 (a share rounded down by `//`)",
            lambda e: e.weighted([0.0] * e.passes),
            "your gradients are all zero: every micro-batch's weight was 0 (its share of the "
            "batch rounded down to a whole number?)", WEIGHT_HINT),
    Mistake("the total rounded to a 16- or 32-bit float",
            lambda e: e.rounded is not None,
            lambda e: (f"your gradients are {e.rounded}, right only to its rounding: the model's "
                       "are float64"),
            "keep the gradients' own dtype: add them as they come, without converting them."),
    Mistake("equal weights 1/k for parts of different sizes",
            lambda e: e.weighted([1.0 / e.passes] * e.passes),
            lambda e: (f"every micro-batch got the same weight 1/{e.passes}, but these parts "
                       f"differ in size ({e.parts} samples)"), WEIGHT_HINT),
    Mistake("each part weighted by 1 / its size",
            lambda e: e.weighted([1.0 / s for s in e.sizes]),
            "each micro-batch's gradient was divided by its own size: it is already a mean "
            "over its samples", WEIGHT_HINT),
    Mistake("only the last micro-batch kept (the total overwritten)",
            lambda e: any(e.weighted([0.0] * (e.passes - 1) + [w])
                          for w in (1.0, e.sizes[-1] / e.n)),
            "only the last micro-batch's gradient is left",
            "the total must grow with every part: add each one in, don't replace it."),
    Mistake("only the first micro-batch",
            lambda e: any(e.weighted([w] + [0.0] * (e.passes - 1))
                          for w in (1.0, e.sizes[0] / e.n)),
            "only the first micro-batch's gradient is there",
            "loop over every part and add each one's gradients into the total."),
    Mistake("weights in proportion to the parts' sizes, but not adding up to 1",
            lambda e: e.scaled is not None,
            lambda e: (f"your gradients are the whole batch's times {e.scaled:.4g}: each part "
                       "was weighted in proportion to its size, but the weights do not add up "
                       "to 1"), WEIGHT_HINT),
    Mistake("each part's share rounded to float32",
            lambda e: e.weighted([float(np.float32(size / e.n)) for size in e.sizes]),
            lambda e: ("your gradients are the parts' gradients weighted by their shares of the "
                       "batch rounded to float32 (np.float32(len(part) / len(y))): the float64 "
                       "gradients are then off by float32's rounding, about 1 part in 10⁷"),
            "keep each share a Python float (float64): `len(part) / len(y)`, not np.float32 of "
            "it."),
    Mistake("another combination", lambda e: not e.right,
            "your gradients differ from the whole batch's", WEIGHT_HINT),
)
ACCUMULATED_GRADIENTS = CheckSpec(
    "accumulated_gradients", "accumulated_gradients(model, X, y, micro_batches) -> dict",
    ACCUMULATION_STUB_HINT, ACCUMULATION_MISTAKES,
    title="2. gradient accumulation",
    call="check_accumulated_gradients(accumulated_gradients)",
    holds="the whole batch's gradients (a dict like `model.gradients()`) from at most "
          "`micro_batches` forward and backward passes, each on at most n / micro_batches "
          "samples (rounded up), every sample once, the model not updated; batches not a "
          "multiple of the count, and drawn so that the count and the size of a part differ by "
          "at least 2",
    also="an exception (named)")

# (micro_batches, the range of samples per part): n / k differs from k by at least 2, both ways.
ACCUMULATION_CASES = ((3, (5, 8)), (5, (2, 2)), (2, (4, 7)))


@ACCUMULATED_GRADIENTS.check
def check_accumulated_gradients(function, seed: int | None = None) -> str:
    """Three random float64 networks and batches (:data:`ACCUMULATION_CASES`). The model's
    ``loss`` and ``backward`` are wrapped to record every forward pass (its samples) and count
    the backward passes, so the micro-batch count used as the micro-batch size (or the other
    way round) is named even when the weights make the sum right."""
    rng = np.random.default_rng(seed)
    cases = []
    for k, (low, high) in ACCUMULATION_CASES:
        widths = [int(rng.integers(4, 20)), int(rng.integers(3, 16)),
                  int(rng.integers(2, 7))]
        # not k * m; with 5 parts, 2 to 4 left over, so that the remainder merged into one
        # part is not the sizes of an even split (a remainder of 1 is)
        n = k * int(rng.integers(low, high + 1)) + int(rng.integers(2 if k > 3 else 1, k))
        cases.append((widths, n, k))
    for widths, n, k in cases:
        X = rng.normal(0.0, 1.0, (n, widths[0]))
        y = rng.integers(0, widths[-1], n)
        reference = MLP(widths, dtype=np.float64, seed=seed)
        model = reference.copy()
        recorder = _Recorder(model)
        before = model.state()
        got = call_learner(function, model, X.copy(), y.copy(), k,
                           stub_hint=ACCUMULATION_STUB_HINT,
                           call=f"accumulated_gradients(model, X, y, {k})")
        after = model.state()
        changed = any(not np.array_equal(before[p], after[p]) for p in before)
        want = _gradients(reference.copy(), X, y)
        ACCUMULATED_GRADIENTS.reject(Accumulation(widths, X, y, k, seed, reference,
                                                  recorder, got, want, changed))
    return (f"all {len(cases)} batches give the whole batch's gradients, one micro-batch "
            f"at a time (seed={seed}).")


# --- exercise 3: the accumulation kernel -------------------------------------------------------

SUM_STUB_HINT = (
    "one thread per element, as in chapter 01: this thread's index, the guard, and one update "
    "that adds the weighted micro-batch gradient into the running sum, in place. The hints "
    "above the cell go step by step."
)
IN_PLACE_HINT = (
    "grad_sum holds what the earlier micro-batches added: the update must keep it and add to "
    "it (section 6's sum grows with every micro-batch)."
)
WEIGHT_ON_MICRO_HINT = (
    "the weight is the micro-batch's share of the batch: it scales only this micro-batch's "
    "gradient, never the running sum (the earlier parts were weighted when they were added)."
)
ONCE_HINT = (
    "one thread per element, each element updated once per launch: with one thread per "
    "element no loop is needed; a grid-stride loop must step by the whole grid."
)
# The sizes the kernel is checked on, per tier (3 or 4 launches each, under two block sizes).
SUM_SIZE_RANGE = {"sim": (150, 450), "gpu": (2_000, 20_000)}
# The small launch the method is traced on (every access is recorded).
SUM_TRACE_THREADS, SUM_TRACE_SIZES = 32, (65, 95)


@dataclass
class Sums:
    """The running sum after launch ``call`` (1-based) of ``calls`` of the accumulation
    kernel: ``got``, the right sum before it (``before``), the micro-batches' gradients and
    weights (``g`` and ``w``: this launch's, number ``call``), whether the launch changed
    grad_micro, and grad_sum after every launch (``history``)."""

    trial: Trial
    call: int
    calls: int
    got: np.ndarray
    before: np.ndarray
    grads: np.ndarray  # (micro-batches, n)
    weights: np.ndarray  # float32, one per micro-batch
    micro_changed: bool = False
    micro_writes: list[str] = field(default_factory=list)  # source lines that write grad_micro
    history: list = field(default_factory=list)

    def __post_init__(self):
        self.g, self.w = self.grads[self.call - 1], self.weights[self.call - 1]
        self.eps = float(np.finfo(self.trial.dtype).eps)
        self.expected = (self.before + self.w * self.g).astype(self.trial.dtype)
        self.tolerance = 4 * self.eps * (np.abs(self.before) + np.abs(self.w * self.g)) + 1e-30
        self.bad = np.abs(self.got - self.expected) > self.tolerance
        self.unchanged = (self.got == self.before) & self.bad
        self.missing = np.flatnonzero(self.unchanged)

    def follows(self, update) -> bool:
        """Do the sums after every launch follow ``sum = update(sum, grad, weight)`` from
        zeros (a wrong formula, told apart over the launches in a row)?"""
        state = np.zeros(self.trial.n, np.float64)
        for got, grad, weight in zip(self.history, self.grads, self.weights, strict=False):
            state = update(state, grad.astype(np.float64), float(weight))
            scale = np.abs(state) + np.abs(grad) + 1e-6
            if not (np.abs(got - state) <= 1e-5 * scale).all():
                return False
        return True

    @property
    def said(self) -> str:
        first = int(np.flatnonzero(self.bad)[0])
        return (f"after launch {self.call} of {self.calls}, {int(self.bad.sum())} of "
                f"{self.trial.n} elements of grad_sum are wrong; the first is grad_sum[{first}]: "
                f"expected {self.expected[first]:.6g}, got {self.got[first]:.6g}")

    @property
    def times_added(self) -> np.ndarray:
        """How many times each element got this micro-batch's weighted gradient."""
        step = (self.w * self.g).astype(np.float64)
        with np.errstate(all="ignore"):
            return np.where(np.abs(step) > 1e-6, (self.got - self.before) / step, 1.0)

    def added_twice(self) -> bool:
        times = self.times_added
        whole = np.abs(times - np.round(times)) < 1e-3
        return bool(whole.all() and (np.round(times) >= 2).any())

    def missing_from(self, start: int) -> bool:
        index = np.arange(self.trial.n)
        return self.unchanged.any() and np.array_equal(self.missing, index[index >= start])

    def shifted(self) -> bool:
        """Every element but the first (or last) got its neighbour's gradient."""
        for shift in (1, -1):
            moved = (self.before + self.w * np.roll(self.g, shift)).astype(self.trial.dtype)
            close = np.abs(self.got - moved) <= np.maximum(self.tolerance,
                                                           8 * self.eps * np.abs(moved))
            if close[1:].all() if shift == 1 else close[:-1].all():
                return True
        return False


def _added_again(e: Sums) -> str:
    """How many elements got the micro-batch's gradient more than once in the launch, and the
    most times any one got it."""
    times = np.round(e.times_added)
    again, most = int((times >= 2).sum()), int(times.max())
    if most == 2:
        return (f"{again} element{'s' if again != 1 else ''} got this micro-batch's gradient "
                "twice in one launch")
    return (f"{again} element{'s' if again != 1 else ''} got this micro-batch's gradient 2 or "
            f"more times in one launch (up to {most} times)")


SUM_MISTAKES = (
    Mistake("grad_micro written (the arguments the wrong way round)",
            lambda e: e.micro_changed or e.micro_writes,
            lambda e: ((f"launch {e.call} changed grad_micro" if e.micro_changed else
                        f"`{e.micro_writes[0]}` writes grad_micro")
                       + ", the micro-batch's gradient: the kernel must only read it"),
            "the sum is the first argument, grad_sum: the one array the kernel updates."),
    Mistake("nothing added", lambda e: e.unchanged.all(),
            lambda e: (f"after launch {e.call} of {e.calls}, grad_sum is as it was before: "
                       "nothing was added"),
            "each thread inside the array adds its element's weighted gradient into grad_sum: "
            "check that the update is reached and that it writes grad_sum."),
    Mistake("the running sum overwritten (`=` instead of adding)",
            lambda e: e.call > 1 and e.follows(lambda s, g, w: w * g),
            lambda e: (f"{e.said}: grad_sum holds only micro-batch {e.call}'s weighted "
                       "gradient, what the earlier launches added is gone"), IN_PLACE_HINT),
    Mistake("the weight left out", lambda e: e.follows(lambda s, g, w: s + g),
            lambda e: (f"{e.said}: that is grad_micro added without its weight "
                       f"({float(e.w):.4g} here)"),
            "each micro-batch's gradient is a mean over its own samples: it counts for its "
            "share of the batch, the weight the kernel is given."),
    Mistake("divided by the weight", lambda e: e.follows(lambda s, g, w: s + g / w),
            lambda e: f"{e.said}: that is grad_micro divided by the weight",
            "the weight is a share (below 1): it scales the gradient down."),
    Mistake("the weight on the running sum too (`weight * (sum + micro)`)",
            lambda e: e.follows(lambda s, g, w: w * (s + g)),
            lambda e: f"{e.said}: the weight multiplied the running sum too",
            WEIGHT_ON_MICRO_HINT),
    Mistake("the weight on the running sum instead (`weight * sum + micro`)",
            lambda e: e.follows(lambda s, g, w: w * s + g),
            lambda e: (f"{e.said}: the weight multiplied the running sum instead of the "
                       "micro-batch's gradient"), WEIGHT_ON_MICRO_HINT),
    Mistake("the weighted gradient subtracted (`-=`, as in an update step)",
            lambda e: e.follows(lambda s, g, w: s - w * g),
            lambda e: f"{e.said}: the weighted gradient was subtracted from the sum",
            "the sum collects the gradients: each micro-batch's weighted gradient is added to it "
            "(the optimiser's step, which subtracts, comes once the sum is complete)."),
    Mistake("`threadIdx.x` alone as the index (only the first block's elements)",
            lambda e: e.missing_from(e.trial.threads_per_block) and e.trial.blocks > 1,
            lambda e: (f"{e.said}: only the first block's elements "
                       f"(grad_sum[0..{e.trial.threads_per_block - 1}]) were updated"),
            GLOBAL_INDEX_HINT),
    Mistake("blocks that overlap: some elements added twice, others never (a wrong offset)",
            lambda e: e.added_twice() and e.unchanged.any(),
            lambda e: (f"{e.said}: {_added_again(e)}, and {e.missing.size} never: the blocks' "
                       "elements overlap"), GLOBAL_INDEX_HINT),
    Mistake("some elements added twice or more in one launch", lambda e: e.added_twice(),
            lambda e: f"{e.said}: {_added_again(e)}", ONCE_HINT),
    Mistake("the last, partial block skipped",
            lambda e: e.missing_from((e.trial.blocks - 1) * e.trial.threads_per_block),
            lambda e: f"{e.said}: the last, partial block updated nothing",
            "the guard must stop only the threads past the end of the arrays: the last "
            "block still has real elements."),
    Mistake("the last element skipped (guard one too strict)",
            lambda e: e.unchanged.any() and e.missing[-1] == e.trial.n - 1
            and e.missing.size <= 2 and not (e.bad & ~e.unchanged).any(),
            lambda e: f"{e.said}: the last element(s) were never updated",
            "the guard must let every index below the length through, the last one too."),
    Mistake("the first element skipped (an index one too high)",
            lambda e: e.unchanged.any() and e.missing[0] == 0 and e.missing.size <= 2
            and not (e.bad & ~e.unchanged).any(),
            lambda e: f"{e.said}: the first element(s) were never updated",
            "thread 0 of block 0 takes element 0: the global index starts there, with nothing "
            "added to it."),
    Mistake("one position off", lambda e: e.shifted(),
            lambda e: f"{e.said}: every element got its neighbour's gradient",
            "grad_sum[i] takes element i of grad_micro: check the index for a stray +1 or -1."),
    Mistake("elements never updated", lambda e: e.unchanged.any(),
            lambda e: f"{e.said}: {e.missing.size} elements were never updated",
            GLOBAL_INDEX_HINT),
    Mistake("another formula", lambda e: e.bad.any(), lambda e: e.said,
            "compare your update with the exercise's: the running sum plus the weighted "
            "micro-batch gradient."),
)


@dataclass
class SumTrace(TracedWrites):
    """The kernel traced on a small launch: which threads wrote each element of grad_sum, and
    the most elements any one thread read."""

    reads: dict

    @property
    def busiest(self) -> tuple:
        return max(self.reads.items(), key=lambda item: item[1], default=((0, 0), 0))


SUM_METHOD_MISTAKES = (
    Mistake("elements written by several threads (a loop stepping by less than the grid)",
            lambda e: bool(e.shared),
            lambda e: (f"grad_sum is right, but {len(e.shared)} of {e.trial.n} elements were "
                       f"written by more than one thread, e.g. {e.example('grad_sum')}"),
            ONCE_HINT,
            recognised_from="trace"),
    Mistake("one thread doing the work of many (a loop over the array in one thread)",
            lambda e: e.busiest[1] > 4,
            lambda e: (f"grad_sum is right, but {thread_label(e.busiest[0])} read "
                       f"{e.busiest[1]} values from global memory: one thread worked through "
                       "the array while the others waited"), ONCE_HINT,
            recognised_from="trace"),
)
SUM_SHARE_MISTAKES = (one_element_each(ONCE_HINT),)
ACCUMULATE = CheckSpec(
    "accumulate", "accumulate(grad_sum, grad_micro, weight)", SUM_STUB_HINT,
    SUM_MISTAKES + SUM_METHOD_MISTAKES + SUM_SHARE_MISTAKES, parameters=3,
    title="3. the accumulation kernel", call="check_accumulate(my_accumulate)",
    holds="`grad_sum[i] += weight * grad_micro[i]`, in place on the same device buffer over 3 "
          "or 4 launches in a row (the micro-batches of one batch, unequal weights), grad_micro "
          "left as it is, under two block sizes; traced: each element written by one thread, "
          "no thread reading more than 4 values or writing more than one element",
    also="the shared one-thread-per-element rules: missing guard (an index error, or writes "
         "into padding on a GPU); a hard-coded block or problem size; simulator-only code; a "
         "kernel that never finishes")


def _run_sums(kernel, trial: Trial, source: KernelSource) -> Trial:
    """Launch the kernel once per micro-batch of a random batch, on one device buffer, then
    reject the first launch that left a wrong sum (or changed grad_micro), with every
    launch's sum as evidence."""
    k = int(trial.rng.integers(3, 5))  # micro-batches of a batch, not all of the same size
    batch = k * int(trial.rng.integers(8, 60)) + int(trial.rng.integers(1, k))
    sizes = [len(p) for p in np.array_split(np.arange(batch), k)]
    weights = np.array([s / batch for s in sizes], dtype=trial.dtype)
    grads = np.stack([trial.normal() for _ in sizes])
    d_all, d_sum = padded(np.zeros(trial.n, trial.dtype), trial.padding, np.nan)
    history, changed = [], []
    for grad, weight in zip(grads, weights, strict=True):
        d_micro_all, d_micro = padded(grad, trial.padding, PAD_VALUE)  # seen only unguarded
        launch(kernel, trial, d_sum, d_micro, weight)
        history.append(read_back(d_all, (trial.n,), trial, what="grad_sum"))
        changed.append(not np.array_equal(d_micro_all.copy_to_host()[:trial.n], grad))
    names = source.parameters
    micro_writes = plain_writes_to(source, names[1]) if len(names) > 1 else []
    total = np.zeros(trial.n, trial.dtype)
    for call, got in enumerate(history, start=1):
        evidence = Sums(trial, call, len(sizes), got, total, grads, weights,
                        changed[call - 1], micro_writes, history)
        if evidence.micro_changed or evidence.micro_writes or evidence.bad.any():
            reject(SUM_MISTAKES, evidence)
        total = got
    return trial


@ACCUMULATE.check
def check_accumulate(kernel, seed: int | None = None, threads_per_block: int | None = None) -> str:
    """The launches start from zeros, the weights are each micro-batch's size over the
    batch's, the float32 arrays have :data:`SUM_SIZE_RANGE` elements (never a multiple of the
    block) and are padded; the block size is drawn (unless given), and it all runs again under
    another one. grad_sum is read back after every launch and the first wrong launch is
    judged. Then the kernel is traced on a small launch (:data:`SUM_TRACE_THREADS` threads per
    block, :data:`SUM_TRACE_SIZES` elements)."""
    source = ACCUMULATE.start(kernel)
    trial = Trial.draw("check_accumulate", seed, np.float32, block=threads_per_block,
                       size_range=SUM_SIZE_RANGE[device.tier()])
    trial = under_two_blocks(lambda t: _run_sums(kernel, t, source), trial, source,
                             once=bool(threads_per_block))
    small = Trial.draw("check_accumulate", seed, np.float32, block=SUM_TRACE_THREADS,
                       size_range=SUM_TRACE_SIZES)
    grad_sum, grad_micro = small.normal(), small.normal()
    offer_trace(kernel, 2, 8, "grad_sum", "grad_micro", "weight",
                note="with grad_sum and grad_micro of 13 elements and weight = np.float32(0.25)")
    trace = traced(kernel, small, grad_sum, grad_micro, np.float32(0.25))
    name = trace.global_arrays[0] if trace.global_arrays else "grad_sum"
    writers = trace.touched(name, "write")
    for index, who in trace.touched(name, "atomic").items():  # an atomic add is a write too
        writers.setdefault(index, []).extend(t for t in who if t not in writers[index])
    reads = {t: row["global_reads"] for t, row in trace.per_thread().items()}
    reject(SUM_METHOD_MISTAKES, SumTrace(small, writers, reads))
    written: dict = {}  # thread -> the elements it wrote
    for index, who in sorted(writers.items()):
        for thread in who:
            written.setdefault(thread, []).append(index)
    reject(SUM_SHARE_MISTAKES, OutputWrites(small, written))
    return (f"grad_sum right after every launch ({trial.n} elements, {trial.launched}, "
            f"seed={trial.seed}), in place, each element written by one thread.")


def try_accumulate(kernel) -> None:
    """Run your kernel on a tiny example, three micro-batches of 5, 5 and 4 samples (weights
    5/14, 5/14, 4/14), 10 elements, one block of 8 threads and a second one, and print the sum
    after each launch next to NumPy's. An error becomes one short paragraph."""
    from numba import cuda

    grads = np.arange(30, dtype=np.float32).reshape(3, 10) / 10
    weights = np.array([5 / 14, 5 / 14, 4 / 14], dtype=np.float32)
    trial = Trial.draw("try_accumulate", 0, np.float32, block=8, shape=(10,))
    d_sum = cuda.to_device(np.zeros(10, np.float32))
    want = np.zeros(10, np.float32)
    for call, (grad, weight) in enumerate(zip(grads, weights, strict=True), start=1):
        if not try_launch(kernel, trial, d_sum, cuda.to_device(grad), weight,
                          label=f"launch {call}"):
            return
        want = (want + weight * grad).astype(np.float32)
        print(f"after launch {call} (weight {float(weight):.3f}): yours "
              f"{np.array2string(d_sum.copy_to_host(), precision=3)}")
        print(f"{'':28s}NumPy {np.array2string(want, precision=3)}")


# --- the chapter's micro-batches, accumulated by your kernel -----------------------------------

@dataclass
class DeviceAccumulation:
    """A batch's gradients accumulated on the device (:func:`accumulate_on_device`)."""

    whose: str
    widths: list[int]
    batch_size: int
    micro_batches: int
    largest_difference: float
    largest_gradient: float
    buffers: int
    buffer_bytes: int
    launches: int
    note: str = ""

    @property
    def matches(self) -> bool:
        return self.largest_difference <= 1e-5 * self.largest_gradient

    def report(self) -> str:
        lines = [self.note] if self.note else []
        lines += [
            f"{self.batch_size} samples as {self.micro_batches} micro-batches, widths "
            f"{'-'.join(map(str, self.widths))}: accumulated by {self.whose} in "
            f"{self.launches} launches",
            f"{self.buffers} sum buffers ({memory.format_bytes(self.buffer_bytes)}), allocated "
            f"once and updated in place; keeping every micro-batch's gradients instead would "
            f"hold {memory.format_bytes(self.micro_batches * self.buffer_bytes)}",
            f"largest difference from the whole batch's gradients: "
            f"{self.largest_difference:.1e} (the largest gradient is "
            f"{self.largest_gradient:.2f}; computed here, float32 rounding)"]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


def accumulate_on_device(kernel=None, widths=(64, 16, 10), batch_size: int = 128,
                         micro_batches: int = 4, seed: int = 0, show: bool = True
                         ) -> DeviceAccumulation:
    """One batch of the digits' shape run as ``micro_batches`` micro-batches, its gradients
    summed on the device by ``kernel`` (yours, once it has passed :func:`check_accumulate`
    in this session; otherwise gpulab's ``accumulate``, and the report says why), next to the
    whole batch's gradients from the same weights. The model runs on the NumPy backend in the
    simulator (each micro-batch's gradients copied to the device), on gpulab's kernels on a
    GPU (already there)."""
    from gpulab.kernels import accumulate as kernels

    kernel, whose, note = ACCUMULATE.yours_or_gpulabs(kernel, "accumulate", "ran")
    widths = [int(w) for w in widths]
    rng = np.random.default_rng(seed)
    X = rng.normal(0.0, 1.0, (batch_size, widths[0])).astype(np.float32)
    y = rng.integers(0, widths[-1], batch_size)
    backend = "kernels" if device.tier() == "gpu" else "numpy"
    model = MLP(widths, "relu", backend, seed=seed)
    sums = kernels.accumulate_gradients(model, X, y, micro_batches, kernel)
    whole = MLP(widths, "relu", "numpy", seed=seed)
    want = _gradients(whole, X, y)
    got = {name: d.copy_to_host() for name, d in sums.items()}
    parts = len(kernels.micro_batch_parts(batch_size, micro_batches))
    run = DeviceAccumulation(
        whose, widths, batch_size, parts,
        max(float(np.max(np.abs(got[name] - want[name]))) for name in want),
        max(float(np.max(np.abs(g))) for g in want.values()), len(sums),
        sum(int(d.size) * d.dtype.itemsize for d in sums.values()), len(sums) * parts, note)
    if show:
        print(run.report())
    return run


__all__ = [
    "ACCUMULATE", "ACCUMULATED_GRADIENTS", "ACCUMULATION_MISTAKES", "ACTIVATION_BYTES",
    "ACTIVATION_MISTAKES", "SUM_METHOD_MISTAKES", "SUM_MISTAKES", "DeviceAccumulation",
    "accumulate_on_device", "check_accumulate", "check_accumulated_gradients",
    "check_activation_bytes", "try_accumulate",
]
