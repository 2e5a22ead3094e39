"""The README's and the documentation's worked examples print what the code prints: their numbers are read from
the page and the same runs simulated (a model change that moves them fails here until the page is rerun), and the
accuracy they state is the one results/validation.csv holds."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from experiments.validation import corpus
from simulator.report.simulate import simulate
from workloads.inputs.megatron import parse_megatron_args
from workloads.inputs.yaml_files import load_layout, load_model

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
DOCS = ROOT / "docs"
QWEN3_JOB = ROOT / "examples" / "megatron" / "qwen3-30b-a3b-h100-16.sh"
FIRST_ROW_STEP = r"\n\s+1 .* ([\d.]+)\s+[\d,]+\s+[\d.]+%"  # a search table's first row: its step s


def _page(name: str) -> str:
    return README if name == "README.md" else (DOCS / name).read_text()


def _after(text: str, marker: str, pattern: str) -> re.Match:
    """The first match of ``pattern`` after ``marker`` in ``text``."""
    start = text.index(marker)
    match = re.compile(pattern).search(text, start)
    assert match, f"{pattern!r} after {marker!r}"
    return match


def _shown(text: str, marker: str) -> dict[str, str]:
    """The numbers of the report printed after ``marker``: step time, tokens/s per GPU, model TFLOP/s, peak memory."""
    return {
        "step": _after(text, marker, r"step time\s+([\d.]+) s").group(1),
        "per_gpu": _after(text, marker, r"throughput\s+[\d.]+k tokens/s, ([\d.]+) per GPU").group(1),
        "tflops": _after(text, marker, r"model TFLOP/s\s+([\d.]+) per GPU").group(1),
        "memory": _after(text, marker, r"peak memory\s+([\d.]+) GiB").group(1),
    }


def _printed(report) -> dict[str, str]:
    """The same numbers as the report prints them."""
    return {
        "step": f"{report.step_time_s:.3f}",
        "per_gpu": f"{report.tokens_per_s_per_gpu:.1f}",
        "tflops": f"{report.model_tflops_per_gpu:.1f}",
        "memory": f"{report.peak_memory_gib:.1f}",
    }


@pytest.mark.parametrize("page", ["README.md", "getting-started.md", "outputs.md"])
def test_first_prediction_example(page: str) -> None:
    """`moesim run --model paper-352b --layout megascale-moe --gpus 240`, the report each page shows."""
    marker = "paper-352b / megascale-moe on 240 GPUs"
    assert _shown(_page(page), marker) == _printed(simulate("paper-352b", "megascale-moe", 240))


def _qwen3_235b_flags() -> str:
    """The Megatron-LM flags of the README's Qwen3-235B-A22B command, as written there."""
    command = _after(
        README, "$ moesim run --model examples/models/qwen3-235b-a22b.json", r'--megatron-args \\\n\s*"([^"]+)"'
    )
    return " ".join(command.group(1).replace("\\\n", " ").split())


def test_from_your_training_job_example() -> None:
    """Qwen3-235B-A22B from its config.json and the README's Megatron-LM flags on 256 H100s: the README's report
    and the numbers docs/megatron.md quotes for the same command."""
    flags = _qwen3_235b_flags()
    assert flags in " ".join(_page("megatron.md").replace("\\\n", " ").split())  # the same command on both pages
    run = parse_megatron_args(flags).resolve(load_model("examples/models/qwen3-235b-a22b.json"), None, 256)
    report = simulate(run.model, run.layout, 256, cluster="h100", global_batch=2048, seq_len=4096)
    assert _shown(README, "qwen3-235b-a22b / megatron-args on 256 GPUs") == _printed(report)
    shown = _after(_page("megatron.md"), "Both simulate", r"([\d.]+) s a step, ([\d,]+) tokens/s and (\d+) model")
    memory = _after(_page("megatron.md"), "Both simulate", r"([\d.]+) GiB per GPU")
    assert shown.groups() == (
        f"{report.step_time_s:.3f}",
        f"{report.tokens_per_s_per_gpu:,.0f}",
        f"{report.model_tflops_per_gpu:.0f}",
    )
    assert memory.group(1) == f"{report.peak_memory_gib:.1f}"


def _qwen3_30b_step(flags: str) -> float:
    run = parse_megatron_args(flags).resolve(load_model("examples/models/qwen3-30b-a3b.json"), None, 16)
    return simulate(run.model, run.layout, 16, cluster="h100", global_batch=1024, seq_len=4096).step_time_s


def test_search_around_a_megatron_job_example() -> None:
    """`moesim search --megatron-args` on the BF16 Qwen3-30B-A3B HybridEP job: the job as given, and the Megatron-LM
    arguments the README prints for the fastest, simulate the step times the README and docs/megatron.md quote."""
    printed = _after(README, "fastest, as Megatron-LM arguments:", r":([\s\S]*?)\n\.\.\.").group(1)
    assert "--overlap-moe-expert-parallel-comm" in printed
    given, fastest = _qwen3_30b_step(QWEN3_JOB.read_text()), _qwen3_30b_step(" ".join(printed.split()))
    first_row = _after(README, "--megatron-args examples/megatron/qwen3-30b-a3b-h100-16.sh", FIRST_ROW_STEP)
    assert first_row.group(1) == f"{fastest:.3f}"
    assert _after(README, "The job as given", r"simulates ([\d.]+) s a step").group(1) == f"{given:.2f}"
    quoted = r"simulates ([\d.]+) s a\s+step[\s\S]*?([\d.]+) s, then"
    shown = _after(_page("megatron.md"), "`moesim search --megatron-args` searches", quoted)
    assert shown.groups() == (f"{given:.2f}", f"{fastest:.2f}")


def _known_errors() -> list:
    """The validated runs as the error band reads them, their mechanisms worked out here from each case's job (not
    read from the CSV) and their errors from results/validation.csv."""
    from experiments.common.error_band import KnownError, mechanisms_of
    from experiments.validation.validate import case_job
    from simulator.report.clusters import load_cluster

    frame = pd.read_csv(ROOT / "results" / "validation.csv").set_index("case")
    known = []
    for case in corpus.load_cases():
        row = frame.loc[case.name]
        if not row.fitted and row.error == row.error:
            job = case_job(case)
            gpu = load_cluster(case.cluster, case.gpus).gpu.name
            known.append(KnownError(case.name, mechanisms_of(job.model, job.layout, gpu), float(row.error)))
    return known


def test_error_band_lines() -> None:
    """The `expected` lines of the README's two reports (and the docs' copies of the first): the band the validated
    runs alike give each step."""
    from experiments.common.error_band import band_for, mechanisms_of

    known = _known_errors()
    first = simulate("paper-352b", "megascale-moe", 240)
    mechanisms = mechanisms_of(load_model("paper-352b"), load_layout("megascale-moe"), "h800")
    run = parse_megatron_args(_qwen3_235b_flags()).resolve(
        load_model("examples/models/qwen3-235b-a22b.json"), None, 256
    )
    second = simulate(run.model, run.layout, 256, cluster="h100", global_batch=2048, seq_len=4096)
    for marker, report, mech in (
        ("paper-352b / megascale-moe on 240 GPUs", first, mechanisms),
        ("qwen3-235b-a22b / megatron-args on 256 GPUs", second, mechanisms_of(run.model, run.layout, "h100")),
    ):
        shown = _after(README, marker, r"expected\s+(.+)").group(1)
        assert shown == band_for(mech, known).describe(report.step_time_s), marker
    for page in ("getting-started.md", "outputs.md"):
        shown = _after(_page(page), "paper-352b / megascale-moe on 240 GPUs", r"expected\s+(.+)").group(1)
        assert shown == band_for(mechanisms, known).describe(first.step_time_s), page


def test_search_pick_for_gpt_oss_example() -> None:
    """The GPT-OSS-120B pick docs/megatron.md quotes (EP 32 at PP 1 and micro-batch 2 with selective recomputation, EP
    overlap and the flex dispatcher's HybridEP backend), simulated from its printed flags with the recipe's other
    flags."""
    common = (
        "--global-batch-size 1280 --seq-length 4096 --bf16 --swiglu "
        "--untie-embeddings-and-output-weights --moe-grouped-gemm "
        "--moe-permute-fusion --moe-router-fusion --moe-router-force-load-balancing "
        "--moe-router-load-balancing-type none --use-distributed-optimizer --use-precision-aware-optimizer "
        "--overlap-grad-reduce "
        "--overlap-param-gather --grad-reduce-in-bf16 --cross-entropy-loss-fusion --cross-entropy-fusion-impl te"
    )
    pick = (
        "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --expert-model-parallel-size 32 "
        "--micro-batch-size 2 "
        "--expert-tensor-parallel-size 1 --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep "
        "--overlap-moe-expert-parallel-comm --delay-wgrad-compute "
        "--recompute-granularity selective --recompute-modules layernorm moe_act"
    )
    shown = _after(_page("megatron.md"), "GPT-OSS-120B job (64 H100", r"HybridEP backend, ([\d.]+) s")
    run = parse_megatron_args(f"{common} {pick}").resolve(load_model("examples/models/gpt-oss-120b.json"), None, 64)
    report = simulate(run.model, run.layout, 64, cluster="h100", global_batch=1280, seq_len=4096)
    assert f"{report.step_time_s:.2f}" == shown.group(1)


def test_where_the_time_goes_example() -> None:
    """docs/getting-started.md: `moesim run --model mixtral-8x22b --cluster h100 --gpus 128 --layout best.yaml` (the
    search's fastest: PP 4, micro-batch 2)."""
    text = _page("getting-started.md")
    shown = _after(text, "$ moesim run --model mixtral-8x22b --cluster h100", r"step time\s+([\d.]+) s")
    report = simulate("mixtral-8x22b", load_layout("megascale-moe").with_(pp=4), 128, cluster="h100", micro_batch=2)
    assert f"{report.step_time_s:.3f}" == shown.group(1)
    searched = _after(text, "$ moesim search --model mixtral-8x22b", FIRST_ROW_STEP)
    assert searched.group(1) == f"{report.step_time_s:.3f}"


def test_cross_node_ep_example() -> None:
    """docs/getting-started.md: `moesim compare --gpus 1440 --cluster examples/clusters/h800-100g.yaml --layouts
    ep-in-node, ep-cross-node`."""
    text = _page("getting-started.md")
    cluster = "examples/clusters/h800-100g.yaml"
    for name in ("ep-in-node", "ep-cross-node"):
        shown = _after(text, "$ moesim compare --gpus 1440", rf"examples/layouts/{name}\.yaml\s+1440\s+([\d.]+)")
        report = simulate("paper-352b", load_layout(f"examples/layouts/{name}.yaml"), 1440, cluster=cluster)
        assert f"{report.step_time_s:.3f}" == shown.group(1)


def _validation_errors() -> tuple[pd.Series, pd.Series]:
    """The errors of results/validation.csv's counted cases by name: those not from the fitted paper, the paper's own."""
    frame = pd.read_csv(ROOT / "results" / "validation.csv").set_index("case")
    frame = frame[frame.in_mape.astype(bool)]
    paper = {case.name for case in corpus.load_cases() if case.from_fitted_paper}
    from_paper = frame.index.isin(paper)
    return frame.error[~from_paper], frame.error[from_paper]


@pytest.mark.parametrize("page", ["README.md", "accuracy.md"])
def test_accuracy_statement(page: str) -> None:
    """The accuracy paragraph's external MAPE, its range and count, and the paper rows' MAPE and count, are those of
    results/validation.csv, in whole percent (the lead regenerates results/; a page left behind fails here)."""
    text = " ".join(_page(page).split())
    external, paper = _validation_errors()
    statement = re.search(
        r"On the (\d+) published training runs moesim was not fitted to .*? is (\d+)%, each run between "
        r"(-?\d+)% and \+(\d+)% .*? On the MegaScale-MoE paper's own (\d+) runs, .*? it is (\d+)%",
        text,
    )
    assert statement, f"{page}: the accuracy statement"
    count, mape, low, high, paper_count, paper_mape = statement.groups()
    assert (int(count), mape) == (len(external), f"{external.abs().mean() * 100:.0f}")
    assert (low, high) == (f"{external.min() * 100:.0f}", f"{external.max() * 100:.0f}")
    assert (int(paper_count), paper_mape) == (len(paper), f"{paper.abs().mean() * 100:.0f}")
    cases = corpus.load_cases()
    dense = [case.name for case in cases if case.model.num_experts == 0 and case.name in external.index]
    sentence = re.search(r"The (\d+) dense runs lie between (-?\d+)% and \+(\d+)% \(mean (\d+\.\d)%", text)
    assert sentence, f"{page}: the dense runs' range"
    errors = external[dense]
    assert sentence.groups() == (
        str(len(dense)),
        f"{errors.min() * 100:.0f}",
        f"{errors.max() * 100:.0f}",
        f"{errors.abs().mean() * 100:.1f}",
    )
