"""Dot products and matrix products in narrow number formats (chapter 04).

The storage format decides how many bytes move; the **accumulator** (the format products and
running sums are kept in) decides how much error piles up. Each kernel's name says both.

Variants
- ``dot_fp16_acc16``: fp16 in, fp16 products and sums. Fast hardware, but once the running sum
  is large every small product is rounded away ("swamping").
- ``dot_fp16_acc32``: fp16 in, each product and sum in fp32 (what tensor cores do in
  "mixed precision"). The product of two fp16 values is exact in fp32.
- ``dot_bf16_acc16`` / ``dot_bf16_acc32``: the same with bfloat16 (8 exponent bits, 7 mantissa
  bits). GPU-only, compute capability >= 8.0: Numba's simulator has no bfloat16, so there the
  wrappers **emulate** the kernels with ml_dtypes, rounding as the kernels do (their bf16
  operations are the ``_rn`` intrinsics, which the compiler may not fuse), and say so.
- ``quantize_fp8_e4m3`` + ``dot_fp8_acc32``: fp8 as quantise -> compute -> dequantise. x and
  y each get a per-tensor scale (max|x| / 448) and are stored as 1-byte E4M3 codes; the dot
  kernel decodes codes through a 256-entry table (an FP8 GPU does this conversion in
  hardware), multiplies and adds in fp32, and multiplies each block's sum by sx * sy.
- ``matmul_fp16_acc16``, ``matmul_fp16_acc32``, ``matmul_bf16_acc32`` (GPU-only),
  ``matmul_fp8_acc32``: C = A @ B, one thread per element of C, a register accumulator.

The dot kernels use a grid-stride loop and a shared-memory tree (the same
:func:`gpulab.kernels.dot.block_tree_sum`), like ``dot_grid_stride``, but write one **partial
sum per block** instead of an atomic add. CUDA C++ has an fp16 atomic add (``atomicAdd`` on
``__half``, compute capability >= 7.0), but Numba's ``cuda.atomic.add`` takes float32, float64
and 32/64-bit integer arrays only (numba-cuda 0.30: a float16 array is a typing error); float
atomics would also make the order of the additions, and so the rounding, change from run to
run; and a partial array says plainly which format held what. The launch wrappers add the
partials one after another **in the accumulator format** (on the CPU: there are only a few).
The dot kernels therefore share their outline (shared array, grid-stride loop, tree, thread 0
writes) and differ in the formats of their loads, products and sums: that difference is what
chapter 04 shows, so each stays a whole kernel that names its formats, and only the tree is
shared.

Per element a dot product reads 2 values (2 x 2 bytes in fp16/bf16, 2 x 1 byte in fp8) and
does 2 FLOPs; a matmul does 2MNK FLOPs. On a GPU the compiler may fuse an fp16 multiply and the
add after it into one FMA (one rounding instead of two); the simulator rounds twice. In the
fp32-accumulating kernels this makes no difference, because the product is exact in fp32.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import cuda

# numba.cuda.bf16 holds the bfloat16 intrinsics on a GPU; in the simulator it is an empty
# stand-in, so the bf16 kernels are registered gpu_only and never launched there.
from numba.cuda import bf16

from gpulab import device, formats, reference
from gpulab.kernels.arrays import InputError, as_array, as_number, matching, one_of, to_device
from gpulab.kernels.dot import TREE_SHARED_SLOTS, block_tree_sum
from gpulab.kernels.dot import launch_config as dot_launch_config
from gpulab.kernels.launch import check_threads_per_block
from gpulab.kernels.matmul import matmul_operands
from gpulab.kernels.registry import kernel

BF16_MIN_COMPUTE_CAPABILITY = (8, 0)


# ---------------------------------------------------------------------------------------------
# Dot products: grid-stride, a block tree, one partial per block
# ---------------------------------------------------------------------------------------------


@kernel("void(float16[::1], float16[::1], float16[::1])")
def dot_fp16_acc16(x, y, partials):
    """fp16 in; products and sums in fp16; partials[block] = the block's fp16 sum.

    Thread g reads x[i], y[i] for i = g, g + G, ... (G threads in the grid) and keeps a
    float16 running sum, rounded after every multiply and every add, and writes it to
    partial[t] (shared memory, float16). ``block_tree_sum`` then halves the block's sums, with
    ``syncthreads`` before the first step and after each step, and thread 0 writes the block's
    sum to partials[block]. No atomics. Reads 4 bytes, does 2 FLOPs per element.
    """
    partial = cuda.shared.array(TREE_SHARED_SLOTS, np.float16)
    t = cuda.threadIdx.x
    acc = x.dtype.type(0)
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        acc += x[i] * y[i]  # float16 * float16 -> float16, + -> float16
    partial[t] = acc
    total = block_tree_sum(partial)
    if t == 0:
        partials[cuda.blockIdx.x] = total


@kernel("void(float16[::1], float16[::1], float32[::1])")
def dot_fp16_acc32(x, y, partials):
    """fp16 in; products and sums in fp32; partials[block] = the block's fp32 sum.

    As ``dot_fp16_acc16``, but each x[i] and y[i] is widened to float32 before the multiply
    (exact: 11 + 11 significant bits fit in fp32's 24), and the register, the shared tree and
    the partials are float32. Memory traffic is still 4 bytes per element: the inputs are
    fp16; only the arithmetic is wider. Barriers and the write of partials[block] as in
    ``dot_fp16_acc16``.
    """
    partial = cuda.shared.array(TREE_SHARED_SLOTS, np.float32)
    t = cuda.threadIdx.x
    acc = np.float32(0)
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        acc += np.float32(x[i]) * np.float32(y[i])
    partial[t] = acc
    total = block_tree_sum(partial)
    if t == 0:
        partials[cuda.blockIdx.x] = total


@kernel("void(uint16[::1], uint16[::1], uint16[::1])", gpu_only=True)
def dot_bf16_acc16(x_bits, y_bits, partial_bits):
    """bf16 in (as 16-bit patterns); products and sums in bf16; one bf16 partial per block.

    NumPy has no bfloat16, so the arrays hold the bit patterns (``ml_dtypes.bfloat16`` arrays
    viewed as uint16) and the kernel reinterprets them. ``hmul_rn`` / ``hadd_rn`` round to
    nearest after every multiply and add, and the compiler may not fuse them. Shared memory
    holds bit patterns too, so the tree is written out here rather than taken from
    ``block_tree_sum``: each step reinterprets two slots, adds them with ``hadd_rn`` and
    stores the bits back, with ``syncthreads`` before the first step and after each step.
    Thread 0 writes the block's bits to partial_bits[block]. Needs compute capability >= 8.0
    for bf16 arithmetic.
    """
    partial = cuda.shared.array(TREE_SHARED_SLOTS, np.uint16)
    t = cuda.threadIdx.x
    acc = bf16.uint16_as_bfloat16(np.uint16(0))
    for i in range(cuda.grid(1), x_bits.shape[0], cuda.gridsize(1)):
        product = bf16.hmul_rn(bf16.uint16_as_bfloat16(x_bits[i]),
                               bf16.uint16_as_bfloat16(y_bits[i]))
        acc = bf16.hadd_rn(acc, product)
    partial[t] = bf16.bfloat16_as_uint16(acc)
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            total = bf16.hadd_rn(bf16.uint16_as_bfloat16(partial[t]),
                                 bf16.uint16_as_bfloat16(partial[t + stride]))
            partial[t] = bf16.bfloat16_as_uint16(total)
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        partial_bits[cuda.blockIdx.x] = partial[0]


@kernel("void(uint16[::1], uint16[::1], float32[::1])", gpu_only=True)
def dot_bf16_acc32(x_bits, y_bits, partials):
    """bf16 in (as 16-bit patterns); products and sums in fp32; one fp32 partial per block.

    Each input is widened to float32 (exact), multiplied (exact: 8 + 8 significant bits) and
    added in fp32, then written to partial[t] (shared memory) and summed by
    ``block_tree_sum`` (barriers as in the fp16 kernels); thread 0 writes partials[block].
    Reads 4 bytes and does 2 FLOPs per element.
    """
    partial = cuda.shared.array(TREE_SHARED_SLOTS, np.float32)
    t = cuda.threadIdx.x
    acc = np.float32(0)
    for i in range(cuda.grid(1), x_bits.shape[0], cuda.gridsize(1)):
        acc += (bf16.bfloat16_to_float32(bf16.uint16_as_bfloat16(x_bits[i]))
                * bf16.bfloat16_to_float32(bf16.uint16_as_bfloat16(y_bits[i])))
    partial[t] = acc
    total = block_tree_sum(partial)
    if t == 0:
        partials[cuda.blockIdx.x] = total


@kernel("void(float32[::1], float32, uint8[::1])")
def quantize_fp8_e4m3(x, inverse_scale, codes):
    """codes[i] = the FP8 E4M3 code nearest to x[i] * inverse_scale (ties to even).

    Grid-stride: each thread converts x[g], x[g + G], ... (reads 4 bytes, writes 1 per
    element; no barriers). Magnitudes above 448, infinities included, saturate to +-448 (CUDA's
    ``__NV_SATFINITE`` rule, the OCP specification's saturating conversion; a non-saturating
    cast such as ml_dtypes' would give NaN); NaN becomes code 0x7F; -0 is stored as +0. The
    binade search takes at most 14 steps; below 2^-6 the step stays 2^-9, which gives the
    subnormals.
    """
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        v = x[i] * inverse_scale
        sign = 0
        if v < 0:
            sign = 128
            v = -v
        if v != v:  # NaN
            codes[i] = 127
            continue
        if v > 448:
            v = np.float32(448)
        exponent = -6  # v lies in [2^exponent, 2^(exponent + 1)), or below 2^-6
        top = np.float32(2.0**-5)
        while exponent < 8 and v >= top:
            exponent += 1
            top *= np.float32(2)
        step = top / np.float32(16)  # the gap between neighbouring codes: 2^(exponent - 3)
        q = v / step  # exact: dividing by a power of two
        m = int(q)  # q >= 0, so this is floor(q)
        rest = q - np.float32(m)  # float32 throughout: q - m would be float64 arithmetic
        if rest > 0.5 or (rest == 0.5 and m % 2 == 1):
            m += 1
        if m == 16:  # rounded up into the next binade
            exponent += 1
            m = 8
        if m >= 8:  # normal: exponent field = exponent + bias 7, implicit leading 1
            codes[i] = sign | ((exponent + 7) << 3) | (m - 8)
        else:  # subnormal: exponent field 0
            codes[i] = sign | m


@kernel("void(uint8[::1], uint8[::1], float32[::1], float32, float32[::1])")
def dot_fp8_acc32(x_codes, y_codes, decode, scale, partials):
    """fp8 E4M3 codes in; products and sums in fp32; partials[block] = block sum * scale.

    ``decode`` holds the float32 value of each of the 256 codes (the conversion an FP8 GPU
    does in hardware). Reads 2 bytes per element (plus the 1 KiB table, which stays in
    cache) and does 2 FLOPs. Each thread's fp32 sum goes to partial[t] (shared memory) and
    ``block_tree_sum`` adds them (barriers as in the fp16 kernels); thread 0 writes
    partials[block] = the block's sum * ``scale`` (sx * sy, undoing both per-tensor scales:
    the dequantise step, once per block).
    """
    partial = cuda.shared.array(TREE_SHARED_SLOTS, np.float32)
    t = cuda.threadIdx.x
    acc = np.float32(0)
    for i in range(cuda.grid(1), x_codes.shape[0], cuda.gridsize(1)):
        acc += decode[x_codes[i]] * decode[y_codes[i]]
    partial[t] = acc
    total = block_tree_sum(partial)
    if t == 0:
        partials[cuda.blockIdx.x] = total * scale


# ---------------------------------------------------------------------------------------------
# Matrix products: one thread per element of C
# ---------------------------------------------------------------------------------------------


@kernel("void(float16[:, ::1], float16[:, ::1], float16[:, ::1])")
def matmul_fp16_acc16(a, b, c):
    """c[row, col] = sum_k a[row, k] * b[k, col], products and sums in fp16.

    One thread per element of C (x -> column, so a warp reads neighbouring b[k, col]); each
    reads a row of A and a column of B (2K values, 4K bytes from global memory, caches
    aside), does 2K FLOPs and writes c[row, col]. No shared memory, no barriers.
    """
    col, row = cuda.grid(2)
    if row < c.shape[0] and col < c.shape[1]:
        acc = a.dtype.type(0)
        for k in range(a.shape[1]):
            acc += a[row, k] * b[k, col]
        c[row, col] = acc


@kernel("void(float16[:, ::1], float16[:, ::1], float32[:, ::1])")
def matmul_fp16_acc32(a, b, c):
    """c[row, col] = sum_k a[row, k] * b[k, col], fp16 in, products and sums in fp32.

    As ``matmul_fp16_acc16`` with a float32 register and a float32 C: per thread reads a row
    of A and a column of B (4K bytes), does 2K FLOPs, writes one element of C. No shared
    memory, no barriers.
    """
    col, row = cuda.grid(2)
    if row < c.shape[0] and col < c.shape[1]:
        acc = np.float32(0)
        for k in range(a.shape[1]):
            acc += np.float32(a[row, k]) * np.float32(b[k, col])
        c[row, col] = acc


@kernel("void(uint16[:, ::1], uint16[:, ::1], float32[:, ::1])", gpu_only=True)
def matmul_bf16_acc32(a_bits, b_bits, c):
    """c = A @ B with bf16 inputs (as bit patterns), products and sums in fp32.

    One thread per element of C: reads a row of A and a column of B (4K bytes of bit
    patterns), does 2K FLOPs in fp32, writes one element of C. No shared memory, no barriers.
    Needs compute capability >= 8.0.
    """
    col, row = cuda.grid(2)
    if row < c.shape[0] and col < c.shape[1]:
        acc = np.float32(0)
        for k in range(a_bits.shape[1]):
            acc += (bf16.bfloat16_to_float32(bf16.uint16_as_bfloat16(a_bits[row, k]))
                    * bf16.bfloat16_to_float32(bf16.uint16_as_bfloat16(b_bits[k, col])))
        c[row, col] = acc


@kernel("void(uint8[:, ::1], uint8[:, ::1], float32[::1], float32, float32[:, ::1])")
def matmul_fp8_acc32(a_codes, b_codes, decode, scale, c):
    """c = (A @ B) * scale from E4M3 codes: decode through the table, fp32 products and sums,
    one multiply by scale = sa * sb at the end (dequantise). One thread per element of C:
    reads 2K bytes of codes (and table entries, cached), does 2K FLOPs, writes one element.
    No shared memory, no barriers."""
    col, row = cuda.grid(2)
    if row < c.shape[0] and col < c.shape[1]:
        acc = np.float32(0)
        for k in range(a_codes.shape[1]):
            acc += decode[a_codes[row, k]] * decode[b_codes[k, col]]
        c[row, col] = acc * scale


# ---------------------------------------------------------------------------------------------
# Where a result came from
# ---------------------------------------------------------------------------------------------

SIMULATOR_LABEL = "in Numba's CUDA simulator on this CPU"


@dataclass(frozen=True)
class PrecisionResult:
    """A dot or matrix product in a narrow format, and where it was computed.

    ``value`` has the accumulator's type (a NumPy scalar for a dot, an array for a matmul).
    ``ran`` is ``"gpu"``, ``"sim"`` or ``"emulated"``; ``label`` says it in words.
    """

    value: object
    storage: str
    accumulator: str
    kernel: str
    ran: str
    label: str
    partials: np.ndarray | None = None
    scale: float | None = None

    def __float__(self) -> float:
        return float(self.value)

    def __str__(self) -> str:
        shown = f"{float(self.value):.7g}" if np.ndim(self.value) == 0 else \
            f"array of shape {np.shape(self.value)}"
        return (f"{shown} ({self.storage} storage, {self.accumulator} accumulator; "
                f"{self.label})")


def bf16_runs_here() -> bool:
    """True on a GPU whose compute capability has bf16 arithmetic (>= 8.0)."""
    cc = device.PROBE.compute_capability
    return device.tier() == "gpu" and cc is not None and tuple(cc) >= BF16_MIN_COMPUTE_CAPABILITY


def _why_emulated() -> str:
    if device.tier() != "gpu":
        return "Numba's CUDA simulator has no bfloat16"
    cc = device.PROBE.compute_capability
    shown = ".".join(map(str, cc)) if cc else "unknown"
    return (f"bf16 arithmetic needs compute capability >= 8.0; this GPU has {shown}")


def _ran_label(kernel_name: str) -> tuple[str, str]:
    if device.tier() == "gpu":
        return "gpu", f"run by {kernel_name} on {device.PROBE.device_name or 'the GPU'}"
    return "sim", f"run by {kernel_name} {SIMULATOR_LABEL}"


def _emulated_label(kernel_name: str) -> tuple[str, str]:
    return "emulated", (f"emulated with ml_dtypes on this CPU, rounding as {kernel_name} does "
                        f"({_why_emulated()})")


# How to get the dtype each wrapper takes (``{name}`` is the argument), for the messages of
# gpulab.kernels.arrays.as_array.
FP16_HOW = "convert it with {name}.astype(np.float16) (which rounds it to fp16)"
BF16_HOW = "convert it with {name}.astype(ml_dtypes.bfloat16) (which rounds it to bf16)"
FP8_HOW = "give the full-precision values as float32, e.g. {name}.astype(np.float32)"


# ---------------------------------------------------------------------------------------------
# Launch wrappers: dot products
# ---------------------------------------------------------------------------------------------


def _launch_partials(kernel_function, n: int, args, partial_dtype, threads_per_block,
                     blocks):
    config = dot_launch_config(n, "grid_stride", threads_per_block, blocks)
    d_partials = cuda.to_device(np.zeros(config.blocks, dtype=partial_dtype))
    kernel_function[config.blocks, config.threads_per_block](*args, d_partials)
    return d_partials.copy_to_host(), config


def dot_fp16(x, y, accumulate: str = "fp32", threads_per_block: int | None = None,
             blocks: int | None = None) -> PrecisionResult:
    """x · y for fp16 vectors with ``dot_fp16_acc16`` (``accumulate="fp16"``) or
    ``dot_fp16_acc32`` (``"fp32"``); the per-block partials are then added on the CPU in the
    same accumulator format. NumPy float16 arrays or device arrays."""
    accumulate = one_of("accumulate", accumulate, ("fp16", "fp32"))
    x, y = matching(x=x, y=y, dtypes=(np.float16,), how=FP16_HOW)
    kernel_function = dot_fp16_acc16 if accumulate == "fp16" else dot_fp16_acc32
    name = f"dot_fp16_acc{accumulate[2:]}"
    partial_dtype = np.float16 if accumulate == "fp16" else np.float32
    partials, _ = _launch_partials(kernel_function, x.shape[0], (to_device(x), to_device(y)),
                                   partial_dtype, threads_per_block, blocks)
    ran, label = _ran_label(name)
    return PrecisionResult(reference.sum_in_format(partials, accumulate), "fp16", accumulate,
                           name, ran, label, partials)


def dot_bf16(x, y, accumulate: str = "fp32", threads_per_block: int | None = None,
             blocks: int | None = None) -> PrecisionResult:
    """x · y for ``ml_dtypes.bfloat16`` vectors with ``dot_bf16_acc16`` or ``dot_bf16_acc32``
    on a GPU with compute capability >= 8.0; elsewhere emulated with ml_dtypes in the kernel's
    order and rounding (the result's label says which)."""
    import ml_dtypes

    accumulate = one_of("accumulate", accumulate, ("bf16", "fp32"))
    x, y = matching(x=x, y=y, dtypes=(ml_dtypes.bfloat16,), how=BF16_HOW, on_device=False)
    name = f"dot_bf16_acc{accumulate[2:]}"
    config = dot_launch_config(x.shape[0], "grid_stride", threads_per_block, blocks)
    if bf16_runs_here():
        kernel_function = dot_bf16_acc16 if accumulate == "bf16" else dot_bf16_acc32
        partial_dtype = np.uint16 if accumulate == "bf16" else np.float32
        partials, _ = _launch_partials(kernel_function, x.shape[0],
                                       (to_device(x.view(np.uint16)),
                                        to_device(y.view(np.uint16))),
                                       partial_dtype, config.threads_per_block, config.blocks)
        if accumulate == "bf16":
            partials = partials.view(ml_dtypes.bfloat16)
        ran, label = _ran_label(name)
    else:
        partials = reference.dot_partials_in_format(x, y, accumulate, config.blocks,
                                                    config.threads_per_block)
        ran, label = _emulated_label(name)
    return PrecisionResult(reference.sum_in_format(partials, accumulate), "bf16", accumulate,
                           name, ran, label, partials)


def run_quantize_fp8_e4m3(x, scale: float | None = None, threads_per_block: int | None = None,
                          blocks: int | None = None) -> tuple[np.ndarray, float]:
    """Quantise float32 ``x`` to FP8 E4M3 codes on the device with ``quantize_fp8_e4m3``.

    ``scale`` defaults to the per-tensor scale max|x| / 448 (1.0 for an all-zero x). Returns
    the codes (a uint8 array; ``codes.view(ml_dtypes.float8_e4m3fn)`` shows the values) and
    the scale: x ~= value(codes) * scale.
    """
    x = as_array("x", x, dtypes=(np.float32,), how=FP8_HOW)
    if scale is None:
        host = x if isinstance(x, np.ndarray) else x.copy_to_host()
        if not np.all(np.isfinite(host)):
            raise InputError("x holds inf or NaN: a per-tensor scale needs finite values")
        scale = formats.per_tensor_scale(host, "fp8_e4m3")
    scale = as_number("scale", scale)
    if scale <= 0:
        raise InputError(f"scale must be a positive finite number, not {scale!r}")
    config = dot_launch_config(x.shape[0], "grid_stride", threads_per_block, blocks)
    d_codes = cuda.to_device(np.zeros(x.shape[0], dtype=np.uint8))
    quantize_fp8_e4m3[config.blocks, config.threads_per_block](to_device(x),
                                                               np.float32(1 / scale), d_codes)
    return d_codes.copy_to_host(), scale


def dot_fp8(x, y, threads_per_block: int | None = None,
            blocks: int | None = None) -> PrecisionResult:
    """x · y through FP8 E4M3: quantise x and y (each with its per-tensor scale) with
    ``quantize_fp8_e4m3``, multiply and add in fp32 with ``dot_fp8_acc32``, dequantise by
    sx * sy. Takes float32 vectors; the result's ``scale`` is sx * sy."""
    x, y = matching(x=x, y=y, dtypes=(np.float32,), how=FP8_HOW)
    x_codes, x_scale = run_quantize_fp8_e4m3(x, None, threads_per_block, blocks)
    y_codes, y_scale = run_quantize_fp8_e4m3(y, None, threads_per_block, blocks)
    scale = np.float32(x_scale * y_scale)
    decode = formats.decode_table("fp8_e4m3")
    partials, _ = _launch_partials(
        dot_fp8_acc32, x.shape[0],
        (to_device(x_codes), to_device(y_codes), to_device(decode), scale),
        np.float32, threads_per_block, blocks)
    ran, label = _ran_label("quantize_fp8_e4m3 + dot_fp8_acc32")
    return PrecisionResult(reference.sum_in_format(partials, "fp32"), "fp8_e4m3", "fp32",
                           "dot_fp8_acc32", ran, label, partials, float(scale))


# ---------------------------------------------------------------------------------------------
# Launch wrappers: matrix products
# ---------------------------------------------------------------------------------------------


def default_matmul_block() -> tuple[int, int]:
    """16 x 16 threads on a GPU; 8 x 8 in the simulator (each simulated thread costs ~0.1 ms,
    so fewer idle threads at the edges)."""
    return (16, 16) if device.tier() == "gpu" else (8, 8)


def _matmul_grid(rows: int, cols: int, block: tuple[int, int] | None):
    block = tuple(block or default_matmul_block())
    if len(block) != 2:
        raise InputError(f"block must be (threads in x, threads in y), not {block!r}")
    check_threads_per_block(block[0] * block[1])
    grid = (-(-cols // block[0]), -(-rows // block[1]))  # x covers columns, y rows
    return grid, block


def _launch_matmul(kernel_function, args, shape, out_dtype, block):
    grid, block = _matmul_grid(shape[0], shape[1], block)
    d_c = cuda.to_device(np.zeros(shape, dtype=out_dtype))
    kernel_function[grid, block](*args, d_c)
    return d_c.copy_to_host()


def matmul_fp16(a, b, accumulate: str = "fp32",
                block: tuple[int, int] | None = None) -> PrecisionResult:
    """A @ B for fp16 matrices with ``matmul_fp16_acc16`` or ``matmul_fp16_acc32``; C is in
    the accumulator's format."""
    accumulate = one_of("accumulate", accumulate, ("fp16", "fp32"))
    a, b = matmul_operands(a, b, (np.float16,), FP16_HOW, on_device=False)
    kernel_function = matmul_fp16_acc16 if accumulate == "fp16" else matmul_fp16_acc32
    name = f"matmul_fp16_acc{accumulate[2:]}"
    out_dtype = np.float16 if accumulate == "fp16" else np.float32
    c = _launch_matmul(kernel_function, (cuda.to_device(a), cuda.to_device(b)),
                       (a.shape[0], b.shape[1]), out_dtype, block)
    ran, label = _ran_label(name)
    return PrecisionResult(c, "fp16", accumulate, name, ran, label)


def matmul_bf16(a, b, block: tuple[int, int] | None = None) -> PrecisionResult:
    """A @ B for ``ml_dtypes.bfloat16`` matrices with ``matmul_bf16_acc32`` (fp32 C) on a
    GPU with compute capability >= 8.0; elsewhere emulated with ml_dtypes, labelled so."""
    import ml_dtypes

    a, b = matmul_operands(a, b, (ml_dtypes.bfloat16,), BF16_HOW, on_device=False)
    name = "matmul_bf16_acc32"
    if bf16_runs_here():
        c = _launch_matmul(matmul_bf16_acc32, (cuda.to_device(a.view(np.uint16)),
                                               cuda.to_device(b.view(np.uint16))),
                           (a.shape[0], b.shape[1]), np.float32, block)
        ran, label = _ran_label(name)
    else:
        c = reference.matmul_in_format(a, b, "fp32")
        ran, label = _emulated_label(name)
    return PrecisionResult(c, "bf16", "fp32", name, ran, label)


def matmul_fp8(a, b, block: tuple[int, int] | None = None) -> PrecisionResult:
    """A @ B through FP8 E4M3: quantise A and B with per-tensor scales
    (``quantize_fp8_e4m3``), multiply in fp32 with ``matmul_fp8_acc32``, dequantise by
    sa * sb. Takes float32 matrices; C is float32."""
    a, b = matmul_operands(a, b, (np.float32,), FP8_HOW, on_device=False)
    a_codes, a_scale = run_quantize_fp8_e4m3(a.ravel())
    b_codes, b_scale = run_quantize_fp8_e4m3(b.ravel())
    scale = np.float32(a_scale * b_scale)
    c = _launch_matmul(matmul_fp8_acc32,
                       (cuda.to_device(a_codes.reshape(a.shape)),
                        cuda.to_device(b_codes.reshape(b.shape)),
                        cuda.to_device(formats.decode_table("fp8_e4m3")), scale),
                       (a.shape[0], b.shape[1]), np.float32, block)
    ran, label = _ran_label("quantize_fp8_e4m3 + matmul_fp8_acc32")
    return PrecisionResult(c, "fp8_e4m3", "fp32", "matmul_fp8_acc32", ran, label,
                           scale=float(scale))


# ---------------------------------------------------------------------------------------------
# One entry point: round to a format, then run its kernel
# ---------------------------------------------------------------------------------------------

# (storage, accumulator) pairs that have a kernel here.
DOT_VARIANTS = (("fp32", "fp32"), ("fp16", "fp16"), ("fp16", "fp32"), ("bf16", "bf16"),
                ("bf16", "fp32"), ("fp8_e4m3", "fp32"))


def dot_in_format(x, y, storage: str, accumulate: str, threads_per_block: int | None = None,
                  blocks: int | None = None) -> PrecisionResult:
    """Store float vectors x and y in ``storage`` (rounding them: the storage error is part
    of the answer), then run that format's dot kernel with ``accumulate``.

    fp32 storage uses chapter 01's ``dot_grid_stride`` (fp32 sums, one atomic per block).
    """
    storage = formats.get_format(storage).name
    accumulate = formats.get_format(accumulate).name
    if (storage, accumulate) not in DOT_VARIANTS:
        pairs = ", ".join(f"{s}/{a}" for s, a in DOT_VARIANTS)
        raise ValueError(f"no dot kernel stores {storage} and accumulates in {accumulate}; "
                         f"the storage/accumulator pairs are: {pairs}")
    floats = (np.float16, np.float32, np.float64)
    x, y = (as_array(name, value, dtypes=floats, on_device=False)
            for name, value in (("x", x), ("y", y)))
    if storage == "fp8_e4m3":
        return dot_fp8(x.astype(np.float32), y.astype(np.float32), threads_per_block, blocks)
    stored_x = formats.to_format(x, storage)
    stored_y = formats.to_format(y, storage)
    if storage == "fp16":
        return dot_fp16(stored_x, stored_y, accumulate, threads_per_block, blocks)
    if storage == "bf16":
        return dot_bf16(stored_x, stored_y, accumulate, threads_per_block, blocks)
    from gpulab.kernels.dot import dot as dot_fp32

    value = dot_fp32(stored_x, stored_y, "grid_stride", threads_per_block, blocks)
    ran, label = _ran_label("dot_grid_stride")
    return PrecisionResult(value, "fp32", "fp32", "dot_grid_stride", ran, label)


__all__ = [
    "DOT_VARIANTS",
    "PrecisionResult",
    "bf16_runs_here",
    "dot_bf16",
    "dot_fp8",
    "dot_fp16",
    "dot_in_format",
    "matmul_bf16",
    "matmul_fp8",
    "matmul_fp16",
    "run_quantize_fp8_e4m3",
]
