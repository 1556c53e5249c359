"""Compiling a learner's kernel for a real GPU while the course runs in the simulator.

The simulator runs a kernel as plain Python, so code a GPU cannot compile (lists, NumPy array
creation, string formatting, a Python function that is not a device function) would pass there.
:func:`compile_verdict` compiles the kernel the way the ``ptx`` tier does (numba's real CUDA
target for sm_75, :data:`COMPILE_FOR`, no device) in a child process that lives as long as this
one (:class:`_CompilerProcess`), with every global the kernel uses sent along
(:func:`gpulab.instruments.kernel_recipe`): modules, numbers, NumPy types, small arrays, other
kernels and device functions, and functions imported from a module (``from numpy import sqrt``,
``from math import sqrt``). A global that cannot be sent is one a GPU kernel cannot use either
(a Python list, dict, set or other object): it is a compile error, not a reason to skip the
step. The step is skipped, with a note saying why, only where it cannot be judged: no CUDA
toolkit wheels (macOS), no source, or a global NumPy array too big to send.

The same compile says where a kernel whose arguments hold no float64 computes in float64 anyway
(:func:`float64_note`, a note on the check's result, pass or fail): a line the compiled code
does float64 arithmetic on (PTX ``add.f64``, ``fma.rn.f64``, ... under the line's ``.loc``)
*and* that Numba's types make float64 (``total = 0.0`` then ``total += x[i]``). Both, because
each alone misleads: ``x[i] * 2.0`` is typed float64 but compiles to a float32 multiply, and
``math.sin`` of a float32 has a float64 multiply inside libdevice's argument reduction (left
out by its constant, so that ``math.sin(x[i]) * 2.0`` is not named). Only the kernel's own lines
are read: float64 inside a device function it calls (``max(z, 0.0)`` in a helper) is not named.
"""

from __future__ import annotations

import ast
import atexit
import io
import json
import math
import os
import queue
import re
import subprocess
import sys
import textwrap
import threading
import tokenize

import numpy as np

from gpulab import toolkit
from gpulab.instruments import kernel_recipe, rebuild_function
from gpulab.ptx import float16_arithmetic, float64_arithmetic

# The architecture a learner's kernel is compiled for: Turing (T4, Colab's free GPU), the oldest
# that gpulab.ptx compiles for, so what passes here compiles on every GPU the course names.
COMPILE_FOR = (7, 5)
# NumPy functions that create or combine arrays: they run in the simulator, never on a GPU.
ARRAY_FUNCTIONS = {
    "array", "asarray", "empty", "zeros", "ones", "full", "arange", "linspace", "empty_like",
    "zeros_like", "ones_like", "full_like", "copy", "concatenate", "stack", "sum", "dot",
    "matmul", "mean", "cumsum", "sort",
}
SIMULATOR_ONLY_HINT = (
    "kernels can't create lists or NumPy arrays or use f-strings: use "
    "`cuda.local.array(N, dtype)` or `cuda.shared.array(N, dtype)` for scratch space, and "
    "`print('i =', i)` without formatting."
)
# Globals of these kinds are Python objects no GPU kernel can use (the ptx tier refuses them).
UNUSABLE_ON_A_GPU = {"list": "a Python list", "dict": "a Python dict", "set": "a Python set"}

_COMPILED: dict[tuple[str, str], dict] = {}  # the compiler process's answers
_DEFAULT_GLOBALS = {"cuda": "numba.cuda", "np": "numpy", "numpy": "numpy", "math": "math",
                    "numba": "numba"}


def numba_type(value) -> str:
    """The numba type a launch argument has, as signature text: ``float32[:, :]`` for a 2-D
    float32 array (device, instrumented or NumPy), ``float64`` for a Python float, ``int64`` for
    an int, ``float32`` for ``np.float32(1)``."""
    def scalar(dtype) -> str:
        name = np.dtype(dtype).name
        return {"bool": "boolean"}.get(name, name)

    if hasattr(value, "dtype") and hasattr(value, "shape") and len(value.shape) > 0:
        return f"{scalar(value.dtype)}[{', '.join([':'] * len(value.shape))}]"
    if isinstance(value, np.generic):
        return scalar(value.dtype)
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, complex):
        return "complex128"
    raise TypeError(f"no numba type for {type(value).__name__}")


def recipe_of(kernel_source) -> dict | None:
    """The recipe (source and globals) to compile: of a kernel, its Python function, anything
    with a ``.function`` (a :class:`~gpulab.exercises.source_rules.KernelSource`), or source
    text (then only ``cuda``, ``np``, ``math`` and ``numba`` are known)."""
    if isinstance(kernel_source, str):
        source = textwrap.dedent(kernel_source)
        definition = next(node for node in ast.parse(source).body
                          if isinstance(node, ast.FunctionDef))
        return {"name": definition.name, "source": source,
                "globals": {name: {"kind": "module", "name": module}
                            for name, module in _DEFAULT_GLOBALS.items()}}
    kernel_source = getattr(kernel_source, "function", kernel_source)
    return kernel_recipe(kernel_source)


def signature_of(arg_types) -> str:
    """``"(float32[:], int64)"`` from a signature, or one type (text) or example value per
    argument (:func:`numba_type`)."""
    if isinstance(arg_types, str):
        return arg_types
    return "(" + ", ".join(t if isinstance(t, str) else numba_type(t) for t in arg_types) + ")"


def compile_verdict(kernel_source, arg_types) -> tuple[str | None, str | None]:
    """(error, note) of compiling a kernel for a real GPU (sm_75, :data:`COMPILE_FOR`) the way
    the ``ptx`` tier does: error is None when it compiles, else the compiler's text
    (:func:`compiler_message` says it in plain words); note, when not None, says why the step
    could not be judged (no toolkit wheels, no source, a global array too big to send).

    ``kernel_source``: see :func:`recipe_of`. ``arg_types``: see :func:`signature_of`. Each
    (source, signature) is compiled once per process."""
    return _compile_verdict(recipe_of(kernel_source), signature_of(arg_types))


def unusable_globals(recipe: dict, prefix: str = "") -> list[tuple[str, str]]:
    """(name, type) of each global the kernel (or a function it calls) uses that cannot be
    rebuilt in the compiler process; nested names are ``helper.NAME``."""
    found = []
    for name, described in recipe["globals"].items():
        if described["kind"] == "unknown":
            found.append((prefix + name, described.get("type", "object")))
        elif described["kind"] in ("cuda", "function"):
            found += unusable_globals(described["recipe"], f"{prefix}{name}.")
    return found


def _compile_verdict(recipe: dict | None, signature: str) -> tuple[str | None, str | None]:
    """(error, note) for one kernel and signature, cached."""
    if recipe is None:
        return None, ("your kernel was not compiled for a real GPU: its source was not found "
                      "(define it in a notebook cell or a file).")
    reason = toolkit.unavailable_reason()
    if reason or toolkit.installed_version() is None:
        return None, ("your kernel was not compiled for a real GPU here: the CUDA toolkit wheels "
                      "are not installed (there are none for macOS), so only the source was read "
                      "for code that runs in the simulator but not on a GPU.")
    missing = unusable_globals(recipe)
    too_big = [name for name, kind in missing if kind == "ndarray"]
    if too_big:
        return None, (f"your kernel was not compiled for a real GPU: it uses the global array "
                      f"{', '.join(too_big)}, too big to send to the compiler process.")
    if missing:
        name, kind = missing[0]
        said = UNUSABLE_ON_A_GPU.get(kind, f"a Python {kind} object")
        return (f"TypingError: Untyped global name '{name.split('.')[-1]}': {said}, which a GPU "
                "kernel cannot use"), None
    answer = _answer(recipe, signature)
    if answer.get("skipped"):
        return None, f"your kernel was not compiled for a real GPU: {answer['skipped']}"
    return answer.get("error"), None


def _answer(recipe: dict, signature: str) -> dict:
    """The compiler process's answer for one kernel and signature, cached."""
    key = (json.dumps(recipe, sort_keys=True), signature)
    if key not in _COMPILED:
        _COMPILED[key] = _COMPILER.ask({"recipe": recipe, "signature": signature,
                                        "cc": COMPILE_FOR})
    return _COMPILED[key]


def float64_lines(kernel_source, arg_types) -> list[tuple[str, str]] | None:
    """``[(code, opcodes), ...]``: the kernel's lines that compute in float64 although no
    argument is float64 (see the module's docstring), quoted (numbers would count from the
    kernel's decorator, not from the learner's cell), as compiled for sm_75
    (:data:`COMPILE_FOR`); ``[]`` when none does; None where the compile step cannot run
    (:func:`compile_verdict` says why) or the kernel does not compile."""
    return _compiled_lines(kernel_source, arg_types, "float64_lines")


def float16_lines(kernel_source, arg_types) -> list[tuple[str, str]] | None:
    """``[(code, what), ...]``: the kernel's lines that compute in float16, quoted, as compiled
    for sm_75 (:func:`gpulab.ptx.float16_arithmetic`: "__half *" where ``a[i] * x[i]`` of
    two float16 values is a float16 product); ``[]`` when none does; None as
    :func:`float64_lines`."""
    return _compiled_lines(kernel_source, arg_types, "float16_lines")


def _compiled_lines(kernel_source, arg_types, key: str) -> list[tuple[str, str]] | None:
    recipe, signature = recipe_of(kernel_source), signature_of(arg_types)
    if recipe is None or _compile_verdict(recipe, signature) != (None, None):
        return None
    source = recipe["source"].splitlines()
    return [(_code_of(source[number - 1]), opcodes)
            for number, opcodes in _answer(recipe, signature).get(key) or []
            if 0 < number <= len(source)]


def lines_said(lines: list[tuple[str, str]]) -> str:
    """The first three of :func:`float64_lines` (or :func:`float16_lines`) as
    "`total += x[i]` (add.f64)", and how many more."""
    said = "; ".join(f"`{code}` ({opcodes})" for code, opcodes in lines[:3])
    return said + (f" and {len(lines) - 3} more line(s)" if len(lines) > 3 else "")


def float64_note(kernel_source, arg_types) -> str | None:
    """A note when the kernel computes in float64 although no argument is float64
    (:func:`float64_lines`), and what float64 costs on the GPUs the course names. None when it
    does not, or where the compile step cannot run."""
    lines = float64_lines(kernel_source, arg_types)
    if not lines:
        return None
    name = recipe_of(kernel_source)["name"]
    return (f"`{name}` computes in float64 although no argument is float64: "
            f"{lines_said(lines)} (compiled for sm_{COMPILE_FOR[0]}{COMPILE_FOR[1]}). Unless "
            "you chose float64: in Numba a float literal such as `0.0` or `1.0` is a float64, "
            "and so is "
            "an integer meeting a float32 (`hits += 1` on a float32 `hits`, `1 - beta`), `/` "
            "between integers and `** 0.5`; so is everything computed from them. "
            f"{float64_cost()} This fails only a check whose exercise asks for float32 (chapter "
            "04's fp32 accumulator); elsewhere, on a GPU, it can cost time.")


def _code_of(line: str) -> str:
    """A source line without its indentation and trailing comment."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(line.strip() + "\n").readline))
    except (tokenize.TokenError, SyntaxError):  # a line of a statement over several lines
        return line.strip()
    comment = next((token for token in tokens if token.type == tokenize.COMMENT), None)
    return line.strip()[:comment.start[1]].rstrip() if comment else line.strip()


def float64_cost() -> str:
    """float64's rate against float32's on the course's GPUs, as gpulab.hardware gives them."""
    from gpulab import hardware

    def share(gpu) -> str:
        return f"1/{gpu.peak_flops['fp32'] / gpu.peak_flops['fp64']:.0f}"

    return (f"On a T4 float64 arithmetic runs at {share(hardware.T4)} of float32's rate and on an "
            f"L4 at {share(hardware.L4)} (the CUDA C++ Programming Guide's throughput table for "
            f"their compute capabilities), on an H100 SXM at {share(hardware.H100_SXM)} (its "
            "datasheet); gpulab.hardware cites each.")


class _CompilerProcess:
    """One child process (``GPULAB_DEVICE=ptx``) that compiles kernels for as long as this
    process lives: numba's CUDA target loads once (~1.5 s), and each later compile takes a
    fraction of a second. Requests and answers are JSON lines; an answer that does not come
    within ``COMPILE_TIMEOUT_S`` ends the child (the next request starts a new one)."""

    MARK = "gpulab-compiled "  # starts every answer line: anything else the child prints is not

    def __init__(self):
        self.process: subprocess.Popen | None = None
        self.answers: queue.Queue = queue.Queue()
        self.lock = threading.Lock()

    def _start(self) -> None:
        environment = dict(os.environ, GPULAB_DEVICE="ptx", NUMBA_ENABLE_CUDASIM="0")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gpulab.exercises.compiling", "--serve-compiler"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, env=environment)
        self.answers = queue.Queue()
        threading.Thread(target=self._read, args=(self.process, self.answers),
                         daemon=True).start()

    @classmethod
    def _read(cls, process: subprocess.Popen, answers: queue.Queue) -> None:
        for line in process.stdout:
            if line.startswith(cls.MARK):
                answers.put(line[len(cls.MARK):])
        answers.put(None)  # the child ended

    def ask(self, request: dict) -> dict:
        with self.lock:
            if self.process is None or self.process.poll() is not None:
                self._start()
            try:
                self.process.stdin.write(json.dumps(request) + "\n")
                self.process.stdin.flush()
                line = self.answers.get(timeout=COMPILE_TIMEOUT_S)
            except (OSError, queue.Empty):
                line = None
            if line is None:
                self.stop()
                return {"skipped": "the compiler process stopped or took too long."}
            return json.loads(line)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.process = None


COMPILE_TIMEOUT_S = 120.0
_COMPILER = _CompilerProcess()
atexit.register(_COMPILER.stop)


def _compile_one(request: dict, cuda) -> dict:
    """Child side: compile one request; the answer as a dict."""
    cc = tuple(request["cc"])
    try:
        function = rebuild_function(request["recipe"])
    except Exception as error:  # noqa: BLE001 - the learner's source, e.g. a SyntaxError
        return {"error": f"{type(error).__name__}: {error}"}
    try:
        ptx, _ = cuda.compile_ptx(function, request["signature"], cc=cc, lineinfo=True)
    except Exception as error:  # noqa: BLE001 - every compiler error is the answer
        text = f"{type(error).__name__}: {error}"
        if re.search(r"nvvm|nvrtc|nvjitlink|driver", text, re.IGNORECASE) and not re.search(
                r"TypingError|UnsupportedError|NumbaError", text):
            return {"skipped": f"the CUDA compiler is not usable here ({text[:200]})"}
        return {"error": text}
    filename = function.__code__.co_filename  # "<kernel NAME>"; the PTX puts a folder before it
    float16 = float16_arithmetic(ptx)
    return {"error": None,
            "float64_lines": _float64_lines(function, request["signature"], ptx, cc),
            "float16_lines": [[line, " ".join(sorted(float16[file, line]))]
                              for file, line in sorted(float16) if file.endswith(filename)]}


def _float64_lines(function, signature: str, ptx: str, cc: tuple[int, int]) -> list:
    """Child side: [line, "opcodes"] for each line of the kernel's own source on which the
    PTX does float64 arithmetic and Numba's types give an arithmetic result float64; [] when
    an argument is float64 or complex128 (then float64 is the caller's choice)."""
    if re.search(r"float64|complex128", signature):
        return []
    filename = function.__code__.co_filename
    in_ptx = {line: opcodes for (file, line), opcodes in float64_arithmetic(ptx).items()
              if file.endswith(filename)}
    if not in_ptx:
        return []
    try:
        from numba.core import sigutils
        from numba.cuda.compiler import compile_cuda

        arguments, _ = sigutils.normalize_signature(signature)
        annotation = compile_cuda(function, None, arguments, cc=cc).type_annotation
        typemap = annotation.typemap

        def float64(variable) -> bool:
            return str(typemap.get(getattr(variable, "name", None))) in ("float64", "complex128")

        # By name: numba-cuda's own copy of numba's IR and types is not numba.core's. Only the
        # kernel's own statements: an inlined device function's keep its file and lines.
        typed = {statement.loc.line for block in annotation.blocks.values()
                 for statement in block.body
                 if type(statement).__name__ == "Assign"
                 and str(statement.loc.filename).endswith(filename)
                 and (getattr(statement.value, "op", None) in ("binop", "inplace_binop", "call",
                                                               "unary")
                      and float64(statement.target)
                      or getattr(statement.value, "op", None) == "binop"  # a comparison
                      and (float64(statement.value.lhs) or float64(statement.value.rhs)))}
    except Exception:  # noqa: BLE001 - another numba's internals: no note rather than a wrong one
        return []
    return [[number, " ".join(sorted(in_ptx[number]))] for number in sorted(in_ptx)
            if number in typed]


def _serve_compiler() -> None:
    """Child side of :class:`_CompilerProcess` (``GPULAB_DEVICE=ptx``): one JSON request per
    line on stdin, one marked JSON answer per line on stdout, until stdin closes."""
    def answer(result: dict) -> None:
        sys.stdout.write(_CompilerProcess.MARK + json.dumps(result) + "\n")
        sys.stdout.flush()

    try:
        import numba.cuda.dispatcher as dispatcher
        from numba import cuda
    except Exception as error:  # noqa: BLE001 - say why, the parent skips the step
        failure = {"skipped": f"numba's CUDA target did not load ({error})"}
        for _ in sys.stdin:
            answer(failure)
        return

    class _Device:  # what compile_ptx asks the driver for when a kernel calls a device
        compute_capability = COMPILE_FOR  # function or formats a string: there is no driver

    dispatcher.get_current_device = _Device
    for line in sys.stdin:
        if line.strip():
            _Device.compute_capability = tuple(json.loads(line)["cc"])
            answer(_compile_one(json.loads(line), cuda))


_ARRAY_CREATORS = "|".join(sorted(ARRAY_FUNCTIONS))


# NumPy ufuncs whose math-module (or operator) counterpart has another name; the others have
# the same name in math (sqrt, exp, log, floor, ...). None: math has none.
_MATH_FOR_UFUNC = {"absolute": "`abs(...)` or `math.fabs(...)`", "power": "`x ** y`",
                   "square": "`x * x`", "negative": "`-x`", "multiply": "`x * y`",
                   "add": "`x + y`", "subtract": "`x - y`", "divide": "`x / y`",
                   "true_divide": "`x / y`", "maximum": "`max(x, y)`", "minimum": "`min(x, y)`",
                   "arctan2": "`math.atan2(...)`", "arcsin": "`math.asin(...)`",
                   "arccos": "`math.acos(...)`", "arctan": "`math.atan(...)`",
                   "fmod": "`math.fmod(...)`", "rint": "`round(...)`"}


def _ufunc_hint(found: re.Match) -> str:
    name = found.group(1)
    instead = _MATH_FOR_UFUNC.get(name) or (
        f"the math module's `math.{name}(...)`" if callable(getattr(math, name, None)) else
        "the math module's functions or plain arithmetic")
    return (f"NumPy's `{name}` (`np.{name}`, or `from numpy import {name}`) does not compile in "
            f"a GPU kernel: use {instead} instead.")


# (what the compiler's error says, the likely cause in plain words), tried in order by
# compiler_message; a hint may be a function of the match.
_COMPILER_HINTS = (
    (r"KeyError: <ufunc '(\w+)'>", _ufunc_hint),
    (r"IMPORT_NAME|IMPORT_FROM", "an `import` inside a kernel does not compile for a GPU: "
     "import at the top of the cell, outside the kernel, and use the name inside."),
    (r"yield|generator", "generator expressions such as `sum(x[j] for j in ...)` don't compile "
     "for a GPU: write the loop out with an accumulator."),
    (r"mod\(Literal\[str\]|Function\(<class 'str'>\)|format|unicode_type",
     "`print` in a kernel takes plain values: `print('i =', i)`; `%` formatting, f-strings and "
     "str() don't compile for a GPU."),
    (r"shared\.array|local\.array|function array\b", "the size of a shared or local array must be "
     "a constant the compiler knows: a number, or a global constant such as `THREADS = 64` "
     "defined outside the kernel, not `x.shape[0]` or another value computed when the kernel "
     "runs."),
    (rf"built-in function ({_ARRAY_CREATORS})\b|numpy|\nnp\.", "kernels can't call NumPy to "
     "create or combine arrays: use `cuda.local.array(N, dtype)` (N a constant) for scratch "
     "space, and a loop for a sum."),
    (r"build_list|NRT required|reflected list|list\(|build_map|build_set", "Python lists, dicts "
     "and sets don't exist on a GPU: use `cuda.local.array(N, dtype)` for a small per-thread "
     "array."),
    (r"a Python (list|dict|set)", "Python lists, dicts and sets don't exist on a GPU, not even as "
     "globals: call each device function by its name (choose with an `if`), and keep numbers in "
     "a tuple or a NumPy array."),
    (r"Untyped global name '(\w+)'", lambda found: (
        f"`{found.group(1)}` is not something a GPU kernel can call or use: a helper function "
        "needs `@cuda.jit(device=True)`, and other Python objects can't be used in a kernel.")),
    (r"Cannot cast (Uni)?Tuple\(.*\) to u?int", "a tuple stands where one whole number goes "
     "(an index such as `(0,)` for a 1-D array, as in `cuda.atomic.add(out, (0,), v)`): give "
     "the number itself."),
    (r"void return type", "a kernel returns nothing: write its result into an output array "
     "(`out[i] = ...`) instead of `return`ing it."),
    (r"NameError", "a name is not defined: check the spelling, and that everything the kernel "
     "uses is defined before the cell that defines the kernel."),
    (r"setitem|getitem", "wrong types: this line puts a whole array where one number goes, or "
     "indexes with something that is not a whole number (`/` gives a float: use `//`)."),
)


def compiler_message(error: str) -> tuple[str, str]:
    """(what the compiler said, in one or two lines, with the line of the kernel it names;
    a hint that names the likely cause) for a numba CUDA compile error."""
    lines = error.splitlines()
    first, signature, code = "", "", ""
    for number, line in enumerate(lines):
        text = line.strip()
        bare = re.sub(r"^\w+Error: ", "", text)
        if not first and text and not bare.startswith(("Failed in", "During:", "File ", "-")):
            first = text
            continue
        if first and not signature and text.startswith(">>>"):
            signature = text[3:].strip()
        if text == "^" and number > 0:
            code = code or lines[number - 1].strip()
    said = first + (f" — {signature}" if signature else "") + (f" at `{code}`" if code else "")
    for pattern, hint in _COMPILER_HINTS:
        found = re.search(pattern, error + ("\nnp." if "np." in code else ""))
        if found:
            return said, hint(found) if callable(hint) else hint
    return said, SIMULATOR_ONLY_HINT


if __name__ == "__main__":
    if "--serve-compiler" in sys.argv:
        _serve_compiler()
