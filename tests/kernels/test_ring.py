"""gpulab's reduce step of the ring (chapter 11): the kernel, its launcher's input checks, and
a ring all-reduce whose reduce steps are launches."""

import numpy as np
import pytest

from gpulab.kernels import ring
from gpulab.kernels.arrays import InputError


def test_add_chunk_adds_only_the_chunk():
    from numba import cuda

    data = np.arange(20, dtype=np.float64)
    incoming = np.linspace(0, 1, 7)
    d_data = cuda.to_device(data)
    blocks = ring.add_chunk_on_device(d_data, cuda.to_device(incoming), 5, 7, threads=4)
    want = data.copy()
    want[5:12] += incoming
    assert blocks == 2
    np.testing.assert_array_equal(d_data.copy_to_host(), want)


@pytest.mark.parametrize("offset, length", [(-1, 3), (15, 10), (0, -2)])
def test_a_chunk_outside_data_is_refused(offset, length):
    from numba import cuda

    with pytest.raises(InputError, match="not inside data"):
        ring.add_chunk_on_device(cuda.to_device(np.zeros(20)), cuda.to_device(np.zeros(10)),
                                 offset, length)


def test_short_incoming_and_bad_threads_are_refused():
    from numba import cuda

    d_data = cuda.to_device(np.zeros(20))
    with pytest.raises(InputError, match="incoming has 3"):
        ring.add_chunk_on_device(d_data, cuda.to_device(np.zeros(3)), 0, 5)
    with pytest.raises(InputError, match="threads"):
        ring.add_chunk_on_device(d_data, cuda.to_device(np.zeros(5)), 0, 5, threads=0)
