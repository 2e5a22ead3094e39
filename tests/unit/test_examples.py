"""The files of examples/ load and run: layouts, clusters, the sweep file, the Megatron arguments, the notebook."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from experiments.cli.main import main
from experiments.search.sweep import load_sweep
from experiments.validation import corpus as validation_cases
from simulator.report.clusters import load_cluster
from topologies.errors import ConfigError
from workloads.inputs.yaml_files import load_layout

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("path", sorted((EXAMPLES / "layouts").glob("*.yaml")), ids=lambda p: p.name)
def test_layout_files_load(path: Path) -> None:
    assert load_layout(str(path)).name == path.stem


def test_deepseek_dualpipe_example_is_the_validation_case_layout() -> None:
    """The example and the corpus case deepseek-v3-report-h800-2048 run the same layout (but for its name)."""
    case = validation_cases.load_case(validation_cases.CASES_DIR / "deepseek-v3-report-h800-2048.yaml")
    example = load_layout(str(EXAMPLES / "layouts" / "deepseek-v3-dualpipe.yaml"))
    assert example.with_(name=case.layout.name) == case.layout and example.ep_overlap


def test_cluster_file_loads() -> None:
    assert load_cluster(str(EXAMPLES / "clusters" / "h800-100g.yaml"), 16).nic_bandwidth_Bps == 100e9


def test_sweep_file_loads() -> None:
    points, output = load_sweep(EXAMPLES / "sweeps" / "ep-vs-nic.yaml")
    assert len(points) == 6 and output == EXAMPLES / "sweeps" / "ep-vs-nic.csv"
    assert all(Path(p["layout"]).exists() for p in points)


def test_sweep_out_replaces_the_files_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--out: the table goes where the command line says, relative to the working folder, not beside the file."""
    monkeypatch.chdir(tmp_path)
    points, output = load_sweep(EXAMPLES / "sweeps" / "ep-vs-nic.yaml", "table.csv")
    assert len(points) == 6 and output == tmp_path / "table.csv"
    with pytest.raises(ConfigError, match=r"^out: must end in \.csv or \.parquet"):
        load_sweep(EXAMPLES / "sweeps" / "ep-vs-nic.yaml", "table.txt")


def test_megatron_arguments_file_runs(capsys) -> None:
    model = EXAMPLES / "models" / "mixtral-8x22b.json"
    megatron = EXAMPLES / "megatron" / "mixtral-8x22b-h100-128.sh"
    argv = ["run", "--model", str(model), "--cluster", "h100", "--gpus", "128", "--megatron-args", str(megatron)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "(PP 4, DP 4, 128 micro-batches per pipeline, batch 512 x 4096)" in out and "note " not in out


def test_the_qwen3_job_file_is_the_readme_search_example(capsys) -> None:
    """examples/megatron/qwen3-30b-a3b-h100-16.sh is the job the `search --megatron-args` example of the README and of
    docs/megatron.md starts from: it simulates the step time quoted there for the job as given."""
    model = EXAMPLES / "models" / "qwen3-30b-a3b.json"
    megatron = EXAMPLES / "megatron" / "qwen3-30b-a3b-h100-16.sh"
    argv = ["run", "--model", str(model), "--cluster", "h100", "--gpus", "16", "--megatron-args", str(megatron)]
    assert main([*argv, "--json"]) == 0
    step_s = json.loads(capsys.readouterr().out)["step_time_s"]
    for page in (EXAMPLES.parent / "README.md", EXAMPLES.parent / "docs" / "megatron.md"):
        assert f"the job as given simulates {step_s:.2f} s a" in page.read_text().lower(), page.name


def test_compare_takes_the_example_layouts_and_cluster_file(tmp_path) -> None:
    layouts = ",".join(str(EXAMPLES / "layouts" / f"ep-{kind}.yaml") for kind in ("in-node", "cross-node"))
    cluster = str(EXAMPLES / "clusters" / "h800-100g.yaml")
    argv = ["compare", "--gpus", "1440", "--global-batch", "180", "--cluster", cluster, "--layouts", layouts]
    assert main([*argv, "--out", str(tmp_path / "ep.csv")]) == 0
    frame = pd.read_csv(tmp_path / "ep.csv")
    assert frame.error.isna().all() and (frame.tokens_per_s > 0).all()


def _outputs(notebook) -> list[list[str]]:
    """Each code cell's printed text and plain-text results (not images), output by output."""
    return [
        [out.get("text", "") or out.get("data", {}).get("text/plain", "") for out in cell.outputs]
        for cell in notebook.cells
        if cell.cell_type == "code"
    ]


def _texts(notebook) -> list[str]:
    """Each code cell's outputs joined: how a kernel splits one print across stream outputs depends on timing
    (nbclient gave "MFU ...%" and its newline one output in one run, two in another), the text does not."""
    return ["".join(cell) for cell in _outputs(notebook)]


def test_notebook_cells_run_and_the_committed_outputs_are_current(monkeypatch) -> None:
    """Every cell of the first-prediction notebook runs, in its folder (each cell within nbclient's 60 s), and prints
    what the committed notebook shows (re-execute it after a change: `cd examples && jupyter execute --inplace
    first-prediction.ipynb`, then drop the cells' timing metadata)."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(EXAMPLES.parent), os.environ.get("PYTHONPATH", "")]))
    committed = nbformat.read(EXAMPLES / "first-prediction.ipynb", as_version=4)
    notebook = nbformat.read(EXAMPLES / "first-prediction.ipynb", as_version=4)
    nbclient.NotebookClient(notebook, timeout=60, resources={"metadata": {"path": str(EXAMPLES)}}).execute()
    outputs = [out for cell in notebook.cells if cell.cell_type == "code" for out in cell.outputs]
    assert not [out for out in outputs if out.output_type == "error"]
    assert any("step time" in out.get("text", "") for out in outputs)
    assert all(_texts(committed)), "a code cell of the committed notebook has no output: execute it before committing"
    assert _texts(committed) == _texts(notebook)


def test_notebook_first_example_is_a_sensible_job_and_its_tables_are_rounded() -> None:
    """The first prediction is a job people run (a pipeline bubble under 10%, not 29% from 8 micro-batches on 4
    stages), and no printed table shows raw floats (more than 2 decimals)."""
    import re

    nbformat = pytest.importorskip("nbformat")
    committed = nbformat.read(EXAMPLES / "first-prediction.ipynb", as_version=4)
    texts = _outputs(committed)
    bubble = re.search(r"bubble +([\d.]+)%", texts[0][0])
    assert bubble and float(bubble.group(1)) < 10
    raw = [t for cell in texts for t in cell if re.search(r"\d\.\d{3,}", t) and "step time" not in t]
    assert raw == []
