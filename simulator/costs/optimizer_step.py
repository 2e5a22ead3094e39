"""The bytes the optimizer step moves in HBM per parameter, pass by pass, as Megatron-Core's distributed optimizer
runs it (megatron/core/optimizer/optimizer.py MixedPrecisionOptimizer.step, distrib_optimizer.py, clip_grads.py
at NVIDIA/Megatron-LM 2edffadb, the Megatron-LM that Megatron-Bridge v0.4.2 pins), with Transformer Engine's
FusedAdam and multi-tensor kernels (NVIDIA/TransformerEngine transformer_engine/pytorch/optimizers/fused_adam.py).

Per parameter of the GPU's optimizer shard, after the gradients' reduce-scatter:

- the main gradient into the optimizer: ``shard_model_grad.float()`` (_copy_model_grads_to_main_grads), reading
  the gradient buffer's dtype and writing FP32 (nothing where the buffer is FP32 already: ``.float()`` returns
  the tensor itself); with the precision-aware optimizer's decoupled gradient
  (use_precision_aware_optimizer_no_fp8_or_ds_fp8: BF16 weights without an FP8 recipe other than delayed, or
  non-FP32 master weights) the buffer's shard is read in place;
- the gradient norm, multi_tensor_l2norm (get_grad_norm_fp32): one read of the gradient; then the clip,
  multi_tensor_scale_tensor with the norm as a tensor (clip_grad_by_total_norm_fp32: with TE's kernel it runs
  every step, clip_grad 1.0 by default, OptimizerConfig), one read and one write;
- Adam: the master weight, the two moments read and written, the gradient read (FP32 master weights beside the
  BF16 model weights; under the decoupled path FusedAdam also reads and writes the BF16 weight, and with
  store_param_remainders, the OptimizerConfig default, keeps the master weight as that weight and an int16
  remainder: multi_tensor_adam_param_remainder);
- the new weights back into the model's parameter buffer (_copy_main_params_to_model_params): FP32 read, BF16
  written; under --fp8-param-gather TE's quantize_param_shard reads the master shard for its amax, then again to
  cast it to FP8; nothing under the decoupled path (FusedAdam wrote the weight).

Per parameter the GPU holds (not sharded): the gradient buffer zeroed for the next step (zero_grad_buffer, at the
start of Megatron-Bridge's train_step: the same HBM time at the end of the previous step).

Under Muon (workloads/specs/muon.py; NVIDIA-NeMo/Emerging-Optimizers OrthogonalizedOptimizer.step and
newton_schulz), per parameter of the matrices it updates: the gradient into FP32, its norm and clip as above; the
momentum (gradient read, buffer read and written); the Newton-Schulz input normalized (FP32 read and written), cast
to BF16 and the result back to FP32, then scaled (read and written); the decoupled weight decay and the update of the
master weight (read and written, the update read); the weight back into the model's buffer; under ``adaptive_muon``
AdaMuon's second moment of the update (its EMA, then the division by its root). The Newton-Schulz GEMMs
themselves are timed as GEMMs (``newton_schulz_s``).

Frameworks other than Megatron-Core (MegaScale-MoE is built on Megatron-LM; DeepSeek-V3's HAI-LLM is not public):
assumed the same passes.
"""

from __future__ import annotations

from simulator.costs.calibration import Calibration
from simulator.costs.kernels import gemm_time_s, memory_time_s
from topologies.hardware import GpuSpec
from workloads.ops import Gemm
from workloads.specs.layouts import LayoutSpec
from workloads.specs.muon import matrix_state_bytes
from workloads.specs.precision import DTYPE_BYTES, MAIN_PARAMS_BYTES

FP32_BYTES = 4
BF16_BYTES = 2
FP8_BYTES = 1


def decoupled_gradients(layout: LayoutSpec) -> bool:
    """Megatron-Core's use_precision_aware_optimizer_no_fp8_or_ds_fp8 (optimizer_config.py): the precision-aware
    optimizer reading the gradient buffer in place. moesim's layout says it through its consequences:
    param_remainders (set for exactly that case with FP32 master weights, workloads/inputs/megatron.py) or
    non-FP32 master weights (which need it)."""
    return layout.param_remainders or layout.main_params_dtype != "fp32"


def shard_bytes_per_param(layout: LayoutSpec) -> tuple[float, int]:
    """(HBM bytes, kernel passes) of the optimizer step per parameter of the GPU's optimizer shard."""
    grad = DTYPE_BYTES[layout.main_grads_dtype]
    moments = 2 * (DTYPE_BYTES[layout.exp_avg_dtype] + DTYPE_BYTES[layout.exp_avg_sq_dtype])  # read and write
    if decoupled_gradients(layout):
        master = 2 * BF16_BYTES if layout.param_remainders else 2 * MAIN_PARAMS_BYTES[layout.main_params_dtype]
        weight = 2 * BF16_BYTES  # FusedAdam reads and writes the BF16 model weight
        norm_and_clip = grad + 2 * grad
        return norm_and_clip + grad + master + weight + moments, 3
    to_main = 0 if grad == FP32_BYTES else grad + FP32_BYTES
    norm_and_clip = FP32_BYTES + 2 * FP32_BYTES
    adam = FP32_BYTES + 2 * FP32_BYTES + moments  # gradient read; master read and written
    if layout.fp8_param_gather:
        back, back_passes = 2 * FP32_BYTES + FP8_BYTES, 2
    else:
        back, back_passes = FP32_BYTES + BF16_BYTES, 1
    return to_main + norm_and_clip + adam + back, int(to_main > 0) + 3 + back_passes


def muon_bytes_per_param(layout: LayoutSpec) -> tuple[float, int]:
    """(HBM bytes, kernel passes) of Muon's step per parameter of the matrices it updates (module docstring)."""
    grad = DTYPE_BYTES[layout.main_grads_dtype]
    to_main = 0 if grad == FP32_BYTES else grad + FP32_BYTES
    momentum = FP32_BYTES + 2 * FP32_BYTES
    # AdaMuon's second moment: its EMA of the squared update (update read, moment read and written), then the update
    # divided by its root (both read, the update written)
    moment2 = 6 * FP32_BYTES if matrix_state_bytes(layout.optimizer) > FP32_BYTES else 0
    conversions = 2 * FP32_BYTES + (FP32_BYTES + BF16_BYTES) * 2 + 2 * FP32_BYTES  # normalize, BF16 and back, scale
    update = 3 * FP32_BYTES
    back = FP32_BYTES + BF16_BYTES
    passes = int(to_main > 0) + 8 + 2 * (moment2 > 0)
    return to_main + 3 * FP32_BYTES + momentum + moment2 + conversions + update + back, passes


def optimizer_step_s(
    layout: LayoutSpec,
    shard_params: float,
    held_params: float,
    gpu: GpuSpec,
    cal: Calibration,
    adam_params: float | None = None,
) -> float:
    """The optimizer step of one GPU holding ``held_params`` parameters, ``shard_params`` of them in its optimizer
    shard, ``adam_params`` of those updated by Adam (all, if None; the rest by Muon): every pass above at the HBM
    rate, plus the zeroing of the gradient buffer."""
    adam = shard_params if adam_params is None else adam_params
    per_param, passes = shard_bytes_per_param(layout)
    muon_per_param, muon_passes = muon_bytes_per_param(layout) if adam < shard_params else (0.0, 0)
    zeroed = held_params * DTYPE_BYTES[layout.main_grads_dtype]
    moved = adam * per_param + (shard_params - adam) * muon_per_param + zeroed
    return memory_time_s(moved, passes + muon_passes + 1, gpu, cal)


def newton_schulz_s(runs: list[tuple[Gemm, float]], gpu: GpuSpec, cal: Calibration) -> float:
    """Muon's Newton-Schulz GEMMs of one GPU's step (workloads/graph/optimizer_work.py): each GEMM's time (its
    groups the steps, one kernel each) times how many of it the GPU runs."""
    return sum(count * gemm_time_s(gemm, gpu, cal) for gemm, count in runs)
