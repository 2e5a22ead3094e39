"""Test-wide settings: CI runs the hypothesis fuzzers derandomized (the same examples every run, so a
landing never depends on luck); local runs keep drawing new examples and so keep exploring. Fewer full garbage
collections."""

from __future__ import annotations

import gc
import os

from hypothesis import settings

from simulator.engine.gc_budget import JOB_THRESHOLDS

settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

# A worker is a job of many steps: its full collections traverse every object alive, the caches of its earlier tests'
# simulations among them (0.2 s each, 26-32 a worker: 12 CPU-s of a 2-core run), so they wait as a command's do
# (simulator/engine/gc_budget.py JOB_THRESHOLDS; the default run 144 -> 140 s, peak RSS 530 -> 585 MB).
gc.set_threshold(*JOB_THRESHOLDS)
