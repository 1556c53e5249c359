"""How gpulab.exercises is laid out: chapter modules take what they share from the shared
modules, never from each other nor their private names, and every chapter's checks are
exported from the package."""

import gpulab  # noqa: F401  (must come before numba: it chooses the simulator or the GPU)

# isort: split
import ast
from pathlib import Path

import pytest

from gpulab.exercises import results

EXERCISES = Path(results.__file__).parent


def imports_of(path: Path) -> list[tuple[str, list[str]]]:
    """(module, imported names) for every ``import`` / ``from ... import`` in a file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.module, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
    return found


# What chapter modules may share: the machinery and the core a check is declared with.
SHARED = {f"gpulab.exercises.{name}" for name in (
    "results", "source_rules", "running", "outputs", "host_code", "mistakes", "spec", "trial",
    "evidence", "grid_stride", "learner_code", "compiling", "races")}


@pytest.mark.parametrize("path", sorted(EXERCISES.glob("ch[0-9]*.py")), ids=lambda p: p.name)
def test_chapter_modules_share_only_through_the_shared_modules(path):
    for module, names in imports_of(path):
        if module.startswith("gpulab.exercises"):
            assert module in SHARED, f"{path.name} imports {module}"
        if module.startswith("gpulab"):
            private = [name for name in names if name.startswith("_")]
            assert not private, f"{path.name} imports private names {private} from {module}"


def test_every_chapters_checks_are_exported_from_the_package():
    """A check is exported from where it is declared: every ``check_`` function a chapter
    module defines is in its ``__all__``, and the package reads that list from the source."""
    import importlib

    import gpulab.exercises as exercises

    declared = exercises.chapter_checks()
    assert sorted(declared) == [f"ch{chapter:02d}" for chapter in range(13)]
    for chapter in declared:
        module = importlib.import_module(f"gpulab.exercises.{chapter}")
        defined = {name for name, value in vars(module).items() if name.startswith("check_")
                   and callable(value) and value.__module__ == module.__name__}
        assert defined and defined == set(declared[chapter]), (chapter, defined)
        for name in defined:
            assert getattr(exercises, name) is getattr(module, name), name
            assert name in exercises.__all__, name
