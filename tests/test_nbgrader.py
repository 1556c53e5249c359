"""A real classroom round trip with nbgrader itself, for every chapter, run with the commands
course/INSTRUCTORS.md gives (read from it, so the two cannot drift): a course folder made from
solutions/, ``generate_assignment``, learners' submissions, ``autograde``, ``export``.

- ``full`` submits the released notebook with every solution filled in, as a learner would
  (the released cells, nbgrader's checksums and metadata kept): every point.
- ``partial`` is ``full`` with one plausible mistake in one exercise (``MISTAKES``): that
  exercise's check, and only it, scores 0. It is handed in for two chapters: a kernel (ch01)
  and the loss scaler that later cells use (ch10), so a wrong answer that later cells build on
  costs its own point only. Each is a second run of a whole chapter, so it is kept to these two;
  whether each check rejects its wrong answers is what tests/exercises/ tests, check by check.
- ``blank`` submits the released notebook untouched: no point. It is handed in for
  ``BLANK_CHAPTERS`` only, to check nbgrader's side (the hidden asserts raise, so the checks
  score 0, and nothing else raises). That no check of any chapter passes on the untouched
  notebook is read from the learner notebook's one run in tests/test_binder.py, so the learner
  version is not executed twice in a ``make test``.

One course folder holds all 13 chapters, as an instructor's does (two folders graded at once
cost nbgrader's fixed steps twice, about 13 CPU-seconds, and a ``make test`` on 2 cores is
bound by its CPU time, not by its longest test). nbgrader runs with
the environment's programs *not* on PATH, as an instructor who did not activate ``.venv`` runs
it, and must print no warning: a warning such as "Attribute 'checksum' for cell ... has changed"
means a submission or a cell's metadata differs from what nbgrader released.
"""

import csv
import importlib.util
import os
import re
import shlex
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import nbformat
import pytest

from gpulab.exercises import grading

ROOT = Path(__file__).resolve().parent.parent
INSTRUCTORS = ROOT / "course" / "INSTRUCTORS.md"
CHAPTERS = [path.stem for path in grading.chapters()]
STUDENTS = ("full", "blank", "partial")
BLANK_CHAPTERS = ("00_welcome",)  # the blank submission: nbgrader's side, on one chapter
COURSE_PLACEHOLDER = "~/grading"  # the course folder in INSTRUCTORS.md's commands
SUBMITTED_AT = "2026-11-30 12:00:00.000000 UTC"  # timestamp.txt, as nbgrader collect writes it

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("nbgrader") is None,
                       reason="nbgrader (Python >= 3.11, the dev extra) is not installed"),
]

# The partial submissions, one plausible mistake in each of two chapters: (solution cell's
# grade id, the line(s) of the solution, the mistake that replaces them, the check cell that
# must then score 0).
MISTAKES = {
    "01_dot_product": ("ch01-exercise3-solution",
                       "    if t == 0:\n        cuda.atomic.add(out, 0, partial[0])",
                       "    cuda.atomic.add(out, 0, partial[0])", "ch01-exercise3-check"),
    "10_mixed_precision": ("ch10-exercise1-solution", "return scale * 2.0, 0, True",
                           "return scale * 2.0, clean_steps, True", "ch10-exercise1-check"),
}
SOLUTION_MARKER = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$")


def documented_commands() -> list[str]:
    """The grading commands of INSTRUCTORS.md's nbgrader section, in order."""
    text = INSTRUCTORS.read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    commands = [line.strip() for block in blocks for line in block.splitlines()
                if "gpulab.exercises.grading" in line and not line.lstrip().startswith("#")]
    return [command.split("  #")[0].strip() for command in commands]


def step_of(command: str) -> str:
    """``init``, or the nbgrader command that ``... grading run FOLDER <command> ...`` runs."""
    words = shlex.split(command)
    return words[5] if words[3] == "run" else words[3]


def without_this_environment_on_path() -> dict[str, str]:
    """This process's environment with the virtual environment's programs taken off PATH (as
    for an instructor who did not activate it), the simulator chosen and no plot windows."""
    scripts = os.path.normcase(sysconfig.get_path("scripts"))
    path = [p for p in os.environ.get("PATH", os.defpath).split(os.pathsep)
            if p and os.path.normcase(p.rstrip(os.sep)) != scripts]
    return {**os.environ, "PATH": os.pathsep.join(path), "GPULAB_DEVICE": "sim",
            "MPLBACKEND": "Agg"}


def answer(source: str) -> str:
    """A solution cell as a learner would hand it in: the solution, without nbgrader's
    markers."""
    return "\n".join(line for line in source.split("\n") if not SOLUTION_MARKER.match(line))


def submissions(source: Path, released: Path) -> dict[str, nbformat.NotebookNode]:
    """The learners' notebooks for one chapter, each made from the released notebook: ``full``,
    ``partial`` for the chapters of :data:`MISTAKES`, ``blank`` for :data:`BLANK_CHAPTERS`."""
    solutions = {cell.metadata.nbgrader["grade_id"]: answer(cell.source)
                 for cell in nbformat.read(source, as_version=4).cells
                 if cell.metadata.get("nbgrader", {}).get("solution")}
    blank = nbformat.read(released, as_version=4)
    full, partial = nbformat.from_dict(blank), nbformat.from_dict(blank)
    mistake_cell, right, wrong, _ = MISTAKES.get(source.stem, (None, "", "", None))
    for notebook, mistaken in ((full, None), (partial, mistake_cell)):
        for cell in notebook.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            if grade_id in solutions:
                cell.source = solutions[grade_id]
            if mistaken is not None and grade_id == mistaken:
                assert cell.source.count(right) == 1, f"{grade_id} no longer holds {right!r}"
                cell.source = cell.source.replace(right, wrong)
    handed_in = {"full": full} | ({"partial": partial} if source.stem in MISTAKES else {})
    return handed_in | ({"blank": blank} if source.stem in BLANK_CHAPTERS else {})


class Classroom:
    """The round trip's results: nbgrader's output per command, the exported grades, each
    graded cell's score, and the released notebooks."""

    def __init__(self, course: Path):
        self.course, self.chapters = course, CHAPTERS
        self.logs: dict[str, str] = {}
        self.seconds: dict[str, float] = {}

    def run(self, command: str) -> None:
        words = shlex.split(command.replace(COURSE_PLACEHOLDER, str(self.course)))
        assert words[:3] == [".venv/bin/python", "-m", "gpulab.exercises.grading"], command
        start = time.perf_counter()
        result = subprocess.run(
            [sys.executable, *words[1:]], cwd=ROOT, capture_output=True, text=True,
            env=without_this_environment_on_path(), timeout=1200, check=False)
        name = step_of(command)
        self.seconds[name] = time.perf_counter() - start
        self.logs[name] = result.stdout + result.stderr
        assert result.returncode == 0, f"{command} failed:\n{self.logs[name]}"

    def hand_in(self) -> None:
        for chapter in self.chapters:
            released = self.course / "release" / chapter / f"{chapter}.ipynb"
            source = self.course / "source" / chapter / f"{chapter}.ipynb"
            for student, notebook in submissions(source, released).items():
                folder = self.course / "submitted" / student / chapter
                folder.mkdir(parents=True)
                nbformat.write(notebook, folder / f"{chapter}.ipynb")
                (folder / "timestamp.txt").write_text(SUBMITTED_AT)

    def grades(self) -> dict[tuple[str, str], tuple[float, float]]:
        """(student, chapter) -> (score, max score), from the exported CSV."""
        with open(self.course / "grades.csv", newline="") as handle:
            return {(row["student_id"], row["assignment"]):
                    (float(row["raw_score"]), float(row["max_score"]))
                    for row in csv.DictReader(handle)}

    def errors(self, student: str, chapter: str) -> dict[str, list[int]]:
        """The cells of one autograded notebook that raised: {"grade": [...], "other": [...]}
        (cell indices), grade cells being the checks."""
        path = self.course / "autograded" / student / chapter / f"{chapter}.ipynb"
        found: dict[str, list[int]] = {"grade": [], "other": []}
        for index, cell in enumerate(nbformat.read(path, as_version=4).cells):
            if any(o.get("output_type") == "error" for o in cell.get("outputs", [])):
                grade = cell.metadata.get("nbgrader", {}).get("grade", False)
                found["grade" if grade else "other"].append(index)
        return found

    def cell_scores(self, student: str, chapter: str) -> dict[str, float]:
        """Each graded cell's score for one submission, from nbgrader's gradebook."""
        from nbgrader.api import Gradebook

        with Gradebook(f"sqlite:///{self.course / 'gradebook.db'}", grading.COURSE_ID) as book:
            notebook = book.find_submission_notebook(chapter, chapter, student)
            return {grade.name: float(grade.score) for grade in notebook.grades}


def grade(room: Classroom, commands: list[str], steps: list[str]) -> Classroom:
    """Run INSTRUCTORS.md's commands on the course folder, handing in before ``autograde``."""
    for command, step in zip(commands, steps, strict=True):
        if step == "autograde":
            room.hand_in()
        room.run(command)
    print(room.chapters, {step: round(seconds, 1) for step, seconds in room.seconds.items()})
    grades = room.grades()
    for chapter in room.chapters:  # the score table, for the record (pytest -s shows it)
        print(chapter, *(f"{s}={grades[(s, chapter)][0]:g}/{grades[(s, chapter)][1]:g}"
                         for s in STUDENTS
                         if (room.course / "submitted" / s / chapter).is_dir()))
    return room


@pytest.fixture(scope="module")
def classroom(tmp_path_factory) -> Classroom:
    commands = documented_commands()
    steps = [step_of(command) for command in commands]
    assert steps == ["init", "generate_assignment", "autograde", "export"], commands
    room = Classroom(tmp_path_factory.mktemp("classroom") / "grading")
    return grade(room, commands, steps)


def test_instructors_grade_every_chapter_with_these_commands():
    commands = documented_commands()
    assert any(f"init {COURSE_PLACEHOLDER}" in c for c in commands), commands
    assert all(c.startswith(".venv/bin/python -m gpulab.exercises.grading ") for c in commands)


# asyncio's report of a task a kernel left pending as its process exited: on one clean-clone run
# of 13 autogrades, ipykernel's control dispatcher (`Kernel.dispatch_control`). It says nothing
# about the notebooks, and the pattern below would match it only through the name of a zmq
# callback in its repr (`ZMQStream._run_callback.<locals>._log_error`).
KERNEL_SHUTDOWN_TASK = re.compile(r"^task: <Task pending .*coro=<Kernel\.dispatch_control\(\)")


def test_nbgrader_prints_no_warning(classroom):
    for step, log in classroom.logs.items():
        noisy = [line for line in log.splitlines()
                 if re.search(r"warn|error|checksum|has changed", line, flags=re.IGNORECASE)
                 and not KERNEL_SHUTDOWN_TASK.match(line.strip())]
        assert not noisy, f"nbgrader {step} warned:\n" + "\n".join(noisy)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_nbgrader_releases_the_learner_notebook(classroom, chapter):
    """generate_assignment's code cells are course/'s (the release tool's), cell for cell."""
    room = classroom
    released = nbformat.read(room.course / "release" / chapter / f"{chapter}.ipynb", 4)
    ours = nbformat.read(ROOT / "course" / f"{chapter}.ipynb", as_version=4)
    code = [[c.source for c in nb.cells if c.cell_type == "code"] for nb in (released, ours)]
    assert code[0] == code[1]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_notebooks_run_top_to_bottom(classroom, chapter):
    """What ``pytest --nbval-lax`` asks of solutions/: the full solution raises nowhere; the
    untouched learner version (where handed in) only in its checks (the hidden asserts)."""
    room = classroom
    assert room.errors("full", chapter) == {"grade": [], "other": []}
    if chapter in BLANK_CHAPTERS:
        blank = room.errors("blank", chapter)
        assert blank["other"] == [] and blank["grade"], blank


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_scores(classroom, chapter):
    room = classroom
    grades = room.grades()
    full, out_of = grades[("full", chapter)]
    checks = room.cell_scores("full", chapter)
    assert out_of == len(checks) >= 2  # one point a check
    assert full == out_of
    if chapter in BLANK_CHAPTERS:  # elsewhere test_binder reads that no check passed
        assert grades[("blank", chapter)] == (0, out_of)
    if chapter not in MISTAKES:
        return
    partial, partial_out_of = grades[("partial", chapter)]
    assert partial_out_of == out_of and 0 < partial < out_of
    mistaken_check = MISTAKES[chapter][3]
    scores = room.cell_scores("partial", chapter)
    assert scores[mistaken_check] == 0
    assert all(score == 1 for name, score in scores.items() if name != mistaken_check), scores
