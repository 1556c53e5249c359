"""The α–β model: the links and their sources, the ring formula, the fit; the modelled systems
and strategies against published figures."""

import math

import numpy as np
import pytest

from gpulab import hardware
from gpulab.hardware import H100_SXM
from gpulab.parallel import links, scaling, strategies


def test_every_link_cites_a_web_source_for_alpha_and_beta():
    for link in links.LINKS.values():
        for field in ("alpha_s", "beta_bytes_per_s"):
            assert "https://" in link.sources[field], (link.key, field)
        assert 0 < link.alpha_s < 1e-4 and link.beta_bytes_per_s > 1e9


def test_nvlink_beta_is_half_the_datasheet_figure():
    """Datasheets count both directions; a ring sends one way at a time."""
    for key, gpu in (("nvlink3", "A100-SXM"), ("nvlink4", H100_SXM.key), ("nvlink5", "B200")):
        assert links.LINKS[key].beta_bytes_per_s == hardware.get_gpu(
            gpu).nvlink_bytes_per_s_per_direction
    assert links.LINKS["nvl72"].beta_bytes_per_s * 2 * 72 == pytest.approx(130e12, rel=0.01)
    assert links.LINKS["ib-ndr"].beta_bytes_per_s * 8 == 400e9  # 400 Gb/s
    assert links.LINKS["ib-xdr"].beta_bytes_per_s * 8 == 800e9


def test_ring_time_formula():
    assert links.ring_allreduce_time(1e6, 1, 1e-6, 1e9) == 0
    assert links.ring_allreduce_time(1e6, 4, 1e-6, 1e9) == pytest.approx(6e-6 + 1.5e-3)
    with pytest.raises(ValueError):
        links.ring_allreduce_time(1, 0, 1, 1)
    nvlink = links.get_link("nvlink4")
    assert nvlink.allreduce_time(2e9, 8) == pytest.approx(14 * 0.6e-6 + 1.75 * 2e9 / 450e9)
    with pytest.raises(ValueError, match="no link"):
        links.get_link("nvlink9")


def test_the_fit_recovers_alpha_and_beta():
    sizes = np.logspace(1, 7, 12)
    times = [links.ring_allreduce_time(s, 2, 2e-6, 5e9) for s in sizes]
    fit = links.fit_alpha_beta(sizes, times, 2)
    assert fit.alpha_s == pytest.approx(2e-6, rel=1e-6)
    assert fit.beta_bytes_per_s == pytest.approx(5e9, rel=1e-6)
    assert fit.worst_ratio == pytest.approx(1.0)
    assert fit.half_bandwidth_bytes == pytest.approx(2 * 2e-6 * 5e9)
    noisy = links.fit_alpha_beta(sizes, np.array(times) * np.linspace(0.9, 1.1, 12), 4)
    assert 1e-7 < noisy.alpha_s < 1e-5 and "α =" in str(noisy)


def test_hierarchical_allreduce_beyond_one_domain():
    h100 = scaling.get_system("hgx-h100")
    within = h100.allreduce_time(1e9, 8)
    beyond = h100.allreduce_time(1e9, 16)
    assert beyond > within
    assert beyond == pytest.approx(within + links.LINKS["ib-ndr"].allreduce_time(1e9 / 8, 2))


def test_digits_do_not_scale_and_big_models_scale_better_with_overlap():
    for key in scaling.SYSTEMS:
        assert scaling.data_parallel_step("digits", key, 8).speedup < 1.2
        for n in (8, 72, 1152):
            plain = scaling.data_parallel_step("1.3b", key, n)
            overlapped = scaling.data_parallel_step("1.3b", key, n, overlap=True)
            assert plain.efficiency < overlapped.efficiency <= 1.0
            assert "estimated" in plain.label
    small = [s.efficiency for s in scaling.scaling_curve("124m", "hgx-h100")]
    assert small[0] == pytest.approx(1.0) and small[-1] < 0.6
    assert all(a >= b - 1e-12 for a, b in zip(small, small[1:], strict=False))


def test_zero_traffic_is_one_allreduce_and_stage_3_half_as_much_again():
    """ZeRO paper, section 7: stages 1 and 2 send what plain data parallelism sends (a
    reduce-scatter and an all-gather: one all-reduce, 2·2(N - 1)/N bytes per 16-bit parameter
    with a ring), stage 3 1.5 times as much."""
    for n in (2, 8, 64):
        allreduce = 2 * 2 * (n - 1) / n
        for stage in (0, 1, 2):
            assert strategies.zero_traffic_bytes_per_parameter(stage, n) == pytest.approx(
                allreduce)
        assert strategies.zero_traffic_bytes_per_parameter(3, n) == pytest.approx(
            1.5 * allreduce)
    assert strategies.zero_traffic_bytes_per_parameter(3, 1) == 0
    with pytest.raises(ValueError, match="stage must be"):
        strategies.zero_traffic_bytes_per_parameter(4, 8)


def test_zero_bytes_are_written_once_in_chapter_09s_calculator():
    """One formula for ZeRO's bytes per parameter: gpulab.nn.memory's (tested against the ZeRO
    paper's Figure 1 in tests/nn/test_memory.py); the strategies module only counts traffic."""
    assert not hasattr(strategies, "zero_bytes_per_parameter")
    assert "zero_bytes_per_parameter" not in strategies.__all__


def test_tensor_and_pipeline_volumes():
    tp = strategies.tensor_parallel_traffic_bytes(tokens=8192, hidden=4096, layers=32, t=8)
    assert tp == pytest.approx(4 * 32 * 2 * 7 / 8 * 8192 * 4096 * 2)
    assert strategies.tensor_parallel_traffic_bytes(8192, 4096, 32, 1) == 0
    assert strategies.pipeline_traffic_bytes(8192, 4096) == 2 * 8192 * 4096 * 2
    assert strategies.pipeline_bubble(4, 1) == 0.75
    assert math.isclose(strategies.pipeline_bubble(4, 32), 3 / 35)


def test_look_up_returns_a_value_as_it_is_and_names_the_keys_of_an_unknown_one():
    link = links.get_link("nvlink4")
    assert links.get_link(link) is link and link.key == "nvlink4"
    system = scaling.get_system("hgx-h100")
    assert scaling.get_system(system) is system and system.gpu == hardware.H100_SXM.key
    for get, wrong, named in ((links.get_link, "nvlink9", "pcie5"),
                              (scaling.get_system, ["hgx-h100"], "hgx-h100"),
                              (scaling.get_workload, 8, "digits")):
        with pytest.raises(ValueError, match=named):
            get(wrong)
