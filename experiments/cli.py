"""The ``moesim`` command line."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from simulator.report import simulate
from topologies.errors import ConfigError
from workloads.step import DEFAULT_GLOBAL_BATCH, DEFAULT_SEQ_LEN


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="moesim", description="Simulate MoE LLM training on GPU clusters.")
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="simulate one training step and print a report")
    run.add_argument("--model", default="paper-352b", help="model preset (default paper-352b)")
    run.add_argument("--layout", default="megascale-moe", help="layout preset (default megascale-moe)")
    run.add_argument("--gpus", type=int, default=240, help="number of GPUs (default 240)")
    run.add_argument("--cluster", default="h800", help="cluster preset: h800, h100, a100, h20, gb200-nvl72 (default h800)")
    run.add_argument("--global-batch", type=int, default=DEFAULT_GLOBAL_BATCH, help="sequences per step")
    run.add_argument("--seq-len", type=int, default=DEFAULT_SEQ_LEN, help="tokens per sequence")
    run.add_argument("--micro-batch", type=int, default=None, help="sequences per micro-batch")
    run.add_argument("--json", action="store_true", help="print one JSON object")
    run.add_argument("--routing", choices=("uniform", "zipf"), default=None, help="expert load (default uniform)")
    run.add_argument("--zipf", type=float, default=None, help="Zipf exponent of skewed routing")
    run.add_argument("--seed", type=int, default=None, help="seed of the routing Generator")
    run.add_argument("--dropless", action="store_true", help="no capacity padding or token dropping")
    run.add_argument("--ep", type=int, default=None, help="EP degree (> GPUs per node: across nodes)")
    run.add_argument("--ep-max-nodes", type=int, default=None, help="node-limited routing M (0 = unlimited)")

    from experiments.reproduce import REPRODUCTIONS

    reproduce = commands.add_parser("reproduce", help="reproduce a table or figure of the paper into results/")
    reproduce.add_argument("name", choices=[*REPRODUCTIONS, "all"])
    reproduce.add_argument("--out", default="results", help="output folder (default results/)")
    return parser


def _layout(args: argparse.Namespace):
    """The layout preset with the routing / EP flags applied."""
    from workloads.layouts import layout_preset

    changes = {field: value for field, value in (
        ("routing", args.routing), ("zipf_exponent", args.zipf), ("seed", args.seed), ("ep", args.ep),
        ("ep_max_nodes", args.ep_max_nodes), ("dropless", args.dropless or None)) if value is not None}
    if args.zipf is not None and args.routing is None:
        changes["routing"] = "zipf"
    layout = layout_preset(args.layout)
    return layout.with_(**changes) if changes else layout


def _run(args: argparse.Namespace) -> None:
    report = simulate(args.model, _layout(args), args.gpus, cluster=args.cluster, global_batch=args.global_batch,
                      seq_len=args.seq_len, micro_batch=args.micro_batch)
    if args.json:
        print(json.dumps(report.to_dict()))
    else:
        print(report.summary())


def main(argv: list[str] | None = None) -> int:
    """Entry point; bad input is one line on stderr and exit status 2."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "run":
            _run(args)
        elif args.command == "reproduce":
            from experiments.reproduce import reproduce

            reproduce(args.name, Path(args.out))
    except ConfigError as error:
        print(f"moesim: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
