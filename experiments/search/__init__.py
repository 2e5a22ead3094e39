"""Many points at once: grids and their sweeps (sweep.py), the layout search with its lower bound and its
Megatron-LM flags back (search.py, bound.py, megatron.py), and ``compare``. May import: experiments.common,
simulator, workloads, topologies.
"""
