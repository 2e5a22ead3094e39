"""Property: the (query, key) pairs DeepSeek-V4's and DSA's attention is timed on (workloads/recipes/dsv4_attention.py)
equal a query-by-query count: query t (1-based) sees min(t, w) window keys and min(t // m, k) compressed ones."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from workloads.recipes.dsv4_attention import compressed_pairs, window_pairs


@settings(max_examples=200, deadline=None, derandomize=True)
@given(seq_len=st.integers(1, 700), window=st.integers(1, 800))
def test_window_pairs_count_each_querys_keys(seq_len: int, window: int) -> None:
    assert window_pairs(seq_len, window) == sum(min(t, window) for t in range(1, seq_len + 1))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(seq_len=st.integers(1, 700), ratio=st.sampled_from([1, 4, 128]), topk=st.integers(0, 300))
def test_compressed_pairs_count_each_querys_whole_blocks(seq_len: int, ratio: int, topk: int) -> None:
    expected = sum(min(t // ratio, topk) if topk else t // ratio for t in range(1, seq_len + 1))
    assert compressed_pairs(seq_len, ratio, topk) == expected
