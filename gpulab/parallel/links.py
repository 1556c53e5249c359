"""The cost of talking: the α–β model of a link, the links GPUs talk over (each figure with its
source), and α and β fitted from all-reduce times measured on this machine.

**The α–β model** (Hockney, "The communication challenge for MPP: Intel Paragon and Meiko
CS-2", Parallel Computing 20(3), 1994): sending a message of ``n`` bytes over a link takes

    time = α + n / β

α (alpha) is the **latency**, paid once per message whatever its size (software, the NIC or
GPU starting the transfer, the switches on the way); β (beta) is the **bandwidth** of one
direction of the link. A ring all-reduce of ``n`` bytes over N ranks sends 2(N - 1) messages
of n/N bytes one after another (:mod:`gpulab.parallel.collectives`), so

    ring all-reduce time = 2(N - 1) · α + 2(N - 1)/N · n / β

Conventions, as in :mod:`gpulab.hardware`:

- β is **per GPU and per direction**. Datasheets print NVLink and PCIe figures counting both
  directions (H100: "NVLink 900 GB/s", "PCIe Gen5 128 GB/s"); a ring sends one way and
  receives the other at the same time, so its bandwidth term uses half of the printed figure.
- α is the per-step latency NCCL's own performance model assumes for each kind of link (its
  ``hwLat`` table for the ring algorithm and its low-latency protocol): a model constant, not a
  measurement. NCCL also adds a fixed start-up cost per collective (several µs), left out here.
- These are estimates, not measurements. β is the line rate, and NCCL reaches about 82 % of
  NVLink's (:data:`gpulab.hardware.NCCL_NVLINK_EFFICIENCY`, the share ``gpulab model-check``
  uses against published nccl-tests runs): a large all-reduce over NVLink takes about 1.2×
  the time here. No congestion, no in-network reduction (NVLink SHARP on NVSwitch and
  InfiniBand SHARP can do better than a ring), all GPUs sending at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from gpulab import hardware

GB = 1e9

_NCCL_TUNING = (
    "NCCL's performance model, src/graph/tuning.cc, table hwLat, ring algorithm, LL protocol "
    "(https://github.com/NVIDIA/nccl/blob/master/src/graph/tuning.cc, as in NCCL 2.2x): "
    "{value} µs per step over {kind}. A model constant NCCL uses to choose algorithms, not a "
    "measurement"
)
_NVLINK_PAGE = (
    "NVIDIA NVLink and NVLink Switch page (https://www.nvidia.com/en-us/data-center/nvlink/): "
    "fifth-generation NVLink, 18 links of 100 GB/s = 1.8 TB/s per Blackwell GPU counting both "
    "directions; H100's fourth generation 900 GB/s; 130 TB/s across the 72 GPUs of an NVL72"
)
_NVL72_PAGE = (
    "NVIDIA GB200 NVL72 product page (https://www.nvidia.com/en-us/data-center/gb200-nvl72/): "
    "36 Grace CPUs and 72 Blackwell GPUs in one rack, one NVLink domain of 130 TB/s "
    "(72 × 1.8 TB/s, both directions counted)"
)
_PCISIG = (
    "PCI-SIG specifications (https://pcisig.com/specifications): PCIe 4.0 runs 16 GT/s and "
    "PCIe 5.0 32 GT/s per lane, 128b/130b encoded: 31.5 and 63 GB/s per direction on 16 lanes, "
    "printed by NVIDIA's datasheets as 64 and 128 GB/s counting both directions"
)
_NDR = (
    "NVIDIA Quantum-2 InfiniBand platform (https://www.nvidia.com/en-us/networking/quantum2/): "
    "NDR, 400 Gb/s per port = 50 GB/s per direction; DGX H100 gives each of its 8 GPUs its own "
    "400 Gb/s ConnectX-7 port (DGX H100 user guide, https://docs.nvidia.com/dgx/"
    "dgxh100-user-guide/introduction-to-dgxh100.html)"
)
_XDR = (
    "NVIDIA Quantum-X800 InfiniBand platform (https://www.nvidia.com/en-us/networking/products/"
    "infiniband/quantum-x800/) and ConnectX-8 SuperNIC (https://docs.nvidia.com/networking/"
    "display/connectx8supernic/introduction): XDR, 800 Gb/s per port = 100 GB/s per direction"
)


@dataclass(frozen=True)
class Link:
    """One kind of link between GPUs, by the α–β model; every figure's source in ``sources``."""

    key: str
    name: str
    alpha_s: float
    beta_bytes_per_s: float  # per GPU, per direction
    scope: str  # where it connects GPUs: "inside a server", "a rack", "between servers"
    sources: dict[str, str] = field(default_factory=dict)

    def message_time(self, n_bytes: float) -> float:
        """α + n / β: one message of ``n_bytes`` over this link."""
        return self.alpha_s + float(n_bytes) / self.beta_bytes_per_s

    def allreduce_time(self, n_bytes: float, n_ranks: int) -> float:
        """A ring all-reduce of ``n_bytes`` over ``n_ranks`` GPUs joined by this link."""
        return ring_allreduce_time(n_bytes, n_ranks, self.alpha_s, self.beta_bytes_per_s)

    def __str__(self) -> str:
        return (f"{self.name}: α = {self.alpha_s * 1e6:g} µs, β = "
                f"{self.beta_bytes_per_s / GB:g} GB/s per direction ({self.scope})")


def _link(key, name, alpha_us, alpha_kind, beta_gb, scope, beta_source) -> Link:
    return Link(key, name, alpha_us * 1e-6, beta_gb * GB, scope,
                {"alpha_s": _NCCL_TUNING.format(value=alpha_us, kind=alpha_kind),
                 "beta_bytes_per_s": beta_source})


def _nvswitch_link(generation: int, gpu_key: str, *more_sources: str) -> Link:
    """NVLink ``generation`` through the NVSwitches of an 8-GPU server of ``gpu_key``: β is
    half the GPU's NVLink figure in :mod:`gpulab.hardware`, which counts both directions."""
    gpu = hardware.get_gpu(gpu_key)
    each_way_gb = gpu.nvlink_bytes_per_s_per_direction / GB
    return _link(f"nvlink{generation}",
                 f"NVLink {generation} through NVSwitch ({gpu_key.split('-')[0]})", 0.6,
                 "NVLink", each_way_gb, "inside an 8-GPU server",
                 "; ".join([gpu.source("nvlink_bytes_per_s"), *more_sources,
                            f"halved: {each_way_gb:g} GB/s each way"]))


LINKS: dict[str, Link] = {link.key: link for link in (
    _link("pcie4", "PCIe 4.0 x16", 1.0, "PCI", 32, "inside a server, through the host's PCIe",
          f"{_PCISIG}; as {hardware.get_gpu('A100-SXM').source('host_link_bytes_per_s')}"),
    _link("pcie5", "PCIe 5.0 x16", 1.0, "PCI", 64, "inside a server, through the host's PCIe",
          f"{_PCISIG}; as {hardware.H100_SXM.source('host_link_bytes_per_s')}"),
    _nvswitch_link(3, "A100-SXM"),
    _nvswitch_link(4, hardware.H100_SXM.key, _NVLINK_PAGE),
    _nvswitch_link(5, "B200"),
    _link("nvl72", "NVLink 5 across a GB200 NVL72 rack", 0.6, "NVLink", 900,
          "a rack of 72 GPUs, through NVLink Switch trays",
          f"{_NVL72_PAGE}; {_NVLINK_PAGE}; 1.8 TB/s per GPU halved: 900 GB/s each way. NCCL "
          "treats a multi-node NVLink domain as one NVLink node, hence NVLink's α"),
    _link("ib-ndr", "InfiniBand NDR, 400 Gb/s per GPU", 2.7, "the network", 50,
          "between servers, one port per GPU", _NDR),
    _link("ib-xdr", "InfiniBand XDR, 800 Gb/s per GPU", 2.7, "the network", 100,
          "between servers, one port per GPU", _XDR),
)}


def look_up(table: dict, key, what: str):
    """``table[key]``; a value of ``table`` is returned as it is, and a key not in it raises
    ValueError naming ``what`` and the keys (used for links, systems and workloads)."""
    if isinstance(key, type(next(iter(table.values())))):
        return key
    if not isinstance(key, str) or key not in table:
        raise ValueError(f"no {what} {key!r}; the {what}s are {', '.join(table)}")
    return table[key]


def get_link(key: str | Link) -> Link:
    """The link called ``key`` (``"nvlink4"``, ``"pcie5"``, ``"ib-ndr"``, ...)."""
    return look_up(LINKS, key, "link")


def ring_allreduce_time(n_bytes: float, n_ranks: int, alpha_s: float,
                        beta_bytes_per_s: float) -> float:
    """2(N - 1) α + 2(N - 1)/N · n / β: a ring all-reduce of ``n_bytes`` over ``n_ranks``; 0
    for one rank (nothing to exchange)."""
    n = int(n_ranks)
    if n < 1:
        raise ValueError(f"n_ranks must be >= 1, not {n_ranks!r}")
    if n == 1:
        return 0.0
    return 2 * (n - 1) * alpha_s + 2 * (n - 1) / n * float(n_bytes) / beta_bytes_per_s


@dataclass(frozen=True)
class AlphaBetaFit:
    """α and β fitted to measured all-reduce times, as if the all-reduce were a ring."""

    alpha_s: float
    beta_bytes_per_s: float
    n_ranks: int
    sizes_bytes: tuple[float, ...]
    times_s: tuple[float, ...]
    where: str

    def predict(self, n_bytes, n_ranks: int | None = None):
        """Ring all-reduce time(s) with the fitted α and β."""
        n = self.n_ranks if n_ranks is None else n_ranks
        return np.array([ring_allreduce_time(b, n, self.alpha_s, self.beta_bytes_per_s)
                         for b in np.atleast_1d(n_bytes)])

    @property
    def worst_ratio(self) -> float:
        """The largest measured/fitted (or fitted/measured) ratio over the points."""
        fitted = self.predict(np.array(self.sizes_bytes))
        ratios = np.array(self.times_s) / fitted
        return float(np.max(np.maximum(ratios, 1 / ratios)))

    @property
    def half_bandwidth_bytes(self) -> float:
        """The message size at which the ring's latency term 2(N-1)α equals its bandwidth term
        2(N-1)/N · n/β: n = N · α · β. Smaller messages cost mostly latency, larger ones
        mostly bandwidth."""
        return self.n_ranks * self.alpha_s * self.beta_bytes_per_s

    def __str__(self) -> str:
        return (f"α = {self.alpha_s * 1e6:.3g} µs per step, β = "
                f"{self.beta_bytes_per_s / GB:.3g} GB/s ({self.n_ranks} ranks, {self.where}; "
                f"worst point off by ×{self.worst_ratio:.2f})")


def fit_alpha_beta(sizes_bytes, times_s, n_ranks: int, where: str = "") -> AlphaBetaFit:
    """Least-squares α and β of a ring all-reduce to ``times_s`` measured at ``sizes_bytes``:
    time = c0 + c1 · n with c0 = 2(N - 1) α and c1 = 2(N - 1)/(N β). Relative errors are
    minimised (each point divided by its time), so that the microsecond points count as much
    as the millisecond ones. α or β that come out negative or infinite are clipped to the
    smallest positive value that fits."""
    sizes = np.asarray(sizes_bytes, dtype=np.float64)
    times = np.asarray(times_s, dtype=np.float64)
    if sizes.shape != times.shape or sizes.size < 2:
        raise ValueError("need at least two (size, time) pairs of the same length")
    if n_ranks < 2:
        raise ValueError("an all-reduce over one rank sends nothing: fit with 2 or more")
    weights = 1.0 / times
    design = np.column_stack([np.ones_like(sizes), sizes]) * weights[:, None]
    (c0, c1), *_ = np.linalg.lstsq(design, times * weights, rcond=None)
    c0 = max(float(c0), 1e-9)
    c1 = max(float(c1), 1e-15)
    steps = 2 * (n_ranks - 1)
    alpha = c0 / steps
    beta = steps / (n_ranks * c1)
    if not (math.isfinite(alpha) and math.isfinite(beta)):
        raise ValueError("the fit did not converge: are the times positive and finite?")
    return AlphaBetaFit(alpha, beta, int(n_ranks), tuple(map(float, sizes)),
                        tuple(map(float, times)), where)


__all__ = ["LINKS", "AlphaBetaFit", "Link", "fit_alpha_beta", "get_link", "ring_allreduce_time"]
