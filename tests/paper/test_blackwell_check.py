"""experiments.validation.blackwell_check: Megatron-Bridge's 26.08 GB300 / GB200 MXFP8 rows, out of the corpus.

Pinned: the simulated tokens/s/GPU of each row at the fitted calibration (compute_residual 0.8432) and at residual 1.
A model change that moves a Blackwell prediction moves these pins; update them with the new table in the commit
that moves them (``python -m experiments.validation.blackwell_check``). The errors are stated, not bounded: no
Blackwell run is in the corpus and nothing is fitted on these rows.
"""

from __future__ import annotations

import pytest

from experiments.validation.blackwell_check import ROWS, RowResult, simulate_row, table
from simulator.costs.calibration import UNFITTED_CALIBRATION

# name -> (simulated at the fitted residual, simulated at residual 1), tokens/s/GPU, at this commit. Errors against
# the published rows: DeepSeek-V3 GB300 -32.9% / -22.7%, GB200 -19.7% / -7.8%; GPT-OSS-120B GB300 -21.5% / -13.5%,
# GB200 -10.4% / -1.6%; Qwen3-30B-A3B GB300 -14.0% / -3.6%, GB200 -5.4% / +6.0%; Qwen3-235B-A22B GB300 -21.8% /
# -11.6%, GB200 -12.7% / -1.1%. Before the embedding's weight gradient, the head's TP gather, the optimizer step's
# passes and the interleaved schedule's per-chunk gradient reduction: -34.1% / -24.3%, -19.6% / -7.7%, -21.1% /
# -13.1%, -10.1% / -1.2%, -13.8% / -3.3%, -5.1% / +6.4%, -22.1% / -11.9%, -12.7% / -1.1%. Before HybridEP's in-dispatch padding (its experts skip TEGroupedMLP's FP8 padding):
# -36.1%, -21.9%, -23.1%, -12.2%, -19.6%, -11.5%, -25.7%, -16.4%; before cuDNN's own Blackwell attention table:
# -39.2%, -24.0%, -22.4%, -11.5%, -23.3%, -15.6%, -28.1%, -18.8% at the fitted residual.
PINNED = {
    "gb300-deepseek-v3-256": (4220, 4859),
    "gb200-deepseek-v3-256": (3946, 4530),
    "gb300-gpt-oss-120b-64": (25931, 28559),
    "gb200-gpt-oss-120b-64": (25693, 28216),
    "gb300-qwen3-30b-a3b-8": (38307, 42933),
    "gb200-qwen3-30b-a3b-8": (37769, 42334),
    "gb300-qwen3-235b-a22b-256": (6892, 7794),
    "gb200-qwen3-235b-a22b-256": (6353, 7202),
}


@pytest.fixture(scope="module")
def results() -> dict[str, tuple[RowResult, RowResult]]:
    return {row.name: (simulate_row(row), simulate_row(row, UNFITTED_CALIBRATION)) for row in ROWS}


def test_every_published_row_has_its_flag_file_and_a_pin() -> None:
    assert {row.name for row in ROWS} == set(PINNED)
    assert {row.cluster for row in ROWS} == {"gb300", "gb200"}


def test_simulated_throughputs_are_the_pinned_ones(results: dict[str, tuple[RowResult, RowResult]]) -> None:
    for name, (fitted, unfitted) in results.items():
        assert fitted.tokens_per_s_per_gpu == pytest.approx(PINNED[name][0], rel=2e-3), name
        assert unfitted.tokens_per_s_per_gpu == pytest.approx(PINNED[name][1], rel=2e-3), name


def test_every_row_is_predicted_slow_and_gb300_most(results: dict[str, tuple[RowResult, RowResult]]) -> None:
    """The finding this check records: every row is simulated slow, at the fitted residual by 5-34%, and the
    GB300 rows more than the GB200 rows of the same model (measured GB300 / GB200 1.10-1.28x, simulated 1.01-1.08x:
    the presets give the two the same dense peaks and HBM bandwidth)."""
    for fitted, _ in results.values():
        assert fitted.error < 0, fitted.row.name
    for model in {row.model for row in ROWS}:
        gb300 = next(results[r.name][0] for r in ROWS if r.model == model and r.cluster == "gb300")
        gb200 = next(results[r.name][0] for r in ROWS if r.model == model and r.cluster == "gb200")
        assert gb300.error < gb200.error, model
        measured = gb300.row.measured_tokens_per_s_per_gpu / gb200.row.measured_tokens_per_s_per_gpu
        simulated = gb300.tokens_per_s_per_gpu / gb200.tokens_per_s_per_gpu
        assert measured > 1.09 and simulated < measured, model


def test_the_fitted_residual_moves_every_row_away_from_the_measurement(
    results: dict[str, tuple[RowResult, RowResult]],
) -> None:
    """Issue 40 item 4, counted: the residual fitted on H800 MegaScale-MoE slows every Blackwell row, each of them
    already slow; at residual 1 seven of eight are nearer their measurement (GB200 -8% to +6%, GB300 -24% to -3%)."""
    nearer = 0
    for fitted, unfitted in results.values():
        assert fitted.error < min(unfitted.error, 0), fitted.row.name
        nearer += abs(unfitted.error) < abs(fitted.error)
    assert nearer == 7


def test_the_table_prints_each_row() -> None:
    printed = table()
    assert all(row.name in printed for row in ROWS)


def test_te_mxfp8_quantization_on_b300_is_simulated_a_third_fast() -> None:
    """TE's published B300 MXFP8 casts (1.823 ms per layer) run at 0.53 of HBM bandwidth; the simulator's 0.8 of it
    (Calibration.memory_efficiency, H100 / H200 measurements) gives 1.226 ms, -32.7%: on Blackwell the quantization
    cost is under-, not over-counted, so it is not where the rows' slowness comes from."""
    from experiments.validation.blackwell_check import TE_B300_MXFP8_QUANT_S, te_b300_mxfp8_quantization_s

    simulated = te_b300_mxfp8_quantization_s()
    assert simulated == pytest.approx(1.2264e-3, rel=1e-3)
    assert simulated / TE_B300_MXFP8_QUANT_S - 1 == pytest.approx(-0.327, abs=0.005)


def test_cudnn_table_transfers_to_gpt_oss_shape_on_gb200() -> None:
    """Out of the table's own shape (head dim 128, full causal): cuDNN 9.19's GB200 run of GPT-OSS's attention
    (NVIDIA/cudnn-frontend@afa9f7c0 benchmark/sdpa_benchmark_training/results/gb200_919_only_cudnn/
    gpt_oss_20260226_175022.csv: batch 2, 64 query / 8 KV heads, head dim 64, sliding window 1,024) at 4,096 to 16,384
    tokens, BF16: forward 0.209 / 0.423 / 0.853 ms, backward 0.487 / 0.998 / 2.024 ms. Simulated at benchmark clocks
    (no residual, no sustained clock): forward within 2%, backward 11-16% slow. Its FP8 rows (forward 0.203 / 0.411 /
    0.831 ms, backward 0.862 / 3.011 / 11.332 ms) are not reproduced: cudnn-fp8 is simulated 14% fast forward and 2-20x
    fast backward on a sliding window, so the GPT-OSS rows' FP8 attention is a lower bound on its time."""
    from simulator.costs.calibration import BENCHMARK_CALIBRATION
    from simulator.costs.kernels import attention_time_s
    from topologies.hardware import gpu_preset
    from workloads.ops import AttentionShape, attention_pairs

    gb200 = gpu_preset("gb200")
    measured = {4096: (0.209, 0.487), 8192: (0.423, 0.998), 16384: (0.853, 2.024)}
    for seq_len, (fwd_ms, bwd_ms) in measured.items():
        shape = AttentionShape(64, 64, seq_len, window=1024, kernel="cudnn")
        flops = 4 * 2 * 64 * 64 * attention_pairs(seq_len, 1024)  # QK^T and PV, batch 2, 64 heads, head dim 64
        fwd = attention_time_s(flops, False, gb200, BENCHMARK_CALIBRATION, shape) * 1e3
        bwd = attention_time_s(2.5 * flops, True, gb200, BENCHMARK_CALIBRATION, shape) * 1e3
        assert fwd == pytest.approx(fwd_ms, rel=0.02), seq_len
        assert 1.10 < bwd / bwd_ms < 1.17, seq_len
