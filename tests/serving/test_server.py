"""The inference server: right answers, dynamic batching behind aiohttp, HTTP/1.1 keep-alive,
503 with Retry-After when the queue is full (and nothing computed), every status counted, the
event loop answering while the model computes. Bad requests: tests/serving/test_fuzz.py."""

import http.client
import json
import threading
import time

import numpy as np
import pytest

from gpulab.serving.loadtest import post_json
from gpulab.serving.server import FLOAT32_MAX, InferenceServer, RequestError, parse_inputs


class Argmax:
    """A stand-in model: the class is the index of the largest of 4 inputs."""

    n_inputs = 4

    def __init__(self, seconds: float = 0.0):
        self.calls, self.seconds = [], seconds

    def predict(self, X):
        self.calls.append(len(X))
        time.sleep(self.seconds)
        return np.argmax(X, axis=1)


class Failing(Argmax):
    def predict(self, X):
        raise RuntimeError("the weights are gone")


def one_hot(k):
    row = [0.0] * 4
    row[k % 4] = 1.0
    return row


def ask_all(url, payloads):
    answers = [None] * len(payloads)

    def ask(i):
        answers[i] = post_json(url + "/predict", payloads[i])

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(payloads))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    return answers


def test_server_answers_and_batches_concurrent_requests():
    model = Argmax()
    with InferenceServer(model, window_ms=50, max_batch=64) as server:
        assert server.url.startswith("http://127.0.0.1:") and server.model is model
        answers = ask_all(server.url, [{"inputs": [one_hot(k)]} for k in range(12)])
        for k, (status, body) in enumerate(answers):
            assert status == 200 and body["classes"] == [k % 4]
        assert max(model.calls) > 1, model.calls  # some requests shared a batch
        stats = server.stats()
        assert stats["rows"] == 12 and stats["statuses"] == {200: 12}
        assert 0 < stats["model_s"] < 5
        assert sum(stats["batch_sizes"].values()) == stats["batches"] == len(model.calls)
        status, health = post_json(server.url + "/health", None, raw=b"", method="GET")
        assert status == 200 and health["ok"] and health["rows"] == 12


def test_many_rows_per_request_and_batches_never_exceed_max_batch():
    model = Argmax()
    with InferenceServer(model, window_ms=30, max_batch=8, max_queue=64) as server:
        payloads = [{"inputs": [one_hot(k + j) for j in range(3)]} for k in range(10)]
        answers = ask_all(server.url, payloads)
        for k, (status, body) in enumerate(answers):
            assert status == 200 and body["classes"] == [(k + j) % 4 for j in range(3)]
            assert body["batch_rows"] <= 8
        assert max(model.calls) <= 8 and sum(model.calls) == 30
        assert server.stats()["largest_batch_rows"] <= 8


def test_http_1_1_keep_alive_serves_many_requests_on_one_connection():
    with InferenceServer(Argmax(), window_ms=0) as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        sockets = set()
        for k in range(5):
            connection.request("POST", "/predict", body=json.dumps({"inputs": [one_hot(k)]}),
                               headers={"Content-Type": "application/json"})
            answer = connection.getresponse()
            assert answer.version == 11 and answer.status == 200
            assert json.loads(answer.read())["classes"] == [k % 4]
            assert answer.getheader("Connection", "").lower() != "close"
            sockets.add(id(connection.sock))
        connection.close()
        assert len(sockets) == 1


def test_a_full_queue_answers_503_with_retry_after_and_computes_nothing_it_refused():
    model = Argmax(seconds=0.3)
    with InferenceServer(model, window_ms=0, max_batch=2, max_queue=2) as server:
        answers = ask_all(server.url, [{"inputs": [one_hot(k), one_hot(k)]} for k in range(8)])
        statuses = [s for s, _ in answers]
        # all 8 at once into a queue of 2 rows: at least the first is answered, some refused
        assert statuses.count(503) >= 1 and statuses.count(200) >= 1
        refused = [b for s, b in answers if s == 503]
        assert all("queue is full" in b["error"] for b in refused)
        stats = server.stats()
        assert stats["rows"] == 2 * statuses.count(200)  # the refused were never computed
        assert sum(model.calls) == stats["rows"]
        assert stats["rejected"] == statuses.count(503) == stats["statuses"][503]
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        model.seconds = 1.5
        calls_before = len(model.calls)
        deadline = time.monotonic() + 10  # wait for each state, not for a guessed time

        def until(condition, what):
            while not condition():
                assert time.monotonic() < deadline, f"never {what}"
                time.sleep(0.005)

        pair = [{"inputs": [one_hot(0), one_hot(0)]}]
        blockers = [threading.Thread(target=ask_all, args=(server.url, pair)) for _ in range(2)]
        blockers[0].start()  # its batch computes for 1.5 s ...
        until(lambda: len(model.calls) > calls_before, "started computing")
        blockers[1].start()  # ... while this one fills the queue (2 rows)
        until(lambda: server.batcher.waiting_rows == 2, "filled the queue")
        connection.request("POST", "/predict", body=json.dumps({"inputs": [one_hot(1)]}),
                           headers={"Content-Type": "application/json"})
        answer = connection.getresponse()
        body = json.loads(answer.read())
        for blocker in blockers:
            blocker.join(10)
        assert answer.status == 503 and answer.getheader("Retry-After") == "1", body


def test_a_failing_model_gets_500_in_json_and_every_status_is_counted():
    with InferenceServer(Failing(), window_ms=0) as server:
        status, body = post_json(server.url + "/predict", {"inputs": [one_hot(0)]})
        assert status == 500 and "the weights are gone" in body["error"]
        post_json(server.url + "/nope", {"inputs": [one_hot(0)]})
        post_json(server.url + "/predict", None, raw=b"x", content_type="text/plain")
        stats = server.stats()
    assert stats["statuses"] == {404: 1, 415: 1, 500: 1} == stats["errors"]


def test_the_event_loop_keeps_answering_while_the_model_computes():
    with InferenceServer(Argmax(seconds=1.0), window_ms=0) as server:
        slow = threading.Thread(target=post_json, args=(server.url + "/predict",
                                                        {"inputs": [one_hot(0)]}))
        slow.start()
        time.sleep(0.1)
        t0 = time.perf_counter()
        status, health = post_json(server.url + "/health", None, raw=b"", method="GET")
        waited = time.perf_counter() - t0
        status_bad, _ = post_json(server.url + "/predict", {"inputs": [[1, 2]]})
        slow.join(5)
    assert status == 200 and status_bad == 422 and waited < 0.5


def test_start_stop_and_settings():
    server = InferenceServer(Argmax()).start()
    with pytest.raises(RuntimeError, match="running already"):
        server.start()
    url = server.url
    server.stop()
    with pytest.raises(OSError):
        post_json(url + "/predict", {"inputs": [one_hot(0)]}, timeout_s=1)
    with pytest.raises(ValueError):
        InferenceServer(Argmax(), max_batch=8, max_queue=4)
    with pytest.raises(ValueError):
        InferenceServer(Argmax(), window_ms=-1)


def test_parse_inputs_keeps_float32_values_exactly_and_refuses_overflow():
    X = parse_inputs(b'{"inputs": [[1, 2.5, -3, 0]]}', 4, 8)
    assert X.dtype == np.float32 and X.tolist() == [[1, 2.5, -3, 0]]
    edge = parse_inputs(json.dumps({"inputs": [[FLOAT32_MAX, 0, 0, 0]]}).encode(), 4, 8)
    assert np.isfinite(edge).all()
    with pytest.raises(RequestError, match="too large for float32") as bad:
        parse_inputs(b'{"inputs": [[3.5e38, 0, 0, 0]]}', 4, 8)
    assert bad.value.status == 422
