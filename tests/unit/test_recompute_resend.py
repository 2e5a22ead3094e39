"""Recompute that covers the MoE layer: the dispatch sent again in backward, or its output kept.

One Mixtral-8x7B layer (h 4096, top-2 of 8 experts, f = 14336 / 4096 = 3.5, m = 4) with one shared expert,
in-node EP 8 on one node, one sequence of 1,024 tokens: each GPU routes 128 x 2 = 256 token copies,
256 x 4096 x 2 B = 2 MiB, of which 7/8 = 1,835,008 B leave the GPU in each all-to-all (MegaScale-MoE Eq. 3).
bsh/n = 1024 x 4096 / 8 x 2 B = 1 MiB is one unit of the activation formula (simulator.memory.per_gpu).
"""

from __future__ import annotations

import pytest

from simulator.memory.per_gpu import activation_bytes_per_layer
from topologies.errors import ConfigError
from workloads.graph.step import StepWorkload
from workloads.ops import Group, Role
from workloads.schedules.base import BACKWARD, FORWARD, Task
from workloads.specs.layouts import MEGASCALE_MOE
from workloads.specs.models import model_preset

LAYER = model_preset("mixtral-8x7b").with_(num_layers=1, num_shared_experts=1)
PLAIN = MEGASCALE_MOE.with_(pp=1, inter_op_overlap=False, intra_op_overlap=False)
A2A_BYTES = 128 * 2 * 4096 * 2 * 7 / 8  # 1,835,008 B
MIB = 2**20


def workload(**changes) -> StepWorkload:
    return StepWorkload(LAYER, PLAIN.with_(**changes), 8, 8, 1, 1024)


def ep_bytes(work: StepWorkload, phase: str) -> dict[Role, float]:
    """EP bytes each GPU sends in one task of ``phase``, per op role."""
    ops = work.task_ops(work.task_key(0, Task(phase, 0, 0)))
    sent: dict[Role, float] = {}
    for op in ops:
        if op.group == Group.EP:
            sent[op.role] = sent.get(op.role, 0.0) + op.comm_bytes
    return sent


MOE = {"recompute": "selective", "recompute_modules": ("moe",)}
MOE_ACT = {"recompute": "selective", "recompute_modules": ("moe_act",)}
GRADS = {Role.INPUT_GRAD: 2 * A2A_BYTES}  # the combine's and the dispatch's transposes


@pytest.mark.parametrize(
    ("changes", "backward"),
    [
        (MOE, {Role.RECOMPUTE: 2 * A2A_BYTES, **GRADS}),  # the MoE layer re-run: dispatch and combine re-sent
        (MOE_ACT, GRADS),  # the activation alone: nothing sent again
        ({}, {Role.RECOMPUTE: A2A_BYTES, **GRADS}),  # SAR: the dispatch re-sent
        ({"keep_dispatch": True}, GRADS),  # SAR keeping the received tokens
        ({"recompute": "none"}, GRADS),
    ],
)
def test_backward_ep_bytes_by_hand(changes: dict, backward: dict) -> None:
    work = workload(**changes)
    assert ep_bytes(work, FORWARD) == {Role.FORWARD: 2 * A2A_BYTES}
    assert ep_bytes(work, BACKWARD) == pytest.approx(backward, rel=1e-12)


@pytest.mark.parametrize(
    ("changes", "units"),
    [
        (MOE, 54.25 - (2 * 2 + 3 * 2 * 3.5)),  # no recompute: 2n + 2k + 3kf + 12 + 5/m = 54.25; moe frees 2k + 3kf
        (MOE_ACT, 54.25 - 2 * 3.5),  # moe_act frees the activation's output, kf
        ({}, 2 * 2 * 3.5 + 4 + 2 / 4),  # SAR: 2kf + 4 + 2/m = 18.5
        ({"keep_dispatch": True}, 18.5 + 2),  # plus the received copies, k
    ],
)
def test_activation_bytes_by_hand(changes: dict, units: float) -> None:
    assert activation_bytes_per_layer(workload(**changes)) == pytest.approx(units * MIB, rel=1e-12)


def test_what_not_resending_costs() -> None:
    """moe_act keeps 18 MiB more per layer than moe (2k + 2kf) and sends 2 all-to-alls less per backward;
    keeping the dispatch under SAR costs k = 2 MiB and one all-to-all."""
    memory = {name: activation_bytes_per_layer(workload(**c)) for name, c in (("moe", MOE), ("moe_act", MOE_ACT))}
    assert memory["moe_act"] - memory["moe"] == pytest.approx(18 * MIB, rel=1e-12)
    sar, kept = workload(), workload(keep_dispatch=True)
    assert activation_bytes_per_layer(kept) - activation_bytes_per_layer(sar) == pytest.approx(2 * MIB, rel=1e-12)
    recomputed = [op.name for op in kept.task_ops(kept.task_key(0, Task(BACKWARD, 0, 0))) if op.role == Role.RECOMPUTE]
    assert recomputed == ["attn_norm.recompute", "ffn_norm.recompute"]  # no permute, no dispatch


def test_keep_dispatch_needs_sar_and_ep() -> None:
    with pytest.raises(ConfigError, match='^layout.keep_dispatch: needs recompute "sar"'):
        PLAIN.with_(keep_dispatch=True, **MOE_ACT)
    with pytest.raises(ConfigError, match='^layout.keep_dispatch: keeps what the EP dispatch received: needs ffn "ep"'):
        PLAIN.with_(keep_dispatch=True, ffn="tp", attention="tp")
