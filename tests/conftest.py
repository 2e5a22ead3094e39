"""Test-wide settings: CI runs the hypothesis fuzzers derandomized (the same examples every run, so a
landing never depends on luck); local runs keep drawing new examples and so keep exploring."""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
