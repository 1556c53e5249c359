"""Input checks shared by the launch wrappers: every problem gets an error that names it."""

from __future__ import annotations

import numbers

import numpy as np
from numba import cuda

SUPPORTED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


class InputError(ValueError):
    """An argument has the wrong shape, dtype, size or layout; the message says what to do."""


def is_device_array(array) -> bool:
    """True for a Numba device array (real or simulated) or any object with
    ``__cuda_array_interface__`` (CuPy, PyTorch CUDA tensors)."""
    return cuda.devicearray.is_cuda_ndarray(array) or hasattr(array, "__cuda_array_interface__")


def _is_c_contiguous(array) -> bool:
    if isinstance(array, np.ndarray):
        return array.flags.c_contiguous
    if hasattr(array, "is_c_contiguous"):
        return array.is_c_contiguous()
    return True


def as_vector(name: str, value, dtypes=SUPPORTED_DTYPES):
    """Check that ``value`` is a non-empty, contiguous 1-D float array and return it.

    Python lists and tuples of numbers are converted to float64 (so ``dot([1, 2], [3, 4])``
    works); NumPy and device arrays must already have a supported dtype, because converting
    them silently would hide a copy (and, for device arrays, a transfer).
    """
    if isinstance(value, (list, tuple)):
        if not all(isinstance(v, numbers.Real) for v in value):
            raise InputError(f"{name} must hold numbers; got {value!r}")
        value = np.asarray(value, dtype=np.float64)
    elif isinstance(value, np.ndarray) or is_device_array(value):
        pass
    else:
        raise InputError(
            f"{name} must be a NumPy array, a device array or a list of numbers, "
            f"not {type(value).__name__}"
        )
    if len(value.shape) != 1:
        raise InputError(
            f"{name} must be 1-D, but has shape {tuple(value.shape)}; "
            f"flatten it with {name}.ravel() or pick one row"
        )
    if value.shape[0] == 0:
        raise InputError(f"{name} is empty: give it at least one element")
    dtype = np.dtype(value.dtype)
    if dtype not in dtypes:
        allowed = " or ".join(d.name for d in dtypes)
        raise InputError(
            f"{name} has dtype {dtype.name}, but this kernel takes {allowed}; "
            f"convert it with {name}.astype(np.float32)"
        )
    if not _is_c_contiguous(value):
        raise InputError(
            f"{name} is not contiguous in memory (a strided view such as a[::2]); "
            f"pass np.ascontiguousarray({name}) so that neighbouring threads read neighbouring "
            "addresses"
        )
    return value


def matching_vectors(**named):
    """Check several vectors with :func:`as_vector` and that they agree in length and dtype."""
    checked = {name: as_vector(name, value) for name, value in named.items()}
    (first_name, first), *rest = checked.items()
    for name, other in rest:
        if other.shape[0] != first.shape[0]:
            raise InputError(
                f"{first_name} has {first.shape[0]} elements but {name} has {other.shape[0]}: "
                "the vectors must have the same length"
            )
        if other.dtype != first.dtype:
            raise InputError(
                f"{first_name} is {first.dtype} but {name} is {other.dtype}: use one dtype for "
                "both, "
                f"e.g. {name}.astype({first_name}.dtype)"
            )
    return tuple(checked.values())


def to_device(array):
    """Return a device array: device arrays pass through, NumPy arrays are copied over."""
    return array if is_device_array(array) else cuda.to_device(array)
