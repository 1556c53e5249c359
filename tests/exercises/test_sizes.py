"""The random problem sizes the exercise checks draw: always found, never a hang.

A rejection loop that cannot succeed (three different sizes from too small a range, a size
that is not a multiple of 1) hangs a learner's notebook; these tests try many seeds."""

import numpy as np
import pytest

from gpulab.exercises import ch06, trial
from gpulab.exercises.ch03 import draw_naive, draw_tiled


@pytest.mark.parametrize("side", [3, 4, 5, 8, 16, 32])
def test_tiled_matmul_shapes_exist_for_every_tile(side):
    for seed in range(300):
        trial = draw_tiled("check", seed, side)
        dims = (trial.rows, trial.cols, trial.inner)
        assert len(set(dims)) == 3
        assert all(d % side for d in dims)


@pytest.mark.parametrize("block", [(8, 4), (4, 8), (16, 2), (32, 8)])
def test_naive_matmul_shapes_exist_for_every_block(block):
    for seed in range(300):
        trial = draw_naive("check", seed, block)
        assert len({trial.rows, trial.cols, trial.inner}) == 3
        assert trial.rows % block[1] and trial.cols % block[0]


@pytest.mark.parametrize("tile", [1, 2, 33, 2.5, True])
def test_the_tiled_check_refuses_tiles_it_cannot_test(tile):
    from gpulab.exercises import ch03

    with pytest.raises(ValueError, match="tile must be a whole number from 3 to 32"):
        ch03.check_matmul_tiled(lambda A, B, C: None, tile=tile)


@pytest.mark.parametrize("block", [1, 2, 32, 64])
def test_sizes_for_any_block(block):
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = trial.draw_size(rng, block)
        assert block == 1 or n % block
        side = trial.draw_size(rng, block, (2, 10), full_blocks=1)
        assert side > block or block == 1


def test_dense_backward_check_terminates_and_passes_the_reference_on_many_seeds():
    def dense_backward(X, W, dZ):
        return X.T @ dZ, dZ.sum(axis=0), dZ @ W.T

    for seed in range(200):  # before the fix, ~1 seed in 9 looped forever (batch == n_in)
        assert ch06.check_dense_backward(dense_backward, seed=seed, show=False).passed
