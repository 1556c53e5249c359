"""Mixed-precision training (gpulab.nn.mixed_precision): the loss scaler behaves as PyTorch's
GradScaler, delayed scaling as Transformer Engine's, the recipes train the digits as the issue
asks (fixed seed), the bytes kept match chapter 09's calculator, and one real step on the
kernels matches the emulation."""

import math

import ml_dtypes
import numpy as np
import pytest

from gpulab import formats, hardware
from gpulab.hardware import H100_SXM
from gpulab.nn import memory
from gpulab.nn import mixed_precision as mp
from gpulab.nn.data import load_digits
from gpulab.nn.mlp import MLP
from gpulab.nn.recipes import digits_model, train_digits

EPOCHS = 4  # the chapter's runs


@pytest.fixture(scope="module")
def data():
    return load_digits(seed=0)


@pytest.fixture(scope="module")
def runs(data):
    """The chapter's runs, seed 0, 4 epochs, growth interval 50."""
    cache = {}

    def get(key, **settings):
        name = (key, tuple(sorted(settings.items())))
        if name not in cache:
            cache[name] = mp.train_mixed(key, data, epochs=EPOCHS, growth_interval=50,
                                         **settings)
        return cache[name]

    return get


# --- the loss scaler: PyTorch's GradScaler -------------------------------------------------------


def test_loss_scaler_defaults_are_pytorchs():
    scaler = mp.LossScaler()
    assert scaler.scale == 2.0**16 and scaler.growth_interval == 2000
    assert (scaler.growth_factor, scaler.backoff_factor) == (2.0, 0.5)


def test_loss_scaler_grows_after_the_interval_and_backs_off_skipping_the_step():
    scaler = mp.LossScaler(init_scale=1024.0, growth_interval=3)
    assert [scaler.update(False) for _ in range(2)] == [True, True]
    assert scaler.scale == 1024 and scaler.clean_steps == 2
    assert scaler.update(False) and scaler.scale == 2048 and scaler.clean_steps == 0
    scaler.update(False)
    assert scaler.clean_steps == 1
    assert scaler.update(True) is False  # skipped
    assert scaler.scale == 1024 and scaler.clean_steps == 0  # backed off, count reset
    assert scaler.update(True) is False and scaler.scale == 512
    for _ in range(3):
        scaler.update(False)
    assert scaler.scale == 1024
    assert [h[1:] for h in scaler.history[:3]] == [(False, True)] * 3
    assert mp.LossScaler.found_inf([np.ones(3), np.array([1.0, np.inf])])
    assert mp.LossScaler.found_inf([np.array([np.nan])])
    assert not mp.LossScaler.found_inf([np.ones(3)])


def test_loss_scaler_never_grows_to_infinity():
    scaler = mp.LossScaler(init_scale=2.0**127, growth_interval=1)
    scaler.update(False)
    assert scaler.scale == 2.0**127  # doubling would overflow float32: not taken


@pytest.mark.parametrize("settings", [{"init_scale": 0}, {"growth_factor": 1.0},
                                      {"backoff_factor": 1.5}, {"growth_interval": 0}])
def test_loss_scaler_rejects_bad_settings(settings):
    with pytest.raises(ValueError):
        mp.LossScaler(**settings)


# --- delayed scaling: Transformer Engine's recipe ------------------------------------------------


def test_scale_from_history_is_fp8_max_over_the_largest_amax_with_the_margin():
    history = np.array([1.0, 7.0, 2.0])
    assert mp.scale_from_history(history, 448.0) == 64.0
    assert mp.scale_from_history(history, 448.0, margin=2) == 16.0
    assert mp.scale_from_history(np.zeros(4), 448.0) is None


def test_delayed_scaling_uses_the_scale_of_earlier_steps():
    meta = mp.DelayedScaling("fp8_e4m3", history_len=3)
    x = np.array([0.5, -4.0, 2.0], dtype=np.float32)
    stored, inverse = meta.cast(x)
    assert inverse == 1.0 and stored.dtype == np.dtype(ml_dtypes.float8_e4m3fn)
    assert list(meta.history) == [0.0, 0.0, 4.0]  # newest last
    assert meta.update() == 112.0  # 448 / 4, for the next step
    meta.cast(x * 0.25)
    assert meta.update() == 112.0  # the spike of the earlier step is still in the history
    for _ in range(2):
        meta.cast(x * 0.25)
    assert meta.update() == 448.0  # the spike has left the history
    saturated, _ = meta.cast(x * 1000)  # a jump the delayed scale did not see: saturates
    assert np.all(np.isfinite(saturated.astype(np.float32)))
    assert float(np.max(np.abs(saturated.astype(np.float32)))) == 448.0
    before = list(meta.history)
    meta.cast(x, record=False)
    assert list(meta.history) == before


def test_delayed_scaling_keeps_its_scale_without_an_amax():
    meta = mp.DelayedScaling("fp8_e5m2", history_len=2)
    meta.cast(np.zeros(3))
    assert meta.update() == 1.0
    with pytest.raises(ValueError):
        mp.DelayedScaling("fp16")


def test_amax_leaves_nan_out_and_keeps_inf_as_transformer_engines_fmaxf_does():
    assert mp.amax(np.array([1.0, np.nan, -3.0])) == 3.0
    assert mp.amax(np.array([np.nan, np.nan])) == 0.0  # fmaxf from 0: an all-NaN tensor
    assert mp.amax(np.array([], dtype=np.float32)) == 0.0
    assert mp.amax(np.array([2.0, -np.inf])) == np.inf
    assert mp.amax(np.array([[0.5, -7.0], [np.nan, 6.0]], dtype=np.float16)) == 7.0
    # the history's maximum is taken the same way: a NaN entry is skipped, not propagated
    assert mp.scale_from_history(np.array([np.nan, 4.0, 2.0]), 448.0) == 112.0
    assert mp.scale_from_history(np.array([1.0, np.inf]), 448.0) is None
    # an amax so small that fp8_max / amax overflows fp32: fp32's largest value, as TE
    assert mp.scale_from_history(np.array([1e-45]), 448.0) == float(np.finfo(np.float32).max)


def test_a_nan_step_neither_poisons_nor_freezes_the_scale():
    meta = mp.DelayedScaling("fp8_e4m3", history_len=4)
    meta.cast(np.array([2.0, -1.0]))
    assert meta.update() == 224.0
    meta.cast(np.array([8.0, np.nan]))  # NaN in the tensor: its other values still count
    assert list(meta.history) == [0.0, 0.0, 2.0, 8.0]
    assert meta.update() == 56.0  # updated at once, not frozen for history_len steps
    meta.cast(np.full(3, np.nan))  # a tensor of NaN only records 0, as TE's fmaxf from 0
    assert meta.history[-1] == 0.0 and meta.update() == 56.0  # the 8 is still in the history


def test_an_inf_step_keeps_the_previous_scale_while_it_is_in_the_history():
    meta = mp.DelayedScaling("fp8_e5m2", history_len=3)
    meta.cast(np.array([4.0]))
    first = meta.update()
    assert first == 57344.0 / 4
    meta.cast(np.array([np.inf, 1.0]))
    scales = []
    for _ in range(3):
        scales.append(meta.update())
        meta.cast(np.array([2.0]))
    assert scales == [first] * 3  # TE: amax inf -> the previous scale, while inf is in the window
    assert meta.update() == 57344.0 / 2  # the inf has dropped out: the scale moves again


# --- formats, recipes ----------------------------------------------------------------------------


def test_values_are_stored_in_their_formats():
    x = np.array([1.0 + 2**-12, 2e-8, 1e5], dtype=np.float32)
    assert mp.store(x, "fp16").dtype == np.float16
    assert mp.store(x, "bf16").dtype == np.dtype(ml_dtypes.bfloat16)
    assert mp.widen(mp.store(x, "fp16"))[0] == 1.0  # 2^-12 is below half an fp16 step at 1
    assert mp.widen(mp.store(x, "fp16"))[1] == 0.0  # below half fp16's smallest subnormal
    assert math.isinf(mp.widen(mp.store(x, "fp16"))[2])
    assert mp.widen(mp.store(x, "fp8_e4m3", saturate=True))[2] == 448.0
    with pytest.raises(ValueError):
        mp.dtype_of("fp4")


def test_recipes_say_which_layers_run_in_fp8():
    assert [mp.get_recipe("fp8").layer_format(k, 3) for k in range(3)] == ["fp8"] * 3
    keep = mp.get_recipe("fp8_keep_first_last")
    assert [keep.layer_format(k, 3) for k in range(3)] == ["bf16", "fp8", "bf16"]
    assert mp.get_recipe("fp16").loss_scaling and not mp.get_recipe("bf16").loss_scaling
    assert not mp.get_recipe("bf16_no_master").master_weights
    with pytest.raises(ValueError, match="no recipe"):
        mp.get_recipe("fp7")
    with pytest.raises(ValueError):
        mp.Recipe("x", "x", "fp16", fp8_keep=("first",))


# --- the gradient record -------------------------------------------------------------------------


def test_gradient_record_counts_flushed_and_overflowed_values():
    record = mp.GradientRecord("fp16")
    before = np.array([0.0, 2.0**-30, 2.0**-20, 1.0, 1e6], dtype=np.float32)
    record.add(before, mp.store(before, "fp16"))
    assert record.nonzero == 4 and record.flushed == 1 and record.overflowed == 1
    edges = mp.HISTOGRAM_EDGES_LOG2
    for value in (-30, -20, 0):
        assert record.counts[value - edges[0]] == 1
    assert record.flushed_fraction == 0.25


# --- training ------------------------------------------------------------------------------------


def test_the_fp32_recipe_is_chapter_07s_training(data):
    run = mp.train_mixed("fp32", data, epochs=2)
    model, history = train_digits("numpy", data=data, epochs=2)
    assert run.test_accuracy == pytest.approx(history.column("test_accuracy"), abs=1 / 359)
    state = model.state()
    assert max(float(np.max(np.abs(run.state[k] - state[k]))) for k in state) < 1e-4
    # training accuracy and time per epoch, as chapter 07's History records them
    assert run.train_accuracy == pytest.approx(history.column("train_accuracy"), abs=2 / 1438)
    assert len(run.epoch_seconds) == 2 and all(s > 0 for s in run.epoch_seconds)


def test_bf16_and_fp16_with_loss_scaling_are_within_a_point_of_fp32(runs):
    """The issue's test: held-out accuracy on the digits, seed 0, 4 epochs."""
    fp32 = runs("fp32").final_accuracy
    assert fp32 > 0.9
    for key in ("bf16", "fp16"):
        assert abs(runs(key).final_accuracy - fp32) <= 0.01, key
    assert runs("fp8").final_accuracy > 0.85  # reported in the chapter


def test_fp16_without_loss_scaling_loses_small_gradients(runs):
    factor = 2.0**-20
    unscaled = runs("fp16_no_scaling", loss_factor=factor)
    scaled = runs("fp16", loss_factor=factor)
    bf16 = runs("bf16", loss_factor=factor)
    fp32 = runs("fp32", loss_factor=factor)
    assert unscaled.flushed_fraction > 0.5
    assert unscaled.final_accuracy < fp32.final_accuracy - 0.3  # it learns far worse
    assert scaled.flushed_fraction < 0.01 and abs(scaled.final_accuracy
                                                  - fp32.final_accuracy) <= 0.01
    assert bf16.flushed_fraction == 0 and abs(bf16.final_accuracy - fp32.final_accuracy) <= 0.01
    # in fp32 the factor changes nothing but rounding (Adam's epsilon scales with it)
    assert fp32.final_accuracy == pytest.approx(runs("fp32").final_accuracy, abs=0.006)
    # with the digits' own gradients fp16 hardly flushes anything
    assert runs("fp16_no_scaling").flushed_fraction < 1e-3


def test_the_loss_scale_grows_and_backs_off(runs):
    run = runs("fp16")
    scales = np.log2(run.loss_scales)
    assert scales[0] == 16 and max(scales) > 16
    assert run.skipped_steps >= 1
    first_skip = int(np.flatnonzero(run.skipped)[0])
    assert run.loss_scales[first_skip + 1] == run.loss_scales[first_skip] / 2


def test_updates_to_bf16_weights_are_swamped_without_master_weights(runs):
    master = runs("bf16", lr=3e-4)
    none = runs("bf16_no_master", lr=3e-4)
    assert none.mean_updates_lost > 0.5
    assert none.final_accuracy < master.final_accuracy - 0.1
    assert runs("fp32", lr=3e-4).mean_updates_lost == 0


def test_fp8_scales_start_at_one_and_follow_the_history(runs):
    run = runs("fp8")
    assert set(run.fp8_scales) == {f"layer{k}.{r}" for k in (0, 1) for r in "xwg"}
    assert all(s[0] == 1.0 for s in run.fp8_scales.values())
    assert run.fp8_scales["layer0.x"][-1] == 448.0  # pixels reach 1.0: amax 1
    assert run.fp8_scales["layer0.g"][-1] > 1e4  # gradients are small: large scale
    keep_last = runs("fp8_keep_last")
    assert set(keep_last.fp8_scales) == {"layer0.x", "layer0.w", "layer0.g"}


def test_measured_bytes_match_chapter_09s_calculator(runs):
    widths, batch = [64, 128, 10], 32
    for key, precision in mp.MEMORY_PRECISION.items():
        measured = runs(key).memory_measured
        computed = memory.mlp_training_memory(widths, batch, "adam",
                                              precision=precision).as_dict()
        for kind in ("gradients", "optimiser state", "master weights"):
            assert measured[kind] == computed[kind], (key, kind)
        assert measured["parameters"] == pytest.approx(computed["parameters"], rel=0.01)
        assert measured["activations"] == pytest.approx(computed["activations"], rel=0.05)
    per_parameter = {key: sum(runs(key).memory_measured[k] for k in
                              ("parameters", "gradients", "optimiser state", "master weights"))
                     / memory.mlp_parameters(widths) for key in mp.RECIPES}
    assert per_parameter["fp32"] == per_parameter["bf16"] == per_parameter["fp16"] == 16


def test_roofline_estimate_follows_the_tensor_core_peaks():
    h100 = H100_SXM
    widths, batch = (8192, 8192, 8192), 8192
    fp32, _ = mp.estimate_step_matmuls("fp32", widths, batch, h100)
    bf16, parts = mp.estimate_step_matmuls("bf16", widths, batch, h100)
    fp8, _ = mp.estimate_step_matmuls("fp8", widths, batch, h100)
    assert len(parts) == 5  # forward x 2, dW x 2, dX for the second layer
    assert all(p.bound == "compute" for p in parts)
    # compute-bound: the ratio of the peaks, less the fixed costs (the host's launches) that
    # weigh more on the faster bf16 step
    assert fp32 / bf16 == pytest.approx(h100.peak_flops["bf16"] / h100.peak_flops["fp32"],
                                        rel=0.03)
    assert bf16 / fp8 == pytest.approx(2, rel=0.03)
    small, _ = mp.estimate_step_matmuls("fp32", (64, 128, 10), 32, h100)
    # launch-bound: five launches, each the host's issue cost plus the GPU's floor at most
    assert 5 * hardware.LAUNCH_OVERHEAD_S <= small <= 5 * (hardware.LAUNCH_OVERHEAD_S
                                                            + hardware.KERNEL_MIN_S)


# --- one real step on the kernels ----------------------------------------------------------------


@pytest.mark.parametrize("recipe", ["fp16", "fp8", "fp32"])
def test_one_kernel_step_matches_the_emulation(data, recipe):
    comparison = mp.compare_engines(recipe, data.X_train[:8], data.y_train[:8])
    assert comparison.matches, comparison
    assert "kernel" in comparison.where
    assert "step" in str(comparison)


def test_the_emulation_in_the_kernels_order_matches_blas_to_rounding(data):
    X, y = data.X_train[:16], data.y_train[:16]
    states = []
    for order in ("blas", "kernel"):
        net = mp.MixedPrecisionMLP("fp16", (64, 32, 10), engine=mp.EmulatedEngine(order))
        net.train_step(X, y)
        states.append(net.state())
    assert max(float(np.max(np.abs(states[0][k] - states[1][k]))) for k in states[0]) < 1e-6


def test_the_network_is_chapter_07s_mlp_with_its_arithmetic_in_the_recipes_formats(data):
    widths = (64, 32, 16, 10)
    net = mp.MixedPrecisionMLP("fp8_keep_first", widths)
    assert isinstance(net, MLP) and len(net.layers) == 3
    initial = digits_model("numpy", seed=0, widths=widths).state()
    assert all(np.array_equal(net.state()[k], initial[k]) for k in initial)  # fp32 masters
    bf16 = np.dtype(ml_dtypes.bfloat16)
    assert all(layer.W.dtype == bf16 for layer in net.layers)  # the copies the products read
    with np.errstate(over="ignore", invalid="ignore"):
        net.train_step(data.X_train[:16], data.y_train[:16])
    assert net.layers[0].X.dtype == bf16  # the first layer reads the batch in bf16
    assert all(layer.Z.dtype == bf16 for layer in net.layers)  # products stored in bf16
    assert [layer.dW.dtype for layer in net.layers] == [bf16] * 3
    assert set(net.fp8) == {f"layer{k}.{r}" for k in (1, 2) for r in "xwg"}
    # one E5M2 cast of each fp8 layer's output gradient serves both backward products
    assert all(len(net.fp8[f"layer{k}.g"].scales) == 1 for k in (1, 2))


def test_bf16_products_are_labelled_emulated_in_the_simulator():
    from gpulab import device

    if device.tier() == "gpu":
        pytest.skip("a GPU is here")
    assert "emulated" in mp.KernelEngine().describe(uses_bf16=True)
    assert "emulated" in mp.EmulatedEngine().describe()


def test_e4m3_and_e5m2_values_are_exact_in_fp16():
    """The kernel engine runs a backward product of E4M3 and E5M2 values on the fp16 kernel."""
    for fmt in ("fp8_e4m3", "fp8_e5m2"):
        table = formats.decode_table(fmt)
        finite = table[np.isfinite(table)]
        assert np.array_equal(finite.astype(np.float16).astype(np.float32), finite)


@pytest.mark.parametrize("recipe", ["fp16", "bf16", "fp8"])
def test_copy_is_the_trained_network_as_a_plain_fp32_mlp(recipe):
    data = load_digits(seed=0)
    model = mp.MixedPrecisionMLP(recipe, widths=(64, 8, 10), seed=3)
    model.train_step(data.X_train[:16], data.y_train[:16])
    twin = model.copy()
    assert type(twin) is MLP and twin.backend.name == "numpy" and twin.dtype == np.float32
    weights = model.master if model.master is not None else model.state()
    for name, value in twin.state().items():
        np.testing.assert_array_equal(value, np.asarray(weights[name]).astype(np.float32))
    assert twin.copy(dtype=np.float64).dtype == np.float64
