"""Issue 38's micro-batch table: what one step of DeepSeek-V3 on 2,048 H800s costs (CPU seconds of run_step, with the
steady shortcut, from no task timings made, as a step of its own starts) under every registered schedule, with and
without EP overlap (experiments/beyond/steady_bound.py's list), at 32 to 256 micro-batches per pipeline; each cell
the least of ``--repeats`` runs (the machine is shared: the least is the run least disturbed), the repeats
interleaved over the whole table. The targets: at most 1.3x the cost at 32 and at most 1 s at 256.

    python -m experiments.beyond.flat_table [--counts 32,64,128,256] [--repeats 3] [--schedules 1f1b,zb1p]

Each cell also says how the step was had: ``full`` (run in full), ``exact`` (extrapolated from the runs listed, the
same floats as the full run to 1e-9) or ``bounded`` (on the line through them, within simulator/fast/bounded.py's
BOUND_REL).
"""

from __future__ import annotations

import argparse
import time

from experiments.beyond.steady_bound import SCHEDULE_NAMES, deepseek
from simulator.costs.calibration import DEFAULT_CALIBRATION
from simulator.engine.timer import TIMINGS
from simulator.fast.steady import run_step

TARGET_RATIO, TARGET_CPU_S = 1.3, 1.0  # issue 38 item 3


def measure(name: str, micro_batches: int) -> tuple[float, str]:
    """CPU seconds of one step (workload built outside the clock) and how it was had."""
    workload, cluster = deepseek(name, micro_batches)
    TIMINGS.clear()
    cpu = time.process_time()
    step = run_step(workload, cluster, DEFAULT_CALIBRATION)
    cpu_s = time.process_time() - cpu
    path = "full" if not step.runs else "bounded" if step.bound_rel else "exact"
    return cpu_s, f"{path}{list(step.runs) if step.runs else ''}"


def table(names: list[str], counts: list[int], repeats: int) -> list[str]:
    """The table's lines: per schedule, the least CPU s of each count, the ratio last / first and the path taken."""
    best: dict[tuple[str, int], float] = {}
    paths: dict[tuple[str, int], str] = {}
    for _ in range(repeats):
        for name in names:
            for count in counts:
                cpu_s, paths[(name, count)] = measure(name, count)
                best[(name, count)] = min(best.get((name, count), cpu_s), cpu_s)
    width = max(map(len, names))
    lines = [f"{'schedule':<{width}}  " + "  ".join(f"{c:>6}" for c in counts) + "   ratio  meets  paths"]
    for name in names:
        cells = [best[(name, count)] for count in counts]
        ratio = cells[-1] / cells[0]
        meets = ratio <= TARGET_RATIO and cells[-1] <= TARGET_CPU_S
        how = " ".join(paths[(name, count)] for count in counts)
        lines.append(
            f"{name:<{width}}  "
            + "  ".join(f"{c:6.3f}" for c in cells)
            + f"  {ratio:5.2f}x  {'yes' if meets else 'no':>5}  {how}"
        )
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--counts", default="32,64,128,256", help="micro-batches per pipeline, comma-separated")
    parser.add_argument("--repeats", type=int, default=3, help="runs per cell; the least is printed")
    parser.add_argument("--schedules", default=",".join(SCHEDULE_NAMES), help="comma-separated")
    args = parser.parse_args(argv)
    counts = [int(count) for count in args.counts.split(",")]
    for line in table(args.schedules.split(","), counts, args.repeats):
        print(line, flush=True)


if __name__ == "__main__":
    main()
