"""The wide search space and its pruning before simulation (experiments/search/space.py)."""

from __future__ import annotations

import re

import pytest

from experiments.cli.main import main
from experiments.search.compare import parse_value
from experiments.search.search import BASE_LAYOUT, candidates, layout_fields, layout_yaml, run_command, search
from experiments.search.space import RECOMPUTE_TIERS, Job, SearchSpace, layouts
from experiments.search.space_size import space_size
from simulator.memory.per_gpu import peak_memory
from topologies.cluster import cluster_preset
from topologies.errors import ConfigError
from workloads.inputs.yaml_files import load_layout, load_model
from workloads.specs.layouts import layout_preset
from workloads.specs.models import model_preset

ARGS = {"global_batch": 16, "seq_len": 2048}
MODEL = model_preset("mixtral-8x7b")
BASE = layout_preset(BASE_LAYOUT)


def job(gpus: int = 16) -> Job:
    return Job(gpus, 8, 16, 2048, cluster_preset("h800", gpus).gpu.hbm_bytes)


def fits(fields: dict, gpus: int = 16) -> bool | None:
    return job(gpus).fits(MODEL, BASE.with_(**fields))


pytestmark = pytest.mark.xdist_group("search_space")  # one worker: the wide space is enumerated once


@pytest.fixture(scope="module")
def wide():
    """The wide space of mixtral-8x7b on 16 H800s at batch 16 x 2048: what search() and candidates() enumerate
    for ``"mixtral-8x7b", 16, **ARGS``."""
    return layouts(MODEL, BASE, job(), SearchSpace.wide())


def test_wide_space_reaches_what_the_narrow_one_cannot(wide) -> None:
    """Cross-node EP, CP, the schedules, EP overlap and every recompute tier appear among the kept points.
    DualPipe does not: its two copies of the 47 B weights exceed 16 x 80 GB in every valid layout."""
    points, pruned = wide
    assert len(points) > len(candidates("mixtral-8x7b", 16, **ARGS, space=SearchSpace.narrow())[0])
    assert {p["schedule"] for p in points} == {"1f1b", "interleaved", "zb1p", "dualpipev"}
    dualpipe, dualpipe_pruned = layouts(MODEL, BASE, job(), SearchSpace.wide().fix(["schedule=dualpipe"]))
    assert dualpipe == [] and dualpipe_pruned.memory > 0
    assert any(p["ep_overlap"] for p in points) and {p["cp"] for p in points} == {1, 2}
    assert any(p["ep"] > p["intra_size"] for p in points)  # EP wider than the attention group (8 experts: <= 8)
    assert {p["etp"] for p in points} == {1, 2}
    assert {p["ep_max_nodes"] for p in points} == {0}  # EP spans at most one node here: no node limit to try
    assert {p["recompute"] for p in points} == {"none", "sar", "selective", "full"}
    assert pruned.divide and pruned.invalid and pruned.memory and pruned.dominated


def test_dualpipev_issues_its_pairs_in_fig4_order_where_the_ffn_is_ep(wide) -> None:
    """One DualPipeV point per layout: ep_overlap (DeepSeek-V3's Fig. 4 order) with an EP FFN, two lanes with a
    TP one; never delayed wgrad (its W passes are its own). A TP FFN with ep_overlap is a layout rule broken."""
    points, _ = wide
    dualpipev = [p for p in points if p["schedule"] == "dualpipev"]
    assert {p["ffn"] for p in dualpipev} == {"ep", "tp"}
    assert all(p["ep_overlap"] == (p["ffn"] == "ep") and not p["delay_wgrad"] for p in dualpipev)
    with pytest.raises(ConfigError, match="ep_overlap"):
        BASE.with_(ffn="tp", ep_overlap=True)


def test_every_kept_point_fits_and_recomputes_least(wide) -> None:
    """A kept point is valid and fits; no choice of an earlier recompute tier fits (it would be faster)."""
    points, _ = wide
    for point in points[::7]:  # every 7th: each check builds the workload
        assert fits(point) is True
        tier = next(i for i, t in enumerate(RECOMPUTE_TIERS) if any(point["recompute"] == c["recompute"] for c in t))
        layout = {k: v for k, v in point.items() if not k.startswith("recompute")}
        for earlier in RECOMPUTE_TIERS[:tier]:
            assert not any(fits({**layout, **choice}) for choice in earlier)


def test_fix_pins_dimensions_and_names_bad_ones() -> None:
    space = SearchSpace.wide().fix(["schedule=zb1p", "micro_batch=1", "recompute=sar"])
    points, _ = layouts(MODEL, BASE, job(), space)
    assert points and all((p["schedule"], p["micro_batch"], p["recompute"]) == ("zb1p", 1, "sar") for p in points)
    with pytest.raises(ConfigError, match="fix: expected DIMENSION=VALUE"):
        SearchSpace.wide().fix(["gpus=8"])


def test_too_many_points_is_refused_before_any_simulation(wide) -> None:
    """The space's size by formula (experiments/search/space_size.py): at least the layouts that fit."""
    count = space_size(MODEL, job(), SearchSpace.wide())
    assert count >= len({tuple((k, v) for k, v in p.items() if not k.startswith("recompute")) for p in wide[0]})
    with pytest.raises(ConfigError, match=rf"max-points: the space holds {count:,} layouts .* over --max-points 5"):
        search("mixtral-8x7b", 16, max_points=5, progress=lambda _: None, **ARGS)


def test_the_refusal_says_what_the_usual_pins_leave() -> None:
    """--max-points' refusal counts, by formula, what one sequence per micro-batch and one CP rank leave, alone and
    together, where the space searches both."""
    space = SearchSpace.wide()
    alone = [space_size(MODEL, job(), space.fix([pin])) for pin in ("micro_batch=1", "cp=1")]
    both = space_size(MODEL, job(), space.fix(["micro_batch=1", "cp=1"]))
    assert both < min(alone) and max(alone) < space_size(MODEL, job(), space)
    message = (
        f"pin dimensions with --fix (--fix micro_batch=1 leaves {alone[0]:,} layouts, --fix cp=1 leaves "
        f"{alone[1]:,} layouts, both {both:,})"
    )
    with pytest.raises(ConfigError, match=re.escape(message)):
        search("mixtral-8x7b", 16, max_points=5, progress=lambda _: None, **ARGS)


def test_cli_refusal_is_one_line(capsys) -> None:
    argv = ["search", "--model", "mixtral-8x7b", "--gpus", "16", "--global-batch", "16", "--seq-len", "2048"]
    assert main([*argv, "--max-points", "5"]) == 2
    assert main([*argv, "--fix", "bogus"]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("moesim: error")]
    assert len(errors) == 2 and "--max-points 5" in errors[0] and "DIMENSION=VALUE" in errors[1]


def test_a_selective_row_runs_as_a_command_and_as_a_layout_file(tmp_path) -> None:
    """A CSV row holds text; its list field goes back as --set a,b and as a YAML list."""
    row = {
        "model": "mixtral-8x7b",
        "cluster": "h800",
        "gpus": "16",
        "global_batch": "16",
        "seq_len": "2048",
        "tokens_per_s": "1.0",
        "peak_memory_gib": "1.0",
        "attention": "sp",
        "ffn": "ep",
        "intra_size": "8",
        "pp": "4",
        "micro_batch": "1",
        "schedule": "1f1b",
        "virtual_stages": "1",
        "ep_overlap": "False",
        "recompute": "selective",
        "recompute_modules": "('core_attn', 'moe_act')",
        "cp": "",
    }
    assert layout_fields(row) == {
        "pp": 4,
        "micro_batch": 1,
        "recompute": "selective",
        "recompute_modules": ("core_attn", "moe_act"),
    }
    assert "--set recompute_modules=core_attn,moe_act" in run_command(row)
    path = tmp_path / "l.yaml"
    path.write_text(layout_yaml(row))
    assert load_layout(str(path)).recompute_modules == ("core_attn", "moe_act")


def test_set_takes_a_list_field() -> None:
    assert parse_value("recompute_modules", "core_attn,moe_act") == ("core_attn", "moe_act")
    assert parse_value("block_layers", "[3, 4]") == (3, 4)
    with pytest.raises(ConfigError, match="block_layers: must be an integer"):
        parse_value("block_layers", "3,x")


def test_deepseek_v3_is_searchable() -> None:
    """61 layers divide no pipeline of 1,024 GPUs: the narrow space finds nothing, the wide one (uneven
    pipelines, cross-node EP) finds layouts, and each one fits."""
    fixed = SearchSpace.wide().fix(["micro_batch=1", "cp=1", "schedule=dualpipev"])
    assert candidates("deepseek-v3", 1024, space=SearchSpace.narrow())[0] == []
    points, _ = candidates("deepseek-v3", 1024, space=fixed)
    assert points and any(p["ep"] >= 64 for p in points)
    # Node-limited routing where EP spans more than 4 nodes (EP 64 x ETP 1: 8 nodes), never where it spans fewer
    assert any(p["ep_max_nodes"] == 4 for p in points)
    assert all(p["ep"] * p["etp"] > 4 * 8 for p in points if p["ep_max_nodes"])
    assert all(p.get("uneven_pp") for p in points if 61 % p["pp"])
    hbm = cluster_preset("h800", 1024).gpu.hbm_bytes
    point = points[0]
    fields = {
        k: v for k, v in point.items() if k not in ("model", "layout", "gpus", "global_batch", "seq_len", "cluster")
    }
    workload = Job(1024, 8, point["global_batch"], point["seq_len"], hbm).workload(
        model_preset("deepseek-v3"), BASE.with_(**fields)
    )
    assert peak_memory(workload).total_bytes <= hbm


def test_a_dense_model_searches_only_its_attention_split() -> None:
    """Llama-3.1-8B has no MoE layer: its FFN follows the attention split, so EP, ETP and EP overlap would only
    repeat points (the search printed each layout up to three times): one FFN mode, no expert dimension."""
    dense = load_model("examples/models/llama-3.1-8b.json")
    assert dense.moe_layers == 0
    points, _ = layouts(dense, BASE, job(), SearchSpace.wide())
    assert points and {p["ffn"] for p in points} == {"tp"} and {p["attention"] for p in points} == {"sp", "tp"}
    assert {(p["ep"], p["etp"], p["ep_overlap"]) for p in points} == {(0, 1, False)}
    keys = [tuple(sorted(p.items())) for p in points]
    assert len(keys) == len(set(keys))
