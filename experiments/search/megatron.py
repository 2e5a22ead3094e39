"""``moesim search --megatron-args``: the parallel layouts Megatron-Core can run around a user's job (its
dispatcher, precision, overlaps and CUDA graphs kept), and the fastest as the Megatron-LM arguments that set it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from experiments.common.paths import write_text
from experiments.common.presets import megatron_base
from experiments.search.answer import DISPATCHER_FLAGS, INSTANCE_FLAGS, job_flags
from experiments.search.dispatch_choices import MEGATRON_DISPATCHERS
from simulator.report.simulate import prepare
from topologies.errors import ConfigError
from workloads.dispatchers.registry import DISPATCHERS
from workloads.inputs.megatron import parse_megatron_args
from workloads.inputs.megatron_pipeline import layout_text
from workloads.inputs.yaml_files import layout_to_yaml, model_to_yaml
from workloads.ops import Transport
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec


@dataclass(frozen=True)
class MegatronBase:
    """A user's Megatron-LM job, written as the model and layout files the search's points load."""

    model_path: str
    layout_path: str
    global_batch: int
    seq_len: int
    ep_max_nodes: int
    recompute_modules: tuple[str, ...]  # the job's selective recomputation, if any
    # (model, layout) files as Megatron builds the job at each (TP, FFN split): the vocabulary padded to 128 x TP,
    # the settings resolve() derives from TP (tp_async_backward) and from EP (dropless)
    by_tp: dict[tuple[int, str], tuple[str, str]]
    dispatchers: tuple[str, ...] = ()  # the token dispatchers the job allows, its own first (none: a dense model)
    model_name: str = ""  # the job's model as the report names it


def write_base(
    args_text: str,
    model: str | None,
    gpus: int,
    folder: Path,
    global_batch: int | None,
    seq_len: int | None,
    tps: tuple[int, ...] = (),
    settings: LayoutSpec | None = None,
) -> MegatronBase:
    """Resolve the job over ``model`` (None: the model its flags give, else moesim's default: presets.megatron_base)
    and write it into ``folder``. The searched fields are the job's to
    start from (the model also at each TP of ``tps``; ``settings``: the fields Megatron-LM has no flag for, from
    ``--set``, as the job's base layout); sequence parallelism is on (Megatron-Core's MoE layer needs it with TP, and a dense model's
    TP saves activations and traffic with it), a pipeline split of the job's own depth is dropped."""
    job, model_spec = megatron_base(parse_megatron_args(args_text), model)
    try:
        run = job.resolve(model_spec, settings, gpus)
    except ConfigError as error:  # said in Megatron's flag terms
        raise job.explain(error) from None
    aligns = not job.args.get("--no-align-param-gather")
    layout = searchable(run.layout, not run.model.moe_layers, aligns)
    folder.mkdir(parents=True, exist_ok=True)
    model_path, layout_path = folder / "model.yaml", folder / "job-layout.yaml"
    write_text(model_path, model_to_yaml(run.model))
    write_text(layout_path, layout_to_yaml(layout))
    by_tp = {}
    for tp in tps:
        for ffn, ep_flag in (("tp", ""), ("ep", " --expert-model-parallel-size 2")):  # the FFN's derived fields
            tp_flags = f" --tensor-model-parallel-size {tp}" + (" --sequence-parallel" if tp > 1 else "") + ep_flag
            try:
                flags = job_flags(args_text, keep=INSTANCE_FLAGS) + tp_flags
                at_tp = parse_megatron_args(flags).resolve(model_spec, settings, gpus)
            except ConfigError:
                continue  # a TP the model cannot take: its points are refused as invalid
            by_tp[tp, ffn] = (str(folder / f"model-tp{tp}.yaml"), str(folder / f"job-layout-tp{tp}-{ffn}.yaml"))
            write_text(by_tp[tp, ffn][0], model_to_yaml(at_tp.model))
            write_text(by_tp[tp, ffn][1], layout_to_yaml(searchable(at_tp.layout, not at_tp.model.moe_layers, aligns)))
    return MegatronBase(
        str(model_path),
        str(layout_path),
        global_batch or job.global_batch_for(gpus),
        seq_len or run.seq_len,
        layout.ep_max_nodes,
        layout.recompute_modules if layout.recompute == "selective" else (),
        by_tp,
        job_dispatchers(args_text, model_spec, gpus, run.layout.token_dispatcher) if run.model.moe_layers else (),
        model_spec.name,
    )


def job_dispatchers(args_text: str, model: ModelSpec, gpus: int, own: str) -> tuple[str, ...]:
    """The job's own token dispatcher ``own``, then each other of Megatron-Core's with which Megatron-LM builds the job
    the same but for the dispatcher (resolved at EP 2): a flag that needs one dispatcher (--moe-shared-expert-overlap:
    alltoall or flex; --moe-expert-rank-capacity-factor: flex with hybridep) or a setting that follows from one
    (drop-and-pad skips the host sync under alltoall and HybridEP only) keeps the others out of the search."""
    at_ep = " --expert-model-parallel-size 2"
    try:
        job = parse_megatron_args(job_flags(args_text) + at_ep).resolve(model, None, gpus)
    except ConfigError:
        return (own,)
    kept = [own]
    for name in (name for name in MEGATRON_DISPATCHERS if name != own):
        flags = f"{job_flags(args_text, DISPATCHER_FLAGS)} {DISPATCHERS[name].megatron}{at_ep}"
        try:
            other = parse_megatron_args(flags).resolve(model, None, gpus)
        except ConfigError:
            continue
        if other.model == job.model and other.layout == job.layout.with_(token_dispatcher=name):
            kept.append(name)
    return tuple(kept)


def searchable(layout: LayoutSpec, dense: bool, aligns: bool = True) -> LayoutSpec:
    """A job's layout as the base of searched points: sequence parallelism on, its own pipeline split dropped; a
    dense model's FFN under TP (Megatron resolves EP 1 as ffn "ep", dropless, which a TP FFN point would break).
    ``aligns``: whether the job lets Megatron-LM align the weight gathers (no --no-align-param-gather), kept as the
    base's align_param_gather; each point then aligns only under the interleaved schedule, as Megatron-LM does
    (experiments/search/space.py megatron_aligned)."""
    layout = layout.with_(
        name="megatron-job",
        sequence_parallel=True,
        block_layers=(),
        recompute_kept_layers=0,
        align_param_gather=aligns,
    )
    return layout.with_(ffn="tp", dropless=False, ep=0, etp=1) if dense else layout


def megatron_flags(layout: LayoutSpec, row: dict[str, str]) -> str:
    """The Megatron-LM arguments of a searched row's layout (``layout``: the base with the row's fields)."""
    sizes = (int(row["global_batch"]), int(row["seq_len"]), None)
    workload, *_ = prepare(row["model"], layout, int(row["gpus"]), row["cluster"], *sizes, True)
    tp = layout.intra_size
    flags = [f"--tensor-model-parallel-size {tp}"] + (["--sequence-parallel"] if tp > 1 else [])
    flags.append(f"--pipeline-model-parallel-size {layout.pp}")
    if layout.virtual_stages > 1:
        flags.append(f"--num-virtual-stages-per-pipeline-rank {layout.virtual_stages}")
    if layout.uneven_pp:  # Megatron takes an uneven split as a layout string
        counts = tuple(len(layers) for layers in workload.block_ranges)
        flags.append(f"--pipeline-model-parallel-layout '{layout_text(counts, workload.model.mtp_layers)}'")
    flags.append(f"--context-parallel-size {layout.cp}")
    if workload.model.moe_layers and layout.ffn == "ep":
        flags.append(f"--expert-model-parallel-size {layout.ep_degree} --expert-tensor-parallel-size {layout.etp}")
    elif workload.model.moe_layers:  # every expert split over the TP group
        flags.append(f"--expert-model-parallel-size 1 --expert-tensor-parallel-size {tp}")
    if workload.model.moe_layers and DISPATCHERS[layout.token_dispatcher].megatron:  # the job's own, or searched
        flags.append(DISPATCHERS[layout.token_dispatcher].megatron)
    flags.append(f"--micro-batch-size {layout.micro_batch}")
    if layout.dp_instances > 1:  # the job's, or fewer where they do not divide this DP (space.instances_for)
        flags.append(f"--num-distributed-optimizer-instances {layout.dp_instances}")
        flags.append(f"--outer-dp-sharding-strategy {layout.outer_dp_sharding}")
    if layout.ep_overlap:
        flags.append("--overlap-moe-expert-parallel-comm" + (" --delay-wgrad-compute" if layout.delay_wgrad else ""))
    if layout.recompute == "selective":
        flags.append(f"--recompute-granularity selective --recompute-modules {' '.join(layout.recompute_modules)}")
    elif layout.recompute == "full":  # recompute_to_fit keeps the last layers of each chunk: the block method
        recomputed = workload.layers_per_chunk - workload.layout.recompute_kept_layers  # of the fullest chunk
        if recomputed > 0:
            flags.append(f"--recompute-granularity full --recompute-method block --recompute-num-layers {recomputed}")
    return " ".join(flags)


def caveats(layout: LayoutSpec, gpus_per_node: int) -> list[str]:
    """What to know before running a searched layout: a flag of the job Megatron-LM would refuse with it, and
    a mechanism the validation finds over-credited."""
    lines = []
    if layout.tp_comm_overlap and layout.intra_size == 1:  # Megatron-LM refuses it at TP 1
        lines.append("and drop the job's --tp-comm-overlap: Megatron-LM needs TP > 1 with --sequence-parallel for it")
    nccl = DISPATCHERS[layout.token_dispatcher].transport(2) == Transport.NCCL  # its cross-node transport
    if layout.ep_overlap and nccl and layout.ep_degree > gpus_per_node:
        lines.append(
            "caution: it overlaps NCCL's all-to-all across nodes, which the simulator credits more than measured "
            "(moesim validate: the matched pair bridge-ab-qwen3-30b-a3b-bf16-alltoall-epoverlap); check the "
            "runner-up without EP overlap"
        )
    return lines
