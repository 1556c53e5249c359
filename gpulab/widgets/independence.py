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

from gpulab import bench, device, plots
from gpulab.widgets._dashboard import Dashboard

MAX_N = 1024  # one block: CUDA's limit of threads per block


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
        chain_steps, tree_steps = plots.dependency_steps(self.n)
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
        return bench.time_gpu(
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
        self.figure = plots.dependency_plot(n_max=max(32, n), n_marked=n)
        self._show(self.figure)
        self.summary.value = summary_html(self.last_result)


__all__ = ["IndependenceDashboard", "IndependenceExperiment", "max_n", "summary_html",
           "tree_threads"]
