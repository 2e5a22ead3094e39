"""The ``moesim`` command line (main.py), its run outputs and plots, ``sweep`` and ``bench``. May import
everything.
"""
