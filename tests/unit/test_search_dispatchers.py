"""The token dispatcher as a searched dimension of Megatron-Core's space (issue 41 item 1): which dispatchers a
point tries (experiments/search/dispatch_choices.py), which the job allows (experiments/search/megatron.py), and
the winner's Megatron-LM line with the dispatcher's flags, read back to the same step."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from experiments.cli.main import main
from experiments.search.answer import DISPATCHER_FLAGS, default_job, job_flags
from experiments.search.dispatch_choices import deepep_takes, dispatcher_choices, hybridep_takes
from experiments.search.megatron import megatron_flags, write_base
from experiments.search.search import job_of
from experiments.search.space import SearchSpace, _grid
from simulator.report.simulate import simulate
from topologies.errors import ConfigError
from workloads.inputs.megatron import parse_megatron_args
from workloads.inputs.yaml_files import load_layout, load_model

QWEN = "examples/models/qwen3-30b-a3b.json"
JOB = "--bf16 --swiglu --untie-embeddings-and-output-weights --use-distributed-optimizer --seq-length 4096"
ALL = ("alltoall", "allgather", "flex-deepep", "flex-hybridep")


def test_deepep_takes_its_published_rank_counts() -> None:
    """DeepEP's normal kernels: 2, 4 or 8 ranks in a node; 8 ranks a node on 2, 4, 8, 16, 18 or 20 nodes."""
    assert [g for g in (1, 2, 4, 6, 8) if deepep_takes(g, 8)] == [2, 4, 8]
    assert [g for g in (16, 24, 32, 64, 128, 144, 160, 256) if deepep_takes(g, 8)] == [16, 32, 64, 128, 144, 160]
    assert not deepep_takes(8, 4) and not deepep_takes(16, 4)  # 8 NVLink peers a node, or one node


def test_hybridep_takes_whole_nvlink_domains() -> None:
    assert hybridep_takes(256, 8, 1, 7168) and hybridep_takes(4, 8, 2, 4096)
    assert not hybridep_takes(2, 8, 1, 4096)  # 1 expert a rank x 2 ranks: not a multiple of 4
    assert not hybridep_takes(16, 8, 8, 4100)  # hidden size not a multiple of 16
    assert not hybridep_takes(144, 72 * 2, 1, 4096)  # more than 72 ranks in one NVLink domain


def test_choices_of_a_point() -> None:
    """One EP rank keeps the job's own; allgather never with EP overlap; DeepEP not over 32 nodes."""
    kw = {"etp": 1, "num_experts": 256, "hidden": 7168, "gpus_per_node": 8}
    assert dispatcher_choices(ALL, ep_degree=1, ep_overlap=False, **kw) == ("alltoall",)
    assert dispatcher_choices(ALL, ep_degree=16, ep_overlap=False, **kw) == ALL
    assert dispatcher_choices(ALL, ep_degree=16, ep_overlap=True, **kw) == ("alltoall", "flex-deepep", "flex-hybridep")
    assert dispatcher_choices(ALL, ep_degree=256, ep_overlap=False, **kw) == ("alltoall", "allgather", "flex-hybridep")
    assert dispatcher_choices(ALL, ep_degree=8, ep_overlap=False, **{**kw, "etp": 2}) == ALL  # 16 ranks: 2 nodes


def test_the_grid_tries_each_dispatcher_where_ep_spans_ranks() -> None:
    """DeepSeek-V3 on 512 H800s: an EP FFN over more than one rank tries every dispatcher its group allows, a TP
    FFN or one EP rank only the job's own; MegaScale-MoE's space keeps the base layout's."""
    model, job = load_model("deepseek-v3"), job_of("h800", 512, 720, 8192)
    by_layout: dict[tuple, set[str]] = {}
    for point in _grid(model, job, SearchSpace.megatron()):
        key = tuple((k, v) for k, v in point.items() if k != "token_dispatcher")
        by_layout.setdefault(key, set()).add(str(point["token_dispatcher"]))
    for key, dispatchers in by_layout.items():
        fields = dict(key)
        ep = int(fields["ep"]) or int(fields["intra_size"]) if fields["ffn"] == "ep" else 1
        if ep == 1:
            assert dispatchers == {"alltoall"}
        elif fields["ep_overlap"]:
            assert "allgather" not in dispatchers and "alltoall" in dispatchers
        else:
            assert dispatchers == set(ALL) - ({"flex-deepep"} if ep * int(fields["etp"]) > 160 else set())
    assert all("token_dispatcher" not in p for p in _grid(model, job, SearchSpace.wide().fix(["pp=8"])))


def test_fix_pins_the_dispatcher() -> None:
    model, job = load_model("deepseek-v3"), job_of("h800", 512, 720, 8192)
    space = SearchSpace.megatron().fix(["token_dispatcher=flex-hybridep", "pp=16"])
    assert {p["token_dispatcher"] for p in _grid(model, job, space) if space.keeps(p)} == {"flex-hybridep"}
    with pytest.raises(ConfigError, match="token_dispatcher takes allgather, alltoall, flex-deepep, flex-hybridep"):
        SearchSpace.megatron().fix(["token_dispatcher=deepep"])
    with pytest.raises(ConfigError, match="this space does not search token_dispatcher"):
        SearchSpace.wide().fix(["token_dispatcher=alltoall"])


@pytest.mark.parametrize(
    ("flags", "dispatchers"),
    [
        ("", ("allgather", "alltoall", "flex-deepep", "flex-hybridep")),  # Megatron's default: allgather
        ("--moe-token-dispatcher-type flex --moe-enable-deepep", ("flex-deepep", "alltoall", "allgather", "flex-hybridep")),
        # --moe-shared-expert-overlap: alltoall or flex only
        ("--moe-token-dispatcher-type alltoall --moe-shared-expert-overlap", ("alltoall", "flex-deepep", "flex-hybridep")),
        # drop-and-pad skips the host sync under alltoall and HybridEP; deepep refuses padding
        ("--moe-token-dispatcher-type alltoall --moe-expert-capacity-factor 1 --moe-pad-expert-input-to-capacity",
         ("alltoall", "flex-hybridep")),
        # a static per-rank budget needs the hybridep backend
        (("--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep --moe-expert-rank-capacity-factor 2 "
          "--moe-grouped-gemm --moe-use-grouped-tensor"),
         ("flex-hybridep",)),
    ],
)  # fmt: skip
def test_the_job_says_which_dispatchers_it_allows(tmp_path: Path, flags: str, dispatchers: tuple[str, ...]) -> None:
    base = write_base(f"{JOB} --expert-model-parallel-size 8 {flags}", QWEN, 16, tmp_path, 64, None)
    assert base.dispatchers == dispatchers
    assert write_base(JOB, "examples/models/llama-3.1-8b.json", 8, tmp_path, 16, None).dispatchers == ()


def test_megatron_refuses_what_the_flex_backends_cannot_run() -> None:
    """Padding to capacity with DeepEP is refused; EP overlap with the allgather dispatcher is dropped (listed)."""
    with pytest.raises(ConfigError, match="deepep backend"):
        parse_megatron_args(
            f"{JOB} --expert-model-parallel-size 8 --moe-token-dispatcher-type flex --moe-expert-capacity-factor 1 "
            "--moe-pad-expert-input-to-capacity"
        ).resolve(load_model(QWEN), None, 16)
    run = parse_megatron_args(
        f"{JOB} --expert-model-parallel-size 8 --moe-token-dispatcher-type allgather --overlap-moe-expert-parallel-comm"
    ).resolve(load_model(QWEN), None, 16)
    assert not run.layout.ep_overlap and "--overlap-moe-expert-parallel-comm" in {arg.flag for arg in run.ignored}


@pytest.mark.parametrize("dispatcher", ["flex-deepep", "flex-hybridep", "allgather"])
def test_the_printed_flags_select_the_rows_dispatcher(tmp_path: Path, dispatcher: str) -> None:
    """megatron_flags names the row's dispatcher; read back, the job is the row's layout."""
    base = write_base(default_job(load_model(QWEN)), QWEN, 16, tmp_path, 64, 4096, (1,))
    layout = load_layout(base.by_tp[1, "ep"][1]).with_(ep=16, token_dispatcher=dispatcher)
    row = {"model": base.by_tp[1, "ep"][0], "gpus": "16", "cluster": "h800", "global_batch": "64", "seq_len": "4096"}
    flags = megatron_flags(layout, row)
    assert flags.count("--moe-token-dispatcher-type") == 1
    job = job_flags(default_job(load_model(QWEN)), DISPATCHER_FLAGS)
    run = parse_megatron_args(f"{job} {flags}").resolve(load_model(QWEN), None, 16)
    assert run.layout.token_dispatcher == dispatcher and run.layout.ep_degree == 16


def test_a_flex_winner_runs_back_to_its_step(capsys: pytest.CaptureFixture[str]) -> None:
    """Round trip with the dispatcher pinned to HybridEP: the printed Megatron-LM line, read back, simulates the
    step time ranked first; the line sets the dispatcher once, as the flex type with its backend."""
    argv = ["search", "--model", QWEN, "--cluster", "h800", "--gpus", "16", "--global-batch", "32", "--seq-len", "4096"]
    pins = ["--fix", "token_dispatcher=flex-hybridep", "--fix", "pp=2", "--fix", "cp=1", "--fix", "micro_batch=1"]
    pins += ["--fix", "ep=8"]  # the winner's EP, a third of the points
    assert main([*argv, *pins, "--top", "2", "--quiet"]) == 0
    out = capsys.readouterr().out
    row = out.splitlines()[3]
    assert "flex-hybridep" in row.split()
    step_s = float(re.search(r"\s(\d+\.\d{3})\s+[=]?\s*[\d,]+\s+[\d.]+%", row).group(1))
    line = re.search(r"fastest, as Megatron-LM arguments: (.*)", out).group(1)
    assert line.count("--moe-token-dispatcher-type") == 1
    assert "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep" in line
    run = parse_megatron_args(line).resolve(load_model(QWEN), None, 16)
    report = simulate(run.model, run.layout, 16, cluster="h800", global_batch=32, seq_len=4096)
    assert f"{report.step_time_s:.3f}" == f"{step_s:.3f}"


def test_progress_counts_out_what_cannot_rank() -> None:
    """The progress lines' total leaves out the points whose bound already exceeds the best row (most dispatcher
    variants end there): a point run already is not counted out twice."""
    from experiments.search.bound import BoundPruner
    from experiments.search.sweep_table import point_id

    points = [{"gpus": 1, "pp": pp} for pp in (1, 2, 3)]
    pruner = BoundPruner(points, [1.0, 2.0, 5.0], top=1)
    assert pruner.cannot_rank(set()) == 0  # no row yet: every point may rank
    pruner.seen({"step_time_s": 3.0})
    assert pruner.cannot_rank(set()) == 1
    assert pruner.cannot_rank({point_id(points[2])}) == 0
