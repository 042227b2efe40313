#!/usr/bin/env bash
# Installs the system packages the test suite needs (Debian/Ubuntu):
#   bubblewrap  - the Bash tool's sandbox (tests assert real isolation)
#   ripgrep     - the baseline the Grep benchmark compares against
# Idempotent: packages already present are not reinstalled. Needs root (or sudo).
set -euo pipefail

need=()
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v rg >/dev/null 2>&1 || need+=(ripgrep)

if [ ${#need[@]} -eq 0 ]; then
  echo "install-deps: all system packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install-deps: need root to install: ${need[*]}" >&2
    exit 1
  fi
fi

echo "install-deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
timeout 300 $SUDO apt-get update -qq
timeout 600 $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
echo "install-deps: done"
