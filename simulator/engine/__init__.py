"""The engine: one training step of a pipeline on a placement (folded: one representative per stage;
unfolded: every GPU) with a task timer, plus its PP sends, DP gathers and reductions, and the optimizer step.
Probes observe it; faults degrade it. May import: simulator.costs, simulator.streams, workloads, topologies.
"""
