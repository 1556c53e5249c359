"""Mixed-precision training of the course's MLP (chapter 10): 16-bit and 8-bit arithmetic with
fp32 where it matters, and what goes wrong without each part.

A **recipe** (:class:`Recipe`, :data:`RECIPES`) says in which format each layer's matrix
products run and what protects them:

- ``fp32``: everything in fp32, the chapter 07 run.
- ``bf16``, ``fp16``: *mixed precision* (Micikevicius et al., "Mixed Precision Training",
  ICLR 2018). The optimiser keeps **fp32 master weights**; every forward pass uses a 16-bit
  copy of them; activations and gradients are stored in 16 bits; the matrix products multiply
  16-bit values and **accumulate in fp32** (chapter 04's kernels); softmax and the loss run in
  fp32, as PyTorch's autocast does. ``fp16`` adds **dynamic loss scaling**
  (:class:`LossScaler`, the behaviour of PyTorch's ``torch.amp.GradScaler``): the loss is
  multiplied by S before the backward pass so that small gradients stay above fp16's smallest
  value, the gradients are divided by S before the update, and a step whose gradients hold an
  inf or NaN is skipped while S is halved.
- ``fp8``: FP8 the way NVIDIA's Transformer Engine runs its modules' matrix products: E4M3 for
  weights and activations, E5M2 for gradients ("HYBRID"), each tensor with its own scale from
  the history of its absolute maxima (*delayed scaling*, :class:`DelayedScaling`:
  scale = fp8_max / max(amax history) / 2^margin, computed from earlier steps, applied to this
  one; NaN values are left out of an amax and an inf keeps the previous scale, as in TE:
  :func:`amax`, :func:`scale_from_history`). The products accumulate in fp32 and come out
  in bf16; bf16 everywhere else, fp32 master weights. ``Recipe.fp8_keep`` keeps the first
  and/or the last layer in bf16.
  (Transformer Engine does not choose such layers for you: its ``te.Linear`` layers run in
  FP8 inside ``fp8_autocast``, and which layers are ``te`` modules is the model author's
  choice.)

And the same recipes with one part taken away, to show why it is there
(:data:`ABLATIONS`): ``fp16_no_scaling`` (small gradients flush to zero), ``bf16_no_master``
(Adam's updates applied straight to bf16 weights, where most are smaller than half the gap
between neighbouring bf16 values and change nothing).

Two engines compute the same steps:

- ``"emulated"``: NumPy and ml_dtypes on this CPU. Every value is **stored** in its format
  (arrays of float16, ml_dtypes.bfloat16, float8_e4m3fn, float8_e5m2), widened to fp32 to
  compute, and rounded back where a kernel would write it. The matrix products accumulate in
  fp32 (NumPy's BLAS: a different order of additions than the kernels; ``order="kernel"``
  adds in the kernels' order, k = 0, 1, ..., bit for bit); everything else on the NumPy
  backend (:class:`gpulab.nn.backends.NumpyBackend`).
- ``"kernels"``: the matrix products on chapter 04's kernels
  (:mod:`gpulab.kernels.narrow_formats`: ``matmul_fp16_acc32``, ``matmul_bf16_acc32``,
  ``matmul_fp8_acc32``; chapter 03's for fp32), everything else on the kernel backend
  (:class:`gpulab.nn.backends.KernelBackend`: bias + activation, softmax, Adam on the fp32
  master weights). On a GPU, that is the real thing; in the simulator a step costs seconds, so
  the chapter runs one small step there and compares it with the emulation
  (:func:`compare_engines`). bf16 kernels need compute capability >= 8.0: elsewhere
  chapter 04's wrapper emulates them and says so. A backward product of E4M3 and E5M2 values
  runs on ``matmul_fp16_acc32``: every FP8 value is exactly an fp16 value, so the products and
  fp32 sums are the ones an FP8 tensor core computes.

The network (:class:`MixedPrecisionMLP`) is chapter 07's :class:`gpulab.nn.mlp.MLP`, its layers
and its forward and backward pass, with each layer's arithmetic done in the recipe's formats
on an engine; the master weights, the loss scaling and the update are this module's.

:func:`train_mixed` trains one recipe and returns a :class:`MixedRun`: held-out accuracy after
every epoch, the loss scale and skipped steps, a histogram of every gradient value the
backward pass stored (before rounding) with the fraction flushed to zero, the fraction of
updates too small to change a stored weight, and the bytes it kept (measured from the arrays'
``nbytes``, named as chapter 09's calculator :mod:`gpulab.nn.memory` names them, which computes
the same from bytes per value: :data:`MEMORY_PRECISION`). :func:`estimate_step_matmuls` is the
roofline time of a step's matrix products on a named GPU.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from gpulab import formats, hardware, reference
from gpulab.nn.backends import get_backend
from gpulab.nn.data import Dataset, load_digits, minibatch_indices
from gpulab.nn.mlp import MLP
from gpulab.nn.recipes import DIGITS

COMPUTE_FORMATS = ("fp32", "bf16", "fp16", "fp8")
FP8_FORWARD = "fp8_e4m3"  # weights and activations (Transformer Engine's HYBRID format)
FP8_BACKWARD = "fp8_e5m2"  # gradients
FP8_HIGH_PRECISION = "bf16"  # what an fp8 recipe runs everything else in
ENGINES = ("emulated", "kernels")
ADAM_EPS = 1e-8  # torch.optim.Adam's default; multiplied by loss_factor (see train_mixed)

# PyTorch's torch.amp.GradScaler defaults (https://pytorch.org/docs/stable/amp.html)
GRAD_SCALER_DEFAULTS = {"init_scale": 2.0**16, "growth_factor": 2.0, "backoff_factor": 0.5,
                        "growth_interval": 2000}
# Transformer Engine's DelayedScaling defaults (transformer_engine.common.recipe,
# https://docs.nvidia.com/deeplearning/transformer-engine/): margin 0, amax_history_len 1024,
# amax_compute_algo "max", fp8_format HYBRID.
DELAYED_SCALING_DEFAULTS = {"margin": 0, "amax_history_len": 1024}

_DTYPES = {"fp32": np.dtype(np.float32), "fp16": np.dtype(np.float16),
           "bf16": np.dtype(ml_dtypes.bfloat16), "fp8_e4m3": np.dtype(ml_dtypes.float8_e4m3fn),
           "fp8_e5m2": np.dtype(ml_dtypes.float8_e5m2)}

# Gradient magnitudes are counted in bins one power of two wide, from 2^-48 to 2^20.
HISTOGRAM_EDGES_LOG2 = np.arange(-48, 21)


# ---------------------------------------------------------------------------------------------
# Storing values in a format
# ---------------------------------------------------------------------------------------------


def dtype_of(fmt: str) -> np.dtype:
    """The NumPy / ml_dtypes type that stores ``fmt`` ("fp32", "fp16", "bf16", "fp8_e4m3",
    "fp8_e5m2")."""
    if fmt in _DTYPES:
        return _DTYPES[fmt]
    name = formats.get_format(fmt).name
    if name not in _DTYPES:
        raise ValueError(f"no storage type for {name} here; use one of {', '.join(_DTYPES)}")
    return _DTYPES[name]


def store(x, fmt: str, saturate: bool = False) -> np.ndarray:
    """``x`` rounded to ``fmt`` (nearest, ties to even) in an array of its type; fp8 saturates
    to +-max when ``saturate`` (the "satfinite" conversion FP8 libraries use)."""
    dtype = dtype_of(fmt)
    x = np.asarray(x)
    if saturate:
        limit = formats.get_format(fmt).max_value
        x = np.clip(x, -limit, limit)
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(dtype)


def widen(x) -> np.ndarray:
    """A stored array as float32 (exact: every format here fits in fp32)."""
    return np.asarray(x).astype(np.float32, copy=False)


# ---------------------------------------------------------------------------------------------
# Dynamic loss scaling: PyTorch's GradScaler
# ---------------------------------------------------------------------------------------------


class LossScaler:
    """Dynamic loss scaling with the behaviour of PyTorch's ``torch.amp.GradScaler``.

    The loss (so every gradient) is multiplied by ``scale`` before the backward pass; the
    gradients are divided by it before the update (:meth:`unscale`). After every step,
    :meth:`update` with whether any gradient was inf or NaN:

    - inf/NaN found: the step is **skipped** (the weights keep their values), ``scale`` is
      multiplied by ``backoff_factor`` (0.5) and the count of clean steps starts again from 0;
    - otherwise the step is taken and the count grows by one; when it reaches
      ``growth_interval`` (2000), ``scale`` is multiplied by ``growth_factor`` (2) and the
      count starts again (a growth that would overflow float32 is not taken).

    ``history`` records (scale used, inf/NaN found, step taken) for every step.
    """

    def __init__(self, init_scale: float = GRAD_SCALER_DEFAULTS["init_scale"],
                 growth_factor: float = GRAD_SCALER_DEFAULTS["growth_factor"],
                 backoff_factor: float = GRAD_SCALER_DEFAULTS["backoff_factor"],
                 growth_interval: int = GRAD_SCALER_DEFAULTS["growth_interval"]):
        if not (math.isfinite(init_scale) and init_scale > 0):
            raise ValueError(f"init_scale must be a positive number, not {init_scale!r}")
        if not growth_factor > 1:
            raise ValueError(f"growth_factor must be > 1, not {growth_factor!r}")
        if not 0 < backoff_factor < 1:
            raise ValueError(f"backoff_factor must be between 0 and 1, not {backoff_factor!r}")
        if isinstance(growth_interval, bool) or not isinstance(growth_interval, int) \
                or growth_interval < 1:
            raise ValueError(f"growth_interval must be a positive whole number, not "
                             f"{growth_interval!r}")
        self.scale = float(init_scale)
        self.growth_factor, self.backoff_factor = float(growth_factor), float(backoff_factor)
        self.growth_interval = growth_interval
        self.clean_steps = 0  # GradScaler's "growth tracker"
        self.history: list[tuple[float, bool, bool]] = []

    @staticmethod
    def found_inf(gradients) -> bool:
        """True when any gradient holds an inf or a NaN."""
        return not all(np.all(np.isfinite(g)) for g in gradients)

    def unscale(self, gradient) -> np.ndarray:
        """A stored (scaled) gradient as float32, divided by the scale."""
        return widen(gradient) / np.float32(self.scale)

    def update(self, found_inf: bool) -> bool:
        """The rule above, after one step; returns whether the step is to be taken."""
        used = self.scale
        if found_inf:
            self.scale *= self.backoff_factor
            self.clean_steps = 0
            take = False
        else:
            self.clean_steps += 1
            take = True
            if self.clean_steps == self.growth_interval:
                grown = self.scale * self.growth_factor
                if grown <= float(np.finfo(np.float32).max):
                    self.scale = grown
                self.clean_steps = 0
        self.history.append((used, bool(found_inf), take))
        return take

    def __repr__(self) -> str:
        return (f"LossScaler(scale={self.scale:g}, clean_steps={self.clean_steps}, "
                f"growth_interval={self.growth_interval})")


# ---------------------------------------------------------------------------------------------
# FP8 delayed scaling: Transformer Engine's recipe
# ---------------------------------------------------------------------------------------------


# Transformer Engine (TE), https://github.com/NVIDIA/TransformerEngine, as read for gpulab:
# - a tensor's amax is taken as it is cast, ``max = fmaxf(fabsf(temp), max)`` from max = 0
#   (transformer_engine/common/util/vectorized_pointwise.h, unary_kernel; the same line in
#   common/recipe/current_scaling.cu's amax_kernel), reduced over warps and blocks with fmaxf
#   and atomicMaxFloat. CUDA's fmaxf returns the other argument when one is NaN
#   (https://docs.nvidia.com/cuda/cuda-math-api/ , fmaxf), so NaN values are left out and an
#   all-NaN tensor has amax 0; |inf| is inf and is kept.
# - the scale update (common/recipe/delayed_scaling.cu, amax_and_scale_update kernels) reduces
#   the history with fmaxf too, then ``if (isfinite(amax) && amax > 0) scale = scaled_max /
#   amax; else scale = <the previous scale>`` with scaled_max = fp8_max * 2^-margin, and
#   ``if (isinf(scale)) scale = FLT_MAX`` (an amax so small that the division overflows fp32).
TE_AMAX_SOURCE = ("https://github.com/NVIDIA/TransformerEngine/blob/main/transformer_engine/"
                  "common/util/vectorized_pointwise.h")
TE_SCALE_SOURCE = ("https://github.com/NVIDIA/TransformerEngine/blob/main/transformer_engine/"
                   "common/recipe/delayed_scaling.cu")
FP32_MAX = float(np.finfo(np.float32).max)


def amax(x) -> float:
    """A tensor's amax as Transformer Engine records it: the largest |x|, with NaN values left
    out (TE's cast kernels reduce with CUDA's ``fmaxf``, which returns the other argument when
    one is NaN, starting from 0). So an empty or all-NaN tensor gives 0, and a tensor holding
    inf gives inf. Sources: :data:`TE_AMAX_SOURCE` and the comment above it."""
    magnitudes = np.abs(np.asarray(x, dtype=np.float64)).ravel()
    magnitudes = magnitudes[~np.isnan(magnitudes)]
    return float(magnitudes.max()) if magnitudes.size else 0.0


def scale_from_history(amax_history, fp8_max: float, margin: int = 0) -> float | None:
    """Transformer Engine's delayed-scaling factor: fp8_max / max(amax_history) / 2^margin,
    so that the largest absolute value seen over the history lands 2^margin below the
    format's largest value. The tensor is multiplied by it before the cast to FP8 (and the
    result of a product divided by it after).

    As TE's update kernel (:data:`TE_SCALE_SOURCE`) does it: the history's maximum is taken
    with NaN entries left out (``fmaxf``, from 0); when that maximum is not a finite positive
    number — all zeros (nothing recorded yet), or inf (a step whose tensor overflowed, while
    that step is inside the history) — there is no new scale and None is returned: the caller
    keeps its previous scale, as TE does. A scale that would overflow fp32 (a tiny amax) is
    fp32's largest value, as TE's ``if (isinf(scale)) scale = FLT_MAX``."""
    largest = amax(amax_history)
    if not (largest > 0 and math.isfinite(largest)):
        return None
    scale = fp8_max / largest / 2.0**margin
    return min(scale, FP32_MAX)


# (amax, number of inf or NaN values) of one float32 array: what a fused reduction kernel gives
# (gpulab.kernels.amax). MixedPrecisionMLP and DelayedScaling take one to replace NumPy's.
TensorStats = Callable[[np.ndarray], tuple[float, int]]


class DelayedScaling:
    """One tensor's FP8 scaling state: its amax history and the scale in use.

    :meth:`cast` stores ``x * scale`` in the FP8 format (saturating) with the **current**
    scale, and records the tensor's amax (:func:`amax`: max|x| with NaN values left out, as
    Transformer Engine's cast kernels take it) as the newest entry of the history (the oldest
    drops out); :meth:`update`, once per training step after the backward pass, sets the scale
    for the next step from the whole history (:func:`scale_from_history`). So a step's cast
    uses a scale from earlier steps (``delayed``), and a spike in a tensor's range is seen by
    the next step's scale. The scale starts at 1.

    What a bad step does, as in TE: NaN values in a tensor do not enter its history, so they
    neither lower the scale nor stop it from updating; an inf does enter it (|inf| = inf), and
    while it is among the last ``history_len`` entries the history's maximum is inf and the
    scale stays where it was (TE's "amax == inf: set scale to the previous scale"), moving
    again once the inf has dropped out.

    ``tensor_stats``: where the amax comes from, a :data:`TensorStats` function (default: NumPy,
    :func:`amax`); chapter 10 passes one that launches a kernel
    (:func:`gpulab.kernels.amax.amax_and_nonfinite`).
    """

    def __init__(self, fmt: str = FP8_FORWARD,
                 history_len: int = DELAYED_SCALING_DEFAULTS["amax_history_len"],
                 margin: int = DELAYED_SCALING_DEFAULTS["margin"],
                 tensor_stats: TensorStats | None = None):
        self.fmt = formats.get_format(fmt)
        self.tensor_stats = tensor_stats
        if self.fmt.name not in ("fp8_e4m3", "fp8_e5m2"):
            raise ValueError(f"delayed scaling is for fp8_e4m3 and fp8_e5m2, not {fmt!r}")
        if isinstance(history_len, bool) or not isinstance(history_len, int) or history_len < 1:
            raise ValueError(f"history_len must be a positive whole number, not {history_len!r}")
        self.history = np.zeros(history_len)
        self.margin = int(margin)
        self.scale = 1.0
        self.scales: list[float] = []  # the scale used by each recorded cast

    def cast(self, x, record: bool = True) -> tuple[np.ndarray, float]:
        """(x * scale stored in FP8, 1 / scale). ``record=False`` (evaluation) leaves the
        history alone."""
        x32 = np.asarray(x, dtype=np.float32)
        stored = store(x32 * np.float32(self.scale), self.fmt.name, saturate=True)
        if record:
            recorded = amax(x32) if self.tensor_stats is None else self.tensor_stats(x32)[0]
            self.history = np.append(self.history[1:], recorded)
            self.scales.append(self.scale)
        return stored, 1.0 / self.scale

    def update(self) -> float:
        scale = scale_from_history(self.history, self.fmt.max_value, self.margin)
        if scale is not None:
            self.scale = scale
        return self.scale

    def __repr__(self) -> str:
        return (f"DelayedScaling({self.fmt.name}, scale={self.scale:.4g}, "
                f"history of {self.history.size}, margin={self.margin})")


# ---------------------------------------------------------------------------------------------
# Recipes
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Recipe:
    """Which format each layer's products run in, and what protects them (module docstring).

    ``compute``: "fp32", "bf16", "fp16" or "fp8". ``master_weights``: the optimiser updates
    fp32 copies (False: it updates the stored 16-bit weights). ``loss_scaling``: dynamic loss
    scaling (:class:`LossScaler`). ``fp8_keep``: for fp8, the layers kept in bf16 ("first",
    "last"). ``amax_history_len`` and ``margin``: fp8's delayed scaling.
    """

    key: str
    title: str
    compute: str
    master_weights: bool = True
    loss_scaling: bool = False
    fp8_keep: tuple[str, ...] = ()
    amax_history_len: int = 16
    margin: int = 0

    def __post_init__(self):
        if self.compute not in COMPUTE_FORMATS:
            raise ValueError(f"compute must be one of {', '.join(COMPUTE_FORMATS)}, not "
                             f"{self.compute!r}")
        unknown = set(self.fp8_keep) - {"first", "last"}
        if unknown:
            raise ValueError(f"fp8_keep may hold 'first' and 'last', not {sorted(unknown)}")
        if self.fp8_keep and self.compute != "fp8":
            raise ValueError("fp8_keep is for fp8 recipes")

    def layer_format(self, k: int, n_layers: int) -> str:
        """The format layer ``k``'s products run in."""
        if self.compute != "fp8":
            return self.compute
        kept = ("first" in self.fp8_keep and k == 0) or ("last" in self.fp8_keep
                                                          and k == n_layers - 1)
        return FP8_HIGH_PRECISION if kept else "fp8"

    @property
    def storage(self) -> str:
        """The format activations and gradients are stored in between layers."""
        return FP8_HIGH_PRECISION if self.compute == "fp8" else self.compute


RECIPES: dict[str, Recipe] = {
    "fp32": Recipe("fp32", "fp32", "fp32"),
    "bf16": Recipe("bf16", "bf16 + fp32 master weights", "bf16"),
    "fp16": Recipe("fp16", "fp16 + fp32 master weights + loss scaling", "fp16",
                   loss_scaling=True),
    "fp8": Recipe("fp8", "fp8 (E4M3/E5M2, delayed scaling) + fp32 master weights", "fp8"),
}
ABLATIONS: dict[str, Recipe] = {
    "fp16_no_scaling": Recipe("fp16_no_scaling", "fp16 + fp32 master weights, no loss scaling",
                              "fp16"),
    "bf16_no_master": Recipe("bf16_no_master", "bf16, no fp32 master weights", "bf16",
                             master_weights=False),
    "bf16_scaled": Recipe("bf16_scaled", "bf16 + fp32 master weights + loss scaling", "bf16",
                          loss_scaling=True),
    "fp8_keep_first": Recipe("fp8_keep_first", "fp8, first layer in bf16", "fp8",
                             fp8_keep=("first",)),
    "fp8_keep_last": Recipe("fp8_keep_last", "fp8, last layer in bf16", "fp8",
                            fp8_keep=("last",)),
    "fp8_keep_first_last": Recipe("fp8_keep_first_last", "fp8, first and last layers in bf16",
                                  "fp8", fp8_keep=("first", "last")),
}


def get_recipe(recipe) -> Recipe:
    """A :class:`Recipe`, or one from :data:`RECIPES` / :data:`ABLATIONS` by its key."""
    if isinstance(recipe, Recipe):
        return recipe
    found = {**RECIPES, **ABLATIONS}.get(recipe)
    if found is None:
        raise ValueError(f"no recipe {recipe!r}; the recipes are "
                         f"{', '.join([*RECIPES, *ABLATIONS])}")
    return found


def _bytes(fmt: str) -> int:
    return dtype_of(fmt).itemsize


# Chapter 09's calculator (gpulab.nn.memory) names each recipe's accounting so:
MEMORY_PRECISION = {"fp32": "fp32", "bf16": "bf16-mixed", "fp16": "fp16-mixed",
                    "fp8": "fp8-mixed"}


# ---------------------------------------------------------------------------------------------
# Speed: the roofline time of a step's matrix products
# ---------------------------------------------------------------------------------------------

HARDWARE_PRECISION = {"fp32": "fp32", "bf16": "bf16", "fp16": "fp16", "fp8": "fp8"}


def estimate_step_matmuls(recipe, widths, batch_size: int, gpu=hardware.COURSE_GPU):
    """An estimate by gpulab's GPU model (each estimate's ``label`` gives its promised band) of
    the matrix products of one training step of an MLP with ``widths`` on ``gpu``, each at the
    dense peak of its format's tensor cores (fp32: the CUDA cores' fp32 rate): forward, the
    gradient of the inputs (not for the first layer) and of the weights, per layer. Bytes:
    both operands in their format, the result in the storage format (fp32 for fp32). Returns
    (seconds, list of hardware.RooflineEstimate)."""
    recipe = get_recipe(recipe)
    gpu = hardware.get_gpu(gpu)
    widths = [int(w) for w in widths]
    n_layers = len(widths) - 1
    estimates = []
    B = int(batch_size)
    for k in range(n_layers):
        fmt = recipe.layer_format(k, n_layers)
        size_in = 1 if fmt == "fp8" else _bytes(fmt)
        size_out = _bytes(recipe.storage)
        n_in, n_out = widths[k], widths[k + 1]
        products = [(B, n_in, n_out)]  # forward: (B x n_in) @ (n_in x n_out)
        if k > 0:
            products.append((B, n_out, n_in))  # dX = dZ @ W^T
        products.append((n_in, B, n_out))  # dW = X^T @ dZ
        for M, K, N in products:
            estimates.append(hardware.estimate_time(
                gpu, 2 * M * N * K, (M * K + K * N) * size_in + M * N * size_out,
                HARDWARE_PRECISION[fmt]))
    return sum(e.time_s for e in estimates), estimates


# ---------------------------------------------------------------------------------------------
# The engines: where the arithmetic happens
# ---------------------------------------------------------------------------------------------


class EmulatedEngine:
    """NumPy and ml_dtypes on this CPU: the matrix products here (``order="blas"``: NumPy's
    BLAS in fp32; ``"kernel"``: added in the kernels' order, k = 0, 1, ..., bit for bit what
    they do), the rest on the NumPy backend (:class:`gpulab.nn.backends.NumpyBackend`)."""

    name = "emulated"

    def __init__(self, order: str = "blas"):
        if order not in ("blas", "kernel"):
            raise ValueError(f"order must be 'blas' or 'kernel', not {order!r}")
        self.order = order
        self.backend = get_backend("numpy")

    def describe(self, uses_bf16: bool = False) -> str:
        how = ("NumPy's BLAS, fp32 sums" if self.order == "blas"
               else "fp32 sums in the kernels' order")
        return (f"emulated with NumPy and ml_dtypes on this CPU (values stored in their formats; "
                f"products: {how})")

    def matmul(self, a, b, scale: float | None = None) -> np.ndarray:
        """widen(a) @ widen(b) with fp32 sums, times ``scale`` (fp8's 1 / (sa sb))."""
        if self.order == "kernel":
            c = reference.matmul_in_format(widen(a), widen(b), "fp32")
        else:
            c = widen(a) @ widen(b)
        if scale is not None:
            c = c * np.float32(scale)
        return c



class KernelEngine:
    """Chapter 04's kernels for the matrix products, the kernel backend for the rest."""

    name = "kernels"

    def __init__(self):
        self.backend = get_backend("kernels")

    def describe(self, uses_bf16: bool = False) -> str:
        """Where the work ran; ``uses_bf16``: say whether bf16 products ran on a kernel or were
        emulated by chapter 04's wrapper (no bf16 arithmetic in the simulator or before
        compute capability 8.0)."""
        from gpulab.kernels.narrow_formats import bf16_runs_here

        note = "" if bf16_runs_here() or not uses_bf16 else (
            " (bf16 products emulated with ml_dtypes by chapter 04's wrapper: no bf16 "
            "arithmetic here)")
        return (f"chapter 04's matmul kernels and the kernel backend, "
                f"{self.backend.where()}{note}")

    def matmul(self, a, b, scale: float | None = None) -> np.ndarray:
        from gpulab.kernels import narrow_formats as nf

        a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
        kinds = {a.dtype, b.dtype}
        if kinds == {np.dtype(np.float32)}:
            c = self.backend.to_host(self.backend.matmul(a, b))
        elif kinds == {_DTYPES["fp16"]}:
            c = nf.matmul_fp16(a, b, "fp32").value
        elif kinds == {_DTYPES["bf16"]}:
            c = nf.matmul_bf16(a, b).value
        elif kinds == {_DTYPES["fp8_e4m3"]}:
            return _launch_fp8_matmul(a, b, 1.0 if scale is None else scale)
        else:  # E4M3 x E5M2: every FP8 value is exactly an fp16 value
            c = nf.matmul_fp16(a.astype(np.float16), b.astype(np.float16), "fp32").value
        c = np.asarray(c, dtype=np.float32)
        if scale is not None:
            c = c * np.float32(scale)
        return c



def _launch_fp8_matmul(a_e4m3, b_e4m3, scale: float) -> np.ndarray:
    """(A @ B) * scale from E4M3 values with chapter 04's ``matmul_fp8_acc32``: the kernel
    reads 1-byte codes and decodes them through a 256-entry table."""
    from numba import cuda

    from gpulab.kernels import narrow_formats as nf

    M, N = a_e4m3.shape[0], b_e4m3.shape[1]
    block = nf.default_matmul_block()
    grid = (-(-N // block[0]), -(-M // block[1]))
    d_c = cuda.to_device(np.zeros((M, N), dtype=np.float32))
    nf.matmul_fp8_acc32[grid, block](
        cuda.to_device(np.ascontiguousarray(a_e4m3).view(np.uint8)),
        cuda.to_device(np.ascontiguousarray(b_e4m3).view(np.uint8)),
        cuda.to_device(formats.decode_table("fp8_e4m3")), np.float32(scale), d_c)
    return d_c.copy_to_host()


def get_engine(engine="emulated"):
    if isinstance(engine, (EmulatedEngine, KernelEngine)):
        return engine
    if engine == "emulated":
        return EmulatedEngine()
    if engine == "kernels":
        return KernelEngine()
    raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")


# ---------------------------------------------------------------------------------------------
# What a run records
# ---------------------------------------------------------------------------------------------


@dataclass
class GradientRecord:
    """Every gradient value the backward pass stored in a narrow format (or would have, for
    fp32), counted before rounding: a histogram of log2|g| (bins one power of two wide from
    :data:`HISTOGRAM_EDGES_LOG2`), how many non-zero values there were, how many rounded to 0
    (flushed: below half the format's smallest subnormal) and how many to inf."""

    fmt: str
    counts: np.ndarray = field(default_factory=lambda: np.zeros(HISTOGRAM_EDGES_LOG2.size - 1,
                                                                dtype=np.int64))
    below: int = 0  # non-zero values below the histogram's first edge
    nonzero: int = 0
    flushed: int = 0
    overflowed: int = 0

    def add(self, before: np.ndarray, after: np.ndarray) -> None:
        bits = np.ascontiguousarray(before, dtype=np.float32).ravel().view(np.uint32)
        exponent = ((bits >> 23) & 0xFF).astype(np.int64)
        nonzero = (bits & 0x7FFFFFFF) != 0
        finite = exponent != 0xFF
        self.nonzero += int(np.count_nonzero(nonzero))
        # floor(log2|g|) of a normal fp32 value is its exponent field - 127; fp32 subnormals
        # (field 0) lie below the histogram's first edge anyway
        bins = exponent[nonzero & finite] - 127 - HISTOGRAM_EDGES_LOG2[0]
        n_bins = HISTOGRAM_EDGES_LOG2.size - 1
        self.below += int(np.count_nonzero(bins < 0))
        self.counts += np.bincount(np.clip(bins[bins >= 0], 0, n_bins - 1), minlength=n_bins)
        after32 = widen(after).ravel()
        before32 = bits.view(np.float32)
        self.flushed += int(np.count_nonzero(nonzero & (after32 == 0)))
        self.overflowed += int(np.count_nonzero(np.isfinite(before32) & ~np.isfinite(after32)))

    @property
    def flushed_fraction(self) -> float:
        return self.flushed / self.nonzero if self.nonzero else 0.0


@dataclass
class MixedRun:
    """One recipe trained on the digits (:func:`train_mixed`)."""

    recipe: Recipe
    engine: str
    where: str
    widths: list[int]
    batch_size: int
    lr: float
    seed: int
    epochs: int
    train_loss: list[float] = field(default_factory=list)
    train_accuracy: list[float] = field(default_factory=list)  # per epoch, while training
    test_loss: list[float] = field(default_factory=list)
    test_accuracy: list[float] = field(default_factory=list)
    epoch_seconds: list[float] = field(default_factory=list)  # training only, no evaluation
    loss_scales: list[float] = field(default_factory=list)  # per step (1 without scaling)
    skipped: list[bool] = field(default_factory=list)  # per step
    updates_lost: list[float] = field(default_factory=list)  # per step, see train_mixed
    gradients: GradientRecord | None = None
    first_step_gradients: GradientRecord | None = None
    fp8_scales: dict[str, list[float]] = field(default_factory=dict)
    memory_measured: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    state: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    @property
    def final_accuracy(self) -> float:
        return self.test_accuracy[-1]

    @property
    def steps(self) -> int:
        return len(self.skipped)

    @property
    def skipped_steps(self) -> int:
        return int(sum(self.skipped))

    @property
    def flushed_fraction(self) -> float:
        return self.gradients.flushed_fraction if self.gradients else 0.0

    @property
    def mean_updates_lost(self) -> float:
        return float(np.mean(self.updates_lost)) if self.updates_lost else 0.0

    @property
    def label(self) -> str:
        return f"{self.recipe.title}: {self.where}"

    def summary(self) -> str:
        text = (f"{self.recipe.title:55s} held-out accuracy {100 * self.final_accuracy:5.1f} % "
                f"after {self.epochs} epochs")
        if self.recipe.loss_scaling:
            text += f"; {self.skipped_steps} of {self.steps} steps skipped"
        return text


# ---------------------------------------------------------------------------------------------
# The network: chapter 07's MLP with its arithmetic in the recipe's formats
# ---------------------------------------------------------------------------------------------


@dataclass
class _Pass:
    """What every layer's arithmetic shares during one pass of a :class:`MixedPrecisionMLP`."""

    gradients: GradientRecord | None = None  # where the stored gradients are counted
    record: bool = True  # fp8 casts record their amax (False: evaluation)
    loss_scale: float = 1.0  # the loss scaler's scale times loss_factor


def _store_gradient(g32, fmt: str, record: GradientRecord | None, keep: bool = False):
    """A gradient stored in ``fmt``, counted in ``record``; widened again unless ``keep``."""
    g32 = np.asarray(g32, dtype=np.float32)
    stored = store(g32, fmt)
    if record is not None:
        record.add(g32, stored)
    return stored if keep else widen(stored)


def _param_format(layer_format: str) -> str:
    """The format the products read a layer's W and b in (fp8 layers: bf16, cast to E4M3
    every pass by the layer's delayed scaling)."""
    return FP8_HIGH_PRECISION if layer_format == "fp8" else layer_format


class _LayerArithmetic:
    """What a :class:`gpulab.nn.layers.Dense` layer calls on its backend, for layer ``k`` of a
    :class:`MixedPrecisionMLP`: values stored in the recipe's formats, widened to fp32 to
    compute on the engine, rounded back where a kernel writes them (products and activations
    in the storage format, the weights' gradients in the weights' format, the inputs' in the
    storage format). An fp8 layer casts its input, weights and output gradient to FP8 with
    their own :class:`DelayedScaling` and keeps the casts (``casts``) for the backward pass."""

    def __init__(self, net: MixedPrecisionMLP, k: int):
        self.engine, self.backend, self.step = net.engine, net.engine.backend, net.pass_state
        self.fmt = net.formats[k]
        self.out_format = "fp32" if self.fmt == "fp32" else net.recipe.storage
        self.grad_format, self.param_format = net.grad_format, _param_format(self.fmt)
        self.master, self.weight_name = net.master, f"layer{k}.W"
        self.scaling = ({role: net.fp8[f"layer{k}.{role}"] for role in "xwg"}
                        if self.fmt == "fp8" else {})
        self.casts: dict[str, tuple[np.ndarray, float]] = {}  # role: (cast, 1 / its scale)
        self.cast_gradient = None  # the dZ that casts["g"] was cast from

    def asarray(self, value, dtype=None) -> np.ndarray:
        """A parameter as this layer stores it (:meth:`gpulab.nn.mlp.MLP.load_state`)."""
        return store(value, self.param_format)

    def _cast(self, role: str, x) -> tuple[np.ndarray, float]:
        self.casts[role] = self.scaling[role].cast(x, self.step.record)
        return self.casts[role]

    def _gradient_cast(self, dZ) -> tuple[np.ndarray, float]:
        """The E5M2 cast of dZ, made once for both backward products."""
        if self.cast_gradient is not dZ:
            self.cast_gradient = dZ
            self._cast("g", dZ)
        return self.casts["g"]

    def matmul(self, X, W) -> np.ndarray:
        """Z = X @ W with fp32 sums, written in the storage format. fp8: the E4M3 casts of the
        input and of the fp32 master weights (the stored ones without masters)."""
        if self.scaling:
            x = self._cast("x", X)
            w = self._cast("w", widen(W) if self.master is None
                           else self.master[self.weight_name])
            Z = self.engine.matmul(x[0], w[0], x[1] * w[1])
        else:
            Z = self.engine.matmul(store(X, self.fmt), W)
        return store(Z, self.out_format)

    def bias_activation(self, Z, b, activation: str) -> np.ndarray:
        be = self.backend
        return store(be.to_host(be.bias_activation(widen(Z), widen(b), activation)),
                     self.out_format)

    def bias_activation_backward(self, dA, Z, b, activation: str) -> np.ndarray:
        be = self.backend
        dZ = be.to_host(be.bias_activation_backward(dA, widen(Z), widen(b), activation))
        return widen(store(dZ, self.grad_format))

    def matmul_transposed_a(self, X, dZ) -> np.ndarray:
        """dW = X^T @ dZ in the weights' format (fp8: the kept E4M3 input and the E5M2 cast of
        dZ)."""
        if self.scaling:
            x, g = self.casts["x"], self._gradient_cast(dZ)
            dW = self.engine.matmul(np.ascontiguousarray(x[0].T), g[0], x[1] * g[1])
        else:
            dW = self.engine.matmul(np.ascontiguousarray(X.T), store(dZ, self.fmt))
        return _store_gradient(dW, self.param_format, self.step.gradients, keep=True)

    def bias_grad(self, dZ) -> np.ndarray:
        return _store_gradient(self.backend.to_host(self.backend.bias_grad(dZ)),
                               self.param_format, self.step.gradients, keep=True)

    def matmul_transposed_b(self, dZ, W) -> np.ndarray:
        """dX = dZ @ W^T, stored in the gradients' format and widened (fp8: the E5M2 cast of
        dZ and the kept E4M3 weights)."""
        if self.scaling:
            g, w = self._gradient_cast(dZ), self.casts["w"]
            dX = self.engine.matmul(g[0], np.ascontiguousarray(w[0].T), g[1] * w[1])
        else:
            dX = self.engine.matmul(store(dZ, self.fmt), np.ascontiguousarray(W.T))
        return _store_gradient(dX, self.grad_format, self.step.gradients)


class _LossArithmetic:
    """What :class:`gpulab.nn.mlp.MLP` and its loss call on the model's backend, for a
    :class:`MixedPrecisionMLP`: the batch stored as the first layer reads it, softmax and the
    loss in fp32 on the engine (as autocast runs them), and the loss's gradient multiplied by
    the loss scale and stored in the gradients' format."""

    def __init__(self, net: MixedPrecisionMLP):
        self.backend, self.name, self.step = net.engine.backend, net.engine.name, net.pass_state
        self.input_format = "fp32" if net.formats[0] == "fp8" else net.formats[0]
        self.grad_format = net.grad_format

    def asarray(self, X, dtype=None) -> np.ndarray:
        return store(np.asarray(X, dtype=np.float32), self.input_format)

    def to_host(self, array) -> np.ndarray:
        return np.asarray(array)

    def labels(self, labels) -> np.ndarray:
        return np.ascontiguousarray(labels, dtype=np.int64)

    def softmax_cross_entropy(self, logits, labels):
        probs, losses = self.backend.softmax_cross_entropy(logits, labels)
        return self.backend.to_host(probs), self.backend.to_host(losses)

    def softmax_cross_entropy_backward(self, probs, labels, scale: float) -> np.ndarray:
        d = self.backend.to_host(self.backend.softmax_cross_entropy_backward(probs, labels,
                                                                             scale))
        if self.step.loss_scale != 1.0:
            d = d * np.float32(self.step.loss_scale)
        return _store_gradient(d, self.grad_format, self.step.gradients)


class MixedPrecisionMLP(MLP):
    """Chapter 07's MLP (:class:`gpulab.nn.mlp.MLP`: the same layers, forward and backward
    pass, and initial weights for the same seed) trained under a recipe on an engine.

    What is its own: the arithmetic of every layer and of the loss in the recipe's formats
    (the layers' backends are ``_LayerArithmetic``, the model's ``_LossArithmetic``, both on
    the engine), the fp32 master weights, loss scaling and the Adam update. With master
    weights, ``master`` holds the parameters in fp32 and the layers' W and b the copies the
    products read (refreshed from the masters before every forward pass); without, the
    layers' are all there is.

    ``tensor_stats`` (a :data:`TensorStats` function; default NumPy): where the step's inf/NaN
    check of the gradients (all of them as one array) and the fp8 casts' amaxes come from.
    """

    def __init__(self, recipe, widths=DIGITS["widths"], seed: int = 0, engine="emulated",
                 lr: float = DIGITS["lr"], loss_scaler: LossScaler | None = None,
                 loss_factor: float = 1.0, tensor_stats: TensorStats | None = None):
        self.recipe = get_recipe(recipe)
        if not (math.isfinite(loss_factor) and loss_factor > 0):
            raise ValueError(f"loss_factor must be a positive number, not {loss_factor!r}")
        super().__init__(widths, DIGITS["activation"], "numpy", np.float32, seed)
        self.tensor_stats, self.loss_factor = tensor_stats, float(loss_factor)
        self.engine, self.lr, self.step_count = get_engine(engine), float(lr), 0
        self.formats = [self.recipe.layer_format(k, len(self.layers))
                        for k in range(len(self.layers))]
        self.grad_format = "fp32" if self.recipe.compute == "fp32" else self.recipe.storage
        initial = {name: param.astype(np.float32) for name, param, _ in self.parameters()}
        self.master = initial if self.recipe.master_weights or self.recipe.compute == "fp32" \
            else None
        self.adam_state = {n: (np.zeros(p.shape, np.float32), np.zeros(p.shape, np.float32))
                           for n, p in initial.items()}
        self.scaler = loss_scaler if loss_scaler is not None else (
            LossScaler() if self.recipe.loss_scaling else None)
        self.fp8 = {f"layer{k}.{role}": DelayedScaling(
            f, self.recipe.amax_history_len, self.recipe.margin, tensor_stats)
            for k, fmt in enumerate(self.formats) if fmt == "fp8"
            for role, f in (("x", FP8_FORWARD), ("w", FP8_FORWARD), ("g", FP8_BACKWARD))}
        self.pass_state = _Pass()
        for k, layer in enumerate(self.layers):
            layer.backend = _LayerArithmetic(self, k)
        self.backend = self.loss_function.backend = _LossArithmetic(self)
        self.load_state(initial)  # the stored copies

    @property
    def probs(self):
        """The last training batch's softmax probabilities (fp32)."""
        return self.loss_function.probs

    def copy(self, backend=None, dtype=None) -> MLP:
        """The network as a plain :class:`~gpulab.nn.mlp.MLP` on ``backend`` (default NumPy)
        in ``dtype`` (default float32): the fp32 master weights where the recipe keeps some,
        otherwise the stored 16- or 8-bit weights, widened exactly. Without the recipe: e.g. to
        evaluate the trained weights in full precision."""
        weights = self.master if self.master is not None else self.state()
        twin = MLP(self.widths, self.activation, backend or "numpy", dtype or np.float32,
                   self.seed, self.checkpointing)
        return twin.load_state({name: widen(value) for name, value in weights.items()})

    # -- forward and one training step --------------------------------------------------------

    def forward(self, X, record: bool = True) -> np.ndarray:
        """Logits (float32) of a batch. ``record``: fp8 casts record their amax (training)."""
        if self.master is not None and self.recipe.compute != "fp32":
            self.load_state(self.master)  # the per-step 16-bit copy of the fp32 master weights
        self.pass_state.record = record
        try:
            return widen(super().forward(X))
        finally:
            self.pass_state.record = True

    def train_step(self, X, y, gradients: GradientRecord | None = None) -> tuple[float, bool,
                                                                                  float]:
        """Forward, loss, backward (:class:`gpulab.nn.mlp.MLP`'s, in the recipe's formats),
        update on one batch. Returns (mean loss, step taken, fraction of the updates too small
        to change the stored 16-bit weight)."""
        scale = self.scaler.scale if self.scaler is not None else 1.0
        self.pass_state.gradients, self.pass_state.loss_scale = gradients, scale * self.loss_factor
        try:
            loss = self.loss(X, y)
            self.backward()
        finally:
            self.pass_state.gradients, self.pass_state.loss_scale = None, 1.0
        grads = [grad for _, _, grad in self.parameters()]
        if self.tensor_stats is None:
            found_inf = LossScaler.found_inf(grads)
        else:  # one pass over every gradient, as one array (GradScaler's fused check)
            found_inf = self.tensor_stats(np.concatenate([widen(g).ravel() for g in grads]))[1] > 0
        take = self.scaler.update(found_inf) if self.scaler is not None else not found_inf
        lost = 0.0
        if take:
            self.step_count += 1
            lost = self._update(scale)
        for meta in self.fp8.values():
            meta.update()
        return loss, take, lost

    def _update(self, scale: float) -> float:
        """Adam on the fp32 masters (or on the stored weights, widened, then rounded back).
        Returns the fraction of non-zero updates that leave the stored weight unchanged."""
        before, moved, new = {}, {}, {}
        for n, stored, grad in self.parameters():
            g = widen(grad)
            if scale != 1.0:
                g = g / np.float32(scale)
            current = self.master[n] if self.master is not None else widen(stored)
            new[n] = self._adam(current, g, *self.adam_state[n])
            before[n], moved[n] = stored, new[n] != current
        if self.master is not None:
            self.master.update(new)
        self.load_state(new)
        lost = sum(int(np.sum(moved[n] & (widen(after) == widen(before[n]))))
                   for n, after, _ in self.parameters())
        total = sum(int(np.sum(m)) for m in moved.values())
        return lost / total if total else 0.0

    def _adam(self, param, grad, m, v) -> np.ndarray:
        """One Adam step (PyTorch's defaults, epsilon times ``loss_factor``) on the engine's
        backend: ``m`` and ``v`` updated, the new parameter returned (``param`` unchanged)."""
        be = self.engine.backend
        d_param, d_grad, d_m, d_v = (be.asarray(np.array(a, dtype=np.float32))
                                     for a in (param, grad, m, v))
        be.adam(d_param, d_grad, d_m, d_v, self.step_count, self.lr, 0.9, 0.999,
                ADAM_EPS * self.loss_factor, 0.0)
        m[...], v[...] = be.to_host(d_m), be.to_host(d_v)
        return np.asarray(be.to_host(d_param), dtype=np.float32)

    # -- using it -----------------------------------------------------------------------------

    def evaluate(self, X, y) -> tuple[float, float]:
        """(mean loss, accuracy) on held-out data, forward in the recipe's formats."""
        logits = self.forward(X, record=False)
        _, losses = reference.softmax_cross_entropy(logits, y)
        return (float(np.mean(losses, dtype=np.float64)),
                float(np.mean(np.argmax(logits, axis=1) == np.asarray(y))))

    def state(self) -> dict[str, np.ndarray]:
        """The parameters the optimiser updates (fp32 masters, or the stored weights), as
        float32 copies."""
        if self.master is not None:
            return {n: widen(p).copy() for n, p in self.master.items()}
        return {n: widen(p).copy() for n, p, _ in self.parameters()}

    def memory_measured(self) -> dict[str, int]:
        """Bytes of the arrays this network holds after a training step, by kind (their
        ``nbytes``), named as chapter 09's calculator (:mod:`gpulab.nn.memory`) names them:
        parameters (the weights the products read: the 16-bit copies, plus the E4M3 casts
        of fp8 layers), gradients, master weights, optimiser state (Adam's m and v), and the
        activations the backward pass keeps (every layer's input, E4M3 in fp8 layers, and
        output Z, the logits, the probabilities, the per-sample losses and the labels)."""
        casts = [layer.backend.casts for layer in self.layers]
        parameters = sum(p.nbytes for _, p, _ in self.parameters())
        parameters += sum(c["w"][0].nbytes for c in casts if c)
        kept = sum((c["x"][0] if c else layer.X).nbytes + layer.Z.nbytes
                   for layer, c in zip(self.layers, casts, strict=True))
        loss = self.loss_function
        kept += sum(np.asarray(a).nbytes for a in (self.logits, loss.probs, loss.losses,
                                                   loss.labels) if a is not None)
        fp32 = self.recipe.compute == "fp32"
        return {"parameters": parameters,
                "gradients": sum(np.asarray(g).nbytes for _, _, g in self.parameters()),
                "optimiser state": sum(m.nbytes + v.nbytes for m, v in self.adam_state.values()),
                "master weights": 0 if (self.master is None or fp32) else
                sum(a.nbytes for a in self.master.values()),
                "activations": kept}

    def __repr__(self) -> str:
        return (f"MixedPrecisionMLP({' -> '.join(map(str, self.widths))}, "
                f"{self.recipe.title}, engine={self.engine.name!r})")


# ---------------------------------------------------------------------------------------------
# Training a recipe
# ---------------------------------------------------------------------------------------------


def train_mixed(recipe, data: Dataset | None = None, epochs: int = 5,
                batch_size: int = DIGITS["batch_size"], lr: float = DIGITS["lr"],
                seed: int = DIGITS["seed"], widths=DIGITS["widths"], engine="emulated",
                growth_interval: int = GRAD_SCALER_DEFAULTS["growth_interval"],
                init_scale: float = GRAD_SCALER_DEFAULTS["init_scale"],
                loss_factor: float = 1.0, max_steps: int | None = None,
                tensor_stats: TensorStats | None = None) -> MixedRun:
    """Train ``recipe`` on the digits (Adam, the chapter 07 recipe's initial weights and
    shuffling for ``seed``) and record what :class:`MixedRun` holds. ``max_steps`` stops
    early (a quick look). Every step's stored gradients go into ``run.gradients``, the first
    step's also into ``run.first_step_gradients``.

    ``loss_factor`` multiplies the loss (so every gradient) and Adam's epsilon by the same
    number. Computed exactly, that changes nothing (Adam divides each gradient by the root of
    its own running mean square, so the factor cancels), but the gradients the backward pass
    stores are ``loss_factor`` times smaller: chapter 10 uses 2^-20 to give the digits
    gradients as small as large models have, and shows what fp16 does with them.
    ``growth_interval`` and ``init_scale`` set the loss scaler (PyTorch's defaults: 2000 and
    2^16). ``tensor_stats``: see :class:`MixedPrecisionMLP`."""
    recipe = get_recipe(recipe)
    data = data or load_digits(seed=0)
    scaler = LossScaler(init_scale=init_scale, growth_interval=growth_interval) \
        if recipe.loss_scaling else None
    net = MixedPrecisionMLP(recipe, widths, seed, engine, lr, scaler, loss_factor, tensor_stats)
    grad_fmt = "fp32" if recipe.compute == "fp32" else recipe.storage
    run = MixedRun(recipe, net.engine.name, net.engine.describe("bf16" in net.formats),
                   list(net.widths), int(batch_size), float(lr), seed, int(epochs),
                   gradients=GradientRecord(grad_fmt),
                   first_step_gradients=GradientRecord(grad_fmt))
    rng = np.random.default_rng(seed)
    y_train = np.asarray(data.y_train)
    start = time.perf_counter()
    steps = 0
    for _ in range(int(epochs)):
        loss_sum = correct = 0.0
        epoch_start = time.perf_counter()
        for batch in minibatch_indices(len(y_train), int(batch_size), rng):
            record = run.gradients if steps else _Both(run.gradients, run.first_step_gradients)
            with np.errstate(over="ignore", invalid="ignore"):
                loss, take, lost = net.train_step(data.X_train[batch], y_train[batch], record)
            loss_sum += loss * len(batch)
            correct += float(np.sum(np.argmax(net.probs, axis=1) == y_train[batch]))
            run.loss_scales.append(net.scaler.history[-1][0] if net.scaler else 1.0)
            run.skipped.append(not take)
            run.updates_lost.append(lost)
            if steps == 0:  # a full batch (an epoch's last may be partial)
                run.memory_measured = net.memory_measured()
            steps += 1
            if max_steps is not None and steps >= max_steps:
                break
        run.train_loss.append(loss_sum / len(y_train))
        run.train_accuracy.append(correct / len(y_train))
        run.epoch_seconds.append(time.perf_counter() - epoch_start)
        test_loss, accuracy = net.evaluate(data.X_test, data.y_test)
        run.test_loss.append(test_loss)
        run.test_accuracy.append(accuracy)
        if max_steps is not None and steps >= max_steps:
            run.epochs = len(run.test_accuracy)
            break
    run.seconds = time.perf_counter() - start
    run.fp8_scales = {name: list(meta.scales) for name, meta in net.fp8.items()}
    run.state = net.state()
    return run


class _Both:
    """Two gradient records fed at once (the first step's)."""

    def __init__(self, *records):
        self.records = records

    def add(self, before, after):
        for record in self.records:
            record.add(before, after)


# ---------------------------------------------------------------------------------------------
# One real step on the kernels against the emulation
# ---------------------------------------------------------------------------------------------


@dataclass
class EngineComparison:
    """One training step of the same network from the same weights on two engines."""

    recipe: str
    widths: list[int]
    batch_size: int
    loss_kernels: float
    loss_emulated: float
    max_difference: float  # largest |parameter difference| after the step
    worst: str
    identical: bool  # every parameter bit for bit
    where: str

    @property
    def matches(self) -> bool:
        return self.max_difference <= 1e-6 and math.isclose(
            self.loss_kernels, self.loss_emulated, rel_tol=1e-5, abs_tol=1e-6)

    def __str__(self) -> str:
        same = ("identical, bit for bit" if self.identical
                else f"largest parameter difference {self.max_difference:.2e} ({self.worst})")
        return (f"one {self.recipe} step, widths {self.widths}, batch {self.batch_size}: loss "
                f"{self.loss_kernels:.6f} (kernels) vs {self.loss_emulated:.6f} (emulated); "
                f"parameters after the update: {same}. Kernels: {self.where}.")


def compare_engines(recipe, X, y, widths=(64, 16, 10), seed: int = 0,
                    lr: float = DIGITS["lr"]) -> EngineComparison:
    """One step of ``recipe`` on the kernels and emulated in the kernels' order of additions,
    from the same weights on the same batch. In the simulator keep it small (a batch of 8,
    widths (64, 16, 10): about a second)."""
    recipe = get_recipe(recipe)
    runs = {}
    for name, engine in (("kernels", KernelEngine()),
                         ("emulated", EmulatedEngine(order="kernel"))):
        net = MixedPrecisionMLP(recipe, widths, seed, engine, lr)
        with np.errstate(over="ignore", invalid="ignore"):
            loss, _, _ = net.train_step(np.asarray(X, np.float32), np.asarray(y))
        runs[name] = (loss, net.state(), engine.describe("bf16" in net.formats))
    got, want = runs["kernels"][1], runs["emulated"][1]
    gaps = {n: float(np.max(np.abs(got[n].astype(np.float64) - want[n]))) for n in want}
    worst = max(gaps, key=gaps.get)
    return EngineComparison(recipe.key, list(widths), len(y), runs["kernels"][0],
                            runs["emulated"][0], gaps[worst], worst,
                            all(np.array_equal(got[n], want[n]) for n in want), runs["kernels"][2])


__all__ = [
    "ABLATIONS", "COMPUTE_FORMATS", "DELAYED_SCALING_DEFAULTS", "ENGINES", "FP8_BACKWARD",
    "FP8_FORWARD", "FP8_HIGH_PRECISION", "GRAD_SCALER_DEFAULTS", "HISTOGRAM_EDGES_LOG2",
    "RECIPES", "DelayedScaling", "EmulatedEngine", "EngineComparison", "GradientRecord",
    "KernelEngine", "LossScaler", "MEMORY_PRECISION", "MixedPrecisionMLP", "MixedRun", "Recipe",
    "TE_AMAX_SOURCE", "TE_SCALE_SOURCE", "TensorStats", "amax", "compare_engines", "dtype_of",
    "estimate_step_matmuls", "get_engine", "get_recipe",
    "scale_from_history", "store", "train_mixed", "widen",
]
