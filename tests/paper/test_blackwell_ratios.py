"""GB300 over GB200 (experiments/validation/blackwell/ratios.py): the published pairs against the simulator, one
recipe on three GPUs (Megatron-Bridge 25.11's Llama 3 8B), and cuDNN's HBM-bound norms on both GPUs. Out of the
corpus: these pin what the check states (the gap), not a fit."""

from __future__ import annotations

import statistics

import pytest

from experiments.validation.blackwell.ratios import (
    DENSE_ROWS,
    PAIRS,
    PairResult,
    norm_ratios,
    pair_results,
    preset_hbm_ratio,
    table,
)
from simulator.costs.blackwell_tables import mamf_level
from simulator.costs.gemm_points import GemmKernel

# On the Blackwell check's worker: the rows both simulate are simulated once (blackwell/check.py simulate_row's cache).
pytestmark = pytest.mark.xdist_group("blackwell_check")


@pytest.fixture(scope="module")
def results() -> dict[str, PairResult]:
    return {r.pair.label: r for r in pair_results()}


def _dense(label_part: str, results: dict[str, PairResult]) -> list[PairResult]:
    return [r for label, r in results.items() if r.pair.same_recipe and label_part in label]


def test_dense_rows_are_one_recipe_on_three_gpus_but_gb300s_micro_batch() -> None:
    """The six flag files rebuild Megatron-Bridge v0.2.1's Llama 3 8B recipes: TP / PP / CP 1 on 8 GPUs, the same
    on GB300, GB200 and B200 except GB300's micro-batch of 4 (2 elsewhere) and the FP8 recipe per precision."""
    layouts = {row.name: row.job().layout for row in DENSE_ROWS}
    assert {row.cluster for row in DENSE_ROWS} == {"gb300", "gb200", "b200"} and len(DENSE_ROWS) == 6
    reference = layouts["bridge-gb200-llama3-8b-8-fp8cs"]
    assert (reference.pp, reference.cp, reference.fp8_recipe) == (1, 1, "tensorwise")
    for name, layout in layouts.items():
        assert layout.micro_batch == (4 if "gb300" in name else 2), name
        assert layout.fp8_recipe == ("tensorwise" if name.endswith("fp8cs") else "mxfp8"), name
        assert layout.with_(micro_batch=2, fp8_recipe="tensorwise") == reference, name


def test_one_recipe_gb300_over_gb200_is_measured_far_above_the_simulated(results: dict[str, PairResult]) -> None:
    """Measured 1.19x (FP8-CS) and 1.21x (MXFP8); the simulator gives 1.07x (its GB300 GEMMs at the pooled Blackwell
    level, its GB200's at the GB200's own MAMF level, 0.94 of it; 1.02-1.03x when both ran at the pooled level),
    leaving 1.11x / 1.13x unexplained."""
    pairs = _dense("(GB300/GB200)", results)
    assert len(pairs) == 2
    for r in pairs:
        assert r.measured == pytest.approx(1.19, abs=0.025)
        assert 1.06 < r.simulated < 1.08
        assert r.unexplained > 1.11


def test_gemms_alone_would_have_to_run_more_than_the_power_ratio_faster(results: dict[str, PairResult]) -> None:
    """To close the one-recipe GB300 / GB200 gap with GEMMs alone they would have to run 1.20x (FP8-CS) / 1.23x
    (MXFP8) faster, above the 1,400 / 1,200 W power ratio (1.17x, vendor specs) that bounds a power-bound kernel at
    equal energy per op. (1.29x / 1.32x before the GB200 took its own MAMF level; MXFP8 was 1.30x while its GEMM curve
    pooled torchao's grouped kernel; FP8-CS 1.295x while its quantization was charged Hopper's transpose on
    Blackwell.)"""
    pairs = _dense("(GB300/GB200)", results)
    assert len(pairs) == 2
    for r in pairs:
        expected = 1.204 if "FP8-CS" in r.pair.label else 1.234
        assert r.gemm_speedup_to_close == pytest.approx(expected, abs=0.003), r.pair.label
        assert r.gemm_speedup_to_close > 1400 / 1200


def test_one_recipe_gb200_over_b200_is_simulated_above_the_measured(results: dict[str, PairResult]) -> None:
    """The simulated GB200 runs 1.064x a B200 where the measured pair is 1.01-1.03x: each GPU's GEMMs at its own MAMF
    level (simulator/costs/blackwell_tables.py mamf_level: GB200 1.05x B200 in FP8) leave 3-5% that the GEMMs do not
    explain. On the datasheet peaks alone (GB200 2.5, B200 2.25 PFLOP/s BF16) it was 1.09-1.10x."""
    pairs = _dense("(GB200/B200)", results)
    assert len(pairs) == 2
    for r in pairs:
        assert 1.0 < r.measured < 1.035
        assert 1.05 < r.simulated < 1.08
        assert 0.94 < r.unexplained < 0.97


def test_the_simulated_gb300_gemms_are_gb200s_per_sample(results: dict[str, PairResult]) -> None:
    """On the one-recipe pair the simulator's GB300 GEMM time per sample is the GB200's times the GB200's own FP8 MAMF
    level (0.94: same peaks, same table, the GB300 at the table's pooled level), within 1%; its attention is 1.10x
    faster (cuDNN's measured GB300 speed-up); that is all it separates them by."""
    level = mamf_level("gb200", GemmKernel.FP8_TENSORWISE_DENSE)
    for r in _dense("(GB300/GB200)", results):
        gb300, gb200 = r.faster.costs.compute_s, r.slower.costs.compute_s
        assert gb300["GEMMs"] / 4 == pytest.approx(gb200["GEMMs"] / 2 * level, rel=0.01)
        assert gb200["attention"] / 2 / (gb300["attention"] / 4) == pytest.approx(1.10, abs=0.02)


def test_every_gb300_pair_is_measured_faster_than_simulated(results: dict[str, PairResult]) -> None:
    """Issue 40 item 3: every published GB300 / GB200 pair, MoE or dense, runs a larger ratio than the simulated but
    DeepSeek-V3's Megatron-Bridge pair (1.288x simulated, 1.280x measured), by 2.7-13% (2.7-18% until the GB200 took its
    own MAMF level, simulator/costs/blackwell_tables.py mamf_level; 3-18% until DP rings that leave a node spread over
    its members' NICs, simulator/engine/dp_bytes.py ring_nic_share; 4-18% until DeepSeek-V3's GB300 recipe, which runs
    cuDNN's FP8 attention, took cuDNN's own timing of the MLA shape: simulator/costs/attention_shapes.py)."""
    gb300_pairs = [r for r in results.values() if r.pair.faster.startswith(("gb300", "mlm-gb300", "mcore-gb300"))]
    gb300_pairs += _dense("(GB300/GB200)", results)
    assert len(gb300_pairs) == 9
    within = {r.pair.label for r in gb300_pairs if r.unexplained < 1.025}
    assert within == {"DeepSeek-V3, Megatron-Bridge 26.08"}
    assert all(r.unexplained > 0.99 for r in gb300_pairs)


def test_mxfp8_over_fp8_current_scaling_gemms_are_tes_ratio_and_the_rest_is_fast(
    results: dict[str, PairResult],
) -> None:
    """Not a GB300 question: one recipe per GPU, MXFP8 measured 0.95-0.96x FP8-CS's throughput. moesim's MXFP8 GEMMs
    take 1.044x FP8-CS's time on all three GPUs (TE's same-run B300 layer: 7.161 / 6.812 = 1.051x, kernels only; the
    per-kernel launch cost is common to both), and its MXFP8 quantization is 0.83-0.84x FP8-CS's (one pass writing
    4.06 B per element against FP8-CS's amax pass and cast, 5 B in 4 kernels, 3 B in 3 for the qkv and fc1 inputs
    whose amax TE's norm computes: no transpose on Blackwell): the pair is simulated 0.983-0.984x, 2-4% above the
    measured. Closing it with GEMMs alone would take MXFP8's GEMMs 0.93-0.97x
    their speed here, against TE's own ratio. (Before, with torchao's grouped kernel pooled into the MXFP8 curve at
    0.47 of peak, the pair was simulated 0.855-0.859x; with FP8-CS charged Hopper's transpose, 0.994-0.997x.)"""
    pairs = _dense("MXFP8 over FP8-CS", results)
    assert len(pairs) == 3
    for r in pairs:
        assert 0.94 < r.measured < 0.97
        assert 0.98 < r.simulated < 0.99
        assert 0.018 < r.simulated - r.measured < 0.043
        assert 0.93 < r.gemm_speedup_to_close < 0.98
        mxfp8, fp8cs = r.faster.costs.compute_s, r.slower.costs.compute_s
        assert mxfp8["GEMMs"] / fp8cs["GEMMs"] == pytest.approx(1.044, abs=0.003)
        assert mxfp8["FP8 quantization"] / fp8cs["FP8 quantization"] == pytest.approx(0.833, abs=0.008)


def test_hbm_bound_kernels_run_alike_on_gb300_and_gb200() -> None:
    """cuDNN's norms on both GPUs (same cuDNN, same day): GB300 within -3% / +5% of GB200's bytes per second, medians
    1.01x forward and 1.04x backward; the presets' equal HBM (8 TB/s) give 1.00x."""
    for backward in (False, True):
        ratios = norm_ratios(backward)
        assert len(ratios) == 15
        assert 0.97 < min(ratios) and max(ratios) < 1.06
        assert 1.0 <= statistics.median(ratios) < 1.04
    assert preset_hbm_ratio() == 1.0


def test_one_recipe_on_a_grace_and_an_x86_host_is_measured_alike_and_simulated_apart(
    results: dict[str, PairResult],
) -> None:
    """Nemotron 3 Nano's MXFP8 recipe, the same flags on 8 GB200 (26.06) and 8 B200 (26.04.01): measured 1.02x
    (33,522 over 32,768), simulated 0.83x. The gap is the host: the GB200's busiest micro-batch waits 129.9 ms for
    its Grace's launches, the B200's 16.5 ms for its Xeon's, a difference larger than the whole difference of their
    micro-batches; without that wait the GB200's is the shorter (its GPU-side times, 1.05x; 1.08x before each GPU's
    GEMMs took its own MAMF level, the GB200's 0.94 of the B200's 0.99 in FP8)."""
    (r,) = [r for label, r in results.items() if "Nemotron 3 Nano" in label]
    assert r.pair.same_recipe
    assert r.measured == pytest.approx(33522 / 32768)
    assert 0.82 < r.simulated < 0.84
    gb200, b200 = r.faster.costs, r.slower.costs
    assert gb200.host_wait_s - b200.host_wait_s > gb200.duration_s - b200.duration_s > 0
    assert (b200.duration_s - b200.host_wait_s) / (gb200.duration_s - gb200.host_wait_s) == pytest.approx(
        1.053, abs=0.01
    )


def test_every_pair_names_published_rows() -> None:
    assert len(PAIRS) == 15 and all(p.faster != p.slower for p in PAIRS)


def test_the_table_prints_every_pair() -> None:
    printed = table()
    assert all(pair.label in printed for pair in PAIRS)
    assert all(row.name in printed for row in DENSE_ROWS)
