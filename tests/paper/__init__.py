"""Paper reproductions: the paper's tables, figures and worked examples, published benchmarks, and the README's numbers.

What belongs here: a number someone published (or the README prints) and the tolerance moesim meets it to.
Write one by running the reproduction (experiments.paper, experiments.beyond, experiments.validation) and
asserting against the published value with its source cited; a known miss is a strict xfail naming its cause.
Long ones take ``@pytest.mark.benchmark`` (excluded from the default run).
"""
