"""Model presets: the MoE transformers of MegaScale-MoE Table 2, as data."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from topologies.errors import ConfigError
from workloads.fieldtypes import check_types


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only MoE transformer: every layer is attention (GQA) + a SwiGLU MoE FFN."""

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

    def __post_init__(self) -> None:
        """Check types and positivity; raise ConfigError naming the field."""
        check_types("model", self)
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, int) and value <= 0:
                raise ConfigError(f"model.{f.name}", f"must be a positive integer, got {value}")
        if self.hidden_size % self.num_heads:
            raise ConfigError("model.num_heads", f"must divide hidden_size={self.hidden_size}")
        if self.num_heads % self.num_kv_heads:
            raise ConfigError("model.num_kv_heads", f"must divide num_heads={self.num_heads}")
        if self.top_k > self.num_experts:
            raise ConfigError("model.top_k", f"must be <= num_experts={self.num_experts}")

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    @property
    def q_per_kv(self) -> int:
        """The paper's m: query heads per key/value head."""
        return self.num_heads // self.num_kv_heads

    @property
    def qkv_width(self) -> int:
        """Output width of the fused QKV projection: h (1 + 2/m)."""
        return self.hidden_size + 2 * self.num_kv_heads * self.head_dim

    @property
    def attention_params(self) -> int:
        """QKV and output projections of one layer."""
        return self.hidden_size * self.qkv_width + self.hidden_size * self.hidden_size

    @property
    def expert_params(self) -> int:
        """One SwiGLU expert: three h x h_ffn matrices."""
        return 3 * self.hidden_size * self.expert_ffn_size

    @property
    def layer_params(self) -> int:
        router = self.hidden_size * self.num_experts
        norms = 2 * self.hidden_size
        return self.attention_params + self.num_experts * self.expert_params + router + norms

    @property
    def total_params(self) -> int:
        embeddings = 2 * self.vocab_size * self.hidden_size  # untied input and output embeddings
        return self.num_layers * self.layer_params + embeddings

    @property
    def active_params(self) -> int:
        per_layer = self.attention_params + self.top_k * self.expert_params
        return self.num_layers * per_layer + 2 * self.vocab_size * self.hidden_size

    def with_(self, **changes: object) -> ModelSpec:
        return replace(self, **changes)


_T2 = "MegaScale-MoE Table 2"
MODEL_PRESETS: dict[str, ModelSpec] = {
    # M1; vocabulary 65,536 [paper Sec. 6]
    "paper-352b": ModelSpec("paper-352b", 60, 4096, 32, 8, 14336, 32, 3, 65536, _T2 + " (M1)"),
    # M2-M6: vocabularies are not in the paper; taken from the models' public configs.
    "mixtral-8x7b": ModelSpec("mixtral-8x7b", 32, 4096, 32, 8, 14336, 8, 2, 32000, _T2 + " (M2)"),
    "mixtral-8x22b": ModelSpec("mixtral-8x22b", 56, 6144, 48, 8, 16384, 8, 2, 32768, _T2 + " (M3)"),
    "hunyuan-large": ModelSpec("hunyuan-large", 64, 6400, 80, 8, 18304, 16, 1, 128512, _T2 + " (M4)"),
    "phi-3.5-moe": ModelSpec("phi-3.5-moe", 32, 4096, 32, 8, 6400, 16, 2, 32064, _T2 + " (M5)"),
    "deepseekmoe": ModelSpec("deepseekmoe", 28, 2048, 16, 16, 1408, 64, 6, 102400, _T2 + " (M6)"),
}


def model_preset(name: str) -> ModelSpec:
    """The preset called ``name``, or a ConfigError that lists the choices."""
    try:
        return MODEL_PRESETS[name]
    except KeyError:
        choices = ", ".join(sorted(MODEL_PRESETS))
        raise ConfigError("model", f"unknown preset '{name}'; choose from {choices}") from None
