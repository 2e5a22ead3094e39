"""Clusters as data: a preset name or a strict YAML file of ClusterSpec fields, checked like models and layouts.

A cluster file describes hardware, never the job: the GPU count comes from ``--gpus``. It names a cluster
preset to start from (``base: gb200``), a GPU preset (``gpu: h100``) or gives the GPU as a mapping of every
GpuSpec field (or ``base:`` a GPU preset plus the fields that differ), and any other ClusterSpec field in SI
units. An unknown key, a value of the wrong type or a missing key is one ConfigError naming the key
(``cluster.gpu.hbm_bytes``). It lives here, not in topologies, because it reuses the YAML machinery of
workloads.inputs.yaml_files and topologies must not import workloads.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from topologies.cluster import CLUSTER_PRESETS, ClusterSpec, cluster_fields, cluster_preset
from topologies.errors import ConfigError
from topologies.hardware import GPU_PRESETS, GpuSpec, gpu_preset
from workloads.inputs.yaml_files import checked_fields, is_yaml_path, read_yaml, required_fields

DEFAULT_CLUSTER = "h800"  # the paper's cluster (MegaScale-MoE App. A.1: 8 H800 per node, 400 Gb/s per GPU)


def _with_base(what: str, values: dict[str, Any], presets: dict[str, Any], fields_of) -> dict[str, Any]:
    """values over the fields of the preset named by values["base"] (if any); a bad base names ``what.base``."""
    base = values.pop("base", None)
    if base is None:
        return values
    if not isinstance(base, str):
        raise ConfigError(f"{what}.base", f"must be a preset name ({', '.join(presets)}), got {base!r}")
    try:
        merged = fields_of(base)
    except ConfigError as error:
        raise ConfigError(f"{what}.base", error.rule) from None
    return {**merged, **values}


def _built(what: str, cls: type, values: dict[str, Any]) -> Any:
    """cls(**values) with the spec's own ConfigError renamed under ``what`` (the job's ``gpus`` stays as is)."""
    for key in sorted(required_fields(cls) - set(values) - {"num_gpus"}):
        raise ConfigError(f"{what}.{key}", "missing required key")
    try:
        return cls(**values)
    except ConfigError as error:
        if error.field == "gpus":
            raise
        raise ConfigError(f"{what}.{error.field}", error.rule) from None


def gpu_from_dict(data: object, what: str = "cluster.gpu") -> GpuSpec:
    """A GpuSpec from a preset name or a mapping of its fields (optionally over a preset named by ``base``)."""
    if isinstance(data, GpuSpec):
        return data
    if isinstance(data, str):
        try:
            return gpu_preset(data)
        except ConfigError as error:
            raise ConfigError(what, error.rule) from None
    if not isinstance(data, dict):
        raise ConfigError(what, f"must be a GPU preset ({', '.join(GPU_PRESETS)}) or a mapping of GpuSpec fields")
    values = checked_fields(what, GpuSpec, data, extra=("base",))
    values = _with_base(what, values, GPU_PRESETS, lambda name: asdict(gpu_preset(name)))
    return _built(what, GpuSpec, values)


def cluster_from_dict(data: object, num_gpus: int) -> ClusterSpec:
    """A ClusterSpec of num_gpus GPUs from a mapping of its fields, optionally over a preset named by ``base``."""
    if not isinstance(data, dict):
        raise ConfigError("cluster", f"must be a mapping of fields, got {type(data).__name__}")
    if "num_gpus" in data:
        raise ConfigError("cluster.num_gpus", "a cluster file describes hardware; give the job's GPUs with --gpus")
    values = checked_fields("cluster", ClusterSpec, data, extra=("base",))
    values = _with_base("cluster", values, CLUSTER_PRESETS, cluster_fields)
    if "gpu" in values:
        values["gpu"] = gpu_from_dict(values["gpu"])
    return _built("cluster", ClusterSpec, {**values, "num_gpus": num_gpus})


def load_cluster(source: ClusterSpec | str | Path | None, num_gpus: int | None) -> ClusterSpec:
    """A ClusterSpec from a spec (num_gpus replaces its size if given), a preset name or a .yaml/.yml file."""
    if isinstance(source, ClusterSpec):
        return source if num_gpus in (None, source.num_gpus) else source.with_(num_gpus=num_gpus)
    if num_gpus is None:
        raise ConfigError("gpus", "give the number of GPUs or a ClusterSpec")
    if is_yaml_path(source):
        return cluster_from_dict(read_yaml("cluster", source), num_gpus)
    if source is not None and not isinstance(source, str):
        raise ConfigError("cluster", f"must be a preset name, a YAML path or a ClusterSpec, got {source!r}")
    return cluster_preset(DEFAULT_CLUSTER if source is None else source, num_gpus)
