#!/usr/bin/env bash
# Whole-process benchmarks of `maestro headless` (see main.go): spawn → ready,
# hello → hello_ok, the response_chunk rate to fast and slow readers with
# memory, and the resident-memory rows of issue 22 for this tree beside
# BASELINE (default 8cda6c9, the tree on the day issue 22 was filed, before its work) built
# the same way, in alternating rounds. Prints markdown tables.
#
#   bash bench/headless/run.sh
#   BASELINE=REV ROUNDS=5 bash bench/headless/run.sh
#   bash bench/headless/run.sh -memory     # only the memory rows
set -euo pipefail
cd "$(dirname "$0")/../.."
BASELINE=${BASELINE:-8cda6c9}
ROUNDS=${ROUNDS:-3}
make -s build
base_label=$(git rev-parse --short "$BASELINE^{commit}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src"
git archive "$base_label" | tar -x -C "$work/src"
(cd "$work/src" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$work/maestro-$base_label" ./cmd/maestro)
echo "$(go version | cut -d' ' -f3), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
go run ./bench/headless -bin ./bin/maestro -base "$work/maestro-$base_label" -rounds "$ROUNDS" "$@"
echo "In-process figures (no process boundary): go test -run '^\$' -bench . ./internal/transport/stdio/"
