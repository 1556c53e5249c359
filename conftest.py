"""Root pytest configuration for the notebook runs (`pytest --nbval-lax solutions`).

`make test` runs nbval on solutions/ only: each learner notebook in course/ is executed once, in
the learner's environment, by tests/test_binder.py, and its checks read that run. Asked for
explicitly (`pytest --nbval-lax course`), a learner notebook identical to its source in
solutions/ (a chapter without exercises) would only run the same cells twice, so it is not
collected again.
"""

from pathlib import Path

ROOT = Path(__file__).parent


def pytest_ignore_collect(collection_path, config):
    path = Path(collection_path)
    if path.suffix != ".ipynb":
        return None
    if ".ipynb_checkpoints" in path.parts:
        return True
    if path.parent == ROOT / "course":
        source = ROOT / "solutions" / path.name
        if source.is_file() and source.read_bytes() == path.read_bytes():
            return True
    return None
