"""Chapter 07's exercises: the training loop's own kernels, and its mini-batches; then your
kernels train the network.

- :func:`check_minibatches`: exercise 1, ``minibatches(n_samples, batch_size, rng)``.
- :func:`check_loss_gradient`: exercise 2, the kernel ``(probs, labels, scale, dlogits)``, the
  gradient of the mean softmax cross-entropy loss with respect to the logits.
- :func:`check_adam`: exercise 3, the kernel ``(param, grad, m, v, lr, beta1, beta2, eps,
  correction1, correction2, weight_decay)``, one Adam step per element.
- :func:`train_with_your_kernels` trains the digits network with your kernels in place of
  gpulab's (:class:`gpulab.nn.backends.KernelBackend` ``kernels=``): its first steps next to
  gpulab's own kernels, compared step for step, then long enough for the loss to fall and the
  held-out accuracy to rise; :func:`check_training` (exercise 4) judges that run.

Sizes and values are random; a failure names the seed to repeat it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from gpulab import reference
from gpulab.exercises.grid_stride import one_per_thread
from gpulab.exercises.mistakes import Mistake, diagnose, reject
from gpulab.exercises.outputs import (
    SWAPPED_ROWS_AND_COLUMNS,
    Coverage,
    blame_hard_coded_block,
    looks_like,
    reject_matrix,
)
from gpulab.exercises.results import (
    GUARD_HINT,
    CheckFailedError,
    CheckResult,
    KernelError,
    NotAttemptedError,
    add_note,
)
from gpulab.exercises.running import call_learner, launch, padded, read_back
from gpulab.exercises.spec import CheckSpec, reject_unshared_work, under_two_blocks
from gpulab.exercises.trial import Trial

# --- exercise 1: the loss gradient -------------------------------------------------------------

LOSS_GRADIENT_STUB_HINT = (
    "one thread per element of dlogits, from a 2-D grid whose x runs along the classes (the "
    "columns) and y along the samples (the rows); a guard on both; then the probability minus "
    "the one-hot target (1 in the label's column, 0 elsewhere), times scale."
)
LOSS_GUARD_HINT = (
    "guard both directions: a thread whose row is past the last sample, or whose column is past "
    "the last class, must write nothing. The blocks at the right and bottom edges are only "
    "partly used."
)
NORMALISATION_HINT = (
    "the loss is the MEAN over the batch, so each sample's gradient is divided by the batch "
    "size once: multiply by `scale`, which the host sets to 1 / batch."
)


# The loss scales the check's second batch multiplies into scale (powers of 2, as the dynamic
# loss scaler of chapter 10 keeps): scale = S / batch there, not 1 / batch, so a kernel that
# ignores scale and divides by the batch itself fails.
LOSS_SCALES = (8, 64, 256, 1024)
SCALE_IGNORED_HINT = (
    "use the `scale` argument as the host passes it: the trainer sets it to 1 / batch, and "
    "with loss scaling (chapter 10) the loss is multiplied by a loss scale S first, so scale "
    "is S / batch. A kernel that divides by the batch size it reads from the arrays gets only "
    "the plain 1 / batch right: the factor must come from `scale` alone."
)


def _loss_scale(trial: Trial, case: int) -> int:
    """The loss scale S of case ``case`` (scale = S / batch): 1 for the first batch, a power of
    2 other than the batch size for the second."""
    if case == 0:
        return 1
    return int(trial.rng.choice([s for s in LOSS_SCALES if s != trial.rows]))


def _loss_trials(seed: int, dtype) -> list[Trial]:
    """Two random batches x classes (:meth:`~gpulab.exercises.trial.Trial.draw`: sides not
    multiples of the block, rows != cols, two block shapes, and a grid that a kernel with r
    and c swapped would not cover)."""
    return [Trial.draw("check_loss_gradient", seed, dtype, dims=2, case=case)
            for case in range(2)]


# What the usual wrong loss gradients give, in the order they are tried (after the elements never
# written: outputs.matrix_mistakes).
LOSS_GRADIENT_MISTAKES = (
    looks_like("probs - onehot, not divided by the batch: the gradient of the SUMMED loss",
               lambda e: e.inputs["p"] - e.inputs["onehot"], NORMALISATION_HINT),
    looks_like("(probs - onehot) / batch: `scale` ignored, divided by the batch instead",
               lambda e: (None if e.inputs["loss_scale"] == 1
                          else (e.inputs["p"] - e.inputs["onehot"]) / e.inputs["p"].shape[0]),
               SCALE_IGNORED_HINT,
               said=lambda e: (f"(probs - onehot) / batch: your kernel ignored `scale`, which "
                               f"is {e.inputs['loss_scale']} / batch on this batch (a loss "
                               "scale times 1 / batch), and divided by the batch instead")),
    looks_like("(probs - onehot) / batch / batch: divided by the batch twice, or scale applied "
               "twice",
               lambda e: e.expected / e.inputs["p"].shape[0],
               "scale once: `scale` already is 1 / batch, so don't divide by probs.shape[0] as "
               "well, nor multiply by scale twice."),
    looks_like("(probs - onehot) / classes: divided by the number of classes",
               lambda e: (e.inputs["p"] - e.inputs["onehot"]) / e.inputs["p"].shape[1],
               NORMALISATION_HINT + " The batch is probs.shape[0] (rows), not the classes."),
    looks_like("probs * scale: the one-hot target is missing",
               lambda e: e.inputs["p"] * e.inputs["scale"],
               "the target is 1 in the column of each row's label (0 in the others): subtract "
               "it."),
    looks_like("(probs + onehot) * scale: the target added",
               lambda e: (e.inputs["p"] + e.inputs["onehot"]) * e.inputs["scale"],
               "subtract the one-hot target: p - 1 in the label's column."),
    looks_like("(onehot - probs) * scale: the sign reversed",
               lambda e: (e.inputs["onehot"] - e.inputs["p"]) * e.inputs["scale"],
               "the gradient is p - onehot (it points up the loss); the optimiser is what "
               "subtracts it."),
    looks_like("scale on one term only: probs * scale - onehot, or probs - onehot * scale",
               lambda e: next((v for v in (e.inputs["p"] * e.inputs["scale"] - e.inputs["onehot"],
                                           e.inputs["p"] - e.inputs["onehot"] * e.inputs["scale"])
                               if e.close_to(v)), None),
               "scale multiplies the whole difference, the probability and the target together.",
               said="the difference with `scale` on only one of its two terms"),
    looks_like("(probs - onehot) / scale: divided by scale",
               lambda e: (e.inputs["p"] - e.inputs["onehot"]) / e.inputs["scale"],
               "`scale` is the factor itself (1 / batch): multiply by it."),
    looks_like("the target in column r (c == r, not c == labels[r])",
               lambda e: (e.inputs["p"] - np.eye(*e.inputs["p"].shape)) * e.inputs["scale"],
               "row r's target is 1 in the column of its label, labels[r]: compare c with "
               "labels[r], not with r.",
               said="(probs - 1 where c == r) * scale: the target on the diagonal, not in "
                    "each row's label column"),
    looks_like("the label of column c (r == labels[c], rows and columns crossed)",
               lambda e: _target_by_column(e.inputs["p"], e.inputs["labels"],
                                           e.inputs["scale"]),
               "row r's target is 1 in the column of its label: c == labels[r], with r the "
               "row (the sample) and c the column (the class).",
               said="(probs - 1 where r == labels[c]) * scale: the labels indexed by the column"),
    looks_like("(probs - 1) * scale in every column",
               lambda e: (e.inputs["p"] - 1) * e.inputs["scale"],
               "the target is 1 only in the label's column (c == labels[r]), 0 in the others."),
)


LOSS_GRADIENT_SHARE_HINT = (
    "each element of dlogits gets a thread of its own: a thread that loops over a row does the "
    "work of many while the others idle.")
LOSS_GRADIENT_SHARE_MISTAKES = one_per_thread(LOSS_GRADIENT_SHARE_HINT, rows_of="dlogits")
LOSS_GRADIENT = CheckSpec(
    "loss_gradient", "my_loss_gradient(probs, labels, scale, dlogits)", LOSS_GRADIENT_STUB_HINT,
    LOSS_GRADIENT_MISTAKES + LOSS_GRADIENT_SHARE_MISTAKES, parameters=4,
    title="2. the loss gradient kernel",
    call="check_loss_gradient(my_loss_gradient)",
    holds="`(p − onehot) · scale` with scale = 1 / batch, then a loss scale (8–1024) times "
          "1 / batch, as gpulab's `softmax_cross_entropy_backward(probs, labels, scale, "
          "dlogits)`, one thread per element of a 2-D grid whose x runs along the classes, on "
          "two random batches (rows ≠ cols, neither a multiple of the block) and block shapes",
    also="the stub; swapped rows and columns; a hard-coded block size; a missing guard; a "
         "write into probs or labels; nothing, or only part (such as the first block's "
         "elements), of dlogits written; simulator-only code; gpulab's own kernel")


@LOSS_GRADIENT.check
def check_loss_gradient(kernel, seed: int | None = None, dtype=np.float32) -> str:
    """Compared with :func:`gpulab.reference.softmax_cross_entropy_backward` (1e-5 relative,
    1e-9 absolute) on softmaxes of random logits, the second batch's loss scale S from
    :data:`LOSS_SCALES`. The inputs are padded with 0 and dlogits starts as NaN, so that
    elements never written, and writes past the edges, show."""
    source = LOSS_GRADIENT.start(kernel)
    trials = _loss_trials(seed, dtype)
    for case, trial in enumerate(trials):
        _loss_gradient_trial(kernel, trial, source, _loss_scale(trial, case))
    # the method: one thread per element, traced on a small launch
    small = Trial("check_loss_gradient", seed, (5, 7), (4, 4), trials[0].dtype, trials[0].rng)
    reject_unshared_work(LOSS_GRADIENT_SHARE_MISTAKES, kernel, small,
                         np.full((5, 7), 1 / 7, small.dtype), np.arange(5),
                         small.dtype.type(0.2), np.zeros((5, 7), small.dtype),
                         output=source.parameters[3] if len(source.parameters) > 3 else -1)
    return ("every element of dlogits is right: "
            + " and ".join(f"a batch of {t.rows} with {t.cols} classes on blocks of "
                           f"{t.block[0]} x {t.block[1]}" for t in trials)
            + ", scale = 1 / batch, then a loss scale times 1 / batch"
            + f" (seed={seed}).")


def _loss_gradient_trial(kernel, trial: Trial, source, loss_scale: int = 1) -> None:
    batch, classes = trial.rows, trial.cols
    probs = reference.softmax(trial.normal(batch, classes, scale=2.0).astype(np.float64))
    probs = probs.astype(trial.dtype)
    labels = trial.rng.integers(0, classes, batch).astype(np.int64)
    scale = trial.dtype.type(loss_scale / batch)
    d_probs_all, d_probs = padded(probs, trial.padding, 0)
    d_labels_all, d_labels = padded(labels, trial.padding, 0)
    before = d_probs_all.copy_to_host(), d_labels_all.copy_to_host()
    d_out_all, d_out = padded(np.full((batch, classes), np.nan, trial.dtype), trial.padding,
                              np.nan)
    try:
        launch(kernel, trial, d_probs, d_labels, scale, d_out, index_hint=LOSS_GUARD_HINT)
    except KernelError as error:
        blame_hard_coded_block(source, trial, error)
        raise
    for name, buffer, old in (("probs", d_probs_all, before[0]),
                              ("labels", d_labels_all, before[1])):
        if not np.array_equal(buffer.copy_to_host(), old):
            raise CheckFailedError(
                f"your kernel changed its input {name} ({trial}).",
                "write the gradient into dlogits only: the trainer still reads probs afterwards "
                "(the batch's accuracy).")
    got = read_back(d_out_all, (batch, classes), trial, what="dlogits", hint=LOSS_GUARD_HINT)
    label_cells = np.zeros((batch, classes), bool)
    label_cells[np.arange(batch), labels] = True
    for cells, which in ((label_cells, "the label's column"), (~label_cells, "the other columns")):
        if np.array_equal(np.isnan(got), ~cells):  # one branch of the if writes nothing
            raise CheckFailedError(
                f"only {which} of each row of dlogits was written: the other "
                f"{int((~cells).sum())} elements were never written ({trial}).",
                "every element gets its gradient, the label's column (target 1) and the others "
                "(target 0) alike: both branches must write dlogits.")
    if SWAPPED_ROWS_AND_COLUMNS.seen(  # told as outputs tells it; said in this exercise's words
            Coverage(np.isnan(got), trial, "dlogits")):
        raise CheckFailedError(
            f"{int(np.isnan(got).sum())} of {got.size} elements of dlogits were never written, "
            f"exactly those a kernel with rows and columns swapped misses ({trial}).",
            "`cuda.grid(2)` returns x first, and x runs along the classes: its first "
            "value is the column, its second the row.")
    p = probs.astype(np.float64)
    onehot = np.zeros_like(p)
    onehot[np.arange(batch), labels] = 1
    expected = (p - onehot) * float(scale)
    try:
        reject_matrix(expected, got, trial, LOSS_GRADIENT_MISTAKES, rtol=1e-5, atol=1e-9,
                      what="dlogits", inputs={"p": p, "onehot": onehot, "scale": float(scale),
                                                 "loss_scale": loss_scale, "labels": labels},
                      source=source)
    except CheckFailedError as failure:
        blame_hard_coded_block(source, trial, failure)
        raise


def _target_by_column(p: np.ndarray, labels: np.ndarray, scale: float) -> np.ndarray | None:
    """(p - t) * scale with t[r, c] = (r == labels[c]), where every column has a label (the
    batch at least as long as the classes); None otherwise."""
    rows, cols = p.shape
    if cols > rows:
        return None
    target = (np.arange(rows)[:, None] == np.asarray(labels)[None, :cols]).astype(np.float64)
    return (p - target) * scale


# --- exercise 2: the Adam update ---------------------------------------------------------------

ADAM_STUB_HINT = (
    "one thread per element (its global 1-D index), guarded against the parameter's length; "
    "then the table above the exercise, line by line and in its order: the gradient with the "
    "weight decay, the new running averages m and v (stored as they are), then the move of "
    "param with their bias-corrected values."
)
ADAM_STEPS = 3
ADAM_TOLERANCE = {"rtol": 2e-5, "atol": 2e-6}  # float32 arithmetic in any sensible order


def _adam_steps(p, grads, m, v, lr, beta1, beta2, eps, weight_decay, mistake=None):
    """(param, m, v) after one Adam step per gradient in ``grads`` (steps 1, 2, ...), in float64,
    done right or with one ``mistake`` (its name, or one of :data:`ADAM_MISTAKES`): what the
    check compares a kernel with."""
    mistake = _ADAM_MODEL_NAMES.get(mistake, mistake)
    p, m, v = (np.array(a, dtype=np.float64) for a in (p, m, v))
    for step, g in enumerate(grads, start=1):
        g = np.asarray(g, dtype=np.float64)
        c1, c2 = 1 - beta1**step, 1 - beta2**step
        if mistake == "step_one_correction":
            c1, c2 = 1 - beta1, 1 - beta2
        elif mistake == "no_correction":
            c1 = c2 = 1.0
        elif mistake == "swapped_corrections":
            c1, c2 = c2, c1
        elif mistake == "multiplied_corrections":
            c1, c2 = 1 / c1, 1 / c2
        b1, b2 = (beta2, beta1) if mistake == "swapped_betas" else (beta1, beta2)
        if mistake not in ("no_weight_decay", "decoupled_weight_decay"):
            g = g + weight_decay * p
        m_new = b1 * m + (1 - b1) * g
        v_new = b2 * v + (1 - b2) * g * g
        if mistake == "no_one_minus":
            m_new, v_new = b1 * m + g, b2 * v + g * g
        m_use, v_use = (m, v) if mistake == "old_state" else (m_new, v_new)
        if mistake == "old_v":
            v_use = v
        m_hat, v_hat = m_use / c1, v_use / c2
        root = {"no_sqrt": v_hat, "root_then_correction": np.sqrt(v_use) / c2}.get(
            mistake, np.sqrt(v_hat))
        if mistake == "eps_inside":
            update = lr * m_hat / np.sqrt(v_hat + eps)
        elif mistake == "eps_added":
            update = lr * m_hat / root + eps
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                update = lr * m_hat / (root + (eps / np.sqrt(c2) if mistake == "eps_hat" else eps))
        if mistake == "decoupled_weight_decay":
            update = update + lr * weight_decay * p
        p = p + update if mistake == "plus" else p - update
        if mistake == "unstored":
            continue  # m and v keep their starting values
        m, v = (m_hat, v_hat) if mistake == "stored_corrected" else (m_new, v_new)
    return p, m, v


def _model_mistake(name: str, did: str, hint: str) -> Mistake:
    """The mistake of a param that the check's model of Adam with mistake ``name`` gives
    (:func:`_adam_steps`), described as ``did``."""
    return Mistake(did, lambda e: e.wrong and e.gives(name),
                   lambda e: f"param after {ADAM_STEPS} steps is what {did} gives", hint)


# The check's model of Adam with one mistake each: (its name in _adam_steps, what the learner
# did, the hint), in the order the check tries them.
_ADAM_MODELS = (
    ("no_correction",
     "Adam without the bias correction (m and v used as they are)",
     "divide by the corrections: m_hat = m[i] / correction1, v_hat = v[i] / correction2. "
     "m and v start at 0, so for the first steps they are too small; the corrections undo "
     "that."),
    ("step_one_correction",
     "a bias correction that stays at step 1's value (1 - beta1, 1 - beta2) every step",
     "the correction depends on the step count: use the correction1 and correction2 the "
     "host passes, 1 - beta ** step for THIS step, not 1 - beta1 written into the kernel."),
    ("multiplied_corrections",
     "m and v multiplied by their corrections instead of divided",
     "divide by the corrections: m_hat = m[i] / correction1, v_hat = v[i] / correction2 (the "
     "corrections are below 1, so dividing makes the early, too small averages larger)."),
    ("swapped_corrections",
     "m divided by correction2 and v by correction1",
     "m goes with beta1 and correction1; v with beta2 and correction2."),
    ("swapped_betas",
     "m averaged with beta2 and v with beta1",
     "m = beta1 * m + (1 - beta1) * g; v = beta2 * v + (1 - beta2) * g * g."),
    ("old_state",
     "param moved with last step's m and v (updated after the move)",
     "update in this order: first the new m and v from this step's g, then param with "
     "them. On the first step the old m and v are 0 and param would not move at all."),
    ("old_v",
     "param moved with the new m but last step's v",
     "compute the new v before moving param, and use it."),
    ("stored_corrected",
     "m and v stored bias-corrected (m[i] = m_hat)",
     "store the raw running averages in m[i] and v[i]; the corrected m_hat and v_hat are "
     "only for this step's move (the next step divides by a different correction)."),
    ("unstored",
     "m and v never written back",
     "store the new running averages: `m[i] = ...` and `v[i] = ...`, so that the next step "
     "continues from them."),
    ("eps_inside",
     "eps inside the square root: sqrt(v_hat + eps)",
     "eps belongs outside the square root, as in the table above and torch.optim.Adam: it "
     "only keeps the division safe where v_hat is 0."),
    ("eps_added",
     "eps added to the step, not to the denominator (a missing bracket)",
     "eps belongs in the denominator, next to the square root: the division is by "
     "(sqrt(v_hat) + eps) as a whole, so the sum needs its own brackets."),
    ("no_sqrt",
     "v_hat used without its square root",
     "the step divides by the square root of v_hat: v averages g * g, and its root has the "
     "size of g."),
    ("root_then_correction",
     "sqrt(v) divided by correction2 (the correction outside the square root)",
     "v_hat = v / correction2 comes first, then its square root: dividing the root by "
     "correction2 corrects it the wrong amount."),
    ("eps_hat",
     "the paper's form, lr * sqrt(correction2) / correction1 with eps on the raw sqrt(v)",
     "that form puts eps on sqrt(v) before the correction, which differs from torch.optim.Adam "
     "when eps is not tiny: divide m and v by their corrections, then add eps to sqrt(v_hat)."),
    ("no_one_minus",
     "running averages without the (1 - beta) factors",
     "m = beta1 * m + (1 - beta1) * g: a weighted average, whose weights add up to 1."),
    ("plus",
     "param moved up the gradient (+= instead of -=)",
     "subtract the step: param[i] -= ... (down the gradient, to lower the loss)."),
    ("no_weight_decay",
     "Adam with weight_decay ignored",
     "torch.optim.Adam adds the L2 term, weight_decay times the parameter, to the gradient "
     "before m and v see it (the training recipe uses 0; this check does not)."),
    ("decoupled_weight_decay",
     "AdamW's decoupled weight decay (param shrunk separately)",
     "this exercise is torch.optim.Adam, not AdamW: the weight decay joins the gradient "
     "before m and v are updated, instead of shrinking param separately."),
)
ADAM_MISTAKES = tuple(_model_mistake(*model) for model in _ADAM_MODELS)
# Each of ADAM_MISTAKES's name in _adam_steps, which takes either.
_ADAM_MODEL_NAMES = {mistake: model[0]
                     for mistake, model in zip(ADAM_MISTAKES, _ADAM_MODELS, strict=True)}


@dataclass
class AdamRun:
    """What ``check_adam`` saw, for the mistakes below: the kernel, its trial, the settings
    (lr, beta1, beta2, eps, weight_decay), the starting param and each step's gradient; then
    the step at which the kernel took the square root of a negative number, if it did, or
    else param, m and v read back after all the steps (``got``)."""

    kernel: object
    trial: Trial
    settings: tuple[float, ...]
    p0: np.ndarray
    grads: list[np.ndarray]
    negative_root_step: int | None = None
    got: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def where(self) -> str:
        lr, beta1, beta2, eps, weight_decay = self.settings
        return (f"{self.trial}; lr={lr:.3g}, beta1={beta1:.3g}, beta2={beta2:.3g}, "
                f"eps={eps:.2g}, weight_decay={weight_decay:.2g}")

    def model(self, mistake=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(param, m, v) of the check's model, right or with one ``mistake``."""
        zeros = np.zeros(self.trial.n)
        return _adam_steps(self.p0, self.grads, zeros, zeros, *self.settings, mistake)

    @cached_property
    def want(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.model()  # as the reference

    def close(self, what: str, want: np.ndarray) -> bool:
        return bool(np.allclose(self.got[what], want, **ADAM_TOLERANCE))

    def gives(self, mistake) -> bool:
        """Is param what the model with ``mistake`` gives? To float32 rounding of the largest
        values: a mistake's large steps make it larger than a right kernel's."""
        want = self.model(mistake)[0]
        return bool(np.allclose(self.got["param"], want, rtol=ADAM_TOLERANCE["rtol"],
                                atol=1e-5 * max(1.0, float(np.abs(want).max()))))

    @cached_property
    def wrong(self) -> bool:
        """Is param wrong?"""
        return not self.close("param", self.want[0])

    @property
    def wrong_state(self) -> str | None:
        """"m" or "v", the first of the two that is wrong, or None."""
        return next((what for what, want in zip(("m", "v"), self.want[1:], strict=True)
                     if not self.close(what, want)), None)

    @cached_property
    def still(self) -> np.ndarray:
        """Which elements of a wrong param never moved (a correct Adam step moves all of them
        here: every gradient is non-zero)."""
        return (self.got["param"] == self.p0) if self.wrong else np.zeros(self.trial.n, bool)

    def only_still_from(self, first: int) -> bool:
        """Are the elements that never moved exactly those from ``first`` on?"""
        index = np.arange(self.trial.n)
        return bool(self.still.any()) and np.array_equal(index[self.still],
                                                         index[index >= first])

    def said_wrong(self) -> str:
        """How many elements of param are wrong, the first, and the first wrong step (the
        kernel run again step by step)."""
        want_p, got_p = self.want[0], self.got["param"]
        bad = ~np.isclose(got_p, want_p, **ADAM_TOLERANCE)
        first = int(np.flatnonzero(bad)[0])
        first_step = _first_wrong_step(self.kernel, self.trial, self.p0, self.grads,
                                       list(self.settings))
        return (f"{int(bad.sum())} of {self.trial.n} elements of param are wrong after "
                f"{ADAM_STEPS} steps; the first is param[{first}]: expected {want_p[first]:.6g}, "
                f"got {got_p[first]:.6g}{first_step}")


# While the kernel runs: the simulator's math.sqrt refuses a negative number.
ADAM_LAUNCH_MISTAKES = (
    Mistake("a square root of a negative number (v averaging g, not g²; or something "
            "subtracted under the root)",
            lambda e: e.negative_root_step is not None,
            lambda e: (f"your kernel took the square root of a negative number at step "
                       f"{e.negative_root_step}: only v̂ goes under the root, and v̂ is never "
                       "negative"),
            "v is the running average of g * g, never negative (v = beta2 * v + (1 - beta2) * "
            "g * g); under the square root goes v̂ = v / correction2 alone, and eps is added "
            "after the root, to the denominator: nothing is subtracted there."),
)
# Then, in this order, before ADAM_MISTAKES: param, m and v after all the steps.
ADAM_RESULT_MISTAKES = (
    Mistake("NaN in param (a negative square root, or 0 / 0 without ε)",
            lambda e: np.isnan(e.got["param"]).any(),
            f"param holds NaN after {ADAM_STEPS} steps",
            "NaN comes from a square root of a negative number (v must average g * g) or "
            "from 0 / 0 (eps must be added to the square root)."),
    Mistake("param right but m or v not the raw running averages",
            lambda e: not e.wrong and e.wrong_state is not None,
            lambda e: f"param is right after {ADAM_STEPS} steps, but {e.wrong_state} is not",
            lambda e: f"store the new running average in {e.wrong_state}[i], uncorrected."),
    Mistake("param never moved",
            lambda e: e.still.all(),
            f"param did not change at all after {ADAM_STEPS} steps",
            "each thread should move its own param[i]: param[i] -= ..."),
    Mistake("only the first block's elements moved",
            lambda e: e.only_still_from(e.trial.threads_per_block),
            lambda e: (f"only param[0..{e.trial.threads_per_block - 1}], the first block's "
                       "elements, moved"),
            "each thread needs its global index (its block and its thread together), not "
            "`cuda.threadIdx.x` alone, which repeats in every block."),
    Mistake("all but the last, partial block's elements moved",
            lambda e: e.only_still_from((e.trial.blocks - 1) * e.trial.threads_per_block),
            "the last, partial block's elements never moved",
            "the guard should stop only the threads past the parameter's last element."),
    Mistake("some elements of param never moved",
            lambda e: e.still.any(),
            lambda e: f"{int(e.still.sum())} of {e.trial.n} elements of param never moved",
            ADAM_STUB_HINT),
)
# After ADAM_MISTAKES, the catch-all.
ADAM_OTHER_MISTAKES = (
    Mistake("any other wrong param (its first wrong element, and the first step that goes "
            "wrong)", lambda e: e.wrong,
            lambda e: e.said_wrong(), ADAM_STUB_HINT),
)


ADAM_RUN_MISTAKES = (ADAM_LAUNCH_MISTAKES + ADAM_RESULT_MISTAKES + ADAM_MISTAKES
                     + ADAM_OTHER_MISTAKES)  # judged from the run (AdamRun), in this order
ADAM_SHARE_HINT = (
    "one thread per element: each thread updates param, m and v at its own global index, and "
    "no thread loops over the elements of others.")
ADAM_SHARE_MISTAKES = one_per_thread(ADAM_SHARE_HINT)
ADAM = CheckSpec(
    "adam", "my_adam(param, grad, m, v, lr, beta1, beta2, eps, correction1, correction2, "
    "weight_decay)", ADAM_STUB_HINT,
    ADAM_RUN_MISTAKES + ADAM_SHARE_MISTAKES, parameters=11, title="3. the Adam update kernel",
    call="check_adam(my_adam)",
    holds="three Adam steps in a row on the same param, m and v from m = v = 0, with the "
          "corrections `1 − β^step` of steps 1, 2 and 3 (the host passes them), as gpulab's "
          "`adam_update` and `torch.optim.Adam`, with random betas, a visible ε and weight "
          "decay, on sizes that are not a multiple of the block, under two block sizes",
    also="the stub; simulator-only code; a missing guard; a hard-coded block or problem size; "
         "gpulab's own kernel")


@ADAM.check
def check_adam(kernel, seed: int | None = None, threads_per_block: int | None = None,
               dtype=np.float32) -> str:
    """lr, the betas, eps (10^-3 to 10^-2) and the weight decay are drawn; param, m and v are
    padded with 0 and grad with 1, so that an unguarded thread shows. The result is compared
    with the check's own float64 model of Adam (the same as the reference), within
    :data:`ADAM_TOLERANCE`; each of :data:`ADAM_MISTAKES` is that model with one mistake. A
    kernel that matches none is run again step by step to find the first wrong step."""
    source = ADAM.start(kernel)

    def run_steps(trial: Trial) -> AdamRun:
        rng, t = trial.rng, trial.dtype.type
        p0 = trial.uniform(-1, 1)
        grads = [trial.uniform(-1, 1) for _ in range(ADAM_STEPS)]
        lr, beta1, beta2 = t(rng.uniform(0.02, 0.1)), t(rng.uniform(0.7, 0.9)), \
            t(rng.uniform(0.95, 0.995))
        eps, weight_decay = t(10 ** rng.uniform(-3, -2)), t(rng.uniform(0.05, 0.2))
        run = AdamRun(kernel, trial, tuple(float(x) for x in (lr, beta1, beta2, eps,
                                                               weight_decay)), p0, grads)
        buffers = _adam_buffers(trial, p0)
        for step, grad in enumerate(grads, start=1):
            try:
                _adam_launch(kernel, trial, buffers, grad, step, lr, beta1, beta2, eps,
                             weight_decay)
            except KernelError as error:
                if isinstance(error.cause, ValueError) and "math domain" in str(error.cause):
                    run.negative_root_step = step
                    failure = diagnose(ADAM_LAUNCH_MISTAKES, run)
                    if failure is not None:
                        raise failure from None
                raise
        run.got = {what: read_back(d_all, (trial.n,), trial, fill=0, what=what, hint=GUARD_HINT)
                   for what, (d_all, _) in zip(("param", "m", "v"), buffers, strict=True)}
        reject(ADAM_RUN_MISTAKES, run)
        return run

    # the same problem under two block sizes (one alone when the caller gives it)
    trial = Trial.draw("check_adam", seed, dtype, block=threads_per_block)
    run = under_two_blocks(run_steps, trial, source, once=bool(threads_per_block))
    # the method: one thread per element, traced on 3 blocks of 40 threads for 117 elements
    small = Trial.draw("check_adam", seed, dtype, block=40, shape=(117,))
    tiny = small.dtype.type
    lr, beta1, beta2, eps, weight_decay = (tiny(x) for x in run.settings)  # the run's, exactly
    reject_unshared_work(ADAM_SHARE_MISTAKES, kernel, small, small.uniform(-1, 1),
                         small.uniform(-1, 1), np.zeros(small.n, small.dtype),
                         np.zeros(small.n, small.dtype), lr, beta1, beta2, eps,
                         tiny(1 - beta1), tiny(1 - beta2), weight_decay,
                         output=source.parameters[0] if source.parameters else 0)
    return (f"param, m and v are right after {ADAM_STEPS} steps ({trial.launched}, "
            f"n={trial.n}, seed={trial.seed}); one thread per element.")


def _adam_buffers(trial: Trial, p0) -> list:
    """(buffer, view) of param = p0, m = 0 and v = 0, each padded with 0: an unguarded thread
    changes the padding, which read_back reports."""
    zeros = np.zeros(trial.n, trial.dtype)
    return [padded(values, trial.threads_per_block, 0) for values in (p0, zeros, zeros)]


def _adam_launch(kernel, trial: Trial, buffers, grad, step: int, lr, beta1, beta2, eps,
                 weight_decay) -> None:
    """Launch step ``step`` on ``buffers`` (:func:`_adam_buffers`), grad padded with 1; the
    corrections ``1 - beta ** step`` are computed in the betas' own type."""
    t = trial.dtype.type
    (_, d_p), (_, d_m), (_, d_v) = buffers
    d_grad_all, d_grad = padded(grad, trial.threads_per_block, 1)
    launch(kernel, trial, d_p, d_grad, d_m, d_v, t(lr), t(beta1), t(beta2), t(eps),
           t(1 - beta1**step), t(1 - beta2**step), t(weight_decay))
    if not np.array_equal(d_grad_all.copy_to_host()[:grad.size], grad):
        raise CheckFailedError(
            f"your kernel changed its input grad at step {step} ({trial}): the gradient "
            "belongs to the backward pass that wrote it (another optimiser, gradient clipping "
            "or a log may read it after the step).",
            "read grad, never write it: weight decay and the moments go into values of the "
            "thread's own, and into param, m and v.")


def _first_wrong_step(kernel, trial: Trial, p0, grads, floats) -> str:
    """'; already wrong after step 1' or '; right until step 1, wrong from step 2': where a
    kernel that matches no known mistake goes wrong, found by running the steps one by one."""
    buffers = _adam_buffers(trial, p0)
    zeros = np.zeros(trial.n)
    for step, grad in enumerate(grads, start=1):
        _adam_launch(kernel, trial, buffers, grad, step, *floats)
        want = _adam_steps(p0, grads[:step], zeros, zeros, *floats)[0]
        if not np.allclose(buffers[0][1].copy_to_host(), want, **ADAM_TOLERANCE):
            return ("; already wrong after step 1" if step == 1
                    else f"; right until step {step - 1}, wrong from step {step}")
    return ""


# --- exercise 3: mini-batches ----------------------------------------------------------------

MINIBATCH_STUB_HINT = (
    "shuffle all the sample numbers once, with the generator you are given, then cut the "
    "shuffled order into slices of batch_size (the last slice may be shorter)."
)
MIX_HINT = (
    "shuffle ALL the indices first, then cut the shuffled order into batches. Shuffling inside "
    "each batch, or only the order of the batches, leaves every batch made of neighbouring "
    "samples — with the digits stored class by class, a batch of one class."
)


def _as_batches(batches, n: int, where: str) -> list[np.ndarray]:
    """The learner's result as a list of 1-D integer index arrays, or a plain-words failure."""
    if batches is None:
        raise CheckFailedError(f"your function returned None {where}.",
                               "end it with `return batches` (a list of index arrays).")
    if isinstance(batches, np.ndarray) and batches.ndim == 1 and batches.dtype != object:
        raise CheckFailedError(
            f"your function returned one array of {batches.size} indices, not a list of "
            f"batches {where}.", "cut it into slices of batch_size and return the list.")
    if not isinstance(batches, (list, tuple)) and not (isinstance(batches, np.ndarray)
                                                       or hasattr(batches, "__next__")):
        kind = type(batches).__name__
        raise CheckFailedError(
            f"your function returned {'an' if kind[0] in 'aeiou' else 'a'} {kind}; return a "
            f"list of index arrays {where}.", MINIBATCH_STUB_HINT)
    result = []
    for k, batch in enumerate(batches):
        array = np.asarray(batch)
        if array.dtype == object or not (np.issubdtype(array.dtype, np.integer)
                                         or array.dtype == bool):
            kind = type(batch).__name__ if array.dtype == object else f"{array.dtype} values"
            raise CheckFailedError(
                f"batch {k} holds {kind}: a batch is an array of whole-number sample indices "
                f"{where}.", "a batch holds sample numbers (whole numbers), not the samples' "
                             "values: shuffle the numbers 0 .. n_samples - 1 and slice them.")
        if array.dtype == bool:
            raise CheckFailedError(f"batch {k} is a True/False mask; return the indices "
                                   f"themselves {where}.", MINIBATCH_STUB_HINT)
        array = array.ravel()
        if array.size and (array.min() < 0 or array.max() >= n):
            raise CheckFailedError(
                f"batch {k} holds index {int(array.min() if array.min() < 0 else array.max())}"
                f", outside 0..{n - 1} {where}.", MINIBATCH_STUB_HINT)
        result.append(array.astype(np.int64))
    return result


# "Not a random draw": at least this share of the steps from one sample of the epoch's order to
# the next go the same distance (mod n_samples). A rotation of the stored order, or a fixed
# stride from a random start, steps the same everywhere; an interleave (every k-th sample from
# offset 0, then from offset 1, ...), all but k - 1 times. A random permutation of 16 or more
# samples (the check draws 43+) repeats its most common step a handful of times: 12 of 15 steps
# the same has odds far below 1 in 10^6.
SAME_STEP_SHARE = 0.75
# "Much of the stored order kept": at least this share of the order's steps go to the sample
# stored next (+1 mod n), as after a few swaps or a shuffle of part of the indices. In a random
# permutation that count is Poisson with mean 1 (its j-th factorial moment is exactly 1/j! for
# j < n): with 43 or more samples (the check's fewest) 14 or more has odds below 1 in 10^11
# (100,000 permutations of 43 gave 8 at most), and 5 swaps, breaking at most 20 steps, are seen.
KEPT_SHARE = 1 / 3
# A uniform shuffle, tested on one large epoch (UNIFORM_N samples or more) by two measures of
# what stored neighbours become (:attr:`Minibatches.later_z`, :attr:`Minibatches.apart_z`) and
# two of the order itself (:attr:`Minibatches.rising_z`, :attr:`Minibatches.moved_later_z`):
# each is within UNIFORM_Z standard deviations of a uniform shuffle's but about once in 10^9
# (3,000 permutations of 16,001 to 16,063: at most 4.1). Smallest distance of the four, on 5
# seeds: sorting by random numbers rounded to a tenth 219, evens then odds shuffled 90, a stable
# sort by float16 keys 121, by whole numbers drawn with repeats 35, each place swapped with one
# drawn from all n (the naive shuffle) 11 to 13.7; the naive shuffle is why the epoch is this
# large (on 4,000 samples it is about 6 away).
UNIFORM_N, UNIFORM_Z = 16_000, 6.0
# "A batch in stored order": a batch of this many samples or more that is a run of neighbouring
# stored samples (max - min = size - 1). A uniform shuffle puts one of its 5 or more batches there
# with odds below 1 in 10^4 on the check's smallest epoch (43 samples; a batch of 6 is a run with
# probability 38 / C(43, 6) < 10^-5) and far below on the others.
RUN_BATCH_SIZE = 6
# Fixed points: how many samples stand at their own stored position. In a uniform shuffle that
# count is Poisson with mean 1, whatever n: 14 or more has odds below 1 in 10^11 (as KEPT_SHARE).
# n random swaps leave about n / e in place.
FIXED_POINTS_MAX = 13
# Extra epochs of the small case, each from its own generator: a place that holds the same
# sample in all of them and the first (odds about n^-(EXTRA_EPOCHS - 1) for a uniform shuffle),
# or no sample ever at its own place in the EXTRA_EPOCHS + 1 (about e^-17, 1 in 24 million: a
# shuffle that can never leave a sample in place, as Sattolo's cycles).
EXTRA_EPOCHS = 16
# "Stratified": in every full batch of the large epoch the samples from the first half of the
# stored order number batch_size / 2 give or take 1. Uniformly each such count is
# hypergeometric (standard deviation about 4 for 64 of 4,000), within 1 of 32 about 3 times in
# 10: for all of 62 batches, odds about 10^-32. Interleaving two shuffled halves always is.
BALANCED_WITHIN = 1


def _same_step(order: np.ndarray, n: int) -> tuple[int, int, int] | None:
    """(the step, how many of the order's steps go it, how many steps): when at least
    :data:`SAME_STEP_SHARE` of the steps from one index of the epoch's order to the next are
    the same (mod n), as in a rotation or a fixed stride; None for a random order."""
    if order.size < 3:
        return None
    steps = np.diff(order) % n
    values, counts = np.unique(steps, return_counts=True)
    top = int(np.argmax(counts))
    if counts[top] >= SAME_STEP_SHARE * steps.size:
        return int(values[top]), int(counts[top]), int(steps.size)
    return None


def _monotonic(indices: np.ndarray) -> bool:
    steps = np.diff(np.asarray(indices))
    return bool(np.all(steps > 0) or np.all(steps < 0))


def _joined(batches: list[np.ndarray]) -> np.ndarray:
    """The batches' indices one batch after the other: the epoch's order."""
    return np.concatenate(batches) if batches else np.zeros(0, np.int64)


@dataclass
class Minibatches:
    """What a learner's ``minibatches(n, batch_size, rng)`` returned (as :func:`_as_batches`
    reads it): ``batches`` for the seed's generator, then, once those hold every sample once
    in a random order, ``again`` for a new generator of the same seed and ``other`` for the
    next seed's: the evidence the mini-batch check's mistakes are told from."""

    n: int
    batch_size: int
    seed: int
    batches: list[np.ndarray] = field(default_factory=list)
    again: list[np.ndarray] | None = None
    other: list[np.ndarray] | None = None
    epochs: list[np.ndarray] | None = None  # the orders of EXTRA_EPOCHS more generators

    @property
    def where(self) -> str:
        return f"n_samples={self.n}, batch_size={self.batch_size}, seed={self.seed}"

    @property
    def order(self) -> np.ndarray:
        return _joined(self.batches)

    @property
    def full(self) -> int:
        """How many full batches an epoch has."""
        return self.n // self.batch_size

    @property
    def rest(self) -> int:
        """The size of the last, partial batch (0: none)."""
        return self.n % self.batch_size

    @property
    def counts(self) -> np.ndarray:
        """How many times each sample is in the batches."""
        return np.bincount(self.order, minlength=self.n)

    @property
    def each_once(self) -> bool:
        return len(self.order) == self.n and not np.any(self.counts != 1)

    @property
    def holds(self) -> str:
        return (f"the batches hold {len(self.order)} indices for {self.n} samples: "
                f"{int(np.sum(self.counts == 0))} samples missing, "
                f"{int(np.sum(self.counts > 1))} repeated")

    @property
    def sizes(self) -> list[int]:
        return [len(b) for b in self.batches]

    @property
    def expected_sizes(self) -> list[int]:
        return [self.batch_size] * self.full + ([self.rest] if self.rest else [])

    @property
    def sizes_right(self) -> bool:
        return self.sizes == self.expected_sizes

    @property
    def unmixed(self) -> bool:
        """Batches of the right sizes in any order, each of 2 or more holding neighbouring
        samples only (its indices span less than twice its size): with data stored class by
        class, every batch one or two classes. A real shuffle of 3 or more batches essentially
        never does that; shuffling only inside each batch, or only the order of the stored
        order's slices, always does."""
        sized = [b for b in self.batches if b.size >= 2]
        return (sorted(self.sizes) == sorted(self.expected_sizes) and bool(sized)
                and all(int(b.max() - b.min()) < 2 * b.size for b in sized))

    @property
    def same_step(self) -> tuple[int, int, int] | None:
        return _same_step(self.order, self.n)

    @property
    def stuck(self) -> tuple[int, int] | None:
        """(place, sample) of the first place of the order that holds the same sample in every
        epoch (:attr:`epochs`, with the first); None when there is none."""
        if not self.epochs:
            return None
        same = np.all(np.stack(self.epochs) == self.order, axis=0)
        return (int(np.argmax(same)), int(self.order[np.argmax(same)])) if same.any() else None

    @property
    def repeated_epochs(self) -> tuple[int, int] | None:
        """(i, j), 1-based, of the first two epochs of different generators (the seed's, the
        next seed's, then :attr:`epochs`) whose orders are the same; None when all differ. Two
        uniform shuffles of 40 or more samples agree with odds below 1 in 10^47."""
        if not self.epochs:
            return None
        orders = [self.order, *([] if self.other is None else [_joined(self.other)]),
                  *self.epochs]
        seen: dict[bytes, int] = {}
        for j, order in enumerate(orders, 1):
            i = seen.setdefault(order.astype(np.int64).tobytes(), j)
            if i != j:
                return i, j
        return None

    @property
    def never_in_place(self) -> bool:
        """No sample ever stands at its own stored place, in all the epochs."""
        return bool(self.epochs) and not any(
            np.any(order == np.arange(self.n)) for order in [self.order, *self.epochs])

    @property
    def run_batch(self) -> np.ndarray | None:
        """The first batch of :data:`RUN_BATCH_SIZE` or more samples that is a run of
        neighbouring stored samples, in any order; None when there is none."""
        return next((b for b in self.batches
                     if b.size >= RUN_BATCH_SIZE and int(b.max() - b.min()) == b.size - 1), None)

    @property
    def fixed_points(self) -> int:
        """How many samples stand at their own stored position in the epoch's order."""
        order = self.order
        return int(np.sum(order == np.arange(order.size)))

    @property
    def balanced(self) -> bool:
        """Every full batch holds batch_size / 2 (within :data:`BALANCED_WITHIN`) samples from
        the first half of the stored order, on an epoch of :data:`UNIFORM_N` or more."""
        full = [b for b in self.batches if b.size == self.batch_size]
        return (self.n >= UNIFORM_N and self.each_once and len(full) >= 8 and all(
            abs(int(np.sum(b < self.n // 2)) - self.batch_size / 2) <= BALANCED_WITHIN
            for b in full))

    @property
    def kept(self) -> int:
        """How often the next sample of the order is the one stored after it (mod n)."""
        return int(np.sum(np.diff(self.order) % self.n == 1))

    @property
    def positions(self) -> np.ndarray:
        """Where in the epoch's order each sample (0 .. n - 1) stands."""
        where = np.empty(self.n, np.int64)
        where[self.order] = np.arange(self.n)
        return where

    @property
    def later(self) -> int:
        """How often sample i + 1 comes after sample i in the order: in a uniform shuffle
        (n - 1) / 2 on average, with variance (n + 1) / 12 (the Eulerian numbers)."""
        return int(np.sum(np.diff(self.positions) > 0))

    @property
    def later_z(self) -> float:
        return (self.later - (self.n - 1) / 2) / math.sqrt((self.n + 1) / 12)

    @property
    def apart(self) -> float:
        """How far apart, on average, two samples stored side by side land, as a share of n:
        1/3 in a uniform shuffle (standard deviation at most sqrt(1/18) / sqrt(n))."""
        return float(np.mean(np.abs(np.diff(self.positions)))) / self.n

    @property
    def apart_z(self) -> float:
        return (self.apart - 1 / 3) / (math.sqrt(1 / 18) / math.sqrt(self.n))

    @property
    def rising(self) -> int:
        """How often the order steps up to a larger index: (n - 1) / 2 on average in a uniform
        shuffle, with variance (n + 1) / 12, as :attr:`later`. Sorting by random keys with
        ties (float16 keys, whole numbers drawn with repeats) keeps tied samples in stored
        order, so the order rises more often."""
        return int(np.sum(np.diff(self.order) > 0))

    @property
    def rising_z(self) -> float:
        """0 when every batch of two or more is sorted (either way): an order chosen inside
        each batch, which changes nothing in training, says nothing of the shuffle."""
        if all(_monotonic(batch) for batch in self.batches if len(batch) > 1):
            return 0.0
        return (self.rising - (self.n - 1) / 2) / math.sqrt((self.n + 1) / 12)

    @property
    def moved_later(self) -> int:
        """How many samples stand later in the order than at their stored place: (n - 1) / 2
        on average in a uniform shuffle, with variance (n + 1) / 12 (excedances have the
        Eulerian distribution too). The naive shuffle, each place swapped with one drawn
        from all n, moves fewer later: about 47.1 % of n (12 standard deviations below on
        16,000 samples; the bias of Robbins and Bolker, 1981)."""
        return int(np.sum(self.positions > np.arange(self.n)))

    @property
    def moved_later_z(self) -> float:
        return (self.moved_later - (self.n - 1) / 2) / math.sqrt((self.n + 1) / 12)

    @property
    def not_uniform(self) -> bool:
        """Any measure more than :data:`UNIFORM_Z` standard deviations from a uniform
        shuffle's, on an epoch of :data:`UNIFORM_N` samples or more."""
        return self.n >= UNIFORM_N and self.each_once and max(
            abs(self.later_z), abs(self.apart_z), abs(self.rising_z),
            abs(self.moved_later_z)) > UNIFORM_Z


def _not_a_random_draw(e: Minibatches) -> str:
    """What a rotation or a fixed stride of the stored order (:func:`_same_step`) is told."""
    step, count, steps = e.same_step
    if step in (1, e.n - 1):
        kind = "a rotation of the stored order (forwards or backwards) from a random start"
    else:
        kind = "a fixed stride through the stored order from a random start"
    if count == steps:
        every = "every step from one index of it to the next goes"
    else:
        every = f"{count} of the {steps} steps from one index of it to the next go"
        kind = "nearly " + kind
    return (f"the epoch's order is not a random draw: {every} the same distance, {step} (mod "
            f"n_samples), so the order is {kind}, fixed but for where it starts")


# What the usual wrong mini-batches give, in the order they are tried, on the batches of the
# seed's generator (after the result is read as batches of indices: :func:`_as_batches`).
MINIBATCH_MISTAKES = (
    Mistake("the partial batch dropped",
            lambda e: bool(e.rest) and len(e.order) == e.full * e.batch_size,
            lambda e: f"{e.rest} samples are never used: the last, partial batch is missing",
            "keep the remainder as a smaller last batch: every sample must be seen once per "
            "epoch."),
    Mistake("the last batch topped up to batch_size with samples already seen",
            lambda e: (bool(e.rest) and not e.each_once
                       and e.sizes == [e.batch_size] * (e.full + 1)
                       and len(set(e.order.tolist())) == e.n),
            lambda e: (f"the last batch holds {e.batch_size} samples, {e.batch_size - e.rest} "
                       "of them seen earlier in the epoch: it was topped up to batch_size"),
            "keep the last batch short: with n_samples not a multiple of batch_size it holds "
            "the remainder only, so that each sample counts once per epoch."),
    Mistake("samples repeated (drawing with replacement)",
            lambda e: not e.each_once and np.any(e.counts > 1), lambda e: e.holds,
            "a sample that repeats was drawn with replacement (rng.integers, rng.choice): a "
            "shuffle of all the indices, a permutation, holds each exactly once."),
    Mistake("samples missing", lambda e: not e.each_once, lambda e: e.holds,
            MINIBATCH_STUB_HINT),
    Mistake("no shuffling (the stored order, or its reverse)",
            lambda e: e.sizes_right and np.all(np.abs(np.diff(e.order)) == 1),
            lambda e: f"the samples come in their stored order{' reversed' if e.order[0] else ''}",
            "shuffle the indices with the generator you are given: digits stored class by "
            "class would give batches of one class each."),
    # Before the batch rules, which a few swaps inside batches would meet; stored runs cut and
    # reordered (shuffled slices, rotations) keep every batch a run and are left to later rules.
    Mistake("a partial shuffle (a few swaps, or only part of the indices shuffled)",
            lambda e: e.kept >= KEPT_SHARE * (e.n - 1)
            and any(np.any(np.diff(b) % e.n != 1) for b in e.batches),
            lambda e: f"much of the stored order is kept: {e.kept} times of {e.n - 1} the next "
                      "sample is the one stored after it (about 1 in a shuffled order), so the "
                      "shuffle moved only some of the samples",
            "every sample must be free to land anywhere: a few swaps, or a shuffle of part of "
            "the indices, leave most samples beside their stored neighbours — with the digits "
            "stored class by class, batches of one class."),
    Mistake("shuffling only inside each batch (every batch still neighbouring samples)",
            lambda e: e.unmixed and all(b.min() == k * e.batch_size  # slices in order
                                        for k, b in enumerate(e.batches)),
            "the samples are shuffled only inside each batch: the batches still come in the "
            "stored order, so each batch holds neighbouring samples only", MIX_HINT),
    Mistake("shuffling only the order of the batches (every batch still neighbouring samples)",
            lambda e: e.unmixed,
            "only the order of the batches is shuffled: each batch is a slice of the stored "
            "order, so each batch holds neighbouring samples only", MIX_HINT),
    Mistake("batches of the wrong size", lambda e: not e.sizes_right,
            lambda e: (f"the batch sizes are {e.sizes[:6]}{'...' if len(e.sizes) > 6 else ''}"
                       f": expected {e.full} batches of {e.batch_size} then one of {e.rest}"),
            "cut the shuffled order into consecutive slices of batch_size: only the last one "
            "may be shorter."),
    Mistake("a rotation or a fixed stride of the stored order from a random start (the same "
            "step between neighbours of the order)", lambda e: e.same_step is not None,
            _not_a_random_draw,
            "the generator must decide every position of the order, not only an offset or a "
            "step: a shuffle of all the indices lets any sample follow any other. With only a "
            "start drawn, every epoch repeats the same pattern of neighbours."),
    Mistake("a batch left in stored order (e.g. the remainder appended unshuffled)",
            lambda e: e.each_once and e.run_batch is not None,
            lambda e: (f"a batch of {e.run_batch.size} holds the stored samples "
                       f"{int(e.run_batch.min())} to {int(e.run_batch.max())}, neighbours only, "
                       "so it was not shuffled with the rest (batch "
                       f"{next(k for k, b in enumerate(e.batches) if b is e.run_batch) + 1} of "
                       f"{len(e.batches)})"),
            "shuffle all the indices first, then cut the shuffled order into batches: every "
            "batch, the last one too, must mix samples from all over the stored order."),
    Mistake("many samples left at their stored place (swaps drawn at random, not a shuffle)",
            lambda e: e.each_once and e.fixed_points > FIXED_POINTS_MAX,
            lambda e: (f"{e.fixed_points} of {e.n} samples stand at their own stored position "
                       "in the epoch's order (sample i at place i); a uniform shuffle leaves "
                       "about 1 there, whatever n"),
            "a number of random swaps is not a uniform shuffle: each sample must be swapped "
            "with one drawn from those not yet placed (Fisher-Yates), or let the generator "
            "permute all the indices at once."),
)
# Last, on one large epoch: the order a uniform shuffle, by two measures of what stored
# neighbours become.
MINIBATCH_UNIFORM_MISTAKES = (
    Mistake("every batch half from each half of the stored order (two halves shuffled apart, "
            "then interleaved)", lambda e: e.balanced,
            lambda e: (f"every one of the {e.full} full batches of {e.batch_size} holds "
                       f"{e.batch_size // 2} (give or take {BALANCED_WITHIN}) samples from the "
                       "first half of the stored order: a uniform shuffle's batches vary by "
                       f"about {math.sqrt(e.batch_size / 4):.0f} either way"),
            "shuffle all the indices together: parts shuffled apart and then interleaved keep "
            "the share of each part fixed in every batch.", recognised_from="outputs"),
    Mistake("a shuffle that is not uniform (sorting by a few random keys, interleaving, "
            "shuffling pieces, each place swapped with one drawn from all n)",
            lambda e: e.not_uniform,
            lambda e: (f"the order is not a uniform shuffle: on an epoch of {e.n} samples, "
                       f"sample i + 1 comes after sample i {e.later} times of {e.n - 1} (a "
                       f"uniform shuffle: {(e.n - 1) / 2:.0f} ± "
                       f"{math.sqrt((e.n + 1) / 12):.0f}), and samples stored side by side "
                       f"land {e.apart * e.n:.0f} positions apart on average ({e.n / 3:.0f} "
                       "in a uniform shuffle), and the order steps up to a larger index "
                       f"{e.rising} times, and {e.moved_later} samples land later than their "
                       f"stored place (each {(e.n - 1) / 2:.0f} ± "
                       f"{math.sqrt((e.n + 1) / 12):.0f}): the stored order still shows"),
            "shuffle all the indices at once with the generator (a permutation of all of "
            "them): sorting by a few random values, interleaving parts, shuffling pieces or "
            "swapping each place with any other leaves traces of the stored order (with the "
            "digits stored class by class, batches that lean to some classes).",
            recognised_from="outputs"),
)
# Then, on the batches of a new generator of the same seed and of the next seed's.
MINIBATCH_SEED_MISTAKES = (
    Mistake("shuffling with np.random, not the given generator (the same seed gives another "
            "order)",
            lambda e: e.again is not None and not np.array_equal(_joined(e.again), e.order),
            "the same seed gave a different order",
            "shuffle with the rng you are given, not np.random: a seed must repeat a run "
            "exactly."),
    Mistake("shuffling with a generator of its own (another seed gives the same order)",
            lambda e: e.other is not None and np.array_equal(_joined(e.other), e.order),
            "two different generators gave the same order", "use the rng argument to shuffle."),
)
# Then over EXTRA_EPOCHS more epochs, each from a generator of its own.
MINIBATCH_EPOCH_MISTAKES = (
    Mistake("few orders (a new generator seeded from a small draw, or orders picked from a list)",
            lambda e: e.repeated_epochs is not None,
            lambda e: (f"epochs {e.repeated_epochs[0]} and {e.repeated_epochs[1]} of "
                       f"{len(e.epochs) + 2}, each from a generator of its own, gave the same "
                       f"order of all {e.n} samples"),
            "draw the epoch's order from the rng you are given, all of it: there are n! orders "
            "and any of them may come; an epoch order picked from a few leaves most unseen."),
    Mistake("a sample that never moves (a shuffle one short, or one sample put back by hand)",
            lambda e: e.stuck is not None,
            lambda e: (f"place {e.stuck[0]} of the epoch's order holds sample {e.stuck[1]} in "
                       f"all {len(e.epochs) + 1} epochs, each shuffled by a generator of its "
                       "own"),
            "every sample must be free to land anywhere: a shuffle whose last swap (or range) "
            "stops one short, or a sample set apart and put back, pins it to one place."),
    Mistake("no sample ever left in place (Sattolo's cycles: j drawn below i, not up to it)",
            lambda e: e.never_in_place,
            lambda e: (f"in {len(e.epochs) + 1} epochs no sample ever stood at its own stored "
                       "place; a uniform shuffle leaves about one there in each"),
            "in Fisher-Yates, the sample at i swaps with one drawn from 0 to i inclusive: i "
            "itself must be possible, or no sample can stay where it is."),
)


MINIBATCHES = CheckSpec(
    "minibatches", "minibatches(n_samples, batch_size, rng) -> list of index arrays",
    MINIBATCH_STUB_HINT, (MINIBATCH_MISTAKES + MINIBATCH_SEED_MISTAKES + MINIBATCH_EPOCH_MISTAKES
                          + MINIBATCH_UNIFORM_MISTAKES),
    title="1. the mini-batches of an epoch", call="check_minibatches(minibatches)",
    holds="batches of batch_size whole-number indices, the last (partial) batch kept, every "
          "sample exactly once per epoch, shuffled by the given generator across the whole "
          "epoch (no batch of 6 or more is a run of stored neighbours, nor are all batches "
          "drawn from narrow stretches of the stored order; the same seed gives the same "
          "order, another seed another), and on an epoch of 16,000+ samples a "
          "uniform shuffle (stored neighbours land as far apart, and as often in order, and "
          "as many samples land later than their stored place, as a random permutation makes "
          "them, within 6 standard deviations)",
    also="the stub; a result of the wrong type (None, one flat array, floats, a mask, indices "
         "out of range)")


@MINIBATCHES.check
def check_minibatches(function, seed: int | None = None) -> str:
    """batch_size is drawn from 14 to 39 and n_samples is 3 to 8 batches plus a partial one.
    The function is called with the seed's generator (:data:`MINIBATCH_MISTAKES` on its
    batches), then again with a new one of the same seed and with the next seed's
    (:data:`MINIBATCH_SEED_MISTAKES`), then with :data:`EXTRA_EPOCHS` more generators
    (:data:`MINIBATCH_EPOCH_MISTAKES`). A rotation or a fixed stride is told by the step, mod
    n, between neighbours of the order (:func:`_same_step`)."""
    rng = np.random.default_rng(seed)
    batch_size = int(rng.integers(14, 40))
    n = batch_size * int(rng.integers(3, 9)) + int(rng.integers(1, batch_size))
    case = Minibatches(n, batch_size, seed)
    where = f"({case.where})"
    case.batches = _as_batches(call_learner(function, n, batch_size, np.random.default_rng(seed),
                                            stub_hint=MINIBATCH_STUB_HINT), n, where)
    reject(MINIBATCH_MISTAKES, case)
    case.again = _as_batches(call_learner(function, n, batch_size, np.random.default_rng(seed)),
                             n, where)
    case.other = _as_batches(call_learner(function, n, batch_size,
                                          np.random.default_rng(seed + 1)), n, where)
    reject(MINIBATCH_SEED_MISTAKES, case)
    case.epochs = [_joined(_as_batches(call_learner(function, n, batch_size,
                                                    np.random.default_rng([seed or 0, 3, k])),
                                       n, where)) for k in range(EXTRA_EPOCHS)]
    reject(MINIBATCH_EPOCH_MISTAKES, case)
    # one large epoch: the shuffle uniform
    large = Minibatches(UNIFORM_N + int(rng.integers(1, 64)), 64, seed)
    large.batches = _as_batches(call_learner(function, large.n, 64, np.random.default_rng(
        [seed or 0, 2])), large.n, f"({large.where})")
    reject(MINIBATCH_MISTAKES + MINIBATCH_UNIFORM_MISTAKES, large)
    return (f"{len(case.batches)} batches, every sample once, mixed across the epoch by rng "
            f"{where}; on {large.n} samples a uniform shuffle.")


# --- your kernels train the network --------------------------------------------------------------

# The kernels this chapter's exercises write: a run counts as "trained by your kernels" when
# these two are yours.
THIS_CHAPTER = ("softmax_cross_entropy_backward", "adam_update")
# The run: smaller than the recipe (gpulab.nn.recipes.DIGITS: 64 -> 128 -> 10, 900 steps of
# 32), since in the simulator every CUDA thread is a Python thread (a step of this network
# launches about 6,000; the recipe would take hours). 64 -> 16 -> 10 on the full 8 x 8 digits
# learns fast: from seed 0, 16 steps of 16 reach about 70 % held-out (84 % after 40), in about
# 8 s of CPU time (20 s on a loaded 2-core machine). The first ``compared_steps`` run next to
# gpulab's kernels and must match them to rounding; then your kernels train on alone.
TRAINING = {"widths": (64, 16, 10), "steps": 16, "batch_size": 16, "lr": 3e-2, "seed": 0,
            "compared_steps": 2}
# Steps of a run with none of the learner's kernels in it (all stubs or refused): enough to show
# what the cell does, without the whole run on gpulab's kernels alone (16 steps took 17 s in
# the simulator on 2 cores: `train_with_your_kernels({}, show=False, steps=16)`).
PREVIEW_STEPS = 4
MIN_ACCURACY = 0.4  # held-out accuracy a run must reach: four times chance (10 classes)
LOSS_WINDOW = 0.25  # "the loss fell": the mean of the last quarter of the steps' batch losses
#                     is below the mean of the first quarter (one batch's loss is noisy)


def _steps(n: int) -> str:
    """'1 step', '16 steps'."""
    return f"{n} step" if n == 1 else f"{n} steps"


@dataclass
class YourTraining:
    """A training run of the digits network with your kernels (:func:`train_with_your_kernels`):
    its first steps next to gpulab's kernels, then yours alone.

    ``kernels``: the kernels that ran as yours, by gpulab's name (pass them on:
    ``KernelBackend(kernels=run.kernels)``); ``origins``: whose kernel ran for every
    replaceable name; ``notes``: kernels left out and why; ``side_by_side``: the
    :class:`gpulab.nn.trainer.SideBySide` record (every step's batch loss; the compared steps
    next to gpulab's; None if training stopped with an error); ``error``: why it stopped with
    an error; ``stopped``: why it stopped before its last step (a non-finite loss, a mismatch);
    ``evaluations``: (step, held-out loss, held-out accuracy) before training (step 0) and
    after every step; ``seconds``: the run's wall-clock time on this machine; ``settings``: the
    run's :data:`TRAINING` settings; ``n_train``, ``n_test``: the digits trained on and held
    out; ``tier``: where the kernels ran ("sim" or "gpu")."""

    kernels: dict = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    side_by_side: object | None = None
    error: str = ""
    stopped: str = ""
    evaluations: list[tuple[int, float, float]] = field(default_factory=list)
    seconds: float = 0.0
    settings: dict = field(default_factory=dict)
    n_train: int = 0
    n_test: int = 0
    tier: str = ""

    @property
    def yours(self) -> list[str]:
        return list(self.kernels)

    @property
    def matches(self) -> bool:
        """Every compared step matched gpulab's kernels to rounding."""
        return self.side_by_side is not None and self.side_by_side.matches

    @property
    def losses(self) -> list[float]:
        """Every step's mean batch loss, with your kernels."""
        return list(self.side_by_side.losses) if self.side_by_side is not None else []

    @property
    def steps(self) -> int:
        return len(self.losses)

    @property
    def loss_window(self) -> int:
        """How many steps the first and the last loss means average."""
        return max(1, int(self.steps * LOSS_WINDOW))

    @property
    def loss_first_last(self) -> tuple[float, float] | None:
        """(mean batch loss of the first steps, of the last steps): :attr:`loss_window` each."""
        if not self.steps:
            return None
        k = self.loss_window
        return float(np.mean(self.losses[:k])), float(np.mean(self.losses[-k:]))

    @property
    def held_out_loss(self) -> tuple[float, float] | None:
        """(before, after) on the held-out digits."""
        if len(self.evaluations) < 2:
            return None
        return self.evaluations[0][1], self.evaluations[-1][1]

    @property
    def held_out_accuracy(self) -> tuple[float, float] | None:
        """(before, after) on the held-out digits."""
        if len(self.evaluations) < 2:
            return None
        return self.evaluations[0][2], self.evaluations[-1][2]

    @property
    def chance(self) -> float:
        """The accuracy of guessing: 1 / the number of classes."""
        widths = self.settings.get("widths") or TRAINING["widths"]
        return 1 / widths[-1]

    @property
    def finite(self) -> bool:
        return all(math.isfinite(loss) for loss in self.losses)

    @property
    def loss_fell(self) -> bool:
        """The batch loss's last steps average below its first, and the held-out loss fell."""
        first_last, held_out = self.loss_first_last, self.held_out_loss
        return (self.finite and first_last is not None and held_out is not None
                and first_last[1] < first_last[0] and held_out[1] < held_out[0])

    @property
    def above_chance(self) -> bool:
        """The final held-out accuracy reaches :data:`MIN_ACCURACY`."""
        return self.held_out_accuracy is not None and self.held_out_accuracy[1] >= MIN_ACCURACY

    def describe(self) -> str:
        """What was trained, where, and how long it took, in one sentence, from the run."""
        if self.side_by_side is None:
            return "the run stopped before its first step ended."
        side = self.side_by_side
        arrow = " -> ".join(str(w) for w in side.widths)
        parameters = side.model.n_parameters
        samples = self.steps * side.batch_size
        where = ("Numba's CUDA simulator on this CPU" if self.tier == "sim"
                 else "this machine's GPU")
        return (f"{arrow} ({parameters:,} parameters), {_steps(self.steps)} of "
                f"{side.batch_size} digits ({samples:,} samples drawn from {self.n_train:,} "
                f"training digits, {samples / self.n_train:.2f} epochs), Adam at lr "
                f"{self.settings.get('lr', 0):g}, seed {side.seed}: {self.seconds:.1f} s in "
                f"{where}, {self.seconds_per_step:.2f} s per step"
                + (f" (the first {_steps(side.compared)} ran twice: yours and gpulab's)"
                   if side.compared else ""))

    @property
    def seconds_per_step(self) -> float:
        """The run's time per step of one network (the compared steps count twice)."""
        compared = self.side_by_side.compared if self.side_by_side is not None else 0
        return self.seconds / max(self.steps + compared, 1)

    def versus_recipe(self) -> str:
        """Why the run is smaller than the course's recipe, from the run's own time."""
        from gpulab.nn.recipes import DIGITS

        widths = DIGITS["widths"]
        parameters = sum(a * b + b for a, b in zip(widths[:-1], widths[1:], strict=True))
        steps = DIGITS["epochs"] * -(-self.n_train // DIGITS["batch_size"])
        recipe = (f"the recipe (section 6) trains {' -> '.join(map(str, widths))} "
                  f"({parameters:,} parameters) for {steps} steps of {DIGITS['batch_size']}")
        if not self.steps:
            return f"The run stopped before its first step ended; {recipe}."
        if self.tier == "gpu":
            return f"On this GPU {recipe}, with your kernels, in the cell below."
        minutes = steps * self.seconds_per_step / 60
        mine = self.side_by_side.model.n_parameters
        return (f"This run is smaller than the course's: {recipe}. At this run's "
                f"{self.seconds_per_step:.2f} s per step, {steps} steps would take "
                f"{minutes:.0f} minutes in the simulator even on this network, and the "
                f"recipe's has {parameters / mine:.0f} times its parameters, each with its "
                "own threads in the update.")

    def report(self) -> str:
        lines = ["whose kernel ran:"]
        lines += [f"  {name:31s} {origin}" for name, origin in self.origins.items()]
        lines += [f"  note: {note}" for note in self.notes]
        if self.error:
            lines.append(f"training stopped: {self.error}")
        if self.side_by_side is not None:
            side = self.side_by_side
            if side.compared:
                lines.append(f"\nthe first {_steps(side.compared)} next to "
                             f"{side.reference_name} alone (same weights, same batches):")
                lines.append(side.table())
            lines.append(f"\ntrained: {self.describe()}")
        if self.stopped:
            lines.append(f"stopped early: {self.stopped}")
        if self.loss_first_last is not None:
            first, last = self.loss_first_last
            lines.append(f"batch loss: {first:.3f} (mean of the first "
                         f"{_steps(self.loss_window)}) -> {last:.3f} (mean of the last "
                         f"{self.loss_window})")
        if self.held_out_loss is not None:
            (before, after), (acc_before, acc_after) = self.held_out_loss, self.held_out_accuracy
            lines.append(f"held-out digits ({self.n_test}, never trained on): loss "
                         f"{before:.3f} -> {after:.3f}, accuracy {100 * acc_before:.1f}% -> "
                         f"{100 * acc_after:.1f}% (chance: {100 * self.chance:.0f}%)")
        return "\n".join(lines)

    def plot(self):
        """The batch loss of every step and the held-out accuracy after every step; returns
        the figure."""
        import matplotlib.pyplot as plt

        fig, (loss_ax, acc_ax) = plt.subplots(1, 2, figsize=(9, 3), layout="constrained")
        steps = np.arange(1, self.steps + 1)
        loss_ax.plot(steps, self.losses, ".-", label="batch loss (your kernels)")
        if self.evaluations:
            at = [e[0] for e in self.evaluations]
            loss_ax.plot(at, [e[1] for e in self.evaluations], "--", label="held-out loss")
            acc_ax.plot(at, [100 * e[2] for e in self.evaluations], ".-",
                        label="held-out accuracy")
        if self.side_by_side is not None and self.side_by_side.compared:
            loss_ax.axvspan(0.5, self.side_by_side.compared + 0.5, color="0.9",
                            label="next to gpulab's kernels")
        acc_ax.axhline(100 * self.chance, color="0.5", linestyle=":",
                       label=f"chance ({100 * self.chance:.0f}%)")
        acc_ax.axhline(100 * MIN_ACCURACY, color="C3", linestyle=":",
                       label=f"the check's bar ({100 * MIN_ACCURACY:.0f}%)")
        loss_ax.set(xlabel="step", ylabel="mean cross-entropy loss",
                    title="the loss, step by step")
        acc_ax.set(xlabel="step", ylabel="%", ylim=(0, 100),
                   title=f"held-out accuracy ({self.n_test} digits)")
        for ax in (loss_ax, acc_ax):
            ax.legend(fontsize=8)
        return fig

    def __str__(self) -> str:
        return self.report()


def your_kernels(kernels: dict) -> tuple[dict, dict[str, str], list[str]]:
    """Sort ``{gpulab kernel name: your kernel or None}`` into the kernels that can run
    (checked by :func:`gpulab.nn.backends.check_override`), whose kernel runs for every
    replaceable name, and notes on those left out (not written yet, or refused, and why)."""
    from gpulab.nn.backends import (
        OVERRIDABLE,
        KernelBackend,
        KernelOverrideError,
        check_override,
    )

    usable, notes = {}, []
    for name, kernel in (kernels or {}).items():
        if kernel is None or kernel is Ellipsis:
            continue
        try:
            slot = check_override(name, kernel)
        except KernelOverrideError as error:
            text = str(error)
            if "NotImplementedError" in text:
                notes.append(f"{name}: yours is not written yet, so gpulab's runs")
            else:
                notes.append(f"{name}: yours was refused, so gpulab's runs: {text}")
            continue
        usable[slot] = kernel
    backend = KernelBackend(kernels=usable)
    origins = {name: backend.origin(name) for name in OVERRIDABLE}
    return usable, origins, notes


def train_with_your_kernels(kernels: dict, data=None, show: bool = True,
                            **settings) -> YourTraining:
    """Train the digits network with your kernels in place of gpulab's (``{gpulab kernel name:
    your kernel}``; None, a stub or a kernel that does not fit leaves gpulab's in place, and
    the report says so). The first ``compared_steps`` steps also run on gpulab's kernels alone,
    on the same batches from the same weights, and are compared after each; then your kernels
    train on alone. After every step the held-out loss and accuracy are measured with the
    run's weights on NumPy (the same arithmetic; in the simulator, 359 digits through the
    kernels would cost more than the step). ``settings`` override :data:`TRAINING` (widths,
    steps, batch_size, lr, seed, compared_steps). With none of your kernels in the run (all
    stubs or refused) and no ``steps`` given, it is a preview of :data:`PREVIEW_STEPS` steps
    on gpulab's kernels, and its notes say so.

    Stops early at a step whose loss is not finite, or after a compared step that does not
    match gpulab's (what follows would train another network). Never raises for your
    kernels' sake: an error inside one of them ends the run and is reported. When ``show``,
    prints a progress line while it runs, then the report."""
    import time

    from gpulab import device
    from gpulab.nn import load_digits
    from gpulab.nn.backends import KernelBackend, KernelOverrideError
    from gpulab.nn.trainer import train_side_by_side

    unknown = set(settings) - set(TRAINING)
    if unknown:
        raise TypeError(f"unknown setting(s) {sorted(unknown)}; the settings are "
                        f"{', '.join(TRAINING)}")
    run_settings = {**TRAINING, **settings}
    data = data or load_digits(seed=0)
    usable, origins, notes = your_kernels(kernels)
    if not usable and "steps" not in settings:
        run_settings.update(steps=PREVIEW_STEPS, compared_steps=0)
        notes.append(f"none of your kernels is in this run yet, so it is a preview: "
                     f"{PREVIEW_STEPS} steps on gpulab's kernels alone. With yours it trains "
                     f"{TRAINING['steps']} steps.")
    run = YourTraining(usable, origins, notes, settings=run_settings, n_train=data.n_train,
                       n_test=data.n_test, tier=device.tier())
    widths = list(run_settings["widths"])
    steps, compared = int(run_settings["steps"]), int(run_settings["compared_steps"])
    started = time.perf_counter()

    def evaluate(model, step: int) -> None:
        weights = model.copy(backend="numpy")
        with np.errstate(all="ignore"):
            run.evaluations.append((step, float(weights.loss(data.X_test, data.y_test)),
                                    float(weights.accuracy(data.X_test, data.y_test))))

    def after_step(record) -> bool:
        step, loss = record.steps, record.losses[-1]
        evaluate(record.model, step)
        if show:
            print(f"\rstep {step}/{steps}: batch loss {loss:.3f}, held-out accuracy "
                  f"{100 * run.evaluations[-1][2]:.1f}% ({time.perf_counter() - started:.0f} s)",
                  end="", flush=True)
        if record.first_mismatch is not None:
            run.stopped = (f"step {record.first_mismatch} differs from gpulab's kernels, so "
                           "the rest of the run would train another network")
            return False
        if not math.isfinite(loss):
            run.stopped = f"the loss of step {step} is {loss}"
            return False
        return True

    try:
        from gpulab.nn import MLP

        evaluate(MLP(widths, "relu", "numpy", seed=run_settings["seed"]), 0)
        with np.errstate(all="ignore"):
            run.side_by_side = train_side_by_side(
                KernelBackend(kernels=usable), data.X_train, data.y_train, widths,
                reference="kernels", steps=steps, batch_size=run_settings["batch_size"],
                lr=run_settings["lr"], seed=run_settings["seed"], compared_steps=compared,
                after_step=after_step)
    except KernelOverrideError as error:
        run.error = str(error)
    run.seconds = time.perf_counter() - started
    if show:
        print(("\n" if run.evaluations[1:] else "") + run.report())
    return run


FORWARD_KERNELS = ("matmul", "bias_activation", "softmax_cross_entropy")


@dataclass
class TrainedRun:
    """A run of :func:`train_with_your_kernels` with this chapter's kernels in it, none of
    which crashed: the evidence the training check's mistakes are told from. It has no
    ``where``: the run is the case (check_training trains nothing) and its failures name the
    step."""

    run: YourTraining

    @property
    def side(self):
        return self.run.side_by_side

    @property
    def yours(self) -> str:
        return ", ".join(self.run.kernels)

    @property
    def step(self) -> int | None:
        """The first compared step after which the run differs from gpulab's kernels'."""
        return self.side.first_mismatch

    @property
    def loss_differs(self) -> bool:
        """The loss of the first mismatched step differs from gpulab's: the forward pass."""
        k = self.step - 1
        return not math.isclose(self.side.losses[k], self.side.reference_losses[k],
                                rel_tol=1e-5, abs_tol=1e-6)

    def suspects(self, forward: bool) -> str:
        """A hint naming the learner's forward (or else backward and update) kernels."""
        named = [n for n in self.run.kernels if (n in FORWARD_KERNELS) == forward]
        return (f"suspect {', '.join(named) or self.yours}: run its chapter's check again "
                "(every element, several seeds), and compare with gpulab.kernel_source(name).")

    @property
    def first_not_finite(self) -> int:
        return next(k + 1 for k, loss in enumerate(self.run.losses) if not math.isfinite(loss))

    @property
    def matched(self) -> str:
        return f"the first {_steps(self.side.compared)} matched gpulab's kernels"


def _forward_differs(e: TrainedRun) -> str:
    k = e.step - 1
    return (f"the loss of step {e.step} is {e.side.losses[k]:.6g}, gpulab's "
            f"{e.side.reference_losses[k]:.6g}: the forward pass differs. Your kernels in this "
            f"run: {e.yours}")


def _update_differs(e: TrainedRun) -> str:
    k = e.step - 1
    return (f"after step {e.step}, {e.side.worst[k]} differs from gpulab's by "
            f"{e.side.differences[k]:.3g} (rounding allows {e.side.tolerance:.1e}): the backward "
            f"pass or the update differs. Your kernels in this run: {e.yours}")


def _did_not_fall(e: TrainedRun) -> str:
    (first, last), (before, after) = e.run.loss_first_last, e.run.held_out_loss
    return (f"{e.matched}, but over {_steps(e.run.steps)} the loss did not fall: batch loss "
            f"{first:.3f} (first {_steps(e.run.loss_window)}) -> {last:.3f} (last "
            f"{e.run.loss_window}), held-out loss {before:.3f} -> {after:.3f}"
            + _changed_learning_rate(e))


def _changed_learning_rate(e: TrainedRun) -> str:
    """', with lr=0.0003 where the chapter's run uses 0.03', or '' at the chapter's."""
    lr = e.run.settings.get("lr", TRAINING["lr"])
    return ("" if lr == TRAINING["lr"] else
            f", with lr={lr:g} where the chapter's run uses {TRAINING['lr']:g}")


# What check_training tells from a run, in the order it is tried (after a result that is not a
# run, gpulab's kernels in place of this chapter's, and a kernel that crashed).
TRAINING_MISTAKES = (
    Mistake("fewer steps compared with gpulab's kernels than the check asks (compared_steps=)",
            lambda e: e.step is None and e.side.compared < TRAINING["compared_steps"],
            lambda e: f"only {_steps(e.side.compared)} of this run ran next to gpulab's kernels; "
                      f"the check needs the first {TRAINING['compared_steps']}: a kernel right on "
                      "step 1 only (a bias correction stuck at step 1's value) shows from step 2",
            lambda e: (f"train again with at least {TRAINING['compared_steps']} steps (steps=..., "
                       f"the chapter's run takes {TRAINING['steps']})"
                       if e.run.steps < TRAINING["compared_steps"] else
                       f"train again with compared_steps left at its "
                       f"{TRAINING['compared_steps']}."),
            recognised_from="host code"),
    Mistake("a compared step's loss differs from gpulab's (the forward kernels blamed)",
            lambda e: not e.run.matches and e.loss_differs, _forward_differs,
            lambda e: e.suspects(forward=True)),
    Mistake("a compared step's weights differ from gpulab's (the backward or update kernels "
            "blamed)", lambda e: not e.run.matches, _update_differs,
            lambda e: e.suspects(forward=False)),
    Mistake("a loss that became inf/NaN (the run diverged)", lambda e: not e.run.finite,
            lambda e: (f"{e.matched}, but the loss of step {e.first_not_finite} is "
                       f"{e.run.losses[e.first_not_finite - 1]}: the run diverged with your "
                       f"kernels ({e.yours})"),
            "a step that moves the weights too far makes the loss overflow: try a smaller "
            "learning rate (lr=...); if the same settings train on gpulab's kernels alone "
            "(pass {}), suspect adam_update, the kernel that moves the weights."),
    Mistake("a loss that did not fall (too few steps, or too large a learning rate)",
            lambda e: not e.run.loss_fell, _did_not_fall,
            f"train longer (steps=..., the chapter's run takes {TRAINING['steps']}) or with a "
            "smaller learning rate (lr=...)."),
    Mistake(f"a held-out accuracy under {100 * MIN_ACCURACY:.0f} % (too few steps)",
            lambda e: not e.run.above_chance,
            lambda e: (f"the loss fell, but after {_steps(e.run.steps)} the held-out accuracy "
                       f"is {100 * e.run.held_out_accuracy[1]:.1f}%, under the "
                       f"{100 * MIN_ACCURACY:.0f}% this check asks (four times chance)"
                       + _changed_learning_rate(e)),
            f"train longer: steps=... (the chapter's run takes {TRAINING['steps']})."),
)


TRAINING_CHECK = CheckSpec(
    "your kernels train the network", "the run of train_with_your_kernels(...)", "",
    TRAINING_MISTAKES, title="4. your kernels train the network", call="check_training(run)",
    holds="the learner's loss-gradient and Adam kernels (and any chapter 05–06 kernels pasted "
          "in) train the digits' network (by default 64 → 16 → 10 for 16 steps of 16 digits; "
          "the settings are the learner's to change), the first 2 steps or more equal to "
          "gpulab's kernels' run to float32 rounding, then alone: the loss stays finite, "
          "the batch loss "
          "(the mean of the last quarter of the steps below that of the first) and the "
          "held-out loss fall and the held-out accuracy reaches 40 % (chance: 10 %)",
    also="something other than the run of train_with_your_kernels; gpulab's kernels in place "
         "of this chapter's two (not attempted); a kernel that crashed is named")


def check_training(run, show: bool = True) -> CheckResult:
    """Judges ``run``, what :func:`train_with_your_kernels` returned; it trains nothing
    itself (:data:`TRAINING_MISTAKES`, a :class:`TrainedRun`). This chapter's kernels are
    :data:`THIS_CHAPTER`; the loss means are over :data:`LOSS_WINDOW` of the steps; the bar is
    :data:`MIN_ACCURACY`. A compared step's loss differs when it is not within 1e-5 relative
    (1e-6 absolute) of gpulab's."""

    def body(seed: int) -> str:
        if not isinstance(run, YourTraining):
            raise CheckFailedError(f"check_training needs the result of "
                                   f"train_with_your_kernels, not {type(run).__name__}.",
                                   "run = ch07.train_with_your_kernels(...), then "
                                   "check_training(run).")
        missing = [name for name in THIS_CHAPTER if name not in run.kernels]
        if missing:
            raise NotAttemptedError(
                f"gpulab's kernel ran for {', '.join(missing)}: the network trained, but not "
                "with this chapter's kernels of yours.",
                "pass the kernels you wrote in exercises 1 and 2 once their checks pass.")
        if run.error:
            raise CheckFailedError(f"training stopped: {run.error}",
                                   "run that kernel's own check again: it shows the mistake "
                                   "on a smaller problem.")
        TRAINING_CHECK.reject(TrainedRun(run))
        for name, spec, reaches_past in (
                ("softmax_cross_entropy_backward", LOSS_GRADIENT, "a loss scale above 1"),
                ("adam_update", ADAM, "weight decay and many steps")):
            if not spec.passed(run.kernels[name]):
                add_note(f"your {name} has not passed {spec.call.split('(')[0]} in this "
                         "session: this run matched gpulab's with scale = 1 / batch and no "
                         f"weight decay, and its own check tries {reaches_past} too.")
        side = run.side_by_side
        first, last = run.loss_first_last
        before, after = run.held_out_loss
        acc_before, acc_after = run.held_out_accuracy
        return (f"the first {_steps(side.compared)} with your {', '.join(run.kernels)} matched "
                f"gpulab's kernels to rounding; over {_steps(run.steps)} the batch loss fell "
                f"from {first:.3f} to {last:.3f} and the held-out accuracy rose from "
                f"{100 * acc_before:.1f}% to {100 * acc_after:.1f}% (loss {before:.3f} -> "
                f"{after:.3f}).")

    return TRAINING_CHECK.run(body, 0, show, learner=tuple(getattr(run, "kernels", {}).values()))


check_training.__doc__ = TRAINING_CHECK.described(check_training.__doc__)


__all__ = [
    "ADAM", "ADAM_LAUNCH_MISTAKES", "ADAM_MISTAKES", "ADAM_OTHER_MISTAKES",
    "ADAM_RESULT_MISTAKES", "AdamRun", "LOSS_GRADIENT", "MINIBATCHES", "MIN_ACCURACY",
    "THIS_CHAPTER",
    "MINIBATCH_MISTAKES", "MINIBATCH_SEED_MISTAKES", "TRAINING", "TRAINING_CHECK",
    "TRAINING_MISTAKES", "YourTraining", "check_adam",
    "check_loss_gradient", "check_minibatches", "check_training", "train_with_your_kernels",
    "your_kernels",
]
