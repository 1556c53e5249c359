"""Bounded load tests for :mod:`gpulab.serving.server`, on loopback only, with aiohttp's client.

Two ways to load a server:

- :func:`load_test` is **open-loop**: request ``i`` is sent at its scheduled time whatever the
  answers so far — arrivals are a Poisson process at the offered rate (seeded, exponential
  gaps; ``arrivals="fixed"`` spaces them evenly). Offered beyond what the server can answer,
  requests pile up in its queue, wait longer and longer, and once the queue is full get 503:
  that is saturation, and only an open-loop test shows it. Latency counts from when a request
  was **due** to when its answer arrived, so a request the client sent late (busy, or short of
  connections) counts that delay too (no "coordinated omission").
- :func:`closed_loop` keeps ``concurrency`` requests in flight, each client sending its next
  as soon as its last is answered: the most the server answers per second (its capacity), at
  the price of hiding queueing (a slow server slows the clients down).

Both are bounded (at most :data:`MAX_REQUESTS` requests and :data:`MAX_SECONDS` seconds), talk
to 127.0.0.1 only, and can check every answer against the classes the caller expects. They run
their own event loop in a thread (so they work from a notebook, whose loop is busy), or, with
``separate_process=True``, in a child Python process: a load generator in the server's own
process competes with it for the interpreter lock (one thread at a time runs Python), which
slows both and adds milliseconds of waiting to every latency; a real load test runs apart.

Percentiles are **nearest-rank**: the ``ceil(q · n / 100)``-th smallest of the ``n`` measured
latencies, itself a measured value. With fewer than 100 answers p99 *is* the slowest request;
:meth:`LoadResult.percentile_rule` says so.
"""

from __future__ import annotations

import asyncio
import dataclasses
import http.client
import json
import math
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import aiohttp
import numpy as np

MAX_REQUESTS = 20_000
MAX_SECONDS = 60.0
ARRIVALS = ("poisson", "fixed")


def percentile(values, q: float) -> float:
    """Nearest-rank percentile: the ceil(q · n / 100)-th smallest value (1-based)."""
    ordered = sorted(float(v) for v in values)
    if not ordered:
        raise ValueError("no values")
    if not 0 < q <= 100:
        raise ValueError("q must be in (0, 100]")
    return ordered[max(1, math.ceil(q * len(ordered) / 100)) - 1]


def nearest_rank(n: int, q: float) -> int:
    """The rank (1-based) that the nearest-rank ``q``-th percentile of ``n`` values takes."""
    return max(1, math.ceil(q * n / 100))


@dataclass
class LoadResult:
    """What one load test measured (latencies in seconds, of the 200 answers)."""

    url: str
    mode: str  # "open-loop, poisson arrivals" / "closed-loop, 16 in flight"
    rate_per_s: float  # offered (open loop); 0 for a closed loop
    n_requests: int
    latencies_s: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    lost: int = 0  # sent, and no HTTP answer came (connection error or client timeout)
    wrong: int = 0  # 200 answers whose classes differ from the expected ones
    sent: int = 0
    elapsed_s: float = 0.0  # first send to last answer
    send_span_s: float = 0.0  # first send to last send
    stopped_early: bool = False

    @property
    def completed(self) -> int:
        """Requests answered 200."""
        return len(self.latencies_s)

    @property
    def answered(self) -> int:
        return sum(self.statuses.values())

    @property
    def rejected(self) -> int:
        """Requests answered 503 (the server's queue was full)."""
        return self.statuses.get(503, 0)

    @property
    def throughput_per_s(self) -> float:
        """200 answers per second, over the whole test."""
        return self.completed / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def sent_rate_per_s(self) -> float:
        """The rate the client actually sent at (below the offered rate if it fell behind)."""
        return (self.sent - 1) / self.send_span_s if self.sent > 1 and self.send_span_s > 0 \
            else 0.0

    def p(self, q: float) -> float:
        return percentile(self.latencies_s, q) if self.latencies_s else float("nan")

    @property
    def p50_ms(self) -> float:
        return 1e3 * self.p(50)

    @property
    def p99_ms(self) -> float:
        return 1e3 * self.p(99)

    def percentile_rule(self, q: float = 99) -> str:
        """How the ``q``-th percentile was taken from this run's latencies, in words."""
        n = self.completed
        if n == 0:
            return f"p{q:g}: no request answered"
        rank = nearest_rank(n, q)
        slowest = " — the slowest request, since n < 100" if rank == n and q < 100 else ""
        return f"p{q:g} = the {rank}-th smallest of n = {n} (nearest rank){slowest}"

    def __str__(self) -> str:
        offered = (f"{self.rate_per_s:g} req/s offered ({self.sent_rate_per_s:.0f}/s sent), "
                   if self.rate_per_s else "")
        return (f"{self.mode}: {self.sent} sent, {offered}{self.completed} answered 200 "
                f"({self.throughput_per_s:.0f}/s), {self.rejected} rejected 503, {self.lost} "
                f"lost, {self.wrong} wrong; p50 {self.p50_ms:.2f} ms, p99 {self.p99_ms:.2f} ms "
                f"({self.percentile_rule(99)}); measured on this machine, loopback")


def check_loopback(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    if parts.scheme != "http" or parts.hostname not in ("127.0.0.1", "localhost"):
        raise ValueError(f"the load test only talks to 127.0.0.1, not {url!r}")
    return "127.0.0.1", int(parts.port or 80)


def post_json(url: str, payload, timeout_s: float = 10.0, content_type="application/json",
              raw: bytes | None = None, method: str = "POST") -> tuple[int, dict]:
    """One request to a loopback ``url`` (standard library, blocking); returns (status,
    decoded JSON answer)."""
    host, port = check_loopback(url)
    body = raw if raw is not None else json.dumps(payload).encode()
    connection = http.client.HTTPConnection(host, port, timeout=timeout_s)
    try:
        connection.request(method, urlsplit(url).path or "/", body=body,
                           headers={"Content-Type": content_type})
        answer = connection.getresponse()
        return answer.status, json.loads(answer.read() or b"{}")
    finally:
        connection.close()


def _payloads(rows, n_requests: int, rows_per_request: int) -> tuple[list[bytes], list]:
    """Request bodies (cycling through ``rows``) and, per request, the indices of its rows."""
    rows = np.asarray(rows, dtype=np.float32)
    picks = [(i * rows_per_request + np.arange(rows_per_request)) % len(rows)
             for i in range(n_requests)]
    return [json.dumps({"inputs": rows[p].tolist()}).encode() for p in picks], picks


def arrival_times(n_requests: int, rate_per_s: float, arrivals: str = "poisson",
                  seed: int = 0) -> np.ndarray:
    """When each request is due (seconds from the start): Poisson (exponential gaps of mean
    1/rate, seeded) or evenly spaced; the first at 0."""
    if arrivals not in ARRIVALS:
        raise ValueError(f"arrivals must be one of {ARRIVALS}, not {arrivals!r}")
    if arrivals == "fixed":
        return np.arange(n_requests) / rate_per_s
    gaps = np.random.default_rng(seed).exponential(1 / rate_per_s, n_requests)
    gaps[0] = 0.0
    return np.cumsum(gaps)


def _check_bounds(url, n_requests, time_limit_s, timeout_s) -> None:
    check_loopback(url)
    if not 1 <= n_requests <= MAX_REQUESTS:
        raise ValueError(f"n_requests must be 1..{MAX_REQUESTS}")
    if not 0 < time_limit_s <= MAX_SECONDS or not 0 < timeout_s <= MAX_SECONDS:
        raise ValueError(f"need 0 < time_limit_s, timeout_s <= {MAX_SECONDS}")


def _in_a_thread(coroutine_fn):
    """Run ``coroutine_fn()`` on a fresh event loop in its own thread; return its result."""
    out: dict = {}

    def run() -> None:
        try:
            out["result"] = asyncio.run(coroutine_fn())
        except BaseException as exc:  # handed to the caller's thread
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True, name="gpulab-load-test")
    thread.start()
    thread.join(MAX_SECONDS * 2 + 30)
    if "error" in out:
        raise out["error"]
    if "result" not in out:
        raise TimeoutError("the load test did not finish")
    return out["result"]


class _Client:
    """One aiohttp session that sends the bodies and books every outcome in ``result``."""

    def __init__(self, url, result: LoadResult, payloads, picks, expected, timeout_s,
                 max_connections):
        self.url, self.result = url + "/predict", result
        self.payloads, self.picks, self.expected = payloads, picks, expected
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        self.max_connections = max_connections
        self.last_answer = 0.0

    async def __aenter__(self):
        connector = aiohttp.TCPConnector(limit=self.max_connections, keepalive_timeout=2.0)
        self.session = aiohttp.ClientSession(connector=connector, timeout=self.timeout,
                                             headers={"Content-Type": "application/json"})
        return self

    async def __aexit__(self, *exc):
        await self.session.close()

    async def send(self, i: int, due: float) -> None:
        result = self.result
        result.sent += 1
        try:
            async with self.session.post(self.url, data=self.payloads[i]) as answer:
                body = await answer.read()
                status = answer.status
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
            result.lost += 1
            return
        done = time.perf_counter()
        self.last_answer = max(self.last_answer, done)
        result.statuses[status] = result.statuses.get(status, 0) + 1
        if status != 200:
            return
        result.latencies_s.append(done - due)
        if self.expected is not None:
            try:
                classes = json.loads(body)["classes"]
            except (ValueError, KeyError, TypeError):
                classes = None
            if classes != [int(self.expected[k]) for k in self.picks[i]]:
                result.wrong += 1


def load_test(url: str, rows, n_requests: int = 200, rate_per_s: float = 200.0,
              arrivals: str = "poisson", seed: int = 0, time_limit_s: float = 10.0,
              timeout_s: float = 10.0, rows_per_request: int = 1, expected=None,
              max_connections: int = 256, separate_process: bool = False) -> LoadResult:
    """Open loop: ``n_requests`` POSTs of ``rows_per_request`` rows (cycling through ``rows``)
    to the loopback ``url`` + ``/predict``, due at the arrival times of
    :func:`arrival_times` whatever the answers, over up to ``max_connections`` keep-alive
    connections. Requests not due within ``time_limit_s`` are not sent (``stopped_early``);
    one unanswered after ``timeout_s`` is lost. ``expected``: the class of each row of
    ``rows``, to count wrong answers. ``separate_process``: run the client in a child Python
    process (see the module's docstring)."""
    _check_bounds(url, n_requests, time_limit_s, timeout_s)
    if separate_process:
        return _in_a_process("load_test", url, rows, expected, n_requests=n_requests,
                             rate_per_s=rate_per_s, arrivals=arrivals, seed=seed,
                             time_limit_s=time_limit_s, timeout_s=timeout_s,
                             rows_per_request=rows_per_request, max_connections=max_connections)
    if rate_per_s <= 0 or max_connections < 1:
        raise ValueError("need rate_per_s > 0 and max_connections >= 1")
    due_s = arrival_times(n_requests, rate_per_s, arrivals, seed)
    payloads, picks = _payloads(rows, n_requests, rows_per_request)
    result = LoadResult(url, f"open loop, {arrivals} arrivals", float(rate_per_s), n_requests)

    async def run() -> LoadResult:
        async with _Client(url, result, payloads, picks, expected, timeout_s,
                           max_connections) as client:
            tasks = []
            start = time.perf_counter()
            for i, offset in enumerate(due_s):
                if offset > time_limit_s:
                    result.stopped_early = True
                    break
                delay = start + offset - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks.append(asyncio.ensure_future(client.send(i, start + offset)))
            last_send = time.perf_counter()
            if tasks:
                _, pending = await asyncio.wait(tasks, timeout=timeout_s + 1)
                for task in pending:  # cannot happen with the client timeout; bounded anyway
                    task.cancel()
                    result.lost += 1
            result.send_span_s = last_send - start
            result.elapsed_s = max(client.last_answer, last_send) - start
        return result

    return _in_a_thread(run)


def closed_loop(url: str, rows, n_requests: int = 1000, concurrency: int = 16,
                time_limit_s: float = 10.0, timeout_s: float = 10.0, rows_per_request: int = 1,
                expected=None, separate_process: bool = False) -> LoadResult:
    """Closed loop: ``concurrency`` clients, each sending its next request as soon as its last
    is answered, until ``n_requests`` are sent or ``time_limit_s`` has passed. Latency counts
    from each send. Its throughput is the server's capacity at that concurrency."""
    _check_bounds(url, n_requests, time_limit_s, timeout_s)
    if separate_process:
        return _in_a_process("closed_loop", url, rows, expected, n_requests=n_requests,
                             concurrency=concurrency, time_limit_s=time_limit_s,
                             timeout_s=timeout_s, rows_per_request=rows_per_request)
    if concurrency < 1:
        raise ValueError("concurrency must be >= 1")
    payloads, picks = _payloads(rows, n_requests, rows_per_request)
    result = LoadResult(url, f"closed loop, {concurrency} in flight", 0.0, n_requests)
    next_index = iter(range(n_requests))

    async def run() -> LoadResult:
        async with _Client(url, result, payloads, picks, expected, timeout_s,
                           concurrency) as client:
            start = time.perf_counter()
            end = start + time_limit_s

            async def one_client() -> None:
                for i in next_index:
                    now = time.perf_counter()
                    if now > end:
                        result.stopped_early = True
                        return
                    await client.send(i, now)

            await asyncio.gather(*(one_client() for _ in range(concurrency)))
            result.send_span_s = result.elapsed_s = client.last_answer - start
        return result

    return _in_a_thread(run)


def _in_a_process(kind: str, url: str, rows, expected, **kwargs) -> LoadResult:
    """Run :func:`load_test` or :func:`closed_loop` in a child Python process (this module run
    with ``-m``), the job as JSON on its standard input, the result as JSON on its output."""
    job = {"kind": kind, "url": url, "rows": np.asarray(rows, dtype=np.float32).tolist(),
           "expected": None if expected is None else np.asarray(expected).astype(int).tolist(),
           "kwargs": kwargs}
    done = subprocess.run([sys.executable, "-m", "gpulab.serving.loadtest"],
                          input=json.dumps(job), capture_output=True, text=True,
                          timeout=2 * MAX_SECONDS + 30)
    if done.returncode != 0:
        raise RuntimeError(f"the load-test process failed: {done.stderr.strip()[-500:]}")
    fields = json.loads(done.stdout)
    fields["statuses"] = {int(code): n for code, n in fields["statuses"].items()}
    return LoadResult(**fields)


def _main() -> None:
    job = json.load(sys.stdin)
    run = {"load_test": load_test, "closed_loop": closed_loop}[job["kind"]]
    result = run(job["url"], job["rows"], expected=job["expected"], **job["kwargs"])
    json.dump(dataclasses.asdict(result), sys.stdout)


__all__ = ["ARRIVALS", "LoadResult", "MAX_REQUESTS", "MAX_SECONDS", "arrival_times",
           "check_loopback", "closed_loop", "load_test", "nearest_rank", "percentile",
           "post_json"]

if __name__ == "__main__":
    _main()
