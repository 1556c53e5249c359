"""Twelve independent additions vs a chain of dependent ones: the welcome chapter's experiments.

**The classroom** (:class:`HelpersExperiment`). A teacher has twelve
addition questions and p helpers. The questions are independent (7 + 2 does not wait for
3 + 8), so the helpers share them: in each round every helper answers one, and twelve questions
take ceil(12 / p) rounds. Then the teacher asks for a running total: add the first number, add
the second to that answer, and so on. Each addition needs the previous sum, so the twelve
additions take twelve rounds however many helpers there are; all but one of them wait.

Both run for real, one **kernel launch per round**, with gpulab's ``saxpy`` kernel and a = 1
(``out[i] = x[i] + y[i]``) launched as 1 block of p threads (the helpers):

- independent questions: launch r gets the slice of questions r·p … r·p + p − 1, and thread t
  answers question r·p + t; the rounds are the launches that ran, ceil(questions / p);
- the chain: launch k adds number k to the total that launch k − 1 wrote (``y`` is that
  one-element slice), so it cannot start before the previous launch has finished; thread 0
  answers, the other p − 1 threads have no element (the guard idles them): ``questions``
  launches whatever p is.

**Re-cutting a sum** (:class:`IndependenceExperiment`). Adding n numbers one after another is a
chain: n - 1 steps however many workers there are. When only the total matters, n workers can
add the numbers in pairs, then pairs of pairs: a tree of ceil(log2 n) rounds, each round's
additions independent. Both run for real too, with gpulab's own dot kernels and y = 1 (so
x · y is the sum of x):

- the chain: ``dot_grid_stride`` launched with 1 block of 1 thread, which loops over all n
  elements, adding one at a time;
- independent work, then a tree: ``dot_shared_tree`` with one thread per element in a single
  block (threads_per_block = the next power of two), which halves the active threads each round.

In the ``gpu`` tier the launches are timed with CUDA events; in the ``sim`` tier nothing is
timed as GPU time (the simulator runs the threads on this CPU): the rounds are counted from the
launches that ran, and the tree's step counts are the model.
"""

from __future__ import annotations

import numpy as np

from gpulab import device, plots, reference, timing
from gpulab.experiments.dashboard import Dashboard
from gpulab.kernels.arrays import whole_number
from gpulab.kernels.launch import one_thread_per_element

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


# --- the classroom: twelve questions, p helpers -------------------------------------------------

MAX_QUESTIONS = 64  # the figure's grid stays readable; rounds are launches, so keep them few
MAX_HELPERS = 32  # one warp


def helper_rounds(questions: int, helpers: int) -> tuple[int, int]:
    """(rounds for independent questions, rounds for the dependent chain) with ``helpers``
    helpers: ceil(questions / helpers), and ``questions`` whatever the helpers."""
    return -(-questions // helpers), questions


class HelpersExperiment:
    """The classroom: ``questions`` additions shared by ``helpers`` helpers, first as independent
    questions, then as a dependent chain (a running total). One kernel launch is one round; the
    rounds are counted from the launches that ran (see the module docstring).

    >>> result = HelpersExperiment(12, helpers=4).run()                      # doctest: +SKIP
    >>> result["independent"]["rounds"], result["chain"]["rounds"]            # doctest: +SKIP
    (3, 12)
    """

    def __init__(self, questions: int = 12, helpers: int = 4, dtype=np.float32, seed: int = 0):
        self.questions = whole_number("questions", questions, 1, MAX_QUESTIONS)
        self.helpers = whole_number("helpers", helpers, 1, MAX_HELPERS,
                                    " (the helpers are the threads of one warp)")
        self.dtype = np.dtype(dtype)
        self.seed = seed
        self.tier = device.tier()
        self.last_result: dict | None = None

    def run(self) -> dict:
        """Run both plans; returns ``{"questions", "helpers", "a", "b", "numbers",
        "independent", "chain", "matches_numpy", "tier", "timing_note"}``. ``independent`` and
        ``chain`` hold the kernel, the launch (a LaunchConfig), the rounds (launches that ran),
        the schedule (per round, the ``(thread, question)`` pairs answered), the answers, the
        launch's description and its GPU time (CUDA events; None in the simulator)."""
        from numba import cuda

        from gpulab.kernels import memory

        q, p = self.questions, self.helpers
        rng = np.random.default_rng(self.seed)
        a, b, numbers = (rng.integers(1, 10, q).astype(self.dtype) for _ in range(3))
        one = self.dtype.type(1)
        d_a, d_b, d_numbers = cuda.to_device(a), cuda.to_device(b), cuda.to_device(numbers)
        d_answers = cuda.device_array(q, self.dtype)
        d_totals = cuda.device_array(q, self.dtype)
        d_zero = cuda.to_device(np.zeros(1, self.dtype))

        def independent() -> list[list[tuple[int, int]]]:
            schedule = []
            for first in range(0, q, p):  # one launch per round: p helpers, p questions
                last = min(first + p, q)
                memory.saxpy[1, p](one, d_a[first:last], d_b[first:last],
                                   d_answers[first:last])
                schedule.append([(t, first + t) for t in range(last - first)])
            return schedule

        def chain() -> list[list[tuple[int, int]]]:
            schedule = []
            for k in range(q):  # launch k reads the total launch k - 1 wrote
                previous = d_zero if k == 0 else d_totals[k - 1:k]
                memory.saxpy[1, p](one, d_numbers[k:k + 1], previous, d_totals[k:k + 1])
                schedule.append([(0, k)])
            return schedule

        result = {"questions": q, "helpers": p, "a": a, "b": b, "numbers": numbers,
                  "tier": self.tier}
        plans = {
            "independent": (independent, d_answers, a + b,
                            f"round r: threads 0…{p - 1} answer questions r·{p} … r·{p} + "
                            f"{p - 1} at once"),
            "chain": (chain, d_totals, np.cumsum(numbers, dtype=self.dtype),
                      "launch k adds number k to the total launch k − 1 wrote: thread 0 "
                      f"answers, {p - 1} thread{'s' if p != 2 else ''} idle"),
        }
        for name, (plan, d_out, expected, description) in plans.items():
            schedule = plan()
            answers = d_out.copy_to_host()
            result[name] = {
                "kernel": "saxpy", "launch": one_thread_per_element(p, p),
                "description": description, "schedule": schedule, "rounds": len(schedule),
                "answers": answers, "expected": expected,
                "matches_numpy": bool(np.array_equal(answers, expected)),
                "gpu_time": self._time(plan, name),
            }
        result["matches_numpy"] = all(result[k]["matches_numpy"] for k in plans)
        result["timing_note"] = (
            "GPU times measured with CUDA events around all the rounds' launches (launch "
            "overhead included: at this size it is nearly all of it)."
            if self.tier == "gpu" else
            "Not timed: the kernels ran in Numba's CUDA simulator on this CPU, and simulator "
            "time is not GPU time. The rounds are the launches that ran.")
        self.last_result = result
        return result

    def _time(self, plan, name: str):
        if self.tier != "gpu":
            return None
        return timing.time_gpu(plan, repeats=10, name=f"{name}, {self.helpers} helpers",
                               n=self.questions)


def helpers_plot(result: dict, max_rows: int = 8):
    """The rounds of one :class:`HelpersExperiment` run, on one time axis: who answered which
    question in each round (independent questions, then the running total), and below, rounds
    against the number of helpers. At most ``max_rows`` helpers are drawn; the rest are elided.
    """
    import matplotlib.pyplot as plt

    q, p = result["questions"], result["helpers"]
    rows = min(p, max_rows)
    fig, axes = plt.subplot_mosaic(
        [["independent"], ["chain"], ["rounds"]], figsize=(10, 3.6 + 0.55 * rows),
        layout="constrained", gridspec_kw={"height_ratios": [rows + 1.2, rows + 1.2, 6]})
    titles = {"independent": f"{q} independent questions shared by {p} helper"
                             f"{'s' if p != 1 else ''}: {result['independent']['rounds']} "
                             f"round{'s' if result['independent']['rounds'] != 1 else ''}",
              "chain": f"a running total (each addition needs the previous sum): "
                       f"{result['chain']['rounds']} rounds"}
    for name in ("independent", "chain"):
        ax = axes[name]
        _draw_schedule(ax, result[name]["schedule"], p, rows, q, result, name)
        ax.set_title(titles[name], fontsize=10, loc="left")
    ax = axes["rounds"]
    helpers = np.arange(1, max(q, p) + 1)
    ax.step(helpers, [helper_rounds(q, int(h))[0] for h in helpers], "o-", where="mid", ms=3,
            label=f"independent questions: ⌈{q} / p⌉ rounds")
    ax.plot(helpers, [q] * len(helpers), "s-", ms=3, label=f"running total: {q} rounds, any p")
    ax.plot([p, p], [result["independent"]["rounds"], result["chain"]["rounds"]], "k*", ms=11,
            label=f"this run (p = {p}): the launches counted")
    ax.set_xlabel("p, helpers (threads per launch)")
    ax.set_ylabel("rounds (launches)")
    ax.set_ylim(0, q * 1.15 + 1)
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8.5, loc="center right")
    return fig


def _draw_schedule(ax, schedule, helpers, rows, width, result, name):
    """Rounds as columns (``width`` of them, the same scale for both plans), helpers as rows; a
    cell names the question that helper answered in that round."""
    from matplotlib.patches import Rectangle

    small = width > 16
    for r, answered in enumerate(schedule):
        busy = dict(answered)
        for t in range(rows):
            question = busy.get(t)
            colour = plots.BUSY_COLOUR if question is not None else plots.IDLE_COLOUR
            ax.add_patch(Rectangle((r + 0.05, t + 0.05), 0.9, 0.9, color=colour))
            if question is None:
                label = "" if small else "waits"
            elif name == "independent":
                label = (f"Q{question + 1}" if small else
                         f"Q{question + 1}\n{result['a'][question]:g}+{result['b'][question]:g}")
            else:
                total = result["chain"]["answers"][question]
                label = (f"+{result['numbers'][question]:g}" if small else
                         f"+{result['numbers'][question]:g}\n={total:g}")
            ax.text(r + 0.5, t + 0.5, label, ha="center", va="center",
                    fontsize=6.5 if small else 7.5,
                    color="black" if question is not None else "#888888")
    if len(schedule) < width:
        ax.text((len(schedule) + width) / 2, rows / 2, f"done after {len(schedule)} round"
                f"{'s' if len(schedule) != 1 else ''}", ha="center", va="center", fontsize=10,
                color="#2a6f2a")
    if rows < helpers:
        ax.text(width / 2, rows + 0.45, f"(helpers t{rows}–t{helpers - 1} not drawn: they do "
                "the same)", ha="center", va="center", fontsize=8, color="#555555")
    ax.set_xlim(0, width)
    ax.set_ylim(rows + (0.9 if rows < helpers else 0), 0)
    labels = [str(r + 1) if width <= 24 or (r + 1) % 4 == 0 else "" for r in range(width)]
    ax.set_xticks([r + 0.5 for r in range(width)], labels, fontsize=7)
    ax.set_yticks([t + 0.5 for t in range(rows)], [f"t{t}" for t in range(rows)], fontsize=7)
    ax.set_xlabel("round (one kernel launch)", fontsize=8.5)
    ax.set_ylabel("helper\n(thread)", fontsize=8.5)
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)


def helpers_html(result: dict) -> str:
    """A small table: each plan's launches, rounds, answers checked against NumPy, GPU time."""
    rows = []
    for name, title, check in (
            ("independent", "independent questions", "all answers = NumPy's a + b"),
            ("chain", "running total (a chain)", "every total = NumPy's cumsum")):
        run = result[name]
        time = run["gpu_time"]
        ok = "✓" if run["matches_numpy"] else "✗ differs"
        rows.append(
            f"<tr><td>{title}</td><td><code>saxpy[1, {result['helpers']}]</code> × "
            f"{run['rounds']}<br><small>{run['description']}</small></td>"
            f"<td>{run['rounds']}</td><td>{ok} <small>{check}</small></td>"
            f"<td>{'—' if time is None else f'{time.median_s * 1e6:.1f} µs'}</td></tr>")
    total = result["chain"]["answers"][-1]
    return ("<table><tr><th></th><th>launches that ran</th><th>rounds</th><th>answers</th>"
            "<th>GPU time</th></tr>" + "".join(rows) + "</table>"
            f"<p>The running total ends at {total:g}. {result['timing_note']}</p>")


class HelpersDashboard(Dashboard):
    """Sliders for the questions and the helpers, a Run button, the rounds and what ran.

    Drive it from Python: ``d.helpers_slider.value = 6; d.run_button.click(); d.last_result``.
    """

    reports_status = False  # no status line; a failure shows in the summary
    experiment: HelpersExperiment | None

    def __init__(self, questions: int = 12, helpers: int = 4):
        import ipywidgets as widgets

        style = {"description_width": "initial"}
        self.questions_slider = widgets.IntSlider(value=questions, min=1, max=MAX_QUESTIONS // 2,
                                                  description="questions", style=style)
        self.helpers_slider = widgets.IntSlider(value=helpers, min=1, max=MAX_HELPERS,
                                                description="p helpers", style=style)
        self._add_parts("Run both")
        self.summary = self.explanation  # the rounds and what ran; a failure shows here too
        self._lay_out(widgets.HBox([self.questions_slider, self.helpers_slider, self.run_button]))

    def make_experiment(self) -> HelpersExperiment:
        return HelpersExperiment(self.questions_slider.value, self.helpers_slider.value)

    def _draw(self) -> None:
        self.figure = helpers_plot(self.last_result)
        self._show(self.figure)
        self.summary.value = helpers_html(self.last_result)


__all__ = ["HelpersDashboard", "HelpersExperiment",
           "IndependenceExperiment", "helper_rounds", "helpers_html", "helpers_plot", "max_n",
           "summary_html", "tree_threads"]
