#!/usr/bin/env bash
# Set up a fresh machine for TraceTrial: Python package (+ dev extras) and the
# pinned harness CLIs, all from this repository's own files.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
if ! command -v npm >/dev/null 2>&1; then
  echo "npm not found: installing Node.js and npm from Debian packages" >&2
  apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null
fi
if ! command -v bwrap >/dev/null 2>&1; then
  # The bwrap sandbox backend (--tt-sandbox auto picks it when it runs).
  echo "bwrap not found: installing bubblewrap from Debian packages" >&2
  (apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null) || echo "bubblewrap not installed: cells use the local sandbox" >&2
fi
python3 -m pip install -q -e ".[dev]"
tracetrial install claude_code codex openclaw deepseek
