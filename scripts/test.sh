#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (`make test`, called by .ci/run).
#  1. installs the system packages the tests need (scripts/install-deps.sh);
#  2. checks formatting, and beside everything after it the web UI's
#     component tests and committed build (scripts/test-web.sh check);
#  3. builds maestro (the binary the end-to-end tests run), then runs
#     every Go test with go vet's every analyzer on every package (go test
#     -vet=all; CI=true makes tiers that would otherwise skip for a missing
#     component fail instead) and the web UI's browser tests
#     (scripts/test-web.sh browser);
#  4. runs each fuzz target for a bounded time.
# What does not depend on each other overlaps, so that the two cores are
# busy while tests wait on subprocesses, servers and browsers: the agent
# CLIs and MCP servers install from npm in the background from the start,
# the S3 server builds beside maestro once the standard library is
# compiled, and only the test binaries that need one of them wait for it
# (a go test -exec gate), while every other package is compiled, linked
# and run; the web check (npm, vitest, a build of the app in a copy of
# web/) runs beside the Go build and tests; no package is compiled by two
# go commands at once (on a fresh machine maestro's build compiles nearly
# every dependency first); the longest-running Go packages start first,
# and the other packages and the browser tests beside them once their test
# binaries are built; the fuzz targets' test binaries build (at low
# priority) while the Go tests run; the fuzz stage starts once the other
# packages are done, with a second lane once the longest-running packages
# are done too.
set -euo pipefail
cd "$(dirname "$0")/.."
# This script is CI's test command and installs every component the tests
# need, so nothing may skip: tiers that skip (loudly) for a missing component
# when run by hand with `go test` fail instead under CI=true.
export CI=${CI:-true}
# Without cgo: only the Landlock library's psx (which then uses Go's own
# syscall.AllThreadsSyscall), net and os/user would use it, and with it
# every binary that imports them links through the external linker (gcc):
# a static, internally linked binary is the same program for far less
# link CPU (README, "Set up on a fresh machine"). Exported, so that
# the binaries the tests build themselves are built the same way (and hit
# the same build cache).
export CGO_ENABLED=${CGO_ENABLED:-0}

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

# What the tests need beyond Go, each prepared in the background from the
# start, where it mostly waits (on the npm registry): the five agent CLIs
# (the agent-CLI integration tiers), the MCP servers (internal/mcp's
# integration tests, the MCP e2e tests) and the S3-compatible server of the
# blob store tests (versitygw, built from its Go module into
# .cache/versitygw; kept once built). Each job writes its exit status to
# $ready/NAME when it ends (renamed into place: a reader never sees a
# partial file); the test binaries that need it wait for that file (the
# gate below), the others run meanwhile. Each job's output is shown, and a
# failure said, as soon as the Go tests are started. Under CI=true a tier
# whose component is missing fails rather than skips.
ready=$tmp/ready
mkdir -p "$ready"
setup() {
  local name=$1
  shift
  { set +e; "$@" >"$tmp/$name.log" 2>&1; echo $? >"$ready/$name.tmp"; mv "$ready/$name.tmp" "$ready/$name"; } &
}
setup agent-clis bash scripts/install-agent-clis.sh
setup mcp-servers bash scripts/install-mcp-servers.sh
# report NAME MESSAGE: waits for the setup job NAME, shows its output, and
# MESSAGE when it failed.
report() {
  while [ ! -e "$ready/$1" ]; do sleep 0.2; done
  stage "$1 (set-up done)"
  cat "$tmp/$1.log"
  [ "$(cat "$ready/$1")" = 0 ] || echo "$2"
}

stage "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.cache/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

# The web UI's component tests and the check that internal/webui/dist is
# the build of web/, beside everything that follows (mostly Node on one
# core while Go compiles on the other): the check builds the app in a copy
# of web/ and never rewrites internal/webui/dist, which go:embed reads. Its
# npm ci overlaps the npm installs above. Its output is shown at the end.
export MAESTRO_WEB_DEPS_READY=$tmp/web-deps-ready
setsid bash scripts/test-web.sh check >"$tmp/web-check.log" 2>&1 &
web_check_pid=$!
groups+=("$web_check_pid")

# The standard library packages maestro needs, compiled first, alone:
# the S3 server's build (below) and maestro's then both take them from the
# build cache (two go commands compiling the same package at once each
# compile it: the build cache does not share work in flight).
stage "standard library"
go build $(go list -deps -f '{{if .Standard}}{{.ImportPath}}{{end}}' ./cmd/maestro ./internal/pgtest/pgtestd)

# The S3 server of the blob store tests (versitygw, built from its Go
# module; kept once built) beside maestro's build: internal/blobstore and
# cmd/maestro wait for it (the gate below). A test-only server, built
# without optimisation or symbol tables (scripts/install-s3.sh).
setup s3 bash scripts/install-s3.sh

# The maestro binary and pgtestd, built next and in one go build: on a
# cold machine this compiles nearly every dependency (the longest-running
# test packages, which start next, need almost all of them), once, before
# any other go command compiles this module's dependencies. Every test
# package that runs maestro (the end-to-end tests of cmd/maestro,
# internal/cli's headless tests, the browser tests) takes it from
# $MAESTRO_TEST_BINARY (internal/proctest) instead of linking its own copy
# (about 19 CPU-s each). -s -w: no symbol table or DWARF (half the link's
# CPU; panics still print file:line).
stage "maestro binary"
mkdir -p "$tmp/bin"
go build -ldflags='-s -w' -o "$tmp/bin/" ./cmd/maestro ./internal/pgtest/pgtestd
export MAESTRO_TEST_BINARY=$tmp/bin/maestro

# One PostgreSQL cluster for every test package that needs one
# (internal/pgtest): the test binaries attach to it through
# $MAESTRO_PGTEST_CLUSTER instead of each running initdb and a server of
# its own (about 3 CPU-s each); every test still gets its own schema or
# database. pgtestd stops it when this script ends (its stdin closes). The
# Go tests read its address.
coproc PGTESTD { exec "$tmp/bin/pgtestd" 2>"$tmp/pgtestd.log"; }

if read -r -t 180 pg_dsn <&"${PGTESTD[0]}"; then
  export MAESTRO_PGTEST_CLUSTER=$pg_dsn
else
  cat "$tmp/pgtestd.log"
  echo "no shared PostgreSQL cluster: each test package starts its own"
fi

stage "go test"
log=$tmp/go-test.log
# go test runs test binaries in the same -p slots (2 on 2 cores) as it
# compiles and links: the packages that run longest (the real agent CLIs'
# tiers, the end-to-end tests, the sandbox's attack and limit tests:
# minutes each, mostly waiting on subprocesses and the servers they start)
# would hold the slots while every other package waits to be built. They
# get their own go test, started first (their minutes of waiting are the
# suite's critical path: they start as soon as the binary above is built),
# with a slot each (-p 3: their cores mostly wait); the go test of the
# other packages, with its two slots for the CPU, starts once their test
# binaries are built (see below).
slowest=(./internal/agentcli ./cmd/maestro ./internal/sandbox)
module=$(go list -m)
# The gate (go test -exec): a test binary starts (in its package's
# directory) once the set-up jobs its package's tests need are done; go
# test compiles, links and runs the other packages meanwhile. What a
# package needs is read from its test files: the helpers that find an
# installed agent CLI (proctest.AgentCLI, agentclitest.ProcessEnv), MCP
# server (mcptest.Installed) or S3 server (s3test.Binary, s3test.Start). A
# test reaching them through another helper would race the install: under
# CI=true it fails for the missing component (it never skips). The gate
# also marks, in $MAESTRO_TEST_STARTED, each package whose test binary is
# built (vetted and linked) and started.
needs=$tmp/needs
: >"$needs"
root=$(pwd -P)
gate_needs() { # NAME REGEXP: the packages whose test files match need NAME
  { grep -rlE --include='*_test.go' --exclude-dir=.cache --exclude-dir=node_modules "$2" . || true; } |
    xargs -r -n1 dirname | sort -u | while read -r d; do echo "$root/${d#./} $1"; done >>"$needs"
}
gate_needs agent-clis 'proctest\.AgentCLI\(|agentclitest\.ProcessEnv\('
gate_needs mcp-servers 'mcptest\.Installed\('
gate_needs s3 's3test\.(Binary|Start)\('
started=$tmp/started
mkdir -p "$started"
cat >"$tmp/gate" <<'GATE'
#!/usr/bin/env bash
# go test -exec (scripts/test.sh): marks the package in the working
# directory as started, waits for the set-up jobs it needs, then runs the
# test binary.
here=$(pwd -P)
: >"$MAESTRO_TEST_STARTED/$(printf %s "$here" | tr / _)"
while read -r dir name; do
  [ "$dir" = "$here" ] || continue
  while [ ! -e "$MAESTRO_TEST_READY/$name" ]; do sleep 0.2; done
done <"$MAESTRO_TEST_NEEDS"
exec "$@"
GATE
chmod +x "$tmp/gate"
export MAESTRO_TEST_READY=$ready MAESTRO_TEST_NEEDS=$needs MAESTRO_TEST_STARTED=$started
# The other packages, those the gate holds last: go test runs the test
# binaries in the order of its arguments, and a held one keeps its slot.
packages=()
gated=()
while read -r p; do
  case " ${slowest[*]} " in *" ./${p#"$module"/} "*) continue ;; esac
  if grep -q "^$root/${p#"$module"/} " "$needs"; then gated+=("$p"); else packages+=("$p"); fi
done < <(go list ./...)
packages+=("${gated[@]}")
# -vet=all: go test runs go vet's every analyzer on each package it
# tests (test files included; a package without tests is vetted too), as
# `go vet ./...` would, but inside the same build graph: no separate pass
# over every package before the first test may start, and no dependency
# compiled or analysed by two go commands at once.
# -ldflags='-s -w': about a third less CPU per test binary's link.
test_flags=(-count=1 -timeout 20m -vet=all -v -ldflags='-s -w' -exec "$tmp/gate")
setsid go test -p 3 "${test_flags[@]}" "${slowest[@]}" >"$tmp/go-test-slowest.log" 2>&1 &
slowest_pid=$!
groups+=("$slowest_pid")
# The other packages' go test starts once the longest-running packages'
# test binaries are built and started (what they compile and analyse is
# then in the build cache for it), or their go test has ended, or one of
# them failed to build.
for d in "${slowest[@]}"; do
  marker="$started/$(printf %s "$root/${d#./}" | tr / _)"
  while [ ! -e "$marker" ] && kill -0 "$slowest_pid" 2>/dev/null &&
    ! grep -qE "^FAIL[[:space:]]+$module/${d#./}[[:space:]]+\[" "$tmp/go-test-slowest.log"; do
    sleep 0.5
  done
done
stage "go test of the other packages"

# The fuzz targets, as "package target" lines.
fuzz_targets=$(grep -rl --include='*_test.go' '^func Fuzz' . 2>/dev/null | grep -v '^./.cache/' | sort | while read -r f; do
  pkg="./$(dirname "${f#./}")"
  grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | sed 's/^func //' | while read -r t; do echo "$pkg $t"; done
done)
# One coverage-instrumented test binary per package with fuzz targets,
# built at low priority while the Go tests run so that the fuzz stage only
# fuzzes. The coverage that guides the fuzzer is that of this module's
# packages (-d=libfuzzer, the instrumentation go test -fuzz adds): go test
# -fuzz instruments every dependency too, and an instrumented package
# differs from the tests' build of it, and so does every package that
# imports it: the standard library instrumented, every third-party
# dependency (modernc.org/sqlite, NATS, gRPC, the model SDKs: about 600
# packages in all) is compiled a second time, for six fuzz targets whose
# code under test is this module's (about 220 CPU-s against 46 on a cold
# machine). The dependencies are the tests' build instead.
fuzz_gcflags=(-gcflags="$module/...=-d=libfuzzer")
fuzz_bin=$tmp/fuzz
mkdir -p "$fuzz_bin"
(
  for pkg in $(echo "$fuzz_targets" | awk 'NF { print $1 }' | sort -u); do
    nice -n 19 go test -c -vet=off -ldflags='-s -w' "${fuzz_gcflags[@]}" \
      -o "$fuzz_bin/$(echo "${pkg#./}" | tr / _).test" "$pkg" ||
      echo "fuzz build of $pkg failed" >&2
  done
) >"$tmp/fuzz-build.log" 2>&1 &
fuzz_build_pid=$!

# The browser tests (mostly waiting on Chromium and the server) beside
# the Go tests; their output is shown after them.
# They read axe-core from web/node_modules, which the web check's npm ci
# replaces: they start once it is done (or the check has ended), while the
# Go tests go on.
WEB_CHECK_PID=$web_check_pid setsid bash -c 'while [ ! -e "$MAESTRO_WEB_DEPS_READY" ] && kill -0 "$WEB_CHECK_PID" 2>/dev/null; do sleep 1; done
  exec bash scripts/test-web.sh browser' >"$tmp/web-browser.log" 2>&1 &
web_pid=$!
groups+=("$web_pid")
setsid go test "${test_flags[@]}" "${packages[@]}" >"$tmp/go-test-rest.log" 2>&1 &
rest_pid=$!
groups+=("$rest_pid")
# The set-up jobs' output, each once it is done (the tests that need it
# waited for it).
report agent-clis "agent CLIs not installed: the agent-CLI integration tiers fail under CI=true"
report mcp-servers "MCP servers not installed: the internal/mcp integration tests fail under CI=true"
report s3 "versitygw not built: the internal/blobstore S3 tests fail under CI=true"
set +e
wait "$rest_pid"
status=$?
set -e
echo "== the other packages' go test ended (at ${SECONDS}s)"
# The fuzz stage: each fuzz target for a bounded time with its package's
# prebuilt binary, from a queue that one lane starts on once the other
# packages' tests are done, while the longest-running packages and the
# browser tests (mostly waiting) go on, and a second lane joins once the
# longest-running packages are done: both cores fuzz then, one target
# each, and every target still gets its whole budget.
fuzz_time=${FUZZ_TIME:-10s}
# The generated corpus starts empty each run (seeds: the targets' f.Add
# and testdata/fuzz): a corpus cache kept across runs (go test -fuzz's,
# in GOCACHE) grows with every run, and its baseline re-run takes more
# of each target's fixed budget every time; from the seeds, a run's cost
# does not grow.
fuzz_cache=$tmp/fuzz-cache
mkdir -p "$tmp/fuzz-out"
# fuzz_one PKG TARGET: runs one fuzz target with its package's prebuilt
# binary, in the package's directory (where testdata/fuzz holds its corpus
# and a failing input is written), with one fuzz worker
# (-test.parallel=1): a worker per core doubled its CPU for the same
# budget of time.
fuzz_one() {
  local pkg=$1 target=$2 bin
  bin="$fuzz_bin/$(echo "${pkg#./}" | tr / _).test"
  [ -x "$bin" ] || { echo "fuzz $pkg $target: no test binary (see the build log above)"; return 1; }
  (cd "$pkg" && "$bin" -test.run='^$' -test.fuzz="^${target}\$" -test.fuzztime="$fuzz_time" \
    -test.parallel=1 -test.fuzzcachedir="$fuzz_cache/$module/${pkg#./}" -test.timeout=10m)
}
# fuzz_target PKG TARGET LOG: one target, its output in LOG. go's fuzz
# coordinator can end a run with "context deadline exceeded" and no
# failing input when -fuzztime runs out while a worker is slow (a loaded
# machine: the last second shows 0 execs/sec): that is retried once; a
# real finding (a failing input written to testdata/fuzz) fails at once.
fuzz_target() {
  local pkg=$1 target=$2 log=$3
  echo "fuzz $pkg $target ($fuzz_time)" >"$log"
  fuzz_one "$pkg" "$target" >>"$log" 2>&1 && return 0
  if grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input written' "$log"; then
    echo "fuzz $pkg $target: the fuzz coordinator timed out without a finding; running it once more" >>"$log"
    fuzz_one "$pkg" "$target" >>"$log" 2>&1 && return 0
  fi
  return 1
}
# fuzz_lane: takes the next target from the queue (a counter under a
# lock, shared by the lanes) until none is left; stops at a failing one.
fuzz_lane() {
  local n line pkg target
  while :; do
    n=$(flock "$tmp/fuzz-next" bash -c 'n=$(cat "$1"); n=${n:-0}; echo $((n + 1)) >"$1"; echo "$n"' _ "$tmp/fuzz-next")
    line=$(echo "$fuzz_targets" | awk 'NF' | sed -n "$((n + 1))p")
    [ -n "$line" ] || return 0
    read -r pkg target <<<"$line"
    fuzz_target "$pkg" "$target" "$tmp/fuzz-out/$(printf %04d "$n").log" || return 1
  done
}
fuzz_pids=()
# start_fuzz_lane: one more lane, a process group of its own.
start_fuzz_lane() {
  setsid bash -c "set -uo pipefail; $(declare -f fuzz_one fuzz_target fuzz_lane); fuzz_lane" &
  fuzz_pids+=("$!")
  groups+=("$!")
}
export tmp fuzz_bin module fuzz_targets fuzz_time fuzz_cache
if [ "$status" -eq 0 ]; then
  # The instrumented binaries were built (at low priority) meanwhile.
  wait "$fuzz_build_pid" || true
  start_fuzz_lane
fi
set +e
wait "$slowest_pid"
slowest_status=$?
set -e
echo "== the longest-running packages' go test ended (at ${SECONDS}s, or before)"
[ "$status" -ne 0 ] || status=$slowest_status
[ "$status" -ne 0 ] || start_fuzz_lane
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
  # A package that failed with no failing test (a panic outside a test, a
  # timeout's or a signal's goroutine dump): its output, at most its last
  # 200 lines (go test prints each package's output in one piece).
  awk '
    /^(ok|\?)[ \t]/ { n = 0; hadfail = 0; next }
    /^FAIL[ \t]/ {
      if (!hadfail) {
        print "----- package " $2 " (no failing test: a panic, a timeout or a signal)"
        from = (n > 200) ? n - 200 : 0
        for (i = from + 1; i <= n; i++) print buf[i]
      }
      n = 0; hadfail = 0; next
    }
    /^[ ]*--- FAIL: / { hadfail = 1 }
    { buf[++n] = $0 }
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

# The web UI's component tests and committed build, checked beside the Go
# tests.
web_check_status=0
wait "$web_check_pid" || web_check_status=$?
cat "$tmp/web-check.log"
if [ "$web_check_status" -ne 0 ]; then
  echo "the web check failed (exit $web_check_status)"; exit "$web_check_status"
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
for p in "${fuzz_pids[@]}"; do wait "$p" || fuzz_status=$?; done
cat "$tmp"/fuzz-out/*.log
if [ "$fuzz_status" -ne 0 ]; then
  echo "the fuzz stage failed (exit $fuzz_status)"; exit "$fuzz_status"
fi

echo "go test: $passed passed, $failed failed, $skipped skipped"
cpu_used
