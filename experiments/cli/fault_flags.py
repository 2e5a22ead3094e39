"""``moesim run``'s what-if flags for an unhealthy cluster: stragglers, degraded or failed links, and the spread of
same-SKU GPU speeds (simulator/engine/faults.py reads them)."""

from __future__ import annotations

import argparse

from experiments.common.args import integer


def add_fault_arguments(run: argparse.ArgumentParser) -> None:
    """Add --straggler, --degrade, --fail-link, --gpu-speed-spread and --gpu-speed-seed to the run parser."""
    run.add_argument(
        "--straggler",
        action="append",
        default=[],
        metavar="GPU:FACTOR",
        help="GPU's compute kernels take FACTOR (>= 1) times longer; repeatable",
    )
    run.add_argument(
        "--degrade",
        action="append",
        default=[],
        metavar="LINK:FACTOR",
        help="divide a port's bandwidth by FACTOR; LINK is nic:GPU or nvlink:GPU; repeatable",
    )
    run.add_argument(
        "--fail-link",
        action="append",
        default=[],
        metavar="LINK",
        help="that NIC is down (nic:GPU); its traffic shares a node neighbour's NIC; repeatable",
    )
    run.add_argument(
        "--gpu-speed-spread",
        type=float,
        default=0.0,
        metavar="S",
        help="every GPU's kernels take 1 + S x u times as long, u uniform in [0, 1) per GPU (seeded); "
        "same-SKU GPUs vary 8%% on average (Sinha et al., SC'22): try 0.08",
    )
    run.add_argument(
        "--gpu-speed-seed", type=integer(0), default=0, metavar="N", help="seed of the speed spread's draws"
    )
