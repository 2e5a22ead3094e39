"""Expert parallelism's plan: which GPUs a token's copies reach, in the node and across nodes, and the bytes
each dispatch and combine moves (plan.py); HybridEP's staging (hybridep.py). May import: workloads.ops,
workloads.specs.
"""
