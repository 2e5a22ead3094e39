"""Faults on demand: stragglers, degraded links and failed NICs.

A fault names a global GPU index; simulator/engine/ranks.py (the one definition of the numbering) says which
replica, stage and local rank that GPU is.

A fault is written as on the command line: ``straggler GPU:FACTOR`` (the GPU's compute kernels take
FACTOR times longer), ``degrade LINK:FACTOR`` (LINK is ``nic:G`` or ``nvlink:G``: that port's bandwidth,
both directions, divided by FACTOR) and ``fail-link nic:G`` (the NIC is down; the GPU's NIC traffic goes
over NVLink to the next GPU of its node whose NIC works, PXN-style, and shares that NIC).

A speed spread (``gpu-speed-spread S``, seeded) gives every GPU of the cluster its own compute factor: same-SKU
GPUs differ in speed under power management and manufacturing variability (Sinha et al., "Not All GPUs Are
Created Equal", SC'22, arXiv 2208.11035: 8% average, 22% at most, performance variation across the V100 and
MI60 GPUs of four clusters, outliers up to 1.5x slower than the median). Every barrier (TP, SP, EP, PP, DP)
waits for its slowest member, so the more GPUs a job spans the slower its slowest one is likely to be.

The folded placement sees a fault through ``stage_faults``: the representative of an affected stage
becomes its slowest member (largest compute factor, smallest NVLink and NIC capacity, a NIC shared by
k GPUs counting as 1/k of one). See ``simulator/engine/placement.py`` for what that view assumes. Where
degraded NICs slow only some DP replicas, those take the stage's faults and the others run healthy beside them
(``simulator/engine/replica_classes.py``).
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Iterable
from dataclasses import dataclass, replace

from simulator.engine.ranks import Place, RankMap
from simulator.streams.op_costs import OpCosts
from topologies.cluster import ClusterSpec, Edge, gpu_path, rail_path
from topologies.errors import ConfigError, short_repr
from workloads.ops import ATTENTION, FUSED, GEMM, MEMORY, Op
from workloads.specs.limits import check_limit

LINK_KINDS = ("nic", "nvlink")
KERNEL_KINDS = (GEMM, ATTENTION, MEMORY, FUSED)  # what a straggler runs slower (not host syncs, not NCCL)


def _factor(field: str, text: str, value: str) -> float:
    try:
        factor = float(value)
    except ValueError:
        raise ConfigError(field, f"{short_repr(text)}: FACTOR must be a number, got {short_repr(value)}") from None
    if not math.isfinite(factor) or factor < 1:
        raise ConfigError(field, f"{short_repr(text)}: FACTOR must be a finite number >= 1, got {short_repr(value)}")
    return factor


def _gpu(field: str, text: str, value: str) -> int:
    try:
        gpu = int(value)
    except ValueError:
        raise ConfigError(field, f"{short_repr(text)}: GPU must be an integer index, got {short_repr(value)}") from None
    if gpu < 0:
        raise ConfigError(field, f"{short_repr(text)}: GPU index must be >= 0, got {gpu}")
    return gpu


def _link(field: str, text: str, kind: str, gpu: str) -> tuple[str, int]:
    if kind not in LINK_KINDS:
        raise ConfigError(field, f"{short_repr(text)}: LINK must be nic:GPU or nvlink:GPU, got {short_repr(kind)}")
    return kind, _gpu(field, text, gpu)


@dataclass(frozen=True)
class StageFault:
    """How the representative of one stage differs from a healthy GPU (1.0 = healthy)."""

    compute_factor: float = 1.0  # compute kernels take this many times longer
    nvlink_factor: float = 1.0  # NVLink bandwidth divided by this
    nic_factor: float = 1.0  # NIC bandwidth available to the stage's GPU divided by this
    # Whether that NIC is one GPU's degraded port (not a failed NIC's share, which its proxy's ring neighbours
    # share too): the GPUs it exchanges DP hops with keep healthy NICs (FoldedPlacement.dp_transfer)
    nic_degraded_port: bool = False
    # Where stages or replicas share a node and a degraded NIC carries only some kinds of traffic (carried_nics):
    # ("pp_out" | "pp_in" | "dp_out" | "dp_in" | "ep_out" | "ep_in", divisor) of the folded links it slows in place
    # of nic_factor (FoldedPlacement adds one link each way of that capacity, shared by those routes)
    nic_traffic: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Faults:
    """Faults injected into one simulated step; each entry names a global GPU index."""

    stragglers: tuple[tuple[int, float], ...] = ()  # (gpu, compute factor)
    degraded: tuple[tuple[str, int, float], ...] = ()  # (link kind "nic" | "nvlink", gpu, bandwidth divisor)
    failed: tuple[tuple[str, int], ...] = ()  # ("nic", gpu)
    # Every GPU's kernels take 1 + speed_spread x u_g times longer, u_g uniform in [0, 1) drawn for GPU g from
    # (speed_seed, g) (speed_factor): the published kernel speeds are the fastest GPU's, and the cluster's
    # kernel times span a range of speed_spread above them. 0 = every GPU at the published speed.
    speed_spread: float = 0.0
    speed_seed: int = 0

    def __post_init__(self) -> None:
        """Normalise to tuples and check what needs no cluster: kinds, indices, factors."""
        object.__setattr__(self, "stragglers", _entries("straggler", self.stragglers, 2, "(17, 1.2)"))
        object.__setattr__(self, "degraded", _entries("degrade", self.degraded, 3, "('nic', 17, 2.0)"))
        object.__setattr__(self, "failed", _entries("fail_link", self.failed, 2, "('nic', 17)"))
        for gpu, factor in self.stragglers:
            _check("straggler", gpu, factor)
        for kind, gpu, factor in self.degraded:
            if kind not in LINK_KINDS:
                raise ConfigError("degrade", f"LINK must be nic:GPU or nvlink:GPU, got {short_repr(kind)}")
            _check("degrade", gpu, factor)
        for kind, gpu in self.failed:
            if kind != "nic":
                raise ConfigError(
                    "fail_link",
                    f"'{kind}:{gpu}': only a NIC can fail (nic:GPU); a slow NVLink port is --degrade nvlink:GPU:FACTOR",
                )
            _check("fail_link", gpu, 1.0)
        spread, seed = self.speed_spread, self.speed_seed
        if isinstance(spread, bool) or not isinstance(spread, (int, float)) or not math.isfinite(spread) or spread < 0:
            raise ConfigError("gpu_speed_spread", f"must be a finite number >= 0, got {short_repr(spread)}")
        check_limit("gpu_speed_spread", "fault_factor", 1 + spread, "1 + the spread")
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ConfigError("gpu_speed_seed", f"must be an int >= 0, got {short_repr(seed)}")
        object.__setattr__(self, "speed_spread", float(spread))
        for kind, gpu in {(kind, gpu) for kind, gpu, _ in self.degraded}:  # several degrades of one port multiply
            product = self.link_factor(kind, gpu)
            check_limit("degrade", "fault_factor", product, f"{kind}:{gpu}: the product of its FACTORs")

    @classmethod
    def parse(
        cls,
        straggler: Iterable[str] = (),
        degrade: Iterable[str] = (),
        fail_link: Iterable[str] = (),
        speed_spread: float = 0.0,
        speed_seed: int = 0,
    ) -> Faults:
        """Build from command-line strings: 'GPU:FACTOR', 'nic:GPU:FACTOR' and 'nic:GPU' (and a speed spread)."""
        stragglers, degraded, failed = [], [], []
        for field, given in (("straggler", straggler), ("degrade", degrade), ("fail_link", fail_link)):
            if isinstance(given, str) or not isinstance(given, Iterable) or not all(isinstance(t, str) for t in given):
                raise ConfigError(field, f"expected a list of strings, got {short_repr(given)}")
        for text in straggler:
            parts = text.split(":")
            if len(parts) != 2:
                raise ConfigError("straggler", f"{short_repr(text)}: expected GPU:FACTOR, e.g. 17:1.2")
            stragglers.append((_gpu("straggler", text, parts[0]), _factor("straggler", text, parts[1])))
        for text in degrade:
            parts = text.split(":")
            if len(parts) != 3:
                raise ConfigError(
                    "degrade",
                    f"{short_repr(text)}: expected LINK:FACTOR with LINK nic:GPU or nvlink:GPU, e.g. nic:17:2",
                )
            degraded.append((*_link("degrade", text, parts[0], parts[1]), _factor("degrade", text, parts[2])))
        for text in fail_link:
            parts = text.split(":")
            if len(parts) != 2:
                raise ConfigError("fail_link", f"{short_repr(text)}: expected nic:GPU, e.g. nic:17")
            failed.append(_link("fail_link", text, *parts))
        return cls(tuple(stragglers), tuple(degraded), tuple(failed), speed_spread, speed_seed)

    def __bool__(self) -> bool:
        return bool(self.stragglers or self.degraded or self.failed or self.speed_spread)

    def describe(self) -> list[str]:
        """One string per fault, in the command line's words."""
        return (
            [f"straggler {gpu}:{factor:g}" for gpu, factor in self.stragglers]
            + [f"degrade {kind}:{gpu}:{factor:g}" for kind, gpu, factor in self.degraded]
            + [f"fail-link {kind}:{gpu}" for kind, gpu in self.failed]
            + ([f"gpu-speed-spread {self.speed_spread:g} (seed {self.speed_seed})"] if self.speed_spread else [])
        )

    def validate(self, cluster: ClusterSpec) -> None:
        """Check every GPU index against the cluster and that each failed NIC can be routed around."""
        for field, gpus in (
            ("straggler", [g for g, _ in self.stragglers]),
            ("degrade", [g for _, g, _ in self.degraded]),
            ("fail_link", [g for _, g in self.failed]),
        ):
            for gpu in gpus:
                if gpu >= cluster.num_gpus:
                    raise ConfigError(field, f"GPU {gpu} is not in the cluster (indices 0..{cluster.num_gpus - 1})")
        for _, gpu in self.failed:
            if cluster.gpus_per_node == 1:
                raise ConfigError(
                    "fail_link",
                    f"nic:{gpu}: cannot reroute, GPU {gpu}'s node has no other GPU to lend its NIC (gpus_per_node=1)",
                )
            if cluster.num_nodes == 1:
                raise ConfigError("fail_link", f"nic:{gpu}: a single-node cluster sends nothing over NICs")
            self.proxy(cluster, gpu)

    # --- what the faults do --------------------------------------------------------------------------
    def failed_nics(self) -> frozenset[int]:
        return frozenset(gpu for _, gpu in self.failed)

    def compute_factor(self, gpu: int) -> float:
        """How many times longer the GPU's compute kernels take: its speed-spread factor, or a slower straggler's."""
        spread = speed_factor(self.speed_spread, self.speed_seed, gpu) if self.speed_spread else 1.0
        return max([spread, *(f for g, f in self.stragglers if g == gpu)])

    def link_factor(self, kind: str, gpu: int) -> float:
        """Divisor of the bandwidth of the GPU's ``kind`` port (several degrades multiply)."""
        return math.prod(f for k, g, f in self.degraded if k == kind and g == gpu)

    def proxy(self, cluster: ClusterSpec, gpu: int) -> int:
        """The GPU whose NIC carries a failed NIC's traffic: the next one of its node with a working NIC."""
        node, rail = divmod(gpu, cluster.gpus_per_node)
        failed = self.failed_nics()
        for step in range(1, cluster.gpus_per_node):
            other = node * cluster.gpus_per_node + (rail + step) % cluster.gpus_per_node
            if other not in failed:
                return other
        raise ConfigError("fail_link", f"nic:{gpu}: every NIC of node {node} is down; nothing to reroute through")

    def nic_sharers(self, cluster: ClusterSpec) -> dict[int, int]:
        """GPUs using each proxy's NIC (itself plus the failed NICs rerouted to it)."""
        sharers: dict[int, int] = {}
        for gpu in sorted(self.failed_nics()):
            proxy = self.proxy(cluster, gpu)
            sharers[proxy] = sharers.get(proxy, 1) + 1
        return sharers

    def stage_faults(self, cluster: ClusterSpec, ranks: RankMap, wraps: bool = False) -> list[StageFault]:
        """The folded view: per stage, its slowest member over all DP replicas and local ranks. A NIC that no
        PP send or DP hop crosses (``carried_nics``; ``wraps``: the last stage and the first send to each other,
        interleaved)
        slows nothing, degraded or failed."""
        pp = ranks.pp
        nic_faults = self.failed or any(kind == "nic" for kind, _, _ in self.degraded)
        carried = carried_nics(cluster, ranks, wraps) if nic_faults else None
        traffic: list[dict[str, float]] = [{} for _ in range(pp)]
        kinds = {tag[:2] for tags in carried.values() for tag in tags} if carried is not None else set()
        compute, nvlink, nic, shared = [1.0] * pp, [1.0] * pp, [1.0] * pp, [1.0] * pp
        slowed = range(cluster.num_gpus) if self.speed_spread else {gpu for gpu, _ in self.stragglers}
        for gpu in slowed:
            stage = ranks.place(gpu).stage
            compute[stage] = max(compute[stage], self.compute_factor(gpu))
        for kind, gpu, _ in self.degraded:
            stage = ranks.place(gpu).stage
            tags = carried.get(gpu, set()) if carried is not None and kind == "nic" else None
            if tags is not None and {tag[:2] for tag in tags} != kinds:
                for tag in tags:  # some of the kinds of traffic cross it: slow those kinds' folded routes only
                    traffic[stage][tag] = max(traffic[stage].get(tag, 1.0), self.link_factor(kind, gpu))
            elif kind == "nvlink":
                nvlink[stage] = max(nvlink[stage], self.link_factor(kind, gpu))
            else:
                nic[stage] = max(nic[stage], self.link_factor(kind, gpu))
        # A failed NIC's GPU and its proxy both get 1/k of the proxy's NIC (k GPUs share it).
        sharers = self.nic_sharers(cluster)
        for gpu in sorted(self.failed_nics()):
            if carried is not None and gpu not in carried:  # a failed NIC that carries nothing moves nothing
                continue
            proxy = self.proxy(cluster, gpu)
            share = sharers[proxy] * self.link_factor("nic", proxy)
            for member in (gpu, proxy):
                stage = ranks.place(member).stage
                shared[stage] = max(shared[stage], share)
        return [
            StageFault(c, v, max(x, k), x > k, tuple(sorted(t.items())))
            for c, v, x, k, t in zip(compute, nvlink, nic, shared, traffic)
        ]


def carried_nics(cluster: ClusterSpec, ranks: RankMap, wraps: bool = False) -> dict[int, set[str]] | None:
    """Per GPU, what its NIC carries of the step's PP sends, DP ring hops and cross-node EP ("pp_out", "pp_in",
    "dp_out", "dp_in", "ep_out", "ep_in"; GPUs whose NIC carries none are left out), where a replica's stage is
    smaller than a node; None elsewhere, where every GPU's cross-node traffic leaves by its own NIC. A hop
    between nodes leaves by the NIC of the source node's GPU on the destination's rail (NCCL's PXN,
    topologies.gpu_path) and lands on the destination's: in a node shared by stages or replicas some GPUs' NICs
    carry a stage's PP sends, others its DP ring's wrap, others nothing, where the folded view has one NIC per
    stage (tests/differential/test_degraded_nic.py: a NIC degraded 16 times that carried nothing made the folded
    step 15 times the unfolded one; one that carried only PP sends, twice)."""
    gpn = cluster.gpus_per_node
    if ranks.group >= gpn:
        return None
    # an expert group wider than a node: each GPU's all-to-all goes to its own rail's peers (UnfoldedPlacement._plan)
    carried: dict[int, set[str]] = (
        {gpu: {"ep_out", "ep_in"} for gpu in range(cluster.num_gpus)} if ranks.ep * ranks.etp > gpn else {}
    )
    for gpu in range(cluster.num_gpus):
        for kind, peer in hop_peers(ranks, ranks.place(gpu), wraps):
            dst = ranks.gpu(peer)
            if dst // gpn != gpu // gpn:
                carried.setdefault(gpu // gpn * gpn + dst % gpn, set()).add(f"{kind}_out")
                carried.setdefault(dst, set()).add(f"{kind}_in")
    return carried


def hop_peers(ranks: RankMap, place: Place, wraps: bool = False) -> list[tuple[str, Place]]:
    """Where ``place`` sends PP activations and gradients ("pp": the neighbouring stages; ``wraps``: the last stage
    and the first also send to each other, forward and backward, as the interleaved schedule's chunks do) and its
    DP ring hop ("dp": its ring successor)."""
    stages = [s for s in (place.stage - 1, place.stage + 1) if 0 <= s < ranks.pp]
    if wraps and place.stage in (0, ranks.pp - 1):
        stages.append(ranks.pp - 1 - place.stage)
    return [("pp", place.at_stage(stage)) for stage in stages] + [("dp", ranks.dp_successor(place))]


@functools.lru_cache(maxsize=1 << 16)
def speed_factor(spread: float, seed: int, gpu: int) -> float:
    """GPU ``gpu``'s compute factor under a speed spread: 1 + spread x u, u uniform in [0, 1) from
    numpy's generator seeded with (seed, gpu), so a GPU keeps its speed whatever the cluster's size."""
    import numpy as np  # NOTE: here, not at start-up: only a speed spread needs it

    return 1.0 + spread * float(np.random.default_rng((seed, gpu)).random())


def _entries(field: str, value: object, arity: int, example: str) -> tuple[tuple, ...]:
    """``value`` as a tuple of ``arity``-tuples, or ConfigError(field) (a string, a wrong length, ...)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise ConfigError(field, f"expected a list of tuples such as {example}, got {short_repr(value)}")
    entries = []
    for entry in value:
        if isinstance(entry, (str, bytes)) or not isinstance(entry, Iterable) or len(entry := tuple(entry)) != arity:
            raise ConfigError(field, f"each entry is a tuple such as {example}, got {short_repr(entry)}")
        entries.append(tuple(_plain(item) for item in entry))
    return tuple(entries)


def _plain(item: object) -> object:
    """numpy integers and floats as Python ints and floats (bools and strings as given)."""
    if isinstance(item, numbers.Integral) and not isinstance(item, bool):
        return int(item)
    if isinstance(item, numbers.Real) and not isinstance(item, bool):
        return float(item)
    return item


def _check(field: str, gpu: object, factor: object) -> None:
    """Raise ConfigError naming ``field`` unless gpu is an int >= 0 and factor a finite number >= 1."""
    if isinstance(gpu, bool) or not isinstance(gpu, int) or gpu < 0:
        raise ConfigError(field, f"GPU index must be an int >= 0, got {short_repr(gpu)}")
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not math.isfinite(factor) or factor < 1:
        raise ConfigError(field, f"FACTOR must be a finite number >= 1, got {short_repr(factor)}")
    check_limit(field, "fault_factor", factor, f"GPU {gpu}: FACTOR")


def scale_compute(costs: OpCosts, ops: tuple[Op, ...], factor: float) -> OpCosts:
    """OpCosts with the compute kernels' times (compute ops and fused GEMMs) multiplied by ``factor``."""
    if factor == 1.0:
        return costs
    return replace(
        costs, compute_s=tuple(c * factor if op.kind in KERNEL_KINDS else c for c, op in zip(costs.compute_s, ops))
    )


def fault_path(cluster: ClusterSpec, src: int, dst: int, failed: frozenset[int]) -> list[Edge]:
    """``gpu_path`` around failed NICs: if the rail it would use is down at either end, take the next rail
    whose NICs work at both ends, with an NVLink hop to that rail's GPU on each node (PXN)."""
    path = gpu_path(cluster, src, dst)
    gpn = cluster.gpus_per_node
    src_node, dst_node = src // gpn, dst // gpn
    if not failed or src_node == dst_node:
        return path
    rail = dst % gpn
    for step in range(gpn):
        out, into = src_node * gpn + (rail + step) % gpn, dst_node * gpn + (rail + step) % gpn
        if out in failed or into in failed:
            continue
        if step == 0:
            return path
        head = [] if out == src else [(("gpu", src), ("nvswitch", src_node)), (("nvswitch", src_node), ("gpu", out))]
        tail = [] if into == dst else [(("gpu", into), ("nvswitch", dst_node)), (("nvswitch", dst_node), ("gpu", dst))]
        return head + rail_path(cluster, out, into) + tail
    raise ConfigError("fail_link", f"no rail with working NICs between GPU {src} and GPU {dst}")
