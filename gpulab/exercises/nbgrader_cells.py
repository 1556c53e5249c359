"""nbgrader's ``OverwriteCells`` without its false alarm on hidden tests.

When ``nbgrader autograde`` reads a submission, ``OverwriteCells`` puts each locked cell back as
the instructor wrote it, hidden tests included, and warns "Attribute 'checksum' for cell ... has
changed!" when the submitted cell differs from that. But the learner was given the cell
*without* its hidden tests, so nbgrader (0.9.6, jupyter/nbgrader#1961) warns on every
untouched check cell of every submission, and a real edit of a locked cell no longer stands
out.

:class:`OverwriteCells` here first restores the hidden tests of a locked cell that is exactly
as released (its source equals the instructor's with the hidden-test regions removed, by
nbgrader's own ``ClearHiddenTests`` with the course's configuration); nbgrader's checks then
run unchanged, so a cell the learner did edit is still reported and overwritten.
:func:`sanitize_preprocessors` is nbgrader's list for autograde's first pass with this class
in place of nbgrader's; the course's ``nbgrader_config.py`` (written by
``python -m gpulab.exercises.grading init``) sets it. This module imports nbgrader: only the
instructor's environment has it.
"""

from __future__ import annotations

from nbformat import from_dict
from nbgrader import utils
from nbgrader.api import MissingEntry
from nbgrader.converters import Autograde
from nbgrader.preprocessors import ClearHiddenTests
from nbgrader.preprocessors import OverwriteCells as NbgraderOverwriteCells


class OverwriteCells(NbgraderOverwriteCells):
    """nbgrader's ``OverwriteCells``; a locked cell submitted exactly as released gets its
    hidden tests back before nbgrader compares checksums (see the module docstring)."""

    def released_source(self, source: str) -> str:
        """``source`` as generate_assignment released it: hidden-test regions removed."""
        cell = from_dict({"cell_type": "code", "source": source,
                          "metadata": {"nbgrader": {"grade": True}}})
        cleared, _ = ClearHiddenTests(config=self.config).preprocess_cell(cell, {}, 0)
        return cleared.source

    def preprocess_cell(self, cell, resources, cell_index):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id is not None and utils.is_locked(cell):
            try:
                source_cell = self.gradebook.find_source_cell(
                    grade_id, self.notebook_id, self.assignment_id)
            except MissingEntry:
                source_cell = None  # nbgrader's own preprocess_cell reports it
            if (source_cell is not None and source_cell.locked
                    and cell.cell_type == source_cell.cell_type
                    and cell.source == self.released_source(source_cell.source)):
                cell.source = source_cell.source
        return super().preprocess_cell(cell, resources, cell_index)


def sanitize_preprocessors() -> list[type]:
    """nbgrader's preprocessors for autograde's first pass, with :class:`OverwriteCells` in
    place of nbgrader's own."""
    defaults = Autograde.class_traits()["sanitize_preprocessors"].default()
    if NbgraderOverwriteCells not in defaults:
        raise RuntimeError(f"this nbgrader's autograde no longer runs OverwriteCells "
                           f"({defaults}): gpulab.exercises.nbgrader_cells needs updating")
    return [OverwriteCells if p is NbgraderOverwriteCells else p for p in defaults]
