"""``moesim search``: enumerate layouts that fit in memory, simulate them in parallel, list the fastest."""

from __future__ import annotations

import argparse
import sys
import tempfile
import textwrap
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


SEARCHED = ("attention", "ffn", "intra_size", "pp", "micro_batch", "schedule", "virtual_stages")
LEGEND = (
    "columns: attn = attention split (sp: Ulysses sequence parallel, tp: tensor parallel); ffn = experts "
    "(ep: expert parallel, tp: every expert split); n = its degree inside the node; pp = pipeline stages; "
    "dp = data-parallel replicas; mb = micro-batch (sequences); schedule = pipeline schedule (x chunks per "
    "stage); step s = one step; tokens/s = the whole cluster; MFU = GEMM + FlashAttention FLOPs over peak; "
    "mem GiB = peak memory per GPU"
)


def assumptions(model: str, gpus: int, cluster: str, global_batch: int, seq_len: int) -> str:
    """The line that states what the search assumed."""
    return (
        f"search: {model} on {gpus} {cluster} GPUs, global batch {global_batch} sequences of {seq_len} tokens "
        f"(--global-batch, --seq-len); every layout keeps {BASE_LAYOUT}'s overlaps, recomputation and ZeRO-1"
    )


def layout_fields(row: dict[str, str]) -> dict[str, object]:
    """The searched layout fields of a result row, typed."""
    return {k: int(row[k]) if row[k].isdigit() else row[k] for k in SEARCHED}


def run_command(row: dict[str, str], layout_file: str | None = None) -> str:
    """The ``moesim run`` command line of a result row (with ``--layout FILE`` if one was written)."""
    head = f"moesim run --model {row['model']} --cluster {row['cluster']} --gpus {row['gpus']} "
    head += f"--global-batch {row['global_batch']} --seq-len {row['seq_len']}"
    if layout_file:
        return f"{head} --layout {layout_file}"
    fields = layout_fields(row)
    sets = " ".join(f"--set {k}={v}" for k, v in fields.items() if k != "micro_batch")
    return f"{head} --micro-batch {fields['micro_batch']} --layout {BASE_LAYOUT} {sets}"


def layout_yaml(row: dict[str, str]) -> str:
    """A layout file of a result row: the base preset and the searched fields."""
    lines = [
        f"# moesim search: the fastest layout of {row['model']} on {row['gpus']} {row['cluster']} GPUs,",
        (
            f"# global batch {row['global_batch']} x {row['seq_len']} tokens: "
            f"{float(row['tokens_per_s']):,.0f} tokens/s, {float(row['peak_memory_gib']):.1f} GiB per GPU"
        ),
        f"base: {BASE_LAYOUT}",
    ]
    return "\n".join(lines + [f"{k}: {v}" for k, v in layout_fields(row).items()]) + "\n"


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
) -> list[dict[str, str]]:
    """Simulate every candidate layout (resumable if ``out`` is given) and return the fastest ``top``."""
    say = progress or (lambda line: None if quiet else print(line, file=sys.stderr, flush=True))
    global_batch, seq_len = global_batch or DEFAULT_GLOBAL_BATCH, seq_len or DEFAULT_SEQ_LEN
    points, too_big = candidates(model, gpus, cluster=cluster, global_batch=global_batch, seq_len=seq_len)
    say(f"search: {len(points)} layouts fit in memory ({too_big} valid ones do not)")
    if not points:
        raise ConfigError("gpus", f"no layout of {model} on {gpus} GPUs fits in memory")
    options = {"jobs": jobs, "scheduler": scheduler, "progress": progress, "quiet": quiet}
    if out is not None:
        return fastest(run_sweep(points, out, **options), top)
    with tempfile.TemporaryDirectory() as folder:
        return fastest(run_sweep(points, Path(folder) / "search.csv", **options), top)


def main_search(args: argparse.Namespace) -> None:
    """CLI entry: what was assumed, the fastest layouts with their memory, the columns, the winner to run."""
    global_batch, seq_len = args.global_batch or DEFAULT_GLOBAL_BATCH, args.seq_len or DEFAULT_SEQ_LEN
    print(assumptions(args.model, args.gpus, args.cluster, global_batch, seq_len))
    rows = search(
        args.model,
        args.gpus,
        cluster=args.cluster,
        global_batch=global_batch,
        seq_len=seq_len,
        jobs=args.jobs,
        scheduler=args.scheduler,
        top=args.top,
        out=args.out,
        quiet=args.quiet,
    )
    print(format_rows(rows))
    print(textwrap.fill(LEGEND, width=110, subsequent_indent="  "))
    if not rows:
        return
    if args.write_layout:
        Path(args.write_layout).write_text(layout_yaml(rows[0]))
        print(f"wrote the fastest layout to {args.write_layout}")
    print(f"fastest: {run_command(rows[0], args.write_layout)}")
