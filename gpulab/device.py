"""Which execution tier this process runs in: ``gpu`` or ``sim``.

The tier is decided once, when :mod:`gpulab` is imported, **without importing numba**:

1. ``GPULAB_DEVICE=gpu|sim`` in the environment wins.
2. Otherwise, if ``NUMBA_ENABLE_CUDASIM=1`` is set, the simulator was asked for: ``sim``.
3. Otherwise the CUDA driver is probed with :mod:`ctypes` (load ``libcuda``, ``cuInit``,
   ``cuDeviceGetCount``). One device or more: ``gpu``. No driver or no device: ``sim``.

Numba reads ``NUMBA_ENABLE_CUDASIM`` when ``numba.cuda`` is first imported, so this module
sets it before any kernel module imports numba. If ``numba.cuda`` was already imported in a
mode that disagrees with the tier, :class:`TierError` says so and how to fix it.

The third tier, ``ptx`` (``GPULAB_DEVICE=ptx``), runs nothing: numba's real CUDA target is
loaded without a device, so every kernel can be compiled to PTX for real GPU architectures
(see :mod:`gpulab.ptx`). gpulab starts such a process itself when it needs PTX.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from dataclasses import asdict, dataclass
from importlib import metadata

# What every GPU that numba-cuda runs on allows (compute capability 5.0 and later), by the names
# of Numba's device attributes (`cuda.get_current_device().MAX_THREADS_PER_BLOCK`): CUDA C++
# Programming Guide, Technical Specifications per Compute Capability,
# https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#features-and-technical-
# specifications-technical-specifications-per-compute-capability. Shared memory per block:
# 48 KiB unless a kernel opts in to more. The simulator's device is given these too
# (gpulab.instruments.simulator.device_as_on_a_gpu), so host code that reads them runs there.
DEVICE_LIMITS = {
    "WARP_SIZE": 32, "MAX_THREADS_PER_BLOCK": 1024,
    "MAX_BLOCK_DIM_X": 1024, "MAX_BLOCK_DIM_Y": 1024, "MAX_BLOCK_DIM_Z": 64,
    "MAX_GRID_DIM_X": 2**31 - 1, "MAX_GRID_DIM_Y": 65535, "MAX_GRID_DIM_Z": 65535,
    "MAX_SHARED_MEMORY_PER_BLOCK": 48 * 1024,
}

TIERS = ("gpu", "sim", "ptx")  # ptx: compile-only, real CUDA target, no device needed
OVERRIDE_VARIABLE = "GPULAB_DEVICE"
SIMULATOR_VARIABLE = "NUMBA_ENABLE_CUDASIM"
# CPython's thread switch interval in the sim tier (its default is 5 ms). A block's CUDA threads
# run as greenlets in the launching thread (gpulab.instruments.simulator.blocks_as_greenlets), so
# the interval no longer paces a kernel's own threads; it paces the host threads that share a
# process with a launch (chapter 11's simulated ranks, chapter 12's server and load test).
# Measured before greenlets, when every CUDA thread was a Python thread, on 2 cores (x86-64,
# CPython 3.11, numba-cuda 0.30), `pytest tests/exercises/test_ch03.py`, one process: 50 s at
# 5 ms, 45 s at 1 ms, 73 s at 0.2 ms.
SIMULATOR_SWITCH_INTERVAL_S = 1e-3

# CUdevice_attribute values from cuda.h (stable since CUDA 3.x).
_ATTR_COMPUTE_CAPABILITY_MAJOR = 75
_ATTR_COMPUTE_CAPABILITY_MINOR = 76
_ATTR_MULTIPROCESSOR_COUNT = 16


class TierError(RuntimeError):
    """The requested tier cannot be used in this process; the message says how to fix it."""


@dataclass(frozen=True)
class DriverProbe:
    """What the CUDA driver said when asked through ctypes (no numba involved)."""

    found_driver: bool
    device_count: int
    driver_version: str | None = None  # e.g. "12.8"
    device_name: str | None = None  # device 0
    compute_capability: tuple[int, int] | None = None
    memory_bytes: int | None = None
    multiprocessors: int | None = None
    problem: str | None = None  # why the probe found no usable GPU


def _load_libcuda():
    names = ["nvcuda.dll"] if sys.platform == "win32" else ["libcuda.so.1", "libcuda.so"]
    found = ctypes.util.find_library("cuda")
    if found:
        names.append(found)
    for name in names:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def probe_driver() -> DriverProbe:
    """Ask the CUDA driver, through ctypes, how many devices there are and what device 0 is."""
    lib = _load_libcuda()
    if lib is None:
        return DriverProbe(False, 0, problem="no CUDA driver (libcuda) was found")
    version = ctypes.c_int(0)
    driver_version = None
    if lib.cuDriverGetVersion(ctypes.byref(version)) == 0 and version.value:
        driver_version = f"{version.value // 1000}.{(version.value % 1000) // 10}"
    status = lib.cuInit(0)
    if status != 0:
        return DriverProbe(
            True,
            0,
            driver_version,
            problem=f"the CUDA driver failed to start (cuInit error {status})",
        )
    count = ctypes.c_int(0)
    if lib.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        return DriverProbe(True, 0, driver_version, problem="the CUDA driver reports no device")
    device = ctypes.c_int(0)
    lib.cuDeviceGet(ctypes.byref(device), 0)
    name = ctypes.create_string_buffer(256)
    lib.cuDeviceGetName(name, 256, device)
    major, minor, sms = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int(0)
    lib.cuDeviceGetAttribute(ctypes.byref(major), _ATTR_COMPUTE_CAPABILITY_MAJOR, device)
    lib.cuDeviceGetAttribute(ctypes.byref(minor), _ATTR_COMPUTE_CAPABILITY_MINOR, device)
    lib.cuDeviceGetAttribute(ctypes.byref(sms), _ATTR_MULTIPROCESSOR_COUNT, device)
    memory = ctypes.c_size_t(0)
    total_mem = getattr(lib, "cuDeviceTotalMem_v2", None) or lib.cuDeviceTotalMem
    total_mem(ctypes.byref(memory), device)
    return DriverProbe(
        found_driver=True,
        device_count=count.value,
        driver_version=driver_version,
        device_name=name.value.decode(errors="replace"),
        compute_capability=(major.value, minor.value),
        memory_bytes=memory.value,
        multiprocessors=sms.value,
    )


def numba_cuda_mode() -> str | None:
    """'sim' or 'gpu' if numba.cuda is already imported (its mode is then fixed), else None."""
    cuda = sys.modules.get("numba.cuda")
    if cuda is None or not hasattr(cuda, "jit"):
        return None
    return "sim" if "simulator" in cuda.jit.__module__ else "gpu"


def _choose(environ, probe: DriverProbe) -> tuple[str, str]:
    requested = environ.get(OVERRIDE_VARIABLE, "").strip().lower()
    if requested:
        if requested not in TIERS:
            raise TierError(
                f"{OVERRIDE_VARIABLE}={requested!r} is not a tier. Use {OVERRIDE_VARIABLE}=gpu, "
                f"{OVERRIDE_VARIABLE}=sim (or =ptx, compile only), or unset it to let gpulab "
                "choose."
            )
        if requested == "gpu" and probe.device_count == 0:
            raise TierError(
                f"{OVERRIDE_VARIABLE}=gpu was set, but {probe.problem}. Install the NVIDIA driver, "
                f"or set {OVERRIDE_VARIABLE}=sim to run the same kernels in Numba's CUDA simulator."
            )
        return requested, f"{OVERRIDE_VARIABLE}={requested} was set"
    if environ.get(SIMULATOR_VARIABLE, "").strip() not in ("", "0"):
        return "sim", f"{SIMULATOR_VARIABLE}={environ[SIMULATOR_VARIABLE]} was set"
    if probe.device_count > 0:
        return (
            "gpu",
            f"the CUDA driver {probe.driver_version} reports {probe.device_count} device(s)",
        )
    return "sim", f"{probe.problem}, so kernels run in Numba's CUDA simulator on this CPU"


def _apply(tier: str, environ, probe: DriverProbe) -> None:
    already = numba_cuda_mode()
    if already is not None and already != tier:
        keep_ok = already == "sim" or probe.device_count > 0
        raise TierError(
            f"numba.cuda was imported before gpulab, in {already!r} mode, but gpulab chose the "
            f"{tier!r} tier. Numba fixes its mode at its first import, so it cannot switch now. "
            "Fix: restart the Python kernel and run `import gpulab` before importing numba"
            + (f" (or set {OVERRIDE_VARIABLE}={already} to keep numba's mode)." if keep_ok else ".")
        )
    environ[SIMULATOR_VARIABLE] = "1" if tier == "sim" else "0"
    if tier == "sim":
        sys.setswitchinterval(min(sys.getswitchinterval(), SIMULATOR_SWITCH_INTERVAL_S))
    config = sys.modules.get("numba.core.config")
    if config is not None and already is None:
        # numba is imported but numba.cuda is not: its config is read again by numba.cuda.
        config.ENABLE_CUDASIM = tier == "sim"


@dataclass(frozen=True)
class Platform:
    """The operating system and processor, as far as the course cares."""

    system: str  # "macos", "windows", "linux" or sys.platform for anything else
    machine: str  # "arm64", "x86_64", "AMD64", "aarch64", ...
    wsl: bool = False  # Linux under Windows' WSL2

    @property
    def nvidia_gpu_possible(self) -> bool:
        """False on macOS: no NVIDIA driver or CUDA release exists for it (CUDA 10.2 was the
        last, for Intel Macs), so only the simulator tier runs there."""
        return self.system != "macos"

    @property
    def label(self) -> str:
        name = {"macos": "macOS", "windows": "Windows", "linux": "Linux"}.get(self.system,
                                                                            self.system)
        return f"{name} {self.machine}" + (" (WSL2)" if self.wsl else "")


def _running_in_wsl() -> bool:
    if os.environ.get("WSL_DISTRO_NAME"):
        return True
    try:
        with open("/proc/sys/kernel/osrelease", encoding="ascii", errors="replace") as release:
            return "microsoft" in release.read().lower()
    except OSError:
        return False


def host_platform() -> Platform:
    """The platform this process runs on."""
    import platform

    system = {"darwin": "macos", "win32": "windows"}.get(sys.platform, sys.platform)
    if system.startswith("linux"):
        system = "linux"
    return Platform(system, platform.machine() or "unknown",
                    wsl=system == "linux" and _running_in_wsl())


NVIDIA_BINDING_VARIABLE = "NUMBA_CUDA_USE_NVIDIA_BINDING"


def use_ctypes_binding_without_cuda_bindings(environ) -> bool:
    """numba-cuda before 0.21 (0.20.1 is the last release for macOS) refuses to import, even in
    its simulator, unless NVIDIA's ``cuda-bindings`` is installed (it has no macOS wheels) or
    ``NUMBA_CUDA_USE_NVIDIA_BINDING=0`` picks its ctypes binding. Set that when the bindings
    are missing and the variable is unset; True when it was set here."""
    if NVIDIA_BINDING_VARIABLE in environ:
        return False
    import importlib.util

    try:
        found = importlib.util.find_spec("cuda.bindings") is not None
    except (ImportError, ValueError):  # no `cuda` package at all
        found = False
    if not found:
        environ[NVIDIA_BINDING_VARIABLE] = "0"
    return not found


PROBE = probe_driver()
TIER, REASON = _choose(os.environ, PROBE)
_apply(TIER, os.environ, PROBE)
use_ctypes_binding_without_cuda_bindings(os.environ)


def tier() -> str:
    """The tier this process runs kernels in: ``'gpu'`` or ``'sim'``."""
    return TIER


def on_gpu() -> bool:
    return TIER == "gpu"


def package_version(*distributions: str) -> str | None:
    """The installed version of the first of ``distributions`` that is installed, or None."""
    for name in distributions:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


@dataclass(frozen=True)
class DeviceInfo:
    tier: str
    reason: str
    device_name: str
    compute_capability: tuple[int, int] | None
    memory_bytes: int | None
    multiprocessors: int | None
    driver_version: str | None
    numba_version: str | None
    numba_cuda_version: str | None
    cuda_toolkit_version: str | None

    def as_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        cc = ".".join(map(str, self.compute_capability)) if self.compute_capability else "n/a"
        memory = f"{self.memory_bytes / 2**30:.1f} GiB" if self.memory_bytes else "n/a"
        lines = [
            f"gpulab tier : {self.tier}  ({self.reason})",
            f"device      : {self.device_name}",
            f"compute cap.: {cc}    memory: {memory}    SMs: {self.multiprocessors or 'n/a'}",
            f"driver      : {self.driver_version or 'none'}",
            f"numba {self.numba_version or 'missing'} | "
            f"numba-cuda {self.numba_cuda_version or 'missing'}"
            f" | CUDA toolkit wheels {self.cuda_toolkit_version or 'not installed (no ptx tier)'}",
        ]
        if self.tier == "sim":
            lines.append(
                "note        : simulator time is not GPU time; GPU figures in the course are "
                "roofline estimates or recorded runs on a named GPU."
            )
        return "\n".join(lines)


def info(show: bool = True) -> DeviceInfo:
    """Describe the tier, why it was chosen, the device and the library versions (and print it)."""
    if TIER == "gpu":
        name = PROBE.device_name or "unknown GPU"
        cc, memory, sms = PROBE.compute_capability, PROBE.memory_bytes, PROBE.multiprocessors
    elif TIER == "sim":
        name = "Numba CUDA simulator (one Python thread per CUDA thread, on this CPU)"
        cc = memory = sms = None
    else:
        name = "none: compile-only process (PTX for real GPU architectures, nothing runs)"
        cc = memory = sms = None
    result = DeviceInfo(
        tier=TIER,
        reason=REASON,
        device_name=name,
        compute_capability=cc,
        memory_bytes=memory,
        multiprocessors=sms,
        driver_version=PROBE.driver_version,
        numba_version=package_version("numba"),
        numba_cuda_version=package_version("numba-cuda"),
        cuda_toolkit_version=package_version(
            "cuda-toolkit", "nvidia-cuda-nvrtc", "nvidia-cuda-nvrtc-cu12"
        ),
    )
    if show:
        print(result)
    return result
