"""The memory calculator against published worked numbers, and the trainer's memory features
(gradient accumulation, activation checkpointing, a device budget with a named error)."""

import dataclasses

import numpy as np
import pytest

from gpulab.hardware import H100_SXM
from gpulab.nn import memory
from gpulab.nn.memory import (
    KNOWN_MODELS,
    OutOfDeviceMemory,
    TransformerShape,
    activation_bytes_per_layer,
    inference_memory,
    mlp_training_memory,
    transformer_training_memory,
    zero_bytes_per_parameter,
)
from gpulab.nn.mlp import MLP
from gpulab.nn.trainer import Trainer

# --- ZeRO (Rajbhandari et al., SC 2020) ------------------------------------------------------


def test_mixed_precision_adam_is_16_bytes_per_parameter():
    # 2 (fp16 weights) + 2 (fp16 gradients) + 12 (fp32 master weights, momentum, variance)
    assert zero_bytes_per_parameter(0) == 16
    p = memory.get_precision("fp16-mixed")
    assert (p.weights, p.gradients, p.master + 2 * p.state) == (2, 2, 12)
    assert memory.get_precision("mixed") is memory.PRECISIONS["bf16-mixed"]


def test_zero_figure_1_for_7_5_billion_parameters_on_64_gpus():
    psi, n = 7.5e9, 64  # ZeRO, Figure 1: K = 12, N_d = 64, printed to 0.1 GB
    assert psi * zero_bytes_per_parameter(0, n) == pytest.approx(120e9, abs=0.05e9)
    assert psi * zero_bytes_per_parameter(1, n) == pytest.approx(31.4e9, abs=0.05e9)
    assert psi * zero_bytes_per_parameter(2, n) == pytest.approx(16.6e9, abs=0.05e9)
    assert psi * zero_bytes_per_parameter(3, n) == pytest.approx(1.9e9, abs=0.05e9)
    assert zero_bytes_per_parameter(3, 8) == 2.0  # 16 / N


def test_model_states_of_7_5_billion_parameters_before_activations():
    shape = TransformerShape("7.5B", 1, 64, 1, 8, 8, published_parameters=7.5e9)
    breakdown = transformer_training_memory(shape, 1)
    assert breakdown.model_state == pytest.approx(120e9)
    assert breakdown.bytes_per_parameter == pytest.approx(16)
    sharded = transformer_training_memory(shape, 1, zero_stage=3, ranks=64)
    assert sharded.model_state == pytest.approx(1.875e9)


def test_fp32_adam_is_16_bytes_too_and_plain_sgd_8():
    shape = KNOWN_MODELS["125M"]
    assert transformer_training_memory(shape, 1, "fp32").bytes_per_parameter == 16
    assert transformer_training_memory(shape, 1, "fp32", "none").bytes_per_parameter == 8
    assert transformer_training_memory(shape, 1, "fp8-mixed").bytes_per_parameter == 17


# --- Korthikanti et al. 2022 ----------------------------------------------------------------


@pytest.mark.parametrize("s, b, h, a", [(2048, 1, 12288, 96), (2048, 4, 4096, 32),
                                        (1024, 8, 1600, 25), (512, 3, 768, 12)])
def test_activations_per_layer_follow_korthikanti(s, b, h, a):
    stored = activation_bytes_per_layer(s, b, h, a, attention="stored")
    assert stored == pytest.approx(s * b * h * (34 + 5 * a * s / h))  # equation (1)
    assert activation_bytes_per_layer(s, b, h, a, "selective") == 34 * s * b * h
    assert activation_bytes_per_layer(s, b, h, a, "full") == 2 * s * b * h


@pytest.mark.parametrize("s, b, h, a, t", [(2048, 1, 12288, 96, 8), (2048, 4, 4096, 32, 2),
                                           (1024, 8, 1600, 25, 5)])
def test_tensor_and_sequence_parallel_activations_follow_korthikanti(s, b, h, a, t):
    tp = activation_bytes_per_layer(s, b, h, a, attention="stored", tensor_parallel=t)
    assert tp == pytest.approx(s * b * h * (10 + 24 / t + 5 * a * s / (h * t)))  # equation (2)
    sp = activation_bytes_per_layer(s, b, h, a, attention="stored", tensor_parallel=t,
                                    sequence_parallel=True)
    assert sp == pytest.approx(s * b * h / t * (34 + 5 * a * s / h))  # equation (4)
    selective = activation_bytes_per_layer(s, b, h, a, "selective", tensor_parallel=t,
                                           sequence_parallel=True)
    assert selective == pytest.approx(34 * s * b * h / t)  # equation (5)
    with pytest.raises(ValueError, match="tensor_parallel > 1"):
        activation_bytes_per_layer(s, b, h, a, sequence_parallel=True)


def test_flash_attention_keeps_no_scores_only_the_log_sum_exp():
    s, b, h, a = 4096, 2, 4096, 32
    flash = activation_bytes_per_layer(s, b, h, a)  # the default
    assert flash == 34 * s * b * h + 4 * a * s * b  # selective's + one fp32 per query and head
    stored = activation_bytes_per_layer(s, b, h, a, attention="stored")
    assert stored - flash == pytest.approx(5 * a * s * s * b - 4 * a * s * b)
    with pytest.raises(ValueError, match="attention"):
        activation_bytes_per_layer(s, b, h, a, attention="sdpa")


def test_gpt3_activations_need_recomputation():
    shape = KNOWN_MODELS["175B"]
    per_layer = activation_bytes_per_layer(2048, 1, 12288, 96, attention="stored")
    assert per_layer == pytest.approx(2.869e9, rel=1e-3)  # 2.87 GB per layer per sequence
    logits = 2048 * 50257 * 2
    none = transformer_training_memory(shape, 1, recompute="none", attention="stored")
    full = transformer_training_memory(shape, 1, recompute="full")
    assert none.activations == pytest.approx(96 * per_layer + logits)
    assert full.activations == 96 * 2 * 2048 * 12288 + logits
    # full recomputation re-materialises one layer at a time: its activations are workspace
    assert full.workspace == activation_bytes_per_layer(2048, 1, 12288, 96)
    assert transformer_training_memory(shape, 1, logits=False).activations == pytest.approx(
        96 * activation_bytes_per_layer(2048, 1, 12288, 96))


def test_fp32_activations_count_every_tensor_twice_as_wide():
    s, b, h, a = 1024, 2, 1024, 16
    fp32 = activation_bytes_per_layer(s, b, h, a, precision="fp32", attention="stored")
    assert fp32 == 4 * (16 * s * b * h + 2 * a * s * s * b) + 2 * s * b * h + a * s * s * b


# --- parameter counts ---------------------------------------------------------------------------


def test_gpt3_parameter_count():
    gpt3 = KNOWN_MODELS["175B"]
    assert gpt3.layer_parameters == 12 * 96 * 12288**2 == 173_946_175_488
    assert gpt3.n_parameters == pytest.approx(174.6e9, rel=1e-3)  # + embeddings, biases, norms
    assert dataclasses.replace(gpt3, published_parameters=175e9).n_parameters == 175e9


def test_gpt2_xl_count_matches_the_released_checkpoint():
    assert KNOWN_MODELS["1.5B"].n_parameters == 1_557_611_200  # gpt2-xl; the paper's 1542M
    assert KNOWN_MODELS["125M"].n_parameters == pytest.approx(125.2e6, rel=1e-3)


def test_llama_2_counts_are_the_released_architectures_not_their_names():
    # the released checkpoints' sizes (meta-llama/Llama-2-7b-hf, -70b-hf)
    assert KNOWN_MODELS["7B"].n_parameters == 6_738_415_616
    assert KNOWN_MODELS["70B"].n_parameters == 68_976_648_192
    assert KNOWN_MODELS["70B"].name == "Llama 2 70B"  # the name keeps the label


def test_kv_cache_with_grouped_query_attention():
    llama70 = KNOWN_MODELS["70B"]
    cache = memory.kv_cache_bytes(llama70, 1, 4096)
    assert cache == 2 * 80 * 4096 * 8192 * 8 / 64 * 2  # 1.34 GB, 8 of 64 heads for K and V
    served = inference_memory(llama70, 1, "fp8", kv_cache=True)
    assert served.parameters == 68_976_648_192 and served.kv_cache == cache


def test_zero3_holds_gathered_blocks_beside_its_shards():
    llama70 = KNOWN_MODELS["70B"]
    sharded = transformer_training_memory(llama70, 1, recompute="selective", zero_stage=3,
                                          ranks=64, logits=False)
    assert sharded.model_state == pytest.approx(llama70.n_parameters * 16 / 64)
    # two blocks' 16-bit weights (the running one, the prefetched next) + one block's gradients
    assert sharded.workspace == llama70.block_parameters * (2 + 2 + 2)
    assert transformer_training_memory(llama70, 1, recompute="selective", zero_stage=2,
                                       ranks=64).workspace == 0


def test_seventy_billion_with_zero3_over_64_does_not_fit_a_24_gb_l4():
    # the states alone (17.2 GB) would; the gathered blocks, activations and runtime do not
    rows = memory.fit_table("training", recompute="full", zero_stage=3, ranks=64)
    row = next(r for r in rows if r["model"] == "Llama 2 70B")
    assert row["breakdown"].model_state < 24e9 < row["bytes"]
    assert not row["fits"]["L4"] and row["fits"]["A100-40GB"]


def test_t4_holds_bf16_bytes_but_has_no_bf16_arithmetic():
    rows = memory.fit_table("inference", weight_format="bf16")
    small = rows[0]
    assert small["fits"]["T4"] and not small["native"]["T4"] and small["native"]["L4"]
    assert "yes*" in memory.format_fit_table(rows)
    fp16 = memory.fit_table("inference", weight_format="fp16")
    assert fp16[0]["native"]["T4"]
    assert not memory.GPU_MEMORY["A100-40GB"].runs("fp8")
    assert memory.GPU_MEMORY[H100_SXM.key].runs("fp8-mixed")


# --- the course's MLP ------------------------------------------------------------------------


def test_mlp_breakdown_counts_what_the_layers_keep():
    widths, B = [64, 128, 10], 32
    m = mlp_training_memory(widths, B, "adam")
    P = 64 * 128 + 128 + 128 * 10 + 10
    assert (m.parameters, m.gradients, m.optimiser_state) == (4 * P, 4 * P, 8 * P)
    values = B * (64 + 128 + 10 + 128 + 10 + 10 + 1)
    assert m.activations == 4 * values + 8 * B
    assert memory.mlp_activation_values(widths, B) == values
    assert memory.mlp_activation_values(widths, B, checkpointing=True) == values - B * 138
    assert m.held == m.total - m.workspace
    assert "activations" in m.table() and "total" in str(m)


def test_mlp_breakdown_from_the_model_itself():
    model = MLP([8, 5, 3], dtype=np.float64, checkpointing=True)
    m = mlp_training_memory(model, 10, "sgd")
    assert m.precision == "fp64" and m.optimiser_state == 8 * model.n_parameters
    assert "checkpointing" in " ".join(m.notes)
    accumulated = mlp_training_memory(model, 10, "sgd", accumulation_steps=4)
    assert accumulated.activations < m.activations


@pytest.mark.parametrize("bad", [dict(batch_size=0), dict(optimiser="adagrad"),
                                 dict(precision="fp7")])
def test_calculator_rejects_nonsense(bad):
    arguments = {"batch_size": 4, "optimiser": "adam", "precision": "fp32", **bad}
    with pytest.raises(ValueError):
        mlp_training_memory([4, 3, 2], **arguments)


def test_fit_table_uses_datasheet_sizes():
    rows = memory.fit_table("inference", weight_format="bf16", kv_cache=False)
    by_model = {row["model"]: row for row in rows}
    assert by_model["Llama 2 7B"]["fits"]["T4"] is True  # 14 GB + 1 GB < 16 GB
    assert by_model["Llama 2 70B"]["fits"]["H200"] is True
    assert by_model["GPT-3 (175B)"]["fits"]["B200"] is False  # 350 GB
    assert memory.GPU_MEMORY[H100_SXM.key].memory_bytes == H100_SXM.memory_bytes
    assert memory.GPU_MEMORY["A100-40GB"].gib == pytest.approx(37.25, abs=0.01)
    assert list(memory.GPU_MEMORY) == ["T4", "L4", "A100-40GB", "A100-SXM", H100_SXM.key, "H200",
                                       "B200"]
    assert "T4" in memory.format_fit_table(rows)


# --- the trainer ------------------------------------------------------------------------------


def _data(n=37, widths=(6, 5, 4), seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, widths[0])).astype(np.float32), rng.integers(0, widths[-1], n)


@pytest.mark.parametrize("steps", [2, 3, 5, 37])
def test_accumulated_gradients_equal_the_whole_batch(steps):
    X, y = _data()
    whole = MLP([6, 5, 4], seed=1)
    whole.loss(X, y)
    whole.backward()
    model = MLP([6, 5, 4], seed=1)
    loss = Trainer(model, progress=False, accumulation_steps=steps).accumulate_gradients(X, y)
    assert loss == pytest.approx(whole.loss(X, y), rel=1e-6)
    for name, grad in whole.gradients().items():
        np.testing.assert_allclose(model.gradients()[name], grad, rtol=1e-5, atol=1e-7)


def test_training_with_accumulation_follows_the_whole_batch():
    X, y = _data(64)
    runs = []
    for steps in (1, 4):
        model = MLP([6, 5, 4], seed=2)
        trainer = Trainer(model, "adam", batch_size=16, epochs=2, progress=False, lr=1e-2,
                          accumulation_steps=steps)
        history = trainer.fit((X, y))
        runs.append((model.state(), history.final.train_accuracy))
    for name, value in runs[0][0].items():
        np.testing.assert_allclose(runs[1][0][name], value, rtol=1e-4, atol=1e-5)
    assert runs[0][1] == runs[1][1]


def test_checkpointing_gives_the_same_gradients_and_counts_the_recompute():
    X, y = _data()
    plain, ckpt = MLP([6, 5, 5, 4], seed=3), MLP([6, 5, 5, 4], seed=3, checkpointing=True)
    for model in (plain, ckpt):
        model.loss(X, y)
    assert all(layer.Z is None for layer in ckpt.layers)
    assert all(layer.Z is not None for layer in plain.layers)
    for model in (plain, ckpt):
        model.backward()
    for name, grad in plain.gradients().items():
        np.testing.assert_array_equal(ckpt.gradients()[name], grad)
    assert ckpt.recomputed_flops == 2 * 37 * (6 * 5 + 5 * 5 + 5 * 4)
    assert plain.recomputed_flops == 0
    assert ckpt.copy().checkpointing and "checkpointing" in repr(ckpt)


def test_a_budget_too_small_raises_the_named_error_with_breakdown_and_remedies():
    X, y = _data(256, (6, 50, 4))
    model = MLP([6, 50, 4], seed=0)
    needed = mlp_training_memory(model, 256, "adam").total
    trainer = Trainer(model, progress=False, device_memory_bytes=needed - 1)
    with pytest.raises(OutOfDeviceMemory) as caught:
        trainer.step(X, y)
    text = str(caught.value)
    assert isinstance(caught.value, MemoryError)
    assert "activations" in text and "accumulation_steps" in text and "checkpointing" in text
    assert caught.value.breakdown.total == needed
    assert memory.is_out_of_memory(caught.value)
    before = model.state()
    assert all(np.array_equal(before[k], v) for k, v in model.state().items())  # no step ran
    Trainer(model, progress=False, device_memory_bytes=needed).step(X, y)  # exactly fits
    Trainer(model, progress=False, accumulation_steps=8,
            device_memory_bytes=needed * 0.7).step(X, y)  # the remedy


def test_trainer_rejects_bad_memory_settings():
    model = MLP([4, 3, 2])
    with pytest.raises(ValueError, match="accumulation_steps"):
        Trainer(model, accumulation_steps=0)
    with pytest.raises(ValueError, match="device_memory_bytes"):
        Trainer(model, device_memory_bytes=-5)


def test_cuda_out_of_memory_errors_are_recognised():
    class CudaAPIError(Exception):
        pass

    error = CudaAPIError("[CUresult.CUDA_ERROR_OUT_OF_MEMORY] Call to cuMemAlloc results in "
                         "CUDA_ERROR_OUT_OF_MEMORY")
    assert memory.is_out_of_memory(error)
    assert not memory.is_out_of_memory(ValueError("shapes do not match"))


def test_accumulation_on_the_kernel_backend_matches_numpy():
    """On the kernel backend the micro-batches' gradients are summed on the host."""
    X, y = _data(7, (4, 3, 2))
    reference = MLP([4, 3, 2], seed=4)
    reference.loss(X, y)
    reference.backward()
    model = MLP([4, 3, 2], backend="kernels", seed=4)
    Trainer(model, progress=False, accumulation_steps=2).accumulate_gradients(X, y)
    for name, grad in reference.gradients().items():
        np.testing.assert_allclose(model.gradients()[name], grad, rtol=1e-4, atol=1e-6)
