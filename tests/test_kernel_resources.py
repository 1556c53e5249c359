"""Registers, spills and shared memory from the assembler (ptxas via nvJitLink), and the
theoretical occupancy that follows — without a GPU."""

import pytest

from gpulab import kernel_resources as kr
from gpulab.cli import main

LOG = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z6kernel' for 'sm_90'
ptxas info    : Function properties for _Z6kernel
ptxas         .     16 bytes stack frame, 24 bytes spill stores, 20 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers
info    : used 255 registers, used 1 barriers, 16 stack, 8192 bytes smem, 40 bytes lmem
"""


def test_the_report_is_read():
    numbers = kr.parse_log(LOG)
    assert numbers == {"registers": 255, "stack_bytes": 16, "spill_store_bytes": 24,
                       "spill_load_bytes": 20, "shared_bytes": 8192, "local_bytes": 40,
                       "barriers": 1}
    with pytest.raises(ValueError, match="not a ptxas report"):
        kr.parse_log("hello")


@pytest.mark.parametrize("cc, threads, registers, shared, warps, limited_by", [
    ((9, 0), 256, 32, 0, 64, "threads"),  # 8 blocks of 8 warps fill the SM
    ((9, 0), 256, 156, 9344, 8, "registers"),  # 156 regs -> 5120 per warp -> 12 warps -> 1 block
    ((9, 0), 256, 40, 0, 48, "registers"),  # 1280 per warp -> 51 warps -> 6 blocks
    ((9, 0), 64, 16, 0, 64, "threads"),  # 32 blocks of 2 warps
    ((9, 0), 32, 16, 0, 32, "blocks"),  # 32 blocks of 1 warp: half the warps
    ((9, 0), 256, 16, 100 * 1024, 16, "shared memory"),  # 2 blocks of (100 KiB + 1 KiB)
    ((7, 5), 256, 32, 0, 32, "threads"),  # Turing: 1024 threads per SM
])
def test_theoretical_occupancy(cc, threads, registers, shared, warps, limited_by):
    occupancy = kr.theoretical_occupancy(cc, threads, registers, shared)
    assert occupancy.warps_per_sm == warps and occupancy.limited_by == limited_by
    assert 0 < occupancy.fraction <= 1
    assert "theoretical occupancy" in str(occupancy)


def test_occupancy_rejects_what_it_cannot_know():
    with pytest.raises(ValueError, match="no SM limits"):
        kr.theoretical_occupancy((6, 1), 256, 32)
    with pytest.raises(ValueError, match="1..1024"):
        kr.theoretical_occupancy((9, 0), 2048, 32)


@pytest.mark.ptx
def test_register_blocked_matmul_does_not_spill_on_hopper():
    """The 8x8 accumulator tile lives in registers: 64 floats plus indices, and no spills —
    which PTX alone cannot show (it has unlimited virtual registers)."""
    found = kr.resources("matmul_register_blocked", (9, 0))
    assert not found.spills and found.spill_store_bytes == found.spill_load_bytes == 0
    assert 64 < found.registers <= 255
    assert found.shared_bytes >= 2 * 8 * 128 * 4  # two 8 x 128 float32 tiles
    assert "no spills" in str(found)
    assert found.occupancy(256).limited_by == "registers"


@pytest.mark.ptx
def test_every_kernel_is_assembled_or_says_why():
    found, skipped = kr.all_resources((9, 0))
    names = {r.kernel for r in found}
    assert {"saxpy", "matmul_tiled", "dot_shared_tree"} <= names
    assert all(r.registers > 0 for r in found)
    assert all("fp16" in k or "bf16" in k for k in skipped)  # helpers linked on a GPU only
    assert all("linked only when" in why for why in skipped.values())
    table = kr.format_table(found, 256, skipped)
    assert "matmul_register_blocked" in table and "theoretical" in table


@pytest.mark.ptx
def test_cli(capsys):
    assert main(["ptx", "--resources", "saxpy", "--cc", "8.0"]) == 0
    out = capsys.readouterr().out
    assert "saxpy (sm_80)" in out and "registers per thread" in out and "occupancy" in out
    assert main(["ptx", "--resources", "saxpy", "--threads", "4096"]) == 2
    assert main(["ptx", "--resources", "nope"]) == 2
    assert main(["ptx", "--resources", "saxpy", "--cc", "6.1"]) == 2


@pytest.mark.ptx
def test_the_shipped_table_is_what_the_assembler_reports_now():
    """The chapters read registers and shared memory from gpulab/data/kernel_resources.json
    (assembling takes seconds per kernel); regenerate it with `python -m
    gpulab.kernel_resources` when a shipped kernel changes."""
    for name in kr.SHIPPED_KERNELS:
        stored = kr.shipped(name, (9, 0))
        fresh = kr.resources(name, (9, 0))
        assert stored is not None, name
        assert (stored.registers, stored.shared_bytes, stored.spills) == \
            (fresh.registers, fresh.shared_bytes, fresh.spills), name
    assert kr.shipped("matmul_naive", (6, 1)) is None
