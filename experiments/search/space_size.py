"""How many layouts a search space holds, by formula, before any of them is built (issue 42 item 5).

``moesim search --max-points`` is checked against this count before the memory checks, bounds and simulations:
a space too large is refused in a fraction of a second, not after a minute of enumeration. The count is the
points of ``_grid`` that pass ``_divides`` (experiments/search/space.py), each recompute tier counted once:
a sum over (intra size, attention / FFN split, CP, PP) of the product of the choices that do not interact
(micro-batches that divide the batch per replica; expert groups, each with its schedules, each of those with
the token dispatchers it searches: experiments/search/dispatch_choices.py). tests/unit/test_search_answer.py holds it
equal to the enumeration.
"""

from __future__ import annotations

from experiments.search.dispatch_choices import point_dispatchers
from experiments.search.space import Job, SearchSpace, _expert_groups, _modes, _one_stage, divisors, ep_degrees
from workloads.schedules.registry import block_count
from workloads.specs.models import ModelSpec


def space_size(model: ModelSpec, job: Job, space: SearchSpace) -> int:
    """The layouts of ``space`` for ``model`` on ``job`` that divide the GPUs and the batch (and whose schedule
    splits the layers where the space has no uneven split), with ``--fix`` pins applied."""
    top_pp = min(space.max_pp, model.num_layers, job.gpus)
    modes = _modes(model, space)
    total = 0
    for n in divisors(job.gpus_per_node):
        for attention, ffn in modes if n > 1 else modes[:1]:
            if not space.keeps({"attention": attention, "ffn": ffn, "intra_size": n}):
                continue
            for cp in (c for c in space.cp if space.keeps({"cp": c})):
                for pp in range(1, top_pp + 1):
                    if (not space.uneven_pp and model.num_layers % pp) or not space.keeps({"pp": pp}):
                        continue
                    if job.gpus % (n * cp * pp):
                        continue
                    dp = job.gpus // (n * cp * pp)
                    batches = sum(
                        1
                        for mb in space.micro_batches
                        if job.global_batch % (dp * mb) == 0 and space.keeps({"micro_batch": mb})
                    )
                    eps = ep_degrees(model, n, job.gpus // pp, space) if ffn == "ep" else [0]
                    group_points = sum(
                        _schedules(model, job, space, pp, {"ffn": ffn, "intra_size": n, "ep": ep, "etp": etp})
                        for ep, etp, m in _expert_groups(eps, job.gpus_per_node, space, ffn == "ep")
                        if space.keeps({"ep": ep, "etp": etp, "ep_max_nodes": m})
                    )
                    total += batches * group_points
    return total


def _schedules(model: ModelSpec, job: Job, space: SearchSpace, pp: int, group: dict[str, object]) -> int:
    """The (schedule, token dispatcher) pairs of an expert ``group`` searched at ``pp`` stages that the pins keep
    and whose blocks the space can split."""
    count = 0
    for schedule in space.schedules:
        if pp == 1 and not _one_stage(schedule, space):
            continue
        fields = schedule.fields(str(group["ffn"]))
        if not space.keeps(fields):
            continue
        if not space.uneven_pp and model.num_layers % block_count(schedule.name, pp, schedule.chunks):
            continue
        dispatchers = point_dispatchers(space.dispatchers, model, job.gpus_per_node, {**group, **fields})
        count += sum(1 for d in dispatchers if not d or space.keeps({"token_dispatcher": d}))
    return count
