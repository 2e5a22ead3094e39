"""What users run: the ``moesim`` command line, sweeps and searches, the validation corpus, the paper's
tables and figures and the reproductions beyond it. Writes into results/.

Sub-packages, lowest layer first: ``common`` -> ``search`` / ``validation`` -> ``beyond`` -> ``paper`` -> ``cli``.
"""
