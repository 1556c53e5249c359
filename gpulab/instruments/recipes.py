"""A kernel's recipe: its source and the globals it uses, as JSON (:func:`kernel_recipe`), and
the function rebuilt from them in another process (:func:`rebuild_function`): how a trace runs
in a simulator child when this process drives a GPU, and how the exercise checks compile a
learner's kernel for a real GPU.
"""

from __future__ import annotations

import ast
import dis
import inspect
import linecache
import sys
import textwrap
import types
from collections.abc import Callable

import numpy as np

from gpulab.instruments.kernel_objects import is_device_function, launchable, python_function

_MAX_ARRAY_GLOBAL = 4096  # elements: a bigger global array is not sent


def _global_names(code: types.CodeType) -> set[str]:
    """Names the code loads as globals (not attribute names), nested code included."""
    names = set()
    for instruction in dis.get_instructions(code):
        if instruction.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            names.add(instruction.argval)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            names |= _global_names(constant)
    return names


def _describe(value, seen: set) -> dict:
    """A JSON description of a global a kernel uses (see :func:`kernel_recipe`)."""
    if isinstance(value, types.ModuleType):
        return {"kind": "module", "name": value.__name__}
    if type(value).__name__ == "FakeCUDAModule":  # numba.cuda while a simulated kernel runs
        return {"kind": "module", "name": "numba.cuda"}
    if isinstance(value, bool | int | float | complex | str) or value is None:
        return {"kind": "value", "type": type(value).__name__, "value": repr(value)}
    if isinstance(value, np.generic):
        return {"kind": "npscalar", "dtype": value.dtype.name, "value": repr(value.item())}
    if isinstance(value, type) and issubclass(value, np.generic):
        return {"kind": "nptype", "name": np.dtype(value).name}
    if isinstance(value, np.dtype):
        return {"kind": "npdtype", "name": value.name}
    if isinstance(value, np.ndarray) and value.size <= _MAX_ARRAY_GLOBAL:
        return {"kind": "ndarray", "dtype": value.dtype.name, "shape": list(value.shape),
                "data": value.ravel().tolist()}
    if isinstance(value, tuple):
        items = [_describe(item, seen) for item in value]
        if all(item["kind"] != "unknown" for item in items):
            return {"kind": "tuple", "items": items}
        return {"kind": "unknown", "type": "tuple"}
    numba_type = _numba_type_name(value)
    if numba_type:
        return {"kind": "numba_type", "name": numba_type}
    function = python_function(value)
    if function is not None or is_device_function(value):
        function = function or getattr(launchable(value), "py_func", None)
        if function is not None and id(function) not in seen:
            recipe = kernel_recipe(value, seen)
            if recipe is not None:
                return {"kind": "cuda", "device": is_device_function(value), "recipe": recipe}
    if inspect.isfunction(value) and id(value) not in seen:
        recipe = _function_recipe(value, seen)
        if recipe is not None:
            return {"kind": "function", "recipe": recipe}
    home = getattr(value, "__module__", None), getattr(value, "__name__", None)
    if (callable(value) and all(isinstance(part, str) for part in home)
            and getattr(sys.modules.get(home[0]), home[1], None) is value):
        return {"kind": "attribute", "module": home[0], "name": home[1]}  # from numpy import sqrt
    return {"kind": "unknown", "type": type(value).__name__}


def _numba_type_name(value) -> str | None:
    module = type(value).__module__ or ""
    if not module.startswith("numba"):
        return None
    try:
        import numba
    except ImportError:  # pragma: no cover
        return None
    name = str(value)
    return name if getattr(numba.types, name, None) is value else None


def _function_recipe(function, seen: set) -> dict | None:
    seen = seen | {id(function)}
    try:
        source = textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError):
        return None
    names = _global_names(function.__code__)
    scope = dict(function.__globals__)
    if function.__closure__:
        scope.update(zip(function.__code__.co_freevars,
                         (cell.cell_contents for cell in function.__closure__), strict=True))
        names |= set(function.__code__.co_freevars)
    described = {}
    for name in sorted(names):
        if name in scope:
            described[name] = _describe(scope[name], seen)
    return {"name": function.__name__, "source": source, "globals": described}


def kernel_recipe(kernel, seen: set | None = None) -> dict | None:
    """The kernel's source and a description of every global (and closure variable) it uses,
    as JSON-able data: modules by name, numbers, NumPy types and scalars, small arrays, tuples
    of those, and other kernels and device functions (their own recipes). A global of any other
    kind is described as ``{"kind": "unknown"}``. None when the source cannot be found."""
    function = (kernel if inspect.isfunction(kernel)
                else python_function(kernel) or getattr(launchable(kernel), "py_func", None))
    if function is None:
        return None
    return _function_recipe(function, seen or set())


def unknown_globals(recipe: dict) -> list[str]:
    """Names of the globals :func:`rebuild_function` cannot rebuild, nested recipes included."""
    found = []
    for name, described in recipe["globals"].items():
        if described["kind"] == "unknown":
            found.append(name)
        elif described["kind"] in ("cuda", "function"):
            found += unknown_globals(described["recipe"])
    return found


def _rebuild_value(described: dict, jit_kernel, jit_device):
    kind = described["kind"]
    if kind == "module":
        import importlib

        return importlib.import_module(described["name"])
    if kind == "value":
        text, kind_of = described["value"], described["type"]
        if kind_of == "NoneType":
            return None
        if kind_of == "str":
            return ast.literal_eval(text)
        return {"bool": lambda t: t == "True", "int": int, "float": float,
                "complex": complex}[kind_of](text)
    if kind == "npscalar":
        return np.dtype(described["dtype"]).type(float(described["value"])
                                                if described["dtype"].startswith(("f", "c"))
                                                else ast.literal_eval(described["value"]))
    if kind == "nptype":
        return np.dtype(described["name"]).type
    if kind == "npdtype":
        return np.dtype(described["name"])
    if kind == "ndarray":
        return np.array(described["data"], dtype=described["dtype"]).reshape(described["shape"])
    if kind == "tuple":
        return tuple(_rebuild_value(item, jit_kernel, jit_device) for item in described["items"])
    if kind == "numba_type":
        import numba

        return getattr(numba.types, described["name"])
    if kind == "cuda":
        function = rebuild_function(described["recipe"], jit_kernel, jit_device)
        return jit_device(function) if described["device"] else jit_kernel(function)
    if kind == "function":
        return rebuild_function(described["recipe"], jit_kernel, jit_device)
    if kind == "attribute":
        import importlib

        return getattr(importlib.import_module(described["module"]), described["name"])
    raise ValueError(f"cannot rebuild a global of kind {described.get('type', kind)!r}")


def rebuild_function(recipe: dict, jit_kernel=None, jit_device=None) -> Callable:
    """The plain Python function a :func:`kernel_recipe` describes, its decorators removed, with
    its globals rebuilt (kernels and device functions it calls made with ``jit_kernel`` and
    ``jit_device``, by default ``cuda.jit`` and ``cuda.jit(device=True, inline="always")``).
    Its source is registered with :mod:`linecache` under ``<kernel NAME>``, so tracebacks and
    :func:`inspect.getsource` work."""
    if jit_kernel is None or jit_device is None:
        from numba import cuda

        jit_kernel = jit_kernel or cuda.jit
        jit_device = jit_device or cuda.jit(device=True, inline="always")
    tree = ast.parse(recipe["source"])
    definition = next(node for node in tree.body if isinstance(node, ast.FunctionDef))
    definition.decorator_list = []
    filename = f"<kernel {recipe['name']}>"
    lines = recipe["source"].splitlines(keepends=True)
    linecache.cache[filename] = (len(recipe["source"]), None, lines, filename)
    scope = {"__name__": "gpulab_rebuilt", "__builtins__": __builtins__}
    for name, described in recipe["globals"].items():
        if described["kind"] != "unknown":
            scope[name] = _rebuild_value(described, jit_kernel, jit_device)
    exec(compile(ast.Module([definition], []), filename, "exec"), scope)  # noqa: S102
    return scope[definition.name]


__all__ = ["kernel_recipe", "rebuild_function", "unknown_globals"]
