"""The run behind ``gpulab bench``: every kernel of chapters 02-03 (and the digits training
epoch), checked, then timed, then compared with its ceilings (the datasheet's and one measured
in the same run) and with a baseline from the same run.

What a row means depends on the tier, and every row says which (its ``origin``):

- ``cpu``   — measured on this machine's CPU with :func:`gpulab.timing.time_cpu` (NumPy, which
  calls BLAS for matmul): the baseline.
- ``gpu``   — measured on the local GPU with CUDA events
  (:func:`gpulab.timing.time_gpu_looped`): short kernels are launched several times back to
  back between the events and the time divided, so Python's launch latency is not GPU time.
- ``model`` — estimated for a named GPU by gpulab's GPU model (:func:`gpulab.timing.estimate`;
  its label gives the model's promised band for that kind of work): the larger of FLOPs / peak
  and bytes / bandwidth, plus launch overhead (plus the host link for rows "incl. transfers").
  In the ``sim`` tier these are the only GPU figures: simulator time is not GPU time, so the
  simulator only *checks* each kernel's answer at a tiny size.

Ceilings, for measured rows only: a memory-bound kernel's rate against the GPU's datasheet
bandwidth and the device-to-device copy measured in the same run; a matmul's against the
datasheet's fp32 peak and, where CuPy is installed, cuBLAS measured in the same run.

    report = run_suite()                  # the default sizes of this tier
    print(report.table())
"""

from __future__ import annotations

import datetime
import sys
import time

import numpy as np

from gpulab import device, hardware, timing
from gpulab.bench.cases import (
    DEFAULT_STRIDE,
    DEFAULT_TILE,
    DTYPE,
    KERNELS,
    MATMUL_KERNELS,
    Case,
    check_case,
    default_sizes,
    matmul_case,
    memory_case,
    run_and_check,
)
from gpulab.bench.report import BenchReport, Row
from gpulab.hardware import format_rate, format_seconds

DEFAULT_GPU = hardware.COURSE_GPU


# --- progress ---------------------------------------------------------------------------------


class Progress:
    """A plain text progress bar on stderr: ``[#####.....] 5/10 matmul_tiled n=1024``."""

    def __init__(self, total: int, enabled: bool = True, stream=None, width: int = 24):
        self.total, self.done, self.enabled, self.width = max(total, 1), 0, enabled, width
        self.stream = stream or sys.stderr
        self.started = time.perf_counter()

    def step(self, what: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        filled = round(self.width * self.done / self.total)
        elapsed = time.perf_counter() - self.started
        text = (f"[{'#' * filled}{'.' * (self.width - filled)}] {self.done}/{self.total} "
                f"{what} ({elapsed:.0f} s)")
        tty = getattr(self.stream, "isatty", lambda: False)()
        self.stream.write(("\r" + text.ljust(90)) if tty else text + "\n")
        if tty and self.done >= self.total:
            self.stream.write("\n")
        self.stream.flush()


# --- the run ----------------------------------------------------------------------------------


def _cpu_row(case: Case, inputs, repeats: int) -> Row:
    measured = timing.time_cpu(case.cpu_baseline(*inputs), repeats=repeats, warmup=1,
                               name=case.baseline_name, n=case.n, flops=case.flops,
                               bytes_moved=case.bytes_moved)
    return Row(measured, case.group, case.size, "baseline")


def _model_rows(case: Case, gpu: hardware.GPUSpec) -> list[Row]:
    """gpulab's GPU model for ``gpu``: estimates, so no "% of peak" (an estimate divided by the
    peak it came from says nothing)."""
    kernel = timing.estimate(case.kernel, gpu, case.flops, case.model_bytes, case.precision,
                             n=case.n, useful_bytes=case.bytes_moved if case.group == "memory"
                             else case.model_bytes)
    with_copy = timing.estimate(f"{case.kernel} incl. transfers", gpu, case.flops,
                                case.model_bytes, case.precision,
                                transfer_bytes=case.transfer_bytes, n=case.n,
                                useful_bytes=case.bytes_moved)
    bound = kernel.meta["bound"]
    return [
        Row(kernel, case.group, case.size, "kernel",
            note=f"{bound}-bound" + (f"; {case.note}" if case.note else "")),
        Row(with_copy, case.group, case.size, "with transfers",
            note=f"+ {format_seconds(with_copy.meta['transfer_s'])} to move inputs in and the "
                 f"result out over {gpu.host_link}"),
    ]


def _add_spec_percent(row: Row, gpu: hardware.GPUSpec | None) -> None:
    """Measured rows only: achieved rate as a percentage of the datasheet's."""
    if gpu is None or not row.measurement.measured:
        return
    if row.group == "matmul" and row.flops_per_s:
        peak = gpu.peak_flops_for("fp32")
        row.percent_of_spec = 100 * row.flops_per_s / peak
        row.spec = f"{format_rate(peak, 'FLOP/s')} fp32 peak"
    elif row.bytes_per_s:
        peak = gpu.memory_bandwidth_bytes_per_s
        row.percent_of_spec = 100 * row.bytes_per_s / peak
        row.spec = f"{format_rate(peak, 'B/s')} datasheet"


def _gpu_rows(case: Case, inputs, repeats: int, spec, copy_bytes_per_s) -> tuple[list[Row], str]:
    """Measure one case on the local GPU: the kernel alone (data already on the GPU), the
    transfers alone, and the kernel with the transfers. Also checks the answer."""
    from numba import cuda

    _, check = run_and_check(case, inputs)
    d_inputs = [cuda.to_device(a) for a in inputs]
    launch = case.launcher(*d_inputs)
    kernel = timing.time_gpu_looped(launch, repeats, case.kernel, n=case.n, flops=case.flops,
                                    bytes_moved=case.bytes_moved)
    row = Row(kernel, case.group, case.size, "kernel", check=check, note=case.note)
    _add_spec_percent(row, spec)
    if case.group == "memory" and copy_bytes_per_s:
        row.percent_of_measured = 100 * row.bytes_per_s / copy_bytes_per_s
        row.measured_ceiling = f"device copy {format_rate(copy_bytes_per_s, 'B/s')}"
    host_inputs, d_output = inputs[:-1], d_inputs[-1]
    out_host = np.empty_like(inputs[-1])

    def h2d():
        for host, dev in zip(host_inputs, d_inputs, strict=False):
            dev.copy_to_device(host)

    def d2h():
        d_output.copy_to_host(out_host)

    def everything():
        h2d()
        launch()
        d2h()

    in_bytes = sum(a.nbytes for a in host_inputs)
    rows = [row]
    for what, fn, nbytes in (("host→device inputs", h2d, in_bytes),
                             ("device→host result", d2h, out_host.nbytes)):
        m = timing.time_gpu(fn, repeats=max(3, repeats // 2), warmup=1,
                            name=f"{case.kernel}: {what}", n=case.n, bytes_moved=nbytes)
        transfer = Row(m, case.group, case.size, "transfer")
        if spec is not None:
            link = spec.host_link_bytes_per_s
            transfer.percent_of_spec = 100 * transfer.bytes_per_s / link
            transfer.spec = f"{format_rate(link, 'B/s')} {spec.host_link} one way"
        rows.append(transfer)
    total = timing.time_gpu(everything, repeats=max(3, repeats // 2), warmup=1,
                            name=f"{case.kernel} incl. transfers", n=case.n, flops=case.flops,
                            bytes_moved=case.bytes_moved)
    rows.append(Row(total, case.group, case.size, "with transfers",
                    note="pageable host memory, as cuda.to_device uses"))
    return rows, check


def _cublas_row(case: Case, inputs, repeats: int, spec) -> Row | None:
    cupy = timing.cupy_module()
    if cupy is None:
        return None
    A, B = (cupy.asarray(a) for a in inputs[:2])
    C = cupy.empty_like(A)
    m = timing.time_gpu_looped(lambda: cupy.matmul(A, B, out=C), repeats, "cuBLAS sgemm (CuPy)",
                               n=case.n, flops=case.flops, bytes_moved=case.bytes_moved)
    row = Row(m, case.group, case.size, "baseline")
    _add_spec_percent(row, spec)
    return row


def run_suite(kernels=KERNELS, memory_sizes=None, matmul_sizes=None, gpu: str | None = None,
              stride: int = DEFAULT_STRIDE, tile: int = DEFAULT_TILE, repeats: int | None = None,
              cpu_repeats: int = 5, progress: bool = False, seed: int = 0) -> BenchReport:
    """Run the suite and return a :class:`BenchReport` (``report.table()`` to print it).

    ``gpu``: the GPU model (a key of :data:`gpulab.hardware.GPUS`) for estimates; defaults to
    H100-SXM in the ``sim`` tier, and to the local GPU's entry (matched by name) on a GPU.
    """
    from gpulab.kernels import memory
    from gpulab.kernels.matmul import check_tile

    started = time.perf_counter()
    unknown = [k for k in kernels if k not in KERNELS]
    if unknown:
        raise ValueError(f"unknown kernel(s) {', '.join(unknown)}; "
                         f"choose from {', '.join(KERNELS)}")
    stride, tile = memory.check_stride(stride), check_tile(tile)
    tier = device.tier()
    sizes = default_sizes(tier)
    memory_sizes = tuple(memory_sizes or sizes["memory"])
    matmul_sizes = tuple(matmul_sizes or sizes["matmul"])
    on_gpu = tier == "gpu"
    repeats = repeats or (10 if on_gpu else 5)
    spec = timing.local_gpu_spec(gpu) if on_gpu else hardware.get_gpu(gpu or DEFAULT_GPU)
    cases = [memory_case(k, n, stride) for n in memory_sizes for k in kernels
             if k not in MATMUL_KERNELS]
    cases += [matmul_case(k, n, tile) for n in matmul_sizes for k in kernels
              if k in MATMUL_KERNELS]
    bar = Progress(len(cases) + 1 + on_gpu, enabled=progress)
    notes = []
    copy_bytes_per_s = None
    checks: dict[str, str] = {}
    if on_gpu:
        largest = max(memory_sizes) * np.dtype(DTYPE).itemsize
        copy_bytes_per_s = timing.measure_copy_bandwidth(largest)
        bar.step("device-to-device copy")
        if timing.cupy_module() is None and any(k in MATMUL_KERNELS for k in kernels):
            notes.append("CuPy is not installed, so there is no cuBLAS baseline: "
                         "pip install cupy-cuda12x (or -cuda13x)")
    else:
        checks = {k: run_and_check(check_case(k, stride, tile), seed=seed)[1] for k in kernels}
        bar.step("simulator checks")
    rng = np.random.default_rng(seed)
    rows: list[Row] = []
    cublas: dict[str, Row] = {}
    for case in cases:
        inputs = case.make_inputs(rng)
        if not any(r.kernel == case.baseline_name and r.size == case.size for r in rows):
            rows.append(_cpu_row(case, inputs, cpu_repeats))  # the baseline heads its size
        if on_gpu:
            kernel_rows, check = _gpu_rows(case, inputs, repeats, spec, copy_bytes_per_s)
            checks.setdefault(case.key, check)
            if case.group == "matmul" and case.size not in cublas:
                row = _cublas_row(case, inputs, repeats, spec)
                if row is not None:
                    cublas[case.size] = row
            if case.group == "matmul" and case.size in cublas:
                reference_s = cublas[case.size].median_s
                kernel_rows[0].percent_of_measured = 100 * reference_s / kernel_rows[0].median_s
                kernel_rows[0].measured_ceiling = "cuBLAS"
            rows += kernel_rows
            if spec is not None:
                rows += _model_rows(case, spec)[:1]
        else:
            model_rows = _model_rows(case, spec)
            model_rows[0].check = checks.get(case.key)
            rows += model_rows
        if case.size in cublas and not any(r is cublas[case.size] for r in rows):
            rows.append(cublas[case.size])
        bar.step(f"{case.kernel} {case.size}")
    if tuple(kernels) == KERNELS:  # the whole suite: also chapter 07-08's training epoch
        from gpulab.bench.training import training_rows

        rows += training_rows(spec, repeats=3)
    if not on_gpu:
        notes.append("simulator time is not GPU time: the kernels ran in the simulator only to "
                     "check their answers; the GPU columns are a model, not a measurement")
    elif spec is not None:
        notes.append(f"datasheet figures are those of the {spec.name} in gpulab.hardware"
                     + (" (chosen with --gpu)" if gpu else
                        f", matched from the device name {device.PROBE.device_name!r}"))
    else:
        notes.append(f"{device.PROBE.device_name!r} is not in gpulab.hardware's table: no "
                     "datasheet percentages (pass --gpu to choose a spec)")
    return BenchReport(
        rows=rows, tier=tier,
        device=(device.PROBE.device_name or "GPU") if on_gpu else timing.cpu_device(),
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        gpulab_version=device.package_version("gpulab") or "unknown",
        gpu_model=spec.key if spec else None,
        copy_bytes_per_s=copy_bytes_per_s, checks=checks, cpu=timing.cpu_device(), notes=notes,
        elapsed_s=time.perf_counter() - started,
    )
