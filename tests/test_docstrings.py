"""Docstrings name things that exist: every dotted ``gpulab.x.y`` name, every Sphinx role
(:func:`name`, :data:`name`, ...) and every ``module.name`` in double backticks whose first part
is a gpulab module, in every docstring of the package, resolves to a module or an attribute
(a dataclass field counts as a class's attribute)."""

import ast
import importlib
import inspect
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "gpulab"

DOTTED = re.compile(r"(?<![\w./-])gpulab(?:\.[A-Za-z_]\w*)+")
ROLE = re.compile(r":(?:func|class|data|attr|mod|meth|obj|const|exc):`~?([A-Za-z_][\w.]*)`")
TICKS = re.compile(r"``([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)``")
SUBMODULES = {path.stem if path.suffix else path.name for path in PACKAGE.iterdir()
              if (path.suffix == ".py" and path.stem != "__init__")
              or (path / "__init__.py").exists()}

# Names another engineer's module is being migrated away from; each must still be wrong (the
# test fails once it is fixed, so the entry is removed then).
WAITING = {
    # an example of what gpulab_things_used returns; the kernel is elementwise_multiply
    ("gpulab/exercises/learner_code.py", "gpulab.kernels.elementwise.multiply"),
}


def has(thing, name: str) -> bool:
    if hasattr(thing, name):
        return True
    return inspect.isclass(thing) and any(name in vars(klass).get("__annotations__", {})
                                          for klass in thing.__mro__)


def walk(thing, names) -> bool:
    for name in names:
        if not has(thing, name):
            return False
        thing = getattr(thing, name, None)
        if thing is None:  # a field without a class default: nothing further to look into
            return True
    return True


def resolves(dotted: str) -> bool:
    """Whether ``dotted`` (``gpulab.a.b``) is a module, or an attribute path from one."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        try:
            module = importlib.import_module(".".join(parts[:end]))
        except ImportError:
            continue
        return walk(module, parts[end:])
    return False


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def docstrings(tree: ast.Module):
    """(node, docstring, the enclosing class's name or None) for each documented node."""
    def visit(node, cls):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            text = ast.get_docstring(node, clean=False)
            here = node.name if isinstance(node, ast.ClassDef) and cls is None else cls
            if text:
                yield node, text, here
            for child in ast.iter_child_nodes(node):
                yield from visit(child, here)

    yield from visit(tree, None)


def wrong_names(source: str, module) -> list[str]:
    """The names in ``source``'s docstrings (read as the text of ``module``) that resolve to
    nothing."""
    wrong = []
    for _, text, cls in docstrings(ast.parse(source)):
        scope = getattr(module, cls, None) if cls else None
        for name in DOTTED.findall(text):
            if not resolves(name):
                wrong.append(name)
        for name in ROLE.findall(text):
            parts = name.split(".")
            if not (resolves(name) if parts[0] == "gpulab" else
                    walk(module, parts) or (scope is not None and walk(scope, parts))
                    or (parts[0] in SUBMODULES and resolves(f"gpulab.{name}"))
                    or resolves(name)):
                wrong.append(name)
        for name in TICKS.findall(text):
            if name.split(".")[0] in SUBMODULES and not resolves(f"gpulab.{name}"):
                wrong.append(name)
    return wrong


def test_docstrings_name_things_that_exist():
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        module = importlib.import_module(module_name(path))
        where = str(path.relative_to(PACKAGE.parent))
        found |= {(where, name) for name in wrong_names(path.read_text(encoding="utf-8"), module)}
    assert found == WAITING, (f"names in docstrings that do not exist: {sorted(found - WAITING)}; "
                              f"fixed (remove from WAITING): {sorted(WAITING - found)}")


def test_the_rule_catches_a_wrong_name():
    from gpulab import hardware

    source = ('"""See :func:`get_gpu`, ``gpulab.hardware.GPUS``, :attr:`GPUSpec.peak_flops` '
              'and ``hardware.COURSE_GPU``."""\n'
              'def f():\n    """Not :func:`no_such_thing`, nor gpulab.hardware.NO_SUCH, nor '
              '``timing.no_such``, nor :data:`gpulab.nowhere.X`."""\n')
    assert set(wrong_names(source, hardware)) == {"gpulab.hardware.NO_SUCH", "gpulab.nowhere.X",
                                                  "no_such_thing", "timing.no_such"}
