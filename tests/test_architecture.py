"""The package's one rule of direction, checked on its source (every import, including the
ones inside functions): imports run from higher layers to lower ones, never in a cycle, and
never reach into another module's private names.

    cli, doctor, gpulab (the package)           entry points
    bench, experiments, exercises               what the chapters and `gpulab bench` run
    nn, parallel, serving                       the small neural-network library; many GPUs;
                                                serving and energy
    timing, plots, memory_model, ptx,           shared services
    published, recorded_runs
    kernels                                     Numba CUDA kernels
    device, toolkit, hardware, formats,         the ground floor
    reference, instruments, lazy, documents, tables
"""

import ast
import functools
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "gpulab"

LAYERS = [  # lowest first; a module may import from its own layer or any below it
    ("ground", ["gpulab.device", "gpulab.toolkit", "gpulab.hardware", "gpulab.formats",
                "gpulab.reference", "gpulab.instruments", "gpulab.lazy", "gpulab.documents",
                "gpulab.tables"]),
    ("kernels", ["gpulab.kernels"]),
    ("services", ["gpulab.timing", "gpulab.plots", "gpulab.memory_model", "gpulab.ptx",
                  "gpulab.kernel_resources", "gpulab.recorded_runs", "gpulab.published"]),
    ("nn", ["gpulab.nn", "gpulab.parallel", "gpulab.serving"]),
    ("chapters", ["gpulab.bench", "gpulab.experiments", "gpulab.exercises"]),
    ("entry", ["gpulab.cli", "gpulab.doctor", "gpulab.gpu_check", "gpulab"]),
]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def layer_of(module: str) -> int:
    best, best_length = None, -1
    for rank, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            matches = module == prefix or module.startswith(prefix + ".")
            if matches and len(prefix) > best_length:
                best, best_length = rank, len(prefix)
    if best is None:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS in this test")
    return best


def resolve(module: str, level: int, name: str | None, package: str) -> str:
    if level:
        base = package.split(".")[: len(package.split(".")) - level + 1]
        module = ".".join(base + ([module] if module else []))
    if name and f"{module}.{name}" in MODULES:
        return f"{module}.{name}"  # `from gpulab import timing` imports the module
    return module


def imports_of(module: str):
    """(imported module, imported name or None, line) for every gpulab import in ``module``,
    and the attribute accesses ``alias._private`` on imported gpulab modules."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found, aliases = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("gpulab"):
                    found.append((alias.name, None, node.lineno))
                    aliases[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if not (node.level or source.startswith("gpulab")):
                continue
            for alias in node.names:
                target = resolve(source, node.level, alias.name, package)
                name = None if target != resolve(source, node.level, None, package) else alias.name
                found.append((target, name, node.lineno))
                if target in MODULES:
                    aliases[alias.asname or alias.name] = target
    private_attributes = [
        (aliases[node.value.id], node.attr, node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
        and node.value.id in aliases and node.attr.startswith("_")
        and not node.attr.startswith("__")
    ]
    return found, private_attributes


@functools.cache
def graph() -> dict:
    """{module: imports_of(module)} for every gpulab module; built on first use, not when the
    file is collected (each pytest worker collects every file, and runs this one in one)."""
    return {module: imports_of(module) for module in MODULES}


def is_private(dotted: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in dotted.split("."))


def test_every_module_is_in_a_layer():
    for module in MODULES:
        layer_of(module)


def test_imports_run_from_higher_layers_to_lower_ones():
    wrong = []
    for module, (imports, _) in graph().items():
        for target, _, line in imports:
            if target in MODULES and layer_of(target) > layer_of(module):
                wrong.append(f"{module}:{line} imports {target} "
                             f"({LAYERS[layer_of(module)][0]} -> {LAYERS[layer_of(target)][0]})")
    assert not wrong, "imports that point up a layer:\n" + "\n".join(wrong)


def test_no_import_cycles():
    edges = {module: {t for t, _, _ in imports if t in MODULES and t != module}
             for module, (imports, _) in graph().items()}
    state, stack, cycles = {}, [], []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == "open":
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for module in sorted(edges):
        if module not in state:
            visit(module)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_no_module_reaches_into_another_modules_private_names():
    wrong = []
    for module, (imports, attributes) in graph().items():
        for target, name, line in imports:
            if target != module and (is_private(target) or (name and is_private(name))):
                wrong.append(f"{module}:{line} imports {target}{'.' + name if name else ''}")
        for target, attribute, line in attributes:
            if target != module:
                wrong.append(f"{module}:{line} uses {target}.{attribute}")
    assert not wrong, "private names used across modules:\n" + "\n".join(wrong)


@pytest.mark.parametrize("low", ["gpulab.device", "gpulab.toolkit", "gpulab.hardware",
                                 "gpulab.formats", "gpulab.reference", "gpulab.instruments",
                                 "gpulab.documents"])
def test_the_ground_floor_imports_nothing_above_it(low):
    imports, _ = graph()[low]
    above = [t for t, _, _ in imports if t in MODULES and layer_of(t) > 0]
    assert not above, f"{low} imports {above}"


def test_the_rule_catches_a_violation(tmp_path, monkeypatch):
    """The checks above can fail: an upward import and a private name are reported."""
    bad = {"gpulab.kernels.bad": "from gpulab.experiments import crossover\n"
                                 "from gpulab.kernels.dot import _KERNELS\n"}
    path = tmp_path / "bad.py"
    path.write_text(bad["gpulab.kernels.bad"])
    monkeypatch.setitem(MODULES, "gpulab.kernels.bad", path)
    imports, _ = imports_of("gpulab.kernels.bad")
    assert [(t, n) for t, n, _ in imports] == [("gpulab.experiments.crossover", None),
                                               ("gpulab.kernels.dot", "_KERNELS")]
    assert layer_of("gpulab.experiments.crossover") > layer_of("gpulab.kernels.bad")
    assert is_private("_KERNELS")


def course_gpu_literals(text: str) -> list[int]:
    """The line numbers in ``text`` that spell the course GPU's key as a quoted string."""
    from gpulab import hardware

    literal = re.compile(r"""(["'])""" + re.escape(hardware.COURSE_GPU) + r"\1")
    return [number for number, line in enumerate(text.splitlines(), 1) if literal.search(line)]


def course_texts():
    """(path, text) of what spells code in the repository: the package's and the tests' Python
    files, and the code and Markdown of every notebook and course document (solutions/ and the
    learner copies in course/)."""
    import json

    root = PACKAGE.parent
    for path in sorted([*PACKAGE.rglob("*.py"), *(root / "tests").rglob("*.py")]):
        yield path.relative_to(root), path.read_text(encoding="utf-8")
    for folder in ("solutions", "course"):
        for path in sorted((root / folder).glob("*.ipynb")):
            cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
            yield path.relative_to(root), "\n".join("".join(cell["source"]) for cell in cells)
        for path in sorted((root / folder).glob("*.md")):
            yield path.relative_to(root), path.read_text(encoding="utf-8")


def test_the_course_gpu_has_one_home():
    """The GPU the course models is ``hardware.COURSE_GPU``; a fact about the H100 names
    ``hardware.H100_SXM``. Only hardware.py spells the key, in the package, the tests and the
    notebooks (data files may record it, and a text a test expects may show it)."""
    found = {str(path): lines for path, text in course_texts()
             if path.name != "hardware.py" if (lines := course_gpu_literals(text))}
    assert not found, f"use hardware.COURSE_GPU (or hardware.H100_SXM.key) instead of: {found}"


def test_the_course_gpu_rule_catches_a_literal():
    from gpulab import hardware

    key = hardware.COURSE_GPU
    assert course_gpu_literals(f'x = 1\ndef f(gpu="{key}"):\n    """e.g. \'{key}\'"""') == [2, 3]
    assert course_gpu_literals("def f(gpu=hardware.COURSE_GPU): ...\n# the H100 SXM") == []
