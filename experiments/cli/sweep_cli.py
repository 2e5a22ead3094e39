"""The ``moesim sweep`` and ``moesim search`` subcommands (kept apart from cli.py, which only wires them)."""

from __future__ import annotations

import argparse

from experiments.common.args import integer, nonempty
from experiments.common.paths import check_output_file
from experiments.common.progress import add_quiet


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register the sweep and search subparsers."""
    sweep = commands.add_parser("sweep", help="simulate a YAML grid of configurations into a CSV/Parquet table")
    sweep.add_argument(
        "file",
        help="sweep YAML: model, layout, gpus, global_batch, seq_len, micro_batch, "
        "cluster, nic_gbps or a layout field (scalars or lists), output; model and layout take "
        "presets or .yaml files (relative to the sweep file)",
    )
    sweep.add_argument("--jobs", type=integer(1), default=1, help="local worker processes (default 1)")
    sweep.add_argument(
        "--scheduler", type=nonempty, default=None, help="dask.distributed scheduler address, e.g. tcp://host:8786"
    )
    sweep.add_argument(
        "--out",
        type=nonempty,
        default=None,
        help="write the table here (.csv or .parquet; rerun to resume) instead of the sweep file's output",
    )
    add_quiet(sweep)

    search = commands.add_parser("search", help="find the fastest layouts that fit in memory")
    search.add_argument(
        "--model",
        type=nonempty,
        default=None,
        help="model preset or .yaml file (default paper-352b, or the one --megatron-args' flags give)",
    )
    search.add_argument("--gpus", type=integer(1), required=True, help="number of GPUs")
    search.add_argument(
        "--megatron-args",
        type=nonempty,
        default=None,
        metavar="ARGS",
        help="a Megatron-LM job (inline flags or a file): search the layouts Megatron-Core can run around it "
        "(TP with SP, EP, ETP, CP, PP, VP, micro-batch, EP overlap, recompute), keeping its other settings, and "
        "print the fastest as Megatron arguments; its batch and sequence unless --global-batch / --seq-len "
        "(--fix applies; --space is megatron)",
    )
    search.add_argument("--cluster", type=nonempty, default="h800", help="cluster preset (default h800)")
    search.add_argument("--global-batch", type=integer(1), default=None, help="sequences per step (default 720)")
    search.add_argument("--seq-len", type=integer(1), default=None, help="tokens per sequence (default 8192)")
    search.add_argument("--jobs", type=integer(1), default=1, help="local worker processes (default 1)")
    search.add_argument("--scheduler", type=nonempty, default=None, help="dask.distributed scheduler address")
    search.add_argument("--top", type=integer(1), default=10, help="how many layouts to print (default 10)")
    search.add_argument("--out", default=None, help="keep every simulated point in this CSV (resumable)")
    search.add_argument(
        "--exhaustive",
        action="store_true",
        help="simulate every candidate, also those whose lower bound on the step time cannot rank (same result)",
    )
    search.add_argument(
        "--space",
        choices=("megatron", "megascale", "narrow"),
        default="megatron",
        help="megatron (default): what Megatron-Core runs around a Megatron-LM job (--megatron-args, else the "
        "alltoall dispatcher, grouped GEMMs, distributed optimizer, BF16): TP with SP, EP in and across nodes, ETP, "
        "CP, PP, VP, 1F1B / interleaved with or without EP overlap, selective or full recompute, printed as Megatron-LM "
        "arguments; megascale: MegaScale-MoE's too (Ulysses SP, SAR, fused kernels, ZB1P / DualPipe(V), node-limited "
        "routing), labelled in the table; narrow: in-node EP, ETP 1, 1F1B / interleaved x2, SAR",
    )
    search.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="with --space megatron: a layout field Megatron-LM has no flag for, the same at every point, e.g. --set "
        "peft=lora (repeatable; docs/yaml-reference.md lists the fields)",
    )
    search.add_argument(
        "--fix",
        action="append",
        default=[],
        metavar="DIM=VALUE",
        help="search only points with this value, e.g. --fix micro_batch=1 --fix schedule=dualpipe (repeatable)",
    )
    search.add_argument(
        "--max-points",
        type=integer(1),
        default=None,
        help="refuse before any work if the space holds more layouts than this, counted by formula (default 8,000)",
    )
    search.add_argument("--write-layout", metavar="FILE", default=None, help="write the fastest layout as a YAML file")
    add_quiet(search)


def dispatch(args: argparse.Namespace) -> None:
    """Run the chosen subcommand (Ctrl-C: experiments/cli/failures.py says it, and how to resume a sweep)."""
    if args.command == "sweep":
        from experiments.search.sweep import main_sweep

        main_sweep(args.file, args.jobs, args.scheduler, args.quiet, args.out)
    else:
        from experiments.search.search_main import main_search

        if args.out is not None:
            check_output_file("out", args.out, (".csv",))  # before any simulation
        if args.write_layout is not None:
            check_output_file("write_layout", args.write_layout, (".yaml", ".yml"))

        main_search(args)
