"""A hostile client: over 40 kinds of bad request, sent as raw bytes on raw sockets (lying
lengths, broken framing, slow clients, hundreds of idle connections). Each well-formed-HTTP
abuse gets a complete HTTP answer — its expected 4xx status and a JSON body ``{"error": ...}``,
never a dropped connection — and after each one the server still answers a good request
correctly."""

import json
import socket
import time

import numpy as np
import pytest

from gpulab.serving.loadtest import post_json
from gpulab.serving.server import InferenceServer

MAX_BATCH = 8
MAX_BODY = 64_000
READ_TIMEOUT_S = 0.5
KEEPALIVE_S = 1.0


class Argmax:
    n_inputs = 4

    def predict(self, X):
        return np.argmax(X, axis=1)


@pytest.fixture(scope="module")
def server():
    with InferenceServer(Argmax(), window_ms=0, max_batch=MAX_BATCH, max_queue=64,
                         max_body_bytes=MAX_BODY, read_timeout_s=READ_TIMEOUT_S,
                         keepalive_timeout_s=KEEPALIVE_S) as running:
        yield running


def request(body: bytes = b"", method="POST", path="/predict", kind="application/json",
            length: str | None = None, extra: str = "") -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    if kind is not None:
        head += f"Content-Type: {kind}\r\n"
    head += f"Content-Length: {len(body) if length is None else length}\r\n" + extra + "\r\n"
    return head.encode() + body


def chunked(body: bytes, extra: str = "") -> bytes:
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 4096]), body[i:i + 4096])
                      for i in range(0, len(body), 4096))
    return (b"POST /predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n" + extra.encode() + b"\r\n" + chunks + b"0\r\n\r\n")


def inputs(rows) -> bytes:
    return json.dumps({"inputs": rows}).encode()


def raw_row(*values: bytes) -> bytes:
    return b'{"inputs": [[' + b", ".join(values) + b"]]}"


ROW = [0.0, 0.0, 0.0, 0.0]
NUMS = (b"1", b"2", b"3")

# (kind, the bytes sent, the status expected)
CASES = [
    # --- the body's content (422: not inputs this model takes) -----------------------------
    ("three values", request(inputs([[1, 2, 3]])), 422),
    ("five values", request(inputs([[1, 2, 3, 4, 5]])), 422),
    ("ragged rows", request(inputs([ROW, [1, 2]])), 422),
    ("empty inputs", request(inputs([])), 422),
    ("inputs a number", request(b'{"inputs": 5}'), 422),
    ("inputs a string", request(b'{"inputs": "1,2,3,4"}'), 422),
    ("a row a number", request(b'{"inputs": [5]}'), 422),
    ("a string value", request(inputs([[1, "2", 3, 4]])), 422),
    ("true", request(inputs([[True, 0, 0, 0]])), 422),
    ("false", request(inputs([[0, False, 0, 0]])), 422),
    ("null", request(inputs([[None, 0, 0, 0]])), 422),
    ("a list value", request(inputs([[1, [2], 3, 4]])), 422),
    ("an object value", request(inputs([[1, {"v": 2}, 3, 4]])), 422),
    ("NaN literal", request(raw_row(b"NaN", *NUMS)), 422),
    ("Infinity literal", request(raw_row(b"Infinity", *NUMS)), 422),
    ("-Infinity literal", request(raw_row(b"-Infinity", *NUMS)), 422),
    ("1e999 (parses to inf)", request(raw_row(b"1e999", *NUMS)), 422),
    ("3.4e39 (over float32)", request(raw_row(b"3.4e39", *NUMS)), 422),
    ("-3.4e39", request(raw_row(b"-3.4e39", *NUMS)), 422),
    ("10**400 (an int)", request(raw_row(b"1" + b"0" * 400, *NUMS)), 422),
    ("-10**400", request(raw_row(b"-1" + b"0" * 400, *NUMS)), 422),
    # --- the body's form (400: not the JSON object expected) --------------------------------
    ("5,000-digit integer", request(raw_row(b"9" * 5000, *NUMS)), 400),
    ("deeply nested lists", request(b'{"inputs": ' + b"[" * 20_000 + b"]" * 20_000 + b"}"),
     400),
    ("deeply nested objects", request(b'{"a":' * 10_000 + b"1" + b"}" * 10_000), 400),
    ("truncated JSON", request(b'{"inputs": [[1, 2,'), 400),
    ("not JSON", request(b"{inputs: nope}"), 400),
    ("empty body", request(b""), 400),
    ("a top-level list", request(inputs([ROW])[11:-1]), 400),
    ("a top-level string", request(b'"hello"'), 400),
    ("no inputs key", request(b'{"input": [[1, 2, 3, 4]]}'), 400),
    ("an unknown key", request(b'{"inputs": [[1, 2, 3, 4]], "model": "big"}'), 400),
    ("not UTF-8", request(b'{"inputs": [[1, 2, 3, \xff]]}'), 400),
    # --- sizes (413) ---------------------------------------------------------------------
    ("more rows than max_batch", request(inputs([ROW] * (MAX_BATCH + 1))), 413),
    ("oversized body", request(b"[" + b"0," * MAX_BODY + b"0]"), 413),
    ("oversized chunked body", chunked(b"[" + b"0," * MAX_BODY + b"0]"), 413),
    ("Content-Length over the limit, no body", request(length="10000000000"), 413),
    # --- headers and framing -------------------------------------------------------------
    ("text/csv", request(b"1,2,3,4", kind="text/csv"), 415),
    ("no Content-Type", request(inputs([ROW]), kind=None), 415),
    ("form-encoded", request(b"inputs=1", kind="application/x-www-form-urlencoded"), 415),
    ("Content-Length larger than the body (lying)", request(b'{"inputs": [[1', length="500"),
     408),
    ("negative Content-Length", request(length="-5"), 400),
    ("non-numeric Content-Length", request(length="twelve"), 400),
    ("Content-Length and chunked", request(b"0\r\n\r\n", length="5",
                                           extra="Transfer-Encoding: chunked\r\n"), 400),
    ("two different Content-Lengths", request(b"{}", extra="Content-Length: 7\r\n"), 400),
    ("bad chunk size", b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n", 400),
    ("a 20 KB header", request(inputs([ROW]), extra="X-Pad: " + "a" * 20_000 + "\r\n"), 400),
    ("200 headers", request(inputs([ROW]), extra="".join(f"X-{i}: 1\r\n" for i in range(200))),
     400),
    ("a header without a colon", request(inputs([ROW]), extra="Broken header\r\n"), 400),
    ("garbage request line", b"HELLO THERE\r\n\r\n", 400),
    ("bad method characters", b"P@ST /predict HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    ("HTTP/9.9", b"GET /health HTTP/9.9\r\nHost: x\r\n\r\n", 400),
    ("a TLS hello on the HTTP port", bytes.fromhex("16030100a5010000a10303") + b"\x00" * 40,
     400),
    # --- method and path -----------------------------------------------------------------
    ("PUT /predict", request(inputs([ROW]), method="PUT"), 405),
    ("DELETE /predict", request(method="DELETE"), 405),
    ("GET /predict", request(method="GET", kind=None), 405),
    ("PATCH /predict", request(inputs([ROW]), method="PATCH"), 405),
    ("POST /health", request(inputs([ROW]), path="/health"), 405),
    ("GET /", request(method="GET", path="/", kind=None), 404),
    ("GET /admin", request(method="GET", path="/admin", kind=None), 404),
    ("POST /predict/extra", request(inputs([ROW]), path="/predict/extra"), 404),
    ("a path of 2,000 characters", request(inputs([ROW]), path="/" + "p" * 2000), 404),
]


def exchange(port: int, data: bytes, timeout_s: float = 10.0) -> tuple[int, dict, bytes]:
    """Send ``data``; read one whole HTTP answer: (status, headers, body). Raises if the
    connection drops before a complete answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        try:
            sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed before reading it all: read its answer
        buffer = b""
        while b"\r\n\r\n" not in buffer:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"dropped before an answer: {buffer[:200]!r}")
            buffer += chunk
        head, body = buffer.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.strip().lower(): v.strip() for k, v in
                   (line.split(":", 1) for line in lines[1:])}
        length = int(headers.get("content-length", 0))
        while len(body) < length:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("dropped in the middle of an answer")
            body += chunk
        return status, headers, body[:length]


def still_serving(server) -> None:
    status, body = post_json(server.url + "/predict", {"inputs": [[0, 0, 7, 0], [9, 0, 0, 0]]})
    assert (status, body["classes"]) == (200, [2, 0]), (status, body)


@pytest.mark.parametrize("kind, data, want", CASES, ids=[c[0] for c in CASES])
def test_each_bad_request_gets_its_4xx_in_json_and_the_server_goes_on(server, kind, data, want):
    status, headers, body = exchange(server.port, data)
    assert status == want, (kind, status, body[:300])
    assert headers["content-type"].startswith("application/json"), (kind, headers)
    error = json.loads(body)["error"]
    assert isinstance(error, str) and len(error) > 10
    if want == 405:
        assert headers["allow"]
    still_serving(server)


def test_there_are_over_forty_kinds():
    assert len({kind for kind, _, _ in CASES}) == len(CASES) >= 40


def test_a_slow_body_times_out_with_408(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(request(b"", length="40"))
        for piece in (b'{"inputs"', b": [[1, "):  # then nothing more
            time.sleep(0.1)
            sock.sendall(piece)
        t0 = time.perf_counter()
        answer = sock.recv(65536)
    assert b" 408 " in answer.split(b"\r\n")[0] and time.perf_counter() - t0 < 2
    still_serving(server)


def test_a_trickling_client_is_closed_after_the_keepalive_timeout(server):
    """Headers sent one byte at a time, never finished: aiohttp closes the connection after
    keepalive_timeout_s (no thread is held meanwhile) while others are answered."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        t0 = time.perf_counter()
        for byte in b"POST /predict HTTP/1.1\r\nHost: x\r\n"[:8]:
            sock.sendall(bytes([byte]))
            still_serving(server)  # answered while the trickle goes on
        answer = sock.recv(65536)  # blocks until the server closes
        waited = time.perf_counter() - t0
    assert answer == b"" and KEEPALIVE_S * 0.8 < waited < KEEPALIVE_S + 2
    still_serving(server)


def test_three_hundred_idle_connections_do_not_lock_out_a_good_request(server):
    idle = [socket.create_connection(("127.0.0.1", server.port), timeout=5)
            for _ in range(300)]
    try:
        t0 = time.perf_counter()
        still_serving(server)
        assert time.perf_counter() - t0 < 1.0
    finally:
        for sock in idle:
            sock.close()
    still_serving(server)


def test_a_client_that_leaves_mid_body_harms_nothing(server):
    for _ in range(20):
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            sock.sendall(request(b'{"inputs": [[1, 2', length="200"))
    still_serving(server)


def test_pipelined_requests_on_one_keep_alive_connection_are_answered_in_order(server):
    data = b"".join(request(inputs([[0, 0, 0, 0][:k] + [1] + [0] * (3 - k)])) for k in range(4))
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(data)
        buffer = b""
        while buffer.count(b'"classes"') < 4:
            chunk = sock.recv(65536)
            assert chunk, buffer
            buffer += chunk
    classes = [json.loads(part.split(b"\r\n\r\n", 1)[1].split(b"HTTP/1.1")[0])["classes"]
               for part in buffer.split(b"HTTP/1.1 200 OK")[1:]]
    assert classes == [[0], [1], [2], [3]]


def test_every_answer_is_counted_by_its_status(server):
    picked = [c for c in CASES if c[0] in ("three values", "not JSON", "oversized body",
                                          "negative Content-Length", "PUT /predict",
                                          "GET /admin", "text/csv")]
    before = server.stats()["statuses"]
    for _, data, _ in picked:
        exchange(server.port, data)
    still_serving(server)
    after = server.stats()["statuses"]
    grew = {code: n - before.get(code, 0) for code, n in after.items()
            if n != before.get(code, 0)}
    assert grew == {200: 1, 400: 2, 404: 1, 405: 1, 413: 1, 415: 1, 422: 1}
