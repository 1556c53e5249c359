"""Test setup: gpulab is imported first so that it chooses the tier before numba loads.

``stand_in_gpu`` is the one fake GPU every test of a GPU branch uses: the tier says ``gpu``, the
probe names a GPU, and CUDA-event timing (:func:`gpulab.timing.time_gpu`) is replaced by a
``time.perf_counter`` stand-in, while the kernels themselves run for real in the simulator. It
runs every line of a GPU branch (device arrays, launches, copies, checks, labels) in CI; its
times mean nothing and no test asserts a speed with it.

The longest test files run first: ``make test`` hands whole files to its workers
(``--dist loadfile``) in the order they are collected (``--no-loadscope-reorder``: otherwise
xdist re-sorts the files by their number of tests), and a long file started last would keep
one worker busy after the others have finished.
"""

import importlib.util
import os
import shutil
import signal
import sys
import time
from pathlib import Path

os.environ.setdefault("MPLBACKEND", "Agg")
# A shell runs a background job (`make test &`, nohup) with SIGINT ignored, and its processes
# and theirs inherit that: Python then installs no KeyboardInterrupt handler, and the tests of
# what an interrupt does (tests/parallel/test_job_cleanup.py, the simulator's) fail. This
# process and the ones it starts take SIGINT as Python's default again.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

import pytest  # noqa: E402

import gpulab  # noqa: E402,F401  (must precede numba)
from gpulab import device, timing  # noqa: E402

# The longest test files, in seconds of their tests (`pytest --durations=0`, 3 workers on 2 busy
# cores, 2026-12-06 at 21:45 UTC, the simulator's threads as greenlets): started longest first,
# so that the run does not end with one worker on a long file while the others wait. The
# requirements resolved from PyPI are started with the session (:func:`pytest_sessionstart`)
# and their file runs among the last, by when they are written.
FILE_SECONDS = {
    "test_nbgrader.py": 475, "test_binder.py": 452, "browser/test_voila.py": 397,
    "exercises/test_ch12.py": 84, "exercises/test_ch08.py": 71,
    "exercises/test_nbgrader_cells.py": 61, "test_ptx.py": 60, "exercises/test_ch04.py": 58,
    "platforms/test_macos_like_env.py": 56, "exercises/test_ch07.py": 50,
    "exercises/test_ch03.py": 46, "exercises/test_ch06.py": 31, "browser/test_jupyterlab.py": 28,
    "test_kernel_resources.py": 25, "exercises/test_ch10.py": 25, "exercises/test_ch01.py": 22,
    "exercises/test_ch05.py": 20, "exercises/test_ch02.py": 18, "test_recorded_chapters.py": 15,
    "platforms/test_dependency_resolution.py": 0.5,  # late: only the files of 0 s come after
}
UNLISTED_SLOW_S, UNLISTED_NOTEBOOK_S = 60, 20  # a file not listed yet, by its markers
TESTS = Path(__file__).resolve().parent
DEPENDENCY_RESOLUTION = TESTS / "platforms" / "test_dependency_resolution.py"
_PREFETCHED = pytest.StashKey[Path]()  # the resolutions' file, where this process started them


def _selects_dependency_resolution(config) -> bool:
    """Whether this session runs tests/platforms/test_dependency_resolution.py: it is named, or
    a folder above it, with no -k or -m that could leave it out, and tests will run."""
    if config.option.keyword or config.option.markexpr or config.option.collectonly:
        return False
    paths = [Path(config.invocation_params.dir, arg.split("::")[0]).resolve()
             for arg in config.args]
    return any(path == DEPENDENCY_RESOLUTION or path in DEPENDENCY_RESOLUTION.parents
               for path in paths)


@pytest.hookimpl(tryfirst=True)  # before xdist starts its workers, which inherit the variable
def pytest_sessionstart(session):
    """Start resolving the requirements for every platform (they wait on PyPI for minutes,
    computing little) in a thread of pytest's main process, where the session runs
    tests/platforms/test_dependency_resolution.py; its fixture reads the results."""
    config = session.config
    if hasattr(config, "workerinput") or not _selects_dependency_resolution(config):
        return
    spec = importlib.util.spec_from_file_location("dependency_resolution", DEPENDENCY_RESOLUTION)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    if module.PREFETCHED_VARIABLE not in os.environ:
        config.stash[_PREFETCHED] = module.prefetch()


def pytest_sessionfinish(session):
    """Remove the resolutions' file (and its folder) this process started, once written."""
    path = session.config.stash.get(_PREFETCHED, None)
    if path is not None and path.exists():
        shutil.rmtree(path.parent, ignore_errors=True)


def pytest_collection_modifyitems(items):
    """The files longest first (:data:`FILE_SECONDS`; a file not listed there counts by its
    markers: one holding a slow test as :data:`UNLISTED_SLOW_S`, a notebook run or a notebook
    itself (nbval) as :data:`UNLISTED_NOTEBOOK_S`, else 0); otherwise in the order collected.
    Every worker sorts the same collection the same way."""
    seconds: dict = {}
    for item in items:
        path = item.path.resolve()
        name = path.relative_to(TESTS).as_posix() if path.is_relative_to(TESTS) else path.name
        guess = (FILE_SECONDS[name] if name in FILE_SECONDS
                 else UNLISTED_SLOW_S if item.get_closest_marker("slow")
                 else UNLISTED_NOTEBOOK_S if item.get_closest_marker("notebook")
                 or path.suffix == ".ipynb" else 0)  # nbval's solutions/ on Python 3.10
        seconds[item.path] = max(seconds.get(item.path, 0), guess)
    order = {path: index for index, path in enumerate(dict.fromkeys(i.path for i in items))}
    items.sort(key=lambda item: (-seconds[item.path], order[item.path]))


STAND_IN_GPU_NAME = "NVIDIA H100 80GB HBM3"  # matched to the H100-SXM entry by name
STAND_IN_SMS = 2  # few multiprocessors: launches sized from the SM count stay small


def stand_in_time_gpu(launch, repeats=20, warmup=2, name=None, n=None, flops=None,
                      bytes_moved=None):
    """time_gpu's signature and record: ``launch()`` runs once (in the simulator), timed with
    perf_counter instead of CUDA events; warm-up and repeats are not run (the time means
    nothing, and the simulator is slow)."""
    start = time.perf_counter()
    launch()
    times = [time.perf_counter() - start]
    return timing.Measurement(name=name or "launch", times_s=times, origin="gpu",
                              device=device.PROBE.device_name, n=n, flops=flops,
                              bytes_moved=bytes_moved, meta={"timer": "stand-in"})


@pytest.fixture
def stand_in_gpu(monkeypatch):
    """Pretend to be in the gpu tier with a stand-in timer (see the module docstring). Skipped
    on a real GPU, where the real branch runs instead. CuPy is reported missing, so cuBLAS rows
    are skipped as they are on a GPU without CuPy."""
    if device.tier() == "gpu":
        pytest.skip("a real GPU is here: the real GPU branch is tested instead")
    monkeypatch.setattr(device, "TIER", "gpu")
    monkeypatch.setattr(device, "PROBE", device.DriverProbe(True, 1, "12.8", STAND_IN_GPU_NAME,
                                                            (9, 0), 80 * 10**9, STAND_IN_SMS))
    monkeypatch.setattr(timing, "time_gpu", stand_in_time_gpu)
    monkeypatch.setattr(timing, "cupy_module", lambda: None)
    return STAND_IN_GPU_NAME


FIXTURE_GPU = "NVIDIA H200 (test fixture, not a measurement)"  # matched to the H200 entry


def _fixture_measurement(name, seconds, n=None, flops=None, bytes_moved=None, **meta):
    return timing.Measurement(name=name, times_s=[seconds * f for f in (0.98, 1.0, 1.05)],
                              origin="gpu", device=FIXTURE_GPU, n=n, flops=flops,
                              bytes_moved=bytes_moved, meta=meta).to_dict()


def fixture_gpu_run() -> dict:
    """A ``gpulab-gpu-run`` record shaped as ``gpulab gpu-check`` writes it (every series of
    :data:`gpulab.gpu_check.SERIES`), its GPU times made up: 1.5x the H200 model's estimate
    for memory-bound work, 3x for matmuls and training, 2 µs launches on top of the model's
    4 µs, pageable copies at 6 GB/s and pinned ones at 50 GB/s. For tests of how recorded runs
    load and render, never shown as a measurement."""
    from gpulab import hardware
    from gpulab.experiments.inference import gpu_inference_estimate

    h200 = hardware.get_gpu("H200")
    label = f"measured on {FIXTURE_GPU} (CUDA events)"

    def model(flops, nbytes):
        return hardware.estimate_time(h200, flops, nbytes).time_s

    crossover = {}
    for what, copy_rate in (("data on GPU", None), ("incl. host→device copy of x, y from "
                                                   "pageable memory", 6e9),
                            ("incl. host→device copy of x, y from pinned memory", 50e9)):
        sep = ", " if what == "data on GPU" else " "
        crossover[f"dot_grid_stride{sep}{what} — {label}"] = [
            [n, 1.5 * model(2 * n, 8 * n) + (8 * n / copy_rate if copy_rate else 0.0)]
            for n in (10, 10_000, 10_000_000)]
    n = 2**26
    bandwidth = {
        kernel: {"kernel": _fixture_measurement(kernel, 1.5 * model(flops, nbytes), n, flops,
                                                nbytes),
                 "with_copies": _fixture_measurement(kernel, 1.5 * model(flops, nbytes)
                                                     + nbytes / 6e9, n, flops, nbytes)}
        for kernel, flops, nbytes in (("saxpy", 2 * n, 12 * n), ("copy_coalesced", 0, 8 * n))}
    from gpulab.kernels.matmul import traffic_bytes

    tiles = {f"matmul_{m}": _fixture_measurement(
        f"matmul_{m}", 3 * model(2 * 4096**3, traffic_bytes(4096, 4096, 4096, m, None)), 4096,
        2 * 4096**3, 3 * 4 * 4096**2) for m in ("naive", "register_blocked")}
    from gpulab.nn import cost
    from gpulab.nn.recipes import DIGITS

    epochs = {str(batch): _fixture_measurement(
        f"digits training epoch, batch {batch}, kernels backend",
        3 * cost.estimate_epoch_s(list(DIGITS["widths"]), batch, 1437, "H200"), 1437,
        batch_size=batch) for batch in (8, 32, 128, 512)}
    fusion_rows = []
    for variant, nbytes in (("unfused", 5 * 4 * 4096 * 1024), ("fused", 2 * 4 * 4096 * 1024)):
        fusion_rows.append({"what": "GPU", "variant": variant, "how": variant,
                            "seconds": 1.5 * model(0, nbytes), "label": label})
    copies = {memory: {**_fixture_measurement(f"host→device copy, {memory}", 2**28 / rate,
                                              bytes_moved=2**28), "bytes_per_s": rate}
              for memory, rate in (("pageable", 6e9), ("pinned", 50e9))}
    return {
        "format": "gpulab-gpu-run", "format_version": 1, "date": "2026-12-01T10:00:00+00:00",
        "device": FIXTURE_GPU, "driver": "570.00", "toolkit": "12.8",
        "compute_capability": [9, 0], "gpulab": "0.1.0", "quick": False,
        "steps": {"series": {"status": "ok", "seconds": 1.0}},
        "series": {
            "crossover": crossover,
            "bandwidth saxpy": bandwidth["saxpy"],
            "bandwidth copy_coalesced": bandwidth["copy_coalesced"],
            "bandwidth copy_strided": bandwidth["copy_coalesced"],
            "strides": {},
            "matmul tiles": tiles,
            "fusion": {"shape": [4096, 1024], "activation": "relu", "dtype": "float32",
                       "rows": fusion_rows},
            "training epoch": epochs,
            "host copies": copies,
            "launch overhead": _fixture_measurement("empty kernel launch", 6e-6),
            "inference latency": [
                {"batch": batch, "latency_s": 2 * (gpu_inference_estimate(
                    [64, 128, 10], batch, "H200").time_s + 20e-6),
                 "where": label} for batch in (1, 8, 64, 512)],
            "narrow matmuls": [_fixture_measurement(f"matmul_{fmt}", 3e-3, 2048, 2 * 2048**3,
                                                    format=fmt) for fmt in ("fp32", "fp16")],
        },
    }


@pytest.fixture
def recorded_gpu_run(tmp_path, monkeypatch):
    """A recorded GPU run (:func:`fixture_gpu_run`) in a data folder of its own, which
    ``$GPULAB_DATA_DIR`` points at: every chapter sees it as the run that ships."""
    import json

    from gpulab import recorded_runs

    path = tmp_path / "gpu_run_nvidia-h200-test-fixture_2026-12-01.json"
    path.write_text(json.dumps(fixture_gpu_run()), encoding="utf-8")
    monkeypatch.setenv(recorded_runs.DATA_DIR_VARIABLE, str(tmp_path))
    return recorded_runs.load_gpu_run(path)


@pytest.fixture
def fixture_gpu_record() -> dict:
    """The fixture run's record itself (see :func:`fixture_gpu_run`)."""
    return fixture_gpu_run()


def _figure_texts(fig) -> str:
    """Every text of a figure: titles, labels, annotations and legends, joined by spaces."""
    import matplotlib.text

    found = [t.get_text() for t in fig.findobj(matplotlib.text.Text)]
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend:
            found += [t.get_text() for t in legend.get_texts()]
    return " ".join(found)


@pytest.fixture
def figure_texts():
    """``figure_texts(fig)``: every text of a matplotlib figure, for asserting on labels."""
    return _figure_texts
