"""The token dispatchers as objects (workloads/dispatchers): the registry is the layout's choice list, each
dispatcher's wire and transport, and the steps each issues, by hand on one small context."""

from __future__ import annotations

from dataclasses import replace

import pytest

from workloads.dispatchers.base import ExpertSteps, MoeContext, Wire
from workloads.dispatchers.registry import DISPATCHERS
from workloads.dispatchers.steps import quant_padding, sort_chunks
from workloads.ops import (
    ALL_GATHER,
    ALL_TO_ALL,
    GEMM,
    HOST_SYNC,
    REDUCE_SCATTER,
    Carries,
    Gemm,
    Group,
    Step,
    Transport,
)
from workloads.specs.layouts import TOKEN_DISPATCHERS

# 1,024 tokens of h 1,024, top-4 of 32 experts on EP 8 in one node (4 local experts)
CTX = MoeContext(
    tokens=1024,
    hidden=1024,
    top_k=4,
    num_experts=32,
    experts_local=4,
    degree=8,
    nodes=1,
    tp=1,
    nvlink_bytes=7e6,
    nic_bytes=0.0,
    all_gather=False,
    fused_permute=True,
    host_sync=True,
    quant_align=0,
    shared=False,
    etp=1,
)
EXPERTS = ExpertSteps([Step("expert_fc13", GEMM, gemm=Gemm(512, 2048, 1024, 4))])


def _names(name: str, ctx: MoeContext = CTX) -> list[str]:
    return [step.name for step in DISPATCHERS[name].layer_steps(ctx, EXPERTS)]


def test_the_registry_is_the_layouts_choice_list() -> None:
    assert tuple(DISPATCHERS) == TOKEN_DISPATCHERS
    assert TOKEN_DISPATCHERS == ("megascale", "alltoall", "allgather", "flex-deepep", "flex-hybridep")
    for name, dispatcher in DISPATCHERS.items():
        assert dispatcher.name == name


def test_wires_and_transports() -> None:
    """Copies: NCCL's all-to-all one per routed expert, DeepEP / HybridEP one per rank (per node across nodes),
    the allgather dispatcher everything; MegaScale-MoE's all-to-all switches to AG above its threshold."""
    wires = {
        name: (d.in_node_wire(8, 6), d.cross_node_wire(), d.transport(1), d.transport(2))
        for name, d in DISPATCHERS.items()
    }
    assert wires == {
        "megascale": (Wire.ALL_GATHER, Wire.PER_RANK, Transport.NCCL, Transport.DEEPEP),
        "alltoall": (Wire.PER_COPY, Wire.PER_COPY, Transport.NCCL, Transport.NCCL),
        "allgather": (Wire.ALL_GATHER, Wire.ALL_GATHER, Transport.NCCL, Transport.NCCL),
        "flex-deepep": (Wire.PER_RANK, Wire.PER_RANK, Transport.DEEPEP, Transport.DEEPEP),
        "flex-hybridep": (Wire.PER_RANK, Wire.PER_RANK, Transport.HYBRIDEP, Transport.HYBRIDEP),
    }
    assert DISPATCHERS["megascale"].in_node_wire(6, 6) == Wire.PER_COPY


def test_alltoall_issues_megatron_cores_order() -> None:
    """preprocess counts, permutation 1, the host's wait for the counts before the all-to-all (dropless:
    "before_ep_alltoall", after the permutation), the rows' all-to-all and then the probs' own (token_dispatch's two
    NCCL calls), sort_chunks with 4 local experts, the experts, the reverse sort, the combine, the unpermutation."""
    assert _names("alltoall") == [
        "ep_token_counts",
        "permute",
        "tokens_per_expert_sync",
        "ep_a2a_dispatch",
        "ep_a2a_probs",
        "sort_chunks",
        "expert_fc13",
        "unsort_chunks",
        "ep_a2a_combine",
        "unpermute",
    ]
    steps = {s.name: s for s in DISPATCHERS["alltoall"].layer_steps(CTX, EXPERTS)}
    assert steps["ep_a2a_dispatch"].comm_bytes == 7e6
    # one FP32 prob per row of 1,024 BF16 elements, on each link, and sent back in backward
    probs = steps["ep_a2a_probs"]
    assert probs.comm_bytes == pytest.approx(7e6 * 4 / 2048, rel=1e-12)
    assert probs.nic_bytes == pytest.approx(steps["ep_a2a_dispatch"].nic_bytes * 4 / 2048, rel=1e-12)
    assert (probs.collective, probs.group, probs.bwd_scale, probs.carries) == (
        ALL_TO_ALL,
        Group.EP,
        1.0,
        Carries.OTHER,
    )
    assert steps["ep_a2a_combine"].comm_bytes == 7e6
    names = ("ep_a2a_dispatch", "ep_a2a_probs", "ep_a2a_combine")
    assert {steps[n].transport for n in names} == {Transport.NCCL}
    # 4,096 rows of 1,024 x 2 B and a 4 B prob, read and written once: 2 x 4,096 x 2,052 B, both ways
    assert (steps["sort_chunks"].mem_bytes, steps["sort_chunks"].bwd_mem_bytes) == (16_809_984, 16_809_984)


def test_one_local_expert_needs_no_sort_and_drop_and_pad_no_sync() -> None:
    one = replace(CTX, experts_local=1)
    assert sort_chunks(one, "sort_chunks") == []
    no_sync = replace(CTX, host_sync=False)
    assert "tokens_per_expert_sync" not in _names("alltoall", no_sync)
    assert "ep_token_counts" not in _names("alltoall", no_sync)  # drop-and-pad: counts are torch.full


def test_unfused_sort_chunks_is_two_cats() -> None:
    unfused = replace(CTX, fused_permute=False)
    (step,) = sort_chunks(unfused, "sort_chunks")
    assert (step.kernels, step.bwd_kernels) == (2, 2)


def test_fp8_padding_wraps_the_experts() -> None:
    """TEGroupedMLP's Fp8Padding / Fp8Unpadding under FP8 (align 16): 4,096 rows of 1,024 x 2 B read and written
    (16,777,216 B) and the probs (32,768 B) before, the output rows after."""
    fp8 = replace(CTX, quant_align=16)
    pad, unpad = quant_padding(fp8)
    assert (pad[0].mem_bytes, pad[0].kernels, unpad[0].mem_bytes) == (16_809_984, 2, 16_777_216)
    names = _names("alltoall", fp8)
    assert (
        names[names.index("quant_pad") + 1] == "expert_fc13" and names[names.index("expert_fc13") + 1] == "quant_unpad"
    )
    assert quant_padding(CTX) == ([], [])


def test_router_padding_moves_the_alltoall_wait_and_drops_the_expert_padding() -> None:
    """--moe-router-padding-for-quantization (NVIDIA/Megatron-LM@d98e8a64dd token_dispatcher.py preprocess,
    dispatch_preprocess; moe_utils.py skip_routed_expert_padding): the padded counts make permutation 1's output size
    dynamic, so the host waits for them before it ("before_permutation_1"), and the experts skip TEGroupedMLP's
    Fp8Padding / Fp8Unpadding, under every dispatcher."""
    padded = replace(CTX, quant_align=16, router_padded=True)
    assert _names("alltoall", padded)[:3] == ["ep_token_counts", "tokens_per_expert_sync", "permute"]
    assert quant_padding(padded) == ([], [])
    for name in ("alltoall", "flex-deepep", "flex-hybridep"):
        assert "quant_pad" not in _names(name, padded) and "quant_unpad" not in _names(name, padded)
    assert _names("flex-deepep", padded) == _names("flex-deepep", replace(padded, quant_align=0))


def test_router_padding_from_megatron_flags_and_its_refusals() -> None:
    """Megatron's flag and its deprecated alias set the layout field; TransformerConfig refuses it without FP8 / FP4
    and with the allgather dispatcher, and so does moesim, naming the flag."""
    from topologies.errors import ConfigError
    from workloads.inputs.megatron import parse_megatron_args
    from workloads.specs.models import model_preset

    base = "--expert-model-parallel-size 8 --moe-token-dispatcher-type alltoall --moe-grouped-gemm "
    fp8 = "--fp8-format hybrid --fp8-recipe tensorwise "
    for flag in ("--moe-router-padding-for-quantization", "--moe-router-padding-for-fp8"):
        job = parse_megatron_args(base + fp8 + flag)
        assert job.resolve(model_preset("mixtral-8x7b")).layout.router_quant_padding
    assert not parse_megatron_args(base + fp8).resolve(model_preset("mixtral-8x7b")).layout.router_quant_padding
    for flags, words in (
        (base + "--moe-router-padding-for-quantization", "fp8/fp4 must be specified"),
        (fp8 + "--expert-model-parallel-size 8 --moe-router-padding-for-quantization", "alltoall or flex"),
    ):
        job = parse_megatron_args(flags)
        with pytest.raises(ConfigError, match=words) as refused:
            job.resolve(model_preset("mixtral-8x7b"))
        assert "--moe-router-padding-for-quantization" in str(job.explain(refused.value))


def test_flex_deepep_waits_once_and_permutes_after_the_dispatch() -> None:
    """DeepEP's dispatch waits on the host for the received counts (notify); the permute's
    tokens_per_expert.sum().item() reads the host tensor FusedDispatch built from DeepEP's list
    (NVIDIA/Megatron-LM fused_a2a.py, torch.tensor(num_recv_tokens_per_expert_list)) and waits for nothing.
    The permute runs on the received tokens."""
    names = _names("flex-deepep")
    assert names == [
        "deepep_topk_indices",
        "deepep_layout_notify",
        "deepep_recv_count_sync",
        "ep_a2a_dispatch",
        "deepep_indices_to_multihot",
        "permute",
        "expert_fc13",
        "unpermute",
        "ep_a2a_combine",
    ]
    steps = DISPATCHERS["flex-deepep"].layer_steps(CTX, EXPERTS)
    assert [s.name for s in steps if s.kind == HOST_SYNC] == ["deepep_recv_count_sync"]
    assert {s.transport for s in steps if s.collective} == {Transport.DEEPEP}


def test_allgather_gathers_and_scatters() -> None:
    steps = DISPATCHERS["allgather"].layer_steps(CTX, EXPERTS)
    comm = [(s.name, s.collective) for s in steps if s.collective]
    assert comm == [("ep_ag_dispatch", ALL_GATHER), ("ep_rs_combine", REDUCE_SCATTER)]
    # the routing map (1 B) and probs (4 B) of 32 experts per token ride in the tokens' 2,048 B rows
    assert steps[0].comm_bytes == pytest.approx(7e6 * (1 + 32 * 5 / 2048), rel=1e-12)


def test_megascale_is_the_papers_dispatch() -> None:
    assert _names("megascale") == [
        "tokens_per_expert_sync",
        "permute",
        "ep_a2a_dispatch",
        "expert_fc13",
        "ep_a2a_combine",
        "unpermute",
    ]
    steps = DISPATCHERS["megascale"].layer_steps(CTX, EXPERTS)
    assert [(s.collective, s.fuse) for s in steps if s.collective] == [(ALL_TO_ALL, "next"), (ALL_TO_ALL, "prev")]


def test_a_former_yaml_key_says_what_replaced_it(tmp_path) -> None:
    from topologies.errors import ConfigError
    from workloads.inputs.yaml_files import load_layout

    path = tmp_path / "layout.yaml"
    path.write_text("name: x\nep_dispatcher: alltoall\n")
    with pytest.raises(ConfigError, match="^layout.ep_dispatcher: replaced by token_dispatcher"):
        load_layout(path)


def test_allgather_blocks_the_host_at_each_masked_select() -> None:
    """MoEAllGatherTokenDispatcher.dispatch_postprocess (Megatron-LM core_v0.15.0): the counts' .cpu(), the
    local probs' masked_select (fused or not) and, unfused, the permute's index masked_select: three syncs,
    two with TE's fused permutation, none where the layout has no host sync."""
    unfused = replace(CTX, fused_permute=False)
    syncs = [s.name for s in DISPATCHERS["allgather"].layer_steps(unfused, EXPERTS) if s.kind == HOST_SYNC]
    assert syncs == ["tokens_per_expert_sync", "permute_indices_sync", "local_probs_sync"]
    fused = [s.name for s in DISPATCHERS["allgather"].layer_steps(CTX, EXPERTS) if s.kind == HOST_SYNC]
    assert fused == ["tokens_per_expert_sync", "local_probs_sync"]
    assert not [
        s for s in DISPATCHERS["allgather"].layer_steps(replace(CTX, host_sync=False), EXPERTS) if s.kind == HOST_SYNC
    ]


def test_megatron_cores_unfused_permute_backward_is_index_add() -> None:
    """Without --moe-permute-fusion Megatron-Core's alltoall, allgather and DeepEP dispatchers permute with
    index_select, whose backward zeroes the token rows and index_add_s the copies' gradients into them: the memset's
    bytes (tokens x hidden x 2 B) over 2 kernels, and routed x hidden elements at index_add_'s measured rate. On an H100
    (132 SMs) that is 2^22 x 128 elements per 4,719 us (pytorch/pytorch PR #175760), so CTX's 4,096 copies of 1,024
    wide take 4.19 M / 113.8 G/s = 36.9 us, by hand. HybridEP (its own kernel), MegaScale-MoE's stack and the fused
    permute keep the passes at HBM bandwidth."""
    from simulator.costs.calibration import DEFAULT_CALIBRATION
    from simulator.costs.kernels import compute_time_s
    from topologies.hardware import gpu_preset
    from workloads.ops import BYTES_BF16, MEMORY, Op

    unfused = replace(CTX, fused_permute=False)
    for name in ("alltoall", "allgather", "flex-deepep"):
        permute = next(s for s in DISPATCHERS[name].layer_steps(unfused, EXPERTS) if s.name == "permute")
        assert permute.bwd_index_add_elements == unfused.routed * unfused.hidden, name
        assert (permute.bwd_mem_bytes, permute.bwd_kernels) == (unfused.tokens * unfused.hidden * BYTES_BF16, 2)
    for name, ctx in (("flex-hybridep", unfused), ("megascale", unfused), ("alltoall", CTX)):
        permute = next(s for s in DISPATCHERS[name].layer_steps(ctx, EXPERTS) if s.name == "permute")
        assert permute.bwd_index_add_elements == 0.0, name
    h100, cal = gpu_preset("h100"), DEFAULT_CALIBRATION
    elements = unfused.routed * unfused.hidden
    op = Op("permute", MEMORY, "compute", mem_bytes=0.0, kernels=0, index_add_elements=elements)
    assert compute_time_s(op, h100, cal) == pytest.approx(elements * 4719e-6 / (2**22 * 128), rel=1e-12)
