"""The matmul kernels against gpulab.reference on awkward shapes, in the tier this process runs.

The simulator pays tens of milliseconds per barrier, so the shapes are small (a tile or two) and
never multiples of a tile or of the register-blocked kernel's 128 x 128 block.
"""

import numpy as np
import pytest

from gpulab import device, reference
from gpulab.kernels import matmul as mm
from gpulab.kernels.arrays import InputError, is_device_array

SIM = device.tier() != "gpu"
SHAPES = [(17, 23, 9), (1, 5, 3), (9, 1, 20), (33, 7, 1)] if SIM else \
    [(17, 23, 9), (1, 5, 3), (300, 257, 129), (1000, 1030, 517)]
CASES = [("naive", None), ("tiled", 4), ("tiled", 8), ("tiled", 16), ("register_blocked", None)]


def matrices(M, N, K, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.uniform(-1, 1, (M, K)).astype(dtype), rng.uniform(-1, 1, (K, N)).astype(dtype))


def assert_matmul_close(C, A, B):
    assert C.shape == (A.shape[0], B.shape[1])
    error = np.abs(np.asarray(C, np.float64) - reference.matmul_exact(A, B))
    bound = reference.matmul_tolerance(A, B)
    assert np.all(error <= bound), f"max error {error.max():.3g}, bound {bound.min():.3g}"


@pytest.mark.parametrize("method, tile", CASES)
@pytest.mark.parametrize("shape", SHAPES)
def test_matches_reference_on_awkward_shapes(method, tile, shape):
    if SIM and method == "tiled" and tile == 4 and max(shape) > 20:
        pytest.skip("tile 4 on this shape needs hundreds of simulated barriers; covered below")
    A, B = matrices(*shape, seed=sum(shape))
    C = mm.matmul(A, B, method=method, tile=tile)
    assert C.dtype == np.float32
    assert_matmul_close(C, A, B)


def test_float64_and_lists():
    A, B = matrices(7, 5, 6, np.float64)
    assert_matmul_close(mm.matmul(A, B, method="register_blocked"), A, B)
    assert mm.matmul([[1, 2]], [[3], [4]], method="tiled", tile=4).tolist() == [[11.0]]


def test_tile_size_one_block_past_an_edge():
    A, B = matrices(5, 6, 7)
    assert_matmul_close(mm.matmul(A, B, method="tiled", tile=4), A, B)


def test_device_arrays_and_out():
    from numba import cuda

    A, B = matrices(9, 10, 11)
    result = mm.matmul(cuda.to_device(A), cuda.to_device(B), method="naive")
    assert is_device_array(result)
    assert_matmul_close(result.copy_to_host(), A, B)
    out = np.empty((9, 10), np.float32)
    assert mm.matmul(A, B, method="naive", out=out) is out
    assert_matmul_close(out, A, B)


def test_launch_configs():
    config = mm.launch_config(300, 200, 50, "tiled", 16)
    assert config.blocks == (13, 19) and config.threads == (16, 16)
    assert config.barriers_per_block == 2 * 4
    config = mm.launch_config(300, 200, 50, "register_blocked")
    assert config.blocks == (2, 3) and config.threads_per_block == 256
    assert config.barriers_per_block == 2 * 7
    assert mm.launch_config(3, 3, 3, "naive").barriers_per_block == 0
    assert "matmul_tiled" in str(mm.launch_config(3, 3, 3, "tiled", 8))


def test_counts_and_traffic_model():
    n = 4096
    assert mm.flops(2, 2, 3) == 24
    assert mm.flops(n, n, n) == 2 * n**3
    naive = mm.traffic_bytes(n, n, n, "naive")
    assert naive == 4 * (2 * n**3 + n * n)  # every multiply-add loads two numbers
    assert mm.traffic_bytes(n, n, n, "tiled", 16) == pytest.approx(naive / 16, rel=0.01)
    # ... plus writing C once, which no tiling avoids
    assert mm.traffic_bytes(n, n, n, "register_blocked") == 4 * (2 * n**3 // 128 + n * n)
    assert mm.minimum_bytes(n, n, n) == 3 * 4 * n * n


BAD = [
    (lambda: mm.matmul(np.ones((2, 3), np.float32), np.ones((2, 3), np.float32)), "columns"),
    (lambda: mm.matmul(np.ones(3, np.float32), np.ones((3, 1), np.float32)), "2-D"),
    (lambda: mm.matmul(np.ones((0, 3), np.float32), np.ones((3, 1), np.float32)), "empty"),
    (lambda: mm.matmul(np.ones((2, 3), np.int64), np.ones((3, 2), np.int64)), "int64"),
    (lambda: mm.matmul(np.ones((2, 3), np.float32), np.ones((3, 2))), "one dtype"),
    (lambda: mm.matmul(np.ones((3, 2), np.float32).T, np.ones((3, 2), np.float32)),
     "C-contiguous"),
    (lambda: mm.matmul([[1, 2], [3]], [[1], [2]]), "matrix of numbers"),
    (lambda: mm.matmul("A", np.ones((1, 1))), "NumPy array"),
    (lambda: mm.matmul(np.ones((2, 2)), np.ones((2, 2)), out=np.empty((2, 3))), "shape"),
    (lambda: mm.matmul(np.ones((2, 2)), np.ones((2, 2)), method="tiled", tile=33), "1..32"),
    (lambda: mm.matmul(np.ones((2, 2)), np.ones((2, 2)), method="tiled", tile=2.5), "whole"),
]


@pytest.mark.parametrize("call, words", BAD)
def test_bad_input_is_named(call, words):
    with pytest.raises(InputError, match=words):
        call()


def test_bad_method_and_tile_combination():
    with pytest.raises(ValueError, match="method must be one of"):
        mm.launch_config(2, 2, 2, "magic")
    with pytest.raises(ValueError, match="fixed 128 x 128"):
        mm.launch_config(2, 2, 2, "register_blocked", tile=16)


def test_default_tile_follows_the_tier():
    assert mm.default_tile() == (8 if SIM else 16)


@pytest.mark.ptx
def test_register_blocked_accumulators_stay_in_registers():
    """In the PTX for an H100, the 8 x 8 accumulators are registers: 64 FMAs per step along K,
    no local-memory traffic (spills). The simulator cannot show this; the compiler can."""
    from gpulab.ptx import kernel_ptx

    ptx = kernel_ptx("matmul_register_blocked", compute_capability=(9, 0))
    assert ptx.count("fma.rn.f32") >= 64
    assert "ld.local" not in ptx and "st.local" not in ptx
    assert ptx.count("bar.sync") == 2
    tiled = kernel_ptx("matmul_tiled", compute_capability=(8, 0))
    assert ".shared" in tiled and "bar.sync" in tiled
