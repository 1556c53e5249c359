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
    busy = [t for t in (0, tpb - 1) if len(config.elements_of(block, t))]
    first_idle = min(max(config.n_elements - block * tpb, 0), tpb)  # one element per thread
    keep = {0, 1, tpb - 1}
    if not config.grid_stride and 0 < first_idle < tpb:
        keep |= {first_idle - 1, first_idle}
    elif len(busy) == 2:
        keep.add(tpb - 2)
    t = 2
    while len(keep) < max_threads and t < tpb:
        keep.add(t)
        t += 1
    return _with_gaps(sorted(keep)[:max_threads])


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
    ax.set_title("\n".join(textwrap.wrap(str(config), columns)), fontsize=10)
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
    """The smallest n at which ``candidate`` takes less time than ``baseline``.

    Both are sequences of ``(n, seconds)``; only sizes present in both are compared.
    """
    baseline_s = dict(baseline)
    faster = [n for n, s in candidate if n in baseline_s and s < baseline_s[n]]
    return int(min(faster)) if faster else None


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
    it, a star marks the crossover.
    """
    series = points["series"] if "series" in points else points
    cpu_label = cpu_label or _cpu_label(series)
    fig, ax = _figure(ax, (8.5, 6.0))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (label, pts) in enumerate(series.items()):
        n, seconds = zip(*sorted(pts), strict=True)
        style = "-" if label == cpu_label else "--" if "copy" in label else "-."
        colour = colours[i % len(colours)]
        ax.plot(n, seconds, style, marker="o", ms=3.5, color=colour, label=label)
        crossing = None if label == cpu_label else first_faster_n(series[cpu_label], pts)
        if crossing is not None:
            at = dict(pts)[crossing]
            ax.plot([crossing], [at], "*", ms=14, color=colour, mec="black", label="_crossover")
            ax.annotate(f"faster than the CPU\nfrom n = {crossing:,}", (crossing, at),
                        xytext=(12, -26 - 22 * i), textcoords="offset points", fontsize=8,
                        color=colour, arrowprops={"arrowstyle": "-", "color": colour})
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("n (elements per vector)")
    ax.set_ylabel("time per dot product (s)")
    ax.set_title("CPU vs GPU as n grows: where does the GPU start to win?")
    ax.grid(True, which="major", alpha=0.3)
    wrapped = ["\n".join(textwrap.wrap(label, 95)) for label in series]
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
    ax.plot(ns, chain, "o-", ms=3, label="dependent chain: each addition waits for the last"
                                          " (n − 1 steps)")
    ax.step(ns, tree, "o-", where="post", ms=3,
            label="independent additions, then a tree: pairs in rounds (⌈log₂ n⌉ steps)")
    if n_marked:
        c, t = dependency_steps(n_marked)
        ax.plot([n_marked, n_marked], [c, t], "k:", lw=1)
        ax.annotate(f"n = {n_marked}: {c} steps in a chain,\n{t} rounds as a tree",
                    (n_marked, (c + t) / 2), xytext=(10, 0), textcoords="offset points",
                    fontsize=9, va="center", bbox={"fc": "white", "ec": "none", "alpha": 0.9})
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
