"""The fastest layout of ``moesim search`` as a user acts on it (issue 41 item 1): the Megatron-LM arguments, a
moesim layout file and a ``moesim run`` line that simulates it again; which rows need MegaScale-MoE's features;
which rows tie the fastest within the error band of their predictions (experiments/common/error_band.py)."""

from __future__ import annotations

import shlex
from dataclasses import fields

import yaml

from experiments.common.error_band import ErrorBand, band_of
from workloads.inputs.megatron_args import read_text
from workloads.inputs.shell_script import command_words
from workloads.inputs.yaml_files import load_model
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec

# The Megatron-LM job the default search varies the parallel layout of: Megatron-Core's MoE layer as its MoE
# examples run it (examples/mixtral/train_mixtral_8x7b_distributed.sh, examples/deepseek_v3 at d98e8a64dd):
# the all-to-all token dispatcher, grouped expert GEMMs, sequence parallelism, the distributed optimizer with
# overlapped gradient reduce-scatter and parameter all-gather, BF16.
DEFAULT_MEGATRON_JOB = (
    "--moe-token-dispatcher-type alltoall --moe-grouped-gemm --sequence-parallel --use-distributed-optimizer "
    "--overlap-grad-reduce --overlap-param-gather --bf16"
)


def default_job(model: ModelSpec) -> str:
    """DEFAULT_MEGATRON_JOB (without its MoE flags for a dense model) with the flags that make Megatron-LM build
    ``model`` as moesim simulates it:
    its FFN activation (SwiGLU, squared ReLU, else Megatron's GeLU), untied embeddings where the model has them, its MTP
    modules
    (workloads/inputs/megatron_model.py: without these Megatron builds GeLU, ties the embeddings, trains no MTP)."""
    activation = {"swiglu": "--swiglu", "squared_relu": "--squared-relu"}.get(model.ffn_activation)  # else GeLU
    flags = [
        DEFAULT_MEGATRON_JOB if model.moe_layers else DEFAULT_MEGATRON_JOB.split(" --sequence-parallel ")[1],
        *([activation] if activation else []),
    ]
    if not model.tied_embeddings:
        flags.append("--untie-embeddings-and-output-weights")
    if model.mtp_layers:
        flags.append(f"--mtp-num-layers {model.mtp_layers}")
    return " ".join(flags)


# The job's DP instances: each point keeps as many as divide its DP (workloads/specs/hybrid_dp.py fitted), and says so
INSTANCE_FLAGS = ("--num-distributed-optimizer-instances", "--outer-dp-sharding-strategy")
# The flags (by prefix) that megatron_flags (experiments/search/megatron.py) sets from a searched layout.
SEARCHED_FLAGS = (
    "--tensor-model-parallel",
    "--pipeline-model-parallel",
    "--sequence-parallel",
    "--expert-model-parallel",
    "--expert-tensor-parallel",
    "--context-parallel",
    "--micro-batch-size",
    "--num-virtual-stages",
    "--virtual-pipeline",
    "--num-layers-per-virtual",
    "--decoder-first-pipeline",
    "--decoder-last-pipeline",
    "--account-for-",
    "--recompute-",
    "--overlap-moe-expert-parallel-comm",
    "--delay-wgrad-compute",
    "--global-batch-size",
    "--seq-length",
    *INSTANCE_FLAGS,
)


# The flags that select the token dispatcher (workloads/inputs/megatron.py): the search prints its point's
# (experiments/search/megatron.py megatron_flags) in place of the job's.
DISPATCHER_FLAGS = ("--moe-token-dispatcher-type", "--moe-flex-dispatcher-backend", "--moe-enable-deepep")


def needs_megascale(layout: LayoutSpec) -> str:
    """What of MegaScale-MoE a layout uses that Megatron-Core cannot run: Ulysses SP attention, SAR, the fused
    GEMM + all-gather / reduce-scatter kernels (intra-op overlap); '' for none."""
    needs = []
    if layout.attention == "sp":
        needs.append("ulysses")
    if layout.recompute == "sar":
        needs.append("sar")
    if layout.intra_op_overlap:
        needs.append("fused")
    return ",".join(needs)


def compact_yaml(layout: LayoutSpec, header: list[str]) -> str:
    """A layout file of ``layout``: the fields that differ from LayoutSpec's defaults (a file without ``base``
    takes those), after ``header`` as comments."""
    default = LayoutSpec(layout.name)
    changed = {
        f.name: getattr(layout, f.name) for f in fields(layout) if getattr(layout, f.name) != getattr(default, f.name)
    }
    data = {"name": layout.name, **{k: list(v) if isinstance(v, tuple) else v for k, v in changed.items()}}
    return "".join(f"# {line}\n" for line in header) + yaml.safe_dump(data, sort_keys=False)


def job_flags(job_text: str, drop: tuple[str, ...] = (), keep: tuple[str, ...] = ()) -> str:
    """A Megatron job's own flags (inline or a file) without those the searched layout sets, which
    ``megatron_flags`` prints (so that the full line sets each once), but those in ``keep``, and those in ``drop``."""
    words = command_words(read_text(job_text)).words
    words = words[next((i for i, w in enumerate(words) if w.startswith("--")), len(words)) :]
    kept: list[str] = []
    skip = False
    for word in words:
        if skip and not word.startswith("--"):
            continue  # the value of a dropped flag
        name = word.split("=")[0]
        skip = (name.startswith(SEARCHED_FLAGS) and name not in keep) or name in drop
        if not skip:
            kept.append(word)
    return shlex.join(kept)


def run_line(model: str | None, row: dict[str, str], megatron_line: str, settings: tuple[str, ...] = ()) -> str:
    """``moesim run`` of the fastest row, as Megatron-LM arguments (the model, cluster and GPUs as searched; no
    --model where the job's flags give the model; ``settings``: the search's --set items, which no flag carries)."""
    plain = "'" in megatron_line and not any(c in megatron_line for c in '"$`\\!')
    quoted = f'"{megatron_line}"' if plain else shlex.quote(megatron_line)  # a pipeline layout's '...' kept readable
    given = f"--model {shlex.quote(model)} " if model else ""
    given += "".join(f"--set {shlex.quote(item)} " for item in settings)
    return f"moesim run {given}--cluster {row['cluster']} --gpus {row['gpus']} --megatron-args {quoted}"


def bands(rows: list[dict[str, str]], layouts: list[LayoutSpec], gpu_name: str) -> list[ErrorBand | None]:
    """The error band of each row's prediction."""
    model = load_model(rows[0]["model"]) if rows else None
    return [band_of(model, layout, gpu_name) for layout in layouts]


def ties(rows: list[dict[str, str]], row_bands: list[ErrorBand | None]) -> list[bool]:
    """Whether each row ties the fastest: its likely step times (the band around its prediction) reach below
    the fastest's likely longest, so the published runs like them cannot tell the two apart. The fastest is not
    marked; a row without a band ties nothing."""
    if not rows or row_bands[0] is None:
        return [False] * len(rows)
    _, best_high_s = row_bands[0].step_range_s(float(rows[0]["step_time_s"]))
    marks = [False]
    for row, band in zip(rows[1:], row_bands[1:]):
        marks.append(band is not None and band.step_range_s(float(row["step_time_s"]))[0] <= best_high_s)
    return marks


def ties_note(marks: list[bool], row_bands: list[ErrorBand | None]) -> str:
    """The sentence under the table that says what the tie column means."""
    if not marks or row_bands[0] is None:
        return "ties: no validated run is like the fastest (run `moesim validate`), so no row is marked as a tie"
    tied = [str(rank) for rank, tie in enumerate(marks, 1) if tie]
    band = row_bands[0]
    head = (
        f"ties (=): rows whose likely step time overlaps the fastest's (its band {band.low:+.0%}/{band.high:+.0%}, "
        f"from {band.basis})"
    )
    if not tied:
        return f"{head}: none, the fastest is ahead beyond its error band"
    return f"{head}: rows {', '.join(tied)} may be as fast; the simulator cannot rank them apart"
