"""One task on one GPU's streams, at op level: op costs (op_costs.py), the fluid network (network.py), SM
sharing between compute and communication kernels, the host's launch turns, and the executors of a task (tasks.py
on simpy events; closed_task.py and alone.py as arithmetic where nothing else can interfere).
May import: simulator.costs, workloads, topologies.
"""
