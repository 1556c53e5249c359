"""The parts of a dense layer around its matmul: bias, activation, their backward, the bias
gradient, and the transpose the backward matmuls need.

A dense layer on a batch is ``A = f(X @ W + b)``: the matmul (:mod:`gpulab.kernels.matmul`)
does the FLOPs; everything here is elementwise or a reduction, so it is memory-bound, and
what matters is how many times each element crosses device memory.

Variants, in the order chapters 05 and 06 teach them
- ``bias_add`` then ``apply_activation``: the unfused forward. Two launches; Z + b is written to
  device memory and read straight back: per element 2 reads + 2 writes.
- ``bias_activation``: the fused forward, ``A = f(Z + b)`` in one pass: 1 read + 1 write per
  element. Z + b is never stored: the backward recomputes it from Z (kept anyway) and b.
- ``bias_activation_backward``: ``dZ = dA * f'(Z + b)``, the chain rule through the bias and
  the activation in one pass: 2 reads + 1 write per element.
- ``bias_grad``: ``db = column sums of dZ``; one thread per column walks down the rows, so
  the threads of a warp read neighbouring columns of a row together (coalesced).
- ``transpose_naive``: ``out[c, r] = A[r, c]``, one thread per element: the reads of a warp
  are coalesced, its writes land 32 rows apart (one memory transaction each).
- ``transpose_tiled``: ``out = A^T`` through a shared-memory tile, so that both the reads of A
  and the writes of out are coalesced. The backward pass needs ``X^T @ dZ`` and ``dZ @ W^T``;
  rather than a second set of matmul kernels that read a transposed operand, gpulab copies
  the operand transposed and reuses the chapter-03 matmuls. The copy costs one read and one
  write of X (or W), a small fraction of the matmul's traffic (cuBLAS avoids even that by
  reading the transposed layout directly: its ``transa``/``transb`` flags).

Activations (the ``act`` argument, an int: :data:`ACTIVATION_CODES`): identity, ReLU, GELU
(tanh approximation), tanh, sigmoid (stable for any z), as in :func:`gpulab.reference.activation`.
All kernels compute in the arrays' dtype (float32 or float64).
"""

from __future__ import annotations

import math

from numba import cuda

from gpulab import device
from gpulab.kernels.arrays import (
    InputError,
    as_array,
    finish,
    matching,
    one_of,
    output,
    same_dtype,
    to_device,
    whole_number,
)
from gpulab.kernels.registry import device_function, for_float_dtypes, kernel

IDENTITY, RELU, GELU, TANH, SIGMOID = 0, 1, 2, 3, 4
ACTIVATION_CODES = {"identity": IDENTITY, "relu": RELU, "gelu": GELU, "tanh": TANH,
                    "sigmoid": SIGMOID}
GELU_K = 0.7978845608028654  # sqrt(2 / pi)
GELU_C = 0.044715
MAX_TRANSPOSE_TILE = 32
TRANSPOSE_TILE_COLUMNS = MAX_TRANSPOSE_TILE + 1  # +1: a tile's column hits 32 different banks


@device_function
def activation(z, act):
    """f(z) for the activation code ``act``, in z's float type (``type(z)(1)`` is 1 in it).

    Shared by ``apply_activation`` and ``bias_activation`` and inlined into both. Works in
    registers only: reads and writes no memory, no synchronisation. Sigmoid uses
    e = exp(-|z|), which lies in (0, 1] and never overflows.
    """
    one = type(z)(1)
    half = type(z)(0.5)
    if act == RELU:
        return z if z > 0 else type(z)(0)
    if act == GELU:
        u = type(z)(GELU_K) * (z + type(z)(GELU_C) * z * z * z)
        return half * z * (one + math.tanh(u))
    if act == TANH:
        return math.tanh(z)
    if act == SIGMOID:
        e = math.exp(-abs(z))
        return one / (one + e) if z >= 0 else e / (one + e)
    return z


@kernel(*for_float_dtypes("void({t}[:, ::1], {t}[::1], {t}[:, ::1])"))
def bias_add(Z, b, out):
    """out[r, c] = Z[r, c] + b[c]; one thread per element (x along columns).

    Per thread: reads Z[r, c] and b[c] (the same b[c] for a whole column: cached), writes one
    element: 1 FLOP, 2 values moved per element of Z. No synchronisation.
    """
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        out[r, c] = Z[r, c] + b[c]


@kernel(*for_float_dtypes("void({t}[:, ::1], int64, {t}[:, ::1])"))
def apply_activation(Z, act, out):
    """out[r, c] = f(Z[r, c]), f chosen by the code ``act``; one thread per element.

    Per thread: reads Z[r, c], writes out[r, c]; f is the device function ``activation``: a
    few FLOPs (ReLU 1, GELU ~10, a transcendental for GELU, tanh and sigmoid). No
    synchronisation.
    """
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        out[r, c] = activation(Z[r, c], act)


@kernel(*for_float_dtypes("void({t}[:, ::1], {t}[::1], int64, {t}[:, ::1])"))
def bias_activation(Z, b, act, A):
    """A[r, c] = f(Z[r, c] + b[c]): bias and activation fused in one pass.

    Per thread: reads Z[r, c] and b[c], writes A[r, c]: 1 read + 1 write per element, half
    the traffic of ``bias_add`` followed by ``apply_activation`` (which write Z + b and read it
    back). Z + b lives only in a register; f is the device function ``activation``, as in
    ``apply_activation``. No synchronisation.
    """
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        A[r, c] = activation(Z[r, c] + b[c], act)


@kernel(*for_float_dtypes(
    "void({t}[:, ::1], {t}[:, ::1], {t}[::1], int64, {t}[:, ::1])"))
def bias_activation_backward(dA, Z, b, act, dZ):
    """dZ[r, c] = dA[r, c] * f'(Z[r, c] + b[c]): the chain rule through bias and activation.

    Per thread: reads dA[r, c], Z[r, c] and b[c], recomputes z = Z + b in a register (1 FLOP
    instead of storing z in the forward pass), writes dZ[r, c]: 2 reads + 1 write per
    element. f'(z): ReLU 1 if z > 0 else 0; GELU from its tanh form; tanh 1 - tanh(z)^2;
    sigmoid s(1 - s). No synchronisation.
    """
    c, r = cuda.grid(2)
    if r < Z.shape[0] and c < Z.shape[1]:
        z = Z[r, c] + b[c]
        one = Z.dtype.type(1)
        half = Z.dtype.type(0.5)
        if act == RELU:
            d = one if z > 0 else Z.dtype.type(0)
        elif act == GELU:
            k = Z.dtype.type(GELU_K)
            cubic = Z.dtype.type(GELU_C)
            t = math.tanh(k * (z + cubic * z * z * z))
            d = half * (one + t) + half * z * (one - t * t) * k * (
                one + Z.dtype.type(3) * cubic * z * z)
        elif act == TANH:
            t = math.tanh(z)
            d = one - t * t
        elif act == SIGMOID:
            e = math.exp(-abs(z))
            s = one / (one + e) if z >= 0 else e / (one + e)
            d = s * (one - s)
        else:
            d = one
        dZ[r, c] = dA[r, c] * d


@kernel(*for_float_dtypes("void({t}[:, ::1], {t}[::1])"))
def bias_grad(dZ, db):
    """db[c] = sum over r of dZ[r, c]; one thread per column, summing in a register.

    Per thread: reads the M elements of its column, writes db[c] once: M - 1 additions. At
    every step the threads of a warp read neighbouring columns of one row (coalesced). No
    atomics, no synchronisation: each column has exactly one owner.
    """
    c = cuda.grid(1)
    if c < dZ.shape[1]:
        acc = dZ.dtype.type(0)
        for r in range(dZ.shape[0]):
            acc += dZ[r, c]
        db[c] = acc


@kernel(*for_float_dtypes("void({t}[:, ::1], {t}[:, ::1])"))
def transpose_naive(A, out):
    """out[c, r] = A[r, c]; one thread per element of A (x along A's columns).

    Per thread: 1 read, 1 write, no FLOPs, no synchronisation. Neighbouring threads (x) read
    neighbouring elements of a row of A (coalesced) but write down a column of out, each a
    whole row of out apart: a warp's write request touches a separate 32-byte sector for every
    row of out it writes. ``transpose_tiled`` fixes that.
    """
    c, r = cuda.grid(2)
    if r < A.shape[0] and c < A.shape[1]:
        out[c, r] = A[r, c]


@kernel(*for_float_dtypes("void({t}[:, ::1], {t}[:, ::1])"))
def transpose_tiled(A, out):
    """out[c, r] = A[r, c] through a T x T tile in shared memory; T = blockDim.x = blockDim.y.

    Thread (ty, tx) reads A[r0 + ty, c0 + tx] (neighbouring threads, neighbouring addresses:
    coalesced) into tile[ty, tx]; ``syncthreads``; then writes tile[tx, ty] to
    out[c0 + ty, r0 + tx], again neighbouring addresses. Writing out[c, r] straight from
    A[r, c] would scatter each warp's writes over one row of out per thread along x (32 rows,
    or 16 with 16 x 16 blocks). The tile has T + 1 columns so that a warp reading down a column
    of a 32-wide tile hits 32 different shared-memory banks. Per element: 1 read, 1 write, no
    FLOPs; one barrier per block.
    """
    tile = cuda.shared.array((MAX_TRANSPOSE_TILE, TRANSPOSE_TILE_COLUMNS), A.dtype)
    side = cuda.blockDim.x
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    r0 = cuda.blockIdx.y * side
    c0 = cuda.blockIdx.x * side
    if r0 + ty < A.shape[0] and c0 + tx < A.shape[1]:
        tile[ty, tx] = A[r0 + ty, c0 + tx]
    cuda.syncthreads()  # the whole tile is loaded before anyone reads it crosswise
    if c0 + ty < A.shape[1] and r0 + tx < A.shape[0]:
        out[c0 + ty, r0 + tx] = tile[tx, ty]


# --- counts -----------------------------------------------------------------------------------

# FLOPs per element of f(z), as the roofline estimates count them: an exp or tanh counts as one
# (GPUs run them on special-function units, at a lower rate, but these kernels are memory-bound
# by a wide margin either way).
FLOPS_PER_ELEMENT = {"identity": 0, "relu": 1, "gelu": 9, "tanh": 1, "sigmoid": 4}


def forward_traffic_bytes(M: int, N: int, fused: bool, itemsize: int = 4) -> int:
    """Device-memory bytes for bias + activation on an M x N matmul output.

    Unfused: ``bias_add`` reads Z and b and writes Z + b; ``apply_activation`` reads it back and
    writes A: 4 M N + N values. Fused: ``bias_activation`` reads Z and b, writes A: 2 M N + N.
    """
    return itemsize * ((2 if fused else 4) * M * N + N)


def forward_traffic_bytes_with_reuse(M: int, N: int, fused: bool, itemsize: int = 4,
                                     l2_bytes: int | None = None) -> int:
    """Device-memory bytes for bias + activation if the GPU's L2 cache (``l2_bytes``) catches
    the unfused kernels' intermediate Z + b: when it fits, ``apply_activation`` reads it back
    from L2, not DRAM, and the unfused pair moves what the fused kernel moves (2 M N + N
    values). Larger than L2, or ``l2_bytes`` unknown: :func:`forward_traffic_bytes`."""
    if fused or l2_bytes is None or itemsize * M * N > l2_bytes:
        return forward_traffic_bytes(M, N, fused, itemsize)
    return forward_traffic_bytes(M, N, True, itemsize)


def launches(fused: bool) -> int:
    """Kernel launches for bias + activation: 1 fused, 2 unfused."""
    return 1 if fused else 2


# --- launches ---------------------------------------------------------------------------------


def default_block_2d() -> tuple[int, int]:
    """(threads along columns, along rows): 32 x 8 = 256 on a GPU (a warp reads 32
    neighbouring columns of a row); 8 x 8 in the simulator (fewer idle simulated threads)."""
    return (32, 8) if device.tier() == "gpu" else (8, 8)


def grid_2d(M: int, N: int, block: tuple[int, int] | None = None):
    """(blocks, threads) covering an M x N matrix, one thread per element (x along columns)."""
    tx, ty = block or default_block_2d()
    return (max(-(-N // tx), 1), max(-(-M // ty), 1)), (tx, ty)


def default_threads_1d() -> int:
    return 256 if device.tier() == "gpu" else 32


TRANSPOSE_METHODS = ("naive", "tiled")


def default_transpose() -> tuple[str, int]:
    """(method, tile): ``tiled`` with 16 x 16 tiles on a GPU; ``naive`` in the simulator,
    where each block's ``syncthreads`` costs tens of milliseconds (and coalescing, which the
    tiled kernel is for, does not exist)."""
    return ("tiled", 16) if device.tier() == "gpu" else ("naive", 8)


def activation_code(name: str) -> int:
    """The code the kernels take for the activation ``name`` (:data:`ACTIVATION_CODES`)."""
    return ACTIVATION_CODES[one_of("activation", name, tuple(ACTIVATION_CODES))]


def _bias(Z, b):
    """b checked against Z: one bias per column of Z, in Z's dtype."""
    b = as_array("b", b)
    if b.shape[0] != Z.shape[1]:
        raise InputError(f"b has {b.shape[0]} elements but Z has {Z.shape[1]} columns: "
                         "the layer needs one bias per output")
    same_dtype("b", b, "Z", Z)
    return b


def run_bias_add(Z, b, out=None):
    """Z + b on the device (``bias_add``)."""
    Z = as_array("Z", Z, 2)
    b = _bias(Z, b)
    d_out = output(out, Z.shape, Z, "Z")
    blocks, threads = grid_2d(*Z.shape)
    bias_add[blocks, threads](to_device(Z), to_device(b), d_out)
    return finish(d_out, out, Z, b)


def run_apply_activation(Z, name: str, out=None):
    """f(Z) on the device (``apply_activation``)."""
    Z = as_array("Z", Z, 2)
    code = activation_code(name)
    d_out = output(out, Z.shape, Z, "Z")
    blocks, threads = grid_2d(*Z.shape)
    apply_activation[blocks, threads](to_device(Z), code, d_out)
    return finish(d_out, out, Z)


def run_bias_activation(Z, b, name: str, out=None):
    """f(Z + b) on the device in one fused pass (``bias_activation``)."""
    Z = as_array("Z", Z, 2)
    b = _bias(Z, b)
    code = activation_code(name)
    d_out = output(out, Z.shape, Z, "Z")
    blocks, threads = grid_2d(*Z.shape)
    bias_activation[blocks, threads](to_device(Z), to_device(b), code, d_out)
    return finish(d_out, out, Z, b)


def run_bias_activation_backward(dA, Z, b, name: str, out=None):
    """dA * f'(Z + b) on the device (``bias_activation_backward``)."""
    Z, dA = matching(2, Z=Z, dA=dA)
    b = _bias(Z, b)
    code = activation_code(name)
    d_out = output(out, Z.shape, Z, "Z")
    blocks, threads = grid_2d(*Z.shape)
    bias_activation_backward[blocks, threads](to_device(dA), to_device(Z), to_device(b), code,
                                              d_out)
    return finish(d_out, out, dA, Z, b)


def run_bias_grad(dZ, out=None, threads_per_block: int | None = None):
    """Column sums of dZ on the device (``bias_grad``)."""
    dZ = as_array("dZ", dZ, 2)
    d_out = output(out, (dZ.shape[1],), dZ, "dZ")
    threads = threads_per_block or default_threads_1d()
    blocks = -(-dZ.shape[1] // threads)
    bias_grad[blocks, threads](to_device(dZ), d_out)
    return finish(d_out, out, dZ)


def transpose(A, out=None, method: str | None = None, tile: int | None = None):
    """A^T as a new contiguous matrix, on the device, with the kernel ``transpose_<method>``
    (``naive`` or ``tiled``; default: :func:`default_transpose`); ``tile`` is the block's
    side."""
    A = as_array("A", A, 2)
    default_method, default_tile = default_transpose()
    method = one_of("method", method or default_method, TRANSPOSE_METHODS)
    side = whole_number("tile", tile or default_tile, 1, MAX_TRANSPOSE_TILE)
    M, N = A.shape
    d_out = output(out, (N, M), A, "A")
    blocks = (-(-N // side), -(-M // side))
    kernel_ = transpose_tiled if method == "tiled" else transpose_naive
    kernel_[blocks, (side, side)](to_device(A), d_out)
    return finish(d_out, out, A)


__all__ = [
    "ACTIVATION_CODES", "FLOPS_PER_ELEMENT", "TRANSPOSE_METHODS", "activation",
    "activation_code", "apply_activation", "bias_activation", "bias_activation_backward",
    "bias_add", "bias_grad", "default_block_2d", "default_threads_1d", "default_transpose",
    "forward_traffic_bytes", "grid_2d", "launches", "run_apply_activation",
    "run_bias_activation", "run_bias_activation_backward", "run_bias_add", "run_bias_grad",
    "transpose", "transpose_naive", "transpose_tiled",
]
