"""A pipeline's steady state repeats: shorter runs of a schedule, a check that their state repeats, and
additive fields extrapolated from them.

Every schedule (workloads/schedules/base.py) is warm-up, a steady state whose task order repeats once per
``period`` micro-batches (q: 1, interleaved 1F1B pp, DualPipe 2), and cool-down; the order at m + q is the
order at m with one more period inserted in its steady state. A step is deterministic and time-invariant, so
once its state repeats (every stage's tasks of one period start and end exactly lambda after those of the
period before, over a window longer than any task's and send's reach, and no DP parameter gather still in
flight), every further period repeats it too: the step at m + kq is the step at m with k periods inserted,
shifted by k lambda. Every additive quantity (end times, busy and waiting time, exposed communication,
bytes, FLOPs, task counts) is then f(m) + k (f(m + q) - f(m)), and f(m + q) - f(m) is what the run at m adds
over one period of its repeated state (simulator/fast/ledger.py; simulator/fast/steady.py reads it there, or runs m + q).

``candidates`` picks the counts m_a (doubling from just past the warm-up, congruent to m modulo q or 2 q) whose
two runs at m_a and m_a + q cost less than the full step, trying first, where a run that did not lock says it was
a few periods short of a window (``periods_short``: its transient settled too close to its cool-down), the count
that many periods longer; ``locked`` checks the run at m_a for a repeated state; ``extrapolate`` evaluates the
line through two runs. Where no state repeats within that budget (a long transient: a stage's slack shrinking by
a little each period until it waits, which three points on a line would not catch; or a cycle of many periods:
DeepSeek-V3's 1F1B on 2,048 H800s, cross-node EP 64, repeats every 13 micro-batches, not every 1 or 2: seen in a
run of 80, too long for a shorter run to catch), the full step runs. The bound is stated and tested
(tests/differential/test_steady.py): 1e-9 relative against the full run; the lock's tolerance (``LOCK_REL`` of the step) is
far below it.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Hashable, Iterator, Mapping, Sequence
from types import MappingProxyType

from topologies.errors import ConfigError
from workloads.schedules.base import FORWARD, Schedule, Task

LOCK_REL = 1e-12  # a repeated task's shift may differ from lambda by this much of the run's end (float noise)
PERIOD_SEARCH = 64  # the longest period looked for (interleaved 1F1B's is pp)
# Short periods (1F1B's and ZB1P's 1, DualPipe's 2) keep the shorter runs congruent to the step modulo 2 q, at
# most q micro-batches more, so that a state that alternates two timings (DualPipeV's) locks on 2 q; longer ones
# (interleaved 1F1B's pp) modulo q, where that margin would cost a whole period's run.
ALTERNATING_MAX_PERIOD = 2
# A transient decays geometrically where each period's offset is at most this fraction of the one before
# (``settling_periods``; the combined 1F1B's NIC-bound F&B tasks halve theirs, DeepSeek-V3's 1F1B stage 0 -0.14)
DECAY_MAX = 0.7
EMPTY: Mapping[int, int] = MappingProxyType({})  # candidates' default: no count suggested

# A field: (unit, name...) -> value; each unit has its own noise floor.
Fields = dict[tuple[Hashable, ...], float]
TIME, BYTES, FLOPS, COUNT = "s", "B", "flop", "n"  # the units
Records = Sequence[Sequence[tuple[Task, float, float]]]  # per stage: (task, begin_s, end_s) in run order


def valid_count(schedule: Schedule, micro_batches: int) -> bool:
    """Whether the schedule runs with ``micro_batches`` micro-batches."""
    if micro_batches < 1:
        return False
    try:
        schedule.resized(micro_batches).check()
    except ConfigError:
        return False
    return True


def period(schedule: Schedule) -> int | None:
    """The schedule's period q (interleaved: pp; DualPipe: 2; else 1): from its definition, the micro-batches one
    steady period of its task order takes (``Schedule.steady_cut``); for a schedule that does not define it, the
    smallest q with the schedule valid at m and m + q."""
    cut = schedule.steady_cut(0)
    if cut is not None:
        return cut.period
    m = schedule.micro_batches
    return next((q for q in range(1, PERIOD_SEARCH + 1) if valid_count(schedule, m + q)), None)


def index_step(schedule: Schedule, m: int, q: int) -> int:
    """How many more forward micro-batches stage 0's chunk 0 runs per period (q; DualPipe, whose micro-batches
    enter from both ends, q / 2): the micro-batch index shift between a task and its twin one period later."""

    def count(micro_batches: int) -> int:  # from the task counts by kind (the halves of a kind are its tasks')
        kinds = schedule.resized(micro_batches).kind_counts(0)
        return sum(
            n * (half[0] == FORWARD and half[2] == 0) for kind, n in kinds.items() for half in Schedule.halves(kind)
        )

    return count(m + q) - count(m)


def task_counts(schedule: Schedule) -> dict[tuple[int, Task], int]:
    """How many tasks of each kind (stage, task with micro-batch indices 0) the schedule runs, stage by stage in the
    order of their first appearance, without building its m-long orders (``Schedule.kind_counts``)."""
    return {(stage, kind): n for stage in range(schedule.stages) for kind, n in schedule.kind_counts(stage).items()}


def candidates(
    schedule: Schedule, longer: Mapping[int, int] = EMPTY, one_run: bool = False
) -> Iterator[tuple[int, int, int]]:
    """(m_a, q, index shift) to try in turn: m_a doubling from just past the warm-up, congruent to m modulo q
    (twice q where q <= ALTERNATING_MAX_PERIOD: steady/state_periods then also tries 2 q), while the runs tried
    so far and the runs at m_a and m_a + q cost less than the full step's m (``one_run``: the runs so far and the
    run at m_a at most half of m, for a caller that extrapolates from its ledger alone and whose fallback is the full
    step: it runs m_a + q only where that too fits). Where the caller has put in
    ``longer`` (read once m_a is done) a count the run at m_a found it was short of (``periods_short``), the
    first congruent count from there comes next if it is below the doubled one and its runs fit in the budget as a
    count's must (once: the doubling then goes on from m_a where it still fits; a wrong guess costs at most what the
    budget, the caller's cap or one_run's half step, allows: DeepSeek-V3's 1F1B on 2,048 H800s at 128 micro-batches
    runs 22 then the 28 it names, not 44)."""
    q = period(schedule)
    if q is None:
        return
    shift = None
    m = schedule.micro_batches
    step = 2 * q if q <= ALTERNATING_MAX_PERIOD else q
    # Past every schedule's warm-up and cool-down (1F1B fills in pp - 1 micro-batches, interleaved in about
    # pp + (pp - 2) / v, ZB1P defers up to pp - 1 W passes, DualPipe(V) needs 2 pp before its steady state runs
    # once, 3 pp to lock: Schedule.fill_per_stage), with room for the lock's window and its twins (two periods)
    # and 3 micro-batches for the reach and the cool-down (1F1B's start is pp + 5, as with three periods before).
    start, spent = schedule.fill_per_stage * schedule.stages + 3 + 2 * q, 0

    def fits(count: int) -> bool:
        # one_run also admits a run that leaves the runs so far at most half the step's: one that does not lock
        # then costs at most half the step again (its fallback is the full step), one that does saves half of it
        return spent + 2 * count + q < m or (one_run and 2 * (spent + count) <= m)

    while True:
        m_a = _congruent(schedule, start + (m - start) % step, q)
        if not (fits(m_a) and valid_count(schedule, m_a) and valid_count(schedule, m_a + q)):
            return
        if shift is None:
            shift = index_step(schedule, m_a, q)
        yield m_a, q, shift
        spent += m_a
        start = 2 * m_a
        wanted = longer.get(m_a)
        if wanted is None or wanted <= m_a:
            continue
        m_b = _congruent(schedule, m_a + step * math.ceil((wanted - m_a) / step), q)
        doubled = _congruent(schedule, start + (m - start) % step, q)
        if m_b < doubled and fits(m_b) and valid_count(schedule, m_b + q):
            yield m_b, q, shift
            spent += m_b


def _congruent(schedule: Schedule, m_a: int, q: int) -> int:
    """The first count from ``m_a`` on, in steps of q, that the schedule runs (or the step's, if none is below)."""
    while not valid_count(schedule, m_a) and m_a < schedule.micro_batches:
        m_a += q
    return m_a


def shift_s(records: Records, q: int) -> float:
    """The most common shift between a task's begin and its one-period-later twin's (lambda, if locked)."""
    counts: dict[float, int] = {}
    for stage in records:
        begins = {task: begin for task, begin, _ in stage}
        for task, begin, _ in stage:
            twin = begins.get(shifted(task, q))
            if twin is not None:
                key = round(twin - begin, 9)
                counts[key] = counts.get(key, 0) + 1
    if not counts:
        return 0.0
    key = max(counts, key=counts.__getitem__)
    # The exact shift of the latest-beginning task that has it: a transient that decays geometrically (the
    # combined 1F1B's NIC-bound F&B tasks halve their offset each period) still rounds to the key for a
    # while, off lambda by more than LOCK_REL; the last task is the most settled.
    latest: tuple[float, float] | None = None
    for stage in records:
        begins = {task: begin for task, begin, _ in stage}
        for task, begin, _ in stage:
            twin = begins.get(shifted(task, q))
            if twin is not None and round(twin - begin, 9) == key and (latest is None or begin > latest[0]):
                latest = (begin, twin - begin)
    return latest[1] if latest is not None else 0.0


def shifted(task: Task, q: int) -> Task:
    """The same task one period (micro-batch indices q higher) later."""
    paired = (task.paired[0] + q, task.paired[1]) if task.paired is not None else None
    return Task(task.direction, task.micro_batch + q, task.chunk, paired)


def lock_window(
    records: Records, q: int, lam_s: float, after_s: float, send_reach_s: float = 0.0
) -> tuple[float, float] | None:
    """The first window [t0, t1) after ``after_s`` of the run that repeats (None if none does): every task of
    every stage that begins in [t0, t1 = t0 + lambda + R) has its one-period-later twin beginning and ending
    exactly ``lam_s`` later, and each stage runs as many tasks in the window shifted by lambda.

    R, the reach, is the longest task plus ``send_reach_s`` (the longest PP send, from its sender's end to its
    landing). At T = t0 + R every task in flight began in the window (at most a task before T), and so did the
    sender of every send in flight (it ended at most a send before T); the tasks that begin over [T, T + lambda)
    are the window's rest. Their twins repeat them lambda later, so the state at T + lambda (what runs, each
    at the same point of its task or send; an input that landed earlier than its task could begin times
    nothing) is the state at T one period on, and the step runs on from both alike until its cool-down. The
    check sees tasks' begins and ends, not their ops': that equal ends mean equal insides (a task's flows beside
    a send) is the premise, tested against full runs of every schedule (tests/differential/test_steady.py)."""
    end_s = max((end for stage in records for _, _, end in stage), default=0.0)
    tol = LOCK_REL * end_s
    if lam_s <= tol:
        return None
    span = window_span(records, lam_s, send_reach_s)
    begins = [[begin for _, begin, _ in stage] for stage in records]
    bad = unrepeated(records, q, lam_s, tol)
    for t0 in sorted(b for stage in begins for b in stage if b >= after_s - tol):
        t1 = t0 + span
        if t1 + lam_s > end_s:
            return None
        nxt = bisect_left(bad, t0 - tol)
        if nxt < len(bad) and bad[nxt] < t1:
            continue
        if all(
            bisect_left(b, t1) - bisect_left(b, t0 - tol)
            == bisect_left(b, t1 + lam_s) - bisect_left(b, t0 + lam_s - tol)
            for b in begins
        ):
            return t0, t1
    return None


def window_span(records: Records, lam_s: float, send_reach_s: float) -> float:
    """t1 - t0 of a lock window: one period plus the reach (the longest task and PP send; ``lock_window``)."""
    return lam_s + max(end - begin for stage in records for _, begin, end in stage) + send_reach_s


def unrepeated(records: Records, q: int, lam_s: float, tol_s: float) -> list[float]:
    """The sorted begins of the tasks (every stage's) without a twin beginning and ending ``lam_s`` (to ``tol_s``)
    later: what a lock window may not hold."""
    bad: list[float] = []
    for stage in records:
        seen = {task: (begin, end) for task, begin, end in stage}
        for task, begin, _ in stage:
            offset = _offset(seen, task, q, lam_s)
            if offset is None or offset > tol_s:
                bad.append(begin)
    bad.sort()
    return bad


def periods_short(records: Records, q: int, lam_s: float, after_s: float, send_reach_s: float = 0.0) -> int | None:
    """How many periods longer than this run (which did not lock) a run would have to be for ``lock_window`` to
    find a window, as this run predicts it (None without a lambda).

    A run k periods longer is this one with k periods inserted in its steady state: what runs before the
    insertion is the same, what runs after it (the cool-down, and the tasks whose twins run in it) k lambda
    later. A window from t0 then needs the first unrepeated task from t0 on, and the run's end a period after
    the window, to have moved past its end; the answer is the fewest periods over every t0 (at least 1) from
    which every stage runs a repeated task before that first unrepeated one (else no stage's rhythm says that
    lambda is the steady state's: a run too short for any, as a straggler's interleaved 1F1B at 16 micro-
    batches, whose most common shift is still the warm-up's). It is a guess (it takes the unrepeated task
    after the window for the cool-down's, where it may be a transient's that pauses), which the longer run's
    own lock check confirms or refutes. It catches a transient that settles a little too late for this run
    (Qwen3-235B on 256 H100s at compute_residual 1: 0.81 s between its last unrepeated task and the
    cool-down's first at 32 micro-batches, the window 0.99 s; 40 locks), where doubling costs more. Where a
    transient still decays geometrically, ``settling_periods`` says how long it has yet to run: the larger guess."""
    end_s = max((end for stage in records for _, _, end in stage), default=0.0)
    tol = LOCK_REL * end_s
    if lam_s <= tol:
        return None
    span = window_span(records, lam_s, send_reach_s)
    bad = unrepeated(records, q, lam_s, tol)
    begins = [sorted(begin for _, begin, _ in stage) for stage in records]
    fewest: int | None = None
    for t0 in sorted(b for stage in begins for b in stage if b >= after_s - tol):
        nxt = bisect_left(bad, t0 - tol)
        stop = bad[nxt] if nxt < len(bad) else end_s
        if not all(bisect_left(b, stop) > bisect_left(b, t0 - tol) for b in begins):
            continue  # a stage that runs no task repeated from t0 on: no evidence that it keeps lambda's rhythm
        needed = (t0 + span + lam_s - end_s) / lam_s
        if nxt < len(bad):
            needed = max(needed, (t0 + span - stop) / lam_s)
        k = max(1, math.ceil(needed))
        fewest = k if fewest is None else min(fewest, k)
    settling = settling_periods(records, q, lam_s, after_s, send_reach_s)  # a transient that decays still
    return settling if fewest is None else fewest if settling is None else max(fewest, settling)


def settling_periods(records: Records, q: int, lam_s: float, after_s: float, send_reach_s: float = 0.0) -> int | None:
    """How many periods longer than this run (which did not lock) a run would have to be for ``lock_window`` to find a
    window where the run's steady tasks still carry a transient that decays geometrically (None where none does).

    A task's offset is how far its twin's begin and end are from one period (lambda) after its own. A transient
    decays geometrically where each period's offset is at most DECAY_MAX of the one before (DeepSeek-V3's 1F1B on
    2,048 H800s: stage 0's offsets 1.1e-4, -1.5e-5, 2.2e-6, ... s, a factor of -0.14 a period, still 6e-9 s at the
    cool-down of a 22-micro-batch run, where LOCK_REL wants 6e-12). A run k periods longer has the same tasks before
    the insertion point, so its transient goes on decaying at that rate through the inserted periods: each offset
    falls under the lock's tolerance log(tol / offset) / log(ratio) periods after its task, and the cool-down (the
    first task with no twin or an offset that does not decay) comes k lambda later. The window then needs the
    settled tasks, a window's span and one period before the cool-down and the run's end. A guess, as
    ``periods_short``'s: the longer run's own lock check confirms or refutes it."""
    end_s = max((end for stage in records for _, _, end in stage), default=0.0)
    tol = LOCK_REL * end_s
    if lam_s <= tol or not 0.0 < tol < math.inf:
        return None
    settled_s, cooldown_s = -math.inf, end_s
    for stage in records:
        seen = {task: (begin, end) for task, begin, end in stage}
        for task, begin, _ in stage:
            now = _offset(seen, task, q, lam_s)
            if begin < after_s - tol or (now is not None and now <= tol):
                continue
            before, after = _offset(seen, shifted(task, -q), q, lam_s), _offset(seen, shifted(task, q), q, lam_s)
            ratio = None
            if now is None:
                pass  # no twin: the cool-down
            elif before is not None and before > tol:
                ratio = now / before if now <= DECAY_MAX * before else None
            elif after is not None and tol < after <= DECAY_MAX * now:
                ratio = after / now  # the head of a decaying run of offsets
            if ratio is None:
                cooldown_s = min(cooldown_s, begin)
            else:
                settled_s = max(settled_s, begin + math.ceil(math.log(tol / now) / math.log(ratio)) * lam_s)
    if settled_s == -math.inf:
        return None
    t0 = max(settled_s, after_s)
    span = window_span(records, lam_s, send_reach_s)
    needed = max(t0 + span - cooldown_s, t0 + span + lam_s - end_s) / lam_s
    return max(1, math.ceil(needed)) if math.isfinite(needed) else None


def _offset(seen: Mapping[Task, tuple[float, float]], task: Task, q: int, lam_s: float) -> float | None:
    """How far ``task``'s one-period-later twin begins or ends from lambda after it (None: either is not in ``seen``)."""
    here, twin = seen.get(task), seen.get(shifted(task, q))
    if here is None or twin is None:
        return None
    return max(abs(twin[0] - here[0] - lam_s), abs(twin[1] - here[1] - lam_s))


def locked(records: Records, q: int, lam_s: float, after_s: float, send_reach_s: float = 0.0) -> bool:
    """Whether some window after ``after_s`` of the run repeats (``lock_window``)."""
    return lock_window(records, q, lam_s, after_s, send_reach_s) is not None


def extrapolate(fa: Fields, fb: Fields, m_a: int, m_b: int, target: int) -> Fields:
    """Every field at ``target`` micro-batches on the line through its values at m_a and m_b (missing: 0)."""
    steps = (target - m_a) / (m_b - m_a)
    return {name: fa.get(name, 0.0) + (fb.get(name, 0.0) - fa.get(name, 0.0)) * steps for name in {**fa, **fb}}
