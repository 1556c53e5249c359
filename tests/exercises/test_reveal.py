"""compare_yours shows gpulab's version only after the learner's check passed; try_it turns a
failing try-it cell into a few plain lines, the full traceback one call away."""

import linecache
import re

import numpy as np
import pytest
from learner_kernels import multiply
from numba import cuda

from gpulab import device
from gpulab.exercises import ch01, results
from gpulab.exercises.reveal import compare_yours, full_traceback, short_failure, try_it


def notebook_cell(source: str, name: str = "/tmp/ipykernel_4242/1234.py") -> dict:
    """Run ``source`` as IPython runs a cell: compiled under a file name of its own that
    linecache knows (so a traceback shows the cell's lines)."""
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    namespace = {"cuda": cuda, "np": np}
    exec(compile(source, name, "exec"), namespace)
    return namespace


@pytest.fixture
def nothing_passed(monkeypatch):
    monkeypatch.setattr(results, "_PASSED_EXERCISES", set())


def test_compare_yours_before_the_check_passed_shows_how_not_what(nothing_passed, capsys):
    assert compare_yours(ch01.MULTIPLY, "elementwise_multiply") is False
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    assert "once your check of 'multiply' above has passed" in out
    assert 'print(gpulab.kernel_source("elementwise_multiply"))' in out
    assert "def " not in out and "cuda.grid" not in out


def test_a_failed_check_does_not_reveal(nothing_passed, capsys):
    @cuda.jit
    def wrong(x, y, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[i] + y[i]

    assert not ch01.check_multiply(wrong, seed=1, show=False).passed
    assert compare_yours("multiply", "elementwise_multiply") is False
    assert "def " not in capsys.readouterr().out


def test_compare_yours_after_the_check_passed_shows_the_sources(nothing_passed, capsys):
    result = ch01.check_multiply(multiply, seed=3, show=False)
    assert result.passed, result.message
    assert compare_yours(ch01.MULTIPLY, "elementwise_multiply") is True
    out = capsys.readouterr().out
    assert "def elementwise_multiply" in out


def test_compare_yours_names_a_function_by_its_module(nothing_passed, capsys):
    from gpulab.nn.data import minibatch_indices

    compare_yours("minibatches", minibatch_indices)
    assert "print(inspect.getsource(gpulab.nn.data.minibatch_indices))" in capsys.readouterr().out


def test_compare_yours_refuses_what_it_cannot_name():
    with pytest.raises(TypeError, match="check's spec"):
        compare_yours(42, "elementwise_multiply")
    with pytest.raises(TypeError, match="at least one"):
        compare_yours("multiply")


def test_try_it_says_not_written_for_a_stub(capsys):
    with try_it():
        raise NotImplementedError
    assert capsys.readouterr().out == "not written yet\n"


def test_try_it_turns_a_kernel_error_into_a_few_lines(capsys):
    cell = notebook_cell(
        "@cuda.jit\n"
        "def my_double(x, out):\n"
        "    i = cuda.grid(1)\n"
        "    out[i] = 2 * x[i]\n")
    with try_it():
        cell["my_double"][1, 8](np.arange(5.0), np.zeros(5))
    out = capsys.readouterr().out
    lines = out.strip().splitlines()
    assert len(lines) <= 8, out
    assert "IndexError" in lines[0] and "is out of bounds for axis 0 with size 5" in lines[0]
    assert "in `my_double`, line 4: out[i] = 2 * x[i]" in out
    assert re.search(r"block \(0, 0, 0\), thread \([5-7], 0, 0\)", out), out
    assert "guarded" in out
    assert "simulator/kernel.py" not in out and "Traceback" not in out


def test_full_traceback_is_one_call_away(capsys):
    with try_it():
        notebook_cell("def broken():\n    return 1 / 0\nbroken()\n", "/tmp/ipykernel_4242/99.py")
    short = capsys.readouterr().out
    assert "ZeroDivisionError" in short and "in `broken`, line 2: return 1 / 0" in short
    full_traceback()
    out = capsys.readouterr().out
    assert out.startswith("Traceback") and "ZeroDivisionError" in out


def test_short_failure_cuts_a_long_message():
    text = short_failure(ValueError("x" * 1000 + "\nsecond line"))
    assert len(text.splitlines()[0]) < 260 and "second line" not in text


@pytest.mark.skipif(device.tier() != "sim", reason="the time limit is the simulator's")
def test_try_it_stops_a_kernel_that_never_finishes(capsys):
    import time

    from gpulab.instruments.simulator import unfinished_threads

    cell = notebook_cell(
        "@cuda.jit\n"
        "def my_spin(out):\n"
        "    i = cuda.grid(1)\n"
        "    while i < out.shape[0]:\n"
        "        out[i] = 1\n")
    started = time.monotonic()
    with try_it(seconds=1.0):
        cell["my_spin"][1, 4](np.zeros(4))
    assert time.monotonic() - started < 15
    out = capsys.readouterr().out
    assert out.startswith("Your code stopped with KernelDidNotFinishError"), out
    assert "time limit" in out and "never ends" in out
    assert unfinished_threads() == 0  # no simulated thread is left to spin on
