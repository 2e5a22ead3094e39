"""One validation case run: its prediction and report, or the error that stopped it; its error against the
published value and which MAPE it counts in."""

from __future__ import annotations

from dataclasses import dataclass

from experiments.common.error_band import Mechanisms
from experiments.validation.corpus import CORPUS, Case
from simulator.report.simulate import Report

MISS = 0.10  # a miss: |error| above this; also the band of the plot


@dataclass(frozen=True)
class CaseResult:
    """One case run: the prediction and its report, or the error that stopped it."""

    case: Case
    predicted_tokens_per_s_per_gpu: float | None
    message: str = ""
    report: Report | None = None
    not_simulated: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    wall_s: float = 0.0
    # The same case with the fitted residual at 1 (the published kernel speeds at the sustained clock): how much it
    # leans on the fit
    unfitted_tokens_per_s_per_gpu: float | None = None
    # Misses (over MISS): where one micro-batch of the busiest stage goes (experiments/common/stage_costs.py),
    # at the fitted calibration and at residual 1
    stage_costs: str = ""
    mechanisms: Mechanisms | None = None  # what its error depends on (experiments/common/error_band.py)

    @property
    def ran(self) -> bool:
        return self.predicted_tokens_per_s_per_gpu is not None

    @property
    def error(self) -> float | None:
        """Signed fraction of the measured value: 0.05 = predicted 5% high."""
        if not self.ran:
            return None
        return self.predicted_tokens_per_s_per_gpu / self.case.measured_tokens_per_s_per_gpu - 1

    @property
    def unfitted_error(self) -> float | None:
        """The error at compute_residual 1 (None where the case did not run)."""
        if self.unfitted_tokens_per_s_per_gpu is None:
            return None
        return self.unfitted_tokens_per_s_per_gpu / self.case.measured_tokens_per_s_per_gpu - 1

    @property
    def ignoring_memory(self) -> float | None:
        """Tokens/s per GPU of an out-of-memory case simulated anyway (None otherwise)."""
        return self.report.tokens_per_s_per_gpu if self.report is not None and not self.ran else None

    def counts_in(self, group: str) -> bool:
        """Counted in ``group``'s MAPE: ran, not fitted, and of that group."""
        return self.ran and not self.case.fitted and self.case.group == group

    @property
    def in_mape(self) -> bool:
        """Counted in the headline MAPE, the corpus's (matched runs have their own)."""
        return self.counts_in(CORPUS)

    @property
    def flops_per_token_ratio(self) -> float | None:
        """Megatron-LM's FLOPs per token of the simulated model over the publisher's (TFLOP/s over tokens/s)."""
        flops = self.case.measured_model_tflops_per_gpu
        if self.report is None or not flops:  # (an out-of-memory case's report counts the same FLOPs)
            return None
        published = flops / self.case.measured_tokens_per_s_per_gpu
        return self.report.model_tflops_per_gpu / self.report.tokens_per_s_per_gpu / published
