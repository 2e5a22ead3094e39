"""Token dispatchers as objects, one module each (Megatron-Core's alltoall, allgather, flex with DeepEP and with
HybridEP; MegaScale-MoE's own): the copies each sends, who moves them, and the steps each issues around the
experts (base.py the interface, steps.py the shared steps, registry.py the names). May import: workloads.ops.
"""
