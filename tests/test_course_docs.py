"""The cheat sheet and the glossary (course/CHEATSHEET.md, course/GLOSSARY.md) hold up: every
Numba name the cheat sheet shows exists in numba-cuda (in the simulator, unless the sheet says
"not in the simulator", and in the real CUDA target), every gpulab name and command exists,
the glossary is in alphabetical order, and every chapter link resolves to a chapter that uses
the term."""

import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numba import cuda  # conftest imported gpulab first; the simulator swaps this global

import gpulab
from gpulab import device

ROOT = Path(__file__).resolve().parents[1]
CHEATSHEET = ROOT / "course" / "CHEATSHEET.md"
GLOSSARY = ROOT / "course" / "GLOSSARY.md"
NOT_IN_SIMULATOR = "not in the simulator"

CUDA_NAME = re.compile(r"\bcuda\.([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)")
GPULAB_NAME = re.compile(r"\bgpulab((?:\.[A-Za-z_]\w*)+)")
GPULAB_IMPORT = re.compile(r"from (gpulab[\w.]*) import ([\w, ]+)")
GPULAB_COMMAND = re.compile(r"`gpulab ([a-z][\w-]*)")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
ENTRY = re.compile(r"^\*\*(.+?)\*\* — (.*)$")
FIRST_USED = re.compile(r"First used: \[(\d\d)\]\((\d\d_\w+\.ipynb)\)\.?$")
RELATED = re.compile(r"Related chapter: \[(\d\d)\]\((\d\d_\w+\.ipynb)\)\.?$")


# --- the cheat sheet ------------------------------------------------------------------------------


def cheatsheet_names() -> dict[str, bool]:
    """{dotted name after ``cuda.``: True if the simulator must have it} over the whole sheet.
    A name that the sheet says, on one of its lines (a table row), is "not in the simulator" need
    not exist there."""
    names: dict[str, bool] = {}
    for line in CHEATSHEET.read_text(encoding="utf-8").splitlines():
        line = re.sub(r"https?://\S+", "", line)  # a URL's "cuda.html" is not a name
        for name in CUDA_NAME.findall(line):
            names[name] = names.get(name, True) and NOT_IN_SIMULATOR not in line.casefold()
    return names


def _resolve(root, dotted: str, module_prefix: str | None = None) -> bool:
    """Whether ``root.<dotted>`` exists and is not None; a missing attribute may be a submodule
    to import (``numba.cuda.fp16``) when ``module_prefix`` names the module ``root`` is."""
    obj = root
    parts = dotted.split(".")
    for depth, part in enumerate(parts):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            if module_prefix is None:
                return False
            try:
                obj = importlib.import_module(".".join([module_prefix, *parts[:depth + 1]]))
            except ImportError:
                return False
        if obj is None:
            return False
    return True


def test_the_cheatsheet_and_glossary_are_reachable_from_solutions_too():
    for name in ("CHEATSHEET.md", "GLOSSARY.md"):
        link = ROOT / "solutions" / name
        assert link.is_symlink(), f"solutions/{name} should be a link to ../course/{name}"
        assert link.resolve() == (ROOT / "course" / name).resolve()


@pytest.mark.parametrize("path", [CHEATSHEET, GLOSSARY, ROOT / "course" / "SYLLABUS.md"],
                         ids=lambda p: p.name)
def test_every_relative_link_resolves(path):
    text = re.sub(r"`[^`]*`", "", path.read_text(encoding="utf-8"))  # code is not a link
    targets = [t for t in LINK.findall(text) if "://" not in t]
    assert targets, f"{path.name} links nothing"
    for target in targets:
        assert (path.parent / target).is_file(), f"{path.name} links {target}, which is missing"


def test_the_cheatsheet_names_what_it_must():
    names = cheatsheet_names()
    for needed in ("jit", "grid", "gridsize", "threadIdx.x", "blockIdx.x", "blockDim.x",
                   "gridDim.x", "shared.array", "local.array", "syncthreads", "atomic.add",
                   "to_device", "device_array", "device_array_like", "pinned_array",
                   "synchronize", "event", "fp16.hadd", "compile_ptx"):
        assert needed in names, f"the cheat sheet lacks cuda.{needed}"
    text = CHEATSHEET.read_text(encoding="utf-8")
    for method in (".copy_to_host()", ".copy_to_device(", ".record()", ".elapsed_time("):
        assert method in text, f"the cheat sheet lacks {method}"
    for cxx in ("__syncthreads()", "atomicAdd(&a[i], v)", "__shared__ float", "__device__",
                "<<<blocks, threads>>>", "cudaMallocHost", "cudaEventElapsedTime",
                "cudaMemcpy", "cudaDeviceSynchronize", "blockIdx.x * blockDim.x + threadIdx.x"):
        assert cxx in text, f"the Numba <-> CUDA C++ table lacks {cxx}"
    assert "NUMBA_ENABLE_CUDASIM" in text


@pytest.mark.skipif(device.tier() != "sim", reason="the simulator's names are checked in sim")
def test_every_cuda_name_exists_in_the_simulator():
    """Host names on the simulator's ``numba.cuda``; kernel names (``cuda.grid``,
    ``cuda.shared.array``…) on the module the simulator puts in place of ``cuda`` while a
    kernel runs, looked up from inside a running simulated thread."""
    wanted = sorted(name for name, in_sim in cheatsheet_names().items() if in_sim)
    on_module = {name for name in wanted if _resolve(cuda, name)}
    inside: dict[str, bool] = {}
    kernel_names = [name for name in wanted if name not in on_module]

    def probe(out):  # the simulator swaps the global `cuda` for its kernel-side module
        for name in kernel_names:
            inside[name] = _resolve(cuda, name)
        out[0] = 1

    launched = np.zeros(1, np.float32)
    cuda.jit(probe)[1, 1](launched)
    assert launched[0] == 1
    missing = [name for name in kernel_names if not inside.get(name)]
    assert not missing, (f"the cheat sheet shows cuda.{', cuda.'.join(missing)}, which the "
                         "simulator lacks: fix the name, or say 'not in the simulator'")


def test_every_cuda_name_exists_in_the_real_cuda_target():
    """The real (non-simulator) ``numba.cuda``, loaded in a child process without a GPU:
    its kernel-side names exist there as typing stubs."""
    names = sorted(cheatsheet_names())
    code = (
        "import importlib, json, sys\n"
        "from numba import cuda\n"
        "names = json.loads(sys.argv[1])\n"
        "def resolve(dotted):\n"
        "    obj, parts = cuda, dotted.split('.')\n"
        "    for depth, part in enumerate(parts):\n"
        "        try:\n"
        "            obj = getattr(obj, part)\n"
        "        except AttributeError:\n"
        "            try:\n"
        "                module = '.'.join(['numba.cuda', *parts[:depth + 1]])\n"
        "                obj = importlib.import_module(module)\n"
        "            except ImportError:\n"
        "                return False\n"
        "        if obj is None:\n"
        "            return False\n"
        "    return True\n"
        "print(json.dumps([n for n in names if not resolve(n)]))\n"
    )
    environment = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", GPULAB_DEVICE="ptx")
    done = subprocess.run([sys.executable, "-c", code, json.dumps(names)], env=environment,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    missing = json.loads(done.stdout.strip().splitlines()[-1])
    assert not missing, f"not in numba-cuda's CUDA target: cuda.{', cuda.'.join(missing)}"


def test_every_gpulab_name_and_command_exists():
    text = CHEATSHEET.read_text(encoding="utf-8") + GLOSSARY.read_text(encoding="utf-8")
    dotted = {"gpulab" + tail for tail in GPULAB_NAME.findall(text)}
    for module, names in GPULAB_IMPORT.findall(text):
        dotted |= {f"{module}.{name.strip()}" for name in names.split(",") if name.strip()}
    assert "gpulab.trace" in dotted and "gpulab.kernel_source" in dotted
    for name in sorted(dotted):
        parts = name.split(".")
        # the longest importable module prefix, then attributes
        for cut in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            break
        for part in parts[cut:]:
            assert hasattr(obj, part), f"{name}: {'.'.join(parts[:cut])} has no {part!r}"
            obj = getattr(obj, part)
    from gpulab.cli import build_parser

    commands = next(action for action in build_parser()._actions
                    if action.dest == "command").choices
    for command in set(GPULAB_COMMAND.findall(text)):
        assert command in commands, f"`gpulab {command}` is not a gpulab command"
    assert gpulab.kernel_source("dot_atomic")  # the example the sheet gives


# --- the glossary -------------------------------------------------------------------------------


def glossary_entries() -> list[tuple[str, str]]:
    """(term, the entry's whole text) in file order; an entry is a paragraph starting with
    ``**term** — ``."""
    entries, current = [], None
    for line in GLOSSARY.read_text(encoding="utf-8").splitlines():
        match = ENTRY.match(line)
        if match:
            current = [match.group(1), match.group(2)]
            entries.append(current)
        elif current is not None and line.strip() and not line.startswith("#"):
            current[1] += " " + line.strip()
        else:
            current = None
    return [(term, text) for term, text in entries]


def sort_key(term: str) -> tuple:
    """Alphabetical, ignoring case and punctuation, numbers by value (fp4 < fp8 < fp16)."""
    words = re.sub(r"[^0-9a-z]+", " ", term.casefold()).strip()
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", words))


def aliases(term: str) -> list[str]:
    """The words a chapter may use for a term: the term, its parts around commas and "and",
    what is in its parentheses, and the term without them."""
    found = {term, re.sub(r"\s*\([^)]*\)", "", term)}
    found |= set(re.findall(r"\(([^)]*)\)", term))
    for piece in list(found):
        found |= {part for part in re.split(r",\s*|\s+and\s+", piece)}
    return sorted({a.strip() for a in found if len(a.strip()) > 1 or not a.strip().isascii()})


def mentions(text: str, alias: str) -> bool:
    """Whether ``text`` uses ``alias`` as a word (or its plural): case-insensitive, except for
    names with capitals inside (ZeRO, SASS, NaN), which must match exactly."""
    flags = 0 if any(c.isupper() for c in alias[1:]) else re.IGNORECASE
    start = r"(?<!\w)" if alias[0].isalnum() else ""
    end = r"(?:e?s)?(?!\w)" if alias[-1].isalnum() else ""
    return re.search(start + re.escape(alias) + end, text, flags) is not None


def chapter_text(notebook: str) -> str:
    """A chapter's markdown, without emphasis marks (``**held-out** set``) and web addresses."""
    cells = json.loads((ROOT / "solutions" / notebook).read_text(encoding="utf-8"))["cells"]
    text = "\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "markdown")
    return re.sub(r"https?://[^\s)>]+", "", text).replace("*", "")


def test_glossary_entries_are_sorted_and_unique():
    terms = [term for term, _ in glossary_entries()]
    assert len(terms) > 80
    keys = [sort_key(term) for term in terms]
    out_of_order = [t for t, k, n in zip(terms, keys, keys[1:], strict=False) if k > n]
    assert keys == sorted(keys), f"out of alphabetical order: {out_of_order}"
    assert len(set(keys)) == len(keys)
    headings = re.findall(r"^## (\w)$", GLOSSARY.read_text(encoding="utf-8"), re.M)
    assert headings == sorted(headings)
    for term, _ in glossary_entries():  # each under its letter
        assert term[0].upper() in headings


def test_glossary_has_the_issue_terms():
    keys = " | ".join(re.sub(r"[^0-9a-z]+", " ", term.casefold()) for term, _ in glossary_entries())
    for word in ("roofline", "tensor core", "simt", "warp", "lane", "sm", "block", "grid",
                 "thread", "kernel", "launch overhead", "occupancy", "register", "spill",
                 "shared memory", "l2", "hbm", "pcie", "pinned", "nvlink", "nvl72",
                 "cuda events", "ptx", "sass", "ptxas", "blas", "cublas", "cudnn", "flop s",
                 "arithmetic intensity", "ridge point", "coalescing", "sector", "bandwidth",
                 "latency", "throughput", "atomic", "reduction", "grid stride", "fp32", "tf32",
                 "fp16", "bf16", "fp8", "fp4", "mantissa", "exponent", "ulp", "overflow",
                 "loss scaling", "master weights", "mixed precision", "transformer engine",
                 "batch size", "critical batch size", "epoch", "step", "gradient accumulation",
                 "activation checkpointing", "zero", "all reduce", "data parallelism",
                 "tensor parallelism", "pipeline parallelism", "alpha beta", "p50",
                 "dynamic batching", "tdp", "simulator"):
        assert re.search(rf"(^|\W){re.escape(word)}", keys), f"the glossary lacks {word!r}"


@pytest.mark.parametrize(("term", "text"), glossary_entries(),
                         ids=[term for term, _ in glossary_entries()])
def test_each_glossary_entry_links_a_chapter_that_uses_it(term, text):
    first = FIRST_USED.search(text)
    related = RELATED.search(text)
    assert first or related, f"{term}: end with 'First used: [NN](NN_name.ipynb).'"
    number, notebook = (first or related).groups()
    assert notebook.startswith(number + "_")
    assert (ROOT / "course" / notebook).is_file() and (ROOT / "solutions" / notebook).is_file()
    sentences = text[:(first or related).start()]
    assert 1 <= sentences.count(". ") + 1 <= 6, f"{term}: one to three sentences"
    if first:
        chapter = chapter_text(notebook)
        assert any(mentions(chapter, alias) for alias in aliases(term)), (
            f"{term}: chapter {notebook} never says {' / '.join(aliases(term))}")


# --- the syllabus -------------------------------------------------------------------------------

SYLLABUS = ROOT / "course" / "SYLLABUS.md"
CHAPTER_HEADING = re.compile(r"^\*\*\[(\d\d) · [^\]]+\]\((\d\d_\w+\.ipynb)\)\*\* \(about (\d+) "
                             r"minutes\)", re.MULTILINE)
EXERCISE_ROW = re.compile(r"^\| (\d\d) \| `(ch\d\d-[\w-]+)` [^|]+ \| [^|]+ \| `(check_\w+)` \| "
                          r"(\d+) \|$", re.MULTILINE)
WEEK_ROW = re.compile(r"^\| (\d+) \| (\d\d|project) \| [^|]+ \| ([^|]+) \|$", re.MULTILINE)
RUBRIC_ROW = re.compile(r"^\| ([a-z][\w ]+) \| (\d+) \| [^|]+ \| [^|]+ \| [^|]+ \|$", re.MULTILINE)


def syllabus_section(title: str) -> str:
    return SYLLABUS.read_text(encoding="utf-8").split(f"\n## {title}\n", 1)[1].split("\n## ")[0]


def graded_cells() -> list[tuple[str, str, float, str]]:
    """(chapter, exercise id, points, the check it calls) for every graded cell of solutions/,
    from its nbgrader metadata; the exercise id is the grade id without ``-check``."""
    found = []
    for path in sorted((ROOT / "solutions").glob("[0-9][0-9]_*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            meta = cell["metadata"].get("nbgrader", {})
            if meta.get("grade"):
                source = "".join(cell["source"])
                checks = re.findall(r"\b(check_\w+)\(", source)
                found.append((path.name[:2], meta["grade_id"].removesuffix("-check"),
                              meta["points"], checks[0] if checks else ""))
    return found


def test_the_syllabus_gives_each_exercise_the_points_of_its_notebook():
    rows = [(chapter, exercise, float(points), check)
            for chapter, exercise, check, points in EXERCISE_ROW.findall(SYLLABUS.read_text())]
    expected = [(chapter, exercise, float(points), check)
                for chapter, exercise, points, check in graded_cells()]
    assert len(expected) >= 35
    assert rows == expected, (
        "the syllabus's table of exercises differs from the nbgrader metadata in solutions/:\n"
        f"only in the syllabus: {sorted(set(rows) - set(expected))}\n"
        f"only in the notebooks: {sorted(set(expected) - set(rows))}")
    section = syllabus_section("Assessment")
    total = re.search(r"\*\*total\*\* \| \*\*(\d+)\*\* \|$", section, re.MULTILINE)
    assert total and int(total.group(1)) == sum(points for _, _, points, _ in expected)
    intro = SYLLABUS.read_text().split("\n## ", 1)[0]
    count = re.search(r"The (\d+) exercises of the chapters \(one point each", intro)
    assert count and int(count.group(1)) == len(expected)
    assert {points for _, _, points, _ in expected} == {1}, "the intro says one point each"


def test_the_syllabus_has_objectives_for_every_chapter_with_its_time():
    chapters = sorted(p.name for p in (ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))
    headings = CHAPTER_HEADING.findall(syllabus_section("Learning objectives"))
    assert [notebook for _, notebook, _ in headings] == chapters
    for number, notebook, minutes in headings:
        assert notebook.startswith(number + "_")
        first = "".join(json.loads((ROOT / "solutions" / notebook).read_text())["cells"][0]
                        ["source"])
        time = re.search(r"\*\*Time:\*\* about (\d+) minutes", first)
        assert time and time.group(1) == minutes, f"{notebook}: its Time line says {time}"
    blocks = re.split(CHAPTER_HEADING, syllabus_section("Learning objectives"))[4::4]
    for (number, _, _), block in zip(headings, blocks, strict=True):
        assert 2 <= block.count("\n- ") <= 5, f"chapter {number}: two to five objectives"


def test_the_week_plan_covers_every_chapter_once_in_order():
    weeks = WEEK_ROW.findall(syllabus_section("Week plan"))
    assert 13 <= len(weeks) <= 14
    assert [int(w) for w, _, _ in weeks] == list(range(1, len(weeks) + 1))
    chapters = [chapter for _, chapter, _ in weeks if chapter != "project"]
    assert chapters == [f"{n:02d}" for n in range(13)]
    # each chapter's exercises are due the week after it is taught
    due = {m: int(w) for w, _, text in weeks for m in re.findall(r"chapter (\d\d)'s", text)}
    taught = {chapter: int(w) for w, chapter, _ in weeks if chapter != "project"}
    assert due == {chapter: week + 1 for chapter, week in taught.items()}


def test_the_final_project_rubric_adds_up():
    section = syllabus_section("Final project (50 %)")
    assert "InferenceServer" in section and "p99" in section and "boundary" in section
    rows = RUBRIC_ROW.findall(section)
    assert len(rows) >= 5
    total = re.search(r"\*\*total\*\* \| \*\*(\d+)\*\* \|", section)
    assert total and sum(int(points) for _, points in rows) == int(total.group(1))
    from gpulab.nn.backends import get_backend  # what the project names exists
    from gpulab.serving.server import InferenceServer

    assert callable(InferenceServer) and get_backend("kernels") is not None


def test_the_readme_and_the_instructors_guide_link_the_syllabus():
    for path in (ROOT / "README.md", ROOT / "course" / "INSTRUCTORS.md"):
        assert "SYLLABUS.md" in path.read_text(encoding="utf-8"), f"{path.name} lacks the link"


# --- what the instructor's guide quotes ---------------------------------------------------------

GUIDE = ROOT / "course" / "INSTRUCTORS.md"


def test_the_guide_quotes_the_verdicts_the_checks_print():
    from gpulab.exercises.results import FAILED, NOT_ATTEMPTED, PASSED, CheckResult

    guide = GUIDE.read_text(encoding="utf-8")
    printed = {str(CheckResult("exercise", status == PASSED, "why", status, hint="how")
                   ).split(" — ")[0] for status in (PASSED, FAILED, NOT_ATTEMPTED)}
    quoted = set(re.findall(r"`((?:✅|❌|✏️) [A-Z ]+[A-Z])`", guide))
    assert quoted == printed, f"the guide quotes {quoted}; the checks print {printed}"
    script = re.search(r"^VERDICTS = \((.*)\)$", guide, re.MULTILINE)
    assert script, "the guide's grading script lost its VERDICTS"
    assert set(re.findall(r'"([^"]+)"', script.group(1))) == printed


@pytest.mark.parametrize("path", [ROOT / "README.md", GUIDE, ROOT / "course" / "SYLLABUS.md"],
                         ids=lambda p: p.name)
def test_every_make_command_the_docs_give_is_a_target(path):
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][\w-]*):", makefile, re.MULTILINE))
    for target in set(re.findall(r"`make ([a-z][\w-]*)", path.read_text(encoding="utf-8"))):
        assert target in targets, f"{path.name} gives `make {target}`, which the Makefile lacks"
