"""The operations of a training step: compute ops with shapes and communication ops with bytes.

Ops carry work (FLOPs, bytes, GEMM shapes), never times: the simulator's cost models turn them into
time. Dependencies are indices into the task's op list; each op runs on a stream ("compute" or "comm")
whose ops execute in list order, as CUDA streams do.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import Enum
from functools import cache
from operator import attrgetter
from typing import NamedTuple, TypeVar

BYTES_BF16 = 2  # bytes per BF16 element: activations, weights and gradients on the wire
BYTES_FP32 = 4  # bytes per FP32 element: router scores and probabilities, mixing weights, main gradients

COMPUTE = "compute"
COMM = "comm"

# Op kinds
GEMM = "gemm"
ATTENTION = "attention"
MEMORY = "memory"  # memory-bound elementwise kernels (norms, activations, permutations)
MEMORY_BACKWARD_FACTOR = 2.0  # assumed: a backward elementwise kernel reads the gradient and the input
# A Mamba-2 scan's backward: its matmuls' gradients, two per forward matmul, as a GEMM's (Megatron's FLOP count); its
# kernels' time, 4.78x the forward's: mamba_ssm's Triton SSD on a B200, backward 674.47 us against forward 141.07 us
# (NVIDIA/cudnn-frontend benchmark/linear_attention/results/mamba2/b200/2026-09-17-bf16.json, no gate, checkpointed
# states recomputed in backward as Megatron-Core's mamba_split_conv1d_scan_combined does; workloads/recipes/mamba.py)
SCAN_BACKWARD_FACTOR = 2.0
# that benchmark's two times (its shape: simulator/costs/scan_anchor.py)
TRITON_SSD_FORWARD_S, TRITON_SSD_BACKWARD_S = 141.07e-6, 674.47e-6
SCAN_BACKWARD_TIME_RATIO = TRITON_SSD_BACKWARD_S / TRITON_SSD_FORWARD_S
HOST_SYNC = "host_sync"  # a device-to-host copy the host waits for (e.g. tokens per expert)
COLLECTIVE = "collective"
FUSED = "fused"  # a GEMM with its collective fused tile by tile (MegaScale-MoE Sec. 4.2)

ALL_TO_ALL = "all_to_all"
ALL_GATHER = "all_gather"
REDUCE_SCATTER = "reduce_scatter"
ALL_REDUCE = "all_reduce"  # TP without sequence parallelism (Megatron's reduce_from_tensor_model_parallel_region)
TRANSPOSE = {
    ALL_TO_ALL: ALL_TO_ALL,
    ALL_GATHER: REDUCE_SCATTER,
    REDUCE_SCATTER: ALL_GATHER,
    ALL_REDUCE: ALL_REDUCE,
}


class Label(str, Enum):
    """A str-valued enum that prints, formats and serialises as its value ("ep", not "Group.EP")."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    __hash__ = str.__hash__  # equal to its value, so it must hash like it (Enum hashes the member name)


class Group(Label):
    """The parallel group a collective runs in (the key of exposed communication)."""

    NONE = ""
    TP = "tp"
    SP = "sp"
    EP = "ep"
    ETP = "etp"
    CP = "cp"
    PP = "pp"
    DP = "dp"  # data parallel (x CP): dense weights' FSDP / ZeRO-3 gathers and gradient reductions
    EDP = "edp"  # expert data parallel: the replicas of the same experts (workloads/graph/fsdp.py)


class Role(Label):
    """What an op does for the training step: the key transforms and schedules use, never its name."""

    FORWARD = "forward"
    RECOMPUTE = "recompute"  # forward work redone in backward (full recomputation or SAR)
    INPUT_GRAD = "input_grad"  # activation gradients, and the collectives on their path
    WEIGHT_GRAD = "weight_grad"  # weight-gradient GEMMs: nothing in a backward waits for them


class GraphPart(Label):
    """The part of a transformer layer a step runs in, as Megatron-Core's CUDA-graph scopes capture them
    (--cuda-graph-scope, megatron/training/arguments.py; workloads/specs/cuda_graphs.py)."""

    NONE = ""  # outside the layers (embedding, head), or after a device-to-host sync: always eager
    ATTN = "attn"  # TransformerLayer._forward_attention
    MLP = "mlp"  # a dense layer's _forward_mlp
    MOE_ROUTER = "moe_router"  # the MoE layer's _forward_mlp up to MoELayer.router()
    MOE = "moe"  # the rest of the MoE layer up to its first host sync
    MAMBA = "mamba"  # a hybrid model's MambaLayer (--cuda-graph-modules mamba)
    ITERATION = "iteration"  # --cuda-graph-impl full_iteration: every kernel of the forward-backward step


class Carries(Label):
    """What a collective moves, which sets its precision under FP8 communication (DeepSeek-V3 Sec. 3.3.2)."""

    OTHER = "other"  # attention all-to-alls, CP ring: BF16
    INTO_GEMM = "into_gemm"  # activations into a linear layer (dispatch, TP/ETP all-gather): FP8 forward
    OUT_OF_GEMM = "out_of_gemm"  # a linear layer's output (combine, TP/ETP reduce-scatter): FP8 backward


class Transport(Label):
    """Who moves an EP dispatch's or combine's bytes, which sets the rate and the SMs the simulator charges
    (simulator/costs/kernels.py): NCCL's collectives (Megatron-Core's alltoall and allgather dispatchers,
    MegaScale-MoE's own collectives inside a node), or DeepEP-class kernels (Megatron-Core's flex dispatcher,
    DeepEP and HybridEP; MegaScale-MoE's and DeepSeek-V3's cross-node dispatch), HybridEP's apart for its rates. A token dispatcher picks its
    transport (workloads/dispatchers)."""

    DEEPEP = "deepep"
    HYBRIDEP = "hybridep"  # DeepEP's hybrid-ep kernels: DeepEP-class, with their own published NVLink 5 rates
    NCCL = "nccl"

    @property
    def deepep_class(self) -> bool:
        """Whether DeepEP-class kernels move the bytes (DeepEP's SMs, DeepEP's rate over the NIC)."""
        return self in (Transport.DEEPEP, Transport.HYBRIDEP)


class Module(Label):
    """The Megatron-Core submodule a recipe step runs in: what ``--recompute-modules`` names (selective
    recomputation, TransformerConfig.recompute_modules in megatron/core/transformer/transformer_config.py)."""

    NONE = ""
    CORE_ATTN = "core_attn"  # softmax(QK^T) V: the FlashAttention kernel
    LAYERNORM = "layernorm"  # input_layernorm and pre_mlp_layernorm
    MLA_UP_PROJ = "mla_up_proj"  # MLA's query / key-value up projections and their latent norms
    MLP = "mlp"  # a dense layer's MLP
    MOE = "moe"  # the MoE layer: router, dispatch, experts, combine (and the shared experts inside it)
    MOE_ACT = "moe_act"  # the experts' activation function
    SHARED_EXPERTS = "shared_experts"
    MHC = "mhc"  # mHC's mappings, aggregation and merge around each block (workloads/recipes/residual.py)

    def rerun_by(self, modules: frozenset[Module]) -> bool:
        """Whether selective recomputation of ``modules`` re-runs a step of this module in backward: its own
        name, or "moe" for the experts' activation and the shared experts (MoELayer.forward runs both)."""
        if self == Module.NONE:
            return False
        return self in modules or (self in (Module.MOE_ACT, Module.SHARED_EXPERTS) and Module.MOE in modules)


def attention_pairs(seq_len: int, window: int = 0) -> int:
    """Query-key pairs attention is counted over, in FlashAttention's non-causal convention (s x s).

    The kernels execute about half of the counted FLOPs under the causal mask (simulator.costs.kernels). With a
    sliding window of w < s keys a causal query i attends min(i + 1, w) keys, s w - w^2 / 2 in all, so
    the pairs counted are twice that: 2 s w - w^2 (s^2 without a window, or when w >= s).
    """
    if window <= 0 or window >= seq_len:
        return seq_len * seq_len
    return 2 * seq_len * window - window * window


def attention_flops(batch: float, pairs: float, heads: float, head_dim: int, head_dim_v: int) -> float:
    """Forward attention FLOPs of ``batch`` sequences over ``pairs`` counted (query, key) pairs each: QK^T and AV,
    2 b pairs heads (d_qk + d_v); the backward is ATTENTION_BACKWARD_FACTOR x (workloads/graph/op_lists.py)."""
    return 2.0 * batch * pairs * heads * (head_dim + head_dim_v)


class GemmPrecision(Enum):
    """Operand precision of a GEMM and, for FP8, the scaling recipe, which picks the kernel that runs it:
    per-tensor scales (Transformer Engine's delayed and current "tensorwise" recipes) are applied once in
    cuBLAS's epilogue; 1x128 / 128x128 block scales (DeepSeek-V3 Sec. 3.3, DeepGEMM, TE "blockwise") are
    promoted inside the main loop; MXFP8 (TE "mxfp8") uses Blackwell's block-scaled MMA; NVFP4 (TE "nvfp4",
    Megatron-LM's --fp4-format e2m1) runs E2M1 operands with 1 x 16 E4M3 block scales on Blackwell's FP4 MMA."""

    BF16 = "bf16"
    FP8_TENSORWISE = "fp8-tensorwise"
    FP8_BLOCKWISE = "fp8-blockwise"
    FP8_MXFP8 = "fp8-mxfp8"
    NVFP4 = "nvfp4"


class GroupedDim(Enum):
    """The dimension a grouped GEMM's groups split: the rows (forward and input-gradient GEMMs: each expert's
    tokens times its own weight) or the reduction (weight-gradient GEMMs: each expert's weight gradient
    summed over its tokens, torch._grouped_mm's 2d x 2d case, DeepGEMM's k-grouped wgrad)."""

    ROWS = "rows"
    REDUCTION = "reduction"


@dataclass(frozen=True, slots=True)
class AttentionShape:
    """What one FlashAttention call sees, for its cost lookup: head widths, the per-sequence length the kernel
    runs over (after the CP split: each GPU's s / cp queries), the causal mask and a sliding window of keys."""

    head_dim: int  # query / key width per head
    head_dim_v: int  # value width per head (MLA: 128 against a 192-wide query / key)
    seq_len: int
    causal: bool = True
    window: int = 0  # keys a query attends to; 0 = all keys before it
    kernel: str = ""  # the kernel family (layout.attention_backend); "" = the calibration's
    dropout: bool = False  # attention dropout inside the kernel (ModelSpec.attention_dropout > 0)

    @property
    def sliding(self) -> bool:
        """Whether the window is shorter than the sequence (else the layer is plain causal attention)."""
        return 0 < self.window < self.seq_len


@dataclass(frozen=True)
class DeltaRule:
    """What one chunked gated-delta-rule call of a Gated DeltaNet layer sees (workloads/recipes/mamba.py gdn_recipe),
    for its measured time (simulator/costs/delta_rule.py): the micro-batch's tokens and one GPU's value heads."""

    tokens: int
    value_heads: int
    key_head_dim: int
    value_head_dim: int


@dataclass(frozen=True, slots=True)
class Gemm:
    """A (grouped) GEMM: ``groups`` products of (m x k) @ (k x n); sequential = one kernel per group;
    ``grouped`` says whether the groups split m (each group's tokens) or k (a weight gradient's tokens);
    ``accumulate_bytes``: the width of the main gradient a weight-gradient GEMM adds its product into
    (gradient accumulation fusion: the epilogue reads and writes main_grad), 0 for a plain 16-bit output."""

    m: int
    n: int
    k: int
    groups: int = 1
    sequential: bool = False
    precision: GemmPrecision = GemmPrecision.BF16
    grouped: GroupedDim = GroupedDim.ROWS
    accumulate_bytes: int = 0
    multi_stream: bool = False  # one GEMM per group on several streams (TE GroupedLinear), not one grouped kernel

    @property
    def fp8(self) -> bool:
        """Low-precision operands (FP8, or FP4 under NVFP4): not BF16 (DeepSeek-V3 Sec. 3.3 FP8 training)."""
        return self.precision != GemmPrecision.BF16

    @property
    def fp4(self) -> bool:
        """FP4 operands: the GEMM runs at the GPU's FP4 peak."""
        return self.precision == GemmPrecision.NVFP4

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k * self.groups

    def dgrad(self) -> Gemm:
        """Input gradient: (m x n) @ (n x k)."""
        return Gemm(
            self.m, self.k, self.n, self.groups, self.sequential, self.precision, multi_stream=self.multi_stream
        )

    def wgrad(self, accumulate_bytes: int = 0) -> Gemm:
        """Weight gradient: (k x m) @ (m x n), each group reducing over its m tokens, added into a main
        gradient of ``accumulate_bytes`` per element (0: written out)."""
        return Gemm(
            self.k,
            self.n,
            self.m,
            self.groups,
            self.sequential,
            self.precision,
            GroupedDim.REDUCTION,
            accumulate_bytes,
            self.multi_stream,
        )


@dataclass(frozen=True, slots=True)
class Op:
    """One kernel (or fused kernel pair) of one GPU; all GPUs of a stage run the same ops."""

    name: str
    kind: str
    stream: str
    deps: tuple[int, ...] = ()
    role: Role = Role.FORWARD
    layer: int = -1
    gemm: Gemm | None = None
    flops: float = 0.0  # executed FLOPs of GEMM / attention kernels
    model_flops: float = 0.0  # FLOPs counted for MFU (0 for recomputation)
    attention_backward: bool = False
    attention: AttentionShape | None = None  # attention ops: the shape their kernel efficiency is looked up at
    graph: GraphPart = GraphPart.NONE  # the CUDA graph that captures the op's kernels (NONE: launched eagerly)
    mem_bytes: float = 0.0  # HBM traffic of memory-bound kernels
    kernels: int = 1
    # FP8 quantizations under a per-tensor recipe: the part of ``mem_bytes`` and ``kernels`` that makes the
    # column-wise copy as a transpose, which TE makes only where FP8 GEMMs take the TN layout alone (Hopper);
    # the cost layer drops it on GPUs that run every layout (workloads/recipes/fp8_quant.py)
    transpose_bytes: float = 0.0
    transpose_kernels: int = 0
    index_add_elements: float = 0.0  # memory-bound ops: elements scattered by index_add_ (Step.bwd_index_add_elements)
    scan_state_bytes: float = 0.0  # memory-bound ops: a Mamba-2 scan's chunk states, one pass (Step.scan_state_bytes)
    delta_rule: DeltaRule | None = None  # a Gated DeltaNet's recurrence, timed at its measured speed (Step.delta_rule)
    collective: str = ""
    group: Group = Group.NONE
    group_size: int = 1
    comm_bytes: float = 0.0  # bytes each GPU sends (egress)
    tiles: int = 1  # fused ops: chunks the GEMM and collective are pipelined in
    nic_bytes: float = 0.0  # bytes each GPU sends over its NIC (cross-node EP), besides comm_bytes on NVLink
    module: Module = Module.NONE  # compute ops: the Megatron-Core submodule of their step
    transport: Transport = Transport.NCCL  # EP all-to-alls: NCCL's or DeepEP-class kernels (rate and SMs)
    sms: int = 0  # DeepEP-class kernels: the SMs the job launches them on (layout.dispatcher_sms; 0: the default)

    @property
    def is_comm(self) -> bool:
        return self.kind in (COLLECTIVE, FUSED)


@dataclass(frozen=True, slots=True)
class Step:
    """One forward step of a layer recipe; backward is derived from it."""

    name: str
    kind: str
    gemm: Gemm | None = None
    flops: float = 0.0  # attention forward FLOPs as counted (non-causal, FlashAttention's convention)
    attention: AttentionShape | None = None  # attention steps: what the kernel sees
    graph: GraphPart = GraphPart.NONE  # the layer part a CUDA-graph scope names (workloads/specs/cuda_graphs.py)
    mem_bytes: float = 0.0
    kernels: int = 1
    # Steps whose backward is not the forward's kernels again (None: ``kernels`` kernels moving
    # MEMORY_BACKWARD_FACTOR x ``mem_bytes``, workloads/graph/op_lists.py); 0: no backward op (the gradient passes
    # through, or a collective of metadata has no transpose to run). ``bwd_mem_bytes``: e.g. a gather's backward
    # is a scatter-add of the copies' gradients into the rows they came from.
    bwd_kernels: int | None = None
    bwd_mem_bytes: float | None = None
    # elements the backward scatters with PyTorch's index_add_, timed at its measured element rate besides
    # ``bwd_mem_bytes`` (Calibration.index_add_elements_per_s_per_sm: the backward of an index_select)
    bwd_index_add_elements: float = 0.0
    # Mamba-2's chunked state-space scan (workloads/recipes/mamba.py): the forward's matmul FLOPs (counted, backward
    # SCAN_BACKWARD_FACTOR x), and the bytes of one pass over its FP32 chunk states, which its kernels write and read
    # Calibration.scan_state_passes times beside ``mem_bytes`` (backward: SCAN_BACKWARD_TIME_RATIO x both)
    scan_flops: float = 0.0
    scan_state_bytes: float = 0.0
    # A Gated DeltaNet's chunked delta rule (workloads/recipes/mamba.py gdn_recipe): timed at FLA's measured speed
    # for its tokens and heads, forward or backward (simulator/costs/delta_rule.py), its FLOPs counted in scan_flops
    delta_rule: DeltaRule | None = None
    wgrad_kernels: int | None = None  # GEMM steps: launches of the weight-gradient GEMM (None: ``kernels``)
    collective: str = ""
    group: Group = Group.NONE
    comm_bytes: float = 0.0  # ATTENTION with comm_bytes / nic_bytes: ring attention (CP), fused
    fuse: str = ""  # for collectives under intra-op overlap: fuse with the "prev" or "next" GEMM
    sar_recompute: bool = False  # recomputed / re-communicated in backward under SAR
    routed_copies: bool = False  # the EP permutation and dispatch: kept, not re-run, under SAR with keep_dispatch
    nic_bytes: float = 0.0  # collectives: bytes each GPU sends over its NIC (cross-node EP)
    group_size: int = 0  # collectives: GPUs of the group inside the node (0 = layout.intra_size)
    overlap_comm: bool = False  # compute that runs beside the preceding comm-stream collective
    bwd_scale: float = 1.0  # collectives (and ring attention): backward bytes = forward bytes x bwd_scale
    # collectives that run only in backward: identity in forward, e.g. Megatron's copy_to_tensor_model_parallel_
    # region before a column-parallel layer without sequence parallelism, whose backward all-reduces the gradient
    backward_only: bool = False
    carries: Carries = Carries.OTHER  # collectives: what they move (FP8 communication keys on it)
    bf16_only: bool = False  # GEMMs kept in BF16 under FP8 training (router, LM head: DeepSeek-V3 Sec. 3.3.1)
    # TP collectives: around one of TE's linear layers, which TE's userbuffers can overlap (False: Megatron-Core's
    # own ColumnParallelLinear, the output layer, whose all-gather runs before its GEMM)
    te_linear: bool = True
    # FP8 GEMMs whose input (forward) or output gradient (backward) is all-gathered over this many sequence
    # shards (TP with SP): TE quantizes the local shard and gathers FP8 (workloads/recipes/fp8_quant.py)
    input_shards: int = 1
    grad_shards: int = 1
    # GEMMs whose input TE's own norm computes in the same module (Megatron-Core's TELayerNormColumnParallelLinear):
    # under current scaling the norm kernel yields the amax, so the quantization makes no amax pass (fp8_quant.py)
    norm_input: bool = False
    module: Module = Module.NONE  # re-run in backward when selective recomputation names it (Module.rerun_by)
    transport: Transport = Transport.NCCL  # EP collectives: NCCL's or DeepEP-class kernels (workloads/dispatchers)
    sms: int = 0  # DeepEP-class EP collectives: the SMs the job gives their kernels (0: the backend's default)


def comm_step(name: str, collective: str, group: Group, comm_bytes: float = 0.0, **fields: object) -> Step:
    """A collective step of a layer recipe: ``collective`` within ``group``, ``comm_bytes`` of egress per GPU."""
    return Step(name, COLLECTIVE, collective=collective, group=group, comm_bytes=comm_bytes, **fields)


class LayerKind(NamedTuple):
    """What distinguishes one layer's recipe from another's."""

    dense: bool  # a dense FFN instead of the MoE
    window: int  # sliding-window attention over this many keys; 0 = full causal attention
    # A hybrid model's layer holds one block (ModelSpec.hybrid_pattern): "mamba" (a Mamba-2 mixer), "gdn" (a Gated
    # DeltaNet mixer), "attention", "mlp" (a dense FFN) or "moe"; "" is a transformer layer, attention and an FFN
    block: str = ""
    # BF16 GEMMs in an FP8 / FP4 run (LayoutSpec.bf16_first_layers / bf16_last_layers: Megatron's first / last layers)
    bf16: bool = False
    # (recipe step, recipe) of the layer's linear layers a --te-precision-config-file rule overrides
    # (workloads/specs/module_precision.py)
    precisions: tuple[tuple[str, str], ...] = ()
    # DeepSeek-V4's attention: keys compressed this many to one beside the window (ModelSpec.compress_ratios; 0: none)
    compress: int = 0
    # DeepSeek-V3.2's sparse attention: the layer runs its indexer (else it reuses an earlier layer's top-k)
    indexer: bool = False


T = TypeVar("T")
_SET = object.__setattr__  # frozen dataclasses: their own __init__ sets each field so


def evolved(item: T, **changes: object) -> T:
    """``dataclasses.replace`` for this module's slotted, frozen dataclasses without ``__post_init__`` (Op, Step, Gemm):
    the same object at about half the cost, which counts where op lists are rebuilt (DualPipe's split and merged
    lanes, fused GEMMs: 12% of a DualPipeV step's CPU); an unknown field name raises, as with ``replace``."""
    names, values = _copier(type(item))
    new = object.__new__(type(item))
    for name, value in zip(names, values(item)):
        _SET(new, name, value)
    for name, value in changes.items():
        _SET(new, name, value)
    return new


@cache
def _copier(cls: type) -> tuple[tuple[str, ...], attrgetter]:
    if hasattr(cls, "__post_init__") or "__slots__" not in vars(cls):
        raise TypeError(f"evolved() copies slotted dataclasses without __post_init__, not {cls.__name__}")
    names = tuple(field.name for field in fields(cls))
    return names, attrgetter(*names)
