"""The instruments package: one idea per module, every name in one place, and all of it on the
ground floor (numpy, numba inside functions, and of gpulab only gpulab.device)."""

import ast
import inspect
from pathlib import Path

from gpulab import instruments


def test_the_instruments_stay_on_the_ground_floor():
    package = Path(instruments.__file__).parent
    for path in sorted(package.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                    for alias in node.names}
        imported |= {node.module for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom) and node.module}
        from_gpulab = {name for name in imported if name.startswith("gpulab")}
        allowed = {"gpulab", "gpulab.device", "gpulab.instruments"}
        allowed |= {f"gpulab.instruments.{p.stem}" for p in package.glob("*.py")}
        assert from_gpulab <= allowed, f"{path.name}: {from_gpulab - allowed}"


def test_every_name_of_the_package_comes_from_its_module():
    for name in instruments.__all__:
        value = getattr(instruments, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__module__.startswith("gpulab.instruments."), (name, value.__module__)
