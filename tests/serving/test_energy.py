"""Energy results always carry a boundary and measured/estimated."""

import pytest

from gpulab import hardware
from gpulab.serving import energy


def test_every_result_states_boundary_and_method():
    _, e = energy.measure(sum, range(1000))
    assert e.boundary in energy.BOUNDARY_NAMES and e.method in ("measured", "estimated")
    assert e.boundary in str(e) and e.method in str(e) and e.source
    _, g = energy.measure(sum, range(1000), device="gpu", gpu="H100")
    assert g.boundary == "board" and g.method in ("measured", "estimated")
    if not energy.gpu_power_available():
        assert g.method == "estimated" and "700 W" in g.source


def test_boundary_and_method_are_required_to_be_known():
    with pytest.raises(ValueError):
        energy.Energy(1.0, 1.0, "wall", "measured", "x")
    with pytest.raises(ValueError):
        energy.Energy(1.0, 1.0, "chip", "guessed", "x")


def test_estimates_and_scaling():
    e = energy.estimate_gpu(2.0, "H100")
    assert e.joules == pytest.approx(1400.0) and e.method == "estimated"
    assert e.per(1000, 1000).joules == pytest.approx(1400.0)
    assert e.per(2000, 1000).joules == pytest.approx(700.0)
    dc = e.at_data_centre(server_overhead=1.3, pue=1.5)
    assert dc.boundary == "data centre" and dc.joules == pytest.approx(1400 * 1.3 * 1.5)
    assert "PUE 1.5" in dc.source
    spec = hardware.get_gpu("H100")
    half = energy.estimate_gpu(2.0, "H100", utilisation=0.5)
    idle = spec.idle_power_watts
    assert half.joules == pytest.approx(2 * (idle + 0.5 * (700 - idle)))
    assert idle < half.watts < 700 and "utilisation 50%" in half.source
    idle_only = energy.estimate_gpu(2.0, "H100", utilisation=0.0)
    assert idle_only.watts == pytest.approx(idle) and idle < 0.2 * 700
    cpu = energy.estimate_cpu(1.0)
    assert cpu.boundary == "chip" and "assumed" in cpu.source


def test_energy_from_samples_and_the_same_job():
    assert energy.energy_from_samples([0, 1, 2], [100, 100, 300]) == pytest.approx(300.0)
    with pytest.raises(ValueError):
        energy.energy_from_samples([0], [1])
    r = energy.same_job(0.5, 700, 1.0, 150, idle_watts_fast=90)
    assert r["fast_joules"] == pytest.approx(350 + 45) and not r["faster_is_greener"]
    assert energy.same_job(0.1, 700, 1.0, 150)["faster_is_greener"]


def test_boundary_table_says_what_each_claim_must_state():
    assert [b["boundary"] for b in energy.BOUNDARIES] == [
        "chip", "board", "server", "data centre", "embodied"]
    assert all(b["includes"] and b["must state"] for b in energy.BOUNDARIES)


def test_rapl_zones_absent_is_empty(tmp_path):
    assert energy.rapl_zones(tmp_path / "none") == []
    zone = tmp_path / "intel-rapl:0"
    zone.mkdir()
    (zone / "energy_uj").write_text("123\n")
    assert energy.rapl_zones(tmp_path) == [zone]
