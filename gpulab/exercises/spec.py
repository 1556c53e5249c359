"""A check, declared: :class:`CheckSpec` says what the learner writes, what a stub gets told,
and the known mistakes (:class:`~gpulab.exercises.mistakes.Mistake`) in the order the check
tries them; :meth:`CheckSpec.check` makes a check function of a body, which
:meth:`CheckSpec.run` runs around the steps every check shares.

What every check gets from its spec, before and after its own body:

- the learner's code is theirs: a kernel or function that *is* gpulab's own, or only calls
  gpulab's kernels or reference (:func:`~gpulab.exercises.learner_code.gpulab_things_used`),
  fails and is told so;
- the check is intact: if a function the check relies on was replaced, before the check or by
  the learner's code while it ran (:func:`~gpulab.exercises.learner_code.replaced_parts`), the
  result is a failure that names it, never a pass;
- the result is printed and returned with its seed (:func:`gpulab.exercises.results.run_check`);
- a pass is remembered for this very kernel or function (:meth:`CheckSpec.passed`: a cell run
  again makes a new one), so that a chapter runs the learner's kernel only once it passed.

A chapter module declares one spec per check and writes the body as the check function::

    @THING.check
    def check_thing(kernel, seed=None, threads_per_block=None) -> str:
        source = THING.start(kernel)                # compiled for a real GPU too
        trial = Trial.draw("check_thing", seed, np.float32, block=threads_per_block)
        ...                                         # run it (under_two_blocks), gather evidence
        THING.reject(evidence)                      # the first known mistake seen, if any
        return f"all {trial.n} elements right ({trial.launched}, seed={trial.seed})."

``check_thing(kernel, seed=None, threads_per_block=None, show=True)`` then returns a
:class:`~gpulab.exercises.results.CheckResult`. Shared steps: :func:`under_two_blocks`,
:func:`traced` (a method trace), :func:`try_launch` (a try-it cell),
:meth:`CheckSpec.unpassed_note` (why gpulab's kernel runs instead of the learner's).
:meth:`CheckSpec.mistake_table` describes the check for the instructors' tables.

Adding an exercise touches the solution notebook (``solutions/NN_*.ipynb``: the exercise's
cells between their markers, its try-it and check cells) and its chapter module (the spec, the
check, its name in the module's ``__all__``, from which :mod:`gpulab.exercises` exports it);
``make notebooks`` then writes the learner notebook and the check's row of INSTRUCTORS.md.
Its wrong-answer tests go in ``tests/exercises/test_chNN.py``.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import numbers
import weakref
from collections.abc import Callable
from dataclasses import dataclass

from gpulab.exercises import learner_code
from gpulab.exercises.evidence import OutputWrites
from gpulab.exercises.mistakes import Mistake, reject
from gpulab.exercises.results import (
    GUARD_HINT,
    READ_THE_ERROR_HINT,
    CheckFailedError,
    CheckResult,
    KernelError,
    explain_exception,
    has_passed,
    run_check,
)
from gpulab.exercises.running import launch, trace_trial
from gpulab.exercises.source_rules import (
    KernelSource,
    fixed_length_local_array,
    fixed_step,
    hard_coded_block,
    hard_coded_size,
    hard_coded_thread_count,
    index_capped_by_number,
    start_kernel,
)
from gpulab.exercises.trial import Trial
from gpulab.instruments import python_function
from gpulab.kernels.launch import MAX_THREADS_PER_BLOCK

OWN_WORK_HINT = (
    "write the exercise yourself: a check compares your code with gpulab's, so handing it "
    "gpulab's own kernel or reference proves nothing (and the hints above the cell go step by "
    "step)."
)
REPLACED_HINT = (
    "restart the notebook's kernel (Kernel → Restart) and run the cells again without replacing "
    "gpulab's or NumPy's functions: a check that compares with a replaced reference cannot "
    "judge your code."
)


@dataclass(frozen=True)
class CheckSpec:
    """One exercise's check: its ``exercise`` name (as results say it), what the learner
    writes (``learner_writes``, e.g. ``"blocks_for(n, threads_per_block) -> int"``), the
    kernel's number of ``parameters`` (None for a plain function), the ``stub_hint`` a stub
    gets, and its known ``mistakes``, tried in order (:func:`~gpulab.exercises.mistakes.
    diagnose`). ``allowed_gpulab``: gpulab modules the learner's code may use;
    ``refused_gpulab``: names in them it may not (what the check compares with).

    For the instructors' guide (:mod:`gpulab.exercises.instructors` writes its per-exercise
    tables from these): ``title`` (as the notebook numbers it, ``"1. multiply"``), ``call`` (the
    check cell's call, ``"check_multiply(my_multiply)"``), ``holds`` (what must hold for a
    pass, in plain words) and ``also`` (what the check diagnoses besides ``mistakes``: the
    shared rules it applies, such as guards and indexing).

    ``counted_from_the_arrays``: what a kernel keeps per thread whose count the arrays give
    ("a row's classes"); where set, :meth:`start` refuses a local array of a length typed in
    that holds them (:meth:`fixed_length_mistake`, first in :attr:`tried`). But where the
    check surely runs past such a length (``surely_past``: every launch of its last case has
    more than that many), the array may be a cache with a way round it for longer rows: then
    the kernel is judged by its results, and a failure is told as this mistake."""

    exercise: str
    learner_writes: str
    stub_hint: str
    mistakes: tuple[Mistake, ...] = ()
    parameters: int | None = None
    allowed_gpulab: tuple[str, ...] = ()
    refused_gpulab: tuple[str, ...] = ()
    title: str = ""
    call: str = ""
    holds: str = ""
    also: str = ""
    counted_from_the_arrays: str = ""
    surely_past: int = 0

    def fixed_length_mistake(self) -> Mistake:
        """A local array of a length typed in, for a check whose kernel keeps per-thread values
        of which the arrays say how many (``counted_from_the_arrays``: "a row's classes"): the
        first rule :meth:`start` applies."""
        what = self.counted_from_the_arrays

        def said(source: KernelSource) -> str:
            line, length = fixed_length_local_array(source)
            return (f"`{line}` keeps {what} in a local array of {length}: right only while "
                    f"there are at most that many, but the arrays say how many there are "
                    f"(this check draws the number, and a real model's is whatever its arrays "
                    f"hold)")

        return Mistake(
            f"a local array of a length typed in, for {what}",
            lambda source: fixed_length_local_array(source) is not None, said,
            f"keep no per-thread array of a fixed length for {what}: read them from the arrays "
            "again where you need them (a local array's length is fixed when the kernel "
            "compiles).", "source")

    def run(self, body: Callable[[int], str], seed: int | None = None, show: bool = True,
            learner: tuple = ()) -> CheckResult:
        """Run ``body(seed)`` (the pass message, or it raises) as a check of the learner's
        ``learner`` objects (kernels, functions): their own work, the check left intact."""

        def guarded(seed: int) -> str:
            self.refuse_replaced_parts("before the check")
            for thing in learner:
                self.refuse_gpulab_own(thing)
            called: list[str] = []  # the refused functions the learner's code called
            _FIXED_LENGTH_SEEN.set(None)
            try:
                with learner_code.calls_from_outside_gpulab(
                        self.refused_gpulab, called, self.allowed_gpulab):
                    message = body(seed)
            except (CheckFailedError, KernelError):
                self.refuse_replaced_parts("while the check ran your code")
                self.refuse_called(called)
                fixed_length = _FIXED_LENGTH_SEEN.get()
                if fixed_length is not None:
                    raise fixed_length from None
                raise
            except Exception:  # the check itself broke: on a part the learner replaced?
                self.refuse_replaced_parts("while the check ran your code")
                raise
            self.refuse_replaced_parts("while the check ran your code")
            self.refuse_called(called)
            return message

        result = run_check(self.exercise, guarded, seed, show)
        if result.passed:
            passed = _PASSED_LEARNERS.setdefault(self.exercise, weakref.WeakSet())
            for thing in learner:
                if _own(thing) is not None:
                    passed.add(_own(thing))
        return result

    def check(self, body: Callable[..., str] | None = None, *, learners: tuple[str, ...] = (),
              arguments: Callable[[dict], None] | None = None) -> Callable[..., CheckResult]:
        """The check function of a ``body(learner..., seed=None, options...)`` that returns the
        pass message (or raises): it takes the same arguments and ``show=True``, and runs the
        body as :meth:`run` does, the parameters before ``seed`` (or those named ``learners``)
        being the learner's code. ``arguments(given)``, if any, settles the caller's options
        first (a dict of them, changed in place) and raises ValueError, to the caller, for ones
        the check cannot run with (as it does for a seed or a ``threads_per_block`` that is
        not a whole number, or a block of 0 or over 1024 threads). As a decorator:
        ``@SPEC.check`` over ``def check_thing(kernel, seed=None, ...) -> str``.
        ``help(check_thing)`` shows its real signature and the spec's description
        (:meth:`described`), the body's docstring last."""
        if body is None:
            return functools.partial(self.check, learners=learners, arguments=arguments)
        signature = inspect.signature(body)
        names = list(signature.parameters)
        learners = learners or tuple(names[:names.index("seed")])
        signature = signature.replace(
            parameters=[*signature.parameters.values(), inspect.Parameter(
                "show", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=True,
                annotation="bool")], return_annotation="CheckResult")

        @functools.wraps(body)
        def check(*args, **kwargs) -> CheckResult:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            given = dict(bound.arguments)
            show = given.pop("show")
            _check_common_options(given)
            if arguments is not None:
                arguments(given)
            return self.run(lambda seed: body(**{**given, "seed": seed}), given["seed"], show,
                            learner=tuple(given[name] for name in learners))

        check.__signature__ = signature
        check.__doc__ = self.described(body.__doc__)
        return check

    def described(self, how: str | None = None) -> str:
        """The check described from the spec, the one place it is described: what the learner
        writes, what must hold for a pass (``holds``), what it diagnoses (:meth:`diagnoses`:
        the known mistakes in the order :meth:`reject` tries them, then ``also``, which a body
        may look at first), then ``how`` the check does it, if given (the body's own
        docstring). A check function's ``help()`` shows this."""
        parts = [f"{self.title or self.exercise}: checks ``{self.learner_writes}``.",
                 f"Passes when: {self.holds}." if self.holds else "",
                 f"Diagnoses: {self.diagnoses()}." if self.diagnoses() else "",
                 inspect.cleandoc(how) if how else ""]
        return "\n\n".join(part for part in parts if part)

    def passed(self, learner) -> bool:
        """Has this very ``learner`` (a kernel or function: a cell run again makes a new one)
        passed this check in this session?"""
        return _own(learner) is not None and _own(learner) in _PASSED_LEARNERS.get(
            self.exercise, ())

    def unpassed_note(self, kernel, instead: str) -> str:
        """Why gpulab's kernel takes the place of the learner's ``kernel``: "" when none was
        given or this very kernel passed this check in this session; otherwise a line that says
        so, ending with ``instead`` ("gpulab's accumulate ran")."""
        if kernel is None or self.passed(kernel):
            return ""
        since = (" since you last changed it (run its check again)"
                 if has_passed(self.exercise) else " in this session")
        return f"your kernel has not passed its check{since}: {instead} instead."

    def yours_or_gpulabs(self, kernel, gpulab_name: str, does: str = "runs"
                         ) -> tuple[object, str, str]:
        """(the kernel to run, whose it is, a note): ``kernel`` and "your <its name>" once this
        very kernel passed this check in this session; otherwise None (gpulab's own runs),
        "gpulab's <gpulab_name>" and why (:meth:`unpassed_note`, ending "gpulab's
        <gpulab_name> <does> instead"; "" when no kernel was given)."""
        note = self.unpassed_note(kernel, f"gpulab's {gpulab_name} {does}")
        if kernel is None or note:
            return None, f"gpulab's {gpulab_name}", note
        return kernel, f"your {getattr(_own(kernel), '__name__', 'kernel')}", ""

    def start(self, kernel) -> KernelSource:
        """The kernel's first steps (:func:`gpulab.exercises.source_rules.start_kernel`), then,
        where ``counted_from_the_arrays`` says what, a local array of a length typed in
        (:meth:`fixed_length_mistake`)."""
        source = start_kernel(kernel, self.parameters, self.stub_hint)
        if self.counted_from_the_arrays:
            found = fixed_length_local_array(source)
            if found is not None and found[1] < self.surely_past:
                _FIXED_LENGTH_SEEN.set(self.fixed_length_mistake().failure(source))
            else:
                reject((self.fixed_length_mistake(),), source)
        return source

    def reject(self, evidence) -> None:
        """Fail with the first of this check's mistakes seen in ``evidence``, if any."""
        reject(self.mistakes, evidence)

    def refuse_gpulab_own(self, thing) -> None:
        if thing is None or thing is Ellipsis:
            return
        name = learner_code.name_of(thing)
        frames = learner_code.frames_read(thing)
        if frames:
            raise CheckFailedError(
                f"`{name}` reads the interpreter's frames, or uses a module made for that "
                f"({', '.join(f'`{w}`' for w in frames)}): from there a function can take the "
                "check's own expected values out of the caller's variables, so this check "
                "cannot judge it.", OWN_WORK_HINT)
        used = learner_code.gpulab_things_used(thing, self.allowed_gpulab,
                                                 self.refused_gpulab)
        checks_own = [u for u in used if u.startswith(learner_code.GUARDED_PACKAGE)]
        stored = learner_code.attributes_set(thing) if checks_own else []
        if stored:
            raise CheckFailedError(
                f"`{name}` reaches the check's own {checks_own[0].split(' (')[0]} and sets "
                f"attributes ({', '.join(f'`{a}`' for a in stored[:3])}): it would replace part "
                "of the check, which then cannot pass or fail your code.", REPLACED_HINT)
        if used:
            is_it = used[0].endswith(f".{name}") and " (as " not in used[0]
            said = (f"`{name}` is gpulab's own `{used[0]}`, not code you wrote" if is_it else
                    f"`{name}` uses gpulab's own {', '.join(f'`{u}`' for u in used)}: the "
                    "check would be comparing gpulab with itself")
            raise CheckFailedError(f"{said}.", OWN_WORK_HINT)

    @staticmethod
    def refuse_called(called: list[str]) -> None:
        """Fail when the learner's code called one of the spec's ``refused_gpulab`` functions
        while the check ran it (:func:`~gpulab.exercises.learner_code.
        calls_from_outside_gpulab`), however it reached it."""
        if called and called[0] in learner_code.WATCH_SWITCHES:
            raise CheckFailedError(
                f"your code called `{called[0]}` while the check ran it, which switches off the "
                "check's watch on gpulab's own functions: the check can no longer tell your "
                "answer from gpulab's.", REPLACED_HINT)
        if called:
            raise CheckFailedError(
                f"your code called gpulab's own `{called[0]}` while the check ran it: the "
                "check would be comparing gpulab with itself.", OWN_WORK_HINT)

    @staticmethod
    def refuse_replaced_parts(when: str) -> None:
        learner_code.remember_originals()
        replaced = learner_code.replaced_parts()
        if replaced:
            raise CheckFailedError(
                f"part of the check was replaced {when}: {', '.join(f'`{r}`' for r in replaced)} "
                "is no longer gpulab's (or NumPy's, or Python's) own, so this check cannot pass "
                "or fail your code.", REPLACED_HINT)

    @property
    def tried(self) -> tuple[Mistake, ...]:
        """Every mistake the check names, in order: a local array of a length typed in first
        (where ``counted_from_the_arrays`` is given), then ``mistakes``."""
        first = (self.fixed_length_mistake(),) if self.counted_from_the_arrays else ()
        return first + tuple(self.mistakes)

    def diagnoses(self) -> str:
        """What the check diagnoses, for a table: each mistake's ``did``, in order
        (:attr:`tried`), then ``also``."""
        return "; ".join([m.did for m in self.tried] + ([self.also] if self.also else []))

    def mistake_table(self) -> str:
        """The check as a Markdown table: each known mistake and what it is recognised from."""
        rows = [f"| {m.did} | {m.recognised_from} |" for m in self.tried]
        return "\n".join([f"`{self.learner_writes}`", "", "| mistake | recognised from |",
                          "|---|---|", *rows])


def _check_common_options(given: dict) -> None:
    """ValueError, to the caller, for a seed or a block size a check cannot run with."""
    seed = given.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)
                             or seed < 0):
        raise ValueError(f"seed must be a whole number, 0 or more (or None for a new one), "
                         f"not {seed!r}")
    threads = given.get("threads_per_block")
    if threads is not None and (isinstance(threads, bool)
                                or not isinstance(threads, numbers.Integral)
                                or not 1 <= threads <= MAX_THREADS_PER_BLOCK):
        raise ValueError(f"threads_per_block must be a whole number from 1 to "
                         f"{MAX_THREADS_PER_BLOCK} (a CUDA block's limit), not {threads!r}")


# The learners' kernels and functions that passed each check (by exercise) in this process.
_PASSED_LEARNERS: dict[str, weakref.WeakSet] = {}
# The failure a fixed-length local array makes, where a check judges the kernel by its results
# first (:attr:`CheckSpec.surely_past`): said instead of whatever else fails.
_FIXED_LENGTH_SEEN: contextvars.ContextVar[CheckFailedError | None] = contextvars.ContextVar(
    "gpulab_fixed_length_seen", default=None)


def _own(thing):
    """What a learner's kernel or function is, for :meth:`CheckSpec.passed`: the Python
    function a kernel was made from (a cell run again makes a new one), or the function."""
    if thing is None or thing is Ellipsis:
        return None
    own = python_function(thing) or thing
    try:
        weakref.ref(own)
    except TypeError:
        return None
    return own


def under_two_blocks(run: Callable[[Trial], object], trial: Trial,
                     source: KernelSource | None, once: bool = False) -> object:
    """``run(trial)``, then ``run`` on the same problem under another block size: a kernel right
    under one block size only (one that hard-codes it, ``blockIdx.x * 64``) fails, and the
    message names the line when the source shows it. Returns the first run's result. ``once``
    (the caller chose the block size): ``run(trial)`` alone. Before either, a loop that steps
    by a number typed in (:func:`~gpulab.exercises.source_rules.fixed_step`) fails."""
    step_line = fixed_step(source) if source is not None else None
    if step_line:
        raise CheckFailedError(
            f"`{step_line}` steps by a fixed number: the grid's size is the launch's, so a "
            f"number typed in is right for one launch at most ({trial}).",
            "step by the grid's size, `cuda.gridsize(1)` (or have no loop, if each thread "
            "takes one element), never by a number.")
    if once:
        return _no_size_typed_in(run(trial), trial, source)
    line = hard_coded_block(source) if source is not None else None
    said = (f"`{line}` hard-codes the block size" if line else
            "the kernel depends on the block size, or on where the values, drawn anew for each "
            "launch, fell")
    results = []
    for each in (trial, trial.other_block()):
        try:
            results.append(run(each))
        except (CheckFailedError, KernelError) as failure:
            thread_line = hard_coded_thread_count(source) if source is not None else None
            if thread_line and not line:
                raise CheckFailedError(
                    f"`{thread_line}` compares a thread's index in its block with a fixed "
                    f"number: the last rounds of a tree unrolled for one warp, with no barrier "
                    f"between them. That is a race: the threads of a warp are not guaranteed to "
                    f"run in step (Volta and later GPUs schedule them independently), so a "
                    f"thread may read a slot before its partner has written it; and the number "
                    f"assumes how many threads take part ({each}).",
                    "work out which threads take part from `cuda.blockDim.x` and the round's "
                    "stride, and keep a `cuda.syncthreads()` in every round of the tree.") from None
            size_line = hard_coded_size(source) if source is not None else None
            if size_line and not line:
                raise CheckFailedError(
                    f"`{size_line}` compares with a fixed number, but the arrays have "
                    f"{each.n} elements here: a kernel must work for any n ({each}).",
                    "compare the index with the array's length, read from the array's "
                    "shape, not with a number.") from None
            if not results and not line:
                raise  # wrong under the first block size, for a reason of its own
            detail = (failure.message if isinstance(failure, CheckFailedError)
                      else f"it stopped with {type(failure.cause).__name__}")
            right = (f"right with {trial.threads_per_block} threads per block but not with "
                     f"{each.threads_per_block}" if results else
                     f"launched with {each.threads_per_block} threads per block")
            block_hint = ("use `cuda.grid(1)` (or `cuda.blockDim.x`), never a number, for the "
                          "block size: the caller chooses it at launch.")
            own_hint = (failure.hint if isinstance(failure, CheckFailedError) and failure.hint
                        and not line else "")
            raise CheckFailedError(
                f"your kernel is {right}: {said}. With {each.threads_per_block}: {detail}",
                own_hint or block_hint) from None
    return _no_size_typed_in(results[0], trial, source)


def _no_size_typed_in(result: object, trial: Trial, source: KernelSource | None) -> object:
    """``result``, unless the kernel compares a thread's index with a number typed in, larger
    than any block, that the arrays here were too short to reach (:func:`~gpulab.exercises.
    source_rules.index_capped_by_number`): right on this check's sizes, wrong on longer
    arrays."""
    capped = index_capped_by_number(source) if source is not None else None
    if capped:
        line, number = capped
        raise CheckFailedError(
            f"`{line}` compares the index with a fixed number, {number:,}: the arrays here "
            f"were short enough ({trial.n:,} elements) for it to pass, but on longer arrays "
            f"the elements past it would be handled wrongly or not at all ({trial}).",
            "compare the index with the array's length, read from the array's shape, not "
            "with a number.")
    return result


def try_launch(kernel, trial: Trial, *args, label: str = "your kernel",
               index_hint: str = GUARD_HINT) -> bool:
    """Launch the learner's kernel for a try-it cell: True when it ran; otherwise print one short
    paragraph (``not written yet`` for the stub; what stopped it and the hint, ``label`` saying
    which launch) and return False."""
    try:
        launch(kernel, trial, *args, index_hint=index_hint)
        return True
    except NotImplementedError:
        print("not written yet")
    except KernelError as error:
        if isinstance(error.cause, NotImplementedError):
            print("not written yet")
        else:
            _, message, hint = explain_exception(error, trial, index_hint)
            print(f"{label} stopped: {message}\nhint: {hint}\n(the check below says more; the "
                  "full error: raise it again with your kernel launched by hand)")
    except CheckFailedError as failure:
        print(f"{label}: {failure.message}\nhint: {failure.hint}")
    return False


def traced(kernel, trial: Trial, *args, where: str = "", races: bool = True):
    """The learner's kernel traced on ``trial``'s small launch
    (:func:`~gpulab.exercises.running.trace_trial`, ``races`` as there), or a failure that
    says it stopped there (``where``: by default the launch, n and the seed)."""
    trace = trace_trial(kernel, trial, *args, races=races)
    if trace.error:
        where = where or f"traced on {trial.launched}, n={trial.n}, seed={trial.seed}"
        raise CheckFailedError(f"your kernel stopped when traced ({where}): {trace.error}.",
                               READ_THE_ERROR_HINT)
    return trace



def reject_unshared_work(mistakes: tuple[Mistake, ...], kernel, trial: Trial, *args,
                         output: int | str = -1, evidence=OutputWrites, then: tuple = ()) -> None:
    """Trace the learner's ``kernel`` on ``trial``'s launch with ``args`` (small: every access
    is recorded) and fail with the first of ``mistakes``
    (:func:`~gpulab.exercises.grid_stride.more_than_their_share`) seen in the elements of its
    output (the parameter named ``output``, or the ``output``-th global array the trace saw)
    each thread wrote (``evidence``: an :class:`~gpulab.exercises.evidence.OutputWrites` or a
    kind of one that words it); then ``then``'s ``(mistakes, output, evidence)``, in order, on
    the same trace. A trace that stops is left to the check's other rules."""
    trace = trace_trial(kernel, trial, *args)
    if trace.error or not trace.global_arrays:
        return
    for judged, which, kind in ((mistakes, output, evidence), *then):
        written: dict = {}  # thread -> the elements it wrote (full indices)
        name = which if isinstance(which, str) else trace.global_arrays[which]
        for element, threads in trace.touched(name, "write").items():
            for thread in threads:
                written.setdefault(thread, []).append(element)
        reject(judged, kind(trial, written))


learner_code.remember_originals()

__all__ = ["OWN_WORK_HINT", "REPLACED_HINT", "CheckSpec", "reject_unshared_work", "traced",
           "try_launch", "under_two_blocks"]
