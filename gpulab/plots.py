"""Matplotlib figures for the course. Every function draws on ``ax`` (or a new figure) and
returns the Figure; none calls ``plt.show()``, so they work with any backend, Agg included.

- :func:`launch_diagram` draws a real :class:`~gpulab.kernels.launch.LaunchConfig`: the grid,
  its blocks, and the element(s) every thread handles, idle threads greyed.
- :func:`crossover_plot` draws CPU vs GPU time as n grows, every line labelled with where its
  numbers came from (measured, or estimated from a model of a named GPU).
- :func:`dependency_plot` draws the steps a dependent chain of additions needs against the
  rounds of independent additions in a tree.
"""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

from gpulab import reference
from gpulab.kernels.launch import LaunchConfig

BUSY_COLOUR = "#cfe2f3"
IDLE_COLOUR = "#e6e6e6"
GAP = None  # marks an elided run of blocks or threads in the lists below


def _figure(ax, size):
    if ax is None:
        fig, ax = plt.subplots(figsize=size, layout="constrained")
    return ax.figure, ax


def _with_gaps(indices: list[int]) -> list[int | None]:
    """Sorted indices with GAP where consecutive ones are not neighbours."""
    out: list[int | None] = []
    for index in indices:
        if out and index - out[-1] > 1:
            out.append(GAP)
        out.append(index)
    return out


def shown_blocks(config: LaunchConfig, max_blocks: int) -> list[int | None]:
    """The first ``max_blocks - 1`` blocks and the last one: the last is where the guard acts."""
    if config.blocks <= max_blocks:
        return list(range(config.blocks))
    return _with_gaps([*range(max(max_blocks - 1, 1)), config.blocks - 1])


def shown_threads(config: LaunchConfig, block: int, max_threads: int) -> list[int | None]:
    """Threads of ``block`` to draw: the first ones, the last busy and first idle thread (where
    the guard starts to act) and the last one; GAP for each elided run."""
    tpb = config.threads_per_block
    if tpb <= max_threads:
        return list(range(tpb))
    first_idle = config.n_elements - block * tpb  # threads from here on have no element
    boundary = [first_idle - 1, first_idle] if 0 < first_idle < tpb else []
    keep: list[int] = []
    for thread in [0, tpb - 1, *boundary, *range(1, tpb)]:  # most telling first
        if thread not in keep and len(keep) < max_threads:
            keep.append(thread)
    return _with_gaps(sorted(keep))


def elements_text(elements: range) -> str:
    """How a cell names its elements: "5", "0, 64, 128" or "0, 64, …, 960 (16)"; "idle"."""
    if len(elements) == 0:
        return "idle"
    if len(elements) <= 3:
        return ", ".join(map(str, elements))
    return f"{elements[0]}, {elements[1]}, …, {elements[-1]} ({len(elements)})"


def launch_diagram(config: LaunchConfig, ax=None, max_blocks: int = 4, max_threads: int = 8):
    """Draw a launch: blocks side by side, each a column of threads labelled with the element
    index(es) the thread handles (``config.elements_of``); idle threads grey and "idle".

    Text artists carry a gid (``"b{block}t{thread}"`` for a thread's elements) for tests.
    """
    blocks = shown_blocks(config, max_blocks)
    threads = {b: shown_threads(config, b, max_threads) for b in blocks if b is not GAP}
    rows = max(len(t) for t in threads.values())
    width = 3.2 if config.grid_stride else 2.2
    span = sum(1.2 if b is GAP else width + 0.4 for b in blocks) + 0.3  # data units
    pad = max((5.5 - 1.0) / 0.9 - span, 0) / 2  # keep narrow launches at scale, title legible
    fig, ax = _figure(ax, (1.0 + 0.9 * (span + 2 * pad), 1.9 + 0.42 * rows))
    x = 0.0
    for block in blocks:
        if block is GAP:
            hidden = f"blocks\n{max_blocks - 1}–{config.blocks - 2}\nnot shown"
            ax.text(x + 0.5, rows / 2 - 0.8, "…", ha="center", va="center", fontsize=18)
            ax.text(x + 0.5, rows / 2, hidden, ha="center", va="top", fontsize=8.5)
            x += 1.2
            continue
        _draw_block(ax, config, block, threads[block], x, width, rows)
        x += width + 0.4
    ax.set_xlim(-0.5 - pad, x - 0.2 + pad)
    ax.set_ylim(rows + 0.2, -1.3)  # row 0 at the top
    ax.axis("off")
    columns = max(int(fig.get_figwidth() * 11), 40)
    title = textwrap.wrap(str(config), columns, break_on_hyphens=False)
    ax.set_title("\n".join(title), fontsize=10)
    ax.text(0.5, -0.02, _launch_note(config), transform=ax.transAxes, ha="center", va="top",
            fontsize=8.5, color="#444444", wrap=True)
    return fig


def _launch_note(config: LaunchConfig) -> str:
    if config.grid_stride:
        return (f"Grid-stride: each thread starts at its global index and steps by "
                f"{config.total_threads} (the threads in the grid) until it passes element "
                f"{config.n_elements - 1}.")
    if config.idle_threads:
        return (f"Grey: {config.idle_threads} idle thread(s) past the last element; the guard "
                "`if i < n` stops them from reading outside the arrays.")
    return "Every thread has exactly one element: n is a multiple of the block size."


def _draw_block(ax, config, block, threads, x, width, rows):
    elements = [e for t in range(config.threads_per_block) for e in config.elements_of(block, t)]
    if not elements:
        span = "no elements"
    elif config.grid_stride:
        span = f"{len(elements)} elements, strided"
    else:
        span = f"elements {min(elements)}–{max(elements)}"
    ax.add_patch(Rectangle((x - 0.1, -1.1), width + 0.2, rows + 1.2, fill=False, lw=1.2))
    ax.text(x + width / 2, -0.55, f"block {block}\n{span}", ha="center", va="center",
            fontsize=8.5, fontweight="bold")
    for row, thread in enumerate(threads):
        if thread is GAP:
            ax.text(x + width / 2, row + 0.5, "⋮", ha="center", va="center", fontsize=10)
            continue
        mine = config.elements_of(block, thread)
        colour = BUSY_COLOUR if len(mine) else IDLE_COLOUR
        ax.add_patch(Rectangle((x + 0.55, row + 0.08), width - 0.6, 0.84, color=colour))
        ax.text(x + 0.5, row + 0.5, f"t{thread}", ha="right", va="center", fontsize=7.5,
                color="#555555")
        ax.text(x + 0.55 + (width - 0.6) / 2, row + 0.5, elements_text(mine), ha="center",
                va="center", fontsize=8, color="black" if len(mine) else "#888888",
                gid=f"b{block}t{thread}")


def first_faster_n(baseline, candidate) -> int | None:
    """The smallest n from which ``candidate`` takes less time than ``baseline`` at every
    larger n too (where it crosses for good, so one noisy timing does not make a crossover).

    Both are sequences of ``(n, seconds)``; only sizes present in both are compared.
    """
    baseline_s = dict(baseline)
    common = sorted((n, s < baseline_s[n]) for n, s in candidate if n in baseline_s)
    crossing = None
    for n, faster in common:
        crossing = (crossing or n) if faster else None
    return None if crossing is None else int(crossing)


def _cpu_label(series: dict) -> str:
    for label in series:
        if "CPU" in label or "NumPy" in label:
            return label
    return next(iter(series))


def crossover_plot(points, ax=None, cpu_label: str | None = None):
    """Time against n (log-log), one line per series, the legend entry being its label.

    ``points`` is ``{label: [(n, seconds), ...]}`` or a result dict with a ``"series"`` entry
    (as :meth:`gpulab.widgets.crossover.CrossoverExperiment.run` returns). The CPU series is
    ``cpu_label`` or the first label naming the CPU or NumPy; where another series first beats
    it for good, a star marks the crossover. Hollow markers: estimates; filled: measurements.
    """
    series = points["series"] if "series" in points else points
    cpu_label = cpu_label or _cpu_label(series)
    fig, ax = _figure(ax, (8.5, 6.0))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    crossings = []
    for i, (label, pts) in enumerate(series.items()):
        n, seconds = zip(*sorted(pts), strict=True)
        style = "-" if label == cpu_label else "--" if "copy" in label else "-."
        colour = colours[i % len(colours)]
        hollow = "estimated" in label  # filled markers: measured; hollow: a model's estimate
        ax.plot(n, seconds, style, marker="o", ms=4, color=colour, label=label,
                mfc="white" if hollow else colour)
        crossing = None if label == cpu_label else first_faster_n(series[cpu_label], pts)
        if crossing is not None:
            crossings.append((colour, crossing, dict(pts)[crossing]))
    for k, (colour, crossing, at) in enumerate(crossings):  # stacked bottom right: no overlap
        ax.plot([crossing], [at], "*", ms=14, color=colour, mec="black", label="_crossover")
        ax.annotate(f"faster than the CPU from n = {crossing:,}", (crossing, at),
                    xytext=(0.98, 0.04 + 0.07 * k), textcoords="axes fraction", ha="right",
                    fontsize=8.5, color=colour,
                    arrowprops={"arrowstyle": "->", "color": colour, "lw": 0.8, "shrinkB": 7})
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("n (elements per vector)")
    ax.set_ylabel("time per dot product (s)")
    ax.set_title("CPU vs GPU as n grows: where does the GPU start to win?")
    ax.grid(True, which="major", alpha=0.3)
    wrapped = ["\n".join(textwrap.wrap(label, 110, break_on_hyphens=False)) for label in series]
    handles = [h for h in ax.get_lines() if not h.get_label().startswith("_")]
    ax.legend(handles, wrapped, loc="upper center", bbox_to_anchor=(0.5, -0.13), fontsize=8)
    return fig


def dependency_steps(n: int) -> tuple[int, int]:
    """(chain steps, tree rounds) to add n numbers: a dependent chain needs n - 1 additions one
    after another (the first number needs none); independent additions in pairs need
    ceil(log2 n) rounds."""
    ones = np.ones(n)
    return max(reference.sum_chain(ones)[1] - 1, 0), reference.sum_tree(ones)[1]


def dependency_plot(n_max: int = 32, n_marked: int | None = 12, ax=None):
    """Steps to add n numbers, n = 1 … n_max: a chain of dependent additions (n - 1 steps)
    against independent additions done in rounds of a tree (ceil(log2 n) rounds)."""
    n_max = max(n_max, n_marked or 1, 2)
    ns = np.arange(1, n_max + 1)
    chain, tree = zip(*(dependency_steps(int(n)) for n in ns), strict=True)
    fig, ax = _figure(ax, (7.5, 4.5))
    dots = 3 if n_max <= 64 else 0  # one marker per n while they can be told apart
    ax.plot(ns, chain, "o-", ms=dots, label="dependent chain: each addition waits for the last"
                                            " (n − 1 steps)")
    ax.step(ns, tree, "o-", where="post", ms=dots,
            label="independent additions, then a tree: pairs in rounds (⌈log₂ n⌉ steps)")
    if n_marked:
        c, t = dependency_steps(n_marked)
        ax.plot([n_marked, n_marked], [c, t], "k:", lw=1)
        # the note sits in the free triangle below the chain and above the tree
        ax.annotate(f"n = {n_marked}: {c} steps in a chain,\n{t} rounds as a tree",
                    (n_marked, (c + t) / 2), xytext=(0.97, 0.32), textcoords="axes fraction",
                    ha="right", va="center", fontsize=9,
                    arrowprops={"arrowstyle": "->", "lw": 0.8, "color": "#444444"})
    ax.set_xlabel("n (numbers to add)")
    ax.set_ylabel("steps, one after another")
    ax.set_title("Adding n numbers: a chain of dependent steps vs independent work")
    ax.set_xlim(0, n_max + 1)
    ax.set_ylim(0, max(chain) * 1.1 + 1)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", fontsize=8.5)
    return fig


__all__ = [
    "crossover_plot",
    "dependency_plot",
    "dependency_steps",
    "elements_text",
    "first_faster_n",
    "launch_diagram",
    "shown_blocks",
    "shown_threads",
]


# --- chapters 02-03: memory access, rates and the roofline --------------------------------------

ESTIMATE_WORDS = ("estimated", "model", "roofline")


def _is_estimate(origin: str) -> bool:
    """True when a label says its numbers come from a model rather than a measurement."""
    return any(word in origin.lower() for word in ESTIMATE_WORDS)


def warp_access_plot(summary, request: int = 0, ax=None):
    """One warp request of an :class:`~gpulab.memory_model.AccessSummary`: the 32 threads on
    top, device memory below in 32-byte sectors, a line from each thread to the bytes it
    reads. Sectors the request touches are coloured; the title counts them.

    Text artists carry gids: ``"sector{k}"`` for each touched sector's label."""
    from gpulab.memory_model import SECTOR_BYTES

    warp = summary.requests[request]
    addresses = warp.byte_addresses
    sectors = sorted(warp.sectors)
    first, last = sectors[0], sectors[-1]
    span = last - first + 1
    fig, ax = _figure(ax, (10.5, 3.6))
    threads = len(addresses)
    width_bytes = span * SECTOR_BYTES
    for k in range(first, last + 1):
        touched = k in warp.sectors
        x0 = (k - first) * SECTOR_BYTES / width_bytes
        ax.add_patch(Rectangle((x0, 0.0), SECTOR_BYTES / width_bytes, 0.18,
                               facecolor="#f4b183" if touched else "white",
                               edgecolor="#666666", lw=0.6))
    for t, address in enumerate(addresses):
        x_thread = (t + 0.5) / threads
        x_byte = ((address - first * SECTOR_BYTES) + warp.itemsize / 2) / width_bytes
        ax.plot([x_thread, x_byte], [0.82, 0.2], color="#3d85c6", lw=0.7, alpha=0.8)
        ax.add_patch(Rectangle((t / threads + 0.1 / threads, 0.82), 0.8 / threads, 0.1,
                               color=BUSY_COLOUR))
    ax.text(0.0, 0.97, f"thread 0 … {threads - 1} of one warp", fontsize=8.5, va="bottom")
    ax.text(0.0, -0.04, f"device memory, sectors {first}…{last} ({SECTOR_BYTES} bytes each; "
            "orange = fetched)", fontsize=8.5, va="top")
    ax.set_xlim(-0.01, 1.01)
    ax.set_ylim(-0.15, 1.05)
    ax.axis("off")
    ax.set_title(
        f"{len(sectors)} sectors for one request of {threads} threads × {warp.itemsize} B: "
        f"{warp.bytes_fetched} bytes fetched, {warp.bytes_requested} used "
        f"({summary.source})", fontsize=10)
    labelled = sectors if len(sectors) <= 32 and span <= 64 else sorted({first, last})
    for k in labelled:
        ax.text((k - first + 0.5) / span, 0.09, str(k), ha="center", va="center", fontsize=6.5,
                gid=f"sector{k}")
    return fig


def stride_cost_plot(series: dict, ax=None):
    """Cost per useful element, relative to stride 1, against the stride: one line per series.

    ``series`` is ``{label: [(stride, relative_cost), ...]}``; the label says where the numbers
    came from (a measurement, or the sector model). Hollow markers: model; filled: measured."""
    fig, ax = _figure(ax, (7.5, 4.6))
    for label, points in series.items():
        strides, costs = zip(*sorted(points), strict=True)
        hollow = _is_estimate(label) or "model" in label
        ax.plot(strides, costs, "o-", ms=5, label=label, mfc="white" if hollow else None)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("stride (elements between neighbouring threads' reads)")
    ax.set_ylabel("cost per useful element (stride 1 = 1)")
    ax.set_title("Strided reads: the memory system moves whole sectors")
    ax.grid(True, which="major", alpha=0.3)
    wrapped = ["\n".join(textwrap.wrap(label, 70, break_on_hyphens=False)) for label in series]
    ax.legend(ax.get_lines(), wrapped, loc="upper left", fontsize=7.5)
    return fig


def roofline_plot(points, gpu="H100-SXM", precision: str = "fp32", ax=None,
                  measured_bandwidth: float | None = None):
    """A roofline of ``gpu``: FLOP/s against arithmetic intensity (FLOPs per byte of device
    memory traffic), the memory roof ``intensity × bandwidth`` rising to the compute roof
    ``peak``, and each kernel placed at (its intensity, its FLOP/s).

    ``points``: dicts with ``name``, ``flops``, ``bytes_moved``, ``seconds`` and ``origin``
    (where the time came from: "measured on …" or "estimated from …"). Measured points are
    filled, estimated ones hollow, and the legend says which. Points with no FLOPs (copies)
    have no place on a roofline and are listed in the title instead.
    ``measured_bandwidth`` (bytes/s) adds the roof of a measured copy, dashed.
    """
    from gpulab import hardware

    spec = hardware.get_gpu(gpu)
    peak = spec.peak_flops_for(precision)
    bandwidth = spec.memory_bandwidth_bytes_per_s
    placed = [p for p in points if p.get("flops") and p.get("bytes_moved")]
    skipped = sorted({p["name"] for p in points if not p.get("flops")})
    intensities = [p["flops"] / p["bytes_moved"] for p in placed]
    ridge = peak / bandwidth
    low = min([ridge / 100, *[i / 3 for i in intensities]])
    high = max([ridge * 30, *[i * 3 for i in intensities]])
    x = np.logspace(np.log10(low), np.log10(high), 200)
    fig, ax = _figure(ax, (8.5, 6.0))
    ax.plot(x, np.minimum(peak, x * bandwidth), "k-", lw=2,
            label=f"roof of the {spec.name} ({peak / 1e12:g} TFLOP/s {precision}, "
                  f"{bandwidth / 1e12:g} TB/s; datasheet)")
    if measured_bandwidth:
        ax.plot(x, np.minimum(peak, x * measured_bandwidth), "k--", lw=1,
                label=f"memory roof at the measured copy bandwidth "
                      f"({measured_bandwidth / 1e12:.3g} TB/s)")
    ax.axvline(ridge, color="#999999", lw=0.8, ls=":")
    ax.annotate(f"ridge: {ridge:.3g} FLOP/byte", (ridge, peak), xytext=(4, -14),
                textcoords="offset points", fontsize=8, color="#555555")
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    names = list(dict.fromkeys(p["name"] for p in placed))
    for p, intensity in zip(placed, intensities, strict=True):
        colour = colours[names.index(p["name"]) % len(colours)]
        estimate = _is_estimate(p["origin"])
        ax.plot([intensity], [p["flops"] / p["seconds"]], "s" if estimate else "o", ms=8,
                color=colour, mfc="white" if estimate else colour, mew=1.5,
                label=f"{p['name']} — {p['origin']}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per byte of device memory traffic)")
    ax.set_ylabel(f"{precision} FLOP/s")
    title = f"Roofline of the {spec.name}: filled = measured, hollow = estimated"
    if skipped:
        title += f"\n(not shown, no FLOPs: {', '.join(skipped)})"
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    wrapped = ["\n".join(textwrap.wrap(h.get_label(), 100, break_on_hyphens=False))
               for h in ax.get_lines() if not h.get_label().startswith("_")]
    handles = [h for h in ax.get_lines() if not h.get_label().startswith("_")]
    ax.legend(handles, wrapped, loc="upper center", bbox_to_anchor=(0.5, -0.13), fontsize=7.5)
    return fig


def _si(value: float, unit: str) -> str:
    """3.2e13, "FLOP/s" -> "32 TFLOP/s"."""
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def rates_plot(bars, unit: str = "FLOP/s", ax=None, title: str | None = None):
    """Horizontal bars, one per ``(label, rate, origin)``: hatched bars are estimates, solid
    ones measurements; each bar's text says where its number came from."""
    fig, ax = _figure(ax, (10.0, 1.0 + 0.6 * len(bars)))
    labels = [label for label, _, _ in bars]
    for row, (_, rate, origin) in enumerate(bars):
        estimate = _is_estimate(origin)
        ax.barh(row, rate, color="white" if estimate else BUSY_COLOUR, edgecolor="#3d85c6",
                hatch="//" if estimate else None)
        ax.text(rate, row, f"  {_si(rate, unit)}\n  {origin}", va="center", fontsize=7.5)
    ax.set_yticks(range(len(bars)), labels, fontsize=8.5)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel(unit)
    top = max(rate for _, rate, _ in bars)
    ax.set_xlim(min(rate for _, rate, _ in bars) / 3, top * 3e4)
    ax.set_title(title or f"{unit}: solid = measured, hatched = estimated", fontsize=10)
    ax.grid(True, axis="x", which="major", alpha=0.3)
    return fig


__all__ += ["rates_plot", "roofline_plot", "stride_cost_plot", "warp_access_plot"]
