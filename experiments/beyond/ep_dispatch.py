"""EP dispatch and combine alone, HybridEP against NCCL's all-to-all, on H100 and GB200, EP 8 to 64: the
Megatron-Core MoE report's Table 7 against the simulator. A check, not a fit: nothing here feeds the simulator.

Measured: NVIDIA, "Scalable Training of Mixture-of-Experts Models with Megatron Core", arXiv 2603.07685v1, Sec. 4.2.2,
Table 7 ("EP Scaling Performance for HybridEP and all-to-all (in us)"): hidden 7,168, sequence length 4,096, 256
experts, EP 8 / 16 / 32 / 64 on GB200 (NVL72: every EP size inside one NVLink domain) and on H100 (8 per node: EP 16
and up across nodes). "The table reports communication latency only". Not stated: the top-k, the routing, the
precision and how the latency was timed. Simulated here: 4,096 BF16 tokens per rank with top-8 routing forced to balance,
twice, because the routing changes what HybridEP sends (one copy per destination rank or node, not per expert):
unrestricted (as HybridEP's own benchmark, deepseek-ai/DeepEP hybrid-ep docs/README_Hybrid-EP.md: random-uniform
router, top-8) and DeepSeek-V3's group-limited routing (8 groups, group top-4: moesim's node-limited routing, a group
per node, as experiments/validation/moe_perf.py). One forward MoE layer is built from Megatron-LM flags
(--moe-token-dispatcher-type alltoall, or flex with --moe-flex-dispatcher-backend hybridep) and the span of its
``ep_a2a_dispatch`` / ``ep_a2a_combine`` op is read from the layer's forward task timed alone (simulator.engine.
timing.time_task). NCCL's all-to-all of the probs (the alltoall dispatcher's second collective) is not counted.

``python -m experiments.beyond.ep_dispatch`` prints the table.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.costs.calibration import BENCHMARK_CALIBRATION, Calibration
from simulator.engine.timing import time_task
from simulator.report.simulate import prepare
from workloads.dispatchers.registry import DISPATCHERS
from workloads.inputs.huggingface.config import model_from_hf_dict
from workloads.inputs.megatron import parse_megatron_args
from workloads.schedules.base import FORWARD, Task

SOURCE = "arXiv 2603.07685v1 (Megatron-Core MoE report) Table 7, us"
TOKENS = 4096  # per rank
EP_SIZES = (8, 16, 32, 64)
ALLTOALL, HYBRIDEP = "alltoall", "flex-hybridep"
# (cluster, dispatcher) -> dispatch us, combine us at EP 8 / 16 / 32 / 64 (Table 7)
MEASURED_US: dict[tuple[str, str], tuple[tuple[int, ...], tuple[int, ...]]] = {
    ("gb200", HYBRIDEP): ((391, 578, 612, 675), (353, 527, 646, 744)),
    ("gb200", ALLTOALL): ((735, 743, 769, 930), (741, 765, 758, 827)),
    ("h100", HYBRIDEP): ((661, 1485, 3064, 4626), (624, 1688, 3088, 4398)),
    ("h100", ALLTOALL): ((1265, 5774, 8059, 9164), (1277, 5628, 7815, 8727)),
}
# DeepSeek-V3's MoE layer (hidden 7,168, 256 experts of width 2,048, top-8) as a one-layer config; its attention
# is not timed
_CONFIG: dict[str, object] = {
    "model_type": "qwen2_moe",
    "hidden_size": 7168,
    "head_dim": 128,
    "num_attention_heads": 8,
    "num_key_value_heads": 8,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "num_experts": 256,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 1,
    "vocab_size": 32000,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
    "max_position_embeddings": TOKENS,
    "rms_norm_eps": 1e-6,
}


# routing -> its Megatron-LM flags (top-8 forced to balance either way)
ROUTINGS = {"top-8": "", "group-limited": "--moe-router-num-groups 8 --moe-router-group-topk 4"}


@dataclass(frozen=True)
class DispatchRow:
    """One (GPU, dispatcher, EP size): measured dispatch and combine and, per routing, simulated, in us."""

    cluster: str
    dispatcher: str
    ep: int
    dispatch_us: float
    combine_us: float
    simulated_us: dict[str, tuple[float, float]]  # routing -> (dispatch, combine)

    def errors(self, routing: str) -> tuple[float, float]:
        """Simulated / measured - 1 of the dispatch and of the combine under ``routing``."""
        dispatch, combine = self.simulated_us[routing]
        return dispatch / self.dispatch_us - 1, combine / self.combine_us - 1


def _megatron_args(dispatcher: str, ep: int, routing: str) -> str:
    return (
        f"--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --expert-model-parallel-size {ep} "
        f"--micro-batch-size 1 --global-batch-size {ep} --seq-length {TOKENS} --bf16 --swiglu --disable-bias-linear "
        "--moe-grouped-gemm --moe-permute-fusion --moe-router-fusion --moe-router-force-load-balancing "
        f"{ROUTINGS[routing]} {DISPATCHERS[dispatcher].megatron}"
    )


def simulated_us(
    cluster: str, dispatcher: str, ep: int, routing: str, calibration: Calibration = BENCHMARK_CALIBRATION
) -> tuple[float, float]:
    """The dispatch and combine all-to-alls of one forward MoE layer on ``ep`` GPUs, each op's span in us."""
    run = parse_megatron_args(_megatron_args(dispatcher, ep, routing)).resolve(model_from_hf_dict(_CONFIG, "table7"))
    workload, spec, _ = prepare(run.model, run.layout, ep, cluster, ep, TOKENS, None, True, calibration)
    task = time_task(workload, spec, 0, Task(FORWARD, 0, 0), calibration)
    span = {timed.op.name: (timed.end_s - timed.start_s) * 1e6 for timed in task.ops}
    return span["ep_a2a_dispatch"], span["ep_a2a_combine"]


def rows(calibration: Calibration = BENCHMARK_CALIBRATION) -> list[DispatchRow]:
    """Every cell of Table 7 beside its simulation under each routing."""
    out = []
    for (cluster, dispatcher), (dispatch, combine) in MEASURED_US.items():
        for i, ep in enumerate(EP_SIZES):
            sim = {routing: simulated_us(cluster, dispatcher, ep, routing, calibration) for routing in ROUTINGS}
            out.append(DispatchRow(cluster, dispatcher, ep, dispatch[i], combine[i], sim))
    return out


def table(calibration: Calibration = BENCHMARK_CALIBRATION) -> str:
    head = ("GPU", "dispatcher", "EP", "dispatch", "combine", *(f"{r} (sim., errors)" for r in ROUTINGS))
    lines = [
        f"EP dispatch / combine alone, measured ({SOURCE}) against simulated (dispatch = combine in the simulator)",
        "{:6} {:14} {:>3} {:>8} {:>8}   {:28} {:28}".format(*head),
    ]
    for row in rows(calibration):
        cells = []
        for routing in ROUTINGS:
            (dispatch, _), (d_err, c_err) = row.simulated_us[routing], row.errors(routing)
            cells.append(f"{dispatch:6,.0f} {d_err:+5.0%} {c_err:+5.0%}")
        lines.append(
            f"{row.cluster:6} {row.dispatcher:14} {row.ep:3d} {row.dispatch_us:8,.0f} {row.combine_us:8,.0f}   "
            f"{cells[0]:28} {cells[1]}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
