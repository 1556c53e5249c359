"""The one input validator and the one output handler of the launch wrappers
(gpulab.kernels.arrays): every problem is an InputError that names the argument, and every
result comes back by the same rule."""

import math

import numpy as np
import pytest
from numba import cuda

from gpulab.kernels import arrays
from gpulab.kernels.arrays import InputError

# --- as_array: one operand --------------------------------------------------------------------


def test_lists_become_float64_and_arrays_pass_unchanged():
    vector = arrays.as_array("x", [1, 2.5])
    assert vector.dtype == np.float64 and vector.tolist() == [1.0, 2.5]
    matrix = arrays.as_array("A", [[1, 2], [3, 4]], ndim=2)
    assert matrix.shape == (2, 2) and matrix.dtype == np.float64
    x = np.ones(3, np.float32)
    assert arrays.as_array("x", x) is x
    d_x = cuda.to_device(x)
    assert arrays.as_array("x", d_x) is d_x


@pytest.mark.parametrize("value, ndim, kwargs, words", [
    ("abc", 1, {}, "x must be a NumPy array, a device array or a list of numbers, not str"),
    ([1, "a"], 1, {}, "list of numbers"),
    ([[1, 2], [3]], 2, {}, "matrix of numbers"),
    ([1.0, 2.0], 1, {"dtypes": (np.float16,)}, "array of float16, not a list"),
    (np.ones((2, 2)), 1, {}, "must be 1-D, but has shape \\(2, 2\\); flatten it with x.ravel"),
    (np.ones(3), 2, {}, "must be 2-D \\(a matrix\\).*reshape\\(-1, 1\\)"),
    (np.ones(0), 1, {}, "it is empty"),
    (np.ones(3, np.int32), 1, {}, "dtype int32, but this kernel takes float32 or float64; "
                                  "convert it with x.astype\\(np.float32\\)"),
    (np.ones(3), 1, {"dtypes": (np.float16,), "how": "round it: {name}.astype(np.float16)"},
     "takes float16; round it: x.astype"),
    (np.ones(6)[::2], 1, {}, "not contiguous in memory \\(not C-contiguous"),
    (np.ones((3, 2)).T, 2, {}, "np.ascontiguousarray\\(x\\)"),
])
def test_every_problem_is_named(value, ndim, kwargs, words):
    with pytest.raises(InputError, match=words):
        arrays.as_array("x", value, ndim, **kwargs)


def test_device_arrays_can_be_refused():
    with pytest.raises(InputError, match="NumPy array here, not a device array"):
        arrays.as_array("x", cuda.to_device(np.ones(3)), on_device=False)


def test_input_error_is_a_value_error():
    assert issubclass(InputError, ValueError)


# --- matching: operands that must agree -------------------------------------------------------


def test_matching_returns_the_checked_operands_in_order():
    x, y = arrays.matching(x=[1, 2], y=np.array([3.0, 4.0]))
    assert x.tolist() == [1.0, 2.0] and y.tolist() == [3.0, 4.0]


@pytest.mark.parametrize("ndim, named, words", [
    (1, {"x": np.ones(3), "y": np.ones(4)},
     "y has 4 elements but x has 3 elements: give them the same length"),
    (2, {"Z": np.ones((3, 4)), "dA": np.ones((2, 4))}, "dA has shape \\(2, 4\\) but Z has shape "
                                                       "\\(3, 4\\)"),
    (1, {"x": np.ones(3, np.float32), "y": np.ones(3)}, "x is float32 but y is float64: use one "
                                                        "dtype"),
])
def test_matching_names_the_disagreement(ndim, named, words):
    with pytest.raises(InputError, match=words):
        arrays.matching(ndim, **named)


# --- scalars and choices ----------------------------------------------------------------------


def test_numbers():
    assert arrays.as_number("a", np.float32(2.5)) == 2.5
    assert arrays.as_number("lr", 0, low=0.0) == 0.0
    for value, words in [("2", "real number"), (True, "real number"), (math.nan, "finite"),
                         (math.inf, "finite")]:
        with pytest.raises(InputError, match=words):
            arrays.as_number("a", value)
    with pytest.raises(InputError, match=r"beta=1.0 is outside \[0.0, 1.0\)"):
        arrays.as_number("beta", 1.0, 0.0, 1.0, high_open=True)


def test_whole_numbers_and_choices():
    assert arrays.whole_number("tile", np.int64(8), 1, 32) == 8
    with pytest.raises(InputError, match="tile must be a whole number in 1..32, not 2.5"):
        arrays.whole_number("tile", 2.5, 1, 32)
    with pytest.raises(InputError, match="tile=33 is outside 1..32: why"):
        arrays.whole_number("tile", 33, 1, 32, why=": why")
    with pytest.raises(InputError, match="stride must be a whole number >= 1, not 0"):
        arrays.whole_number("stride", 0)
    with pytest.raises(InputError, match="whole number"):
        arrays.whole_number("blocks", True)
    assert arrays.one_of("method", "tiled", ("naive", "tiled")) == "tiled"
    with pytest.raises(InputError, match="method must be one of naive, tiled, not 'magic'"):
        arrays.one_of("method", "magic", ("naive", "tiled"))


# --- output and finish: how a result comes back -----------------------------------------------


def test_a_new_output_has_the_shape_and_the_dtype_of_its_input():
    like = np.ones(3, np.float32)
    d_out = arrays.output(None, (2, 5), like, "x")
    assert arrays.is_device_array(d_out)
    assert tuple(d_out.shape) == (2, 5) and d_out.dtype == np.float32


def test_a_device_out_is_written_into_directly():
    d_out = cuda.to_device(np.zeros(4))
    assert arrays.output(d_out, (4,), np.ones(4), "x") is d_out


@pytest.mark.parametrize("out, words", [
    (np.empty(5), "out has 5 elements but the result has 4 elements: out must have length 4"),
    (np.empty((4, 1)), "out must be 1-D"),
    (np.empty(4, np.float32), "x is float64 but out is float32: use one dtype"),
    ([0.0] * 4, "out must be a NumPy or device array"),
])
def test_a_bad_out_is_named(out, words):
    with pytest.raises(InputError, match=words):
        arrays.output(out, (4,), np.ones(4), "x")


def test_a_bad_out_of_a_matrix_result_names_the_shape():
    with pytest.raises(InputError, match="probs must have shape \\(2, 3\\)"):
        arrays.output(np.empty((3, 2)), (2, 3), np.ones((2, 3)), "logits", "probs")


def test_finish_one_rule():
    values = np.arange(4.0)
    host, device = np.ones(4), cuda.to_device(np.ones(4))
    # NumPy in (or a mix): NumPy out
    for operands in [(host,), (host, device)]:
        result = arrays.finish(cuda.to_device(values), None, *operands)
        assert isinstance(result, np.ndarray) and result.tolist() == values.tolist()
    # device arrays in: device array out, no copy
    d_result = cuda.to_device(values)
    assert arrays.finish(d_result, None, device, device) is d_result
    # with out: written into out, out returned, wherever it lives
    out = np.empty(4)
    assert arrays.finish(cuda.to_device(values), out, host) is out
    assert out.tolist() == values.tolist()
    d_out = cuda.to_device(values)
    assert arrays.finish(d_out, d_out, host) is d_out


def test_to_device_passes_device_arrays_through():
    d_x = cuda.to_device(np.ones(2))
    assert arrays.to_device(d_x) is d_x
    assert arrays.is_device_array(arrays.to_device(np.ones(2)))
    assert not arrays.is_device_array(np.ones(2))
