"""The learner's own work and an intact check (gpulab.exercises.learner_code)."""

import gpulab  # noqa: F401  (must come before numba: it chooses the simulator or the GPU)

# isort: split
import numpy as np
from numba import cuda

from gpulab import reference
from gpulab.exercises import learner_code
from gpulab.kernels.dot import block_tree_sum, dot_atomic


def own_sum(x):
    return float(np.sum(x))


def helper(x):
    return reference.dot(x, x)


def indirect(x):
    return helper(x)


def test_the_learner_s_own_function_uses_nothing_of_gpulab():
    assert learner_code.gpulab_things_used(own_sum) == []


def test_gpulab_used_directly_or_through_a_helper_is_found():
    assert learner_code.gpulab_things_used(helper) == ["gpulab.reference (as `reference`)"]
    assert learner_code.gpulab_things_used(indirect) == ["gpulab.reference (as `reference`)"]
    assert learner_code.gpulab_things_used(helper, allowed=("gpulab.reference",)) == []


@cuda.jit
def kernel_with_gpulab_tree(x, out):
    partial = cuda.shared.array(64, np.float32)
    block_tree_sum(partial)


def test_gpulab_kernels_and_device_functions_are_found():
    assert learner_code.gpulab_things_used(dot_atomic) == ["gpulab.kernels.dot.dot_atomic"]
    assert learner_code.gpulab_things_used(kernel_with_gpulab_tree) == [
        "gpulab.kernels.dot.block_tree_sum (as `block_tree_sum`)"]


def test_a_replaced_function_is_named_until_it_is_put_back(monkeypatch):
    learner_code.remember_originals()
    assert learner_code.replaced_parts() == []
    monkeypatch.setattr(np, "allclose", lambda *args, **kwargs: True)
    assert learner_code.replaced_parts() == ["numpy.allclose"]
    monkeypatch.undo()
    assert learner_code.replaced_parts() == []
