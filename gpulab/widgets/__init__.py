"""One ipywidgets dashboard per comparison; the logic of each is a plain class that tests
drive without a browser.

- :mod:`gpulab.widgets.crossover` — CPU vs GPU as n grows (chapter 01).
- :mod:`gpulab.widgets.independence` — a chain of dependent additions vs independent ones
  (chapter 00).

Importing this package is cheap: the modules (and ipywidgets, numba) load when a name is first
used, e.g. ``from gpulab.widgets import CrossoverDashboard``.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "CrossoverDashboard": "crossover",
    "CrossoverExperiment": "crossover",
    "IndependenceDashboard": "independence",
    "IndependenceExperiment": "independence",
}


def __getattr__(name: str):
    if name in _EXPORTS:
        module = importlib.import_module(f"{__name__}.{_EXPORTS[name]}")
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_EXPORTS])


__all__ = sorted(_EXPORTS)
