"""A small HTTP inference server on 127.0.0.1 with dynamic batching, standard library only.

``POST /predict`` with ``Content-Type: application/json`` and a body ``{"inputs": [[...], ...]}``
(one or more rows of the model's input width) answers ``{"classes": [...], "batch_rows": n}``:
the predicted class of each row and how many rows the batch it rode in held. ``GET /health``
answers ``{"ok": true, ...}`` with counters.

Dynamic batching: each request's rows wait in a queue; one worker thread takes the first waiting
request, then keeps collecting more for up to ``window_ms`` milliseconds or until ``max_batch``
rows are in hand, runs them as **one** batch through the model and answers every request. A
longer window makes bigger batches (more throughput per model call) and makes each request wait
longer: the trade every serving system makes.

Bad requests get a 4xx JSON error (``{"error": ...}``) and the server keeps serving: 400 bad
JSON or missing ``inputs``, 404 unknown path, 413 body over ``max_body_bytes``, 415 wrong
content type, 422 wrong shape or non-numeric / non-finite values.
"""

from __future__ import annotations

import json
import math
import queue
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

LOOPBACK = "127.0.0.1"


class RequestError(Exception):
    """A bad request: ``status`` is the 4xx code to answer with."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Pending:
    """One request's rows waiting for a batch, and where its answer goes."""

    rows: np.ndarray
    arrived: float = field(default_factory=time.perf_counter)
    done: threading.Event = field(default_factory=threading.Event)
    classes: list | None = None
    batch_rows: int = 0
    error: str | None = None


def collect_batch(waiting: queue.Queue, window_s: float, max_batch: int,
                  first_timeout_s: float = 0.1) -> list[Pending]:
    """Dynamic batching: block up to ``first_timeout_s`` for a first request, then collect more
    until ``window_s`` has passed since the first or ``max_batch`` rows are in hand. Returns the
    requests taken ([] if none came). A request is never split; the batch may exceed
    ``max_batch`` by at most one request's rows minus one."""
    try:
        first = waiting.get(timeout=first_timeout_s)
    except queue.Empty:
        return []
    batch, rows = [first], len(first.rows)
    deadline = time.perf_counter() + window_s
    while rows < max_batch:
        left = deadline - time.perf_counter()
        try:
            item = waiting.get(timeout=left) if left > 0 else waiting.get_nowait()
        except queue.Empty:
            break
        batch.append(item)
        rows += len(item.rows)
    return batch


def parse_inputs(body: bytes, n_inputs: int, max_rows: int) -> np.ndarray:
    """The rows of a request body, or a :class:`RequestError` saying what is wrong."""
    try:
        payload = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise RequestError(400, f"the body is not valid JSON: {error}") from None
    if not isinstance(payload, dict) or "inputs" not in payload:
        raise RequestError(400, 'expected a JSON object {"inputs": [[...], ...]}')
    rows = payload["inputs"]
    if (not isinstance(rows, list) or not rows
            or not all(isinstance(r, list) for r in rows)):
        raise RequestError(422, "inputs must be a non-empty list of rows (lists of numbers)")
    if len(rows) > max_rows:
        raise RequestError(422, f"at most {max_rows} rows per request, got {len(rows)}")
    for i, row in enumerate(rows):
        if len(row) != n_inputs:
            raise RequestError(422, f"row {i} has {len(row)} values; the model takes "
                                    f"{n_inputs}")
        for value in row:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise RequestError(422, f"row {i} holds {value!r}: only numbers are accepted")
            if not math.isfinite(value):
                raise RequestError(422, f"row {i} holds {value!r}: values must be finite")
    return np.asarray(rows, dtype=np.float32)


class _Listener(ThreadingHTTPServer):
    request_queue_size = 128  # the default 5 drops connections under a burst (1 s SYN retry)
    daemon_threads = True


class InferenceServer:
    """Serve ``model`` (anything with ``predict(X)`` and ``n_inputs``) on 127.0.0.1.

    ``port=0`` picks a free port. Use as a context manager, or ``start()`` / ``stop()``."""

    def __init__(self, model, window_ms: float = 2.0, max_batch: int = 64, port: int = 0,
                 max_body_bytes: int = 64_000, max_rows: int = 64,
                 request_timeout_s: float = 10.0):
        if window_ms < 0 or max_batch < 1:
            raise ValueError("window_ms must be >= 0 and max_batch >= 1")
        self.model = model
        self.window_s = window_ms / 1e3
        self.max_batch = int(max_batch)
        self.max_body_bytes = int(max_body_bytes)
        self.max_rows = int(max_rows)
        self.request_timeout_s = request_timeout_s
        self.waiting: queue.Queue = queue.Queue()
        self.batches: list[int] = []  # rows per model call
        self.errors: dict[int, int] = {}
        self._lock = threading.Lock()
        self._running = threading.Event()
        self._http = _Listener((LOOPBACK, port), self._handler())
        self._threads: list[threading.Thread] = []

    @property
    def port(self) -> int:
        return self._http.server_address[1]

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def start(self) -> InferenceServer:
        self._running.set()
        self._threads = [threading.Thread(target=self._http.serve_forever,
                                          kwargs={"poll_interval": 0.05}, daemon=True),
                         threading.Thread(target=self._batch_loop, daemon=True)]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._running.clear()
        self._http.shutdown()
        self._http.server_close()
        for thread in self._threads:
            thread.join(timeout=5)

    def __enter__(self) -> InferenceServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def stats(self) -> dict:
        with self._lock:
            sizes = list(self.batches)
            errors = dict(self.errors)
        return {"batches": len(sizes), "rows": int(sum(sizes)),
                "mean_batch_rows": float(np.mean(sizes)) if sizes else 0.0,
                "largest_batch_rows": max(sizes, default=0), "errors": errors}

    # --- the batching worker ------------------------------------------------------------------
    def _batch_loop(self) -> None:
        while self._running.is_set():
            batch = collect_batch(self.waiting, self.window_s, self.max_batch)
            if not batch:
                continue
            X = np.concatenate([p.rows for p in batch])
            try:
                classes = np.asarray(self.model.predict(X)).astype(int).tolist()
                error = None
            except Exception as exc:  # the model failed: answer everyone with 500
                classes, error = [], f"{type(exc).__name__}: {exc}"
            with self._lock:
                self.batches.append(len(X))
            start = 0
            for pending in batch:
                n = len(pending.rows)
                pending.classes = classes[start:start + n] if error is None else None
                pending.error = error
                pending.batch_rows = len(X)
                start += n
                pending.done.set()

    def _count_error(self, status: int) -> None:
        with self._lock:
            self.errors[status] = self.errors.get(status, 0) + 1

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args):  # quiet: a notebook is no log file
                pass

            def _answer(self, status: int, payload: dict) -> None:
                body = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                if self.path == "/health":
                    self._answer(200, {"ok": True, **server.stats()})
                else:
                    server._count_error(404)
                    self._answer(404, {"error": f"no such path {self.path}; use POST /predict"})

            def do_POST(self):
                try:
                    rows = self._read_rows()
                except RequestError as bad:
                    server._count_error(bad.status)
                    self._answer(bad.status, {"error": bad.message})
                    return
                pending = Pending(rows)
                server.waiting.put(pending)
                if not pending.done.wait(server.request_timeout_s):
                    self._answer(503, {"error": "timed out waiting for a batch"})
                elif pending.error:
                    self._answer(500, {"error": pending.error})
                else:
                    self._answer(200, {"classes": pending.classes,
                                       "batch_rows": pending.batch_rows})

            def _read_rows(self) -> np.ndarray:
                if self.path != "/predict":
                    raise RequestError(404, f"no such path {self.path}; use POST /predict")
                kind = (self.headers.get("Content-Type") or "").split(";")[0].strip()
                if kind != "application/json":
                    raise RequestError(415, f"Content-Type must be application/json, not "
                                            f"{kind or 'missing'!r}")
                try:
                    length = int(self.headers.get("Content-Length", ""))
                except ValueError:
                    raise RequestError(411, "a Content-Length header is required") from None
                if length > server.max_body_bytes:
                    self.rfile.read(min(length, 1_000_000))  # drain, so the client reads us
                    raise RequestError(413, f"the body is {length} bytes; at most "
                                            f"{server.max_body_bytes} are accepted")
                return parse_inputs(self.rfile.read(length), server.model.n_inputs,
                                    server.max_rows)

        return Handler


__all__ = ["LOOPBACK", "InferenceServer", "Pending", "RequestError", "collect_batch",
           "parse_inputs"]
