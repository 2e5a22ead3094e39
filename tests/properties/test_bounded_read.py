"""Property: read_bounded returns a file's text exactly when it is within the limit (and UTF-8), else one ConfigError
naming the limit (workloads/inputs/bounded_read.py)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topologies.errors import ConfigError
from workloads.inputs.bounded_read import read_bounded


@settings(max_examples=60, deadline=None, derandomize=True)
@given(data=st.binary(max_size=300), bound=st.integers(1, 300))
def test_read_bounded_is_the_text_within_the_limit_and_a_refusal_beyond(data: bytes, bound: int) -> None:
    with tempfile.TemporaryDirectory() as folder, pytest.MonkeyPatch.context() as patch:
        patch.setenv("MOESIM_MAX_CASE_BYTES", str(bound))
        path = Path(folder) / "case.yaml"
        path.write_bytes(data)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if len(data) > bound:
            with pytest.raises(ConfigError, match=f"exceeds the limit of {bound:,}; set MOESIM_MAX_CASE_BYTES"):
                read_bounded("case", path, "case_bytes")
        elif text is None:
            with pytest.raises(ConfigError, match="not UTF-8"):
                read_bounded("case", path, "case_bytes")
        else:
            assert read_bounded("case", path, "case_bytes") == text
