"""Differential tests: two paths that must agree: folded vs unfolded, memoized vs op level, shortcut vs full run.

What belongs here: any speed-up or approximation. Write one by running the same steps both ways (the switch
off with monkeypatch, ``memoize=False``, ``placement="unfolded"``) and comparing every report field
(tests/engine_diff.py: assert_same_fields, assert_steps_match) to 1e-9, or within a bound the test states
and names the cause of.
"""
