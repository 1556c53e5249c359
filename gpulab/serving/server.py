"""An HTTP inference server on 127.0.0.1: aiohttp's web server in front of the course's dynamic
batcher (:mod:`~gpulab.serving.batcher`).

``POST /predict`` with ``Content-Type: application/json`` and a body ``{"inputs": [[...], ...]}``
(1 to ``max_batch`` rows of the model's input width) answers ``{"classes": [...],
"batch_rows": n}``: the predicted class of each row and how many rows its batch held.
``GET /health`` answers ``{"ok": true, ...}`` with the counters of :meth:`InferenceServer.stats`.

**What aiohttp does** (a well-kept asyncio server, not code of this course): HTTP/1.1 with
keep-alive and pipelining, parsing the request line and headers (malformed framing, e.g. a
negative or non-numeric Content-Length, is refused by its parser), the body limit
(``client_max_size``), routing (unknown path, wrong method), and closing connections that send
nothing complete for ``keepalive_timeout_s`` — an idle or trickling client holds no thread, only
a socket, until then. This module adds: JSON bodies for every error (aiohttp's own are plain
text), a read timeout for a body that never comes (a Content-Length larger than what is sent),
the validation of the inputs, and the counters.

**Every bad request gets a 4xx JSON error** ``{"error": "..."}`` and the server keeps serving:

=====  ======================================================================================
400    not well-formed HTTP (aiohttp's parser), not valid JSON, too deeply nested, not an
       object ``{"inputs": ...}``, unknown keys
404    unknown path;  405 wrong method (with ``Allow``)
408    the body did not arrive within ``read_timeout_s``
413    body over ``max_body_bytes`` (by its Content-Length, or while reading), or more rows than
       ``max_batch`` (a request is never split across batches)
415    Content-Type not ``application/json``
422    wrong shape, ragged rows, empty, a non-number (string, null, true/false), NaN or
       Infinity, a value too large for float32 (3.4e39, 10**400)
503    the queue is full (``max_queue`` rows waiting): ``Retry-After`` says when to retry;
       the request is not computed
500    the model failed;  504 the model did not answer within ``request_timeout_s``
=====  ======================================================================================

The server runs its own asyncio event loop in a background thread, so a notebook (whose own
loop is busy running cells) and a test can use it as a context manager.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus

import numpy as np
from aiohttp import web

from gpulab.serving.batcher import DynamicBatcher, ModelError, QueueFullError, TooManyRowsError

LOOPBACK = "127.0.0.1"
FLOAT32_MAX = float(np.finfo(np.float32).max)
RETRY_AFTER_S = 1
OPEN_FILES_WANTED = 4096
# aiohttp logs every malformed request as an error with its traceback; a notebook is no log
# file: the counters (stats) and the JSON answers say what happened.
LOG = logging.getLogger("gpulab.serving.http")
LOG.addHandler(logging.NullHandler())
LOG.propagate = False


class RequestError(Exception):
    """A bad request: ``status`` is the 4xx code to answer with, ``message`` plain words."""

    def __init__(self, status: int, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


def _refuse_constant(name: str):
    raise RequestError(422, f"{name} is not a number this server accepts: values must be finite")


def _check_value(value, i: int, j: int) -> None:
    where = f"row {i}, value {j}"
    if isinstance(value, bool):
        raise RequestError(422, f"{where} is {json.dumps(value)}: only numbers are accepted")
    if value is None:
        raise RequestError(422, f"{where} is null: only numbers are accepted")
    if isinstance(value, int):
        if abs(value) > FLOAT32_MAX:
            raise RequestError(422, f"{where} is an integer of {len(str(abs(value)))} digits: "
                                    f"too large for float32 (at most {FLOAT32_MAX:.4g})")
        return
    if not isinstance(value, float):
        kind = "a string" if isinstance(value, str) else f"a {type(value).__name__}"
        raise RequestError(422, f"{where} is {kind}: only numbers are accepted")
    if not math.isfinite(value):
        raise RequestError(422, f"{where} is {value!r}: values must be finite")
    if abs(value) > FLOAT32_MAX:
        raise RequestError(422, f"{where} is {value:.4g}: too large for float32 (at most "
                                f"{FLOAT32_MAX:.4g}); it would become infinity")


def parse_inputs(body: bytes, n_inputs: int, max_rows: int) -> np.ndarray:
    """The rows of a request body as float32, or a :class:`RequestError` saying what is
    wrong."""
    try:
        payload = json.loads(body.decode("utf-8"), parse_constant=_refuse_constant)
    except RequestError:
        raise
    except UnicodeDecodeError:
        raise RequestError(400, "the body is not UTF-8 text") from None
    except RecursionError:
        raise RequestError(400, 'the JSON nests too deeply; expected {"inputs": [[numbers, '
                                '...], ...]}') from None
    except ValueError as error:  # JSONDecodeError, or an integer of over 4,300 digits
        raise RequestError(400, f"the body is not valid JSON: {error}") from None
    if not isinstance(payload, dict) or "inputs" not in payload:
        raise RequestError(400, 'expected a JSON object {"inputs": [[numbers, ...], ...]}')
    unknown = sorted(set(payload) - {"inputs"})
    if unknown:
        raise RequestError(400, f"unknown keys {unknown}; only \"inputs\" is read")
    rows = payload["inputs"]
    if not isinstance(rows, list) or not rows:
        raise RequestError(422, "inputs must be a non-empty list of rows (lists of numbers)")
    if len(rows) > max_rows:
        raise RequestError(413, f"at most {max_rows} rows per request (one batch), got "
                                f"{len(rows)}: send them in parts")
    for i, row in enumerate(rows):
        if not isinstance(row, list):
            raise RequestError(422, f"row {i} is not a list: each row is a list of "
                                    f"{n_inputs} numbers")
        if len(row) != n_inputs:
            raise RequestError(422, f"row {i} has {len(row)} values; the model takes "
                                    f"{n_inputs}")
        for j, value in enumerate(row):
            _check_value(value, i, j)
    return np.asarray(rows, dtype=np.float32)


def _json_error(status: int, message: str, headers: dict | None = None) -> web.Response:
    return web.json_response({"error": message}, status=status, headers=headers)


class _JsonErrorProtocol(web.RequestHandler):
    """aiohttp's connection handler, answering what its HTTP parser refuses (malformed request
    line or headers, a bad Content-Length) with a JSON error instead of plain text."""

    def __init__(self, manager, *, on_status, **kwargs):
        super().__init__(manager, **kwargs)
        self.on_status = on_status

    def handle_error(self, request, status: int = 500, exc=None, message=None):
        if request.writer.output_size > 0:  # as aiohttp: an answer is already on its way
            raise ConnectionError("an answer was already sent on this connection")
        self.on_status(status)
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = ""
        detail = str(getattr(exc, "message", None) or exc or message or phrase)
        detail = " ".join(detail.split())[:200]
        words = ("the request is not well-formed HTTP" if status < 500
                 else "the server failed to answer")
        response = _json_error(status, f"{words}: {detail}")
        response.force_close()
        return response


def _raise_open_file_limit(wanted: int = OPEN_FILES_WANTED) -> None:
    """Each idle connection holds a file descriptor: raise this process's soft limit (macOS
    starts at 256) towards ``wanted`` where the hard limit allows. Nothing on Windows."""
    try:
        import resource
    except ImportError:
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            pass


class InferenceServer:
    """Serve ``model`` (anything with ``predict(X)`` and ``n_inputs``) on 127.0.0.1.

    ``window_ms``: how long the oldest waiting request may wait for company; ``max_batch``: the
    most rows per model call (and per request); ``max_queue``: the most rows waiting (default
    8 × ``max_batch``), beyond which requests get 503. ``port=0`` picks a free port. Use as a
    context manager, or ``start()`` / ``stop()``. Starting raises this process's soft limit on
    open files towards 4,096 where the hard limit allows (macOS starts at 256, and each open
    connection holds one)."""

    def __init__(self, model, window_ms: float = 2.0, max_batch: int = 64,
                 max_queue: int | None = None, port: int = 0, max_body_bytes: int = 64_000,
                 read_timeout_s: float = 5.0, keepalive_timeout_s: float = 5.0,
                 request_timeout_s: float = 10.0):
        if window_ms < 0 or max_batch < 1:
            raise ValueError("window_ms must be >= 0 and max_batch >= 1")
        max_queue = 8 * int(max_batch) if max_queue is None else int(max_queue)
        if max_queue < max_batch:
            raise ValueError("max_queue (rows) must be >= max_batch")
        self.model = model
        self.window_ms = float(window_ms)
        self.max_batch = int(max_batch)
        self.max_queue = max_queue
        self.max_body_bytes = int(max_body_bytes)
        self.read_timeout_s = float(read_timeout_s)
        self.keepalive_timeout_s = float(keepalive_timeout_s)
        self.request_timeout_s = float(request_timeout_s)
        self._port_wanted = int(port)
        self._port = 0
        self._statuses: Counter = Counter()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._executor: ThreadPoolExecutor | None = None
        self.batcher: DynamicBatcher | None = None

    # --- life cycle ------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def start(self) -> InferenceServer:
        if self._thread is not None:
            raise RuntimeError("the server is running already")
        _raise_open_file_limit()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="gpulab-inference-server")
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self._open(), self._loop).result(timeout=10)
        except BaseException:
            self._close_loop()
            raise
        return self

    def stop(self) -> None:
        if self._thread is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(timeout=10)
        finally:
            self._close_loop()

    def _close_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()
        if self._executor is not None:  # queued batches are cancelled; the running one is not
            # waited for (a kernel that never finishes would hang stop()). In the simulator a
            # launch of its that outlives the server waits its turn (instruments.simulator).
            self._executor.shutdown(wait=False, cancel_futures=True)
        self._thread = self._loop = self._executor = None

    def __enter__(self) -> InferenceServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    async def _open(self) -> None:
        loop = asyncio.get_running_loop()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpulab-model")
        self.batcher = DynamicBatcher(self.model.predict, self.max_batch, self.window_ms / 1e3,
                                      self.max_queue, self._executor)
        await self.batcher.start()
        app = web.Application(client_max_size=self.max_body_bytes,
                              middlewares=[self._json_errors])
        app.router.add_post("/predict", self._predict)
        app.router.add_get("/health", self._health)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        manager = self._runner.server

        def connection():  # one per connection: aiohttp's handler, JSON framing errors
            return _JsonErrorProtocol(manager, loop=loop, on_status=self._count,
                                      keepalive_timeout=self.keepalive_timeout_s,
                                      lingering_time=min(2.0, self.read_timeout_s),
                                      access_log=None, logger=LOG)

        self._listener = await loop.create_server(connection, LOOPBACK, self._port_wanted,
                                                  backlog=1024)
        self._port = self._listener.sockets[0].getsockname()[1]

    async def _close(self) -> None:
        self._listener.close()
        await self._runner.shutdown()
        await self._runner.cleanup()
        await self.batcher.stop()

    # --- counters --------------------------------------------------------------------------
    def _count(self, status: int) -> None:
        with self._lock:
            self._statuses[int(status)] += 1

    def stats(self) -> dict:
        """Every status answered (``statuses``; ``errors`` the non-200 ones), ``rejected``
        (503: queue full, not computed), batches, rows, how many batches of each size, and
        ``model_s``: the seconds the model's batches took."""
        with self._lock:
            statuses = dict(sorted(self._statuses.items()))
        sizes = self.batcher.batch_sizes() if self.batcher is not None else {}
        model_s = self.batcher.model_seconds() if self.batcher is not None else 0.0
        batches = sum(sizes.values())
        rows = sum(size * count for size, count in sizes.items())
        return {"batches": batches, "rows": rows,
                "mean_batch_rows": rows / batches if batches else 0.0,
                "largest_batch_rows": max(sizes, default=0), "batch_sizes": sizes,
                "model_s": model_s,
                "statuses": statuses, "rejected": statuses.get(503, 0),
                "errors": {code: n for code, n in statuses.items() if code != 200}}

    # --- handlers --------------------------------------------------------------------------
    @web.middleware
    async def _json_errors(self, request, handler):
        try:
            response = await handler(request)
        except RequestError as bad:
            response = _json_error(bad.status, bad.message, bad.headers)
        except web.HTTPRequestEntityTooLarge:
            response = _json_error(413, f"the body is over {self.max_body_bytes} bytes, the "
                                        "most this server reads")
        except web.HTTPMethodNotAllowed as exc:
            allowed = ", ".join(sorted(exc.allowed_methods))
            response = _json_error(405, f"{request.method} is not allowed on {request.path}; "
                                        f"use {allowed}", {"Allow": allowed})
        except web.HTTPNotFound:
            response = _json_error(404, f"no such path {request.path}; use POST /predict or "
                                        "GET /health")
        except web.HTTPException as exc:
            response = _json_error(exc.status, exc.reason)
        except Exception as exc:  # a bug here must still answer, in JSON
            response = _json_error(500, f"the server failed: {type(exc).__name__}: {exc}")
        self._count(response.status)
        return response

    async def _health(self, request) -> web.Response:
        return web.json_response({"ok": True, **self.stats()})

    async def _predict(self, request) -> web.Response:
        kind = request.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if kind != "application/json":
            raise RequestError(415, f"Content-Type must be application/json, not "
                                    f"{kind or 'missing'!r}")
        length = request.content_length
        if length is not None and length > self.max_body_bytes:
            raise RequestError(413, f"the body is {length} bytes (by its Content-Length); at "
                                    f"most {self.max_body_bytes} are read")
        try:
            body = await asyncio.wait_for(request.read(), self.read_timeout_s)
        except asyncio.TimeoutError:
            raise RequestError(408, f"the body did not arrive within {self.read_timeout_s:g} s "
                                    "(is the Content-Length larger than the body sent?)") from None
        rows = parse_inputs(body, self.model.n_inputs, self.max_batch)
        try:
            answer = self.batcher.submit(rows)
        except QueueFullError as full:
            raise RequestError(503, f"{full}; retry after {RETRY_AFTER_S} s",
                               {"Retry-After": str(RETRY_AFTER_S)}) from None
        except TooManyRowsError as many:
            raise RequestError(413, str(many)) from None
        try:
            classes, batch_rows = await asyncio.wait_for(answer, self.request_timeout_s)
        except asyncio.TimeoutError:
            raise RequestError(504, f"the model did not answer within "
                                    f"{self.request_timeout_s:g} s") from None
        except ModelError as failed:
            raise RequestError(500, f"the model failed: {failed}") from None
        return web.json_response({"classes": classes, "batch_rows": batch_rows})


__all__ = ["FLOAT32_MAX", "LOOPBACK", "InferenceServer", "RequestError", "parse_inputs"]
