"""The token dispatchers Megatron-Core's search space tries (issue 41 item 1): where a layout's EP group has more
than one rank, each of Megatron-Core's dispatchers (workloads/dispatchers) that Megatron-LM and the flex backends'
kernels accept for that group; elsewhere only the job's own.

The rules, from their sources (NVIDIA/Megatron-LM@d98e8a64dd; deepseek-ai/DeepEP@34152ae, the DeepEP that the
Megatron-Bridge v0.5.0 image builds for both flex backends: docker/Dockerfile.ci DEEPEP_COMMIT):

- EP > 1 for any choice: the flex dispatcher's DeepEP backend asserts ``tp_size * ep_size > 1`` over its TP x EP
  group (megatron/core/transformer/moe/token_dispatcher.py MoEFlexTokenDispatcher), and at one EP rank the
  dispatchers move nothing: the job's own is kept.
- allgather: not with --overlap-moe-expert-parallel-comm ("supported with alltoall/flex token dispatcher",
  megatron/core/transformer/transformer_config.py).
- flex-deepep over a group of ETP x EP ranks: DeepEP's normal kernels take a group inside one node of 2, 4 or 8
  ranks (csrc/kernels/launch.cuh SWITCH_RANKS; csrc/deep_ep.cpp treats more than NUM_MAX_NVL_PEERS = 8 ranks as
  internode), or 8 ranks a node on 2, 4, 8, 16, 18 or 20 nodes (SWITCH_RDMA_RANKS over num_ranks / 8;
  deep_ep/buffer.py get_dispatch_config, which Megatron's fused_a2a.py get_buffer calls, lists 16 to 160 ranks).
- flex-hybridep: its buffer needs the group to split into whole NVLink domains (deep_ep/hybrid_ep_buffer.py:
  "The number of ranks ... should be divisible by the number of ranks per node"), at most 72 ranks a domain
  (csrc/hybrid_ep/config.cuh MAX_NUM_OF_RANKS_PER_NODE), local experts x ranks a domain a multiple of 4 and the
  hidden size of 16 (BufferConfig.is_valid, BF16 tokens). Published within one NVLink domain (B200, GB200) and
  across nodes over InfiniBand (H100, 16 to 64 ranks: docs/README_Hybrid-EP.md on the hybrid-ep branch).

Which of them the job itself allows (a flag that needs one dispatcher, a setting another would change) is the
job's to say: experiments/search/megatron.py job_dispatchers. Pure functions of the point: space_size.py counts
with the same ones.
"""

from __future__ import annotations

from workloads.specs.models import ModelSpec

# Megatron-Core's dispatchers (workloads/dispatchers/registry.py names), the default job's (alltoall) first.
MEGATRON_DISPATCHERS = ("alltoall", "allgather", "flex-deepep", "flex-hybridep")

DEEPEP_NVL_PEERS = 8  # deepseek-ai/DeepEP@34152ae csrc/kernels/configs.cuh NUM_MAX_NVL_PEERS
DEEPEP_IN_NODE_RANKS = (2, 4, 8)  # csrc/kernels/launch.cuh SWITCH_RANKS, at most NUM_MAX_NVL_PEERS
DEEPEP_NODES = (2, 4, 8, 16, 18, 20)  # csrc/kernels/launch.cuh SWITCH_RDMA_RANKS
HYBRIDEP_MAX_DOMAIN_RANKS = 72  # csrc/hybrid_ep/config.cuh MAX_NUM_OF_RANKS_PER_NODE
HYBRIDEP_EXPERT_RANK_MULTIPLE = 4  # config.cuh BufferConfig.is_valid: (experts per rank x ranks per node) % 4
HYBRIDEP_HIDDEN_MULTIPLE = 16  # config.cuh BufferConfig.is_valid: hidden_dim % 16 for TMA (BF16)


def deepep_takes(group: int, gpus_per_node: int) -> bool:
    """Whether DeepEP's normal kernels run a group of ``group`` ranks on nodes of ``gpus_per_node`` GPUs."""
    if group <= DEEPEP_NVL_PEERS:
        return group in DEEPEP_IN_NODE_RANKS and group <= gpus_per_node
    whole_nodes = gpus_per_node == DEEPEP_NVL_PEERS and group % DEEPEP_NVL_PEERS == 0
    return whole_nodes and group // DEEPEP_NVL_PEERS in DEEPEP_NODES


def hybridep_takes(group: int, gpus_per_node: int, experts_per_rank: int, hidden: int) -> bool:
    """Whether HybridEP's buffer takes a group of ``group`` ranks (ranks a domain: those of one node)."""
    domain = min(group, gpus_per_node)
    return (
        group % domain == 0
        and domain <= HYBRIDEP_MAX_DOMAIN_RANKS
        and (experts_per_rank * domain) % HYBRIDEP_EXPERT_RANK_MULTIPLE == 0
        and hidden % HYBRIDEP_HIDDEN_MULTIPLE == 0
    )


def dispatcher_choices(
    dispatchers: tuple[str, ...],
    *,
    ep_degree: int,
    etp: int,
    num_experts: int,
    hidden: int,
    gpus_per_node: int,
    ep_overlap: bool,
) -> tuple[str, ...]:
    """The dispatchers of ``dispatchers`` (the job's own first) a point with this EP group searches: the first
    alone at one EP rank, else each the rules above accept."""
    if ep_degree <= 1:
        return dispatchers[:1]
    group = ep_degree * etp  # the flex dispatcher's TP x EP group: the expert-tensor ranks of each EP rank
    rules = {
        "allgather": not ep_overlap,
        "flex-deepep": deepep_takes(group, gpus_per_node),
        "flex-hybridep": hybridep_takes(group, gpus_per_node, num_experts // ep_degree, hidden),
    }
    return tuple(name for name in dispatchers if rules.get(name, True))


def point_dispatchers(
    dispatchers: tuple[str, ...], model: ModelSpec, gpus_per_node: int, point: dict[str, object]
) -> tuple[str, ...]:
    """The token dispatchers a searched point of ``model`` takes, each a point of its own: ``dispatcher_choices``
    for an EP FFN, the job's own for a TP FFN; ("",), the base layout's, where the space lists none or the model
    is dense (its layers dispatch nothing)."""
    if not dispatchers or not model.moe_layers:
        return ("",)
    expert_parallel = point["ffn"] == "ep"
    return dispatcher_choices(
        dispatchers,
        ep_degree=(int(point["ep"]) or int(point["intra_size"])) if expert_parallel else 1,
        etp=int(point["etp"]),
        num_experts=model.num_experts,
        hidden=model.hidden_size,
        gpus_per_node=gpus_per_node,
        ep_overlap=bool(point["ep_overlap"]),
    )
