"""No failure message or hint hands over the solution: every text a check can print (the
string constants of the chapter modules and the shared check modules, docstrings and the
instructors' descriptions left out) is scanned for the lines of the chapter's solutions.

A solution line here is a line between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` in
solutions/ with at least 8 characters besides spaces, that is not a comment, a ``def`` or a
decorator, and not a bare call without arguments (``cuda.syncthreads()``: naming the API a
step needs is a hint, not the code). Spaces are ignored in the comparison.
"""

import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXERCISES = ROOT / "gpulab" / "exercises"
SHARED = ("results.py", "source_rules.py", "running.py", "outputs.py", "host_code.py", "spec.py",
          "mistakes.py", "trial.py", "learner_code.py", "compiling.py")
# CheckSpec's descriptions for the instructors' tables, not shown to a learner.
DESCRIPTIONS = {"title", "call", "holds", "also", "learner_writes"}
SOLUTION = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.S)
BARE_CALL = re.compile(r"[\w.]+\(\)")


def _squeezed(text: str) -> str:
    return re.sub(r"\s+", "", text)


def solution_lines(chapter: int) -> set[str]:
    notebook = next((ROOT / "solutions").glob(f"{chapter:02d}_*.ipynb"))
    lines = set()
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        for block in SOLUTION.findall("".join(cell["source"])):
            for line in block.splitlines():
                line = line.strip()
                if (len(_squeezed(line)) >= 8 and not line.startswith(("#", "def ", "@"))
                        and not BARE_CALL.fullmatch(line)):
                    lines.add(line)
    return lines


def printable_strings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string constant a check could print: not docstrings, not the
    instructors' descriptions of a spec."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    left_out = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)):
            left_out.add(id(body[0].value))
        if isinstance(node, ast.keyword) and node.arg in DESCRIPTIONS:
            left_out.update(id(inner) for inner in ast.walk(node.value))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in left_out]


def given_away(chapter: int) -> list[str]:
    lines = {_squeezed(line): line for line in solution_lines(chapter)}
    paths = [EXERCISES / f"ch{chapter:02d}.py", *(EXERCISES / name for name in SHARED)]
    found = []
    for path in paths:
        for lineno, text in printable_strings(path):
            squeezed = _squeezed(text)
            found += [f"{path.name}:{lineno} gives `{line}`" for key, line in lines.items()
                      if key in squeezed]
    return found


@pytest.mark.parametrize("chapter", range(13), ids=lambda n: f"ch{n:02d}")
def test_no_message_contains_a_line_of_the_solution(chapter):
    assert given_away(chapter) == []


def test_the_scan_finds_a_solution_line_in_a_hint(tmp_path, monkeypatch):
    module = tmp_path / "ch99.py"
    module.write_text('"""Doc: `out[i] = x[i] + 1` is fine here."""\n'
                      'HINT = "add one: `out[i] = x[i] + 1`."\n'
                      'SPEC = dict(holds="`out[i] = x[i] + 1`")\n', encoding="utf-8")
    texts = [text for _, text in printable_strings(module)]
    assert texts == ["add one: `out[i] = x[i] + 1`."]
