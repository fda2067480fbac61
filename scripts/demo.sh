#!/usr/bin/env bash
# The main job: set up (idempotent), then train a warm-started LLM agent on FrozenLake-4x4 on CPU
# (examples/train_frozenlake.py; ~2-3 min warm start once, then ~9 min of RL and ~2 min of validation).
# Extra arguments go to the script. `bash scripts/demo.sh --model smollm2 [--env sokoban|frozenlake]` runs the
# real pretrained SmolLM2-135M-Instruct instead (examples/train_smollm2.py: warm start once, then RL, ~25 min).
# `bash scripts/demo.sh --seed-study [--seeds 0 1 2] [-- demo flags]` runs the seed study instead
# (benchmarks/demo_seeds.py: the demo with seeds 0, 1, 2, one after another).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export RAGEN_RLLIB_CACHE="${RAGEN_RLLIB_CACHE:-$PWD/.cache/ragen_rllib}"
export HF_HOME="$PWD/.cache/hf" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export VLLM_CACHE_ROOT="$PWD/.cache/vllm" TORCHINDUCTOR_CACHE_DIR="$PWD/.cache/inductor"
mkdir -p .cache/tmp && export TMPDIR="$PWD/.cache/tmp"
if [ "${1:-}" = "--model" ] && [ "${2:-}" = "smollm2" ]; then
  shift 2  # the real pretrained model (examples/train_smollm2.py): --env sokoban|frozenlake, --seed, --zero-shot
  exec .venv/bin/python examples/train_smollm2.py "$@"
fi
if [ "${1:-}" = "--seed-study" ]; then
  shift
  exec .venv/bin/python benchmarks/demo_seeds.py "$@"
fi
exec .venv/bin/python examples/train_frozenlake.py "$@"
