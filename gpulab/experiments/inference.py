"""Chapter 12's experiments: inference latency and throughput vs batch size (CPU measured, GPU
measured on the ``gpu`` tier or estimated by gpulab's GPU model), the tiny-model
crossover, fp8 weights, serving with dynamic batching under a bounded load test, energy with
stated boundaries and the numbers behind the five misconceptions."""

from __future__ import annotations

import json
import time

import matplotlib.pyplot as plt
import numpy as np

from gpulab import device, hardware, recorded_runs, timing
from gpulab.formats import quantise
from gpulab.nn.data import load_digits
from gpulab.nn.recipes import train_digits
from gpulab.plots import wrap_title
from gpulab.serving import energy
from gpulab.serving.loadtest import closed_loop, load_test, post_json
from gpulab.serving.server import InferenceServer

BATCH_SIZES = (1, 4, 16, 64, 256, 1024)
COPY_LATENCY_S = 10e-6
COPY_LATENCY_SOURCE = ("assumed ~10 µs per host↔device copy of a few kilobytes (driver and PCIe "
                       "round trip; small cudaMemcpy calls typically take 5-20 µs)")
WHERE_GPU = "GPU: measured on this machine's {gpu} with the kernels backend (includes copies)."
WHERE_SIM = ("GPU: no GPU here (simulator tier) — estimated by gpulab's GPU model of the {gpu} "
             "(kernels, the host's launches, the host↔device round trip; an estimate with its "
             "band: gpulab model-check).")

_TRAINED: dict = {}


def trained_digits(epochs: int = 20):
    """(model, history, data): the course's digits recipe on the NumPy backend (cached)."""
    if epochs not in _TRAINED:
        data = load_digits(seed=0)
        t0 = time.perf_counter()
        model, history = train_digits("numpy", data=data, epochs=epochs)
        _TRAINED[epochs] = (model, history, data, time.perf_counter() - t0)
    return _TRAINED[epochs][:3]


def training_seconds(epochs: int = 20) -> float:
    trained_digits(epochs)
    return _TRAINED[epochs][3]


def batch_rows(data, batch: int) -> np.ndarray:
    X = data.X_test
    return X[np.arange(batch) % len(X)]


def cpu_latency(model, data, batch_sizes=BATCH_SIZES, min_time_s: float = 0.02) -> list[dict]:
    """Median time of ``model.predict`` per batch size on this CPU (NumPy backend, measured)."""
    try:  # one BLAS thread: on a shared 2-core machine more threads make large batches erratic
        from threadpoolctl import threadpool_limits
    except ImportError:
        threadpool_limits = None
    if threadpool_limits is not None and model.backend.name == "numpy":
        with threadpool_limits(limits=1, user_api="blas"):
            return _latency_rows(model, data, batch_sizes, min_time_s,
                                 "measured on this CPU (NumPy, one BLAS thread)")
    return _latency_rows(model, data, batch_sizes, min_time_s, "measured on this CPU (NumPy)")


def _latency_rows(model, data, batch_sizes, min_time_s: float, where: str) -> list[dict]:
    rows = []
    for batch in batch_sizes:
        X = batch_rows(data, batch)
        model.predict(X)
        times, spent = [], 0.0
        while spent < min_time_s or len(times) < 5:
            t0 = time.perf_counter()
            model.predict(X)
            times.append(time.perf_counter() - t0)
            spent += times[-1]
        seconds = float(np.median(times))
        rows.append({"batch": batch, "latency_s": seconds, "throughput_per_s": batch / seconds,
                     "where": where})
    return rows


def gpu_inference_estimate(widths, batch: int, gpu="H100") -> hardware.RooflineEstimate:
    """Roofline estimate of one forward pass of an MLP of ``widths`` on ``gpu`` in fp32: the
    matmuls' FLOPs, weights + activations through memory, two launches per layer (matmul,
    bias + activation) plus one for the argmax, inputs in and classes out over PCIe."""
    pairs = list(zip(widths[:-1], widths[1:], strict=True))
    flops = sum(2 * batch * i * o for i, o in pairs)
    weights = sum((i + 1) * o for i, o in pairs) * 4
    activations = sum(batch * (i + 2 * o) for i, o in pairs) * 4
    transfer = batch * widths[0] * 4 + batch * 8
    return hardware.estimate_time(gpu, flops, weights + activations, "fp32",
                                  transfer_bytes=transfer, launches=2 * len(pairs) + 1)


def gpu_latency(model, data, batch_sizes=BATCH_SIZES, gpu="H100") -> list[dict]:
    """Measured with the kernels backend on the ``gpu`` tier; else gpulab's GPU model (an
    estimate with its band) plus two copy latencies (:data:`COPY_LATENCY_S`)."""
    rows = []
    if device.tier() == "gpu":
        twin = model.copy(backend="kernels")
        spec = timing.local_gpu_spec()
        name = spec.name if spec else "GPU"
        for row in _latency_rows(twin, data, batch_sizes, 0.02, ""):
            rows.append({**row, "where": f"measured on this machine's GPU ({name})"})
        return rows
    for batch in batch_sizes:
        est = gpu_inference_estimate(model.widths, batch, gpu)
        seconds = est.time_s + 2 * COPY_LATENCY_S
        rows.append({"batch": batch, "latency_s": seconds, "throughput_per_s": batch / seconds,
                     "where": f"estimated: gpulab's GPU model of the {est.gpu.name} (kernels, "
                              "launches issued ahead, copies) + round trip",
                     "kernel_s": est.kernel_s, "gpu_s": est.gpu_s,
                     "overhead_s": seconds - est.kernel_s})
    return rows


def recorded_comparison(widths, run=None):
    """The recorded run's inference latencies (kernels backend, per batch size) against this
    module's estimate for the same GPU (roofline + launches + two copy latencies, a best
    case): a :class:`~gpulab.recorded_runs.ComparisonTable`, or None when no run ships."""
    def rows_of(run, recorded):
        for row in recorded:
            estimate = gpu_inference_estimate(widths, int(row["batch"]), run.gpu_key)
            yield (f"batch {int(row['batch'])}", estimate.time_s + 2 * COPY_LATENCY_S,
                   row["latency_s"])

    return recorded_runs.series_comparison(
        "inference latency", "Inference latency measured on a real GPU, against the model",
        rows_of, run)


def crossover(cpu_rows, gpu_rows) -> dict:
    """The smallest batch at which the GPU row answers faster than the CPU row, and a sentence
    computed from the numbers."""
    for c, g in zip(cpu_rows, gpu_rows, strict=True):
        if g["latency_s"] < c["latency_s"]:
            return {"batch": c["batch"], "sentence": (
                f"From a batch of {c['batch']} the GPU ({g['latency_s'] * 1e6:.0f} µs) beats this "
                f"CPU ({c['latency_s'] * 1e6:.0f} µs); below it the CPU is enough.")}
    last_c, last_g = cpu_rows[-1], gpu_rows[-1]
    return {"batch": None, "sentence": (
        f"Up to a batch of {last_c['batch']} this CPU ({last_c['latency_s'] * 1e6:.0f} µs) is "
        f"never slower than the GPU ({last_g['latency_s'] * 1e6:.0f} µs): for this tiny model a "
        "CPU is enough.")}


def latency_plot(cpu_rows, gpu_rows):
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    for rows, label in ((cpu_rows, "CPU (measured)"), (gpu_rows, gpu_rows[0]["where"][:40])):
        b = [r["batch"] for r in rows]
        left.loglog(b, [r["latency_s"] * 1e6 for r in rows], "o-", label=label)
        right.loglog(b, [r["throughput_per_s"] for r in rows], "o-", label=label)
    left.set(xlabel="batch size", ylabel="latency per batch (µs)")
    right.set(xlabel="batch size", ylabel="inferences per second")
    left.legend(fontsize=8)
    fig.suptitle(wrap_title("Digits MLP inference: latency and throughput vs batch size"))
    fig.tight_layout()
    return fig


def fp8_weights(model, data, fmt: str = "fp8_e4m3") -> dict:
    """Held-out accuracy and weight memory with every W stored in ``fmt`` (per-tensor scale);
    the biases stay fp32, the arithmetic stays fp32 (weight-only quantisation)."""
    state = model.state()
    quantised, fp8_bytes = {}, 0
    for key, value in state.items():
        if key.endswith(".W"):
            q = quantise(value, fmt)
            quantised[key] = q.dequantise().astype(np.float32)
            fp8_bytes += q.bytes_moved
        else:
            quantised[key] = value
            fp8_bytes += value.nbytes
    twin = model.copy().load_state(quantised)
    return {"format": fmt, "fp32_accuracy": model.accuracy(data.X_test, data.y_test),
            "quantised_accuracy": twin.accuracy(data.X_test, data.y_test),
            "fp32_bytes": int(sum(v.nbytes for v in state.values())),
            "quantised_bytes": int(fp8_bytes), "n_test": int(len(data.y_test))}


def backend_agreement(model, data, n: int = 24) -> dict:
    """The same trained parameters on the NumPy backend and on gpulab's kernels (the simulator
    here, the GPU on the gpu tier), on the first ``n`` held-out digits."""
    X, y = data.X_test[:n], data.y_test[:n]
    kernels = model.copy(backend="kernels")
    a, b = model.predict(X), kernels.predict(X)
    return {"n": n, "numpy_accuracy": float(np.mean(a == y)),
            "kernels_accuracy": float(np.mean(b == y)), "same_predictions": int(np.sum(a == b)),
            "tier": device.tier()}


# --- serving --------------------------------------------------------------------------------

CAPACITY_CONCURRENCY = 32
SWEEP_MULTIPLES = (0.25, 1.0, 4.0)


def _served_rows(model, data, reference_model=None, n_rows: int | None = None):
    """The held-out digits (the first ``n_rows``) and the classes ``reference_model`` (default
    ``model``) gives them, computed directly: what every served answer is checked against."""
    X = data.X_test if n_rows is None else data.X_test[:n_rows]
    return X, np.asarray((reference_model or model).predict(X)).astype(int)


def serving_capacity(model, data, window_ms: float = 0.0, max_batch: int = 64,
                     n_requests: int = 600, concurrency: int = CAPACITY_CONCURRENCY,
                     separate_process: bool = True, reference_model=None,
                     n_rows: int | None = None, warm_up: int = 100) -> dict:
    """The most answers per second a fresh server gives: a closed-loop run
    (:func:`~gpulab.serving.loadtest.closed_loop`, ``concurrency`` requests always in flight,
    one digit each) after a warm-up of ``warm_up`` requests. Every answer is checked against
    ``reference_model`` (default ``model``) run directly on the first ``n_rows`` held-out digits
    (default all). Measured here, loopback, the load generator in a separate Python process
    (``separate_process``) sharing this machine's cores."""
    X, expected = _served_rows(model, data, reference_model, n_rows)
    with InferenceServer(model, window_ms=window_ms, max_batch=max_batch) as server:
        closed_loop(server.url, X, n_requests=warm_up, concurrency=8)
        before = server.stats()
        r = closed_loop(server.url, X, n_requests=n_requests, concurrency=concurrency,
                        expected=expected, separate_process=separate_process)
        after = server.stats()
    batches = after["batches"] - before["batches"]
    return {"window_ms": window_ms, "concurrency": concurrency, "n_requests": n_requests,
            "completed": r.completed, "lost": r.lost, "wrong": r.wrong,
            "throughput_per_s": r.throughput_per_s, "p50_ms": r.p50_ms, "p99_ms": r.p99_ms,
            "p99_rule": r.percentile_rule(99),
            "mean_batch": (after["rows"] - before["rows"]) / max(batches, 1)}


def serving_sweep(model, data, windows_ms=(0.0, 2.0, 10.0), rates=None,
                  multiples=SWEEP_MULTIPLES, capacity_per_s: float | None = None,
                  n_requests: int = 400, max_batch: int = 64, max_queue: int | None = None,
                  arrivals: str = "poisson", time_limit_s: float = 10.0,
                  separate_process: bool = True, reference_model=None,
                  n_rows: int | None = None) -> list[dict]:
    """One server per batching window, an open-loop load test per offered rate
    (:func:`~gpulab.serving.loadtest.load_test`: ``n_requests`` one-digit requests, Poisson
    arrivals): p50, p99 (nearest rank, with its n), answers per second, 503s, lost and wrong
    answers (every answer checked against the model run directly), and the mean batch the
    server ran. The rates are ``rates`` (requests/s) or, by default, ``multiples`` of the
    capacity (``capacity_per_s``, else measured first by :func:`serving_capacity`). The
    queue holds ``max_queue`` rows (default 2 × ``max_batch``), so beyond capacity it fills and
    the excess is answered 503. Measured here, loopback, the load generator in a separate
    Python process (``separate_process``; in the server's own process it would compete with
    it for the interpreter lock). ``reference_model`` and ``n_rows``: as for
    :func:`serving_capacity`."""
    X, expected = _served_rows(model, data, reference_model, n_rows)
    if rates is None:
        if capacity_per_s is None:
            capacity_per_s = serving_capacity(model, data, max_batch=max_batch,
                                              separate_process=separate_process,
                                              reference_model=reference_model,
                                              n_rows=n_rows)["throughput_per_s"]
        offered = [(m * capacity_per_s, m) for m in multiples]
    else:
        offered = [(float(r), r / capacity_per_s if capacity_per_s else None) for r in rates]
    max_queue = 2 * max_batch if max_queue is None else max_queue
    rows = []
    for window in windows_ms:
        with InferenceServer(model, window_ms=window, max_batch=max_batch,
                             max_queue=max_queue) as server:
            load_test(server.url, X, n_requests=20, rate_per_s=200.0, time_limit_s=2.0)  # warm
            for rate, multiple in offered:
                before = server.stats()
                r = load_test(server.url, X, n_requests=n_requests, rate_per_s=rate,
                              arrivals=arrivals, time_limit_s=time_limit_s, expected=expected,
                              separate_process=separate_process)
                after = server.stats()
                batches = after["batches"] - before["batches"]
                rows.append({"window_ms": window, "rate_per_s": rate, "multiple": multiple,
                             "capacity_per_s": capacity_per_s, "n_requests": n_requests,
                             "sent": r.sent, "sent_rate_per_s": r.sent_rate_per_s,
                             "completed": r.completed, "rejected": r.rejected, "lost": r.lost,
                             "wrong": r.wrong, "p50_ms": r.p50_ms, "p99_ms": r.p99_ms,
                             "p99_rule": r.percentile_rule(99),
                             "throughput_per_s": r.throughput_per_s,
                             "mean_batch": (after["rows"] - before["rows"]) / max(batches, 1),
                             "model_share": (after["model_s"] - before["model_s"])
                             / r.elapsed_s if r.elapsed_s > 0 else 0.0,
                             "largest_batch": max((size for size, count in
                                                   after["batch_sizes"].items()
                                                   if count > before["batch_sizes"].get(size, 0)),
                                                  default=0),
                             "errors": r.answered - r.completed + r.lost,
                             "statuses": dict(r.statuses), "mode": r.mode})
    return rows


def serving_lines(rows, capacity: dict | None = None) -> list[str]:
    """The chapter's sentences about a :func:`serving_sweep`, each from its rows: saturation
    at the highest offered rate, what the longest window did to throughput and latency, and
    how p99 was taken."""
    lines = []
    if capacity is not None:
        lines.append(f"Capacity: {capacity['throughput_per_s']:.0f} answers/s with "
                     f"{capacity['concurrency']} requests always in flight (closed loop, "
                     f"window {capacity['window_ms']:g} ms, {capacity['completed']} answered, "
                     f"{capacity['lost']} lost, {capacity['wrong']} wrong).")
    rates = sorted({r["rate_per_s"] for r in rows})
    windows = sorted({r["window_ms"] for r in rows})
    low, high = rates[0], rates[-1]

    def at(window, rate):
        return next(r for r in rows if r["window_ms"] == window and r["rate_per_s"] == rate)

    for window in windows:
        lo, hi = at(window, low), at(window, high)
        grew = hi["throughput_per_s"] / lo["throughput_per_s"] if lo["throughput_per_s"] else 0
        offered = high / low
        verdict = ("answers per second stopped following the offer: saturated"
                   if grew < 0.6 * offered else "answers per second still followed the offer")
        lines.append(f"Window {window:g} ms: offered {low:.0f} → {high:.0f} req/s "
                     f"({offered:.0f}×), it answered {lo['throughput_per_s']:.0f} → "
                     f"{hi['throughput_per_s']:.0f}/s ({grew:.1f}×): {verdict}; at the top rate "
                     f"{hi['rejected']} of {hi['sent']} got 503, p99 {hi['p99_ms']:.1f} ms "
                     f"against {lo['p99_ms']:.1f} ms at the lowest.")
    if len(windows) > 1:
        none, longest = windows[0], windows[-1]
        a, b = at(none, high), at(longest, high)
        if b["throughput_per_s"] > 1.05 * a["throughput_per_s"]:
            lines.append(f"At {high:.0f} req/s offered, with a {longest:g} ms window the server "
                         f"answered {b['throughput_per_s']:.0f}/s vs "
                         f"{a['throughput_per_s']:.0f}/s with a {none:g} ms one (batches of "
                         f"{b['mean_batch']:.1f} vs {a['mean_batch']:.1f} rows).")
        else:
            lines.append(f"At {high:.0f} req/s offered, a {longest:g} ms window did not raise "
                         f"the answers per second ({b['throughput_per_s']:.0f}/s vs "
                         f"{a['throughput_per_s']:.0f}/s with {none:g} ms) though its batches "
                         f"held {b['mean_batch']:.1f} vs {a['mean_batch']:.1f} rows; the model "
                         f"was busy {b['model_share']:.0%} of that run's time (vs "
                         f"{a['model_share']:.0%}): "
                         + ("the rest, HTTP and JSON paid per request, sets the limit, and "
                            "batching the model's share saves little."
                            if b["model_share"] < 0.5 else
                            "the model's time dominates, yet the bigger batches did not help."))
        c, d = at(none, low), at(longest, low)
        more = "more" if d["p50_ms"] > c["p50_ms"] else "no more"
        lines.append(f"At {low:.0f} req/s the {longest:g} ms window costs waiting: p50 "
                     f"{d['p50_ms']:.1f} ms vs {c['p50_ms']:.1f} ms ({more} than without), "
                     f"batches of {d['mean_batch']:.1f} vs {c['mean_batch']:.1f} rows.")
    fewest = min(rows, key=lambda r: r["completed"])
    lines.append(f"Percentiles are nearest-rank over each point's answers (n); the fewest: "
                 f"{fewest['p99_rule']} (window {fewest['window_ms']:g} ms, "
                 f"{fewest['rate_per_s']:.0f} req/s). Lost: {sum(r['lost'] for r in rows)}, "
                 f"wrong: {sum(r['wrong'] for r in rows)} of "
                 f"{sum(r['completed'] for r in rows)} answers checked.")
    return lines


def kernel_serving_lines(capacity: dict, row: dict, numpy_capacity: dict, whose: str,
                         tier: str) -> list[str]:
    """The chapter's sentences about the load test on a fused kernel (``capacity`` and one
    :func:`serving_sweep` ``row``), beside the NumPy forward pass's capacity measured before,
    each from the numbers."""
    where = ("this GPU" if tier == "gpu" else
             "Numba's CUDA simulator on this CPU (every thread run in Python: not a GPU's speed)")
    ratio = capacity["throughput_per_s"] / numpy_capacity["throughput_per_s"]
    return [
        f"{whose} served every batch in one launch, on {where}.",
        f"Capacity: {capacity['throughput_per_s']:.0f} answers/s (closed loop, "
        f"{capacity['concurrency']} requests in flight, mean batch {capacity['mean_batch']:.1f} "
        f"rows), {ratio:.2g}× the NumPy forward pass's {numpy_capacity['throughput_per_s']:.0f}/s "
        "measured above on this machine.",
        f"Offered {row['rate_per_s']:.0f} requests/s (open loop, Poisson, window "
        f"{row['window_ms']:g} ms): {row['completed']} of {row['sent']} answered 200, "
        f"{row['rejected']} refused with 503, {row['lost']} lost, {row['wrong']} wrong; p50 "
        f"{row['p50_ms']:.1f} ms, p99 {row['p99_ms']:.1f} ms ({row['p99_rule']}).",
    ]


def serving_plot(rows):
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for window in sorted({r["window_ms"] for r in rows}):
        mine = sorted((r for r in rows if r["window_ms"] == window),
                      key=lambda r: r["rate_per_s"])
        t = [r["throughput_per_s"] for r in mine]
        ax.plot(t, [r["p50_ms"] for r in mine], "o-", label=f"p50, window {window:g} ms")
        ax.plot(t, [r["p99_ms"] for r in mine], "s--", label=f"p99, window {window:g} ms")
    ax.set(xlabel="throughput (requests/s answered 200)", ylabel="latency (ms)", yscale="log")
    ax.legend(fontsize=7, ncol=2)
    ax.set_title(wrap_title("Dynamic batching on loopback, open-loop load: latency vs "
                            "throughput (measured on this machine)"))
    fig.tight_layout()
    return fig


def bad_requests(server) -> list[dict]:
    """Send the usual bad requests, then a good one: status and error of each."""
    n = server.model.n_inputs
    row = [0.0] * n
    body = json.dumps
    cases = [("wrong shape", body({"inputs": [row[:-1]]}).encode(), "POST", "/predict"),
             ("ragged rows", body({"inputs": [row, row[:-1]]}).encode(), "POST", "/predict"),
             ("non-numeric", body({"inputs": [["seven"] * n]}).encode(), "POST", "/predict"),
             ("true/false", body({"inputs": [[True] * n]}).encode(), "POST", "/predict"),
             ("null", body({"inputs": [[None] * n]}).encode(), "POST", "/predict"),
             ("NaN literal", b'{"inputs": [[NaN' + b", 0" * (n - 1) + b"]]}", "POST",
              "/predict"),
             ("integer 10**400", b'{"inputs": [[1' + b"0" * 400 + b", 0" * (n - 1) + b"]]}",
              "POST", "/predict"),
             ("3.4e39 (> float32)", body({"inputs": [[3.4e39] + row[1:]]}).encode(), "POST",
              "/predict"),
             ("deeply nested", b'{"inputs": ' + b"[" * 20_000 + b"]" * 20_000 + b"}", "POST",
              "/predict"),
             ("bad JSON", b"{inputs: nope", "POST", "/predict"),
             ("too many rows", body({"inputs": [row] * (server.max_batch + 1)}).encode(),
              "POST", "/predict"),
             ("oversized body", b"[" + b"0," * server.max_body_bytes + b"0]", "POST",
              "/predict"),
             ("wrong method (PUT)", body({"inputs": [row]}).encode(), "PUT", "/predict"),
             ("unknown path", b"", "GET", "/admin"),
             ("a good one", body({"inputs": [row]}).encode(), "POST", "/predict")]
    out = []
    for name, raw, method, path in cases:
        status, answer = post_json(server.url + path, None, raw=raw, method=method)
        out.append({"request": name, "status": status,
                    "answer": answer.get("error") or json.dumps(answer)})
    status, answer = post_json(server.url + "/predict", None, raw=b"1,2,3",
                               content_type="text/csv")
    out.insert(-1, {"request": "wrong content type", "status": status,
                    "answer": answer.get("error") or json.dumps(answer)})
    return out


# --- energy ---------------------------------------------------------------------------------


def training_energy(epochs: int = 20) -> energy.Energy:
    """Joules of one training run of the recipe on this CPU (RAPL or the rated estimate)."""
    _, measured = energy.measure(train_digits, "numpy", data=load_digits(seed=0), epochs=epochs)
    return measured


def _repeated(predict, X, min_time_s: float):
    """A callable that runs ``predict(X)`` until ``min_time_s`` has passed; it returns how many
    times it ran."""
    def run() -> int:
        count, t0 = 0, time.perf_counter()
        while count < 3 or time.perf_counter() - t0 < min_time_s:
            predict(X)
            count += 1
        return count
    return run


def inference_energy(cpu_rows, gpu_rows, batch: int, gpu="H100", model=None, data=None,
                     min_time_s: float = 1.0) -> dict:
    """Joules per thousand inferences at ``batch``, CPU (chip boundary) and GPU (board).

    Measured where this machine can: with ``model`` and ``data`` given, the CPU side runs
    ``model.predict`` for ``min_time_s`` under RAPL's package counter where it is readable, and
    on the ``gpu`` tier the GPU side runs the kernels backend's predictions under NVML's energy
    counter (:func:`gpulab.serving.energy.measure`). Otherwise estimated: the CPU's rated
    power × the row's time; the GPU's power model at the row's utilisation (the share of the
    row's time its kernels keep the GPU busy: ``gpu_s`` where the model estimated it, else 1)
    × the row's time. Each :class:`~gpulab.serving.energy.Energy` says which."""
    c = next(r for r in cpu_rows if r["batch"] == batch)
    g = next(r for r in gpu_rows if r["batch"] == batch)
    X = batch_rows(data, batch) if data is not None else None
    if model is not None and X is not None and energy.rapl_zones():
        runs, cpu_e = energy.measure(_repeated(model.predict, X, min_time_s))
        cpu_e = cpu_e.per(batch * runs, 1000)
    else:
        cpu_e = energy.estimate_cpu(c["latency_s"]).per(batch, 1000)
    if (model is not None and X is not None and device.tier() == "gpu"
            and energy.gpu_power_available()):
        twin = model.copy(backend="kernels")
        runs, gpu_e = energy.measure(_repeated(twin.predict, X, min_time_s), device="gpu")
        gpu_e = gpu_e.per(batch * runs, 1000)
    else:
        utilisation = min(g.get("gpu_s", g["latency_s"]) / g["latency_s"], 1.0)
        gpu_e = energy.estimate_gpu(g["latency_s"], gpu, utilisation).per(batch, 1000)
    return {"batch": batch, "cpu": cpu_e, "gpu": gpu_e}


def faster_not_greener(cpu_rows, gpu_rows, gpu="H100") -> dict:
    """Misconception 5 from the chapter's own runs: per batch, the CPU's and the GPU's latency
    and joules per thousand inferences (:func:`inference_energy`), and two batches picked from
    them: the smallest at which the GPU is faster yet uses more energy (``faster_not_greener``)
    and the smallest at which it is faster and uses less (``faster_and_greener``); either is
    None where no batch of the sweep shows it. The CPU's energy is at the chip boundary, the
    GPU's at the board: the ``boundaries`` line says so."""
    rows = []
    for c in cpu_rows:
        g = next((r for r in gpu_rows if r["batch"] == c["batch"]), None)
        if g is None:
            continue
        e = inference_energy(cpu_rows, gpu_rows, c["batch"], gpu)
        rows.append({"batch": c["batch"], "cpu_s": c["latency_s"], "gpu_s": g["latency_s"],
                     "speedup": c["latency_s"] / g["latency_s"], "cpu": e["cpu"],
                     "gpu": e["gpu"]})
    if not rows:
        raise ValueError("the CPU and GPU rows share no batch size")
    faster = [r for r in rows if r["speedup"] > 1]
    costs_more = next((r for r in faster if r["gpu"].joules > r["cpu"].joules), None)
    costs_less = next((r for r in faster if r["gpu"].joules < r["cpu"].joules), None)
    return {"rows": rows, "faster_not_greener": costs_more, "faster_and_greener": costs_less,
            "boundaries": (f"CPU: {rows[0]['cpu'].boundary} ({rows[0]['cpu'].method}: "
                           f"{rows[0]['cpu'].label}); GPU: {rows[0]['gpu'].boundary} "
                           f"({rows[0]['gpu'].method}: {rows[0]['gpu'].label}) — two boundaries: "
                           "the board includes memory and power delivery, the chip does not")}


def faster_not_greener_lines(result: dict) -> list[str]:
    """The chapter's sentences for :func:`faster_not_greener`, each from its numbers."""
    lines = []
    for key, verdict in (("faster_not_greener", "yet uses more energy"),
                         ("faster_and_greener", "and uses less energy")):
        r = result[key]
        if r is None:
            lines.append(f"No batch of this sweep has the GPU faster {verdict}.")
            continue
        lines.append(f"Batch {r['batch']:,}: the GPU is {r['speedup']:.2f}x faster {verdict}: "
                     f"{r['gpu'].joules:.3g} J per 1,000 inferences against the CPU's "
                     f"{r['cpu'].joules:.3g} J.")
    lines.append(f"Boundaries: {result['boundaries']}")
    return lines


__all__ = ["BATCH_SIZES", "COPY_LATENCY_S", "COPY_LATENCY_SOURCE", "WHERE_GPU", "WHERE_SIM",
           "backend_agreement", "bad_requests", "batch_rows", "cpu_latency", "crossover",
           "faster_not_greener", "faster_not_greener_lines", "fp8_weights",
           "gpu_inference_estimate", "gpu_latency", "kernel_serving_lines",
           "inference_energy", "latency_plot", "serving_capacity", "serving_lines",
           "serving_plot", "serving_sweep",
           "serving_widget", "trained_digits", "training_energy", "training_seconds"]


def serving_widget(model, data):
    """Two sliders (batching window, offered rate) and a Run button: starts a server, runs an
    open-loop load test of 400 requests on loopback, prints p50, p99 (with its n), answers per
    second, 503s and the mean batch."""
    import ipywidgets as widgets

    window = widgets.FloatSlider(value=2.0, min=0.0, max=20.0, step=0.5,
                                 description="window (ms)")
    rate = widgets.IntSlider(value=500, min=50, max=8000, step=50, description="rate (req/s)")
    run = widgets.Button(description="Run load test")
    out = widgets.Output()

    def on_click(_):
        out.clear_output()
        with out:
            row = serving_sweep(model, data, windows_ms=(window.value,), rates=(rate.value,))[0]
            print(f"window {row['window_ms']:g} ms, offered {row['rate_per_s']:g} req/s "
                  f"({row['sent_rate_per_s']:.0f}/s sent): answered "
                  f"{row['throughput_per_s']:.0f} req/s, {row['rejected']} got 503, p50 "
                  f"{row['p50_ms']:.2f} ms, p99 {row['p99_ms']:.2f} ms ({row['p99_rule']}), "
                  f"mean batch {row['mean_batch']:.1f} rows (measured on this machine, "
                  "loopback)")

    run.on_click(on_click)
    return widgets.VBox([widgets.HBox([window, rate, run]), out])
