"""Whether the learner's code is the learner's own, and whether it left the check alone.

Two ways to pass a check without doing the exercise: hand it gpulab's own kernel or reference
(or a function that only calls them), or replace a part of the check (``gpulab.reference.dot =
...``, ``np.allclose = lambda *a, **k: True``) so that it compares with what you want.
:func:`gpulab_things_used` finds the first, from the globals a function or kernel uses (and
those of the functions it calls); :func:`replaced_parts` finds the second, by comparing the
public functions of the modules a check relies on with what they were when first remembered.
"""

from __future__ import annotations

import dis
import inspect
import sys
import types

from gpulab.instruments import launchable, python_function

# The modules whose functions a check relies on to judge (numpy: only the names below).
GUARDED_MODULES = (
    "gpulab.reference", "gpulab.instruments", "gpulab.exercises.results",
    "gpulab.exercises.source_rules", "gpulab.exercises.running", "gpulab.exercises.outputs",
    "gpulab.exercises.host_code", "gpulab.exercises.compiling", "gpulab.exercises.mistakes",
    "gpulab.exercises.trial", "gpulab.exercises.spec", "gpulab.exercises.learner_code",
)
GUARDED_NUMPY = ("allclose", "isclose", "array_equal", "isnan", "isfinite", "abs", "flatnonzero")


def _function_of(thing) -> types.FunctionType | None:
    """The Python function behind a kernel, a device function or a plain function."""
    if inspect.isfunction(thing):
        return thing
    function = python_function(thing) or getattr(launchable(thing), "py_func", None)
    return function if inspect.isfunction(function) else None


def _is_gpulab(thing) -> bool:
    if isinstance(thing, types.ModuleType):
        return thing.__name__ == "gpulab" or thing.__name__.startswith("gpulab.")
    function = _function_of(thing) if callable(thing) else None
    module = getattr(function or thing, "__module__", None) if callable(thing) else None
    return isinstance(module, str) and module.startswith("gpulab.")


def _globals_used(function: types.FunctionType) -> dict[str, object]:
    """The globals (and closure variables) ``function`` reads, with their values."""
    names = set()

    def collect(code: types.CodeType) -> None:
        names.update(i.argval for i in dis.get_instructions(code)
                     if i.opname in ("LOAD_GLOBAL", "LOAD_NAME"))
        for constant in code.co_consts:
            if isinstance(constant, types.CodeType):
                collect(constant)

    collect(function.__code__)
    scope = dict(function.__globals__)
    if function.__closure__:
        for name, cell in zip(function.__code__.co_freevars, function.__closure__, strict=True):
            try:
                scope[name] = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            names.add(name)
    return {name: scope[name] for name in sorted(names) if name in scope}


def gpulab_things_used(thing, allowed: tuple[str, ...] = ()) -> list[str]:
    """What of gpulab's own the learner's ``thing`` (a kernel or a function) is or uses:
    ``["gpulab.reference (as `reference`)"]``, ``["gpulab.kernels.elementwise.multiply"]`` when
    it *is* gpulab's; empty for the learner's own work. Functions the learner wrote and
    ``thing`` calls are looked into too. ``allowed``: gpulab modules it may use."""
    found: list[str] = []
    seen: set[int] = set()

    def visit(item, name: str | None) -> None:
        if _is_gpulab(item):
            module = item.__name__ if isinstance(item, types.ModuleType) else (
                getattr(_function_of(item) or item, "__module__", "gpulab"))
            if not any(module == a or module.startswith(a + ".") for a in allowed):
                label = (module if isinstance(item, types.ModuleType) else
                         f"{module}.{getattr(_function_of(item) or item, '__name__', name)}")
                found.append(label + (f" (as `{name}`)" if name else ""))
            return
        function = _function_of(item) if callable(item) else None
        if function is None or id(function) in seen:
            return
        seen.add(id(function))
        for global_name, value in _globals_used(function).items():
            visit(value, global_name)

    visit(thing, None)
    return list(dict.fromkeys(found))


def _guarded_functions() -> dict[str, object]:
    parts = {}
    for module_name in GUARDED_MODULES:
        module = sys.modules.get(module_name)
        for name, value in vars(module).items() if module is not None else ():
            if (callable(value) and not name.startswith("_")
                    and not isinstance(value, types.ModuleType)):
                parts[f"{module_name}.{name}"] = value
    numpy = sys.modules.get("numpy")
    for name in GUARDED_NUMPY:
        parts[f"numpy.{name}"] = getattr(numpy, name, None)
    return parts


_ORIGINALS: dict[str, object] = {}


def remember_originals() -> None:
    """Record the guarded modules' functions as they are now (at import, by
    :mod:`gpulab.exercises.spec`; again for modules imported later)."""
    for name, value in _guarded_functions().items():
        _ORIGINALS.setdefault(name, value)


def replaced_parts() -> list[str]:
    """Names of the check's functions (``"gpulab.reference.dot"``) that are no longer what
    they were when first remembered, or have gone."""
    now = _guarded_functions()
    return [name for name, original in _ORIGINALS.items() if now.get(name) is not original]


__all__ = ["GUARDED_MODULES", "GUARDED_NUMPY", "gpulab_things_used", "remember_originals",
           "replaced_parts"]
