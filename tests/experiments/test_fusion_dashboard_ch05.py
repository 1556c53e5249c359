"""Chapter 05's fusion dashboard says that it is running while Run takes its ~18 s (issue 23)."""

import gpulab  # noqa: F401  (before numba: it chooses the simulator or the GPU)

# isort: split

from gpulab.experiments.fusion import FusionDashboard


class _Watched:
    """An experiment stand-in that records the dashboard's status while it runs."""

    def __init__(self, dashboard, fail=False):
        self.dashboard, self.fail, self.seen = dashboard, fail, None

    def run(self):
        self.seen = self.dashboard.status.value
        if self.fail:
            raise ValueError("no such GPU")
        return {}


def test_the_fusion_dashboard_says_it_is_running_then_where_the_numbers_come_from(monkeypatch):
    dashboard = FusionDashboard()
    watched = _Watched(dashboard)
    monkeypatch.setattr(dashboard, "make_experiment", lambda: watched)
    monkeypatch.setattr(dashboard, "_draw", lambda: None)
    dashboard.run()
    assert watched.seen.startswith("running…") and "20 s" in watched.seen
    assert dashboard.status.value == dashboard._where()


def test_a_failed_run_replaces_the_running_text(monkeypatch):
    dashboard = FusionDashboard()
    monkeypatch.setattr(dashboard, "make_experiment", lambda: _Watched(dashboard, fail=True))
    assert dashboard.run() is None
    assert "Failed" in dashboard.status.value and "running" not in dashboard.status.value
