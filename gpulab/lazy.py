"""Names that load on first use, for packages whose modules import numba or ipywidgets.

``import gpulab.nn`` must stay cheap (gpulab decides the tier before numba loads, and a
notebook's first cell should not wait for ipywidgets), yet ``from gpulab.nn import MLP`` should
work. A package lists its public names and the module each lives in; :func:`lazy_exports`
returns the module-level ``__getattr__`` and ``__dir__`` (PEP 562) that import that module
when the name is first used.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable, Callable]:
    """``__getattr__`` and ``__dir__`` for ``package`` whose name ``N`` lives in module
    ``exports[N]``: a full dotted name, or one relative to ``package`` ("mlp" for
    "gpulab.nn.mlp")."""

    def get_attribute(name: str):
        if name in exports:
            where = exports[name]
            module = where if where.startswith("gpulab.") else f"{package}.{where}"
            return getattr(importlib.import_module(module), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def names():
        return sorted({*importlib.import_module(package).__dict__, *exports})

    return get_attribute, names
