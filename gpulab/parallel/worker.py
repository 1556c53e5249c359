"""What each MPI rank runs: ``mpiexec -n N python -m gpulab.parallel.worker SPEC.json OUT.json``.

The spec (JSON, written by :func:`gpulab.parallel.launch.run_mpi`) lists phases
(:mod:`gpulab.parallel.tasks`), each with the numbers of ranks to run it on. One launch does
them all, because starting MPI costs a second or two: for a phase on n of the N ranks, the
world is split (``comm.Split``) into the first n ranks, which run it, and the rest, which wait
(asleep, polling a non-blocking barrier, so that they leave the CPU to the ranks at work).
Rank 0 writes every phase's result to OUT.json. A rank that fails writes its traceback to
OUT.json.rank<k>.err and aborts the whole run, so that no rank waits forever.

A rank never outlives the job's launcher: a watchdog thread checks, four times a second, that
the process that started the job (``GPULAB_LAUNCHER_PID``, the notebook's kernel) and this
rank's parent (``prterun``) still exist; when either is gone (a kernel killed or restarted
mid-run), rank 0 removes the job's folder and every rank exits at once.

On a machine with several GPUs and the kernel backend, each rank picks its own GPU: its rank
among the ranks on this node, modulo the number of GPUs.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
import traceback
from pathlib import Path

WATCH_INTERVAL_S = 0.25
ORPHANED_EXIT_STATUS = 3


def _launcher_gone(launcher_pid: int | None, parent_pid: int) -> bool:
    if os.getppid() != parent_pid:  # prterun died: this rank was handed to init
        return True
    if launcher_pid is None:
        return False
    try:
        os.kill(launcher_pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def watch_launcher(folder: Path, rank: int) -> threading.Thread | None:
    """Start the watchdog (POSIX only; on Windows ``os.kill`` would terminate the process)."""
    if os.name == "nt":  # pragma: no cover
        return None
    value = os.environ.get("GPULAB_LAUNCHER_PID", "")
    launcher_pid = int(value) if value.isdigit() else None
    parent_pid = os.getppid()

    def watch():
        while not _launcher_gone(launcher_pid, parent_pid):
            time.sleep(WATCH_INTERVAL_S)
        if rank == 0:
            shutil.rmtree(folder, ignore_errors=True)
        os._exit(ORPHANED_EXIT_STATUS)

    thread = threading.Thread(target=watch, name="gpulab-launcher-watchdog", daemon=True)
    thread.start()
    return thread


def _idle_until_everyone_arrives(world) -> None:
    request = world.Ibarrier()
    while not request.Test():
        time.sleep(0.0005)


def library_name(version: str) -> str:
    """"Open MPI v5.0.11" from MPI_Get_library_version's long text."""
    first = version.replace("\x00", "").strip().splitlines()[0] if version.strip() else "MPI"
    return first.split(",")[0].strip()


def assign_device(local_rank: int, backend: str) -> str:
    """Select this rank's GPU (kernel backend in the gpu tier); say where it computes."""
    if backend != "kernels":
        return "this CPU (NumPy backend)"
    from gpulab import device

    if device.tier() != "gpu":
        return "Numba's CUDA simulator on this CPU"
    from numba import cuda

    n_gpus = len(cuda.gpus)
    cuda.select_device(local_rank % n_gpus)
    name = cuda.get_current_device().name
    return f"GPU {local_rank % n_gpus}: {name.decode() if isinstance(name, bytes) else name}"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: mpiexec -n N python -m gpulab.parallel.worker SPEC.json OUT.json",
              file=sys.stderr)
        return 2
    spec_path, out_path = argv
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    rank = world.Get_rank()
    watch_launcher(Path(spec_path).resolve().parent, rank)
    try:
        with open(spec_path, encoding="utf-8") as file:
            spec = json.load(file)
        from gpulab.parallel.tasks import load_context, run_phase

        started = time.perf_counter()
        context = load_context(spec)
        local = world.Split_type(MPI.COMM_TYPE_SHARED)
        context["device"] = assign_device(local.Get_rank(), spec.get("backend", "numpy"))
        local.Free()
        results = {"ranks": world.Get_size(),
                   "library": library_name(MPI.Get_library_version()),
                   "mpi4py": __import__("mpi4py").__version__, "phases": {}}
        results["setup_seconds"] = time.perf_counter() - started
        start = time.perf_counter()
        for phase in spec["phases"]:
            for n in phase.get("ranks", [world.Get_size()]):
                if n > world.Get_size():
                    raise ValueError(f"phase {phase['name']!r} wants {n} ranks; the run has "
                                     f"{world.Get_size()}")
                began = time.perf_counter()
                sub = world.Split(0 if rank < n else MPI.UNDEFINED, rank)
                value = None
                if sub != MPI.COMM_NULL:
                    value = run_phase(sub, phase, context)
                    sub.Free()
                _idle_until_everyone_arrives(world)
                if rank == 0:
                    results["phases"].setdefault(phase["name"], {})[str(n)] = value
                    results.setdefault("phase_seconds", {})[f"{phase['name']}/{n}"] = (
                        time.perf_counter() - began)
        results["seconds"] = time.perf_counter() - start
        if rank == 0:
            with open(out_path, "w", encoding="utf-8") as file:
                json.dump(results, file)
    except BaseException:  # noqa: BLE001 - report, then stop every rank
        with open(f"{out_path}.rank{rank}.err", "w", encoding="utf-8") as file:
            file.write(traceback.format_exc())
        sys.stderr.write(f"gpulab worker, rank {rank}:\n{traceback.format_exc()}")
        sys.stderr.flush()
        world.Abort(1)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover - run by mpiexec
    sys.exit(main())
