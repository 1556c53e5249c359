"""Every CUDA kernel in gpulab, with the signatures the ``ptx`` tier compiles it for.

Kernels are defined with :func:`kernel` instead of a bare ``@cuda.jit``. The decorator
compiles lazily (no driver needed at import) and records the plain Python function and its
signatures here, so ``tests/test_ptx.py`` can check that *every* kernel compiles for real GPU
architectures, and ``gpulab ptx NAME`` can show any kernel's PTX.

Code that several kernels share is a device function defined with :func:`device_function`,
which always inlines it. ``compile_ptx`` compiles a kernel that *calls* a device function by
compiling the callee for the current device, which asks the CUDA driver for its compute
capability and fails without a GPU (numba-cuda 0.30); an inlined one is part of the kernel's
own code, so the ``ptx`` tier compiles it anywhere, and the PTX has no call in it.
:attr:`KernelSpec.source` shows a kernel followed by the device functions it calls, so a
learner reading ``gpulab.kernel_source(name)`` still sees all of it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

from numba import cuda

from gpulab.instruments.simulator import mend

mend()  # in the simulator, every thread of a block gets the same shared array (see there)

FLOAT_DTYPES = ("float32", "float64")


@dataclass(frozen=True)
class KernelSpec:
    name: str
    module: str
    python_function: Callable
    signatures: tuple[str, ...]
    gpu_only: bool = False  # True when the simulator cannot run it (warp intrinsics, bf16, ...)

    @property
    def summary(self) -> str:
        return (inspect.getdoc(self.python_function) or "").split("\n", 1)[0]

    @property
    def helpers(self) -> tuple[str, ...]:
        """The device functions (see :func:`device_function`) this kernel calls."""
        names = self.python_function.__code__.co_names
        return tuple(name for name in names if name in DEVICE_FUNCTIONS)

    @property
    def source(self) -> str:
        """The kernel's Python source, then that of each device function it calls."""
        parts = [inspect.getsource(self.python_function)]
        if parts[0].startswith("@kernel("):
            parts[0] = DECORATOR_SAID + parts[0]
        for name in self.helpers:
            helper = DEVICE_FUNCTIONS[name]
            parts.append(f"# {self.name} calls {name}, from {helper.__module__} (inlined):\n"
                         f"{inspect.getsource(helper)}")
        return "\n\n".join(parts)


# Said above a kernel's source when it is shown: gpulab's decorator is not a CUDA idea.
DECORATOR_SAID = ("# @kernel(...) is gpulab's @cuda.jit: it also records the kernel and the types "
                  "the ptx tier\n# compiles it for (gpulab.kernels.registry). Your kernels use "
                  "@cuda.jit.\n")

REGISTRY: dict[str, KernelSpec] = {}
DEVICE_FUNCTIONS: dict[str, Callable] = {}


def for_float_dtypes(template: str) -> tuple[str, ...]:
    """One signature per float type: ``"void({t}[::1], {t}[::1])"`` -> float32, float64."""
    return tuple(template.format(t=dtype) for dtype in FLOAT_DTYPES)


def kernel(*signatures: str, gpu_only: bool = False):
    """Register a CUDA kernel and return it lazily compiled (``cuda.jit`` without a signature)."""
    if not signatures:
        raise ValueError("a kernel needs at least one signature for the ptx tier")

    def register(function: Callable):
        name = function.__name__
        if name in REGISTRY and REGISTRY[name].module != function.__module__:
            raise ValueError(f"two kernels are named {name!r}: rename one")
        REGISTRY[name] = KernelSpec(
            name, function.__module__, function, tuple(signatures), gpu_only
        )
        return cuda.jit(function)

    return register


def device_function(function: Callable):
    """A device function shared by several kernels, always inlined into them (see the module
    docstring for why); recorded so that :attr:`KernelSpec.source` can show it."""
    name = function.__name__
    if name in DEVICE_FUNCTIONS and DEVICE_FUNCTIONS[name].__module__ != function.__module__:
        raise ValueError(f"two device functions are named {name!r}: rename one")
    DEVICE_FUNCTIONS[name] = function
    return cuda.jit(device=True, inline="always")(function)


def kernel_spec(name: str) -> KernelSpec:
    load_all()
    try:
        return REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(REGISTRY))
        raise KeyError(f"no kernel named {name!r}; gpulab's kernels are: {known}") from None


def load_all() -> dict[str, KernelSpec]:
    """Import every kernel module so that the registry is complete."""
    import importlib
    import pkgutil

    import gpulab.kernels as package

    for module in pkgutil.iter_modules(package.__path__):
        if not module.name.startswith("_") and module.name != "registry":
            importlib.import_module(f"{package.__name__}.{module.name}")
    return REGISTRY
