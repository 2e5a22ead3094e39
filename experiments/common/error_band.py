"""How far to trust a prediction: the errors of the published runs most like it (issue 41, item 2).

A prediction's mechanisms are what the validation corpus shows errors depend on: dense or MoE, a hybrid model's
Mamba-2 blocks, the token dispatcher, the GPU generation, the GEMM precision and the pipeline schedule (with EP
overlap). The band is the range of the errors of the validated runs that share them; where fewer than ``MIN_ALIKE``
runs share all of them, the least telling mechanism is dropped first (schedule, precision, generation, dispatcher,
hybrid, then dense / MoE), down to every validated run. With n exchangeable runs, a new one falls inside their range with probability
(n - 1) / (n + 1) (the order statistics of n + 1 exchangeable draws); ``MIN_ALIKE`` = 9 is the smallest n for
which that is at least the 80% the issue asks, so the rule follows from the target, not from the corpus.
tests/paper/test_error_band_coverage.py measures the leave-one-out coverage it gives on the corpus.

The errors come from ``moesim validate``'s table (results/validation.csv, regenerated with results/), so a band
costs a file read, not a simulation; it lives here, below experiments.validation, so that ``run``, ``compare`` and
``search`` load it without the validation machinery. No Blackwell run is in the corpus: a prediction on a Blackwell
GPU also counts the published rows of its own generation that ``moesim reproduce blackwell`` simulates out of the
corpus (results/blackwell-check.csv, experiments/validation/blackwell/results.py); a prediction on another
generation does not (its corpus runs are the evidence for it, and the out-of-corpus rows carry their own
generation's misses, e.g. every GB300 row slow).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from topologies.hardware import GPU_PRESETS, GpuSpec
from workloads.recipes.moe import dispatch_uses_all_gather
from workloads.specs.layouts import LayoutSpec
from workloads.specs.models import ModelSpec

MIN_ALIKE = 9  # (n - 1) / (n + 1) >= 0.8
RESULTS = Path(__file__).resolve().parents[2] / "results"
VALIDATION_CSV = RESULTS / "validation.csv"
BLACKWELL_CSV = RESULTS / "blackwell-check.csv"  # experiments/validation/blackwell/results.py CSV_NAME


class Mechanisms(NamedTuple):
    """What a prediction's error depends on, most telling first (the order the band relaxes them in reverse)."""

    moe: bool
    hybrid: bool  # Mamba-2 blocks beside attention: a hybrid model's (ModelSpec.hybrid_pattern)
    dispatcher: str
    generation: str
    precision: str
    schedule: str


def dispatcher_of(model: ModelSpec, layout: LayoutSpec) -> str:
    """Who moves the MoE tokens: dense, the FFN under TP, all-gather, MegaScale-MoE's fused all-to-all, NCCL's
    all-to-all (Megatron's alltoall dispatcher), HybridEP or DeepEP (its flex dispatcher)."""
    if model.num_experts == 0:
        return "dense"
    if layout.ffn != "ep":
        return "tp-ffn"
    if dispatch_uses_all_gather(model, layout):
        return "allgather"
    if layout.intra_op_overlap:
        return "fused-a2a"
    # MegaScale-MoE's dispatch without its fused GEMMs moves tokens DeepEP's way (workloads/dispatchers/megascale.py)
    return {"alltoall": "alltoall", "flex-hybridep": "hybridep"}.get(layout.token_dispatcher, "deepep")


def generation_of(gpu: GpuSpec | str) -> str:
    """The GPU's generation (its spec's typed field; a preset's by name), "other" for an unknown name."""
    if isinstance(gpu, str):
        gpu = GPU_PRESETS.get(gpu.lower())
    return gpu.generation.value if gpu is not None else "other"


def mechanisms_of(model: ModelSpec, layout: LayoutSpec, gpu: GpuSpec | str) -> Mechanisms:
    schedule = layout.schedule + ("+ep-overlap" if layout.ep_overlap else "")
    generation = generation_of(gpu)
    hybrid = bool(model.hybrid_pattern)
    return Mechanisms(
        model.num_experts > 0, hybrid, dispatcher_of(model, layout), generation, layout.gemm_dtype, schedule
    )


def unvalidated_note(generation: str, known: list[KnownError]) -> str:
    """What to say when no validated run shares the GPU's generation: the prediction rests on that generation's
    published kernel tables alone (simulator/costs/generations.py; docs/hardware.md lists their sources), and its
    band on the corpus's runs and those of the out-of-corpus Blackwell check of its generation, if any."""
    if any(k.in_corpus and k.mechanisms.generation == generation for k in known):
        return ""
    outside = sum(not k.in_corpus and k.mechanisms.generation == generation for k in known)
    band = (
        f"the band counts {outside} published {generation} runs simulated out of the corpus (moesim reproduce blackwell)"
        if outside
        else "the band's runs are of other GPU generations"
    )
    return (
        f"no {generation} run is in the validation corpus: this prediction rests on the {generation} kernel tables "
        f"alone (docs/hardware.md), and {band}"
    )


class KnownError(NamedTuple):
    """A validated run: its name, mechanisms and error (predicted / measured tokens/s - 1); ``in_corpus`` False
    for an out-of-corpus Blackwell row, which counts only for its own generation."""

    case: str
    mechanisms: Mechanisms
    error: float
    in_corpus: bool = True


@dataclass(frozen=True)
class ErrorBand:
    """The range of the errors of ``cases`` validated runs alike in ``matched``: the measured step time is likely
    between (1 + low) and (1 + high) times the predicted one (error = predicted / measured tokens/s - 1)."""

    low: float
    high: float
    cases: int
    matched: tuple[str, ...]  # the mechanisms the runs share (empty: every validated run)
    note: str = ""  # a caveat beside the band (unvalidated_note: no run of the GPU's generation is validated)
    outside: int = 0  # of the cases, out-of-corpus Blackwell rows (moesim reproduce blackwell)

    @property
    def basis(self) -> str:
        alike = ", ".join(self.matched) if self.matched else "any mechanism"
        where = f"moesim validate; {self.outside} out of the corpus" if self.outside else "moesim validate"
        return f"{self.cases} published runs alike in {alike} ({where})"

    def to_json(self) -> dict:
        return {
            "low": self.low,
            "high": self.high,
            "cases": self.cases,
            "out_of_corpus": self.outside,
            "basis": self.basis,
            "note": self.note,
        }

    def step_range_s(self, step_time_s: float) -> tuple[float, float]:
        return step_time_s * (1 + self.low), step_time_s * (1 + self.high)

    def describe(self, step_time_s: float) -> str:
        low_s, high_s = self.step_range_s(step_time_s)
        return f"likely {low_s:.3g}-{high_s:.3g} s per step, from {self.basis}"


def band_for(mechanisms: Mechanisms, known: list[KnownError], exclude: str = "") -> ErrorBand | None:
    """The band of the runs in ``known`` (but ``exclude``) most alike ``mechanisms``; None if none is known."""
    others = [
        k for k in known if k.case != exclude and (k.in_corpus or k.mechanisms.generation == mechanisms.generation)
    ]
    if not others:
        return None
    for kept in range(len(Mechanisms._fields), -1, -1):
        alike = [k for k in others if k.mechanisms[:kept] == mechanisms[:kept]]
        if len(alike) >= MIN_ALIKE or kept == 0:
            note = unvalidated_note(mechanisms.generation, others)
            errors = [k.error for k in alike]
            outside = sum(not k.in_corpus for k in alike)
            return ErrorBand(min(errors), max(errors), len(alike), Mechanisms._fields[:kept], note, outside)
    raise AssertionError("unreachable: kept == 0 matches every run")


def load_known(path: Path | None = None, blackwell: Path | None = None) -> list[KnownError]:
    """The validated runs of ``moesim validate``'s CSV that ran and were not fitted, then the out-of-corpus Blackwell
    rows of ``moesim reproduce blackwell``'s ([] for a file that is not there)."""
    if path is None:  # the source checkout's tables, else ones written under this folder
        path = _first(VALIDATION_CSV, Path("results") / VALIDATION_CSV.name)
        blackwell = _first(BLACKWELL_CSV, Path("results") / BLACKWELL_CSV.name) if blackwell is None else blackwell
    return _read(path, in_corpus=True) + (_read(blackwell, in_corpus=False) if blackwell is not None else [])


def _first(*paths: Path) -> Path:
    return next((p for p in paths if p.is_file()), paths[0])


def _read(path: Path, in_corpus: bool) -> list[KnownError]:
    if not path.is_file():
        return []
    known = []
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            if row.get("fitted") == "True" or not row.get("error") or not row.get("dispatcher"):
                continue
            mechanisms = Mechanisms(
                row["moe"] == "True",
                row.get("hybrid") == "True",
                row["dispatcher"],
                row["generation"],
                row["precision"],
                row["schedule"],
            )
            known.append(KnownError(row["case"], mechanisms, float(row["error"]), in_corpus))
    return known


def leave_one_out_coverage(known: list[KnownError]) -> tuple[int, int]:
    """How many validated runs fall inside the band the others give them, out of how many."""
    inside = 0
    for run in known:
        band = band_for(run.mechanisms, known, exclude=run.case)
        inside += band is not None and band.low <= run.error <= band.high
    return inside, len(known)


def band_of(model: ModelSpec, layout: LayoutSpec, gpu: GpuSpec | str, path: Path | None = None) -> ErrorBand | None:
    """The band of a prediction for ``model`` under ``layout`` on ``gpu`` (None: no validated run known)."""
    return band_for(mechanisms_of(model, layout, gpu), load_known(path))


def band_json(band: ErrorBand | None) -> dict:
    """``"expected_error"`` of a JSON result: the band, or why there is none."""
    if band is None:
        return {
            "low": None,
            "high": None,
            "cases": 0,
            "out_of_corpus": 0,
            "basis": "no validated run known: run `moesim validate`",
        }
    return band.to_json()
