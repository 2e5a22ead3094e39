"""Speed shortcuts around the engine, exact or bounded and tested against the full run: the steady-state
step runner (steady.py: it calls the engine; periodic.py: the lock check; ledger.py: a probe of its runs; where no
state repeats in budget, within a stated bound, run_line.py: the line along a failed attempt's steady periods where
its stages keep one pace, else bounded.py: the line through two full runs).
May import: simulator.engine and everything below it; the engine never imports this package.

The speed switches (module-level, each True by default; False runs the reference path a test compares with). These
four are all there are; each paid for itself in issue 38's ablation (CPU s with it off / on, 2-core machine):

- ``simulator.fast.steady.ONE_RUN``: extrapolate from the ledger of one shorter run, not from two runs
  (tests/differential/test_one_run.py). Qwen3-235B bench step 2.2x, Table 3 steps 1.4x.
- ``simulator.streams.tasks.CLOSED``: a multi-stream task on a link of its own laid out at its start as arithmetic
  (simulator/streams/closed_task.py; tests/scenarios/test_closed_task.py). Op-level Table 3 step on 1,440 GPUs 2.0x.
- ``simulator.streams.tasks.QUIET``: a stream that runs alone times its ops as arithmetic, beside NIC flows too
  (tests/scenarios/test_quiet_streams.py). DeepSeek-V3 on 2,048 H800 (cross-node EP at op level) 1.2x.
- ``simulator.engine.gc_budget.ENABLED``: fewer cyclic-garbage collections while a step runs, and fewer full ones
  through a job of many steps (tests/differential/test_gc_budget.py). 1.1x on op-level steps; `moesim search` of
  mixtral-8x7b on 128 H100s (1 job) 41.8 -> 37.3 CPU s.

Removed for gaining less than their lines (the same CSVs without them): the NIC replay with its send forecast and
lone send (1.2-1.3x on the Qwen3-235B step, whose steady shortcut locks either way; 2.6x on DeepSeek-V3's 32
micro-batches, which run in full), the leaner simpy environment (3-4%), prompt GPU turns (0-1%), batched compute
runs (4-8%), and QUIET_BESIDE_NIC as a switch of its own (now part of QUIET).
"""
