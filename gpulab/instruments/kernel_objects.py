"""What a ``@cuda.jit`` kernel object is made of, on a GPU and in the simulator alike: the
object to launch (:func:`launchable`), the Python function it was made from
(:func:`python_function`), and whether it is a device function (:func:`is_device_function`).
"""

from __future__ import annotations

from collections.abc import Callable


def launchable(kernel):
    """The kernel to launch: ``kernel[blocks, threads]`` (a launch configuration, passed by
    mistake or on purpose) is unwrapped to its dispatcher; anything else comes back as it is."""
    return getattr(kernel, "dispatcher", kernel)


def python_function(kernel) -> Callable | None:
    """The Python function a ``@cuda.jit`` kernel was made from (a GPU dispatcher or a simulator
    kernel, launch configurations unwrapped); None when ``kernel`` is not a CUDA kernel."""
    kernel = launchable(kernel)
    function = getattr(kernel, "py_func", None)
    return function if function is not None and hasattr(kernel, "__getitem__") else None


def is_device_function(kernel) -> bool:
    """True for ``@cuda.jit(device=True)``: a function only other kernels can call."""
    kernel = launchable(kernel)
    return bool(getattr(kernel, "_device", False)
                or getattr(kernel, "targetoptions", {}).get("device", False))


__all__ = ["is_device_function", "launchable", "python_function"]
