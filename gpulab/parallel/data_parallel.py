"""Data-parallel training of a :class:`gpulab.nn.MLP` over the ranks of a communicator (an
mpi4py communicator, or :mod:`gpulab.parallel.simulated`'s threads).

Every rank builds the same network from the same seed and draws the same shuffled global
batches (the same generator, the same seed). Each step:

1. every rank takes its **shard** of the global batch (``np.array_split``: rank r gets the r-th
   of N nearly equal parts) and runs forward and backward on it with gpulab's backend;
2. it scales its gradients by its share of the batch, ``len(shard) / len(batch)``: the loss of a
   shard is a mean over the shard, and the global batch's gradient is the mean over all its
   samples, i.e. the sum of the shards' gradients weighted by their sizes (with equal shards,
   simply the average of the N gradients);
3. one ``Allreduce`` (sum) of all the gradients at once, packed into one flat buffer, gives every
   rank the global batch's gradient (one message for all the layers: fewer latencies; PyTorch's
   DistributedDataParallel packs gradients into "buckets" for the same reason);
4. every rank applies the same optimiser update to the same parameters.

So N ranks take exactly the steps one process would take with the whole global batch, up to
rounding (the sums are added in another order): :func:`train_one_process` is that one process,
and ``tests/parallel`` checks 1, 2 and 4 ranks against it.
"""

from __future__ import annotations

import time

import numpy as np

from gpulab.nn.backends import get_backend
from gpulab.nn.data import minibatch_indices
from gpulab.nn.layers import Dense
from gpulab.nn.losses import SoftmaxCrossEntropy
from gpulab.nn.optimisers import make_optimiser

# The digits recipe (gpulab.nn.recipes.DIGITS), written out: importing gpulab.nn.recipes (and
# gpulab.nn.mlp) imports numba, which costs every MPI rank a second of start-up.
DIGITS = {"widths": (64, 128, 10), "activation": "relu", "optimiser": "adam", "lr": 3e-3}

SETTINGS = {"widths": list(DIGITS["widths"]), "activation": DIGITS["activation"],
            "optimiser": DIGITS["optimiser"], "lr": DIGITS["lr"], "global_batch": 256,
            "epochs": 4, "seed": 0, "dtype": "float32", "backend": "numpy"}


def settings_with(**overrides) -> dict:
    """:data:`SETTINGS` with some of them changed; unknown names are refused."""
    unknown = set(overrides) - set(SETTINGS)
    if unknown:
        raise ValueError(f"unknown setting(s) {sorted(unknown)}; the settings are "
                         f"{', '.join(SETTINGS)}")
    return {**SETTINGS, **overrides}


class RankNetwork:
    """The layers of :class:`gpulab.nn.MLP` (same widths, same initial weights from the same
    seed, same backend calls) without the module ``gpulab.nn.mlp``, whose import brings in
    numba: on the NumPy backend an MPI rank needs only the layers, the loss and the optimiser.
    With ``backend="kernels"`` :func:`make_network` returns a real MLP instead."""

    def __init__(self, widths, activation: str, backend, dtype, seed: int):
        self.widths = [int(w) for w in widths]
        self.backend = get_backend(backend)
        self.dtype = np.dtype(dtype)
        rng = np.random.default_rng(seed)  # as MLP: one generator, layer after layer
        last = len(self.widths) - 2
        self.layers = [Dense(n_in, n_out, activation if k < last else "identity", self.backend,
                             self.dtype, rng)
                       for k, (n_in, n_out) in enumerate(zip(self.widths[:-1], self.widths[1:],
                                                             strict=True))]
        self.loss_function = SoftmaxCrossEntropy(self.backend)

    @property
    def n_parameters(self) -> int:
        return sum(layer.n_parameters for layer in self.layers)

    def loss(self, X, y) -> float:
        A = self.backend.asarray(X, self.dtype)
        for layer in self.layers:
            A = layer.forward(A)
        return self.loss_function.forward(A, self.backend.labels(np.asarray(y)))

    def backward(self) -> None:
        d = self.loss_function.backward()
        for k in range(len(self.layers) - 1, -1, -1):
            d = self.layers[k].backward(d, need_dX=k > 0)

    def parameters(self):
        return [(f"layer{k}.{name}", param, grad) for k, layer in enumerate(self.layers)
                for name, param, grad in layer.parameters()]

    def state(self) -> dict[str, np.ndarray]:
        return {name: self.backend.to_host(param).copy() for name, param, _ in self.parameters()}


def make_network(widths, activation: str, backend, dtype, seed: int):
    """A :class:`RankNetwork` on the NumPy backend, a :class:`gpulab.nn.MLP` on the kernels."""
    if get_backend(backend).name == "numpy":
        return RankNetwork(widths, activation, backend, dtype, seed)
    from gpulab.nn.mlp import MLP

    return MLP(widths, activation, backend=backend, dtype=dtype, seed=seed)


def flat_gradients(model, out: np.ndarray) -> np.ndarray:
    """Every gradient of ``model``'s last backward pass, copied (to the host) into ``out``."""
    start = 0
    for _, _, grad in model.parameters():
        values = model.backend.to_host(grad).reshape(-1)
        out[start:start + values.size] = values
        start += values.size
    return out


def set_gradients(model, flat: np.ndarray) -> None:
    """Give every layer the gradients held in ``flat`` (in
    :meth:`gpulab.nn.MLP.parameters` order)."""
    start = 0
    for layer in model.layers:
        for name in ("W", "b"):
            shape = tuple(getattr(layer, name).shape)
            size = int(np.prod(shape))
            values = flat[start:start + size].reshape(shape)
            setattr(layer, f"d{name}", model.backend.asarray(values, model.dtype))
            start += size


def train_data_parallel(comm, X, y, **overrides) -> dict:
    """Train on ``comm``'s ranks (each with the same X, y) and return, on every rank, the final
    parameters, the global batch's loss at every step and where the time went.

    Times: ``compute_s`` (forward, backward, packing the gradients), ``communicate_s`` (the
    Allreduce) and ``update_s`` (unpacking and the optimiser), each a list with one value per
    step, measured on this rank with ``time.perf_counter``."""
    s = settings_with(**overrides)
    rank, size = comm.Get_rank(), comm.Get_size()
    X = np.asarray(X)
    y = np.asarray(y)
    model = make_network(s["widths"], s["activation"], s["backend"], s["dtype"], s["seed"])
    optimiser = make_optimiser(s["optimiser"], lr=s["lr"])
    rng = np.random.default_rng(s["seed"])
    n_params = model.n_parameters
    local = np.zeros(n_params + 1, dtype=model.dtype)  # the gradients, then the loss
    total = np.zeros_like(local)
    losses, compute, communicate, update = [], [], [], []
    for _ in range(int(s["epochs"])):
        for batch in minibatch_indices(len(y), int(s["global_batch"]), rng):
            start = time.perf_counter()
            shard = np.array_split(batch, size)[rank]
            share = len(shard) / len(batch)
            if len(shard):
                loss = model.loss(X[shard], y[shard])
                model.backward()
                flat_gradients(model, local[:n_params])
                local[:n_params] *= share
                local[n_params] = loss * share
            else:  # more ranks than samples in this batch: contribute nothing
                local[:] = 0
            middle = time.perf_counter()
            comm.Allreduce(local, total)
            after = time.perf_counter()
            set_gradients(model, total[:n_params])
            optimiser.step(model)
            model.backend.synchronize()
            end = time.perf_counter()
            losses.append(float(total[n_params]))
            compute.append(middle - start)
            communicate.append(after - middle)
            update.append(end - after)
    return {"ranks": size, "state": {k: v.tolist() for k, v in model.state().items()},
            "losses": losses, "compute_s": compute, "communicate_s": communicate,
            "update_s": update, "steps": len(losses), "gradient_bytes": int(local.nbytes),
            "settings": s, "backend": model.backend.describe()}


def train_one_process(X, y, **overrides) -> dict:
    """The same training in one process, with :class:`gpulab.nn.Trainer` on the whole global
    batch: what every data-parallel run must match."""
    from gpulab.nn.mlp import MLP
    from gpulab.nn.trainer import Trainer

    s = settings_with(**overrides)
    model = MLP(s["widths"], s["activation"], backend=s["backend"], dtype=s["dtype"],
                seed=s["seed"])
    trainer = Trainer(model, s["optimiser"], batch_size=int(s["global_batch"]),
                      epochs=int(s["epochs"]), seed=s["seed"], progress=False, lr=s["lr"])
    history = trainer.fit((np.asarray(X), np.asarray(y)))
    return {"state": model.state(), "final_train_loss": history.final.train_loss,
            "settings": s}


def largest_difference(state, reference) -> tuple[float, str]:
    """(largest |parameter - reference parameter|, where) over every parameter."""
    worst, where = 0.0, ""
    for name, want in reference.items():
        got = np.asarray(state[name], dtype=np.float64)
        gap = float(np.max(np.abs(got - np.asarray(want, dtype=np.float64)), initial=0.0))
        if not gap <= worst:
            worst, where = gap, name
    return worst, where


def rounding_tolerance(dtype, reference) -> float:
    """How far two runs may drift apart by rounding alone: a hundred roundings of the
    largest parameter (Adam divides by the square root of small running averages, which
    magnifies last-bit differences over the steps)."""
    scale = max(float(np.max(np.abs(np.asarray(v)))) for v in reference.values())
    eps = float(np.finfo(np.dtype(dtype)).eps)
    return 100 * eps * max(scale, 1.0)


__all__ = ["SETTINGS", "RankNetwork", "flat_gradients", "largest_difference", "make_network",
           "rounding_tolerance", "set_gradients", "settings_with", "train_data_parallel",
           "train_one_process"]
