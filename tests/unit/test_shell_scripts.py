"""Launch scripts as users write them (workloads/inputs/shell_script.py): bash arrays, variables with defaults,
arithmetic, conditions, env-prefixed and pasted torchrun lines; what the script leaves unset is named."""

from __future__ import annotations

import pytest

from topologies.errors import ConfigError
from workloads.inputs.megatron import parse_megatron_args
from workloads.inputs.megatron_args import read_text
from workloads.inputs.shell_script import command_words

# The shape of Megatron-LM's examples/mixtral/train_mixtral_8x7b_distributed.sh (at d98e8a64dd), shortened.
MIXTRAL = """#!/bin/bash
export CUDA_DEVICE_MAX_CONNECTIONS=1
GPUS_PER_NODE=8
NNODES=${SLURM_NNODES:-"2"}
WORLD_SIZE=$(($GPUS_PER_NODE*$NNODES))
CHECKPOINT_PATH=$1
DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NNODES
)
MODEL_ARGS=(
    --num-layers 32  # a comment inside the array
    --hidden-size 4096
)
MODEL_PARALLEL_ARGS=(
    --pipeline-model-parallel-size $(( WORLD_SIZE / 8 ))
    --expert-model-parallel-size ${EP:-8}
)
if [ -n "${WANDB_API_KEY}" ]; then
    LOGGING_ARGS+=(
        --wandb-project ${WANDB_PROJECT:-"Mixtral"}
    )
else
    LOGGING_ARGS+=(--log-interval 100)
fi
while [[ $# -gt 0 ]]; do
    case $1 in
        --ep) EP="$2"; shift 2 ;;
    esac
done
echo "running pretrain_gpt.py on $WORLD_SIZE GPUs"
torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \\
    ${MODEL_ARGS[@]} \\
    "${MODEL_PARALLEL_ARGS[@]}" \\
    ${LOGGING_ARGS[@]} \\
    --save $CHECKPOINT_PATH 2>&1 | tee log.txt
"""


def test_a_megatron_example_script() -> None:
    """Arrays (plain and quoted), defaults, arithmetic, the first branch of an if, no loop body, no echo."""
    command = command_words(MIXTRAL)
    assert command.words == [
        "--num-layers",
        "32",
        "--hidden-size",
        "4096",
        "--pipeline-model-parallel-size",
        "2",
        "--expert-model-parallel-size",
        "8",
        "--wandb-project",
        "Mixtral",
        "--save",
        "$1",  # CHECKPOINT_PATH=$1: the script's first argument, unknown here
    ]
    assert command.unresolved == ("$1",)  # the if's condition is not read


def test_quoted_array_items_stay_one_word_each() -> None:
    script = 'A=("--data-path" "a b")\nB=( x "${A[@]}" )\npython pretrain_gpt.py "${B[@]}" ${A[*]}'
    assert command_words(script).words == ["x", "--data-path", "a b", "--data-path", "a", "b"]


@pytest.mark.parametrize(
    ("script", "words"),
    [
        ("X=3\npython train.py --n ${X:-5} --m ${Y:-5} --k ${Z-6}", ["--n", "3", "--m", "5", "--k", "6"]),
        ("X=\npython train.py --n ${X:-5} --m ${X-5}", ["--n", "5", "--m"]),
        ("python train.py --n ${X:=4} --m $X", ["--n", "4", "--m", "4"]),
        ("A=2\nB=3\npython train.py --n $(( (A + 1) * $B ))", ["--n", "9"]),
        ("CUDA_DEVICE_MAX_CONNECTIONS=1 NCCL_X=2 torchrun --nnodes 2 pretrain_gpt.py --bf16", ["--bf16"]),
        ("if [ -z $X ]; then Y=1; fi\npython t.py --n ${Y:-7}", ["--n", "7"]),
        ("--bf16 \\\n  --seq-length=4096  # comment\n--lr 1e-4", ["--bf16", "--seq-length=4096", "--lr", "1e-4"]),
    ],
)
def test_expansions_as_bash_does_them(script: str, words: list[str]) -> None:
    assert command_words(script).words == words


def test_a_pasted_launch_line_is_not_a_file_name() -> None:
    """A torchrun line longer than a file name may be (it used to give "File name too long")."""
    flags = " ".join(f"--lr-{i} 1" for i in range(400)) + " --micro-batch-size 2"
    line = f"torchrun --nproc_per_node 8 pretrain_gpt.py {flags}"
    assert len(line) > 4096 and read_text(line) == line
    assert parse_megatron_args(line).layout_fields["micro_batch"] == 2


def test_a_file_is_still_read(tmp_path) -> None:
    path = tmp_path / "job.sh"
    path.write_text(MIXTRAL)
    job = parse_megatron_args(str(path))
    assert job.layout_fields["pp"] == 2 and job.layout_fields["ep"] == 8
    assert any("left as written: $1" in note for note in job.notes)  # what the script leaves unset is named


def test_an_unset_variable_in_a_modelled_flag_is_named() -> None:
    with pytest.raises(ConfigError) as error:
        parse_megatron_args("python pretrain_gpt.py --num-layers $NUM_LAYERS")
    assert error.value.field == "--num-layers" and "$NUM_LAYERS" in error.value.rule
    assert "a shell variable the script does not set" in error.value.rule  # and what to do about it


def test_no_command_and_no_flags_is_one_error() -> None:
    with pytest.raises(ConfigError, match="expected --flags or a command line running a .py script"):
        command_words("X=1\nmkdir -p out\n")


def test_a_command_kept_in_a_variable_is_found() -> None:
    """An sbatch launcher that stores the training command and runs it as ``bash -c "${TRAINING_CMD}"`` (Megatron-LM's
    examples/megatron_fsdp/sbatch_mfsdp_deepseek_v3.sh): its flags, the arrays expanded."""
    script = """
ARGS=(--num-layers 4 --hidden-size 1024)
ARGS=("${ARGS[@]}" --micro-batch-size 2)
TRAINING_CMD="
cd /workspace;
python pretrain_gpt.py ${ARGS[@]}"
mkdir -p logs
srun bash -c "${TRAINING_CMD}" 2>&1 | tee log.txt
"""
    assert command_words(script).words == ["--num-layers", "4", "--hidden-size", "1024", "--micro-batch-size", "2"]
