"""What every experiment in :mod:`gpulab.experiments` does the same way: ``run()`` measures and
estimates, and keeps its result in ``last_result``; ``explain()`` and the tables read that
result, running the experiment first when it has not run yet.

An experiment subclasses :class:`Experiment` and implements ``run()`` (which sets
``last_result``) and ``explain()``. Importing this module is cheap.
"""

from __future__ import annotations


class Experiment:
    """A chapter's experiment: a plain object that tests drive without a browser."""

    #: What the last ``run()`` returned; None until the first run.
    last_result: dict | None = None

    def run(self) -> dict:
        """Run the experiment; return its result and keep it in ``last_result``."""
        raise NotImplementedError

    def _result(self) -> dict:
        """The last result, running the experiment first if it has not run."""
        return self.last_result if self.last_result is not None else self.run()


__all__ = ["Experiment"]
