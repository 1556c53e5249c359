"""What a kernel costs a streaming multiprocessor (SM), without a GPU: registers per thread,
spills, shared memory per block, and the theoretical occupancy that follows on a named GPU.

PTX (``gpulab ptx``) is the portable assembly numba emits; it has unlimited virtual registers, so
it cannot show whether a kernel spills. The assembler that turns PTX into the GPU's machine code
(SASS) allocates the real registers, and its report (``ptxas -v``) says how many each thread
uses and how many bytes it spilled to local memory. nvJitLink — the CUDA toolkit's JIT linker,
in the toolkit wheels gpulab already installs — runs that same assembler, and with ``-verbose``
returns the same report. :func:`resources` asks it for one kernel and architecture.

Theoretical occupancy is how many warps an SM can keep resident, as a share of its maximum,
given the registers, shared memory and threads each block needs — the rules of NVIDIA's
occupancy calculator, with the per-architecture limits of the CUDA C++ Programming Guide
("Technical Specifications per Compute Capability"). A ceiling: measured (achieved) occupancy is
what Nsight Compute reports on a GPU.
"""

from __future__ import annotations

import functools
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from gpulab import documents, hardware, ptx
from gpulab.hardware import (  # the SM limits are GPU constants: they live in hardware
    SM_LIMITS,
    SPECS_SOURCE,
    Occupancy,
    SMLimits,
    theoretical_occupancy,
)
from gpulab.tables import Column, Table


class AssemblyError(RuntimeError):
    """nvJitLink could not assemble the PTX on its own (e.g. it calls helper functions that
    are linked only when the kernel is loaded on a GPU)."""


_REGISTERS = re.compile(r"Used (\d+) registers")
_SPILLS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_SHARED = re.compile(r"(\d+) bytes smem")
_LOCAL = re.compile(r"(\d+) bytes lmem")
_BARRIERS = re.compile(r"used (\d+) barriers")


@dataclass(frozen=True)
class KernelResources:
    """What the assembler (ptxas, through nvJitLink) reports for one kernel."""

    kernel: str
    signature: str
    compute_capability: tuple[int, int]
    registers: int  # per thread
    spill_store_bytes: int
    spill_load_bytes: int
    stack_bytes: int
    shared_bytes: int  # static shared memory per block
    local_bytes: int
    barriers: int
    log: str = ""

    @property
    def spills(self) -> bool:
        return self.spill_store_bytes > 0 or self.spill_load_bytes > 0

    def occupancy(self, threads_per_block: int) -> Occupancy:
        return theoretical_occupancy(self.compute_capability, threads_per_block,
                                     self.registers, self.shared_bytes)

    def __str__(self) -> str:
        cc = f"sm_{self.compute_capability[0]}{self.compute_capability[1]}"
        spills = (f"{self.spill_store_bytes} B spill stores, {self.spill_load_bytes} B spill "
                  "loads" if self.spills else "no spills")
        return (f"{self.kernel} ({cc}): {self.registers} registers per thread, {spills}, "
                f"{self.shared_bytes:,} B shared memory per block, {self.barriers} barrier(s)")


def parse_log(log: str) -> dict[str, int]:
    """The numbers in a ``ptxas -v`` / nvJitLink ``-verbose`` report for one kernel."""

    def first(pattern: re.Pattern, default: int = 0) -> int:
        match = pattern.search(log)
        return int(match.group(1)) if match else default

    registers = _REGISTERS.search(log)
    spills = _SPILLS.search(log)
    if registers is None or spills is None:
        raise ValueError("not a ptxas report with register and spill counts:\n" + log[:500])
    return {"registers": int(registers.group(1)), "stack_bytes": int(spills.group(1)),
            "spill_store_bytes": int(spills.group(2)),
            "spill_load_bytes": int(spills.group(3)), "shared_bytes": first(_SHARED),
            "local_bytes": first(_LOCAL), "barriers": first(_BARRIERS)}


def assemble(ptx_text: str, compute_capability: tuple[int, int]) -> str:
    """Assemble PTX into machine code for ``compute_capability`` with nvJitLink and return
    the assembler's report. Needs the CUDA toolkit wheels (no GPU)."""
    try:
        from cuda.bindings import nvjitlink
    except ImportError as error:
        raise ptx.ToolkitMissingError(ptx.toolkit_missing_message(str(error))) from error
    arch = f"-arch=sm_{compute_capability[0]}{compute_capability[1]}"
    handle = nvjitlink.create(2, [arch, "-verbose"])
    try:
        data = ptx_text.encode()
        nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "kernel.ptx")
        try:
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as error:
            errors = bytearray(nvjitlink.get_error_log_size(handle))
            nvjitlink.get_error_log(handle, errors)
            raise AssemblyError(f"{error}: {errors.decode(errors='replace').strip()}") from None
        log = bytearray(nvjitlink.get_info_log_size(handle))
        nvjitlink.get_info_log(handle, log)
    finally:
        nvjitlink.destroy(handle)
    return log.decode(errors="replace")


def resources(name: str, compute_capability=(9, 0), signature: str | None = None
              ) -> KernelResources:
    """Registers, spills and shared memory of gpulab kernel ``name`` on ``compute_capability``
    (its first signature unless one is given)."""
    from gpulab.kernels.registry import kernel_spec

    spec = kernel_spec(name)
    signature = signature or spec.signatures[0]
    compute_capability = tuple(compute_capability)
    log = assemble(ptx.kernel_ptx(name, compute_capability, signature), compute_capability)
    return KernelResources(name, signature, compute_capability, log=log, **parse_log(log))


def all_resources(compute_capability=(9, 0)) -> tuple[list[KernelResources], dict[str, str]]:
    """:func:`resources` of every registered kernel's first signature (one compiler process),
    and {kernel: why} for those the assembler cannot take on its own: the fp16/bf16 kernels
    call NVIDIA's cuda_fp16/cuda_bf16 helper functions, which numba-cuda links in only when it
    loads the kernel on a GPU."""
    from gpulab.kernels.registry import load_all

    requests = [(spec.name, spec.signatures[0], tuple(compute_capability))
                for spec in load_all().values()]
    found, skipped = [], {}
    for result in ptx.compile_requests(requests):
        if not result.ok:
            raise RuntimeError(f"{result.kernel} did not compile: {result.error}")
        try:
            log = assemble(result.ptx, result.compute_capability)
        except AssemblyError as error:
            skipped[result.kernel] = ("calls fp16/bf16 helper functions that are linked only "
                                      "when the kernel is loaded on a GPU" if "Undefined "
                                      "reference" in str(error) else str(error).splitlines()[0])
            continue
        found.append(KernelResources(result.kernel, result.signature, result.compute_capability,
                                     log=log, **parse_log(log)))
    return found, skipped


SHIPPED_FILE = Path(__file__).resolve().parent / "data" / "kernel_resources.json"
FILE_FORMAT = "gpulab-kernel-resources"
SHIPPED_KERNELS = ("matmul_naive", "matmul_tiled", "matmul_register_blocked")


def record_shipped(kernels=SHIPPED_KERNELS, path=SHIPPED_FILE) -> Path:
    """Assemble ``kernels`` for every architecture in :data:`SM_LIMITS` and write what ptxas
    reports to ``path``: the chapters read it (:func:`shipped`) instead of assembling at run
    time (seconds per kernel), and ``tests/test_kernel_resources.py`` checks it against a fresh
    assembly. Run ``python -m gpulab.kernel_resources`` after changing a shipped kernel."""
    records = []
    for name in kernels:
        for cc in sorted(SM_LIMITS):
            found = resources(name, cc)
            record = asdict(found)
            record.pop("log")
            records.append(record)
    return documents.write(path, {**documents.header(FILE_FORMAT), "kernels": records})


@functools.lru_cache(maxsize=1)
def _shipped() -> dict:
    if not SHIPPED_FILE.exists():
        return {}
    data = documents.read(SHIPPED_FILE, FILE_FORMAT, "kernel-resources file")
    return {(r["kernel"], tuple(r["compute_capability"])): KernelResources(
        **{**r, "compute_capability": tuple(r["compute_capability"])})
        for r in data["kernels"]}


def shipped(name: str, compute_capability) -> KernelResources | None:
    """What ptxas reported for kernel ``name`` on ``compute_capability`` when the shipped
    table was recorded (:func:`record_shipped`), or None for a kernel or architecture it
    lacks."""
    return _shipped().get((name, tuple(compute_capability)))


def for_gpu(gpu) -> tuple[int, int]:
    """The compute capability of a GPU in :data:`gpulab.hardware.GPUS` (e.g. the
    ``gpulab.hardware.H100_SXM.key`` -> (9, 0))."""
    return tuple(hardware.get_gpu(gpu).compute_capability)


def format_table(found: list[KernelResources], threads_per_block: int = 256,
                 skipped: dict[str, str] | None = None) -> Table:
    """One row per kernel: registers, spills, shared memory, occupancy at that block size; a
    kernel in ``skipped`` with why it was not assembled."""
    rows = []
    for r in found:
        occupancy = r.occupancy(threads_per_block)
        rows.append([r.kernel, f"sm_{r.compute_capability[0]}{r.compute_capability[1]}",
                     r.registers,
                     f"{r.spill_store_bytes}/{r.spill_load_bytes} B" if r.spills else "none",
                     r.shared_bytes, f"{occupancy.fraction:.0%} ({occupancy.limited_by})"])
    rows += [[kernel, None, None, None, None, f"not assembled here: {why}"]
             for kernel, why in (skipped or {}).items()]
    return Table([Column("kernel"), Column("arch"), Column("registers", "per thread"),
                  Column("spills", "store/load", align="right"),
                  Column("shared memory", "B per block", "{:,}"),
                  Column(f"occupancy at {threads_per_block} threads/block", align="left")], rows,
                 notes=["registers and spills from the assembler (ptxas via nvJitLink); "
                        "occupancy is theoretical (" + SPECS_SOURCE.split(":")[0] + ")"])


__all__ = ["FILE_FORMAT", "SHIPPED_FILE", "SHIPPED_KERNELS", "SM_LIMITS", "SPECS_SOURCE",
           "AssemblyError", "KernelResources", "Occupancy", "SMLimits", "all_resources",
           "assemble", "for_gpu", "format_table", "parse_log", "record_shipped", "resources",
           "shipped", "theoretical_occupancy"]


if __name__ == "__main__":
    print(f"wrote {record_shipped()}")
