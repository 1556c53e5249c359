"""Twelve independent additions vs a chain of dependent ones: the welcome chapter's experiment.

Adding n numbers one after another is a chain: each addition needs the previous sum, so it
takes n - 1 steps however many workers there are. Done by n workers, the numbers are added in
pairs, then pairs of pairs: a tree of ceil(log2 n) rounds, each round's additions independent.

Both run for real, with gpulab's own dot kernels and y = 1 (so x · y is the sum of x):

- the chain: ``dot_grid_stride`` launched with 1 block of 1 thread, which loops over all n
  elements, adding one at a time;
- independent work, then a tree: ``dot_shared_tree`` with one thread per element in a single
  block (threads_per_block = the next power of two), which halves the active threads each round.

In the ``gpu`` tier both launches are timed with CUDA events; in the ``sim`` tier nothing is
timed as GPU time (the simulator runs the threads on this CPU) and the step counts are the model.
"""

from __future__ import annotations

import numpy as np

from gpulab import device, plots, reference, timing
from gpulab.experiments.dashboard import Dashboard

MAX_N = 1024  # one block: CUDA's limit of threads per block


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
    fig, ax = plots.new_figure(ax, (7.5, 4.5))
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



def max_n(tier: str | None = None) -> int:
    """Largest n the dashboard offers: 1024 on a GPU; 256 in the simulator (a 256-thread tree
    takes ~0.5 s there, 1024 threads ~2 s)."""
    return MAX_N if (tier or device.tier()) == "gpu" else 256


def tree_threads(n: int) -> int:
    """The tree kernel needs a power-of-two block: the smallest one with a thread per element."""
    return 1 << max(n - 1, 0).bit_length()


class IndependenceExperiment:
    """Sum n small whole numbers as a dependent chain and as independent work plus a tree.

    >>> result = IndependenceExperiment(12).run()                 # doctest: +SKIP
    >>> result["chain"]["steps"], result["tree"]["steps"]          # doctest: +SKIP
    (11, 4)
    """

    def __init__(self, n: int = 12, dtype=np.float32, seed: int = 0):
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= MAX_N:
            raise ValueError(f"n must be a whole number from 1 to {MAX_N} (one block of "
                             f"threads for the tree), not {n!r}")
        self.n = int(n)
        self.dtype = np.dtype(dtype)
        self.seed = seed
        self.tier = device.tier()
        self.last_result: dict | None = None

    def run(self) -> dict:
        """Run both launches; returns ``{"n", "values", "numpy_sum", "chain", "tree",
        "matches_numpy", "tier", "timing_note"}``; ``chain`` and ``tree`` hold the kernel,
        its launch (a LaunchConfig), the sum it computed, its steps and its GPU time."""
        from gpulab.kernels import dot as dot_kernels

        rng = np.random.default_rng(self.seed)
        values = rng.integers(1, 10, self.n).astype(self.dtype)  # whole numbers: sums are exact
        ones = np.ones_like(values)
        chain_steps, tree_steps = dependency_steps(self.n)
        runs = {
            "chain": ("grid_stride", 1, 1, chain_steps,
                      "1 block × 1 thread: one thread adds every element, one after another"),
            "tree": ("shared_tree", tree_threads(self.n), None, tree_steps,
                     f"1 block × {tree_threads(self.n)} threads: one thread per element, "
                     "then pairs are added in rounds"),
        }
        result = {"n": self.n, "values": values, "numpy_sum": float(np.sum(values, dtype=float)),
                  "tier": self.tier}
        for name, (method, threads, blocks, steps, description) in runs.items():
            config = dot_kernels.launch_config(self.n, method, threads, blocks)
            total = dot_kernels.dot(values, ones, method=method, threads_per_block=threads,
                                    blocks=blocks)
            result[name] = {
                "kernel": f"dot_{method}", "launch": config, "description": description,
                "sum": float(total), "steps": steps,
                "gpu_time": self._time(dot_kernels, method, config, values, ones),
            }
        result["matches_numpy"] = all(result[k]["sum"] == result["numpy_sum"]
                                      for k in ("chain", "tree"))
        result["timing_note"] = (
            "GPU times measured with CUDA events (launch overhead included)."
            if self.tier == "gpu" else
            "Not timed: the kernels ran in Numba's CUDA simulator on this CPU, and simulator "
            "time is not GPU time. The step counts are the model.")
        self.last_result = result
        return result

    def _time(self, dot_kernels, method, config, values, ones):
        if self.tier != "gpu":
            return None
        from numba import cuda

        kernel = getattr(dot_kernels, f"dot_{method}")
        d_x, d_y = cuda.to_device(values), cuda.to_device(ones)
        d_out = cuda.to_device(np.zeros(1, self.dtype))
        return timing.time_gpu(
            lambda: kernel[config.blocks, config.threads_per_block](d_x, d_y, d_out),
            name=f"dot_{method}", n=self.n)


def summary_html(result: dict) -> str:
    """A small table: which launch ran, its steps, the sum it got, its GPU time."""
    rows = []
    for name, title in (("chain", "dependent chain"), ("tree", "independent, then a tree")):
        run = result[name]
        config = run["launch"]
        time = run["gpu_time"]
        rows.append(
            f"<tr><td>{title}</td><td><code>{run['kernel']}[{config.blocks}, "
            f"{config.threads_per_block}]</code><br><small>{run['description']}</small></td>"
            f"<td>{run['steps']}</td><td>{run['sum']:g}</td>"
            f"<td>{'—' if time is None else f'{time.median_s * 1e6:.1f} µs'}</td></tr>")
    check = "✓ both equal" if result["matches_numpy"] else "✗ differs from"
    return (
        "<table><tr><th></th><th>launch that ran</th><th>steps</th><th>sum</th>"
        "<th>GPU time</th></tr>" + "".join(rows) + "</table>"
        f"<p>NumPy's sum: {result['numpy_sum']:g} ({check} NumPy). {result['timing_note']}</p>")


class IndependenceDashboard(Dashboard):
    """A slider for n, a Run button, the steps plot and what ran.

    Drive it from Python: ``d.n_slider.value = 20; d.run_button.click(); d.last_result``.
    """

    reports_status = False  # no status line; a failure shows in the summary
    experiment: IndependenceExperiment | None

    def __init__(self, n: int = 12):
        import ipywidgets as widgets

        self.tier = device.tier()
        self.n_slider = widgets.IntSlider(value=n, min=2, max=max_n(self.tier),
                                          description="n numbers",
                                          style={"description_width": "initial"})
        self.run_button = widgets.Button(description="Run both", button_style="primary",
                                         icon="play")
        self.output = widgets.Output()
        self.summary = widgets.HTML()
        self.run_button.on_click(lambda _button: self.run())
        self.widget = widgets.VBox([widgets.HBox([self.n_slider, self.run_button]),
                                    self.output, self.summary])

    def make_experiment(self) -> IndependenceExperiment:
        return IndependenceExperiment(self.n_slider.value)

    def _show_failure(self, message: str) -> None:
        self.summary.value = message

    def _draw(self) -> None:
        """The steps plot with n marked, and the table of what ran (no explanation)."""
        n = self.last_result["n"]
        self.figure = dependency_plot(n_max=max(32, n), n_marked=n)
        self._show(self.figure)
        self.summary.value = summary_html(self.last_result)


__all__ = ["IndependenceDashboard", "IndependenceExperiment", "max_n", "summary_html",
           "tree_threads"]
