"""The grid-stride loop's method rules (gpulab.exercises.grid_stride), on traces written by
hand: a grid of 2 blocks of 4 threads (8 threads) over 20 elements. Each rule is checked
for the trace it names, in the order a check walks them; the chapters' checks run them on
real kernels (tests/exercises/test_ch02.py, test_ch08.py, test_ch10.py)."""

import numpy as np
import pytest

from gpulab.exercises.evidence import GridStride
from gpulab.exercises.grid_stride import grid_stride_mistakes
from gpulab.exercises.mistakes import diagnose
from gpulab.exercises.trial import Trial

N, BLOCKS, THREADS = 20, 2, 4
GRID = BLOCKS * THREADS
THREAD_IDS = [(b, t) for b in range(BLOCKS) for t in range(THREADS)]


def trace(start, step, end=N) -> GridStride:
    trial = Trial.draw("check_demo", 3, np.float32, block=THREADS, shape=(N,))
    trial.grid_blocks = BLOCKS
    assert trial.n == N
    order = {(b, t): list(range(start(b, t), end, step)) if step else [start(b, t)] * 3
             for b, t in THREAD_IDS}
    return GridStride(trial, order)


def chunks(b, t):
    return (b * THREADS + t) * 3


RIGHT = trace(lambda b, t: b * THREADS + t, GRID)
CASES = {  # trace -> (words of the message, words of did)
    "every block from threadIdx.x": (trace(lambda b, t: t, GRID),
                                     "start at the same element", "threadIdx"),
    "a step of blockDim": (trace(lambda b, t: b * THREADS + t, THREADS),
                           "the block size, `cuda.blockDim.x` = 4", "block's size"),
    "a step of gridDim": (trace(lambda b, t: b * THREADS + t, BLOCKS),
                          "the number of blocks, `cuda.gridDim.x` = 2", "number of blocks"),
    "a step of 3": (trace(lambda b, t: b * THREADS + t, 3), "each thread steps by 3",
                    "smaller than the grid"),
    "one thread": (GridStride(RIGHT.trial, {(0, 0): list(range(N)),
                                            **{k: [] for k in THREAD_IDS[1:]}}),
                   "block 0, thread 0 touched all 20 elements", "one thread"),
    "a chunk per thread": (GridStride(RIGHT.trial, {(b, t): list(range(chunks(b, t),
                                                                      min(chunks(b, t) + 3, N)))
                                                    for b, t in THREAD_IDS}),
                           "its own run of consecutive elements (block 0, thread 0: elements "
                           "0..2)", "not coalesced"),
    "a scattered start": (trace(lambda b, t: t * BLOCKS + b, GRID),
                          "threads side by side start 2 elements apart", "start far apart"),
}


def test_the_right_loop_breaks_no_rule():
    assert diagnose(grid_stride_mistakes("hint", "coalesced"), RIGHT) is None
    assert diagnose(grid_stride_mistakes("hint"), RIGHT) is None


@pytest.mark.parametrize("name", list(CASES))
def test_each_wrong_loop_is_named(name):
    evidence, words, did = CASES[name]
    rules = grid_stride_mistakes("step by the grid", "stay coalesced")
    first = next(rule for rule in rules if rule.seen(evidence))
    assert did in first.did
    failure = first.failure(evidence)
    assert words in failure.message and "seed=3" in failure.message, failure.message
    assert failure.hint.endswith("stay coalesced" if name in ("a chunk per thread",
                                                              "a scattered start")
                                 else "step by the grid")


def test_a_grid_stride_walked_down_from_the_end_breaks_no_rule():
    backwards = trace(lambda b, t: N - 1 - (b * THREADS + t), -GRID, -1)
    assert diagnose(grid_stride_mistakes("hint", "coalesced"), backwards) is None


def test_without_the_coalesced_hint_a_step_past_the_grid_is_named_and_runs_are_left():
    rules = grid_stride_mistakes("step by the grid")
    past = trace(lambda b, t: b * THREADS + t, 2 * GRID)
    failure = diagnose(rules, past)
    assert failure is not None and "steps by 16" in failure.message
    assert "never touched" in failure.message
    assert diagnose(rules, CASES["a chunk per thread"][0]) is None  # the warps judge it there
    with_runs = grid_stride_mistakes("step by the grid", "stay coalesced")
    assert diagnose(with_runs, past) is None  # left to the outputs' rules there


def test_a_blocks_chunk_walked_by_its_threads_is_coalesced_and_passes():
    # block b takes elements [10 b, 10 b + 10), its 4 threads stepping by 4 inside: at every
    # step a warp's threads read neighbours, no element twice (a right answer written otherwise)
    chunked = GridStride(RIGHT.trial, {(b, t): list(range(10 * b + t, 10 * b + 10, THREADS))
                                       for b, t in THREAD_IDS})
    assert chunked.step == THREADS and not chunked.shared
    assert diagnose(grid_stride_mistakes("hint", "coalesced"), chunked) is None


def test_threads_that_overlap_without_a_loop_are_left_to_the_outputs():
    # every block from threadIdx.x with no loop: blocks share elements, but there is no step
    no_loop = GridStride(RIGHT.trial, {(b, t): [t] for b, t in THREAD_IDS})
    assert no_loop.shared and no_loop.step is None
    assert diagnose(grid_stride_mistakes("hint", "coalesced"), no_loop) is None
