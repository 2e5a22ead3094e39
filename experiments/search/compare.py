"""``moesim compare``: sweep layouts, NIC bandwidths, scale-up domains (or a simulate() keyword, ClusterSpec
field or LayoutSpec field) over GPU counts; write a CSV and a plot (tokens/s per GPU against the first swept
variable, one panel per value of a second, errored points marked x). ``--set KEY=VALUE`` and ``--seq-len`` fix
one value for every point, as a failed point's hint (``try ... --set pp=6``) asks.

Keys and the types of values are checked before anything runs (a one-line ConfigError); a point whose
values are well typed but cannot run (a layout that does not divide the GPUs, ...) is a row with its error;
when every point errs, the command still writes the CSV and plot, then exits 2 with the first error.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import itertools
import math
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from experiments.common.args import integer, nonempty
from experiments.common.error_band import band_of
from experiments.common.paths import check_output_file, write_csv
from experiments.common.progress import add_quiet, bar
from experiments.search.points import Point, check_setting, kind_of, make_point, run_point, target_of
from simulator.report.clusters import load_cluster
from topologies.bounds import check_values
from topologies.errors import ConfigError, short_repr
from topologies.units import bandwidth_GBps
from workloads.graph.step import DEFAULT_GLOBAL_BATCH
from workloads.inputs.yaml_files import load_layout, load_model
from workloads.specs.layouts import LayoutSpec

if TYPE_CHECKING:  # NOTE: pandas and matplotlib load when compare runs, not at start-up
    import pandas as pd

# Named axes of the command line: (flag, keyword, unit factor applied to the values given).
NAMED_AXES = {
    "nic_gbps": ("nic_bandwidth_Bps", 1e9),  # GB/s -> bytes/s, once, at the boundary
    "scaleup": ("domain_gpus", 1),
    "zipf": ("zipf", 1),  # expert-load skew: an alias, see experiments.search.points.ALIASES
}
METRICS = ("step_time_s", "tokens_per_s", "mfu", "bubble_fraction", "peak_memory_gib")


@dataclass(frozen=True)
class Axis:
    """One swept keyword: where it goes (simulate, cluster or layout) and its values."""

    key: str
    target: str
    values: tuple[Any, ...]
    label: str = ""

    @property
    def column(self) -> str:
        return self.label or self.key


def axis(key: str, values: list[Any], label: str = "") -> Axis:
    """An axis over ``key``, its key and the types of its values checked before anything runs."""
    target = target_of(key)
    if not values:
        raise ConfigError(label or key, "give at least one value")
    check_values(label or key, key, values)  # hardware values within physical bounds (topologies/bounds.py)
    return Axis(key, target, tuple(check_setting(key, v) for v in values), label)


def parse_setting(item: str) -> tuple[str, str, Any]:
    """``--set FIELD=VALUE``: the layout field, the text of its value and the value (a bad one names the nearest
    fields, not all of them: docs/yaml-reference.md lists them)."""
    fields = sorted(f.name for f in dataclasses.fields(LayoutSpec) if f.name != "name")
    key, sep, text = item.partition("=")
    if not sep or key not in fields:
        near = ", ".join(difflib.get_close_matches(key, fields, n=3)) or "see docs/yaml-reference.md"
        raise ConfigError("--set", f"expected FIELD=VALUE with a layout field ({near}), got {item!r}")
    return key, text, parse_value(key, text, f"--set {key}")


def parse_value(key: str, text: str, field: str = "") -> Any:
    """A command-line value of ``key`` parsed as the key's type (a str field keeps the text as given)."""
    field = field or key
    kind = kind_of(key)
    if kind.startswith("tuple[") and kind.endswith(", ...]"):  # a list field: comma-separated items
        item = kind[len("tuple[") : -len(", ...]")]
        items = [part.strip() for part in text.strip("[]()").split(",") if part.strip()]
        return tuple(_parse_scalar(item, part, field) for part in items)
    return _parse_scalar(kind, text, field)


def _parse_scalar(kind: str, text: str, field: str) -> Any:
    if kind == "str":
        return text
    if kind == "bool":
        if text.lower() not in ("true", "false"):
            raise ConfigError(field, f"must be true or false, got {short_repr(text)}")
        return text.lower() == "true"
    try:
        return int(text) if kind == "int" else float(text)
    except ValueError:
        raise ConfigError(
            field, f"must be {'an integer' if kind == 'int' else 'a number'}, got {short_repr(text)}"
        ) from None


def compare_row(point: Point) -> dict[str, Any]:
    """The CSV row of one point: model, layout, GPUs, the metrics (NaN if it cannot run), exposed comm, error."""
    result = run_point(point)
    layout = point.layout if isinstance(point.layout, str) else point.layout.name
    row: dict[str, Any] = {"model": point.model, "layout": layout, "gpus": point.gpus}
    row.update({m: result.get(m, math.nan) for m in METRICS})
    row.update({k: v for k, v in result.items() if k.startswith("exposed_")})
    row["error"] = result["error"]
    return row


def sweep(
    model: str,
    layouts: list[str | LayoutSpec],
    gpus: list[int],
    axes: list[Axis],
    *,
    cluster: str = "h800",
    global_batch: int = DEFAULT_GLOBAL_BATCH,
    quiet: bool = True,
) -> pd.DataFrame:
    """Every combination of layouts x axes x GPU counts, one row each (a progress bar on a terminal unless
    quiet, as the reproductions that call it are)."""
    rows = []
    total = len(layouts) * math.prod(len(a.values) for a in axes) * len(gpus)
    with bar(total, "compare", quiet=quiet) as progress:
        for layout in layouts:
            for values in itertools.product(*(a.values for a in axes)):
                settings = {a.key: v for a, v in zip(axes, values)}
                for count in gpus:
                    point = make_point(model, layout, count, settings, cluster=cluster, global_batch=global_batch)
                    row = compare_row(point)
                    row.update({a.column: v for a, v in zip(axes, values)})
                    rows.append(row)
                    progress.update()
    import pandas as pd

    return pd.DataFrame(rows)


def _bandwidth(flag: str, text: str) -> float:
    value, warning = bandwidth_GBps(flag, text)
    if warning:
        print(f"moesim: warning: {warning}", file=sys.stderr)
    return value


def _add_bands(frame: pd.DataFrame, model: str, cluster: str) -> None:
    """Each row's error band (experiments/common/error_band.py) from its layout as given (before the swept
    settings), as expected_low / expected_high / expected_cases: how far to trust it (issue 41, item 2)."""
    gpu = load_cluster(cluster, int(frame.gpus.iloc[0])).gpu.name  # the GPU's name: the count does not matter
    bands = {name: band_of(load_model(model), load_layout(name), gpu) for name in frame.layout.unique()}
    frame["expected_low"] = [bands[name].low if bands[name] else math.nan for name in frame.layout]
    frame["expected_high"] = [bands[name].high if bands[name] else math.nan for name in frame.layout]
    frame["expected_cases"] = [bands[name].cases if bands[name] else 0 for name in frame.layout]


def _csv_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def add_parser(commands: argparse._SubParsersAction) -> None:
    """Register ``moesim compare``."""
    p = commands.add_parser("compare", help="sweep layouts, NIC bandwidths, scale-up domains over GPU counts")
    p.add_argument(
        "--model", type=nonempty, default="paper-352b", help="model preset or .yaml file (default paper-352b)"
    )
    p.add_argument("--layouts", default="megascale-moe", help="comma-separated layout presets or .yaml files")
    p.add_argument("--gpus", default="240", help="comma-separated GPU counts (default 240)")
    p.add_argument("--cluster", default="h800", help="cluster preset or .yaml file (default h800)")
    p.add_argument("--global-batch", type=integer(1), default=DEFAULT_GLOBAL_BATCH, help="sequences per step")
    p.add_argument("--seq-len", type=integer(1), default=None, help="tokens per sequence (default 8192)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="one value of a layout field, ClusterSpec field or simulate() keyword for every point (as a failed "
        "point's hint says), e.g. --set zero_stage=1 --set recompute=full",
    )
    p.add_argument(
        "--nic-gbps", default=None, help="comma-separated NIC bandwidths per GPU: 50GB/s, 400Gb/s or numbers of GB/s"
    )
    p.add_argument("--scaleup", default=None, help="comma-separated scale-up domain sizes (domain_gpus)")
    p.add_argument("--zipf", default=None, help="comma-separated Zipf exponents of expert load (0 = uniform)")
    p.add_argument(
        "--sweep",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="a simulate() keyword (global_batch, seq_len, micro_batch, allow_oom), ClusterSpec or LayoutSpec "
        "field, e.g. pp=10,12",
    )
    p.add_argument(
        "--out",
        default="compare.csv",
        help="CSV path (default compare.csv in the current folder); the plot goes beside it as .png",
    )
    add_quiet(p)


def run_args(args: argparse.Namespace) -> pd.DataFrame:
    """Run ``moesim compare`` from parsed arguments; write the CSV and the plot."""
    axes = []
    for flag, (key, factor) in NAMED_AXES.items():
        text = getattr(args, flag)
        if text is not None:
            if flag == "nic_gbps":  # 400Gb/s, 50GB/s or a bare number of GB/s, as run's flag (topologies/units.py)
                values = [_bandwidth(flag, v) for v in _csv_list(text)]
            else:
                values = [parse_value(key, v, field=flag) for v in _csv_list(text)]
            check_values(flag, flag, values)  # the values as given (GB/s), before the unit factor: within bounds
            axes.append(axis(key, [v * factor if factor != 1 else v for v in values], label=flag))
    for item in args.sweep:
        key, _, text = item.partition("=")
        if not text:
            raise ConfigError("sweep", f"expected KEY=V1,V2, got {item!r}")
        key = key.strip()
        axes.append(axis(key, [parse_value(key, v) for v in _csv_list(text)]))
    # --set and --seq-len: axes of one value, so they are checked as --sweep's are and recorded in the CSV
    fixed = [("seq_len", str(args.seq_len), "--seq-len")] if args.seq_len is not None else []
    for item in args.set:
        key, sep, text = item.partition("=")
        if not sep or not key.strip() or not text:
            raise ConfigError("--set", f"expected KEY=VALUE, got {item!r}")
        fixed.append((key.strip(), text, f"--set {key.strip()}"))
    for key, text, flag in fixed:
        if key in {a.key for a in axes}:
            raise ConfigError(flag, f"{key} is swept too (--sweep or a named flag); give one")
        axes.append(axis(key, [parse_value(key, text, field=flag)]))
    try:
        gpus = [int(g) for g in _csv_list(args.gpus)]
    except ValueError:
        raise ConfigError("gpus", f"expected comma-separated integers, got {args.gpus!r}") from None
    layouts = _csv_list(args.layouts)
    for flag, given in (("gpus", gpus), ("layouts", layouts)):
        if not given:
            raise ConfigError(flag, f"give at least one value (comma-separated), got {getattr(args, flag)!r}")
    check_values("gpus", "gpus", gpus)
    out = check_output_file("out", args.out, (".csv",))
    for name in layouts:
        load_layout(name)  # unknown presets and bad layout files fail before any simulation
    load_model(args.model)
    frame = sweep(
        args.model, layouts, gpus, axes, cluster=args.cluster, global_batch=args.global_batch, quiet=args.quiet
    )
    for a in axes:  # report the values as given (GB/s, not bytes/s)
        if a.label == "nic_gbps":
            frame[a.column] = frame[a.column] / 1e9
    _add_bands(frame, args.model, args.cluster)
    write_csv(frame, out, float_format="%.6g")
    from experiments.search.compare_plot import plot

    plot(frame, [a.column for a in axes], out.with_suffix(".png"), f"{args.model}: moesim compare")
    shown = ["layout", *(a.column for a in axes), "gpus", "step_time_s", "tokens_per_s", "mfu", "error"]
    formats = {"step_time_s": "{:.3f}".format, "tokens_per_s": "{:,.0f}".format, "mfu": "{:.1%}".format}
    print(frame[shown].fillna({"error": ""}).to_string(index=False, formatters=formats, na_rep="-"))
    print(f"wrote {out} and {out.with_suffix('.png')}")
    if frame.error.astype(bool).all():  # nothing to compare: a script must not read this as success
        raise ConfigError("compare", f"every point failed ({len(frame)} of {len(frame)}); first: {frame.error.iloc[0]}")
    return frame
