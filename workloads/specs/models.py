"""Model presets: the MoE transformers of MegaScale-MoE Table 2, as data."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

from topologies.errors import ConfigError, lookup_preset
from workloads.ops import LayerKind
from workloads.specs.fieldtypes import check_types, field_names
from workloads.specs.limits import check_limit
from workloads.specs.model_extensions import HYBRID_BLOCKS, check_extensions, dsv4_params, gdn_params, mla_params


class LayerParams(NamedTuple):
    """Weights of one layer by how they are sharded and synchronised."""

    attention: int  # projections (MLA: with its latent norms; a hybrid's Mamba-2 mixer)
    dense_ffn: int  # a dense layer's FFN
    shared: int  # shared experts
    experts: int  # all routed experts
    active_experts: int  # the top-k routed experts one token uses
    router: int
    norms: int
    latent: int = 0  # a latent MoE's projections to and from the experts' width, duplicated over TP

    @property
    def replicated(self) -> int:
        """Weights every TP rank holds whole: the router, the norms, a latent MoE's projections."""
        return self.router + self.norms + self.latent

    def total(self) -> int:
        return self.attention + self.dense_ffn + self.shared + self.experts + self.replicated

    def active(self) -> int:
        return self.attention + self.dense_ffn + self.shared + self.active_experts + self.latent


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only MoE transformer: every layer is attention (GQA or MLA) + an FFN (MoE or dense; SwiGLU unless
    ffn_activation says otherwise)."""

    name: str
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    expert_ffn_size: int
    num_experts: int
    top_k: int
    vocab_size: int = 65536
    source: str = ""
    # Beyond the paper (defaults keep the Table 2 presets unchanged); see workloads/recipes/mla.py.
    attention: str = "gqa"  # "gqa" | "mla" (DeepSeek-V2 Sec. 2.1 multi-head latent attention)
    kv_lora_rank: int = 0  # MLA d_c: compressed KV width
    q_lora_rank: int = 0  # MLA d_c': compressed query width (0 = no query compression)
    qk_rope_head_dim: int = 0  # MLA d_h^R: decoupled RoPE key/query width per head
    qk_nope_head_dim: int = 0  # MLA d_h: non-RoPE query/key width per head
    v_head_dim: int = 0  # MLA value width per head
    num_dense_layers: int = 0  # leading layers with a dense SwiGLU FFN instead of the MoE
    dense_ffn_size: int = 0  # their intermediate width
    num_shared_experts: int = 0  # experts every token goes through (width expert_ffn_size)
    tied_embeddings: bool = False  # input embedding and output head share one matrix
    # Real-model features (HF config.json keys in brackets; workloads/inputs/huggingface/config.py reads them).
    kv_channels: int = 0  # width of one attention head [head_dim]; 0 = hidden_size / num_heads
    sliding_window: int = 0  # keys a query attends to in the window layers [sliding_window]; 0 = none
    window_layers: tuple[int, ...] = ()  # layers with sliding-window attention [layer_types]
    mlp_only_layers: tuple[int, ...] = ()  # dense layers beside the leading ones [mlp_only_layers, moe freq]
    shared_expert_ffn_size: int = 0  # total width of the shared experts; 0 = num_shared x expert_ffn_size
    mtp_layers: int = 0  # multi-token prediction modules after the last layer [num_nextn_predict_layers]
    # the MTP depths run one module's weights again (Megatron-LM --mtp-use-repeated-layer: Nemotron 3's recipes)
    mtp_repeated_layer: bool = False
    # Per-head RMSNorm of the queries and keys after the QKV projection (Qwen3: HF modeling_qwen3_moe
    # Qwen3MoeAttention q_norm / k_norm; Megatron --qk-layernorm) [model_type qwen3, qwen3_moe].
    qk_layernorm: bool = False
    # Rotary position embedding of the queries and keys [rope_theta]: GQA attention runs its kernels
    # (workloads/recipes/layers.py qk_steps); MLA's decoupled RoPE has none yet. Off for M1: the paper does not say
    # how it encodes positions.
    rope: bool = False
    # GPT-OSS's clamped SwiGLU: the gate clamped to <= limit and the linear half to [-limit, limit] before the
    # activation [swiglu_limit]; 0 = no clamp (workloads/recipes/expert_kernels.py).
    expert_act_clamp: float = 0.0
    # Biases on the expert GEMMs (HF GptOssExperts gate_up_proj_bias / down_proj_bias; Megatron-Bridge
    # gpt_oss_bridge.py add_bias_linear) [model_type gpt_oss].
    expert_bias: bool = False
    # Megatron-Core applies RoPE unfused (rope_utils.apply_rotary_pos_emb at core_v0.17.0: TE's fused RoPE takes
    # no mscale) when YaRN's concentration factor is not 1: GPT-OSS, whose Megatron-Bridge config sets
    # yarn_rotary_scaling_factor 32 with yarn_mscale None, so 0.1 ln 32 + 1 = 1.35 (gpt_oss_bridge.py, v0.4.2).
    rope_unfused: bool = False
    # The activation of every FFN (dense layers, shared and routed experts): "swiglu", a gated linear unit whose FC1
    # computes the gate and the linear halves (2F wide: three h x F matrices; Megatron --swiglu, HF hidden_act silu);
    # "gelu", "squared_relu" or "relu", a plain MLP whose FC1 is F wide (two matrices): Megatron's GeLU default
    # without --swiglu (GPT-3), relu(x)^2 under --squared-relu (Nemotron-4, HF hidden_act relu2), OPT's ReLU. Megatron-Core's MLP sizes
    # FC1's output ffn_hidden_size * 2 if gated_linear_unit, else ffn_hidden_size (megatron/core/transformer/mlp.py
    # MLP.__init__); its FLOPs count 3 FFN GEMMs with SwiGLU, 2 without (megatron/training/training.py
    # num_floating_point_operations, gated_linear_multiplier).
    ffn_activation: str = "swiglu"
    # Dropout probabilities in training (Megatron-LM --hidden-dropout, --attention-dropout; HF config.json
    # hidden_dropout, attention_dropout; NeMo's GPT-3 0.1): the hidden one after the attention and the FFN
    # (Megatron-Core's bias-dropout-add, workloads/recipes/residual.py), the attention one inside the attention kernel.
    hidden_dropout: float = 0.0
    attention_dropout: float = 0.0
    # A hybrid model (Nemotron-H, Nemotron 3) has one block per layer, written as Megatron-LM's
    # --hybrid-override-pattern and HF's hybrid_override_pattern write it: "M" a Mamba-2 mixer, "*" attention, "-" a
    # dense MLP, "E" an MoE FFN (megatron/core/models/hybrid/hybrid_layer_allocation.py Symbols); "" every layer
    # attention and an FFN. Its MTP modules (mtp_layers) are attention and an MoE FFN each: Megatron's
    # --mtp-hybrid-override-pattern "*E", one transformer layer.
    hybrid_pattern: str = ""
    # A latent MoE (Nemotron 3 Super and Ultra; Megatron-LM --moe-latent-size, HF moe_latent_size): the MoE layer
    # projects its tokens from the hidden width down to this one before the dispatch and back up after the combine, so
    # the routed experts and the all-to-alls run at it (megatron/core/transformer/moe/moe_layer.py fc1_latent_proj,
    # fc2_latent_proj, duplicated over TP; the shared experts stay at the hidden width); 0 = none.
    moe_latent_size: int = 0
    # The Mamba-2 mixer (megatron/core/ssm/mamba_mixer.py MambaMixer; HF NemotronH mamba_* keys): heads of
    # mamba_head_dim channels (d_inner = heads x head dim), its state size, the B / C groups, the causal conv's width
    # and the scan's chunk length.
    mamba_heads: int = 0
    mamba_head_dim: int = 64
    mamba_state_dim: int = 128
    mamba_groups: int = 8
    mamba_conv_kernel: int = 4
    mamba_chunk: int = 128
    # A Gated DeltaNet mixer ("G" in hybrid_pattern: Qwen3-Next, Qwen3.5 / 3.6; HF linear_* keys, Megatron-LM
    # --linear-num-key-heads etc.; megatron/core/ssm/gated_delta_net/gdn.py at d98e8a64): key heads (queries as many)
    # of gdn_key_head_dim, value heads of gdn_value_head_dim, the causal conv's width.
    gdn_key_heads: int = 0
    gdn_value_heads: int = 0
    gdn_key_head_dim: int = 128
    gdn_value_head_dim: int = 128
    gdn_conv_kernel: int = 4
    # A sigmoid gate on the attention output before its projection (Qwen3-Next's full attention, HF attn_output_gate;
    # Megatron-LM --attention-output-gate, megatron/core/transformer/attention.py _apply_output_gate): the query
    # projection twice as wide.
    attention_output_gate: bool = False
    # DeepSeek-V4's hybrid attention (attention "dsv4"; HF model_type deepseek_v4, workloads/recipes/dsv4_attention.py):
    # MLA's low-rank query, one shared key-value head of kv_channels, a window of sliding_window keys in every layer
    # and, per layer [compress_ratios], none (0), or the keys compressed m to one: all of them (HCA) or, at m = 4, the
    # index_topk an indexer of index_heads x index_head_dim picks (CSA); the output projected in o_groups groups to
    # o_lora_rank each, then to the hidden width.
    o_lora_rank: int = 0
    o_groups: int = 0
    compress_ratios: tuple[int, ...] = ()  # per layer, then per MTP module
    index_heads: int = 0
    index_head_dim: int = 0
    index_topk: int = 0
    # DeepSeek-V3.2's sparse attention (DSA) under MLA [index_topk > 0; Megatron --experimental-attention-variant dsa]:
    # every query attends the index_topk keys its indexer picks; the layers whose number (from 1) minus
    # max(index_skip_offset, 1) is a multiple of index_topk_freq run the indexer, the others reuse the last top-k
    # (megatron/core/transformer/experimental_attention_variant/dsa.py is_dsa_skip_topk_layer at d98e8a64).
    index_topk_freq: int = 1
    index_skip_offset: int = 0
    # Manifold-constrained hyper-connections (mHC; Megatron-LM --enable-mhc-connections --mhc-num-residual-streams,
    # HF hc_mult): the residual stream is this many copies of the hidden state, mixed around every attention and FFN
    # block by per-token weights projected with Sinkhorn-Knopp iterations (megatron/core/transformer/
    # hyper_connection.py at d98e8a64); 0 = a plain residual stream.
    residual_streams: int = 0
    sinkhorn_iterations: int = 20

    def __post_init__(self) -> None:
        """Check types and positivity; raise ConfigError naming the field."""
        for name in ("window_layers", "mlp_only_layers", "compress_ratios"):  # YAML gives lists; keep it hashable
            if isinstance(getattr(self, name), list):
                object.__setattr__(self, name, tuple(getattr(self, name)))
        check_types("model", self)
        check_limit("model.num_layers", "layers", self.num_layers, "layers")
        for name in field_names(type(self)):
            value = getattr(self, name)
            if name in _OPTIONAL_FIELDS:
                if any(item < 0 for item in value) if isinstance(value, tuple) else value < 0:
                    raise ConfigError(f"model.{name}", f"must be >= 0, got {value}")
                continue
            if isinstance(value, int) and value <= 0:
                raise ConfigError(f"model.{name}", f"must be a positive integer, got {value}")
        if not self.kv_channels and self.hidden_size % self.num_heads:
            raise ConfigError("model.num_heads", f"must divide hidden_size={self.hidden_size} (or give kv_channels)")
        if self.num_heads % self.num_kv_heads:
            raise ConfigError("model.num_kv_heads", f"must divide num_heads={self.num_heads}")
        if self.top_k > self.num_experts:
            raise ConfigError("model.top_k", f"must be <= num_experts={self.num_experts}")
        check_extensions(self)

    def layer_kind(self, layer: int) -> LayerKind:
        """What sets layer ``layer``'s recipe: a dense or MoE FFN, its attention window, a hybrid model's block."""
        if self.hybrid_pattern:
            symbol = self.hybrid_pattern[layer]
            return LayerKind(symbol != "E", 0, HYBRID_BLOCKS[symbol])
        dense = layer < self.num_dense_layers or layer in self.mlp_only_layers or self.num_experts == 0
        if self.attention == "dsv4":  # every layer has the window; its compression from compress_ratios
            return LayerKind(dense, self.sliding_window, compress=self.compress_ratio(layer))
        window = self.sliding_window if layer in self.window_layers else 0
        return LayerKind(dense, window, indexer=self.dsa and self.runs_indexer(layer))

    @property
    def dsa(self) -> bool:
        """Whether MLA runs DeepSeek-V3.2's sparse attention (index_topk keys per query)."""
        return self.attention == "mla" and self.index_topk > 0

    def runs_indexer(self, layer: int) -> bool:
        """Whether DSA layer ``layer`` (from 0) runs its indexer, not an earlier layer's top-k (Megatron's
        is_dsa_skip_topk_layer); an MTP module's (``layer`` num_layers) does."""
        offset = max(self.index_skip_offset, 1)
        return layer >= self.num_layers or max(layer + 1 - offset, 0) % self.index_topk_freq == 0

    def mtp_layer_kind(self) -> LayerKind:
        """The kind of a multi-token-prediction module's layer: an MoE (or dense) layer with full attention; under
        DeepSeek-V4's attention its window and the compression listed after the layers' (HF compress_ratios)."""
        if self.attention == "dsv4":
            return LayerKind(self.num_experts == 0, self.sliding_window, compress=self.compress_ratio(self.num_layers))
        return LayerKind(self.num_experts == 0, 0, indexer=self.dsa)

    def compress_ratio(self, layer: int) -> int:
        """DeepSeek-V4's compression of layer ``layer``'s keys (0: the window alone; an MTP module's index follows
        the layers', 0 where the list stops)."""
        return self.compress_ratios[layer] if layer < len(self.compress_ratios) else 0

    @property
    def mamba_inner(self) -> int:
        """The Mamba-2 mixer's inner width d_inner: heads x head dim."""
        return self.mamba_heads * self.mamba_head_dim

    @property
    def mamba_in_proj_width(self) -> int:
        """in_proj's output: z and x (d_inner each), B and C (groups x state each), dt (one per head)."""
        return 2 * self.mamba_inner + 2 * self.mamba_groups * self.mamba_state_dim + self.mamba_heads

    @property
    def mamba_conv_channels(self) -> int:
        """The causal conv's channels: x, B and C."""
        return self.mamba_inner + 2 * self.mamba_groups * self.mamba_state_dim

    @property
    def mamba_params(self) -> int:
        """One Mamba-2 mixer: in_proj, conv weights and bias, A, D, dt bias per head, gated norm, out_proj."""
        h, inner, conv = self.hidden_size, self.mamba_inner, self.mamba_conv_channels * (self.mamba_conv_kernel + 1)
        return h * self.mamba_in_proj_width + conv + 3 * self.mamba_heads + inner + inner * h

    @property
    def routed_width(self) -> int:
        """The width the routed experts and the dispatch run at: a latent MoE's, else the hidden size."""
        return self.moe_latent_size or self.hidden_size

    @property
    def gated_ffn(self) -> bool:
        """Whether the FFNs are gated linear units (FC1 2F wide, three matrices), as SwiGLU is."""
        return self.ffn_activation == "swiglu"

    @property
    def fc1_widths(self) -> int:
        """FC1's output width in FFN widths: a gated unit's gate and linear halves, a plain MLP's one."""
        return 2 if self.gated_ffn else 1

    @property
    def ffn_matrices(self) -> int:
        """h x F matrices per FFN: three for a gated linear unit, two for a plain MLP."""
        return 3 if self.gated_ffn else 2

    @property
    def head_dim(self) -> int:
        return self.kv_channels or self.hidden_size // self.num_heads

    @property
    def q_width(self) -> int:
        """Query (and attention output) width: heads x head_dim (= hidden_size unless kv_channels is set)."""
        return self.num_heads * self.head_dim

    @property
    def q_per_kv(self) -> int:
        """The paper's m: query heads per key/value head."""
        return self.num_heads // self.num_kv_heads

    @property
    def qkv_width(self) -> int:
        """Output width of the fused QKV projection: h (1 + 2/m)."""
        return self.q_width + 2 * self.num_kv_heads * self.head_dim

    @property
    def attention_params(self) -> int:
        """QKV and output projections of one layer (MLA: its down/up projections and norms)."""
        if self.attention == "mla":
            return mla_params(self)
        if self.attention == "dsv4":
            return dsv4_params(self)
        gate = self.q_width if self.attention_output_gate else 0  # the output gate's half of the query projection
        return self.hidden_size * (self.qkv_width + gate) + self.q_width * self.hidden_size

    @property
    def expert_params(self) -> int:
        """One expert: three routed-width x h_ffn matrices (SwiGLU), two for a plain MLP."""
        return self.ffn_matrices * self.routed_width * self.expert_ffn_size

    @property
    def embedding_params(self) -> int:
        """Input embedding and output head: one matrix if tied, else two."""
        return (1 if self.tied_embeddings else 2) * self.vocab_size * self.hidden_size

    @property
    def moe_layers(self) -> int:
        return sum(not self.layer_kind(i).dense for i in range(self.num_layers))

    def blocks(self, block: str) -> int:
        """Layers of a hybrid model holding ``block`` ("mamba", "gdn", "attention", "mlp", "moe")."""
        return sum(self.layer_kind(i).block == block for i in range(self.num_layers))

    @property
    def shared_ffn_size(self) -> int:
        """Total width of the shared experts (DeepSeekMoE: each as wide as a routed expert)."""
        return self.shared_expert_ffn_size or self.num_shared_experts * self.expert_ffn_size

    @property
    def shared_params(self) -> int:
        """Shared experts of one MoE layer: an FFN of width shared_ffn_size."""
        return self.ffn_matrices * self.hidden_size * self.shared_ffn_size

    def layer_parts(self, dense: bool, block: str = "") -> LayerParams:
        """The weights of one (dense or MoE) layer by part: the one parameter model that the parameter
        counts, the 6N FLOPs, memory and DP sync (workloads.graph.step.stage_param_groups) all use. A hybrid
        model's layer (``block``) holds one of the parts and one norm; a Mamba-2 or GDN mixer counts as attention."""
        h = self.hidden_size
        if block in ("mamba", "gdn"):
            return LayerParams(self.mamba_params if block == "mamba" else gdn_params(self), 0, 0, 0, 0, 0, h)
        if block == "attention":
            return LayerParams(self.attention_params, 0, 0, 0, 0, 0, h)
        if block:  # "mlp" or "moe": the FFN's weights, one norm
            return self.layer_parts(block == "mlp")._replace(attention=0, norms=h)
        norms = 2 * h + 2 * self.mhc_params  # each block's norm, and its mHC mapping projection (replicated)
        if dense:
            return LayerParams(self.attention_params, self.ffn_matrices * h * self.dense_ffn_size, 0, 0, 0, 0, norms)
        return LayerParams(
            self.attention_params,
            0,
            self.shared_params,
            self.num_experts * self.expert_params,
            self.top_k * self.expert_params,
            h * self.num_experts,
            norms,
            2 * h * self.moe_latent_size,
        )

    @property
    def mhc_params(self) -> int:
        """One block's mHC weights: the projection of the n streams to the n^2 + 2n mixing logits, and its bias
        (megatron/core/transformer/hyper_connection.py mapping_proj, bias; 0 without mHC)."""
        n = self.residual_streams
        return (n * n + 2 * n) * (n * self.hidden_size + 1) if n > 1 else 0

    def _over_layers(self, part) -> int:
        kinds = [self.layer_kind(i) for i in range(self.num_layers)]
        return sum(part(self.layer_parts(kind.dense, kind.block)) for kind in kinds)

    @property
    def mtp_params(self) -> int:
        """Multi-token prediction modules (DeepSeek-V3 Sec. 2.2): 2 norms, the 2h -> h projection and one
        MoE layer each; the embedding and output head are shared. Published totals leave them out."""
        h = self.hidden_size
        return self.mtp_weight_sets * (2 * h + 2 * h * h + self.layer_parts(self.num_experts == 0).total())

    @property
    def mtp_weight_sets(self) -> int:
        """MTP modules with weights of their own: one for every depth, or one shared by all (mtp_repeated_layer)."""
        return min(self.mtp_layers, 1) if self.mtp_repeated_layer else self.mtp_layers

    @property
    def total_params(self) -> int:
        return self._over_layers(LayerParams.total) + self.embedding_params

    @property
    def active_params(self) -> int:
        """Parameters one token uses: attention, top-k and shared experts, dense FFNs, embeddings (no norms or router)."""
        return self._over_layers(LayerParams.active) + self.embedding_params

    def with_(self, **changes: object) -> ModelSpec:
        return replace(self, **changes)


# Fields that may be 0 (or empty, or False): every other number must be positive
_OPTIONAL_NAMES = (
    "kv_lora_rank q_lora_rank qk_rope_head_dim qk_nope_head_dim v_head_dim num_dense_layers dense_ffn_size "
    "num_shared_experts tied_embeddings num_experts top_k expert_ffn_size kv_channels sliding_window window_layers "
    "mlp_only_layers shared_expert_ffn_size mtp_layers mtp_repeated_layer qk_layernorm rope expert_act_clamp "
    "expert_bias rope_unfused mamba_heads moe_latent_size o_lora_rank o_groups compress_ratios index_heads "
    "index_head_dim index_topk index_skip_offset residual_streams gdn_key_heads gdn_value_heads attention_output_gate "
    "hidden_dropout attention_dropout"
)
_OPTIONAL_FIELDS = frozenset(_OPTIONAL_NAMES.split())
_T2 = "MegaScale-MoE Table 2"
MODEL_PRESETS: dict[str, ModelSpec] = {
    # M1; vocabulary 65,536 [paper Sec. 6]
    "paper-352b": ModelSpec("paper-352b", 60, 4096, 32, 8, 14336, 32, 3, 65536, _T2 + " (M1)"),
    # M2-M6: vocabularies are not in the paper; taken from the models' public configs (so is Mixtral's RoPE,
    # rope_theta in mistralai's config.json).
    "mixtral-8x7b": ModelSpec("mixtral-8x7b", 32, 4096, 32, 8, 14336, 8, 2, 32000, _T2 + " (M2)", rope=True),
    "mixtral-8x22b": ModelSpec("mixtral-8x22b", 56, 6144, 48, 8, 16384, 8, 2, 32768, _T2 + " (M3)", rope=True),
    "hunyuan-large": ModelSpec("hunyuan-large", 64, 6400, 80, 8, 18304, 16, 1, 128512, _T2 + " (M4)"),
    "phi-3.5-moe": ModelSpec("phi-3.5-moe", 32, 4096, 32, 8, 6400, 16, 2, 32064, _T2 + " (M5)"),
    "deepseekmoe": ModelSpec("deepseekmoe", 28, 2048, 16, 16, 1408, 64, 6, 102400, _T2 + " (M6)"),
    # DeepSeek-V3 technical report (arXiv 2412.19437) Sec. 4.2: 61 layers, h 7168, 128 heads, MLA with
    # d_c 512, d_c' 1536, d_h 128, d_h^R 64; first 3 layers dense (width 18432, HF config), then 1 shared
    # + 256 routed experts of width 2048, top-8; vocabulary 129,280 (HF config.json); 671B / 37B params.
    "deepseek-v3": ModelSpec(
        "deepseek-v3",
        61,
        7168,
        128,
        128,
        2048,
        256,
        8,
        129280,
        "DeepSeek-V3 report Sec. 4.2; deepseek-ai/DeepSeek-V3 config.json",
        attention="mla",
        kv_lora_rank=512,
        q_lora_rank=1536,
        qk_rope_head_dim=64,
        qk_nope_head_dim=128,
        v_head_dim=128,
        num_dense_layers=3,
        dense_ffn_size=18432,
        num_shared_experts=1,
        rope=True,
    ),
}


def model_preset(name: str) -> ModelSpec:
    """The preset called ``name``, or a ConfigError that lists the choices."""
    return lookup_preset("model", MODEL_PRESETS, name)
