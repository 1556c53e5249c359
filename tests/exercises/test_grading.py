"""gpulab.exercises.grading: the course folder it writes, and nbgrader run with this
environment's programs on PATH (the round trip itself is tests/test_nbgrader.py)."""

import os
import sysconfig
from pathlib import Path

import pytest

from gpulab.exercises import grading

ROOT = Path(__file__).resolve().parents[2]


def test_chapters_are_the_solution_notebooks_in_order():
    names = [p.name for p in grading.chapters()]
    assert names == sorted(p.name for p in (ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))
    assert names[0].startswith("00_") and len(names) >= 13


def test_chapters_of_an_empty_folder_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no chapter notebooks"):
        grading.chapters(tmp_path)


def test_init_writes_nbgraders_layout_one_assignment_per_chapter(tmp_path):
    course = tmp_path / "grading"
    names = grading.init_course(course)
    assert names == [p.stem for p in grading.chapters()]
    for name in names:
        copied = course / "source" / name / f"{name}.ipynb"
        assert copied.read_bytes() == (ROOT / "solutions" / f"{name}.ipynb").read_bytes()
    config = (course / "nbgrader_config.py").read_text()
    assert f"c.Execute.timeout = {grading.CELL_TIMEOUT_S}" in config
    assert "sanitize_preprocessors()" in config


def test_init_refuses_a_folder_that_holds_a_course(tmp_path):
    grading.init_course(tmp_path)
    with pytest.raises(FileExistsError, match="already holds an nbgrader course"):
        grading.init_course(tmp_path)
    assert grading.main(["init", str(tmp_path)]) == 1


def test_nbgrader_gets_this_environments_programs_first_on_path():
    environment = grading.nbgrader_environment({"PATH": "/usr/bin", "HOME": "/home/x"})
    assert environment["PATH"].split(os.pathsep) == [sysconfig.get_path("scripts"), "/usr/bin"]
    assert environment["HOME"] == "/home/x"
    assert grading.nbgrader_environment({})["PATH"] == sysconfig.get_path("scripts")


def test_run_outside_a_course_folder_says_how_to_make_one(tmp_path, capsys):
    assert grading.main(["run", str(tmp_path), "autograde", "*"]) == 1
    assert "grading init" in capsys.readouterr().err
