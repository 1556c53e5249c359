"""The lazily loaded packages (experiments, nn, exercises): cheap to import, every exported
name loads, unknown names are refused."""

import subprocess
import sys

import pytest


def test_importing_the_experiments_package_is_light():
    code = ("import sys, gpulab.experiments; "
            "assert 'ipywidgets' not in sys.modules and 'numba' not in sys.modules; "
            "from gpulab.experiments import IndependenceExperiment")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_every_exported_name_loads():
    import gpulab.exercises
    import gpulab.experiments
    import gpulab.nn

    for package in (gpulab.experiments, gpulab.nn, gpulab.exercises):
        for name in package.__all__:
            assert getattr(package, name) is not None, f"{package.__name__}.{name}"
        assert set(package.__all__) <= set(dir(package))
        with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
            package.nothing  # noqa: B018
