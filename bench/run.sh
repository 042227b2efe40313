#!/usr/bin/env bash
# Whole-system benchmarks. Each figure is printed beside a baseline measured
# in the same run; see bench/README.md for what each row means.
#
#   bench/run.sh            # everything
#   ONLY=loop bench/run.sh  # one section: loop | grep | version | headless | utility | sessions | attach | hostedrunner | agentcli | queue | sse | eventbus
#   bench/run.sh issue22    # issue 22's table: each of its rows beside its baseline (not part of "all")
set -euo pipefail
cd "$(dirname "$0")/.."
only=${ONLY:-${1:-all}}  # or the section as the first argument: bench/run.sh queue
want() { [ "$only" = all ] || [ "$only" = "$1" ]; }
# section NAME TITLE CMD... : when NAME is wanted, runs CMD under "## TITLE".
section() {
  want "$1" || return 0
  echo "## $2"
  echo
  shift 2
  "$@"
  echo
}

echo "# Maestro benchmarks — $(date -u +%Y-%m-%dT%H:%MZ), $(go env GOVERSION), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo

if want loop; then
  echo "## Agent loop overhead per turn (replay, no-op tool)"
  echo
  out=$(go test -run '^$' -bench 'BenchmarkReplayStreamBaseline|BenchmarkLoopTurn' -benchtime 2s -count 3 ./internal/agent/)
  median() { grep "$1" <<<"$out" | sed -E 's/.* ([0-9.]+) ns\/turn.*/\1/' | sort -n | sed -n '2p'; }
  base=$(median 'BenchmarkReplayStreamBaseline')
  loop=$(median 'BenchmarkLoopTurn/session_log=false')
  logged=$(median 'BenchmarkLoopTurn/session_log=true')
  echo "| what | median per turn | overhead vs baseline |"
  echo "|---|---|---|"
  awk -v b="$base" -v l="$loop" -v g="$logged" 'BEGIN {
    printf "| baseline: replay stream consumed bare | %.1f µs | — |\n", b/1000
    printf "| agent loop, events discarded | %.1f µs | %.1f µs |\n", l/1000, (l-b)/1000
    printf "| agent loop, events appended to a session log | %.1f µs | %.1f µs |\n", g/1000, (g-b)/1000
  }'
  echo
  echo "Target: < 200 µs per turn excluding tools."
  echo
fi

if want version; then
  echo "## \`maestro version\` wall time"
  echo
  make -s build
  go run ./bench/wall -n 30 -- /bin/true -- ./bin/maestro version
  echo
  echo "Baseline: \`/bin/true\` (process spawn floor) in the same run."
  echo
fi

section grep "Grep tool vs ripgrep over the Go standard library source" bash bench/grep/run.sh

section headless "maestro headless: spawn → ready, hello round trip, response_chunk rate" bash bench/headless/run.sh

section utility "utility_file_search vs ripgrep over the Go standard library source" bash bench/utility/run.sh

section sessions "maestro serve: memory and CPU of idle live sessions" bash bench/sessions/run.sh

if want attach; then
  echo "## HTTP attach: one session fanned out to 1,000 SSE subscribers"
  echo
  go run ./bench/attach -clients "${ATTACH_CLIENTS:-1000}" -events "${ATTACH_EVENTS:-200}"
  echo
  echo "Latency: just before the runtime publishes a status frame → the envelope parsed by each client (clients in a child process, same host, lockstep)."
  echo "Memory: the server process alone; per subscriber = (with subscribers − idle) / subscribers."
  echo
fi

if want hostedrunner; then
  echo "## maestro hosted-runner: drain with 10,000 events in the log, idle RSS"
  echo
  make -s build
  go run ./bench/hostedrunner -bin ./bin/maestro
  echo
fi

section agentcli "Agent-CLI parsers: throughput on a 50 MB stream, stdout line → event latency" bash bench/agentcli/run.sh

section queue "Job queue: Maestro (SQLite, PostgreSQL) vs River on the same PostgreSQL, no-op jobs" bash bench/queue/run.sh

section sse "Job event stream: 1,000 SSE subscribers on one job (REST API)" go run ./bench/sse

if want eventbus; then
  echo "## Platform events: catch-up of a 100,000-event backlog; agent loop with the bus on vs off"
  echo
  go run ./bench/eventbus -events "${EVENTBUS_EVENTS:-100000}"
  echo
  go test -run '^$' -bench 'BenchmarkAgentLoopOverhead|BenchmarkPublishSustained' -benchtime 10x ./internal/eventbus/ | grep Benchmark
  echo
  echo "Bus + tracing on vs off: 100 runs off then 100 on per round, median on/off CPU ratio (overhead-%), replay and HTTP (fake model server) loops; NATS, the OTLP receiver and the model server run in their own processes, so only Maestro's CPU is counted."
  echo
fi

# Issue 22's table, row by row, each beside its baseline in the same run:
# utility_file_search warm and cold (this revision vs the previous one,
# interleaved, and a ripgrep pipeline), Grep with a pattern without a
# literal (vs ripgrep), the idle and peak RSS of `maestro headless`, idle
# sessions per GiB in `serve` and the queue against River. Only when asked
# for by name: the sections it runs are in "all" already.
if [ "$only" = issue22 ]; then
  echo "## Issue 22: utility_file_search warm and cold (rows 1-2)"
  echo
  bash bench/utility/run.sh
  echo
  echo "## Issue 22: Grep, pattern with no literal, vs ripgrep (row 5)"
  echo
  GREP_CASES='no literal' bash bench/grep/run.sh
  echo
  section_all() { only=all section "$@"; }
  section_all headless "Issue 22: idle and peak RSS of maestro headless (rows 3-4)" bash bench/headless/run.sh
  section_all sessions "Issue 22: idle sessions per GiB in serve" bash bench/sessions/run.sh
  section_all queue "Issue 22: queue vs River on PostgreSQL" bash bench/queue/run.sh
fi
