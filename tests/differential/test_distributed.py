"""The dask path against the local one (experiments/common/parallel.py ``Workers``): a sweep's table, a search's
candidates and its ranked rows are the same, row for row and in order, in this process, in two local processes
and on a dask LocalCluster of two worker processes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from experiments.common.parallel import Workers
from experiments.search.search import candidates, search
from experiments.search.space import SearchSpace
from experiments.search.sweep import read_rows, run_sweep
from workloads.inputs.yaml_files import layout_to_yaml, load_layout, load_model, model_to_yaml

distributed = pytest.importorskip("dask.distributed")
pytestmark = pytest.mark.xdist_group("dask_cluster")  # one pytest worker starts the cluster for every test here

MODEL, GPUS, JOB = "mixtral-8x7b", 16, {"global_batch": 16, "seq_len": 2048}
# 17 layouts of PP 2 (EP none, 4 or 8; SP or TP attention; 1 to 8 GPUs wide): tests/differential/test_search_fast.py
SPACE = SearchSpace.wide().fix(["micro_batch=1", "cp=1", "schedule=1f1b", "pp=2"])
WALL = "sim_wall_s"  # how long a row took to simulate: the one column that may differ


@pytest.fixture(scope="module")
def client():
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        distributed.Client(cluster) as connected,
    ):
        yield connected


def _table(path: Path) -> list[dict[str, str]]:
    return [{k: v for k, v in row.items() if k != WALL} for row in read_rows(path)]


def test_a_sweep_table_is_the_same_on_every_backend(tmp_path: Path, client) -> None:
    """Every point's row, an error row among them, in the points' order (not as they finish), on each backend;
    points whose model and layout are YAML files (loaded once, sent to the workers once) among them."""
    points, _ = candidates(MODEL, GPUS, space=SPACE, **JOB)
    model_file, layout_file = tmp_path / "model.yaml", tmp_path / "layout.yaml"
    model_file.write_text(model_to_yaml(load_model(MODEL)))
    layout_file.write_text(layout_to_yaml(load_layout(points[0]["layout"])))
    from_files = [{**p, "model": str(model_file), "layout": str(layout_file)} for p in points[:4]]
    points = [*points, {**points[0], "pp": 3}, *from_files]  # 3 stages of 32 layers on 16 GPUs: an error row
    tables = {}
    for name, options in {"here": {}, "two processes": {"jobs": 2}, "dask": {"scheduler": client}}.items():
        run_sweep(points, tmp_path / f"{name}.csv", progress=lambda _: None, **options)
        tables[name] = _table(tmp_path / f"{name}.csv")
    assert len(tables["here"]) == len(points) and tables["here"][-5]["error"]
    assert not any(row["error"] for row in tables["here"][-4:])
    assert [row["point_id"] for row in tables["here"]] == [row["point_id"] for row in tables["dask"]]
    assert tables["two processes"] == tables["here"]
    assert tables["dask"] == tables["here"]


def test_candidates_on_dask_workers_are_the_ones_found_here(client) -> None:
    """The memory checks, batched on the workers, keep the same points in the same order and count the same pruning."""
    here = candidates(MODEL, GPUS, **JOB)
    with Workers(scheduler=client) as workers:
        remote = candidates(MODEL, GPUS, workers=workers, **JOB)
    assert len(here[0]) > 100 and here[1].memory + here[1].invalid + here[1].dominated > 0
    assert remote == here


def test_a_search_on_dask_ranks_the_rows_found_here(client) -> None:
    """The whole search (candidates, bounds, pruned simulations) on the cluster gives this process's rows."""
    options = {"space": SPACE, "top": 5, "progress": lambda _: None, **JOB}
    here = search(MODEL, GPUS, **options)
    remote = search(MODEL, GPUS, scheduler=client, **options)
    assert len(here) == 5
    assert [{k: v for k, v in row.items() if k != WALL} for row in remote] == [
        {k: v for k, v in row.items() if k != WALL} for row in here
    ]


def _slow(item: int, seconds: float) -> int:
    time.sleep(seconds)
    return item


def _ours_left(dask_scheduler) -> int:
    """Tasks of ``_slow`` the scheduler still holds (run on the scheduler)."""
    return sum(1 for key in dask_scheduler.tasks if "_slow" in str(key))


def test_an_interrupted_client_cancels_its_futures(client) -> None:
    """Ctrl-C in a run on a dask cluster (issue 42: "a Dask client cancels its futures"): leaving the ``Workers`` block
    cancels every task it sent that has not run, on the cluster as well as here (ClientExecutor.shutdown(wait=False)
    cancels the dask futures), so the cluster does not go on computing for a client that is gone, while the caller
    still holds the futures. 20 tasks of 0.3 s on 2 single-thread workers: about 2 have run at the Ctrl-C."""
    with pytest.raises(KeyboardInterrupt), Workers(scheduler=client) as workers:
        futures = [workers.submit(_slow, item, 0.3) for item in range(20)]
        futures[0].result()
        raise KeyboardInterrupt
    deadline = time.monotonic() + 10
    while client.run_on_scheduler(_ours_left) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert client.run_on_scheduler(_ours_left) == 0
    assert sum(future.cancelled() for future in futures) >= 15
