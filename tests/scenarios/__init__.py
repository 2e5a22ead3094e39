"""Scenarios: hand-computed timelines, SimPy style: a tiny step or task whose every start and end is derived by hand.

What belongs here: a new engine mechanism (a stream rule, a schedule, SM sharing, a network flow) shown on a
case small enough to time on paper. Write one on the toy GPU of tests/toys.py (a memory op of 1e9 B takes
1 ms; round links), state the timeline in the docstring, and assert the simulated times equal it exactly (or
to rounding, 1e-12 relative).
"""
