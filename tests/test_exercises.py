"""Chapter 01's checks against a right kernel and the typical wrong ones.

The solutions live here and in the solution notebooks only: the package ships no solutions.
Every wrong kernel must be caught with a status and hint words a learner can act on, in the
simulator (where threads of a block run one after another, so races and missing barriers need
care: see gpulab.exercises.ch01's docstring) and on a GPU.
"""

import gpulab  # noqa: F401  (must come before numba: it chooses the simulator or the GPU)

# isort: split
import numpy as np
import pytest
from numba import cuda

from gpulab.exercises import checks
from gpulab.exercises.ch01 import check_block_sum, check_dot_atomic, check_multiply

THREADS = 64  # the block size of the block-sum kernels (one shared slot per thread)
SMALL = 32  # a shared array too small for a block of THREADS threads

# --- exercise 1: multiply --------------------------------------------------------------------


@cuda.jit
def multiply_solution(x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = x[i] * y[i]


@cuda.jit
def multiply_stub(x, y, out):
    # YOUR CODE HERE
    raise NotImplementedError()


@cuda.jit
def multiply_no_guard(x, y, out):
    i = cuda.grid(1)
    out[i] = x[i] * y[i]


@cuda.jit
def multiply_guard_le(x, y, out):
    i = cuda.grid(1)
    if i <= x.shape[0]:
        out[i] = x[i] * y[i]


@cuda.jit
def multiply_thread_index_only(x, y, out):
    i = cuda.threadIdx.x
    if i < x.shape[0]:
        out[i] = x[i] * y[i]


@cuda.jit
def multiply_writes_nothing(x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        product = x[i] * y[i]  # noqa: F841  (computed, never stored)


@cuda.jit
def multiply_adds(x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = x[i] + y[i]


@cuda.jit
def multiply_off_by_one(x, y, out):
    i = cuda.grid(1)
    if 0 < i < x.shape[0]:
        out[i] = x[i - 1] * y[i - 1]


@cuda.jit
def multiply_skips_last_block(x, y, out):
    i = cuda.grid(1)
    if i < (x.shape[0] // cuda.blockDim.x) * cuda.blockDim.x:
        out[i] = x[i] * y[i]


@cuda.jit
def multiply_with_list(x, y, out):  # runs in the simulator, would not compile for a GPU
    i = cuda.grid(1)
    if i < x.shape[0]:
        pair = [x[i], y[i]]
        out[i] = pair[0] * pair[1]


def multiply_not_jitted(x, y, out):
    pass


# --- exercise 2: dot product with atomics -----------------------------------------------------


@cuda.jit
def dot_solution(x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        cuda.atomic.add(out, 0, x[i] * y[i])


@cuda.jit
def dot_stub(x, y, out):
    # YOUR CODE HERE
    raise NotImplementedError()


@cuda.jit
def dot_racy(x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[0] += x[i] * y[i]


@cuda.jit
def dot_racy_spelled_out(x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[0] = out[0] + x[i] * y[i]


@cuda.jit
def dot_overwrites(x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[0] = x[i] * y[i]


@cuda.jit
def dot_no_guard(x, y, out):
    i = cuda.grid(1)
    cuda.atomic.add(out, 0, x[i] * y[i])


@cuda.jit
def dot_thread_index_only(x, y, out):
    i = cuda.threadIdx.x
    if i < x.shape[0]:
        cuda.atomic.add(out, 0, x[i] * y[i])


@cuda.jit
def dot_skips_last_block(x, y, out):
    i = cuda.grid(1)
    if i < (x.shape[0] // cuda.blockDim.x) * cuda.blockDim.x:
        cuda.atomic.add(out, 0, x[i] * y[i])


@cuda.jit
def dot_adds_nothing(x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        cuda.atomic.add(out, 0, 0.0 * x[i])


# --- exercise 3: block sum in shared memory ----------------------------------------------------


@cuda.jit
def block_sum_solution(x, out):
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < x.shape[0]:
        partial[t] = x[i]
    else:
        partial[t] = 0  # threads past the end add nothing
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_stub(x, out):
    partial = cuda.shared.array(THREADS, x.dtype)  # noqa: F841
    # YOUR CODE HERE
    raise NotImplementedError()


@cuda.jit
def block_sum_no_barriers(x, out):
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        stride //= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_barrier_after_fill_only(x, out):
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        stride //= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_barrier_in_loop_only(x, out):
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_racy_total(x, out):
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        out[0] += partial[0]


@cuda.jit
def block_sum_overwrites_total(x, out):
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        out[0] = partial[0]


@cuda.jit
def block_sum_no_guard(x, out):
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i]
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_no_zero_past_end(x, out):
    partial = cuda.shared.array(THREADS, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < x.shape[0]:
        partial[t] = x[i]  # threads past the end leave their slot as it was
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def block_sum_small_shared(x, out):
    partial = cuda.shared.array(SMALL, x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.shape[0] else 0
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        cuda.atomic.add(out, 0, partial[0])
