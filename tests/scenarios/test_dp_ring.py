"""A DP bucket is a ring collective in the unfolded placement: it starts when the ring's last member issues it
and ends for every member when all its hops have landed (simulator/engine/unfolded.py, UnfoldedPlacement.dp_transfer)."""

from __future__ import annotations

import pytest
import simpy

from simulator.engine.engine import Engine
from simulator.engine.faults import Faults
from simulator.engine.placement import DpBucket
from simulator.engine.ranks import Place
from simulator.engine.unfolded import UnfoldedPlacement
from topologies.cluster import cluster_preset
from workloads.graph.step import StepWorkload
from workloads.specs.layouts import layout_preset
from workloads.specs.models import ModelSpec

TINY = ModelSpec("tiny", 8, 512, 8, 2, 1024, 8, 2, 1024)
SMALL = ModelSpec("small", 4, 1024, 8, 4, 2048, 8, 2, 2048)


def test_a_bucket_waits_for_its_ring_by_hand() -> None:
    """16 GPUs, 4 per node, PP 2, DP 2, a 1 GB/s NIC. Stage 1, rank 1: replica 0 is GPU 5, replica 1 GPU 13;
    stage 0's GPU 1 sends GPU 5 a PP activation. All three routes cross rail 1's leaf (one hop each way).

    t = 0     GPU 1 starts 1000 B of PP to GPU 5; replica 1 (GPU 13, ahead) issues its 1000 B bucket.
    t = 1 us  the PP send lands, alone on GPU 5's NIC ingress: the bucket waits for replica 0.
    t = 3 us  replica 0 (GPU 5) issues the bucket: hops 5 -> 13 and 13 -> 5 start, each alone on its links.
    t = 4 us  both hops land (1000 B at 1 GB/s); the bucket ends for both replicas.

    Free-running flows would instead share GPU 5's ingress from t = 0 (0.5 GB/s each): the PP send and
    replica 1's hop land at 2 us, and replica 1's bucket ends before replica 0 has issued its own."""
    layout = layout_preset("megascale-moe").with_(pp=2, intra_size=4)
    cluster = cluster_preset("h800", 16, domain_gpus=4, nic_bandwidth_Bps=1e9, nic_efficiency=1.0)
    workload = StepWorkload(TINY, layout, 16, 4, 8, 512)
    env = simpy.Environment()
    placement = UnfoldedPlacement(env, workload, cluster, Faults())
    sender, slow, ahead = Place(0, 0, 1), Place(0, 1, 1), Place(1, 1, 1)
    assert [placement.gpu(place) for place in (sender, slow, ahead)] == [1, 5, 13]
    assert placement.pp_links(sender, slow) == ((("gpu", 1), ("leaf", 0, 1)), (("leaf", 0, 1), ("gpu", 5)))
    landed: dict[str, float] = {}

    def at(delay_s: float, name: str, start) -> simpy.events.ProcessGenerator:
        yield env.timeout(delay_s)
        yield start()
        landed[name] = env.now

    bucket = DpBucket("dp-grads", 0)
    env.process(at(0.0, "pp", lambda: placement.transfer(placement.pp_links(sender, slow), 1000.0)))
    env.process(at(0.0, "ahead", lambda: placement.dp_transfer(ahead, bucket, placement.dp_links(ahead), 1000.0)))
    env.process(at(3e-6, "slow", lambda: placement.dp_transfer(slow, bucket, placement.dp_links(slow), 1000.0)))
    env.run()
    assert landed == {"pp": pytest.approx(1e-6, rel=1e-12), "ahead": pytest.approx(4e-6), "slow": pytest.approx(4e-6)}
    assert landed["ahead"] == landed["slow"]
    assert placement.bytes_sent()[(("leaf", 0, 1), ("gpu", 5))] == 2000.0  # the PP send and replica 1's hop


def test_every_replica_ends_with_the_straggler() -> None:
    """A straggler in replica 0 (GPU 5, stage 0): replica 1 runs ahead through the pipeline, then waits for
    replica 0 at each DP bucket, so every replica of a stage ends the step when replica 0's does. Two
    micro-batches a replica (global batch 4): the lead and the wait need no more, and the unfolded run of 32
    GPUs takes a fifth of the time of 8 micro-batches'."""
    layout = layout_preset("megascale-moe").with_(pp=2, intra_size=8)
    cluster = cluster_preset("h800", 32, domain_gpus=8)
    workload = StepWorkload(SMALL, layout, 32, 8, 4, 512)
    assert workload.micro_batches == 2
    engine = Engine(workload, cluster, placement="unfolded", faults=Faults(stragglers=[(5, 1.5)]))
    engine.run()
    for stage in range(2):
        slow, ahead = engine._logs[Place(0, stage, 0)], engine._logs[Place(1, stage, 0)]
        assert ahead.pipeline_end_s < slow.pipeline_end_s  # replica 1 is ahead ...
        assert ahead.end_s == slow.end_s  # ... until its gradients reduce with replica 0's


def test_a_barrier_never_joined_is_an_error_not_a_short_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """A DP bucket whose event nothing fires (a ring member that never joins) leaves its places without an
    end: the engine says so instead of returning a step that stopped short (end_s 0)."""
    layout = layout_preset("megascale-moe").with_(pp=2, intra_size=8)
    workload = StepWorkload(SMALL, layout, 32, 8, 16, 512)
    engine = Engine(workload, cluster_preset("h800", 32, domain_gpus=8))
    monkeypatch.setattr(engine.placement, "dp_transfer", lambda *_: engine.env.event())
    with pytest.raises(RuntimeError, match="never finished the step"):
        engine.run()
