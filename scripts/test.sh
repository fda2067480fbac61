#!/usr/bin/env bash
# The whole test suite: set up (idempotent), lint (ruff, zero findings), then pytest. Extra arguments go to
# pytest (e.g. `bash scripts/test.sh -m "not slow"` for the fast tier).
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1
bash scripts/setup_browser.sh || exit 1  # Chromium for the browser test of `ragen-rllib view`
# Keep every cache and temp file inside the work tree.
export RAGEN_RLLIB_CACHE="${RAGEN_RLLIB_CACHE:-$PWD/.cache/ragen_rllib}"
export HF_HOME="$PWD/.cache/hf" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export VLLM_CACHE_ROOT="$PWD/.cache/vllm" TORCHINDUCTOR_CACHE_DIR="$PWD/.cache/inductor"
mkdir -p .cache/tmp && export TMPDIR="$PWD/.cache/tmp"
.venv/bin/ruff check . || { echo "ruff found problems (above): fix them, or run .venv/bin/ruff check --fix ." >&2; exit 1; }
# Two workers (pytest-xdist), whole modules each (a module's fixtures are set up once), the heaviest first
# (tests/conftest.py); `-n 0` after the command runs everything in one process.
.venv/bin/python -m pytest -n "${RAGEN_TEST_WORKERS:-2}" --dist loadscope --no-loadscope-reorder "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests (exit 5): nothing matched the selection" >&2
fi
exit "$rc"
