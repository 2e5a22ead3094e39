"""Consecutive routing (layout routing "consecutive"): NeMo AutoModel's benchmark gate (fake_balanced_gate) routes
token t to experts t k .. t k + k - 1 mod E. The load is as balanced as uniform routing's, but a token's experts are
adjacent, so a dispatcher that sends one copy per rank (DeepEP, HybridEP inside a node) or per node (DeepEP across
nodes) sends far fewer (tests/unit/test_ep_dispatcher.py); NCCL's all-to-all, one copy per routed expert, as many."""

from __future__ import annotations

from workloads.specs.layouts import layout_preset
from workloads.specs.routing import consecutive_units, expert_loads


def test_a_token_s_adjacent_experts_span_few_units() -> None:
    assert consecutive_units(128, 8, 8) == 1.0  # 16 experts a rank: a block of 8 starting at a multiple of 8
    assert consecutive_units(256, 8, 64) == 2.0  # 4 a rank: every block on two ranks ...
    assert consecutive_units(256, 8, 8) == 1.0  # ... of one node
    assert consecutive_units(12, 4, 4) == 2.0  # 3 a rank: blocks 0-3, 4-7, 8-11 each on two ranks
    assert consecutive_units(10, 4, 5) == 2.0  # starts 0, 4, 8, 2, 6 (t k mod E), each on two ranks of 2 experts
    assert (expert_loads(64, "consecutive") == expert_loads(64, "uniform")).all()  # balanced


def test_the_layout_takes_it() -> None:
    assert layout_preset("megascale-moe").with_(routing="consecutive").routing == "consecutive"
