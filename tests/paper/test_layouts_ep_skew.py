"""Beyond-the-paper reproductions layouts-ep (experiments.beyond.layouts_ep) and skew (experiments.beyond.skew), on
reduced grids."""

from __future__ import annotations

import pandas as pd

from experiments.beyond import layouts_ep, skew
from experiments.paper.reproduce import REPRODUCTIONS

# M6 on 128 GPUs with 32 sequences: 2 micro-batches per pipeline, fast; EP 64 spans 8 nodes, so M = 4 binds.
M6_SMALL = (layouts_ep.Setup("deepseekmoe", "M6", 128, 32, 64, 4),)


def test_layouts_ep_reduced_grid(tmp_path) -> None:
    """Three placements x two NIC rates; a faster NIC never lowers cross-node EP throughput, and the node
    limit never makes it slower than unlimited routing."""
    assert REPRODUCTIONS["layouts-ep"] is layouts_ep.run
    section = layouts_ep.run(tmp_path, M6_SMALL, (50, 400))
    assert (tmp_path / "layouts-ep.png").exists() and "Finding" in section and "| M6 |" in section
    frame = pd.read_csv(tmp_path / "layouts-ep.csv")
    assert len(frame) == 6 and frame.error.isna().all()
    assert sorted(frame.placement.unique()) == ["cross-node", "in-node"]
    cross = frame[frame.placement == "cross-node"]
    for _name, group in cross.groupby("layout"):
        slow, fast = group.sort_values("nic_gbps").tokens_per_s
        assert fast >= slow
    at50 = cross[cross.nic_gbps == 50].set_index("ep_max_nodes").tokens_per_s
    assert at50[4] >= at50[0]
    inside = frame[frame.placement == "in-node"]
    assert (inside.ep == 8).all() and (inside.exposed_ep_s.nunique() == 1)  # in-node EP never touches the NIC


def test_fewest_stages_fits_memory() -> None:
    """M1 on 480 GPUs: EP 8 needs 5 stages to fit 80 GB, EP 32 only 3 (and PP 2 does not divide into EP 32)."""
    m1 = layouts_ep.SETUPS[0]
    names = [layout.name for layout in layouts_ep.placements(m1)]
    assert names == ["in-node EP 8, PP 5", "cross-node EP 32, M=4, PP 3", "in-node EP 8, PP 15 (paper)"]


def test_skew_reduced_grid(tmp_path) -> None:
    """s = 0, 1, 2 on 30 sequences: skew never makes dropless faster than capacity 1.25 (which only drops more),
    uniform load drops nothing, and the dropped share grows with s."""
    assert REPRODUCTIONS["skew"] is skew.run
    section = skew.run(tmp_path, (0.0, 1.0, 2.0), global_batch=30)
    assert (tmp_path / "skew.png").exists() and "Finding" in section and "batch 30 x 8192" in section
    frame = pd.read_csv(tmp_path / "skew.csv")
    assert len(frame) == 6 and frame.error.isna().all()
    cap = frame[~frame.dropless].set_index("zipf")
    free = frame[frame.dropless].set_index("zipf")
    assert (free.tokens_per_s[[1.0, 2.0]] <= cap.tokens_per_s[[1.0, 2.0]]).all()
    assert free.tokens_per_s[0.0] > cap.tokens_per_s[0.0]  # no skew: dropless skips the 1.25x padding
    assert cap.dropped_fraction[0.0] == 0 and 0 < cap.dropped_fraction[1.0] < cap.dropped_fraction[2.0] < 1
    assert (free.dropped_fraction == 0).all() and free.busiest_gpu_load[2.0] > free.busiest_gpu_load[1.0] > 1
