"""The reproduction targets and what each simulates: light enough for the command line's help."""

from __future__ import annotations

TARGETS = {  # what each target simulates, for reproduce --help
    "table3": "Table 3: strong scaling of the 352B model, 240-1,440 H800, MegaScale-MoE vs Megatron-LM",
    "weak-scaling": "Fig. 12: weak scaling, batch 360 -> 1,080 as GPUs go 480 -> 1,440",
    "table5": "Table 5: ablation at 240 GPUs (TP+TP -> SP+EP -> inter-op -> intra-op overlap)",
    "fig7": "Fig. 7: Mixtral-8x7B dispatch collectives in one node against top-k",
    "fig14": "Fig. 14: single node, SP+EP vs TP+TP MFU and SP's memory cost, models M1-M6",
    "fig16": "Fig. 16: intra-operator overlap, fused GEMM + collective against unfused, M1-M6",
    "fig17": "Fig. 17: selective activation rematerialization (SAR) on Mixtral-8x7B and 8x22B",
    "scaleup-domain": "beyond the paper: what a larger NVLink domain (8 -> 72 GPUs) buys the 352B model",
    "r-ratio": "beyond the paper: Sec. 7's R against the simulated hidden share of EP time",
    "layouts-ep": "beyond the paper: in-node vs cross-node EP as the NIC gets faster, M1 and M6",
    "skew": "beyond the paper: Zipf expert load, dropless vs capacity 1.25 (throughput, copies dropped)",
    "validation": "moesim validate: published runs of other models, clusters and frameworks (the corpus)",
    "schedules": "beyond the paper: DeepSeek-V3 on 2,048 H800 under 1F1B, ZB1P, DualPipe, DualPipeV, EP overlap",
    "moe-layer": "beyond the paper: one MoE layer on one H100 against SonicMoE's measured kernels (Fig. 14)",
    "moe-perf": "beyond the paper: one MoE layer on 8 H100, alltoall / DeepEP / HybridEP, Megatron-LM's perf test",
    "blackwell": "out of the corpus: 76 published B200, B300, GB200, GB300 runs, MoE and dense (they band Blackwell runs)",
}


def targets_epilog() -> str:
    """The targets, one line each, for reproduce --help."""
    return (
        "targets:\n"
        + "\n".join(f"  {name:<15} {TARGETS[name]}" for name in TARGETS)
        + ("\n  all             every target above, then the calibration section of REPRODUCTION.md")
    )
