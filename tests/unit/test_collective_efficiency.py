"""Collective efficiency per collective and link (simulator.costs.collective_efficiency), by hand."""

from __future__ import annotations

import pytest

from simulator.costs.calibration import DEFAULT_CALIBRATION
from simulator.costs.collective_efficiency import (
    EFFICIENCY,
    RING_NIC_ROWS,
    Algorithm,
    AlphaBeta,
    Link,
    alpha_beta,
    efficiency,
)
from simulator.costs.kernels import (
    collective_wire_bytes,
    comm_kernel_sms,
    dp_gradient_bytes_per_param,
    dp_gradient_efficiency,
    nic_wire_bytes,
)
from tests.toys import TOY_CALIBRATION as CAL
from topologies.cluster import cluster_preset
from topologies.hardware import gpu_preset
from workloads.graph.fsdp import param_gather_bytes
from workloads.ops import ALL_GATHER, ALL_TO_ALL, COLLECTIVE, COMM, Group, Op, Transport
from workloads.specs.layouts import LayoutSpec

H800 = gpu_preset("h800")


def test_every_entry_has_a_source_and_a_fraction() -> None:
    for key, published in EFFICIENCY.items():
        assert 0 < published.value <= 1, key
        assert published.source, key


def test_deepep_intranode_bandwidths_over_h800_nvlink() -> None:
    # DeepEP README: dispatch 153 GB/s, combine 158 GB/s over NVLink, whose measured rate is 160 GB/s; logical
    # bandwidths, a rank's own tokens counted: 7 / 8 of them cross NVLink at EP 8
    assert efficiency(Algorithm.DEEPEP_DISPATCH, Link.NVLINK) == 153 * 7 / 8 / 160
    assert efficiency(Algorithm.DEEPEP_COMBINE, Link.NVLINK) == 158 * 7 / 8 / 160
    # internode, EP 64 on 8 nodes: 51 / 50 GB/s RDMA, 7 / 8 of them to other nodes, over the NIC's 47 at NCCL's rate
    assert efficiency(Algorithm.DEEPEP_DISPATCH, Link.NIC) == pytest.approx(51 * 7 / 8 / 47, rel=1e-12)
    assert efficiency(Algorithm.DEEPEP_COMBINE, Link.NIC) == pytest.approx(50 * 7 / 8 / 47, rel=1e-12)


def test_dp_gradients_over_the_nic_are_not_charged_the_nvlink_all_to_all_efficiency() -> None:
    # NCCL's all-to-all across nodes runs at one NIC's rate (nccl-tests#267): the same as a ring's
    assert dp_gradient_efficiency("bf16-a2a") == 1.0
    assert dp_gradient_efficiency("fp32-rs") == 1.0
    assert CAL.all_to_all_efficiency == 0.5  # the toy NVLink all-to-all efficiency plays no part


def test_deepep_transport_runs_at_deepeps_rates_and_nccl_at_nccls() -> None:
    # a round trip of dispatch (153 GB/s) and combine (158 GB/s) of equal bytes: 2 / (1/153 + 1/158) GB/s logical,
    # 7 / 8 of it on the wire, in a node or across nodes; the NIC bytes at 2 / (1/51 + 1/50) x 7 / 8 GB/s of 47;
    # NCCL's all-to-all at the (toy) Calibration.all_to_all_efficiency
    a2a = Op(
        "ep",
        COLLECTIVE,
        COMM,
        collective=ALL_TO_ALL,
        comm_bytes=155e6,
        nic_bytes=5e6,
        group_size=16,
        group=Group.EP,
        transport=Transport.DEEPEP,
    )
    deepep_in_node = Op(
        "d", COLLECTIVE, COMM, collective=ALL_TO_ALL, comm_bytes=155e6, group_size=8, transport=Transport.DEEPEP
    )
    in_node = Op("a", COLLECTIVE, COMM, collective=ALL_TO_ALL, comm_bytes=7e6, group_size=8)
    harmonic_gbps = 2 / (1 / 153 + 1 / 158) * 7 / 8
    assert collective_wire_bytes(a2a, CAL, H800) == pytest.approx(155e6 * 160 / harmonic_gbps, rel=1e-12)
    assert collective_wire_bytes(deepep_in_node, CAL, H800) == collective_wire_bytes(a2a, CAL, H800)
    assert collective_wire_bytes(in_node, CAL, H800) == pytest.approx(14e6, rel=1e-12)  # toy NCCL efficiency 0.5
    nic_gbps = 2 / (1 / 51 + 1 / 50) * 7 / 8
    assert nic_wire_bytes(a2a) == pytest.approx(5e6 * 47 / nic_gbps, rel=1e-12) and nic_wire_bytes(in_node) == 0.0
    ag = Op("g", COLLECTIVE, COMM, collective=ALL_GATHER, comm_bytes=7e6, group_size=8)
    assert collective_wire_bytes(ag, CAL, H800) == 7e6


def test_alpha_beta_fit_by_hand() -> None:
    rows = ((1e6, 30e-6), (3e6, 70e-6))  # 40 us per 2 MB: beta 50 GB/s; alpha 30 - 20 = 10 us
    fit = alpha_beta(rows)
    assert fit.alpha_s == pytest.approx(10e-6, rel=1e-9) and fit.beta_Bps == pytest.approx(50e9, rel=1e-9)
    assert AlphaBeta(10e-6, 50e9).bus_bandwidth_Bps(1e6) == pytest.approx(1e6 / 30e-6)


def test_the_nic_capacity_agrees_with_the_published_nccl_rows() -> None:
    """nccl-tests#232's all-reduce rows over one 400 Gb/s NIC fit beta 44.8 GB/s and alpha 56 us; the cluster's
    NIC capacity (0.94 x 50 GB/s) is within 5% of that beta."""
    fit = alpha_beta(RING_NIC_ROWS)
    assert fit.beta_Bps == pytest.approx(44.76e9, rel=1e-3)
    assert fit.alpha_s == pytest.approx(55.9e-6, rel=1e-2)
    assert cluster_preset("h800", 16).nic_effective_Bps == pytest.approx(fit.beta_Bps, rel=0.05)


def test_dp_bytes_follow_the_gradient_and_weight_dtypes() -> None:
    assert dp_gradient_bytes_per_param("bf16-a2a", "fp32") == 2  # MegaScale-MoE Sec. 5: BF16 all-to-all
    assert dp_gradient_bytes_per_param("fp32-rs", "fp32") == 4
    assert dp_gradient_bytes_per_param("fp32-rs", "bf16") == 2  # --grad-reduce-in-bf16
    # the weights' all-gather: BF16, FP8 with --fp8-param-gather (workloads.graph.fsdp.param_gather_bytes)
    fp8 = LayoutSpec("t", gemm_dtype="fp8", fp8_recipe="tensorwise")
    assert (param_gather_bytes(fp8), param_gather_bytes(fp8.with_(fp8_param_gather=True))) == (2.0, 1.0)


def test_hybridep_transport_reads_its_own_nvlink5_rates() -> None:
    """HybridEP on a GB200 NVL (README_Hybrid-EP.md kernel rows, 32 SMs, algorithm bandwidths that count a rank's own
    tokens: (r - 1) / r of them on the wire at r ranks): EP 8 at 764.03 / 737.13 GB/s, EP 64 at the 36-rank row,
    632.31 / 596.99, over NCCL's 680; on a GB300 the GB200's (assumed); on a GPU without a table
    (H800) DeepEP's rate, as before HybridEP had its own; its NIC bytes and SMs are DeepEP's."""

    def op(group_size: int, transport: Transport) -> Op:
        return Op(
            "h",
            COLLECTIVE,
            COMM,
            collective=ALL_TO_ALL,
            comm_bytes=100e6,
            nic_bytes=5e6,
            group_size=group_size,
            group=Group.EP,
            transport=transport,
        )

    gb200, gb300 = gpu_preset("gb200"), gpu_preset("gb300")
    ep8, ep64 = op(8, Transport.HYBRIDEP), op(64, Transport.HYBRIDEP)
    assert collective_wire_bytes(ep8, CAL, gb200) == pytest.approx(100e6 * (680 / 764.03 + 680 / 737.13) / 2 * 8 / 7)
    assert collective_wire_bytes(ep64, CAL, gb200) == pytest.approx(100e6 * (680 / 632.31 + 680 / 596.99) / 2 * 36 / 35)
    assert collective_wire_bytes(ep64, CAL, gb300) == collective_wire_bytes(ep64, CAL, gb200)
    assert collective_wire_bytes(ep8, CAL, H800) == collective_wire_bytes(op(8, Transport.DEEPEP), CAL, H800)
    assert nic_wire_bytes(ep8) == nic_wire_bytes(op(8, Transport.DEEPEP))
    # the SMs held: HybridEP's own default across NVLink domains (the op has NIC bytes), 8, where DeepEP's is 20
    assert comm_kernel_sms(ep8, DEFAULT_CALIBRATION) == 8
    assert comm_kernel_sms(op(8, Transport.DEEPEP), DEFAULT_CALIBRATION) == 20
