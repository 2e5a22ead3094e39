"""Memory per GPU: weights, gradients and optimizer state as Megatron-LM counts them (per_gpu.py), and
activations tensor by tensor (activations.py). A pure function of the workload. May import: workloads, topologies.
"""
