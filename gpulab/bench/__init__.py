"""``gpulab bench``: every benchmarked kernel checked, then timed, then compared with the
datasheet peak, with a ceiling measured in the same run (a device copy, cuBLAS) and with a
baseline measured in the same run.

- :mod:`gpulab.bench.cases` — one case per kernel (inputs, launch, NumPy baseline, counts,
  check), shared with the chapter dashboards;
- :mod:`gpulab.bench.suite` — :func:`run_suite`, the run behind the command;
- :mod:`gpulab.bench.training` — the digits training epoch's rows (chapters 07-08);
- :mod:`gpulab.bench.model_check` — ``gpulab model-check``: the GPU model against every
  published measurement (:mod:`gpulab.published`), its error per kind;
- :mod:`gpulab.bench.report` — :class:`Row`, :class:`BenchReport`, the table, the JSON file
  format and the recorded runs in ``gpulab/data/``.

Timing itself (CPU, CUDA events, roofline estimates, the :class:`~gpulab.timing.Measurement`
record) lives one layer down, in :mod:`gpulab.timing`.
"""

from gpulab.bench.cases import KERNELS, MATMUL_KERNELS, MEMORY_KERNELS, default_sizes
from gpulab.bench.report import (
    DATA_DIR,
    BenchReport,
    Row,
    describe_recorded_run,
    format_table,
    latest_recorded_run,
    load_report,
    record_path,
    recorded_comparison,
    recorded_runs,
    save_report,
)
from gpulab.bench.suite import run_suite

__all__ = [
    "DATA_DIR",
    "KERNELS",
    "MATMUL_KERNELS",
    "MEMORY_KERNELS",
    "BenchReport",
    "Row",
    "default_sizes",
    "describe_recorded_run",
    "format_table",
    "latest_recorded_run",
    "load_report",
    "record_path",
    "recorded_comparison",
    "recorded_runs",
    "run_suite",
    "save_report",
]
