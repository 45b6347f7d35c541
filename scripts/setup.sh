#!/usr/bin/env bash
# Set up a fresh machine for TraceTrial: Python package (+ dev extras) and the
# pinned harness CLIs, all from this repository's own files.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
# System packages need root: as another user, use sudo when it works without a password.
SUDO=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; fi
apt_install() { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq "$@" >/dev/null; }
if ! command -v npm >/dev/null 2>&1; then
  echo "npm not found: installing Node.js and npm from Debian packages" >&2
  apt_install nodejs npm
fi
if ! command -v bwrap >/dev/null 2>&1; then
  # The bwrap sandbox backend (--tt-sandbox auto picks it when it runs and docker cannot).
  echo "bwrap not found: installing bubblewrap from Debian packages" >&2
  apt_install bubblewrap || echo "bubblewrap not installed: without docker, cells use the local sandbox" >&2
fi
python3 -m pip install -q -e ".[dev]"
tracetrial install claude_code codex openclaw deepseek

# The docker sandbox backend (the paper's setup; --tt-sandbox auto picks it when an engine
# answers). Set TT_NO_DOCKER=1 to leave docker alone (auto then uses bwrap).
if [ "${TT_NO_DOCKER:-0}" != "1" ]; then
  if ! command -v dockerd >/dev/null 2>&1; then
    echo "installing the docker engine from Debian packages" >&2
    apt_install docker.io || echo "WARNING: docker.io not installed: cells use bwrap" >&2
  fi
  if ! command -v debootstrap >/dev/null 2>&1; then
    # Builds the image's Debian root filesystem (the keyring checks the Debian release).
    echo "installing debootstrap from Debian packages" >&2
    apt_install debootstrap debian-archive-keyring || echo "WARNING: debootstrap not installed" >&2
  fi
  if command -v dockerd >/dev/null 2>&1 && ! docker info >/dev/null 2>&1; then
    echo "starting dockerd (log: /var/log/tracetrial-dockerd.log)" >&2
    ($SUDO sh -c 'nohup dockerd >/var/log/tracetrial-dockerd.log 2>&1 &')
    for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
    docker info >/dev/null 2>&1 || { echo "WARNING: dockerd did not come up; see /var/log/tracetrial-dockerd.log" >&2; tail -5 /var/log/tracetrial-dockerd.log >&2 || true; }
  fi
  if docker info >/dev/null 2>&1; then
    # debootstrap base + pinned CLI layer, built locally with no registry (cached by tag).
    # A failed build is loud but not fatal: the cells then say why docker cannot run them.
    tracetrial images build || echo "WARNING: the docker sandbox image could not be built (see above); choose --tt-sandbox bwrap to run without docker" >&2
  fi
fi
