#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (`make test`, called by .ci/run).
#  1. installs the system packages the tests need (scripts/install-deps.sh);
#  2. checks formatting and go vet;
#  3. runs every Go test (CI=true makes tiers that would otherwise skip for a
#     missing component fail instead);
#  4. runs each fuzz target for a bounded time.
set -euo pipefail
cd "$(dirname "$0")/.."
# This script is CI's test command and installs every component the tests
# need, so nothing may skip: tiers that skip (loudly) for a missing component
# when run by hand with `go test` fail instead under CI=true.
export CI=${CI:-true}

bash scripts/install-deps.sh
# The agent-CLI integration tier needs the five CLIs from the npm registry;
# under CI=true that tier fails (rather than skips) when they are missing.
bash scripts/install-agent-clis.sh || echo "agent CLIs not installed: the agentcli integration tier fails under CI=true"

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.cache/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

echo "== go vet"
go vet ./...

echo "== go test"
log=$(mktemp -t maestro-test.XXXXXX)
trap 'rm -f "$log"' EXIT
set +e
go test -count=1 -timeout 20m -v ./... >"$log" 2>&1
status=$?
set -e
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

# The web UI: component tests, the rebuild check, the browser tests.
bash scripts/test-web.sh

echo "== fuzz (bounded)"
fuzz_time=${FUZZ_TIME:-10s}
while read -r pkg target; do
  [ -n "$target" ] || continue
  echo "fuzz $pkg $target ($fuzz_time)"
  # go's fuzz coordinator can end a run with "context deadline exceeded"
  # and no failing input when -fuzztime runs out while a worker is slow (a
  # loaded machine): that is retried once; a real finding (a failing input
  # written to testdata/fuzz) fails at once.
  fuzz_log=$(mktemp -t maestro-fuzz.XXXXXX)
  if ! go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzz_time" "$pkg" 2>&1 | tee "$fuzz_log"; then
    if grep -q 'context deadline exceeded' "$fuzz_log" && ! grep -q 'Failing input written' "$fuzz_log"; then
      echo "fuzz $pkg $target: the fuzz coordinator timed out without a finding; running it once more"
      go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzz_time" "$pkg" || { rm -f "$fuzz_log"; exit 1; }
    else
      rm -f "$fuzz_log"; exit 1
    fi
  fi
  rm -f "$fuzz_log"
done < <(grep -rl --include='*_test.go' '^func Fuzz' . 2>/dev/null | while read -r f; do
  pkg="./$(dirname "${f#./}")"
  grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | sed 's/^func //' | while read -r t; do echo "$pkg $t"; done
done)
echo "go test: $passed passed, $failed failed, $skipped skipped"
