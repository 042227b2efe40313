#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (`make test`, called by .ci/run).
#  1. installs the system packages the tests need (scripts/install-deps.sh);
#  2. checks formatting, the web UI's component tests and committed build
#     (scripts/test-web.sh check), and go vet;
#  3. runs every Go test (CI=true makes tiers that would otherwise skip for a
#     missing component fail instead) and the web UI's browser tests
#     (scripts/test-web.sh browser);
#  4. runs each fuzz target for a bounded time.
# What does not depend on each other overlaps, so that the two cores are
# busy while tests wait on subprocesses, servers and browsers: the agent
# CLIs and MCP servers install from npm during the web check, gofmt and go
# vet; the fuzz targets' instrumented test binaries build (at low
# priority) while the Go tests run; the browser tests and the two
# longest-running Go packages run beside the other Go packages; the fuzz
# stage starts once those are done.
set -euo pipefail
cd "$(dirname "$0")/.."
# This script is CI's test command and installs every component the tests
# need, so nothing may skip: tiers that skip (loudly) for a missing component
# when run by hand with `go test` fail instead under CI=true.
export CI=${CI:-true}

# Each stage's heading says when it began (seconds since the start); the
# last line gives the CPU time the whole run used (bash's times: this
# script's and its children's, user and system). The suite is CPU-bound on
# two cores, so that figure, not the wall time, is what a change to the
# suite's cost shows under load.
stage() { echo "== $1 (at ${SECONDS}s)"; }
cpu_used() {
  local t
  times >"$tmp/times" # (in a $(...) subshell it would count the subshell's children)
  t=$(tail -1 "$tmp/times") # the children's user and system time: "XmY.YYYs XmY.YYYs"
  echo "test.sh: ${SECONDS}s wall; children's CPU user ${t% *}, system ${t#* }"
}

bash scripts/install-deps.sh
tmp=$(mktemp -d -t maestro-test.XXXXXX)
# Background jobs still running (the CLI install, the fuzz builds) end with
# the script, whichever way it ends; jobs -p lists only this script's own.
# The stages started with setsid (the Go tests, the browser tests, the
# fuzz stage) are process groups of their own, ended as a whole (their go
# test and its test binaries and browsers included). (set +e: under
# errexit a failing kill in the trap would set the exit status.)
groups=()
trap 'set +e; for g in "${groups[@]}"; do kill -- -"$g"; done 2>/dev/null; for p in $(jobs -p); do pkill -P "$p"; kill "$p"; done 2>/dev/null; rm -rf "$tmp"' EXIT

# The agent-CLI integration tier needs the five CLIs from the npm registry;
# under CI=true that tier fails (rather than skips) when they are missing.
# The install (mostly waiting on the registry) runs while gofmt and go vet
# do; its output is shown once it is done, before the Go tests need it.
bash scripts/install-agent-clis.sh >"$tmp/agent-clis.log" 2>&1 &
clis_pid=$!
# The MCP servers from npm (internal/mcp's integration tests, the MCP e2e
# tests), the same way, at the same time.
bash scripts/install-mcp-servers.sh >"$tmp/mcp-servers.log" 2>&1 &
mcp_pid=$!

stage "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.cache/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

# The web UI's component tests and the check that internal/webui/dist is
# the build of web/, before anything compiles Go: the rebuild rewrites
# dist/, which go:embed reads (a compile meanwhile could see it half
# written). Its npm ci overlaps the npm installs above.
bash scripts/test-web.sh check

stage "go vet"
go vet ./...

stage "agent CLIs"
if ! wait "$clis_pid"; then
  cat "$tmp/agent-clis.log"
  echo "agent CLIs not installed: the agentcli integration tier fails under CI=true"
else
  cat "$tmp/agent-clis.log"
fi
stage "MCP servers"
mcp_status=0
wait "$mcp_pid" || mcp_status=$?
cat "$tmp/mcp-servers.log"
if [ "$mcp_status" -ne 0 ]; then
  echo "MCP servers not installed: the internal/mcp integration tests fail under CI=true"
fi
# The S3-compatible server of the blob store tests (versitygw, built from
# its Go module into .cache/versitygw; kept once built).
echo "== S3 server"
bash scripts/install-s3.sh || echo "versitygw not built: the internal/blobstore S3 tests fail under CI=true"

# The fuzz targets, as "package target" lines.
fuzz_targets=$(grep -rl --include='*_test.go' '^func Fuzz' . 2>/dev/null | grep -v '^./.cache/' | sort | while read -r f; do
  pkg="./$(dirname "${f#./}")"
  grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | sed 's/^func //' | while read -r t; do echo "$pkg $t"; done
done)
# One coverage-instrumented test binary per package with fuzz targets
# (what `go test -fuzz` builds for each target anew), built at low
# priority while the Go tests run so that the fuzz stage only fuzzes.
fuzz_bin=$tmp/fuzz
mkdir -p "$fuzz_bin"
(
  for pkg in $(echo "$fuzz_targets" | awk 'NF { print $1 }' | sort -u); do
    first=$(echo "$fuzz_targets" | awk -v p="$pkg" '$1 == p { print $2; exit }')
    nice -n 19 go test -c -fuzz="^${first}\$" -o "$fuzz_bin/$(echo "${pkg#./}" | tr / _).test" "$pkg" ||
      echo "fuzz build of $pkg failed" >&2
  done
) >"$tmp/fuzz-build.log" 2>&1 &
fuzz_build_pid=$!

# The maestro binary, built once: every test package that runs it (the
# end-to-end tests of cmd/maestro, internal/cli's headless tests, the
# browser tests) takes it from $MAESTRO_TEST_BINARY (internal/proctest)
# instead of linking its own copy (about 19 CPU-s each). -s -w: no symbol
# table or DWARF (half the link's CPU; panics still print file:line).
stage "maestro binary"
mkdir -p "$tmp/bin"
go build -ldflags='-s -w' -o "$tmp/bin/maestro" ./cmd/maestro
export MAESTRO_TEST_BINARY=$tmp/bin/maestro

stage "go test"
log=$tmp/go-test.log
# go test runs test binaries in the same -p slots (2 on 2 cores) as it
# compiles and links: the two packages that run longest (the real agent
# CLIs' tiers, minutes each, mostly waiting on the CLIs and the servers
# they start) would hold both slots while every other package waits to be
# built. They get their own go test, started first, beside the one of the
# other packages, which keeps its two slots for the CPU.
slowest=(./internal/agentcli ./cmd/maestro)
module=$(go list -m)
packages=()
while read -r p; do
  case " ${slowest[*]} " in *" ./${p#"$module"/} "*) continue ;; esac
  packages+=("$p")
done < <(go list ./...)
# -vet=off: go vet ./... above ran every analyzer on every package (test
# files included), a superset of the few go test would run again.
# -ldflags='-s -w': about a third less CPU per test binary's link.
test_flags=(-count=1 -timeout 20m -vet=off -v -ldflags='-s -w')
setsid go test "${test_flags[@]}" "${slowest[@]}" >"$tmp/go-test-slowest.log" 2>&1 &
slowest_pid=$!
groups+=("$slowest_pid")
# The browser tests (mostly waiting on Chromium and the server) beside
# the Go tests; their output is shown after them.
setsid bash scripts/test-web.sh browser >"$tmp/web-browser.log" 2>&1 &
web_pid=$!
groups+=("$web_pid")
set +e
go test "${test_flags[@]}" "${packages[@]}" >"$tmp/go-test-rest.log" 2>&1
status=$?
set -e
# The fuzz stage: each fuzz target for a bounded time with its package's
# prebuilt binary. It starts once the other packages' tests are done, while
# the longest-running packages and the browser tests (mostly waiting) go on.
fuzz_stage() {
  fuzz_time=${FUZZ_TIME:-10s}
  fuzz_cache=$(go env GOCACHE)/fuzz
  # Runs one fuzz target with its package's prebuilt binary, in the
  # package's directory (where testdata/fuzz holds its corpus and a failing
  # input is written), with the corpus cache go test -fuzz would use.
  fuzz_one() {
    local pkg=$1 target=$2 bin
    bin="$fuzz_bin/$(echo "${pkg#./}" | tr / _).test"
    [ -x "$bin" ] || { echo "fuzz $pkg $target: no test binary (see the build log above)"; return 1; }
    (cd "$pkg" && "$bin" -test.run='^$' -test.fuzz="^${target}\$" -test.fuzztime="$fuzz_time" \
      -test.fuzzcachedir="$fuzz_cache/$module/${pkg#./}" -test.timeout=10m)
  }
  while read -r pkg target; do
    [ -n "$target" ] || continue
    echo "fuzz $pkg $target ($fuzz_time)"
    # go's fuzz coordinator can end a run with "context deadline exceeded"
    # and no failing input when -fuzztime runs out while a worker is slow (a
    # loaded machine): that is retried once; a real finding (a failing input
    # written to testdata/fuzz) fails at once.
    fuzz_log=$tmp/fuzz.log
    if ! fuzz_one "$pkg" "$target" 2>&1 | tee "$fuzz_log"; then
      if grep -q 'context deadline exceeded' "$fuzz_log" && ! grep -q 'Failing input written' "$fuzz_log"; then
        echo "fuzz $pkg $target: the fuzz coordinator timed out without a finding; running it once more"
        fuzz_one "$pkg" "$target" || exit 1
      else
        exit 1
      fi
    fi
  done <<<"$fuzz_targets"
}
if [ "$status" -eq 0 ]; then
  # The instrumented binaries were built (at low priority) meanwhile.
  wait "$fuzz_build_pid" || true
  export tmp fuzz_bin module fuzz_targets
  setsid bash -c "set -euo pipefail; $(declare -f fuzz_stage); fuzz_stage" >"$tmp/fuzz-stage.log" 2>&1 &
  fuzz_pid=$!
  groups+=("$fuzz_pid")
fi
set +e
wait "$slowest_pid"
slowest_status=$?
set -e
[ "$status" -ne 0 ] || status=$slowest_status
cat "$tmp/go-test-slowest.log" "$tmp/go-test-rest.log" >"$log"

# Package results and every failure in full; skips with their reasons.
grep -E '^(ok|FAIL|---|panic:|\s+--- (FAIL|SKIP))|^\s*\S+\.go:[0-9]+:|^# ' "$log" | grep -v -- '--- PASS' || true
passed=$(grep -cE -- '^\s*--- PASS' "$log" || true)
failed=$(grep -cE -- '^\s*--- FAIL' "$log" || true)
skipped=$(grep -cE -- '^\s*--- SKIP' "$log" || true)
if [ "$status" -ne 0 ]; then
  # The whole output of every failed test (the filter above keeps only the
  # first line of each message), at most its last 300 lines.
  echo "== output of the failed tests"
  awk '
    /^=== (RUN|CONT|NAME|PAUSE) / { cur = $3; next }
    /^[ ]*--- FAIL: / {
      name = $3; n = cnt[name]; from = (n > 300) ? n - 300 : 0
      print "----- " name
      for (i = from + 1; i <= n; i++) print buf[name, i]
      print; next
    }
    /^[ ]*--- (PASS|SKIP): / { delete_name = $3; for (i = 1; i <= cnt[delete_name]; i++) delete buf[delete_name, i]; cnt[delete_name] = 0; next }
    cur != "" { buf[cur, ++cnt[cur]] = $0 }
  ' "$log" || true
  echo "go test failed (exit $status); last lines:"; tail -50 "$log"
  echo "go test: $passed passed, $failed failed, $skipped skipped"
  exit "$status"
fi

if [ "$CI" = true ] && [ "$skipped" -gt 0 ]; then
  echo "go test: $skipped test(s) skipped under CI=true; in CI nothing may skip:"
  grep -E -- '^\s*--- SKIP' "$log" || true
  echo "go test: $passed passed, $failed failed, $skipped skipped"
  exit 1
fi

# The web UI's browser tests, run beside the Go tests.
web_status=0
wait "$web_pid" || web_status=$?
cat "$tmp/web-browser.log"
if [ "$web_status" -ne 0 ]; then
  echo "the browser tests failed (exit $web_status)"; exit "$web_status"
fi

stage "fuzz (bounded)"
cat "$tmp/fuzz-build.log"
fuzz_status=0
wait "$fuzz_pid" || fuzz_status=$?
cat "$tmp/fuzz-stage.log"
if [ "$fuzz_status" -ne 0 ]; then
  echo "the fuzz stage failed (exit $fuzz_status)"; exit "$fuzz_status"
fi

echo "go test: $passed passed, $failed failed, $skipped skipped"
cpu_used
