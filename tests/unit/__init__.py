"""Unit tests: one function, rule or command at a time, with values worked out by hand where there are values.

What belongs here: a cost model, a byte count, a loader's rule and its one-line error, a CLI flag, an output
format. Write one by calling the function on a toy input (tests/toys.py: round-number GPU and calibration)
and asserting the value derived in the docstring or a comment, or the exact error. A test that runs the
engine and checks a timeline goes to scenarios/; one that compares two paths goes to differential/.
"""
