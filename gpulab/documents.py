"""gpulab's JSON files, written and read one way: a JSON object whose ``format`` names what it
holds and whose ``format_version`` (where the format has versions) says which version wrote it.

The formats and their modules: ``gpulab-gpu-run`` (a recorded GPU run, written by ``gpulab
gpu-check``, read by :mod:`gpulab.recorded_runs`), ``gpulab-bench`` (:mod:`gpulab.bench.report`),
``gpulab-published-measurements`` (:mod:`gpulab.published`) and ``gpulab-kernel-resources``
(:mod:`gpulab.kernel_resources`). :func:`read` refuses, with a ValueError that says why, a file
that is not JSON, a file of another format and one written by a newer gpulab.

>>> header("gpulab-bench", 2)
{'format': 'gpulab-bench', 'format_version': 2}
"""

from __future__ import annotations

import json
from pathlib import Path


def header(file_format: str, version: int | None = None) -> dict:
    """The keys a document of ``file_format`` starts with (``format_version`` when it has one)."""
    return {"format": file_format, **({} if version is None else {"format_version": version})}


def dated_name(kind: str, device_name: str, date: str) -> str:
    """The file name of a run of ``kind`` recorded on ``device_name`` on ``date`` (ISO):
    ``dated_name("gpu_run", "NVIDIA H100 80GB HBM3", "2026-12-01T10:00:00")`` is
    ``gpu_run_nvidia-h100-80gb-hbm3_2026-12-01.json``."""
    slug = "".join(c if c.isalnum() else "-" for c in device_name).strip("-").lower()
    return f"{kind}_{slug}_{date[:10]}.json"


def recorded_paths(directory, kind: str) -> list[Path]:
    """The files of runs of ``kind`` in ``directory`` (named by :func:`dated_name`), sorted by
    name."""
    return sorted(Path(directory).glob(f"{kind}_*.json"))


def write(path, document: dict, **json_options) -> Path:
    """Write ``document`` (which starts with a :func:`header`) to ``path`` as indented JSON,
    making its folder if needed; ``json_options`` go to :func:`json.dumps`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=1, **json_options) + "\n", encoding="utf-8")
    return path


def read(path, file_format: str, what: str, version: int | None = None) -> dict:
    """The JSON object in ``path``, checked to be of ``file_format`` (``what``: the format in
    words, for the error) and no newer than ``version`` (None: the format has no versions)."""
    path = Path(path)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON: {error}") from None
    if not isinstance(document, dict) or document.get("format") != file_format:
        raise ValueError(f"{path} is not a gpulab {what} (no 'format': {file_format!r})")
    if version is not None and document.get("format_version", 0) > version:
        raise ValueError(f"{path} was written by a newer gpulab; upgrade gpulab to read it")
    return document


__all__ = ["dated_name", "header", "read", "recorded_paths", "write"]
