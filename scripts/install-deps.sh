#!/usr/bin/env bash
# Installs the system packages the test suite needs (Debian/Ubuntu):
#   bubblewrap  - the Bash tool's sandbox (tests assert real isolation)
#   ripgrep     - the baseline the Grep benchmark compares against
#   postgresql  - initdb/postgres for the throwaway clusters the store tests
#                 start themselves (internal/pgtest); no cluster is created
#                 or started by the install
#   chromium    - Debian's headless browser for the web UI's end-to-end
#                 tests (scripts/test-web.sh); no browser is downloaded
# Idempotent: packages already present are not reinstalled. Needs root (or sudo).
set -euo pipefail

# PostgreSQL server binaries, where internal/pgtest looks for them: PATH,
# then /usr/lib/postgresql/*/bin.
have_postgres() {
  if command -v initdb >/dev/null 2>&1 && command -v postgres >/dev/null 2>&1; then
    return 0
  fi
  local d
  for d in /usr/lib/postgresql/*/bin; do
    if [ -x "$d/initdb" ] && [ -x "$d/postgres" ]; then return 0; fi
  done
  return 1
}

need=()
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v rg >/dev/null 2>&1 || need+=(ripgrep)
have_postgres || need+=(postgresql)
command -v chromium >/dev/null 2>&1 || need+=(chromium)

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

dpkg_opts=()
if [[ " ${need[*]} " == *" postgresql "* ]]; then
  # Tests start their own clusters: do not create (and start) Debian's
  # default "main" cluster. Keep this file when the package installs its own.
  if [ ! -e /etc/postgresql-common/createcluster.conf ]; then
    $SUDO mkdir -p /etc/postgresql-common
    echo "create_main_cluster = false" | $SUDO tee /etc/postgresql-common/createcluster.conf >/dev/null
  fi
  dpkg_opts=(-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
fi

echo "install-deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
timeout 300 $SUDO apt-get update -qq
timeout 600 $SUDO apt-get install -y -qq --no-install-recommends "${dpkg_opts[@]}" "${need[@]}" >/dev/null
echo "install-deps: done"
