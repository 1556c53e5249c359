# The two commands:  make lab   (open the course)   |   make test   (run every test)
# Both create .venv and install what they need on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)
PYTEST_WORKERS ?= auto

.PHONY: lab test install notebooks lint clean gpu-check

$(STAMP): pyproject.toml gpulab/toolkit.py
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' || { \
	  echo "gpulab needs Python 3.10 or newer; $(PYTHON) is $$($(PYTHON) -V 2>&1)." \
	       "Run: make lab PYTHON=python3.12  (on macOS: brew install python@3.12)"; \
	  exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	@# Pick CUDA 12 or 13 toolkit wheels to match the driver (cu13 when there is none);
	@# none on macOS, where no NVIDIA GPU or toolkit wheel exists (the reason is printed).
	extra=$$($(PYTHON) -m gpulab.toolkit --constraints $(VENV)/cuda-constraints.txt) && \
	extras=$$(if [ "$$extra" = none ]; then echo dev; else echo "$$extra,dev"; fi) && \
	$(BIN)/python -m pip install --quiet -c $(VENV)/cuda-constraints.txt -e ".[$$extras]"
	touch $(STAMP)

install: $(STAMP)

lab: $(STAMP)
	$(BIN)/jupyter lab $(ROOT_FLAG) --ServerApp.root_dir=. course/00_welcome.ipynb

test: $(STAMP)
	$(BIN)/ruff check gpulab tests
	$(BIN)/python -m gpulab.exercises.release --check
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile --timeout=900 --nbval-lax --nbval-cell-timeout=300 --durations=15 tests solutions course

# On a machine with an NVIDIA GPU: every kernel against NumPy at GPU sizes, the bench and the
# chapters' GPU series recorded in gpulab/data/, every notebook in the gpu tier (~8 min on an
# H100/H200). Without a GPU it prints its plan and exits with status 2.
gpu-check: $(STAMP)
	$(BIN)/python -m gpulab.gpu_check

notebooks: $(STAMP)
	$(BIN)/python -m gpulab.exercises.release

lint: $(STAMP)
	$(BIN)/ruff check --fix gpulab tests
	$(BIN)/ruff format --check gpulab tests || true

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
