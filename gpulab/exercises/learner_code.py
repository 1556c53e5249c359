"""Whether the learner's code is the learner's own, and whether it left the check alone.

Two ways to pass a check without doing the exercise: hand it gpulab's own kernel or reference
(or a function that only calls them), or replace a part of the check (``gpulab.reference.dot =
...``, ``np.allclose = lambda *a, **k: True``, ``CheckSpec.reject = ...``) so that it compares
with what you want. :func:`gpulab_things_used` finds the first, from the globals a function or
kernel uses, the gpulab modules it imports in its body (``from gpulab import reference`` inside
the function, ``sys.modules["gpulab...."]``), and those of the functions it calls;
:func:`replaced_parts` finds the second, by comparing the functions of the modules a check
relies on (every ``gpulab.exercises`` module, the chapters' included; private ones too) and the
methods of the classes they define, and the NumPy, builtin and ``math`` functions it computes
with, with what they were when first remembered. A function handed through a
``functools.partial`` or an object's ``__call__`` is looked behind.
"""

from __future__ import annotations

import builtins
import contextvars
import dis
import fractions
import functools
import inspect
import math
import os
import re
import sys
import sysconfig
import threading
import types
from collections.abc import Iterator
from contextlib import contextmanager

from gpulab.instruments import launchable, python_function

# The modules whose functions (and classes' methods) a check relies on to judge: these, and
# every module of the package below (the chapters' checks included) once imported; numpy: only
# the names below.
GUARDED_MODULES = ("gpulab.reference", "gpulab.instruments", "gpulab.nn.cost",
                   "gpulab.parallel.links", "gpulab.parallel.collectives",
                   "gpulab.serving.energy", "gpulab.serving.loadtest")
GUARDED_PACKAGE = "gpulab.exercises."
_CHAPTER_MODULE = re.compile(r"gpulab\.exercises\.ch\d\d(\.|$)")
GUARDED_NUMPY = ("allclose", "isclose", "array_equal", "isnan", "isfinite", "abs", "flatnonzero",
                 "diff", "sum", "sort", "cumsum", "mean")
# and Python's own that the checks compute with: these builtins, every function of `math`
GUARDED_BUILTINS = ("abs", "all", "any", "bool", "dict", "enumerate", "float", "int",
                    "isinstance", "len", "list", "max", "min", "range", "repr", "round", "set",
                    "sorted", "str", "sum", "tuple", "type", "zip")


def _function_of(thing, through_wrappers: bool = True) -> types.FunctionType | None:
    """The Python function behind a kernel, a device function or a plain function; with
    ``through_wrappers``, also behind a ``functools.partial``, a bound method and an object
    whose class defines ``__call__`` (the function that call runs: gpulab's own, when the
    class's ``__call__`` is ``staticmethod(gpulab's function)``)."""
    for _ in range(16) if through_wrappers else ():
        if isinstance(thing, functools.partial):
            thing = thing.func
        elif inspect.ismethod(thing):
            thing = thing.__func__
        else:
            break
    if inspect.isfunction(thing):
        return thing
    function = python_function(thing) or getattr(launchable(thing), "py_func", None)
    if inspect.isfunction(function):
        return function
    if not through_wrappers or isinstance(thing, type):
        return None
    call = inspect.getattr_static(type(thing), "__call__", None)
    call = call.__func__ if isinstance(call, staticmethod | classmethod) else call
    return call if inspect.isfunction(call) else None


def name_of(thing) -> str:
    """The name of the function behind ``thing`` (a kernel, a partial, a callable object), or
    "your code"."""
    function = _function_of(thing)
    return getattr(function, "__name__", None) or getattr(thing, "__name__", "your code")


def _is_gpulab(thing) -> bool:
    if isinstance(thing, types.ModuleType):
        return thing.__name__ == "gpulab" or thing.__name__.startswith("gpulab.")
    function = _function_of(thing) if callable(thing) else None
    module = getattr(function or thing, "__module__", None) if callable(thing) else None
    return isinstance(module, str) and module.startswith("gpulab.")


def _is_gpulab_name(name: object) -> bool:
    return isinstance(name, str) and (name == "gpulab" or name.startswith("gpulab."))


def _gpulab_imported(function: types.FunctionType) -> list[str]:
    """The gpulab modules (and names from them) ``function`` imports in its own body, or reaches
    by name (``sys.modules["gpulab.kernels.launch"]``, ``importlib.import_module(...)``). Of the
    checks' own modules (``gpulab.exercises``), only the chapters' (``from gpulab.exercises.ch12
    import nearest_rank``: the references a check compares with): what a function does with
    the others is :func:`replaced_parts`' to tell."""
    found = []

    def collect(code: types.CodeType) -> None:
        previous = None
        for instruction in dis.get_instructions(code):
            if instruction.opname == "IMPORT_NAME" and _is_gpulab_name(instruction.argval):
                fromlist = previous.argval if previous is not None else None
                names = fromlist if isinstance(fromlist, tuple) else ()
                found.extend([f"{instruction.argval}.{name}" for name in names]
                             or [instruction.argval])
            elif (instruction.opname == "LOAD_CONST" and isinstance(instruction.argval, str)
                  and instruction.argval.startswith("gpulab.")
                  and instruction.argval in sys.modules):  # a module's name, not any text
                found.append(instruction.argval)
            previous = instruction
        for constant in code.co_consts:
            if isinstance(constant, types.CodeType):
                collect(constant)

    collect(function.__code__)
    return [name for name in found
            if not name.startswith(GUARDED_PACKAGE) or _CHAPTER_MODULE.match(name)]


def attributes_set(thing) -> list[str]:
    """The attributes the learner's ``thing`` (and the functions it calls) set on objects
    (``module.name = ...``), and ``"setattr"``, ``"vars"`` or ``"__dict__"`` where it reaches
    an object's attributes that way: with a check's module in reach, a part of the check
    replaced."""
    found: list[str] = []
    for function in learner_functions(thing):
        found += sorted(_names_loaded(function.__code__, ("STORE_ATTR",)))
        found += sorted(_names_loaded(function.__code__, ("LOAD_GLOBAL", "LOAD_NAME"))
                        & {"setattr", "vars"})  # setattr(m, name, f), vars(m)[name] = f
        found += sorted(_attributes_read(function) & {"__dict__"})  # m.__dict__[name] = f
    return list(dict.fromkeys(found))


def _globals_used(function: types.FunctionType) -> dict[str, object]:
    """The globals (and closure variables) ``function`` reads, with their values."""
    names = _names_loaded(function.__code__, ("LOAD_GLOBAL", "LOAD_NAME"))
    scope = dict(function.__globals__)
    if function.__closure__:
        for name, cell in zip(function.__code__.co_freevars, function.__closure__, strict=True):
            try:
                scope[name] = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            names.add(name)
    return {name: scope[name] for name in sorted(names) if name in scope}


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    """``code`` and the code nested in it (its inner functions, lambdas, comprehensions)."""
    yield code
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            yield from _codes(constant)


def _names_loaded(code: types.CodeType, opnames: tuple[str, ...]) -> set[str]:
    """The names the instructions ``opnames`` load in ``code`` and the code nested in it."""
    return {i.argval for inner in _codes(code) for i in dis.get_instructions(inner)
            if i.opname in opnames}


# Instructions that read a local variable or a cell (3.12's LOAD_FAST_CHECK and
# LOAD_FAST_AND_CLEAR, 3.13's LOAD_FAST_LOAD_FAST with a pair of names), and the builtins that
# read every local at once.
_LOCAL_READS = ("LOAD_FAST", "LOAD_DEREF", "LOAD_CLOSURE", "LOAD_CLASSDEREF")
_ALL_LOCALS = {"locals", "vars", "eval", "exec"}


def parameter_unread(thing, position: int) -> str | None:
    """The name of the learner's ``thing``'s positional parameter number ``position`` (from
    0) when its code, and the code nested in it, never reads it: a value the caller gives and
    the function ignores (``for _ in range(5)`` beside a ``repeats`` parameter). None when it is
    read, when the function takes it through ``*args``, or reads its locals wholesale."""
    function = _function_of(thing, through_wrappers=False)
    if function is None or position >= function.__code__.co_argcount:
        return None
    code = function.__code__
    read: set[str] = set()
    for inner in _codes(code):
        for instruction in dis.get_instructions(inner):
            if instruction.opname.startswith(_LOCAL_READS):
                value = instruction.argval
                read.update(value if isinstance(value, tuple) else (value,))
    if read & {code.co_varnames[position]} or _names_loaded(
            code, ("LOAD_GLOBAL", "LOAD_NAME")) & _ALL_LOCALS:
        return None
    return code.co_varnames[position]


def learner_functions(thing) -> list[types.FunctionType]:
    """The function behind ``thing`` and, through their globals, every plain function it calls
    that the learner wrote (not gpulab's), each once."""
    found: list[types.FunctionType] = []
    pending = [_function_of(thing)]
    while pending:
        function = pending.pop()
        if function is None or any(function is seen for seen in found):
            continue
        found.append(function)
        pending += [value for value in _globals_used(function).values()
                    if inspect.isfunction(value) and not _is_gpulab(value)]
    return found


def _attributes_read(function: types.FunctionType) -> set[str]:
    """The attribute names ``function`` reads (``cost.estimate_step`` reads "estimate_step")."""
    return _names_loaded(function.__code__, ("LOAD_ATTR", "LOAD_METHOD"))


def _is_within(module: str, prefixes: tuple[str, ...]) -> bool:
    """Is ``module`` one of the ``prefixes`` (or below one), or a package above one (``gpulab``
    above ``gpulab.nn.cost``: what it reaches through it is checked by name)?"""
    return any(module == a or module.startswith(a + ".") or a.startswith(module + ".")
               for a in prefixes)


def gpulab_things_used(thing, allowed: tuple[str, ...] = (),
                       refused: tuple[str, ...] = ()) -> list[str]:
    """What of gpulab's own the learner's ``thing`` (a kernel or a function) is or uses:
    ``["gpulab.reference (as `reference`)"]``, ``["gpulab.kernels.elementwise.multiply"]`` when
    it *is* gpulab's; empty for the learner's own work. Functions the learner wrote and
    ``thing`` calls are looked into too. ``allowed``: gpulab modules it may use; ``refused``:
    names in them it may not (``"gpulab.nn.cost.estimate_step"``: the model a check compares
    with), whether reached as a global or as an attribute read in the function's code."""
    found: list[str] = []
    seen: set[int] = set()

    def refused_through(module: str, where: str, attributes: set[str]) -> list[str]:
        return [f"{r} ({where})" for r in refused
                if r.rsplit(".", 1)[0].startswith(module) and r.rsplit(".", 1)[1] in attributes]

    def visit(item, name: str | None, attributes: set[str]) -> None:
        if _is_gpulab(item):
            is_module = isinstance(item, types.ModuleType)
            module = item.__name__ if is_module else (
                getattr(_function_of(item) or item, "__module__", "gpulab"))
            label = (module if is_module else
                     f"{module}.{getattr(_function_of(item) or item, '__name__', name)}")
            if not _is_within(module, allowed) or label in refused:
                found.append(label + (f" (as `{name}`)" if name else ""))
            elif is_module:
                found.extend(refused_through(module, f"through `{name or module}`", attributes))
            return
        function = _function_of(item) if callable(item) else None
        if function is None or id(function) in seen:
            return
        seen.add(id(function))
        read = _attributes_read(function)
        for module in _gpulab_imported(function):
            if not _is_within(module, allowed) or module in refused:
                found.append(f"{module} (imported in `{function.__name__}`)")
            else:
                found.extend(refused_through(module, f"through {module} imported in "
                                                     f"`{function.__name__}`", read))
        for global_name, value in _globals_used(function).items():
            visit(value, global_name, read)

    visit(thing, None, set())
    return list(dict.fromkeys(found))


# Where Python's own modules and the installed packages live: a frame of their code (contextlib
# resuming a check's generator, threading starting a rank) is no learner's.
_LIBRARY_FOLDERS = tuple(dict.fromkeys(
    os.path.realpath(folder) + os.sep for key in ("stdlib", "platstdlib", "purelib", "platlib")
    if (folder := sysconfig.get_paths().get(key))))


def _called_by_learner(frame) -> bool:
    """Walking back from ``frame`` (a caller) past Python's and installed packages' frames
    (contextlib, threading, concurrent.futures): is the first other frame the learner's code,
    or is there none (a thread the learner's code started)? False when it is gpulab's."""
    while frame is not None:
        if _is_gpulab_name(frame.f_globals.get("__name__", "")):
            return False
        if not os.path.realpath(frame.f_code.co_filename).startswith(_LIBRARY_FOLDERS):
            return True
        frame = frame.f_back
    return True


def _named(name: str):
    """What ``name`` leads to: a function (``"gpulab.nn.cost.estimate_step"``), a method or a
    property's getter (``"gpulab.exercises.ch11.TimeAnswer.want"``), as it is held (a cached
    function's wrapper too); None when it leads to nothing callable (its module not
    imported)."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        thing = sys.modules.get(".".join(parts[:cut]))
        if thing is None:
            continue
        for attribute in parts[cut:]:
            held = (inspect.getattr_static(thing, attribute, None) if isinstance(thing, type)
                    else getattr(thing, attribute, None))
            thing = held.fget if isinstance(held, property) else held
            if isinstance(thing, (staticmethod, classmethod)):
                thing = thing.__func__
        return thing if callable(thing) else None
    return None


# What the check running now watches for: the refused names' code objects, the modules the
# learner's code may use, and the list the calls found are added to.
_WATCHED: contextvars.ContextVar[tuple[dict, tuple, list] | None] = contextvars.ContextVar(
    "gpulab_watched_calls", default=None)


@contextmanager
def calls_from_outside_gpulab(names: tuple[str, ...], called: list[str],
                              allowed: tuple[str, ...] = ()) -> Iterator[None]:
    """Within this block, the learner's code (called under :func:`watching_calls`) may not
    call a function of gpulab's (:func:`refused_callee`): each one it calls appends its name
    to ``called``, however the code reached it (``getattr(cost, "estimate_" + "step")``,
    ``sys.modules``, ``importlib``, a wrapper's ``__wrapped__``, a thread of its own): what
    :func:`gpulab_things_used` cannot see in the code. ``names``: functions refused even in
    the ``allowed`` modules (``"gpulab.nn.cost.estimate_step"``, a property's getter).
    Nothing is replaced; gpulab's own calls (the check's) are not counted."""
    held = {name: thing for name in names if (thing := _named(name)) is not None}
    watched = {function.__code__: name.removesuffix(".__init__") for name, thing in held.items()
               if (function := _function_of(inspect.unwrap(thing))) is not None}
    token = _WATCHED.set((watched, allowed, called))
    try:
        yield
    finally:
        _WATCHED.reset(token)


# gpulab's own machinery, never an answer: the simulator's instruments (a kernel's math.exp in
# the simulator runs one of their functions) and the simulated MPI ranks (a ring's requests).
_MACHINERY = ("gpulab.instruments", "gpulab.parallel.simulated")
_MACHINERY_CODE: set[types.CodeType] = set()


def machinery(function: types.FunctionType) -> types.FunctionType:
    """Mark a chapter module's function as the check's machinery, not an answer, which the
    learner's code may reach without knowing (``pickle`` loading a model the check handed
    over). It must call nothing the learner's code could hand it."""
    _MACHINERY_CODE.add(function.__code__)
    return function


def refused_callee(code: types.CodeType, module: str, watched: dict,
                   allowed: tuple[str, ...], handed: tuple = ()) -> str | None:
    """The name of the function whose ``code`` runs in ``module``, when a learner's code may
    not call it: one of ``watched``'s, a module-level function of gpulab's outside ``allowed``
    (the checks' machinery's too: ``call_learner(reference, ...)`` would call the reference
    from gpulab's own code, unseen), or a method or property of gpulab's outside ``allowed``
    and the checks' machinery (a chapter module's reference answers count, and its evidence
    classes' expected values). Not refused: the methods of a
    class of which the check ``handed`` the learner's code an object (a model to call);
    functions nested in a check, which it hands the learner to call; kernels, which a check
    hands the learner to launch; the simulator's instruments, which the learner's kernels call
    without knowing. None otherwise."""
    if code in watched:
        return watched[code]
    if code in _MACHINERY_CODE or (not _is_gpulab_name(module) or _is_within(module, allowed)
            or _is_within(module, _MACHINERY)):
        return None
    held = getattr(sys.modules.get(module), code.co_name, None)
    function = inspect.unwrap(held) if callable(held) else None
    if inspect.isfunction(function) and function.__code__ is code:
        return f"{module}.{code.co_name}"  # the checks' machinery's too: `call_learner(ref, …)`
    if module.startswith(GUARDED_PACKAGE) and not _CHAPTER_MODULE.match(module):
        return None  # its classes' methods: the spies and stand-ins a check puts in its place
    method = _method_named(sys.modules.get(module), code, handed)
    return f"{module}.{method}" if method else None


def _method_named(module: types.ModuleType | None, code: types.CodeType,
                  handed: tuple = ()) -> str | None:
    """``"Class.name"`` when ``code`` is a method's, a property's or a cached property's of a
    class ``module`` defines, unless the check handed the learner's code one of that class's
    objects among ``handed`` (a model to call); not a function nested in one, which a check may
    hand the learner to call. None otherwise."""
    for class_name, value in vars(module).items() if module is not None else ():
        if (not isinstance(value, type) or value.__module__ != module.__name__
                or any(isinstance(thing, value) for thing in handed)):
            continue
        for name, member in vars(value).items():
            for held in (member, getattr(member, "fget", None), getattr(member, "func", None),
                         getattr(member, "__func__", None)):
                if getattr(held, "__code__", None) is code:
                    return f"{class_name}.{name}"
    return None


# What switches the watch off: the learner's code calling one of these while it is watched is
# told as a change to the check (a C function's call is seen as the profile hook's "c_call").
# (Python 3.12's all-threads versions too.)
_SWITCH_NAMES = ("sys.setprofile", "sys._setprofileallthreads", "threading.setprofile",
                 "threading.setprofile_all_threads")
_SWITCHES = {name: thing for name in _SWITCH_NAMES
             if (thing := getattr(sys.modules[name.split(".")[0]], name.split(".")[1], None))}
WATCH_SWITCHES = tuple(_SWITCHES)
_SWITCH_CODES = {thing.__code__: name for name, thing in _SWITCHES.items()
                 if hasattr(thing, "__code__")}  # threading's, written in Python
_SET_PROFILE = sys.setprofile  # the C functions among them, compared by identity: the hook
_SET_PROFILE_ALL = getattr(sys, "_setprofileallthreads", _SET_PROFILE)  # sees every C call


@contextmanager
def watching_calls(handed: tuple = (), threads: bool = True) -> Iterator[None]:
    """Around a call of the learner's code: a profile hook (:func:`sys.setprofile` for this
    thread, :func:`threading.setprofile` for threads it starts, unless ``threads`` is False: a
    rank's thread of several watched at once) that tells :func:`calls_from_outside_gpulab`'s
    block of each refused function the learner's code calls (:func:`refused_callee`;
    ``handed``: the arguments the check gave it), and of the learner's code switching the hook
    off (:data:`WATCH_SWITCHES`). Only around the learner's calls, as a hook slows every
    call."""
    state = _WATCHED.get()
    if state is None:
        yield
        return
    watched, allowed, called = state
    verdicts: dict[types.CodeType, str | None] = {}

    def watch(frame, event, argument):
        # (a cached function's wrapper is C code, and a call its cache answers runs no Python:
        # a check's reference keeps its cache behind a plain function)
        if event != "call":
            if event == "c_call" and (argument is _SET_PROFILE or argument is _SET_PROFILE_ALL
                                      ) and _called_by_learner(frame):
                called.append(f"sys.{argument.__name__}")
            return
        if frame.f_code in _SWITCH_CODES and _called_by_learner(frame.f_back):
            called.append(_SWITCH_CODES[frame.f_code])
        code = frame.f_code
        if code in verdicts:  # a code object's verdict does not change: judged once
            name = verdicts[code]
        else:
            name = verdicts[code] = refused_callee(
                code, frame.f_globals.get("__name__", ""), watched, allowed, handed)
        if name is not None and _called_by_learner(frame.f_back):
            called.append(name)

    before, before_threads = sys.getprofile(), threading.getprofile()
    sys.setprofile(watch)
    if threads:
        threading.setprofile(watch)
    try:
        yield
        # (after a normal return only: an exception inside the hook removes it too)
        if sys.getprofile() is not watch or threads and threading.getprofile() is not watch:
            called.append("sys.setprofile")  # however it was reached: the hook is not ours
    finally:
        sys.setprofile(before)
        if threads:
            threading.setprofile(before_threads)


# Names that read the interpreter's frames or objects: a learner's function that reads them can
# take the check's own expected values from the caller's frame (``sys._getframe(1).f_locals``).
FRAME_READING = ("_getframe", "currentframe", "f_back", "f_locals", "f_globals",
                 "getouterframes", "getinnerframes", "tb_frame", "get_referrers", "get_objects",
                 "exc_info", "getargvalues")
# Modules whose business is the interpreter's frames and objects: no exercise needs them.
FRAME_MODULES = ("inspect", "traceback", "gc")


def frames_read(thing) -> list[str]:
    """Which of :data:`FRAME_READING` the learner's ``thing`` (or a function it calls that the
    learner wrote) uses, and which of :data:`FRAME_MODULES`."""
    used = words_used(thing)
    return ([word for word in FRAME_READING if word in used]
            + modules_used(thing, FRAME_MODULES))


def words_used(thing) -> set[str]:
    """The names (globals, attributes) and the texts (string constants) the learner's
    ``thing`` uses in its code, and in the functions it calls that the learner wrote:
    ``{"np", "array", "view", "float8_e4m3fn", ...}``, for a check to tell a library call
    that only shows as words (a dtype named by its text)."""
    words: set[str] = set()
    for function in learner_functions(thing):
        words.update(str(name) for name in _names_loaded(
            function.__code__, ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_ATTR", "LOAD_METHOD")))
        words.update(c for code in _codes(function.__code__) for c in code.co_consts
                     if isinstance(c, str))
    return words


def modules_used(thing, modules: tuple[str, ...]) -> list[str]:
    """Which of ``modules`` (``"ml_dtypes"``, ``"struct"``) the learner's ``thing`` uses: a
    global or closure value that is one of them or comes from one, or an import in its body;
    functions it calls that the learner wrote are looked into too."""
    def module_of(value) -> str:
        if isinstance(value, types.ModuleType):
            return value.__name__
        return getattr(value, "__module__", None) or getattr(type(value), "__module__", "")

    found: list[str] = []
    for function in learner_functions(thing):
        found += [str(name) for name in _names_loaded(function.__code__, ("IMPORT_NAME",))
                  if _is_within(str(name), modules)]
        found += [module.split(".")[0] for value in _globals_used(function).values()
                  if (module := module_of(value) or "") and _is_within(module, modules)]
    return list(dict.fromkeys(found))


def _guarded_functions() -> dict[str, object]:
    """``{"gpulab.reference.dot": function, "gpulab.exercises.spec.CheckSpec.reject": ...}``:
    the callables of the guarded modules (private ones too: ``ch06._close``), and the plain
    functions (methods) of the classes each defines; :data:`GUARDED_NUMPY` and the functions
    of their own modules they call, :data:`GUARDED_BUILTINS`, the functions of ``math`` and
    the methods of ``fractions.Fraction``."""
    parts = {}
    names = [*GUARDED_MODULES, *(name for name in list(sys.modules)
                                 if name.startswith(GUARDED_PACKAGE))]
    for module_name in names:
        module = sys.modules.get(module_name)
        for name, value in vars(module).items() if module is not None else ():
            if (not callable(value) or name.startswith("__")
                    or isinstance(value, types.ModuleType)):
                continue
            parts[f"{module_name}.{name}"] = value
            if isinstance(value, type) and value.__module__ == module_name:
                for attribute, method in vars(value).items():
                    if isinstance(method, types.FunctionType) and not attribute.startswith("__"):
                        parts[f"{module_name}.{name}.{attribute}"] = method
    numpy = sys.modules.get("numpy")
    for name in GUARDED_NUMPY:
        parts[f"numpy.{name}"] = getattr(numpy, name, None)
        # and what it calls in its own module (np.allclose calls numpy._core.numeric.isclose;
        # NumPy's dispatcher wraps the Python function), as first remembered
        function = _ORIGINALS.get(f"numpy.{name}", parts[f"numpy.{name}"])
        function = getattr(function, "__wrapped__", function)
        code, scope = getattr(function, "__code__", None), getattr(function, "__globals__", {})
        for called in code.co_names if code is not None else ():
            if callable(scope.get(called)) and not isinstance(scope[called], types.ModuleType):
                parts[f"{scope.get('__name__', 'numpy')}.{called}"] = scope[called]
    for name in GUARDED_BUILTINS:
        parts[f"builtins.{name}"] = getattr(builtins, name, None)
    for name, value in vars(math).items():
        if callable(value):
            parts[f"math.{name}"] = value
    for name, method in vars(fractions.Fraction).items():  # ch12's exact ranks
        if isinstance(method, types.FunctionType):
            parts[f"fractions.Fraction.{name}"] = method
    return parts


_ORIGINALS: dict[str, object] = {}


def remember_originals() -> None:
    """Record the guarded modules' functions as they are now (at import, by
    :mod:`gpulab.exercises.spec`; again for modules imported later)."""
    for name, value in _guarded_functions().items():
        _ORIGINALS.setdefault(name, value)


def replaced_parts() -> list[str]:
    """Names of the check's functions (``"gpulab.reference.dot"``) that are no longer what
    they were when first remembered, or have gone."""
    now = _guarded_functions()
    return [name for name, original in _ORIGINALS.items() if now.get(name) is not original]


__all__ = ["FRAME_MODULES", "FRAME_READING", "GUARDED_BUILTINS", "GUARDED_MODULES",
           "GUARDED_NUMPY", "GUARDED_PACKAGE", "attributes_set", "calls_from_outside_gpulab",
           "frames_read", "gpulab_things_used", "learner_functions", "modules_used", "name_of",
           "parameter_unread",
           "refused_callee", "remember_originals", "replaced_parts", "watching_calls"]
