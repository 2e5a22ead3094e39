"""Megatron-LM's pipeline splits and layer patterns as moesim block layer counts and dense-layer lists, and the
layout fields a job's pipeline flags set (``pipeline_fields``: virtual stages, schedule, blocks, kept layers).

Each rule follows Megatron-Core at NVIDIA/Megatron-LM commit d98e8a64ddf34856e74b24714e3bedb2f5a39553:
``get_num_layers_to_build`` (megatron/core/transformer/transformer_block.py) for uneven first / last
stages and the embedding / loss counted as layers, ``PipelineParallelLayerLayout.parse_str_to_list`` and
``validate_layer_layout`` (megatron/core/transformer/pipeline_parallel_layer_layout.py) for
``--pipeline-model-parallel-layout``, ``moe_freq_type`` (megatron/training/arguments.py) for
``--moe-layer-freq``. Blocks are in moesim's order, which is Megatron's: block b = virtual stage b // pp on
pipeline rank b % pp.
"""

from __future__ import annotations

import ast
import re
from typing import Any, NamedTuple

from topologies.errors import ConfigError
from workloads.graph.step import block_layer_counts
from workloads.inputs.megatron_args import Flag, Kind, positive, typed
from workloads.inputs.megatron_graphs import granularity
from workloads.specs.model_extensions import paired_layers
from workloads.specs.models import ModelSpec

MAX_EXPANDED = 100_000  # characters / list items a layout string or layer pattern may unroll to
LAYOUT_FLAG = "--pipeline-model-parallel-layout"


class StageLayout(NamedTuple):
    """What an explicit pipeline layout gives: transformer layers and MTP modules per block."""

    layers: tuple[int, ...]
    mtp: tuple[int, ...]


def parse_layout(text: str, pp: int, num_layers: int, mtp_layers: int, paired: bool = False) -> StageLayout:
    """Blocks of ``--pipeline-model-parallel-layout`` ("Et*3|(tt|)*29,m|L"): '|' splits blocks, ``(..)*n`` and
    ``x*n`` repeat, commas are cosmetic; E embedding, t transformer layer, m MTP module, L loss.

    As Megatron-Core checks: the blocks are a multiple of pp, E comes first and L last, once each, and
    the t and m counts equal the model's layers and MTP modules. moesim also needs E on the first block and
    L on the last (the head and the embedding sit there, workloads.graph.step). ``paired``: the model's hybrid pattern
    writes each transformer layer as two blocks, mixer then FFN (Qwen3-Next's, workloads/inputs/huggingface/hybrid.py), so a
    layout of Megatron's GPT form (t a layer: half the blocks) places two blocks per t."""
    unrolled = text.replace(",", "")
    for pattern in (r"\(([^)]+)\)\*(\d+)", r"(.)\*(\d+)"):
        unrolled = re.sub(pattern, _repeat, unrolled)
    blocks = unrolled.split("|")
    bad = sorted(set(unrolled) - set("ELtm|"))
    if bad:
        raise ConfigError(LAYOUT_FLAG, f"unknown layer symbol {bad[0]!r}; use E, t, m, L, '|' and (..)*n")
    if len(blocks) % pp:
        raise ConfigError(LAYOUT_FLAG, f"{len(blocks)} blocks are not a multiple of pp = {pp}")
    flat = unrolled.replace("|", "")
    if not flat or flat[0] != "E" or flat[-1] != "L" or flat.count("E") != 1 or flat.count("L") != 1:
        raise ConfigError(LAYOUT_FLAG, "must start with the embedding E and end with the loss L, each once")
    if "E" not in blocks[0] or "L" not in blocks[-1]:
        raise ConfigError(LAYOUT_FLAG, "moesim places the embedding on the first block and the loss on the last")
    layers = tuple(block.count("t") for block in blocks)
    if paired and 2 * sum(layers) == num_layers:
        layers = tuple(2 * count for count in layers)
    if sum(layers) != num_layers:
        raise ConfigError(LAYOUT_FLAG, f"places {sum(layers)} transformer layers, the model has {num_layers}")
    mtp = tuple(block.count("m") for block in blocks)
    if sum(mtp) != mtp_layers:
        raise ConfigError(LAYOUT_FLAG, f"places {sum(mtp)} MTP modules, --mtp-num-layers gives {mtp_layers}")
    if "m" in flat and "t" in flat[flat.index("m") :]:
        raise ConfigError(LAYOUT_FLAG, "transformer layers must come before the MTP modules")
    return StageLayout(layers, mtp)


def layout_text(counts: tuple[int, ...], mtp_layers: int = 0) -> str:
    """``--pipeline-model-parallel-layout`` for moesim's block layer counts (the inverse of ``parse_layout``):
    the embedding on the first block, the MTP modules and the loss on the last, runs of equal blocks as
    ``(t*n|)*r``."""
    blocks = ["t" * count for count in counts]
    blocks[0] = "E" + blocks[0]
    blocks[-1] += "m" * mtp_layers + "L"
    pieces: list[str] = []
    b = 0
    while b < len(blocks):
        run = 1
        while b + run < len(blocks) - 1 and blocks[b + run] == blocks[b]:
            run += 1
        text = re.sub(r"t{2,}", lambda m: f"t*{len(m.group())}", blocks[b])
        pieces.append(f"({text}|)*{run}" if run > 1 else text + "|")
        b += run
    return "".join(pieces).removesuffix("|")


def _repeat(match: re.Match) -> str:
    body, times = match.group(1), int(match.group(2))
    if len(body) * times > MAX_EXPANDED:
        raise ConfigError(LAYOUT_FLAG, f"unrolls to more than {MAX_EXPANDED} symbols")
    return body * times


def stage_layers(
    num_layers: int, pp: int, first: int | None, last: int | None, embedding: bool, loss: bool
) -> list[int]:
    """Layers per pipeline rank: uneven first / last ranks, or an even split in which the embedding and the
    loss each count as one layer when asked (``block_layers`` then takes them off the end blocks)."""
    if first is not None or last is not None:
        if embedding or loss:
            raise ConfigError(
                "--decoder-first-pipeline-num-layers",
                "does not combine with --account-for-embedding/loss-in-pipeline-split (Megatron-Core)",
            )
        rest, ranks = num_layers - (first or 0) - (last or 0), pp - (first is not None) - (last is not None)
        if rest < 0 or (ranks > 0 and rest % ranks) or (ranks <= 0 and rest):
            raise ConfigError(
                "--decoder-first-pipeline-num-layers",
                f"the {rest} layers left over must split evenly over the {max(ranks, 0)} middle pipeline ranks",
            )
        counts = [rest // ranks if ranks > 0 else 0] * pp
        if first is not None:
            counts[0] = first
        if last is not None:
            counts[-1] = last
        return counts
    total = num_layers + embedding + loss
    if total % pp:
        raise ConfigError(
            "--pipeline-model-parallel-size",
            f"{total} layers (with the embedding / loss counted as asked) are not divisible by pp = {pp}",
        )
    return [total // pp] * pp


def block_layers(stages: list[int], virtual_stages: int, embedding: bool, loss: bool) -> list[int]:
    """Per-rank counts cut into ``virtual_stages`` chunks each, in block order; a counted embedding / loss
    then takes one layer's place on the first / last block."""
    for rank, count in enumerate(stages):
        if count % virtual_stages:
            raise ConfigError(
                "--num-virtual-stages-per-pipeline-rank",
                f"pipeline rank {rank} has {count} layers, not divisible by {virtual_stages} virtual stages",
            )
    pp = len(stages)
    blocks = [stages[b % pp] // virtual_stages for b in range(pp * virtual_stages)]
    blocks[0] -= embedding
    blocks[-1] -= loss
    if min(blocks) < 0:
        raise ConfigError("--account-for-embedding-in-pipeline-split", "leaves an end block with fewer than 0 layers")
    return blocks


def layer_pattern(text: str, num_layers: int, flag: str = "--moe-layer-freq") -> tuple[int, ...]:
    """``--moe-layer-freq``: N (layer i is MoE when i % N == 0) or a Python list expression of 0 / 1 such
    as "([0]*3+[1]*58)" (1 = MoE layer), evaluated for lists, ints, + and * only (Megatron's moe_freq_type, which
    --window-attn-skip-freq shares for its lists: 1 = a sliding-window layer)."""
    if "[" not in text:
        freq = typed(flag, Flag(Kind.INT), [text])
        if freq < 1:
            raise ConfigError(flag, f"must be >= 1, got {freq}")
        return tuple(int(i % freq == 0) for i in range(num_layers))
    try:
        pattern = _evaluate(ast.parse(text.strip(), mode="eval").body)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise ConfigError(flag, f"not a list expression of 0 and 1: {text!r}") from None
    if not isinstance(pattern, list) or any(item not in (0, 1) or isinstance(item, bool) for item in pattern):
        raise ConfigError(flag, f"must evaluate to a list of 0 and 1, got {text!r}")
    if len(pattern) != num_layers:
        raise ConfigError(flag, f"gives {len(pattern)} layers, the model has {num_layers}")
    return tuple(pattern)


def _evaluate(node: ast.AST) -> int | list:
    """Lists of ints, ints, + and * (what layer patterns use); anything else is a ValueError."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.List):
        return [_evaluate(item) for item in node.elts]
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Add) and type(left) is type(right):
            if isinstance(left, list) and len(left) + len(right) > MAX_EXPANDED:
                raise ValueError("too long")
            return left + right
        if isinstance(node.op, ast.Mult) and isinstance(left, list) != isinstance(right, list):
            items, times = (left, right) if isinstance(left, list) else (right, left)
            if len(items) * max(times, 0) > MAX_EXPANDED:
                raise ValueError("too long")
            return items * times
        if isinstance(node.op, ast.Mult) and isinstance(left, int) and isinstance(right, int):
            if abs(left) > MAX_EXPANDED or abs(right) > MAX_EXPANDED:
                raise ValueError("too large")
            return left * right
    raise ValueError("unsupported expression")


def pipeline_fields(args: dict[str, Any], model: ModelSpec, fields: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """Virtual stages, the schedule, per-block layer counts and the layers the block method keeps."""
    pp, layers = fields["pp"], model.num_layers
    text = args.get("--pipeline-model-parallel-layout")
    per_chunk = positive(args, "--num-layers-per-virtual-pipeline-stage", None)
    chunks = positive(args, "--num-virtual-stages-per-pipeline-rank", None)
    # Megatron-LM's validate_args allows one of the three (d98e8a64dd); Megatron-Bridge's configs carry the layout
    # with the virtual stages it implies, so a consistent pair is read with a note, an inconsistent one refused
    paired = text is not None and chunks is not None and per_chunk is None
    if sum(value is not None for value in (text, per_chunk, chunks)) > 1 and not paired:
        raise ConfigError(
            "--pipeline-model-parallel-layout",
            "give at most one of it, --num-layers-per-virtual-pipeline-stage, --num-virtual-stages-per-pipeline-rank",
        )
    first, last = args.get("--decoder-first-pipeline-num-layers"), args.get("--decoder-last-pipeline-num-layers")
    embedding = bool(args.get("--account-for-embedding-in-pipeline-split"))
    loss = bool(args.get("--account-for-loss-in-pipeline-split"))
    for flag, value in (("--decoder-first-pipeline-num-layers", first), ("--decoder-last-pipeline-num-layers", last)):
        if value is not None and value < 0:
            raise ConfigError(flag, f"must be >= 0, got {value}")
    if text is not None:
        if first is not None or last is not None or embedding or loss:
            raise ConfigError("--pipeline-model-parallel-layout", "replaces the first/last and account-for flags")
        split = parse_layout(text, pp, layers, getattr(model, "mtp_layers", 0), paired_layers(model))
        implied = len(split.layers) // pp
        if paired and chunks != implied:
            raise ConfigError(
                "--num-virtual-stages-per-pipeline-rank",
                f"{chunks} disagrees with --pipeline-model-parallel-layout, whose {len(split.layers)} blocks over PP "
                f"{pp} give {implied} (drop one of the two)",
            )
        if paired:
            notes.append(
                f"--num-virtual-stages-per-pipeline-rank {chunks} beside the layout that implies it: Megatron-LM "
                "refuses the pair; read as the layout alone"
            )
        blocks, chunks = list(split.layers), implied
        if any(split.mtp[:-1]):
            notes.append("MTP modules simulated on the last block, beside the head")
    else:
        if per_chunk is not None:
            if first is not None or last is not None:
                raise ConfigError(
                    "--num-layers-per-virtual-pipeline-stage", "use --num-virtual-stages-per-pipeline-rank"
                )
            total = layers + embedding + loss
            if total % pp or (total // pp) % per_chunk:
                counted = " (the embedding and loss counted as layers)" if embedding or loss else ""
                raise ConfigError(
                    "--num-layers-per-virtual-pipeline-stage",
                    f"{per_chunk} does not divide the layers per rank: {total} layers{counted} over PP {pp} give "
                    f"{total / pp:g} (Megatron-LM refuses this too); give --num-virtual-stages-per-pipeline-rank "
                    "instead (with --decoder-first/last-pipeline-num-layers for an uneven split) or a "
                    "--pipeline-model-parallel-layout",
                )
            chunks = total // pp // per_chunk
        chunks = chunks or 1
        plain = first is None and last is None and not embedding and not loss
        if plain and layers % (pp * chunks):  # Megatron refuses this; moesim splits unevenly and says so
            notes.append(
                f"{layers} layers do not split over pp x virtual stages = {pp * chunks} blocks, which Megatron "
                "refuses without --decoder-first/last-pipeline-num-layers, --account-for-embedding/loss-in-"
                "pipeline-split or a layout; simulated with one layer fewer on the last, then the first blocks"
            )
            blocks = block_layer_counts(layers, pp * chunks)
        else:
            blocks = block_layers(stage_layers(layers, pp, first, last, embedding, loss), chunks, embedding, loss)
    # validate_args at d98e8a64dd: interleaving needs PP > 1, and PP > 2 with --no-overlap-p2p-communication
    if chunks > 1 and (pp == 1 or (pp == 2 and args.get("--no-overlap-p2p-communication"))):
        minimum = 2 if pp == 1 else 3
        raise ConfigError(
            "--pipeline-model-parallel-size", f"the interleaved schedule needs pp >= {minimum} (Megatron-LM)"
        )
    group = positive(args, "--microbatch-group-size-per-virtual-pipeline-stage", None)
    out: dict[str, Any] = {
        "virtual_stages": chunks,
        "microbatch_group": group if chunks > 1 and group is not None else 0,  # the interleaved schedule's alone
        "schedule": "interleaved" if chunks > 1 else "1f1b",
        "block_layers": () if len(set(blocks)) == 1 else tuple(blocks),
        # validate_args (NVIDIA/Megatron-LM d98e8a64 arguments.py): --align-param-gather is on by default and turned off
        # without the interleaved schedule
        "align_param_gather": chunks > 1 and not args.get("--no-align-param-gather"),
    }
    if granularity(args) == "full":
        recomputed = args["--recompute-num-layers"]
        if args["--recompute-method"] == "block":  # the first N layers of each chunk; the rest keep theirs
            out["recompute_kept_layers"] = max(max(blocks) - recomputed, 0)
            if len(set(blocks)) > 1:
                notes.append("--recompute-method block on uneven blocks: the fullest block keeps the layers given")
        else:  # uniform: every layer recomputed, one input kept per unit of N layers
            out["recompute_kept_layers"] = 0
            if recomputed > 1:
                notes.append(f"--recompute-method uniform with units of {recomputed} layers: moesim keeps every input")
    return out
