"""NumPy versions of every operation gpulab runs on the device.

They are the CPU side of every comparison (NumPy calls BLAS where it can, so the CPU is not
handicapped) and the oracle every kernel is tested against.
"""

from __future__ import annotations

import numpy as np

from gpulab import formats


def multiply(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Elementwise product, as ``elementwise_multiply``."""
    return np.multiply(x, y)


def dot(x: np.ndarray, y: np.ndarray) -> np.floating:
    """x · y in the inputs' dtype (BLAS ``sdot``/``ddot``), as the dot kernels."""
    return np.dot(x, y)


def dot_exact(x: np.ndarray, y: np.ndarray) -> float:
    """x · y accumulated in float64 from the exact products: the yardstick for rounding error."""
    return float(np.dot(np.asarray(x, np.float64), np.asarray(y, np.float64)))


def dot_tolerance(x: np.ndarray, y: np.ndarray) -> float:
    """An absolute error bound for a dot product summed in x's dtype in any order.

    The classic bound for recursive summation is ``n * eps * sum|x_i y_i|``; tree and
    grid-stride orders do better, but the bound must hold for atomics in any order.
    """
    eps = np.finfo(np.asarray(x).dtype).eps
    magnitude = float(np.sum(np.abs(np.asarray(x, np.float64) * np.asarray(y, np.float64))))
    return len(x) * eps * magnitude + np.finfo(np.float64).tiny


def sum_chain(values) -> tuple[float, int]:
    """Add values one after another: each addition waits for the previous one.
    Returns the sum and the number of dependent steps (the chain's length)."""
    total, steps = 0.0, 0
    for v in values:
        total += v
        steps += 1
    return total, steps


def sum_tree(values) -> tuple[float, int]:
    """Add values pairwise in rounds; the additions of one round are independent.
    Returns the sum and the number of rounds (log2(n) rounded up)."""
    level, rounds = [float(v) for v in values], 0
    while len(level) > 1:
        level = [sum(level[i : i + 2]) for i in range(0, len(level), 2)]
        rounds += 1
    return (level[0] if level else 0.0), rounds


# --- chapter 02: moving data ------------------------------------------------------------------


def saxpy(a: float, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """a * x + y in x's dtype, as the ``saxpy`` kernel (one rounding per operation)."""
    x = np.asarray(x)
    return (x.dtype.type(a) * x + np.asarray(y)).astype(x.dtype, copy=False)


def copy(x: np.ndarray) -> np.ndarray:
    """A copy of x, as ``copy_coalesced``."""
    return np.array(x, copy=True)


def copy_strided(x: np.ndarray, stride: int) -> np.ndarray:
    """Every stride-th element of x (``x[::stride]``), as ``copy_strided``."""
    return np.ascontiguousarray(np.asarray(x)[::stride])


# --- chapter 03: matrix multiplication --------------------------------------------------------


def matmul(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """A @ B in the inputs' dtype (BLAS ``sgemm``/``dgemm``), as the matmul kernels."""
    return np.matmul(A, B)


def matmul_exact(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """A @ B accumulated in float64: the yardstick for rounding error."""
    return np.matmul(np.asarray(A, np.float64), np.asarray(B, np.float64))


def matmul_tolerance(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """An absolute error bound per element of A @ B summed in A's dtype in any order:
    ``K * eps * (|A| @ |B|)``, the dot-product bound of :func:`dot_tolerance` for every element."""
    eps = np.finfo(np.asarray(A).dtype).eps
    magnitude = np.matmul(np.abs(np.asarray(A, np.float64)), np.abs(np.asarray(B, np.float64)))
    return np.asarray(A).shape[1] * eps * magnitude + np.finfo(np.float64).tiny


# --- number formats (chapter 04) ---
# Emulations of gpulab.kernels.narrow_formats on the CPU, with NumPy and ml_dtypes. Every function
# rounds after every multiply and every add, in the order the kernel uses, so a kernel run in
# the simulator gives the very same bits, and the GPU-only bf16 kernels get an honest stand-in.
# "Accumulator" is the format the products and the running sums are kept in.


ACCUMULATOR_FORMATS = ("fp64", "fp32", "fp16", "bf16")


def _accumulator(fmt) -> formats.NumberFormat:
    fmt = formats.get_format(fmt)
    if fmt.name not in ACCUMULATOR_FORMATS:
        raise ValueError(
            f"{fmt.name} is not an accumulator format here; use one of "
            f"{', '.join(ACCUMULATOR_FORMATS)}"
        )
    return fmt


def sum_in_format(values, accumulator) -> np.floating:
    """values[0] + values[1] + ... one after another, from 0, the running sum rounded to
    ``accumulator`` after every addition (``np.add.accumulate`` does not regroup)."""
    fmt = _accumulator(accumulator)
    stored = np.asarray(values).astype(fmt.dtype)
    if stored.size == 0:
        return fmt.dtype.type(0)
    return np.add.accumulate(stored.ravel())[-1]


def dot_chain_in_format(x, y, accumulator) -> np.floating:
    """x · y as one thread would do it alone: each product and each running sum rounded to
    ``accumulator``. The longest chain of roundings, so the worst order for error."""
    fmt = _accumulator(accumulator)
    products = np.asarray(x).astype(fmt.dtype) * np.asarray(y).astype(fmt.dtype)
    return sum_in_format(products, fmt)


def dot_partials_in_format(
    x, y, accumulator, blocks: int, threads_per_block: int, scale: float | None = None
) -> np.ndarray:
    """The per-block partial sums the grid-stride precision kernels write, bit for bit.

    Thread g of the G = blocks * threads_per_block threads adds the products of elements
    g, g + G, g + 2G, ... in a register; each block then adds its threads' sums by halving
    (slot t += slot t + stride); with ``scale`` (fp8) each partial is multiplied by it in
    float32. ``x`` and ``y`` hold the stored input values (fp16, bf16, or decoded fp8).
    """
    fmt = _accumulator(accumulator)
    total_threads = blocks * threads_per_block
    n = len(x)
    rows = max(-(-n // total_threads), 1)
    products = np.zeros(rows * total_threads, dtype=fmt.dtype)  # padding adds +0: no change
    products[:n] = np.asarray(x).astype(fmt.dtype) * np.asarray(y).astype(fmt.dtype)
    thread_sums = np.add.accumulate(products.reshape(rows, total_threads), axis=0)[-1]
    tree = thread_sums.reshape(blocks, threads_per_block).copy()
    stride = threads_per_block // 2
    while stride > 0:
        tree[:, :stride] = tree[:, :stride] + tree[:, stride : 2 * stride]
        stride //= 2
    partials = tree[:, 0].copy()
    if scale is not None:
        partials = (partials.astype(np.float32) * np.float32(scale)).astype(np.float32)
    return partials


def dot_grid_stride_in_format(
    x, y, accumulator, blocks: int, threads_per_block: int, scale: float | None = None
) -> np.floating:
    """The precision dot kernels' answer: :func:`dot_partials_in_format`, then the partials
    added one after another in the accumulator format (as the launch wrappers do)."""
    partials = dot_partials_in_format(x, y, accumulator, blocks, threads_per_block, scale)
    return sum_in_format(partials, "fp32" if scale is not None else accumulator)


def matmul_in_format(a, b, accumulator, scale: float | None = None) -> np.ndarray:
    """A @ B as the one-thread-per-output precision kernels compute it: for every output,
    acc = 0; acc += a[i, k] * b[k, j] for k = 0, 1, ..., each product and sum rounded to
    ``accumulator``; with ``scale`` (fp8) the result is multiplied by it in float32."""
    fmt = _accumulator(accumulator)
    a, b = np.asarray(a).astype(fmt.dtype), np.asarray(b).astype(fmt.dtype)
    acc = np.zeros((a.shape[0], b.shape[1]), dtype=fmt.dtype)
    for k in range(a.shape[1]):
        acc = acc + a[:, k : k + 1] * b[k : k + 1, :]
    if scale is not None:
        acc = (acc.astype(np.float32) * np.float32(scale)).astype(np.float32)
    return acc


def rounding_bound(x, y, accumulator, roundings: int) -> float:
    """A rigorous absolute error bound for a dot product whose every result went through at
    most ``roundings`` roundings in ``accumulator``: gamma_k * sum|x_i y_i| with
    gamma_k = k u / (1 - k u) and u the unit roundoff (Higham, 'Accuracy and Stability of
    Numerical Algorithms', 2nd ed., 2002, section 3.1). For the grid-stride kernels
    k = 1 (product) + chain length + log2(threads per block) + number of blocks."""
    u = _accumulator(accumulator).unit_roundoff
    ku = roundings * u
    magnitude = float(np.sum(np.abs(np.asarray(x, np.float64) * np.asarray(y, np.float64))))
    if ku >= 1:
        return float(np.inf)
    return ku / (1 - ku) * magnitude + np.finfo(np.float64).tiny


def grid_stride_roundings(n: int, blocks: int, threads_per_block: int) -> int:
    """How many roundings the longest path through a grid-stride dot kernel has: one for the
    product, one per add of the thread's chain, one per tree level, one per combined partial
    (and one for an fp8 scale)."""
    chain = -(-n // (blocks * threads_per_block))
    return 1 + chain + max(threads_per_block - 1, 0).bit_length() + blocks + 1


# --- neural network (chapters 05-08) ---
# The NumPy side of gpulab.nn: every operation of a dense layer, the softmax cross-entropy
# loss and the optimisers, in the inputs' dtype, as the kernels of gpulab.kernels.dense,
# gpulab.kernels.softmax and gpulab.kernels.optim compute them. gpulab.nn's "numpy" backend
# trains with these functions, and every kernel is tested against them.

ACTIVATIONS = ("identity", "relu", "gelu", "tanh", "sigmoid")
GELU_K = 0.7978845608028654  # sqrt(2 / pi), in GELU's tanh approximation
GELU_C = 0.044715


def _check_activation(name: str) -> str:
    if name not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}, not {name!r}")
    return name


def activation(z: np.ndarray, name: str) -> np.ndarray:
    """f(z) elementwise for ``name`` in :data:`ACTIVATIONS`, in z's dtype.

    GELU is the tanh approximation (Hendrycks and Gimpel, "Gaussian Error Linear Units",
    arXiv:1606.08415, eq. for GELU(x) ~ 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3)))), the one
    GPT-2 uses. The sigmoid is written so that exp never overflows: 1/(1 + e^-z) for z >= 0,
    e^z/(1 + e^z) for z < 0.
    """
    z = np.asarray(z)
    one, half = z.dtype.type(1), z.dtype.type(0.5)
    name = _check_activation(name)
    if name == "identity":
        return z.copy()
    if name == "relu":
        return np.maximum(z, z.dtype.type(0))
    if name == "gelu":
        u = z.dtype.type(GELU_K) * (z + z.dtype.type(GELU_C) * z * z * z)
        return half * z * (one + np.tanh(u))
    if name == "tanh":
        return np.tanh(z)
    e = np.exp(-np.abs(z))  # in (0, 1]: no overflow for any z
    return np.where(z >= 0, one / (one + e), e / (one + e)).astype(z.dtype, copy=False)


def activation_derivative(z: np.ndarray, name: str) -> np.ndarray:
    """f'(z) elementwise (ReLU's derivative at 0 is taken as 0, as in PyTorch)."""
    z = np.asarray(z)
    one, half = z.dtype.type(1), z.dtype.type(0.5)
    name = _check_activation(name)
    if name == "identity":
        return np.ones_like(z)
    if name == "relu":
        return (z > 0).astype(z.dtype)
    if name == "gelu":
        k, c = z.dtype.type(GELU_K), z.dtype.type(GELU_C)
        t = np.tanh(k * (z + c * z * z * z))
        return half * (one + t) + half * z * (one - t * t) * k * (one + z.dtype.type(3) * c * z * z)
    if name == "tanh":
        t = np.tanh(z)
        return one - t * t
    s = activation(z, "sigmoid")
    return s * (one - s)


def bias_add(Z: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Z + b, b added to every row, as ``bias_add``."""
    return Z + b


def bias_activation(Z: np.ndarray, b: np.ndarray, name: str) -> np.ndarray:
    """f(Z + b): a dense layer's output from its matmul output Z, as ``bias_activation``."""
    return activation(Z + b, name)


def bias_activation_backward(dA: np.ndarray, Z: np.ndarray, b: np.ndarray,
                             name: str) -> np.ndarray:
    """dL/d(Z + b) = dL/dA * f'(Z + b), as ``bias_activation_backward`` (which recomputes
    Z + b instead of storing it)."""
    return dA * activation_derivative(Z + b, name)


def bias_grad(dZ: np.ndarray) -> np.ndarray:
    """dL/db: the column sums of dZ (every row of the batch used b), as ``bias_grad``."""
    return dZ.sum(axis=0, dtype=dZ.dtype)


def transpose(A: np.ndarray) -> np.ndarray:
    """A contiguous copy of A's transpose, as ``transpose_tiled``."""
    return np.ascontiguousarray(np.asarray(A).T)


def dense_forward(X: np.ndarray, W: np.ndarray, b: np.ndarray,
                  name: str) -> tuple[np.ndarray, np.ndarray]:
    """A dense layer on a batch: Z = X @ W (rows of X are samples), A = f(Z + b).
    Returns (Z, A); Z is what the backward pass needs."""
    Z = np.matmul(X, W)
    return Z, bias_activation(Z, b, name)


def dense_backward(dA: np.ndarray, X: np.ndarray, W: np.ndarray, Z: np.ndarray,
                   b: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The chain rule through a dense layer: (dX, dW, db) from dA = dL/dA.

    dZ = dA * f'(Z + b); dW = X^T @ dZ; db = column sums of dZ; dX = dZ @ W^T.
    """
    dZ = bias_activation_backward(dA, Z, b, name)
    return np.matmul(dZ, W.T), np.matmul(X.T, dZ), bias_grad(dZ)


def check_labels(labels, n_classes: int, n_rows: int | None = None) -> np.ndarray:
    """Labels as an int64 array, or a ValueError naming the problem: not whole numbers, not
    one per row, or outside 0 .. n_classes - 1."""
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"labels must be 1-D (one class per sample), not shape {labels.shape}")
    if labels.size and not np.issubdtype(labels.dtype, np.integer):
        if not (np.issubdtype(labels.dtype, np.floating) and np.all(labels == np.round(labels))):
            raise ValueError(f"labels must be whole class numbers, got dtype {labels.dtype}")
    if n_rows is not None and labels.shape[0] != n_rows:
        raise ValueError(f"there are {n_rows} rows of logits but {labels.shape[0]} labels: "
                         "give one label per sample")
    bad = (labels < 0) | (labels >= n_classes)
    if np.any(bad):
        first = int(np.flatnonzero(bad)[0])
        raise ValueError(f"label {labels[first].item()!r} (sample {first}) is out of range: with "
                         f"{n_classes} classes, labels must be 0 .. {n_classes - 1}")
    return labels.astype(np.int64)


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax, stable: the row's largest logit is subtracted before exp, so exp
    never overflows (and the result is unchanged, since the shift cancels)."""
    shifted = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=1, keepdims=True)


def softmax_cross_entropy(logits: np.ndarray, labels) -> tuple[np.ndarray, np.ndarray]:
    """(probabilities, loss per sample) for a batch of logits, as ``softmax_cross_entropy``.

    loss_i = -log p_i[label_i] = log(sum_j e^(z_ij - m_i)) + m_i - z_i[label_i], with m_i the
    row's largest logit: computed from the log-sum-exp, never log(p), so a tiny probability
    gives a large finite loss instead of log(0) = -inf.
    """
    labels = check_labels(labels, logits.shape[1], logits.shape[0])
    m = logits.max(axis=1, keepdims=True)
    e = np.exp(logits - m)
    total = e.sum(axis=1, keepdims=True)
    rows = np.arange(logits.shape[0])
    losses = (np.log(total[:, 0]) + m[:, 0] - logits[rows, labels]).astype(logits.dtype)
    return (e / total).astype(logits.dtype, copy=False), losses


def softmax_cross_entropy_backward(probs: np.ndarray, labels, scale: float) -> np.ndarray:
    """dL/dlogits = (p - onehot(label)) * scale; scale = 1 / batch for the mean loss."""
    labels = check_labels(labels, probs.shape[1], probs.shape[0])
    grad = probs.copy()
    grad[np.arange(probs.shape[0]), labels] -= probs.dtype.type(1)
    return grad * probs.dtype.type(scale)


def sgd_momentum_update(param, grad, velocity, lr: float, momentum: float,
                        weight_decay: float = 0.0):
    """One SGD step with momentum, as PyTorch's ``torch.optim.SGD`` (dampening 0, not
    Nesterov): g = grad + weight_decay * param; v = momentum * v + g; param -= lr * v.
    Returns new (param, velocity)."""
    t = param.dtype.type
    g = grad + t(weight_decay) * param
    velocity = t(momentum) * velocity + g
    return param - t(lr) * velocity, velocity


def adam_update(param, grad, m, v, step: int, lr: float, beta1: float = 0.9,
                beta2: float = 0.999, eps: float = 1e-8, weight_decay: float = 0.0):
    """One Adam step (Kingma and Ba, "Adam: A Method for Stochastic Optimization", ICLR 2015,
    Algorithm 1), as PyTorch's ``torch.optim.Adam``: m and v are running averages of the
    gradient and its square, bias-corrected for the first ``step`` steps (step counts from 1).
    Returns new (param, m, v)."""
    t = param.dtype.type
    g = grad + t(weight_decay) * param
    m = t(beta1) * m + t(1 - beta1) * g
    v = t(beta2) * v + t(1 - beta2) * g * g
    m_hat = m / t(1 - beta1**step)
    v_hat = v / t(1 - beta2**step)
    return param - t(lr) * m_hat / (np.sqrt(v_hat) + t(eps)), m, v
