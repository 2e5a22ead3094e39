"""Work shared and spread over processes: shared simulations (experiments/common/shared_sims.py), ``in_order``
(experiments/common/parallel.py), ``validate --jobs`` and the units of ``reproduce all`` (experiments/paper/reproduce.py)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from experiments.common import shared_sims, unit_costs
from experiments.common.parallel import in_order
from experiments.paper import reproduce, weak_scaling
from experiments.validation import corpus as validation_cases
from experiments.validation import tables, validate
from simulator.report import simulate as report
from tests.unit.test_validate import tiny_case, write
from topologies.cluster import cluster_preset
from topologies.errors import ConfigError
from workloads.specs.layouts import layout_preset
from workloads.specs.models import model_preset

SMALL = {"global_batch": 30}  # the 352B model on 240 H800s, PP 15, 1 micro-batch per pipeline stage pair


@pytest.fixture
def simulations(monkeypatch) -> list[tuple]:
    """The arguments of every simulator.report.simulate.simulate call made through experiments.common.shared_sims."""
    calls, real = [], report.simulate
    monkeypatch.setattr(report, "simulate", lambda *args, **kwargs: calls.append(args) or real(*args, **kwargs))
    return calls


def test_a_point_named_or_given_as_specs_is_simulated_once_inside_sharing(simulations) -> None:
    specs = (model_preset("paper-352b"), layout_preset("megascale-moe"))
    with shared_sims.sharing():
        by_name = shared_sims.simulate("paper-352b", "megascale-moe", 240, **SMALL)
        by_spec = shared_sims.simulate(*specs, cluster=cluster_preset("h800", 240), **SMALL)
        with shared_sims.sharing():  # a nested block shares the outer one's
            nested = shared_sims.simulate(*specs, 240, cluster="h800", **SMALL)
        other = shared_sims.simulate("paper-352b", "megascale-moe", 240, global_batch=60)
    assert by_spec is by_name and nested is by_name and other.micro_batches == 2 * by_name.micro_batches
    assert len(simulations) == 2
    again = shared_sims.simulate("paper-352b", "megascale-moe", 240, **SMALL)  # outside: simulated again
    assert again is not by_name and again.step_time_s == by_name.step_time_s and len(simulations) == 3


def test_an_error_is_shared_too(simulations) -> None:
    with shared_sims.sharing():
        for _ in range(2):
            with pytest.raises(ConfigError, match="^memory: "):
                shared_sims.simulate("paper-352b", "megascale-moe", 240, seq_len=49152, global_batch=240)
    assert len(simulations) == 1


def test_in_order_gives_the_items_order_in_processes() -> None:
    items = [30, 3, 20, 1, 10]
    assert list(in_order(math.factorial, items, 2)) == list(map(math.factorial, items))
    assert list(in_order(math.factorial, [], 2)) == []


def test_validate_jobs_do_not_change_the_results(tmp_path: Path) -> None:
    """Two processes give the one-process results (JSON and table), in the cases' order."""
    folder = tmp_path / "cases"
    folder.mkdir()
    write(folder, tiny_case(tmp_path, gpus=32), "b.yaml")
    write(folder, tiny_case(tmp_path), "a.yaml")
    write(
        folder, tiny_case(tmp_path, model="mixtral-8x7b", layout={"base": "megascale-moe", "pp": 1}, gpus=8), "c.yaml"
    )
    cases = validation_cases.load_cases(folder)
    one, two = (validate.run_cases(cases, say=lambda _: None, jobs=jobs) for jobs in (1, 2))
    assert [r.case.name for r in two] == ["a", "b", "c"]
    assert tables.to_json(two) == tables.to_json(one) and tables.table(two) == tables.table(one)
    assert two[0].ran and not two[2].ran  # c is out of memory: a row with its message, in either run


def test_validate_jobs_take_the_costliest_case_first(tmp_path: Path, monkeypatch) -> None:
    """With 2 jobs the case UNIT_CPU_S names costliest is taken (and said) first; the results keep the cases'
    order, equal to one job's."""
    folder = tmp_path / "cases"
    folder.mkdir()
    write(folder, tiny_case(tmp_path), "a.yaml")
    write(folder, tiny_case(tmp_path, gpus=32), "b.yaml")
    cases = validation_cases.load_cases(folder)
    monkeypatch.setattr(unit_costs, "UNIT_CPU_S", {"b": 5.0})
    said: list[str] = []
    two = validate.run_cases(cases, say=said.append, jobs=2)
    one = validate.run_cases(cases, say=lambda _: None, jobs=1)
    assert [line.split("]")[0] for line in said] == ["validate: [2/2"] * 2 + ["validate: [1/2"] * 2
    assert [r.case.name for r in two] == ["a", "b"] and tables.to_json(two) == tables.to_json(one)


def test_reproduce_all_splits_into_units_that_cover_every_target_and_case_once(tmp_path: Path) -> None:
    cases = validation_cases.load_cases()
    units = reproduce.units(list(reproduce.REPRODUCTIONS), tmp_path, cases)
    targets = [name for unit in units for name in unit.targets]
    assert sorted(targets) == sorted(set(reproduce.REPRODUCTIONS) - {"validation"})
    assert sorted(c.name for unit in units for c in unit.cases) == sorted(c.name for c in cases)
    # costliest first, a unit of cases with the validation write it gates
    costs = [unit.cpu_s + (reproduce.VALIDATION_WRITE_CPU_S if unit.cases else 0.0) for unit in units]
    assert costs == sorted(costs, reverse=True)
    # the costliest: the Blackwell rows (9.4 CPU-s), then Qwen3-235B's r2509 case (5.2: it locks nowhere)
    assert units[0].targets == ("blackwell",)
    assert [c.name for c in units[1].cases] == ["bridge-qwen3-235b-a22b-h100-0256-r2509"]
    paper = next(unit for unit in units if "table3" in unit.targets)
    assert paper.targets == ("table3", "table5", "weak-scaling") and len(paper.cases) == 14  # T3's 10, T5's 4
    assert all(c.source_label.startswith("MegaScale-MoE Table") for c in paper.cases)
    # table3 and weak-scaling; Table 5 and the cases are their points again
    assert paper.cpu_s == unit_costs.UNIT_CPU_S["table3"] + unit_costs.UNIT_CPU_S["weak-scaling"]


def test_units_costliest_first_ties_in_the_given_order(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(unit_costs, "UNIT_CPU_S", {"fig7": 1.0, "fig14": 3.0, "fig16": 1.0})
    names = ["fig7", "r-ratio", "fig14", "fig16", "table5"]
    order = [unit.targets for unit in reproduce.units(names, tmp_path, [])]
    # Among equals: the paper group (here Table 5 alone), then the targets in the given order.
    assert order == [("fig14",), ("fig7",), ("fig16",), ("table5",), ("r-ratio",)]


def test_a_unit_of_cases_counts_the_validation_write(tmp_path: Path, monkeypatch) -> None:
    """A case of 0.1 CPU-s goes before a target of 0.4 (0.1 + the 0.4 s write it gates), after one of 0.6."""
    monkeypatch.setattr(unit_costs, "UNIT_CPU_S", {"fig7": 0.4, "fig14": 0.6, "c": 0.1})
    monkeypatch.setattr(reproduce, "VALIDATION_WRITE_CPU_S", 0.4)
    case = next(c for c in validation_cases.load_cases() if not c.from_fitted_paper)
    case = dataclasses.replace(case, name="c")
    order = [
        unit.targets or tuple(c.name for c in unit.cases)
        for unit in reproduce.units(["fig7", "fig14"], tmp_path, [case])
    ]
    assert order == [("fig14",), ("c",), ("fig7",)]


def test_weak_scaling_shares_table3_points_in_the_paper_unit(simulations) -> None:
    """Weak scaling's 960-GPU points (global batch 720) are Table 3's rows: the same keys, simulated once."""

    def key(layout: str, gpus: int, **settings) -> shared_sims.SimKey:
        return shared_sims.SimKey(*report.resolve("paper-352b", layout, None, gpus), shared_sims.Settings(**settings))

    table3 = {key(layout, gpus) for layout in ("megatron-lm", "megascale-moe") for gpus in (240, 480, 720, 960, 1440)}
    weak = {
        key(layout, gpus, global_batch=batch)
        for layout in ("megatron-lm", "megascale-moe")
        for gpus, batch in weak_scaling.POINTS
    }
    assert {(k.layout.name, k.cluster.num_gpus) for k in table3 & weak} == {
        ("megatron-lm", 960),
        ("megascale-moe", 960),
    }


def test_a_unit_gives_the_same_sections_in_a_process_of_its_own(tmp_path: Path) -> None:
    """Fig. 7 (cheap: collectives timed alone) in two processes at once gives the section of one process."""
    units = [reproduce.Unit(tmp_path / folder, ("fig7",)) for folder in ("a", "b")]
    serial, spread = list(map(reproduce.run_unit, units[:1])), list(in_order(reproduce.run_unit, units, 2))
    assert spread == serial * 2 and set(spread[0][0]) == {"fig7"} and spread[0][1] == []
    assert (tmp_path / "a" / "fig7.csv").read_bytes() == (tmp_path / "b" / "fig7.csv").read_bytes()
