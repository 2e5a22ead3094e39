"""``moesim reproduce blackwell``: the out-of-corpus Blackwell rows (experiments/validation/blackwell/check.py) as a
results table, results/blackwell-check.csv, which the error band reads for predictions on a Blackwell GPU.

No Blackwell run is in the validation corpus and nothing is fitted on these rows; their errors are still the only
measure of how far a Blackwell prediction lands, so a prediction for a GB200 or GB300 takes its band from the rows
of its own generation beside the corpus's (experiments/common/error_band.py). Each row at the fitted calibration,
with the mechanisms the band matches on.
"""

from __future__ import annotations

from pathlib import Path

from experiments.common.error_band import mechanisms_of
from experiments.common.paths import write_csv
from experiments.validation.blackwell.check import row_recipe, row_report
from experiments.validation.blackwell.rows import ROWS, BlackwellRow
from experiments.validation.blackwell.sources import SOURCES
from topologies.cluster import cluster_preset

CSV_NAME = "blackwell-check.csv"


def row_record(row: BlackwellRow) -> dict[str, object]:
    """One row's measurement, prediction, error and mechanisms (the columns results/validation.csv gives a case)."""
    model, layout = row_recipe(row)
    report = row_report(row, model=model, layout=layout)
    mechanisms = mechanisms_of(model, layout, cluster_preset(row.cluster, row.gpus).gpu)
    return {
        "case": row.name,
        "source": row.source,
        "cluster": row.cluster,
        "gpus": row.gpus,
        "measured_tokens_per_s_per_gpu": row.measured_tokens_per_s_per_gpu,
        "predicted_tokens_per_s_per_gpu": report.tokens_per_s_per_gpu,
        "error": report.tokens_per_s_per_gpu / row.measured_tokens_per_s_per_gpu - 1,
        "over_hbm": report.oom,
        **mechanisms._asdict(),
    }


def run(out: Path) -> str:
    """Write results/blackwell-check.csv; return the markdown section."""
    import pandas as pd

    frame = pd.DataFrame([row_record(row) for row in ROWS])
    write_csv(frame, out / CSV_NAME, float_format="%.6g")
    lines = [
        "## Out of the corpus: published Blackwell training runs (B200, B300, GB200, GB300)",
        "",
        (
            "Not validation cases: nothing is fitted on them and they are in no MAPE (`python -m "
            "experiments.validation.blackwell.check` prints each row's busiest stage and the residual-1 column). "
            "Their errors give a Blackwell prediction its band (`expected` in `moesim run`), beside the corpus's."
        ),
        "",
        "| row | GPUs | measured tok/s/GPU | predicted | error |",
        "|---|---|---|---|---|",
    ]
    for source in SOURCES:
        for record in (r for r in frame.to_dict("records") if r["source"] == source):
            oom = " (over HBM)" if record["over_hbm"] else ""
            lines.append(
                f"| {record['case']} | {record['gpus']} {record['cluster']} | "
                f"{record['measured_tokens_per_s_per_gpu']:,.0f} | {record['predicted_tokens_per_s_per_gpu']:,.0f} | "
                f"{record['error']:+.1%}{oom} |"
            )
    by_gpu = frame.groupby("cluster")["error"]
    lines += [
        "",
        "Sources: "
        + "; ".join(SOURCES)
        + ". "
        + "; ".join(
            f"{cluster}: {len(errors)} rows, {errors.min():+.1%} to {errors.max():+.1%}" for cluster, errors in by_gpu
        )
        + ".",
    ]
    return "\n".join(lines)
