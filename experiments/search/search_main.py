"""``moesim search`` on the command line: what was assumed, the fastest layouts with their ties, and the winner
as the user acts on it (Megatron-LM arguments, a layout file, a ``moesim run`` line: experiments/search/answer.py)."""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

from experiments.common.paths import temporary_folder, write_text
from experiments.common.presets import DEFAULT_MODEL
from experiments.search.answer import (
    DISPATCHER_FLAGS,
    bands,
    compact_yaml,
    default_job,
    job_flags,
    needs_megascale,
    run_line,
    ties,
    ties_note,
)
from experiments.search.compare import parse_setting
from experiments.search.megatron import caveats, megatron_flags, write_base
from experiments.search.search import (
    BASE_LAYOUT,
    DEFAULT_MAX_POINTS,
    DISPATCHER_LEGEND,
    LEGEND,
    NEEDS_LEGEND,
    assumptions,
    balanced_line,
    format_rows,
    layout_yaml,
    row_layout,
    run_command,
    search,
)
from experiments.search.space import SPACES, SearchSpace, divisors
from topologies.cluster import cluster_preset
from topologies.errors import ConfigError
from workloads.graph.step import DEFAULT_GLOBAL_BATCH, DEFAULT_SEQ_LEN
from workloads.inputs.yaml_files import load_model
from workloads.specs.layouts import LayoutSpec


def main_search(args: argparse.Namespace) -> None:
    """CLI entry: what was assumed, the fastest layouts with their memory, the columns, the winner to run. The
    default space is Megatron-Core's around a Megatron-LM job (the user's, or DEFAULT_MEGATRON_JOB)."""
    if args.megatron_args and args.space != "megatron":
        raise ConfigError("space", f"--megatron-args searches what Megatron-Core runs; drop --space {args.space}")
    if args.space == "megatron":
        if args.out is not None:  # the job's files beside the CSV, so that the search resumes
            _main_search(args, Path(args.out).with_suffix(".megatron-job"))
            return
        with temporary_folder("moesim-megatron-job-") as folder:
            _main_search(args, folder)
        return
    _main_search(args, None)


def _main_search(args: argparse.Namespace, job_folder: Path | None) -> None:
    global_batch, seq_len = args.global_batch or DEFAULT_GLOBAL_BATCH, args.seq_len or DEFAULT_SEQ_LEN
    name = args.model or DEFAULT_MODEL
    model, base, space = name, BASE_LAYOUT, SPACES[args.space]()
    job_text = args.megatron_args or default_job(load_model(name))
    by_tp: dict[tuple[int, str], tuple[str, str]] | None = None
    if job_folder is not None:
        gb, sl = (args.global_batch, args.seq_len) if args.megatron_args else (global_batch, seq_len)
        tps = tuple(divisors(cluster_preset(args.cluster, args.gpus).gpus_per_node))  # the searched TP degrees
        settings = _settings(args.set)
        job = write_base(
            job_text, args.model if args.megatron_args else name, args.gpus, job_folder, gb, sl, tps, settings
        )
        by_tp, name = job.by_tp, job.model_name
        model, base = job.model_path, job.layout_path
        space = SearchSpace.megatron(job.ep_max_nodes, job.recompute_modules, job.dispatchers)
        global_batch, seq_len = job.global_batch, job.seq_len
    elif args.set:
        raise ConfigError("--set", "fixes a field of a Megatron-LM job's search (--space megatron); here use --fix")
    space = space.fix(args.fix)  # a bad --fix is refused before anything is printed
    print(assumptions(name, args.gpus, args.cluster, global_batch, seq_len, megatron=job_folder is not None))
    if job_folder is not None and not args.megatron_args:
        print(f"  the Megatron-LM job: {job_text} (--megatron-args for yours; --space megascale adds MegaScale-MoE's)")
    try:
        rows = search(
            model,
            args.gpus,
            cluster=args.cluster,
            global_batch=global_batch,
            seq_len=seq_len,
            jobs=args.jobs,
            scheduler=args.scheduler,
            top=args.top,
            out=args.out,
            quiet=args.quiet,
            space=space,
            max_points=args.max_points or DEFAULT_MAX_POINTS,
            prune=not args.exhaustive,
            base=base,
            by_tp=by_tp,
        )
    except ConfigError as error:  # the job's model file is a temporary path: say the model as given
        raise ConfigError(error.field, error.rule.replace(model, name)) from None
    layouts = [row_layout(row) for row in rows]
    row_bands = bands(rows, layouts, cluster_preset(args.cluster, args.gpus).gpu.name)
    marks = ties(rows, row_bands)
    needs = None if job_folder is not None else [needs_megascale(layout) or "-" for layout in layouts]
    print(format_rows(rows, marks, needs))
    legend = (
        LEGEND if job_folder is None else LEGEND.replace("sp: Ulysses sequence parallel, ", "").replace("sar, ", "")
    )
    legend += DISPATCHER_LEGEND if any(row.get("token_dispatcher") for row in rows) else ""
    print(textwrap.fill(legend + (NEEDS_LEGEND if needs else ""), width=110, subsequent_indent="  "))
    if not rows:
        return
    print(textwrap.fill(ties_note(marks, row_bands), width=110, subsequent_indent="  "))
    if job_folder is None:
        _print_moesim_winner(args, rows[0])
    else:
        _print_megatron_winner(args, rows[0], layouts[0], job_text, global_batch, seq_len)


def _settings(items: list[str]) -> LayoutSpec | None:
    """--set FIELD=VALUE items as the Megatron job's base layout (the fields Megatron-LM has no flag for), or None."""
    if not items:
        return None
    changes = dict(parse_setting(item)[::2] for item in items)
    return LayoutSpec("megatron-args").with_(**changes)


def _print_moesim_winner(args: argparse.Namespace, row: dict[str, str]) -> None:
    """The fastest of a moesim space (megascale, narrow): its layout file and ``moesim run`` line."""
    if args.write_layout:
        write_text(args.write_layout, layout_yaml(row))
        print(f"wrote the fastest layout to {args.write_layout}")
    balanced = balanced_line(row)
    if balanced:
        print(balanced)
    print(f"fastest: {run_command(row, args.write_layout)}")


def _print_megatron_winner(
    args: argparse.Namespace, row: dict[str, str], layout: LayoutSpec, job_text: str, global_batch: int, seq_len: int
) -> None:
    """The fastest of Megatron-Core's space: as Megatron-LM arguments (the job's own with the searched layout's
    in place of its parallel ones), as a moesim layout file, and as a ``moesim run`` line."""
    searched = megatron_flags(layout, row)
    drop = ("--tp-comm-overlap",) if layout.intra_size == 1 else ()  # Megatron-LM refuses it at TP 1 (caveats)
    drop += DISPATCHER_FLAGS  # the row's dispatcher is among the searched flags
    line = f"{job_flags(job_text, drop)} {searched} --global-batch-size {global_batch} --seq-length {seq_len}"
    print(f"fastest, as Megatron-LM arguments: {line}")
    for caveat in caveats(layout, cluster_preset(args.cluster, args.gpus).gpus_per_node):
        print(f"  {caveat}")
    name = args.model or "the job's model"
    header = [f"moesim search: the fastest layout of {name} on {args.gpus} {args.cluster} GPUs ({searched})"]
    text = compact_yaml(layout.with_(name="searched"), header)
    if args.write_layout:
        write_text(args.write_layout, text)
        print(f"fastest, as a moesim layout file (written to {args.write_layout}):")
    else:
        print("fastest, as a moesim layout file (--write-layout FILE writes it):")
    print(textwrap.indent(text, "  "), end="")
    print(f"fastest, simulated again: {run_line(args.model, row, line, tuple(args.set))}")
