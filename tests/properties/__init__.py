"""Property tests (hypothesis): statements that hold over random small models, layouts, clusters and inputs.

What belongs here: an invariant (a bound never exceeds the step, more bandwidth is never slower, any input
gives a spec or a ConfigError). Write one with ``@given`` over small strategies so an example runs in well
under a second; CI runs them derandomized (tests/conftest.py).
"""
