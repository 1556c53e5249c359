import pytest

from gpulab.kernels.arrays import InputError
from gpulab.kernels.launch import grid_stride, one_thread_per_element


def test_one_thread_per_element_covers_every_element_once():
    config = one_thread_per_element(1000, 256)
    assert (config.blocks, config.total_threads, config.idle_threads) == (4, 1024, 24)
    handled = [
        i for b in range(config.blocks) for t in range(256) for i in config.elements_of(b, t)
    ]
    assert handled == list(range(1000))
    assert list(config.elements_of(3, 255)) == []  # idle: past the end


def test_grid_stride_threads_loop():
    config = grid_stride(10, threads_per_block=2, blocks=2)
    assert list(config.elements_of(0, 1)) == [1, 5, 9]
    handled = sorted(i for b in range(2) for t in range(2) for i in config.elements_of(b, t))
    assert handled == list(range(10))


def test_bad_block_sizes():
    with pytest.raises(InputError, match="whole number"):
        one_thread_per_element(10, 2.5)
    with pytest.raises(InputError, match="outside"):
        one_thread_per_element(10, 0)
