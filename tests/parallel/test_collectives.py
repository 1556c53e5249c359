"""gpulab's ring all-reduce: the mean on every rank for any length and any number of ranks, and
exactly 2(N - 1)/N of the vector sent per rank."""

import numpy as np
import pytest

from gpulab.parallel.collectives import (
    chunk_bounds,
    ring_allreduce_mean,
    ring_bytes_per_rank,
    ring_bytes_sent,
    ring_schedule,
)
from gpulab.parallel.simulated import run_ranks


@pytest.mark.parametrize("n, size", [(10, 3), (7, 7), (3, 5), (0, 2), (100, 1)])
def test_chunk_bounds_cut_like_array_split(n, size):
    want = [(int(c[0]), int(c[-1]) + 1) for c in np.array_split(np.arange(n), size) if len(c)]
    got = [(a, b) for a, b in chunk_bounds(n, size) if b > a]
    assert got == want
    assert chunk_bounds(n, size)[-1][1] == n


@pytest.mark.parametrize("size", [2, 3, 5])
def test_the_schedule_ends_with_every_chunk_finished_once_per_rank(size):
    steps = ring_schedule(size)
    assert len(steps) == 2 * (size - 1)
    reduce = [s for s in steps if s["phase"] == "reduce-scatter"]
    # rank r receives from rank r - 1 exactly what that rank sends
    for step in steps:
        for r in range(size):
            assert step["receive"][r] == step["send"][(r - 1) % size]
    finished = [reduce[-1]["receive"][r] for r in range(size)]
    assert sorted(finished) == list(range(size))


@pytest.mark.parametrize("size", [1, 2, 3, 4, 6])
@pytest.mark.parametrize("n", [1, 5, 37])
def test_ring_allreduce_mean_matches_numpy(size, n):
    rng = np.random.default_rng(size * 100 + n)
    xs = [rng.standard_normal(n) for _ in range(size)]
    originals = [x.copy() for x in xs]
    result = run_ranks(size, ring_allreduce_mean, [(x,) for x in xs], allow_collectives=False)
    assert result.ok, result.first_error()
    want = np.mean(originals, axis=0)
    for got in result.returns:
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    assert all(np.array_equal(x, o) for x, o in zip(xs, originals, strict=True))
    assert result.bytes_sent == ring_bytes_sent(n, size, 8)


def test_a_ring_sends_2_n_minus_1_over_n_of_the_vector():
    assert ring_bytes_per_rank(1000, 4) == 1500
    assert ring_bytes_per_rank(1000, 1) == 0
    assert sum(ring_bytes_sent(1000, 4, 1)) == 4 * 1500
    assert ring_bytes_per_rank(1e9, 10_000) < 2e9
