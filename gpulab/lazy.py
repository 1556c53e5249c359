"""Names that load on first use, for packages whose modules import numba or ipywidgets.

``import gpulab.nn`` must stay cheap (gpulab decides the tier before numba loads, and a
notebook's first cell should not wait for ipywidgets), yet ``from gpulab.nn import MLP`` should
work. A package lists each of its modules with the public names it exports; :func:`lazy_exports`
returns the module-level ``__getattr__`` and ``__dir__`` (PEP 562) that import that module
when one of its names is first used, and :func:`exported_names` the package's ``__all__``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def exported_names(modules: Mapping[str, tuple[str, ...]]) -> list[str]:
    """Every name of ``modules`` ({module: (name, ...)}), sorted: the package's ``__all__``."""
    return sorted(name for names in modules.values() for name in names)


def lazy_exports(package: str, modules: Mapping[str, tuple[str, ...]]
                 ) -> tuple[Callable, Callable]:
    """``__getattr__`` and ``__dir__`` for ``package``, whose ``modules`` map each module — a
    full dotted name, or one relative to ``package`` ("mlp" for "gpulab.nn.mlp") — to the
    names it exports."""
    exports = {name: module for module, names in modules.items() for name in names}

    def get_attribute(name: str):
        if name in exports:
            where = exports[name]
            module = where if where.startswith("gpulab.") else f"{package}.{where}"
            return getattr(importlib.import_module(module), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def names():
        return sorted({*importlib.import_module(package).__dict__, *exports})

    return get_attribute, names
