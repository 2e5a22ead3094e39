"""Speed shortcuts around the engine, exact or bounded and tested against the full run: the steady-state
step runner (steady.py, periodic.py, ledger.py) and the NIC replay (nic_replay.py and its helpers).
May import: simulator.engine and everything below it.
"""
