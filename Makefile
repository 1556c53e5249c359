# The commands:  make lab   (open the course)   |   make test   (run every test)
#                make instructor   (JupyterLab on solutions/, with nbgrader, for instructors)
# Each creates its environment and installs what it needs on first use. Two environments:
#   .venv-lab  the learner's (make lab): gpulab, JupyterLab and Voila (the `lab` extra), so the
#              learner's JupyterLab has no nbgrader menus and no test tools;
#   .venv      the developer's and instructor's (make test, make instructor, make notebooks):
#              gpulab and the `dev` extra (pytest, playwright, ruff, nbgrader, ...).
# One environment cannot hold nbgrader for the instructor and keep its menus out of the
# learner's JupyterLab (a JupyterLab shows every extension installed beside it), so `make lab`
# after `make test` still opens the learner's JupyterLab, and vice versa.
PYTHON ?= python3
# The dashboards (/voila/render/course/...): Voila's configuration and the course's template,
# which leaves the exercises out and loads nothing from third-party hosts (gpulab/dashboard.py).
DASHBOARDS_ENV := JUPYTER_CONFIG_PATH="$(CURDIR)/dashboards/config" JUPYTER_PATH="$(CURDIR)/dashboards/data"
VENV      := .venv
BIN       := $(VENV)/bin
STAMP     := $(VENV)/.installed
LAB_VENV  := .venv-lab
LAB_BIN   := $(LAB_VENV)/bin
LAB_STAMP := $(LAB_VENV)/.installed
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)
# pytest workers: one more than the cores. The longest tests spend much of their time waiting
# (installs from PyPI, a browser, timed serving runs): with one worker a core, 2 cores were
# 1.5 busy on average over a make test.
PYTEST_WORKERS ?= $(shell $(PYTHON) -c 'import os; print((os.cpu_count() or 1) + 1)')

.PHONY: lab instructor test install install-lab notebooks lint clean gpu-check instructor-files

# $(call make_venv,FOLDER,EXTRA,INSTALLER): FOLDER holds gpulab with EXTRA, plus the CUDA 12 or 13
# toolkit wheels that match the driver (cu13 when there is none); none on macOS, where no NVIDIA
# GPU or toolkit wheel exists (the reason is printed). INSTALLER installs into FOLDER: pip for
# the learner's environment (what Binder and a learner's own pip run), uv for the developer's,
# whose dev extra holds uv anyway: the same packages and bytecode, in 19 s instead of pip's 40 s
# (warm caches, 2 cores), on the path of every `make test` from a clean clone. The bytecode is
# compiled up front because a process may never write it (PYTHONDONTWRITEBYTECODE=1, as on the
# development machine): without it, every kernel, nbgrader command and compile server compiled
# its imports again, and a make test took 1,333-1,342 s of user time instead of 1,156-1,241.
# For the same reason `make test` compiles gpulab's own modules (an editable install, which no
# installer compiles) before pytest starts the processes that import them.
PIP_INSTALLER = $(1)/bin/python -m pip install --quiet
UV_INSTALLER = $(1)/bin/python -m pip install --quiet uv && \
	$(1)/bin/python -m uv pip install --quiet --python $(1)/bin/python --compile-bytecode
define make_venv
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' || { \
	  echo "gpulab needs Python 3.10 or newer; $(PYTHON) is $$($(PYTHON) -V 2>&1)." \
	       "Run: make $(or $(firstword $(MAKECMDGOALS)),lab) PYTHON=python3.12  (on macOS: brew install python@3.12)"; \
	  exit 1; }
	$(PYTHON) -m venv $(1)
	$(1)/bin/python -m pip install --quiet --upgrade pip
	extra=$$($(PYTHON) -m gpulab.toolkit --constraints $(1)/cuda-constraints.txt) && \
	extras=$$(if [ "$$extra" = none ]; then echo $(2); else echo "$$extra,$(2)"; fi) && \
	$(call $(3),$(1)) -c $(1)/cuda-constraints.txt -e ".[$$extras]"
	touch $(1)/.installed
endef

$(STAMP): pyproject.toml gpulab/toolkit.py
	$(call make_venv,$(VENV),dev,UV_INSTALLER)

$(LAB_STAMP): pyproject.toml gpulab/toolkit.py
	$(call make_venv,$(LAB_VENV),lab,PIP_INSTALLER)

install: $(STAMP)

install-lab: $(LAB_STAMP)

lab: $(LAB_STAMP)
	$(DASHBOARDS_ENV) $(LAB_BIN)/jupyter lab $(ROOT_FLAG) --ServerApp.root_dir=. course/00_welcome.ipynb

# The targets below need what only the instructor's repository has (solutions/, tests/); in a
# learners' copy (gpulab export-learner) they say so instead of failing half-way.
instructor-files:
	@test -d solutions && test -d tests || { \
	  echo "This is a learners' copy of the course (no solutions/ or tests/): 'make lab'" \
	       "opens it. Testing, grading and releasing happen in the instructor's repository."; \
	  exit 2; }

# The instructor's JupyterLab: the solution notebooks, nbgrader's Create Assignment and
# Validate tools and formgrader, and .venv/bin first on PATH so that `nbgrader ...` in its
# terminals runs without activating anything.
instructor: instructor-files $(STAMP)
	$(DASHBOARDS_ENV) PATH="$(abspath $(BIN)):$$PATH" $(BIN)/jupyter lab $(ROOT_FLAG) --ServerApp.root_dir=. \
	  solutions/00_welcome.ipynb

# Each chapter runs once per environment. The solutions (solutions/) run in nbgrader's round
# trip (tests/test_nbgrader.py: the full submission must raise nowhere and get every point);
# where nbgrader is not installed (Python 3.10) nbval runs them instead. Each learner notebook
# (course/) runs once, in the learner's (Binder's) environment, in tests/test_binder.py, whose
# checks (errors, spoilers, memory) read that run; and each chapter's dashboard (the chapter
# without its exercise cells) once, in Voila served from the versions a Mac gets
# (tests/browser/test_voila.py).
SOLUTIONS_BY_NBVAL = $(if $(wildcard $(BIN)/nbgrader),,solutions)

test: instructor-files $(STAMP)
	$(BIN)/ruff check gpulab tests
	$(BIN)/python -m gpulab.exercises.release --check
	$(BIN)/python -m compileall -q gpulab
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder --timeout=900 --nbval-lax --nbval-cell-timeout=300 --durations=15 tests $(SOLUTIONS_BY_NBVAL)

# On a machine with an NVIDIA GPU: every kernel against NumPy at GPU sizes, the bench and the
# chapters' GPU series recorded in gpulab/data/, every notebook in the gpu tier (~8 min on an
# H100/H200). Without a GPU it prints its plan and exits with status 2.
gpu-check: $(STAMP)
	$(BIN)/python -m gpulab.gpu_check

# The learner notebooks from solutions/, and the per-exercise tables of course/INSTRUCTORS.md from
# the checks' specs.
notebooks: instructor-files $(STAMP)
	$(BIN)/python -m gpulab.exercises.release
	$(BIN)/python -m gpulab.exercises.instructors

lint: instructor-files $(STAMP)
	$(BIN)/ruff check --fix gpulab tests
	$(BIN)/ruff format --check gpulab tests || true

clean:
	rm -rf $(VENV) $(LAB_VENV) .pytest_cache .ruff_cache .hypothesis
