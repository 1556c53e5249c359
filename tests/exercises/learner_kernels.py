"""Small kernels, written as a learner writes them, that several tests of gpulab.exercises
run through the checks' shared steps (chapter 01's multiply, its stub, code only the simulator
runs, a copy with and without its guard).

Not a test file: ``conftest.py`` in this folder loads it as the module ``learner_kernels``
(tests/ is not a package, and pytest imports test files with ``--import-mode=importlib``), so
a test file says ``from learner_kernels import multiply``. Numba compiles module-level
``@cuda.jit`` functions only, hence one module rather than a fixture.
"""

import gpulab  # noqa: F401  (must come before numba: it chooses the simulator or the GPU)

# isort: split
from numba import cuda


@cuda.jit
def multiply(x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = x[i] * y[i]


@cuda.jit
def multiply_stub(x, y, out):
    # YOUR CODE HERE
    raise NotImplementedError()


@cuda.jit
def multiply_with_list(x, y, out):  # runs in the simulator, would not compile for a GPU
    i = cuda.grid(1)
    if i < x.shape[0]:
        pair = [x[i], y[i]]
        out[i] = pair[0] * pair[1]


@cuda.jit
def copy_guarded(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = x[i]


@cuda.jit
def copy_unguarded(x, out):
    i = cuda.grid(1)
    out[i] = x[i]
