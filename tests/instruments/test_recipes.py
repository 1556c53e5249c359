"""A kernel's recipe: its source and globals as data, the function rebuilt from it, and a trace
run from it in a simulator child process."""

import numpy as np
import pytest
from numba import cuda

from gpulab import device, instruments
from gpulab.instruments import trace as tracing

SIM_ONLY = pytest.mark.skipif(device.tier() != "sim",
                              reason="instruments stand in for device arrays only in the simulator")


THREADS = 4

SCALE = np.float32(2.0)


@cuda.jit(device=True)
def doubled(value):
    return value * SCALE


@cuda.jit
def scale_through_shared(x, out):
    buffer = cuda.shared.array(THREADS, np.float32)
    t = cuda.threadIdx.x
    buffer[t] = x[t]
    cuda.syncthreads()
    out[t] = doubled(buffer[THREADS - 1 - t])


def test_a_kernel_recipe_carries_its_globals_and_device_functions():
    recipe = instruments.kernel_recipe(scale_through_shared)
    described = recipe["globals"]
    assert described["THREADS"] == {"kind": "value", "type": "int", "value": "4"}
    assert described["np"] == {"kind": "module", "name": "numpy"}
    assert described["doubled"]["kind"] == "cuda" and described["doubled"]["device"]
    assert described["doubled"]["recipe"]["globals"]["SCALE"]["kind"] == "npscalar"
    assert "x" not in described  # attribute names (threadIdx.x) are not globals
    assert instruments.unknown_globals(recipe) == []
    function = instruments.rebuild_function(recipe)
    assert function.__name__ == "scale_through_shared"


@SIM_ONLY
def test_a_trace_runs_in_a_simulator_child_as_it_does_on_a_gpu():
    """What trace_kernel does in the gpu tier (numba's simulator cannot run in that process):
    the kernel's recipe goes to a child process that traces it in the simulator."""
    x = np.arange(4, dtype=np.float32)
    trace = tracing._trace_in_child(scale_through_shared, 1, 4, (x, np.zeros(4, np.float32)))
    np.testing.assert_array_equal(trace.arrays["out"], 2 * x[::-1])
    assert trace.shared_arrays == ["shared:buffer"]
    assert trace.counts((0, 0)) == {"global_reads": 1, "global_writes": 1, "shared_reads": 1,
                                    "shared_writes": 1, "atomics": 0, "barriers": 1}
