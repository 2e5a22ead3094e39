"""Physical bounds on hardware and cluster numbers, in one place, each with the reason for its ends.

A value outside its bound is a typo or a unit slip (GB/s given as B/s, 1e-300 from a script), never hardware:
it is refused in one line before any work, because the simulator's times come from dividing by these numbers
and a FLOP/s or a bandwidth near zero drives a step towards overflow (1e-300 B/s: 3.6e307 s) or a NaN.
The bounds are wide on purpose (100x or more beyond the hardware of 2025 on both sides) and hold the
idealised values tests use to make a resource free (a 1 PB/s NIC, 1 ps of latency).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from topologies.errors import ConfigError, short_repr


class Bound(NamedTuple):
    """Closed interval [low, high] of one physical quantity, with its unit and why each end is where it is."""

    low: float
    high: float
    unit: str
    why: str


BOUNDS: dict[str, Bound] = {
    "bandwidth": Bound(
        1e6,
        1e15,
        "B/s",
        "1 MB/s is 10x below 100 Mb/s Ethernet; 1 PB/s is 1,000x NVLink 5 (0.9 TB/s per direction per GPU) "
        "and 125x B200 HBM (8 TB/s)",
    ),
    "flops": Bound(
        1e12,
        1e17,
        "FLOP/s",
        "1 TFLOP/s is 100x below the slowest preset (H20, 148 TFLOP/s); 100 PFLOP/s is 20x GB200's dense "
        "FP8 (5 PFLOP/s)",
    ),
    "latency": Bound(
        1e-12,
        1.0,
        "s",
        "1 ps (light crosses 0.3 mm) is free to the simulator; 1 s is 70,000x NCCL's network step (14 us)",
    ),
    "memory": Bound(
        1e6,
        1e14,
        "B",
        "1 MB holds no layer of any model (a job fits nothing); 100 TB is 350x the largest HBM (GB300, 288 GB)",
    ),
    "sm_count": Bound(1, 10_000, "SMs", "a GPU has at least one; 10,000 is 65x B200's 148"),
    "count": Bound(
        1,
        1_000_000,
        "",
        "a cluster, a scale-up domain and a pod hold at least one; 10^6 GPUs is 5x the largest cluster "
        "announced by 2025 (xAI Colossus, 200,000 GPUs)",
    ),
    "efficiency": Bound(
        0.01,
        1.0,
        "",
        "a fraction of line rate: 1% is 90x below NCCL's measured 94% (NVIDIA/nccl-tests #290, #267); 1 is all",
    ),
    "oversubscription": Bound(
        1.0, 1_000.0, "", "1 is non-blocking; 1,000:1 is 250x the 4:1 of an oversubscribed fabric (assumed)"
    ),
}

# Where each number of GpuSpec / ClusterSpec (and the command-line / sweep ``nic_gbps``) belongs: its quantity,
# the factor from its unit to the bound's, and its unit in messages.
QUANTITIES: dict[str, tuple[str, float, str]] = {
    "peak_bf16_flops": ("flops", 1.0, "FLOP/s"),
    "peak_fp8_flops": ("flops", 1.0, "FLOP/s"),
    "peak_fp4_flops": ("flops", 1.0, "FLOP/s"),
    "hbm_bytes": ("memory", 1.0, "B"),
    "hbm_bandwidth_Bps": ("bandwidth", 1.0, "B/s"),
    "sm_count": ("sm_count", 1.0, "SMs"),
    "nvlink_bandwidth_Bps": ("bandwidth", 1.0, "B/s"),
    "nvlink_latency_s": ("latency", 1.0, "s"),
    "nic_bandwidth_Bps": ("bandwidth", 1.0, "B/s"),
    "nic_gbps": ("bandwidth", 1e9, "GB/s"),
    "nic_efficiency": ("efficiency", 1.0, ""),
    "nic_latency_s": ("latency", 1.0, "s"),
    "leaf_oversubscription": ("oversubscription", 1.0, ""),
    "gpus": ("count", 1.0, "GPUs"),
    "num_gpus": ("count", 1.0, "GPUs"),
    "domain_gpus": ("count", 1.0, "GPUs"),
    "scaleup": ("count", 1.0, "GPUs"),  # moesim compare --scaleup: domain_gpus
    "nodes_per_leaf": ("count", 1.0, "nodes"),
}


# The job sizes a sweep or a compare axis may vary: at least 1, refused at input like the hardware's zeros (their
# upper ends are the work limits of workloads/specs/limits.py, checked when the run is built).
AT_LEAST_ONE = ("global_batch", "seq_len", "micro_batch")


def check_physical(field: str, key: str, value: object) -> None:
    """Raise ConfigError(field) unless ``value`` is a finite number within the bound of ``key`` (a GpuSpec or
    ClusterSpec field, or nic_gbps), or an integer >= 1 for a job size; other keys are left to their own checks."""
    if key in AT_LEAST_ONE and not isinstance(value, bool) and isinstance(value, int) and value < 1:
        raise ConfigError(field, f"must be >= 1, got {value}")
    if key not in QUANTITIES:
        return
    name, factor, unit = QUANTITIES[key]
    bound = BOUNDS[name]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(field, f"must be a number, got {short_repr(value)}")
    low, high = bound.low / factor, bound.high / factor
    shown = (lambda x: f"{int(x):,}") if name in ("count", "sm_count") else (lambda x: f"{x:g}")
    span = f"[{shown(low)}, {shown(high)}]{' ' + unit if unit else ''}"
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(field, f"must be a finite number > 0, within {span}; got {short_repr(value)}")
    if not low <= value <= high:
        raise ConfigError(
            field, f"{shown(value)} is outside the physical bound {span} ({bound.why}; topologies/bounds.py)"
        )


def check_values(field: str, key: str, values: object) -> None:
    """check_physical of each of ``values`` (one value or a list): a sweep axis or a comma-separated flag."""
    for value in values if isinstance(values, (list, tuple)) else [values]:
        check_physical(field, key, value)
