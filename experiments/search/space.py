"""The layouts ``moesim search`` tries, and the pruning that rejects most of them before any simulation.

A point is simulated only if it passes three checks, cheapest first, each counted in ``Pruned``:

1. *divides*: arithmetic alone, the GPUs over intra_size x cp x pp, the batch over DP x micro-batch;
2. *valid*: every rule between fields (workloads/specs/validation.py, run when the StepWorkload is built);
3. *fits*: the memory model's peak per GPU (simulator/memory/per_gpu.py) within the HBM.

Recomputation is not a free dimension: re-running more of the forward never makes a step faster, so among
the recompute choices of one layout only the least recomputation that fits is kept (``RECOMPUTE_TIERS``:
none; then SAR or Megatron-Core's selective modules; then full recomputation of as few layers as fit). The
others are counted as *dominated*.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from experiments.common.parallel import Workers
from experiments.search.dispatch_choices import MEGATRON_DISPATCHERS, point_dispatchers
from experiments.search.fix_values import check_fixed, space_choices
from simulator.memory.per_gpu import peak_memory
from topologies.errors import ConfigError
from workloads.graph.step import StepWorkload
from workloads.schedules.registry import block_count
from workloads.specs import hybrid_dp
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec


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

    def workload(self, model: ModelSpec, layout: LayoutSpec) -> StepWorkload:
        return StepWorkload(model, layout, self.gpus, self.gpus_per_node, self.global_batch, self.seq_len)

    def fits(self, model: ModelSpec, layout: LayoutSpec) -> bool | None:
        """Whether the layout's peak memory per GPU fits the HBM; None if the layout is not valid here."""
        try:
            workload = self.workload(model, layout)
        except ConfigError:
            return None
        return peak_memory(workload).total_bytes <= self.hbm_bytes

    def stages_that_fit(self, model: ModelSpec, layout: LayoutSpec) -> list[int]:
        """Pipeline depths (divisors of the layers, ascending) with which the layout is valid and fits."""
        return [pp for pp in divisors(model.num_layers) if self.fits(model, layout.with_(pp=pp))]


class Schedule(NamedTuple):
    """A searched schedule: its name, chunks per stage, and Megatron-Core's EP overlap (with delayed wgrad)."""

    name: str
    chunks: int = 1
    ep_overlap: bool = False
    # DualPipe(V): F&B pairs in DeepSeek-V3's Fig. 4 order (ep_overlap, no delayed wgrad: W passes are its own)
    # where the FFN is EP, else two lanes (which also hide a TP FFN's collectives): one point either way, so the
    # space does not grow. Measured: equal within 0.05% with in-node EP (Mixtral-8x22B, 128 H100, PP 4), 5.7%
    # faster with DeepSeek-V3's cross-node EP 64 (experiments/beyond/schedules.py).
    layerwise_with_ep: bool = False

    def fields(self, ffn: str) -> dict[str, object]:
        layerwise = self.layerwise_with_ep and ffn == "ep"
        return {
            "schedule": self.name,
            "virtual_stages": self.chunks,
            "ep_overlap": self.ep_overlap or layerwise,
            "delay_wgrad": self.ep_overlap,
        }


# Least recomputation first; within a tier the choices are not ordered (SAR and selective modules re-run
# different ops), across tiers each recomputes a superset of the one before.
RECOMPUTE_TIERS: tuple[tuple[dict[str, object], ...], ...] = (
    ({"recompute": "none"},),
    (
        {"recompute": "sar"},
        {"recompute": "selective", "recompute_modules": ("core_attn", "layernorm", "moe_act")},
    ),
    ({"recompute": "full", "recompute_to_fit": True},),
)

# The dimensions a point varies (``--fix`` pins any of them).
DIMENSIONS = (
    "attention",
    "ffn",
    "intra_size",
    "cp",
    "pp",
    "ep",
    "etp",
    "ep_max_nodes",
    "micro_batch",
    "schedule",
    "virtual_stages",
    "ep_overlap",
    "recompute",
    "token_dispatcher",
)
MODES = (("sp", "ep"), ("sp", "tp"), ("tp", "ep"), ("tp", "tp"))  # (attention, ffn) over the intra group
MEGATRON_MODES = (("tp", "ep"), ("tp", "tp"))  # Megatron-Core splits attention by TP (with SP) only


def _modes(model: ModelSpec, space: SearchSpace) -> tuple[tuple[str, str], ...]:
    """The (attention, ffn) pairs to search: a dense model's FFN follows its attention (workloads/recipes/moe.py
    dense_ffn_recipe), so EP, ETP and EP overlap would change nothing: only its attention splits."""
    if model.moe_layers:
        return space.modes
    return tuple(dict.fromkeys((attention, "tp") for attention, _ in space.modes))


@dataclass(frozen=True)
class SearchSpace:
    """The values each searched dimension takes. ``wide()`` is the default; ``narrow()`` is the grid of
    earlier releases (in-node EP, 1F1B / interleaved x2, the base layout's SAR)."""

    micro_batches: tuple[int, ...] = (1, 2)
    schedules: tuple[Schedule, ...] = (
        Schedule("1f1b"),
        Schedule("interleaved", 2),
        Schedule("interleaved", 4),
        Schedule("interleaved", 2, ep_overlap=True),
        Schedule("zb1p"),
        Schedule("dualpipe", layerwise_with_ep=True),
        Schedule("dualpipev", layerwise_with_ep=True),
    )
    cp: tuple[int, ...] = (1, 2)
    etp: tuple[int, ...] = (1, 2)  # expert-tensor parallelism inside the node (Megatron-Core's ETP)
    cross_node_ep: bool = True  # EP degrees n x 2^j beyond intra_size, up to the experts (DeepEP style)
    # Node-limited routing M (0: unlimited) for EP over more than M nodes (DeepSeek-V3 Sec. 2.1.2: M = 4)
    ep_max_nodes: tuple[int, ...] = (0, 4)
    uneven_pp: bool = True  # pipeline depths that do not divide the layers (Megatron's uneven split)
    recompute_tiers: tuple[tuple[dict[str, object], ...], ...] = RECOMPUTE_TIERS
    max_pp: int = 64
    fixed: tuple[tuple[str, str], ...] = ()  # (dimension, value as text): only points that have it
    modes: tuple[tuple[str, str], ...] = MODES
    # Token dispatchers (the job's own first) tried where the EP group has more than one rank
    # (experiments/search/dispatch_choices.py); none: every point keeps the base layout's
    dispatchers: tuple[str, ...] = ()

    def keeps(self, point: dict[str, object]) -> bool:
        """Whether the point has every fixed value (compared as lower-case text: 4 == "4", True == "true")."""
        return all(str(point[key]).lower() == value.lower() for key, value in self.fixed if key in point)

    def tiers(self) -> tuple[tuple[dict[str, object], ...], ...]:
        """The recompute tiers, keeping only the choices a fixed ``recompute`` allows."""
        kept = (tuple(c for c in tier if self.keeps(c)) for tier in self.recompute_tiers)
        return tuple(tier for tier in kept if tier)

    def fix(self, pairs: list[str]) -> SearchSpace:
        """This space with ``KEY=VALUE`` pins; a key that is not a searched dimension is a ConfigError."""
        fixed = list(self.fixed)
        for pair in pairs:
            key, sep, value = pair.partition("=")
            if not sep or key not in DIMENSIONS:
                raise ConfigError(
                    "fix", f"expected DIMENSION=VALUE with a dimension in {', '.join(DIMENSIONS)}; got {pair!r}"
                )
            check_fixed(key, value, space_choices(self).get(key))  # experiments/search/fix_values.py
            fixed.append((key, value))
        return replace(self, fixed=tuple(fixed))

    @classmethod
    def wide(cls) -> SearchSpace:
        return cls()

    @classmethod
    def megatron(
        cls,
        ep_max_nodes: int = 0,
        job_modules: tuple[str, ...] = (),
        dispatchers: tuple[str, ...] = MEGATRON_DISPATCHERS,
    ) -> SearchSpace:
        """What Megatron-Core can run around a user's job (``moesim search --megatron-args``): TP attention with
        sequence parallelism, 1F1B or interleaved schedules with or without its EP overlap (combined 1F1B,
        delayed wgrads), its recompute (none, selective modules, the job's own among them, full), its token
        dispatchers that the job allows (its own first); the job's node-limited routing kept."""
        selective = (("core_attn", "layernorm", "moe_act"), ("core_attn", "layernorm"))
        if job_modules and job_modules not in selective:
            selective = (job_modules, *selective)
        return cls(
            schedules=(
                Schedule("1f1b"),
                Schedule("1f1b", ep_overlap=True),
                Schedule("interleaved", 2),
                Schedule("interleaved", 4),
                Schedule("interleaved", 2, ep_overlap=True),
            ),
            ep_max_nodes=(ep_max_nodes,),
            recompute_tiers=(
                ({"recompute": "none"},),
                tuple({"recompute": "selective", "recompute_modules": modules} for modules in selective),
                ({"recompute": "full", "recompute_to_fit": True},),
            ),
            modes=MEGATRON_MODES,
            dispatchers=dispatchers,
        )

    @classmethod
    def narrow(cls) -> SearchSpace:
        return cls(
            schedules=(Schedule("1f1b"), Schedule("interleaved", 2)),
            cp=(1,),
            etp=(1,),
            cross_node_ep=False,
            ep_max_nodes=(0,),
            uneven_pp=False,
            recompute_tiers=(({},),),
        )


# --space: Megatron-Core's (default; base from a Megatron-LM job), MegaScale-MoE's (wide), earlier releases' (narrow)
SPACES = {"megatron": SearchSpace.megatron, "megascale": SearchSpace.wide, "narrow": SearchSpace.narrow}


@dataclass
class Pruned:
    """How many layouts each check rejected before simulation."""

    divide: int = 0
    invalid: int = 0
    memory: int = 0
    dominated: int = 0
    reasons: dict[str, int] = field(default_factory=dict)  # the invalid ones, by the field their error names

    def summary(self) -> str:
        return (
            f"{self.divide} do not divide the GPUs or the batch, {self.invalid} break a layout rule, "
            f"{self.memory} do not fit in memory, {self.dominated} recompute more than one that fits"
        )


def ep_degrees(model: ModelSpec, intra_size: int, gpus_per_stage: int, space: SearchSpace) -> list[int]:
    """EP degrees to try with an EP FFN: in-node (0 = intra_size), then n x 2^j dividing the experts."""
    degrees = [0]
    ep = intra_size * 2
    while space.cross_node_ep and ep <= min(model.num_experts, gpus_per_stage):
        if model.num_experts % ep == 0 and gpus_per_stage % ep == 0:
            degrees.append(ep)
        ep *= 2
    return degrees


def _grid(model: ModelSpec, job: Job, space: SearchSpace) -> Iterator[dict[str, object]]:
    """Every combination of the searched dimensions, before any check but the node's divisors."""
    top_pp = min(space.max_pp, model.num_layers, job.gpus)
    modes = _modes(model, space)
    for n in divisors(job.gpus_per_node):
        for attention, ffn in modes if n > 1 else modes[:1]:
            for cp in space.cp:
                for pp in range(1, top_pp + 1):
                    if not space.uneven_pp and model.num_layers % pp:
                        continue
                    gpus_per_stage = job.gpus // pp if job.gpus % pp == 0 else 0
                    eps = ep_degrees(model, n, gpus_per_stage, space) if ffn == "ep" else [0]
                    for ep, etp, max_nodes in _expert_groups(eps, job.gpus_per_node, space, ffn == "ep"):
                        for micro_batch in space.micro_batches:
                            for schedule in space.schedules:
                                if pp == 1 and not _one_stage(schedule, space):
                                    continue  # one stage: every schedule is the first one's step
                                point = {
                                    "attention": attention,
                                    "ffn": ffn,
                                    "intra_size": n,
                                    "cp": cp,
                                    "pp": pp,
                                    "ep": ep,
                                    "etp": etp,
                                    "ep_max_nodes": max_nodes,
                                    "micro_batch": micro_batch,
                                    **schedule.fields(ffn),
                                }
                                dispatchers = point_dispatchers(space.dispatchers, model, job.gpus_per_node, point)
                                for dispatcher in dispatchers:
                                    yield {**point, "token_dispatcher": dispatcher} if dispatcher else point


def _one_stage(schedule: Schedule, space: SearchSpace) -> bool:
    """Whether a schedule is searched at PP 1: the first one, and with EP overlap (Megatron-Core's combined 1F1B
    pairs micro-batches on one stage too) where the space has it as a plain 1F1B."""
    first = space.schedules[0]
    return schedule == first or (schedule.name == first.name and schedule.chunks == 1 and schedule.ep_overlap)


def _expert_groups(
    eps: list[int], gpus_per_node: int, space: SearchSpace, expert_parallel: bool
) -> Iterator[tuple[int, int, int]]:
    """(EP degree, ETP, node limit M) to try: each ETP of an EP FFN, and each M below the nodes its EP spans
    (Megatron's order: the ETP groups inside the node, gpus_per_node / ETP EP ranks a node; 0: unlimited)."""
    for ep in eps:
        for etp in space.etp if expert_parallel else (1,):
            nodes = ep * etp // gpus_per_node
            for max_nodes in space.ep_max_nodes:
                if max_nodes == 0 or max_nodes < nodes:
                    yield ep, etp, max_nodes


def _divides(point: dict[str, object], job: Job) -> bool:
    """The arithmetic checks: whole DP replicas and whole micro-batches per replica."""
    group = int(point["intra_size"]) * int(point["cp"]) * int(point["pp"])
    if job.gpus % group:
        return False
    dp = job.gpus // group
    return job.global_batch % (dp * int(point["micro_batch"])) == 0


def _least_recompute(
    model: ModelSpec, base: LayoutSpec, job: Job, fields: dict[str, object], tiers: tuple[tuple[dict, ...], ...]
) -> tuple[list[dict[str, object]], ConfigError | None, int]:
    """The valid choices of the first recompute tier with any that fit, the error if none is valid, and
    how many tiers were tried."""
    error: ConfigError | None = None
    valid = False
    for tried, tier in enumerate(tiers, 1):
        fit: list[dict[str, object]] = []
        for choice in tier:
            try:
                workload = job.workload(model, base.with_(**fields, **choice))
            except ConfigError as refused:
                error = refused
                continue
            valid = True
            if peak_memory(workload).total_bytes <= job.hbm_bytes:
                fit.append({**fields, **choice})
        if fit:
            return fit, None, tried
    return [], None if valid else error, len(tiers)


def _model_tiers(model: ModelSpec, tiers: tuple[tuple[dict, ...], ...]) -> tuple[tuple[dict, ...], ...]:
    """The tiers without the choices that name MoE modules on a dense model (they would repeat another)."""
    if model.moe_layers:
        return tiers
    moe = {"moe", "moe_act"}
    kept = (tuple(c for c in tier if not moe & set(c.get("recompute_modules", ()))) for tier in tiers)
    return tuple(tier for tier in kept if tier)


def _fitting(fields: dict[str, object], context: tuple) -> tuple[list[dict[str, object]], str | None, int]:
    """``_least_recompute`` as a worker's task: what fits, the field named by the error if no choice is valid (an
    error itself need not pickle), and the tiers tried; ``context`` is (model, base layout, job, tiers, bases by
    (intra size, FFN split))."""
    model, base, job, tiers, bases = context
    model, base = bases.get((fields["intra_size"], fields["ffn"]), (model, base))
    fields = {**fields, **hybrid_dp.fitted(base, job.gpus, fields)}  # the job's DP instances, where they divide
    fit, error, tried = _least_recompute(model, base, job, fields, tiers)
    return fit, None if error is None else error.field, tried


def megatron_aligned(
    point: dict[str, object], bases: dict[tuple[int, str], tuple[ModelSpec, LayoutSpec]]
) -> dict[str, object]:
    """A Megatron job's point with its weight gathers aligned as Megatron-LM aligns them: only under the interleaved
    schedule, where the job allows it (validate_args, NVIDIA/Megatron-LM d98e8a64 arguments.py), so that the
    printed arguments run back to the ranked step."""
    base = bases.get((int(point["intra_size"]), str(point["ffn"])))
    allowed = base is not None and base[1].align_param_gather
    return {**point, "align_param_gather": allowed and point["schedule"] == "interleaved"}


def layouts(
    model: ModelSpec,
    base: LayoutSpec,
    job: Job,
    space: SearchSpace,
    workers: Workers | None = None,
    bases: dict[tuple[int, str], tuple[ModelSpec, LayoutSpec]] | None = None,
) -> tuple[list[dict[str, object]], Pruned]:
    """The layout fields of every point worth simulating, and what was pruned. The memory checks, nearly all of the
    cost, run on ``workers`` (in batches, in order) where given; the arithmetic ones here. ``bases``: the model and
    base layout by (intra size, FFN split), in place of ``model`` and ``base`` (a Megatron job built at each TP)."""
    pruned = Pruned()
    tiers = _model_tiers(model, space.tiers())
    checked: list[dict[str, object]] = []
    for point in _grid(model, job, space):
        if not space.keeps(point):
            continue
        if not _divides(point, job):
            pruned.divide += 1
            continue
        blocks = block_count(str(point["schedule"]), int(point["pp"]), int(point["virtual_stages"]))
        uneven = model.num_layers % blocks != 0  # DualPipeV: 2 pp blocks
        if uneven and not space.uneven_pp:
            pruned.divide += 1
            continue
        if bases:
            point = megatron_aligned(point, bases)
        checked.append({**point, "uneven_pp": uneven} if uneven else point)
    context = (model, base, job, tiers, bases or {})
    if workers is None:
        results = (_fitting(fields, context) for fields in checked)
    else:
        results = workers.imap(_fitting, checked, workers.share(context))
    kept: list[dict[str, object]] = []
    for kept_here, invalid, tiers_tried in results:
        if kept_here:
            kept.extend(kept_here)
            pruned.dominated += sum(len(tier) for tier in tiers[tiers_tried:])
        elif invalid is not None:
            pruned.invalid += 1
            pruned.reasons[invalid] = pruned.reasons.get(invalid, 0) + 1
        else:
            pruned.memory += 1
    return kept, pruned
