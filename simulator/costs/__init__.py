"""Cost models: pure functions from shapes and bytes to seconds. GEMM efficiency from published points,
attention, memory-bound kernels, collectives (bus bandwidth, NCCL's latency model), and the calibration constants
with their sources. May import: workloads, topologies. Never the engine.
"""
