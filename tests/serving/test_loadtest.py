"""The bounded load test: loopback only, bounded in requests and time, percentiles vs
throughput."""

import numpy as np
import pytest

from gpulab.serving.loadtest import check_loopback, load_test, percentile
from gpulab.serving.server import InferenceServer


class Argmax:
    n_inputs = 4

    def predict(self, X):
        return np.argmax(X, axis=1)


def test_percentile_is_nearest_rank():
    values = list(range(1, 101))
    assert percentile(values, 50) == 50 and percentile(values, 99) == 99
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0 and percentile([7.0], 99) == 7.0
    with pytest.raises(ValueError):
        percentile([], 50)


@pytest.mark.parametrize("url", ["http://example.com:80", "http://10.0.0.1:8000",
                                 "https://127.0.0.1:1"])
def test_only_loopback(url):
    with pytest.raises(ValueError, match="127.0.0.1"):
        check_loopback(url)


def test_bounds_are_enforced():
    with pytest.raises(ValueError):
        load_test("http://127.0.0.1:1", np.zeros((1, 4)), n_requests=10**6)
    with pytest.raises(ValueError):
        load_test("http://127.0.0.1:1", np.zeros((1, 4)), time_limit_s=3600)


def test_load_test_measures_percentiles_and_throughput_for_two_windows():
    rows = np.eye(4)
    results = {}
    for window in (0.0, 20.0):
        with InferenceServer(Argmax(), window_ms=window) as server:
            r = load_test(server.url, rows, n_requests=40, rate_per_s=400, concurrency=8,
                          time_limit_s=5)
            results[window] = (r, server.stats())
        assert r.completed == 40 and r.statuses == {200: 40} and r.failures == 0
        assert 0 < r.p50_ms <= r.p99_ms and r.throughput_per_s > 20
        assert r.elapsed_s < 10 and "p99" in str(r)
    # a longer window waits longer and batches more: the trade
    assert results[20.0][0].p50_ms > results[0.0][0].p50_ms
    assert results[20.0][1]["mean_batch_rows"] > results[0.0][1]["mean_batch_rows"]


def test_time_limit_stops_a_slow_test():
    with InferenceServer(Argmax()) as server:
        r = load_test(server.url, np.eye(4), n_requests=500, rate_per_s=50, concurrency=2,
                      time_limit_s=0.3)
    assert r.stopped_early and r.completed < 500 and r.elapsed_s < 3
