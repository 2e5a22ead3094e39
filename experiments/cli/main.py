"""The ``moesim`` command line."""

from __future__ import annotations

import sys

try:  # the command's modules take about a second to load: a Ctrl-C meanwhile is one line and exit 130 too
    import argparse
    import dataclasses
    import json
    from collections.abc import Callable
    from contextlib import nullcontext
    from pathlib import Path
    from typing import TYPE_CHECKING

    from experiments.cli import run_outputs
    from experiments.cli.failures import exit_status, interrupted
    from experiments.cli.fault_flags import add_fault_arguments
    from experiments.common import presets
    from experiments.common.args import OneLineParser, bandwidth, integer, nonempty, number
    from experiments.common.error_band import band_json, band_of
    from experiments.common.paths import check_output_dir
    from experiments.common.progress import add_quiet
    from simulator.costs.calibration import DEFAULT_CALIBRATION
    from simulator.engine.faults import Faults
    from simulator.engine.gc_budget import fewer_full_collections
    from simulator.report.clusters import DEFAULT_CLUSTER, load_cluster
    from simulator.report.simulate import prepare, simulate, split_if_balanced
    from topologies.bounds import check_physical
    from topologies.cluster import CLUSTER_PRESETS, ClusterSpec
    from topologies.errors import ConfigError
    from workloads.graph.step import DEFAULT_GLOBAL_BATCH, DEFAULT_SEQ_LEN
    from workloads.inputs.yaml_files import load_layout, load_model
    from workloads.specs.layouts import LayoutSpec
except KeyboardInterrupt:  # said here: experiments/cli/failures.py may not be loaded yet
    print("moesim: interrupted", file=sys.stderr)
    sys.exit(130)  # failures.INTERRUPTED

# NOTE: what only some commands or flags use is imported where it is used (compare, validate, sweep / search,
# bench, Megatron arguments, --breakdown, --set), so that `moesim run` loads the simulator and little else
# (issue #38; tests/unit/test_import_weight.py lists what it must not load).
if TYPE_CHECKING:
    from experiments.common.stage_costs import StageCosts
    from workloads.inputs.megatron import MegatronJob, MegatronRun


def _version() -> str:
    """The installed package's version (the source tree's pyproject version when run from a checkout)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("moesim")
    except PackageNotFoundError:
        return "unknown"


class _VersionAction(argparse.Action):
    """--version, looked up only when asked for (importlib.metadata scans every installed package)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_args) -> None:
        print(f"moesim {_version()}")
        parser.exit()


def _parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line; only ``command``'s subparser is filled in (all of them when None), so a command loads
    only its own modules. The others are bare names: argparse only lists them (invalid choice) or never reaches
    them, and ``moesim --help``, which shows them, has no command and builds them all."""
    parser = OneLineParser(prog="moesim", description="Simulate MoE LLM training on GPU clusters.")
    parser.add_argument("--version", action=_VersionAction, help="show program's version number and exit")
    commands = parser.add_subparsers(dest="command", required=True)
    for names, build in _COMMANDS:
        if command is None or command in names:
            build(commands)
        else:
            for name in names:
                commands.add_parser(name)
    return parser


def _add_run(commands: argparse._SubParsersAction) -> None:
    run = commands.add_parser(
        "run",
        help="simulate one training step and print a report",
        epilog=presets.epilog,  # built when --help asks for it (OneLineParser)
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    model_help = f"model preset or .yaml file (default {presets.DEFAULT_MODEL}, or the one --megatron-args' flags give)"
    run.add_argument("--model", type=nonempty, default=None, help=model_help)
    run.add_argument(
        "--layout", type=nonempty, default=None, help="layout preset or .yaml file (default megascale-moe)"
    )
    run.add_argument(
        "--megatron-args",
        type=nonempty,
        metavar="ARGS",
        help="Megatron-LM training arguments (inline, starting with --, or a file): layout, batch, sequence, "
        "precision and model flags; --layout then only fills the fields Megatron has no flag for",
    )
    run.add_argument(
        "--automodel",
        type=nonempty,
        metavar="FILE.yaml",
        help="a NeMo AutoModel recipe YAML, run as its Megatron-Core equivalent (its model, nodes and flags)",
    )
    run.add_argument(
        "--gpus", type=integer(1), default=None, help="number of GPUs (default 240; an --automodel recipe's nodes)"
    )
    run.add_argument(
        "--cluster",
        type=nonempty,
        default=DEFAULT_CLUSTER,
        help=f"cluster preset ({', '.join(CLUSTER_PRESETS)}) or .yaml file (default {DEFAULT_CLUSTER})",
    )
    run.add_argument(
        "--nic-gbps",
        type=bandwidth("nic_gbps"),
        default=None,
        help="NIC bandwidth per GPU: 50GB/s, 400Gb/s, or a bare number of GB/s (default: the cluster's)",
    )
    run.add_argument(
        "--global-batch", type=integer(1), default=None, help=f"sequences per step (default {DEFAULT_GLOBAL_BATCH})"
    )
    run.add_argument(
        "--seq-len", type=integer(1), default=None, help=f"tokens per sequence (default {DEFAULT_SEQ_LEN})"
    )
    run.add_argument("--micro-batch", type=integer(1), default=None, help="sequences per micro-batch")
    run.add_argument("--json", action="store_true", help="print one JSON object")
    run.add_argument(
        "--breakdown",
        action="store_true",
        help="also say where one micro-batch of the busiest stage goes (its tasks timed alone, by kind of op)",
    )
    run.add_argument("--allow-oom", action="store_true", help="simulate even if memory per GPU exceeds HBM")
    run.add_argument(
        "--engine",
        choices=("folded", "unfolded"),
        default="folded",
        help="folded: one GPU per stage stands for all (default); unfolded: every GPU, small clusters only",
    )
    routing_help = "expert routing (default uniform; consecutive: NeMo AutoModel's fake balanced gate)"
    run.add_argument("--routing", choices=("uniform", "zipf", "consecutive"), default=None, help=routing_help)
    run.add_argument("--zipf", type=number(0), default=None, help="Zipf exponent of skewed routing")
    run.add_argument("--seed", type=integer(0), default=None, help="seed of the routing Generator")
    run.add_argument("--dropless", action="store_true", help="no capacity padding or token dropping")
    run.add_argument("--ep", type=integer(1), default=None, help="EP degree (> GPUs per node: across nodes)")
    run.add_argument("--ep-max-nodes", type=integer(0), default=None, help="node-limited routing M (0 = unlimited)")
    run.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override a layout field, e.g. --set pp=10 --set schedule=interleaved --set virtual_stages=2",
    )
    add_fault_arguments(run)
    run_outputs.add_arguments(run)


def _add_reproduce(commands: argparse._SubParsersAction) -> None:
    from experiments.paper.targets import TARGETS, targets_epilog

    reproduce = commands.add_parser(
        "reproduce",
        help="reproduce a table or figure of the paper into results/",
        epilog=targets_epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    reproduce.add_argument("name", choices=[*TARGETS, "all"])
    reproduce.add_argument("--out", default="results", help="output folder (default results/)")
    reproduce.add_argument(
        "--jobs", type=integer(1), default=None, help="local worker processes (default: one per CPU)"
    )
    add_quiet(reproduce)


def _add_sweep_and_search(commands: argparse._SubParsersAction) -> None:
    from experiments.cli import sweep_cli

    sweep_cli.add_commands(commands)


def _add_bench(commands: argparse._SubParsersAction) -> None:
    bench = commands.add_parser("bench", help="time the simulator at fixed points on this machine")
    bench.add_argument("--json", action="store_true", help="print one JSON object per row, as each is done")
    bench.add_argument("--all", action="store_true", help="also the slow rows (reproduce-all)")
    bench.add_argument("--point", action="append", default=[], metavar="NAME", help="only this row; repeatable")
    add_quiet(bench)


def _add_presets(commands: argparse._SubParsersAction) -> None:
    commands.add_parser("presets", help="list the model, layout and cluster presets, one line each")


def _add_compare(commands: argparse._SubParsersAction) -> None:
    from experiments.search import compare

    compare.add_parser(commands)


def _add_validate(commands: argparse._SubParsersAction) -> None:
    from experiments.validation import validate

    validate.add_parser(commands)


# The subcommands in --help's order: the names each builder adds, and the builder.
_COMMANDS: tuple[tuple[tuple[str, ...], Callable[[argparse._SubParsersAction], None]], ...] = (
    (("run",), _add_run),
    (("reproduce",), _add_reproduce),
    (("sweep", "search"), _add_sweep_and_search),
    (("bench",), _add_bench),
    (("presets",), _add_presets),
    (("compare",), _add_compare),
    (("validate",), _add_validate),
)


def _layout(args: argparse.Namespace, layout: LayoutSpec) -> LayoutSpec:
    """The layout (preset, YAML file or from Megatron arguments) with the routing / EP / --set flags applied."""
    changes = {
        field: value
        for field, value in (
            ("routing", args.routing),
            ("zipf_exponent", args.zipf),
            ("seed", args.seed),
            ("ep", args.ep),
            ("ep_max_nodes", args.ep_max_nodes),
            ("dropless", args.dropless or None),
        )
        if value is not None
    }
    if args.zipf is not None and args.routing is None:
        changes["routing"] = "zipf"
    if args.zipf is not None and args.routing == "uniform":
        raise ConfigError("routing", f"--routing uniform contradicts --zipf {args.zipf:g} (skewed routing); drop one")
    flags = {"routing": "--routing", "zipf_exponent": "--zipf", "seed": "--seed", "ep": "--ep"}
    flags |= {"ep_max_nodes": "--ep-max-nodes", "dropless": "--dropless", "micro_batch": "--micro-batch"}
    if args.micro_batch is not None:
        changes["micro_batch"] = args.micro_batch
    given: dict[str, str] = {}
    if args.set:
        from experiments.search.compare import parse_setting
    for item in args.set:
        key, text, value = parse_setting(item)
        if key in changes and changes[key] != value:
            flag_value = "" if changes[key] is True else f" {changes[key]}"
            other = given.get(key) or f"{flags.get(key, key)}{flag_value}"
            raise ConfigError(key, f"--set {key}={text} contradicts {other}; give one")
        changes[key], given[key] = value, f"--set {key}={text}"
    return layout.with_(**changes) if changes else layout


DEFAULT_GPUS = 240


def _cluster(args: argparse.Namespace) -> ClusterSpec:
    """The cluster (preset or YAML file) of --gpus GPUs, with --nic-gbps applied (GB/s -> bytes/s, once, here)."""
    cluster = load_cluster(args.cluster, args.gpus)
    if args.nic_gbps is None:
        return cluster
    check_physical("nic_gbps", "nic_gbps", args.nic_gbps)  # > 0 and within physical bounds, in GB/s
    return cluster.with_(nic_bandwidth_Bps=args.nic_gbps * 1e9)


def _megatron(args: argparse.Namespace, job: MegatronJob, gpus: int) -> tuple[argparse.Namespace, MegatronRun]:
    """Resolve --megatron-args over --model and --layout; explicit --global-batch / --seq-len still win."""
    job, base = presets.megatron_base(job, args.model)
    try:
        run = job.resolve(base, load_layout(args.layout) if args.layout else None, gpus)
    except ConfigError as error:
        raise job.explain(error) from None
    batch = args.global_batch if args.global_batch is not None else job.global_batch_for(gpus)
    seq_len = args.seq_len if args.seq_len is not None else run.seq_len
    return argparse.Namespace(**{**vars(args), "model": run.model, "global_batch": batch, "seq_len": seq_len}), run


def _run(args: argparse.Namespace) -> None:
    run_outputs.check_paths(args)  # before any simulation
    notes: tuple[str, ...] = ()
    if args.automodel:
        from experiments.cli.automodel_cli import automodel_args

        args, notes = automodel_args(args)
    args.gpus = args.gpus or DEFAULT_GPUS
    if not args.megatron_args:
        args.model = args.model or presets.DEFAULT_MODEL
    cluster = _cluster(args)
    job = None
    megatron = None
    if args.megatron_args:
        from workloads.inputs.megatron import parse_megatron_args

        job = parse_megatron_args(args.megatron_args)
        args, megatron = _megatron(args, job, cluster.num_gpus)
        named = megatron.layout.with_(name=Path(args.automodel).stem) if args.automodel else megatron.layout
        megatron = megatron._replace(layout=named, notes=(*notes, *megatron.notes))
    base = megatron.layout if megatron else load_layout(args.layout or "megascale-moe")
    layout = _layout(args, base)
    args.global_batch = DEFAULT_GLOBAL_BATCH if args.global_batch is None else args.global_batch
    args.seq_len = DEFAULT_SEQ_LEN if args.seq_len is None else args.seq_len
    faults = Faults.parse(args.straggler, args.degrade, args.fail_link, args.gpu_speed_spread, args.gpu_speed_seed)
    try:
        if run_outputs.wanted(args):
            if args.engine != "folded":
                raise ConfigError("engine", "--trace / --plot show the folded engine only; drop --engine unfolded")
            report = run_outputs.run_with_outputs(args, layout, faults, cluster)
        else:
            report = simulate(
                args.model,
                layout,
                cluster=cluster,
                global_batch=args.global_batch,
                seq_len=args.seq_len,
                micro_batch=args.micro_batch,
                allow_oom=args.allow_oom,
                faults=faults,
                engine=args.engine,
            )
    except ConfigError as error:
        raise (job.explain(error) if job else error) from None
    if job and job.unknown:  # after the run: a refused run says one line, the error (issue #13)
        from workloads.inputs.megatron_flag_list import with_nearest

        unknown = ", ".join(map(with_nearest, job.unknown))
        print(f"moesim: warning: unknown Megatron arguments ignored: {unknown}", file=sys.stderr)
    busiest = _busiest_stage(args, layout, cluster) if args.breakdown else None
    band = band_of(load_model(args.model), layout, cluster.gpu)  # how far to trust it (error_band.py)
    if args.json:
        extra = {}
        if megatron:
            extra = {
                "ignored_args": [arg.to_dict() for arg in megatron.ignored],
                "megatron_notes": list(megatron.notes),
            }
        if busiest:
            extra["busiest_stage"] = dataclasses.asdict(busiest)
        extra["expected_error"] = band_json(band)
        print(json.dumps({**report.to_dict(), **extra}))
    else:
        print(report.summary())
        print(f"  expected         {band.describe(report.step_time_s) if band else band_json(band)['basis']}")
        if band and band.note:
            print(f"  note             {band.note}")
        if report.imbalance_idle > BALANCE_HINT_ABOVE and not layout.balance_blocks:
            hint = _balance_hint(args, layout, cluster)
            if hint:
                print(hint)
        if busiest:
            print(f"  busiest stage    {busiest.stage}, one micro-batch, its tasks alone: {busiest.phrase()}")
        if megatron:
            from experiments.cli.megatron_view import ignored_line, memory_terms, understood

            model = args.model
            dropout = (model.hidden_dropout, model.attention_dropout)
            fp16 = bool(job and job.args.get("--fp16"))
            line = understood(layout, cluster.num_gpus, cluster.gpu.name, model.num_experts > 0, dropout, fp16)
            print(f"  understood       {line}")
            print(f"  memory terms     {memory_terms(report.memory_gib)} (peak stage)")
            print(f"  ignored          {ignored_line(megatron.ignored)}")
            print("\n".join(f"  note             {note}" for note in megatron.notes))


# Above this much stage-imbalance idle `moesim run` says what split balance_blocks would take
BALANCE_HINT_ABOVE = 0.05


def _balance_hint(args: argparse.Namespace, layout: LayoutSpec, cluster: ClusterSpec) -> str:
    """The split balance_blocks would choose (simulator/report/balance.py), if it differs from this one; for a
    Megatron job as the --pipeline-model-parallel-layout that runs it."""
    text = split_if_balanced(args.model, layout, None, cluster, args.global_batch, args.seq_len, args.micro_batch)
    if not text:
        return ""
    if args.megatron_args:
        return f"  hint             --pipeline-model-parallel-layout '{text}' splits the layers by cost (not simulated)"
    return f"  hint             --set balance_blocks=true splits the layers {text} by cost (not simulated here)"


def _busiest_stage(args: argparse.Namespace, layout: LayoutSpec, cluster: ClusterSpec) -> StageCosts:
    """--breakdown: the stage whose micro-batch takes longest alone, by kind of op (faults not applied)."""
    from experiments.common.stage_costs import busiest_stage

    sizes = (args.global_batch, args.seq_len, args.micro_batch)
    workload, cluster, _ = prepare(args.model, layout, None, cluster, *sizes, True)
    return busiest_stage(workload, cluster, DEFAULT_CALIBRATION)


def main(argv: list[str] | None = None) -> int:
    """Entry point; bad input is one line on stderr and exit status 2."""
    argv = sys.argv[1:] if argv is None else argv
    command = argv[0] if argv and not argv[0].startswith("-") else None  # the top level's options take no value
    try:
        args = _parser(command).parse_args(argv)
    except SystemExit as exit_:  # --help (0), or a bad value already said in one line (2)
        return exit_.code if isinstance(exit_.code, int) else 2
    except KeyboardInterrupt:
        return interrupted()
    with fewer_full_collections() if args.command not in ("run", "presets", "bench") else nullcontext():  # many steps
        return exit_status(lambda: _dispatch(args))


def _dispatch(args: argparse.Namespace) -> None:
    if args.command == "run":
        _run(args)
    elif args.command == "reproduce":
        from experiments.paper.reproduce import reproduce  # NOTE: the figure modules load only when asked for

        reproduce(args.name, check_output_dir("out", args.out), quiet=args.quiet, jobs=args.jobs)
    elif args.command == "bench":
        from experiments.cli.bench import main as bench

        bench(args, quiet=args.quiet)
    elif args.command == "presets":
        print("\n".join(presets.preset_lines()))
    elif args.command == "compare":
        from experiments.search import compare

        compare.run_args(args)
    elif args.command == "validate":
        from experiments.validation import validate

        validate.main(args)
    else:
        from experiments.cli import sweep_cli

        sweep_cli.dispatch(args)


if __name__ == "__main__":
    sys.exit(main())
