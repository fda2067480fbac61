#!/usr/bin/env bash
# The main job: set up (idempotent), then run the CPU demo. Extra arguments go to `ragen-rllib demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/ragen-rllib demo "$@"
