"""The narrow-format kernels against float64 (tolerances per format) and against the CPU
emulations in gpulab.reference (bit for bit where the arithmetic is fixed), in this tier."""

import gpulab  # noqa: F401  (must come before numba: it chooses the simulator or the GPU)

# isort: split
import ml_dtypes
import numpy as np
import pytest

from gpulab import device, formats, reference
from gpulab.kernels import narrow_formats as kp
from gpulab.kernels.arrays import InputError
from gpulab.kernels.dot import launch_config
from gpulab.kernels.registry import kernel_spec

SIM = device.tier() != "gpu"
LENGTHS = [1, 31, 257, 1000]  # not multiples of the block size


def vectors(n, seed, low=0.0, high=1.0):
    rng = np.random.default_rng(seed)
    return rng.uniform(low, high, n), rng.uniform(low, high, n)


def config_for(n, threads_per_block=None, blocks=None):
    return launch_config(n, "grid_stride", threads_per_block, blocks)


def bound_for(xs, ys, accumulator, config, extra=0):
    k = reference.grid_stride_roundings(len(xs), config.blocks, config.threads_per_block)
    return reference.rounding_bound(xs, ys, accumulator, k + extra)


# --- fp16 -----------------------------------------------------------------------------------


@pytest.mark.parametrize("accumulate", ["fp16", "fp32"])
@pytest.mark.parametrize("n", LENGTHS)
def test_dot_fp16_against_float64_and_the_emulation(accumulate, n):
    x, y = vectors(n, seed=n, low=-1.0)
    xs, ys = x.astype(np.float16), y.astype(np.float16)
    result = kp.dot_fp16(xs, ys, accumulate)
    config = config_for(n)
    exact = reference.dot_exact(xs, ys)  # the error of the sums alone: inputs as stored
    assert abs(float(result) - exact) <= bound_for(xs, ys, accumulate, config)
    emulated = reference.dot_grid_stride_in_format(xs, ys, accumulate, config.blocks,
                                                   config.threads_per_block)
    if SIM or accumulate == "fp32":  # on a GPU an fp16 multiply-add may be fused
        assert float(result) == float(emulated)
    assert np.dtype(type(result.value)) == (np.float16 if accumulate == "fp16" else np.float32)
    assert result.partials.shape == (config.blocks,)
    assert (result.storage, result.accumulator) == ("fp16", accumulate)


def test_fp32_accumulation_is_far_more_accurate_on_a_long_chain():
    x, y = vectors(20_000, seed=1)
    xs, ys = x.astype(np.float16), y.astype(np.float16)
    exact = reference.dot_exact(xs, ys)
    error = {acc: abs(float(kp.dot_fp16(xs, ys, acc, threads_per_block=32, blocks=1)) - exact)
             for acc in ("fp16", "fp32")}
    assert error["fp32"] * 1000 < error["fp16"]


def test_dot_fp16_accepts_device_arrays_and_says_where_it_ran():
    from numba import cuda

    x, y = vectors(300, seed=2)
    xs, ys = x.astype(np.float16), y.astype(np.float16)
    result = kp.dot_fp16(cuda.to_device(xs), cuda.to_device(ys), "fp32")
    assert float(result) == float(kp.dot_fp16(xs, ys, "fp32"))
    assert result.ran == ("sim" if SIM else "gpu")
    assert ("simulator" in result.label) == SIM and "dot_fp16_acc32" in result.label
    assert "fp16 storage, fp32 accumulator" in str(result)


@pytest.mark.parametrize("accumulate", ["fp16", "fp32"])
def test_matmul_fp16(accumulate):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((13, 70)).astype(np.float16)  # 13 x 11: not multiples of 8 or 16
    b = rng.standard_normal((70, 11)).astype(np.float16)
    result = kp.matmul_fp16(a, b, accumulate)
    exact = reference.matmul_exact(a, b)
    magnitude = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    u = formats.get_format(accumulate).unit_roundoff
    k = a.shape[1] + 1
    assert np.all(np.abs(result.value - exact) <= k * u / (1 - k * u) * magnitude)
    assert result.value.dtype == (np.float16 if accumulate == "fp16" else np.float32)
    emulated = reference.matmul_in_format(a, b, accumulate)
    if SIM or accumulate == "fp32":
        assert np.array_equal(result.value, emulated)


# --- bf16 -----------------------------------------------------------------------------------


def test_bf16_kernels_are_registered_gpu_only_and_the_rest_are_not():
    for name in ("dot_bf16_acc16", "dot_bf16_acc32", "matmul_bf16_acc32"):
        assert kernel_spec(name).gpu_only
    for name in ("dot_fp16_acc16", "dot_fp16_acc32", "quantize_fp8_e4m3", "dot_fp8_acc32",
                 "matmul_fp16_acc16", "matmul_fp16_acc32", "matmul_fp8_acc32"):
        assert not kernel_spec(name).gpu_only


BF16_ON_GPU = pytest.mark.skipif(
    not kp.bf16_runs_here(),
    reason="bf16 arithmetic runs only on a GPU of compute capability >= 8.0; without one "
           "dot_bf16/matmul_bf16 return gpulab.reference's emulation itself, so comparing the "
           "two would test nothing (the emulation is tested in tests/test_reference.py)")


@BF16_ON_GPU
@pytest.mark.parametrize("accumulate", ["bf16", "fp32"])
@pytest.mark.parametrize("n", [31, 1000])
def test_dot_bf16_kernel_matches_the_emulation(accumulate, n):
    x, y = vectors(n, seed=n + 7, low=-1.0)
    xs, ys = x.astype(ml_dtypes.bfloat16), y.astype(ml_dtypes.bfloat16)
    result = kp.dot_bf16(xs, ys, accumulate)
    assert result.ran == "gpu" and "dot_bf16_acc" in result.label
    config = config_for(n)
    emulated = reference.dot_grid_stride_in_format(xs, ys, accumulate, config.blocks,
                                                   config.threads_per_block)
    assert float(result) == float(emulated)  # the kernel uses _rn intrinsics: nothing fused
    exact = reference.dot_exact(xs, ys)
    assert abs(float(result) - exact) <= bound_for(xs, ys, accumulate, config)


@pytest.mark.skipif(kp.bf16_runs_here(), reason="bf16 runs on this GPU: tested above")
@pytest.mark.parametrize("accumulate", ["bf16", "fp32"])
def test_dot_bf16_without_a_gpu_is_the_labelled_emulation(accumulate):
    x, y = vectors(1000, seed=3, low=-1.0)
    xs, ys = x.astype(ml_dtypes.bfloat16), y.astype(ml_dtypes.bfloat16)
    result = kp.dot_bf16(xs, ys, accumulate)
    assert result.ran == "emulated"
    assert "emulated with ml_dtypes on this CPU" in result.label
    assert "dot_bf16_acc" in result.label  # names the kernel it stands in for
    config = config_for(1000)
    exact = reference.dot_exact(xs, ys)
    assert abs(float(result) - exact) <= bound_for(xs, ys, accumulate, config)


@BF16_ON_GPU
def test_matmul_bf16_kernel_matches_the_emulation():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((9, 40)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((40, 5)).astype(ml_dtypes.bfloat16)
    result = kp.matmul_bf16(a, b)
    assert result.ran == "gpu"
    assert np.array_equal(result.value, reference.matmul_in_format(a, b, "fp32"))
    assert result.value.dtype == np.float32


def test_matmul_bf16_is_close_to_exact_wherever_it_runs():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((9, 40)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((40, 5)).astype(ml_dtypes.bfloat16)
    result = kp.matmul_bf16(a, b)
    assert np.allclose(result.value, reference.matmul_exact(a, b), rtol=1e-5, atol=1e-5)
    assert (result.ran == "emulated") == (not kp.bf16_runs_here())


# --- fp8 ------------------------------------------------------------------------------------

E4M3_EDGES = np.array([0, 448, -448, 464, 465, 480, 1e9, -1e9, 2**-9, 2**-10, 3 * 2**-10,
                       2**-6, 1.0625, 1.1875, 0.5 * (1 + 1.125), 7 * 2**-10, 15 * 2**-10,
                       np.inf, -np.inf], np.float32)


def test_quantize_kernel_matches_ml_dtypes_code_for_code():
    rng = np.random.default_rng(5)
    spread = rng.standard_normal(2000) * 10.0 ** rng.integers(-4, 4, 2000)
    x = np.concatenate([E4M3_EDGES, spread.astype(np.float32)]).astype(np.float32)
    codes, scale = kp.run_quantize_fp8_e4m3(x, scale=1.0)
    assert scale == 1.0 and codes.dtype == np.uint8
    expected = formats.to_format(x, "fp8_e4m3", saturate=True)
    got = codes.view(ml_dtypes.float8_e4m3fn)
    assert np.array_equal(got.astype(np.float64), expected.astype(np.float64))
    nonzero = expected.astype(np.float64) != 0  # -0 is stored as +0: compare codes elsewhere
    assert np.array_equal(codes[nonzero], expected.view(np.uint8)[nonzero])


def test_quantize_kernel_nan_and_default_scale():
    codes, _ = kp.run_quantize_fp8_e4m3(np.array([np.nan, 1.0], np.float32), scale=1.0)
    assert codes[0] == 0x7F
    x = np.array([-3000.0, 1.0, 0.001], np.float32)
    codes, scale = kp.run_quantize_fp8_e4m3(x)
    assert scale == pytest.approx(3000 / 448) and codes[0] == 0x80 | 0x7E  # -448
    with pytest.raises(InputError, match="inf or NaN"):
        kp.run_quantize_fp8_e4m3(np.array([np.inf], np.float32))
    with pytest.raises(InputError, match="positive"):
        kp.run_quantize_fp8_e4m3(x, scale=-1.0)


@pytest.mark.parametrize("n", [1, 257, 1000])
def test_dot_fp8(n):
    x, y = vectors(n, seed=n + 11, low=-10.0, high=10.0)
    x32, y32 = x.astype(np.float32), y.astype(np.float32)
    result = kp.dot_fp8(x32, y32)
    qx, qy = formats.quantise(x32, "fp8_e4m3"), formats.quantise(y32, "fp8_e4m3")
    assert result.scale == pytest.approx(qx.scale * qy.scale, rel=1e-6)
    config = config_for(n)
    emulated = reference.dot_grid_stride_in_format(qx.values, qy.values, "fp32", config.blocks,
                                                   config.threads_per_block,
                                                   scale=np.float32(result.scale))
    assert float(result) == pytest.approx(float(emulated), rel=1e-6, abs=1e-6)
    # Against float64: each input off by at most 2^-4 of itself, or the subnormal step.
    xd, yd = np.abs(x), np.abs(y)
    input_error = float(np.sum((xd + qx.scale / 512) * (yd + qy.scale / 512))
                        - np.sum(xd * yd)) + 2 * 2.0**-4 * float(np.sum(xd * yd))
    assert abs(float(result) - float(np.dot(x32.astype(np.float64), y32))) <= \
        input_error + bound_for(x, y, "fp32", config, extra=1)
    assert result.storage == "fp8_e4m3" and "quantize_fp8_e4m3" in result.label


def test_matmul_fp8():
    rng = np.random.default_rng(6)
    a = rng.standard_normal((10, 33)).astype(np.float32)
    b = rng.standard_normal((33, 7)).astype(np.float32)
    result = kp.matmul_fp8(a, b)
    qa, qb = formats.quantise(a, "fp8_e4m3"), formats.quantise(b, "fp8_e4m3")
    expected = reference.matmul_in_format(qa.values, qb.values, "fp32",
                                          scale=np.float32(result.scale))
    assert np.allclose(result.value, expected, rtol=1e-6, atol=1e-6)
    assert result.value.dtype == np.float32
    exact = a.astype(np.float64) @ b
    assert np.abs(result.value - exact).max() < 0.1 * np.abs(exact).max()


# --- one entry point ------------------------------------------------------------------------


@pytest.mark.parametrize("storage, accumulate", kp.DOT_VARIANTS)
def test_dot_in_format_rounds_the_inputs_then_runs_the_kernel(storage, accumulate):
    x, y = vectors(200, seed=12)
    result = kp.dot_in_format(x, y, storage, accumulate)
    assert (result.storage, result.accumulator) == (storage, accumulate)
    tolerance = {"fp32": 1e-5, "fp16": 1e-2, "bf16": 5e-2, "fp8_e4m3": 5e-2}[storage]
    assert float(result) == pytest.approx(float(np.dot(x, y)), rel=tolerance)
    small = float(kp.dot_in_format([1, 2], [3, 4], storage, accumulate))
    if storage == "fp8_e4m3":  # 3/4 * 448 = 336 is not an E4M3 value: 320 is stored
        assert small == pytest.approx(1 * (320 * 4 / 448) + 2 * 4, rel=1e-6)
    else:
        assert small == 11.0


def test_dot_in_format_rejects_pairs_without_a_kernel():
    with pytest.raises(ValueError, match="storage/accumulator pairs"):
        kp.dot_in_format(np.ones(3), np.ones(3), "fp8_e4m3", "fp16")
    with pytest.raises(InputError, match="dtype int32"):
        kp.dot_in_format(np.ones(3, np.int32), np.ones(3), "fp16", "fp32")


# --- bad input: every problem named ---------------------------------------------------------

F16 = np.ones(5, np.float16)


@pytest.mark.parametrize("call, words", [
    (lambda: kp.dot_fp16(np.ones(5, np.float32), F16), "dtype float32.*astype\\(np.float16\\)"),
    (lambda: kp.dot_fp16([1.0, 2.0], [1.0, 2.0]), "not a list"),
    (lambda: kp.dot_fp16(F16, np.ones(4, np.float16)), "same length"),
    (lambda: kp.dot_fp16(np.ones((2, 2), np.float16), F16), "1-D"),
    (lambda: kp.dot_fp16(np.ones(0, np.float16), np.ones(0, np.float16)), "empty"),
    (lambda: kp.dot_fp16(np.ones(10, np.float16)[::2], F16), "not contiguous"),
    (lambda: kp.dot_fp16(F16, F16, accumulate="fp8"), "accumulate must be one of"),
    (lambda: kp.dot_bf16(F16, F16), "bfloat16"),
    (lambda: kp.dot_fp8(np.ones(3), np.ones(3)), "float64.*float32"),
    (lambda: kp.dot_fp16(F16, F16, threads_per_block=100), "power of two"),
    (lambda: kp.matmul_fp16(np.ones((2, 3), np.float16), np.ones((4, 2), np.float16)),
     "A's columns \\(3\\) must equal B's rows \\(4\\)"),
    (lambda: kp.matmul_fp16(np.ones(3, np.float16), np.ones((3, 2), np.float16)), "2-D"),
    (lambda: kp.matmul_fp16(np.ones((2, 3), np.float16).T, np.ones((2, 2), np.float16)),
     "C-contiguous"),
    (lambda: kp.matmul_fp16(np.ones((0, 3), np.float16), np.ones((3, 2), np.float16)), "empty"),
    (lambda: kp.matmul_fp8(np.ones((2, 2), np.float16), np.ones((2, 2), np.float32)),
     "float16.*float32"),
    (lambda: kp.matmul_bf16(np.ones((2, 2)), np.ones((2, 2))), "bfloat16"),
    (lambda: kp.matmul_fp16(F16.reshape(5, 1), F16.reshape(1, 5), block=(64, 64)),
     "outside 1..1024"),
])
def test_bad_input_is_named(call, words):
    with pytest.raises((InputError, ValueError), match=words):
        call()
