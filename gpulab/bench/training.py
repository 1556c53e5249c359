"""Samples per second of a training epoch on the digits, per backend: what ``gpulab bench``
reports for chapters 07-08.

- ``numpy``: measured on this CPU (NumPy, which calls BLAS): the baseline.
- ``kernels`` in the ``gpu`` tier: measured on the GPU, wall clock around each epoch (Python's
  kernel launches and the per-batch copies included, as a training loop pays them).
- ``kernels`` in the ``sim`` tier: not timed (simulator time is not GPU time);
  :func:`training_estimate` gives gpulab's GPU model's estimate for a named GPU instead.

Each epoch is one repeat of the :class:`~gpulab.timing.Measurement`; one warm-up epoch runs
first (JIT compilation, allocations). ``flops`` is the epoch's FLOP count from
:mod:`gpulab.nn.cost`, so the measurement also reports GFLOP/s.
"""

from __future__ import annotations

from gpulab import device, hardware, timing
from gpulab.bench.report import Row
from gpulab.nn import cost
from gpulab.nn.data import Dataset, load_digits
from gpulab.nn.recipes import DIGITS, digits_model
from gpulab.nn.trainer import Trainer


def _epoch_flops(widths, batch_size: int, n_samples: int) -> float:
    full, rest = divmod(n_samples, batch_size)
    total = full * cost.step_flops(widths, batch_size)
    return total + (cost.step_flops(widths, rest) if rest else 0.0)


def training_throughput(backend: str = "numpy", batch_size: int = DIGITS["batch_size"],
                        epochs: int = 3, data: Dataset | None = None,
                        seed: int = 0) -> timing.Measurement:
    """Time ``epochs`` training epochs of the digits recipe on ``backend`` (after one warm-up
    epoch); one time per epoch. ``meta["samples_per_s"]`` is the median's throughput."""
    if backend == "kernels" and device.tier() != "gpu":
        raise timing.SimulatorTimingError(timing.SIMULATOR_TIMING_MESSAGE)
    data = data or load_digits(seed=0)
    model = digits_model(backend, seed=seed)
    trainer = Trainer(model, DIGITS["optimiser"], batch_size=batch_size, epochs=1, seed=seed,
                      progress=False, lr=DIGITS["lr"])
    trainer.fit((data.X_train, data.y_train), epochs=1)  # warm-up: compilation, allocations
    times = [trainer.fit((data.X_train, data.y_train), epochs=1).final.seconds
             for _ in range(epochs)]
    origin = "cpu" if backend == "numpy" else "gpu"
    name = f"digits training epoch, batch {batch_size}, {backend} backend"
    measurement = timing.Measurement(
        name=name, times_s=times, origin=origin, device=model.backend.where(),
        n=data.n_train, flops=_epoch_flops(list(model.widths), batch_size, data.n_train),
        meta={"backend": model.backend.describe(), "batch_size": batch_size,
              "model": repr(model), "timer": "time.perf_counter around each epoch"})
    measurement.meta["samples_per_s"] = data.n_train / measurement.median_s
    return measurement


def training_estimate(gpu: str = hardware.COURSE_GPU, batch_size: int = DIGITS["batch_size"],
                      n_samples: int | None = None) -> timing.Measurement:
    """gpulab's GPU model of one digits epoch on ``gpu`` (see :mod:`gpulab.nn.cost`), an
    estimate, as a ``model`` measurement; ``meta["samples_per_s"]`` too."""
    n_samples = n_samples or load_digits(seed=0).n_train
    seconds = cost.estimate_epoch_s(DIGITS["widths"], batch_size, n_samples, gpu)
    spec = hardware.get_gpu(gpu)
    return timing.Measurement(
        name=f"digits training epoch, batch {batch_size}, kernels backend", times_s=[seconds],
        origin="model", device=spec.name, n=n_samples,
        flops=_epoch_flops(list(DIGITS["widths"]), batch_size, n_samples),
        meta={"model": "gpulab.nn.cost", "samples_per_s": n_samples / seconds})


def samples_per_s(measurement: timing.Measurement) -> float:
    """Throughput at the measurement's median epoch time."""
    return measurement.n / measurement.median_s


def training_rows(spec: hardware.GPUSpec | None = None, repeats: int = 3,
               batch_size: int = DIGITS["batch_size"], seed: int = 0) -> list:
    """The training epoch's rows for ``gpulab bench`` (:mod:`gpulab.bench`): the NumPy
    baseline measured on this CPU; in the ``gpu`` tier, the kernel backend's epoch measured with
    CUDA events around it; and, for ``spec``, the GPU model's estimate. In the ``sim`` tier one
    real training step of the kernels is checked against NumPy and reported on the estimate's
    row. Rows are in group ``"training"``; their notes give samples/s."""
    data = load_digits(seed=0)
    size = f"digits {data.n_train} samples, batch {batch_size}"
    flops = _epoch_flops(list(DIGITS["widths"]), batch_size, data.n_train)
    cpu = training_throughput("numpy", batch_size, repeats, data, seed)
    cpu.name, cpu.flops = "digits training epoch, NumPy (BLAS)", flops
    rows = [Row(cpu, "training", size, "baseline", note=f"{samples_per_s(cpu):,.0f} samples/s")]
    if device.tier() == "gpu":
        model = digits_model("kernels", seed=seed)
        trainer = Trainer(model, DIGITS["optimiser"], batch_size=batch_size, seed=seed,
                          progress=False, lr=DIGITS["lr"])
        train = (data.X_train, data.y_train)
        measured = timing.time_gpu(lambda: trainer.fit(train, epochs=1), repeats=repeats,
                                   warmup=1, name="digits training epoch, gpulab kernels",
                                   n=data.n_train, flops=flops)
        rows.append(Row(measured, "training", size, "kernel",
                        note=f"{data.n_train / measured.median_s:,.0f} samples/s; Python "
                             "launches and batch copies included"))
        check = None
    else:
        from gpulab.nn.trainer import check_kernel_step

        step = check_kernel_step(data.X_train[:8], data.y_train[:8], [64, 16, 10])
        check = (("ok vs NumPy" if step["ok"] else "WRONG vs NumPy")
                 + f": one training step in the simulator (batch 8, widths 64-16-10, weights "
                   f"within {step['max_parameter_difference']:.1e})")
    if spec is not None:
        estimate = training_estimate(spec.key, batch_size, data.n_train)
        estimate.name = "digits training epoch, gpulab kernels"
        step_estimate = cost.estimate_step(DIGITS["widths"], batch_size, spec)
        rows.append(Row(estimate, "training", size, "kernel", check=check,
                        note=f"{estimate.meta['samples_per_s']:,.0f} samples/s; "
                             f"{step_estimate.launches} launches per step, "
                             f"{step_estimate.bound()}-bound (model: gpulab.nn.cost)"))
    return rows


__all__ = ["samples_per_s", "training_estimate", "training_rows", "training_throughput"]
