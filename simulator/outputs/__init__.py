"""Files from a simulated step: the Chrome / Perfetto timeline (trace.py, trace_proto.py) and its size
estimate. May import: every other simulator sub-package.
"""
