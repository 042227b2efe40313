#!/usr/bin/env bash
# Idle live sessions of `maestro serve` (issue 22): bytes per session (Go
# heap objects + goroutine stacks after a GC), goroutines per session,
# sessions per GiB and the CPU of the idle set, from BenchmarkIdleSessions
# (internal/host/sessions_bench_test.go), run on this tree and on BASELINE
# (default d09671d, before the replay ring grew on demand) with the same
# benchmark file, alternating, in one sitting. Prints a markdown table.
#
#   bash bench/sessions/run.sh
#   BASELINE=REV ROUNDS=3 bash bench/sessions/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
BASELINE=${BASELINE:-d09671d}
ROUNDS=${ROUNDS:-1}
base_label=$(git rev-parse --short "$BASELINE^{commit}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/base"
git archive "$base_label" | tar -x -C "$work/base"
cp internal/host/sessions_bench_test.go "$work/base/internal/host/"
go test -c -o "$work/this.test" ./internal/host/
(cd "$work/base" && go test -c -o "$work/base.test" ./internal/host/)

: >"$work/results"
for ((i = 0; i < ROUNDS; i++)); do
	for rev in base this; do
		(cd internal/host && "$work/$rev.test" -test.run '^$' -test.bench 'IdleSessions' -test.benchtime 1x) |
			awk -v rev="$rev" '/^BenchmarkIdleSessions/ { print rev, $0 }' >>"$work/results"
	done
done

# metric REV N UNIT : the median over the rounds of one reported figure.
metric() {
	awk -v rev="$1" -v n="sessions=$2-" -v unit="$3" '$1 == rev && index($2, n) {
		for (i = 3; i < NF; i++) if ($(i + 1) == unit) print $i
	}' "$work/results" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
echo "BenchmarkIdleSessions, $ROUNDS round(s), $(go version | cut -d' ' -f3), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| idle sessions | revision | KiB per session | goroutines per session | sessions per GiB | idle CPU, ms per s (whole set) |"
echo "|---:|---|---:|---:|---:|---:|"
for n in 100 1000; do
	for rev in base this; do
		label=$([ "$rev" = base ] && echo "$base_label" || echo "this tree")
		printf "| %s | %s | %.1f | %s | %s | %s |\n" "$n" "$label" \
			"$(awk -v b="$(metric "$rev" "$n" bytes/session)" 'BEGIN { print b / 1024 }')" \
			"$(metric "$rev" "$n" goroutines/session)" "$(metric "$rev" "$n" sessions/GiB)" "$(metric "$rev" "$n" idle-cpu-ms/s)"
	done
done
echo
echo "Goal (issue 22): at least 10,000 idle sessions per GiB (at most 100 KiB each) and no CPU while idle."
echo "A session: created over HTTP (replay demo, fresh workspace), one controller subscribed, its SSE stream open; the clients hold bare TCP connections in the same process."
