"""The sweep output table's bookkeeping: rows keyed by a hash of the resolved inputs (the contents of model,
layout and cluster files included, so an edited file reruns its points), an exclusive lock (one writer per
table), and error and stale rows dropped on resume so their points run again."""

from __future__ import annotations

import csv
import fcntl
import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from experiments.common.paths import atomic_path
from topologies.errors import ConfigError
from workloads.inputs.huggingface.names import is_hf_config_path
from workloads.inputs.yaml_files import is_yaml_path
from workloads.specs.limits import limit

Params = dict[str, object]  # one grid row as written in the file and in point_id
FILE_KEYS = ("model", "layout", "cluster")  # keys whose value may name a file


def point_id(point: Params) -> str:
    """A stable key of a point: its parameters as sorted JSON."""
    return json.dumps(point, sort_keys=True, separators=(",", ":"))


def unique(points: list[Params]) -> list[Params]:
    """The points without repeats (first occurrence kept, in order)."""
    seen: dict[str, Params] = {}
    for point in points:
        seen.setdefault(point_id(point), point)
    return list(seen.values())


def _file_digest(value: object) -> str:
    """sha256 of the file a model / layout / cluster value names ('' for a preset, 'missing' if unreadable)."""
    if not isinstance(value, str) or not (is_yaml_path(value) or is_hf_config_path(value)):
        return ""
    path = Path(value)
    if path.is_dir():
        path = path / "config.json"
    try:
        if not path.is_file():
            return "missing"
        with path.open("rb") as handle:
            return hashlib.sha256(handle.read(int(limit("yaml_bytes")) + 1)).hexdigest()
    except OSError:
        return "missing"


def inputs_hash(point: Params) -> str:
    """A short hash of the point's parameters and the contents of the files they name."""
    digest = hashlib.sha256(point_id(point).encode())
    for key in FILE_KEYS:
        digest.update(f"\0{key}\0{_file_digest(point.get(key))}".encode())
    return digest.hexdigest()[:16]


@contextmanager
def locked(table: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``table`` (a .lock file beside it); a second writer is a one-line ConfigError."""
    table.parent.mkdir(parents=True, exist_ok=True)
    lock = table.with_name(f".{table.name}.lock")
    with lock.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(
                "sweep.output", f"{table} is being written by another sweep; wait for it or choose another output"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def keep_done(table: Path, header: list[str], hashes: dict[str, str]) -> set[str]:
    """The inputs hashes of rows to keep; error rows and rows of a current point whose inputs changed are removed
    from ``table`` (rewritten atomically), so their points run again."""
    with table.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    kept = [
        row
        for row in rows
        if not row.get("error")
        and hashes.get(row.get("point_id", ""), row.get("inputs_hash")) == row.get("inputs_hash")
    ]
    if len(kept) != len(rows):
        with atomic_path(table) as temporary, temporary.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=header, restval="", extrasaction="ignore")
            writer.writeheader()
            writer.writerows(kept)
    return {row["inputs_hash"] for row in kept if row.get("inputs_hash")}
