"""The folded engine against the unfolded one: each class where folding is not exact, and its bound (relative step
time). The one list: docs/design.md's table repeats it and tests/unit/test_docs_bounds.py holds the two equal."""

from __future__ import annotations

# Stages or replicas sharing a node: the stage's collectives on an NVLink of their own, the PXN bytes on one GPU of
# a node (tests/differential/test_shared_nodes.py).
SHARED_NODE_BOUND = 0.01
# One degraded NIC: its DP ring neighbour's NIC also carries that replica's PP sends
# (tests/differential/test_degraded_nic.py).
DEGRADED_NIC_BOUND = 0.01
