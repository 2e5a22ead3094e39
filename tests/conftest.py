"""Test-wide settings: CI runs the hypothesis fuzzers derandomized (the same examples every run, so a
landing never depends on luck); local runs keep drawing new examples and so keep exploring. Fewer full garbage
collections."""

from __future__ import annotations

import gc
import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

# A worker's full collections traverse every object alive, the caches of its earlier tests' simulations among them (0.2 s
# each, 26-32 a worker: 12 CPU-s of a 2-core run): one after 100 generation-1 passes instead of CPython's 10 (the
# default run 144 -> 140 s, peak RSS 530 -> 585 MB). Engine runs set their own (simulator/engine/gc_budget.py).
gc.set_threshold(700, 10, 100)
