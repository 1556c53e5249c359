"""Chapter 00's independence experiment: dependent chain vs independent tree, in a real kernel."""

import math

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from gpulab import device  # noqa: E402
from gpulab.experiments.independence import (  # noqa: E402
    HelpersDashboard,
    HelpersExperiment,
    IndependenceExperiment,
    dependency_plot,
    dependency_steps,
    helper_rounds,
    helpers_html,
    helpers_plot,
)

SIM = device.tier() != "gpu"


@pytest.mark.parametrize("n", [1, 2, 12, 13, 100])
def test_independence_sums_match_numpy_and_count_steps(n):
    result = IndependenceExperiment(n).run()
    assert result["chain"]["sum"] == result["tree"]["sum"] == result["numpy_sum"]
    assert result["numpy_sum"] == float(np.sum(result["values"], dtype=np.float64))
    assert result["matches_numpy"]
    assert result["chain"]["steps"] == n - 1
    assert result["tree"]["steps"] == (math.ceil(math.log2(n)) if n > 1 else 0)
    chain, tree = result["chain"]["launch"], result["tree"]["launch"]
    assert (chain.blocks, chain.threads_per_block, chain.grid_stride) == (1, 1, True)
    assert tree.blocks == 1 and tree.threads_per_block >= n
    assert tree.threads_per_block & (tree.threads_per_block - 1) == 0  # a power of two
    assert result["chain"]["kernel"] == "dot_grid_stride"
    assert result["tree"]["kernel"] == "dot_shared_tree"
    if SIM:
        assert result["chain"]["gpu_time"] is None and "Not timed" in result["timing_note"]


def test_independence_rejects_sizes_beyond_one_block():
    with pytest.raises(ValueError, match="1024"):
        IndependenceExperiment(1025)
    with pytest.raises(ValueError):
        IndependenceExperiment(0)


def test_dependency_plot_counts_steps_from_the_reference(figure_texts):
    fig = dependency_plot(n_max=40, n_marked=12)
    chain, tree = fig.axes[0].get_lines()[:2]
    assert list(chain.get_ydata()) == [n - 1 for n in range(1, 41)]
    assert list(tree.get_ydata()) == [math.ceil(math.log2(n)) for n in range(1, 41)]
    assert "n = 12: 11 steps" in figure_texts(fig)
    assert dependency_steps(12) == (11, 4)
    assert dependency_steps(1) == (0, 0)


def test_gpu_branch_with_the_stand_in_gpu(stand_in_gpu):
    result = IndependenceExperiment(12).run()
    assert result["matches_numpy"]
    assert result["chain"]["gpu_time"].median_s >= 0
    assert result["chain"]["gpu_time"].origin == "gpu"


# --- the classroom: questions shared by p helpers -------------------------------------------------


@pytest.mark.parametrize("questions, helpers", [(12, 1), (12, 4), (12, 5), (12, 12), (7, 32)])
def test_helpers_rounds_are_the_launches_that_ran(questions, helpers):
    result = HelpersExperiment(questions, helpers).run()
    independent, chain = result["independent"], result["chain"]
    assert independent["rounds"] == math.ceil(questions / helpers) == len(independent["schedule"])
    assert chain["rounds"] == questions == len(chain["schedule"])  # whatever the helpers
    assert (independent["rounds"], chain["rounds"]) == helper_rounds(questions, helpers)
    # every question answered exactly once, by thread t of round r = question r·p + t
    answered = [q for round_ in independent["schedule"] for _, q in round_]
    assert sorted(answered) == list(range(questions))
    for r, round_ in enumerate(independent["schedule"]):
        assert all(q == r * helpers + t and t < helpers for t, q in round_)
    assert all(round_ == [(0, k)] for k, round_ in enumerate(chain["schedule"]))
    # the kernels' answers, checked against NumPy
    assert np.array_equal(independent["answers"], result["a"] + result["b"])
    assert np.array_equal(chain["answers"], np.cumsum(result["numbers"]))
    assert result["matches_numpy"]
    if SIM:
        assert independent["gpu_time"] is None and "Not timed" in result["timing_note"]


def test_helpers_rejects_bad_counts():
    for bad in (0, 33, 2.0, True):
        with pytest.raises(ValueError, match="helpers"):
            HelpersExperiment(12, bad)
    with pytest.raises(ValueError, match="questions"):
        HelpersExperiment(0, 4)


def test_helpers_plot_and_table_say_what_ran(figure_texts):
    result = HelpersExperiment(12, 4).run()
    fig = helpers_plot(result)
    words = figure_texts(fig)
    assert "12 independent questions shared by 4 helpers: 3 rounds" in words
    assert "a running total (each addition needs the previous sum): 12 rounds" in words
    assert "done after 3 rounds" in words
    assert f"={result['chain']['answers'][-1]:g}" in words  # the last running total
    steps = fig.axes[2].get_lines()[0]
    assert list(steps.get_ydata()) == [math.ceil(12 / p) for p in range(1, 13)]
    table = helpers_html(result)
    assert "<code>saxpy[1, 4]</code> × 3" in table and "<code>saxpy[1, 4]</code> × 12" in table
    assert "✗" not in table
    many = helpers_plot(HelpersExperiment(12, 12).run(), max_rows=8)
    assert "helpers t8–t11 not drawn" in figure_texts(many)


def test_helpers_dashboard():
    board = HelpersDashboard()
    assert (board.questions_slider.value, board.helpers_slider.value) == (12, 4)
    board.helpers_slider.value = 6
    board.run_button.click()
    assert board.last_error is None, board.last_error
    assert board.last_result["independent"]["rounds"] == 2
    assert board.last_result["chain"]["rounds"] == 12
    assert "saxpy[1, 6]</code> × 2" in board.summary.value
    board.helpers_slider.value = 32
    board.questions_slider.value = 1
    board.run_button.click()
    assert board.last_result["independent"]["rounds"] == 1 == board.last_result["chain"]["rounds"]


def test_helpers_gpu_branch_with_the_stand_in_gpu(stand_in_gpu):
    result = HelpersExperiment(12, 4).run()
    assert result["matches_numpy"]
    assert result["independent"]["gpu_time"].origin == "gpu"
    assert "CUDA events" in result["timing_note"]


def test_summary_html_says_which_launch_ran_and_its_steps():
    from gpulab.experiments.independence import summary_html

    result = IndependenceExperiment(20).run()
    assert result["matches_numpy"]
    assert result["chain"]["steps"] == 19 and result["tree"]["steps"] == 5
    html = summary_html(result)
    assert "dot_grid_stride[1, 1]" in html and "dot_shared_tree[1, 32]" in html
    assert "NumPy's sum" in html
