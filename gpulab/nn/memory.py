"""Where the bytes go when a network trains (or serves): a calculator of device memory by kind.

Training holds, on the device:

- **parameters**: the weights the forward pass reads (fp8 recipes add an fp8 copy of them);
- **gradients**: one per parameter, written by the backward pass;
- **optimiser state**: none for plain SGD, one tensor for SGD with momentum (the velocity), two
  for Adam (the running averages m and v of the gradient and of its square);
- **master weights**: under mixed precision, an fp32 copy of the weights that the optimiser
  updates (a 16-bit weight cannot absorb a tiny update: chapter 04's swamping);
- **activations**: what the forward pass keeps for the backward pass; they grow with the batch;
- **workspace**: temporaries that live only inside one operation (a backward pass's dZ and dX,
  an optimiser's intermediate arrays);
- **runtime overhead**: what the CUDA runtime takes before any tensor exists (the context:
  driver state, the kernels' code, per-thread stacks) plus a framework's libraries. It is an
  **estimate** (:data:`RUNTIME_OVERHEAD_BYTES`, with its source), not something this module
  can count.

Inference holds the parameters, the **KV cache** of a transformer (the keys and values of
every token so far, per layer) and a little workspace.

Two kinds of model:

- the course's MLP (:func:`mlp_training_memory`): given its widths (or the
  :class:`~gpulab.nn.mlp.MLP` itself), the bytes exactly as gpulab's layers keep them
  (:func:`mlp_activation_values`); chapter 09 checks the prediction against the bytes a real
  training step allocates;
- a GPT-style transformer (:class:`TransformerShape`, :func:`transformer_training_memory`,
  :func:`inference_memory`), from published formulas:

  * parameters: 12·L·h² for the layers (attention 4h², MLP 8h²) + 13·L·h biases and layer
    norms + V·h token and s·h position embeddings (Narayanan et al., "Efficient Large-Scale
    Language Model Training on GPU Clusters Using Megatron-LM", SC 2021, section 5.1);
  * activations per layer (Korthikanti et al., "Reducing Activation Recomputation in Large
    Transformer Models", MLSys 2023, arXiv:2205.05198, section 4, no tensor or sequence
    parallelism): s·b·h·(34 + 5·a·s/h) bytes with 16-bit activations and 1-byte dropout
    masks; 34·s·b·h with selective recomputation (the attention scores, 5·a·s²·b, are
    recomputed); 2·s·b·h with full recomputation (only each layer's input is kept);
  * mixed-precision Adam: 16 bytes per parameter, 2 (fp16 weights) + 2 (fp16 gradients) + 12
    (fp32 master weights, m and v), and ZeRO's sharding of those across N ranks (Rajbhandari
    et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models", SC 2020,
    section 3 and Figure 1: 7.5 B parameters need 120 GB before activations;
    :func:`zero_bytes_per_parameter`).

Every result is a :class:`MemoryBreakdown`: bytes per kind, the total, a printable table.
:class:`OutOfDeviceMemory` is the error a memory budget raises (the trainer's
``device_memory_bytes``): its message is the breakdown and the remedies.

Units: bytes. Datasheets print memory as a nominal size in gigabytes, read here as decimal
(1 GB = 10⁹ bytes, :data:`gpulab.hardware.GB`); operating systems and many tools print GiB
(2³⁰ bytes): 80 GB is 74.5 GiB. The driver reports a little more than that reading (81,559 MiB
= 79.6 GiB for an H100 80GB, through NVML), so the calculator errs on the safe side; `gpulab
info` prints what the driver reports, and the CUDA context takes part of it.
"""

from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass, field

from gpulab import hardware
from gpulab.tables import Column, ShownAsTable, Table

GIB = 2**30
MIB = 2**20
LABEL_BYTES = 8  # the MLP's labels are int64

# Bytes per stored value of each storage format.
FORMAT_BYTES = {"fp64": 8, "fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}

# Tensors of optimiser state per parameter. "sgd" is the course's SGD *with momentum* (one
# velocity, as gpulab.nn.optimisers.SGD keeps); "none" is plain SGD, which keeps nothing.
OPTIMISER_STATE_TENSORS = {"none": 0, "sgd": 1, "momentum": 1, "adam": 2}

RUNTIME_OVERHEAD_BYTES = 1e9
RUNTIME_OVERHEAD_SOURCE = (
    "An estimate, not a measurement: the CUDA context (driver state, the loaded kernels' code, "
    "per-thread stacks and buffers) takes a few hundred MB of device memory before any array "
    "exists, more when many kernels are loaded (CUDA Programming Guide, 'Lazy Loading': "
    "loading kernels on first use exists to shrink it, https://docs.nvidia.com/cuda/"
    "cuda-programming-guide/04-special-topics/lazy-loading.html); a framework's libraries "
    "(cuBLAS, cuDNN, NCCL) add more, and the Hugging Face Ultra-Scale Playbook puts PyTorch's "
    "CUDA kernels at 1-2 GB (https://huggingface.co/spaces/nanotron/ultrascale-playbook). "
    "gpulab uses 1 GB, the low end; on a GPU, chapter 09 measures what numba's context takes."
)


# --- number formats: what each kind is stored in -----------------------------------------------


@dataclass(frozen=True)
class Precision:
    """Bytes per value of each kind of training memory under one precision recipe."""

    name: str
    weights: float  # the weights the forward pass reads
    weight_copies: float  # extra copies in a narrower format (fp8 recipes)
    gradients: float
    master: float  # the fp32 master copy the optimiser updates; 0 if the weights are it
    state: float  # per optimiser state tensor
    activations: float  # a saved activation value
    matmul_inputs: float  # a saved input of a matmul (fp8 recipes keep those in fp8)
    description: str


PRECISIONS: dict[str, Precision] = {
    "fp64": Precision("fp64", 8, 0, 8, 0, 8, 8, 8, "float64 everywhere"),
    "fp32": Precision("fp32", 4, 0, 4, 0, 4, 4, 4, "float32 everywhere (the course's MLP)"),
    "bf16-mixed": Precision(
        "bf16-mixed", 2, 0, 2, 4, 4, 2, 2,
        "mixed precision: bf16 weights, gradients and activations; fp32 master weights and "
        "optimiser state (Micikevicius et al., 'Mixed Precision Training', ICLR 2018; the "
        "accounting of ZeRO, section 3.1)"),
    "fp16-mixed": Precision(
        "fp16-mixed", 2, 0, 2, 4, 4, 2, 2,
        "mixed precision as bf16-mixed, with fp16 (and a loss scale, chapter 10)"),
    "fp8-mixed": Precision(
        "fp8-mixed", 2, 1, 2, 4, 4, 2, 1,
        "FP8 the Transformer Engine way, one common setup (an estimate): bf16 weights plus an "
        "fp8 copy for the matmuls, bf16 gradients, fp32 master weights and optimiser state; "
        "the matmuls' saved inputs in fp8, other activations in bf16"),
}
PRECISION_ALIASES = {"mixed": "bf16-mixed", "float32": "fp32", "float64": "fp64",
                     "fp8": "fp8-mixed", "bf16": "bf16-mixed", "fp16": "fp16-mixed"}


def get_precision(precision: str | Precision) -> Precision:
    """A :class:`Precision` from its name ("fp32", "bf16-mixed", "fp16-mixed", "fp8-mixed",
    "fp64"; "mixed" is bf16-mixed)."""
    if isinstance(precision, Precision):
        return precision
    key = str(precision).strip().lower()
    key = PRECISION_ALIASES.get(key, key)
    if key not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    return PRECISIONS[key]


def state_tensors(optimiser) -> int:
    """Optimiser state tensors per parameter: "none" 0, "sgd"/"momentum" 1, "adam" 2 (also
    accepts a gpulab optimiser object, by its ``name``)."""
    name = getattr(optimiser, "name", optimiser)
    key = str(name).strip().lower()
    if key not in OPTIMISER_STATE_TENSORS:
        raise ValueError(f"optimiser must be one of {', '.join(OPTIMISER_STATE_TENSORS)}, "
                         f"not {optimiser!r}")
    return OPTIMISER_STATE_TENSORS[key]


def format_bytes(n: float) -> str:
    """'1.23 MB', '80 GB' (decimal units, as datasheets), '512 B'."""
    n = float(n)
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:,.3g} {unit}" if n / size < 1000 else f"{n / size:,.0f} {unit}"
    return f"{n:,.0f} B"


# --- the breakdown ------------------------------------------------------------------------------

KINDS = ("parameters", "gradients", "optimiser state", "master weights", "activations",
         "KV cache", "workspace", "runtime overhead")
_FIELD_OF_KIND = dict(zip(KINDS, ("parameters", "gradients", "optimiser_state",
                                  "master_weights", "activations", "kv_cache", "workspace",
                                  "overhead"), strict=True))


@dataclass(frozen=True, repr=False)
class MemoryBreakdown(ShownAsTable):
    """Bytes on the device by kind, for one model, batch, precision and optimiser.

    ``print(breakdown)`` shows the table (a notebook: its HTML); ``breakdown.total`` is the sum;
    ``breakdown.as_dict()`` maps each kind (:data:`KINDS`) to its bytes."""

    model: str
    purpose: str  # "training" or "inference"
    batch_size: int
    precision: str
    optimiser: str
    n_parameters: float
    parameters: float = 0.0
    gradients: float = 0.0
    optimiser_state: float = 0.0
    master_weights: float = 0.0
    activations: float = 0.0
    kv_cache: float = 0.0
    workspace: float = 0.0
    overhead: float = 0.0
    notes: tuple[str, ...] = field(default=(), compare=False)

    def as_dict(self) -> dict[str, float]:
        return {kind: getattr(self, name) for kind, name in _FIELD_OF_KIND.items()}

    @property
    def total(self) -> float:
        return float(sum(self.as_dict().values()))

    @property
    def held(self) -> float:
        """What stays allocated between steps: everything but workspace and overhead."""
        return self.total - self.workspace - self.overhead

    @property
    def model_state(self) -> float:
        """Parameters, gradients, optimiser state and master weights: what does not depend on
        the batch (ZeRO's "model states")."""
        return self.parameters + self.gradients + self.optimiser_state + self.master_weights

    @property
    def bytes_per_parameter(self) -> float:
        """Model-state bytes per parameter: 16 for mixed-precision Adam."""
        return self.model_state / self.n_parameters if self.n_parameters else 0.0

    def fits(self, memory_bytes: float) -> bool:
        return self.total <= memory_bytes

    def replace(self, **changes) -> MemoryBreakdown:
        return dataclasses.replace(self, **changes)

    def table(self) -> Table:
        """One row per kind (bytes, the same in decimal units, share of the total), the total,
        the notes underneath."""
        total = self.total
        rows = [[kind, value, format_bytes(value), 100 * value / total] if value else
                [kind, None, None, None] for kind, value in self.as_dict().items()]
        rows.append(["total", total, f"{format_bytes(total)} ({total / GIB:,.3g} GiB)", None])
        return Table([Column("kind"), Column("bytes", "B", "{:,.0f}"), Column("size"),
                      Column("share", "%", "{:.1f}")], rows,
                     title=f"{self.purpose} memory of {self.model}, batch {self.batch_size}, "
                           f"{self.precision}" + (f", {self.optimiser}" if self.optimiser else ""),
                     notes=[f"note: {note}" for note in self.notes])


# --- the course's MLP ------------------------------------------------------------------------


def _widths_of(model) -> list[int]:
    widths = getattr(model, "widths", model)
    try:
        widths = [int(w) for w in widths]
    except (TypeError, ValueError):
        raise ValueError(f"give the MLP's widths (e.g. [64, 128, 10]) or the MLP, not "
                         f"{model!r}") from None
    if len(widths) < 2 or min(widths) < 1:
        raise ValueError(f"widths must list at least two positive sizes, not {widths}")
    return widths


def _positive_int(what: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{what} must be a positive whole number, not {value!r}")
    return int(value)


def mlp_parameters(widths) -> int:
    """Weights and biases of an MLP: sum of n_in·n_out + n_out over its layers."""
    widths = _widths_of(widths)
    return sum(a * b + b for a, b in zip(widths[:-1], widths[1:], strict=True))


def mlp_activation_parts(widths, batch_size: int, checkpointing: bool) -> tuple[int, int]:
    """The values the course's MLP keeps for its backward pass, in two groups: (the matmuls'
    inputs: the batch and every hidden layer's output A; the rest: every layer's Z unless
    ``checkpointing``, the logits, the probabilities, one loss per sample). See
    :func:`mlp_activation_values`."""
    widths, B = _widths_of(widths), _positive_int("batch_size", batch_size)
    inputs = widths[0] + sum(widths[1:-1])  # every layer's input X: the batch, hidden outputs
    other = 2 * widths[-1] + 1  # logits, probabilities, one loss per sample
    if not checkpointing:
        other += sum(widths[1:])  # every layer's matmul output Z
    return B * inputs, B * other


def mlp_activation_values(widths, batch_size: int, checkpointing: bool = False) -> int:
    """Values (not bytes) the course's MLP keeps for the backward pass, per batch: the input
    batch (B·widths[0]); every layer's matmul output Z (B·n_out); every hidden layer's output
    A, which is the next layer's input (B·n_out); the logits and the probabilities (B·C each);
    one loss per sample (B). With ``checkpointing`` the Zs are not kept: the backward pass
    recomputes each layer's X @ W from its input. The labels (int64) are counted separately.
    """
    return sum(mlp_activation_parts(widths, batch_size, checkpointing))


def mlp_workspace_values(widths, batch_size: int, optimiser="adam",
                         backend: str = "numpy", checkpointing: bool = False) -> int:
    """Values of the largest set of temporaries alive at once inside a step (an estimate read
    from the code, checked against measurements in chapter 09):

    - backward pass of a hidden layer: dA, f'(Z + b) and dZ, three B·n_out arrays at once
      (four with ``checkpointing``: the recomputed Z too);
    - the update, NumPy backend (:mod:`gpulab.reference`, written for clarity, not in place):
      Adam's expression holds about 7 temporaries the size of the tensor it updates, SGD's 4;
      the kernel backend updates in place (none), but copies X and W transposed for the
      backward matmuls.
    The largest of these, for the largest layer and parameter tensor."""
    widths, B = _widths_of(widths), _positive_int("batch_size", batch_size)
    largest_out = max(widths[1:-1], default=widths[-1])
    largest_tensor = max(a * b for a, b in zip(widths[:-1], widths[1:], strict=True))
    backward = (4 if checkpointing else 3) * B * largest_out
    if backend == "numpy":
        update = {0: 0, 1: 4, 2: 7}[state_tensors(optimiser)] * largest_tensor
    elif backend == "kernels":
        update = 0
        backward += max(B * a + a * b for a, b in zip(widths[:-1], widths[1:], strict=True))
    else:
        raise ValueError(f"backend must be 'numpy' or 'kernels', not {backend!r}")
    return max(backward, update)


def _precision_of_model(model, precision):
    if precision is not None:
        return get_precision(precision)
    dtype = getattr(model, "dtype", None)
    if dtype is not None and getattr(dtype, "itemsize", 4) == 8:
        return PRECISIONS["fp64"]
    return PRECISIONS["fp32"]


def mlp_training_memory(model, batch_size: int, optimiser="adam", precision=None,
                        checkpointing: bool | None = None, accumulation_steps: int = 1,
                        backend: str | None = None, overhead_bytes: float = 0.0
                        ) -> MemoryBreakdown:
    """One training step of the course's MLP (``model``: its widths, or the
    :class:`~gpulab.nn.mlp.MLP`, whose dtype, checkpointing and backend are then used).

    With ``accumulation_steps`` k, each step runs k micro-batches of ⌈batch/k⌉ samples: the
    activations are those of one micro-batch. ``overhead_bytes``: the runtime's share (0 for
    the simulator, which has no CUDA context; :data:`RUNTIME_OVERHEAD_BYTES` for a GPU)."""
    widths = _widths_of(model)
    B = _positive_int("batch_size", batch_size)
    k = _positive_int("accumulation_steps", accumulation_steps)
    p = _precision_of_model(model, precision)
    if checkpointing is None:
        checkpointing = bool(getattr(model, "checkpointing", False))
    if backend is None:
        backend = getattr(getattr(model, "backend", None), "name", "numpy")
    micro = -(-B // k)
    P = mlp_parameters(widths)
    n_state = state_tensors(optimiser)
    inputs, other = mlp_activation_parts(widths, micro, checkpointing)
    notes = []
    workspace = mlp_workspace_values(widths, micro, optimiser, backend, checkpointing)
    workspace *= p.activations
    if k > 1:
        # while the micro-batches run: the whole batch's inputs and labels, and each
        # micro-batch's gradients next to the running sum
        workspace += (B - micro) * (widths[0] * p.matmul_inputs + LABEL_BYTES)
        workspace += P * p.gradients
        notes.append(f"{k} micro-batches of up to {micro} samples: activations of one "
                     "micro-batch; workspace: the whole batch's inputs and one more copy of "
                     "the gradients")
    if checkpointing:
        notes.append("activation checkpointing: each layer's Z is recomputed in the backward "
                     "pass, not kept")
    name = f"MLP {'-'.join(map(str, widths))}"
    return MemoryBreakdown(
        model=name, purpose="training", batch_size=B, precision=p.name,
        optimiser=str(getattr(optimiser, "name", optimiser)), n_parameters=P,
        parameters=P * (p.weights + p.weight_copies), gradients=P * p.gradients,
        optimiser_state=P * n_state * p.state, master_weights=P * p.master,
        activations=inputs * p.matmul_inputs + other * p.activations + micro * LABEL_BYTES,
        workspace=workspace,
        overhead=overhead_bytes, notes=tuple(notes))


BATCH_SIZES = (8, 16, 32, 64, 128, 256, 512, 1024)


def largest_batch_within(budget_bytes: float, model=(64, 128, 10), optimiser="adam",
                         precision=None, candidates=BATCH_SIZES) -> int | None:
    """The largest of ``candidates`` whose training step of the MLP ``model`` (its widths, or
    the MLP) fits in ``budget_bytes`` by :func:`mlp_training_memory` (its total: what is held
    and the step's workspace); None if not even the smallest fits."""
    fitting = [b for b in sorted(candidates)
               if mlp_training_memory(model, b, optimiser, precision).total <= budget_bytes]
    return fitting[-1] if fitting else None


# --- a GPT-style transformer -------------------------------------------------------------------

RECOMPUTE = ("none", "selective", "full")
ATTENTION = ("flash", "stored")


@dataclass(frozen=True)
class TransformerShape:
    """A decoder-only transformer: ``layers`` blocks of attention (``heads`` heads, ``kv_heads``
    of them for keys and values: fewer with grouped-query attention) and an MLP of width
    ``ffn_hidden`` (default 4h), hidden size ``hidden``, context ``seq_len`` tokens,
    vocabulary ``vocab``.

    Two families are described by the flags:

    - GPT-2/3: a 4h MLP with GeLU, biases on every linear layer, LayerNorms (weight and bias),
      learned position embeddings, the output layer tied to the token embedding, dropout;
    - Llama: a gated MLP (SwiGLU: gate, up and down matrices, ``gated_mlp``) of width
      ``ffn_hidden``, no biases, RMSNorms (a weight only), rotary positions (no embedding
      table), a separate output matrix, no dropout.

    :attr:`n_parameters` counts the architecture's tensors (:attr:`formula_parameters`); the
    name keeps the size its authors call it ("Llama 2 70B" has 68.98 B).
    ``published_parameters`` replaces the count, for a model known only by its size (ZeRO's
    7.5 B example)."""

    name: str
    layers: int
    hidden: int
    heads: int
    seq_len: int
    vocab: int
    kv_heads: int | None = None
    published_parameters: float | None = None
    source: str = ""
    ffn_hidden: int | None = None
    gated_mlp: bool = False
    biases: bool = True
    learned_positions: bool = True
    tied_embeddings: bool = True
    dropout: bool = True

    def __post_init__(self):
        for what in ("layers", "hidden", "heads", "seq_len", "vocab"):
            _positive_int(what, getattr(self, what))
        if self.kv_heads is not None and not 1 <= self.kv_heads <= self.heads:
            raise ValueError(f"kv_heads must be between 1 and heads, not {self.kv_heads}")
        if self.ffn_hidden is not None:
            _positive_int("ffn_hidden", self.ffn_hidden)

    @property
    def mlp_width(self) -> int:
        """The MLP's inner width: ``ffn_hidden``, or 4h."""
        return self.ffn_hidden if self.ffn_hidden is not None else 4 * self.hidden

    @property
    def kv_hidden(self) -> float:
        """Width of the keys (and of the values): h·kv_heads/heads."""
        return self.hidden * (self.kv_heads or self.heads) / self.heads

    @property
    def block_parameters(self) -> int:
        """One block's parameters: Q and the output projection (h² each), K and V (h·h_kv
        each), the MLP's matrices (2·h·f, or 3·h·f gated), their biases if any, and two norms
        (2h each for LayerNorm, h for RMSNorm). 12·h² + 13·h for GPT."""
        h, f, kv = self.hidden, self.mlp_width, int(self.kv_hidden)
        matrices = 2 * h * h + 2 * h * kv + (3 if self.gated_mlp else 2) * h * f
        biases = (2 * h + 2 * kv + (2 * f if self.gated_mlp else f) + h) if self.biases else 0
        norms = 2 * (2 * h if self.biases else h)
        return matrices + biases + norms

    @property
    def layer_parameters(self) -> int:
        """The blocks' matrices alone: 12·L·h² for GPT (attention 4h², MLP 8h²)."""
        h, f, kv = self.hidden, self.mlp_width, int(self.kv_hidden)
        return self.layers * (2 * h * h + 2 * h * kv + (3 if self.gated_mlp else 2) * h * f)

    @property
    def formula_parameters(self) -> int:
        """Every tensor of the architecture: L blocks, the token embedding (V·h; the output
        layer another V·h unless tied), learned positions (s·h) and the final norm. For GPT:
        12·L·h² + 13·L·h + V·h + s·h + 2h."""
        h = self.hidden
        embeddings = self.vocab * h * (1 if self.tied_embeddings else 2)
        positions = self.seq_len * h if self.learned_positions else 0
        final_norm = 2 * h if self.biases else h
        return self.layers * self.block_parameters + embeddings + positions + final_norm

    @property
    def n_parameters(self) -> float:
        return (self.published_parameters if self.published_parameters is not None
                else self.formula_parameters)

    def __str__(self) -> str:
        return self.name


def _check_parallel(tensor_parallel, sequence_parallel) -> int:
    t = _positive_int("tensor_parallel", tensor_parallel)
    if sequence_parallel and t == 1:
        raise ValueError("sequence_parallel shards what tensor parallelism replicates: it "
                         "needs tensor_parallel > 1")
    return t


def activation_bytes_per_layer(seq_len: int, batch_size: int, hidden: int, heads: int,
                               recompute: str = "none", precision="bf16-mixed",
                               mask_bytes: float = 1, *, attention: str = "flash",
                               kv_heads: int | None = None, ffn_hidden: int | None = None,
                               gated_mlp: bool = False, dropout: bool = True,
                               tensor_parallel: int = 1,
                               sequence_parallel: bool = False) -> float:
    """Bytes one transformer layer keeps for the backward pass, on one GPU, counted tensor by
    tensor (Korthikanti et al. 2022, section 4) so that any format and shape works:

    - attention: the QKV matmul's input (h), Q (h), K and V (h_kv each), the output
      projection's input (h); with ``attention="stored"`` also the softmax output and the
      dropout output (a·s values per token each) and the dropout mask (a·s bytes per token);
      with ``attention="flash"`` (FlashAttention, PyTorch's SDPA) the a·s² scores are never
      stored: the backward pass recomputes them from Q, K, V and keeps only the softmax's
      log-sum-exp (a fp32 values per token), and the dropout mask is regenerated from its seed;
    - MLP: its input (h) and the activation's input and output (f each; a gated MLP keeps the
      gate's and the up projection's outputs and their product, 3·f); a dropout mask (h bytes);
    - the two layer norms' inputs (2h) and the attention-output dropout mask (h bytes).

    With 2-byte values, 1-byte masks, MHA, a 4h MLP, stored scores: s·b·h·(34 + 5·a·s/h), the
    paper's equation (1). ``recompute="selective"`` drops the a·s² terms (recomputed): 34·s·b·h;
    ``"full"`` keeps only the layer's input: 2·s·b·h.

    ``tensor_parallel`` t (Megatron's, chapter 11) splits the heads and the MLP's width over
    t GPUs: what sits between the column- and row-parallel matmuls is divided by t, the rest
    (layer-norm inputs, the blocks' inputs, dropout masks after the row-parallel matmuls) is
    replicated: s·b·h·(10 + 24/t + 5·a·s/(h·t)), equation (2). ``sequence_parallel`` also
    splits the replicated part along the sequence: s·b·h·(34 + 5·a·s/h)/t, equation (4)."""
    s, b, h, a = (_positive_int(w, v) for w, v in (("seq_len", seq_len),
                                                     ("batch_size", batch_size),
                                                     ("hidden", hidden), ("heads", heads)))
    if recompute not in RECOMPUTE:
        raise ValueError(f"recompute must be one of {', '.join(RECOMPUTE)}, not {recompute!r}")
    if attention not in ATTENTION:
        raise ValueError(f"attention must be one of {', '.join(ATTENTION)}, not {attention!r}")
    t = _check_parallel(tensor_parallel, sequence_parallel)
    p = get_precision(precision)
    tokens = s * b
    replicated_share = 1 / t if sequence_parallel else 1.0
    if recompute == "full":
        return tokens * h * p.activations * replicated_share
    kv = h * (kv_heads or a) / a
    f = ffn_hidden if ffn_hidden is not None else 4 * h
    mask = mask_bytes if dropout else 0
    # (matmul inputs, other values, mask bytes, fp32 values) per token, replicated and sharded
    replicated = (2 * h, 2 * h, 2 * h * mask, 0)  # QKV and MLP inputs; two norms; two masks
    sharded_inputs = h + f  # the projection's input; the MLP's last matmul's input
    sharded_other = h + 2 * kv + (2 * f if gated_mlp else f)  # Q, K, V; GeLU in / gate and up
    sharded_masks, sharded_fp32 = 0.0, 0.0
    if recompute == "none" and attention == "stored":
        sharded_other += (2 if dropout else 1) * a * s  # softmax output (and dropout output)
        sharded_masks += a * s * mask
    elif recompute == "none":  # flash
        sharded_fp32 += a  # the log-sum-exp of each query's scores

    def bytes_of(inputs, other, masks, fp32):
        return inputs * p.matmul_inputs + other * p.activations + masks + fp32 * 4
    per_token = (bytes_of(*replicated) * replicated_share
                 + bytes_of(sharded_inputs, sharded_other, sharded_masks, sharded_fp32) / t)
    return tokens * per_token


def shape_activation_bytes_per_layer(shape: TransformerShape, batch_size: int = 1,
                                     recompute: str = "none", precision="bf16-mixed", *,
                                     attention: str = "flash", tensor_parallel: int = 1,
                                     sequence_parallel: bool = False) -> float:
    """:func:`activation_bytes_per_layer` for one block of ``shape`` (its heads, key-value
    heads, MLP and dropout)."""
    return activation_bytes_per_layer(
        shape.seq_len, batch_size, shape.hidden, shape.heads, recompute, precision,
        attention=attention, kv_heads=shape.kv_heads, ffn_hidden=shape.ffn_hidden,
        gated_mlp=shape.gated_mlp, dropout=shape.dropout, tensor_parallel=tensor_parallel,
        sequence_parallel=sequence_parallel)


def kv_cache_bytes(shape: TransformerShape, batch_size: int = 1, context: int | None = None,
                   kv_format: str = "bf16") -> float:
    """Keys and values of every token so far, every layer: 2·L·b·s·h_kv values, where h_kv =
    h·kv_heads/heads (grouped-query attention shares each key and value head among several
    query heads)."""
    context = shape.seq_len if context is None else _positive_int("context", context)
    return (2 * shape.layers * _positive_int("batch_size", batch_size) * context
            * shape.kv_hidden * FORMAT_BYTES[kv_format])


ZERO_STAGES = (0, 1, 2, 3)


def zero_shards(stage: int, ranks: int) -> dict[str, int]:
    """Over how many GPUs ZeRO ``stage`` splits each kind of model state (Rajbhandari et al.
    2020, section 5): stage 1 the optimiser state (master weights, m, v), stage 2 the
    gradients too, stage 3 the weights too. Keys: "optimiser", "gradients", "weights"."""
    if stage not in ZERO_STAGES:
        raise ValueError(f"stage must be one of {ZERO_STAGES}, not {stage!r}")
    N = _positive_int("ranks", ranks)
    return {kind: N if stage >= first else 1
            for kind, first in (("optimiser", 1), ("gradients", 2), ("weights", 3))}


def zero_bytes_per_parameter(stage: int = 0, ranks: int = 1, precision="bf16-mixed",
                             optimiser="adam") -> float:
    """Model-state bytes per parameter on each of ``ranks`` data-parallel GPUs under ZeRO
    (:func:`zero_shards`): stage 0 keeps everything everywhere (2 + 2 + 12 = 16 for
    mixed-precision Adam); stage 1: 2 + 2 + 12/N; stage 2: 2 + 14/N; stage 3: 16/N."""
    shards = zero_shards(stage, ranks)
    p = get_precision(precision)
    return ((p.weights + p.weight_copies) / shards["weights"] + p.gradients / shards["gradients"]
            + (p.master + state_tensors(optimiser) * p.state) / shards["optimiser"])


ZERO3_BUFFER_SOURCE = (
    "An estimate: ZeRO-3 gathers each block's weights from all ranks just before the block "
    "runs and frees them after (Rajbhandari et al. 2020, section 5.3); the block's full 16-bit "
    "gradients exist until they are reduce-scattered. DeepSpeed's own estimator counts 4 bytes "
    "per parameter of the largest layer for these (deepspeed/runtime/zero/stage3.py, "
    "estimate_zero3_model_states_mem_needs: largest_layer_memory = 4 * largest_layer_params); "
    "gpulab adds the next block's weights, gathered early so that the transfer overlaps the "
    "compute (DeepSpeed's stage3_prefetch_bucket_size, FSDP's forward and backward prefetch).")


def transformer_training_memory(shape: TransformerShape, batch_size: int = 1,
                                precision="bf16-mixed", optimiser="adam",
                                recompute: str = "none", zero_stage: int = 0, ranks: int = 1,
                                overhead_bytes: float = 0.0, *, attention: str = "flash",
                                tensor_parallel: int = 1, sequence_parallel: bool = False,
                                logits: bool = True) -> MemoryBreakdown:
    """One GPU's memory while training ``shape`` on micro-batches of ``batch_size`` sequences
    of ``shape.seq_len`` tokens.

    - Model states: sharded by ZeRO ``zero_stage`` over ``ranks`` data-parallel GPUs
      (:func:`zero_shards`), and split ``tensor_parallel`` ways (the norms, replicated, are
      a fraction of a per cent and counted as split too).
    - Activations: every layer's (:func:`activation_bytes_per_layer`: FlashAttention by
      default, ``attention="stored"`` for the a·s² scores; ``recompute``; tensor and sequence
      parallelism as Korthikanti et al.), plus, with ``logits``, the output layer's logits
      (s·b·V values, split over the tensor-parallel GPUs as Megatron's vocabulary-parallel
      output layer does). The loss's own temporaries are left out.
    - Workspace: with ``recompute="full"``, the one layer whose activations the backward pass
      re-materialises at a time; with ZeRO stage 3, the gathered weights of the running and
      the next block and the running block's full gradients (:data:`ZERO3_BUFFER_SOURCE`, an
      estimate). Communication buckets of stages 1-2 are left out.

    Add the runtime's share with ``overhead_bytes``."""
    if not isinstance(shape, TransformerShape):
        raise TypeError(f"shape must be a TransformerShape, not {type(shape).__name__}")
    p = get_precision(precision)
    P = shape.n_parameters
    B = _positive_int("batch_size", batch_size)
    shard = zero_shards(zero_stage, ranks)
    N = shard["optimiser"] if zero_stage else _positive_int("ranks", ranks)
    t = _check_parallel(tensor_parallel, sequence_parallel)

    def per_layer(how: str) -> float:
        return shape_activation_bytes_per_layer(shape, B, how, p, attention=attention,
                                                tensor_parallel=t,
                                                sequence_parallel=sequence_parallel)

    kept = per_layer(recompute)
    notes = [f"activations: {shape.layers} layers x {format_bytes(kept)} (Korthikanti et al. "
             f"2022, recompute={recompute}, attention={attention})"]
    activations = shape.layers * kept
    workspace = 0.0
    if logits:
        logit_bytes = shape.seq_len * B * shape.vocab * p.activations / t
        activations += logit_bytes
        notes.append(f"logits: {shape.seq_len} tokens x {B} x {shape.vocab:,} vocabulary "
                     f"= {format_bytes(logit_bytes)}")
    if recompute == "full":
        rematerialised = per_layer("none")
        workspace += rematerialised
        notes.append(f"full recomputation: one layer's activations "
                     f"({format_bytes(rematerialised)}) re-materialised at a time, in the "
                     "workspace")
    if t > 1:
        notes.append(f"tensor parallelism over {t} GPUs"
                     + (" with sequence parallelism" if sequence_parallel else "")
                     + ": model states and activations per GPU")
    if zero_stage:
        notes.append(f"ZeRO stage {zero_stage} over {N} ranks: per-GPU share")
    if zero_stage == 3:
        block = shape.block_parameters / t
        gathered = block * (2 * (p.weights + p.weight_copies) + p.gradients)
        workspace += gathered
        notes.append(f"ZeRO-3 buffers: two blocks' gathered weights and one block's gradients "
                     f"= {format_bytes(gathered)} (an estimate)")
    return MemoryBreakdown(
        model=shape.name, purpose="training", batch_size=B,
        precision=p.name, optimiser=str(optimiser), n_parameters=P,
        parameters=P * (p.weights + p.weight_copies) / shard["weights"] / t,
        gradients=P * p.gradients / shard["gradients"] / t,
        optimiser_state=P * state_tensors(optimiser) * p.state / shard["optimiser"] / t,
        master_weights=P * p.master / shard["optimiser"] / t,
        activations=activations, workspace=workspace, overhead=overhead_bytes,
        notes=tuple(notes))


def inference_memory(shape: TransformerShape, batch_size: int = 1, weight_format: str = "bf16",
                     kv_cache: bool = True, context: int | None = None,
                     kv_format: str = "bf16", overhead_bytes: float = 0.0) -> MemoryBreakdown:
    """Serving ``shape``: its weights in ``weight_format`` (fp32, bf16, fp16, fp8) and,
    with ``kv_cache``, the keys and values of ``batch_size`` sequences of ``context`` tokens
    (default: the model's full context)."""
    if weight_format not in FORMAT_BYTES:
        raise ValueError(f"weight_format must be one of {', '.join(FORMAT_BYTES)}, not "
                         f"{weight_format!r}")
    cache = kv_cache_bytes(shape, batch_size, context, kv_format) if kv_cache else 0.0
    notes = ([f"KV cache: {batch_size} sequence(s) of {context or shape.seq_len} tokens in "
              f"{kv_format}"] if kv_cache else [])
    return MemoryBreakdown(
        model=shape.name, purpose="inference", batch_size=_positive_int("batch_size", batch_size),
        precision=weight_format, optimiser="", n_parameters=shape.n_parameters,
        parameters=shape.n_parameters * FORMAT_BYTES[weight_format], kv_cache=cache,
        overhead=overhead_bytes, notes=tuple(notes))


def training_memory(model, batch_size: int = 1, **options) -> MemoryBreakdown:
    """:func:`transformer_training_memory` for a :class:`TransformerShape`,
    :func:`mlp_training_memory` for an MLP or its widths."""
    if isinstance(model, TransformerShape):
        return transformer_training_memory(model, batch_size, **options)
    return mlp_training_memory(model, batch_size, **options)


# --- real models, real GPUs ---------------------------------------------------------------------

_GPT3 = ("Brown et al., 'Language Models are Few-Shot Learners', NeurIPS 2020, Table 2.1 "
         "(n_layers, d_model, n_heads; context 2048 tokens; the GPT-2 vocabulary of 50,257)")
_GPT2 = ("Radford et al., 'Language Models are Unsupervised Multitask Learners', 2019, Table 2 "
         "(48 layers, d_model 1600, 1542M parameters; 1024-token context, 50,257-token "
         "vocabulary; 25 heads of 64)")
_LLAMA2 = ("Touvron et al., 'Llama 2: Open Foundation and Fine-Tuned Chat Models', 2023, "
           "Table 1 and the released configs (config.json of meta-llama/Llama-2-7b-hf and "
           "-70b-hf: 7B: 32 layers, hidden 4096, 32 heads, intermediate_size 11008; 70B: 80 "
           "layers, hidden 8192, 64 heads, 8 key-value heads, intermediate_size 28672; both "
           "SwiGLU, RMSNorm, rotary positions, untied output layer, no biases, no dropout; "
           "context 4096, vocabulary 32,000): 6,738,415,616 and 68,976,648,192 parameters")

# The sizes their names give, counted from their architectures (TransformerShape.n_parameters):
# GPT-3 Small 125.2 M, GPT-2 XL 1.558 B (its paper's 1542M leaves out the positions),
# Llama 2 7B 6.738 B, Llama 2 70B 68.98 B, GPT-3 174.6 B.
KNOWN_MODELS: dict[str, TransformerShape] = {
    "125M": TransformerShape("GPT-3 Small (125M)", 12, 768, 12, 2048, 50257, source=_GPT3),
    "1.5B": TransformerShape("GPT-2 XL (1.5B)", 48, 1600, 25, 1024, 50257, source=_GPT2),
    "7B": TransformerShape("Llama 2 7B", 32, 4096, 32, 4096, 32000, source=_LLAMA2,
                           ffn_hidden=11008, gated_mlp=True, biases=False,
                           learned_positions=False, tied_embeddings=False, dropout=False),
    "70B": TransformerShape("Llama 2 70B", 80, 8192, 64, 4096, 32000, kv_heads=8,
                            source=_LLAMA2, ffn_hidden=28672, gated_mlp=True, biases=False,
                            learned_positions=False, tied_embeddings=False, dropout=False),
    "175B": TransformerShape("GPT-3 (175B)", 96, 12288, 96, 2048, 50257, source=_GPT3),
}


@dataclass(frozen=True)
class DeviceMemory:
    """One GPU's memory: the datasheet's nominal figure (read as decimal GB) and where it comes
    from; ``formats``: the number formats its arithmetic units take (the keys of its
    :attr:`gpulab.hardware.GPUSpec.peak_flops`: a T4 has fp16 but no bf16, an A100 no fp8)."""

    key: str
    name: str
    memory_bytes: float
    source: str
    formats: tuple[str, ...] = ()

    def runs(self, number_format: str) -> bool:
        """Whether the GPU has arithmetic in ``number_format`` ("bf16", "fp8", ...; a recipe's
        name such as "bf16-mixed" counts by its narrow format): without it, values stored in
        the format are widened before every operation."""
        narrow = str(number_format).split("-")[0]
        return narrow in self.formats

    @property
    def gb(self) -> float:
        return self.memory_bytes / hardware.GB

    @property
    def gib(self) -> float:
        return self.memory_bytes / GIB


A100_40GB = DeviceMemory(
    "A100-40GB", "NVIDIA A100 40GB", 40 * hardware.GB,
    "NVIDIA A100 Tensor Core GPU datasheet, A100 40GB PCIe and SXM columns: 40GB HBM2 "
    "(https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
    "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf); memory only: gpulab.hardware "
    "describes the 80 GB A100", tuple(hardware.GPUS["A100-SXM"].peak_flops))

# Smallest first: the GPUs chapter 09 compares (gpulab.hardware's entries and the 40 GB A100).
GPU_MEMORY: dict[str, DeviceMemory] = {
    **{key: DeviceMemory(key, hardware.GPUS[key].name, hardware.GPUS[key].memory_bytes,
                         hardware.GPUS[key].source("memory_bytes"),
                         tuple(hardware.GPUS[key].peak_flops))
       for key in ("T4", "L4")},
    "A100-40GB": A100_40GB,
    **{key: DeviceMemory(key, hardware.GPUS[key].name, hardware.GPUS[key].memory_bytes,
                         hardware.GPUS[key].source("memory_bytes"),
                         tuple(hardware.GPUS[key].peak_flops))
       for key in ("A100-SXM", hardware.H100_SXM.key, "H200", "B200")},
}


def fit_table(purpose: str = "inference", models=None, gpus=None, batch_size: int = 1,
              weight_format: str = "bf16", kv_cache: bool = True, context: int | None = None,
              precision="bf16-mixed", optimiser="adam", recompute: str = "full",
              overhead_bytes: float = RUNTIME_OVERHEAD_BYTES, attention: str = "flash",
              zero_stage: int = 0, ranks: int = 1) -> list[dict]:
    """For each model (default :data:`KNOWN_MODELS`), the memory one GPU needs for
    ``purpose`` ("inference": weights + optional KV cache; "training": model states +
    activations + workspace, sharded by ZeRO ``zero_stage`` over ``ranks`` if asked) plus the
    runtime overhead, and which GPUs (default :data:`GPU_MEMORY`) hold it: rows of {"model",
    "breakdown", "bytes", "fits": {gpu: bool}, "native": {gpu: bool}}, where "native" says
    whether the GPU has arithmetic in the format (:meth:`DeviceMemory.runs`)."""
    models = models if models is not None else KNOWN_MODELS
    models = list(models.values()) if isinstance(models, dict) else list(models)
    gpus = gpus or GPU_MEMORY
    rows = []
    for shape in models:
        if purpose == "inference":
            breakdown = inference_memory(shape, batch_size, weight_format, kv_cache, context,
                                         overhead_bytes=overhead_bytes)
            number_format = weight_format
        elif purpose == "training":
            breakdown = transformer_training_memory(shape, batch_size, precision, optimiser,
                                                    recompute, zero_stage, ranks,
                                                    overhead_bytes, attention=attention)
            number_format = get_precision(precision).name
        else:
            raise ValueError(f"purpose must be 'inference' or 'training', not {purpose!r}")
        rows.append({"model": shape.name, "breakdown": breakdown, "bytes": breakdown.total,
                     "fits": {key: breakdown.fits(gpu.memory_bytes) for key, gpu in gpus.items()},
                     "native": {key: gpu.runs(number_format) for key, gpu in gpus.items()}})
    return rows


def format_fit_table(rows: list[dict], gpus=None) -> Table:
    """The rows of :func:`fit_table` as a table: GB needed, then 'yes'/'no' per GPU; 'yes*' where
    the bytes fit but the GPU has no arithmetic in the format (explained below the table)."""
    gpus = gpus or GPU_MEMORY
    cells, starred = [], set()
    for row in rows:
        marks = []
        for key in gpus:
            mark = "yes" if row["fits"][key] else "no"
            if row["fits"][key] and not row.get("native", {}).get(key, True):
                mark, _ = "yes*", starred.add(key)
            marks.append(mark)
        cells.append([row["model"], row["bytes"] / 1e9, *marks])
    note = (f"* the bytes fit, but {', '.join(sorted(starred))} has no arithmetic in this format "
            "(no such peak in gpulab.hardware): it would widen the values before every "
            "operation, or use another format") if starred else ""
    return Table([Column("model"), Column("needs", "GB", "{:,.1f}"),
                  *(Column(key, f"{g.gb:.0f} GB", align="right") for key, g in gpus.items())],
                 cells, notes=[note])


# --- running out ---------------------------------------------------------------------------------

REMEDIES = (
    "a smaller micro-batch with gradient accumulation: Trainer(..., accumulation_steps=k) runs "
    "k micro-batches and updates once, with the same gradients as the whole batch; activations "
    "shrink about k times",
    "activation checkpointing: MLP(..., checkpointing=True) keeps only each layer's input and "
    "recomputes X @ W in the backward pass (less memory, more FLOPs)",
    "narrower formats (chapter 10): 16-bit activations and gradients take half the bytes",
    "shard the optimiser state, gradients and weights over several GPUs (ZeRO, chapter 11): "
    "16/N bytes per parameter at stage 3",
)


class OutOfDeviceMemory(MemoryError):  # noqa: N818 - the name the chapter teaches
    """A step needs more device memory than there is (or than the budget allows). The message
    is the breakdown and the remedies; ``breakdown`` and ``budget_bytes`` are kept."""

    def __init__(self, breakdown: MemoryBreakdown, budget_bytes: float, what: str = "this step"):
        self.breakdown, self.budget_bytes = breakdown, float(budget_bytes)
        short = breakdown.total - self.budget_bytes
        largest = max(breakdown.as_dict().items(), key=lambda kv: kv[1])
        remedies = "\n".join(f"  - {r}" for r in REMEDIES)
        super().__init__(
            f"{what} needs {breakdown.total:,.0f} bytes ({format_bytes(breakdown.total)}) but "
            f"the device has {self.budget_bytes:,.0f} ({format_bytes(self.budget_bytes)}): "
            f"{format_bytes(short)} short. The largest part is {largest[0]} "
            f"({format_bytes(largest[1])}).\n{breakdown.table()}\nRemedies:\n{remedies}")


def check_budget(breakdown: MemoryBreakdown, budget_bytes: float | None,
                 what: str = "this step") -> None:
    """Raise :class:`OutOfDeviceMemory` if ``breakdown`` does not fit ``budget_bytes`` (None:
    no budget)."""
    if budget_bytes is not None and breakdown.total > budget_bytes:
        raise OutOfDeviceMemory(breakdown, budget_bytes, what)


def is_out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` is an out-of-memory error: gpulab's :class:`OutOfDeviceMemory`, a
    CUDA driver's CUDA_ERROR_OUT_OF_MEMORY (numba's ``CudaAPIError``), or Python's
    MemoryError."""
    return isinstance(error, MemoryError) or "OUT_OF_MEMORY" in str(error).upper() or \
        "OUT OF MEMORY" in str(error).upper()


__all__ = [
    "A100_40GB", "ATTENTION", "BATCH_SIZES", "FORMAT_BYTES", "GIB", "GPU_MEMORY", "KINDS",
    "KNOWN_MODELS", "LABEL_BYTES", "MIB", "OPTIMISER_STATE_TENSORS", "PRECISIONS", "RECOMPUTE",
    "REMEDIES", "RUNTIME_OVERHEAD_BYTES", "RUNTIME_OVERHEAD_SOURCE", "ZERO3_BUFFER_SOURCE",
    "ZERO_STAGES", "DeviceMemory", "MemoryBreakdown", "OutOfDeviceMemory", "Precision",
    "TransformerShape", "activation_bytes_per_layer", "check_budget", "fit_table",
    "format_bytes", "format_fit_table", "get_precision", "inference_memory", "is_out_of_memory",
    "kv_cache_bytes", "largest_batch_within", "mlp_activation_parts", "mlp_activation_values",
    "mlp_parameters", "mlp_training_memory", "mlp_workspace_values",
    "shape_activation_bytes_per_layer", "state_tensors", "training_memory",
    "transformer_training_memory", "zero_bytes_per_parameter", "zero_shards",
]
