"""Context parallelism (ring attention, Megatron-Core CP): a recipe transform.

CP: a group of cp GPUs splits every sequence into cp shards (Megatron-Core's load-balanced 2 cp chunks
under the causal mask, so each GPU does 1/cp of the attention work). Every other op of the layer sees
s/cp tokens, so the layer recipes are built with seq_len / cp and ``apply_cp`` fixes the attention:
FLOPs per GPU = (full-sequence FLOPs) / cp, and the ring passes each GPU's K and V shard around the
group in cp - 1 steps (forward), K/V and their gradients in backward (2x), overlapped block by block
with the attention kernels (Liu et al., Ring Attention, 2023; Megatron-Core context_parallel.py); DSA's sparse
attention all-gathers its keys instead (``dsa_cp_gather``). The ring (or gather) runs on NVLink when the TP/SP x CP
group fits in a node (cp x intra_size <= GPUs per node), else on the NIC: a ring step ends when its slowest hop (the
one between nodes) lands, so the folded representative sends all its ring bytes over the NIC, like cross-node EP
(workloads/ep/plan.py).
"""

from __future__ import annotations

import math
from dataclasses import replace

from workloads.ops import ALL_GATHER, ATTENTION, BYTES_BF16, Group, Module, Step, attention_pairs, comm_step
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec

CP_BACKWARD_FACTOR = 2.0  # backward ring passes K/V and their gradients dK/dV (Megatron-Core CP)


def kv_width_per_gpu(model: ModelSpec, layout: LayoutSpec) -> int:
    """K plus V elements per token on one GPU: its heads of the TP/SP group (KV heads replicated when
    fewer than intra_size, as Megatron-LM and Ulysses do); MLA passes the expanded per-head K and V."""
    n = layout.intra_size
    if model.attention == "mla":
        return model.num_heads // n * (model.qk_nope_head_dim + model.qk_rope_head_dim + model.v_head_dim)
    return 2 * math.ceil(model.num_kv_heads / n) * model.head_dim


def cp_ring_bytes(model: ModelSpec, layout: LayoutSpec, seq_len: int) -> float:
    """Forward ring bytes each GPU sends per layer: (cp - 1) steps x its K/V shard, b (s/cp) x width x 2."""
    shard = layout.micro_batch * (seq_len // layout.cp) * kv_width_per_gpu(model, layout) * BYTES_BF16
    return (layout.cp - 1) * shard


def dsa_cp_gather(model: ModelSpec, layout: LayoutSpec, seq_len: int, on_nvlink: bool) -> Step:
    """DSA under CP (Megatron-Core's cp_comm_type allgather, the one DSAttention supports at d98e8a64): before its
    attention each GPU all-gathers the CP group's latent keys (kv_lora_rank + the RoPE dims), latent values
    (kv_lora_rank) and indexer keys (index_head_dim), BF16 (experimental_attention_variant/dsa.py
    gather_from_sequence_parallel_region over the CP group); backward, their gradients reduce-scattered."""
    width = 2 * model.kv_lora_rank + model.qk_rope_head_dim + model.index_head_dim
    shard = layout.micro_batch * (seq_len // layout.cp) * width * BYTES_BF16
    sent = (layout.cp - 1) * shard
    nvlink, nic = (sent, 0.0) if on_nvlink else (0.0, sent)
    return comm_step(
        "dsa_cp_gather", ALL_GATHER, Group.CP, nvlink, nic_bytes=nic, group_size=layout.cp, module=Module.CORE_ATTN
    )


def apply_cp(
    steps: list[Step], model: ModelSpec, layout: LayoutSpec, seq_len: int, gpus_per_node: int, window: int = 0
) -> list[Step]:
    """Attention steps built for s/cp tokens -> CP: 1/cp of the full sequence's attention FLOPs (x cp
    without a window) per GPU, fused with the ring. DSA's sparse attention, built for its share of the whole
    sequence already (workloads/recipes/mla.py), takes the all-gather before it instead (``dsa_cp_gather``)."""
    if layout.cp == 1:
        return steps
    if model.dsa:
        on_nvlink = layout.cp * layout.intra_size <= gpus_per_node
        gather = dsa_cp_gather(model, layout, seq_len, on_nvlink)
        return [item for step in steps for item in ((gather, step) if step.name == "sparse_attn" else (step,))]
    local_seq = seq_len // layout.cp
    scale = attention_pairs(seq_len, window) / (attention_pairs(local_seq, window) * layout.cp)
    ring = cp_ring_bytes(model, layout, seq_len)
    on_nvlink = layout.cp * layout.intra_size <= gpus_per_node
    return [
        replace(
            step,
            flops=step.flops * scale,
            collective=ALL_GATHER,
            group=Group.CP,
            group_size=layout.cp,
            comm_bytes=ring if on_nvlink else 0.0,
            nic_bytes=0.0 if on_nvlink else ring,
            bwd_scale=CP_BACKWARD_FACTOR,
        )
        if step.kind == ATTENTION
        else step
        for step in steps
    ]
