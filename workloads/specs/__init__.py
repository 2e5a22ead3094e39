"""The specs a user gives: models (ModelSpec and presets), layouts (LayoutSpec, presets and the rules between
its fields), dtypes and precisions, routing skew, CUDA-graph scopes, the rules between a model, a layout and a
cluster (validation) and the hints those errors give. May import: workloads.ops, workloads.schedules, topologies.
"""
