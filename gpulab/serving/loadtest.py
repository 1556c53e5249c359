"""A bounded load test for :mod:`gpulab.serving.server`, on loopback only.

:func:`load_test` sends a fixed number of requests at a given rate (request ``i`` is due at
``i / rate`` seconds), from a fixed number of client threads, and stops at a time limit. Latency
is measured per request from when it was due to when its answer arrived, so a request that waits
for a free client thread counts that wait (no "coordinated omission"). Percentiles are
nearest-rank: the value below which ``q`` % of the measured latencies lie, itself a measured one.
"""

from __future__ import annotations

import http.client
import json
import math
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import numpy as np

MAX_REQUESTS = 5_000
MAX_SECONDS = 60.0


def percentile(values, q: float) -> float:
    """Nearest-rank percentile: the ceil(q/100 · n)-th smallest value (1-based)."""
    ordered = sorted(float(v) for v in values)
    if not ordered:
        raise ValueError("no values")
    if not 0 < q <= 100:
        raise ValueError("q must be in (0, 100]")
    return ordered[max(1, math.ceil(q * len(ordered) / 100)) - 1]


@dataclass
class LoadResult:
    """What one load test measured (latencies in seconds)."""

    url: str
    rate_per_s: float
    n_requests: int
    concurrency: int
    latencies_s: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    failures: int = 0
    elapsed_s: float = 0.0
    stopped_early: bool = False

    @property
    def completed(self) -> int:
        return len(self.latencies_s)

    @property
    def throughput_per_s(self) -> float:
        return self.completed / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def p(self, q: float) -> float:
        return percentile(self.latencies_s, q) if self.latencies_s else float("nan")

    @property
    def p50_ms(self) -> float:
        return 1e3 * self.p(50)

    @property
    def p99_ms(self) -> float:
        return 1e3 * self.p(99)

    def __str__(self) -> str:
        return (f"{self.completed}/{self.n_requests} answered at {self.rate_per_s:g} req/s offered:"
                f" {self.throughput_per_s:.0f} req/s, p50 {self.p50_ms:.2f} ms, "
                f"p99 {self.p99_ms:.2f} ms (measured on this machine, loopback)")


def check_loopback(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    if parts.scheme != "http" or parts.hostname not in ("127.0.0.1", "localhost"):
        raise ValueError(f"the load test only talks to 127.0.0.1, not {url!r}")
    return "127.0.0.1", int(parts.port or 80)


def post_json(url: str, payload, timeout_s: float = 10.0, content_type="application/json",
              raw: bytes | None = None) -> tuple[int, dict]:
    """POST to a loopback ``url``; returns (status, decoded JSON answer)."""
    host, port = check_loopback(url)
    body = raw if raw is not None else json.dumps(payload).encode()
    connection = http.client.HTTPConnection(host, port, timeout=timeout_s)
    try:
        connection.request("POST", urlsplit(url).path or "/", body=body,
                           headers={"Content-Type": content_type})
        answer = connection.getresponse()
        return answer.status, json.loads(answer.read() or b"{}")
    finally:
        connection.close()


def load_test(url: str, rows: np.ndarray, n_requests: int = 100, rate_per_s: float = 200.0,
              concurrency: int = 8, time_limit_s: float = 10.0, rows_per_request: int = 1,
              timeout_s: float = 5.0) -> LoadResult:
    """Send ``n_requests`` POSTs of ``rows_per_request`` rows (cycling through ``rows``) to the
    loopback ``url`` + ``/predict``, offered at ``rate_per_s``, from ``concurrency`` threads,
    stopping at ``time_limit_s``. Bounded: at most 5,000 requests and 60 s."""
    check_loopback(url)
    if not 1 <= n_requests <= MAX_REQUESTS:
        raise ValueError(f"n_requests must be 1..{MAX_REQUESTS}")
    if not 0 < time_limit_s <= MAX_SECONDS or rate_per_s <= 0 or concurrency < 1:
        raise ValueError(f"need 0 < time_limit_s <= {MAX_SECONDS}, rate > 0, concurrency >= 1")
    rows = np.asarray(rows, dtype=float)
    payloads = [json.dumps({"inputs": rows[(i * rows_per_request + np.arange(rows_per_request))
                                           % len(rows)].tolist()}).encode()
                for i in range(n_requests)]
    result = LoadResult(url, rate_per_s, n_requests, concurrency)
    lock = threading.Lock()
    next_index = [0]
    start = time.perf_counter()
    end = start + time_limit_s

    def client() -> None:
        while True:
            with lock:
                i = next_index[0]
                next_index[0] += 1
            if i >= n_requests:
                return
            due = start + i / rate_per_s
            if due > end:
                result.stopped_early = True
                return
            time.sleep(max(0.0, due - time.perf_counter()))
            try:
                status, _ = post_json(url + "/predict", None, timeout_s, raw=payloads[i])
            except OSError:
                with lock:
                    result.failures += 1
                continue
            done = time.perf_counter()
            with lock:
                result.statuses[status] = result.statuses.get(status, 0) + 1
                if status == 200:
                    result.latencies_s.append(done - due)

    threads = [threading.Thread(target=client, daemon=True) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=max(0.0, end - time.perf_counter()) + timeout_s)
    result.elapsed_s = time.perf_counter() - start
    return result


__all__ = ["LoadResult", "MAX_REQUESTS", "MAX_SECONDS", "check_loopback", "load_test",
           "percentile", "post_json"]
