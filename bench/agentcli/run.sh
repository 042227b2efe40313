#!/usr/bin/env bash
# Agent-CLI parsers: throughput on a 50 MB stream of real captured lines per
# CLI, the CPU cost of one line, and the latency Maestro adds between a
# CLI's stdout line and our event (lines back to back, and at an agent
# CLI's pace), each beside a baseline measured in the same run
# (internal/agentcli/bench_test.go). Prints markdown tables.
set -euo pipefail
cd "$(dirname "$0")/../.."
count=${COUNT:-3}
out=$(go test -run '^$' -bench 'BenchmarkParserThroughput|BenchmarkParserBaseline' -benchtime "${BENCHTIME:-3x}" -count "$count" ./internal/agentcli/)
lat=$(go test -run '^$' -bench 'BenchmarkLineLatency$|BenchmarkLineLatencyBaseline' -benchtime "${LATENCY_N:-20000x}" -count "$count" ./internal/agentcli/)
cost=$(go test -run '^$' -bench 'BenchmarkLineCost' -benchtime "${COST_N:-20000x}" -count "$count" ./internal/agentcli/)
paced=$(go test -run '^$' -bench 'BenchmarkLineLatencyPaced' -benchtime "${PACED_N:-2000x}" -count "$count" ./internal/agentcli/)

# median of the MB/s column for one benchmark name
mbs() { grep -E "^$1(-[0-9]+)? " <<<"$out" | sed -E 's/.*[[:space:]]([0-9.]+) MB\/s.*/\1/' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
split=$(mbs 'BenchmarkParserBaseline/split')
jsonany=$(mbs 'BenchmarkParserBaseline/json-any')
echo "| parser (50 MB stream of captured lines) | MB/s (median of $count) | vs json-any baseline |"
echo "|---|---:|---:|"
printf '| baseline: lines split only (floor) | %s | — |\n' "$split"
printf '| baseline json-any: each line decoded into map[string]any (encoding/json), no events | %s | 1.00× |\n' "$jsonany"
for cli in claude-code codex gemini-cli opencode qwen-code; do
  v=$(mbs "BenchmarkParserThroughput/$cli")
  printf '| %s → Maestro events | %s | %s× |\n' "$cli" "$v" "$(awk -v a="$v" -v b="$jsonany" 'BEGIN{printf "%.2f", a/b}')"
done
echo

# median p50/p99 for one latency benchmark
pct() { grep -E "^$1(-[0-9]+)? " <<<"$lat" | sed -E "s/.*[[:space:]]([0-9.]+) $2-µs.*/\1/" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
b50=$(pct BenchmarkLineLatencyBaseline p50); b99=$(pct BenchmarkLineLatencyBaseline p99)
m50=$(pct BenchmarkLineLatency p50); m99=$(pct BenchmarkLineLatency p99)
echo "| stdout line → event (Claude Code tool turn, pipe) | p50 | p99 |"
echo "|---|---:|---:|"
printf '| baseline: line written to a pipe → read back by a goroutine | %s µs | %s µs |\n' "$b50" "$b99"
printf '| Maestro: line → parsed event delivered | %s µs | %s µs |\n' "$m50" "$m99"
printf '| added by Maestro | %s µs | %s µs |\n' "$(awk -v a="$m50" -v b="$b50" 'BEGIN{printf "%.1f", a-b}')" "$(awk -v a="$m99" -v b="$b99" 'BEGIN{printf "%.1f", a-b}')"
echo

# median of a column (unit $2) for one benchmark name in output $3
col() { grep -E "^$1(-[0-9]+)? " <<<"$3" | sed -E "s|.*[[:space:]]([0-9.]+) $2.*|\1|" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "| parser: one captured tool-turn line | bytes/line | CPU per line (median of $count) |"
echo "|---|---:|---:|"
for cli in claude-code codex gemini-cli opencode qwen-code; do
  ns=$(col "BenchmarkLineCost/$cli" 'ns/op' "$cost")
  printf '| %s | %s | %s µs |\n' "$cli" "$(col "BenchmarkLineCost/$cli" 'B/line' "$cost")" "$(awk -v n="$ns" 'BEGIN{printf "%.1f", n/1000}')"
done
echo

p50=$(col BenchmarkLineLatencyPaced/baseline p50-µs "$paced"); p99=$(col BenchmarkLineLatencyPaced/baseline p99-µs "$paced")
q50=$(col BenchmarkLineLatencyPaced/maestro p50-µs "$paced"); q99=$(col BenchmarkLineLatencyPaced/maestro p99-µs "$paced")
echo "| stdout line → event, one line every 2 ms (an agent CLI's pace is slower) | p50 | p99 |"
echo "|---|---:|---:|"
printf '| baseline: line written to a pipe → read back by a goroutine | %s µs | %s µs |\n' "$p50" "$p99"
printf '| Maestro: line → parsed event delivered | %s µs | %s µs |\n' "$q50" "$q99"
printf '| added by Maestro (between lines: 2,000 µs) | %s µs | %s µs |\n' "$(awk -v a="$q50" -v b="$p50" 'BEGIN{printf "%.1f", a-b}')" "$(awk -v a="$q99" -v b="$p99" 'BEGIN{printf "%.1f", a-b}')"
