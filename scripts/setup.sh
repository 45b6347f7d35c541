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

# The docker sandbox backend (the paper's setup; --tt-sandbox auto picks it when an engine
# answers). Set TT_NO_DOCKER=1 to leave docker alone (auto then uses bwrap).
if [ "${TT_NO_DOCKER:-0}" != "1" ]; then
  if ! command -v dockerd >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1; then
    echo "installing the docker engine and debootstrap from Debian packages" >&2
    (apt-get update -qq && apt-get install -y -qq docker.io debootstrap >/dev/null) \
      || echo "WARNING: docker.io/debootstrap not installed: cells use bwrap" >&2
  fi
  if command -v dockerd >/dev/null 2>&1 && ! docker info >/dev/null 2>&1; then
    echo "starting dockerd (log: /var/log/tracetrial-dockerd.log)" >&2
    (nohup dockerd >/var/log/tracetrial-dockerd.log 2>&1 &)
    for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
    docker info >/dev/null 2>&1 || { echo "WARNING: dockerd did not come up; see /var/log/tracetrial-dockerd.log" >&2; tail -5 /var/log/tracetrial-dockerd.log >&2 || true; }
  fi
  if docker info >/dev/null 2>&1; then
    # debootstrap base + pinned CLI layer, built locally with no registry (cached by tag).
    tracetrial images build
  fi
fi
