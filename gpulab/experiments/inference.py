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
from gpulab.serving.loadtest import load_test, post_json
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
    found = recorded_runs.recorded_series("inference latency", run)
    if found is None:
        return None
    run, rows = found
    compared = []
    for row in rows:
        estimate = gpu_inference_estimate(widths, int(row["batch"]), run.gpu_key)
        compared.append((f"batch {int(row['batch'])}", estimate.time_s + 2 * COPY_LATENCY_S,
                         row["latency_s"]))
    return recorded_runs.comparison_table(
        "Inference latency measured on a real GPU, against the model", run,
        compared)


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


def serving_sweep(model, data, windows_ms=(0.0, 2.0, 10.0), rates=(100.0, 400.0),
                  n_requests: int = 60, concurrency: int = 16, max_batch: int = 64,
                  time_limit_s: float = 5.0) -> list[dict]:
    """One server per batching window, a bounded load test per offered rate: p50, p99,
    throughput and the mean batch the server ran (measured here, loopback)."""
    rows = []
    for window in windows_ms:
        with InferenceServer(model, window_ms=window, max_batch=max_batch) as server:
            load_test(server.url, data.X_test, n_requests=10, rate_per_s=200,
                      concurrency=4, time_limit_s=2.0)  # warm up
            for rate in rates:
                before = server.stats()
                result = load_test(server.url, data.X_test, n_requests=n_requests,
                                   rate_per_s=rate, concurrency=concurrency,
                                   time_limit_s=time_limit_s)
                after = server.stats()
                batches = after["batches"] - before["batches"]
                rows.append({"window_ms": window, "rate_per_s": rate,
                             "completed": result.completed, "n_requests": n_requests,
                             "p50_ms": result.p50_ms, "p99_ms": result.p99_ms,
                             "throughput_per_s": result.throughput_per_s,
                             "mean_batch": (after["rows"] - before["rows"]) / max(batches, 1),
                             "errors": sum(s for c, s in result.statuses.items() if c != 200)
                             + result.failures})
    return rows


def serving_plot(rows):
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for window in sorted({r["window_ms"] for r in rows}):
        mine = [r for r in rows if r["window_ms"] == window]
        t = [r["throughput_per_s"] for r in mine]
        ax.plot(t, [r["p50_ms"] for r in mine], "o-", label=f"p50, window {window:g} ms")
        ax.plot(t, [r["p99_ms"] for r in mine], "s--", label=f"p99, window {window:g} ms")
    ax.set(xlabel="throughput (requests/s answered)", ylabel="latency (ms)", yscale="log")
    ax.legend(fontsize=7, ncol=2)
    ax.set_title(wrap_title("Dynamic batching on loopback: latency vs throughput "
                            "(measured on this machine)"))
    fig.tight_layout()
    return fig


def bad_requests(server) -> list[dict]:
    """Send the usual bad requests, then a good one: status and error of each."""
    n = server.model.n_inputs
    cases = [("wrong shape", {"inputs": [[0.0] * (n - 1)]}, None, "application/json"),
             ("non-numeric", {"inputs": [["seven"] * n]}, None, "application/json"),
             ("bad JSON", None, b"{inputs: nope", "application/json"),
             ("wrong content type", None, b"1,2,3", "text/csv"),
             ("oversized body", None, b"[" + b"0," * server.max_body_bytes + b"0]",
              "application/json"),
             ("a good one", {"inputs": [[0.0] * n]}, None, "application/json")]
    out = []
    for name, payload, raw, kind in cases:
        status, answer = post_json(server.url + "/predict", payload, content_type=kind, raw=raw)
        out.append({"request": name, "status": status,
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
           "gpu_inference_estimate", "gpu_latency",
           "inference_energy", "latency_plot", "serving_plot", "serving_sweep",
           "serving_widget", "trained_digits", "training_energy", "training_seconds"]


def serving_widget(model, data):
    """Two sliders (batching window, offered rate) and a Run button: starts a server, runs a
    bounded load test of 60 requests on loopback, prints p50, p99, throughput and mean batch."""
    import ipywidgets as widgets

    window = widgets.FloatSlider(value=2.0, min=0.0, max=20.0, step=0.5,
                                 description="window (ms)")
    rate = widgets.IntSlider(value=200, min=50, max=800, step=50, description="rate (req/s)")
    run = widgets.Button(description="Run load test")
    out = widgets.Output()

    def on_click(_):
        out.clear_output()
        with out:
            row = serving_sweep(model, data, windows_ms=(window.value,), rates=(rate.value,))[0]
            print(f"window {row['window_ms']:g} ms, offered {row['rate_per_s']:g} req/s: "
                  f"answered {row['throughput_per_s']:.0f} req/s, p50 {row['p50_ms']:.2f} ms, "
                  f"p99 {row['p99_ms']:.2f} ms, mean batch {row['mean_batch']:.1f} rows "
                  "(measured on this machine, loopback)")

    run.on_click(on_click)
    return widgets.VBox([widgets.HBox([window, rate, run]), out])
