"""Megatron-LM model flags as ModelSpec field overrides, applied over a base model where present.

A flag maps onto a ModelSpec field when the field exists (``dataclasses.fields(ModelSpec)`` at run time);
a flag whose field does not exist is listed as ignored, "not modelled". Defaults that Megatron fills in
when a flag is absent (megatron/training/arguments.py ``validate_args`` and ``_add_mla_args``,
megatron/core/transformer/transformer_config.py, NVIDIA/Megatron-LM commit d98e8a64) apply only where the
flag that needs them is present: e.g. ``--group-query-attention`` without ``--num-query-groups`` gives one
group, ``--multi-latent-attention`` without ranks gives Megatron's rank defaults.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from topologies.errors import ConfigError
from workloads.inputs.megatron_args import NOT_MODELLED, Flag, IgnoredArg, Kind, typed
from workloads.inputs.megatron_pipeline import layer_pattern
from workloads.specs.model_extensions import paired_layers
from workloads.specs.models import ModelSpec

FIELDS = frozenset(f.name for f in dataclasses.fields(ModelSpec))
DIRECT = {  # flag -> the ModelSpec fields it may set, the first that exists
    "--num-layers": ("num_layers",),
    "--hidden-size": ("hidden_size",),
    "--num-attention-heads": ("num_heads",),
    "--kv-channels": ("kv_channels", "head_dim"),
    "--num-experts": ("num_experts",),
    "--moe-router-topk": ("top_k",),
    "--moe-ffn-hidden-size": ("expert_ffn_size",),
    "--ffn-hidden-size": ("dense_ffn_size",),
    "--mtp-num-layers": ("mtp_layers",),
    "--mamba-num-heads": ("mamba_heads",),
    "--mamba-head-dim": ("mamba_head_dim",),
    "--mamba-state-dim": ("mamba_state_dim",),
    "--mamba-num-groups": ("mamba_groups",),
    "--moe-latent-size": ("moe_latent_size",),
    "--linear-num-key-heads": ("gdn_key_heads",),  # a hybrid pattern's G layers (Gated DeltaNet)
    "--linear-num-value-heads": ("gdn_value_heads",),
    "--linear-key-head-dim": ("gdn_key_head_dim",),
    "--linear-value-head-dim": ("gdn_value_head_dim",),
    "--linear-conv-kernel-dim": ("gdn_conv_kernel",),
    "--attention-output-gate": ("attention_output_gate",),
    "--hidden-dropout": ("hidden_dropout",),
    "--attention-dropout": ("attention_dropout",),
}
# --multi-latent-attention: flag -> (field, Megatron's default) (arguments.py _add_mla_args)
MLA = {
    "--q-lora-rank": ("q_lora_rank", 0),  # None: no query compression
    "--kv-lora-rank": ("kv_lora_rank", 32),
    "--qk-head-dim": ("qk_nope_head_dim", 128),
    "--qk-pos-emb-head-dim": ("qk_rope_head_dim", 64),
    "--v-head-dim": ("v_head_dim", 128),
}
VOCAB_DIVISOR = 128  # --make-vocab-size-divisible-by default
# a hybrid model's MTP module as moesim runs it: attention, then an MoE FFN (workloads/graph/step.py)
MTP_PATTERN = "*E"
# The flags Megatron-LM builds a model from (arguments.py validate_args requires --num-layers, --hidden-size and
# --num-attention-heads; a hybrid model's pattern may give its layer count): with all of them and no --model, the
# flags alone define the model (``flags_model``)
DEFINING = ("--hidden-size", "--num-attention-heads")
HYBRID_PATTERNS = ("--hybrid-layer-pattern", "--hybrid-override-pattern")
ROPE_TYPES = frozenset({"rope", "mrope", "yarn"})  # --position-embedding-type values that rotate queries and keys
MOE_TOPK_DEFAULT = 2  # --moe-router-topk (arguments.py _add_moe_args)
DROPOUT_DEFAULT = 0.1  # --hidden-dropout and --attention-dropout (arguments.py _add_network_size_args at d98e8a64)
# GPT-2's byte-level BPE vocabulary (its encoder.json, Radford et al. 2019), which Megatron's GPT2BPETokenizer reads
GPT2_BPE_VOCAB = 50257
# the vocabulary of Megatron's TikTokenizer without --vocab-size (megatron/core/tokenizers/text/libraries/
# tiktoken_tokenizer.py at d98e8a64: DEFAULT_TIKTOKEN_MAX_VOCAB = 2**17)
TIKTOKEN_VOCAB = 2**17
MAMBA_EXPAND = 2  # MambaMixer's d_inner = expand x hidden; heads = d_inner / head dim without --mamba-num-heads
GDN_HEADS = (16, 32)  # a G layer's key and value heads without --linear-num-key-heads / --linear-num-value-heads


def _target(flag: str, names: tuple[str, ...], ignored: list[IgnoredArg]) -> str | None:
    name = next((n for n in names if n in FIELDS), None)
    if name is None:
        ignored.append(IgnoredArg(flag, f"{NOT_MODELLED}: ModelSpec has no {names[0]} field"))
    return name


MHC_STREAMS_DEFAULT = 4  # TransformerConfig.mhc_num_residual_streams at d98e8a64


def _hyper_connections(args: dict[str, Any], ignored: list[IgnoredArg]) -> dict[str, Any]:
    """mHC's residual streams and Sinkhorn iterations under --enable-mhc-connections (workloads/recipes/residual.py
    hyper_connection_steps); without it, its size flags change nothing."""
    sizes = ("--mhc-num-residual-streams", "--mhc-sinkhorn-iterations")
    if not args.get("--enable-mhc-connections"):
        ignored.extend(IgnoredArg(flag, "no effect without --enable-mhc-connections") for flag in sizes if flag in args)
        return {}
    out = {"residual_streams": args.get("--mhc-num-residual-streams", MHC_STREAMS_DEFAULT)}
    if "--mhc-sinkhorn-iterations" in args:
        out["sinkhorn_iterations"] = args["--mhc-sinkhorn-iterations"]
    return out


DSA_FLAGS = {  # flag -> ModelSpec field (TransformerConfig dsa_indexer_* at d98e8a64)
    "--dsa-indexer-n-heads": "index_heads",
    "--dsa-indexer-head-dim": "index_head_dim",
    "--dsa-indexer-topk": "index_topk",
    "--dsa-indexer-topk-freq": "index_topk_freq",
    "--dsa-indexer-skip-topk-offset": "index_skip_offset",
}


def _sparse_attention(args: dict[str, Any], ignored: list[IgnoredArg]) -> dict[str, Any]:
    """DeepSeek-V3.2's sparse attention under --experimental-attention-variant dsa (workloads/recipes/mla.py): its
    indexer's sizes; the GPT model's linear-attention variants are refused by name (a hybrid pattern's G layers run)."""
    variant = args.get("--experimental-attention-variant")
    given = {field: args[flag] for flag, field in DSA_FLAGS.items() if flag in args}
    if variant is None:
        ignored.extend(
            IgnoredArg(flag, "no effect without --experimental-attention-variant dsa")
            for flag in DSA_FLAGS
            if flag in args
        )
        return {}
    if variant != "dsa":
        raise ConfigError(
            "--experimental-attention-variant",
            f"{variant!r}: a GPT model's linear-attention variant is not read; give Gated DeltaNet layers as a "
            "config.json (Qwen3-Next, Qwen3.5) or as G layers of --hybrid-override-pattern with the --linear-* sizes",
        )
    return given  # MLA and the sizes the flags leave out may come from the model (config.json): checked in apply()


def _check_dsa(args: dict[str, Any], model: ModelSpec) -> None:
    """Under --experimental-attention-variant dsa: MLA (--multi-latent-attention, or a config.json with kv_lora_rank),
    and the indexer's sizes from the flags or, where they leave them out, from the model (DeepSeek-V3.2's config.json
    index_n_heads, index_head_dim, index_topk): Megatron-Core has no default for them (TransformerConfig dsa_indexer_*
    None at d98e8a64)."""
    if args.get("--experimental-attention-variant") != "dsa":
        return
    if model.attention != "mla":
        raise ConfigError(
            "--experimental-attention-variant", "dsa runs on MLA: add --multi-latent-attention (Megatron-Core)"
        )
    sizes = (model.index_heads, model.index_head_dim, model.index_topk)
    for flag, size in zip(("--dsa-indexer-n-heads", "--dsa-indexer-head-dim", "--dsa-indexer-topk"), sizes):
        if size <= 0:
            raise ConfigError(
                flag,
                "DSA needs its indexer's size: give the flag, or a config.json with index_n_heads, "
                "index_head_dim and index_topk (Megatron-Core has no default)",
            )


def overrides(args: dict[str, Any], ignored: list[IgnoredArg]) -> dict[str, Any]:
    """ModelSpec fields the flags set on their own (base-independent), one flag each."""
    out: dict[str, Any] = {}
    for flag, names in DIRECT.items():
        if flag in args:
            name = _target(flag, names, ignored)
            if name is not None:
                out[name] = args[flag]
    out.update(_hybrid_pattern(args, ignored))
    if "--ffn-hidden-size" in args and "--moe-ffn-hidden-size" not in args:
        out["expert_ffn_size"] = args["--ffn-hidden-size"]  # Megatron: moe_ffn_hidden_size = ffn_hidden_size
    if args.get("--group-query-attention"):
        if args.get("--multi-latent-attention"):
            raise ConfigError("--group-query-attention", "excludes --multi-latent-attention (Megatron-LM)")
        out["num_kv_heads"] = args.get("--num-query-groups", 1)  # argparse default 1
    elif "--num-attention-heads" in args:
        out["num_kv_heads"] = args["--num-attention-heads"]  # multi-head attention
    if "--num-query-groups" in args and not args.get("--group-query-attention"):
        ignored.append(IgnoredArg("--num-query-groups", "no --group-query-attention: multi-head attention"))
    if args.get("--untie-embeddings-and-output-weights"):
        out["tied_embeddings"] = False
    if "--position-embedding-type" in args:
        out["rope"] = args["--position-embedding-type"] in ROPE_TYPES
    if args.get("--no-rope-fusion"):
        # apply_rope_fusion off: rope_utils._apply_rotary_pos_emb_bshd's eager ops (workloads/recipes/layers.py unfused_rope_step)
        out["rope_unfused"] = True
    if args.get("--qk-layernorm"):
        out["qk_layernorm"] = True  # q_layernorm / k_layernorm in SelfAttention (workloads/recipes/layers.py qk_steps)
    shared = args.get("--moe-shared-expert-intermediate-size")
    if shared is not None and _target("--moe-shared-expert-intermediate-size", ("shared_expert_ffn_size",), ignored):
        out.update(num_shared_experts=1 if shared else 0, shared_expert_ffn_size=shared)
    if args.get("--multi-latent-attention"):
        out["attention"] = "mla"
    mtp_pattern = args.get("--mtp-hybrid-override-pattern")
    if mtp_pattern is not None and mtp_pattern != MTP_PATTERN:
        raise ConfigError(
            "--mtp-hybrid-override-pattern",
            f"{mtp_pattern!r}: moesim's MTP module is one attention and one MoE layer ({MTP_PATTERN!r})",
        )
    if args.get("--mtp-use-repeated-layer"):
        out["mtp_repeated_layer"] = True
    out.update(_hyper_connections(args, ignored))
    out.update(_sparse_attention(args, ignored))
    activation = ffn_activation(args)
    if activation:
        out["ffn_activation"] = activation
    return out


def _hybrid_pattern(args: dict[str, Any], ignored: list[IgnoredArg]) -> dict[str, Any]:
    """--hybrid-layer-pattern (or the deprecated --hybrid-override-pattern) as Megatron parses it
    (megatron/core/models/hybrid/hybrid_layer_allocation.py parse_hybrid_pattern at d98e8a64dd): the main pattern, its
    "|" pipeline boundaries (not followed: moesim splits the layers as the pipeline flags say), and after each "/" one
    MTP depth's pattern. The layer count is the main pattern's unless --num-layers gives it."""
    given = [flag for flag in ("--hybrid-layer-pattern", "--hybrid-override-pattern") if flag in args]
    if not given:
        return {}
    if len(given) > 1:
        raise ConfigError("--hybrid-override-pattern", "and --hybrid-layer-pattern cannot both be given (Megatron-LM)")
    main, *mtp = args[given[0]].split("/")
    if "|" in main:
        ignored.append(IgnoredArg(given[0], f"{NOT_MODELLED}: its pipeline boundaries '|' (the pipeline flags split)"))
        main = main.replace("|", "")
    out: dict[str, Any] = {"hybrid_pattern": main}
    if "--num-layers" not in args:
        out["num_layers"] = len(main)
    if mtp:
        if any(depth != MTP_PATTERN for depth in mtp):
            raise ConfigError(
                given[0], f"MTP depths {mtp}: moesim's MTP module is attention then MoE ({MTP_PATTERN!r})"
            )
        if args.get("--mtp-num-layers", len(mtp)) != len(mtp):
            raise ConfigError("--mtp-num-layers", f"must equal the {len(mtp)} MTP depths of {given[0]}")
        out["mtp_layers"] = len(mtp)
    return out


def ffn_activation(args: dict[str, Any]) -> str:
    """The FFN activation the flags give (argument_utils.py core_transformer_config_from_args at d98e8a64dd:
    --swiglu, or --quick-geglu, a gated unit; --squared-relu; else GeLU), or "" where they leave the model's own:
    Megatron's GeLU default is taken only from flags that give the model (--hidden-size), so that a job's parallel
    flags over a model file do not turn its SwiGLU into a GeLU."""
    if args.get("--squared-relu"):
        return "squared_relu"
    if args.get("--swiglu") or args.get("--quick-geglu"):
        return "swiglu"
    return "gelu" if "--hidden-size" in args else ""


def defines_model(args: dict[str, Any]) -> bool:
    """Whether the flags give a whole model, as Megatron-LM needs them to build one (DEFINING, and --num-layers or a
    hybrid pattern)."""
    layers = "--num-layers" in args or any(flag in args for flag in HYBRID_PATTERNS)
    return layers and all(flag in args for flag in DEFINING)


def flags_model(args: dict[str, Any]) -> ModelSpec:
    """The model Megatron-LM builds from the flags alone (``defines_model``), at its defaults where a flag is absent
    (arguments.py validate_args and _add_*_args at d98e8a64dd): no --num-experts, a dense model; --ffn-hidden-size
    4 h, or int(4 h x 2/3 / 64) x 64 for a gated unit; --moe-router-topk 2; learned absolute positions; multi-head
    attention; the embedding and output layer tied; hidden and attention dropout 0.1. ``apply`` then lays the flags'
    overrides over it, as over a --model. Megatron reads the vocabulary from the tokenizer: without --vocab-size (or
    --padded-vocab-size, or GPT-2's BPE tokenizer, named or read from a --merge-file) the flags do not give it, and
    that is an error."""
    hidden = args["--hidden-size"]
    gated = ffn_activation(args) == "swiglu"
    ffn = args.get("--ffn-hidden-size") or (int(4 * hidden * 2 / 3 / 64) * 64 if gated else 4 * hidden)
    experts = args.get("--num-experts") or 0
    vocab = args.get("--padded-vocab-size", args.get("--vocab-size"))
    # pretrain_gpt.py's default tokenizer is GPT-2's BPE (pretrain(..., args_defaults={'tokenizer_type':
    # 'GPT2BPETokenizer'}), from 2021's scripts to d98e8a64dd), the one tokenizer that reads a --merge-file
    tokenizer = args.get("--tokenizer-type", "GPT2BPETokenizer" if args.get("--merge-file") else None)
    if vocab is None:
        vocab = {"GPT2BPETokenizer": GPT2_BPE_VOCAB, "TikTokenizer": TIKTOKEN_VOCAB}.get(tokenizer)
    if vocab is None:
        raise ConfigError(
            "--vocab-size",
            "the flags give the model (--num-layers, --hidden-size, --num-attention-heads) but not its vocabulary, "
            "which Megatron reads from the tokenizer: add --vocab-size N (GPT-2's BPE files: --tokenizer-type "
            f"GPT2BPETokenizer, {GPT2_BPE_VOCAB:,} tokens), or give --model (a config.json or preset)",
        )
    pattern = next((args[flag] for flag in HYBRID_PATTERNS if flag in args), "")
    heads = args["--num-attention-heads"]
    fields: dict[str, Any] = {
        "name": "megatron-flags",
        "num_layers": args.get("--num-layers") or len(pattern.split("/")[0].replace("|", "")),
        "hidden_size": hidden,
        "num_heads": heads,
        "num_kv_heads": heads,
        "num_experts": experts,
        "top_k": args.get("--moe-router-topk", MOE_TOPK_DEFAULT) if experts else 0,
        "expert_ffn_size": args.get("--moe-ffn-hidden-size", ffn) if experts else 0,
        "dense_ffn_size": ffn,
        "ffn_activation": ffn_activation(args),
        "vocab_size": vocab,
        "rope": False,
        "tied_embeddings": True,  # unless --untie-embeddings-and-output-weights (apply)
        "hidden_dropout": DROPOUT_DEFAULT,  # unless --hidden-dropout / --attention-dropout (DIRECT)
        "attention_dropout": DROPOUT_DEFAULT,
        "source": "Megatron-LM flags (--megatron-args), Megatron's defaults where a flag is absent",
    }
    if "M" in pattern and "--mamba-num-heads" not in args:
        fields["mamba_heads"] = MAMBA_EXPAND * hidden // args.get("--mamba-head-dim", ModelSpec.mamba_head_dim)
    if "G" in pattern:  # TransformerConfig's linear_num_key_heads / linear_num_value_heads defaults (d98e8a64)
        fields.update(gdn_key_heads=GDN_HEADS[0], gdn_value_heads=GDN_HEADS[1])
    return ModelSpec(**fields)


# Megatron-Core without --moe-grouped-gemm: SequentialMLP, which moesim simulates (layout expert_gemm "sequential")
SEQUENTIAL_MLP_NOTE = (
    "no --moe-grouped-gemm: Megatron-Core runs SequentialMLP, each local expert's GEMMs one after another from Python, "
    "and so does moesim; every published MoE recipe sets --moe-grouped-gemm"
)


def apply(
    args: dict[str, Any], fields: dict[str, Any], base: ModelSpec, notes: list[str], ignored: list[IgnoredArg]
) -> ModelSpec:
    """``base`` with the overrides, the MLA ranks, the MoE layer pattern and the padded vocabulary."""
    fields = dict(fields)
    if paired_layers(base) and fields.get("num_layers", 0) * 2 == base.num_layers:  # GPT-form layers, two blocks each
        fields["num_layers"] = base.num_layers
    mla = fields.get("attention") == "mla" or base.attention == "mla"
    for flag, (name, default) in MLA.items():
        if flag in args and not mla:
            ignored.append(IgnoredArg(flag, "no --multi-latent-attention"))
        elif flag in args or (fields.get("attention") == "mla" and base.attention != "mla"):
            fields[name] = args.get(flag, default)
    fields.update(_windows(args, fields.get("num_layers", base.num_layers), base, notes, ignored))
    if "ffn_activation" not in fields and base.gated_ffn:
        notes.append(
            "no --swiglu nor --squared-relu: Megatron's MLP would be GeLU (2 matrices); the model's SwiGLU is kept, as "
            "the flags do not give the model (no --hidden-size)"
        )
    clamp = args.get("--activation-func-clamp-value")
    if clamp is not None:  # GPT-OSS's clamped GLU (TransformerConfig activation_func_clamp_value)
        if clamp <= 0:
            raise ConfigError("--activation-func-clamp-value", f"must be > 0, got {clamp}")
        fields["expert_act_clamp"] = clamp
    if "--moe-layer-freq" in args:
        fields.update(_dense_layers(args["--moe-layer-freq"], fields.get("num_layers", base.num_layers), ignored))
    vocab = args.get("--padded-vocab-size")
    if vocab is None:  # Megatron's _vocab_size_with_padding: up to a multiple of divisor x TP
        divisor = args.get("--make-vocab-size-divisible-by", VOCAB_DIVISOR)
        if divisor < 1:
            raise ConfigError("--make-vocab-size-divisible-by", f"must be >= 1, got {divisor}")
        multiple = divisor * args.get("--tensor-model-parallel-size", 1)
        original = args.get("--vocab-size", base.vocab_size)
        vocab = -(-original // multiple) * multiple
        if vocab != original:
            notes.append(f"vocabulary padded from {original} to {vocab} (a multiple of {multiple}, as Megatron pads)")
    fields["vocab_size"] = vocab
    if "mtp_layers" not in fields and base.mtp_layers:
        # Megatron builds MTP modules only when --mtp-num-layers says so (TransformerConfig.mtp_num_layers, default
        # None; gpt_builders.py ``if args.mtp_num_layers is not None`` at d98e8a64dd); config.json's
        # num_nextn_predict_layers describes the released checkpoint, not the job
        fields["mtp_layers"] = 0
        notes.append(
            f"the model has {base.mtp_layers} MTP module(s) (config.json num_nextn_predict_layers); without "
            "--mtp-num-layers Megatron trains none, and neither does moesim"
        )
    if not args.get("--untie-embeddings-and-output-weights"):
        # Megatron ties them unless told not to (share_embeddings_and_output_weights = not
        # --untie-embeddings-and-output-weights, arguments.py at d98e8a64dd): the job decides, not config.json
        fields["tied_embeddings"] = True
        if not base.tied_embeddings:
            notes.append(
                "no --untie-embeddings-and-output-weights: Megatron ties the embedding and the output layer, which "
                "config.json unties (tie_word_embeddings false); simulated tied, as the job says"
            )
    try:
        model = base.with_(**fields)
    except TypeError as error:  # a field another engineer renamed: one line, not a traceback
        raise ConfigError("--megatron-args", f"model override not accepted: {error}") from None
    _check_dsa(args, model)
    return model


def _windows(
    args: dict[str, Any], num_layers: int, base: ModelSpec, notes: list[str], ignored: list[IgnoredArg]
) -> dict[str, Any]:
    """Sliding-window attention from --window-size and --window-attn-skip-freq, the job's, over config.json's.

    Megatron (megatron/core/transformer/utils.py is_layer_window_attention at d98e8a64dd; layer numbers from 1):
    no --window-size, no window; no --window-attn-skip-freq, every layer; an integer N, the layers whose number is
    not a multiple of N; a list, the layers marked 1. TE attends keys [i - left, i + right] of query i
    (DotProductAttention window_size), so a causal window (right 0) holds left + 1 keys: moesim's sliding_window,
    as in config.json (GPT-OSS: sliding_window 128, Megatron --window-size 127,0)."""
    text = args.get("--window-size")
    if text is None:
        if "--window-attn-skip-freq" in args:
            ignored.append(IgnoredArg("--window-attn-skip-freq", "no --window-size: no sliding-window attention"))
        return {}
    try:
        left, right = (int(item) for item in text.strip("()").split(","))
    except ValueError:
        raise ConfigError("--window-size", f"must be two integers left,right (Megatron's tuple_type), got {text!r}")
    if left < 0:  # -1: an infinite window, full attention
        return {"sliding_window": 0, "window_layers": ()}
    if right:
        notes.append(f"--window-size {text}: the {right} keys after each query are not counted (causal window)")
    freq = args.get("--window-attn-skip-freq")
    if freq is None:
        layers = tuple(range(num_layers))
    elif "[" not in freq:
        every = typed("--window-attn-skip-freq", Flag(Kind.INT), [freq])
        if every < 1:
            raise ConfigError("--window-attn-skip-freq", f"must be >= 1, got {every}")
        layers = tuple(i for i in range(num_layers) if (i + 1) % every)
    else:
        pattern = layer_pattern(freq, num_layers, "--window-attn-skip-freq")
        layers = tuple(i for i, windowed in enumerate(pattern) if windowed)
    window = left + 1 if layers else 0
    if base.sliding_window and (base.sliding_window, base.window_layers) != (window, layers):
        notes.append(
            f"sliding windows from --window-size / --window-attn-skip-freq ({window} keys on {len(layers)} layers), "
            f"not the model's ({base.sliding_window} keys on {len(base.window_layers)} layers)"
        )
    return {"sliding_window": window, "window_layers": layers}


def _dense_layers(text: str, num_layers: int, ignored: list[IgnoredArg]) -> dict[str, Any]:
    """The dense layers of ``--moe-layer-freq``: the leading ones as num_dense_layers, the rest as
    mlp_only_layers (when ModelSpec has it)."""
    pattern = layer_pattern(text, num_layers)
    dense = [i for i, moe in enumerate(pattern) if not moe]
    leading = next((i for i, moe in enumerate(pattern) if moe), num_layers)
    later = tuple(i for i in dense if i >= leading)
    if later and "mlp_only_layers" not in FIELDS:
        ignored.append(IgnoredArg("--moe-layer-freq", f"{NOT_MODELLED}: dense layers after the first MoE layer"))
        return {"num_dense_layers": leading}
    return {"num_dense_layers": leading, **({"mlp_only_layers": later} if "mlp_only_layers" in FIELDS else {})}


def check_divisible(args: dict[str, Any], model: ModelSpec) -> None:
    """Megatron-Core's sharding rules on the model: TP divides the heads and query groups, EP the experts."""
    tp = args.get("--tensor-model-parallel-size", 1)
    if model.num_heads % tp:
        raise ConfigError("--tensor-model-parallel-size", f"{tp} does not divide the {model.num_heads} attention heads")
    if model.attention == "gqa" and model.num_kv_heads % tp:
        raise ConfigError("--tensor-model-parallel-size", f"{tp} does not divide the {model.num_kv_heads} query groups")
    ep = args.get("--expert-model-parallel-size", 1)
    if ep > 1 and model.num_experts % ep:
        raise ConfigError("--expert-model-parallel-size", f"{ep} does not divide the {model.num_experts} experts")
