"""Steps with fewer garbage collections (simulator/engine/gc_budget.py): the same reports, and the collector as it was after."""

import gc
from dataclasses import replace

import pytest

from simulator.engine import gc_budget
from simulator.engine.gc_budget import STEP_THRESHOLDS, fewer_collections
from simulator.report.simulate import simulate
from workloads.specs.layouts import layout_preset


@pytest.fixture
def collector():
    """The collector's thresholds and freeze as a test found them, restored after it."""
    before = gc.get_threshold()
    yield before
    gc.set_threshold(*before)
    gc.unfreeze()


def test_thresholds_and_freeze_during_and_after(collector):
    gc.set_threshold(700, 10, 10)
    with fewer_collections():
        assert gc.get_threshold() == (10_000, 10, 10) == STEP_THRESHOLDS
        assert gc.get_freeze_count() > 0  # what was alive at the start: left out of the body's collections
        with fewer_collections():  # nested: the outer one's (frozen objects that die leave the count: no equality)
            assert gc.get_threshold() == (10_000, 10, 10)
        assert gc.get_threshold() == (10_000, 10, 10) and gc.get_freeze_count() > 0  # the inner one undid nothing
    assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == 0


def test_restored_after_an_error(collector):
    gc.set_threshold(700, 10, 10)
    with pytest.raises(ValueError), fewer_collections():
        raise ValueError("a step that fails")
    assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == 0


def test_a_callers_settings_are_left_alone(collector):
    gc.set_threshold(0)  # automatic collection off: stays off
    with fewer_collections():
        assert gc.get_threshold()[0] == 0 and gc.get_freeze_count() == 0
    gc.set_threshold(50_000, 20, 10)  # none lower than the step's: kept as they are, nothing frozen
    with fewer_collections():
        assert gc.get_threshold() == (50_000, 20, 10) and gc.get_freeze_count() == 0
    gc.set_threshold(700, 10, 10)
    gc.freeze()  # a caller's freeze (a server before it forks) is not undone at the end
    with fewer_collections():
        assert gc.get_threshold() == (10_000, 10, 10)
    assert gc.get_freeze_count() > 0


@pytest.mark.parametrize(
    "model, layout, gpus, batch, memoize",
    [
        ("paper-352b", "megascale-moe", 240, 720, True),  # steady shortcut
        ("deepseek-v3", layout_preset("deepseek-v3").with_(schedule="dualpipev"), 2048, 4096, True),  # NIC replay
        ("paper-352b", "megascale-moe", 240, 60, False),  # every task at op level
    ],
)
def test_reports_equal_with_cpythons_collections(monkeypatch, model, layout, gpus, batch, memoize):
    kwargs = {"global_batch": batch, "seq_len": 4096, "memoize": memoize, "allow_oom": True}
    fewer = simulate(model, layout, gpus, **kwargs)
    monkeypatch.setattr(gc_budget, "ENABLED", False)
    default = simulate(model, layout, gpus, **kwargs)
    assert replace(fewer, sim_wall_s=0.0) == replace(default, sim_wall_s=0.0)


def test_a_job_has_fewer_full_collections_and_its_steps_their_own(collector):
    """Through a job (a search, a sweep, validate, reproduce) a full collection waits for 100 generation-1 passes; a
    step inside it freezes and raises generation 0 as ever; both restore what they found."""
    gc.set_threshold(700, 10, 10)
    with gc_budget.fewer_full_collections():
        assert gc.get_threshold() == (700, 10, 100) == gc_budget.JOB_THRESHOLDS
        with fewer_collections():
            assert gc.get_threshold() == (10_000, 10, 100) and gc.get_freeze_count() > 0
        assert gc.get_threshold() == (700, 10, 100) and gc.get_freeze_count() == 0
    assert gc.get_threshold() == (700, 10, 10)
    gc.set_threshold(0)  # automatic collection off: stays off
    with gc_budget.fewer_full_collections():
        assert gc.get_threshold()[0] == 0


@pytest.mark.parametrize("argv, job", [(["presets"], False), (["validate", "--case", "x"], True)])
def test_the_command_line_runs_jobs_with_fewer_full_collections(collector, monkeypatch, argv, job):
    from experiments.cli import main as cli

    seen = []
    monkeypatch.setattr(cli, "_dispatch", lambda args: seen.append(gc.get_threshold()))
    gc.set_threshold(700, 10, 10)
    assert cli.main(argv) == 0
    assert seen == [(700, 10, 100) if job else (700, 10, 10)] and gc.get_threshold() == (700, 10, 10)
