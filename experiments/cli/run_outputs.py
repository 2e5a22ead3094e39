"""Extra outputs of ``moesim run``: a Chrome trace (--trace) and a timeline plot (--plot)."""

from __future__ import annotations

import argparse
import sys

from experiments.common.args import integer
from experiments.common.paths import check_output_file, plot_path
from simulator.engine.faults import Faults
from simulator.report.simulate import Report
from topologies.cluster import ClusterSpec
from topologies.errors import ConfigError
from workloads.specs.layouts import LayoutSpec


def add_arguments(run: argparse.ArgumentParser) -> None:
    """Add --trace, --trace-stages, --trace-micro-batches and --plot to the run parser."""
    run.add_argument(
        "--trace",
        metavar="FILE.json[.gz]",
        help="write a Chrome trace-event timeline (Perfetto; .gz: gzipped; .pftrace[.gz]: Perfetto's protobuf)",
    )
    run.add_argument(
        "--trace-all-ops",
        action="store_true",
        help="draw every op of every task (default: past 300,000 op events, each steady-state task's ops once)",
    )
    run.add_argument("--trace-stages", metavar="LIST", help="only these pipeline stages in the trace, e.g. 0,1")
    run.add_argument(
        "--trace-micro-batches", metavar="N", type=integer(1), help="only micro-batches 0..N-1 in the trace"
    )
    run.add_argument("--plot", metavar="FILE.png", help="write a per-stage Gantt chart and time breakdown")


def check_paths(args: argparse.Namespace) -> None:
    """Refuse bad --trace / --plot paths and --trace-stages before any simulation (--plot without an extension
    becomes FILE.png, the file matplotlib would write)."""
    if getattr(args, "trace", None) is not None:
        check_output_file("trace", args.trace, (".json", ".gz", ".pftrace"))
        name = str(args.trace).lower()
        if name.endswith(".gz") and not name.endswith((".json.gz", ".pftrace.gz")):
            raise ConfigError("trace", f"{args.trace}: must end in .json, .json.gz, .pftrace or .pftrace.gz")
        if name.endswith((".pftrace", ".pftrace.gz")):
            from simulator.outputs.trace_proto import protos

            protos()  # the perfetto package, before any simulation (ConfigError: what to install)
    if getattr(args, "plot", None) is not None:
        args.plot = str(plot_path("plot", args.plot))
    parse_stages(getattr(args, "trace_stages", None))


def wanted(args: argparse.Namespace) -> bool:
    """Whether the run needs the engine's raw result (a trace or a plot was asked for)."""
    return getattr(args, "trace", None) is not None or getattr(args, "plot", None) is not None


def parse_stages(text: str | None) -> list[int] | None:
    """'0,1,4' -> [0, 1, 4] (stage numbers >= 0); None stays None."""
    if text is None:
        return None
    try:
        stages = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ConfigError("trace_stages", f"expected comma-separated stage numbers, got {text[:40]!r}") from None
    if not stages or min(stages) < 0:
        raise ConfigError("trace_stages", f"expected comma-separated stage numbers >= 0, got {text[:40]!r}")
    return stages


def run_with_outputs(
    args: argparse.Namespace,
    layout: LayoutSpec | str | None = None,
    faults: Faults | None = None,
    cluster: ClusterSpec | None = None,
) -> Report:
    """Simulate as ``moesim run`` does (``layout``, ``cluster``: the resolved ones, default ``args.layout`` and
    ``args.cluster``; ``faults``: the parsed fault flags) and write the requested trace and plot."""
    from simulator.outputs.trace_files import simulate_with_trace, stream_trace

    stages = parse_stages(args.trace_stages)
    run = simulate_with_trace(
        args.model,
        args.layout if layout is None else layout,
        args.gpus,
        cluster=args.cluster if cluster is None else cluster,
        global_batch=args.global_batch,
        seq_len=args.seq_len,
        micro_batch=args.micro_batch,
        stages=stages,
        micro_batches=args.trace_micro_batches,
        trace=args.trace is not None,
        build=False,
        allow_oom=args.allow_oom,
        faults=faults,
    )
    if args.trace is not None:
        count, size = stream_trace(
            args.trace,
            run.timeline,
            stages=stages,
            micro_batches=args.trace_micro_batches,
            all_ops=True if getattr(args, "trace_all_ops", False) else None,
        )
        print(f"moesim: wrote {args.trace} ({count} events, {size / 1e6:.1f} MB)", file=sys.stderr)
    if args.plot:
        from experiments.cli.plots_run import plot_run

        plot_run(args.plot, run)  # written atomically (experiments/common/paths.py)
        print(f"moesim: wrote {args.plot}", file=sys.stderr)
    return run.report
