"""The README's headline examples print what the code prints: their numbers are read from the README and the
same runs simulated (a model change that moves them fails here until the README is rerun)."""

from __future__ import annotations

import re
from pathlib import Path

from simulator.report.simulate import simulate
from workloads.inputs.yaml_files import load_layout, load_model
from workloads.inputs.megatron import parse_megatron_args

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def _after(marker: str, pattern: str) -> re.Match:
    """The first match of ``pattern`` after ``marker`` in the README."""
    start = README.index(marker)
    match = re.compile(pattern).search(README, start)
    assert match, f"README: {pattern!r} after {marker!r}"
    return match


def test_where_the_time_goes_example() -> None:
    """`moesim run --model mixtral-8x22b --cluster h100 --gpus 128 --layout best.yaml` (the search's fastest:
    PP 4, micro-batch 2)."""
    shown = _after("$ moesim run --model mixtral-8x22b --cluster h100", r"step time\s+([\d.]+) s")
    report = simulate("mixtral-8x22b", load_layout("megascale-moe").with_(pp=4), 128, cluster="h100", micro_batch=2)
    assert f"{report.step_time_s:.3f}" == shown.group(1)


def test_cross_node_ep_example() -> None:
    """`moesim compare --gpus 1440 --cluster examples/clusters/h800-100g.yaml --layouts ep-in-node, ep-cross-node`."""
    cluster = "examples/clusters/h800-100g.yaml"
    for name in ("ep-in-node", "ep-cross-node"):
        shown = _after("$ moesim compare --gpus 1440", rf"examples/layouts/{name}\.yaml\s+1440\s+([\d.]+)")
        report = simulate("paper-352b", load_layout(f"examples/layouts/{name}.yaml"), 1440, cluster=cluster)
        assert f"{report.step_time_s:.3f}" == shown.group(1)


def test_from_your_training_job_example() -> None:
    """Qwen3-235B-A22B from its config.json and Megatron-LM flags on 256 H100s."""
    flags = (
        "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 8 --num-virtual-stages-per-pipeline-rank 4 "
        "--expert-model-parallel-size 32 --sequence-parallel --micro-batch-size 1 --global-batch-size 2048 "
        "--seq-length 4096 --fp8-format e4m3 --fp8-recipe tensorwise"
    )
    run = parse_megatron_args(flags).resolve(load_model("examples/models/qwen3-235b-a22b.json"), None, 256)
    report = simulate(run.model, run.layout, 256, cluster="h100", global_batch=2048, seq_len=4096)
    shown = _after("Both print the same JSON", r"\(([\d.]+) s a step, ([\d,]+) tokens/s and (\d+) model TFLOP/s")
    step, tokens, tflops = shown.groups()
    assert (f"{report.step_time_s:.1f}", f"{report.tokens_per_s_per_gpu:,.0f}") == (step, tokens)
    assert f"{report.model_tflops_per_gpu:.0f}" == tflops


def test_search_around_a_megatron_job_example() -> None:
    """`moesim search --megatron-args` on the BF16 Qwen3-30B-A3B HybridEP job: the job as given and its fastest
    point (the same layout with EP overlap) simulate the step times the README quotes."""
    job = (
        "--expert-model-parallel-size 16 --micro-batch-size 1 --global-batch-size 1024 --seq-length 4096 --bf16 "
        "--swiglu --untie-embeddings-and-output-weights --moe-grouped-gemm --moe-router-fusion "
        "--moe-router-force-load-balancing --moe-router-load-balancing-type aux_loss --moe-aux-loss-coeff 1e-3 "
        "--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --grad-reduce-in-bf16 "
        "--cross-entropy-loss-fusion --cross-entropy-fusion-impl te --moe-token-dispatcher-type flex "
        "--moe-flex-dispatcher-backend hybridep --moe-permute-fusion"
    )
    shown = _after("`moesim search --megatron-args` searches", r"simulates ([\d.]+) s a\s+step[\s\S]*?([\d.]+) s, then")
    steps = []
    for flags in (job, f"{job} --overlap-moe-expert-parallel-comm --delay-wgrad-compute"):
        run = parse_megatron_args(flags).resolve(load_model("examples/models/qwen3-30b-a3b.json"), None, 16)
        steps.append(simulate(run.model, run.layout, 16, cluster="h100", global_batch=1024, seq_len=4096).step_time_s)
    assert tuple(f"{s:.2f}" for s in steps) == shown.groups()


def test_search_pick_for_gpt_oss_example() -> None:
    """The GPT-OSS-120B pick the README quotes (EP 64 at PP 1 with EP overlap), simulated from its printed flags
    with the recipe's other flags."""
    common = (
        "--micro-batch-size 1 --global-batch-size 1280 --seq-length 4096 --bf16 --swiglu "
        "--untie-embeddings-and-output-weights --moe-token-dispatcher-type alltoall --moe-grouped-gemm "
        "--moe-permute-fusion --moe-router-fusion --moe-router-force-load-balancing "
        "--moe-router-load-balancing-type none --use-distributed-optimizer --overlap-grad-reduce "
        "--overlap-param-gather --grad-reduce-in-bf16 --cross-entropy-loss-fusion --cross-entropy-fusion-impl te"
    )
    pick = (
        "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --expert-model-parallel-size 64 "
        "--expert-tensor-parallel-size 1 --overlap-moe-expert-parallel-comm --delay-wgrad-compute "
        "--recompute-granularity selective --recompute-modules core_attn layernorm"
    )
    shown = _after("GPT-OSS-120B job (64 H100", r"at PP 1 with EP overlap, ([\d.]+) s")
    run = parse_megatron_args(f"{common} {pick}").resolve(load_model("examples/models/gpt-oss-120b.json"), None, 64)
    report = simulate(run.model, run.layout, 64, cluster="h100", global_batch=1280, seq_len=4096)
    assert f"{report.step_time_s:.2f}" == shown.group(1)
