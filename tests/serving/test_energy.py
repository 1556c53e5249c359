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
        assert g.method == "estimated" and "TDP 700 W" in g.source


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


class FakeNvml:
    """A stand-in for nvidia-ml-py's pynvml: one GPU, a counter that the work advances."""

    class NVMLError(Exception):
        pass

    def __init__(self, name="NVIDIA H200", counter=True, watts=250.0):
        self.name, self.counter, self.watts = name, counter, watts
        self.energy_mj, self.opened = 1_000_000.0, 0

    def nvmlInit(self):
        self.opened += 1

    def nvmlShutdown(self):
        self.opened -= 1

    def nvmlDeviceGetCount(self):
        return 1

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetName(self, handle):
        return self.name

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        if not self.counter:
            raise self.NVMLError("Not Supported")
        return self.energy_mj

    def nvmlDeviceGetPowerUsage(self, handle):
        return int(self.watts * 1e3)


def _install(monkeypatch, fake):
    import sys

    monkeypatch.setitem(sys.modules, "pynvml", fake)
    return fake


def test_gpu_energy_comes_from_nvmls_energy_counter(monkeypatch):
    fake = _install(monkeypatch, FakeNvml())

    def work():  # 3.5 J on the board's counter while it runs
        fake.energy_mj += 3500.0
        return "done"

    result, e = energy.measure(work, device="gpu")
    assert result == "done" and e.joules == pytest.approx(3.5)
    assert (e.boundary, e.method, e.device) == ("board", "measured", "NVIDIA H200")
    assert "energy counter" in e.source and fake.opened == 0


def test_without_a_counter_the_power_samples_are_integrated_and_said_so(monkeypatch):
    import time

    _install(monkeypatch, FakeNvml(counter=False, watts=200.0))
    _, e = energy.measure(time.sleep, 0.05, device="gpu", interval_s=0.005)
    assert e.method == "measured" and e.joules == pytest.approx(200.0 * e.seconds, rel=0.2)
    assert "no energy counter" in e.source and "one-second average" in e.source


def test_without_nvml_the_estimate_is_of_the_gpu_named_or_present(monkeypatch):
    monkeypatch.setattr(energy, "gpu_power_available", lambda: False)
    _, named = energy.measure(sum, range(10), device="gpu", gpu="L4", utilisation=0.0)
    assert named.method == "estimated" and named.device == hardware.get_gpu("L4").name
    assert named.watts == pytest.approx(hardware.get_gpu("L4").idle_power_watts)
    import dataclasses

    monkeypatch.setattr(energy.device, "PROBE", dataclasses.replace(
        energy.device.PROBE, device_name="NVIDIA A100-SXM4-80GB"))
    _, present = energy.measure(sum, range(10), device="gpu")
    assert present.device == hardware.get_gpu("A100-SXM").name
    with pytest.raises(ValueError, match="device must be"):
        energy.measure(sum, range(10), device="tpu")
