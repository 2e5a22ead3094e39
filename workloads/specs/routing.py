"""Expert load under skewed routing: which GPU of the EP group is busiest, and by how much.

Loads come from one seeded ``numpy.random.Generator`` (deterministic: one seed per run). Each
GPU of the EP group holds a contiguous block of E/ep experts; the busiest GPU sets the pace of every
grouped expert GEMM (its token count) and of every dispatch/combine (its received bytes). One draw is
used for every MoE layer of the step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


# "consecutive": NeMo AutoModel's benchmark gate (fake_balanced_gate: FakeBalancedGate routes token t to experts
# t k .. t k + k - 1 mod E with equal weights, nemo_automodel/components/moe/layers.py), balanced like "uniform" but
# each token's experts adjacent, so on few ranks and nodes (``consecutive_units``)
ROUTINGS = ("uniform", "zipf", "consecutive")


@dataclass(frozen=True)
class RoutingStats:
    """Token copies per micro-batch on the busiest GPU of the EP group, next to the balanced count."""

    balanced_copies: float  # copies each GPU receives under perfectly balanced routing (tokens x k)
    busiest_copies: float  # copies the busiest GPU receives (after capacity dropping)
    capacity_per_expert: int  # capacity-padded buffer rows per expert (0 when dropless)
    dropped_fraction: float  # share of all copies dropped by the capacity limit

    @property
    def comm_scale(self) -> float:
        """Dispatch/combine bytes of the busiest GPU relative to balanced routing."""
        return self.busiest_copies / self.balanced_copies


def expert_loads(
    num_experts: int,
    routing: str = "uniform",
    zipf_exponent: float = 1.0,
    rng: np.random.Generator | None = None,
    loads: tuple[float, ...] = (),
) -> np.ndarray:
    """Share of token copies each expert receives (sums to 1).

    "zipf": share of the expert of popularity rank r is proportional to r^-s (Zipf's law), ranks assigned
    to experts by a random permutation from ``rng``; an explicit ``loads`` vector wins over ``routing``.
    """
    import numpy as np  # NOTE: here, not at start-up: only skewed routing needs it

    if loads:
        vector = np.asarray(loads, dtype=float)
        if vector.shape != (num_experts,) or (vector < 0).any() or vector.sum() <= 0:
            raise ValueError(f"expert_loads must be {num_experts} non-negative numbers, not all zero")
        return vector / vector.sum()
    if routing in ("uniform", "consecutive"):
        return np.full(num_experts, 1.0 / num_experts)
    if routing != "zipf":
        raise ValueError(f"routing must be one of {', '.join(ROUTINGS)}")
    rng = rng if rng is not None else np.random.default_rng(0)
    weights = np.arange(1, num_experts + 1, dtype=float) ** -zipf_exponent
    return rng.permutation(weights / weights.sum())


def routing_stats(
    loads: np.ndarray, tokens_per_gpu: int, top_k: int, ep: int, capacity_factor: float | None
) -> RoutingStats:
    """Busiest-GPU copies for expert ``loads`` over an EP group of ``ep`` GPUs (None = dropless).

    Copies in the group C = ep x tokens x k; expert e receives C x load_e, capped at the capacity
    ceil(cf x C / E) when dropping (GShard's capacity factor); GPU g receives the sum over its block.
    Dropped copies are not sent, so under heavy dropping the busiest GPU may receive less than the
    balanced share (comm_scale < 1) while the padded expert GEMMs cost what balanced ones do.
    """
    import numpy as np  # NOTE: here, not at start-up: only skewed routing needs it

    num_experts = len(loads)
    copies = ep * tokens_per_gpu * top_k
    per_expert = copies * loads
    capacity = 0
    if capacity_factor is not None:
        capacity = math.ceil(copies / num_experts * capacity_factor)
        per_expert = np.minimum(per_expert, capacity)
    per_gpu = per_expert.reshape(ep, num_experts // ep).sum(axis=1)
    dropped = 1.0 - float(per_expert.sum()) / copies
    return RoutingStats(float(tokens_per_gpu * top_k), float(per_gpu.max()), capacity, max(dropped, 0.0))


def layout_routing_stats(
    num_experts: int,
    top_k: int,
    tokens_per_gpu: int,
    ep: int,
    routing: str,
    zipf_exponent: float,
    seed: int,
    dropless: bool,
    capacity_factor: float,
    loads: tuple[float, ...] = (),
) -> RoutingStats:
    """Routing statistics for a layout's routing options, from ``numpy.random.default_rng(seed)``."""
    import numpy as np  # NOTE: here, not at start-up: only skewed routing needs it

    rng = np.random.default_rng(seed)
    shares = expert_loads(num_experts, routing, zipf_exponent, rng, loads)
    return routing_stats(shares, tokens_per_gpu, top_k, ep, None if dropless else capacity_factor)


def consecutive_units(num_experts: int, top_k: int, units: int) -> float:
    """Distinct units (ranks or nodes, each a contiguous block of E / units experts) holding a token's k experts under
    "consecutive" routing, averaged over the tokens: token t's experts are t k .. t k + k - 1 mod E, so the blocks
    start at the multiples of k mod E (each equally often over a micro-batch of many tokens)."""
    per_unit = num_experts // units
    starts = range(0, num_experts * top_k // math.gcd(num_experts, top_k), top_k)
    spans = [len({(start + j) % num_experts // per_unit for j in range(top_k)}) for start in starts]
    return sum(spans) / len(spans)
