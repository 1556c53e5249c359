"""Chapter 06's experiments: what a backward pass costs, how its transposes touch memory, and
analytic against numeric gradients (as a dashboard).

- :func:`phase_costs`, :func:`phase_table` and :func:`backward_ratio`: a training step's FLOPs,
  bytes and launches by phase, counted by :func:`gpulab.nn.cost.step_kernels`.
- :func:`transpose_access` and :func:`transpose_table`: the warp requests of the transposes'
  reads and writes, in 32-byte sectors (:mod:`gpulab.memory_model`) — traced from the real
  kernel in the simulator, from the kernels' index arithmetic on a GPU.
- :class:`GradientExperiment` and :class:`GradientDashboard`: for the chosen activation, a
  small MLP's backward pass is compared with central differences over a range of step sizes
  eps, in float64 and float32 (:func:`gpulab.nn.gradcheck.eps_sweep`), and, at the default eps,
  parameter by parameter (:func:`gpulab.nn.gradcheck.gradient_check`) with the analytic
  gradients from the chosen backend: NumPy, or gpulab's kernels (run in the simulator without a
  GPU). :func:`eps_prediction` and :func:`eps_table` put the sweep next to the napkin rule
  eps ≈ u^(1/3).

Nothing here is timed.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from gpulab import device, memory_model
from gpulab.experiments.dashboard import Dashboard
from gpulab.instruments import RecordingArray, WatchedArray, launchable
from gpulab.nn import MLP, cost
from gpulab.nn.gradcheck import eps_sweep, gradient_check
from gpulab.tables import Column, Table

WIDTHS = (5, 7, 4)
BATCH = 4

# --- what a training step costs, by phase -------------------------------------------------------

PHASES = ("forward", "loss", "backward", "update")


def phase_costs(widths, batch: int, activation: str = "relu", optimiser: str = "adam"
                ) -> dict[str, dict]:
    """``{phase: {"flops", "bytes_moved", "launches"}}`` of one training step, summed over the
    kernels :func:`gpulab.nn.cost.step_kernels` lists (counted, not measured)."""
    totals: dict[str, dict] = {}
    for k in cost.step_kernels(widths, batch, activation, optimiser):
        phase = totals.setdefault(k.phase, {"flops": 0.0, "bytes_moved": 0.0, "launches": 0})
        phase["flops"] += k.flops
        phase["bytes_moved"] += k.bytes_moved
        phase["launches"] += 1
    return {name: totals[name] for name in PHASES if name in totals}


def backward_ratio(widths, batch: int = 256, activation: str = "relu") -> float:
    """The backward pass's FLOPs over the forward pass's, for one step (counted)."""
    totals = phase_costs(widths, batch, activation)
    return totals["backward"]["flops"] / totals["forward"]["flops"]


def phase_table(widths, batch: int, activation: str = "relu", optimiser: str = "adam") -> Table:
    """:func:`phase_costs` as a table, and the backward / forward FLOP ratio under it."""
    totals = phase_costs(widths, batch, activation, optimiser)
    ratio = totals["backward"]["flops"] / totals["forward"]["flops"]
    return Table([Column("phase"), Column("FLOPs", "MFLOP", "{:.2f}"),
                  Column("bytes moved", "kB", "{:.0f}"), Column("launches")],
                 [[name, t["flops"] / 1e6, t["bytes_moved"] / 1e3, t["launches"]]
                  for name, t in totals.items()],
                 title=f"one training step of {' -> '.join(map(str, widths))}, batch {batch}, "
                       f"{activation}, {optimiser} (counted by gpulab.nn.cost)",
                 notes=[f"backward / forward FLOPs: {ratio:.2f}"])


# --- the transposes' memory requests -------------------------------------------------------------

TRANSPOSE_METHODS = ("naive", "tiled")
# A is 32 x 48 float32: each row is 192 bytes, so every row starts on a 32-byte sector boundary
# and the counts below are those of whole warps, undisturbed by misalignment.
TRANSPOSE_SHAPE = (32, 48)


def _transpose_indices(method: str, rows: int, cols: int, tile: int) -> tuple[dict, dict]:
    """``(reads of A, writes of out)`` as ``{(block, thread): [flat element]}``, from the index
    arithmetic of ``transpose_<method>`` launched on ``tile`` x ``tile`` blocks."""
    grid_x, grid_y = -(-cols // tile), -(-rows // tile)
    reads: dict = {}
    writes: dict = {}
    for by in range(grid_y):
        for bx in range(grid_x):
            block, r0, c0 = by * grid_x + bx, by * tile, bx * tile
            for ty in range(tile):
                for tx in range(tile):
                    thread = ty * tile + tx  # x fastest: threads 32 w .. 32 w + 31 are warp w
                    if r0 + ty < rows and c0 + tx < cols:
                        reads[block, thread] = [(r0 + ty) * cols + c0 + tx]  # A[r, c]
                    # naive: out[c, r] with (r, c) its own element; tiled: out[c0 + ty, r0 + tx]
                    out_row, out_col = ((c0 + tx, r0 + ty) if method == "naive"
                                        else (c0 + ty, r0 + tx))
                    if out_row < cols and out_col < rows:
                        writes[block, thread] = [out_row * rows + out_col]
    return reads, writes


def transpose_access(method: str = "naive", shape=TRANSPOSE_SHAPE, tile: int = 16,
                     traced: bool | None = None) -> dict:
    """The warp requests of ``transpose_<method>`` on a float32 A of ``shape`` with ``tile`` x
    ``tile`` blocks: ``{"reads": AccessSummary (of A), "writes": AccessSummary (of out)}``.

    ``traced`` (default: in the simulator) runs the real kernel with A and out replaced by
    arrays that record which simulated thread read and wrote which element; otherwise (a GPU
    does not tell Python its addresses) the requests come from the kernels' index arithmetic,
    the same model :func:`gpulab.memory_model.copy_access` uses for chapter 02's copies.
    """
    from gpulab.kernels import dense

    if method not in TRANSPOSE_METHODS:
        raise ValueError(f"method must be one of {', '.join(TRANSPOSE_METHODS)}, not {method!r}")
    rows, cols = (int(n) for n in shape)
    traced = device.tier() == "sim" if traced is None else traced
    if traced:
        A = RecordingArray(np.arange(rows * cols, dtype=np.float32).reshape(rows, cols))
        out = WatchedArray(np.zeros((cols, rows), np.float32))
        kernel = dense.transpose_naive if method == "naive" else dense.transpose_tiled
        grid = (-(-cols // tile), -(-rows // tile))
        launchable(kernel)[grid, (tile, tile)](A, out)
        if not np.array_equal(out.copy_to_host(), A.copy_to_host().T):
            raise RuntimeError(f"transpose_{method} did not transpose A")
        reads, writes, source = A.reads, out.writes_by_thread(), "traced in the simulator"
    else:
        reads, writes = _transpose_indices(method, rows, cols, tile)
        source = "from the kernel's index arithmetic"
    return {"reads": memory_model.summarise(reads, 4, source),
            "writes": memory_model.summarise(writes, 4, source)}


def transpose_table(methods=TRANSPOSE_METHODS, shape=TRANSPOSE_SHAPE, tile: int = 16) -> Table:
    """Sectors per warp request and the share of fetched bytes used, for the reads of A and the
    writes of out of each transpose (:func:`transpose_access`)."""
    rows, source = [], ""
    for method in methods:
        access = transpose_access(method, shape, tile)
        for what, summary in (("reads of A", access["reads"]), ("writes of out",
                                                                 access["writes"])):
            rows.append(["transpose_" + method, what, summary.sectors_per_request,
                         summary.efficiency])
            source = summary.source
    return Table([Column("kernel"), Column("access"),
                  Column("sectors/request", number_format="{:.3g}"),
                  Column("bytes used", number_format="{:.0%}")], rows,
                 title=f"A: {shape[0]} x {shape[1]} float32, blocks of {tile} x {tile} threads",
                 notes=[f"({source})"])


# --- the step size of a numeric gradient ---------------------------------------------------------


def eps_prediction(dtype) -> dict:
    """The napkin rule for a central difference in ``dtype``: truncation ~ eps², rounding ~ u / eps
    (u the unit roundoff, half the machine epsilon), smallest near eps ≈ u^(1/3), where the error
    is about u^(2/3) — for derivatives and a loss of order 1."""
    u = float(np.finfo(dtype).eps) / 2
    return {"unit_roundoff": u, "eps": u ** (1 / 3), "error": u ** (2 / 3)}


def eps_table(sweep: dict) -> Table:
    """The napkin's best eps and error next to the ones :func:`~gpulab.nn.gradcheck.eps_sweep`
    found, per dtype."""
    rows = []
    for name in ("float64", "float32"):
        napkin = eps_prediction(np.dtype(name))
        rows.append([name, napkin["eps"], sweep["best"][name], napkin["error"], min(sweep[name])])
    return Table([Column("dtype"), Column("best eps: napkin", number_format="{:.0e}"),
                  Column("measured", number_format="{:.0e}"),
                  Column("lowest relative error: napkin", number_format="{:.0e}"),
                  Column("measured", number_format="{:.1e}")], rows,
                 notes=["(napkin: eps ≈ u^(1/3), error ≈ u^(2/3); measured: computed on this CPU "
                        f"for the {sweep['activation']} MLP)"])


def eps_plot(sweep: dict):
    """Largest relative error of central differences against eps (log-log), per dtype."""
    fig, ax = plt.subplots(figsize=(7.5, 4.5), layout="constrained")
    for name, style in (("float64", "o-"), ("float32", "s--")):
        ax.plot(sweep["eps"], sweep[name], style, ms=4,
                label=f"numeric gradient in {name} (best eps {sweep['best'][name]:.0e})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.invert_xaxis()
    ax.axhline(1e-6, color="grey", lw=0.8, ls=":")
    ax.text(sweep["eps"][0], 1.3e-6, "tolerance 1e-6", fontsize=8, color="grey")
    ax.set_xlabel("eps (smaller to the right)")
    ax.set_ylabel("largest relative error vs the backward pass")
    ax.set_title(f"Gradient check, {sweep['activation']} MLP: truncation (left) vs rounding "
                 "(right)", fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    return fig



class GradientExperiment:
    """The eps sweep and a gradient check for one activation and backend."""

    def __init__(self, activation: str = "tanh", backend: str = "numpy", seed: int = 0):
        self.activation, self.backend, self.seed = activation, backend, seed
        self.last_result: dict | None = None

    def run(self) -> dict:
        rng = np.random.default_rng(self.seed)
        X = rng.standard_normal((BATCH, WIDTHS[0]))
        y = rng.integers(0, WIDTHS[-1], BATCH)
        model = MLP(list(WIDTHS), self.activation, self.backend, np.float64, self.seed)
        self.last_result = {"sweep": eps_sweep(self.activation, seed=self.seed),
                            "check": gradient_check(model, X, y, seed=self.seed),
                            "activation": self.activation, "backend": self.backend}
        return self.last_result

    def explain(self) -> str:
        r = self.last_result if self.last_result is not None else self.run()
        sweep, check = r["sweep"], r["check"]
        best64, best32 = sweep["best"]["float64"], sweep["best"]["float32"]
        low64, low32 = min(sweep["float64"]), min(sweep["float32"])
        return "\n".join([
            f"float64: the numeric gradient is closest to the backward pass at eps = "
            f"{best64:.0e} (relative error {low64:.1e}). Larger eps: the difference quotient's "
            "truncation error (it shrinks like eps²); smaller eps: rounding error in L(p + eps) - "
            "L(p - eps) (it grows like 1/eps).",
            f"float32 is never better than {low32:.1e} (at eps = {best32:.0e}): its 7 digits are "
            "used up by the subtraction. Gradient checks run in float64; training can use "
            "float32.",
            f"At eps = {check.eps:g}, every parameter of the {r['activation']} network agrees to "
            f"{check.max_error:.1e} ({'passed' if check.passed else 'FAILED'}, tolerance "
            f"{check.tolerance:g}; analytic gradients from {check.backend}).",
        ])


class GradientDashboard(Dashboard):
    """Activation and backend; a Run button; the eps plot, the per-parameter table, words."""

    reports_status = False  # no status line; a failure shows in the explanation
    experiment: GradientExperiment | None

    def __init__(self):
        import ipywidgets as widgets

        self.activation_dropdown = widgets.Dropdown(
            options=["identity", "relu", "gelu", "tanh", "sigmoid"], value="tanh",
            description="activation")
        self.backend_toggle = widgets.ToggleButtons(options=["numpy", "kernels"],
                                                    value="numpy", description="backward on")
        self._add_parts("Check")
        self._lay_out(
            widgets.HBox([self.activation_dropdown, self.backend_toggle, self.run_button]))

    def make_experiment(self) -> GradientExperiment:
        return GradientExperiment(self.activation_dropdown.value, self.backend_toggle.value)

    def _draw(self) -> None:
        """The eps plot, then the per-parameter table under it."""
        self.figure = eps_plot(self.last_result["sweep"])
        self._show(self.figure, text=self.last_result["check"].table())
        self.explanation.value = self._explanation_html()


__all__ = ["GradientDashboard", "GradientExperiment"]
