"""What a kernel object is made of: its Python function, its launchable self, device or not."""

import pytest
from numba import cuda

from gpulab import device, instruments
from gpulab.instruments import launchable, python_function

SIM_ONLY = pytest.mark.skipif(device.tier() != "sim",
                              reason="instruments stand in for device arrays only in the simulator")


@cuda.jit
def dot_atomic(x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        cuda.atomic.add(out, 0, x[i] * y[i])


def test_a_kernel_object_gives_its_function_and_its_launchable_self():
    assert python_function(dot_atomic).__name__ == "dot_atomic"
    assert python_function(dot_atomic[4, 32]).__name__ == "dot_atomic"
    assert launchable(dot_atomic[4, 32]) is launchable(dot_atomic)
    assert python_function(lambda x: x) is None and python_function(42) is None
    assert not instruments.is_device_function(dot_atomic)
    assert instruments.is_device_function(cuda.jit(device=True)(lambda a: a))
