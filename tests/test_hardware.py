"""GPU specs (every figure sourced, published figures spot-checked) and the roofline model."""

import dataclasses
import math

import pytest

from gpulab import hardware
from gpulab.hardware import (
    GPUS,
    H100_SXM,
    LAUNCH_OVERHEAD_S,
    GPUSpec,
    estimate_time,
    get_gpu,
    ridge_point,
)

REQUIRED_KEYS = {H100_SXM.key, "H200", "B200", "A100-SXM", "L4", "T4"}
SOURCED_FIELDS = ("memory_bytes", "memory_bandwidth_bytes_per_s", "host_link_bytes_per_s",
                  "tdp_watts", "compute_capability")


def test_the_course_gpus_are_all_there():
    assert REQUIRED_KEYS <= set(GPUS)
    for key, gpu in GPUS.items():
        assert gpu.key == key


@pytest.mark.parametrize("gpu", GPUS.values(), ids=GPUS.keys())
def test_every_field_is_filled_in(gpu):
    for spec_field in dataclasses.fields(GPUSpec):
        value = getattr(gpu, spec_field.name)
        if spec_field.name not in ("nvlink_bytes_per_s", "sm_count", "l2_bytes", "idle_watts"):
            assert value not in (None, "", {}), spec_field.name
    assert gpu.name.startswith("NVIDIA ")
    assert gpu.label == gpu.name
    assert len(gpu.compute_capability) == 2 and gpu.compute_capability >= (7, 5)
    assert gpu.memory_bytes >= 16e9
    assert gpu.memory_bandwidth_bytes_per_s > 1e11
    assert "fp32" in gpu.peak_flops and "fp64" in gpu.peak_flops
    assert set(gpu.peak_flops) <= set(hardware.PRECISIONS)
    assert gpu.host_link.startswith("PCIe ")


@pytest.mark.parametrize("gpu", GPUS.values(), ids=GPUS.keys())
def test_every_figure_has_a_source(gpu):
    for name in SOURCED_FIELDS:
        assert len(gpu.sources.get(name, "")) > 20, f"{gpu.key}.{name} has no source"
    for precision in gpu.peak_flops:
        source = gpu.sources.get(f"peak_flops.{precision}", "")
        assert len(source) > 20, f"{gpu.key} {precision} has no source"
    if gpu.nvlink_bytes_per_s is not None:
        assert "both directions" in gpu.sources["nvlink_bytes_per_s"]
    # a source names a document by its address, except figures derived from another figure
    assert "https://" in gpu.sources["memory_bandwidth_bytes_per_s"]
    assert gpu.source("memory_bytes") == gpu.sources["memory_bytes"]


@pytest.mark.parametrize("gpu", GPUS.values(), ids=GPUS.keys())
def test_halved_sparse_figures_say_so_and_match_the_printed_number(gpu):
    for precision, value in gpu.peak_flops.items():
        source = gpu.sources[f"peak_flops.{precision}"]
        if "with sparsity" in source:
            assert "halved" in source
            assert hardware._as_printed(2 * value, precision) in source


def test_tensor_rates_are_at_least_the_plain_rates():
    for gpu in GPUS.values():
        for precision in ("tf32", "fp16", "bf16", "fp8", "fp4"):
            if precision in gpu.peak_flops:
                assert gpu.peak_flops[precision] > gpu.peak_flops["fp32"], (gpu.key, precision)
        if "fp64_tensor" in gpu.peak_flops:
            assert gpu.peak_flops["fp64_tensor"] >= gpu.peak_flops["fp64"]


# Published figures, typed in again from the datasheets so that a typo in the table fails.
@pytest.mark.parametrize("key, bandwidth_tb_s, memory_gb, fp32_tflops, tdp_watts", [
    (H100_SXM.key, 3.35, 80, 67, 700),
    ("H200", 4.8, 141, 67, 700),
    ("RTX-A6000", 0.768, 48, 38.7, 300),
    ("B200", 7.7, 180, 75, 1000),
    ("A100-SXM", 2.039, 80, 19.5, 400),
    ("L4", 0.300, 24, 30.3, 72),
    ("T4", 0.320, 16, 8.1, 70),
])
def test_published_figures(key, bandwidth_tb_s, memory_gb, fp32_tflops, tdp_watts):
    gpu = GPUS[key]
    assert gpu.memory_bandwidth_bytes_per_s == pytest.approx(bandwidth_tb_s * 1e12)
    assert gpu.memory_bytes == pytest.approx(memory_gb * 1e9)
    assert gpu.peak_flops["fp32"] == pytest.approx(fp32_tflops * 1e12)
    assert gpu.tdp_watts == tdp_watts


@pytest.mark.parametrize("key, precision, dense_tflops", [
    (H100_SXM.key, "bf16", 989.5),   # 1,979 with sparsity
    (H100_SXM.key, "fp8", 1979),     # 3,958 with sparsity
    (H100_SXM.key, "fp64", 34),
    ("H200", "fp16", 989.5),
    ("B200", "fp4", 9000),         # 18 PFLOPS with sparsity
    ("B200", "bf16", 2250),
    ("A100-SXM", "fp16", 312),     # 624 with sparsity
    ("A100-SXM", "tf32", 156),
    ("A100-SXM", "fp64_tensor", 19.5),
    ("L4", "fp8", 242.5),          # 485 with sparsity
    ("T4", "fp16", 65),            # Turing: no sparsity
])
def test_published_dense_rates(key, precision, dense_tflops):
    assert GPUS[key].peak_flops_for(precision) == pytest.approx(dense_tflops * 1e12)


def test_links():
    assert H100_SXM.host_link == "PCIe 5.0 x16"
    assert H100_SXM.host_link_bytes_per_s == 64e9  # 128 GB/s counts both directions
    assert GPUS["A100-SXM"].host_link_bytes_per_s == 32e9
    assert GPUS["T4"].host_link_bytes_per_s == 16e9
    assert H100_SXM.nvlink_bytes_per_s == 900e9
    assert H100_SXM.nvlink_bytes_per_s_per_direction == 450e9
    assert GPUS["B200"].nvlink_bytes_per_s == 1.8e12
    assert GPUS["A100-SXM"].nvlink_bytes_per_s == 600e9
    assert GPUS["L4"].nvlink_bytes_per_s is None
    assert GPUS["T4"].nvlink_bytes_per_s_per_direction is None


def test_formats_a_gpu_lacks_are_left_out():
    assert "fp8" not in GPUS["A100-SXM"].peak_flops
    assert "bf16" not in GPUS["T4"].peak_flops
    assert "fp4" not in H100_SXM.peak_flops
    assert "fp4" in GPUS["B200"].peak_flops


def test_peak_flops_for_names_the_supported_formats():
    with pytest.raises(ValueError, match="no 'fp8' rate.*fp64.*fp32.*fp16.*int8"):
        GPUS["A100-SXM"].peak_flops_for("fp8")
    assert H100_SXM.peak_flops_for("FP32") == 67e12


def test_a_spec_with_an_unknown_format_is_refused():
    gpu = GPUS["T4"]
    with pytest.raises(ValueError, match="unknown precision"):
        dataclasses.replace(gpu, peak_flops={**gpu.peak_flops, "fp12": 1e12})
    with pytest.raises(ValueError, match="must be positive"):
        dataclasses.replace(gpu, memory_bandwidth_bytes_per_s=0)


# ----------------------------------------------------------------------------- lookups


@pytest.mark.parametrize("name, key", [
    (H100_SXM.key, H100_SXM.key), ("h100", H100_SXM.key), ("H100 SXM", H100_SXM.key),
    ("h100_sxm", H100_SXM.key), ("a100", "A100-SXM"), ("A100 SXM4 80GB", "A100-SXM"),
    ("h200", "H200"), ("B200", "B200"), ("l4", "L4"), ("T4", "T4"),
    ("NVIDIA H100 SXM5 80GB", H100_SXM.key), ("nvidia l4", "L4"),
])
def test_get_gpu_accepts_keys_and_parts_of_names(name, key):
    assert get_gpu(name) is GPUS[key]


def test_get_gpu_passes_a_spec_through():
    assert get_gpu(GPUS["T4"]) is GPUS["T4"]


@pytest.mark.parametrize("name, message", [
    ("V100", "no GPU called 'V100'; known GPUs: H100-SXM"),
    ("nvidia", "matches several GPUs"),
    ("sxm", "matches several GPUs"),
    ("", "name a GPU"),
    (None, "name a GPU"),
])
def test_get_gpu_errors_list_the_keys(name, message):
    with pytest.raises(ValueError, match=message) as error:
        get_gpu(name)
    assert H100_SXM.key in str(error.value)


# ----------------------------------------------------------------------------- roofline


def test_saxpy_on_h100_is_memory_bound_at_bytes_over_bandwidth():
    n = 100_000_000  # y = a*x + y in float32: read x and y, write y; 2 FLOPs per element
    est = estimate_time(H100_SXM.key, flops=2 * n, bytes_moved=3 * 4 * n)
    assert est.memory_s == pytest.approx(1.2e9 / 3.35e12)  # 358 µs
    assert est.compute_s == pytest.approx(2e8 / 67e12)      # 3 µs
    assert est.launch_s == LAUNCH_OVERHEAD_S
    assert est.transfer_s == 0
    assert est.gpu_s == pytest.approx(1.2e9 / 3.35e12)
    # one launch: the host issues it, then the GPU runs it
    assert est.time_s == pytest.approx(1.2e9 / 3.35e12 + LAUNCH_OVERHEAD_S)
    assert est.bound == "memory" and est.kind == "memory-bound"
    assert est.arithmetic_intensity == pytest.approx(2 / 12)
    assert est.label.startswith("estimated by gpulab's GPU model of the NVIDIA H100 SXM5 80GB")
    assert "±30 %" in est.label and "best case" not in est.label and "ceiling" not in est.label
    assert "memory-bound" in str(est)


def test_large_matmul_is_compute_bound():
    n = 8192  # C = A @ B, fp16: 2n^3 FLOPs, at least 3 n^2 * 2 bytes moved
    est = estimate_time(H100_SXM.key, flops=2 * n**3, bytes_moved=3 * n * n * 2, precision="bf16")
    assert est.bound == "compute" and est.kind == "compute-bound"
    assert est.compute_s == pytest.approx(2 * n**3 / 989.5e12)
    assert est.time_s == pytest.approx(est.compute_s + LAUNCH_OVERHEAD_S)
    assert est.arithmetic_intensity > ridge_point(H100_SXM.key, "bf16")
    assert "within 2×" in est.label


def test_a_series_label_names_each_band_once_with_the_kinds_that_share_it():
    n = 8192
    memory = estimate_time(H100_SXM.key, flops=0.3e9, bytes_moved=1.2e9)
    compute = estimate_time(H100_SXM.key, flops=2 * n**3, bytes_moved=3 * n * n * 2,
                            precision="bf16")
    assert hardware.estimates_label([memory]) == memory.label
    both = hardware.estimates_label([memory, compute, memory])
    assert both.count("memory-bound") == 1 and both.count("compute-bound") == 1
    assert both.count("promised band") == 1 and "±30 %" in both and "within 2×" in both



def test_tiny_kernels_cost_the_minimum_kernel_time_and_the_host_its_launch():
    est = estimate_time("T4", flops=4, bytes_moved=48)  # the 4-element add
    assert est.gpu_s == hardware.KERNEL_MIN_S  # no kernel is shorter, however little it does
    assert est.bound == "launch"  # the host's issue cost is larger still
    assert est.time_s == pytest.approx(LAUNCH_OVERHEAD_S + hardware.KERNEL_MIN_S)
    assert 1e-6 <= hardware.KERNEL_MIN_S <= 10e-6
    assert "https://" in hardware.KERNEL_MIN_SOURCE
    alone = estimate_time("T4", flops=4, bytes_moved=48, launches=0)
    assert alone.time_s == hardware.KERNEL_MIN_S and alone.bound == "latency"


def test_launches_overlap_the_gpus_work_on_a_stream():
    host = hardware.HOST_LAUNCH_S["numba"]
    # ten short kernels: the host's issuing is the step (each kernel hides under the next issue)
    short = estimate_time("L4", 0, 1e3, launches=10)
    assert short.launch_s == pytest.approx(10 * host)
    assert short.kernel_s == pytest.approx(10 * host + hardware.KERNEL_MIN_S)
    assert short.bound == "launch"
    # ten long kernels: the GPU's work is the step, the host only issues the first late
    long = estimate_time("L4", 0, 3e9, launches=10)
    assert long.kernel_s == pytest.approx(host + long.gpu_s)
    assert long.kernel_s < long.gpu_s + long.launch_s  # overlapped, not added
    assert estimate_time("L4", 0, 1e6, launches=0).time_s == pytest.approx(1e6 / 300e9)


def test_the_host_api_sets_the_issue_cost():
    for api, cost in hardware.HOST_LAUNCH_S.items():
        assert estimate_time("H100", 0, 0, launches=3, host_api=api).launch_s == \
            pytest.approx(3 * cost)
        assert "https://" in hardware.HOST_LAUNCH_SOURCES[api]
    assert (hardware.HOST_LAUNCH_S["cuda_graph"] < hardware.HOST_LAUNCH_S["cuda_cpp"]
            < hardware.HOST_LAUNCH_S["numba"])
    with pytest.raises(ValueError, match="host_api must be one of"):
        estimate_time("H100", 0, 0, host_api="opencl")


def test_stream_timeline_starts_a_kernel_when_it_is_issued_and_the_gpu_is_free():
    events = hardware.stream_timeline([1.0, 5.0, 1.0, 1.0], 2.0)
    assert [(e.issued_s, e.start_s, e.end_s) for e in events] == [
        (2.0, 2.0, 3.0), (4.0, 4.0, 9.0), (6.0, 9.0, 10.0), (8.0, 10.0, 11.0)]
    assert hardware.stream_timeline([], 1.0) == []
    with pytest.raises(ValueError, match="2 host issue times for 3 kernels"):
        hardware.stream_timeline([1, 2, 3], [1, 1])
    with pytest.raises(ValueError, match="cannot be negative"):
        hardware.stream_timeline([-1.0], 1.0)


def test_waves_use_the_sms_a_launch_can_fill():
    # chapter 03's register-blocked matmul at n = 1024: 64 blocks, 156 registers per thread
    fill = hardware.launch_fill(H100_SXM.key, 64, 256, registers_per_thread=156)
    assert (fill.blocks_per_sm, fill.limited_by, fill.waves) == (1, "registers", 1)
    assert fill.fill == pytest.approx(64 / 132)
    n = 1024
    full = estimate_time(H100_SXM.key, 2 * n**3, 3 * 4 * n * n, launches=0)
    waved = estimate_time(H100_SXM.key, 2 * n**3, 3 * 4 * n * n, launches=0, blocks=64,
                          threads_per_block=256, registers_per_thread=156)
    assert waved.compute_s == pytest.approx(full.compute_s * 132 / 64)
    assert "1 wave" in str(waved)
    # a last partial wave: 2 blocks of 1024 threads fit an SM, 264 a wave; 265 take two
    two = hardware.launch_fill(H100_SXM.key, 265, 1024)
    assert (two.blocks_per_sm, two.waves) == (2, 2) and two.fill == pytest.approx(265 / 528)
    assert hardware.launch_fill("L4", 64, 256) is None  # the L4's SM count is not published
    with pytest.raises(ValueError, match="together"):
        estimate_time("H100", 1, 1, blocks=4)


def test_shared_memory_and_issue_share_terms():
    h100 = H100_SXM
    # 128 B per clock per SM at the clock the fp32 peak implies (67 TFLOPS / (2 x 128 x 132))
    assert h100.shared_bytes_per_s == pytest.approx(128 * 67e12 / 256)
    est = estimate_time(h100, 2e12, 0, shared_load_bytes=8e12, launches=0)
    assert est.shared_s == pytest.approx(8e12 / h100.shared_bytes_per_s)
    assert est.bound == "shared memory" and est.kind == "compute-bound"
    third = estimate_time(h100, 2e12, 0, fma_share=1 / 3, launches=0)
    assert third.compute_s == pytest.approx(3 * 2e12 / 67e12)


def test_a_cache_decided_kernel_is_a_range():
    est = estimate_time(H100_SXM.key, 1e9, 1e12, bytes_with_reuse=1e9, launches=0)
    low, high = est.time_range_s
    assert low == pytest.approx(1e9 / 3.35e12) and high == pytest.approx(1e12 / 3.35e12)
    assert est.is_range and est.kind == "cache-decided" and est.time_s == high
    assert " to " in str(est)
    with pytest.raises(ValueError, match="cannot exceed bytes_moved"):
        estimate_time(H100_SXM.key, 1, 1, bytes_with_reuse=2)


def test_power_is_idle_plus_utilisation_times_the_rest():
    h100 = H100_SXM
    idle = h100.idle_power_watts
    assert 0 < idle < 0.25 * h100.tdp_watts
    assert hardware.power_watts(h100, 0) == pytest.approx(idle)
    assert hardware.power_watts(h100, 1) == pytest.approx(700)
    assert hardware.power_watts(h100, 0.25) == pytest.approx(idle + 0.25 * (700 - idle))
    with pytest.raises(ValueError, match="0..1"):
        hardware.power_watts(h100, 1.5)
    assert "https://" in hardware.POWER_MODEL_SOURCE


def test_ridge_point():
    assert ridge_point(H100_SXM.key) == pytest.approx(67e12 / 3.35e12)  # 20 FLOP/byte
    assert ridge_point("A100-SXM", "fp16") == pytest.approx(312e12 / 2.039e12)
    assert ridge_point(GPUS["T4"], "fp32") == pytest.approx(8.1e12 / 320e9)
    gpu = H100_SXM
    at_ridge = estimate_time(gpu, flops=ridge_point(gpu) * 1e9, bytes_moved=1e9, launches=0)
    assert at_ridge.compute_s == pytest.approx(at_ridge.memory_s)


def test_transfer_time_is_added_only_when_asked_for():
    without = estimate_time(H100_SXM.key, 2e8, 1.2e9)
    with_pcie = estimate_time(H100_SXM.key, 2e8, 1.2e9, transfer_bytes=1.2e9)
    assert without.transfer_s == 0
    assert with_pcie.link == "pageable"  # NumPy arrays are pageable: the default
    assert with_pcie.transfer_s == pytest.approx(1.2e9 / 10e9)  # 120 ms at the pageable rate
    assert with_pcie.time_s == pytest.approx(without.time_s + 1.2e9 / 10e9)
    assert with_pcie.bound == "transfer"
    pinned = estimate_time(H100_SXM.key, 2e8, 1.2e9, transfer_bytes=1.2e9, link="pinned")
    assert pinned.transfer_s == pytest.approx(1.2e9 / (0.8 * 64e9))  # near PCIe 5.0's 64 GB/s
    assert "from pinned host memory" in str(pinned) and "from pageable" in str(with_pcie)
    over_nvlink = estimate_time(H100_SXM.key, 2e8, 1.2e9, transfer_bytes=1.2e9, link="nvlink")
    assert over_nvlink.transfer_s == pytest.approx(1.2e9 / 450e9)  # one direction of 900 GB/s


def test_zero_work_is_allowed():
    est = estimate_time("B200", 0, 0)
    assert est.time_s == LAUNCH_OVERHEAD_S + hardware.KERNEL_MIN_S
    assert est.arithmetic_intensity == 0.0
    assert math.isinf(estimate_time("B200", 1e6, 0).arithmetic_intensity)


@pytest.mark.parametrize("kwargs, message", [
    (dict(flops=-1, bytes_moved=1), "flops cannot be negative"),
    (dict(flops=1, bytes_moved=-5), "bytes_moved cannot be negative"),
    (dict(flops=1, bytes_moved=1, transfer_bytes=-1), "transfer_bytes cannot be negative"),
    (dict(flops=float("nan"), bytes_moved=1), "flops must be a finite number"),
    (dict(flops=1, bytes_moved=float("inf")), "bytes_moved must be a finite number"),
    (dict(flops="many", bytes_moved=1), "flops must be a number"),
    (dict(flops=1, bytes_moved=1, precision="fp8"), "no 'fp8' rate"),
    (dict(flops=1, bytes_moved=1, link="infiniband"), "link must be one of pageable, pinned"),
    (dict(flops=1, bytes_moved=1, link="host"), "ambiguous: a host copy runs at different"),
    (dict(flops=1, bytes_moved=1, launch_overhead_s=-1e-6), "launch_overhead_s cannot be"),
    (dict(flops=1, bytes_moved=1, link_rate_bytes_per_s=0), "must be positive"),
    (dict(flops=1, bytes_moved=1, launches=-1), "launches must be a whole number"),
    (dict(flops=1, bytes_moved=1, launches=1.5), "launches must be a whole number"),
])
def test_bad_inputs_say_what_is_wrong(kwargs, message):
    with pytest.raises(ValueError, match=message):
        estimate_time("A100-SXM", **kwargs)


def test_nvlink_on_a_pcie_only_gpu_is_refused():
    with pytest.raises(ValueError, match="has no NVLink"):
        estimate_time("L4", 1, 1, transfer_bytes=1, link="nvlink")


def test_unknown_gpu_in_estimate():
    with pytest.raises(ValueError, match="known GPUs"):
        estimate_time("Voodoo2", 1, 1)


def test_launch_overhead_is_numbas_host_cost_and_has_a_source():
    assert LAUNCH_OVERHEAD_S == hardware.HOST_LAUNCH_S["numba"]
    assert "https://" in hardware.LAUNCH_OVERHEAD_SOURCE


def test_cpu_description_names_the_cores():
    text = hardware.cpu_description()
    assert "logical core" in text
    assert text == hardware.cpu_description()  # cached, stable


@pytest.mark.parametrize("gpu", GPUS.values(), ids=GPUS.keys())
def test_pinned_copies_near_the_link_peak_and_pageable_well_below(gpu):
    assert gpu.host_pinned_bytes_per_s == pytest.approx(0.8 * gpu.host_link_bytes_per_s)
    assert gpu.host_pageable_bytes_per_s <= gpu.host_pinned_bytes_per_s
    assert gpu.host_pageable_bytes_per_s < 0.8 * gpu.host_link_bytes_per_s
    for rate in ("host_pinned_bytes_per_s", "host_pageable_bytes_per_s"):
        assert "Model assumption" in gpu.source(rate) and "https://" in gpu.source(rate)
    assert hardware.link_bytes_per_s(gpu, "pinned") == gpu.host_pinned_bytes_per_s
    assert hardware.link_bytes_per_s(gpu, "pageable") == gpu.host_pageable_bytes_per_s


@pytest.mark.parametrize("gpu", GPUS.values(), ids=GPUS.keys())
def test_sm_count_and_l2_are_published_figures_or_none(gpu):
    for name in ("sm_count", "l2_bytes"):
        assert len(gpu.source(name)) > 20
        if getattr(gpu, name) is None:
            assert "not published" in gpu.source(name)
        else:
            assert "whitepaper" in gpu.source(name)
    assert (H100_SXM.sm_count, H100_SXM.l2_bytes) == (132, 50 * 2**20)
    assert (get_gpu("A100-SXM").sm_count, get_gpu("T4").sm_count) == (108, 40)


def test_measured_launch_overhead_and_copy_rate_replace_the_model_constants():
    model = estimate_time(H100_SXM.key, 0, 0, transfer_bytes=1e9, launches=10)
    measured = estimate_time(H100_SXM.key, 0, 0, transfer_bytes=1e9, launches=10,
                             launch_overhead_s=7e-6, link_rate_bytes_per_s=20e9,
                             measured_on="NVIDIA H200 (recorded run)")
    assert model.launch_s == pytest.approx(10 * LAUNCH_OVERHEAD_S)
    assert measured.launch_s == pytest.approx(70e-6)
    assert measured.transfer_s == pytest.approx(0.05)
    assert "measured on NVIDIA H200" in measured.label and "GPU model" in measured.label
    assert "7 µs" in str(measured) and "20 GB/s" in str(measured)


@pytest.mark.parametrize("device_name, key", [
    ("NVIDIA H100 80GB HBM3", H100_SXM.key), ("NVIDIA H200", "H200"), ("Tesla T4", "T4"),
    ("NVIDIA A100-SXM4-80GB", "A100-SXM"), ("NVIDIA GeForce RTX 4090", None), ("", None)])
def test_a_driver_device_name_matches_its_spec_or_none(device_name, key):
    spec = hardware.match_device(device_name)
    assert (spec.key if spec else None) == key
