"""Expert parallelism's plan: which GPUs a token's copies reach, in the node and across nodes, and the bytes
each dispatch and combine moves under its token dispatcher's wire (plan.py). May import: workloads.ops,
workloads.dispatchers, workloads.specs.
"""
