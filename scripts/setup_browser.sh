#!/usr/bin/env bash
# Idempotent: install Chromium from Debian's packages for the browser test of `ragen-rllib view`
# (tests/evaluation/test_viewer.py opens the page headless). Needs root (or sudo) and apt; says so and fails otherwise.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "[setup_browser] no apt-get here: install Chromium yourself for the browser test of 'ragen-rllib view'" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
echo "[setup_browser] installing chromium (Debian package, ~1-2 min)"
$SUDO apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1 || {
  $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q --no-install-recommends chromium >/dev/null; }
command -v chromium >/dev/null && echo "[setup_browser] $(chromium --version)"
