"""From a simulated step to what a user reads: ``simulate`` (simulate.py) runs a workload and builds the
Report (step time, tokens/s, MFU, bubbles, exposed communication, memory), with its checks, bounds, bubble
breakdown and cluster presets. May import: every simulator sub-package but outputs.
"""
