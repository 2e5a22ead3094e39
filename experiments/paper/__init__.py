"""MegaScale-MoE's own tables and figures (Table 3, Table 5, weak scaling, Figs. 7/14/16/17), the fit of
the one residual, and ``moesim reproduce``. May import: every experiments sub-package but cli.
"""
