"""One training step as op lists: the recipes of each stage's layers under its schedule (StepWorkload,
step.py), the forward / backward / weight-gradient op lists of a task (op_lists.py), and the pairing of
overlapped tasks (combined 1F1B, DualPipe). May import: workloads.ops, schedules, specs, ep, recipes.
"""
