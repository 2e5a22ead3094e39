"""The GPU-count hint of a layout that does not divide the cluster (workloads/specs/hints.py)."""

from workloads.specs.hints import gpus_hint
from workloads.specs.layouts import LAYOUT_PRESETS
from workloads.specs.models import MODEL_PRESETS


def test_a_huge_gpu_count_gets_its_hint_without_counting_to_it() -> None:
    """Found by test_fuzz_simulate_arguments: --gpus 10**18 + 1 looped over every pipeline degree up to the
    GPU count. A stage holds at least one layer, so only pp <= num_layers is tried: paper-352b's 60 layers and
    the megascale-moe layout's intra size 8 give 10**18 + 1 (odd) no fitting pp, and the nearest multiples."""
    model, layout = MODEL_PRESETS["paper-352b"], LAYOUT_PRESETS["megascale-moe"]
    unit = layout.intra_size * layout.cp * layout.pp
    gpus = 10**18 + 1
    below = gpus // unit * unit
    assert gpus_hint(model, layout, gpus) == f"; try --gpus {below} or {below + unit}"


def test_the_hint_names_the_nearest_counts_and_pps_that_fit() -> None:
    """200 GPUs of paper-352b (60 layers) on megascale-moe (intra size 8, pp 15): 8 x 15 = 120 does not divide
    200, whose nearest multiples are 120 and 240; 200 % (8 pp) == 0 for pp 1, 5, 25, of which 1 and 5 divide
    the 60 layers, nearest to 15 first."""
    model, layout = MODEL_PRESETS["paper-352b"], LAYOUT_PRESETS["megascale-moe"]
    assert gpus_hint(model, layout, 200) == "; try --gpus 120 or 240, or --set pp=5 (or 1)"
