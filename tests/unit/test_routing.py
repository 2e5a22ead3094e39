"""Skewed routing: busiest-GPU token counts, capacity dropping vs dropless, seeded determinism."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.costs.calibration import DEFAULT_CALIBRATION
from simulator.costs.kernels import gemm_time_s
from simulator.report.simulate import simulate
from topologies.hardware import gpu_preset
from workloads.ops import Gemm
from workloads.recipes.moe import ep_ffn_recipe
from workloads.specs.layouts import layout_preset
from workloads.specs.models import model_preset
from workloads.specs.routing import expert_loads, layout_routing_stats, routing_stats

MODEL = model_preset("paper-352b")  # 32 experts, top-3, h 4096, h_ffn 14336
LAYOUT = layout_preset("megascale-moe")  # EP 8: 4 experts per GPU


def _gemm(steps, name: str) -> Gemm:
    (step,) = [s for s in steps if s.name == name]
    return step.gemm


def test_all_load_on_one_expert_is_one_gpu_doing_every_token() -> None:
    """8,192 tokens / 8 = 1,024 per GPU, x 3 copies x 8 GPUs = 24,576 copies, all on expert 0 (GPU 0):
    4 local experts -> m = 6,144 each; the GEMM has the tiles of one 24,576-row GEMM on that GPU (4 x 48 x 224 =
    192 x 224) and costs it over the BF16 grouped factor from 4,096 rows per group on (TransformerEngine #2045:
    650.574 TFLOP/s grouped against cuBLAS's 676.59 at K 2048, both at 32/33 of their waves; the launch gap
    is not scaled)."""
    loads = (1.0,) + (0.0,) * 31
    layout = LAYOUT.with_(expert_loads=loads, dropless=True)
    steps = ep_ffn_recipe(MODEL, layout, 8192, 8)
    gemm = _gemm(steps, "expert_fc13")
    assert gemm == Gemm(6144, 2 * 14336, 4096, 4)
    gpu = gpu_preset("h800")
    one = gemm_time_s(Gemm(24576, 2 * 14336, 4096), gpu, DEFAULT_CALIBRATION)
    launch = DEFAULT_CALIBRATION.kernel_overhead_s  # one kernel either way, not slowed by the factor
    grouped = (one - launch) / (650.574 / 676.59) + launch
    assert gemm_time_s(gemm, gpu, DEFAULT_CALIBRATION) == pytest.approx(grouped, rel=1e-12)
    (dispatch,) = [s for s in steps if s.name == "ep_a2a_dispatch"]
    balanced = 1024 * 3 * 4096 * 2 * 7 / 8  # Eq. 3
    assert dispatch.comm_bytes == pytest.approx(8 * balanced)  # GPU 0 receives 8x its share


def test_capacity_drops_vs_dropless() -> None:
    """4 experts on 4 GPUs, 100 tokens each, top-1, loads 0.7/0.1/0.1/0.1: 400 copies -> 280, 40, 40, 40;
    capacity ceil(1.25 x 100) = 125 keeps 125 + 120 = 245 (38.75% dropped); dropless keeps 280."""
    loads = np.array([0.7, 0.1, 0.1, 0.1])
    capped = routing_stats(loads, 100, 1, 4, 1.25)
    assert (capped.busiest_copies, capped.capacity_per_expert) == (125.0, 125)
    assert capped.dropped_fraction == pytest.approx(0.3875)
    assert capped.comm_scale == 1.25
    dropless = routing_stats(loads, 100, 1, 4, None)
    assert dropless.busiest_copies == pytest.approx(280.0) and dropless.dropped_fraction == 0.0


def test_zipf_shares_and_seeded_determinism() -> None:
    """Exponent 1 over 4 experts: 1, 1/2, 1/3, 1/4 over 25/12 -> 12/25, 6/25, 4/25, 3/25 (permuted)."""
    shares = expert_loads(4, "zipf", 1.0, np.random.default_rng(7))
    assert sorted(shares) == pytest.approx([3 / 25, 4 / 25, 6 / 25, 12 / 25])
    again = expert_loads(4, "zipf", 1.0, np.random.default_rng(7))
    assert (shares == again).all()
    a = layout_routing_stats(32, 3, 1024, 8, "zipf", 1.2, 1, True, 1.25)
    assert a == layout_routing_stats(32, 3, 1024, 8, "zipf", 1.2, 1, True, 1.25)
    assert a.busiest_copies > 1024 * 3  # skew: the busiest GPU gets more than its share


def test_skew_slows_the_step_and_dropless_more_than_capacity() -> None:
    kwargs = {"gpus": 120, "global_batch": 16}
    base = LAYOUT.with_(pp=15)
    uniform = simulate(MODEL, base, **kwargs)
    zipf = base.with_(routing="zipf", zipf_exponent=1.2, seed=3)
    capped = simulate(MODEL, zipf, **kwargs)
    dropless = simulate(MODEL, zipf.with_(dropless=True), **kwargs)
    # capacity 1.25 drops 46% of the copies here: padded GEMMs cost as much as uniform, less is moved
    assert capped.step_time_s <= uniform.step_time_s < dropless.step_time_s
    assert simulate(MODEL, zipf.with_(dropless=True), **kwargs).step_time_s == dropless.step_time_s
