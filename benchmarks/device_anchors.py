"""Kernel times measured on a real Hopper GPU, for `python -m experiments.validation.anchors` to set beside the simulator's.

Runs where there is a GPU and PyTorch (the device machine some sessions are lent; not a test, not installed with
the package): `python3 benchmarks/device_anchors.py --out anchors.json`, about two minutes. Each entry is one
shape the simulator prices from published tables or an assumption, timed with CUDA events (median of repeated
runs after warm-ups; a "sustained" entry runs one GEMM back to back for tens of seconds):

- dense BF16 GEMMs at torch-performance-test-data #79's 8192^3 / 10240^3 and a 352B FC1 shape;
- the sustained clock: 10240^3 for 20 s, TFLOP/s and SM clock per second (Calibration.sustained_clock_fraction);
- BF16 grouped GEMMs (torch._grouped_mm) at Qwen3-30B-A3B's and the paper's 352B expert shapes, forward and the
  k-grouped weight gradient;
- FP8 per-tensor-scaled GEMMs (torch._scaled_mm) at Qwen3-30B-A3B's per-expert shapes;
- memory-bound kernels (Calibration.memory_efficiency): a device copy, and the token permutation's gather
  (index_select) and its backward's atomic scatter-add (index_add_, scatter_add_) at SonicMoE's 30B point and
  one Qwen3-30B-A3B micro-batch, which no published H100 measurement gives;
- FlashAttention through SDPA (flash and cuDNN backends), causal, head dim 128;
- the host's CPU time per kernel it issues (issue 40's open question: moesim charges every eager kernel of a
  Megatron-Core layer one TE module's host time, Calibration.host_launch_s, including the per-expert kernels TE
  issues from one C++ loop): a Python-issued torch op on a small tensor, and one `torch._foreach_mul_` call over
  tensors of two dtypes, which PyTorch's slow path runs as one kernel per tensor from C++ (its kernels counted
  with torch.profiler, so the per-kernel figure does not rest on that reading);
- the GPU's fixed time per kernel (Calibration.kernel_overhead_s, graph_kernel_overhead_s): tiny kernels back to back
  with the host ahead (behind a `torch.cuda._sleep`), from a stream and replayed from a CUDA graph, and a BF16 copy
  at per-expert sizes (256 to 16,384 rows of 2,048), which the simulator prices as HBM bytes plus that fixed time.

A measurement that fails (an API missing in this PyTorch, out of memory) is recorded with its error, and the
rest still run. Nothing here is read by the simulator: the comparison is what a session looks at.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Callable

import torch

WARMUP = 3
REPEATS = 10


def timed_s(fn: Callable[[], object], repeats: int = REPEATS, warmup: int = WARMUP) -> float:
    """Median seconds of ``fn`` over ``repeats`` CUDA-event-timed calls after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def clock_mhz() -> float | None:
    try:
        return float(torch.cuda.clock_rate())
    except Exception:  # noqa: BLE001 -- NVML missing: no clock reading, the timings stand
        return None


def bf16(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, device="cuda", dtype=torch.bfloat16)


def dense(m: int, n: int, k: int) -> dict:
    a, b = bf16(m, k), bf16(k, n)
    return {"m": m, "n": n, "k": k, "seconds": timed_s(lambda: a @ b)}


def sustained(size: int, seconds: float) -> dict:
    """One GEMM back to back for ``seconds``: TFLOP/s and the SM clock of each ~1 s window, beside a short burst's."""
    a, b = bf16(size, size), bf16(size, size)
    flop = 2.0 * size**3
    burst = timed_s(lambda: a @ b)
    per_window = max(1, round(1.0 / burst))
    windows, began = [], time.perf_counter()
    while time.perf_counter() - began < seconds:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(per_window):
            a @ b
        end.record()
        end.synchronize()
        elapsed = start.elapsed_time(end) / 1e3
        windows.append({"tflops": per_window * flop / elapsed / 1e12, "clock_mhz": clock_mhz()})
    return {"m": size, "n": size, "k": size, "burst_seconds": burst, "windows": windows}


def _grouped_mm_s(a: torch.Tensor, b: torch.Tensor, groups: int, rows: int) -> float:
    """torch._grouped_mm with ``groups`` equal groups of ``rows`` along the grouped dimension."""
    offs = torch.arange(rows, rows * groups + 1, rows, device="cuda", dtype=torch.int32)
    return timed_s(lambda: torch._grouped_mm(a, b, offs=offs))


def grouped(groups: int, rows: int, k: int, n: int) -> dict:
    """Forward (and input-gradient) form: each group's rows times its own weight, torch._grouped_mm 2d x 3d."""
    weights = bf16(groups, n, k).transpose(-2, -1)  # column-major per group, as the kernel wants
    seconds = _grouped_mm_s(bf16(groups * rows, k), weights, groups, rows)
    return {"groups": groups, "rows": rows, "k": k, "n": n, "seconds": seconds}


def grouped_wgrad(groups: int, rows: int, m: int, n: int) -> dict:
    """Weight-gradient form: each group's (m x rows) @ (rows x n), the groups splitting the reduction (2d x 2d)."""
    seconds = _grouped_mm_s(bf16(m, groups * rows), bf16(n, groups * rows).t(), groups, rows)
    return {"groups": groups, "rows": rows, "m": m, "n": n, "seconds": seconds}


def fp8_tensorwise(m: int, n: int, k: int) -> dict:
    a = bf16(m, k).to(torch.float8_e4m3fn)
    b = bf16(n, k).to(torch.float8_e4m3fn).t()  # column-major, as cuBLASLt's FP8 GEMM wants
    one = torch.ones((), device="cuda", dtype=torch.float32)
    run = lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    return {"m": m, "n": n, "k": k, "seconds": timed_s(run)}


def copy(nbytes: int) -> dict:
    src = torch.empty(nbytes // 2, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    return {"bytes_moved": 2 * nbytes, "seconds": timed_s(lambda: dst.copy_(src))}


def permutation(tokens: int, top_k: int, hidden: int) -> dict:
    """Megatron-Core's unfused permute (index_select of every routed copy) and its backward (index_add_ of the
    copies' gradients into their tokens), and the unpermute's scatter_add_ with an index expanded to [b s k, h]."""
    x = bf16(tokens, hidden)
    index = torch.randint(0, tokens, (tokens * top_k,), device="cuda")
    copies = bf16(tokens * top_k, hidden)
    out = torch.zeros_like(x)
    expanded = index.unsqueeze(1).expand(-1, hidden)
    routed_bytes = 2 * tokens * top_k * hidden  # one BF16 pass over the routed copies
    return {
        "tokens": tokens,
        "top_k": top_k,
        "hidden": hidden,
        "routed_bytes": routed_bytes,
        "gather_seconds": timed_s(lambda: x.index_select(0, index)),
        "index_add_seconds": timed_s(lambda: out.index_add_(0, index, copies)),
        "scatter_add_seconds": timed_s(lambda: out.scatter_add_(0, expanded, copies)),
    }


# Tiny kernels: a 1,024-element tensor (2 KB) makes a kernel's work negligible beside its fixed cost.
TINY_ELEMENTS = 1024
# Host launches timed per entry, and tiny kernels per GPU timing: the host issues them behind a ~0.1 s sleep kernel,
# a few hundred, assumed within what CUDA queues before a launch blocks (were it not, the host's gaps would be timed).
HOST_CALLS = 20000
GPU_CALLS = 500
SLEEP_CYCLES = 200_000_000


def ahead_s_per_call(fn: Callable[[], object], calls: int = GPU_CALLS) -> float:
    """GPU seconds per call of ``fn`` issued ``calls`` times while the GPU sleeps: the host is ahead, so the kernels
    run back to back and the time between the events is theirs alone."""
    torch.cuda.synchronize()
    torch.cuda._sleep(SLEEP_CYCLES)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / calls


def kernels_per_call(fn: Callable[[], object]) -> int | None:
    """CUDA kernels one call of ``fn`` launches, counted by torch.profiler (None where the profiler cannot say)."""
    try:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        return sum(1 for event in prof.events() if event.device_type == torch.autograd.DeviceType.CUDA)
    except Exception:  # noqa: BLE001 -- no kernel count: the entry keeps its CPU time
        return None


def host_launch(issued_by: str, tensors: int = 64) -> dict:
    """CPU time of this thread per call, the GPU keeping up: ``python``, one torch op on a tiny tensor per call;
    ``cpp_loop``, one torch._foreach_mul_ over ``tensors`` tiny tensors of alternating dtypes (slow path: a kernel
    per tensor launched from C++)."""
    if issued_by == "python":
        x = bf16(TINY_ELEMENTS)
        fn, calls = (lambda: x.mul_(1.0)), HOST_CALLS
    else:
        dtypes = (torch.bfloat16, torch.float32)
        group = [torch.ones(TINY_ELEMENTS, device="cuda", dtype=dtypes[i % 2]) for i in range(tensors)]
        fn, calls = (lambda: torch._foreach_mul_(group, 1.0)), HOST_CALLS // tensors
    for _ in range(100):
        fn()
    torch.cuda.synchronize()
    began = time.thread_time()
    for _ in range(calls):
        fn()
    cpu_s = time.thread_time() - began
    torch.cuda.synchronize()
    return {
        "issued_by": issued_by,
        "tensors": 1 if issued_by == "python" else tensors,
        "calls": calls,
        "cpu_s_per_call": cpu_s / calls,
        "kernels_per_call": kernels_per_call(fn),
    }


def kernel_overhead(replay: str) -> dict:
    """GPU seconds per tiny kernel back to back: launched from a stream, or replayed from a CUDA graph."""
    x = bf16(TINY_ELEMENTS)
    if replay == "stream":
        seconds = ahead_s_per_call(lambda: x.add_(1.0))
    else:
        graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            x.add_(1.0)  # warm-up on a side stream, as graph capture asks
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(graph):
            for _ in range(GPU_CALLS):
                x.add_(1.0)
        seconds = ahead_s_per_call(graph.replay, calls=1) / GPU_CALLS
    return {"replay": replay, "bytes_moved": 4 * TINY_ELEMENTS, "seconds": seconds}


def small_copy(rows: int, hidden: int = 2048) -> dict:
    """GPU seconds per BF16 device copy of rows x hidden, back to back with the host ahead."""
    src = bf16(rows, hidden)
    dst = torch.empty_like(src)
    seconds = ahead_s_per_call(lambda: dst.copy_(src), calls=200)
    return {"rows": rows, "hidden": hidden, "bytes_moved": 4 * rows * hidden, "seconds": seconds}


def attention(backend: str, seq_len: int, heads: int = 32, head_dim: int = 128) -> dict:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention

    chosen = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[backend]
    q, k, v = (bf16(1, heads, seq_len, head_dim).requires_grad_() for _ in range(3))
    grad = bf16(1, heads, seq_len, head_dim)

    def forward() -> torch.Tensor:
        with sdpa_kernel(chosen):
            return scaled_dot_product_attention(q, k, v, is_causal=True)

    def forward_backward() -> None:
        forward().backward(grad)

    shape = {"backend": backend, "seq_len": seq_len, "heads": heads, "head_dim": head_dim}
    fwd = timed_s(forward)
    return {**shape, "fwd_seconds": fwd, "bwd_seconds": timed_s(forward_backward) - fwd}


def measurements(sustain_s: float) -> list[tuple[str, str, Callable[[], dict]]]:
    """(kind, label, measurement) in run order."""
    return [
        ("dense", "8192^3 (torch-performance-test-data #79)", lambda: dense(8192, 8192, 8192)),
        ("dense", "10240^3 (torch-performance-test-data #79)", lambda: dense(10240, 10240, 10240)),
        ("dense", "352B dense-shaped FC1, 8192 tokens", lambda: dense(8192, 28672, 4096)),
        ("sustained", "10240^3 back to back", lambda: sustained(10240, sustain_s)),
        ("grouped", "Qwen3-30B-A3B FC1: 8 experts x 4096 rows", lambda: grouped(8, 4096, 2048, 1536)),
        ("grouped", "Qwen3-30B-A3B FC2", lambda: grouped(8, 4096, 768, 2048)),
        ("grouped", "352B FC1: 4 experts x 960 rows", lambda: grouped(4, 960, 4096, 28672)),
        ("grouped", "352B FC2", lambda: grouped(4, 960, 14336, 4096)),
        ("grouped", "SonicMoE 30B E128 K8 FC1 (EP 1)", lambda: grouped(128, 2048, 4096, 1024)),
        ("grouped_wgrad", "Qwen3-30B-A3B FC1 wgrad", lambda: grouped_wgrad(8, 4096, 2048, 1536)),
        ("grouped_wgrad", "352B FC1 wgrad", lambda: grouped_wgrad(4, 960, 4096, 28672)),
        ("fp8_tensorwise", "Qwen3-30B-A3B FC1, one expert", lambda: fp8_tensorwise(4096, 1536, 2048)),
        ("fp8_tensorwise", "Qwen3-30B-A3B FC2, one expert", lambda: fp8_tensorwise(4096, 2048, 768)),
        ("fp8_tensorwise", "8192^3", lambda: fp8_tensorwise(8192, 8192, 8192)),
        ("copy", "2 GiB device copy", lambda: copy(2 << 30)),
        ("permutation", "SonicMoE 30B point: T 32768, K 8, d 4096", lambda: permutation(32768, 8, 4096)),
        ("permutation", "Qwen3-30B-A3B micro-batch: T 4096, K 8, d 2048", lambda: permutation(4096, 8, 2048)),
        ("attention", "flash, causal, 4096", lambda: attention("flash", 4096)),
        ("attention", "flash, causal, 8192", lambda: attention("flash", 8192)),
        ("attention", "cudnn, causal, 4096", lambda: attention("cudnn", 4096)),
        ("host_launch", "a torch op issued from Python", lambda: host_launch("python")),
        ("host_launch", "torch._foreach_mul_ slow path: a kernel per tensor from C++", lambda: host_launch("cpp_loop")),
        ("kernel_overhead", "tiny add, from a stream", lambda: kernel_overhead("stream")),
        ("kernel_overhead", "tiny add, replayed from a CUDA graph", lambda: kernel_overhead("graph")),
        *(
            ("small_copy", f"BF16 copy, {rows} x 2048", lambda rows=rows: small_copy(rows))
            for rows in (256, 1024, 4096, 16384)
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--sustain-s", type=float, default=20.0, help="seconds of the sustained GEMM run")
    args = parser.parse_args()
    torch.manual_seed(0)
    props = torch.cuda.get_device_properties(0)
    header = {
        "gpu": props.name,
        "sms": props.multi_processor_count,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "host": platform.node(),
        "idle_clock_mhz": clock_mhz(),
    }
    entries = []
    for kind, label, measure in measurements(args.sustain_s):
        began = time.perf_counter()
        try:
            entry = {"kind": kind, "label": label, **measure()}
        except Exception as error:  # noqa: BLE001 -- record it and go on: the other measurements still count
            entry = {"kind": kind, "label": label, "error": f"{type(error).__name__}: {error}"}
        entry["wall_s"] = time.perf_counter() - began
        entries.append(entry)
        print(json.dumps(entry)[:300], flush=True)
        torch.cuda.empty_cache()
    with open(args.out, "w") as handle:
        json.dump({"device": header, "entries": entries}, handle, indent=1)


if __name__ == "__main__":
    main()
