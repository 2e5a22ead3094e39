"""``moesim search``: enumerate layouts that fit in memory, simulate them in parallel, list the fastest."""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable
from pathlib import Path

from experiments.common.parallel import Workers
from experiments.common.paths import temporary_folder
from experiments.common.progress import Lines
from experiments.search.bound import BoundPruner, bounds, by_bound
from experiments.search.fix_values import space_choices
from experiments.search.space import Job, Pruned, SearchSpace, layouts
from experiments.search.space_size import space_size
from experiments.search.sweep import Params, read_rows, run_sweep
from simulator.report.simulate import simulate, split_if_balanced
from topologies.cluster import cluster_preset
from topologies.errors import ConfigError
from workloads.graph.step import DEFAULT_GLOBAL_BATCH, DEFAULT_SEQ_LEN
from workloads.inputs.yaml_files import layout_to_yaml, load_layout, load_model
from workloads.specs.layouts import LAYOUT_PRESETS, LayoutSpec
from workloads.specs.models import ModelSpec

BASE_LAYOUT = "megascale-moe"  # the techniques (overlaps, kernels, ZeRO-1) searched layouts keep
# Layouts of the space, by formula: each memory-checked, those that fit bounded (~0.03 CPU-s), those that can rank
# simulated (~0.3 CPU-s each). The default spaces fit, each token dispatcher of a layout a point of its own:
# DeepSeek-V3 on 512 H800s 5,945, Mixtral-8x7B on 64 4,703, Qwen3-235B-A22B on 256 7,841.
DEFAULT_MAX_POINTS = 8_000
BASE_RECOMPUTE = "sar"  # the base layout's, which the narrow space keeps


def candidates(
    model: str,
    gpus: int,
    *,
    cluster: str = "h800",
    global_batch: int = DEFAULT_GLOBAL_BATCH,
    seq_len: int = DEFAULT_SEQ_LEN,
    space: SearchSpace | None = None,
    base: str = BASE_LAYOUT,
    workers: Workers | None = None,
    by_tp: dict[tuple[int, str], tuple[str, str]] | None = None,
) -> tuple[list[Params], Pruned]:
    """The layouts of ``space`` (default: wide) over ``base`` (a layout preset or file) that are valid and fit
    in HBM, as sweep points, and what was pruned before simulation (experiments/search/space.py); the memory
    checks on ``workers`` where given. ``by_tp``: (model, base layout) files by (TP, FFN split) in place of
    ``model`` and ``base`` (a Megatron job as built at each TP)."""
    spec, job = load_model(model), job_of(cluster, gpus, global_batch, seq_len)
    files = by_tp or {}
    bases = {key: (load_model(m), load_layout(lay)) for key, (m, lay) in files.items()}
    fields, pruned = layouts(spec, load_layout(base), job, space or SearchSpace.wide(), workers, bases)
    point = {"model": model, "layout": base, "gpus": gpus, "global_batch": global_batch, "seq_len": seq_len}
    points = [{**point, "cluster": cluster, **f} for f in fields]
    by_key = {key: {"model": m, "layout": lay} for key, (m, lay) in files.items()}
    return [{**p, **by_key.get((int(p["intra_size"]), str(p["ffn"])), {})} for p in points], pruned


def job_of(cluster: str, gpus: int, global_batch: int, seq_len: int) -> Job:
    """What a layout must fit on ``gpus`` GPUs of the ``cluster`` preset."""
    cluster_spec = cluster_preset(cluster, gpus)
    return Job(gpus, cluster_spec.gpus_per_node, global_batch, seq_len, cluster_spec.gpu.hbm_bytes)


def check_size(
    model: str, gpus: int, cluster: str, global_batch: int, seq_len: int, space: SearchSpace, most: int
) -> int:
    """The layouts of ``space`` by formula (experiments/search/space_size.py); more than ``most`` is a ConfigError
    before any is built."""
    model_spec, job = load_model(model), job_of(cluster, gpus, global_batch, seq_len)
    size = space_size(model_spec, job, space)
    if size > most:
        raise ConfigError(
            "max-points",
            f"the space holds {size:,} layouts (by formula, before any is built), over --max-points {most:,}; "
            f"pin dimensions with --fix ({_pinned_sizes(model_spec, job, space)}), or raise --max-points (each layout "
            "costs a memory check, about 5 ms, those that fit a bound, about 0.03 s, and those that can rank a "
            "simulation, about 0.3 s)",
        )
    return size


def _pinned_sizes(model: ModelSpec, job: Job, space: SearchSpace) -> str:
    """What the usual first pins, one CP rank and one sequence per micro-batch, leave of ``space``, alone and
    together (by formula), so that the --max-points refusal says how far each gets."""
    choices = space_choices(space)
    pins = [f"{key}=1" for key in ("micro_batch", "cp") if len(choices.get(key, ())) > 1 and "1" in choices[key]]
    if not pins:
        return "e.g. --fix micro_batch=1 --fix cp=1"
    sizes = [f"--fix {pin} leaves {space_size(model, job, space.fix([pin])):,} layouts" for pin in pins]
    if len(pins) > 1:
        sizes.append(f"both {space_size(model, job, space.fix(pins)):,}")
    return ", ".join(sizes)


def fastest(table: Path, top: int) -> list[dict[str, str]]:
    """The ``top`` rows without errors, highest tokens/s first."""
    rows = [r for r in read_rows(table) if not r["error"]]
    return sorted(rows, key=lambda r: (-float(r["tokens_per_s"]), r["point_id"]))[:top]  # ties: by point, not finish


def _schedule_text(row: dict[str, str]) -> str:
    text = row["schedule"] + (f" x{row['virtual_stages']}" if row["virtual_stages"] != "1" else "")
    return text + (" +ovl" if row.get("ep_overlap") == "True" else "")


def _ep_text(row: dict[str, str]) -> str:
    """The EP degree of an EP FFN (intra_size when in-node), then xETP and /M where set; "-" for TP experts."""
    if row["ffn"] != "ep":
        return "-"
    text = row.get("ep") not in ("", "0", None) and row["ep"] or row["intra_size"]
    if row.get("etp") not in ("", "1", None):
        text += f"x{row['etp']}"
    if row.get("ep_max_nodes") not in ("", "0", None):
        text += f"/{row['ep_max_nodes']}"
    return text


def format_rows(rows: list[dict[str, str]], tied: list[bool] | None = None, needs: list[str] | None = None) -> str:
    """A fixed-width table of search results ("-" in the ffn column of a dense model, which has no experts), with
    a tie column ("=": within the error band of the fastest) and, where given, what of MegaScale-MoE each needs."""
    dense = bool(rows) and not load_model(rows[0]["model"]).moe_layers
    tied = tied or [False] * len(rows)
    needs_head = f" {'needs':>18}" if needs else ""
    dispatched = any(r.get("token_dispatcher") for r in rows)  # a space that searches the token dispatcher
    lines = [
        (
            f"{'#':>3} {'attn':>4} {'ffn':>3} {'n':>2} {'ep':>6} "
            + (f"{'dispatcher':>13} " if dispatched else "")
            + f"{'cp':>2} {'pp':>3} {'dp':>4} {'mb':>2} "
            f"{'schedule':>18} {'recompute':>10} {'step s':>8} {'tie':>3} {'tokens/s':>10} {'MFU':>6} {'mem GiB':>8}"
            + needs_head
        )
    ]
    for rank, r in enumerate(rows, 1):
        lines.append(
            f"{rank:>3} {r['attention']:>4} {'-' if dense else r['ffn']:>3} {r['intra_size']:>2} {_ep_text(r):>6} "
            + (f"{r.get('token_dispatcher') or '-':>13} " if dispatched else "")
            + f"{r.get('cp') or '1':>2} {r['pp']:>3} {r['dp']:>4} {r['micro_batch']:>2} {_schedule_text(r):>18} "
            f"{r.get('recompute') or BASE_RECOMPUTE:>10} {float(r['step_time_s']):>8.3f} "
            f"{'=' if tied[rank - 1] else '':>3} {float(r['tokens_per_s']):>10,.0f} {float(r['mfu']) * 100:>5.1f}% "
            f"{float(r['peak_memory_gib']):>8.1f}" + (f" {needs[rank - 1]:>18}" if needs else "")
        )
    return "\n".join(lines)


SEARCHED = (
    "attention",
    "ffn",
    "intra_size",
    "ep",
    "etp",
    "ep_max_nodes",
    "cp",
    "pp",
    "uneven_pp",
    "micro_batch",
    "schedule",
    "virtual_stages",
    "ep_overlap",
    "delay_wgrad",
    "recompute",
    "recompute_modules",
    "recompute_to_fit",
    "token_dispatcher",
    "dp_instances",  # not searched: the job's, as many as divide the point's DP (space.instances_for)
    "outer_dp_sharding",
)
LEGEND = (
    "columns: attn = attention split (sp: Ulysses sequence parallel, tp: tensor parallel); ffn = experts "
    "(ep: expert parallel, tp: every expert split); n = its degree inside the node; ep = the EP degree (over "
    "n means across nodes; xE: expert-tensor parallel E; /M: a token reaches at most M nodes); cp = context "
    "parallel; pp = pipeline stages; dp = data-parallel replicas; mb = "
    "micro-batch (sequences); schedule = pipeline schedule (x chunks per stage, +ovl: EP all-to-all "
    "overlapped with another micro-batch, wgrad delayed); recompute = what backward re-runs (none, sar, "
    "selective modules, full); step s = one step; tokens/s = the whole cluster; MFU = GEMM + FlashAttention "
    "FLOPs over peak; mem GiB = peak memory per GPU; tie = within the error band of the fastest"
)
DISPATCHER_LEGEND = (
    "; dispatcher = Megatron-Core's token dispatcher (alltoall, allgather, flex-deepep and flex-hybridep: the flex "
    "dispatcher with DeepEP's or HybridEP's kernels), searched where the EP group has more than one rank"
)
NEEDS_LEGEND = (
    "; needs = what of MegaScale-MoE the layout uses that Megatron-LM cannot run (ulysses: Ulysses SP attention, "
    "sar: selective activation rematerialization, fused: GEMMs fused with their all-gather / reduce-scatter)"
)


def assumptions(model: str, gpus: int, cluster: str, global_batch: int, seq_len: int, *, megatron: bool = False) -> str:
    """The line that states what the search assumed."""
    kept = (
        "the Megatron-LM job's own settings (dispatcher, precision, overlaps, CUDA graphs; sequence parallelism on), "
        "Megatron-Core's schedules and recomputation"
        if megatron
        else f"{BASE_LAYOUT}'s overlaps and ZeRO-1"
    )
    return (
        f"search: {model} on {gpus} {cluster} GPUs, global batch {global_batch} sequences of {seq_len} tokens "
        f"(--global-batch, --seq-len); every layout keeps {kept}"
    )


def _base(row: dict[str, str]) -> str:
    """The layout a result row's fields go on top of: the preset, or the Megatron job's layout file."""
    return row.get("layout") or BASE_LAYOUT


def row_layout(row: dict[str, str]) -> LayoutSpec:
    """A result row's whole layout: its base with the searched fields."""
    return load_layout(_base(row)).with_(**layout_fields(row))


def layout_fields(row: dict[str, str]) -> dict[str, object]:
    """The searched layout fields of a result row that differ from the base layout, typed (the CSV holds
    text: "4", "True", "('core_attn', 'moe_act')")."""
    base = load_layout(_base(row))
    fields: dict[str, object] = {}
    for key in SEARCHED:
        text = row.get(key) or ""
        if not text:
            continue  # a point of the narrow space leaves it at the base layout's
        literal = text.isdigit() or text in ("True", "False") or text.startswith("(")
        value = ast.literal_eval(text) if literal else text
        if value != getattr(base, key) or key == "micro_batch":
            fields[key] = value
    return fields


def _text(value: object, separator: str) -> str:
    """A field value as --set (separator ",") or YAML (separator ", " in brackets) takes it."""
    if isinstance(value, tuple):
        return separator.join(map(str, value)) if separator == "," else f"[{', '.join(map(str, value))}]"
    return str(value).lower() if isinstance(value, bool) else str(value)


def run_command(row: dict[str, str], layout_file: str | None = None) -> str:
    """The ``moesim run`` command line of a result row (with ``--layout FILE`` if one was written)."""
    head = f"moesim run --model {row['model']} --cluster {row['cluster']} --gpus {row['gpus']} "
    head += f"--global-batch {row['global_batch']} --seq-len {row['seq_len']}"
    if layout_file:
        return f"{head} --layout {layout_file}"
    fields = layout_fields(row)
    sets = " ".join(f"--set {k}={_text(v, ',')}" for k, v in fields.items() if k != "micro_batch")
    return f"{head} --micro-batch {fields['micro_batch']} --layout {_base(row)} {sets}"


def layout_yaml(row: dict[str, str]) -> str:
    """A layout file of a result row: the base preset and the searched fields."""
    lines = [
        f"# moesim search: the fastest layout of {row['model']} on {row['gpus']} {row['cluster']} GPUs,",
        (
            f"# global batch {row['global_batch']} x {row['seq_len']} tokens: "
            f"{float(row['tokens_per_s']):,.0f} tokens/s, {float(row['peak_memory_gib']):.1f} GiB per GPU"
        ),
    ]
    base = _base(row)
    if base not in LAYOUT_PRESETS:  # a layout file (a Megatron job's): every field
        return "\n".join(lines) + "\n" + layout_to_yaml(row_layout(row))
    return (
        "\n".join(lines + [f"base: {base}"] + [f"{k}: {_text(v, ', ')}" for k, v in layout_fields(row).items()]) + "\n"
    )


def balanced_line(row: dict[str, str]) -> str:
    """The fastest row again with its layers split by cost (layout balance_blocks), where that changes the split:
    its step time against the row's; '' where the split stays (or one stage holds every layer)."""
    fields = layout_fields(row)
    if int(row["pp"]) < 2:
        return ""
    micro_batch = fields.pop("micro_batch")
    layout = load_layout(_base(row)).with_(**fields)
    model, gpus, sizes = row["model"], int(row["gpus"]), (int(row["global_batch"]), int(row["seq_len"]))
    split = split_if_balanced(model, layout, gpus, row["cluster"], *sizes, micro_batch)
    if not split:
        return ""
    run = {"cluster": row["cluster"], "global_batch": sizes[0], "seq_len": sizes[1], "micro_batch": micro_batch}
    try:
        report = simulate(model, layout.with_(balance_blocks=True), gpus, **run)
    except ConfigError as error:
        return f"balanced split {split} (--set balance_blocks=true): {error}"
    change = report.step_time_s / float(row["step_time_s"]) - 1
    return (
        f"balanced split: the fastest with --set balance_blocks=true ({split}) takes "
        f"{report.step_time_s:.3f} s, {change:+.1%}"
    )


def search(
    model: str,
    gpus: int,
    *,
    cluster: str = "h800",
    global_batch: int | None = None,
    seq_len: int | None = None,
    jobs: int = 1,
    scheduler: str | None = None,
    top: int = 10,
    out: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
    quiet: bool = False,
    space: SearchSpace | None = None,
    max_points: int = DEFAULT_MAX_POINTS,
    prune: bool = True,
    base: str = BASE_LAYOUT,
    by_tp: dict[tuple[int, str], tuple[str, str]] | None = None,
) -> list[dict[str, str]]:
    """Simulate every candidate layout of ``space`` (default: wide) over ``base`` (resumable if ``out`` is given) and
    return the fastest ``top``; more than ``max_points`` candidates is a ConfigError before any simulation.
    ``prune=False`` simulates every candidate (the same top rows, slower: experiments/search/bound.py). Every
    phase (memory checks, bounds, simulations) runs on the same ``jobs`` local processes or dask ``scheduler``.
    ``by_tp``: the model and base layout files each point simulates by its TP (intra_size) and FFN split, as a
    Megatron job builds them, for the memory checks and the simulations."""
    say = progress or (lambda line: None if quiet else print(line, file=sys.stderr, flush=True))
    global_batch, seq_len = global_batch or DEFAULT_GLOBAL_BATCH, seq_len or DEFAULT_SEQ_LEN
    space = space or SearchSpace.wide()
    size = check_size(model, gpus, cluster, global_batch, seq_len, space, max_points)
    say(f"search: {size:,} layouts in the space; checking which are valid and fit in memory")
    with Workers(jobs, scheduler) as workers:
        points, pruned = candidates(
            model,
            gpus,
            cluster=cluster,
            global_batch=global_batch,
            seq_len=seq_len,
            space=space,
            base=base,
            workers=workers,
            by_tp=by_tp,
        )
        parallel = {tuple((k, v) for k, v in p.items() if k != "token_dispatcher") for p in points}
        each = f" ({len(parallel)} parallel layouts, each with its token dispatchers)" if space.dispatchers else ""
        say(f"search: {len(points)} layouts to simulate{each}; pruned before simulation: {pruned.summary()}")
        if not points:
            raise ConfigError("gpus", f"no layout of {model} on {gpus} GPUs fits in memory ({pruned.summary()})")
        if prune:
            say("search: bounding each layout's step time from below (its pipeline replayed, tasks timed alone)")
        return rank(points, workers=workers, top=top, out=out, progress=progress, quiet=quiet, prune=prune)


def rank(
    points: list[Params],
    *,
    jobs: int = 1,
    scheduler: str | object | None = None,
    workers: Workers | None = None,
    top: int = 10,
    out: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
    quiet: bool = False,
    prune: bool = True,
) -> list[dict[str, str]]:
    """The ``top`` fastest of ``points``: with ``prune``, most promising first and skipping those whose
    lower bound cannot rank (experiments/search/bound.py; the same rows as simulating every point). Bounds and
    simulations run on ``workers``, else on ``jobs`` local processes or the dask cluster ``scheduler``."""
    if workers is None:
        with Workers(jobs, scheduler) as started:
            return rank(points, workers=started, top=top, out=out, progress=progress, quiet=quiet, prune=prune)
    options = {"workers": workers, "progress": progress, "quiet": quiet}
    if prune:
        lower_bounds = bounds(points, workers=workers)
        options["prune"] = BoundPruner(points, lower_bounds, top)
        points = by_bound(points, lower_bounds)
    options["watch"] = _lines(len(points), quiet, progress, options.get("prune"))  # its clock starts here
    if out is not None:
        return fastest(run_sweep(points, out, **options), top)
    with temporary_folder("moesim-search-") as folder:
        return fastest(run_sweep(points, folder / "search.csv", **options), top)


def _lines(
    total: int, quiet: bool, progress: Callable[[str], None] | None, pruner: BoundPruner | None = None
) -> Callable[[dict], None] | None:
    """Progress lines on stderr where it is a log, not a terminal (experiments/common/progress.py): the points
    simulated of ``total`` less those the ``pruner`` will skip (their bound exceeds the best rows' already: most
    token dispatcher variants of a Megatron-Core space), the best step time so far, an ETA."""
    if progress is not None:
        return None  # the caller gets a line per point
    lines = Lines(total, "search: simulated", lambda line: print(line, file=sys.stderr, flush=True), quiet=quiet)
    best_s = [float("inf")]
    done: set[str] = set()

    def watch(row: dict) -> None:
        if not row.get("error"):
            best_s[0] = min(best_s[0], float(row["step_time_s"]))
        done.add(str(row.get("point_id")))
        if pruner is not None:  # those not run whose bound exceeds the threshold: skipped, or to be (it only falls)
            lines.total = total - pruner.cannot_rank(done)
        lines.update(f"{best_s[0]:.3f} s per step" if best_s[0] < float("inf") else "")

    return watch
