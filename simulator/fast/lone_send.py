"""When a PP send is sure to run alone: its exact span, for the send forecast (simulator/fast/send_forecast.py).

The forecast gives each send a window of SEND_SLOWDOWN times its time alone, as other flows on its links may
slow it. A send of a task that has ended, or is replayed and so ends exactly when its footprint says, starts
exactly one NIC latency after that end; ``lone_end`` gives its exact end where, from the asking instant on,
no other flow can be on its links (the sender's NIC out, each receiver's NIC in) while it runs, and None
where that is not sure. The real flows on those links are the sending and receiving stages' PP sends, DP
buckets and op-level tasks' NIC flows (a replayed task's flows are reservations, checked after the run,
simulator/fast/nic_replay.py). So the send is alone until its end if, now:

- no DP bucket is in flight on its links: a stage's parameter gather goes bucket after bucket from the
  step's start, its gradient buckets start when its last task ends (so the sender and the receivers must have
  a task left to start);
- the sender and the receivers run no op-level task (its flows are not known), and no stage sending to a
  receiver runs one that sends there (its end is not known);
- on the sender and each receiver the next NIC flow cannot start before the send's end: the next task starts
  when the running replayed task ends (exactly), or now if none runs, and its first NIC flow begins where its
  footprint says (before that flow a task touches only its own stream and NVLink, at op level or not); a task
  without NIC flows ends its footprint's duration after its start. The asking stage's next task is the one
  asking: replayed (what is asked), its flows are reservations, and it ends its duration from now;
- no send leaves on its links before its end: of the tasks started on the sender (all its sends, on its NIC
  out) and on the stages sending to a receiver (their sends there) their sends leave one NIC latency after
  their ends, known (replayed, or ended), and a later task's sends leave after its first NIC flow or end.

Then no flow joins its links while it runs, and each of its flows (the sender's NIC out to a receiver's NIC
in; a paired task's two share the NIC out) gets at least the least over its links of capacity over the flows
there now (its own, and those in flight, which may only leave): under max-min fairness a flow's bottleneck
link is saturated and no flow there gets more than it. So it ends by its bytes left (all, from its start,
if it has not left) over that rate. A wrong answer still cannot change a result: a replayed task that meets
the send is a conflict, which stops the run or re-runs it (simulator/fast/nic_replay.py; tests/differential/test_lone_send.py
makes one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from simulator.fast.send_forecast import SendForecast


def lone_end(forecast: SendForecast, sender: int, index: int, asker: int) -> float | None:
    """The exact end of the sends of the ``index``-th started task of stage ``sender``, if they run alone
    (see the module docstring) while stage ``asker``'s next task, replayed, starts now, else None."""
    end_s, latest_end_s = forecast.ends(sender)[index]
    if end_s != latest_end_s:  # at op level, running: its end is not known
        return None
    task = forecast.order(sender)[index]
    links, _, _ = forecast.links(sender, task)
    if not links:
        return None
    placement = forecast.placement
    network, now = placement.network, placement.env.now
    start_s = end_s + forecast.latency_s
    if any(placement.dp_in_flight.get(link) for link in links):
        return None
    # Each of its flows (sender's NIC out to a receiver's NIC in) gets at least the least of capacity / flows over
    # its links (max-min: on its bottleneck link, saturated, no flow gets more than it), with no flow joining.
    pending = now <= start_s  # it may not have left (at start_s: maybe not yet in this instant)
    present = {link: network.flows_on(link) for link in set(links)}
    counts = {link: len(flows) + (links.count(link) if pending else 0) for link, flows in present.items()}
    capacity = network.capacities_Bps
    routes = {(links[0], link) for link in links if link[0] == "nic_in"}
    ends = []
    for route in routes:
        # in flight: it (or an earlier send on its route, which its span may meet as well)
        in_flight = [left for on, left in present[route[0]] if on == route]
        if not pending and not in_flight:
            continue
        least_Bps = min(capacity[link] / counts[link] for link in route)
        if pending:
            ends.append(start_s + forecast.nbytes / least_Bps)
        ends.extend(now + left / least_Bps for left in in_flight)
    if not ends:  # it left and landed: its span is over
        return now
    lone_s = max(ends)
    receivers = {link[1] for _, link in routes}
    others = {other for receiver in receivers for other in forecast.senders(receiver)} - receivers - {sender}
    for stage in {sender} | receivers | others:
        if not _quiet_until(forecast, stage, lone_s, sender, index, receivers, asker):
            return None
    return lone_s


def _quiet_until(
    forecast: SendForecast, stage: int, until_s: float, sender: int, index: int, receivers: set[int], asker: int
) -> bool:
    """Whether ``stage`` surely starts no flow on the links of the sends of the ``index``-th task of ``sender``
    (to ``receivers``) before ``until_s``: the sender and the receivers no NIC flow (their next task's first
    begins after it; the asker's next task is the one asking, replayed if it meets nothing: its successor's) and
    every stage no send there (its last started task's, the sender's all on its NIC out, leave after it; a
    later task's leave at its end, after its first NIC flow)."""
    ends, order = forecast.ends(stage), forecast.order(stage)
    now = forecast.placement.env.now
    started = len(ends)
    own_links = stage == sender or stage in receivers  # its NIC flows load the sends' links
    next_start_s = now
    if started:
        end_s, latest_end_s = ends[-1]
        if end_s != latest_end_s:  # an op-level task runs there: its flows and end are not known
            if own_links or _sends_to(forecast, stage, order[started - 1], sender, receivers):
                return False
        elif _leaves_before(forecast, stage, started - 1, until_s, sender, index, receivers):
            return False
        else:
            next_start_s = max(end_s, now)
    if started == len(order):  # its gradient buckets start when its last task ends (on its own links)
        return not own_links
    following = started
    if stage == asker:  # its next task asks: replayed, its sends leave as it ends, and its successor starts then
        if started + 1 == len(order):
            return False
        next_start_s += forecast.duration_s(stage, order[started])
        leaves_s = next_start_s + forecast.latency_s
        if leaves_s < until_s and _sends_to(forecast, stage, order[started], sender, receivers):
            return False
        following += 1
    return next_start_s + forecast.first_flow_s(stage, order[following]) >= until_s


def _leaves_before(
    forecast: SendForecast, stage: int, at: int, until_s: float, sender: int, index: int, receivers: set[int]
) -> bool:
    """Whether the sends of the ``at``-th task of ``stage`` (ended or replayed: its end known), unless it is the
    ``index``-th of ``sender``, may load the sends' links and leave after now and before ``until_s``."""
    if (stage, at) == (sender, index):
        return False
    end_s = forecast.ends(stage)[at][0]
    leaves_s = end_s + forecast.latency_s
    now = forecast.placement.env.now
    return now <= leaves_s < until_s and _sends_to(forecast, stage, forecast.order(stage)[at], sender, receivers)


def _sends_to(forecast: SendForecast, stage: int, task, sender: int, receivers: set[int]) -> bool:
    """Whether ``task`` of ``stage`` sends over the NIC on the sends' links: any output if it is the sender's (its
    NIC out), one to a receiver else."""
    links, _, _ = forecast.links(stage, task)
    return bool(links) and (stage == sender or any(link[0] == "nic_in" and link[1] in receivers for link in links))
