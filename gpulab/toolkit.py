"""Which CUDA toolkit wheels to install: the ones that match this machine's driver.

numba-cuda compiles with the toolkit wheels (NVVM, NVRTC, nvJitLink) from PyPI. A toolkit newer
than the driver emits PTX the driver cannot load (the pip CUDA 13.5 toolchain writes PTX 9.5),
so the setup asks the driver for its version and installs the matching extra, capped at the
driver's minor version. With no driver it installs cu13, which the ``ptx`` tier needs to
compile kernels for real GPUs.

Runs with a bare Python before anything is installed::

    python -m gpulab.toolkit           # prints: cu12 or cu13 (and why, on stderr)
    python -m gpulab.toolkit --constraints FILE   # also writes pip constraints
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from gpulab.device import DriverProbe, probe_driver

NEWEST_EXTRA_MAJOR = 13  # the newest toolkit numba-cuda has an extra for


@dataclass(frozen=True)
class ToolkitChoice:
    extra: str  # "cu12" or "cu13"
    constraints: tuple[str, ...]  # pip constraint lines
    reason: str


def choose(probe: DriverProbe) -> ToolkitChoice:
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
