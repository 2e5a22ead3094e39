"""Speed shortcuts around the engine, exact or bounded and tested against the full run: the steady-state
step runner (steady.py: it calls the engine; periodic.py: the lock check; ledger.py: a probe of its runs).
May import: simulator.engine and everything below it; the engine never imports this package.
"""
