"""The cost model of a training step: its kernel list is what the kernel backend launches, its
counts follow the formulas, and its times are labelled as estimates."""

from collections import Counter

import numpy as np
import pytest

from gpulab.hardware import H100_SXM
from gpulab.nn import MLP, Adam, cost, memory
from gpulab.nn.backends import KernelBackend

KERNEL_OF_METHOD = {
    "matmul": "matmul", "transpose": "transpose", "bias_activation": "bias_activation",
    "bias_activation_backward": "bias_activation_backward", "bias_grad": "bias_grad",
    "softmax_cross_entropy": "softmax_cross_entropy",
    "softmax_cross_entropy_backward": "softmax_cross_entropy_backward", "adam": "adam_update",
}


def test_the_kernel_list_is_what_a_step_launches(monkeypatch):
    launched = Counter()
    for method, kernel in KERNEL_OF_METHOD.items():
        original = getattr(KernelBackend, method)

        def counting(self, *args, _original=original, _kernel=kernel, **kwargs):
            launched[_kernel] += 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(KernelBackend, method, counting)
    widths, batch = [5, 4, 3, 2], 3
    model = MLP(widths, "tanh", backend="kernels", dtype=np.float64)
    rng = np.random.default_rng(0)
    model.loss(rng.standard_normal((batch, 5)), rng.integers(0, 2, batch))
    model.backward()
    Adam().step(model)
    # matmul_transposed_* call transpose and matmul, which are counted themselves
    expected = Counter(k.kernel for k in cost.step_kernels(widths, batch, "tanh", "adam"))
    assert launched == expected


def test_counts():
    kernels = cost.step_kernels([64, 128, 10], 32)
    forward = [k for k in kernels if k.kernel == "matmul" and k.phase == "forward"]
    assert [k.flops for k in forward] == [2 * 32 * 64 * 128, 2 * 32 * 128 * 10]
    backward_matmul_flops = sum(k.flops for k in kernels if k.kernel == "matmul"
                                and k.phase == "backward")
    assert backward_matmul_flops == 2 * 32 * 64 * 128 + 2 * 2 * 32 * 128 * 10  # no dX for layer 0
    assert cost.n_parameters([64, 128, 10]) == 64 * 128 + 128 + 128 * 10 + 10
    assert len([k for k in kernels if k.phase == "update"]) == 4


def test_memory_is_the_memory_calculators_alone():
    # one calculator per quantity: chapter 08 counts memory with gpulab.nn.memory, as 09 does
    assert not hasattr(cost, "training_memory") and not hasattr(cost, "TrainingMemory")
    assert cost.n_parameters([64, 128, 10]) == memory.mlp_parameters([64, 128, 10])


def test_estimates_are_labelled_and_launch_bound_for_small_batches():
    small = cost.estimate_step([64, 128, 10], 8, H100_SXM.key)
    assert small.label == ("estimated by gpulab's GPU model of the NVIDIA H100 SXM5 80GB "
                           "(launches issued ahead on one stream)")
    assert small.bound() == "launch" and small.launches == 19
    large = cost.estimate_step([64, 128, 10], 8192, H100_SXM.key)
    assert large.samples_per_s > 100 * small.samples_per_s
    assert large.time_s > small.time_s
    assert cost.estimate_epoch_s([64, 128, 10], 32, 100) == pytest.approx(
        3 * cost.estimate_step([64, 128, 10], 32).time_s
        + cost.estimate_step([64, 128, 10], 4).time_s)
    assert "µs per step" in str(small)


def test_bad_sizes_are_named():
    with pytest.raises(ValueError, match="batch_size"):
        cost.step_kernels([4, 3], 0)
    with pytest.raises(ValueError, match="widths"):
        cost.n_parameters([4])
    with pytest.raises(ValueError, match="optimiser"):
        cost.step_kernels([4, 3], 2, optimiser="lbfgs")
