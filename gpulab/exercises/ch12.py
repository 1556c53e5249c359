"""Chapter 12's exercises: a latency percentile, a fused inference kernel that then serves the
chapter's requests, and joules per thousand inferences.

- :func:`check_percentile`: exercise 1, ``percentile(latencies, q)``, the **nearest-rank**
  percentile, always one of the measured values.
- :func:`check_inference`: exercise 2, the ``@cuda.jit`` kernel ``infer(X, W1, b1, W2, b2,
  logits, out)``: one thread per sample runs the two-layer network's forward pass (dense +
  bias + ReLU, then dense + bias) and writes its class. Then :func:`served_by` gives the
  chapter's server a :class:`~gpulab.serving.kernel_model.KernelModel` on it, and the load
  test runs on it.
- :func:`check_joules_per_thousand`: exercise 3, ``joules_per_thousand(times_s, watts,
  n_inferences)``, the board's energy per thousand inferences, in joules, idle stretches
  included (the board draws them too).

Values are random; a failure names the seed to repeat it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from gpulab.exercises.evidence import OutputWrites, is_number, writes_of
from gpulab.exercises.grid_stride import one_per_thread, written_by_several
from gpulab.exercises.mistakes import Mistake
from gpulab.exercises.results import GLOBAL_INDEX_HINT, CheckFailedError, KernelError
from gpulab.exercises.running import call_learner, launch, padded, read_back
from gpulab.exercises.source_rules import range_over_typed_in_count
from gpulab.exercises.spec import CheckSpec, reject_unshared_work, under_two_blocks
from gpulab.exercises.trial import Trial, tier_key

# --- exercise 1: nearest-rank percentile ------------------------------------------------------

PERCENTILE_STUB_HINT = ("sort the latencies, find the rank ceil(q · n / 100) (counting from 1), "
                        "and return the value at that rank.")
NOT_A_NUMBER_HINT = "the function must end by returning the number it found."


def exact_rank(q: float, n: int) -> int:
    """The nearest rank ceil(q·n/100), at least 1, computed exactly for the decimal ``q`` is
    written as (86.4, not the binary float nearest it: 86.4 · 375 / 100 is 324, which floating
    point makes 324.00000000000006)."""
    return max(1, math.ceil(Fraction(repr(float(q))) * n / 100))


def nearest_rank(values, q: float) -> float:
    ordered = sorted(values)
    return ordered[exact_rank(q, len(ordered)) - 1]


@dataclass
class Percentile:
    """A learner's percentile ``got`` for ``values`` and ``q``: the evidence its mistakes are
    told from."""

    got: object
    values: list
    q: float
    where: str

    @property
    def ordered(self) -> list:
        return sorted(self.values)

    @property
    def rank(self) -> int:
        return exact_rank(self.q, len(self.values))

    def near(self, value) -> bool:
        return math.isclose(float(self.got), float(value), rel_tol=1e-9)

    @property
    def divided_first(self) -> float:
        """q / 100 · n as floating point computes it, q / 100 first."""
        return self.q / 100 * len(self.values)

    @property
    def one_too_high(self) -> bool:
        """Is the answer the value one rank above the nearest rank's (the largest at most)?"""
        return self.near(self.ordered[min(self.rank, len(self.values) - 1)])

    @property
    def summary(self) -> str:
        return f"expected {nearest_rank(self.values, self.q)}, got {self.got}"


def _not_a_number(got) -> bool:
    return not is_number(got) or not math.isfinite(float(got))


PERCENTILE_MISTAKES = (
    Mistake("a result that is not a number (no return)", lambda e: _not_a_number(e.got),
            lambda e: f"you returned {e.got!r}: a number was expected", NOT_A_NUMBER_HINT),
    Mistake("mean + 2σ", lambda e: e.near(np.mean(e.values) + 2 * np.std(e.values)),
            lambda e: f"{e.summary}: that is the mean + 2σ",
            "latencies are skewed (a long tail), not normal; the percentile is a rank in the "
            "sorted values, not a formula on the mean."),
    Mistake("the rank itself, not the value at it", lambda e: e.near(e.rank)
            and not e.near(e.ordered[e.rank - 1]),
            lambda e: f"{e.summary}: that is the rank, not the latency at that rank",
            "the rank says where to look in the sorted list; return the latency found there."),
    Mistake("q / 100 computed first: one rank too high where q·n/100 is whole but q / 100 · n "
            "comes out just above it in floating point (as NumPy's method='inverted_cdf' does)",
            lambda e: e.one_too_high and math.ceil(e.divided_first) == e.rank + 1,
            lambda e: (f"{e.summary}: one rank too high. q·n/100 = {e.q:g}·{len(e.values)}/100 "
                       f"is {e.rank} exactly, but {e.q:g} / 100 · {len(e.values)} is "
                       f"{e.divided_first!r} in floating point (q / 100 is not exact in binary), "
                       f"and rounding that up gives rank {e.rank + 1}; NumPy's "
                       "np.percentile(..., method='inverted_cdf') rounds the same way"),
            "keep the rank's arithmetic exact: q·n is a whole number here, and dividing it by "
            "100 last gives the whole number it should; q / 100 first carries a binary "
            "fraction's error into the rounding up."),
    Mistake("off by one rank (one too high)", lambda e: e.one_too_high,
            lambda e: (f"{e.summary}: off by one rank (one too high)"
                       + (", as the rank ceil(q·(n + 1)/100) gives, another convention: "
                          "nearest-rank counts n values, not n + 1"
                          if math.ceil(e.q * (len(e.values) + 1) / 100) == e.rank + 1 else "")),
            "ranks count from 1 but a Python list counts from 0; and where q·n/100 is a whole "
            "number, that number is the rank."),
    Mistake("off by one rank (one too low)", lambda e: e.near(e.ordered[max(e.rank - 2, 0)]),
            lambda e: f"{e.summary}: off by one rank (one too low)",
            "the rank is q·n/100 rounded up, not down, and ranks count from 1 while the list "
            "counts from 0: one step, not two."),
    Mistake("sorted from the largest", lambda e: e.near(e.ordered[len(e.values) - e.rank])
            and not e.near(e.ordered[e.rank - 1]),
            lambda e: f"{e.summary}: that is the value at that rank counted from the largest",
            "rank 1 is the smallest latency: sort in ascending order."),
    Mistake("the median as the mean of the two middle values",
            lambda e: (e.q == 50 and len(e.values) % 2 == 0
                       and e.near((e.ordered[len(e.values) // 2 - 1]
                                   + e.ordered[len(e.values) // 2]) / 2)),
            lambda e: (f"{e.summary}: the mean of the two middle values, the median as "
                       "statistics defines it for an even count, which is not a measured "
                       "latency"),
            "p50 here is a nearest-rank percentile like the others: the rank q·n/100 (rounded "
            "up), one measured value, for an even count too."),
    Mistake("interpolation (np.percentile's default)",
            lambda e: e.near(np.percentile(e.values, e.q)),
            lambda e: f"{e.summary}: that interpolates between two values",
            "np.percentile's default interpolates; nearest-rank returns a measured value."),
    Mistake("a rank taken without sorting", lambda e: e.near(list(e.values)[e.rank - 1]),
            lambda e: f"{e.summary}: the values were not sorted",
            "sort the values before taking a rank: the list comes in arrival order."),
    Mistake("the mean", lambda e: e.near(np.mean(e.values)),
            lambda e: f"{e.summary}: that is the mean, not a percentile",
            PERCENTILE_STUB_HINT),
    Mistake("the maximum", lambda e: e.near(np.max(e.values)),
            lambda e: f"{e.summary}: that is the maximum",
            "take the value at rank ceil(q · n / 100), not at rank n."),
    Mistake("another value", lambda e: True, lambda e: e.summary, PERCENTILE_STUB_HINT),
)
PERCENTILE = CheckSpec(
    "percentile", "percentile(latencies, q) -> float", PERCENTILE_STUB_HINT,
    PERCENTILE_MISTAKES,
    title="1. nearest-rank percentile", call="check_percentile(percentile)",
    holds="the nearest-rank percentile (the ceil(q · n / 100)-th smallest, a measured value) of "
          "random skewed lists of random lengths, q = 50, 90, 99 and a random q, two lists where "
          "q·n/100 is whole (in one, q / 100 · n comes out just above it in floating point), "
          "and one where it is a hair above a whole number (60.1 · 203 / 100 = 122.003)",
    also="a function that raises (named with the call)")


def _percentile_case(function, rng: np.random.Generator, q: float, n: int, seed) -> None:
    """One list of n lognormal latencies for ``percentile(latencies, q)``; fail with the
    mistake :data:`PERCENTILE_MISTAKES` name unless it returns the nearest-rank value exactly.
    A tenth of the list repeats lower values, as a clock's resolution gives them."""
    drawn = np.round(rng.lognormal(0.5, 0.8, n), 4)
    # repeats among the lowest 40 % only (the values near the rank stay distinct, so that a
    # rank one off still shows): a quarter of those become copies of the others
    ascending = np.argsort(drawn)
    rank = exact_rank(q, n)
    # kept distinct: the values a rank one off, counted from the largest, or read unsorted give
    kept = set(ascending[max(n - rank - 2, 0):n - rank + 3]) | set(range(rank - 3, rank + 2))
    low = np.array([i for i in ascending[:int(0.4 * n)] if i not in kept], dtype=np.int64)
    if low.size >= 4:
        repeats = rng.choice(low, low.size // 4, replace=False)
        drawn[repeats] = drawn[rng.choice(np.setdiff1d(low, repeats), repeats.size)]
    values = [float(v) for v in drawn]
    got = call_learner(function, list(values), q, stub_hint=PERCENTILE_STUB_HINT,
                       call=f"percentile(<{n} latencies>, {q})")
    if _not_a_number(got) or float(got) != nearest_rank(values, q):
        PERCENTILE.reject(Percentile(got, values, q, f"{n} latencies, q = {q}, seed={seed}"))


# (q, n) with q·n/100 whole but q / 100 · n above it in float64 (0.56 · 25 = 14.000000000000002):
# a rank computed with q / 100 first, as NumPy's inverted_cdf does, is one too high there.
FLOAT_RANK_TRAPS = tuple((q, n) for q in range(55, 99) for n in range(7, 480)
                         if q * n % 100 == 0 and math.ceil(q / 100 * n) > q * n // 100)
# (q, n) with one decimal in q and q·n/100 just above a whole number (60.1 · 203 / 100 = 122.003):
# the rank rounded up with whole-number arithmetic, (q·n + 99) // 100, is one too low there. No
# float or Fraction trap among them (ceil(q · n / 100) is the exact rank). Every seventh q from
# 60.1 to 98.0 keeps the table to 174 cases (all 380 would give 1,274: more than a draw needs,
# and built at import).
DECIMAL_RANK_CASES = tuple((q10 / 10, n) for q10 in range(601, 981, 7) if q10 % 10
                           for n in range(7, 480) if n % 100 and 0 < q10 * n % 1000 < 10
                           and math.ceil(q10 / 10 * n / 100) == -(-q10 * n // 1000)
                           == math.ceil(Fraction(q10 / 10) * n / 100))


# The draws a check's case may take (a few at most, in practice); past it, the NumPy or Python
# the check computes with has been changed (a learner's patch), and the check says so.
DRAWS_AT_MOST = 10_000


def _cannot_draw(what: str) -> CheckFailedError:
    return CheckFailedError(
        f"the check could not draw {what} in {DRAWS_AT_MOST:,} tries: a function of NumPy's or "
        "Python's that it computes with no longer gives what it should (was one replaced?).",
        "restart the notebook's kernel (Kernel → Restart) and run the cells again without "
        "replacing NumPy's or Python's functions.")


@PERCENTILE.check
def check_percentile(function, seed: int | None = None) -> str:
    """Lognormal lists of 7 to 479 values (never a multiple of 100; for q = 90 one where rounding
    q·n/100 to the nearest rank falls short of rounding up) for q = 90, 50, 99 and a
    random q of 60 to 98, then 200 values at q = 99 (rank 198 exactly) and one of
    :data:`FLOAT_RANK_TRAPS` (q·n/100 whole, q / 100 · n just above it in floating point) and
    one of :data:`DECIMAL_RANK_CASES` (q·n/100 a hair above a whole number), then q = 50 on
    an even count (the nearest rank, not the mean of the two middle values), a
    tenth of each list repeats of lower values; an answer must be the nearest-rank value
    exactly."""
    rng = np.random.default_rng(seed)
    cases = []
    for q in (90, 50, 99, float(np.round(rng.uniform(60, 98), 1))):
        n = int(rng.integers(7, 480))
        # never a (q, n) whose q·n/100 is whole for the decimal q but not for the float nearest
        # it, computed in floating point (86.4 · 375 / 100 is 324.00000000000006) or exactly
        # (Fraction(61.6) · 125 / 100 is just above 77): the text does not ask to handle that
        for _ in range(DRAWS_AT_MOST):
            if not (n % 100 == 0 or q == 90 and not 0 < 90 * n % 100 < 50  # round() < ceil()
                    or math.ceil(q * n / 100) != exact_rank(q, n)
                    or math.ceil(Fraction(q) * n / 100) != exact_rank(q, n)):
                break
            n = int(rng.integers(7, 480))
        else:
            raise _cannot_draw("the lists")
        cases.append((q, n))
    cases.append((99, 200))  # q·n/100 whole: the rank is exactly 198
    for q, n in cases:
        _percentile_case(function, rng, q, n, seed)
    # drawn after the lists above, which stay as they were before it was added
    cases.append(FLOAT_RANK_TRAPS[int(rng.integers(len(FLOAT_RANK_TRAPS)))])
    _percentile_case(function, rng, *cases[-1], seed)
    cases.append(DECIMAL_RANK_CASES[int(rng.integers(len(DECIMAL_RANK_CASES)))])
    _percentile_case(function, rng, *cases[-1], seed)
    # the median of an even count: the nearest rank n / 2, not the mean of the two middle
    # values (the first q = 50 list is odd half the time, where the two agree)
    cases.append((50, 2 * int(rng.integers(4, 240))))
    _percentile_case(function, rng, *cases[-1], seed)
    return f"all {len(cases)} lists right (seed={seed})."


# --- exercise 2: a fused inference kernel, then served -------------------------------------------

INFER_STUB_HINT = (
    "one thread per sample: find your sample, stop if it is past the end of the batch; set your "
    "row of logits to the output biases; for each hidden unit, compute it (dot product, bias, "
    "ReLU) and add its share to every logit; then write the index of the largest logit. The "
    "hints above the cell go step by step.")
# Sizes of a check's problems: the batch (1-D trial), and the widths (inputs, hidden, classes);
# more classes than the digits' 10 in the second problem, so that 10 typed in (a local array of
# 10 logits) fails.
INFER_BATCH_RANGE = {"sim": (70, 200), "gpu": (3000, 9000)}
INFER_WIDTHS = {"sim": ((5, 12), (9, 17), (11, 14)), "gpu": ((24, 90), (60, 200), (11, 24))}
INFER_SQUARE = {"sim": (6, 10), "gpu": (12, 40)}
UNWRITTEN = -12345  # out starts as this: a sample still holding it got no answer (not -1,
# which a kernel whose best class starts at -1 writes)
ALL_NEGATIVE_SHARE = 0.3  # of the samples whose logits are all below 0


@dataclass
class InferenceProblem:
    """One batch for the inference kernel: inputs, weights and biases (float32), and the two
    classes ``tie`` = (s, d), 0 < s < d, that share their weights (so their logits tie exactly)."""

    X: np.ndarray
    W1: np.ndarray
    b1: np.ndarray
    W2: np.ndarray
    b2: np.ndarray
    tie: tuple[int, int]

    @property
    def widths(self) -> tuple[int, int, int]:
        return self.X.shape[1], self.W1.shape[1], self.W2.shape[1]

    def logits(self, relu=True, bias1=True, bias2=True, W1=None, b1=None, W2=None, b2=None,
               relu_first=False, activation=None, carried=False) -> np.ndarray:
        """The logits in float64, or those of a variant (no ReLU, a bias left out, other
        weights or biases, the ReLU before b1, another ``activation`` in place of the ReLU,
        each hidden unit's sum ``carried`` on from the unit before); the tied classes' logits
        are made exactly equal (unless W2 is another)."""
        X = self.X.astype(np.float64)
        W1 = (self.W1 if W1 is None else W1).astype(np.float64)
        W2 = self.W2 if W2 is None else W2
        b1 = (self.b1 if b1 is None else b1).astype(np.float64) if bias1 else 0.0
        b2 = self.b2 if b2 is None else b2
        hidden = X @ W1 + (0.0 if relu_first else b1)
        if carried:
            hidden = np.cumsum(hidden, axis=1)
        if activation is not None:
            hidden = activation(hidden)
        elif relu:
            hidden = np.maximum(hidden, 0.0) + (b1 if relu_first else 0.0)
        z = hidden @ W2.astype(np.float64) + (b2.astype(np.float64) if bias2 else 0.0)
        s, d = self.tie
        if W2 is self.W2:
            z[:, d] = z[:, s]
        return z

    def classes(self) -> np.ndarray:
        return np.argmax(self.logits(), axis=1)


def inference_problem(rng: np.random.Generator, batch: int, n_in: int, n_hidden: int,
                      n_classes: int, hidden_scale: float = 1.0) -> InferenceProblem:
    """Random inputs and weights with: a hidden layer about half negative before its ReLU (so
    the ReLU matters), biases as large as the products (so each matters), two classes with the
    same weights (an exact tie on the samples where they win), ~30 % of samples with only
    negative logits, and no other near-tie (so float32 rounding cannot change an answer).
    ``hidden_scale`` scales the first layer's weights and biases: at 8 many hidden units pass
    6 (so a ReLU6, clipped there, shows)."""
    f32 = np.float32
    X = rng.standard_normal((batch, n_in)).astype(f32)
    W1 = (rng.standard_normal((n_in, n_hidden)) * (hidden_scale / math.sqrt(n_in))).astype(f32)
    b1 = (rng.normal(0, 0.8, n_hidden) * hidden_scale).astype(f32)
    hidden = np.maximum(X.astype(np.float64) @ W1 + b1, 0)
    W2 = rng.standard_normal((n_hidden, n_classes - 1)) / math.sqrt(n_hidden / 2)
    b2 = rng.normal(0, 0.8, n_classes - 1)
    winners = np.argmax(hidden @ W2 + b2, axis=1)
    s = int(np.bincount(winners, minlength=n_classes - 1)[:-1].argmax())  # not the last
    if s == 0:  # classes 0 and 1 swapped: a tie on class 0 looks like a search that skips it
        W2[:, [0, 1]], b2[[0, 1]], s = W2[:, [1, 0]], b2[[1, 0]], 1
    d = int(rng.integers(s + 1, n_classes))
    W2 = np.insert(W2, d, W2[:, s], axis=1).astype(f32)
    b2 = np.insert(b2, d, b2[s])
    top = (hidden @ W2 + b2).max(axis=1)
    b2 = (b2 - np.quantile(top, ALL_NEGATIVE_SHARE) - 0.05).astype(f32)
    problem = InferenceProblem(X, W1, b1, W2, b2, (s, d))
    for _ in range(50):  # redraw the samples whose two best classes are nearly tied
        z = np.delete(problem.logits(), d, axis=1)
        best_two = np.sort(z, axis=1)[:, -2:]
        close = (best_two[:, 1] - best_two[:, 0] < 0.05) | (np.abs(best_two[:, 1]) < 0.02)
        if not close.any():
            break
        X[close] = rng.standard_normal((int(close.sum()), n_in)).astype(f32)
    return problem


@dataclass
class Answers:
    """The classes a kernel wrote (``got``, :data:`UNWRITTEN` where it wrote none) for a
    problem: the evidence the inference check's mistakes are told from."""

    got: np.ndarray
    problem: InferenceProblem
    trial: Trial
    scratch_zeroed: bool = False  # set when the kernel is right only with a zeroed scratch
    zeroed_wrong: int = -1  # samples still wrong with a zeroed scratch, where zero changed some

    @property
    def where(self) -> str:
        n_in, n_hidden, n_classes = self.problem.widths
        return f"{self.trial}, widths {n_in} → {n_hidden} → {n_classes}"

    @property
    def want(self) -> np.ndarray:
        return self.problem.classes()

    @property
    def wrong(self) -> np.ndarray:
        return np.flatnonzero(self.got != self.want)

    @property
    def unwritten(self) -> np.ndarray:
        return np.flatnonzero(self.got == UNWRITTEN)

    def like(self, answers) -> bool:
        """Does ``got`` equal ``answers`` on nearly every sample (95 %), and on most (80 %) of
        the samples where either differs from the right classes? The second part keeps a
        mistake that changes a few classes from naming a kernel that got a few others wrong."""
        if answers is None:
            return False
        answers = np.asarray(answers)
        differ = (answers != self.want) | (self.got != self.want)
        return (bool(np.any(answers != self.want))
                and float(np.mean(self.got == answers)) >= 0.95
                and float(np.mean(self.got[differ] == answers[differ])) >= 0.8)

    def like_logits(self, z) -> bool:
        return z is not None and self.like(np.argmax(z, axis=1))

    @property
    def square(self) -> bool:
        n_in, n_hidden, n_classes = self.problem.widths
        return n_in == n_hidden == n_classes

    def samples(self, indices) -> str:
        indices = list(indices)
        shown = ", ".join(str(int(i)) for i in indices[:4])
        return f"sample{'s' if len(indices) > 1 else ''} {shown}{', …' if len(indices) > 4 else ''}"

    @property
    def summary(self) -> str:
        i = int(self.wrong[0])
        return (f"{len(self.wrong)} of {len(self.got)} samples got the wrong class (e.g. sample "
                f"{i}: {int(self.got[i])}, expected {int(self.want[i])})")



def _last_on_ties(e: Answers) -> np.ndarray:
    z = e.problem.logits()
    return z.shape[1] - 1 - np.argmax(z[:, ::-1], axis=1)


def _hidden_cut(e: Answers) -> tuple[int, str] | None:
    """(m, "inputs" or "classes") when the answers are those of only the first m hidden units,
    m the number of inputs or of classes."""
    n_in, n_hidden, n_classes = e.problem.widths
    p = e.problem
    cuts = [(np.argmax(p.logits(W1=p.W1[:, :m], b1=p.b1[:m], W2=p.W2[:m]), axis=1), m, what)
            for m, what in ((n_in, "inputs"), (n_classes, "classes")) if m < n_hidden]
    cuts = [(float(np.mean(e.got == z)), m, what) for z, m, what in cuts if e.like(z)]
    return max(cuts)[1:] if cuts else None


def _bias_in_loop(e: Answers) -> tuple[str, int, str] | None:
    """(bias, times, loop) when the answers are those of b1 added once per input (and once
    more), or b2 once per hidden unit: a bias added inside the loop over the products."""
    n_in, n_hidden, _ = e.problem.widths
    p = e.problem
    for k in (n_in, n_in + 1):
        if e.like_logits(p.logits(b1=k * p.b1)):
            return "b1", k, "inputs"
    for k in (n_hidden, n_hidden + 1):
        if e.like_logits(p.logits(b2=k * p.b2)):
            return "b2", k, "hidden units"
    return None


def _first_skipped(e: Answers) -> np.ndarray:
    return np.argmax(e.problem.logits()[:, 1:], axis=1) + 1


INFER_MISTAKES = (
    Mistake("nothing written", lambda e: len(e.unwritten) == len(e.got),
            "no sample got an answer: out still holds what it started with",
            "each thread writes its sample's class into out, at its own index, inside the "
            "guard."),
    Mistake("`threadIdx.x` alone as the index (only the first block's samples)",
            lambda e: len(e.unwritten) and e.unwritten[0] == e.trial.threads_per_block
            and len(e.unwritten) == len(e.got) - e.trial.threads_per_block,
            lambda e: (f"only the first {e.trial.threads_per_block} samples got an answer, "
                       "as if every block handled the first block's samples"),
            GLOBAL_INDEX_HINT),
    Mistake("the last, partial block skipped",
            lambda e: len(e.unwritten) and e.unwritten[0] == (
                len(e.got) // e.trial.threads_per_block) * e.trial.threads_per_block
            and e.unwritten[-1] == len(e.got) - 1,
            lambda e: (f"the last, partial block's samples ({e.samples(e.unwritten)}) got no "
                       "answer"),
            "the guard should stop only the threads whose sample is past the end of the batch."),
    Mistake("the last sample skipped (a guard one short)",
            lambda e: e.unwritten.tolist() == [len(e.got) - 1],
            lambda e: f"only the last sample, {len(e.got) - 1}, got no answer",
            "the guard should stop only the threads whose sample is past the end of the batch: "
            "the last sample's index is one below the batch size, and it needs its answer too."),
    Mistake("some samples left unanswered", lambda e: len(e.unwritten) > 0,
            lambda e: f"{e.samples(e.unwritten)} got no answer ({len(e.unwritten)} in all)",
            "one thread per sample, each writing its own sample's class: check the index."),
    Mistake("`logits` used before it is set (a scratch holds leftovers)",
            lambda e: e.scratch_zeroed or e.zeroed_wrong >= 0,
            lambda e: ("your kernel is right only when the logits scratch starts at zero"
                       if e.scratch_zeroed else
                       "your kernel's answers change with what the logits scratch held before "
                       f"it ran (with it zeroed, {e.zeroed_wrong} of {len(e.got)} samples are "
                       "still wrong: another mistake, for after this one)")
            + ": it adds into its row of logits without setting it first, and on a GPU (and "
            "in this check) that memory holds leftovers",
            "set your sample's row of logits (to the output biases) before adding into it."),
    Mistake("the same class for every sample (the loop's variable, not the best)",
            lambda e: len(set(e.got.tolist())) == 1 and len(set(e.want.tolist())) > 1,
            lambda e: (f"{e.summary}: every sample got class {int(e.got[0])}: out holds the "
                       "same value whatever the logits (the loop's last index, not the best "
                       "class found?)"), "out[i] is the class the search kept as the best."),
    Mistake("the hidden layer's ReLU forgotten",
            lambda e: e.like_logits(e.problem.logits(relu=False)),
            lambda e: f"{e.summary}: those are the classes without the hidden layer's ReLU",
            "each hidden unit goes through the ReLU (negative sums become 0) before it feeds "
            "the output layer."),
    Mistake("the ReLU written as abs",
            lambda e: e.like_logits(e.problem.logits(activation=np.abs)),
            lambda e: (f"{e.summary}: those are the classes with |h| for each hidden unit: a "
                       "ReLU keeps a positive sum and makes a negative one 0, it does not flip "
                       "its sign"),
            "the ReLU is max(h, 0)."),
    Mistake("a ReLU clipped at 6 (ReLU6)",
            lambda e: e.like_logits(e.problem.logits(
                activation=lambda h: np.clip(h, 0.0, 6.0))),
            lambda e: (f"{e.summary}: those are the classes with each hidden unit clipped at 6 "
                       "(ReLU6, as some mobile networks use): the course's ReLU has no upper "
                       "limit"), "the ReLU is max(h, 0), however large h is."),
    Mistake("a leaky ReLU (negative sums scaled down, not 0)",
            lambda e: any(e.like_logits(e.problem.logits(
                activation=lambda h, a=slope: np.where(h > 0, h, a * h)))
                for slope in (0.01, 0.02, 0.1, 0.2)),
            lambda e: (f"{e.summary}: those are the classes of a leaky ReLU, which lets a "
                       "small share of a negative sum through: the course's ReLU makes it 0"),
            "the ReLU is max(h, 0): a negative sum becomes exactly 0."),
    Mistake("a hidden unit's sum carried on from the unit before",
            lambda e: e.like_logits(e.problem.logits(carried=True)),
            lambda e: (f"{e.summary}: those are the classes when each hidden unit's sum starts "
                       "from the previous unit's sum instead of from its own bias"),
            "start each hidden unit's sum afresh, at its bias, inside the loop over the hidden "
            "units."),
    Mistake("both biases forgotten",
            lambda e: e.like_logits(e.problem.logits(bias1=False, bias2=False)),
            lambda e: f"{e.summary}: those are the classes without either bias",
            "a dense layer adds its bias to each unit's dot product: both layers have one."),
    Mistake("the hidden bias b1 forgotten", lambda e: e.like_logits(e.problem.logits(bias1=False)),
            lambda e: f"{e.summary}: those are the classes without the hidden bias b1",
            "each hidden unit is its dot product plus its bias, then the ReLU."),
    Mistake("the output bias b2 forgotten", lambda e: e.like_logits(e.problem.logits(bias2=False)),
            lambda e: f"{e.summary}: those are the classes without the output bias b2",
            "each logit starts from its bias; the hidden units add to it."),
    Mistake("negative logits treated as 0 (a ReLU on the output, or a maximum that starts at 0)",
            lambda e: e.like(np.argmax(np.maximum(e.problem.logits(), 0.0), axis=1)),
            lambda e: (f"{e.summary}: on samples whose logits are all negative (e.g. "
                       f"{e.samples(np.flatnonzero(e.problem.logits().max(axis=1) < 0))}) your "
                       "kernel answered class 0, as if negative logits were 0"),
            "the output layer has no ReLU, and the largest logit may be negative: start the "
            "search from the first logit itself, not from 0."),
    Mistake("the last index on a tie", lambda e: e.like(_last_on_ties(e)),
            lambda e: (f"{e.summary}: classes {e.problem.tie[0]} and {e.problem.tie[1]} have "
                       "the same weights, so their logits tie exactly, and your kernel answered "
                       f"{e.problem.tie[1]}; the first index wins a tie (as np.argmax does)"),
            "replace the best class only with a logit strictly larger than the best so far."),
    Mistake("the smallest logit (argmin)",
            lambda e: e.like(np.argmin(e.problem.logits(), axis=1)),
            lambda e: f"{e.summary}: those are the classes of the smallest logits",
            "keep the class whose logit is the largest so far."),
    Mistake("the largest logit's value, not its index",
            lambda e: e.like(np.trunc(e.problem.logits().max(axis=1)).astype(np.int64)),
            lambda e: f"{e.summary}: those are the largest logits' values (cut to integers), "
                      "not their classes",
            "out holds the class: the index of the largest logit, not the logit."),
    Mistake("W1 indexed the wrong way round (transposed)",
            lambda e: e.square and e.like_logits(e.problem.logits(W1=e.problem.W1.T)),
            lambda e: (f"{e.summary}: those are the classes with W1 transposed: W1 has a row "
                       "per input and a column per hidden unit"),
            "in X @ W1, input k and hidden unit j meet at W1's row k, column j."),
    Mistake("W2 indexed the wrong way round (transposed)",
            lambda e: e.square and e.like_logits(e.problem.logits(W2=e.problem.W2.T)),
            lambda e: (f"{e.summary}: those are the classes with W2 transposed: W2 has a row "
                       "per hidden unit and a column per class"),
            "in hidden @ W2, hidden unit j and class c meet at W2's row j, column c."),
    Mistake("the first class never considered", lambda e: e.like(_first_skipped(e)),
            lambda e: f"{e.summary}: the first class (0) never wins",
            "the search must look at every class: start with class 0 as the best so far."),
    Mistake("the last class never considered",
            lambda e: e.like(np.argmax(e.problem.logits()[:, :-1], axis=1)),
            lambda e: f"{e.summary}: the last class ({e.problem.widths[2] - 1}) never wins",
            "the search must look at every class, the last one too."),
    Mistake("the hidden loop counts the inputs or the classes (only the first hidden units)",
            lambda e: _hidden_cut(e) is not None,
            lambda e: ("{}: those are the classes from only the first {} hidden units: the "
                       "loop over hidden units ran as many times as there are {}").format(
                           e.summary, *_hidden_cut(e)),
            "the number of hidden units is W1's second extent; the number of inputs X's "
            "second."),
    Mistake("the ReLU before the hidden bias", lambda e: e.like_logits(
                e.problem.logits(relu_first=True)),
            lambda e: (f"{e.summary}: those are the classes with the ReLU applied before b1 "
                       "was added"), "each hidden unit is its dot product plus its bias, then "
                                     "the ReLU of that sum."),
    Mistake("a bias added inside a loop (once per product)", lambda e: _bias_in_loop(e),
            lambda e: (f"{e.summary}: those are the classes with {_bias_in_loop(e)[0]} added "
                       f"{_bias_in_loop(e)[1]} times: inside the loop over the "
                       f"{_bias_in_loop(e)[2]}, once per product"),
            "a unit's bias is added once, outside the loop that sums its products."),
    Mistake("another wrong class", lambda e: True, lambda e: e.summary,
            "compare your kernel with the forward pass step by step on one sample (the try-it "
            "cell above): the hidden units, then the logits, then the search."),
)
class ScratchWrites(OutputWrites):
    """The logits scratch traced on a small launch: its elements each thread wrote."""

    ITEM, SPELLED, DONE = "element of the logits scratch", "logits[{}]", "written"

    def overlap(self) -> str:
        count = len(self.shared)
        return (f"{count} element{'s' if count > 1 else ''} of the logits scratch "
                f"{'were' if count > 1 else 'was'} written by more than one thread, e.g. "
                f"{self.example()}")


SCRATCH_MISTAKES = (written_by_several(
    "give each thread its own row of the scratch, logits[i, :] for its sample i (or its own "
    "local variables): a row shared by threads is overwritten by each of them."),)


ANSWER_SHARE_HINT = (
    "one thread per sample: each thread answers the sample its global index gives, and no "
    "thread loops over the samples of others.")
ANSWER_SHARE_MISTAKES = one_per_thread(ANSWER_SHARE_HINT, race=False)
AnswerWrites = writes_of("sample", "out[{}]", "answered")


INFERENCE = CheckSpec(
    "inference", "infer(X, W1, b1, W2, b2, logits, out)", INFER_STUB_HINT,
    INFER_MISTAKES + SCRATCH_MISTAKES + ANSWER_SHARE_MISTAKES, parameters=7,
    counted_from_the_arrays="a sample's classes or hidden units",
    title="2. fused inference kernel", call="check_inference(infer)",
    holds="`out[i]` = the first index of the largest logit of relu(X[i] @ W1 + b1) @ W2 + b2, one "
          "thread per sample, guarded, on a square network (inputs = hidden = classes, "
          f"{INFER_SQUARE['sim'][0]}–{INFER_SQUARE['sim'][1] - 1} in the simulator) and a "
          "non-square one with more classes than the digits' 10 "
          f"({INFER_WIDTHS['sim'][2][0]}–{INFER_WIDTHS['sim'][2][1] - 1} in the simulator, "
          f"{INFER_WIDTHS['gpu'][2][0]}–{INFER_WIDTHS['gpu'][2][1] - 1} on a GPU) with a "
          "designed tie and all-negative logits, under two "
          "block sizes; the scratch starts with leftovers; traced on a small launch, no "
          "element of the scratch written by two threads",
    also="the stub; a missing guard (IndexError in the simulator, writes past out on a GPU); "
         "simulator-only code (compiled for a GPU first); a hard-coded block size or batch; a "
         "kernel that never finishes (time limit); gpulab's own kernel")


def _widths(rng: np.random.Generator, square: bool) -> tuple[int, int, int]:
    tier = tier_key()
    if square:
        k = int(rng.integers(*INFER_SQUARE[tier]))
        return k, k, k
    (i0, i1), (h0, h1), (c0, c1) = INFER_WIDTHS[tier]
    n_in = int(rng.integers(i0, i1))
    return n_in, int(rng.integers(max(h0, n_in + 2), max(h1, n_in + 4))), int(rng.integers(c0,
                                                                                          c1))


def run_inference(kernel, trial: Trial, problem: InferenceProblem, scratch: float = np.nan
                  ) -> np.ndarray:
    """Launch ``kernel(X, W1, b1, W2, b2, logits, out)`` on the trial's grid: X and out padded
    (a thread past the end raises IndexError in the simulator, or writes into out's padding on
    a GPU, which :func:`~gpulab.exercises.running.read_back` sees), the logits scratch filled
    with ``scratch``. Returns out (int32, :data:`UNWRITTEN` where nothing was written)."""
    from numba import cuda

    batch, n_classes = problem.X.shape[0], problem.W2.shape[1]
    _, d_X = padded(problem.X, trial.padding, 0.0)
    d_W1, d_b1, d_W2, d_b2 = (cuda.to_device(a) for a in
                              (problem.W1, problem.b1, problem.W2, problem.b2))
    d_logits = cuda.to_device(np.full((batch, n_classes), scratch, np.float32))
    d_out_all, d_out = padded(np.full(batch, UNWRITTEN, np.int32), trial.padding, UNWRITTEN)
    launch(kernel, trial, d_X, d_W1, d_b1, d_W2, d_b2, d_logits, d_out)
    return read_back(d_out_all, (batch,), trial, fill=UNWRITTEN)


def _blame_a_count_typed_in(source, problem, failure: Exception | None) -> None:
    """Fail naming the line, when a kernel that failed (``failure``, or wrong answers: None)
    loops over a count typed in (:func:`~gpulab.exercises.source_rules.
    range_over_typed_in_count`)."""
    line = range_over_typed_in_count(source)
    if not line:
        return
    n_in, n_hidden, n_classes = problem.widths
    detail = ("" if failure is None else ": " + (
        failure.message if isinstance(failure, CheckFailedError)
        else f"it stopped with {type(failure.cause).__name__}"))
    raise CheckFailedError(
        f"`{line}` loops over a fixed number, but this network has {n_in} inputs, {n_hidden} "
        f"hidden units and {n_classes} classes{detail}",
        "read every count from the arrays' shapes: X.shape[1] inputs, W1.shape[1] hidden "
        "units, W2.shape[1] classes; never a number typed in.") from None


@INFERENCE.check
def check_inference(kernel, seed: int | None = None, threads_per_block: int | None = None) -> str:
    """X is float32 (samples × inputs), out int32 (starting at :data:`UNWRITTEN`), and the
    float32 ``logits`` scratch starts as NaN, for the kernel to use as it likes; random batch and
    widths. The square network (inputs = hidden = classes) makes a transposed weight give
    answers, not an IndexError (:func:`inference_problem`). A wrong answer with every sample
    written is run again with a zeroed scratch, to tell a scratch used before it is set."""
    source = INFERENCE.start(kernel)
    trial = Trial.draw("check_inference", seed, np.float32, block=threads_per_block,
                       size_range=INFER_BATCH_RANGE[tier_key()])
    problem_rng = np.random.default_rng([seed, 12])
    problems = [inference_problem(problem_rng, trial.n, *_widths(problem_rng, square),
                                  hidden_scale=1.0 if square else 8.0)
                for square in (True, False)]

    def run(trial: Trial) -> Trial:
        for problem in problems:
            try:
                got = run_inference(kernel, trial, problem)
            except (CheckFailedError, KernelError) as failure:
                _blame_a_count_typed_in(source, problem, failure)
                raise
            evidence = Answers(got, problem, trial)
            if not len(evidence.wrong):
                continue
            _blame_a_count_typed_in(source, problem, None)
            if not len(evidence.unwritten):
                try:
                    again = run_inference(kernel, trial, problem, scratch=0.0)
                except (CheckFailedError, KernelError):
                    again = None
                evidence.scratch_zeroed = again is not None and not np.any(
                    again != evidence.want)
                if again is not None and not evidence.scratch_zeroed and np.any(again != got):
                    evidence.zeroed_wrong = int(np.sum(again != evidence.want))
            INFERENCE.reject(evidence)
        return trial

    trial = under_two_blocks(run, trial, source, once=bool(threads_per_block))
    # the scratch: each thread its own row, traced on a small launch
    small = Trial.draw("check_inference", seed, np.float32, block=8, shape=(13,))
    tiny = inference_problem(np.random.default_rng([seed, 13]), 13, 5, 7, 11)
    reject_unshared_work(SCRATCH_MISTAKES, kernel, small, tiny.X, tiny.W1, tiny.b1, tiny.W2,
                         tiny.b2, np.full((13, 11), np.nan, np.float32),
                         np.full(13, UNWRITTEN, np.int32),
                         output=source.parameters[5] if len(source.parameters) > 5 else 5,
                         evidence=ScratchWrites,
                         then=((ANSWER_SHARE_MISTAKES,
                                source.parameters[6] if len(source.parameters) > 6 else 6,
                                AnswerWrites),))
    widths = " and ".join(" → ".join(map(str, p.widths)) for p in problems)
    ties = sum(int(np.sum(p.classes() == p.tie[0])) for p in problems)
    return (f"all {trial.n} samples right on networks {widths} ({trial.launched}, "
            f"{ties} exact ties resolved to the first class, seed={trial.seed}).")


def served_by(kernel, model, threads_per_block: int | None = None):
    """A :class:`~gpulab.serving.kernel_model.KernelModel` of ``model`` that serves with
    ``kernel`` once this very kernel (a cell run again makes a new one) has passed
    :func:`check_inference` in this session, with gpulab's ``fused_mlp_argmax`` otherwise (and
    says so)."""
    from gpulab.serving.kernel_model import KernelModel

    if INFERENCE.passed(kernel):
        return KernelModel(model, kernel, "your kernel", threads_per_block)
    note = INFERENCE.unpassed_note(kernel, "gpulab's fused_mlp_argmax serves below")
    print(note or "no kernel given: gpulab's fused_mlp_argmax serves below.")
    return KernelModel(model, None, None, threads_per_block)


# --- exercise 3: joules per thousand inferences -------------------------------------------------

JOULES_STUB_HINT = ("integrate power over time: each stretch between two neighbouring samples "
                    "costs its duration times the average of the powers at its two ends; add "
                    "them up, then give the total per thousand inferences.")
JOULES_TOLERANCE = 0.01  # relative, against the trapezoid rule
SHOWN_ROUNDING = 0.05  # J: a right answer rounded to one decimal for display is this close
# The power traces are drawn so that every mistake below misses by at least this much.
JOULES_MARGIN = 0.04
# A diagnosis that names another way of adding up the samples (a Riemann sum, an interval
# skipped) claims it only when the answer is that sum, up to rounding: any other wrong estimate
# (Simpson's rule, say) gets the general message.
EXACT_TOLERANCE = 1e-6
# The share of the trace's energy in its first stretch and in its last (both idle).
END_SHARE = (0.03, 0.06)


def power_trace(rng: np.random.Generator) -> tuple[list[float], list[float], float]:
    """A board's power samples: idle, a busy stretch, idle again; the idle power it drew.

    The sampling is uneven: sparse when idle (20-50 ms), dense when busy (4-12 ms), and one of
    the two steep edges falls in a long gap (0.15-0.35 s without a sample), the other in a
    short one; so holding each sample's power until the next (a left or right Riemann sum) or
    averaging the samples misses the trapezoid rule by several per cent. The first and the
    last stretch are longer idle gaps holding 3-6 % of the energy each (:data:`END_SHARE`), so
    a sum that skips either of them misses by more than the tolerance too."""
    for _ in range(DRAWS_AT_MOST):
        times, watts, idle = _draw_power_trace(rng)
        t, w = np.asarray(times), np.asarray(watts)
        exact = trapezoid(t, w)
        others = (np.sum(np.diff(t) * w[:-1]), np.sum(np.diff(t) * w[1:]),
                  np.mean(w) * (t[-1] - t[0]))
        if all(abs(other - exact) > JOULES_MARGIN * 1.05 * exact for other in others):
            return times, watts, idle
    raise _cannot_draw("a power trace")


def _draw_power_trace(rng: np.random.Generator) -> tuple[list[float], list[float], float]:
    idle_before, busy_n, idle_after = (int(rng.integers(15, 50)), int(rng.integers(60, 160)),
                                       int(rng.integers(15, 50)))
    n = idle_before + busy_n + idle_after
    gaps = np.concatenate([rng.uniform(0.02, 0.05, idle_before),
                           rng.uniform(0.004, 0.012, busy_n),
                           rng.uniform(0.02, 0.05, idle_after)])
    long_gap, short_gap = rng.uniform(0.15, 0.35), rng.uniform(0.002, 0.006)
    rise_long = bool(rng.integers(2))
    gaps[idle_before] = long_gap if rise_long else short_gap  # gap before the first busy sample
    gaps[idle_before + busy_n] = short_gap if rise_long else long_gap  # before the first idle
    idle = float(rng.uniform(40, 100))
    busy = float(rng.uniform(250, 650))
    watts = np.full(n, idle)
    watts[idle_before:idle_before + busy_n] = busy
    watts = np.round(watts + rng.normal(0, 3, n), 3)
    # gaps[k] is the stretch before sample k (gaps[0] does not count): size the first stretch
    # and the last so that each holds its drawn share of the whole trace's energy.
    first, last = rng.uniform(*END_SHARE, 2)
    middle = float(np.sum(gaps[2:-1] * (watts[1:-2] + watts[2:-1]) / 2))
    whole = middle / (1 - first - last)
    gaps[1] = first * whole / ((watts[0] + watts[1]) / 2)
    gaps[-1] = last * whole / ((watts[-2] + watts[-1]) / 2)
    times = np.cumsum(gaps)
    times -= times[0]
    return [float(t) for t in np.round(times, 6)], [float(w) for w in watts], idle


def trapezoid(times, watts) -> float:
    t, w = np.asarray(times), np.asarray(watts)
    return float(np.sum(np.diff(t) * (w[1:] + w[:-1]) / 2))


@dataclass
class Joules:
    """A learner's joules per thousand ``got`` for one power trace: the evidence."""

    got: object
    times: np.ndarray
    watts: np.ndarray
    n: int
    idle: float
    where: str

    @property
    def total(self) -> float:
        return float(np.sum(self.stretches))

    @property
    def want(self) -> float:
        return self.total / self.n * 1000

    @property
    def duration(self) -> float:
        return float(self.times[-1] - self.times[0])

    def per_k(self, joules: float) -> float:
        return joules / self.n * 1000

    @property
    def rounded_to_a_joule(self) -> bool:
        """A whole number within a joule of the answer, which is not whole: rounded on the way.
        An int always; a float with nothing after the point only when it is at least
        :data:`SHOWN_ROUNDING` J off, as a right answer rounded for display (``round(x, 2)``
        of 23.0027) can be whole and that close."""
        if _not_a_number(self.got) or self.want == int(self.want):
            return False
        got = float(self.got)
        off = abs(got - self.want)
        return got == int(got) and off < 1 and (isinstance(self.got, int | np.integer)
                                                 or off >= SHOWN_ROUNDING)

    def near(self, value) -> bool:
        return math.isclose(float(self.got), float(value), rel_tol=JOULES_TOLERANCE)

    def is_sum(self, joules: float) -> bool:
        """The answer is ``joules`` per thousand up to rounding (not merely within 1 %)."""
        return math.isclose(float(self.got), self.per_k(joules), rel_tol=EXACT_TOLERANCE)

    @property
    def stretches(self) -> np.ndarray:
        """The energy of each stretch between neighbouring samples (the trapezoid rule)."""
        return np.diff(self.times) * (self.watts[1:] + self.watts[:-1]) / 2

    @property
    def skipped_end(self) -> str | None:
        """Which stretch at an end of the trace the answer leaves out ("first", "last",
        "first and the last"), or None."""
        first, last = self.stretches[0], self.stretches[-1]
        for which, missing in (("first", first), ("last", last),
                               ("first and the last", first + last)):
            if self.is_sum(self.total - missing):
                return which
        return None

    def skipped_message(self) -> str:
        which = self.skipped_end
        t = self.times
        where = {"first": f"from {t[0]:.3g} s to {t[1]:.3g} s",
                 "last": f"from {t[-2]:.3g} s to {t[-1]:.3g} s"}.get(which, "at both ends")
        plural = "s" if which == "first and the last" else ""
        share = 1 - float(self.got) / self.want
        return (f"{self.summary}: an interval is missing: the sum skips the {which} "
                f"interval{plural} between two samples ({where}), {share:.0%} of the energy")

    @property
    def summary(self) -> str:
        return f"expected {self.want:.6g} J per thousand, got {float(self.got):.6g}"

    @property
    def left(self) -> float:
        return float(np.sum(np.diff(self.times) * self.watts[:-1]))

    @property
    def right(self) -> float:
        return float(np.sum(np.diff(self.times) * self.watts[1:]))

    @property
    def busy_only(self) -> float:
        above = self.watts > self.idle + 20
        return trapezoid(self.times[above], self.watts[above]) if above.sum() >= 2 else 0.0

    @property
    def missing_watts(self) -> float:
        return (self.want - float(self.got)) * self.n / 1000 / self.duration

    def off_by(self, joules: float) -> str:
        return f"{abs(joules - self.total) / self.total:.0%}"


RIEMANN_HINT = ("with uneven sampling and steep edges, holding one sample's power over the "
                "whole stretch is not enough: a stretch's energy is its duration times the "
                "average of the powers at its two ends (the trapezoid rule).")
IDLE_HINT = ("the board draws its idle power the whole time, and the job pays for it (board "
             "boundary, idle included): integrate the whole trace as it is.")
JOULES_MISTAKES = (
    Mistake("a result that is not a number", lambda e: _not_a_number(e.got),
            lambda e: f"you returned {e.got!r}: a number of joules was expected",
            NOT_A_NUMBER_HINT),
    Mistake("the result rounded to a whole joule (`//`, int(), round())",
            lambda e: e.rounded_to_a_joule,
            lambda e: (f"{e.summary}: a whole number of joules, {abs(e.want - float(e.got)):.2g} "
                       "J from the answer: the result was rounded (or divided with `//`) on "
                       "the way"),
            "keep the energy as a float to the end: joules per thousand is rarely a whole "
            "number."),
    Mistake("watt-hours instead of joules", lambda e: e.near(e.want / 3600),
            lambda e: f"{e.summary}: that is in watt-hours",
            "1 Wh = 3600 J, and the answer is in joules (watts × seconds): no conversion "
            "needed."),
    Mistake("per inference, not per thousand (or the times divided by 1000, or the watts "
            "turned into kW)",
            lambda e: e.near(e.want / 1000),
            lambda e: (f"{e.summary}: 1000 times too little: per inference, the times, "
                       "already in seconds, divided by 1000, or the watts turned into kW?"),
            "give it for a thousand inferences, with the times and powers as they are: in "
            "seconds and watts (W × s = J)."),
    Mistake("per million (× 10⁶), or the times taken as milliseconds",
            lambda e: e.near(e.want * 1000),
            lambda e: (f"{e.summary}: 1000 times too much: per million inferences, or the times "
                       "converted to milliseconds?"),
            "give it for a thousand, with the times in seconds (W × s = J)."),
    Mistake("the trapezoid's halving forgotten", lambda e: e.near(e.want * 2),
            lambda e: (f"{e.summary}: twice the energy: each stretch's two powers were added but "
                       "not averaged"), JOULES_STUB_HINT),
    Mistake("time integrated over power (np.trapezoid's arguments swapped)",
            lambda e: e.near(e.per_k(trapezoid(e.watts, e.times))),
            lambda e: (f"{e.summary}: that integrates the times over the powers: NumPy's "
                       "trapezoid takes the values to integrate (the powers) first, then the "
                       "times"), JOULES_STUB_HINT),
    Mistake("not divided by the number of inferences", lambda e: e.near(e.total * 1000),
            lambda e: f"{e.summary}: the total was not shared among the {e.n} inferences",
            "joules per thousand inferences is the total shared among all inferences, then "
            "scaled to a thousand."),
    Mistake("multiplied by the number of inferences", lambda e: e.near(e.total * e.n / 1000),
            lambda e: f"{e.summary}: the total was multiplied by the number of inferences",
            "the more inferences share the energy, the less each costs: divide by the count."),
    Mistake("watts added up without time", lambda e: e.near(e.per_k(np.sum(e.watts))),
            lambda e: f"{e.summary}: that adds up watts without time",
            "each power counts for the time between samples (W × s = J)."),
    Mistake("a left Riemann sum (each sample's power held until the next)",
            lambda e: e.is_sum(e.left),
            lambda e: (f"{e.summary}: that holds each sample's power until the next sample (a "
                       f"left Riemann sum), {e.off_by(e.left)} off here"), RIEMANN_HINT),
    Mistake("a right Riemann sum (each sample's power held since the last)",
            lambda e: e.is_sum(e.right),
            lambda e: (f"{e.summary}: that holds each sample's power back to the previous "
                       f"sample (a right Riemann sum), {e.off_by(e.right)} off here"),
            RIEMANN_HINT),
    Mistake("a wrap-around stretch (the loop from 0 reads times[-1] at i - 1)",
            lambda e: e.is_sum(e.total + (e.times[0] - e.times[-1])
                               * (e.watts[0] + e.watts[-1]) / 2),
            lambda e: (f"{e.summary}: that adds one more stretch, from the last sample back "
                       "to the first (times[0] - times[-1] = "
                       f"{e.times[0] - e.times[-1]:.3g} s, a negative duration): a loop over i "
                       "from 0 whose i - 1 is -1, Python's last element"),
            "pair each sample with the next one, i and i + 1 for i from 0 to len - 2 (or i "
            "and i - 1 for i from 1): a negative index wraps round to the end."),
    Mistake("the first or the last interval skipped (a loop that starts or stops one early)",
            lambda e: e.skipped_end is not None, lambda e: e.skipped_message(),
            "a loop over the stretches must visit every pair of neighbouring samples, from the "
            "first sample to the last: check where the loop starts and where it stops (an "
            "off-by-one?)."),
    Mistake("divided by n - 1 inferences (a fence-post count)",
            lambda e: e.n > 1 and e.is_sum(e.total * e.n / (e.n - 1)),
            lambda e: (f"{e.summary}: the total was shared among {e.n - 1} inferences, one "
                       f"fewer than the {e.n} that ran"),
            "n inferences share the energy: divide by the count you were given (n - 1 counts "
            "the gaps between them, not the inferences)."),
    Mistake("the mean of the samples × the duration",
            lambda e: e.is_sum(np.mean(e.watts) * e.duration),
            lambda e: (f"{e.summary}: that is the samples' mean power × the duration, but the "
                       "samples are uneven (dense when busy, sparse when idle), so the mean "
                       "over-counts the busy stretch"),
            "weigh each sample by the time it stands for: integrate stretch by stretch."),
    Mistake("the idle power subtracted",
            lambda e: e.near(e.per_k(e.total - e.idle * e.duration)),
            lambda e: f"{e.summary}: the idle power is missing", IDLE_HINT),
    Mistake("only the busy samples", lambda e: e.near(e.per_k(e.busy_only)),
            lambda e: f"{e.summary}: only the busy samples are counted", IDLE_HINT),
    Mistake("mean power × the number of inferences", lambda e: e.near(np.mean(e.watts) * e.n),
            lambda e: f"{e.summary}: mean power × the number of inferences is not energy",
            "energy needs the time the samples cover."),
    Mistake("about the idle power missing (estimated some other way)",
            lambda e: 0.8 * e.idle <= e.missing_watts <= 1.2 * e.idle,
            lambda e: (f"{e.summary}: about the idle power is missing over the whole trace"),
            IDLE_HINT),
    Mistake("another number", lambda e: True, lambda e: e.summary, JOULES_STUB_HINT),
)
JOULES = CheckSpec(
    "joules_per_thousand", "joules_per_thousand(times_s, watts, n_inferences) -> float",
    JOULES_STUB_HINT, JOULES_MISTAKES,
    title="3. joules per thousand", call="check_joules_per_thousand(joules_per_thousand)",
    holds="within 1 % of the trapezoid rule over the whole trace (idle included) per thousand "
          "inferences, on traces sampled unevenly (sparse idle, dense busy, a long gap across "
          "one steep edge) so that left/right Riemann sums and the samples' mean miss by > 4 %, "
          "and the first and the last stretch each hold 3–6 % of the energy (so a loop that "
          "skips one misses)",
    also="a function that raises (named with the call); a Riemann sum or a skipped interval "
         "named only when the answer is exactly that sum (Simpson's rule gets the general "
         "message)")


@JOULES.check
def check_joules_per_thousand(function, seed: int | None = None) -> str:
    """Four random power traces (:func:`power_trace`: idle, busy, idle, with noise), with 500
    to 50,000 inferences, the last with 20 to 60 (a large model's few: there one inference
    more or less is 1.7 % to 5 %, beyond the 1 % tolerance), compared with
    :func:`trapezoid`."""
    rng = np.random.default_rng(seed)
    for trial in range(4):
        times, watts, idle = power_trace(rng)
        n = int(rng.integers(500, 50_000)) if trial < 3 else int(rng.integers(20, 61))
        got = call_learner(function, list(times), list(watts), n,
                           stub_hint=JOULES_STUB_HINT,
                           call=f"joules_per_thousand(<{len(times)} samples>, ..., {n})")
        evidence = Joules(got, np.asarray(times), np.asarray(watts), n, idle,
                          f"{len(times)} samples over {times[-1]:.2f} s, {n} inferences, "
                          f"seed={seed}")
        if (_not_a_number(got) or not evidence.near(evidence.want)
                or evidence.rounded_to_a_joule):
            JOULES.reject(evidence)
    return f"all 4 power traces right (seed={seed})."


__all__ = ["INFERENCE", "JOULES", "PERCENTILE", "check_inference", "check_joules_per_thousand",
           "check_percentile", "exact_rank", "inference_problem", "nearest_rank", "power_trace",
           "run_inference", "served_by", "trapezoid"]
