"""experiments.beyond.ep_dispatch: the Megatron-Core MoE report's Table 7 (arXiv 2603.07685v1 Sec. 4.2.2), EP dispatch
and combine alone, HybridEP against NCCL's all-to-all, H100 and GB200, EP 8-64, against the simulator.

Pinned: the simulated spans (us) at this commit. A model change that moves them moves these pins; update them with the
table (``python -m experiments.beyond.ep_dispatch``) in the commit that moves them. The errors are stated, not
bounded tighter than the findings below: nothing is fitted on Table 7, and its routing is not stated.
"""

from __future__ import annotations

import pytest

from experiments.beyond.ep_dispatch import ALLTOALL, EP_SIZES, HYBRIDEP, MEASURED_US, ROUTINGS, DispatchRow, rows, table

# (cluster, dispatcher, routing) -> simulated dispatch us at EP 8 / 16 / 32 / 64 (the combine is simulated the same)
PINNED = {
    ("gb200", HYBRIDEP, "top-8"): (426, 570, 697, 755),
    ("gb200", HYBRIDEP, "group-limited"): (296, 325, 362, 384),
    ("gb200", ALLTOALL, "top-8"): (616, 659, 681, 692),
    ("h100", HYBRIDEP, "top-8"): (901, 1365, 3625, 6180),
    ("h100", HYBRIDEP, "group-limited"): (621, 1365, 3625, 4243),
    ("h100", ALLTOALL, "top-8"): (1154, 5020, 7519, 8768),
}


@pytest.fixture(scope="module")
def table7() -> dict[tuple[str, str, int], DispatchRow]:
    return {(row.cluster, row.dispatcher, row.ep): row for row in rows()}


def test_every_cell_of_table_7_is_simulated_and_pinned(table7: dict[tuple[str, str, int], DispatchRow]) -> None:
    assert len(table7) == 16 and MEASURED_US[("h100", ALLTOALL)][0] == (1265, 5774, 8059, 9164)
    for (cluster, dispatcher, routing), pinned in PINNED.items():
        for ep, value in zip(EP_SIZES, pinned, strict=True):
            dispatch, combine = table7[(cluster, dispatcher, ep)].simulated_us[routing]
            assert dispatch == pytest.approx(value, rel=2e-3), (cluster, dispatcher, routing, ep)
            assert combine == pytest.approx(dispatch, rel=1e-9)


def test_nccl_all_to_all_is_within_a_quarter_and_never_slow(table7: dict[tuple[str, str, int], DispatchRow]) -> None:
    """NCCL's all-to-all (one copy per routed expert: the routing does not change it): H100 -13% to 0% over EP 8-64, in
    a node and across 2-8 nodes (the NIC's rate, NCCL's ring steps); GB200 NVL72 -10% to -26%. Every cell is simulated
    fast or exact: the all-to-all the alltoall dispatcher's rows run is not where moesim is too slow."""
    for cluster, lo, hi in (("h100", -0.14, 0.005), ("gb200", -0.27, -0.09)):
        for ep in EP_SIZES:
            row = table7[(cluster, ALLTOALL, ep)]
            assert row.errors("top-8") == row.errors("group-limited")
            assert all(lo < error < hi for error in row.errors("top-8")), (cluster, ep)


def test_hybridep_depends_on_the_unstated_routing(table7: dict[tuple[str, str, int], DispatchRow]) -> None:
    """HybridEP sends one copy per destination rank (node across nodes), so the routing sets its bytes. With top-8
    unrestricted (HybridEP's own benchmark's router) GB200 is -1% to +21% at EP 8-64 (its rates on the wire: the
    README's algorithm bandwidths count a rank's own tokens); with DeepSeek-V3's group-limited routing 16-48% fast.
    On H100 the two bracket the measurement at EP 8 (+36% / -6%) and EP 64 (+34% / -8%)."""
    gb200 = [table7[("gb200", HYBRIDEP, ep)] for ep in EP_SIZES]
    assert all(-0.02 < error < 0.22 for row in gb200 for error in row.errors("top-8"))
    assert all(-0.49 < error < -0.15 for row in gb200 for error in row.errors("group-limited"))
    for ep in (8, 64):
        row = table7[("h100", HYBRIDEP, ep)]
        assert min(row.errors("top-8")) > 0 > max(row.errors("group-limited")), ep


def test_the_table_prints_each_routing() -> None:
    printed = table()
    assert all(routing in printed for routing in ROUTINGS) and printed.count("\n") == 17
