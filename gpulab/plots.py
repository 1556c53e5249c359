"""Matplotlib figures for the course. Every function draws on ``ax`` (or a new figure) and
returns the Figure; none calls ``plt.show()``, so they work with any backend, Agg included.

- :func:`launch_diagram` draws a real :class:`~gpulab.kernels.launch.LaunchConfig`: the grid,
  its blocks, and the element(s) every thread handles, idle threads greyed.
- :func:`gpu_diagram` (GPU → SMs → warps → lanes) and :func:`memory_hierarchy` (registers to
  PCIe, with sizes and bandwidths, "not published" where NVIDIA publishes none) draw a named GPU
  of :mod:`gpulab.hardware`; :func:`gpu_table` lists the datasheet rates (chapter 00).
- :func:`roofline_plot` places kernels under a named GPU's roofline, measured points filled and
  estimates (gpulab's GPU model) hollow; :func:`rates_plot` compares achieved rates as bars.
- :func:`new_figure`, :func:`wrap_title` and the colours are shared by the chapter figures,
  which live with their experiments in :mod:`gpulab.experiments`.
"""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import ConnectionPatch, Rectangle

from gpulab.hardware import COURSE_GPU, format_rate
from gpulab.kernels.launch import LaunchConfig
from gpulab.tables import Column, Table

BUSY_COLOUR = "#cfe2f3"
IDLE_COLOUR = "#e6e6e6"
ESTIMATE_WORDS = ("estimated", "model", "roofline")
GAP = None  # marks an elided run of blocks or threads in the lists below


def wrap_title(text: str, width: int = 60) -> str:
    """``text`` broken into lines of at most ``width`` characters, for titles and legends."""
    return "\n".join(textwrap.wrap(text, width, break_on_hyphens=False))


def is_estimate(origin: str) -> bool:
    """True when a label says its numbers come from a model rather than a measurement."""
    return any(word in origin.lower() for word in ESTIMATE_WORDS)


def new_figure(ax, size):
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
    fig, ax = new_figure(ax, (1.0 + 0.9 * (span + 2 * pad), 1.9 + 0.42 * rows))
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


__all__ = [
    "BUSY_COLOUR",
    "ESTIMATE_WORDS",
    "IDLE_COLOUR",
    "elements_text",
    "is_estimate",
    "launch_diagram",
    "new_figure",
    "shown_blocks",
    "shown_threads",
    "wrap_title",
]


# --- chapters 02-03: memory access, rates and the roofline --------------------------------------


def roofline_plot(points, gpu=COURSE_GPU, precision: str = "fp32", ax=None,
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
    fig, ax = new_figure(ax, (8.5, 6.0))
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
        estimate = is_estimate(p["origin"])
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


def rates_plot(bars, unit: str = "FLOP/s", ax=None, title: str | None = None):
    """Horizontal bars, one per ``(label, rate, origin)``: hatched bars are estimates, solid
    ones measurements; each bar's text says where its number came from."""
    fig, ax = new_figure(ax, (10.0, 1.0 + 0.6 * len(bars)))
    labels = [label for label, _, _ in bars]
    for row, (_, rate, origin) in enumerate(bars):
        estimate = is_estimate(origin)
        ax.barh(row, rate, color="white" if estimate else BUSY_COLOUR, edgecolor="#3d85c6",
                hatch="//" if estimate else None)
        ax.text(rate, row, f"  {format_rate(rate, unit)}\n  {origin}", va="center", fontsize=7.5)
    ax.set_yticks(range(len(bars)), labels, fontsize=8.5)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel(unit)
    top = max(rate for _, rate, _ in bars)
    ax.set_xlim(min(rate for _, rate, _ in bars) / 3, top * 3e4)
    ax.set_title(title or f"{unit}: solid = measured, hatched = estimated", fontsize=10)
    ax.grid(True, axis="x", which="major", alpha=0.3)
    return fig


__all__ += ["rates_plot", "roofline_plot"]


# --- see your own kernel: which thread touched which element ------------------------------------

TRACE_MAX_ELEMENTS = 64  # elements drawn per array: more are elided
TRACE_ROW = 16  # cells per row for a 1-D array
TRACE_TABLE_ROWS = 8  # kinds of thread in the counts table
RACE_COLOUR = "#f4a6a6"
SHARED_WRITERS_COLOUR = "#d9d2e9"
ATOMIC_COLOUR = "#fdd49e"
READ_ONLY_COLOUR = "#e6e6e6"
COUNT_HEADINGS = ("global\nreads", "global\nwrites", "shared\nreads", "shared\nwrites",
                  "atomics", "barriers")


def _thread_colour(trace, thread):
    order = {t: k for k, t in enumerate(trace.threads)}
    return plt.get_cmap("tab20")(order.get(thread, 0) % 20)


def _shown_cells(shape: tuple[int, ...]) -> tuple[list[tuple], list[tuple[int, int]], str]:
    """The elements to draw (index tuples), where each goes (row, column) and a note on what
    was left out ("" when nothing)."""
    if len(shape) == 1:
        n = shape[0]
        shown = min(n, TRACE_MAX_ELEMENTS)
        cells = [(i,) for i in range(shown)]
        places = [(i // TRACE_ROW, i % TRACE_ROW) for i in range(shown)]
        note = f"first {shown} of {n} elements" if shown < n else ""
        return cells, places, note
    rows, cols = shape[0], int(np.prod(shape[1:]))
    side = int(np.sqrt(TRACE_MAX_ELEMENTS))
    shown_rows, shown_cols = min(rows, side), min(cols, side)
    if len(shape) > 2:  # 3-D and up: the first plane only
        shown_rows = 1
    cells = [(r, c) if len(shape) == 2 else (r, *np.unravel_index(c, shape[1:]))
             for r in range(shown_rows) for c in range(shown_cols)]
    places = [(r, c) for r in range(shown_rows) for c in range(shown_cols)]
    cut = shown_rows < rows or shown_cols < cols
    note = (f"rows 0–{shown_rows - 1}, columns 0–{shown_cols - 1} of "
            f"{' x '.join(map(str, shape))}" if cut else "")
    return [tuple(int(i) for i in cell) for cell in cells], places, note


def _cell_label(trace, thread) -> str:
    """A thread, short enough for a cell: 'b0 t3' in 1-D; in 2-D and 3-D its global position
    ``cuda.grid(2)``, '(x,y)'."""
    from gpulab.instruments import thread_label

    if trace.dimensions_of_threads == 1:
        return thread_label(thread, short=True)
    block, within = thread
    position = (b * size + t for b, size, t in zip(block, trace.block, within, strict=True))
    return "(" + ",".join(map(str, position)) + ")"


def _cell(trace, name, index, writes, atomics, reads):
    """(fill colour, text) of one element's cell."""
    writers, atomic, readers = (writes.get(index, []), atomics.get(index, []),
                                reads.get(index, []))
    lines = []
    if len(writers) > 1 and trace.spaces[name] == "shared":  # in turns, between barriers?
        colour, lines = SHARED_WRITERS_COLOUR, [f"w ×{len(writers)} thr"]
    elif len(writers) > 1:
        colour, lines = RACE_COLOUR, [f"w: {len(writers)} thr!"]
    elif atomic:
        colour = ATOMIC_COLOUR
        count = sum(1 for a in trace.accesses
                    if a.array == name and a.kind == "atomic" and a.index == index)
        lines = [f"atomic ×{count}"]
    elif writers:
        colour, lines = _thread_colour(trace, writers[0]), [
            "w " + _cell_label(trace, writers[0])]
    elif len(readers) == 1:
        colour = _thread_colour(trace, readers[0])
    elif readers:
        colour = READ_ONLY_COLOUR
    else:
        colour = "white"
    if len(readers) == 1:
        lines.append("r " + _cell_label(trace, readers[0]))
    elif readers:
        lines.append(f"r ×{len(readers)} thr")
    return colour, "\n".join(lines)


def _draw_array(ax, trace, name, shared_block=None):
    cells, places, note = _shown_cells(trace.shapes[name])
    space = trace.spaces[name]
    block = None
    if space == "shared":  # each block has its own copy: draw one block's
        block = trace.threads[0][0] if shared_block is None else shared_block
    writes, atomics, reads = (trace.touched(name, kind, block)
                              for kind in ("write", "atomic", "read"))
    rows = max(r for r, _ in places) + 1
    cols = max(c for _, c in places) + 1
    one_d = len(trace.shapes[name]) == 1
    pitch = 1.3 if one_d else 1.0  # room for the index above each row of a 1-D array
    for index, (row, col) in zip(cells, places, strict=True):
        colour, text = _cell(trace, name, index, writes, atomics, reads)
        written = index in writes or index in atomics
        y = row * pitch + (0.3 if one_d else 0.0)
        ax.add_patch(Rectangle((col, y), 0.96, 0.9, facecolor=colour, edgecolor="#555555",
                               lw=0.6, alpha=1.0 if written or colour == "white" else 0.45))
        ax.text(col + 0.48, y + 0.47, text, ha="center", va="center", fontsize=6.5,
                gid=f"{name}[{','.join(map(str, index))}]")
        if one_d:
            ax.text(col + 0.48, y - 0.04, str(index[0]), ha="center", va="bottom",
                    fontsize=5.5, color="#777777")
    if not one_d:
        for row in range(rows):
            ax.text(-0.1, row + 0.45, str(cells[row * cols][0]), ha="right", va="center",
                    fontsize=6, color="#777777")
        for col in range(cols):
            ax.text(col + 0.48, -0.05, str(cells[col][-1]), ha="center", va="bottom",
                    fontsize=6, color="#777777")
    ax.set_xlim(-0.6, max(cols, 4) + 0.1)
    ax.set_ylim(rows * pitch + 0.3, -0.45)
    ax.set_aspect("equal")
    ax.axis("off")
    shape = " x ".join(map(str, trace.shapes[name]))
    where = f"shared memory of block {block}" if space == "shared" else "global memory"
    title = f"{name} ({where}, {shape})" + (f": {note}" if note else "")
    ax.set_title(title, fontsize=8.5, loc="left")


def _count_rows(trace):
    """(label, counts) per kind of thread: threads with the same counts share a row."""
    from gpulab.instruments import COUNT_KEYS, thread_label

    groups: dict[tuple, list] = {}
    for thread in trace.threads:
        counts = trace.counts(thread)
        groups.setdefault(tuple(counts[k] for k in COUNT_KEYS), []).append(thread)
    rows = []
    for values, threads in list(groups.items())[:TRACE_TABLE_ROWS]:
        label = thread_label(threads[0], short=True)
        if len(threads) > 1:
            label += f" and {len(threads) - 1} more"
        rows.append((label, list(values)))
    if len(groups) > TRACE_TABLE_ROWS:
        rows.append((f"… {len(groups) - TRACE_TABLE_ROWS} more kinds", [""] * len(COUNT_KEYS)))
    rows.append(("most per thread", [trace.max_per_thread(k) for k in COUNT_KEYS]))
    return rows


def trace_plot(trace, array=None, max_arrays: int = 4, shared_block=None):
    """Draw a :class:`~gpulab.instruments.KernelTrace`, GPU-Puzzles style: for each array
    (``array``: a name or a list of names, e.g. ``"out"`` or ``"shared:partial"``; by default
    every array argument), one cell per element, coloured by the thread that wrote it ("w b0 t3";
    red when several threads wrote it without an atomic, orange for atomics) and labelled with
    the thread(s) that read it ("r b0 t3", or how many); elements only read are pale, in the
    reader's colour. 1-D arrays wrap every 16 elements; beyond 64 elements (8 x 8 for 2-D) the
    rest is elided. A shared array is drawn as one block sees it (``shared_block``, by default
    the first): each block has its own copy. Below, a table of per-thread counts: threads with
    the same counts share a row. Text artists carry gids ``"name[i]"`` / ``"name[r,c]"`` for
    tests."""
    names = ([array] if isinstance(array, str) else list(array) if array is not None
             else trace.global_arrays[:max_arrays])
    unknown = [name for name in names if name not in trace.shapes]
    if unknown:
        raise ValueError(f"{', '.join(unknown)}: not an array of this trace; it has "
                         f"{', '.join(trace.shapes)}")
    heights = []
    for name in names:
        _, places, _ = _shown_cells(trace.shapes[name])
        pitch = 1.3 if len(trace.shapes[name]) == 1 else 1.0
        heights.append((max(r for r, _ in places) + 1) * pitch + 0.8)
    table_rows = _count_rows(trace)
    heights.append(0.45 * (len(table_rows) + 1) + 0.4)
    fig = plt.figure(figsize=(9.0, 0.9 + 0.42 * sum(heights)), layout="constrained")
    grid = fig.add_gridspec(len(heights), 1, height_ratios=heights)
    for k, name in enumerate(names):
        _draw_array(fig.add_subplot(grid[k]), trace, name, shared_block)
    ax = fig.add_subplot(grid[-1])
    ax.axis("off")
    table = ax.table(cellText=[[str(v) for v in values] for _, values in table_rows],
                     rowLabels=[label for label, _ in table_rows], colLabels=COUNT_HEADINGS,
                     loc="center", cellLoc="center")
    table.auto_set_font_size(False)
    table.set_fontsize(7)
    table.scale(1.0, 1.25)
    title = (f"{trace.kernel} on {trace.launch}: w = the thread that wrote the element, "
             "r = the thread(s) that read it")
    if trace.dimensions_of_threads > 1:
        title += " (a thread is named by its cuda.grid(2) position, (x, y))"
    if trace.error:
        title += f". It stopped early: {trace.error}"
    fig.suptitle(wrap_title(title, 100), fontsize=9.5)
    return fig


def _register_trace_drawer() -> None:
    from gpulab.instruments import set_trace_drawer

    set_trace_drawer(trace_plot)


_register_trace_drawer()
__all__ += ["trace_plot"]


# --- chapter 00: the GPU, its memory hierarchy, the datasheet table ------------------------------

WARP_COLOUR = "#f9cb9c"
NOT_PUBLISHED = "not published"


def document_name(citation: str) -> str:
    """The document a source note cites, without its details: the text before the first
    comma, colon, semicolon or bracket (``"NVIDIA H100 … whitepaper, table …"`` -> its title)."""
    for stop in (" (", ", ", ": ", "; "):
        citation = citation.split(stop, 1)[0]
    return citation.strip().rstrip(".")


def binary_size(n_bytes: float) -> str:
    """On-chip sizes, which are powers of two: '256 KiB', '50 MiB', '33 MiB'."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n_bytes >= size:
            return f"{n_bytes / size:,.3g} {unit}"
    return f"{n_bytes:,.0f} B"


def _sm_limits(spec):
    from gpulab.kernel_resources import SM_LIMITS, SPECS_SOURCE

    try:
        return SM_LIMITS[spec.compute_capability], document_name(SPECS_SOURCE)
    except KeyError:
        raise ValueError(f"no per-SM limits recorded for compute capability "
                         f"{spec.compute_capability} ({spec.name})") from None


def gpu_diagram(gpu=COURSE_GPU):
    """The GPU as CUDA sees it, for a named GPU of :mod:`gpulab.hardware`: the GPU is a set of
    streaming multiprocessors (SMs; ``sm_count``, from NVIDIA's whitepapers), an SM keeps up to
    ``max_warps`` warps resident (:data:`gpulab.kernel_resources.SM_LIMITS` for its compute
    capability), and a warp is 32 threads, one per lane, issued one instruction at a time
    (SIMT). Where the SM count is not published, the figure says so instead of guessing."""
    from gpulab import hardware

    spec = hardware.get_gpu(gpu)
    limits, limits_source = _sm_limits(spec)
    cc = ".".join(map(str, spec.compute_capability))
    fig, (ax_gpu, ax_sm, ax_warp) = plt.subplots(
        1, 3, figsize=(11, 4.4), layout="constrained", gridspec_kw={"width_ratios": [5, 3, 3]})
    # the GPU: one square per SM
    sms = spec.sm_count
    shown = sms or 24  # grey stand-ins where the count is not published
    cols = int(np.ceil(np.sqrt(shown * 1.5)))
    rows = int(np.ceil(shown / cols))
    for k in range(shown):
        r, c = divmod(k, cols)
        colour = WARP_COLOUR if k == 0 else (BUSY_COLOUR if sms else IDLE_COLOUR)
        ax_gpu.add_patch(Rectangle((c + 0.08, r + 0.08), 0.84, 0.84, color=colour))
    if sms:
        title = f"the GPU: {spec.name}\n{sms} SMs (streaming multiprocessors)"
    else:
        title = f"the GPU: {spec.name}\nSM count {NOT_PUBLISHED}"
        ax_gpu.text(cols / 2, rows / 2, f"SM count {NOT_PUBLISHED}\nfor this product:\n"
                    "gpulab info reports it on a GPU", ha="center", va="center", fontsize=10,
                    bbox={"facecolor": "white", "edgecolor": "#888888"})
    ax_gpu.set_title(title, fontsize=10)
    ax_gpu.set_xlim(-0.1, cols + 0.1)
    ax_gpu.set_ylim(rows + 0.1, -0.1)
    ax_gpu.set_aspect("equal")
    ax_gpu.axis("off")
    # one SM: one cell per resident warp
    warps = limits.max_warps
    wcols = 8
    wrows = int(np.ceil(warps / wcols))
    for k in range(warps):
        r, c = divmod(k, wcols)
        ax_sm.add_patch(Rectangle((c + 0.1, r + 0.1), 0.8, 0.8,
                                  color=WARP_COLOUR if k == 0 else BUSY_COLOUR))
    ax_sm.set_title(f"one SM (compute capability {cc}):\nup to {warps} warps resident = "
                    f"{limits.max_threads:,} threads", fontsize=10)
    ax_sm.set_xlim(0, wcols)
    ax_sm.set_ylim(wrows, 0)
    ax_sm.set_aspect("equal")
    ax_sm.axis("off")
    # one warp: 32 lanes
    for lane in range(limits.warp_size):
        r, c = divmod(lane, 8)
        ax_warp.add_patch(Rectangle((c + 0.05, r + 0.05), 0.9, 0.9, color=WARP_COLOUR))
        ax_warp.text(c + 0.5, r + 0.5, str(lane), ha="center", va="center", fontsize=8)
    ax_warp.set_title(f"one warp: {limits.warp_size} threads (lanes 0–{limits.warp_size - 1}),"
                      "\none instruction issued to all (SIMT)", fontsize=10)
    ax_warp.set_xlim(0, 8)
    ax_warp.set_ylim(limits.warp_size / 8, 0)
    ax_warp.set_aspect("equal")
    ax_warp.axis("off")
    for source, target, corner in ((ax_gpu, ax_sm, (0.92, 0.5)), (ax_sm, ax_warp, (0.9, 0.5))):
        fig.add_artist(ConnectionPatch(xyA=corner, coordsA=source.transData, xyB=(0, 0),
                                       coordsB=target.transData, color="#e69138", lw=1.0,
                                       ls="--"))
    resident = (f"{sms} SMs × {limits.max_threads:,} threads = {sms * limits.max_threads:,} "
                "threads resident at once" if sms else
                f"{limits.max_threads:,} threads resident per SM")
    sources = (f"SM count: {document_name(spec.source('sm_count'))}. Warps per SM and warp "
               f"size: {limits_source}, compute capability {cc}.")
    fig.suptitle(f"GPU → SMs → warps → lanes: {resident}", fontsize=11, fontweight="bold")
    fig.text(0.5, 0.01, wrap_title(sources, 150), ha="center", va="bottom", fontsize=7.5,
             color="#555555")
    fig.get_layout_engine().set(rect=(0, 0.07, 1, 0.93))
    return fig


def memory_levels(gpu=COURSE_GPU) -> list[dict]:
    """The memory hierarchy of a named GPU, fastest first: ``{"level", "size", "bandwidth",
    "source"}`` per level (registers, shared memory / L1, L2, device memory, the host link).
    Sizes and bandwidths come from :mod:`gpulab.hardware` and
    :data:`gpulab.kernel_resources.SM_LIMITS`; a bandwidth NVIDIA does not publish is
    :data:`NOT_PUBLISHED`, never a guess."""
    from gpulab import hardware

    spec = hardware.get_gpu(gpu)
    limits, limits_source = _sm_limits(spec)
    sms = spec.sm_count
    register_bytes = limits.registers * 4
    per_gpu = (lambda per_sm: f" · {binary_size(per_sm * sms)} on {sms} SMs") if sms else (
        lambda per_sm: " (SM count not published)")
    return [
        {"level": "registers", "size": f"{binary_size(register_bytes)} per SM "
                                       f"({limits.registers:,} × 32-bit)"
                                       f"{per_gpu(register_bytes)}",
         "bandwidth": NOT_PUBLISHED, "source": limits_source},
        {"level": "shared memory / L1", "size": f"up to {binary_size(limits.shared_bytes)} "
                                                f"shared per SM{per_gpu(limits.shared_bytes)}",
         "bandwidth": NOT_PUBLISHED, "source": limits_source},
        {"level": "L2 cache", "size": (f"{binary_size(spec.l2_bytes)}, shared by all SMs"
                                       if spec.l2_bytes else f"size {NOT_PUBLISHED}"),
         "bandwidth": NOT_PUBLISHED, "source": document_name(spec.source("l2_bytes"))},
        {"level": "device memory", "size": f"{spec.memory_bytes / hardware.GB:g} GB (nominal)",
         "bandwidth": f"{format_rate(spec.memory_bandwidth_bytes_per_s, 'B/s')}",
         "source": document_name(spec.source("memory_bandwidth_bytes_per_s"))},
        {"level": f"{spec.host_link} to the host",
         "size": "the CPU's memory (not on the GPU)",
         "bandwidth": (f"{format_rate(spec.host_link_bytes_per_s, 'B/s')} each way (peak); "
                       f"model: pinned ≈ {format_rate(spec.host_pinned_bytes_per_s, 'B/s')}, "
                       f"pageable ≈ {format_rate(spec.host_pageable_bytes_per_s, 'B/s')}"),
         "source": document_name(spec.source("host_link_bytes_per_s"))},
    ]


def memory_hierarchy(gpu=COURSE_GPU, memory_kind: str | None = None):
    """The memory hierarchy of a named GPU as a stack of boxes, fastest and smallest at the top:
    each level with its size and bandwidth (:func:`memory_levels`) and where the figure comes
    from. The device memory's type (HBM3, HBM3e, HBM2e, GDDR6) is the datasheet's
    (``spec.memory_type``); ``memory_kind`` overrides it."""
    from gpulab import hardware

    spec = hardware.get_gpu(gpu)
    levels = memory_levels(spec)
    memory_kind = memory_kind or spec.memory_type
    if memory_kind:
        levels[3]["level"] = f"device memory ({memory_kind})"
    fig, ax = plt.subplots(figsize=(12, 4.6), layout="constrained")
    colours = ["#f9cb9c", "#fce5cd", "#d9ead3", "#cfe2f3", "#e6e6e6"]
    height, gap, left, right = 1.0, 0.25, 5.0, 23.0
    for k, level in enumerate(levels):
        y = k * (height + gap)
        indent = 0.6 * (len(levels) - 1 - k)  # a pyramid: small and fast at the top
        ax.add_patch(Rectangle((left + indent, y), right - left - 2 * indent, height,
                               color=colours[k]))
        ax.text(left - 0.2, y + height / 2, wrap_title(level["level"], 22), ha="right",
                va="center", fontsize=9.5, fontweight="bold")
        ax.text((left + right) / 2, y + 0.3, f"size: {level['size']}", ha="center",
                va="center", fontsize=8.5)
        ax.text((left + right) / 2, y + 0.7, f"bandwidth: {level['bandwidth']}", ha="center",
                va="center", fontsize=8.5,
                color="#888888" if level["bandwidth"] == NOT_PUBLISHED else "black")
        ax.text(right + 0.3, y + height / 2, wrap_title(level["source"], 34), ha="left",
                va="center", fontsize=7, color="#555555")
    bottom = len(levels) * (height + gap) - gap
    ax.annotate("", xy=(-0.2, 0), xytext=(-0.2, bottom),
                arrowprops={"arrowstyle": "->", "lw": 1.2, "color": "#444444"})
    ax.text(-0.5, bottom / 2, "smaller, faster,\ncloser to the lanes", rotation=90,
            ha="center", va="center", fontsize=8.5, color="#444444")
    ax.set_xlim(-1.1, right + 6.5)
    ax.set_ylim(bottom + 0.1, -0.1)
    ax.axis("off")
    ax.set_title(f"The memory hierarchy of the {spec.name} (sources on the right)",
                 fontsize=11)
    return fig


def gpu_table(gpus=None) -> Table:
    """The datasheet figures chapter 00 compares, one GPU a row: memory (nominal), its
    bandwidth, the fp32 rate of the CUDA cores, and the dense FP16/BF16 and FP8 rates of the
    tensor cores ("—" where the GPU has none). From :data:`gpulab.hardware.GPUS`."""
    from gpulab import hardware

    specs = [hardware.get_gpu(g) for g in (gpus or hardware.GPUS)]

    def rate(spec, *formats):
        found = [spec.peak_flops[f] for f in formats if f in spec.peak_flops]
        return format_rate(found[0], "FLOP/s") if found else None

    return Table(
        [Column("GPU"), Column("memory", "GB, nominal", "{:.0f}"), Column("bandwidth"),
         Column("FP32", "CUDA cores"), Column("FP16/BF16", "tensor cores"),
         Column("FP8", "tensor cores")],
        [[spec.name, spec.memory_bytes / hardware.GB,
          format_rate(spec.memory_bandwidth_bytes_per_s, "B/s"), rate(spec, "fp32"),
          rate(spec, "bf16", "fp16"), rate(spec, "fp8")] for spec in specs],
        notes=["Peak dense rates from each GPU's datasheet (gpulab.hardware.GPUS[key].sources);"
               " no sparsity."])


__all__ += ["NOT_PUBLISHED", "binary_size", "document_name", "gpu_diagram", "gpu_table",
            "memory_hierarchy", "memory_levels"]
