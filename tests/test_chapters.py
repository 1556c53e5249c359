"""A way through the course (issue 11): every chapter says how long it takes and what it needs,
links the cheat sheet and the glossary, asks before it answers, puts guided questions after
each dashboard, ends with questions and answers and further reading, and links its neighbours.

The forms checked, in each solutions/NN_*.ipynb (the learner versions in course/ are generated
from them):

- the first cell starts ``# NN · Title`` and has ``**Time:** about N minutes. **Before this
  chapter:** …`` (chapters with links, or "nothing but Python and NumPy") and links
  ``CHEATSHEET.md`` and ``GLOSSARY.md`` (which exist in course/);
- every napkin-math section (a heading, or a paragraph opening ``**Napkin math``) has its
  answer in a ``<details>`` before the next code cell;
- every cell that shows a dashboard (its last line is ``….widget``, ``…Dashboard(…)`` or
  ``…_widget(…)``) is followed by a markdown cell with ``**Questions to try**``: 2-3 numbered
  questions and ``<details><summary>What to look for</summary>``;
- at the end, in this order: ``## What to remember``, ``## Questions`` (3-5 numbered questions,
  then one ``<details><summary>Answers</summary>`` with as many numbered answers),
  ``## Further reading`` (at least two http(s) links), and the last line
  ``Previous: [NN · Title](NN_x.ipynb). Next: [NN · Title](NN_x.ipynb).`` naming the
  neighbouring chapters by their titles (chapter 00: only Next; chapter 12: only Previous);
- every relative link to a chapter notebook resolves, and "chapter NN" names a chapter that
  exists.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTER_FILES = (
    "00_welcome", "01_dot_product", "02_moving_data", "03_matrix_multiplication",
    "04_precision", "05_dense_layer", "06_backpropagation", "07_training", "08_batch_size",
    "09_memory_budget", "10_mixed_precision", "11_many_gpus", "12_inference_serving_energy",
)
CHAPTERS = [ROOT / "solutions" / f"{name}.ipynb" for name in CHAPTER_FILES]
LAST = len(CHAPTER_FILES) - 1

TIME = re.compile(r"\*\*Time:\*\* about (\d+) minutes\. \*\*Before this chapter:\*\* (.+?)(?:\n|$)")
CHAPTER_LINK = re.compile(r"\]\((\d\d_[\w-]+\.ipynb)(?:#[^)]*)?\)")
NUMBERED = re.compile(r"^(\d+)\.\s", re.M)
DETAILS = re.compile(r"<details>(.*?)</details>", re.S)
DASHBOARD_LINE = re.compile(r"(?:\.widget|Dashboard\([^()]*\)|_widget\([^()]*\))\s*;?\s*$")
NAPKIN = re.compile(r"^(?:#+ .*napkin math.*|\*\*napkin math.*)$", re.I | re.M)
CHAPTER_MENTION = re.compile(r"\bchapters? (\d{1,2})\b(?:\s*(?:-|–|and|to|or)\s*(\d{1,2})\b)?",
                             re.I)


def _cells(path: Path) -> list[dict]:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    for cell in cells:
        if isinstance(cell["source"], list):
            cell["source"] = "".join(cell["source"])
    return cells


def _name(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def _title(path: Path) -> str:
    """'NN · Title', from the notebook's first line."""
    first = _cells(path)[0]["source"].splitlines()[0]
    return first.removeprefix("# ").strip()


def _flat(text: str) -> str:
    return re.sub(r"[ \t]*\n[ \t]*(?!\n)", " ", text)


def _outside_details(text: str) -> str:
    return DETAILS.sub("", text)


def _markdown_after(cells: list[dict], index: int, line: str) -> str:
    """The text of markdown cell ``index`` from ``line`` on, and of the markdown cells after it,
    up to the next code cell."""
    text = cells[index]["source"]
    text = text[text.index(line):]
    for cell in cells[index + 1:]:
        if cell["cell_type"] != "markdown":
            break
        text += "\n\n" + cell["source"]
    return text


def _section(cells: list[dict], heading: str) -> tuple[int, int, str] | None:
    """(cell, line, text) of the level-2 section titled exactly ``heading``: its text runs to the
    next level-1/2 heading or code cell."""
    for index, cell in enumerate(cells):
        if cell["cell_type"] != "markdown":
            continue
        lines = cell["source"].splitlines()
        if heading not in lines:
            continue
        start = lines.index(heading)
        body = []
        for line in lines[start + 1:]:
            if re.match(r"#{1,2} ", line):
                return index, start, "\n".join(body)
            body.append(line)
        for later in cells[index + 1:]:
            if later["cell_type"] != "markdown":
                break
            for line in later["source"].splitlines():
                if re.match(r"#{1,2} ", line):
                    return index, start, "\n".join(body)
                body.append(line)
        return index, start, "\n".join(body)
    return None


def _chapter_number(path: Path) -> int:
    return int(path.name[:2])


ids = [p.name for p in CHAPTERS]


def test_the_chapters_and_the_references_exist():
    found = sorted(p.stem for p in (ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))
    assert found == list(CHAPTER_FILES), f"solutions/ holds {found}"
    for name in CHAPTER_FILES:
        assert (ROOT / "course" / f"{name}.ipynb").is_file(), f"course/{name}.ipynb is missing"
    for sheet in ("CHEATSHEET.md", "GLOSSARY.md"):
        assert (ROOT / "course" / sheet).is_file(), (
            f"course/{sheet} does not exist, and every chapter links it")


@pytest.mark.parametrize("path", CHAPTERS, ids=ids)
def test_first_cell_gives_time_prerequisites_and_the_references(path):
    cells = _cells(path)
    first = cells[0]
    assert first["cell_type"] == "markdown", f"{_name(path)}: the first cell is not markdown"
    title = first["source"].splitlines()[0]
    assert re.match(rf"# {path.name[:2]} · \S", title), (
        f"{_name(path)}: the first line should be '# {path.name[:2]} · Title', not {title!r}")
    flat = _flat(first["source"])
    missing = []
    time = TIME.search(flat)
    if not time:
        missing.append("a line '**Time:** about N minutes. **Before this chapter:** …'")
    elif not (CHAPTER_LINK.search(time.group(2)) or "nothing but" in time.group(2)):
        missing.append("chapters linked after **Before this chapter:** (as "
                       "[03 · Matrix multiplication](03_matrix_multiplication.ipynb)), or "
                       "'nothing but Python and NumPy'")
    for target, words in (("CHEATSHEET.md", "cheat sheet"), ("GLOSSARY.md", "glossary")):
        if f"]({target})" not in flat:
            missing.append(f"a link to the {words}, [{words}]({target})")
    assert not missing, f"{_name(path)} cell 0 lacks " + "; and ".join(missing)


@pytest.mark.parametrize("path", CHAPTERS, ids=ids)
def test_napkin_math_is_answered_before_it_is_measured(path):
    cells = _cells(path)
    problems = []
    for index, cell in enumerate(cells):
        if cell["cell_type"] != "markdown":
            continue
        for match in NAPKIN.finditer(cell["source"]):
            text = _markdown_after(cells, index, match.group(0))
            if "<details>" not in text or "</details>" not in text:
                problems.append(f"cell {index}: the napkin-math section {match.group(0)[:60]!r} "
                                "has no <details><summary>Answer</summary> … </details> before "
                                "the next code cell")
    assert not problems, f"{_name(path)}: " + "\n".join(problems)


@pytest.mark.parametrize("path", CHAPTERS, ids=ids)
def test_every_dashboard_has_questions_to_try(path):
    cells = _cells(path)
    problems = []
    for index, cell in enumerate(cells):
        if cell["cell_type"] != "code":
            continue
        lines = [line for line in cell["source"].splitlines()
                 if line.strip() and not line.lstrip().startswith("#")]
        if not lines or not DASHBOARD_LINE.search(lines[-1]):
            continue
        where = f"cell {index} shows a dashboard ({lines[-1].strip()})"
        after = cells[index + 1] if index + 1 < len(cells) else None
        if after is None or after["cell_type"] != "markdown":
            problems.append(f"{where}, but no markdown cell follows it with **Questions to try**")
            continue
        text = after["source"]
        missing = []
        if "**Questions to try**" not in text:
            missing.append("'**Questions to try**'")
        questions = len(NUMBERED.findall(_outside_details(text)))
        if not 2 <= questions <= 3:
            missing.append(f"2-3 numbered questions (it has {questions})")
        if not re.search(r"<details>\s*<summary>What to look for</summary>", text):
            missing.append("<details><summary>What to look for</summary> … </details>")
        if missing:
            problems.append(f"{where}; the cell after it ({index + 1}) lacks "
                            + ", ".join(missing))
    assert not problems, f"{_name(path)}: " + "\n".join(problems)


@pytest.mark.parametrize("path", CHAPTERS, ids=ids)
def test_the_end_what_to_remember_questions_further_reading(path):
    cells = _cells(path)
    problems = []
    sections = {heading: _section(cells, heading)
                for heading in ("## What to remember", "## Questions", "## Further reading")}
    for heading, found in sections.items():
        if found is None:
            problems.append(f"no '{heading}' section (a line exactly {heading!r})")
    places = [found[:2] for found in sections.values() if found is not None]
    if len(places) == 3 and places != sorted(places):
        problems.append("the sections should come in the order What to remember, Questions, "
                        f"Further reading (they are at cell/line {places})")

    if sections["## Questions"] is not None:
        index, _, text = sections["## Questions"]
        answers = re.findall(r"<details>\s*<summary>Answers</summary>(.*?)</details>", text, re.S)
        questions = len(NUMBERED.findall(_outside_details(text)))
        if not 3 <= questions <= 5:
            problems.append(f"cell {index}: '## Questions' should ask 3-5 numbered questions "
                            f"(it has {questions})")
        if len(answers) != 1:
            problems.append(f"cell {index}: '## Questions' should be followed by one "
                            f"<details><summary>Answers</summary> (it has {len(answers)})")
        elif len(NUMBERED.findall(answers[0])) != questions:
            problems.append(f"cell {index}: {questions} questions but "
                            f"{len(NUMBERED.findall(answers[0]))} numbered answers")

    if sections["## Further reading"] is not None:
        index, _, text = sections["## Further reading"]
        links = re.findall(r"https?://[^\s)>\]]+", text)
        if len(links) < 2:
            problems.append(f"cell {index}: '## Further reading' should give at least two "
                            f"http(s) links (it has {len(links)})")
    assert not problems, f"{_name(path)}: " + "\n".join(problems)


@pytest.mark.parametrize("path", CHAPTERS, ids=ids)
def test_last_line_links_the_neighbouring_chapters(path):
    number = _chapter_number(path)
    cells = _cells(path)
    lines = [line.strip() for line in cells[-1]["source"].splitlines() if line.strip()]
    last = lines[-1] if lines and cells[-1]["cell_type"] == "markdown" else ""
    wanted = []
    if number > 0:
        before = CHAPTERS[number - 1]
        wanted.append(f"Previous: [{_title(before)}]({before.name}).")
    if number < LAST:
        after = CHAPTERS[number + 1]
        wanted.append(f"Next: [{_title(after)}]({after.name}).")
    expected = " ".join(wanted)
    assert last == expected, (
        f"{_name(path)}: the last line should be\n  {expected}\nnot\n  {last}")


@pytest.mark.parametrize("path", CHAPTERS, ids=ids)
def test_chapter_links_and_mentions_name_chapters_that_exist(path):
    problems = []
    for index, cell in enumerate(_cells(path)):
        if cell["cell_type"] != "markdown":
            continue
        for target in CHAPTER_LINK.findall(cell["source"]):
            if not (path.parent / target).is_file():
                problems.append(f"cell {index} links {target}, which does not exist")
        for match in CHAPTER_MENTION.finditer(cell["source"]):
            for number in filter(None, match.groups()):
                if int(number) > LAST:
                    problems.append(f"cell {index} mentions {match.group(0)!r}: the course has "
                                    f"chapters 00-{LAST:02d}")
    assert not problems, f"{_name(path)}: " + "\n".join(problems)


def test_the_reference_sheets_link_only_chapters_that_exist():
    problems = []
    for sheet in sorted((ROOT / "course").glob("*.md")):
        for target in CHAPTER_LINK.findall(sheet.read_text(encoding="utf-8")):
            if not (sheet.parent / target).is_file():
                problems.append(f"course/{sheet.name} links {target}, which does not exist")
    assert not problems, "\n".join(problems)
