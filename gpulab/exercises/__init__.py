"""Exercises: automatic checks with hints, and the learner notebooks generated from solutions.

- :mod:`gpulab.exercises.checks` — the machinery: :class:`CheckResult`, random trials, safe
  launches, diagnoses of common mistakes.
- :mod:`gpulab.exercises.ch01` — chapter 01's checks: ``check_multiply``, ``check_dot_atomic``,
  ``check_block_sum``.
- :mod:`gpulab.exercises.ch02` … :mod:`gpulab.exercises.ch08` — one module of checks per
  chapter; notebooks import the module (``from gpulab.exercises import ch03``).
- :mod:`gpulab.exercises.release` — writes ``course/`` (learner versions) from ``solutions/``.

Chapter modules import numba, so they are loaded on first use: ``from gpulab.exercises import
check_multiply`` works, and ``python -m gpulab.exercises.release`` stays fast.
"""

from __future__ import annotations

import importlib

_LAZY = {
    "CheckResult": "gpulab.exercises.checks",
    "check_multiply": "gpulab.exercises.ch01",
    "check_dot_atomic": "gpulab.exercises.ch01",
    "check_block_sum": "gpulab.exercises.ch01",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = sorted(_LAZY)
