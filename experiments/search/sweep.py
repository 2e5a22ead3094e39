"""``moesim sweep SWEEP.yaml``: simulate a grid of configurations into a CSV (or Parquet) table.

Rows are appended in the points' order, keyed by a ``point_id`` (the point's parameters as JSON) and an
``inputs_hash`` (those and the contents of the files they name), so a rerun skips what is already there: an
interrupted sweep keeps every row written, while error rows and points whose files changed run again (experiments/
search/sweep_table.py, which also locks the table against a second writer). Points run here, in local processes
(``--jobs``) or on a dask.distributed cluster (``--scheduler tcp://host:8786``), in batches, through one code path
(experiments/common/parallel.py ``Workers``): every backend writes the same table. Invalid points (ConfigError)
are rows with an ``error`` column instead of crashes.

Values are type-checked when the file is loaded: a value of the wrong type (``gpus: [240, "x"]``, ``true``
for an integer, ``4.0`` for an integer) is one ConfigError naming the key (``sweep.gpus``) before any point
runs. ``model``, ``layout`` and ``cluster`` take preset names or .yaml/.yml files; a relative file path, like
``output``, is relative to the sweep file's folder. A cluster that cannot be built for a reason other than the
point's GPU count (a missing file, a value outside its physical bound, topologies/bounds.py) is refused in one
line before any point runs (``check_clusters``): it would fail every point that names it.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import itertools
import json
import math
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from pathlib import Path
from typing import Protocol

from experiments.common.parallel import Workers
from experiments.common.paths import atomic_path, check_output_file
from experiments.common.progress import bar
from experiments.search.points import Point, kind_of, make_point, run_point
from experiments.search.sweep_rows import WholeRows
from experiments.search.sweep_table import Params, inputs_hash, keep_done, locked, point_id, unique
from simulator.report.clusters import load_cluster
from simulator.report.simulate import COMM_KINDS, Report
from topologies.bounds import check_physical
from topologies.errors import ConfigError
from topologies.units import bandwidth_GBps
from workloads.inputs.yaml_files import is_yaml_path, load_layout, load_model, read_yaml
from workloads.specs.fieldtypes import check_value
from workloads.specs.layouts import LayoutSpec
from workloads.specs.limits import check_limit

SIM_KEYS = ("model", "layout", "gpus", "global_batch", "seq_len", "micro_batch", "cluster", "nic_gbps")
LAYOUT_KEYS = tuple(f.name for f in dataclasses.fields(LayoutSpec) if f.name not in ("name", "micro_batch"))
# The type of every key's values (int, float, bool or str), checked by check_point: the point's own keys,
# the NIC in GB/s (converted to ClusterSpec's bytes/s) and the simulate() keywords and layout fields.
KINDS = {
    "model": "str",
    "layout": "str",
    "cluster": "str",
    "gpus": "int",
    "nic_gbps": "float",
    **{k: kind_of(k) for k in ("global_batch", "seq_len", "micro_batch", *LAYOUT_KEYS)},
}
PATH_KEYS = ("model", "layout", "cluster")  # keys that may name a .yaml file
OPTIONAL_KEYS = ("global_batch", "seq_len", "micro_batch", "nic_gbps")  # null: the default
DEFAULTS = {"model": "paper-352b", "layout": "megascale-moe", "cluster": "h800"}
REPORT_COLUMNS = [f.name for f in dataclasses.fields(Report) if f.name not in ("exposed_comm_s", "memory_gib")] + [
    f"exposed_{kind}_s"
    for kind in (*COMM_KINDS, "cp", "etp")  # cp, etp: blank unless the layout uses them
]


def load_sweep(path: str | Path, out: str | Path | None = None) -> tuple[list[Params], Path]:
    """Read a sweep file: the grid's points (cartesian product) and the output path (``out``, relative to the working
    folder, where given; else the file's ``output``, relative to the file)."""
    spec = dict(read_yaml("sweep", path))  # a readable YAML mapping, or ConfigError("sweep", ...)
    output = spec.pop("output", None)
    field = "sweep.output" if out is None else "out"
    if out is not None:
        output = Path(out).absolute()
    if not output:
        raise ConfigError(field, "give an output path ending in .csv or .parquet (or --out)")
    if Path(str(output)).suffix not in (".csv", ".parquet"):
        raise ConfigError(field, f"must end in .csv or .parquet, got '{output}'")
    if Path(str(output)).suffix == ".parquet":
        check_parquet()
    for key in spec:
        if key not in SIM_KEYS and key not in LAYOUT_KEYS:
            raise ConfigError(f"sweep.{key}", f"unknown key; use {', '.join(SIM_KEYS)}, output or a layout field")
    if "gpus" not in spec:
        raise ConfigError("sweep.gpus", "give the number of GPUs (a value or a list)")
    output = Path(str(output))
    if not output.is_absolute():
        output = Path(path).parent / output
    check_output_file(field, output, (".csv", ".parquet"))
    for key, value in spec.items():
        values = value if isinstance(value, list) else [value]
        if not values:
            raise ConfigError(f"sweep.{key}", "give a value or a non-empty list")
        if key == "nic_gbps":  # as --nic-gbps takes it: 400Gb/s, 50GB/s (topologies/units.py); a number is GB/s
            values = [bandwidth_GBps(f"sweep.{key}", v)[0] if isinstance(v, str) else v for v in values]
        for v in values:
            _check(f"sweep.{key}", key, v)
        if key in PATH_KEYS:
            values = [_relative_to(Path(path).parent, v) for v in values]
        spec[key] = values if isinstance(value, list) else values[0]
    sizes = [len(value) for value in spec.values() if isinstance(value, list)]
    check_limit("sweep", "sweep_points", math.prod(sizes), "grid points")  # before the grid is built
    points = grid({**DEFAULTS, **spec})
    check_clusters(points)
    return points, output


def check_clusters(points: list[Params]) -> None:
    """Raise ConfigError("sweep.cluster", ...) if a cluster the points name cannot be built for a reason of its own
    (its file, its hardware numbers, its packing fields): every point naming it would be an error row. An error
    about the job's GPU count (field ``gpus``) stays the row of the points it concerns."""
    tried: set[tuple[object, object]] = set()
    for params in points:
        source, gpus = params.get("cluster", DEFAULTS["cluster"]), params.get("gpus")
        if (source, gpus) in tried or isinstance(gpus, bool) or not isinstance(gpus, int):
            continue
        tried.add((source, gpus))
        try:
            load_cluster(source, gpus)
        except ConfigError as error:
            if error.field != "gpus":
                raise ConfigError("sweep.cluster", f"{source}: {error}") from None


def check_parquet() -> None:
    """Raise a one-line ConfigError, before any point runs, unless pandas can write Parquet (pyarrow)."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise ConfigError("sweep.output", "a .parquet output needs pyarrow: pip install 'moesim[parquet]'") from None


def _relative_to(folder: Path, value: str) -> str:
    """A relative .yaml path taken relative to ``folder``; preset names and absolute paths as given."""
    if is_yaml_path(value) and not Path(value).is_absolute():
        return str(folder / value)
    return value


def _check(field: str, key: str, value: object) -> None:
    """Raise ConfigError(field, ...) unless value has key's type (ints stay ints: point ids do not change)."""
    if not (value is None and key in OPTIONAL_KEYS):
        check_value(field, KINDS[key], value)
        check_physical(field, key, value)  # gpus, nic_gbps within physical bounds (topologies/bounds.py)


def check_point(point: Params) -> None:
    """Raise ConfigError naming the first key whose value has the wrong type (or is unknown)."""
    for key, value in point.items():
        if key not in KINDS:
            raise ConfigError(key, f"unknown key; use {', '.join(SIM_KEYS)} or a layout field")
        _check(key, key, value)


def grid(spec: dict[str, object]) -> list[Params]:
    """Cartesian product of a mapping whose values are scalars or lists, in key order."""
    keys = [k for k in (*SIM_KEYS, *LAYOUT_KEYS) if k in spec]
    values = [v if isinstance(v, list) else [v] for v in (spec[k] for k in keys)]
    return [dict(zip(keys, combo)) for combo in itertools.product(*values)]


Specs = dict[tuple, object]  # ("model", source), ("layout", source), ("cluster", source, gpus) -> its spec


def _sources(params: Params) -> list[tuple[tuple, Callable[[], object]]]:
    """The specs a point names, each with how to load it; a source of the wrong type has none (check_point's)."""
    model, layout, cluster = (params.get(k, DEFAULTS[k]) for k in ("model", "layout", "cluster"))
    gpus = params.get("gpus")
    named = []
    if isinstance(model, str):
        named.append((("model", model), lambda: load_model(model)))
    if isinstance(layout, str):
        named.append((("layout", layout), lambda: load_layout(layout)))
    if isinstance(cluster, str) and isinstance(gpus, int) and not isinstance(gpus, bool):
        named.append((("cluster", cluster, gpus), lambda: load_cluster(cluster, gpus)))
    return named


def load_specs(points: list[Params]) -> Specs:
    """The models, layouts and clusters the points name, each loaded once, here, for the workers to share: a YAML
    file takes ~2 ms to read and parse, once per sweep instead of once per point and phase. A source that fails to
    load is left out: each of its points loads it again, on its worker, and gets its error row as before."""
    specs: Specs = {}
    failed: set[tuple] = set()
    for params in points:
        for key, load in _sources(params):
            if key in specs or key in failed:
                continue
            try:
                specs[key] = load()
            except Exception:  # noqa: BLE001 - raised again by the point's own load, where it always was
                failed.add(key)
    return specs


def to_point(params: Params, specs: Specs | None = None) -> Point:
    """The typed point of one grid row (raises ConfigError for invalid ones, including values of the wrong type),
    on the specs loaded already where ``specs`` has them."""
    check_point(params)
    if "gpus" not in params:
        raise ConfigError("gpus", "give the number of GPUs")
    settings = {k: v for k, v in params.items() if k not in DEFAULTS and k != "gpus" and v is not None}
    if "nic_gbps" in settings:  # GB/s -> bytes/s, once, at the boundary
        settings["nic_bandwidth_Bps"] = settings.pop("nic_gbps") * 1e9
    model, layout, cluster = (params.get(k, DEFAULTS[k]) for k in ("model", "layout", "cluster"))
    if specs:
        model = specs.get(("model", model), model)
        layout = specs.get(("layout", layout), layout)
        cluster = specs.get(("cluster", cluster, params["gpus"]), cluster)
    return make_point(model, layout, params["gpus"], settings, cluster=cluster)


def sweep_row(params: Params, specs: Specs | None = None) -> dict[str, object]:
    """One output row: the point's parameters, the report's columns (or an error) and point_id."""
    try:
        result = run_point(to_point(params, specs))
    except ConfigError as error:
        result = {"error": str(error)}
    row: dict[str, object] = dict(params)
    row.update({k: v for k, v in result.items() if k not in params})
    row["point_id"] = point_id(params)
    return row


def columns(points: list[Params]) -> list[str]:
    """CSV header: parameters, report columns, error, point_id."""
    params = [k for k in (*SIM_KEYS, *LAYOUT_KEYS) if any(k in p for p in points)]
    return params + [c for c in REPORT_COLUMNS if c not in params] + ["error", "point_id", "inputs_hash"]


class Pruner(Protocol):
    """What lets a sweep skip points that cannot matter (experiments/search/search.py ``BoundPruner``): asked, in the
    points' order and just before each is submitted, whether to skip it; told of every row that finishes."""

    skipped: int

    def skip(self, point: Params) -> bool: ...

    def seen(self, row: dict[str, object]) -> None: ...


WINDOW_PER_SLOT = 2  # with a pruner, points in flight per worker: enough to keep it busy, few submitted blind
# Without a pruner, points per task at most: a point simulates in 30 ms to seconds, a task costs the dask scheduler
# about 1 ms (experiments/common/parallel.py), and rows reach the table as batches finish (an interrupt loses the
# batches in flight, at most this many points each).
SWEEP_BATCH_MAX = 8


def _windowed(points: list[Params], workers: Workers, prune: Pruner, specs: object) -> Iterator[dict[str, object]]:
    """Rows of the points sent in order, each asked of ``prune`` just before, while at most WINDOW_PER_SLOT per
    worker are in flight (one in this process, so that each point sees every row before it); rows as they finish."""
    window = workers.slots * WINDOW_PER_SLOT if workers.parallel else 1
    pending = iter(points)
    sent: dict[Future, int] = {}  # in flight, with the order each was sent in
    try:
        while True:
            for point in pending:
                if prune.skip(point):
                    prune.skipped += 1
                    continue
                sent[workers.submit(sweep_row, point, specs)] = len(sent)
                if len(sent) >= window:
                    break
            if not sent:
                return
            for future in sorted(wait(sent, return_when=FIRST_COMPLETED).done, key=sent.__getitem__):
                del sent[future]
                row = future.result()
                prune.seen(row)
                yield row
    finally:  # an error or an early close: drop what has not run
        for future in sent:
            future.cancel()


def _rows(points: list[Params], workers: Workers, prune: Pruner | None) -> Iterator[dict[str, object]]:
    """The points' rows: in the points' order (batches of points per task), or as they finish with a pruner; the
    specs they name loaded here and put on the workers once."""
    specs = workers.share(load_specs(points))
    if prune is None:
        return workers.imap(sweep_row, points, specs, most=SWEEP_BATCH_MAX)
    return _windowed(points, workers, prune, specs)


def _describe(row: dict[str, object]) -> str:
    params = " ".join(
        f"{k}={v}"
        for k, v in json.loads(str(row["point_id"])).items()
        if k not in DEFAULTS or k == "layout" or v != DEFAULTS[k]
    )
    if row.get("error"):
        return f"{params}: error: {row['error']}"
    return f"{params}: step {float(row['step_time_s']):.3f} s, {float(row['tokens_per_s']) / 1e3:.1f}k tokens/s"


def run_sweep(
    points: list[Params],
    output: str | Path,
    *,
    jobs: int = 1,
    scheduler: str | object | None = None,
    workers: Workers | None = None,
    progress: Callable[[str], None] | None = None,
    quiet: bool = False,
    prune: Pruner | None = None,
    watch: Callable[[dict[str, object]], None] | None = None,
) -> Path:
    """Simulate the points not yet in ``output`` (repeats once), appending rows in the points' order; returns the
    output path. The points run on ``workers``, else on ``jobs`` local processes or the dask cluster ``scheduler``
    (started and stopped here). One writer per output (a lock); error rows and rows whose inputs changed run again.
    ``progress`` gets every line, one per point included; without it a bar on stderr (experiments.common.progress)
    stands for the per-point lines, whose results are in the table. With ``prune``, points are sent in the order
    given, those it skips get no row, and rows are appended as they finish. ``watch`` sees each row written."""
    output = Path(output)
    table = output if output.suffix == ".csv" else output.with_suffix(".partial.csv")
    points = unique(points)
    with locked(table), contextlib.ExitStack() as stack:

        def start() -> Workers:
            return workers or stack.enter_context(Workers(jobs, scheduler))

        _run_locked(points, output, table, start, progress, quiet, prune, watch)
    return output


def _run_locked(
    points: list[Params],
    output: Path,
    table: Path,
    start_workers: Callable[[], Workers],
    progress: Callable[[str], None] | None,
    quiet: bool,
    prune: Pruner | None = None,
    watch: Callable[[dict[str, object]], None] | None = None,
) -> None:
    say = progress or (lambda line: None if quiet else print(line, file=sys.stderr, flush=True))
    header = columns(points)
    fresh = not table.exists() or table.stat().st_size == 0
    if not fresh:
        with table.open(newline="") as handle:
            existing = next(csv.reader(handle), [])
        if existing != header:
            raise ConfigError("sweep.output", f"{table} has other columns; choose a new output file")
        data = table.read_bytes()
        if not data.endswith(b"\n"):  # a row cut off by a crash: drop it, its point runs again
            with table.open("r+b") as handle:
                handle.truncate(data.rfind(b"\n") + 1)
    if output.suffix == ".parquet":
        check_parquet()
    workers = start_workers()  # before the table is touched: an unreachable scheduler changes nothing
    hashes = {point_id(p): inputs_hash(p) for p in points}
    seen = set() if fresh else keep_done(table, header, hashes)
    todo = [p for p in points if hashes[point_id(p)] not in seen]
    if prune is not None and seen:  # rows kept from an earlier run count towards what a point must beat
        for row in read_rows(table):
            if row.get("inputs_hash") in seen:
                prune.seen(row)
    done = len(points) - len(todo)
    say(f"sweep: {len(points)} points, {done} already in {table}, running {len(todo)} {workers.where()}")
    table.parent.mkdir(parents=True, exist_ok=True)
    start, number = time.perf_counter(), 0
    rows = _rows(todo, workers, prune)
    with WholeRows(table, header) as writer:
        if fresh:
            writer.write_header()
        try:
            with bar(len(todo), "sweep", quiet=quiet or progress is not None) as shown:
                for number, row in enumerate(rows, 1):
                    writer.write({**row, "inputs_hash": hashes[str(row["point_id"])]})
                    shown.update()
                    if watch:
                        watch(row)
                    if progress:
                        progress(f"[{number}/{len(todo)}] {_describe(row)}")
        except KeyboardInterrupt:  # said in one line by experiments/cli/failures.py
            raise KeyboardInterrupt(f"finished rows are in {table}, rerun to resume") from None
    if output.suffix == ".parquet":
        import pandas as pd

        with atomic_path(output) as temporary:
            pd.read_csv(table).to_parquet(temporary)
    skipped = f" ({prune.skipped} skipped: they cannot rank)" if prune is not None else ""
    say(f"sweep: {number} points{skipped} in {time.perf_counter() - start:.1f} s -> {output}")


def main_sweep(path: str, jobs: int, scheduler: str | None, quiet: bool = False, out: str | None = None) -> None:
    """CLI entry: load the sweep file and run it (into ``out`` where given)."""
    points, output = load_sweep(path, out)
    run_sweep(points, output, jobs=jobs, scheduler=scheduler, quiet=quiet)


def read_rows(table: str | Path) -> Iterable[dict[str, str]]:
    """The rows of a CSV sweep table, as strings."""
    with Path(table).open(newline="") as handle:
        yield from csv.DictReader(handle)
