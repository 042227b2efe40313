#!/usr/bin/env bash
# The web UI's tests (docs/web-ui.md), as CI runs them (scripts/test.sh
# calls this; `make test-web` alone):
#  1. installs Debian's chromium when it is missing (never a downloaded
#     browser);
#  2. npm ci in web/, then the component tests (vitest);
#  3. rebuilds the app (in a copy of web/, so internal/webui/dist/ is
#     never rewritten) and fails when the committed build in
#     internal/webui/dist/ differs from it;
#  4. the browser end-to-end tests (internal/webui/e2e, build tag browser)
#     against the built binary running `maestro serve` on replay, in
#     headless Chromium; screenshots go to $MAESTRO_TEST_ARTIFACTS
#     (default test-artifacts/ at the top of the repository).
#
#   scripts/test-web.sh [check|browser]
# check runs steps 1-3 only, browser steps 1 and 4; no argument runs all.
# scripts/test.sh runs both beside the Go tests.
set -euo pipefail
cd "$(dirname "$0")/.."
export CI=${CI:-true}
part=${1:-all}
case "$part" in
  all | check | browser) ;;
  *) echo "usage: scripts/test-web.sh [check|browser]" >&2; exit 2 ;;
esac

if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
      echo "test-web: need root to install chromium (apt-get install chromium)" >&2
      exit 1
    fi
  fi
  echo "test-web: installing chromium"
  export DEBIAN_FRONTEND=noninteractive
  timeout 300 $SUDO apt-get update -qq
  timeout 900 $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
# Steps 2 and 3.
web_check() {
  if ! command -v npm >/dev/null 2>&1; then
    echo "test-web: npm is missing: install Node.js 20 or later" >&2
    exit 1
  fi

  echo "== web: npm ci"
  (cd web && timeout 600 npm ci --no-audit --no-fund)
  # The browser tests read axe-core from web/node_modules: scripts/test.sh,
  # which runs them beside this check, waits for this file before it
  # starts them (npm ci replaces node_modules as a whole).
  if [ -n "${MAESTRO_WEB_DEPS_READY:-}" ]; then touch "$MAESTRO_WEB_DEPS_READY"; fi

  echo "== web: component tests"
  # In worker threads rather than forked Node processes (each test file
  # still gets its own module graph and jsdom): less CPU to start workers.
  (cd web && timeout 600 npm test -- --pool=threads)

  echo "== web: the committed build is the build of web/"
  # The build runs in a copy of web/ (its node_modules linked), whose
  # output lands in the copy's ../internal/webui/dist: the tree's own
  # internal/webui/dist, which go:embed reads, is never rewritten, so Go
  # compiles and tests may run meanwhile (scripts/test.sh runs this check
  # beside them).
  web_copy=$(mktemp -d -t maestro-web-check.XXXXXX)
  trap 'rm -rf "$web_copy"' EXIT
  mkdir -p "$web_copy/internal/webui"
  tar -C . --exclude=web/node_modules -cf - web | tar -C "$web_copy" -xf -
  ln -s "$PWD/web/node_modules" "$web_copy/web/node_modules"
  (cd "$web_copy/web" && timeout 600 npm run build)
  if ! git diff --exit-code --stat -- internal/webui/dist ||
    [ -n "$(git ls-files --others --exclude-standard -- internal/webui/dist)" ] ||
    ! diff -r "$web_copy/internal/webui/dist" internal/webui/dist; then
    echo "test-web: internal/webui/dist is not the committed build of web/: run 'make web' and commit internal/webui/dist" >&2
    exit 1
  fi
}

# Step 4.
web_browser() {
  echo "== web: browser end-to-end tests (Chromium)"
  export MAESTRO_TEST_ARTIFACTS=${MAESTRO_TEST_ARTIFACTS:-$PWD/test-artifacts}
  mkdir -p "$MAESTRO_TEST_ARTIFACTS"
  log="$MAESTRO_TEST_ARTIFACTS/go-test.log"
  # -vet=all: go vet's every analyzer on the package (as go vet -tags
  # browser would), in the test's own build.
  go test -tags browser -vet=all -count=1 -timeout 15m -v ./internal/webui/e2e/ 2>&1 | tee "$log" | grep -E '^(ok|FAIL|---|\s+--- |panic:)|budget|axe|screenshot|\.go:[0-9]+:' || true
  if ! grep -qE '^ok\s' "$log"; then
    echo "test-web: the browser tests failed; full output in $log" >&2
    exit 1
  fi
  if [ "$CI" = true ] && grep -qE -- '--- SKIP' "$log"; then
    echo "test-web: browser tests skipped under CI=true" >&2
    exit 1
  fi
  echo "test-web: screenshots in $MAESTRO_TEST_ARTIFACTS"
}

case "$part" in
  all) web_check; web_browser ;;
  check) web_check ;;
  browser) web_browser ;;
esac
