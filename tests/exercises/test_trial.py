"""One trial for any shape (gpulab.exercises.trial): drawn block sizes, sizes never a multiple
of the block, the same problem under another block size."""

import gpulab  # noqa: F401  (must come before numba: it chooses the simulator or the GPU)

# isort: split
import numpy as np
import pytest
from numba import cuda

from gpulab import device
from gpulab.exercises import running
from gpulab.exercises.trial import (
    BLOCK_CHOICES,
    BLOCK_CHOICES_2D,
    Trial,
    describe_launch,
    draw_case,
    draw_size,
)

TIER = "gpu" if device.tier() == "gpu" else "sim"


def test_a_1d_trial_draws_its_block_and_a_size_that_is_not_a_multiple_of_it():
    blocks = set()
    for seed in range(40):
        trial = Trial.draw("check_demo", seed)
        blocks.add(trial.threads_per_block)
        assert trial.n % trial.threads_per_block
        assert trial.blocks == -(-trial.n // trial.threads_per_block)
        assert trial.idle_threads == trial.blocks * trial.threads - trial.n
        assert trial.extents == (trial.n,) and trial.uniform(0, 1).shape == (trial.n,)
    assert blocks == set(BLOCK_CHOICES[TIER])  # every block size, so none can be hard-coded


def test_a_trial_repeats_with_its_seed_and_says_how():
    first, again = Trial.draw("check_demo", 12), Trial.draw("check_demo", 12)
    assert first.shape == again.shape and first.block == again.block
    assert np.array_equal(first.uniform(0, 1), again.uniform(0, 1))
    assert "repeat it with check_demo(kernel, seed=12)" in str(first)
    assert str(first).startswith(f"n={first.n}, {first.blocks} blocks of {first.threads} threads")


def test_the_same_problem_under_another_block_has_the_same_data():
    trial = Trial.draw("check_demo", 5)
    other = trial.other_block()
    assert other.threads_per_block != trial.threads_per_block
    assert other.shape == trial.shape
    assert np.array_equal(trial.with_block(other.block).uniform(0, 1), other.uniform(0, 1))
    assert min(BLOCK_CHOICES[TIER]) in (trial.threads_per_block, other.threads_per_block)


def test_a_fixed_grid_trial_keeps_its_grid_under_another_block_size():
    trial = Trial.draw("check_demo", 7)
    trial.grid_blocks = 3
    other = trial.other_block()
    assert trial.blocks == other.blocks == other.grid_blocks == 3
    assert other.grid_threads == 3 * other.threads_per_block
    assert str(trial).startswith(f"n={trial.n}, a fixed grid of 3 blocks of {trial.threads} "
                                 f"threads = {trial.grid_threads} threads, float32, seed=7")


def test_a_given_block_and_shape_are_kept():
    trial = Trial.draw("check_demo", 1, np.float64, block=64, shape=(128,))
    assert (trial.n, trial.threads_per_block, trial.dtype) == (128, 64, np.float64)


def test_a_2d_trial_has_rows_columns_and_a_block_along_x_and_y():
    trial = Trial.draw("check_demo", 3, dims=2)
    assert trial.block in BLOCK_CHOICES_2D[TIER]
    assert trial.rows % trial.block[1] and trial.cols % trial.block[0]
    assert trial.blocks == (-(-trial.cols // trial.block[0]), -(-trial.rows // trial.block[1]))
    assert trial.threads == trial.block and trial.padding == max(trial.block)
    assert trial.normal().shape == (trial.rows, trial.cols)
    assert str(trial).startswith(f"{trial.rows} x {trial.cols}, ")


@cuda.jit
def double(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = 2 * x[i]


@pytest.mark.parametrize("block", [32, 96])
def test_a_trial_launches_through_the_shared_machinery(block):
    trial = Trial.draw("check_demo", 2, block=block, size_range=(100, 200))
    x = trial.uniform(0, 1)
    assert np.allclose(running.run_elementwise(double, trial, x), 2 * x)


# --- sizes and launches -----------------------------------------------------------------------


def test_sizes_are_never_a_multiple_of_the_block_size():
    rng = np.random.default_rng(0)
    for threads in (32, 64, 128):
        sizes = [draw_size(rng, threads) for _ in range(300)]
        assert all(n % threads for n in sizes)
        assert min(sizes) > 2 * threads


def test_draw_size_spans_the_full_blocks_asked_for():
    rng = np.random.default_rng(1)
    for block in (8, 16):
        sizes = [draw_size(rng, block, (9, 40), full_blocks=1) for _ in range(200)]
        assert all(n % block and n > block for n in sizes)


def test_launches_are_described_in_one_way():
    assert describe_launch(3, 64) == "3 blocks of 64 threads"
    assert describe_launch((4, 2), (8, 8)) == "4 x 2 blocks of 8 x 8 threads"
    trial = Trial.draw("check_demo", 5, np.float32, block=64)
    assert f"{trial.blocks} blocks of 64 threads" in str(trial)
    assert str(trial).endswith("repeat it with check_demo(kernel, seed=5)")
    grid = Trial.draw("check_demo", 5, dims=2)
    assert grid.launched in str(grid) and grid.threads == grid.block


def test_a_labelled_trial_names_its_case_and_what_its_repeat_call_needs():
    trial = draw_case("check_demo", 4, np.float32, case=1)
    assert trial.block == BLOCK_CHOICES_2D[TIER][(4 + 1) % 3]
    assert str(trial) == str(Trial.draw("check_demo", 4, np.float32, dims=2, case=1))
    trial.case, trial.repeat_with = "act = 1 (ReLU)", "tile=16"
    assert str(trial).startswith("act = 1 (ReLU); ")
    assert str(trial).endswith("repeat it with check_demo(kernel, tile=16, seed=4)")


def test_a_trial_says_its_launch_threads_along_each_axis():
    one = Trial.draw("check_demo", 3)
    assert one.launch_threads == (one.blocks * one.threads,)
    two = Trial.draw("check_demo", 3, dims=2)
    assert two.launch_threads == (two.blocks[0] * two.block[0], two.blocks[1] * two.block[1])
    assert two.launch_threads[0] >= two.cols and two.launch_threads[1] >= two.rows


def test_one_trial_class_covers_rows_products_pairs_and_fixed_grids():
    rng = np.random.default_rng(1)
    rows = Trial("check_demo", 1, (57,), (32,), np.dtype(np.float32), rng, inner=12)
    assert rows.extents == (57, 12) and str(rows).startswith("57 rows x 12 columns, 2 blocks")
    product = Trial("check_demo", 1, (23, 31), (8, 4), np.dtype(np.float32), rng, inner=17)
    assert product.extents == (23, 31, 17) and str(product).startswith("A 23x17 @ B 17x31, ")
    pair = Trial("check_demo", 1, (301,), (32,), np.dtype(np.float32), rng, other_size=64)
    assert pair.other_block().block == (64,) and pair.other_block().shape == (301,)
    fixed = Trial("check_demo", 1, (301,), (32,), np.dtype(np.float32), rng, grid_blocks=3,
                  case="case b", repeat_with="tile=8")
    assert fixed.blocks == 3 and fixed.grid_threads == 96
    assert str(fixed) == ("case b; n=301, a fixed grid of 3 blocks of 32 threads = 96 threads, "
                          "float32, seed=1; repeat it with check_demo(kernel, tile=8, seed=1)")
    moved = fixed.with_block(64)
    assert (moved.blocks, moved.grid_threads, moved.case) == (3, 192, "case b")
