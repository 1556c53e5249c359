"""The work chapter 11 gives its ranks, one function per kind of "phase", each called on every
rank of a communicator with ``(comm, phase, context)`` and returning (on rank 0) a JSON-ready
dict. The same functions run under MPI (:mod:`gpulab.parallel.worker`, launched by
``mpiexec``) and on threads (:mod:`gpulab.parallel.simulated`, where no MPI is installed).

Phases (``phase["kind"]``):

- ``"allreduce"``: ``MPI_Allreduce`` timed over message sizes (for the α–β fit);
- ``"ring"``: a ring all-reduce written with point-to-point messages (gpulab's, or a
  learner's from a source file) checked against ``Allreduce`` and timed next to it;
- ``"train"``: data-parallel training of the digits MLP (:mod:`gpulab.parallel.data_parallel`);
- ``"tensor"``: a matmul split by columns and by rows across the ranks, checked against NumPy;
- ``"nccl"``: NCCL's all-reduce through CuPy, one GPU per rank, where there are several GPUs
  and CuPy is installed (otherwise it says why not).
"""

from __future__ import annotations

import time

import numpy as np


def _timed(comm, operation, repeats: int) -> list[float]:
    """Seconds of ``operation()`` on this rank, ``repeats`` times, each started together after a
    barrier; rank 0 gets, for each repeat, the slowest rank's time."""
    times = []
    for _ in range(repeats):
        comm.Barrier()
        start = time.perf_counter()
        operation()
        times.append(time.perf_counter() - start)
    gathered = comm.gather(times, root=0)
    if comm.Get_rank() != 0:
        return []
    return [max(per_rank[k] for per_rank in gathered) for k in range(repeats)]


def _repeats(n_bytes: int) -> int:
    return 30 if n_bytes <= 65536 else 10 if n_bytes <= 1 << 20 else 4


def allreduce_sweep(comm, phase: dict, context: dict) -> dict | None:
    """``Allreduce`` (sum, float64) at each of ``phase["sizes_bytes"]``, after warming up; the
    fastest and median of the repeats (the slowest rank's time in each)."""
    rows = []
    warm_in, warm_out = np.ones(64), np.empty(64)
    for _ in range(10):
        comm.Allreduce(warm_in, warm_out)
    for n_bytes in phase["sizes_bytes"]:
        send = np.random.default_rng(comm.Get_rank()).random(max(1, int(n_bytes) // 8))
        recv = np.empty_like(send)
        times = _timed(comm, lambda s=send, r=recv: comm.Allreduce(s, r),
                       _repeats(send.nbytes))
        if times:
            rows.append({"bytes": int(send.nbytes), "min_s": float(min(times)),
                         "median_s": float(np.median(times)), "repeats": len(times)})
    return {"rows": rows} if comm.Get_rank() == 0 else None


def ring_phase(comm, phase: dict, context: dict) -> dict | None:
    """A ring all-reduce function (``context["ring"]``) against ``Allreduce`` / size: correct on
    random vectors of awkward lengths, and timed next to it at ``phase["sizes_bytes"]``."""
    function = context["ring"]
    rank, size = comm.Get_rank(), comm.Get_size()
    rng = np.random.default_rng(1000 + rank)
    worst = 0.0
    for n in phase.get("lengths", [size + 1, 1000, 4099]):
        x = rng.standard_normal(n)
        want = np.empty_like(x)
        comm.Allreduce(x, want)
        want /= size
        got = np.asarray(function(comm, x), dtype=np.float64)
        gap = float(np.max(np.abs(got - want))) if got.shape == want.shape else np.inf
        worst = max(worst, gap)
    timings = []
    for n_bytes in phase.get("sizes_bytes", []):
        x = rng.standard_normal(max(1, int(n_bytes) // 8))
        out = np.empty_like(x)
        ring = _timed(comm, lambda x=x: function(comm, x), max(2, _repeats(x.nbytes) // 3))
        mpi = _timed(comm, lambda x=x, out=out: comm.Allreduce(x, out),
                     max(2, _repeats(x.nbytes) // 3))
        if rank == 0:
            timings.append({"bytes": int(x.nbytes), "ring_s": float(min(ring)),
                            "allreduce_s": float(min(mpi))})
    worst = comm.allreduce(worst, op=_max_op(comm))
    if rank != 0:
        return None
    return {"function": context.get("ring_name", getattr(function, "__name__", "?")),
            "max_error": worst, "correct": bool(worst <= 1e-9), "timings": timings}


def _max_op(comm):
    """MPI.MAX under MPI; the simulated communicator understands the name."""
    try:
        from mpi4py import MPI

        if not type(comm).__module__.startswith("gpulab"):
            return MPI.MAX
    except ImportError:  # pragma: no cover - threads only
        pass
    return "MAX"


def train_phase(comm, phase: dict, context: dict) -> dict | None:
    from gpulab.parallel.data_parallel import train_data_parallel

    result = train_data_parallel(comm, context["X"], context["y"], **phase.get("settings", {}))
    devices = comm.gather(context.get("device", "this CPU"), root=0)
    if comm.Get_rank() != 0:
        return None
    result["devices"] = devices
    return result


def tensor_phase(comm, phase: dict, context: dict) -> dict | None:
    """Y = X @ W split by W's columns (all-gather) and by its rows (all-reduce)."""
    from gpulab.parallel.strategies import column_parallel_matmul, row_parallel_matmul

    m, k, n = phase.get("shape", (64, 96, 50))
    rng = np.random.default_rng(7)  # the same X and W on every rank
    X, W = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    want = X @ W
    by_columns = column_parallel_matmul(comm, X, W)
    by_rows = row_parallel_matmul(comm, X, W)
    size = comm.Get_size()
    if comm.Get_rank() != 0:
        return None
    return {"shape": [m, k, n], "ranks": size,
            "columns_error": float(np.max(np.abs(by_columns - want))),
            "rows_error": float(np.max(np.abs(by_rows - want))),
            "columns_bytes_received": int(m * n * 8 * (size - 1) / size),
            "rows_bytes_sent": int(2 * (size - 1) / size * m * n * 8)}


def nccl_phase(comm, phase: dict, context: dict) -> dict | None:
    """NCCL's all-reduce through CuPy, one GPU per rank, timed over message sizes."""
    rank, size = comm.Get_rank(), comm.Get_size()
    why = None
    try:
        import cupy
        from cupy.cuda import nccl

        n_gpus = cupy.cuda.runtime.getDeviceCount()
        if n_gpus < size:
            why = f"{n_gpus} GPU(s) for {size} ranks: NCCL needs one GPU per rank"
    except Exception as exc:  # noqa: BLE001 - no CuPy, no driver: say so
        why = f"CuPy with NCCL is not available ({type(exc).__name__}: {exc})"
    why = comm.bcast(why if rank == 0 else None, root=0) or why
    if why:
        return {"available": False, "why": why} if rank == 0 else None
    cupy.cuda.Device(rank % n_gpus).use()
    unique_id = comm.bcast(nccl.get_unique_id() if rank == 0 else None, root=0)
    communicator = nccl.NcclCommunicator(size, unique_id, rank)
    stream = cupy.cuda.Stream.null
    rows = []
    for n_bytes in phase["sizes_bytes"]:
        count = max(1, int(n_bytes) // 4)
        x = cupy.ones(count, dtype=cupy.float32)
        y = cupy.empty_like(x)

        def reduce(x=x, y=y, count=count):
            communicator.allReduce(x.data.ptr, y.data.ptr, count, nccl.NCCL_FLOAT32,
                                   nccl.NCCL_SUM, stream.ptr)
            stream.synchronize()

        reduce()
        times = _timed(comm, reduce, _repeats(count * 4))
        if rank == 0:
            rows.append({"bytes": count * 4, "min_s": float(min(times)),
                         "median_s": float(np.median(times)),
                         "correct": bool(float(y[0].get()) == size)})
    return {"available": True, "rows": rows,
            "gpus": [_text(cupy.cuda.runtime.getDeviceProperties(d)["name"])
                     for d in range(min(size, n_gpus))]} if rank == 0 else None


def _text(name) -> str:
    return name.decode() if isinstance(name, bytes) else str(name)


PHASES = {"allreduce": allreduce_sweep, "ring": ring_phase, "train": train_phase,
          "tensor": tensor_phase, "nccl": nccl_phase}


def load_context(spec: dict) -> dict:
    """What the phases need, loaded once per rank: the training data, and the ring function
    (gpulab's, or the learner's, executed from its source file)."""
    context: dict = {}
    if any(phase["kind"] == "train" for phase in spec.get("phases", [])):
        import gpulab.parallel.data_parallel  # noqa: F401 - import on every rank at once, early
    if spec.get("data"):
        with np.load(spec["data"]) as data:
            context["X"], context["y"] = data["X"], data["y"]
    ring = spec.get("ring")
    if ring and ring.get("source"):
        namespace = {"np": np, "numpy": np, "__name__": "learner"}
        with open(ring["source"], encoding="utf-8") as file:
            exec(compile(file.read(), ring["source"], "exec"), namespace)  # noqa: S102
        context["ring"] = namespace[ring["name"]]
        context["ring_name"] = ring["name"]
    else:
        from gpulab.parallel.collectives import ring_allreduce_mean

        context["ring"] = ring_allreduce_mean
        context["ring_name"] = "gpulab.parallel.collectives.ring_allreduce_mean"
    return context


def run_phase(comm, phase: dict, context: dict):
    kind = phase["kind"]
    if kind not in PHASES:
        raise ValueError(f"unknown phase {kind!r}; the phases are {', '.join(PHASES)}")
    return PHASES[kind](comm, phase, context)


__all__ = ["PHASES", "allreduce_sweep", "load_context", "nccl_phase", "ring_phase",
           "run_phase", "tensor_phase", "train_phase"]
