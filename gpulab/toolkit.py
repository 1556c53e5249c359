"""Which CUDA toolkit wheels to install: the ones that match this machine's driver.

numba-cuda compiles with the toolkit wheels (NVVM, NVRTC, nvJitLink) from PyPI. A toolkit newer
than the driver emits PTX the driver cannot load (the pip CUDA 13.5 toolchain writes PTX 9.5),
so the setup asks the driver for its version and installs the matching extra, capped at the
driver's minor version. With no driver it installs cu13, which the ``ptx`` tier needs to
compile kernels for real GPUs. On macOS it installs none: no NVIDIA GPU runs there and NVIDIA
publishes no toolkit wheels for it, so the course runs in the simulator tier.

Runs with a bare Python before anything is installed::

    python -m gpulab.toolkit           # prints: cu12, cu13 or none (and why, on stderr)
    python -m gpulab.toolkit --constraints FILE   # also writes pip constraints
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from gpulab.device import DriverProbe, Platform, host_platform, package_version, probe_driver

NEWEST_EXTRA_MAJOR = 13  # the newest toolkit numba-cuda has an extra for
NO_EXTRA = "none"  # what `choose` answers where no toolkit wheels exist (macOS)
# Distributions that say which CUDA toolkit numba-cuda compiles with, most telling first.
DISTRIBUTIONS = (
    "cuda-toolkit", "nvidia-nvvm", "nvidia-cuda-nvcc", "nvidia-cuda-nvcc-cu12",
    "nvidia-cuda-nvrtc", "nvidia-cuda-nvrtc-cu12",
)
WHERE_A_GPU_IS = ("for a GPU, open the chapters in Google Colab (its free tier lends an NVIDIA "
                  "GPU, usually a T4) or use a Linux machine with an NVIDIA GPU")


@dataclass(frozen=True)
class ToolkitChoice:
    extra: str  # "cu12", "cu13" or "none" (macOS)
    constraints: tuple[str, ...]  # pip constraint lines
    reason: str


def installed_version() -> str | None:
    """The version of the CUDA toolkit wheels installed here, or None."""
    return package_version(*DISTRIBUTIONS)


def unavailable_reason(platform: Platform | None = None) -> str | None:
    """Why no CUDA toolkit wheels can be installed on this platform (None where they can)."""
    platform = platform or host_platform()
    if platform.nvidia_gpu_possible:
        return None
    return (f"{platform.label}: NVIDIA publishes no CUDA toolkit wheels for macOS, and no "
            "NVIDIA GPU runs on it, so every chapter runs in the simulator tier (the kernels "
            "really execute, on the CPU)")


def choose(probe: DriverProbe, platform: Platform | None = None) -> ToolkitChoice:
    no_wheels = unavailable_reason(platform)
    if no_wheels:
        return ToolkitChoice(NO_EXTRA, (), f"{no_wheels}; {WHERE_A_GPU_IS}")
    if not probe.driver_version:
        return ToolkitChoice(
            "cu13", (), "no CUDA driver: installing CUDA 13 wheels so the ptx tier can compile"
        )
    major, minor = (int(part) for part in probe.driver_version.split("."))
    if major < 12:
        return ToolkitChoice(
            "cu12",
            (),
            f"driver {probe.driver_version} is older than CUDA 12, which numba-cuda needs: "
            "kernels will not run on this GPU until the driver is updated (the simulator works)",
        )
    if major > NEWEST_EXTRA_MAJOR:
        return ToolkitChoice(
            f"cu{NEWEST_EXTRA_MAJOR}", (), f"driver {probe.driver_version} runs any older toolkit"
        )
    jitlink = "nvidia-nvjitlink" if major >= 13 else "nvidia-nvjitlink-cu12"
    cap = f"{major}.{minor + 1}"
    return ToolkitChoice(
        f"cu{major}",
        (f"cuda-toolkit<{cap}", f"{jitlink}<{cap}"),
        f"driver {probe.driver_version}: CUDA {major} wheels no newer than {major}.{minor}",
    )


def main(argv: list[str]) -> int:
    choice = choose(probe_driver())
    print(f"gpulab.toolkit: {choice.extra} ({choice.reason})", file=sys.stderr)
    if "--constraints" in argv:
        path = argv[argv.index("--constraints") + 1]
        with open(path, "w") as handle:
            handle.write("".join(f"{line}\n" for line in choice.constraints))
    print(choice.extra)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
