"""The fluid max-min-fair network (simulator.streams.network.FluidNetwork), with hand-computed finish times."""

from __future__ import annotations

import pytest
import simpy

from simulator.streams.network import FluidNetwork

GB = 1e9


def _finish_times(env: simpy.Environment, network: FluidNetwork, flows: list) -> list[float]:
    """Start each (start_s, links, nbytes) flow at its time; return when each one's last byte lands."""
    finished: dict[int, float] = {}

    def flow(index, start_s, links, nbytes):
        yield env.timeout(start_s)
        yield network.transfer(links, nbytes)
        finished[index] = env.now

    for index, (start_s, links, nbytes) in enumerate(flows):
        env.process(flow(index, start_s, links, nbytes))
    env.run()
    return [finished[i] for i in range(len(flows))]


def test_point_to_point_over_nic() -> None:
    """100 GB from GPU 0's NIC to GPU 1's NIC at 50 GB/s: 100e9 / 50e9 = 2 s exactly."""
    env = simpy.Environment()
    net = FluidNetwork(env, {("nic_out", 0): 50 * GB, ("nic_in", 1): 50 * GB})
    (done,) = _finish_times(env, net, [(0.0, [("nic_out", 0), ("nic_in", 1)], 100 * GB)])
    assert done == pytest.approx(2.0, rel=1e-12)
    assert net.bytes_sent == {("nic_out", 0): 100 * GB, ("nic_in", 1): 100 * GB}
    assert net.active_flows == 0


def test_lone_flow_runs_at_its_bottleneck() -> None:
    """Out at 50 GB/s, in at 25 GB/s: the flow runs at 25 GB/s, so 50 GB takes 2 s."""
    env = simpy.Environment()
    net = FluidNetwork(env, {"out": 50 * GB, "in": 25 * GB})
    assert _finish_times(env, net, [(0.0, ["out", "in"], 50 * GB)]) == pytest.approx([2.0], rel=1e-12)


def test_two_transfers_sharing_a_link_take_twice_as_long() -> None:
    """Alone: 1 GB at 1 GB/s = 1 s. Two at once on the same link each get 0.5 GB/s: both land at 2 s."""
    env = simpy.Environment()
    net = FluidNetwork(env, {"link": 1 * GB})
    assert _finish_times(env, net, [(0.0, ["link"], 1 * GB)]) == pytest.approx([1.0], rel=1e-12)

    env = simpy.Environment()
    net = FluidNetwork(env, {"link": 1 * GB})
    times = _finish_times(env, net, [(0.0, ["link"], 1 * GB), (0.0, ["link"], 1 * GB)])
    assert times == pytest.approx([2.0, 2.0], rel=1e-12)


def test_max_min_fairness_three_flows_two_links() -> None:
    """Links A = 1 GB/s, B = 2 GB/s. Flow 1 crosses A and B, flow 2 only A, flow 3 only B.

    Progressive filling: fair shares A 1/2 = 0.5, B 2/2 = 1.0; A is the bottleneck, so flows 1 and 2 get
    0.5 GB/s; B has 2 - 0.5 = 1.5 GB/s left for flow 3 alone -> rates (0.5, 0.5, 1.5) GB/s.
    Sizes 0.5, 1.0, 3.0 GB:
      t = 1.0: flow 1 done (0.5 / 0.5). Flow 2 has sent 0.5 (0.5 left), flow 3 has sent 1.5 (1.5 left).
      Now A carries only flow 2 (1 GB/s), B only flow 3 (2 GB/s):
      flow 2 lands at 1.0 + 0.5 / 1 = 1.5 s, flow 3 at 1.0 + 1.5 / 2 = 1.75 s.
    """
    env = simpy.Environment()
    net = FluidNetwork(env, {"A": 1 * GB, "B": 2 * GB})
    times = _finish_times(
        env,
        net,
        [
            (0.0, ["A", "B"], 0.5 * GB),
            (0.0, ["A"], 1.0 * GB),
            (0.0, ["B"], 3.0 * GB),
        ],
    )
    assert times == pytest.approx([1.0, 1.5, 1.75], rel=1e-12)


def test_flow_that_starts_midway_changes_rates() -> None:
    """Link 1 GB/s. Flow A (2 GB) starts at 0; flow B (1 GB) at 0.5 s.

    [0, 0.5]: A alone at 1 GB/s -> 0.5 GB sent, 1.5 GB left.
    From 0.5: both at 0.5 GB/s. B needs 1 / 0.5 = 2 s -> lands at 2.5 s; A has 1.5 - 1.0 = 0.5 GB left.
    From 2.5: A alone at 1 GB/s -> lands at 2.5 + 0.5 = 3.0 s.
    """
    env = simpy.Environment()
    net = FluidNetwork(env, {"link": 1 * GB})
    times = _finish_times(env, net, [(0.0, ["link"], 2 * GB), (0.5, ["link"], 1 * GB)])
    assert times == pytest.approx([3.0, 2.5], rel=1e-12)


def test_zero_bytes_and_unknown_link() -> None:
    """An empty transfer is done at once; a link that was never declared is a KeyError."""
    env = simpy.Environment()
    net = FluidNetwork(env, {"link": 1 * GB})
    done = net.transfer(["link"], 0)
    assert done.triggered
    with pytest.raises(KeyError):
        net.transfer(["nope"], 1.0)


def test_rate_observers_see_every_rate_change() -> None:
    """A (1 GB over "a" and "shared") alone at 1 GB/s from 0; B (0.5 GB over "shared") joins at 0.25 s: 0.5 GB/s
    each; B lands at 0.25 + 1 = 1.25 s with A 0.25 GB short, which runs alone until 1.5 s; the last call sees
    no flow left. Link loads: {a: 1, shared: 1}, then {a: 0.5, shared: 1}, {a: 1, shared: 1}, {}."""
    env = simpy.Environment()
    net = FluidNetwork(env, {"a": 1 * GB, "shared": 1 * GB})
    log: list[tuple[float, dict]] = []
    net.observers.append(lambda n: log.append((n.env.now, n.link_loads_Bps())))
    _finish_times(env, net, [(0.0, ["a", "shared"], 1 * GB), (0.25, ["shared"], 0.5 * GB)])
    assert log == [
        (0.0, {"a": 1 * GB, "shared": 1 * GB}),
        (0.25, {"a": 0.5 * GB, "shared": 1 * GB}),
        (1.25, {"a": 1 * GB, "shared": 1 * GB}),
        (1.5, {}),
    ]


def test_rerating_a_component_gives_the_rates_of_rerating_every_flow(monkeypatch: pytest.MonkeyPatch) -> None:
    """Flows over a chain of NIC-like links (each flow on one out and one in port) starting at random
    times: re-rating only the started or ended flow's component lands every flow at the same float as
    re-rating all active flows on each change."""
    import random

    rng = random.Random(16)
    ports = [("out", i) for i in range(6)] + [("in", i) for i in range(6)]
    capacities = {port: rng.choice([1, 2, 3]) * GB for port in ports}
    flows = [
        (rng.uniform(0, 3), [("out", rng.randrange(6)), ("in", rng.randrange(6))], rng.uniform(0.1, 2) * GB)
        for _ in range(60)
    ]
    component, partial = FluidNetwork._component, []

    def counted(self, seeds):
        flows = component(self, seeds)
        partial.append(len(flows) < len(self._flows))
        return flows

    monkeypatch.setattr(FluidNetwork, "_component", counted)
    env = simpy.Environment()
    fast = _finish_times(env, FluidNetwork(env, capacities), flows)
    assert any(partial)  # some changes left other flows' rates alone
    monkeypatch.setattr(FluidNetwork, "_component", lambda self, seeds: self._flows)
    env = simpy.Environment()
    every = _finish_times(env, FluidNetwork(env, capacities), flows)
    assert fast == every


def test_a_component_of_one_flow_or_none() -> None:
    """Links a, b, c: flow x on (a, b) and y on (c,) share nothing, so x's links give [x]; z joins x on b: its
    links give [x, z] in start order, and so do a's (x reaches z over b); links with no flow give []."""
    env = simpy.Environment()
    network = FluidNetwork(env, {"a": GB, "b": GB, "c": GB, "d": GB})
    network.transfer(("a", "b"), GB)
    network.transfer(("c",), GB)
    x, y = network._flows
    assert network._component(("a", "b")) == [x]
    assert network._component({"c"}) == [y]
    assert network._component(("d",)) == []
    network.transfer(("b", "d"), GB)
    z = network._flows[-1]
    assert network._component(("b", "d")) == [x, z]
    assert network._component({"a"}) == [x, z]
    assert network._component(("d",)) == [x, z]


def test_a_weighted_flow_gets_its_weights_shares() -> None:
    """A transfer of weight 3 stands for 3 equal flows (the folded representative's EP bytes to 3 remote nodes): on
    one 4 GB/s link beside a flow of weight 1 it gets 3/4 of the link. Weighted 3 GB at 3 GB/s and 1 GB at 1 GB/s
    both land at 1 s, as three 1 GB flows and the fourth would. On two links, out 4 GB/s (weight 3 and a weight-1
    flow) and in 2 GB/s (the weighted flow alone): progressive filling fixes the weighted flow on in at 2 GB/s
    (in's share 2 / 3 per unit is below out's 4 / 4), the other takes out's 2 GB/s left: 2 GB each, 1 s each."""
    env = simpy.Environment()
    net = FluidNetwork(env, {"link": 4 * GB})
    finished = {}

    def flow(name, links, nbytes, weight):
        yield net.transfer(links, nbytes, weight)
        finished[name] = env.now

    env.process(flow("weighted", ["link"], 3 * GB, 3))
    env.process(flow("one", ["link"], 1 * GB, 1))
    env.run()
    assert finished == pytest.approx({"weighted": 1.0, "one": 1.0}, rel=1e-12)

    env = simpy.Environment()
    net = FluidNetwork(env, {"out": 4 * GB, "in": 2 * GB})
    finished = {}
    env.process(flow("weighted", ["out", "in"], 2 * GB, 3))
    env.process(flow("one", ["out"], 2 * GB, 1))
    env.run()
    assert finished == pytest.approx({"weighted": 1.0, "one": 1.0}, rel=1e-12)
