"""``moesim search``: enumerate layouts that fit in memory, simulate them in parallel, list the fastest."""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from experiments.sweep import Params, read_rows, run_sweep
from simulator.memory import peak_memory
from topologies.cluster import cluster_preset
from topologies.errors import ConfigError
from workloads.config import load_model
from workloads.layouts import LayoutSpec, layout_preset
from workloads.models import ModelSpec
from workloads.step import DEFAULT_GLOBAL_BATCH, DEFAULT_SEQ_LEN, StepWorkload

BASE_LAYOUT = "megascale-moe"  # the techniques (overlaps, SAR, ...) searched layouts keep


def divisors(n: int) -> list[int]:
    """Positive divisors of n, ascending."""
    return [d for d in range(1, n + 1) if n % d == 0]


class Job(NamedTuple):
    """What a layout must fit: the GPUs, their scale-up domain, the batch and the HBM per GPU."""

    gpus: int
    gpus_per_node: int
    global_batch: int
    seq_len: int
    hbm_bytes: float

    def fits(self, model: ModelSpec, layout: LayoutSpec) -> bool | None:
        """Whether the layout's peak memory per GPU fits the HBM; None if the layout is not valid here."""
        try:
            workload = StepWorkload(model, layout, self.gpus, self.gpus_per_node, self.global_batch, self.seq_len)
        except ConfigError:
            return None
        return peak_memory(workload).total_bytes <= self.hbm_bytes

    def stages_that_fit(self, model: ModelSpec, layout: LayoutSpec) -> list[int]:
        """Pipeline depths (divisors of the layers, ascending) with which the layout is valid and fits."""
        return [pp for pp in divisors(model.num_layers) if self.fits(model, layout.with_(pp=pp))]


def candidates(
    model: str,
    gpus: int,
    *,
    cluster: str = "h800",
    global_batch: int = DEFAULT_GLOBAL_BATCH,
    seq_len: int = DEFAULT_SEQ_LEN,
) -> tuple[list[Params], int]:
    """Valid layouts that fit in HBM, as sweep points, and how many valid ones did not fit."""
    spec = load_model(model)
    cluster_spec = cluster_preset(cluster, gpus)
    job = Job(gpus, cluster_spec.gpus_per_node, global_batch, seq_len, cluster_spec.gpu.hbm_bytes)
    base = layout_preset(BASE_LAYOUT)
    points: list[Params] = []
    too_big = 0
    for intra in divisors(cluster_spec.gpus_per_node):
        modes = [("sp", "ep"), ("sp", "tp"), ("tp", "ep"), ("tp", "tp")] if intra > 1 else [("sp", "ep")]
        for pp in (p for p in divisors(spec.num_layers) if gpus % (intra * p) == 0):
            schedules = [("1f1b", 1)] + ([("interleaved", 2)] if pp > 1 else [])
            for (attention, ffn), micro_batch, (schedule, chunks) in (
                (m, b, s) for m in modes for b in (1, 2) for s in schedules
            ):
                layout = {
                    "attention": attention,
                    "ffn": ffn,
                    "intra_size": intra,
                    "pp": pp,
                    "schedule": schedule,
                    "virtual_stages": chunks,
                }
                fits = job.fits(spec, base.with_(micro_batch=micro_batch, **layout))
                if fits is None:
                    continue
                if not fits:
                    too_big += 1
                    continue
                points.append(
                    {
                        "model": model,
                        "layout": BASE_LAYOUT,
                        "gpus": gpus,
                        "global_batch": global_batch,
                        "seq_len": seq_len,
                        "micro_batch": micro_batch,
                        "cluster": cluster,
                        **layout,
                    }
                )
    return points, too_big


def fastest(table: Path, top: int) -> list[dict[str, str]]:
    """The ``top`` rows without errors, highest tokens/s first."""
    rows = [r for r in read_rows(table) if not r["error"]]
    return sorted(rows, key=lambda r: -float(r["tokens_per_s"]))[:top]


def format_rows(rows: list[dict[str, str]]) -> str:
    """A fixed-width table of search results."""
    lines = [
        (
            f"{'#':>3} {'attn':>4} {'ffn':>3} {'n':>2} {'pp':>3} {'dp':>4} {'mb':>2} {'schedule':>13} "
            f"{'step s':>8} {'tokens/s':>10} {'MFU':>6} {'mem GiB':>8}"
        )
    ]
    for rank, r in enumerate(rows, 1):
        schedule = r["schedule"] + (f" x{r['virtual_stages']}" if r["virtual_stages"] != "1" else "")
        lines.append(
            f"{rank:>3} {r['attention']:>4} {r['ffn']:>3} {r['intra_size']:>2} {r['pp']:>3} {r['dp']:>4} "
            f"{r['micro_batch']:>2} {schedule:>13} {float(r['step_time_s']):>8.3f} "
            f"{float(r['tokens_per_s']):>10,.0f} {float(r['mfu']) * 100:>5.1f}% "
            f"{float(r['peak_memory_gib']):>8.1f}"
        )
    return "\n".join(lines)


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
) -> list[dict[str, str]]:
    """Simulate every candidate layout (resumable if ``out`` is given) and return the fastest ``top``."""
    say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    points, too_big = candidates(
        model,
        gpus,
        cluster=cluster,
        global_batch=global_batch or DEFAULT_GLOBAL_BATCH,
        seq_len=seq_len or DEFAULT_SEQ_LEN,
    )
    say(f"search: {len(points)} layouts fit in memory ({too_big} valid ones do not)")
    if not points:
        raise ConfigError("gpus", f"no layout of {model} on {gpus} GPUs fits in memory")
    if out is not None:
        return fastest(run_sweep(points, out, jobs=jobs, scheduler=scheduler, progress=say), top)
    with tempfile.TemporaryDirectory() as folder:
        return fastest(
            run_sweep(points, Path(folder) / "search.csv", jobs=jobs, scheduler=scheduler, progress=say), top
        )


def main_search(args: argparse.Namespace) -> None:
    """CLI entry: print the fastest layouts with their memory."""
    rows = search(
        args.model,
        args.gpus,
        cluster=args.cluster,
        global_batch=args.global_batch,
        seq_len=args.seq_len,
        jobs=args.jobs,
        scheduler=args.scheduler,
        top=args.top,
        out=args.out,
    )
    print(format_rows(rows))
