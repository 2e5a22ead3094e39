"""Fluid network: transfers load links, and concurrent transfers share each link max-min fairly."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable

import simpy

# A flow is finished when this little of it is left (floating-point slack, in bytes).
_DONE_BYTES = 1e-3


class _Flow:
    __slots__ = ("done", "links", "rate", "remaining", "seq", "weight")

    def __init__(
        self, remaining: float, links: tuple[Hashable, ...], done: simpy.Event, seq: int, weight: int = 1
    ) -> None:
        self.remaining = remaining
        self.links = links
        self.rate = 0.0
        self.done = done
        self.seq = seq  # start order
        self.weight = weight  # the equal flows it stands for (transfer)


class FluidNetwork:
    """Links with capacities (bytes/s); each active flow gets its max-min fair rate.

    Rates are recomputed (progressive filling) whenever a flow starts or ends; between those instants
    every flow drains at a constant rate, so the simulation is exact for the fluid model.

    A transfer of ``weight`` k stands for k equal flows over the same links, started and ended together: it gets k
    max-min shares (weighted max-min fairness), at the cost of one flow.

    NOTE: only the flows linked (through shared links, transitively) to the one that started or ended are
    re-rated: max-min rates decompose over such components and progressive filling picks a component's
    links in the same order whatever else runs, so the rates are the same floats as a full re-rating.
    """

    def __init__(self, env: simpy.Environment, capacities_Bps: dict[Hashable, float]) -> None:
        self.env = env
        self.capacities_Bps = dict(capacities_Bps)
        self._flows: list[_Flow] = []
        self._on_link: dict[Hashable, list[_Flow]] = {link: [] for link in capacities_Bps}  # active flows per link
        self._started = 0
        self._last_update_s = env.now
        # A network of one link: its capacity (_reschedule's shortcut), else None
        self._one_capacity_Bps = next(iter(self.capacities_Bps.values())) if len(self.capacities_Bps) == 1 else None
        self._wake: simpy.Timeout | None = None  # the network's pending wake-up (older ones are stale)
        self.bytes_sent: dict[Hashable, float] = {link: 0.0 for link in capacities_Bps}
        # Called with this network after every rate change (the last flow's end too); they must not change it.
        self.observers: list[Callable[[FluidNetwork], None]] = []
        self._weighted = False  # whether a flow of weight > 1 ever ran (the one-link shortcuts count flows then)

    def account(self, links: Iterable[Hashable], nbytes: float) -> None:
        """Count ``nbytes`` as sent over ``links`` (also for transfers timed outside the network)."""
        for link in links:
            if link not in self.capacities_Bps:
                raise KeyError(f"unknown link {link!r}")
            self.bytes_sent[link] += nbytes

    def transfer(self, links: Iterable[Hashable], nbytes: float, weight: int = 1) -> simpy.Event:
        """Start moving ``nbytes`` over ``links`` (as ``weight`` equal flows of nbytes / weight each); the returned
        event fires when the last byte lands."""
        links = tuple(links)
        self.account(links, nbytes)
        done = self.env.event()
        if nbytes <= 0 or not links:
            done.succeed()
            return done
        self._advance()
        flow = _Flow(float(nbytes), links, done, self._started, weight)
        if weight != 1:
            self._weighted = True
        self._started += 1
        self._flows.append(flow)
        on_link = self._on_link
        for link in links:
            on_link[link].append(flow)
        self._reschedule(links)
        return done

    def link_loads_Bps(self) -> dict[Hashable, float]:
        """Sum of the current rates of the active flows on each link they cross."""
        loads: dict[Hashable, float] = {}
        for flow in self._flows:
            for link in flow.links:
                loads[link] = loads.get(link, 0.0) + flow.rate
        return loads

    def flows_on(self, link: Hashable) -> list[tuple[tuple[Hashable, ...], float]]:
        """(links, bytes left now) of each flow on ``link``."""
        elapsed_s = self.env.now - self._last_update_s
        return [(flow.links, flow.remaining - flow.rate * elapsed_s) for flow in self._on_link[link]]

    @property
    def active_flows(self) -> int:
        return len(self._flows)

    def _advance(self) -> None:
        elapsed = self.env.now - self._last_update_s
        if elapsed > 0:
            for flow in self._flows:
                flow.remaining -= flow.rate * elapsed
        self._last_update_s = self.env.now

    def _component(self, seeds: Iterable[Hashable]) -> list[_Flow]:
        """The active flows linked to ``seeds`` through shared links (transitively), in start order."""
        if len(self._flows) <= 1 or len(self._on_link) == 1:
            return self._flows
        on_link = self._on_link
        stack = list(seeds)
        # NOTE: the common case first: the seeds' links carry at most one flow, alone on every link it crosses
        lone = None
        for link in stack:
            on_it = on_link[link]
            if not on_it:
                continue
            if len(on_it) > 1 or (lone is not None and on_it[0] is not lone):
                break
            lone = on_it[0]
        else:
            if lone is None:
                return []
            for link in lone.links:
                if len(on_link[link]) != 1:
                    break
            else:
                return [lone]
        seen: set[Hashable] = set()
        members: dict[int, _Flow] = {}
        while stack:
            link = stack.pop()
            if link in seen:
                continue
            seen.add(link)
            for flow in on_link[link]:
                if flow.seq not in members:
                    members[flow.seq] = flow
                    stack.extend(flow.links)
        if len(members) == len(self._flows):
            return self._flows
        if len(members) <= 1:  # NOTE: a lone flow (or none): nothing to sort
            return list(members.values())
        return [members[seq] for seq in sorted(members)]

    def _assign_rates(self, flows: list[_Flow]) -> None:
        if len(flows) == 1:  # fast path: a lone flow runs at its bottleneck
            flow = flows[0]
            capacities = self.capacities_Bps
            rate = capacities[flow.links[0]]
            for link in flow.links:  # NOTE: min() over a generator, as a loop
                if capacities[link] < rate:  # noqa: PLR1730
                    rate = capacities[link]
            flow.rate = rate
            return
        if len(self._on_link) == 1 and not self._weighted:  # fast path: one link: progressive filling's one share
            ((_link, capacity_Bps),) = self.capacities_Bps.items()
            share = capacity_Bps / len(flows)
            for flow in flows:
                flow.rate = share
            return
        # Progressive filling, indexed by link so an iteration touches only that link's flows (the
        # list scan was quadratic in flows); the choice and subtraction order match the plain version.
        left: dict[Hashable, float] = {}
        on_link: dict[Hashable, list[_Flow]] = {}
        for flow in flows:
            for link in flow.links:
                if link in on_link:
                    on_link[link].append(flow)
                else:
                    left[link] = self.capacities_Bps[link]
                    on_link[link] = [flow]
        self._fill(left, on_link)

    def _fill(self, left: dict[Hashable, float], on_link: dict[Hashable, list[_Flow]]) -> None:
        """Progressive filling where a flow of weight k counts k times on each link and gets k shares (weight 1: the
        same floats as plain filling, a share times 1 and a count of ones being exact)."""
        count = {link: sum(flow.weight for flow in members) for link, members in on_link.items()}
        fixed: set[int] = set()
        while count:
            link, share = None, 0.0
            for candidate, flows_left in count.items():
                candidate_share = left[candidate] / flows_left
                if link is None or candidate_share < share:
                    link, share = candidate, candidate_share
            for flow in on_link[link]:
                if id(flow) in fixed:
                    continue
                flow.rate = rate = share * flow.weight
                fixed.add(id(flow))
                for other in flow.links:
                    left[other] -= rate
                    count[other] -= flow.weight
                    if not count[other]:
                        del count[other]

    def _reschedule(self, changed: Iterable[Hashable]) -> None:
        """Re-rate the flows linked to the ``changed`` links, then wake at the next flow's end."""
        flows = self._flows
        delay = None  # until the next flow ends (None: no flow left)
        if flows and self._one_capacity_Bps is not None and not self._weighted:
            # NOTE: one link (a stage's NVLink): every flow gets _assign_rates's one share (a lone flow's share is
            # the capacity itself), and the least remaining over that share is the least of the quotients
            # (rounding is monotonic), so the wake is the same float as the loop below finds
            share = self._one_capacity_Bps / len(flows)
            least = flows[0].remaining
            for flow in flows:
                flow.rate = share
                if flow.remaining < least:  # noqa: PLR1730
                    least = flow.remaining
            delay = least / share
        elif flows:
            component = self._component(changed)
            if component:
                self._assign_rates(component)
            delay = flows[0].remaining / flows[0].rate
            for flow in flows:  # NOTE: min() over a generator, as a loop (the same least float)
                flow_s = flow.remaining / flow.rate
                if flow_s < delay:  # noqa: PLR1730
                    delay = flow_s
        for observer in self.observers:  # they see the new rates (and must not change them)
            observer(self)
        if delay is None:
            self._wake = None
            return
        # NOTE: a bound method, not a closure per wake: the wake that fires is stale unless it is the latest
        wake = self._wake = self.env.timeout(delay if delay > 0.0 else 0.0)  # noqa: FURB136 (max(), no call)
        wake.callbacks.append(self._on_wake)

    def _on_wake(self, wake: simpy.Event) -> None:
        if wake is not self._wake:
            return  # a newer event rescheduled the network
        self._advance()
        flows = self._flows
        if len(flows) == 1:  # NOTE: a lone flow is the one that ends (done or the closest, by rounding)
            flow = flows.pop()
            for link in flow.links:
                self._on_link[link].remove(flow)
            flow.done.succeed()
            self._reschedule(flow.links)
            return
        finished = [flow for flow in flows if flow.remaining <= _DONE_BYTES]
        if not finished:  # rounding left a sliver: finish the closest flow
            finished = [min(self._flows, key=lambda flow: flow.remaining / flow.rate)]
        changed: set[Hashable] = set()
        for flow in finished:
            self._flows.remove(flow)
            for link in flow.links:
                self._on_link[link].remove(flow)
            changed.update(flow.links)
            flow.done.succeed()
        self._reschedule(changed)
