"""No exercise's answer is visible before the learner's attempt, in any chapter, present or
future.

Each learner notebook in course/ is executed once in a `make test`, as a learner would run it
(top to bottom, in the simulator, in the learner's environment), by tests/test_binder.py,
which checks that run with :func:`answers_visible_before_the_attempts`; here the comparison
is tested, and the sources are checked without running anything.

For every exercise (an nbgrader solution cell), the answer is the code between
`### BEGIN SOLUTION` and `### END SOLUTION` in solutions/. Every cell above the exercise — its
source and everything it printed or displayed — must not contain that answer, nor a copy that
differs from it only in names, nor a near copy: both are compared as token sequences in which
every name is replaced by one placeholder, and a cell gives the answer away when it contains
most of the answer's tokens in runs of at least four (a near copy: a kernel with one line
added or changed), or most of it in one run.

Calibrated on the chapters as they were before issue 10: the five spoiled exercises the issue
names covered 83-100 % of their answer this way; the closest ordinary cell (chapter 01's
multiply kernel above the atomic dot exercise: same index and guard, different body) 74 %.
"""

import difflib
import json
import keyword
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = sorted(p.name for p in (ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))
SOLUTION = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.S)
TOKEN = re.compile(r"[A-Za-z_]\w*|\d+(?:\.\d*)?(?:e[+-]?\d+)?|\*\*|//|[<>=!]=|[^\w\s]")
MIN_TOKENS = 12  # shorter answers (one expression) cannot be told apart from ordinary code
SHARE_IN_ONE_RUN = 0.7  # this share of the answer's tokens in one contiguous run gives it away
SHARE_NEAR_COPY = 0.8  # ... or this share in runs of at least MIN_RUN tokens
MIN_RUN = 4


def tokens(text: str) -> list[str]:
    """Names become "N", comments and strings' words go with them; keywords, numbers and
    operators stay, so a renamed copy of a kernel has the same tokens."""
    text = re.sub(r"#[^\n]*", "", text)
    out = []
    for token in TOKEN.findall(text):
        if token[0].isalpha() or token[0] == "_":
            out.append(token if keyword.iskeyword(token) else "N")
        else:
            out.append(token)
    return out


def shared(answer: list[str], seen: list[str]) -> tuple[int, int]:
    """(the longest run of the answer's tokens found in ``seen``, the answer's tokens found in
    runs of at least MIN_RUN)."""
    matcher = difflib.SequenceMatcher(None, answer, seen, autojunk=False)
    blocks = matcher.get_matching_blocks()
    return (max((b.size for b in blocks), default=0),
            sum(b.size for b in blocks if b.size >= MIN_RUN))


def cell_text(cell: dict) -> str:
    """A cell's source and everything it showed: stream output, text/plain, HTML, errors."""
    parts = ["".join(cell.get("source", ""))]
    for output in cell.get("outputs", []):
        if "text" in output:
            parts.append("".join(output["text"]))
        for mime in ("text/plain", "text/html", "text/markdown"):
            if mime in output.get("data", {}):
                parts.append("".join(output["data"][mime]))
        if output.get("output_type") == "error":
            parts.append("\n".join(output.get("traceback", [])))
    return "\n".join(parts)


def answers(chapter: str) -> dict[str, str]:
    """grade id of each solution cell -> the code between the solution markers."""
    notebook = json.loads((ROOT / "solutions" / chapter).read_text(encoding="utf-8"))
    found = {}
    for cell in notebook["cells"]:
        grading = cell.get("metadata", {}).get("nbgrader", {})
        if grading.get("solution") and cell["cell_type"] == "code":
            code = "\n".join(SOLUTION.findall("".join(cell["source"])))
            if code.strip():
                found[grading["grade_id"]] = code
    return found


def spoilers(answer: str, cells_before: list[dict]) -> list[str]:
    answer_tokens = tokens(answer)
    if len(answer_tokens) < MIN_TOKENS:
        return []
    found = []
    n = len(answer_tokens)
    for index, cell in cells_before:
        run, near = shared(answer_tokens, tokens(cell_text(cell)))
        if run >= SHARE_IN_ONE_RUN * n or near >= SHARE_NEAR_COPY * n:
            found.append(f"cell {index} shows {near} of the answer's {n} tokens (names aside), "
                         f"{run} of them in one run")
    return found


def test_the_comparison_sees_a_renamed_copy_and_not_ordinary_code():
    answer = ("i = cuda.grid(1)\nif i < x.shape[0]:\n    out[i] = x[i] * y[i]\n")
    renamed = {"source": "k = cuda.grid(1)\nif k < a.shape[0]:\n    c[k] = a[k] * b[k]\n"}
    printed = {"source": "print(source)", "outputs": [{"output_type": "stream", "text": answer}]}
    near = {"source": "j = cuda.grid(1)\nif j < u.shape[0]:\n    w[j] = u[j] * v[j] + 1.0\n"}
    other = {"source": "x = np.arange(10)\nprint(x.sum() * 2)\nfor i in range(3):\n    pass\n"}
    assert spoilers(answer, [(1, renamed)]) and spoilers(answer, [(2, printed)])
    assert spoilers(answer, [(3, near)])
    assert not spoilers(answer, [(4, other)])


def answers_visible_before_the_attempts(chapter: str, notebook: dict) -> list[str]:
    """What gives an exercise's answer away in ``notebook``, the learner version of ``chapter``
    (executed, or only its sources): one line per cell above an attempt that shows the answer.
    Raises AssertionError when an exercise of solutions/ is missing from it."""
    expected = answers(chapter)
    cells = notebook["cells"]
    problems, checked = [], 0
    for position, cell in enumerate(cells):
        grading = cell.get("metadata", {}).get("nbgrader", {})
        grade_id = grading.get("grade_id")
        if grade_id not in expected or not grading.get("solution"):
            continue
        checked += 1
        before = list(enumerate(cells[:position]))
        problems += [f"{chapter} {grade_id}: {p}" for p in spoilers(expected[grade_id], before)]
    assert checked == len(expected), f"{chapter}: some exercises are missing in course/"
    return problems


def test_a_shown_answer_is_found_in_a_notebook():
    chapter, grade_id, answer = next((c, g, a) for c in CHAPTERS for g, a in answers(c).items()
                                     if len(tokens(a)) >= MIN_TOKENS)
    learner = json.loads((ROOT / "course" / chapter).read_text(encoding="utf-8"))
    attempt = next(i for i, cell in enumerate(learner["cells"])
                   if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id)
    shown = {"cell_type": "code", "source": "print(answer)", "metadata": {},
             "outputs": [{"output_type": "stream", "name": "stdout", "text": answer}]}
    learner["cells"].insert(attempt, shown)
    found = answers_visible_before_the_attempts(chapter, learner)
    assert any(grade_id in line and f"cell {attempt} " in line for line in found), found


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_no_answer_is_in_the_sources_before_the_attempt(chapter):
    """The sources alone (fast, no execution). What the cells print and display is checked on
    the chapter's one execution, in the learner's environment, by tests/test_binder.py
    (test_learner_notebook_runs_once_in_the_learners_environment)."""
    notebook = json.loads((ROOT / "course" / chapter).read_text(encoding="utf-8"))
    for cell in notebook["cells"]:
        cell["outputs"] = []  # committed without outputs; a stray one must not count here
    problems = answers_visible_before_the_attempts(chapter, notebook)
    assert not problems, f"{chapter}: answers visible before the attempt:\n" + "\n".join(
        problems)
