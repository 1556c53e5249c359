"""The ring all-reduce with each rank's vector on the device: the mean, one launch per reduce
step, messages only to the right neighbour."""

import numpy as np
import pytest

from gpulab.kernels.arrays import InputError
from gpulab.parallel import device_ring, simulated


@pytest.mark.parametrize("ranks, n", [(3, 31), (4, 2), (2, 17)])
def test_the_ring_on_the_device_gives_the_mean(ranks, n):
    rng = np.random.default_rng(ranks)
    xs = [rng.standard_normal(n) for _ in range(ranks)]
    outcome = simulated.run_ranks(ranks, device_ring.ring_allreduce_on_device, [(x,) for x in xs])
    assert outcome.ok, outcome.first_error()
    for mean, launches in outcome.returns:
        np.testing.assert_allclose(mean, np.mean(xs, axis=0), rtol=1e-12, atol=1e-12)
        assert launches <= ranks - 1
    assert all(d == (s + 1) % ranks for s, d in outcome.routes)


def test_the_ring_refuses_a_matrix():
    with pytest.raises(InputError, match="1-D float"):
        device_ring.ring_allreduce_on_device(None, np.zeros((2, 2)))
