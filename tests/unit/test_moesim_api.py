"""``import moesim``: the library's public names, loaded on first use."""

from __future__ import annotations

import subprocess
import sys

import pytest

import moesim
from simulator.report.simulate import Report, simulate
from workloads.specs.models import MODEL_PRESETS


def test_the_public_names_are_the_code_s_own() -> None:
    assert sorted(moesim.__all__) == sorted(moesim._WHERE)
    assert moesim.simulate is simulate and moesim.Report is Report and moesim.MODEL_PRESETS is MODEL_PRESETS
    assert set(dir(moesim)) == set(moesim.__all__) and "hf_model" in moesim.__all__
    with pytest.raises(AttributeError, match="no attribute 'nosuch'"):
        _ = moesim.nosuch


def test_a_step_through_the_library() -> None:
    report = moesim.simulate("paper-352b", "megascale-moe", 240)
    assert isinstance(report, moesim.Report) and report.step_time_s > 0


def test_import_moesim_loads_nothing_yet() -> None:
    code = "import sys, moesim; print(sorted(m for m in ('simulator.report.simulate', 'numpy') if m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"
