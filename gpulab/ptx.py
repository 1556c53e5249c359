"""The ``ptx`` tier: compile kernels for real GPU architectures, with no GPU.

``numba.cuda.compile_ptx`` runs NVVM from the CUDA toolkit wheels (``gpulab[cu13]`` or
``[cu12]``) and needs no driver. It rejects what only the simulator accepts — Python lists,
``np.empty`` inside a kernel, f-string prints, float16 atomics — so compiling every registered
kernel here is what keeps one kernel source valid for both the GPU and the simulator.

The simulator replaces ``numba.cuda`` in its process, so from the ``sim`` tier the compilation
runs in a child process started with ``GPULAB_DEVICE=ptx``.

The toolkit wheels exist for Linux and Windows only. Where they are missing (always on macOS),
:class:`ToolkitMissingError` says so and what to do instead, rather than a compiler traceback.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from dataclasses import asdict, dataclass

from gpulab import device, toolkit

ARCHITECTURES = ((7, 5), (8, 0), (9, 0))  # Turing (T4), Ampere (A100), Hopper (H100/H200)
# How numba-cuda says that the toolkit is missing (NvvmSupportError, NvrtcSupportError, ...).
_NO_TOOLKIT = re.compile(r"nvvm|nvrtc|nvjitlink|cuda bindings", re.IGNORECASE)


class ToolkitMissingError(RuntimeError):
    """The ptx tier cannot compile here: the CUDA toolkit wheels are not installed (or, on
    macOS, do not exist). The message says why and what to do instead."""


def toolkit_missing_message(detail: str = "") -> str:
    """What to tell a learner whose ``gpulab ptx`` finds no CUDA toolkit."""
    needs = ("The ptx tier compiles kernels with NVIDIA's CUDA toolkit wheels (NVVM, NVRTC), "
             "which exist for Linux (x86_64, aarch64) and Windows only.")
    reason = toolkit.unavailable_reason()
    if reason:
        advice = (f"{reason}. To see a kernel's PTX, {toolkit.WHERE_A_GPU_IS}, and run "
                  "`gpulab ptx` there (no GPU needed on Linux: `pip install 'gpulab[cu13]'`).")
    else:
        advice = ("They are not installed here: pip install 'gpulab[cu13]' (or [cu12] for a "
                  "CUDA 12 driver; `python -m gpulab.toolkit` says which), then run again.")
    return f"{needs} {advice}" + (f"\n(numba-cuda said: {detail})" if detail else "")


def _check_toolkit_platform() -> None:
    if toolkit.unavailable_reason():
        raise ToolkitMissingError(toolkit_missing_message())


def _raise_if_no_toolkit(results: list[PtxResult]) -> None:
    """Every compile failed because NVVM or NVRTC is missing: say that once, plainly."""
    failures = [r.error for r in results if not r.ok]
    if (results and len(failures) == len(results) and toolkit.installed_version() is None
            and all(_NO_TOOLKIT.search(error) for error in failures)):
        raise ToolkitMissingError(toolkit_missing_message(failures[0].splitlines()[0]))


@dataclass(frozen=True)
class PtxResult:
    kernel: str
    signature: str
    compute_capability: tuple[int, int]
    ok: bool
    ptx: str = ""
    error: str = ""


# PTX opcodes that move, convert or select a float64 without computing with it.
_NOT_ARITHMETIC = {"mov", "cvt", "ld", "st", "selp", "param"}
# libdevice's float32 sin, cos and tan reduce a large argument with one float64 multiply by this
# constant (pi/2 x 2^-64, Payne-Hanek): float64 arithmetic no kernel source wrote.
_LIBDEVICE_REDUCTION = "0d3BF921FB54442D19"


def float64_arithmetic(ptx: str) -> dict[tuple[str, int], set[str]]:
    """The float64 arithmetic in ``ptx`` (``add.f64``, ``fma.rn.f64``, ``setp.lt.f64``, ...; not
    moves, loads, stores, conversions or selects, nor libdevice's float32 sin/cos/tan
    reduction), as {(source file, line): opcodes} read from the ``.loc`` before each
    instruction: compiled with ``lineinfo=True``; without it every opcode is under ("", 0)."""
    files = dict(re.findall(r'^\s*\.file\s+(\d+)\s+"([^"]*)"', ptx, re.MULTILINE))
    found: dict[tuple[str, int], set[str]] = {}
    where = ("", 0)
    for text in ptx.splitlines():
        text = text.strip()
        if text.startswith("@"):  # a predicated instruction: "@%p1 add.f64 ..."
            text = text.split(None, 1)[-1]
        if text.startswith(".loc"):
            _, index, line, *_ = text.split()
            where = (files.get(index, ""), int(line))
        elif (text and ".f64" in text.split()[0] and _LIBDEVICE_REDUCTION not in text
              and text.split(".")[0] not in _NOT_ARITHMETIC):
            found.setdefault(where, set()).add(text.split()[0])
    return found


# cuda_fp16.h's operators on __half, which Numba links in for float16 arithmetic and the PTX
# calls by their C++ names (``_ZmlRK6__halfS1_`` is ``operator*(const __half&, const __half&)``).
_HALF_OPERATOR = re.compile(r"\b_Z(pl|mi|ml|dv)RK6__half")
_HALF_OPERATORS = {"pl": "__half +", "mi": "__half -", "ml": "__half *", "dv": "__half /"}


def float16_arithmetic(ptx: str) -> dict[tuple[str, int], set[str]]:
    """The float16 arithmetic in ``ptx``: a native opcode (``mul.f16``, ``fma.rn.f16x2``; not
    moves, loads, stores or conversions) or a call of cuda_fp16's operators on ``__half``, as
    Numba compiles ``a * b`` of two float16 values ("__half *"), as {(source file, line):
    what} read from the ``.loc`` before each instruction (``lineinfo=True``), the line an
    inlined operator was called from (its ``inlined_at``)."""
    files = dict(re.findall(r'^\s*\.file\s+(\d+)\s+"([^"]*)"', ptx, re.MULTILINE))
    found: dict[tuple[str, int], set[str]] = {}
    where, calling = ("", 0), False
    for text in ptx.splitlines():
        text = text.strip()
        if text.startswith("@"):
            text = text.split(None, 1)[-1]
        if text.startswith(".loc"):  # the kernel's line an inlined operator was called from
            words = text.replace(",", " ").split()
            at = words.index("inlined_at") + 1 if "inlined_at" in words else 1
            where = (files.get(words[at], ""), int(words[at + 1]))
        elif text.startswith("call") or calling and text:  # the callee: on the call's line,
            operator = _HALF_OPERATOR.search(text)  # or the next ("call.uni (retval0),")
            if operator:
                found.setdefault(where, set()).add(_HALF_OPERATORS[operator.group(1)])
            calling = text.startswith("call") and not operator and text.endswith(",")
        elif (text and re.search(r"\.f16(x2)?\b", text.split()[0])
              and text.split(".")[0] not in _NOT_ARITHMETIC):
            found.setdefault(where, set()).add(text.split()[0])
    return found


def _compile_here(name: str, signature: str, cc: tuple[int, int]) -> PtxResult:
    from numba import cuda

    from gpulab.kernels.registry import kernel_spec

    spec = kernel_spec(name)
    try:
        ptx, _ = cuda.compile_ptx(spec.python_function, signature, cc=cc)
    except Exception as error:  # report every failure; the caller decides
        return PtxResult(name, signature, cc, False, error=f"{type(error).__name__}: {error}")
    return PtxResult(name, signature, cc, True, ptx=ptx)


def _compile_in_child(requests: list[tuple[str, str, tuple[int, int]]]) -> list[PtxResult]:
    env = dict(os.environ, GPULAB_DEVICE="ptx", NUMBA_ENABLE_CUDASIM="0")
    completed = subprocess.run(
        [sys.executable, "-m", "gpulab.ptx", "--json"],
        input=json.dumps(requests),
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if completed.returncode != 0:
        if toolkit.installed_version() is None:
            raise ToolkitMissingError(toolkit_missing_message(completed.stderr.strip()[-500:]))
        raise RuntimeError(f"the PTX compiler process failed:\n{completed.stderr[-3000:]}")
    return [
        PtxResult(**{**item, "compute_capability": tuple(item["compute_capability"])})
        for item in json.loads(completed.stdout)
    ]


def compile_requests(requests: list[tuple[str, str, tuple[int, int]]]) -> list[PtxResult]:
    """Compile (kernel name, signature, compute capability) triples, in a child if needed.

    Raises :class:`ToolkitMissingError` on macOS, and where every compile failed for want of
    the CUDA toolkit."""
    _check_toolkit_platform()
    if device.tier() == "sim":
        results = _compile_in_child(requests)
    else:
        results = [_compile_here(name, sig, tuple(cc)) for name, sig, cc in requests]
    _raise_if_no_toolkit(results)
    return results


def all_requests(architectures=ARCHITECTURES) -> list[tuple[str, str, tuple[int, int]]]:
    """Every registered kernel, for every signature and architecture."""
    from gpulab.kernels.registry import load_all

    return [
        (spec.name, signature, cc)
        for spec in load_all().values()
        for signature in spec.signatures
        for cc in architectures
    ]


def compile_all(architectures=ARCHITECTURES) -> list[PtxResult]:
    return compile_requests(all_requests(architectures))


def kernel_ptx(name: str, compute_capability=(8, 0), signature: str | None = None) -> str:
    """The PTX of one gpulab kernel, for showing to a learner (``gpulab ptx NAME``). Compiled
    once per process for each kernel, signature and architecture (a compile starts a process of
    its own; chapter 03 shows a kernel's PTX, then assembles the same PTX)."""
    from gpulab.kernels.registry import kernel_spec

    spec = kernel_spec(name)
    return _compiled_ptx(name, signature or spec.signatures[0], tuple(compute_capability))


@functools.lru_cache(maxsize=64)
def _compiled_ptx(name: str, signature: str, compute_capability: tuple[int, int]) -> str:
    (result,) = compile_requests([(name, signature, compute_capability)])
    if not result.ok:
        raise RuntimeError(
            f"{name} did not compile for sm_{compute_capability[0]}{compute_capability[1]}: "
            f"{result.error}\n"
            + (toolkit_missing_message() if _NO_TOOLKIT.search(result.error) else "")
        )
    return result.ptx


def _serve_json() -> None:
    """Child-process side: read requests as JSON on stdin, write results as JSON on stdout."""
    requests = json.load(sys.stdin)
    results = [_compile_here(name, sig, tuple(cc)) for name, sig, cc in requests]
    json.dump([asdict(r) for r in results], sys.stdout)


if __name__ == "__main__":
    if "--json" in sys.argv:
        _serve_json()
