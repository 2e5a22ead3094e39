"""Out of the corpus: published Blackwell training runs (B200, B300, GB200, GB300) against the simulator (check.py),
their GB300 / GB200 and precision ratios (ratios.py), and their results table for the error band (results.py,
``moesim reproduce blackwell``). May import: what experiments.validation may."""
