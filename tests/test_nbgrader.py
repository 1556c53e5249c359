"""A real classroom round trip with nbgrader itself: generate the student version of a chapter
from solutions/, autograde a full solution and a blank submission, export the scores.

The full solution must get every point and the untouched student version none: the checks
reject a plain stub, and nbgrader's own machinery (locked check cells, hidden tests) agrees
with gpulab's release tool.
"""

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHAPTER = "02_moving_data"  # a chapter with two exercises that runs in seconds
NBGRADER = Path(sys.executable).with_name("nbgrader")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not NBGRADER.exists(), reason="nbgrader is not installed (dev extra)"),
]


def nbgrader(course: Path, *args: str, force: bool = True) -> str:
    path = f"{NBGRADER.parent}{os.pathsep}{os.environ.get('PATH', '')}"  # nbgrader runs alembic
    env = {**os.environ, "GPULAB_DEVICE": "sim", "MPLBACKEND": "Agg", "PATH": path}
    result = subprocess.run(
        [str(NBGRADER), *args, *(["--force"] if force else []),
         "--ExecutePreprocessor.timeout=300",
         f"--CourseDirectory.root={course}"],
        cwd=course, capture_output=True, text=True, timeout=600, env=env, check=False)
    assert result.returncode == 0, f"nbgrader {args[0]} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout + result.stderr


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict[str, float]:
    course = tmp_path_factory.mktemp("course")
    (course / "nbgrader_config.py").write_text(
        "c = get_config()\n"
        "c.CourseDirectory.course_id = 'gpulab'\n"
        "c.CourseDirectory.db_assignments = [dict(name='ch')]\n"
        "c.CourseDirectory.db_students = [dict(id='full'), dict(id='blank')]\n"
        "c.ClearSolutions.code_stub = {'python': 'raise NotImplementedError'}\n")
    source = course / "source" / "ch"
    source.mkdir(parents=True)
    shutil.copy(ROOT / "solutions" / f"{CHAPTER}.ipynb", source)
    nbgrader(course, "generate_assignment", "ch")
    released = course / "release" / "ch" / f"{CHAPTER}.ipynb"
    assert released.exists()
    for student, notebook in (("full", source / f"{CHAPTER}.ipynb"), ("blank", released)):
        submitted = course / "submitted" / student / "ch"
        submitted.mkdir(parents=True)
        shutil.copy(notebook, submitted / f"{CHAPTER}.ipynb")
        (submitted / "timestamp.txt").write_text("2026-11-30 12:00:00.000000 UTC")
    nbgrader(course, "autograde", "ch")
    nbgrader(course, "export", "--to", str(course / "grades.csv"), force=False)
    with open(course / "grades.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return {row["student_id"]: (float(row["raw_score"]), float(row["max_score"]))
            for row in rows}


def test_the_full_solution_gets_full_marks(graded):
    score, out_of = graded["full"]
    assert out_of >= 2  # at least two exercises, one point each
    assert score == out_of


def test_a_blank_submission_gets_zero(graded):
    score, out_of = graded["blank"]
    assert out_of >= 2 and score == 0
