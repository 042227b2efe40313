#!/usr/bin/env bash
# Compaction cost on a scripted 200-turn session (internal/agent
# BenchmarkCompaction200Turns): the fake OpenAI-compatible server, a
# 32,000-token window compacted at 85 %, against the same session in a
# window too large to need compaction (the baseline, same run). Prints a
# markdown table.
#
#   bench/compaction/run.sh            # 3 sessions each way
#   COUNT=5 bench/compaction/run.sh
set -euo pipefail

cd "$(dirname "$0")/../.."
COUNT=${COUNT:-3}
out=$(go test -run '^$' -bench 'BenchmarkCompaction200Turns$' -benchtime "${COUNT}x" ./internal/agent/)
line=$(grep '^BenchmarkCompaction200Turns' <<<"$out")
metric() { awk -v unit="$1" '{ for (i = 2; i < NF; i++) if ($(i+1) == unit) print $i }' <<<"$line"; }

echo "| figure | compacting (32k window) | baseline (no compaction) |"
echo "|---|---:|---:|"
echo "| compactions in 200 turns | $(metric compactions) | 0 |"
echo "| tokens before a compaction (mean) | $(metric tokens-before/compaction) | — |"
echo "| tokens after a compaction (mean) | $(metric tokens-after/compaction) | — |"
echo "| time one compaction adds (ms, summarising call included) | $(metric ms/compaction) | — |"
echo "| share of the session's wall time spent compacting (%) | $(metric compaction-%-of-session) | — |"
echo "| session wall time (ms) | $(metric ms/session) | $(metric baseline-ms/session) |"
echo "| input tokens sent by the session | $(metric input-tokens/session) | $(metric baseline-input-tokens/session) |"
