#!/usr/bin/env python3
"""Whole-process CPU of ``moesim run --json`` against SimuMax on every Table 3 point, one interleaved loop.

SimuMax (MooreThreads/SimuMax, analytical, no event schedule) is the peer run as a black box through a
glue script that calls its public PerfLLM API and prints ``RESULT_JSON=...``. Usage:

    python benchmarks/simumax_side_by_side.py --simumax-python VENV/bin/python --run-one PATH/run_one.py \
        [--simumax-dir SIMUMAX_CHECKOUT] [--repeats 3]

Each repetition runs, for every point, SimuMax then moesim (alternating, so both see the same machine
load), and takes the CPU time (user + sys) of each child process from ``resource.getrusage``. Prints a
Markdown table: the median CPU seconds of each and their ratio.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys

# Table 3's points: (MegaScale-MoE or Megatron-LM, GPUs) -> (SimuMax layout name, moesim layout preset)
SYSTEMS = {"megascale-moe": "b_cp8_ep8", "megatron-lm": "a_tp8"}
GPUS = (240, 480, 720, 960, 1440)


def child_cpu_s(command: list[str], cwd: str | None = None) -> float:
    """CPU seconds (user + sys) of one child process run to completion; raises if it fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--simumax-python", required=True, help="the python of SimuMax's venv")
    parser.add_argument("--run-one", required=True, help="the glue script that runs one SimuMax estimate")
    parser.add_argument("--simumax-dir", default=None, help="working directory for SimuMax (its checkout)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    cpu: dict[tuple[str, int, str], list[float]] = {}
    for _ in range(args.repeats):
        for system, peer_layout in SYSTEMS.items():
            for gpus in GPUS:
                peer = [args.simumax_python, args.run_one, peer_layout, str(gpus)]
                ours = [sys.executable, "-m", "experiments.cli.main", "run", "--model", "paper-352b"]
                ours += ["--layout", system, "--gpus", str(gpus), "--json"]
                cpu.setdefault((system, gpus, "simumax"), []).append(child_cpu_s(peer, args.simumax_dir))
                cpu.setdefault((system, gpus, "moesim"), []).append(child_cpu_s(ours))
    print("| point | SimuMax CPU s | moesim CPU s | moesim / SimuMax |")
    print("|---|---|---|---|")
    for system in SYSTEMS:
        for gpus in GPUS:
            peer, ours = (statistics.median(cpu[(system, gpus, who)]) for who in ("simumax", "moesim"))
            print(f"| {system} {gpus} | {peer:.2f} | {ours:.2f} | {ours / peer:.2f}x |")


if __name__ == "__main__":
    main()
