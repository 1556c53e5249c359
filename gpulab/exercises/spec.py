"""A check, declared: :class:`CheckSpec` says what the learner writes, what a stub gets told,
and the known mistakes (:class:`~gpulab.exercises.mistakes.Mistake`) in the order the check
tries them; :meth:`CheckSpec.run` runs a check's body around the steps every check shares.

What every check gets from its spec, before and after its own body:

- the learner's code is theirs: a kernel or function that *is* gpulab's own, or only calls
  gpulab's kernels or reference (:func:`~gpulab.exercises.learner_code.gpulab_things_used`),
  fails and is told so;
- the check is intact: if a function the check relies on was replaced, before the check or by
  the learner's code while it ran (:func:`~gpulab.exercises.learner_code.replaced_parts`), the
  result is a failure that names it, never a pass;
- the result is printed and returned with its seed (:func:`gpulab.exercises.results.run_check`).

A chapter module declares one spec per check and writes the body: draw a
:class:`~gpulab.exercises.trial.Trial`, run the learner's code, gather evidence, and
``spec.reject(evidence)``. :meth:`CheckSpec.mistake_table` describes the check for the
instructors' tables.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

from gpulab.exercises import learner_code
from gpulab.exercises.mistakes import Mistake, reject
from gpulab.exercises.results import CheckFailedError, CheckResult, KernelError, run_check
from gpulab.exercises.source_rules import KernelSource, hard_coded_block, start_kernel
from gpulab.exercises.trial import Trial

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
    diagnose`). ``allowed_gpulab``: gpulab modules the learner's code may use.

    For the instructors' guide (:mod:`gpulab.exercises.instructors` writes its per-exercise
    tables from these): ``title`` (as the notebook numbers it, ``"1. multiply"``), ``call`` (the
    check cell's call, ``"check_multiply(my_multiply)"``), ``holds`` (what must hold for a
    pass, in plain words) and ``also`` (what the check diagnoses besides ``mistakes``: the
    shared rules it applies, such as guards and indexing)."""

    exercise: str
    learner_writes: str
    stub_hint: str
    mistakes: tuple[Mistake, ...] = ()
    parameters: int | None = None
    allowed_gpulab: tuple[str, ...] = ()
    title: str = ""
    call: str = ""
    holds: str = ""
    also: str = ""

    def run(self, body: Callable[[int], str], seed: int | None = None, show: bool = True,
            learner: tuple = ()) -> CheckResult:
        """Run ``body(seed)`` (the pass message, or it raises) as a check of the learner's
        ``learner`` objects (kernels, functions): their own work, the check left intact."""

        def guarded(seed: int) -> str:
            self.refuse_replaced_parts("before the check")
            for thing in learner:
                self.refuse_gpulab_own(thing)
            try:
                message = body(seed)
            except (CheckFailedError, KernelError):
                self.refuse_replaced_parts("while the check ran your code")
                raise
            self.refuse_replaced_parts("while the check ran your code")
            return message

        return run_check(self.exercise, guarded, seed, show)

    def start(self, kernel) -> KernelSource:
        """The kernel's first steps (:func:`gpulab.exercises.source_rules.start_kernel`)."""
        return start_kernel(kernel, self.parameters, self.stub_hint)

    def reject(self, evidence) -> None:
        """Fail with the first of this check's mistakes seen in ``evidence``, if any."""
        reject(self.mistakes, evidence)

    def refuse_gpulab_own(self, thing) -> None:
        if thing is None or thing is Ellipsis:
            return
        used = learner_code.gpulab_things_used(thing, self.allowed_gpulab)
        if used:
            name = getattr(thing, "__name__", None) or getattr(
                getattr(thing, "py_func", None), "__name__", "your code")
            is_it = used[0].endswith(f".{name}") and " (as " not in used[0]
            said = (f"`{name}` is gpulab's own `{used[0]}`, not code you wrote" if is_it else
                    f"`{name}` uses gpulab's own {', '.join(f'`{u}`' for u in used)}: the "
                    "check would be comparing gpulab with itself")
            raise CheckFailedError(f"{said}.", OWN_WORK_HINT)

    @staticmethod
    def refuse_replaced_parts(when: str) -> None:
        learner_code.remember_originals()
        replaced = learner_code.replaced_parts()
        if replaced:
            raise CheckFailedError(
                f"part of the check was replaced {when}: {', '.join(f'`{r}`' for r in replaced)} "
                "is no longer gpulab's (or NumPy's) own, so this check cannot pass or fail your "
                "code.", REPLACED_HINT)

    def diagnoses(self) -> str:
        """What the check diagnoses, for a table: each mistake's ``did``, in order, then
        ``also``."""
        return "; ".join([m.did for m in self.mistakes] + ([self.also] if self.also else []))

    def mistake_table(self) -> str:
        """The check as a Markdown table: each known mistake and what it is recognised from."""
        rows = [f"| {m.did} | {m.recognised_from} |" for m in self.mistakes]
        return "\n".join([f"`{self.learner_writes}`", "", "| mistake | recognised from |",
                          "|---|---|", *rows])


def under_two_blocks(run: Callable[[Trial], object], trial: Trial,
                     source: KernelSource | None) -> object:
    """``run(trial)``, then ``run`` on the same problem under another block size: a kernel right
    under one block size only (one that hard-codes it, ``blockIdx.x * 64``) fails, and the
    message names the line when the source shows it. Returns the first run's result."""
    line = hard_coded_block(source) if source is not None else None
    said = f"`{line}` hard-codes the block size" if line else "the kernel depends on the block size"
    results = []
    for each in (trial, trial.other_block()):
        try:
            results.append(run(each))
        except (CheckFailedError, KernelError) as failure:
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
            raise CheckFailedError(
                f"your kernel is {right}: {said}. With {each.threads_per_block}: {detail}",
                "use `cuda.grid(1)` (or `cuda.blockDim.x`), never a number, for the block "
                "size: the caller chooses it at launch.") from None
    return results[0]


def hard_coded_size(source: KernelSource) -> str | None:
    """The first line that compares a variable with a whole number bigger than 1 (``if i <
    300:``): a problem size typed into the kernel."""
    for node in source.walk():
        if isinstance(node, ast.Compare) and any(
                isinstance(op, ast.Lt | ast.LtE | ast.Gt | ast.GtE) for op in node.ops):
            sides = [node.left, *node.comparators]
            if (any(isinstance(side, ast.Name) for side in sides) and any(
                    isinstance(side, ast.Constant) and isinstance(side.value, int)
                    and not isinstance(side.value, bool) and side.value > 1 for side in sides)):
                return source.line(node)
    return None


learner_code.remember_originals()

__all__ = ["OWN_WORK_HINT", "REPLACED_HINT", "CheckSpec", "hard_coded_size", "under_two_blocks"]
