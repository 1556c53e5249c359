"""One training step on a timeline: the launches recorded from the kernel backend, matched to the
cost model, estimated in the simulator and measured on the (stand-in) GPU, drawn and tabled."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from gpulab import device, hardware  # noqa: E402
from gpulab.experiments import step_timeline as st  # noqa: E402
from gpulab.hardware import H100_SXM
from gpulab.kernels import matmul  # noqa: E402
from gpulab.nn import cost  # noqa: E402

SIM = device.tier() != "gpu"
SMALL = (5, 3, 2)  # a network the simulator runs in a moment


def texts(fig) -> str:
    found = [t.get_text() for t in fig.findobj(matplotlib.text.Text)]
    for legend in fig.legends:
        found += [t.get_text() for t in legend.get_texts()]
    return " ".join(" ".join(found).split())  # wrapped titles: one space between words


@pytest.mark.skipif(not SIM, reason="the simulator's branch")
def test_the_record_is_the_backends_real_sequence_of_launches():
    launches = st.record_step(32)
    names = [launch.kernel for launch in launches]
    assert names == ["matmul_naive", "bias_activation", "matmul_naive", "bias_activation",
                     "softmax_cross_entropy", "softmax_cross_entropy_backward",
                     "transpose_naive", "matmul_naive", "bias_grad", "transpose_naive",
                     "matmul_naive", "bias_activation_backward", "transpose_naive",
                     "matmul_naive", "bias_grad"] + ["adam_update"] * 4
    first = matmul.launch_config(32, 128, 64, "naive")  # X (32 x 64) @ W (64 x 128)
    assert launches[0].blocks[:2] == first.blocks and launches[0].threads[:2] == first.threads
    assert launches[15].total_threads >= 64 * 128  # Adam: one thread per weight of W1


@pytest.mark.skipif(not SIM, reason="the simulator's branch")
def test_recording_without_running_the_kernels_records_the_same_launches():
    ran = st.record_step(4, widths=SMALL, execute=True)
    recorded = st.record_step(4, widths=SMALL, execute=False)
    assert ran == recorded and len(ran) == len(cost.step_kernels(SMALL, 4))


def test_recording_restores_the_launch():
    from gpulab.kernels.optim import adam_update

    cls = type(adam_update)
    before = cls.__getitem__
    with st.recording_launches(execute=False) as launches:
        adam_update[1, 1](None, None, None, None, 0, 0, 0, 0, 0, 0, 0)  # recorded, not run
    assert cls.__getitem__ is before and launches[0].kernel == "adam_update"
    assert launches[0].blocks == (1, 1, 1) and launches[0].measured_s is None


@pytest.mark.skipif(not SIM, reason="the simulator's branch")
def test_sgd_launches_match_the_cost_models_names():
    timeline = st.step_timeline(4, widths=SMALL, optimiser="sgd")
    assert timeline.entries[-1].kernel == "sgd_momentum_update"
    assert timeline.entries[-1].flops == cost.step_kernels(SMALL, 4, optimiser="sgd")[-1].flops


def test_a_step_the_cost_model_does_not_describe_is_an_error(monkeypatch):
    real = cost.step_kernels
    monkeypatch.setattr(cost, "step_kernels", lambda *a, **k: real(*a, **k)[:-1])
    with pytest.raises(st.TimelineMismatchError, match="launched 19 kernels .* counts 18"):
        st.step_timeline(8)


@pytest.mark.skipif(not SIM, reason="the simulator's branch")
def test_the_simulator_estimates_from_the_roofline_of_a_named_gpu():
    small, large = st.step_timeline(8), st.step_timeline(65536)
    h100 = H100_SXM
    for timeline in (small, large):
        assert timeline.origin == "model" and timeline.launches == 19
        assert timeline.label == (f"estimated by gpulab's GPU model of the {h100.name}, launched "
                                  "through Numba (Python)")
        # the host issues ahead: the GPU waits at most one issue time per kernel, less where
        # the kernel before covered part of it, and no kernel is shorter than the floor
        h = hardware.LAUNCH_OVERHEAD_S
        assert timeline.entries[0].gap_s == pytest.approx(h)
        assert all(0 <= e.gap_s <= h + 1e-12 for e in timeline.entries)
        assert timeline.gaps_s < 19 * h
        assert min(e.kernel_s for e in timeline.entries) >= hardware.KERNEL_MIN_S - 1e-15
        model = cost.estimate_step(list(timeline.widths), timeline.batch_size, h100)
        if timeline is small:  # launch-bound: the host's issuing sets both
            assert timeline.step_s == pytest.approx(model.kernel_s, rel=0.05)
        else:  # the timeline knows each launch's grid: a few-block reduction fills little
            assert timeline.step_s >= model.kernel_s
        assert timeline.copy_s == pytest.approx(model.transfer_s)
        starts = [e.start_s for e in timeline.entries]
        assert starts == sorted(starts)
    assert small.gap_fraction > 0.8 > 0.5 > large.gap_fraction  # gaps dominate small batches
    t4 = st.step_timeline(8, gpu="T4")
    assert "T4" in t4.label and t4.kernels_s > small.kernels_s


def test_the_gpu_branch_measures_every_launch_and_gap(stand_in_gpu):
    timeline = st.step_timeline(4, widths=SMALL)
    assert timeline.origin == "gpu" and timeline.label.startswith(f"measured on {stand_in_gpu}, ")
    assert "timed alone" in timeline.label  # serialised to time each launch: said so
    assert "CUDA events" in timeline.kernel_label and "perf_counter" in timeline.gap_label
    assert timeline.launches == len(cost.step_kernels(SMALL, 4))
    assert all(e.kernel_s > 0 and e.gap_s >= 0 and e.bound == "measured"
               for e in timeline.entries)
    assert timeline.entries[0].kernel == "matmul_tiled"  # the GPU tier's matmul
    assert timeline.entries[1].threads == (32, 8, 1)  # the GPU tier's 2-D blocks
    assert timeline.copy_s is None  # on a GPU the copies are inside the gaps
    assert "measured on" in st.timelines_table([timeline])
    plt.close(st.draw_timelines(timeline))


@pytest.mark.skipif(not SIM, reason="the simulator's branch")
def test_the_figure_and_tables_give_the_totals_and_their_origin():
    small, large = st.step_timeline(8), st.step_timeline(4096)
    fig = st.draw_timelines([small, large])
    words = texts(fig)
    assert "% of the step in gaps" in words and "estimated by gpulab's GPU model" in words
    assert "waiting for the host" in words and "forward kernel" in words
    assert len(fig.axes) == 2
    plt.close(fig)
    table = st.timelines_table([small, large])
    assert "in gaps" in table and "4,096" in table and "not drawn" in table
    rows = str(small.table()).splitlines()
    assert len(rows) == 19 + 3 and "matmul_naive" in rows[1] and "8x64 @ 64x128" in rows[1]
    with pytest.raises(ValueError, match="at least one"):
        st.draw_timelines([])


def test_a_recorded_run_supplies_the_measured_launch_overhead(recorded_gpu_run):
    from gpulab.experiments.step_timeline import step_timeline

    if device.tier() == "gpu":
        pytest.skip("a real GPU measures its own gaps")
    timeline = step_timeline(batch_size=8)
    entries = timeline.entries
    # the host issues each launch in the fixture run's 6 µs, ahead of the GPU: the first
    # kernel waits the whole 6 µs, each later one only what its predecessor did not cover
    assert entries[0].gap_s == pytest.approx(6e-6)
    assert all(0 <= entry.gap_s <= 6e-6 + 1e-12 for entry in entries)
    assert timeline.step_s == pytest.approx(sum(e.gap_s + e.kernel_s for e in entries))
    assert "measured on NVIDIA H200" in timeline.gap_label
