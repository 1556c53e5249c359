"""The inference server: dynamic batching, answers right, bad requests get 4xx and it survives."""

import queue
import threading
import time

import numpy as np
import pytest

from gpulab.serving.loadtest import post_json
from gpulab.serving.server import InferenceServer, Pending, collect_batch


class Argmax:
    """A stand-in model: the class is the index of the largest of 4 inputs."""

    n_inputs = 4

    def __init__(self):
        self.calls = []

    def predict(self, X):
        self.calls.append(len(X))
        return np.argmax(X, axis=1)


def test_collect_batch_waits_for_the_window_and_stops_at_max_batch():
    waiting = queue.Queue()
    for _ in range(10):
        waiting.put(Pending(np.zeros((3, 4))))
    batch = collect_batch(waiting, window_s=0.5, max_batch=7)
    assert sum(len(p.rows) for p in batch) == 9  # 3 requests: 9 >= 7 stops it
    assert collect_batch(queue.Queue(), 0.01, 8, first_timeout_s=0.01) == []
    waiting = queue.Queue()
    waiting.put(Pending(np.zeros((1, 4))))
    threading.Timer(0.02, lambda: waiting.put(Pending(np.zeros((1, 4))))).start()
    t0 = time.perf_counter()
    batch = collect_batch(waiting, window_s=0.15, max_batch=64)
    assert len(batch) == 2 and time.perf_counter() - t0 >= 0.1


def test_server_answers_and_batches_concurrent_requests():
    model = Argmax()
    with InferenceServer(model, window_ms=50, max_batch=64) as server:
        assert server.url.startswith("http://127.0.0.1:")
        answers = []

        def ask(k):
            row = [0.0] * 4
            row[k % 4] = 1.0
            answers.append((k % 4, post_json(server.url + "/predict", {"inputs": [row]})))

        threads = [threading.Thread(target=ask, args=(k,)) for k in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert len(answers) == 12
        for want, (status, body) in answers:
            assert status == 200 and body["classes"] == [want]
        assert max(model.calls) > 1, model.calls  # some requests shared a batch
        assert server.stats()["rows"] == 12


@pytest.mark.parametrize("raw, kind, status, words", [
    (b'{"inputs": [[1, 2, 3]]}', "application/json", 422, "3 values"),
    (b'{"inputs": [[1, "x", 3, 4]]}', "application/json", 422, "only numbers"),
    (b'{"inputs": [[1, NaN, 3, 4]]}', "application/json", 422, "finite"),
    (b'{"inputs": []}', "application/json", 422, "non-empty"),
    (b'{"inputs": [[1, 2,', "application/json", 400, "not valid JSON"),
    (b'[1, 2, 3, 4]', "application/json", 400, "JSON object"),
    (b'1,2,3,4', "text/csv", 415, "Content-Type"),
    (b'{"inputs": [[' + b"1," * 5000 + b'1]]}', "application/json", 413, "bytes"),
])
def test_bad_requests_get_a_clear_4xx_and_the_server_keeps_serving(raw, kind, status, words):
    with InferenceServer(Argmax(), window_ms=1, max_body_bytes=2000) as server:
        got, body = post_json(server.url + "/predict", None, content_type=kind, raw=raw)
        assert got == status and words in body["error"], (got, body)
        got, body = post_json(server.url + "/predict", {"inputs": [[0, 0, 5, 0]]})
        assert got == 200 and body["classes"] == [2]
        assert server.stats()["errors"] == {status: 1}


def test_unknown_path_is_404():
    with InferenceServer(Argmax()) as server:
        got, body = post_json(server.url + "/nope", {"inputs": [[0, 0, 0, 1]]})
        assert got == 404 and "POST /predict" in body["error"]
