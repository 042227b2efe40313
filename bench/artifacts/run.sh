#!/usr/bin/env bash
# Artifact store figures (issue 21): sync throughput of a 100 MB output to
# S3 (versitygw on loopback) and to a local store, claim-to-first-model-call
# latency and jobs/s with S3 artifacts vs none, in one run; prints a
# markdown table. Builds versitygw first (scripts/install-s3.sh).
#
#   bash bench/artifacts/run.sh
#   SYNC_MB=20 JOBS=10 bash bench/artifacts/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/install-s3.sh >/dev/null
go run ./bench/artifacts -versitygw .cache/versitygw/bin/versitygw -sync-mb "${SYNC_MB:-100}" -jobs "${JOBS:-30}"
