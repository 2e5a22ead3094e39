"""A NeMo AutoModel recipe YAML (its examples/benchmark/configs and LLM pre-training recipes) as the Megatron-LM
flags of its Megatron-Core equivalent, the model it names and its GPU count: the translation docs/modelling.md ("Jobs
of other stacks") gives, and the validation corpus's ``automodel-*`` cases are written in.

moesim models Megatron-Core's layers, so an AutoModel job runs as their equivalent (notes say where): FSDP2 as Megatron
FSDP sharding optimizer state, gradients and weights; its DeepEP and HybridEP experts as the flex dispatcher with that
backend, its other experts (all-gather and reduce-scatter, nemo_automodel/components/moe/layers.py GroupedExperts) as
the allgather dispatcher; the fake balanced gate as ``routing: consecutive``; activation checkpointing of every block
as full recomputation; torch.distributed.pipelining's schedules as Megatron's.

Two generations of the YAML are read: the 2025 one (``distributed._target_: ...FSDP2Manager``, ``autopipeline:``,
``parallelizer.activation_checkpointing``, ``model.backend.enable_deepep``) and today's (NVIDIA-NeMo/Automodel@36044ad,
nemo_automodel/components/distributed/config.py and models/common/utils.py BackendConfig: ``distributed.strategy``,
``distributed.pipeline:``, ``distributed.activation_checkpointing``, ``model.backend.dispatcher`` and ``experts``,
whose defaults in NVIDIA's container are DeepEP and torch._grouped_mm). The virtual stages follow AutoModel's
``calculate_virtual_stages`` (nemo_automodel/components/distributed/pipelining/functional.py): ceil(layers /
layers_per_stage) stages rounded to a multiple of pp as round_virtual_stages_to_pp_multiple says, two a rank for a
looped schedule without layers_per_stage. Its pipeline runs one local batch a flush and accumulates gradients over
flushes (recipes/llm/train_ft.py: ``pp_batch_size = local_batch_size``), so a pipelined step of several flushes is
simulated as one flush, whose tokens per second per GPU are the step's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from topologies.errors import ConfigError, short_repr
from workloads.inputs.yaml_files import read_yaml

# torch.distributed.pipelining schedule names (lower case, as AutoModel's pp_schedule takes them) -> moesim's schedule
SCHEDULES = {"1f1b": "1f1b", "interleaved1f1b": "interleaved", "dualpipev": "dualpipev"}
FSDP2, DDP = "FSDP2Manager", "DDPManager"
# distributed.strategy (today's key) -> the manager class the 2025 key named (config.py _STRATEGY_MAP)
STRATEGIES = {"fsdp2": FSDP2, "megatron_fsdp": FSDP2, "megatron-fsdp": FSDP2, "mfsdp": FSDP2, "ddp": DDP}
FLEX = ("deepep", "hybridep")  # model.backend.dispatcher values that are Megatron's flex dispatcher backends
GROUPED_EXPERTS = ("te", "gmm", "torch_mm", "torch_mm_mxfp8")  # BackendConfig.experts that run grouped GEMMs
# model.backend.attn -> Megatron's --attention-backend, or None for TE's DotProductAttention (the default)
ATTENTION = {"te": None, "cudnn": "fused", "sdpa": "flash", "flex": "flash", "eager": "unfused"}
FP8_RECIPES = {  # TEFp8Config recipe -> Megatron flags (TE's Float8BlockScaling is E4M3; current scaling HYBRID)
    "block": "--fp8-format e4m3 --fp8-recipe blockwise",
    "current": "--fp8-format hybrid --fp8-recipe tensorwise",
    "mxfp8": "--fp8-format e4m3 --fp8-recipe mxfp8",  # TE's MXFP8BlockScaling (BackendConfig TEFp8Config)
}


class _Reads:
    """Typed reads of the recipe's nested keys; errors name the key path and the file."""

    def __init__(self, data: dict, origin: str) -> None:
        self.data, self.origin = data, origin

    def get(self, path: str, default: Any = None) -> Any:
        node: Any = self.data
        for key in path.split("."):
            if not isinstance(node, dict) or node.get(key) is None:
                return default
            node = node[key]
        return node

    def int(self, path: str, default: int | None = None, minimum: int = 1) -> int:
        value = self.get(path, default)
        if value is None:
            raise ConfigError(f"automodel.{path}", f"missing in {self.origin}")
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ConfigError(f"automodel.{path}", f"must be an integer >= {minimum}, got {short_repr(value)}")
        return value

    def bool(self, path: str, default: bool = False) -> bool:
        value = self.get(path, default)
        if not isinstance(value, bool):
            raise ConfigError(f"automodel.{path}", f"must be true or false, got {short_repr(value)}")
        return value

    def first(self, *paths: str) -> str:
        """The first of ``paths`` the recipe sets (the last where it sets none): a key that moved between versions."""
        return next((path for path in paths if self.get(path) is not None), paths[-1])

    def word(self, path: str, default: str) -> str:
        value = self.get(path, default)
        if not isinstance(value, str):
            raise ConfigError(f"automodel.{path}", f"must be a string, got {short_repr(value)}")
        return value


@dataclass(frozen=True)
class AutoModelRecipe:
    """What an AutoModel YAML sets, read once; ``megatron_args`` turns it into flags for a model and GPU count."""

    model: str  # model.config.pretrained_model_name_or_path (or model.pretrained_model_name_or_path)
    nodes: int | None  # ci.nodes (what the recipe's CI launches), else benchmark.num_nodes
    reads: _Reads

    def _pipeline(self, key: str) -> str:
        """The path of a pipeline key: distributed.pipeline.<key> today, autopipeline.<key> in 2025."""
        return self.reads.first(f"distributed.pipeline.{key}", f"autopipeline.{key}")

    @property
    def fake_balanced_gate(self) -> bool:
        return self.reads.bool("model.backend.fake_balanced_gate")

    @property
    def precision_sets(self) -> tuple[str, ...]:
        """moesim layout settings (``--set``) for the weights' dtype: AutoModel builds the model in BF16 unless
        model.torch_dtype says otherwise (auto_model.py from_config / from_pretrained: "auto" is bfloat16), and its
        torch.optim optimizer then steps those BF16 weights, its moments in BF16, with no FP32 master copy; with
        FP32 weights (the pattern its FSDP2Config docs name for Megatron-style master weights) Megatron's defaults;
        Transformer Engine's FusedAdam keeps FP32 moments (master_weights False, exp_avg_dtype float32 by default)."""
        dtype = str(self.reads.get("model.torch_dtype", "auto")).lower().removeprefix("torch.")
        if dtype in ("float32", "fp32"):
            return ()
        if "FusedAdam" in str(self.reads.get("optimizer._target_", "")):  # TE's: FP32 moments, no master by default
            return ("main_params_dtype=none",)
        return ("main_params_dtype=none", "exp_avg_dtype=bf16", "exp_avg_sq_dtype=bf16")

    @property
    def schedule(self) -> str:
        """moesim's schedule for the pipeline's pp_schedule (1F1B where the job has no pipeline)."""
        if self.reads.int("distributed.pp_size", 1) == 1:
            return "1f1b"
        path = self._pipeline("pp_schedule")
        name = self.reads.word(path, "1f1b").lower()
        if name not in SCHEDULES:
            known = ", ".join(SCHEDULES)
            raise ConfigError(f"automodel.{path}", f"{name!r} is not simulated; moesim runs {known}")
        return SCHEDULES[name]

    def _seq_len(self, given: int | None) -> int:
        """dataset.seq_len (or seq_length), else ``given`` (moesim run --seq-len)."""
        found = self.reads.get("dataset.seq_len", self.reads.get("dataset.seq_length"))
        if found is None and given is None:
            raise ConfigError("automodel.dataset.seq_len", f"missing in {self.reads.origin}; give --seq-len")
        return self.reads.int("dataset.seq_len", found) if found is not None else given

    def virtual_stages(self, num_layers: int) -> int:
        """Stages per pipeline rank, as AutoModel's calculate_virtual_stages sizes them."""
        r, pp = self.reads, self.reads.int("distributed.pp_size", 1)
        if self.schedule != "interleaved":  # DualPipeV's two stages a rank are its schedule's own
            return 1
        where, rounded = self._pipeline("layers_per_stage"), self._pipeline("round_virtual_stages_to_pp_multiple")
        per_stage = r.get(where)
        if per_stage is None:
            return 2
        stages = math.ceil(num_layers / r.int(where))
        rounding = r.word(rounded, "")
        if stages % pp:
            if rounding not in ("up", "down"):
                rule = f"{stages} stages ({num_layers} layers / {per_stage}) must be a multiple of pp {pp}"
                raise ConfigError(f"automodel.{where}", f"{rule}; or set {rounded} to up or down")
            stages += pp - stages % pp if rounding == "up" else -(stages % pp)
        if stages < pp or stages > num_layers:
            raise ConfigError(f"automodel.{where}", f"{stages} stages for {num_layers} layers")
        return stages // pp

    def megatron_args(
        self, num_layers: int, gated: bool, tied: bool, gpus: int, experts: bool = True, seq_len: int | None = None
    ) -> tuple[str, tuple[str, ...]]:
        """The Megatron-LM flags of this job on ``gpus`` GPUs for a model of ``num_layers`` layers (``gated``: a
        SwiGLU MLP; ``tied``: the head tied to the embedding; ``experts``: an MoE model; ``seq_len``: the sequence
        where the recipe's dataset gives none, as fine-tuning recipes' datasets do not), and the notes on what is
        simulated otherwise."""
        r, notes = self.reads, []
        tp, cp, pp = (r.int(f"distributed.{k}_size", 1) for k in ("tp", "cp", "pp"))
        ep, replicas = r.int("distributed.ep_size", 1), r.int("distributed.dp_replicate_size", 1)
        if gpus % (tp * cp * pp):
            raise ConfigError("automodel.distributed", f"tp x cp x pp = {tp * cp * pp} does not divide {gpus} GPUs")
        dp = gpus // (tp * cp * pp)
        batch, local = r.int("step_scheduler.global_batch_size"), r.int("step_scheduler.local_batch_size")
        if batch % (dp * local):
            rule = f"must be a multiple of {dp} data-parallel ranks x local_batch_size {local}"
            raise ConfigError("automodel.step_scheduler.global_batch_size", f"{batch} {rule}")
        micro = r.int(self._pipeline("pp_microbatch_size"), 1) if pp > 1 else local
        if pp > 1 and batch > dp * local:
            notes.append(
                f"AutoModel runs the step's {batch} sequences as {batch // (dp * local)} pipeline flushes of {dp * local}"
                f" (pp_batch_size = local_batch_size {local}): simulated as one flush, whose tokens/s per GPU are the step's"
            )
            batch = dp * local
        flags = [
            f"--tensor-model-parallel-size {tp} --pipeline-model-parallel-size {pp} --context-parallel-size {cp}",
            f"--micro-batch-size {micro} --global-batch-size {batch}",
            f"--seq-length {self._seq_len(seq_len)} --bf16",
        ]
        flags += ["--sequence-parallel"] if tp > 1 and r.bool("distributed.sequence_parallel") else []
        if (vp := self.virtual_stages(num_layers)) > 1:
            flags.append(f"--pipeline-model-parallel-layout {_stage_layout(num_layers, pp * vp)}")
        flags += _data_parallel(_manager(r), replicas, notes)
        flags += ["--swiglu"] if gated else []
        flags += [] if tied else ["--untie-embeddings-and-output-weights"]
        flags += ["--mtp-num-layers 0"]  # AutoModel's models train no MTP module
        flags += _recompute(r, experts, notes)
        flags += [f"--expert-model-parallel-size {ep}", *_moe(r, notes)] if experts else []
        recipe = r.get("model.backend.te_fp8.recipe", r.get("model.backend.te_fp8"))
        if recipe is not None:
            if recipe not in FP8_RECIPES:
                raise ConfigError(
                    "automodel.model.backend.te_fp8.recipe", f"{short_repr(recipe)}: {', '.join(FP8_RECIPES)}"
                )
            flags.append(FP8_RECIPES[recipe])
        flags += _attention(r, notes)
        launched, declared = r.get("ci.nodes"), r.get("benchmark.num_nodes")
        if None not in (launched, declared) and launched != declared:
            notes.append(f"ci.nodes {launched} and benchmark.num_nodes {declared} differ: the GPUs are ci.nodes' nodes")
        return " ".join(flags), tuple(notes)


def _stage_layout(num_layers: int, stages: int) -> str:
    """AutoModel's split of the layers over its stages (functional.py generate_hf_model_fqn_per_model_part: each stage
    num_layers // stages layers, the first num_layers % stages one more; the embedding on the first, the head on the
    last) as Megatron's --pipeline-model-parallel-layout, stages in model order."""
    base, extra = divmod(num_layers, stages)
    blocks = ["t" * (base + (stage < extra)) for stage in range(stages)]
    return "'" + "|".join(["E" + blocks[0], *blocks[1:-1], blocks[-1] + "L"]) + "'"


def _manager(r: _Reads) -> str:
    """The data-parallel manager: distributed.strategy (today) or the class distributed._target_ named (2025)."""
    if r.get("distributed.strategy") is None:
        return r.word("distributed._target_", FSDP2).rpartition(".")[2]
    strategy = r.word("distributed.strategy", "fsdp2").lower()
    if strategy not in STRATEGIES:
        raise ConfigError("automodel.distributed.strategy", f"{strategy!r}: moesim reads {', '.join(STRATEGIES)}")
    return STRATEGIES[strategy]


def _data_parallel(manager: str, replicas: int, notes: list[str]) -> list[str]:
    """FSDP2 or Megatron FSDP (HSDP across dp_replicate_size replicas) as Megatron FSDP; DDP as Megatron's DDP."""
    if manager == DDP:
        return []
    if manager != FSDP2:
        raise ConfigError("automodel.distributed._target_", f"{manager!r}: moesim reads {FSDP2} and {DDP}")
    notes.append(
        "FSDP2 simulated as Megatron FSDP sharding optimizer state, gradients and weights (optim_grads_params)"
    )
    flags = ["--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params"]
    if replicas > 1:
        flags.append(f"--num-distributed-optimizer-instances {replicas} --outer-dp-sharding-strategy no_shard")
    return flags


def _recompute(r: _Reads, experts: bool, notes: list[str]) -> list[str]:
    """Activation checkpointing: true or "full" wraps every block (full recomputation); "selective" is TorchTitan's
    policy (activation_checkpointing.py: saves attention, every other matmul and the collectives, recomputes the
    cheap ops), simulated as Megatron's selective recomputation of those cheap ops' modules."""
    path = r.first("distributed.activation_checkpointing", "parallelizer.activation_checkpointing")
    value = r.get(path, False)
    mode = {True: "full", False: "none"}.get(value) if isinstance(value, bool) else str(value).lower()
    if mode == "none":
        return []
    if mode == "full":
        return ["--recompute-granularity full --recompute-method uniform --recompute-num-layers 1"]
    if mode == "selective":
        modules = "layernorm moe_act" if experts else "layernorm"
        notes.append(
            f"selective activation checkpointing simulated as Megatron's selective recomputation of {modules}: the "
            "matmuls TorchTitan's policy recomputes (every other one) are not charged"
        )
        return [f"--recompute-granularity selective --recompute-modules {modules}"]
    raise ConfigError(f"automodel.{path}", f"{short_repr(value)}: true, false, full or selective")


def _attention(r: _Reads, notes: list[str]) -> list[str]:
    """model.backend.attn (else a Hugging Face model's attn_implementation) as Megatron's attention backend (TE's
    DotProductAttention by default)."""
    hf = {"sdpa": "sdpa", "flash_attention_2": "sdpa", "eager": "eager"}.get(r.get("model.attn_implementation"), "te")
    attn = r.word("model.backend.attn", hf).lower()
    if attn not in ATTENTION:
        raise ConfigError("automodel.model.backend.attn", f"{attn!r}: moesim reads {', '.join(ATTENTION)}")
    if attn == "flex":
        notes.append("FlexAttention simulated as FlashAttention-2 (PyTorch SDPA's kernels)")
    backend = ATTENTION[attn]
    return [f"--attention-backend {backend}"] if backend else []


def _moe(r: _Reads, notes: list[str]) -> list[str]:
    """The MoE layer's dispatcher and experts: DeepEP or HybridEP (dispatcher, or 2025's enable_deepep) as the flex
    dispatcher with grouped GEMMs, else the all-gather / reduce-scatter experts; grouped experts (TE, grouped_gemm,
    torch._grouped_mm) as grouped GEMMs, torch's one expert at a time. Where the recipe names neither, today's
    defaults in NVIDIA's container (DeepEP, torch._grouped_mm) or 2025's (all-gather, one expert at a time)."""
    today = r.get("distributed.strategy") is not None or r.get("distributed.pipeline") is not None
    if r.get("model.backend.dispatcher") is not None:
        dispatcher = r.word("model.backend.dispatcher", "deepep").lower()
    elif r.get("model.backend.enable_deepep") is not None and not today:
        dispatcher = "deepep" if r.bool("model.backend.enable_deepep") else "torch"
    else:
        dispatcher = "deepep" if today else "torch"
    if dispatcher == "uccl_ep":
        notes.append("UCCL-EP's dispatch and combine simulated as DeepEP's")
        dispatcher = "deepep"
    if dispatcher not in (*FLEX, "torch"):
        raise ConfigError("automodel.model.backend.dispatcher", f"{dispatcher!r}: moesim runs deepep, hybridep, torch")
    flex = dispatcher in FLEX
    experts = r.word("model.backend.experts", "torch_mm" if today else "gmm" if flex else "torch")
    if flex:
        flags = [f"--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend {dispatcher}"]
        if today:  # BackendConfig.dispatcher_num_sms, 20 by default, for either backend
            flags.append(f"--moe-flex-dispatcher-num-sms {r.int('model.backend.dispatcher_num_sms', 20)}")
    else:
        flags = ["--moe-token-dispatcher-type allgather"]
        notes.append("experts without DeepEP simulated as Megatron's allgather dispatcher (all-gather, reduce-scatter)")
    if experts == "torch_mm_mxfp8":
        notes.append("torchao's MXFP8 grouped GEMMs (experts torch_mm_mxfp8) simulated in BF16")
    flags += ["--moe-grouped-gemm"] if experts in GROUPED_EXPERTS else []
    return [*flags, "--moe-permute-fusion --moe-router-fusion"]


def read_automodel(path: str | Path) -> AutoModelRecipe:
    """The recipe at ``path``: the model it names (its hub id or config path) and its node count, if given."""
    return automodel_from_dict(read_yaml("automodel", path), str(path)[:200])


def automodel_from_dict(data: dict, origin: str) -> AutoModelRecipe:
    """The recipe of a parsed AutoModel YAML mapping (``origin`` names it in errors)."""
    reads = _Reads(data, origin)
    model = reads.get("model.config.pretrained_model_name_or_path", reads.get("model.pretrained_model_name_or_path"))
    if not isinstance(model, str) or not model:
        raise ConfigError(
            "automodel.model",
            "must name model.config.pretrained_model_name_or_path (an inline model config is not read: give --model, "
            "a config.json, a hub id or a preset)",
        )
    where = reads.first("ci.nodes", "benchmark.num_nodes")
    nodes = reads.int(where) if reads.get(where) is not None else None
    _manager(reads)  # checked before any simulation
    return AutoModelRecipe(model, nodes, reads)
