"""What every launch wrapper does with its arguments and its result, in one place.

Inputs: :func:`as_array` checks one array operand (type, dimensions, size, dtype, layout) and
:func:`matching` checks several that must agree in shape and dtype; :func:`as_number`,
:func:`whole_number` and :func:`one_of` check the scalars and choices. Every problem raises
:class:`InputError` with a message that names the argument and says what to do.

Outputs: :func:`output` gives the device array a kernel writes its result into (a new one, or
the caller's ``out`` checked), and :func:`finish` hands the result back by one rule:

- with ``out=`` the result is written into ``out`` and ``out`` is returned;
- otherwise, device arrays in, device array out (no copy back); NumPy in, NumPy out. "Device
  arrays in" means every float operand is already on the device; a mix comes back as NumPy.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from numba import cuda

SUPPORTED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))

_SHAPE_HINTS = {
    1: "flatten it with {name}.ravel() or pick one row",
    2: "a vector v becomes a one-column matrix with v.reshape(-1, 1)",
}


class InputError(ValueError):
    """An argument has the wrong shape, dtype, size or layout; the message says what to do."""


def is_device_array(array) -> bool:
    """True for a Numba device array (real or simulated) or any object with
    ``__cuda_array_interface__`` (CuPy, PyTorch CUDA tensors)."""
    return cuda.devicearray.is_cuda_ndarray(array) or hasattr(array, "__cuda_array_interface__")


def to_device(array):
    """Return a device array: device arrays pass through, NumPy arrays are copied over."""
    return array if is_device_array(array) else cuda.to_device(array)


def _is_c_contiguous(array) -> bool:
    if isinstance(array, np.ndarray):
        return array.flags.c_contiguous
    if hasattr(array, "is_c_contiguous"):
        return array.is_c_contiguous()
    return True


def _only_numbers(value) -> bool:
    if isinstance(value, (list, tuple)):
        return all(_only_numbers(item) for item in value)
    return isinstance(value, numbers.Real)


def _from_list(name: str, value, ndim: int, dtypes, how: str):
    what = "a matrix of numbers (a list of equal-length rows)" if ndim == 2 else \
        "a list of numbers"
    if np.dtype(np.float64) not in dtypes:
        allowed = " or ".join(d.name for d in dtypes)
        raise InputError(f"{name} must be an array of {allowed}, not a {type(value).__name__}; "
                         f"{how}")
    if not _only_numbers(value):
        raise InputError(f"{name} must be {what}; it does not hold only numbers: {value!r:.80}")
    try:
        return np.asarray(value, dtype=np.float64)
    except ValueError:  # ragged rows
        raise InputError(f"{name} must be {what}; got {value!r:.80}") from None


def as_array(name: str, value, ndim: int = 1, dtypes=SUPPORTED_DTYPES, how: str | None = None,
             on_device: bool = True):
    """Check one array operand of a kernel and return it (as an array).

    ``value`` must be a NumPy array, a device array (unless ``on_device=False``: the wrapper
    prepares it on the CPU) or, where float64 is allowed, a (nested) list of numbers, which
    becomes a float64 array. It must have ``ndim`` dimensions, at least one element, a dtype in
    ``dtypes`` and a C-contiguous layout: NumPy and device arrays are never converted
    silently, because that would hide a copy (and, for device arrays, a transfer). ``how``
    says how to get the right dtype (``{name}`` is filled in).
    """
    dtypes = tuple(np.dtype(d) for d in dtypes)
    how = (how or "convert it with {name}.astype(np.float32)").format(name=name)
    if isinstance(value, (list, tuple)):
        value = _from_list(name, value, ndim, dtypes, how)
    elif is_device_array(value):
        if not on_device:
            raise InputError(f"{name} must be a NumPy array here, not a device array: this "
                             "wrapper prepares its inputs on the CPU")
    elif not isinstance(value, np.ndarray):
        raise InputError(f"{name} must be a NumPy array, a device array or a list of numbers, "
                         f"not {type(value).__name__}")
    shape = tuple(value.shape)
    if len(shape) != ndim:
        matrix = " (a matrix)" if ndim == 2 else ""
        hint = _SHAPE_HINTS.get(ndim, "reshape it").format(name=name)
        raise InputError(f"{name} must be {ndim}-D{matrix}, but has shape {shape}; {hint}")
    if 0 in shape:
        raise InputError(f"{name} has shape {shape}: it is empty; give it at least one element")
    dtype = np.dtype(value.dtype)
    if dtype not in dtypes:
        allowed = " or ".join(d.name for d in dtypes)
        raise InputError(f"{name} has dtype {dtype.name}, but this kernel takes {allowed}; {how}")
    if not _is_c_contiguous(value):
        raise InputError(
            f"{name} is not contiguous in memory (not C-contiguous: a strided, sliced or "
            f"transposed view); pass np.ascontiguousarray({name}) so that neighbouring threads "
            "read neighbouring addresses"
        )
    return value


def _size(shape) -> str:
    shape = tuple(shape)
    return f"{shape[0]} elements" if len(shape) == 1 else f"shape {shape}"


def same_dtype(name: str, value, like_name: str, like) -> None:
    """``value`` must have ``like``'s dtype: kernels never mix float types."""
    if np.dtype(value.dtype) != np.dtype(like.dtype):
        raise InputError(f"{like_name} is {np.dtype(like.dtype)} but {name} is "
                         f"{np.dtype(value.dtype)}: use one dtype for both, e.g. "
                         f"{name}.astype({like_name}.dtype)")


def matching(ndim: int = 1, dtypes=SUPPORTED_DTYPES, how: str | None = None,
             on_device: bool = True, **named):
    """Check several operands with :func:`as_array`, and that they have the shape and the
    dtype of the first; return them in order."""
    checked = {name: as_array(name, value, ndim, dtypes, how, on_device)
               for name, value in named.items()}
    (first_name, first), *rest = checked.items()
    for name, value in rest:
        if tuple(value.shape) != tuple(first.shape):
            what = "length" if ndim == 1 else "shape"
            raise InputError(f"{name} has {_size(value.shape)} but {first_name} has "
                             f"{_size(first.shape)}: give them the same {what}")
        same_dtype(name, value, first_name, first)
    return tuple(checked.values())


def as_number(name: str, value, low: float = -math.inf, high: float = math.inf,
              high_open: bool = False) -> float:
    """A finite real scalar in [low, high] (or [low, high) with ``high_open``)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputError(f"{name} must be a real number (a scalar), not {value!r}")
    if not math.isfinite(value):
        raise InputError(f"{name} must be finite, not {value!r}")
    if value < low or (value >= high if high_open else value > high):
        bracket = ")" if high_open else "]"
        raise InputError(f"{name}={value} is outside [{low}, {high}{bracket}")
    return float(value)


def whole_number(name: str, value, low: int = 1, high: int | None = None, why: str = "") -> int:
    """An int (not a bool) in low..high (no upper limit when ``high`` is None); ``why`` is
    added to the message when it is out of range."""
    wanted = f"in {low}..{high}" if high is not None else f">= {low}"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InputError(f"{name} must be a whole number {wanted}, not {value!r}")
    if value < low or (high is not None and value > high):
        if high is None:
            raise InputError(f"{name} must be a whole number {wanted}, not {value!r}{why}")
        raise InputError(f"{name}={value} is outside {low}..{high}{why}")
    return int(value)


def one_of(name: str, value, choices) -> str:
    """``value`` must be one of ``choices`` (a method, an activation, an accumulator...)."""
    if value not in choices:
        raise InputError(f"{name} must be one of {', '.join(map(str, choices))}, "
                         f"not {value!r}")
    return value


def output(out, shape, like, like_name: str, name: str = "out"):
    """The device array a kernel writes a result of ``shape`` (and ``like``'s dtype) into.

    Without ``out``, a new device array. With a device array ``out``, that array (checked);
    with a NumPy ``out``, a new device array that :func:`finish` copies into ``out``.
    """
    shape = tuple(shape)
    if out is None:
        return cuda.device_array(shape, dtype=like.dtype)
    if not (isinstance(out, np.ndarray) or is_device_array(out)):
        raise InputError(f"{name} must be a NumPy or device array to write the result into, "
                         f"not {type(out).__name__}")
    out = as_array(name, out, len(shape))
    if tuple(out.shape) != shape:
        what = f"length {shape[0]}" if len(shape) == 1 else f"shape {shape}"
        raise InputError(f"{name} has {_size(out.shape)} but the result has {_size(shape)}: "
                         f"{name} must have {what}")
    same_dtype(name, out, like_name, like)
    return out if is_device_array(out) else cuda.device_array(shape, dtype=like.dtype)


def finish(d_result, out, *operands):
    """Hand back ``d_result`` (from :func:`output`) by the module's rule: into ``out`` when
    given; else on the device when every operand is a device array; else as NumPy."""
    if out is not None:
        if isinstance(out, np.ndarray):
            d_result.copy_to_host(out)
        return out
    if all(is_device_array(operand) for operand in operands):
        return d_result
    return d_result.copy_to_host()


__all__ = [
    "SUPPORTED_DTYPES", "InputError", "as_array", "as_number", "finish", "is_device_array",
    "matching", "one_of", "output", "same_dtype", "to_device", "whole_number",
]
