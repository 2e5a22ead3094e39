"""experiments/validation/anchors.py: measured kernel times beside the simulator's, on a hand-made measurement file."""

from __future__ import annotations

import json

import pytest

from experiments.validation.anchors import compare, main, table
from simulator.costs.calibration import BENCHMARK_CALIBRATION, DEFAULT_CALIBRATION
from simulator.costs.kernels import gemm_time_s
from topologies.hardware import gpu_preset
from workloads.ops import Gemm, GroupedDim

H200 = gpu_preset("h200")
OVERHEAD_S = BENCHMARK_CALIBRATION.kernel_overhead_s  # 2.1 us per kernel


def test_a_copy_is_priced_at_the_achievable_hbm_rate() -> None:
    """3.84 GB at 4.8 TB/s x 0.8 = 1 ms, plus one kernel's 2.1 us: a 1.252625 ms copy is 1.25x the simulated."""
    assert BENCHMARK_CALIBRATION.memory_efficiency == 0.8
    assert OVERHEAD_S == 2.1e-6
    entry = {"kind": "copy", "label": "copy", "bytes_moved": 3.84e9, "seconds": 1.252625e-3}
    (c,) = compare(entry, H200)
    assert c.simulated_s == pytest.approx(1e-3 + OVERHEAD_S)
    assert c.ratio == pytest.approx(1.25)


def test_permutation_kernels_are_each_one_pass_over_the_routed_copies() -> None:
    """Routed copies of 1.92 GB: read once and written once, 3.84 GB, 1.0021 ms for each of the three kernels."""
    entry = {"kind": "permutation", "label": "p", "routed_bytes": 1.92e9}
    entry |= {"gather_seconds": 1.0021e-3, "index_add_seconds": 5.0105e-3, "scatter_add_seconds": 2.0042e-3}
    ratios = [round(c.ratio, 9) for c in compare(entry, H200)]
    assert ratios == [1.0, 5.0, 2.0]


def test_sustained_is_the_settled_windows_against_the_burst() -> None:
    """Windows at 800, 800, 720, 720 TFLOP/s settle at 720: 0.9 of an 800 burst where the calibration says 0.849,
    so the measured settled GEMM takes 0.849 / 0.9 = 0.943x the simulated one."""
    flop = 2.0 * 1000**3
    windows = [{"tflops": t, "clock_mhz": None} for t in (800, 800, 720, 720)]
    entry = {"kind": "sustained", "label": "s", "m": 1000, "n": 1000, "k": 1000, "windows": windows}
    (c,) = compare(entry | {"burst_seconds": flop / 800e12}, H200)
    assert DEFAULT_CALIBRATION.sustained_clock_fraction == 0.849
    assert c.ratio == pytest.approx(0.849 / 0.9)


def test_gemm_entries_map_to_the_simulators_gemms() -> None:
    forward = {"kind": "grouped", "label": "g", "groups": 8, "rows": 4096, "k": 2048, "n": 1536, "seconds": 1.0}
    wgrad = {"kind": "grouped_wgrad", "label": "w", "groups": 8, "rows": 4096, "m": 2048, "n": 1536, "seconds": 1.0}
    (g,), (w,) = compare(forward, H200), compare(wgrad, H200)
    assert g.simulated_s == gemm_time_s(Gemm(4096, 1536, 2048, groups=8), H200, BENCHMARK_CALIBRATION)
    reduction = Gemm(2048, 1536, 4096, groups=8, grouped=GroupedDim.REDUCTION)
    assert w.simulated_s == gemm_time_s(reduction, H200, BENCHMARK_CALIBRATION)


def test_failed_measurements_are_listed_not_compared(tmp_path, capsys) -> None:
    attention = {"kind": "attention", "label": "a", "heads": 32, "seq_len": 4096, "head_dim": 128}
    attention |= {"fwd_seconds": 1e-3, "bwd_seconds": 3e-3}
    measured = {
        "device": {"gpu": "NVIDIA H200", "torch": "2.11"},
        "entries": [attention, {"kind": "fp8_tensorwise", "label": "broken", "error": "RuntimeError: no kernel"}],
    }
    assert len(compare(attention, H200)) == 6  # forward and backward, against FA3, FA2 and cuDNN
    assert "broken" in table(measured, H200) and "failed: RuntimeError" in table(measured, H200)
    path = tmp_path / "anchors.json"
    path.write_text(json.dumps(measured))
    main([str(path)])
    assert "measured on NVIDIA H200" in capsys.readouterr().out


def test_host_entries_are_cpu_per_kernel_against_what_moesim_charges() -> None:
    """A Python-issued op at 9 us against the bare torch op's 13.48 us; a C++ loop of 64 kernels whose kernel count
    the profiler could not give (one a tensor) at 256 us a call, 4 us a kernel, against the TE module's 36.51 us."""
    python = {"kind": "host_launch", "label": "py", "issued_by": "python", "tensors": 1, "calls": 10}
    loop = {"kind": "host_launch", "label": "cpp", "issued_by": "cpp_loop", "tensors": 64, "calls": 10}
    (p,) = compare(python | {"cpu_s_per_call": 9e-6, "kernels_per_call": 1}, H200)
    (c,) = compare(loop | {"cpu_s_per_call": 256e-6, "kernels_per_call": None}, H200)
    assert (p.measured_s, p.simulated_s) == (9e-6, DEFAULT_CALIBRATION.torch_host_launch_s) == (9e-6, 13.48e-6)
    assert c.measured_s == pytest.approx(4e-6)
    assert c.simulated_s == DEFAULT_CALIBRATION.host_launch_s == pytest.approx(36.51e-6, abs=0.01e-6)
    (counted,) = compare(loop | {"cpu_s_per_call": 256e-6, "kernels_per_call": 32}, H200)
    assert counted.measured_s == pytest.approx(8e-6)  # the profiler's count wins over one kernel a tensor


def test_tiny_kernels_and_small_copies_are_a_fixed_time_plus_their_bytes() -> None:
    """3,840 B at 3.84 TB/s is 1 ns: a tiny kernel is priced 2.101 us from a stream and 1.301 us from a graph; a 3.84 MB
    copy 1 us + 2.1 us, so a measured 6.2 us is twice the simulated."""
    tiny = {"kind": "kernel_overhead", "label": "t", "bytes_moved": 3840, "seconds": 2.101e-6}
    (stream,), (graph,) = compare(tiny | {"replay": "stream"}, H200), compare(tiny | {"replay": "graph"}, H200)
    assert stream.simulated_s == pytest.approx(2.101e-6) and stream.ratio == pytest.approx(1.0)
    assert graph.simulated_s == pytest.approx(1.301e-6)
    copy = {"kind": "small_copy", "label": "c", "rows": 469, "hidden": 2048, "bytes_moved": 3.84e6, "seconds": 6.2e-6}
    (c,) = compare(copy, H200)
    assert c.simulated_s == pytest.approx(3.1e-6) and c.ratio == pytest.approx(2.0)
