"""``moesim reproduce``: run the paper reproductions and gather them in results/REPRODUCTION.md."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from experiments.beyond import layouts_ep, r_ratio, scaleup_domain, schedules, skew
from experiments.common.parallel import default_jobs, in_order
from experiments.common.progress import bar
from experiments.common.progress import shown as progress_shown
from experiments.common.results_md import calibration_section, write_section
from experiments.common.shared_sims import sharing
from experiments.common.unit_costs import cpu_s
from experiments.paper import fig7, fig14, fig16, fig17, table3, table5, weak_scaling
from experiments.validation import moe_layer, moe_perf, validate
from experiments.validation.blackwell import results as blackwell_results
from experiments.validation.corpus import Case, load_cases

REPRODUCTIONS = {
    "table3": table3.run,
    "weak-scaling": weak_scaling.run,
    "table5": table5.run,
    "fig7": fig7.run,
    "fig14": fig14.run,
    "fig16": fig16.run,
    "fig17": fig17.run,
    "scaleup-domain": scaleup_domain.run,  # beyond the paper
    "r-ratio": r_ratio.run,  # beyond the paper (Sec. 7's R, simulated)
    "layouts-ep": layouts_ep.run,  # beyond the paper: in-node vs cross-node EP over NIC bandwidth
    "skew": skew.run,  # beyond the paper: Zipf expert load, dropless vs capacity 1.25
    "validation": validate.run,  # published runs of other models, clusters and frameworks (moesim validate)
    "schedules": schedules.run,  # beyond the paper: DeepSeek-V3 under 1F1B, ZB1P, DualPipe, DualPipeV
    "moe-layer": moe_layer.run,  # beyond the paper: one MoE layer against SonicMoE's measured kernels (H100)
    "moe-perf": moe_perf.run,  # beyond the paper: Megatron-LM's MoE perf test, three dispatchers on 8 H100
    "blackwell": blackwell_results.run,  # out of the corpus: published GB200 / GB300 runs (the error band reads them)
}


# Published runs of the paper's own tables: simulated with the targets that reproduce those tables, in one
# process, so each point is simulated once (experiments/common/shared_sims.py); weak scaling's 960-GPU points are
# Table 3 rows too.
PAPER_TARGETS = ("table3", "table5", "weak-scaling")
# CPU seconds of validation.csv / validation.png and its section, written in this process once the last case is in
# (validate.write_outputs after `reproduce all`'s imports, 2-core development machine, issue #16: 0.36-0.39). A
# unit of cases counts it beside its own cost, so the cases start before the cheapest targets and the write runs
# while those do, not after every unit.
VALIDATION_WRITE_CPU_S = 0.4


@dataclass(frozen=True)
class Unit:
    """Work for one process, in order: reproductions run whole into ``out``, then validation cases simulated."""

    out: Path
    targets: tuple[str, ...] = ()
    cases: tuple[Case, ...] = ()

    @property
    def cpu_s(self) -> float:
        """What the unit costs by experiments/common/unit_costs.py (the order of the units, nothing else, depends on it)."""
        return cpu_s([*self.targets, *(case.name for case in self.cases)])


def run_unit(unit: Unit) -> tuple[dict[str, str], list[validate.CaseResult]]:
    """The markdown section of each target of ``unit`` and its cases' results, points shared between them."""
    unit.out.mkdir(parents=True, exist_ok=True)
    with sharing():
        sections = {name: REPRODUCTIONS[name](unit.out) for name in unit.targets}
        return sections, [validate.run_case(case) for case in unit.cases]


def units(names: list[str], out: Path, cases: list[Case]) -> list[Unit]:
    """``names`` as independent units and the validation corpus (``cases``) split into its cases, the cases of
    the paper's tables beside the targets that reproduce those tables, cases that differ only in their global
    batch together (validate.same_step: they share short runs); costliest first, a unit of cases with the
    validation write it gates (VALIDATION_WRITE_CPU_S; a stable sort: the targets' order, then the corpus's, among
    equals)."""
    paper = tuple(c for c in cases if c.from_fitted_paper)
    grouped = tuple(n for n in PAPER_TARGETS if n in names)
    others = [c for c in cases if c not in paper]
    work = [
        *([Unit(out, grouped, paper)] if grouped or paper else []),
        *(Unit(out, (n,)) for n in names if n != "validation" and n not in grouped),
        *(Unit(out, cases=tuple(others[i] for i in group)) for group in validate.same_step(others)),
    ]
    return sorted(work, key=lambda unit: -(unit.cpu_s + (VALIDATION_WRITE_CPU_S if unit.cases else 0.0)))


def validation_outputs(results: list[validate.CaseResult], cases: list[Case], out: Path) -> str:
    """validation.csv / .png in ``out`` from every case's result, in the corpus's order; its section."""
    order = {case.name: i for i, case in enumerate(cases)}
    return validate.write_outputs(sorted(results, key=lambda r: order[r.case.name]), out)


def reproduce(name: str, out: Path, quiet: bool = False, jobs: int | None = None) -> None:
    """Run one reproduction (or all) into ``out`` in ``jobs`` processes (default: one per CPU); a bar with an
    ETA on a terminal, a line per target otherwise (none with ``quiet``). The outputs do not depend on ``jobs``."""
    out.mkdir(parents=True, exist_ok=True)
    names = list(REPRODUCTIONS) if name == "all" else [name]
    markdown_path = out / "REPRODUCTION.md"
    cases = load_cases() if "validation" in names else []
    work = units(names, out, cases)
    sections: dict[str, str] = {}
    results: list[validate.CaseResult] = []
    pending = sum(1 for unit in work if unit.cases)  # case units not yet in
    with sharing():
        outcomes = in_order(run_unit, work, default_jobs() if jobs is None else jobs)
        with bar(len(work), "reproduce", unit="part", quiet=quiet) as progress:
            for unit, (done, simulated) in zip(work, outcomes):
                label = ", ".join([*unit.targets, *(f"validation {case.name}" for case in unit.cases)])
                progress.set_postfix_str(label)
                if not quiet and not progress_shown(quiet):
                    print(f"reproduced {label}", flush=True)
                sections.update(done)
                results += simulated
                pending -= bool(unit.cases)
                if unit.cases and not pending and "validation" in names:  # the last case: write as later units run
                    sections["validation"] = validation_outputs(results, cases, out)
                progress.update()
    if "validation" in names and "validation" not in sections:  # a corpus without cases
        sections["validation"] = validation_outputs(results, cases, out)
    for each in names:
        write_section(markdown_path, each, sections[each])
    write_section(markdown_path, "calibration", calibration_section())
    print(f"wrote {out}/ ({', '.join(names)}) and {markdown_path}")
