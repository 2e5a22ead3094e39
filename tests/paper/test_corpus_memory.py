"""Every published run of the validation corpus fits in its GPUs' memory or "may not fit" (a warning, the step is
simulated); none is refused (issue 39: a published run must never be refused for memory). Each case's job is
resolved from its config.json and Megatron-LM flags as written, as ``moesim validate`` runs it."""

from __future__ import annotations

import pytest

from experiments.validation.corpus import load_cases
from experiments.validation.validate import case_job
from simulator.memory.per_gpu import peak_memory
from simulator.memory.verdict import Verdict, memory_verdict
from simulator.report.simulate import prepare

CASES = load_cases()


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_no_published_run_is_refused_for_memory(case) -> None:
    job = case_job(case)
    workload, cluster, _ = prepare(
        job.model, job.layout, case.gpus, case.cluster, case.global_batch, case.seq_len, None, True
    )
    verdict = memory_verdict(peak_memory(workload), cluster.gpu.hbm_bytes)
    assert verdict.verdict is not Verdict.DOES_NOT_FIT, verdict.phrase()


def test_the_printed_gpt_oss_micro_batch_would_be_refused() -> None:
    """The 25.11 GPT-OSS-120B row prints MBS 4 with GA 2, which cannot both hold at PP 4 (the case's
    measured.derivation); at MBS 4 the step needs 96.4 GiB per GPU as counted, 81.9 GiB with its activations 25%
    lower, over an H100's 74.5 GiB: the verdict refuses it, where the preset's MBS 1 fits."""
    case = next(c for c in CASES if c.name == "bridge-gpt-oss-120b-h100-0064-r2511")
    job = case_job(case)
    verdicts = {}
    for micro_batch in (1, 4):
        workload, cluster, _ = prepare(
            job.model, job.layout, case.gpus, case.cluster, case.global_batch, case.seq_len, micro_batch, True
        )
        verdicts[micro_batch] = memory_verdict(peak_memory(workload), cluster.gpu.hbm_bytes)
    assert verdicts[1].verdict is Verdict.FITS
    assert verdicts[4].verdict is Verdict.DOES_NOT_FIT
    assert verdicts[4].peak.total_gib == pytest.approx(96.4, abs=0.05)
