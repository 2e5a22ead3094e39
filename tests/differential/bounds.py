"""The folded engine against the unfolded one: where folding is not exact, each class and its bound (relative step
time, |unfolded / folded - 1|). The one list of them: docs/design.md's table repeats it, and
tests/unit/test_docs_bounds.py holds the two equal. Everywhere else the two agree to 1e-9."""

from __future__ import annotations

# Stages or replicas sharing a node: the stage's collectives keep an NVLink of their own, and the PXN bytes of
# cross-node hops load one GPU of a node, its neighbours none (tests/differential/test_shared_nodes.py). Largest
# measured: 2.29e-3 over the long draw's 250 configurations, 2.5e-3 on a partial draw with 8 and 16-GPU nodes.
SHARED_NODE_BOUND = 5e-3
# One degraded NIC: its DP ring neighbour's healthy NIC also carries that replica's PP sends, which the folded
# view leaves to the DP hop alone; where nodes are shared, one NIC per stage stands for GPUs' NICs that carry
# different traffic (tests/differential/test_degraded_nic.py). Largest measured: 2.84e-3 over 250 configurations
# (2.56e-3 where nodes are shared).
DEGRADED_NIC_BOUND = 5e-3
# A degraded NVLink port slows its own TP and CP groups; the folded view slows the whole stage's NVLink
# (tests/differential/test_unfolded.py, cp-nvlink-faults: 0.44%).
DEGRADED_NVLINK_BOUND = 0.02
# A speed spread: a TP or SP group narrower than the stage waits only for its own slowest GPU between EP
# barriers (tests/differential/test_unfolded.py, ep-speed-spread: 0.016%).
SPEED_SPREAD_BOUND = 1e-3
# Faults in different replicas: the folded view charges both to every replica (tests/unit/test_faults.py,
# test_where_folding_is_not_exact: 0.21%).
FAULTS_IN_TWO_REPLICAS_BOUND = 1e-2
# A failed NIC with DP: its detour also loads NVLink ports and the proxy's NIC ingress (tests/unit/test_faults.py).
FAILED_NIC_BOUND = 1e-3

BOUNDS = {
    "stages or replicas sharing a node": SHARED_NODE_BOUND,
    "one degraded NIC": DEGRADED_NIC_BOUND,
    "a degraded NVLink port": DEGRADED_NVLINK_BOUND,
    "a GPU speed spread": SPEED_SPREAD_BOUND,
    "faults in different replicas": FAULTS_IN_TWO_REPLICAS_BOUND,
    "a failed NIC, with DP": FAILED_NIC_BOUND,
}
