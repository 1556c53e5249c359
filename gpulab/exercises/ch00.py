"""Chapter 00's exercises: how many blocks, and a first kernel you launch yourself.

Each check runs your code on random sizes, prints what it found and returns a
:class:`~gpulab.exercises.checks.CheckResult`; a failure names its seed so that
``check_...(your_code, seed=1234)`` repeats it.

- :func:`check_blocks_for` — ``blocks_for(n, threads_per_block)`` must return the number of
  blocks a one-thread-per-element launch needs: n divided by the block size, rounded **up**.
  Diagnoses: rounding down (the last elements get no thread), one block too many when n is a
  multiple of the block size, a float instead of a whole number, the arguments swapped.
- :func:`check_first_launch` — a kernel ``add_one(x, out)`` (``out[i] = x[i] + 1``, one thread
  per element, guarded) and the host function that launches it by hand,
  ``add_one_on_gpu(x) -> numpy array``: copy x to the device, allocate out there, choose
  threads and blocks, launch, synchronise, copy out back. The kernel is checked like every
  kernel of the course (random n not a multiple of the block, padding that catches a missing
  guard); the host function is run while :func:`watch_host_code` records its copies,
  allocations, launches and synchronisations. Diagnoses: too few blocks (``n // threads``),
  more than 1024 threads per block, NumPy arrays passed to the launch (Numba then copies them
  both ways behind your back), the device array returned instead of a copy on the host, no
  launch at all, the input changed in place.
"""

from __future__ import annotations

import numbers

import numpy as np

from gpulab import device
from gpulab.exercises.checks import (
    CheckFailedError,
    CheckResult,
    HostCodeWatch,
    HostLaunch,
    KernelSpy,
    NotAttemptedError,
    Trial,
    call_learner,
    default_threads_per_block,
    diagnose_vector,
    draw_size,
    run_check,
    run_elementwise,
    start_kernel,
    watch_host_code,
)
from gpulab.instruments import launchable

# Threads per block a GPU accepts: 1024 on every compute capability the course names (CUDA C++
# Programming Guide, "Compute Capabilities": maximum number of threads per block).
MAX_THREADS_PER_BLOCK = 1024

# --- exercise 1: how many blocks? --------------------------------------------------------------

BLOCKS_STUB_HINT = (
    "return how many blocks of threads_per_block threads it takes to give each of n elements "
    "a thread: a whole number, rounded up. The hints above the cell go step by step."
)
ROUND_UP_HINT = (
    "round up, not down: with `n // threads_per_block` the last `n % threads_per_block` "
    "elements get no thread. `(n + threads_per_block - 1) // threads_per_block` rounds up "
    "with whole numbers."
)


def _block_cases(rng: np.random.Generator) -> list[tuple[int, int]]:
    """(n, threads_per_block) pairs: partial last blocks, exact multiples, n smaller than one
    block, n = 1, and a billion elements."""
    cases = []
    for _ in range(6):
        threads = int(rng.choice([32, 64, 96, 128, 256, 512, 1024]))
        blocks = int(rng.integers(1, 5000))
        cases.append((blocks * threads + int(rng.integers(1, threads)), threads))  # partial
        cases.append((blocks * threads, threads))  # an exact multiple
    threads = int(rng.choice([128, 256]))
    cases += [(int(rng.integers(2, threads)), threads), (1, threads), (1_000_000_007, 256)]
    order = rng.permutation(len(cases))
    return [cases[k] for k in order]


def check_blocks_for(function, seed: int | None = None, show: bool = True) -> CheckResult:
    """Check ``function(n, threads_per_block)``: the number of blocks that gives each of n
    elements a thread, ``ceil(n / threads_per_block)``, as a whole number (``int``)."""

    def body(seed: int) -> str:
        cases = _block_cases(np.random.default_rng(seed))
        for n, threads in cases:
            got = call_learner(function, n, threads, stub_hint=BLOCKS_STUB_HINT,
                               call=f"blocks_for({n}, {threads}) (seed={seed})")
            expected = -(-n // threads)
            call = f"blocks_for({n}, {threads})"
            where = f"(seed={seed})"
            if isinstance(got, bool) or not isinstance(got, numbers.Integral):
                if isinstance(got, numbers.Real) and float(got) == expected:
                    raise CheckFailedError(
                        f"{call} returned {got!r}, the right number but a "
                        f"{type(got).__name__}: a launch needs a whole number of blocks, and "
                        f"`kernel[{got!r}, {threads}]` fails {where}.",
                        "use integer division `//` (or wrap the result in `int(...)`).")
                raise CheckFailedError(
                    f"{call} returned {got!r} ({type(got).__name__}); it should return the "
                    f"whole number {expected} {where}.",
                    "return an int: the number of blocks, rounded up.")
            got = int(got)
            if got == expected:
                continue
            summary = f"{call} returned {got}, expected {expected}"
            if got == n // threads and n % threads:
                raise CheckFailedError(
                    f"{summary}: {got} blocks of {threads} threads are {got * threads} threads, "
                    f"so the last {n - got * threads} of the {n} elements get no thread "
                    f"{where}.", ROUND_UP_HINT)
            if got == n // threads + 1 and n % threads == 0:
                raise CheckFailedError(
                    f"{summary}: {n} is exactly {n // threads} blocks of {threads}, so block "
                    f"{got - 1} would have no element at all {where}.",
                    "`n // threads_per_block + 1` adds a block even when n divides evenly: "
                    "`(n + threads_per_block - 1) // threads_per_block` does not.")
            if got == -(-threads // n):
                raise CheckFailedError(
                    f"{summary}: that is threads_per_block divided by n, the arguments the "
                    f"wrong way round {where}.", "divide n by threads_per_block.")
            if got * threads < n:
                raise CheckFailedError(
                    f"{summary}: {got} blocks of {threads} threads are too few for {n} "
                    f"elements {where}.", ROUND_UP_HINT)
            raise CheckFailedError(
                f"{summary}: {got} blocks of {threads} threads are {got * threads - n} threads "
                f"more than {n} elements need; one block fewer would still cover them "
                f"{where}.", ROUND_UP_HINT)
        return (f"all {len(cases)} cases right, from n = 1 to {max(n for n, _ in cases):,} "
                f"(exact multiples of the block size included; seed={seed}).")

    return run_check("blocks_for", body, seed, show)


# --- exercise 2: your first kernel, launched by hand ----------------------------------------------

ADD_ONE_STUB_HINT = (
    "each thread finds its own element from its block and thread index, does nothing if that "
    "element is past the end of x, and otherwise writes the element plus one into out. The "
    "hints above the cell go step by step."
)
HOST_STUB_HINT = (
    "do the five steps of section 5 in order (copy in, allocate, choose the grid, launch and "
    "wait, copy back) and return the result as a NumPy array."
)
COPY_IN_HINT = (
    "copy the input yourself and allocate the output on the device: `d_x = "
    "cuda.to_device(x)`, `d_out = cuda.device_array_like(d_x)`, and launch with "
    "`add_one[blocks, threads](d_x, d_out)`."
)
# Host-function sizes: odd, so no power-of-two block size divides them.
HOST_SIZE_RANGE = {"sim": (201, 601), "gpu": (100_001, 1_000_001)}


def _kernel_name(kernel) -> str:
    function = getattr(launchable(kernel), "py_func", None)
    return getattr(function, "__name__", "your kernel")


def _check_add_one_kernel(kernel, seed: int) -> Trial:
    start_kernel(kernel, 2, ADD_ONE_STUB_HINT)
    trial = Trial.draw("check_first_launch", seed, default_threads_per_block(), np.float32)
    x = trial.uniform(-5, 5)
    out = run_elementwise(kernel, trial, x)
    failure = diagnose_vector(
        x + np.float32(1), out, trial,
        patterns={
            "a copy of x": (x, "add one: `out[i] = x[i] + 1`."),
            "x[i] - 1": (x - np.float32(1), "add one, don't subtract: `out[i] = x[i] + 1`."),
            "x[i] + 2": (x + np.float32(2), "add 1, not 2."),
            "2 * x[i]": (x * np.float32(2), "add one: `out[i] = x[i] + 1`."),
        },
    )
    if failure:
        raise failure
    return trial


def _host_size(rng: np.random.Generator) -> int:
    n = draw_size(rng, 2, HOST_SIZE_RANGE["gpu" if device.tier() == "gpu" else "sim"])
    return n if n % 2 else n + 1


def _describe_events(watch: HostCodeWatch) -> str:
    names = {"to_device": "copy to the device", "allocate": "allocation on the device",
             "launch": "launch", "synchronize": "synchronize", "copy_to_host": "copy back"}
    steps = []
    for kind in ("to_device", "allocate", "launch", "synchronize", "copy_to_host"):
        count = watch.count(kind)
        if count:
            steps.append(f"{count} {names[kind]}" + ("s" if count > 1 and kind != "synchronize"
                                                     else ""))
    return ", ".join(steps) or "no copies, allocations or launches"


def check_launch_by_hand(run, kernel, n: int, seed: int, call: str):
    """Run the learner's host function ``run(x)`` on n random float32 values while watching its
    host code; fail with the mistake it made (see the module docstring) or return
    ``(x, result, watch)``."""
    rng = np.random.default_rng([seed, 1])
    x = rng.uniform(-5, 5, n).astype(np.float32)
    given = x.copy()
    name = _kernel_name(kernel)
    where = f"n={n}, seed={seed}"
    with watch_host_code(run, [kernel]) as watch:
        got = call_learner(run, given, stub_hint=HOST_STUB_HINT, call=f"{call} ({where})")
    launches = watch.launches
    if got is None:
        raise CheckFailedError(
            f"{call} returned None ({where}).",
            "end with `return d_out.copy_to_host()`: the caller needs the result on the host.")
    if not isinstance(got, np.ndarray) and hasattr(got, "copy_to_host"):
        raise CheckFailedError(
            f"{call} returned the device array itself: its values are still in the GPU's "
            f"memory, where NumPy and the rest of your program cannot read them ({where}).",
            "copy it back and return that: `return d_out.copy_to_host()`.")
    if not launches:
        done = ("it returned the right values, computed without the GPU"
                if isinstance(got, np.ndarray) and got.shape == x.shape
                and np.allclose(got, x + np.float32(1)) else "")
        raise CheckFailedError(
            f"{call} never launched `{name}`" + (f": {done}" if done else "") + f" ({where}).",
            f"launch your kernel by its name: `{name}[blocks, threads](d_x, d_out)`.")
    for launch in launches:
        if launch.numpy_arguments:
            raise CheckFailedError(
                f"{call} launched `{name}` with NumPy arrays (argument(s) "
                f"{', '.join(str(k + 1) for k in launch.numpy_arguments)}): Numba then copies "
                "each of them to the GPU before the launch and back after it, hidden from you "
                "— the copies this exercise asks you to write ({where}).", COPY_IN_HINT)
        if launch.threads_per_block > MAX_THREADS_PER_BLOCK:
            raise CheckFailedError(
                f"{call} launched blocks of {launch.threads_per_block} threads. The simulator "
                f"runs that, but a GPU refuses blocks of more than {MAX_THREADS_PER_BLOCK} "
                f"threads ({where}).", "use 128 or 256 threads per block.")
    biggest = max(launches, key=lambda launch: launch.total_threads)
    if biggest.total_threads < n:
        raise CheckFailedError(
            f"{call} launched {biggest.blocks} block(s) of {biggest.threads} threads = "
            f"{biggest.total_threads} threads for n = {n} elements: the last "
            f"{n - biggest.total_threads} elements got no thread ({where}).",
            "round the number of blocks up: `blocks = (n + threads - 1) // threads` "
            "(exercise 1's blocks_for).")
    if not isinstance(got, np.ndarray):
        raise CheckFailedError(
            f"{call} returned {type(got).__name__}, not a NumPy array ({where}).",
            "return `d_out.copy_to_host()`.")
    if not np.array_equal(given, x):
        raise CheckFailedError(
            f"{call} changed its input x ({where}).",
            "leave x as it is: the kernel writes into a separate output array.")
    if got.shape != x.shape:
        raise CheckFailedError(
            f"{call} returned an array of shape {got.shape}, not {x.shape} ({where}).",
            "allocate the output like the input: `cuda.device_array_like(d_x)`.")
    return x, got, watch


def check_first_launch(kernel, run, seed: int | None = None, show: bool = True) -> CheckResult:
    """Check the kernel ``kernel(x, out)`` (``out[i] = x[i] + 1``, one thread per element,
    guarded) and the host function ``run(x)`` that launches it by hand and returns the result
    as a NumPy array (see the module docstring for what is checked and diagnosed)."""

    def body(seed: int) -> str:
        if run is None or run is Ellipsis:
            raise NotAttemptedError("there is no host function to check yet.", HOST_STUB_HINT)
        trial = _check_add_one_kernel(kernel, seed)
        n = _host_size(np.random.default_rng([seed, 0]))
        name = getattr(run, "__name__", "your function")
        call = f"{name}(x) with n = {n}"
        x, got, watch = check_launch_by_hand(run, kernel, n, seed, call)
        launch = watch.launches[-1]
        threads = launch.threads_per_block
        as_launched = Trial("check_first_launch", seed, n, threads, np.dtype(np.float32),
                            np.random.default_rng(seed))
        failure = diagnose_vector(x + np.float32(1), got.astype(np.float32, copy=False),
                                  as_launched)
        if failure:
            raise CheckFailedError(f"{call}: {failure.message}", failure.hint)
        note = ("" if watch.after_last_launch("synchronize") else
                " You did not call `cuda.synchronize()`: `copy_to_host` waited for the kernel "
                "anyway, but when you time a kernel (chapter 02) you need it.")
        return (f"the kernel is right ({trial.launched}, n={trial.n}), and your host code gave "
                f"{n} right values: {_describe_events(watch)}; {launch.blocks} blocks of "
                f"{launch.threads} threads for n = {n} (seed={seed}).{note}")

    return run_check("first_launch", body, seed, show)


__all__ = [
    "HostCodeWatch", "HostLaunch", "KernelSpy", "check_blocks_for", "check_first_launch",
    "check_launch_by_hand", "watch_host_code",
]
