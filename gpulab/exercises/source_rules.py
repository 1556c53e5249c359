"""What the learner's kernel is and what its source says, read before (or besides) running
it. :func:`kernel_source` checks that it is a ``@cuda.jit`` kernel with the exercise's number of
arguments; :func:`start_kernel`, every kernel check's first steps, also rejects

- the stub, as *not attempted* (:func:`raises_not_implemented`);
- code only the simulator runs: it executes kernels as plain Python, so lists, NumPy array
  creation and f-strings would run there (:func:`simulator_only_code`; the kernel is also
  compiled for a real GPU, by :func:`gpulab.exercises.running.launch`);
- a barrier some threads skip: ``cuda.syncthreads()`` inside a branch, or in a loop whose trip
  count depends on the thread, is a deadlock or undefined behaviour on a GPU, but the simulator
  lets the threads that skip it go (:func:`barrier_problems`).

The method rules that read the source live here too: plain (non-atomic) writes to an output
many threads update (:func:`plain_writes_to`: the simulator runs a block's threads one after
another and hides most races), how often a function is called (:func:`count_calls`), a
hard-coded block size (:func:`hard_coded_block`) or problem size (:func:`hard_coded_size`) and
the guards (:func:`compares_with_shape`).
"""

from __future__ import annotations

import ast
import inspect
import math
import textwrap
from collections.abc import Callable
from dataclasses import dataclass

from gpulab import device
from gpulab.exercises.compiling import ARRAY_FUNCTIONS, SIMULATOR_ONLY_HINT
from gpulab.exercises.mistakes import Mistake
from gpulab.exercises.results import STUB_MESSAGE, CheckFailedError, NotAttemptedError
from gpulab.instruments import is_device_function, python_function

BARRIER_IN_BRANCH = (
    "barrier inside a branch: on a GPU the threads that skip it never arrive — a deadlock or "
    "undefined behaviour"
)


BARRIER_HINT = (
    "put `cuda.syncthreads()` outside any `if`: every thread of the block must reach it. Let "
    "the `if` guard only the memory accesses (threads past the end can write 0 to shared "
    "memory), and put the barrier after it."
)
SHARED_BARRIER_HINT = (
    "after the threads fill shared memory, and before any of them reads what the others wrote, "
    "every thread of the block must wait at a barrier (and again before the array is filled "
    "anew)."
)


BARRIER_LOOP_HINT = (
    "every thread must run a loop that holds a barrier the same number of times: take its bounds "
    "from `cuda.blockDim`, the arguments or constants (the same for every thread of the block), "
    "not from `cuda.threadIdx` or `cuda.grid`."
)


BARRIER_EXIT_HINT = (
    "a thread that returns (or breaks out of the loop) early never arrives at the barrier the "
    "others wait at: instead of leaving, let it skip only its memory accesses (or write 0 to "
    "shared memory) and still reach every barrier."
)


# --- the kernel and its source ----------------------------------------------------------------


@dataclass
class KernelSource:
    """The kernel's Python function and, when available, its parsed source."""

    function: Callable
    source: str | None
    tree: ast.FunctionDef | None

    @property
    def parameters(self) -> list[str]:
        try:
            return list(inspect.signature(self.function).parameters)
        except (TypeError, ValueError):
            return []

    def line(self, node: ast.AST) -> str:
        lines = (self.source or "").splitlines()
        number = getattr(node, "lineno", 0)
        return lines[number - 1].strip() if 0 < number <= len(lines) else ""

    def walk(self):
        return ast.walk(self.tree) if self.tree is not None else iter(())


def kernel_source(kernel, parameter_count: int) -> KernelSource:
    """Check that ``kernel`` is a ``@cuda.jit`` kernel taking ``parameter_count`` arguments;
    raise :class:`CheckFailedError` or :class:`NotAttemptedError` with an explanation otherwise."""
    if kernel is None or kernel is Ellipsis:
        raise NotAttemptedError(
            "there is no kernel to check yet.",
            "write the kernel in the cell above, run that cell, then pass the kernel to the check.",
        )
    function = python_function(kernel)
    if function is None:
        if inspect.isfunction(kernel):
            raise CheckFailedError(
                f"`{kernel.__name__}` is a plain Python function, not a CUDA kernel.",
                "put `@cuda.jit` on the line above `def`, run the cell again, and pass the kernel.",
            )
        raise CheckFailedError(
            f"the check needs your `@cuda.jit` kernel, but got {type(kernel).__name__} "
            f"{kernel!r:.60}.",
            "pass the kernel itself, without launching it: `check(my_kernel)`, "
            "not `check(my_kernel[blocks, threads](...))`.",
        )
    if is_device_function(kernel):
        raise CheckFailedError(
            f"`{function.__name__}` is a device function (`@cuda.jit(device=True)`), which only "
            "other kernels can call.",
            "write it as a kernel: plain `@cuda.jit`, no return value, results written to `out`.",
        )
    try:
        source = textwrap.dedent(inspect.getsource(function))
        tree = next(
            node for node in ast.parse(source).body if isinstance(node, ast.FunctionDef)
        )
    except (OSError, TypeError, SyntaxError, StopIteration):
        source, tree = None, None
    result = KernelSource(function, source, tree)
    names = result.parameters
    if names and len(names) != parameter_count:
        raise CheckFailedError(
            f"`{function.__name__}` takes {len(names)} argument(s) ({', '.join(names)}), but "
            f"this exercise's kernel takes {parameter_count}.",
            "keep the signature the exercise gives.",
        )
    return result


def raises_not_implemented(kernel: KernelSource) -> bool:
    """True when the kernel still contains ``raise NotImplementedError`` (the stub)."""
    for node in kernel.walk():
        if isinstance(node, ast.Raise) and node.exc is not None:
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(target, ast.Name) and target.id == "NotImplementedError":
                return True
    return False


_PYTHON_CONTAINERS = {"list", "dict", "set", "sorted", "str", "format"}


def simulator_only_code(kernel: KernelSource) -> list[str]:
    """Lines of the kernel that run in the simulator (plain Python) but cannot compile for a
    GPU: Python lists/dicts/sets, NumPy array creation or reductions, string formatting."""
    found: list[str] = []

    def note(node, what):
        found.append(f"`{kernel.line(node)}` {what}")

    for node in kernel.walk():
        if isinstance(node, (ast.List, ast.ListComp)):
            note(node, "creates a Python list")
        elif isinstance(node, (ast.Dict, ast.DictComp, ast.Set, ast.SetComp)):
            note(node, "creates a Python dict or set")
        elif isinstance(node, ast.JoinedStr):
            note(node, "formats a string (f-string)")
        elif isinstance(node, ast.Call):
            func = node.func
            if (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id in ("np", "numpy")
                and func.attr in ARRAY_FUNCTIONS
            ):
                note(node, f"calls np.{func.attr}, which needs NumPy arrays on the CPU")
            elif isinstance(func, ast.Name) and func.id in _PYTHON_CONTAINERS:
                note(node, f"calls {func.id}()")
            elif (
                isinstance(func, ast.Attribute)
                and func.attr == "format"
                and isinstance(func.value, ast.Constant)
            ):
                note(node, "formats a string (str.format)")
    return list(dict.fromkeys(found))  # keep order, drop repeats


# --- method rules read from the source --------------------------------------------------------


def count_calls(kernel: KernelSource, name: str) -> int:
    """How many call sites of ``cuda.<name>`` / ``<name>`` the kernel's source has."""
    count = 0
    for node in kernel.walk():
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            count += called == name
    return count


def plain_writes_to(kernel: KernelSource, parameter: str) -> list[str]:
    """Source lines that write ``parameter[...]`` with a plain assignment (``=``, ``+=``), not
    through an atomic: when many threads do that to one element, it is a data race."""
    lines = []
    for node in kernel.walk():
        targets = (
            node.targets if isinstance(node, ast.Assign)
            else [node.target] if isinstance(node, ast.AugAssign)
            else []
        )
        for target in targets:
            if (
                isinstance(target, ast.Subscript)
                and isinstance(target.value, ast.Name)
                and target.value.id == parameter
            ):
                lines.append(kernel.line(node))
    return lines


def adds_into(kernel: KernelSource, parameter: str) -> list[ast.AugAssign]:
    """The statements that add into ``parameter[...]`` (``out[i] += ...``): they read what the
    array held before, which for a new device array is whatever was in memory."""
    return [node for node in kernel.walk()
            if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Subscript)
            and isinstance(node.target.value, ast.Name) and node.target.value.id == parameter]


def is_typed_in_count(node: ast.AST) -> bool:
    """True when ``node`` is a whole number above 1 written in the source (not a bool)."""
    return (isinstance(node, ast.Constant) and isinstance(node.value, int)
            and not isinstance(node.value, bool) and node.value > 1)


def typed_in_count_names(source: KernelSource) -> set[str]:
    """The names that hold a whole number above 1 typed in: bound in the kernel only to such
    numbers (``C = 10``), or never bound in the kernel and a module global of the kernel's
    function holding one (``NUM_CLASSES = 10``)."""
    bound: dict[str, list[ast.AST | None]] = {}
    for node in source.walk():
        if isinstance(node, ast.Assign):
            for target in node.targets:
                value = node.value if isinstance(target, ast.Name) else None
                for name in _assigned_names(target):
                    bound.setdefault(name, []).append(value)
        elif isinstance(node, ast.AnnAssign | ast.AugAssign | ast.NamedExpr):
            value = node.value if isinstance(node, ast.AnnAssign) else None
            for name in _assigned_names(node.target):
                bound.setdefault(name, []).append(value)
        elif isinstance(node, ast.For | ast.comprehension):
            for name in _assigned_names(node.target):
                bound.setdefault(name, []).append(None)
    names = {name for name, values in bound.items()
             if all(value is not None and is_typed_in_count(value) for value in values)}
    module = getattr(source.function, "__globals__", {}) or {}
    return names | {node.id for node in source.walk()
                    if isinstance(node, ast.Name) and node.id not in bound
                    and node.id not in source.parameters
                    and is_typed_in_count(ast.Constant(module.get(node.id)))}


def hard_coded_block(source: KernelSource) -> str | None:
    """The first line that multiplies ``cuda.blockIdx`` by a number, or by a name holding a
    typed-in one (``BS = 64``, :func:`typed_in_count_names`), or shifts it left by one
    (``blockIdx.x << 6``, 64 threads assumed): a hard-coded block size."""
    names = None
    for node in source.walk():
        shifted = isinstance(node, ast.BinOp) and isinstance(node.op, ast.LShift)
        if shifted and "blockIdx" not in ast.dump(node.left):
            continue  # the block index must be what is shifted
        if isinstance(node, ast.BinOp) and (shifted or isinstance(node.op, ast.Mult)):
            sides = (node.left, node.right)
            if not any("blockIdx" in ast.dump(side) for side in sides):
                continue
            if any(isinstance(side, ast.Constant) for side in sides):
                return source.line(node)
            names = typed_in_count_names(source) if names is None else names
            if any(isinstance(side, ast.Name) and side.id in names for side in sides):
                return source.line(node)
    return None


def _halving_loop_tests(source: KernelSource) -> set[int]:
    """The ids of the tests of ``while`` loops that halve the variable they test (``while s >
    16: ... s //= 2``): a tree's stride stopping at a warp, not a problem size."""
    tests = set()
    for node in source.walk():
        if isinstance(node, ast.While):
            halved = {statement.target.id for statement in ast.walk(node)
                      if isinstance(statement, ast.AugAssign)
                      and isinstance(statement.op, ast.FloorDiv | ast.RShift)
                      and isinstance(statement.target, ast.Name)}
            if any(isinstance(name, ast.Name) and name.id in halved
                   for name in ast.walk(node.test)):
                tests.add(id(node.test))
    return tests


def range_over_typed_in_count(source: KernelSource | None,
                              any_argument: bool = False) -> str | None:
    """The first line with a ``range(...)`` whose end is a whole number above 1 typed in, or a
    name holding one (in the kernel or a module global: :func:`typed_in_count_names`); with
    ``any_argument``, any of its arguments (``range(first, n, 64)``). A size or count the
    arrays give, typed into the kernel."""
    if source is None:
        return None
    names = typed_in_count_names(source)
    for node in source.walk():
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "range" and node.args):
            ends = node.args if any_argument else [
                node.args[0] if len(node.args) == 1 else node.args[1]]
            if any(is_typed_in_count(end) or isinstance(end, ast.Name) and end.id in names
                   for end in ends):
                return source.line(node)
    return None


def hard_coded_size(source: KernelSource) -> str | None:
    """The first line that compares a variable used as an index (it appears in a subscript:
    ``x[i]``) with a whole number bigger than 1 (``if i < 300:``): a problem size typed into
    the kernel. A halving loop's test (``while s > 16``) is not one, nor a value's test
    against a threshold (``if v > 65504:``, v never an index)."""
    indices = {name.id for node in source.walk() if isinstance(node, ast.Subscript)
               for name in ast.walk(node.slice) if isinstance(name, ast.Name)}
    found = _compared_with_number(source, indices, 2)
    return found[0] if found else None


def _compared_with_number(source: KernelSource, names: set[str], low: int,
                          high: float = math.inf) -> tuple[str, int] | None:
    """(line, number) of the first ordering comparison (``<``, ``<=``, ``>``, ``>=``; not a
    halving loop's test) of one of ``names`` with a whole number from ``low`` to ``high``."""
    halving = _halving_loop_tests(source)
    for node in source.walk():
        if id(node) in halving or not isinstance(node, ast.Compare) or not any(
                isinstance(op, ast.Lt | ast.LtE | ast.Gt | ast.GtE) for op in node.ops):
            continue
        sides = [node.left, *node.comparators]
        numbers = [side.value for side in sides if isinstance(side, ast.Constant)
                   and isinstance(side.value, int) and not isinstance(side.value, bool)
                   and low <= side.value <= high]
        if numbers and any(isinstance(side, ast.Name) and side.id in names for side in sides):
            return source.line(node), numbers[0]
    return None


def _number(node: ast.AST, names: dict) -> float | None:
    """The number ``node`` stands for when it is typed in: a literal (``100_000``, ``1e5``), an
    arithmetic of literals (``10**5``, ``2 * 50_000``), a module-level name bound to a whole
    number (``N = 100_000``, from ``names``, the kernel's globals) or such a number among a
    ``min(...)``'s arguments; None otherwise."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.Name) and type(names.get(node.id)) is int:
        return names[node.id]
    if _called_name(node) == "min":  # `min(length, 100_000)`: a cap typed in beside the length
        typed_in = [n for argument in node.args if (n := _number(argument, names)) is not None]
        return min(typed_in) if typed_in else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub | ast.Mult | ast.Pow):
        left, right = _number(node.left, names), _number(node.right, names)
        if left is None or right is None or isinstance(node.op, ast.Pow) and abs(right) > 64:
            return None
        return {ast.Add: left + right, ast.Sub: left - right, ast.Mult: left * right,
                ast.Pow: left ** right}[type(node.op)]
    return None


def index_capped_by_number(source: KernelSource) -> tuple[str, int] | None:
    """(line, number) of the first comparison of an index that differs between threads (it
    comes from ``cuda.grid``, ``cuda.threadIdx`` and the like through assignments, aliases and
    loops, and indexes an array: ``x[i]``) with a number typed in larger than any block holds
    (``if i < 100_000:``, ``i < 1e5``, ``i < N`` for a module's ``N = 100_000``, even beside a
    right guard): a problem size typed in, right only for arrays no longer than that. Numbers
    up to a block's most threads are left alone (``if t < 32:``: a thread's place in its
    block), and a value's threshold too (``if v > 65504:``, v never an index)."""
    if source.tree is None:
        return None
    varying = thread_varying_names(source.tree, control=False)
    indices = {name.id for node in source.walk() if isinstance(node, ast.Subscript)
               for name in ast.walk(node.slice) if isinstance(name, ast.Name)}
    names = getattr(source.function, "__globals__", {}) if source.function else {}
    most = device.DEVICE_LIMITS["MAX_THREADS_PER_BLOCK"]
    for node in source.walk():
        if not isinstance(node, ast.Compare) or not any(
                isinstance(op, ast.Lt | ast.LtE | ast.Gt | ast.GtE) for op in node.ops):
            continue
        sides = [node.left, *node.comparators]
        numbers = [n for side in sides if (n := _number(side, names)) is not None and n > most]
        if numbers and any(isinstance(side, ast.Name) and side.id in varying & indices
                           for side in sides):
            return source.line(node), int(numbers[0])
    return None


def fixed_length_local_array(source: KernelSource) -> tuple[str, int] | None:
    """(line, length) of the first ``cuda.local.array`` whose length is a whole number typed
    in, directly or through a module-level name (``cuda.local.array(48, ...)``,
    ``cuda.local.array(MAXC, ...)``), and that is indexed by the variable of a loop whose
    bounds come from an array's shape (``for c in range(logits.shape[1]): cache[c] = ...``):
    it holds one value per element of a dimension the arrays give, so it is right only while
    that dimension fits. None otherwise (a local array of 1 as a float32 accumulator, a
    fixed-size tile)."""
    if source.tree is None:
        return None
    names = getattr(source.function, "__globals__", {})

    def length(node: ast.AST) -> int | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name) and isinstance(names.get(node.id), int):
            return names[node.id]
        if isinstance(node, ast.Tuple) and node.elts:
            sizes = [length(item) for item in node.elts]
            return math.prod(sizes) if None not in sizes else None
        return None

    def mentions(expression: ast.AST, wanted: set[str]) -> bool:
        return any(isinstance(n, ast.Attribute) and n.attr == "shape"
                   or isinstance(n, ast.Name) and n.id in wanted for n in ast.walk(expression))

    from_shapes: set[str] = set()  # names computed from a shape: C = logits.shape[1]
    for node in source.walk():
        if isinstance(node, ast.Assign) and mentions(node.value, set()):
            for target in node.targets:
                from_shapes |= _assigned_names(target)
    along_shapes = set()  # variables of loops bounded by a shape
    for node in source.walk():
        if (isinstance(node, ast.For) and _called_name(node.iter) == "range"
                and mentions(node.iter, from_shapes)):
            along_shapes |= _assigned_names(node.target)
    for node in source.walk():
        if not (isinstance(node, ast.Assign) and _makes_array(node.value, "local")):
            continue
        shape = array_shape(node.value)
        size = length(shape) if shape is not None else None
        held = set().union(*(_assigned_names(target) for target in node.targets))
        if size is not None and any(
                isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name)
                and n.value.id in held and any(isinstance(m, ast.Name) and m.id in along_shapes
                        for m in ast.walk(n.slice))
                for n in source.walk()):
            return source.line(node).split("#")[0].rstrip(), size
    return None


def hard_coded_thread_count(source: KernelSource) -> str | None:
    """In a kernel that makes a shared array, the first line that compares a thread's index
    *in its block* (a variable assigned from ``cuda.threadIdx`` alone, with no ``blockIdx``,
    ``blockDim`` or ``grid``) with a whole number from 2 to 32 (``if t < 16:``): the last
    rounds of a tree unrolled for one warp. A halving loop's test is not one; neither is a
    comparison with a larger number (a problem size typed in: :func:`hard_coded_size`)."""
    if source.tree is None or not any(_makes_array(node, "shared") for node in source.walk()):
        return None
    in_block = set()
    for node in source.walk():
        if isinstance(node, ast.Assign):
            found = {n.attr for n in ast.walk(node.value) if isinstance(n, ast.Attribute)}
            if "threadIdx" in found and not found & {"blockIdx", "blockDim"} and not any(
                    _called_name(n) in ("grid", "gridsize") for n in ast.walk(node.value)):
                for target in node.targets:
                    in_block |= _assigned_names(target)
    found = _compared_with_number(source, in_block, 2, 32)
    return found[0] if found else None


FIXED_STEP_AT_LEAST = 32  # smaller steps are unrolling (2, 4, 8); larger look like a grid's size


def fixed_step(source: KernelSource) -> str | None:
    """The first loop over a thread's own elements (it starts at, or steps, a value that
    differs between threads: :func:`thread_varying_names`) that steps by a whole number of
    :data:`FIXED_STEP_AT_LEAST` or more (``range(i, n, 4096)``, ``i += 1024`` in a while
    loop): a grid's size typed into the kernel, right for one launch at most. A loop along
    another axis in fixed blocks (``range(0, K, 128)``), or over the block's own threads or
    shared slots (``range(t + 32, cuda.blockDim.x, 32)``: a warp folding the block's partials),
    is not one."""
    if source.tree is None:
        return None
    # values that differ between threads (a column loop's `k0 += 32` under a thread's `if` is
    # the same for every thread that runs it)
    varying = thread_varying_names(source.tree, control=False)

    def by_thread(expression: ast.AST) -> bool:
        return any(isinstance(n, ast.Name) and n.id in varying
                   or isinstance(n, ast.Attribute) and n.attr == "threadIdx"
                   or _called_name(n) == "grid" for n in ast.walk(expression))

    def in_a_block(bound: ast.AST) -> bool:  # a loop over the block's threads or slots
        return any(isinstance(n, ast.Attribute) and n.attr == "blockDim"
                   for n in ast.walk(bound))

    for node in source.walk():
        step = None
        if (isinstance(node, ast.Call) and _called_name(node) == "range"
                and len(node.args) == 3 and by_thread(node.args[0])
                and not in_a_block(node.args[1])):
            step = node.args[2]
        elif isinstance(node, ast.While) and not in_a_block(node.test):
            step = next((n.value for n in ast.walk(node) if isinstance(n, ast.AugAssign)
                         and isinstance(n.op, ast.Add) and by_thread(n.target)), None)
        if (isinstance(step, ast.Constant) and isinstance(step.value, int)
                and not isinstance(step.value, bool) and step.value >= FIXED_STEP_AT_LEAST):
            return source.line(step)
    return None


def compares_with_shape(source: KernelSource) -> list[ast.Compare]:
    """The comparisons in the kernel that involve an array's ``.shape``: its guards."""
    return [node for node in source.walk() if isinstance(node, ast.Compare)
            and any(isinstance(n, ast.Attribute) and n.attr == "shape" for n in ast.walk(node))]


def lines_with_number(source: KernelSource, number: int) -> list[str]:
    """The kernel's lines that write the whole number ``number`` itself (a tile's size typed in
    where TILE is meant), each once."""
    return list(dict.fromkeys(
        source.line(node) for node in source.walk()
        if isinstance(node, ast.Constant) and type(node.value) is int and node.value == number))


def guard_on(source: KernelSource, parameter: str) -> str | None:
    """The line of the first comparison in the kernel that measures ``parameter``: its
    ``.shape``, ``.size`` or ``len()``, directly or through a name bound only to such a
    measure (``if i < out.size:``, ``n = out.shape[0]; if i < n:``: a guard against the
    output's length where the output is one number); None when there is none."""
    def measures(node: ast.AST) -> bool:
        if isinstance(node, ast.Attribute) and node.attr in ("shape", "size"):
            return isinstance(node.value, ast.Name) and node.value.id == parameter
        if isinstance(node, ast.Name):
            return node.id in lengths
        return (isinstance(node, ast.Call) and _called_name(node) == "len" and node.args
                and isinstance(node.args[0], ast.Name) and node.args[0].id == parameter)

    lengths: set[str] = set()
    bound: dict[str, list[ast.AST]] = {}
    for node in source.walk():
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                node.targets[0], ast.Name):
            bound.setdefault(node.targets[0].id, []).append(node.value)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign | ast.NamedExpr | ast.For):
            for name in _assigned_names(node.target):
                bound.setdefault(name, []).append(ast.Constant(None))
    lengths = {name for name, values in bound.items()
               if all(any(measures(part) for part in ast.walk(value)) for value in values)}
    return next((source.line(node) for node in source.walk() if isinstance(node, ast.Compare)
                 and any(measures(part) for part in ast.walk(node))), None)


# --- barriers every thread reaches ------------------------------------------------------------


_BARRIERS = {"syncthreads", "syncthreads_count", "syncthreads_and", "syncthreads_or"}
_BLOCK_VOTES = _BARRIERS - {"syncthreads"}  # each returns one value to the whole block


def _called_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        func = node.func
        return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    return None


def array_shape(call: ast.Call) -> ast.AST | None:
    """The shape a ``cuda.shared.array`` or ``cuda.local.array`` call gives: its first argument
    or its ``shape=``, the one element of a 1-tuple (``(THREADS,)``); None when it gives none."""
    shape = call.args[0] if call.args else next(
        (k.value for k in call.keywords if k.arg == "shape"), None)
    if isinstance(shape, ast.Tuple | ast.List) and len(shape.elts) == 1:
        return shape.elts[0]
    return shape


def shared_array_sizes(source: KernelSource) -> list[tuple[ast.Call, ast.AST]]:
    """(the call, the size it gives: :func:`array_shape`) of each ``cuda.shared.array``."""
    return [(node, size) for node in source.walk() if isinstance(node, ast.Call)
            and ast.unparse(node.func).endswith("shared.array")
            and (size := array_shape(node)) is not None]


def _makes_array(node: ast.AST, memory: str) -> bool:
    """Is ``node`` a call of ``cuda.<memory>.array`` (``memory``: "shared" or "local")?"""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "array" and isinstance(node.func.value, ast.Attribute)
            and node.func.value.attr == memory)


def _assigned_names(target: ast.AST) -> set[str]:
    """The variables an assignment target binds (``a``, ``a, b``), not those it only reads
    (``out[i] = ...`` binds nothing)."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, ast.Tuple | ast.List):
        return set().union(*(_assigned_names(item) for item in target.elts))
    if isinstance(target, ast.Starred):
        return _assigned_names(target.value)
    return set()


def _varies(expression: ast.AST | None, varying: set[str]) -> bool:
    """Can ``expression``'s value differ between the threads of one block: does it read
    ``cuda.threadIdx``, ``cuda.grid``, ``cuda.laneid``, an atomic's return value or one of the
    ``varying`` variables? (Not inside a ``syncthreads_count``, ``_and`` or ``_or``: the block's
    vote, the same for all its threads.)"""
    pending = [expression] if expression is not None else []
    while pending:
        node = pending.pop()
        if _called_name(node) in _BLOCK_VOTES:
            continue
        pending.extend(ast.iter_child_nodes(node))
        if isinstance(node, ast.Attribute) and node.attr in ("threadIdx", "laneid"):
            return True
        if _called_name(node) in ("grid",) or (
                isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Attribute)
                and node.func.value.attr == "atomic"):
            return True
        if isinstance(node, ast.Name) and node.id in varying:
            return True
    return False


def thread_varying_names(tree: ast.AST, varying_before: set[str] = frozenset(),
                         control: bool = True) -> set[str]:
    """Variables whose value can differ between the threads of one block: those computed from
    ``cuda.threadIdx``, ``cuda.grid``, ``cuda.laneid`` or an atomic's return value, directly or
    through other such variables (``varying_before`` among them), and (with ``control``) those
    set under a branch or loop whose test is such a value, or in a loop whose bounds are.
    (``blockIdx``, ``blockDim`` and arguments are the same for every thread of a block.)"""
    varying: set[str] = set(varying_before)

    def varies(expression: ast.AST | None) -> bool:
        return _varies(expression, varying)

    while True:
        before = len(varying)
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                varying |= {name for target in node.targets
                            for names, value in _assignments(target, node.value)
                            if varies(value) for name in names}
            elif isinstance(node, ast.AugAssign | ast.AnnAssign) and varies(node.value):
                varying |= _assigned_names(node.target)
            elif isinstance(node, ast.For) and varies(node.iter):
                varying |= _assigned_names(node.target)
            elif isinstance(node, ast.NamedExpr) and varies(node.value):
                varying |= _assigned_names(node.target)
            if control and (isinstance(node, ast.If | ast.While) and varies(node.test)
                            or isinstance(node, ast.For) and varies(node.iter)):
                # set under a branch only some threads take (`if t == 0: flag = 1`), or in a
                # loop whose number of turns depends on the thread
                varying |= {name for statement in node.body + node.orelse
                            for inner in ast.walk(statement)
                            for name in _names_set_by(inner)}
        if len(varying) == before:
            return varying


def _assignments(target: ast.AST, value: ast.AST) -> list[tuple[set[str], ast.AST]]:
    """(the names, the value they get) of one assignment: a tuple unpacked from a tuple of as
    many values pairs them one by one (``t, stride = cuda.threadIdx.x, cuda.blockDim.x // 2``);
    otherwise every name gets the whole value."""
    if (isinstance(target, ast.Tuple | ast.List) and isinstance(value, ast.Tuple | ast.List)
            and len(target.elts) == len(value.elts)
            and not any(isinstance(e, ast.Starred) for e in target.elts + value.elts)):
        return [pair for t, v in zip(target.elts, value.elts, strict=True)
                for pair in _assignments(t, v)]
    return [(_assigned_names(target), value)]


def _outside_loops(statements: list[ast.stmt]):
    """The nodes of ``statements``, but not those inside a loop of their own."""
    for statement in statements:
        yield statement
        if not isinstance(statement, ast.For | ast.While):
            for child in ast.iter_child_nodes(statement):
                yield from _outside_loops([child]) if isinstance(child, ast.stmt) else (child,)


def _names_set_in(statements: list[ast.stmt]) -> set[str]:
    return {name for statement in statements for inner in ast.walk(statement)
            for name in _names_set_by(inner)}


def varying_by_statement(function: ast.FunctionDef) -> dict[ast.stmt, set[str]]:
    """For each statement of the kernel, the variables that may differ between the threads of
    a block where it runs (as :func:`thread_varying_names`), followed through the code in
    order: a variable bound again to a value the same for every thread (``i =
    cuda.blockDim.x // 2`` after ``i = cuda.grid(1)``, ``for i in range(10):``) is the same
    for every thread from there on; a loop's body is followed until nothing changes; what a
    branch or loop only some threads take sets varies after it."""
    found: dict[ast.stmt, set[str]] = {}

    def assign(state: set[str], target: ast.AST, value: ast.AST) -> set[str]:
        # every value is read before any name is bound (`a, b = b, a`)
        for names, varies in [(names, _varies(part, state))
                              for names, part in _assignments(target, value)]:
            state = state | names if varies else state - names
        return state

    def uneven_exits(statements: list[ast.stmt]) -> list[ast.Break | ast.Continue]:
        """The ``break`` and ``continue`` statements of this loop under a branch only some
        threads take."""
        found_exits = []
        for statement in statements:
            if isinstance(statement, ast.If):
                if _varies(statement.test, found.get(statement, set())):
                    found_exits += [node for node in _outside_loops(statement.body
                                                                    + statement.orelse)
                                    if isinstance(node, ast.Break | ast.Continue)]
                found_exits += uneven_exits(statement.body + statement.orelse)
            elif not isinstance(statement, ast.For | ast.While):
                for name in ("body", "orelse", "finalbody"):
                    if isinstance(getattr(statement, name, None), list):
                        found_exits += uneven_exits(getattr(statement, name))
        return found_exits

    def set_unevenly(statement: ast.For | ast.While) -> set[str]:
        """What a loop some threads leave early sets differently: after a ``break``, all it
        sets (they took fewer turns); after a ``continue``, what it sets after that point."""
        exits = uneven_exits(statement.body)
        if any(isinstance(node, ast.Break) for node in exits):
            return _names_set_in(statement.body) | _names_set_by(statement)
        first = min((node.lineno for node in exits), default=None)
        return set() if first is None else {
            name for inner in _outside_loops(statement.body) if getattr(
                inner, "lineno", 0) > first for name in _names_set_by(inner)}

    def walrus(node: ast.AST, state: set[str]) -> set[str]:
        return state | {name for inner in ast.walk(node) if isinstance(inner, ast.NamedExpr)
                        and _varies(inner.value, state)
                        for name in _assigned_names(inner.target)}

    def run(statements: list[ast.stmt], state: set[str]) -> set[str]:
        for statement in statements:
            found[statement] = found.get(statement, set()) | state
            state = step(statement, state)
        return state

    def loop(statement: ast.For | ast.While, state: set[str]) -> set[str]:
        entry = set(state)
        for _ in range(len(_names_set_in(statement.body)) + 2):  # grows until it settles
            if isinstance(statement, ast.For):
                bounds, start = statement.iter, assign(entry, statement.target, statement.iter)
            else:
                bounds, start = statement.test, walrus(statement.test, entry)
            out = run(statement.body, start)
            if _varies(bounds, entry):  # some threads take more turns than others
                out |= _names_set_in(statement.body) | _names_set_by(statement)
            out |= set_unevenly(statement)  # or leave a turn, or the loop, early
            grown = state | out
            if grown == entry:
                break
            entry = grown
        if isinstance(statement, ast.While):  # its test is read at every turn
            found[statement] = found.get(statement, set()) | entry
        return run(statement.orelse, entry)

    def step(statement: ast.stmt, state: set[str]) -> set[str]:
        if isinstance(statement, ast.Assign):
            for target in statement.targets:
                state = assign(walrus(statement.value, state), target, statement.value)
            return state
        if isinstance(statement, ast.AnnAssign) and statement.value is not None:
            return assign(state, statement.target, statement.value)
        if isinstance(statement, ast.AugAssign):  # varies if it did, or if what is added does
            return state | (_assigned_names(statement.target)
                            if _varies(statement.value, state) else set())
        if isinstance(statement, ast.If):
            test = walrus(statement.test, state)
            out = run(statement.body, test) | run(statement.orelse, test)
            if _varies(statement.test, state):  # only some threads take it
                out |= _names_set_in(statement.body + statement.orelse)
            return out
        if isinstance(statement, ast.For | ast.While):
            return loop(statement, state)
        bodies = [getattr(statement, name) for name in ("body", "orelse", "finalbody")
                  if isinstance(getattr(statement, name, None), list)]
        for body in bodies:  # with, try
            state = run(body, state)
        return walrus(statement, state) if not bodies else state

    run(function.body, set())
    return found


def _names_set_by(node: ast.AST) -> set[str]:
    """The variables one statement or expression node assigns."""
    if isinstance(node, ast.Assign):
        return set().union(*(_assigned_names(target) for target in node.targets))
    if isinstance(node, ast.AugAssign | ast.AnnAssign | ast.NamedExpr | ast.For):
        return _assigned_names(node.target)
    return set()


def shared_array_without_barrier(kernel: KernelSource | None) -> str | None:
    """The line that makes a ``cuda.shared.array`` in a kernel that has no barrier at all (none
    of its own, and no call of a device function that waits at one), or None: threads then
    read slots that others may not have written yet (the simulator runs a block's threads in
    turn, so what it reads there is a matter of order)."""
    if kernel is None:
        return None
    nodes = list(kernel.walk())
    if any(_called_name(node) in _BARRIERS for node in nodes) or _helpers_with_barriers(kernel):
        return None
    return next((kernel.line(node) for node in nodes if _makes_array(node, "shared")), None)


def uneven_barriers(hint: str = BARRIER_HINT) -> Mistake:
    """Threads of one block passing different numbers of barriers, from the trace (the
    evidence's ``uneven_barriers``: :meth:`gpulab.instruments.KernelTrace.uneven_barriers`),
    whatever the source hides (a device function's index, a flag kept in an array)."""
    return Mistake(
        "threads of one block passing different numbers of barriers (seen in the trace, "
        "whatever the source hides: a device function's index, a flag in an array)",
        lambda e: e.uneven_barriers is not None,
        lambda e: (f"in block {e.uneven_barriers[0]} some threads passed "
                   f"{e.uneven_barriers[1]} barriers and others {e.uneven_barriers[2]}: on a "
                   "GPU the threads that skip a barrier never arrive at it (a deadlock or "
                   "undefined behaviour), though the simulator let them go"),
        hint, recognised_from="trace")


def barrier_problems(kernel: KernelSource) -> list[str]:
    """Why some thread of a block might skip a barrier this kernel has, one sentence per
    problem: a ``syncthreads`` inside an ``if`` (or ``else``), inside a loop whose trip count
    depends on the thread, or after a ``return``/``break`` that only some threads take. On a
    GPU the threads that skip it never arrive (a deadlock, or undefined behaviour); the
    simulator lets them go. Barriers in loops with the same bounds for every thread
    (``for k in range(steps)``, ``while stride > 0``) are fine."""
    return [text for _, text in _barrier_findings(kernel)]


def _helpers_with_barriers(kernel: KernelSource) -> set[str]:
    """The names of the device functions the kernel calls (its globals) that wait at a barrier
    themselves, or through device functions of theirs: a call of one is a barrier too."""
    scope = getattr(kernel.function, "__globals__", {}) or {}
    found: set[str] = set()

    def waits(function, depth: int = 0) -> bool:
        code = getattr(function, "__code__", None)
        if code is None or depth > 3:
            return False
        names = set(code.co_names)
        return bool(names & _BARRIERS) or any(
            waits(python_function(scope.get(name)), depth + 1) for name in names
            if is_device_function(scope.get(name)))

    for node in kernel.walk():
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            helper = scope.get(node.func.id)
            if is_device_function(helper) and waits(python_function(helper)):
                found.add(node.func.id)
    return found


def _barrier_findings(kernel: KernelSource) -> list[tuple[str, str]]:
    """(hint, sentence) for each problem :func:`barrier_problems` names."""
    if kernel.tree is None:
        return []
    parents = {child: node for node in ast.walk(kernel.tree)
               for child in ast.iter_child_nodes(node)}
    by_statement = varying_by_statement(kernel.tree)

    def varies(expression: ast.AST) -> bool:
        """(judged with what varies where the statement that holds ``expression`` runs)"""
        statement = expression
        while statement not in by_statement and statement in parents:
            statement = parents[statement]
        return _varies(expression, by_statement.get(statement, set()))

    def ancestors(node):
        while node in parents:
            child, node = node, parents[node]
            yield child, node

    helpers = _helpers_with_barriers(kernel)
    barriers = [node for node in kernel.walk() if _called_name(node) in _BARRIERS
                or isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in helpers]
    if not barriers:
        return []
    problems: list[tuple[str, str]] = []
    for barrier in barriers:
        for child, node in ancestors(barrier):
            # a branch every thread of the block takes the same way (`if stride > 0:`, a
            # test of no thread's own values) keeps its barrier legal, as CUDA allows
            if isinstance(node, ast.If) and child is not node.test and varies(node.test):
                problems.append((BARRIER_HINT, f"`{kernel.line(barrier)}` is inside "
                                               f"`{kernel.line(node)}`"))
                break
            if isinstance(node, ast.IfExp | ast.BoolOp):
                problems.append((BARRIER_HINT, f"`{kernel.line(barrier)}` is only reached by "
                                               "some threads"))
                break
            if isinstance(node, ast.While | ast.For):
                bounds = node.test if isinstance(node, ast.While) else node.iter
                if child is not bounds and varies(bounds):
                    problems.append((BARRIER_LOOP_HINT,
                                     f"`{kernel.line(barrier)}` is inside `{kernel.line(node)}`, "
                                     "whose number of iterations depends on the thread"))
                    break
    last_barrier = max(getattr(b, "lineno", 0) for b in barriers)
    loops_with_barriers = {
        node for barrier in barriers for _, node in ancestors(barrier)
        if isinstance(node, ast.For | ast.While)}
    for node in kernel.walk():
        if not isinstance(node, ast.Return | ast.Break | ast.Continue):
            continue
        # the branch only some threads take, however deep (`else: ... if n > 0: return`)
        branch = next((parent for child, parent in ancestors(node) if isinstance(parent, ast.If)
                       and child is not parent.test and varies(parent.test)), None)
        if branch is None:
            continue
        if isinstance(node, ast.Return) and node.lineno < last_barrier:
            problems.append((BARRIER_EXIT_HINT,
                             f"`{kernel.line(node)}` under `{kernel.line(branch)}` lets some "
                             "threads leave before a barrier that the others wait at"))
        elif not isinstance(node, ast.Return):
            loop = next((parent for _, parent in ancestors(node)
                         if isinstance(parent, ast.For | ast.While)), None)
            # a `continue` skips only the barriers after it in the loop's body (one at the top
            # of each turn is still reached); a `break` skips every later turn's
            skipped = loop in loops_with_barriers and (not isinstance(node, ast.Continue) or any(
                barrier.lineno > node.lineno and loop in {p for _, p in ancestors(barrier)}
                for barrier in barriers))
            if skipped:
                problems.append((BARRIER_EXIT_HINT,
                                 f"`{kernel.line(node)}` under `{kernel.line(branch)}` makes "
                                 "some threads skip a barrier in the loop"))
    return list(dict.fromkeys(problems))


# --- a kernel check's first steps -------------------------------------------------------------


def start_kernel(kernel, parameter_count: int, stub_hint: str) -> KernelSource:
    """Every kernel check's first steps: is it a ``@cuda.jit`` kernel with the right number of
    arguments (:func:`kernel_source`), is it still the stub (*not attempted*, with
    ``stub_hint``), is every barrier reached by every thread (:func:`barrier_problems`), and,
    in the simulator, is it code a GPU could compile (:func:`simulator_only_code`; the kernel
    is also compiled for a real GPU by :func:`gpulab.exercises.running.launch`)? Returns the
    kernel's source for closer looks."""
    source = kernel_source(kernel, parameter_count)
    if raises_not_implemented(source):
        raise NotAttemptedError(STUB_MESSAGE.format(what="kernel"), stub_hint)
    if device.tier() == "sim":
        problems = simulator_only_code(source)
        if problems:
            raise CheckFailedError(
                "your kernel would run here, because the simulator executes it as plain Python, "
                "but it would not compile for a real GPU: " + "; ".join(problems) + ".",
                SIMULATOR_ONLY_HINT,
            )
    barriers = _barrier_findings(source)
    if barriers:
        raise CheckFailedError(
            f"{BARRIER_IN_BRANCH}: " + "; ".join(text for _, text in barriers) + ".",
            barriers[0][0])
    return source


__all__ = [
    "BARRIER_EXIT_HINT", "BARRIER_HINT", "BARRIER_IN_BRANCH", "BARRIER_LOOP_HINT",
    "FIXED_STEP_AT_LEAST", "adds_into", "array_shape",
    "barrier_problems", "compares_with_shape", "count_calls",
    "fixed_step", "guard_on", "hard_coded_block", "lines_with_number",
    "is_typed_in_count", "typed_in_count_names",
    "hard_coded_size", "index_capped_by_number", "kernel_source", "KernelSource", "plain_writes_to",
    "range_over_typed_in_count",
    "SHARED_BARRIER_HINT", "raises_not_implemented", "shared_array_without_barrier",
    "simulator_only_code", "start_kernel", "thread_varying_names",
    "shared_array_sizes", "uneven_barriers", "varying_by_statement",
]
