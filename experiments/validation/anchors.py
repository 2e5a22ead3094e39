"""Kernel times measured on a GPU (benchmarks/device_anchors.py) beside the simulator's price for the same shapes.

`python -m experiments.validation.anchors anchors.json [--gpu h200]` prints, for every measured entry, the measured time, the
simulator's (at the published kernel speeds and benchmark clocks: simulator.costs.calibration.BENCHMARK_CALIBRATION,
the level the tables were measured at; the GPU preset named), and measured / simulated: above 1 the simulator is
fast there. The sustained entry gives the measured sustained / burst throughput beside
Calibration.sustained_clock_fraction; the host entries the CPU time per issued kernel beside what moesim charges
such a kernel (host_comparison); the kernel-overhead and small-copy entries a kernel's fixed time plus its bytes at
the achievable HBM rate; the permutation entries price each kernel as one HBM pass over the routed
copies read and one written at Calibration.memory_efficiency, which is what the simulator charges (the atomic
scatter-adds of the backward included) and what no published H100 measurement checks. A diagnostic: nothing
here feeds the simulator.
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import dataclass
from pathlib import Path

from simulator.costs.calibration import BENCHMARK_CALIBRATION, DEFAULT_CALIBRATION, Calibration
from simulator.costs.kernels import attention_time_s, gemm_time_s, memory_time_s
from topologies.hardware import GpuSpec, gpu_preset
from workloads.inputs.bounded_read import read_bounded
from workloads.ops import AttentionShape, Gemm, GemmPrecision, GroupedDim

# The FlashAttention convention the simulator counts attention FLOPs in (non-causal): forward 4 s^2 d per head,
# backward 2.5x that (workloads/recipes/layers.py).
ATTENTION_BACKWARD_FACTOR = 2.5


@dataclass(frozen=True)
class Comparison:
    """One measured kernel (or a sustained run) beside the simulator's time for it."""

    label: str
    measured_s: float
    simulated_s: float

    @property
    def ratio(self) -> float:
        """Measured over simulated: 1.2 = the GPU took 20% longer than the simulator charges."""
        return self.measured_s / self.simulated_s


def _gemm(entry: dict) -> Gemm:
    kind = entry["kind"]
    if kind == "dense":
        return Gemm(entry["m"], entry["n"], entry["k"])
    if kind == "fp8_tensorwise":
        return Gemm(entry["m"], entry["n"], entry["k"], precision=GemmPrecision.FP8_TENSORWISE)
    if kind == "grouped":
        return Gemm(entry["rows"], entry["n"], entry["k"], groups=entry["groups"])
    return Gemm(entry["m"], entry["n"], entry["rows"], groups=entry["groups"], grouped=GroupedDim.REDUCTION)


def compare(entry: dict, gpu: GpuSpec, cal: Calibration = BENCHMARK_CALIBRATION) -> list[Comparison]:
    """The comparisons one entry of the measurement file gives (none for a failed measurement)."""
    if "error" in entry:
        return []
    kind, label = entry["kind"], entry["label"]
    if kind in ("dense", "fp8_tensorwise", "grouped", "grouped_wgrad"):
        return [Comparison(label, entry["seconds"], gemm_time_s(_gemm(entry), gpu, cal))]
    if kind in ("copy", "small_copy"):
        return [Comparison(label, entry["seconds"], memory_time_s(entry["bytes_moved"], 1, gpu, cal))]
    if kind == "permutation":
        one_pass_s = memory_time_s(2 * entry["routed_bytes"], 1, gpu, cal)
        return [
            Comparison(f"{label}: {name}", entry[f"{name}_seconds"], one_pass_s)
            for name in ("gather", "index_add", "scatter_add")
        ]
    if kind == "attention":
        d, seq_len = entry["head_dim"], entry["seq_len"]
        forward_flops = 4.0 * entry["heads"] * seq_len**2 * d
        comparisons = []
        for part, factor in (("fwd", 1.0), ("bwd", ATTENTION_BACKWARD_FACTOR)):
            for family in ("fa3", "fa2", "cudnn"):
                shape = AttentionShape(d, d, seq_len, causal=True, kernel=family)
                simulated = attention_time_s(forward_flops * factor, part == "bwd", gpu, cal, shape)
                comparisons.append(Comparison(f"{label} {part} ({family})", entry[f"{part}_seconds"], simulated))
        return comparisons
    if kind == "sustained":
        return [sustained_comparison(entry)]
    if kind == "host_launch":
        return [host_comparison(entry, cal)]
    if kind == "kernel_overhead":
        overhead_s = cal.kernel_overhead_s if entry["replay"] == "stream" else cal.graph_kernel_overhead_s
        return [Comparison(label, entry["seconds"], memory_time_s(entry["bytes_moved"], 1, gpu, cal, overhead_s))]
    raise ValueError(f"unknown measurement kind {kind!r}")


def sustained_comparison(entry: dict, cal: Calibration = DEFAULT_CALIBRATION) -> Comparison:
    """The settled GEMM's time (the median window of the second half, once the clock has settled) against the
    burst's time over the sustained clock fraction a training step runs at (the default calibration's)."""
    flop = 2.0 * entry["m"] * entry["n"] * entry["k"]
    windows = entry["windows"]
    settled = statistics.median(w["tflops"] for w in windows[len(windows) // 2 :]) * 1e12
    return Comparison(
        f"{entry['label']}: one GEMM, settled against burst (sustained_clock_fraction {cal.sustained_clock_fraction})",
        flop / settled,
        entry["burst_seconds"] / cal.sustained_clock_fraction,
    )


def host_comparison(entry: dict, cal: Calibration) -> Comparison:
    """The host's CPU time per kernel it issued (per call over the kernels the profiler counted, else one per tensor)
    against what moesim charges such a kernel: a torch op issued from Python, ``torch_host_launch_s`` (the bare
    torch op of stacks without TE); a kernel of a C++ loop, ``host_launch_s`` (what each per-expert kernel of TE's
    C++ loops is charged today: one TE module's host time)."""
    kernels = entry["kernels_per_call"] or entry["tensors"]
    if entry["issued_by"] == "python":
        charged_s, charge = cal.torch_host_launch_s, "torch_host_launch_s"
    else:
        charged_s, charge = cal.host_launch_s, "host_launch_s"
    label = f"{entry['label']}: CPU per kernel ({kernels} a call) against {charge}"
    return Comparison(label, entry["cpu_s_per_call"] / kernels, charged_s)


def table(measured: dict, gpu: GpuSpec, cal: Calibration = BENCHMARK_CALIBRATION) -> str:
    """One line per comparison: label, measured, simulated, ratio; failed measurements with their errors."""
    device = measured.get("device", {})
    lines = [
        f"measured on {device.get('gpu', '?')} (torch {device.get('torch', '?')}), simulated on the {gpu.name} preset",
        f"{'kernel':<78} {'measured':>10} {'simulated':>10} {'ratio':>6}",
    ]
    for entry in measured["entries"]:
        if "error" in entry:
            lines.append(f"{entry['label']:<78} failed: {entry['error'][:80]}")
        for c in compare(entry, gpu, cal):
            lines.append(
                f"{c.label[:78]:<78} {c.measured_s * 1e3:>8.3f}ms {c.simulated_s * 1e3:>8.3f}ms {c.ratio:>6.2f}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("measurements", type=Path, help="the JSON benchmarks/device_anchors.py wrote")
    parser.add_argument("--gpu", default="h200", help="GPU preset to price the shapes on (default h200)")
    args = parser.parse_args(argv)
    print(table(json.loads(read_bounded("measurements", args.measurements, "json_bytes")), gpu_preset(args.gpu)))


if __name__ == "__main__":
    main()
