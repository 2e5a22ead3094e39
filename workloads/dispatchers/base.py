"""The token dispatcher's interface: what an MoE layer's dispatch and combine put on the wire and on the GPU.

A token dispatcher (Megatron-Core's ``MoETokenDispatcher`` classes, megatron/core/transformer/moe/
token_dispatcher.py at NVIDIA/Megatron-LM@cf39a4dd: dispatch_preprocess, token_dispatch, dispatch_postprocess,
combine_preprocess, token_combine, combine_postprocess) says three things, each a method here:

- how many copies of a token cross the wire (``in_node_wire``, ``cross_node_wire``): one per (token, routed
  expert) pair (NCCL's all-to-all), one per destination rank or node (DeepEP, HybridEP), or every token to
  every member (an all-gather); workloads/ep/plan.py turns that into bytes;
- who moves them (``transport``): NCCL or DeepEP-class kernels, which sets the rate and the SMs the simulator
  charges (simulator/costs/kernels.py);
- the steps of the layer between the router and the output (``layer_steps``): the metadata kernels and
  collectives, the host syncs, the permutations, the all-to-alls, the experts the recipe built, in the order
  the dispatcher issues them. Backward follows from each step (workloads/ops.py Step).

The router's gating GEMM, score function, top-k and aux-loss kernels come before the dispatcher and are the
same under every one (workloads/recipes/router.py). May import: workloads.ops only.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from workloads.ops import Label, Step, Transport


class Wire(Label):
    """How many copies of a token a dispatch sends."""

    PER_COPY = "per_copy"  # one per (token, routed expert) pair: NCCL's all-to-all of the permuted rows
    PER_RANK = "per_rank"  # one per destination rank (in a node) or node (across nodes): DeepEP, HybridEP
    ALL_GATHER = "all_gather"  # every token to every member: AG + local permutation, RS on the way back


@dataclass(frozen=True)
class MoeContext:
    """What the dispatcher's steps are sized by: one MoE layer of one micro-batch on one GPU (BF16 bytes)."""

    tokens: int  # tokens this GPU routes (after TP / SP / CP)
    hidden: int
    top_k: int
    num_experts: int
    experts_local: int  # experts per EP rank
    degree: int  # EP ranks of the group
    nodes: int  # nodes the group spans
    tp: int  # TP ranks beside each EP rank (the TP x EP group the token counts are gathered over)
    nvlink_bytes: float  # the plan's dispatch egress per GPU over NVLink (= the combine's)
    nic_bytes: float  # ... over the NIC
    all_gather: bool  # the plan dispatches by all-gather
    fused_permute: bool  # --moe-permute-fusion (TE's fused permute, unpermute and sort-chunks kernels)
    host_sync: bool  # token counts copied to the host before the expert GEMMs (layout.host_sync_per_moe_layer)
    quant_align: int  # FP8 / FP4 training: rows per expert padded to this multiple in TEGroupedMLP (0: none)
    shared: bool  # shared experts run beside the dispatch
    etp: int
    comm_sms: int = 0  # SMs of its DeepEP-class dispatch / combine kernels (layout.dispatcher_sms; 0: the default)
    router_padded: bool = False  # the router pads each expert's tokens to quant_align (layout.router_quant_padding)

    @property
    def routed(self) -> int:
        """Token copies this GPU routes (one per routed expert)."""
        return self.tokens * self.top_k


@dataclass(frozen=True)
class ExpertSteps:
    """The recipe's steps that run on the dispatched tokens: shared experts (beside the dispatch), the ETP
    all-gather and reduce-scatter around the experts, and the experts (grouped GEMMs and activation)."""

    experts: list[Step]
    shared: list[Step] = field(default_factory=list)
    etp_gather: list[Step] = field(default_factory=list)
    etp_scatter: list[Step] = field(default_factory=list)


class TokenDispatcher(ABC):
    """One token dispatcher: its wire, its transport and its steps. Subclasses are registered by name in
    workloads/dispatchers/registry.py, the value of ``layout.token_dispatcher``."""

    name: str = ""
    megatron: str = ""  # the Megatron-LM flags that select it ("" for MegaScale-MoE's own)
    wire: Wire = Wire.PER_COPY  # copies sent, in a node and across nodes, unless the methods below say otherwise
    moved_by: Transport = Transport.NCCL  # who moves them, unless ``transport`` says otherwise

    def in_node_wire(self, top_k: int, all_gather_above_top_k: int) -> Wire:
        """Copies sent inside one node (``all_gather_above_top_k``: layout.a2a_topk_threshold)."""
        return self.wire

    def cross_node_wire(self) -> Wire:
        """Copies sent over the NIC when the EP group spans nodes: PER_COPY (NCCL) or PER_RANK (one per node)."""
        return self.wire

    def transport(self, nodes: int) -> Transport:
        """Who moves the EP group's bytes when it spans ``nodes`` nodes."""
        return self.moved_by

    @abstractmethod
    def layer_steps(self, ctx: MoeContext, experts: ExpertSteps) -> list[Step]:
        """The steps from the router's output to the layer's output, in issue order."""
