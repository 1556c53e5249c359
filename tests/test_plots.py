"""gpulab.plots: launch diagrams drawn from real launch configurations, the roofline and the
rates chart."""

import matplotlib
import matplotlib.text

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from gpulab import hardware, plots  # noqa: E402
from gpulab.hardware import H100_SXM
from gpulab.kernels.launch import LaunchConfig, grid_stride, one_thread_per_element  # noqa: E402

SERIES = {
    "NumPy dot (BLAS) — measured on this CPU (test CPU)": [(10, 1e-6), (1000, 2e-6),
                                                            (100_000, 1e-4)],
    "dot_grid_stride, data on GPU — estimated from a roofline model of the NVIDIA H100 SXM5 "
    "80GB": [(10, 4e-6), (1000, 4e-6), (100_000, 5e-6)],
    "dot_grid_stride incl. host→device copy of x, y — estimated from a roofline model of the "
    "NVIDIA H100 SXM5 80GB": [(10, 5e-6), (1000, 6e-6), (100_000, 2e-4)],
}


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def cell_labels(fig) -> dict[tuple[int, int], str]:
    """{(block, thread): the text in that thread's cell}, read back from the figure."""
    labels = {}
    for text in fig.axes[0].texts:
        gid = text.get_gid() or ""
        if gid.startswith("b") and "t" in gid:
            block, thread = gid[1:].split("t")
            labels[int(block), int(thread)] = text.get_text()
    return labels


def all_text(fig) -> str:
    ax = fig.axes[0]
    return "\n".join([ax.get_title(), *(t.get_text() for t in ax.texts)])


def test_exact_multiple_every_thread_has_its_element():
    config = one_thread_per_element(1024, 256)  # 4 blocks, all shown
    labels = cell_labels(plots.launch_diagram(config))
    assert {block for block, _ in labels} == {0, 1, 2, 3}
    assert labels[0, 0] == "0" and labels[1, 0] == "256" and labels[3, 255] == "1023"
    assert "idle" not in labels.values()


def test_partial_last_block_shows_where_the_guard_acts():
    config = one_thread_per_element(1000, 256)
    fig = plots.launch_diagram(config)
    labels = cell_labels(fig)
    assert labels[3, 0] == "768"
    assert labels[3, 231] == "999"  # the last busy thread ...
    assert labels[3, 232] == "idle"  # ... and the first idle one are both drawn
    assert labels[3, 255] == "idle"
    assert [t for (b, t), text in labels.items() if text == "idle"] == [232, 255]
    assert "24 idle" in all_text(fig)


def test_n_smaller_than_a_block():
    labels = cell_labels(plots.launch_diagram(one_thread_per_element(5, 8)))
    assert labels == {(0, t): (str(t) if t < 5 else "idle") for t in range(8)}


def test_grid_stride_threads_show_each_of_their_elements():
    labels = cell_labels(plots.launch_diagram(grid_stride(10, 4, 2)))
    assert labels[0, 0] == "0, 8" and labels[0, 1] == "1, 9"
    assert labels[0, 2] == "2" and labels[1, 0] == "4" and labels[1, 3] == "7"
    many = cell_labels(plots.launch_diagram(grid_stride(1000, 32, 2)))
    assert many[0, 0] == "0, 64, …, 960 (16)"
    assert many[1, 31] == "63, 127, …, 959 (15)"
    short = cell_labels(plots.launch_diagram(grid_stride(40, 32, 2)))  # 64 threads, 40 elements
    assert short[0, 0] == "0" and short[1, 7] == "39" and short[1, 8] == "idle"


def test_many_blocks_are_elided_but_the_last_block_stays():
    config = one_thread_per_element(100_000, 256)  # 391 blocks
    fig = plots.launch_diagram(config, max_blocks=4)
    labels = cell_labels(fig)
    assert {block for block, _ in labels} == {0, 1, 2, 390}
    assert labels[390, 159] == "99999" and labels[390, 160] == "idle"
    assert "…" in all_text(fig) and "3–389" in all_text(fig)


@pytest.mark.parametrize("config", [
    one_thread_per_element(1024, 256),
    one_thread_per_element(1000, 256),
    one_thread_per_element(12, 16),
    one_thread_per_element(300, 32),
    grid_stride(1000, 32, 2),
    grid_stride(12, 1, 1),
    LaunchConfig(7, 4, 3),  # more threads than elements: a whole idle block
])
def test_every_drawn_cell_matches_elements_of(config):
    fig = plots.launch_diagram(config, max_blocks=3, max_threads=6)
    labels = cell_labels(fig)
    assert labels
    for (block, thread), text in labels.items():
        assert text == plots.elements_text(config.elements_of(block, thread))
    assert fig.axes[0].get_title().replace("\n", " ") == str(config)
    assert max(block for block, _ in labels) == config.blocks - 1  # the last block is drawn


def test_launch_diagram_draws_on_a_given_axes():
    fig, ax = plt.subplots()
    assert plots.launch_diagram(one_thread_per_element(6, 4), ax=ax) is fig


def text_of(fig) -> str:
    ax = fig.axes[0]
    return "\n".join([ax.get_title(), *(t.get_text() for t in ax.texts)])


def test_roofline_places_points_and_marks_estimates():
    gpu = H100_SXM
    points = [
        {"name": "saxpy", "flops": 2e6, "bytes_moved": 12e6, "seconds": 4e-6,
         "origin": "estimated from a roofline model of the NVIDIA H100 SXM5 80GB"},
        {"name": "matmul", "flops": 2e9, "bytes_moved": 4e7, "seconds": 1e-3,
         "origin": "measured on NVIDIA H100 80GB HBM3 (CUDA events)"},
        {"name": "copy", "flops": 0, "bytes_moved": 8e6, "seconds": 3e-6, "origin": "measured"},
    ]
    fig = plots.roofline_plot(points, gpu, measured_bandwidth=3.0e12)
    ax = fig.axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("saxpy — estimated" in t for t in legend)
    assert any("matmul — measured" in t for t in legend)
    assert any("measured copy bandwidth" in t for t in legend)
    assert "not shown, no FLOPs: copy" in ax.get_title()
    markers = {line.get_label().split(" — ")[0]: line for line in ax.get_lines()}
    assert markers["saxpy"].get_markerfacecolor() == "white"  # hollow: an estimate
    assert markers["matmul"].get_markerfacecolor() != "white"  # filled: a measurement
    x, y = markers["matmul"].get_data()
    assert x[0] == pytest.approx(50) and y[0] == pytest.approx(2e12)
    roof = next(line for line in ax.get_lines() if line.get_label().startswith("roof"))
    xs, ys = roof.get_data()
    assert max(ys) == pytest.approx(gpu.peak_flops["fp32"])


def test_rates_plot_hatches_estimates():
    bars = [("NumPy", 5e10, "measured on this CPU"), ("tiled", 1e13, "estimated from a roofline "
                                                                      "model of the T4")]
    fig = plots.rates_plot(bars)
    patches = fig.axes[0].patches
    assert patches[0].get_hatch() is None and patches[1].get_hatch() == "//"
    assert "50 GFLOP/s" in text_of(fig) and "10 TFLOP/s" in text_of(fig)


# --- see your own kernel: trace_plot -------------------------------------------------------------


def trace_cells(fig) -> dict[str, str]:
    """{"name[i]" or "name[r,c]": the text in that element's cell}, from every panel."""
    return {text.get_gid(): text.get_text() for ax in fig.axes for text in ax.texts
            if text.get_gid()}


def _traced(kernel_name, blocks, threads, *args):
    """A trace of one of gpulab's kernels (in the simulator; elsewhere a child process runs it)."""
    from gpulab import instruments
    from gpulab.kernels import dot, matmul

    kernel = {"dot_atomic": dot.dot_atomic, "dot_shared_tree": dot.dot_shared_tree,
              "matmul_naive": matmul.matmul_naive}[kernel_name]
    return instruments.trace_kernel(kernel, blocks, threads, *args)


def test_trace_plot_shows_who_read_each_element_and_the_atomics():
    import numpy as np

    x = np.ones(13, np.float32)
    trace = _traced("dot_atomic", 2, 8, x, x, np.zeros(1, np.float32))
    fig = trace.draw()
    cells = trace_cells(fig)
    assert cells["x[0]"] == "r b0 t0" and cells["x[12]"] == "r b1 t4"
    assert cells["out[0]"] == "atomic ×13"
    assert "dot_atomic on 2 blocks of 8 threads" in fig._suptitle.get_text()
    table = next(child for ax in fig.axes for child in ax.get_children()
                 if child.__class__.__name__ == "Table")
    texts = [cell.get_text().get_text() for cell in table.get_celld().values()]
    assert "atomics" in texts and "most per thread" in texts


def test_trace_plot_draws_2d_arrays_by_grid_position_and_elides_big_ones():
    import numpy as np

    A = np.ones((6, 10), np.float32)
    B = np.ones((10, 7), np.float32)
    trace = _traced("matmul_naive", (2, 2), (4, 4), A, B, np.zeros((6, 7), np.float32))
    cells = trace_cells(plots.trace_plot(trace, ["A", "C"]))
    assert cells["C[4,1]"] == "w (1,4)"  # row 4, column 1: cuda.grid(2) = (x=1, y=4)
    assert cells["A[0,0]"] == "r ×7 thr"  # row 0 of A: read by the 7 threads of C's row 0
    assert "A[0,8]" not in cells and "A[5,7]" in cells  # 6 x 10 drawn as 6 x 8
    with pytest.raises(ValueError, match="not an array of this trace"):
        plots.trace_plot(trace, "D")


def test_trace_plot_draws_one_blocks_copy_of_a_shared_array():
    import numpy as np

    x = np.arange(13, dtype=np.float32)
    trace = _traced("dot_shared_tree", 2, 8, x, x, np.zeros(1, np.float32))
    fig = plots.trace_plot(trace, "shared:partial")
    cells = trace_cells(fig)
    assert cells["shared:partial[3]"].startswith("w b0 t3")
    assert "shared:partial[63]" in cells and "shared:partial[64]" not in cells
    title = fig.axes[0].get_title(loc="left")
    assert "block 0" in title and "first 64 of 1024" in title
    other = trace_cells(plots.trace_plot(trace, "shared:partial", shared_block=1))
    assert other["shared:partial[3]"].startswith("w b1 t3")


# --- chapter 00: the GPU, its memory hierarchy, the datasheet table ------------------------------


def figure_text(fig) -> str:
    """Every text in a figure: suptitle, figure texts, axes titles and texts."""
    found = [t.get_text() for t in fig.findobj(matplotlib.text.Text)]
    return "\n".join(found)


def test_gpu_diagram_counts_sms_warps_and_lanes_from_the_sources():
    from gpulab.kernel_resources import SM_LIMITS

    spec = H100_SXM
    limits = SM_LIMITS[spec.compute_capability]
    fig = plots.gpu_diagram(H100_SXM.key)
    text = figure_text(fig)
    assert f"{spec.sm_count} SMs" in text and spec.sm_count == 132
    assert f"up to {limits.max_warps} warps resident = {limits.max_threads:,} threads" in text
    assert "one warp: 32 threads (lanes 0–31)" in text and "SIMT" in text
    assert f"{spec.sm_count * limits.max_threads:,} threads resident at once" in text
    assert "whitepaper" in text and "CUDA C++ Programming Guide" in text
    # one square per SM, one per resident warp, one per lane
    squares = [len(ax.patches) for ax in fig.axes]
    assert squares == [spec.sm_count, limits.max_warps, 32]


def test_gpu_diagram_says_when_the_sm_count_is_not_published():
    spec = hardware.get_gpu("H200")
    assert spec.sm_count is None
    text = figure_text(plots.gpu_diagram("H200"))
    assert "SM count not published" in text
    assert "resident at once" not in text  # no total without the count


def test_memory_levels_come_from_hardware_and_sm_limits():
    from gpulab.kernel_resources import SM_LIMITS

    spec = H100_SXM
    limits = SM_LIMITS[spec.compute_capability]
    levels = {level["level"]: level for level in plots.memory_levels(spec)}
    assert list(levels) == ["registers", "shared memory / L1", "L2 cache", "device memory",
                            "PCIe 5.0 x16 to the host"]
    assert levels["registers"]["size"].startswith(f"{limits.registers * 4 // 1024} KiB per SM")
    assert "33 MiB on 132 SMs" in levels["registers"]["size"]  # 132 × 256 KiB
    assert f"{limits.shared_bytes // 1024} KiB" in levels["shared memory / L1"]["size"]
    assert levels["L2 cache"]["size"].startswith("50 MiB")
    assert levels["device memory"]["size"] == "80 GB (nominal)"
    assert levels["device memory"]["bandwidth"] == "3.35 TB/s"
    host = levels["PCIe 5.0 x16 to the host"]["bandwidth"]
    assert "64 GB/s each way" in host
    assert hardware.format_rate(spec.host_pageable_bytes_per_s, "B/s") in host
    for name in ("registers", "shared memory / L1", "L2 cache"):  # NVIDIA publishes none
        assert levels[name]["bandwidth"] == plots.NOT_PUBLISHED


def test_memory_hierarchy_draws_every_level_and_says_not_published():
    fig = plots.memory_hierarchy(H100_SXM.key, memory_kind="HBM3")
    text = figure_text(fig)
    for needle in ("registers", "L2 cache", "device memory (HBM3)", "size: 80 GB (nominal)",
                   "bandwidth: 3.35 TB/s", "bandwidth: not published", "PCIe 5.0 x16"):
        assert needle in text, needle
    t4 = figure_text(plots.memory_hierarchy("T4"))
    assert "size: 4 MiB, shared by all SMs" in t4 and "320 GB/s" in t4
    assert "size not published" in figure_text(plots.memory_hierarchy("L4"))


def test_gpu_table_has_every_gpu_and_its_datasheet_rates():
    table = str(plots.gpu_table())
    assert table.splitlines()[0].split("  ")[:2] == ["GPU", ""]
    assert "memory (GB, nominal)" in table and "FP8 (tensor cores)" in table
    for spec in hardware.GPUS.values():
        assert spec.name in table
    h100 = next(line for line in table.splitlines() if line.startswith("NVIDIA H100"))
    assert "3.35 TB/s" in h100 and "67 TFLOP/s" in h100 and "1.98 PFLOP/s" in h100
    t4 = next(line for line in table.splitlines() if line.startswith("NVIDIA T4"))
    assert t4.rstrip().endswith("—")  # no FP8 on a T4
    cited = "NVIDIA X whitepaper, table 'Y' (https://z)"
    assert plots.document_name(cited) == "NVIDIA X whitepaper"
    assert plots.binary_size(50 * 2**20) == "50 MiB"
