"""``gpulab gpu-check`` (``make gpu-check``): the one prepared command for a machine with an
NVIDIA GPU. It validates every kernel on the GPU, runs the benchmark suite and the chapters'
GPU series, records them in one file under ``gpulab/data/`` with the GPU's name, driver,
toolkit and date, executes every notebook in the ``gpu`` tier, and prints a summary.

Steps (each timed; a failure is reported and the others still run):

1. ``kernels``   — every kernel family at GPU sizes against :mod:`gpulab.reference`: the bench
   cases (saxpy, copies, three matmuls at n = 4096), the dot products, the fp16/bf16/fp8
   kernels (linked and run: the ``ptx`` tier only proves they compile), the dense, softmax
   and optimiser kernels;
2. ``bench``     — :func:`gpulab.bench.run_suite` at the ``gpu`` tier's sizes (CUDA events,
   the device's copy bandwidth, cuBLAS through CuPy when installed);
3. ``series``    — the GPU series of the chapters' experiments: crossover (01), bandwidth and
   strides (02), matmul tiles (03), fusion (05), a training epoch on the kernel backend at
   several batch sizes (07-08), pageable vs pinned host copies and launch overhead, the
   fp16/bf16/fp8 matmul kernels (10), inference latency against batch size (12);
4. ``record``    — all of the above in ``gpulab/data/gpu_run_<device>_<date>.json``;
5. ``notebooks`` — every notebook in ``solutions/`` and ``course/`` with ``GPULAB_DEVICE=gpu``
   (nbval), when the repository's notebooks are present.

Without a GPU it prints this plan and exits with status 2, saying why: nothing here can be
measured in the simulator. Budget: about 8 minutes on an H100 or H200.
"""

from __future__ import annotations

import argparse
import datetime
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from gpulab import device, documents, recorded_runs, timing
from gpulab.bench import report as bench_report

ROOT = Path(__file__).resolve().parent.parent
STEPS = ("kernels", "bench", "series", "record", "notebooks")
PLAN = __doc__.split("Steps (each timed;")[1].split("Without a GPU")[0]
NO_GPU_MESSAGE = (
    "gpulab gpu-check needs an NVIDIA GPU in this process (tier 'gpu'); this one is in tier "
    "'{tier}' ({reason}). Nothing was run: simulator time is not GPU time. Run it on a machine "
    "with an NVIDIA GPU (make gpu-check), or see `gpulab doctor`.")


def plan_text() -> str:
    return "gpulab gpu-check — what it does on a GPU:\n\nSteps (each timed;" + PLAN.rstrip()


# --- 1. kernels at GPU sizes --------------------------------------------------------------------


SIZES = {  # the problem sizes each step uses, by mode
    "full": {"vector": 2**26, "matmul": 4096, "dot": 2**24, "narrow": 2**16,
             "dense": (4096, 1024), "optimiser": 2**22},
    "quick": {"vector": 2**20, "matmul": 512, "dot": 2**16, "narrow": 2**12,
              "dense": (512, 256), "optimiser": 2**16},
}


def check_kernels(sizes: dict) -> dict[str, str]:
    """Every kernel family on the GPU at ``sizes``, each against the NumPy reference.
    Returns {what: verdict}; a verdict starts with "ok" or "WRONG"."""
    from gpulab import reference
    from gpulab.bench import cases
    from gpulab.kernels import dense, dot, narrow_formats, optim, softmax

    rng = np.random.default_rng(0)
    verdicts: dict[str, str] = {}
    n, m = sizes["vector"], sizes["matmul"]
    for kernel in cases.MEMORY_KERNELS:
        verdicts[f"{kernel} n={n}"] = cases.run_and_check(cases.memory_case(kernel, n))[1]
    for kernel in cases.MATMUL_KERNELS:
        verdicts[f"{kernel} n={m}"] = cases.run_and_check(cases.matmul_case(kernel, m))[1]
    x = rng.random(sizes["dot"], dtype=np.float32)
    y = rng.random(x.size, dtype=np.float32)
    for method in dot.METHODS:
        error = abs(float(dot.dot(x, y, method=method)) - reference.dot_exact(x, y))
        bound = reference.dot_tolerance(x, y)
        verdicts[f"dot {method} n={x.size}"] = _verdict(error <= bound, error, bound)
    config = dot.launch_config(sizes["narrow"], "grid_stride")
    roundings = reference.grid_stride_roundings(sizes["narrow"], config.blocks,
                                                config.threads_per_block)
    xs = (rng.random(sizes["narrow"]) - 0.5).astype(np.float16)
    ys = (rng.random(sizes["narrow"]) - 0.5).astype(np.float16)
    narrow = [("fp16", xs, ys, narrow_formats.dot_fp16, ("fp16", "fp32"))]
    if narrow_formats.bf16_runs_here():
        import ml_dtypes

        narrow.append(("bf16", xs.astype(ml_dtypes.bfloat16), ys.astype(ml_dtypes.bfloat16),
                       narrow_formats.dot_bf16, ("bf16", "fp32")))
    for storage, a, b, function, accumulators in narrow:
        for accumulate in accumulators:
            result = function(a, b, accumulate)
            error = abs(float(result) - reference.dot_exact(a, b))
            bound = reference.rounding_bound(a, b, accumulate, roundings)
            verdicts[f"dot_{storage} acc {accumulate} ({result.ran})"] = _verdict(
                error <= bound and result.ran == "gpu", error, bound)
    fp8 = narrow_formats.dot_fp8(x[:sizes["narrow"]] - 0.5, y[:sizes["narrow"]] - 0.5)
    exact = reference.dot_exact(x[:sizes["narrow"]] - 0.5, y[:sizes["narrow"]] - 0.5)
    scale = float(np.sum(np.abs((x[:sizes["narrow"]] - 0.5) * (y[:sizes["narrow"]] - 0.5))))
    error = abs(float(fp8) - exact)
    verdicts[f"dot_fp8 ({fp8.ran})"] = _verdict(error <= 0.15 * scale, error, 0.15 * scale)
    rows, columns = sizes["dense"]
    Z = rng.standard_normal((rows, columns)).astype(np.float32)
    bias = rng.standard_normal(columns).astype(np.float32)
    for activation in ("relu", "gelu", "tanh", "sigmoid"):
        got = np.asarray(dense.run_bias_activation(Z, bias, activation))
        error = float(np.max(np.abs(got - reference.bias_activation(Z, bias, activation))))
        verdicts[f"bias_activation {activation}"] = _verdict(error <= 1e-5, error, 1e-5)
    logits = (rng.standard_normal((rows, 10)) * 30).astype(np.float32)
    labels = rng.integers(0, 10, rows)
    probs, _ = softmax.run_softmax_cross_entropy(logits, labels)
    error = float(np.max(np.abs(np.asarray(probs) - reference.softmax(logits))))
    verdicts["softmax_cross_entropy"] = _verdict(error <= 1e-5, error, 1e-5)
    verdicts["adam_update"] = _adam_verdict(optim, reference, rng, sizes["optimiser"])
    return verdicts


def _adam_verdict(optim, reference, rng, n: int) -> str:
    from numba import cuda

    param = rng.standard_normal(n).astype(np.float32)
    grad = rng.standard_normal(n).astype(np.float32)
    state = [param.copy(), grad, np.zeros_like(param), np.zeros_like(param)]
    on_device = [cuda.to_device(a) for a in state]
    optim.run_adam_update(*on_device, step=1, lr=1e-3)
    expected_param, _, _ = reference.adam_update(*state, step=1, lr=1e-3)
    error = float(np.max(np.abs(on_device[0].copy_to_host() - expected_param)))
    return _verdict(error <= 1e-6, error, 1e-6)


def _verdict(ok: bool, error: float, bound: float) -> str:
    return f"{'ok' if ok else 'WRONG'}: |error| {error:.2g} (bound {bound:.2g})"


# --- 3. the chapters' GPU series ---------------------------------------------------------------


# What chapter_series records, by name; gpulab.recorded_runs and the chapters read them.
SERIES = ("crossover", "bandwidth saxpy", "bandwidth copy_coalesced", "bandwidth copy_strided",
          "strides", "matmul tiles", "fusion", "training epoch", "host copies",
          "launch overhead", "inference latency", "narrow matmuls")


def chapter_series(quick: bool = False) -> dict[str, object]:
    """The GPU series the chapters show next to their estimates, as plain data (the
    experiments choose the ``gpu`` tier's sizes; ``quick`` makes them small). Each series is
    measured on its own: one that fails is recorded as ``{"error": "..."}`` (and read as
    missing by :mod:`gpulab.recorded_runs`), and the others are still measured."""
    from gpulab.bench import training
    from gpulab.experiments import inference, mixed_precision
    from gpulab.experiments.bandwidth import BandwidthExperiment, stride_sweep
    from gpulab.experiments.crossover import CrossoverExperiment
    from gpulab.experiments.fusion import FusionExperiment
    from gpulab.experiments.matmul import MatmulExperiment

    def crossover():
        return CrossoverExperiment(sizes=[10**k for k in range(1, 7 if quick else 9)]).run()[
            "series"]

    def bandwidth(kernel):
        result = BandwidthExperiment(kernel, n=2**20 if quick else None).run()
        return {k: m.to_dict() for k, m in result["measured"].items()}

    def matmul_tiles():
        matmul = MatmulExperiment(n=512 if quick else None).run()
        return {k["label"]: k["measured"].to_dict() for k in matmul["kernels"]
                if "measured" in k}

    def fusion():
        result = FusionExperiment(batch_size=1024 if quick else 4096).run()
        return {"shape": list(result["shape"]), "activation": result["activation"],
                "dtype": result["dtype"], "rows": result["rows"]}

    def training_epochs():
        return {batch: training.training_throughput("kernels", batch_size=batch,
                                                    epochs=2).to_dict()
                for batch in ((32,) if quick else (8, 32, 128, 512))}

    def inference_latency():
        model, _, data = inference.trained_digits(epochs=2)  # latency ignores accuracy
        return inference.gpu_latency(model, data)

    steps = {
        "crossover": crossover,
        **{f"bandwidth {k}": (lambda k=k: bandwidth(k))
           for k in ("saxpy", "copy_coalesced", "copy_strided")},
        "strides": lambda: stride_sweep(n=2**20 if quick else None)["series"],
        "matmul tiles": matmul_tiles,
        "fusion": fusion,
        "training epoch": training_epochs,
        "host copies": lambda: host_copy_rates(2**22 if quick else 2**28),
        "launch overhead": lambda: launch_overhead().to_dict(),
        "inference latency": inference_latency,
        "narrow matmuls": lambda: [m.to_dict() for m in mixed_precision.measure_matmul_kernels(
            n=512 if quick else 2048)],
    }
    return measure_each(steps)


def measure_each(steps: dict) -> dict[str, object]:
    """{name: measure()} for every step; a step that raises becomes ``{"error": "..."}`` and
    the next one still runs (a broken series must not lose the others)."""
    series: dict[str, object] = {}
    for name, measure in steps.items():
        try:
            series[name] = measure()
        except Exception as error:
            series[name] = {"error": f"{type(error).__name__}: {error}"}
    return series


def failed_series(record: dict) -> list[str]:
    """The series a run recorded only an error for."""
    return [name for name, value in record.get("series", {}).items()
            if isinstance(value, dict) and set(value) == {"error"}]


def host_copy_rates(n_bytes: int) -> dict[str, dict]:
    """Bytes per second of copies between the host and the device, from and to pageable
    (ordinary NumPy) and pinned (``cuda.pinned_array``) memory. Keys "pageable" and "pinned"
    are host→device (what the chapters' model charges); "... device→host" the way back."""
    from numba import cuda

    count = n_bytes // 4
    d_buffer = cuda.device_array(count, np.float32)
    pageable = np.ones(count, np.float32)
    pinned = cuda.pinned_array(count, np.float32)
    pinned[:] = 1
    rates = {}
    for what, host in (("pageable", pageable), ("pinned", pinned)):
        for key, copy in ((what, lambda host=host: d_buffer.copy_to_device(host)),
                          (f"{what} device→host", lambda host=host: d_buffer.copy_to_host(host))):
            m = timing.time_gpu(copy, repeats=5, name=f"{key} copy", bytes_moved=n_bytes)
            rates[key] = {**m.to_dict(), "bytes_per_s": n_bytes / m.median_s}
    return rates


def launch_overhead() -> timing.Measurement:
    """Time per launch of an empty kernel, Numba's dispatch included, launches back to back."""
    from numba import cuda

    @cuda.jit
    def empty(x):
        pass

    d_x = cuda.device_array(1, np.float32)
    return timing.time_gpu_looped(lambda: empty[1, 32](d_x), 10, "empty kernel launch")


# --- 5. notebooks ------------------------------------------------------------------------------


def run_notebooks() -> str:
    folders = [str(ROOT / f) for f in ("solutions", "course") if (ROOT / f).is_dir()]
    if not folders:
        return "skipped: no notebooks next to this installation"
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
         "--nbval-cell-timeout=600", *folders],
        cwd=ROOT, env={**__import__("os").environ, "GPULAB_DEVICE": "gpu"},
        capture_output=True, text=True, check=False)
    last = (completed.stdout.strip().splitlines() or ["no output"])[-1]
    return ("ok: " if completed.returncode == 0 else "FAILED: ") + last


# --- the command ---------------------------------------------------------------------------------


def record_path(device_name: str, date: str, directory=bench_report.DATA_DIR) -> Path:
    return Path(directory) / documents.dated_name(recorded_runs.RUN_KIND, device_name, date)


def run(steps=STEPS, quick: bool = False, directory=bench_report.DATA_DIR) -> dict:
    """Run ``steps`` and return the record (written to ``directory`` by the record step)."""
    info = device.info()
    record: dict = {**documents.header(recorded_runs.FILE_FORMAT,
                                       recorded_runs.FILE_FORMAT_VERSION),
                    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
                        timespec="seconds"),
                    "device": info.device_name, "driver": info.driver_version,
                    "toolkit": info.cuda_toolkit_version,
                    "compute_capability": list(device.PROBE.compute_capability or ()),
                    "gpulab": device.package_version("gpulab"), "quick": quick, "steps": {}}
    for step in steps:
        started = time.perf_counter()
        try:
            if step == "kernels":
                record["kernels"] = check_kernels(SIZES["quick" if quick else "full"])
            elif step == "bench":
                from gpulab import bench

                report = bench.run_suite(memory_sizes=[2**20] if quick else None,
                                         matmul_sizes=[512] if quick else None)
                record["bench"] = report.to_dict()
                bench.save_report(bench.record_path(report, directory), report)
            elif step == "series":
                record["series"] = chapter_series(quick)
            elif step == "record":
                path = documents.write(record_path(info.device_name, record["date"], directory),
                                       record, default=str)
                record["path"] = str(path)
            elif step == "notebooks":
                record["notebooks"] = run_notebooks()
            status = "ok"
        except Exception as error:  # report and go on: one broken step must not hide the rest
            status = f"FAILED: {type(error).__name__}: {error}"
        record["steps"][step] = {"status": status, "seconds": time.perf_counter() - started}
    return record


def summary(record: dict) -> str:
    lines = [f"gpulab gpu-check on {record['device']} (driver {record['driver']}, toolkit "
             f"{record['toolkit']}), {record['date']}"]
    for step, outcome in record["steps"].items():
        lines.append(f"  {step:10s} {outcome['seconds']:7.1f} s  {outcome['status']}")
    failed = failed_series(record)
    if failed:
        lines.append(f"  series FAILED: {', '.join(failed)}")
    wrong = [k for k, v in record.get("kernels", {}).items() if not v.startswith("ok")]
    lines.append(f"  kernels against NumPy: {len(record.get('kernels', {})) - len(wrong)} ok"
                 + (f", WRONG: {', '.join(wrong)}" if wrong else ""))
    if "path" in record:
        lines.append(f"  recorded in {record['path']}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="gpulab gpu-check", description=__doc__.split("\n")[0])
    parser.add_argument("--plan", action="store_true", help="print the plan and exit")
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    parser.add_argument("--steps", default=",".join(STEPS),
                        help=f"comma-separated subset of {', '.join(STEPS)}")
    args = parser.parse_args(argv)
    if args.plan:
        print(plan_text())
        return 0
    steps = [s.strip() for s in args.steps.split(",") if s.strip()]
    unknown = [s for s in steps if s not in STEPS]
    if unknown:
        print(f"unknown step(s) {', '.join(unknown)}; choose from {', '.join(STEPS)}",
              file=sys.stderr)
        return 2
    if device.tier() != "gpu":
        print(plan_text())
        print("\n" + NO_GPU_MESSAGE.format(tier=device.tier(), reason=device.REASON),
              file=sys.stderr)
        return 2
    record = run(steps, args.quick)
    print(summary(record))
    failed = [s for s, o in record["steps"].items() if not o["status"].startswith("ok")]
    wrong = [k for k, v in record.get("kernels", {}).items() if not v.startswith("ok")]
    return 1 if failed or wrong or failed_series(record) else 0


if __name__ == "__main__":
    raise SystemExit(main())
