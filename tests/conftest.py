"""Test setup: gpulab is imported first so that it chooses the tier before numba loads."""

import os

os.environ.setdefault("MPLBACKEND", "Agg")

import gpulab  # noqa: E402,F401  (must precede numba)
