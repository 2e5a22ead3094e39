"""Pipeline schedules as objects (1F1B, interleaved, ZB1P, DualPipe, DualPipeV): each stage's task order, what a
task receives and sends, the activations a stage holds. May import: workloads.ops, topologies.errors.
"""
