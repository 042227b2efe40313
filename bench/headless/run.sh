#!/usr/bin/env bash
# Whole-process benchmarks of `maestro headless` (see main.go): spawn → ready,
# hello → hello_ok, and the response_chunk rate to fast and slow readers with
# memory. Prints markdown tables.
#
#   bash bench/headless/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
make -s build
go run ./bench/headless -bin ./bin/maestro "$@"
echo "In-process figures (no process boundary): go test -run '^\$' -bench . ./internal/transport/stdio/"
