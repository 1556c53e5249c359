"""What the tests of gpulab.exercises share: :mod:`learner_kernels` (the small kernels several
of them check), loaded here under that name so that a test file can import from it (tests/ is
not a package, and pytest runs with ``--import-mode=importlib``, which puts no test folder on
``sys.path``). pytest imports this file before any test file of the folder, in every xdist
worker."""

import importlib.util
import sys
from pathlib import Path

import pytest


def _load(name: str) -> None:
    """Import ``name``.py from this folder as the module ``name``, once."""
    if name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)


_load("learner_kernels")


@pytest.fixture
def no_wait_for_gpu(monkeypatch):
    """The checks' wait for a GPU's events made a no-op (the simulator's events cannot be polled:
    reported to the checks' maintainers), and remembered as the original, so that the checks'
    guard against a learner replacing part of a check does not take this stand-in for one."""
    from gpulab.exercises import learner_code, running

    def no_wait(seconds):
        return None

    monkeypatch.setattr(running, "_wait_for_gpu", no_wait)
    monkeypatch.setitem(learner_code._ORIGINALS, "gpulab.exercises.running._wait_for_gpu", no_wait)
