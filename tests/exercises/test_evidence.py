"""What several checks gather the same way (gpulab.exercises.evidence)."""

import numpy as np

from gpulab.exercises.evidence import GridStride, TracedWrites, is_number, is_whole
from gpulab.exercises.trial import Trial


def test_a_number_is_a_real_number_but_not_a_bool():
    assert is_number(3) and is_number(2.5) and is_number(np.float32(1)) and is_number(np.int64(4))
    assert not any(is_number(v) for v in (True, None, "3", np.ones(2), 1j))
    assert is_whole(3) and is_whole(3.0) and is_whole(np.int32(7))
    assert not any(is_whole(v) for v in (2.5, float("inf"), float("nan"), False))


def test_traced_writes_name_an_element_two_threads_wrote():
    trial = Trial.draw("check_demo", 1, np.float32, block=8, shape=(12,))
    writes = TracedWrites(trial, {(3,): [(0, 3)], (5,): [(0, 5), (1, 5)]})
    assert list(writes.shared) == [(5,)]
    assert writes.example("y").startswith("y[5] by ")
    assert writes.where.startswith("traced on ") and "seed=1" in writes.where


def test_a_grid_stride_trace_finds_its_step_and_the_elements_two_threads_touched():
    trial = Trial.draw("check_demo", 2, np.float32, block=4, shape=(20,))
    trial.grid_blocks = 2
    loop = GridStride(trial, {(0, 0): [0, 4, 8], (0, 1): [1, 5, 9], (1, 0): [4, 8], (1, 1): []})
    assert (loop.blocks, loop.threads, loop.grid) == (2, 4, 8)
    assert loop.step == 4  # the block's size: blocks 0 and 1 redo each other's elements
    assert sorted(loop.shared) == [4, 8] and loop.busy == [(0, 0), (0, 1), (1, 0)]
    assert loop.example("x[{}]").startswith("x[4] by ")


def test_numbers_are_shown_with_digits_enough_to_differ():
    from gpulab.exercises.evidence import expected_got, shown_apart

    assert shown_apart(447.97, 448) == "447.97" and shown_apart(448.0, 447.97) == "448"
    assert expected_got(-0.34627914, -0.34627911) == "expected -0.34627914, got -0.34627911"
    assert expected_got(2.0, 2.0) == "expected 2, got 2"
