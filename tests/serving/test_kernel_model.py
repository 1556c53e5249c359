"""A served model whose every batch is one fused kernel launch: the NumPy model's classes,
served over HTTP by the course's server; a network the kernel cannot compute is refused."""

import gpulab  # noqa: F401  (before numba: it chooses the simulator or the GPU)

# isort: split
import numpy as np
import pytest

from gpulab.nn.mlp import MLP
from gpulab.serving.kernel_model import KernelModel
from gpulab.serving.loadtest import load_test, post_json
from gpulab.serving.server import InferenceServer


def small_model(widths=(12, 9, 5), activation="relu") -> MLP:
    return MLP(widths, activation=activation, seed=3)


def test_it_gives_the_numpy_models_classes_one_launch_per_call():
    model = small_model()
    X = np.random.default_rng(0).standard_normal((37, 12)).astype(np.float32)
    served = KernelModel(model, threads_per_block=16)
    np.testing.assert_array_equal(served.predict(X), model.predict(X))
    served.predict(X[:5])
    assert (served.launches, served.rows) == (2, 42)
    assert "gpulab's fused_mlp_argmax" in repr(served) and "12 → 9 → 5" in repr(served)


def test_it_runs_the_kernel_it_is_given():
    calls = []
    from gpulab.kernels.inference import fused_mlp_argmax

    class Spy:
        def __getitem__(self, config):
            calls.append(config)
            return fused_mlp_argmax[config]

    served = KernelModel(small_model(), Spy(), "your kernel", threads_per_block=8)
    served.predict(np.zeros((20, 12), np.float32))
    assert calls == [(3, 8)] and served.whose == "your kernel"


@pytest.mark.parametrize("widths, activation, said", [
    ((12, 5), "relu", "two dense layers"),
    ((12, 9, 7, 5), "relu", "two dense layers"),
    ((12, 9, 5), "tanh", "must be ReLU"),
])
def test_networks_the_kernel_cannot_compute_are_refused(widths, activation, said):
    with pytest.raises(ValueError, match=said):
        KernelModel(small_model(widths, activation))


def test_bad_batches_get_a_clear_error():
    served = KernelModel(small_model())
    for X in (np.zeros((3, 11)), np.zeros(12), np.zeros((0, 12))):
        with pytest.raises(ValueError, match="X must have shape"):
            served.predict(X)
    assert served.launches == 0


def test_the_server_answers_with_the_kernel():
    model = small_model()
    rows = np.random.default_rng(1).standard_normal((30, 12)).astype(np.float32)
    served = KernelModel(model)
    with InferenceServer(served, window_ms=2.0, max_batch=8) as server:
        status, answer = post_json(server.url + "/predict", {"inputs": rows[:3].tolist()})
        assert status == 200
        assert answer["classes"] == model.predict(rows[:3]).tolist()
        result = load_test(server.url, rows, n_requests=20, rate_per_s=100.0, time_limit_s=10.0,
                           expected=model.predict(rows), arrivals="fixed",
                           separate_process=False)
    assert (result.completed, result.wrong, result.lost) == (20, 0, 0)
    assert served.launches >= 2
