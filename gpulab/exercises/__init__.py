"""Exercises: automatic checks with hints, and the learner notebooks generated from solutions.

- One check is declared as data: :mod:`gpulab.exercises.spec` (a
  :class:`~gpulab.exercises.spec.CheckSpec`: what the learner writes, the hint a stub gets, the
  known mistakes),
  :mod:`gpulab.exercises.mistakes` (a :class:`~gpulab.exercises.mistakes.Mistake` record and
  ``diagnose``, which walks a check's mistakes in order) and :mod:`gpulab.exercises.trial` (one
  :class:`~gpulab.exercises.trial.Trial` for any shape: a random problem, its block size drawn
  too, repeatable from its seed).
- What every check shares, one idea per module: :mod:`gpulab.exercises.results` (a
  :class:`CheckResult`, the exceptions a check raises, ``run_check``, the advice an error
  becomes), :mod:`gpulab.exercises.source_rules` (what the kernel's source says: the stub,
  simulator-only code, barriers some threads skip, plain writes, hard-coded sizes),
  :mod:`gpulab.exercises.running` (running the learner's code safely: padded buffers, launches
  compiled for a real GPU and under a time limit, traces), :mod:`gpulab.exercises.outputs`
  (comparing outputs and naming the mistake), :mod:`gpulab.exercises.host_code` (watching the
  learner's host code: copies, launches, clocks), :mod:`gpulab.exercises.compiling` (compiling
  a kernel for a real GPU as the ``ptx`` tier does) and :mod:`gpulab.exercises.learner_code`
  (is the learner's code their own, is the check intact).
- :mod:`gpulab.exercises.ch00` … :mod:`gpulab.exercises.ch12` — one module per chapter, holding
  only that chapter's checks (``ch01``: ``check_multiply``, ``check_dot_atomic``,
  ``check_block_sum``); notebooks import the module (``from gpulab.exercises import ch03``).
  Chapter modules import from the shared modules only, never from each other.
- :mod:`gpulab.exercises.reveal` — around an exercise: ``compare_yours`` shows gpulab's version
  only after the learner's check passed; ``try_it`` turns a failing try-it cell into a few lines.
- :mod:`gpulab.exercises.release` — writes ``course/`` (learner versions) from ``solutions/``.
- :mod:`gpulab.exercises.export` — writes a learners' copy of the course for a class
  repository, without ``solutions/`` or hidden tests (``gpulab export-learner``).

The simulator instruments the checks use (arrays that record which thread read or wrote what,
poisoned shared memory) live in :mod:`gpulab.instruments`, shared with
:mod:`gpulab.memory_model`.

Chapter modules import numba, so they are loaded on first use: ``from gpulab.exercises import
check_multiply`` works (the names are each chapter module's ``check_`` names in its
``__all__``, read from its source), and ``python -m gpulab.exercises.release`` stays fast.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from gpulab.instruments.simulator import mend
from gpulab.lazy import exported_names, lazy_exports

# In the simulator (gpulab.instruments.simulator.mend): one shared array per block, launches
# from several host threads in turn, and CUDA events with the GPU's API for a learner's timing.
# Before any check is imported, so before a check replaces the clocks. It imports numba's
# simulator (about a second), in the sim tier only.
mend()

_SHARED_EXPORTS = {"results": ("CheckResult",), "reveal": ("compare_yours", "try_it")}
_ALL = re.compile(r"^__all__ = (\[.*?\])", re.M | re.S)


def chapter_checks() -> dict[str, tuple[str, ...]]:
    """Each chapter module's check functions, {"ch01": ("check_block_sum", ...), ...}: the
    names in its ``__all__`` that start with ``check_``, read from its source (importing it
    would load numba), so that a new check is exported where its spec is declared."""
    found = {}
    for path in sorted(Path(__file__).parent.glob("ch[0-9][0-9].py")):
        declared = _ALL.search(path.read_text(encoding="utf-8"))
        names = ast.literal_eval(declared.group(1)) if declared else []
        found[path.stem] = tuple(name for name in names if name.startswith("check_"))
    return found


_MODULES = {**_SHARED_EXPORTS, **chapter_checks()}


__getattr__, __dir__ = lazy_exports(__name__, _MODULES)
__all__ = exported_names(_MODULES)
