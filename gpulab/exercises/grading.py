"""Grade the chapters with nbgrader: a course folder made from ``solutions/``, and nbgrader run
with this environment's programs on its PATH.

nbgrader starts the program ``alembic`` by name when it creates its gradebook, so
``.venv/bin/nbgrader`` alone fails with "No such file or directory: 'alembic'" unless the
virtual environment is activated. ``run`` here runs nbgrader in a course folder with the
folder of this Python's programs first on PATH, so the environment's Python is all it needs::

    python -m gpulab.exercises.grading init ~/grading      # a course folder, every chapter
    python -m gpulab.exercises.grading run ~/grading generate_assignment '*'
    python -m gpulab.exercises.grading run ~/grading autograde '*'
    python -m gpulab.exercises.grading run ~/grading export   # ~/grading/grades.csv

The course folder is nbgrader's own layout: ``nbgrader_config.py`` and one assignment per
chapter, named like its notebook (``source/02_moving_data/02_moving_data.ipynb``, a copy of
``solutions/02_moving_data.ipynb``). Submissions go to
``submitted/<student>/<assignment>/<notebook>``, as nbgrader's collect puts them.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
SOLUTIONS = ROOT / "solutions"
COURSE_ID = "gpulab"
CELL_TIMEOUT_S = 300  # nbgrader's default, 30 s a cell, is short for the CUDA simulator
CONFIG = f"""\
# Written by python -m gpulab.exercises.grading init: nbgrader's settings for the gpulab course.
import warnings

import zmq

from gpulab.exercises.nbgrader_cells import sanitize_preprocessors

c = get_config()
c.CourseDirectory.course_id = {COURSE_ID!r}
# seconds a cell may run while autograding (nbgrader's default is 30; the CUDA simulator is slow)
c.Execute.timeout = {CELL_TIMEOUT_S}
# restore hidden tests without nbgrader's false "checksum has changed" on untouched check cells
c.Autograde.sanitize_preprocessors = sanitize_preprocessors()
# encrypt the channel to each learner's kernel (CurveZMQ) where pyzmq can, as ipykernel advises
if zmq.has("curve"):
    c.KernelManager.transport_encryption = "auto"
# nbgrader 0.9.6 builds each submission's grades before adding it to its database session, and
# SQLAlchemy 2 says so ("SAWarning: Object of type <SubmittedAssignment> not in session, add
# operation along 'Assignment.submissions' will not proceed"); the next line adds it, grades
# and all (tests/test_nbgrader.py reads every grade back), so this one message is not shown.
warnings.filterwarnings("ignore", message=r"Object of type <Submitted\\w+> not in session",
                        module="nbgrader[.]api")
"""


def chapters(solutions_dir: Path = SOLUTIONS) -> list[Path]:
    """The instructor notebooks, ``solutions/NN_name.ipynb``, in chapter order."""
    found = sorted(p for p in Path(solutions_dir).glob("[0-9][0-9]_*.ipynb"))
    if not found:
        raise FileNotFoundError(f"no chapter notebooks (NN_name.ipynb) in {solutions_dir}")
    return found


def init_course(course_dir: Path, solutions_dir: Path = SOLUTIONS) -> list[str]:
    """Write an nbgrader course folder at ``course_dir``: its config and one assignment per
    chapter. Returns the assignment names. Refuses a folder that already has a gradebook or
    sources, so grades are never mixed with a new copy."""
    course = Path(course_dir)
    taken = [p for p in (course / "gradebook.db", course / "source") if p.exists()]
    if taken:
        raise FileExistsError(f"{course} already holds an nbgrader course ({taken[0].name}); "
                              "choose an empty folder")
    notebooks = chapters(solutions_dir)
    course.mkdir(parents=True, exist_ok=True)
    (course / "nbgrader_config.py").write_text(CONFIG, encoding="utf-8")
    for notebook in notebooks:
        assignment = course / "source" / notebook.stem
        assignment.mkdir(parents=True)
        shutil.copy(notebook, assignment / notebook.name)
    return [notebook.stem for notebook in notebooks]


def nbgrader_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """``environ`` (this process's when None) with this Python's programs folder first on PATH,
    where nbgrader finds ``alembic``."""
    environment = dict(os.environ if environ is None else environ)
    scripts = sysconfig.get_path("scripts")
    rest = environment.get("PATH", "")
    environment["PATH"] = scripts + (os.pathsep + rest if rest else "")
    return environment


def nbgrader_command(args: list[str]) -> list[str]:
    """The command line that runs ``nbgrader ARGS`` with this Python."""
    return [sys.executable, "-m", "nbgrader", *args]


def run_nbgrader(args: list[str], cwd: Path | None = None,
                 environ: dict[str, str] | None = None, **options) -> subprocess.CompletedProcess:
    """Run ``nbgrader ARGS`` in ``cwd`` (the course folder, whose ``nbgrader_config.py`` nbgrader
    reads) with :func:`nbgrader_environment`; ``options`` go to :func:`subprocess.run`."""
    if importlib.util.find_spec("nbgrader") is None:
        raise ModuleNotFoundError(
            f"nbgrader is not installed for {sys.executable}: it comes with the instructor's "
            "environment (.venv, made by `make test` or `make instructor`)")
    return subprocess.run(nbgrader_command(list(args)), cwd=cwd,
                          env=nbgrader_environment(environ), check=False, **options)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gpulab.exercises.grading",
        description="Grade the chapters with nbgrader (see course/INSTRUCTORS.md).")
    commands = parser.add_subparsers(dest="command", required=True)
    init = commands.add_parser("init", help="write an nbgrader course folder with every chapter")
    init.add_argument("folder", type=Path, help="an empty or new folder")
    run = commands.add_parser(
        "run", help="run nbgrader in a course folder with this environment's programs on PATH")
    run.add_argument("folder", type=Path, help="the course folder (made by init)")
    run.add_argument("args", nargs=argparse.REMAINDER, help="nbgrader's own arguments")
    args = parser.parse_args(argv)
    if args.command == "init":
        try:
            names = init_course(args.folder)
        except (FileExistsError, FileNotFoundError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        print(f"wrote {args.folder}/nbgrader_config.py and {len(names)} assignments in "
              f"{args.folder}/source/: {', '.join(names)}")
        return 0
    if not (args.folder / "nbgrader_config.py").is_file():
        print(f"error: {args.folder} is not a course folder (no nbgrader_config.py): make one "
              "with: python -m gpulab.exercises.grading init FOLDER", file=sys.stderr)
        return 1
    try:
        return run_nbgrader(args.args, cwd=args.folder).returncode
    except ModuleNotFoundError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
