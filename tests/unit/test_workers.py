"""``Workers`` (experiments/common/parallel.py): one interface over this process and local processes; results in
the items' order, in batches; errors reach the caller."""

from __future__ import annotations

import os

import pytest

from experiments.common.parallel import Workers, batch_sizes


def _square_and_pid(item: int, offset: int) -> tuple[int, int]:
    return item * item + offset, os.getpid()


def _fails(item: int) -> int:
    raise ValueError(f"item {item}")


def test_here_every_item_runs_in_this_process_in_order() -> None:
    with Workers(1) as workers:
        assert not workers.parallel and workers.slots == 1 and workers.share("x") == "x"
        assert workers.map(_square_and_pid, [3, 1, 2], 10) == [(19, os.getpid()), (11, os.getpid()), (14, os.getpid())]
        future = workers.submit(_fails, 7)
    assert future.done() and isinstance(future.exception(), ValueError)


def test_two_processes_keep_the_order_in_batches(monkeypatch) -> None:
    """40 items on 2 processes: the batches ``batch_sizes`` gives, every result in the items' order."""
    sent: list[int] = []
    with Workers(2) as workers:
        real = workers._executor.submit
        monkeypatch.setattr(workers._executor, "submit", lambda f, *a: sent.append(len(a[1])) or real(f, *a))
        results = workers.map(_square_and_pid, list(range(40)), 1)
        assert [value for value, _ in results] == [i * i + 1 for i in range(40)]
        assert {pid for _, pid in results} - {os.getpid()}  # not here
        assert sent == batch_sizes(40, 2) == [10, 8, 6, 4, 3, 3, 2, 1, 1, 1, 1]  # ceil(left / 4) of 40, 30, 22, ...
        with pytest.raises(ValueError, match="item 1"):  # the first failing item, whichever finishes first
            workers.map(_fails, [1, 2])


def test_batches_shrink_to_a_floor() -> None:
    """Each batch holds the items left over GUIDED_SHARE x the workers, at least 1/LEAST_SHARE of a worker's share:
    1,000 bounds on 2 workers are 14 tasks, the first a quarter of them, the last few 16 items."""
    sizes = batch_sizes(1000, 2)
    assert sizes[:4] == [250, 188, 141, 106] and sizes[-4:] == [16, 16, 16, 7] and len(sizes) == 14
    for count, slots, most in [(1000, 2, 0), (3700, 2, 0), (79, 2, 8), (5, 3, 0), (1, 4, 0), (0, 2, 0)]:
        sizes = batch_sizes(count, slots, most)
        assert sum(sizes) == count and sizes == sorted(sizes, reverse=True)
        assert all(size <= (most or count) for size in sizes)


def test_at_most_caps_a_batch(monkeypatch) -> None:
    sent: list[int] = []
    with Workers(2) as workers:
        real = workers._executor.submit
        monkeypatch.setattr(workers._executor, "submit", lambda f, *a: sent.append(len(a[1])) or real(f, *a))
        assert [v for v, _ in workers.imap(_square_and_pid, list(range(100)), 0, most=3)] == [i * i for i in range(100)]
    assert max(sent) == 3 and sum(sent) == 100
