"""Simulator instruments: stand-in arrays that record which simulated CUDA thread touched what,
a time limit for simulated kernels, a trace of a whole launch, and a kernel's recipe. One idea
per module; this package gives their names in one place (``from gpulab.instruments import
WatchedArray``):

- :mod:`~gpulab.instruments.simulator` — which simulated thread is running
  (:func:`simulated_thread`: ``(block, thread)`` numbered as CUDA does, for 1-D, 2-D and 3-D
  launches), the thread an error message of the simulator names (:func:`simulator_thread`),
  patching the simulator for a block
  (:func:`gpulab.instruments.simulator.patched`), ``math.exp`` giving inf past its range
  as on a GPU (:func:`math_overflows_to_inf`), ``max`` and ``min`` of floats leaving a NaN out
  as on a GPU (:func:`float_max_min_as_on_a_gpu`).
- :mod:`~gpulab.instruments.arrays` — stand-in arrays: :class:`RecordingArray` records every
  read, :class:`WatchedArray` every write (plain or atomic, to show a data race); shared memory
  that starts poisoned (:func:`poisoned_shared_memory`).
- :mod:`~gpulab.instruments.kernel_objects` — what a ``@cuda.jit`` kernel object is made of:
  :func:`launchable`, :func:`python_function`, :func:`is_device_function`.
- :mod:`~gpulab.instruments.limits` — :func:`limited`: a thread past its budget of array
  accesses or barriers, or a launch past its wall-clock limit, stops with
  :class:`KernelDidNotFinishError` instead of hanging the caller.
- :mod:`~gpulab.instruments.trace` — "see your own kernel": :func:`trace_kernel` records every
  access, atomic and barrier of a launch per thread, as a :class:`KernelTrace`
  (``trace.summary()``, ``trace.draw()``; :mod:`gpulab.plots` draws it through
  :func:`set_trace_drawer`).
- :mod:`~gpulab.instruments.recipes` — :func:`kernel_recipe` and :func:`rebuild_function`: a
  kernel's source and globals as JSON, and the function rebuilt from them in another process
  (a trace in a simulator child on a GPU; a learner's kernel compiled for a real GPU).

Instruments work only in the simulator (``sim`` tier): on a GPU a kernel gets device memory and
Python sees none of its accesses (:func:`trace_kernel` then runs the kernel's source in a child
process in the simulator, ``python -m gpulab.instruments --trace``). The package is part of the
ground floor: it imports numpy, and numba only inside functions, never the rest of gpulab beyond
:mod:`gpulab.device`.
"""

from gpulab.instruments.arrays import (
    InstrumentedArray,
    RecordingArray,
    WatchedArray,
    element_index,
    poison_value,
    poisoned_shared_memory,
)
from gpulab.instruments.kernel_objects import is_device_function, launchable, python_function
from gpulab.instruments.limits import (
    KernelDidNotFinishError,
    access_budget,
    count_access,
    count_barrier,
    limited,
)
from gpulab.instruments.recipes import kernel_recipe, rebuild_function, unknown_globals
from gpulab.instruments.simulator import (
    float_max_min_as_on_a_gpu,
    linear_index,
    math_overflows_to_inf,
    simulated_thread,
    simulator_thread,
)
from gpulab.instruments.trace import (
    COUNT_KEYS,
    Access,
    KernelTrace,
    TracingArray,
    set_trace_drawer,
    thread_label,
    trace_kernel,
)

__all__ = [
    "COUNT_KEYS", "Access", "InstrumentedArray", "KernelDidNotFinishError", "KernelTrace",
    "RecordingArray", "TracingArray", "WatchedArray", "access_budget", "count_access",
    "count_barrier", "element_index", "float_max_min_as_on_a_gpu", "is_device_function",
    "kernel_recipe", "launchable",
    "limited", "linear_index", "math_overflows_to_inf", "poison_value", "poisoned_shared_memory",
    "python_function",
    "rebuild_function", "set_trace_drawer", "simulated_thread", "simulator_thread", "thread_label",
    "trace_kernel",
    "unknown_globals",
]
