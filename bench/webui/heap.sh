#!/usr/bin/env bash
# The web UI's memory budget, long version (docs/web-ui.md, "Budgets"): the
# browser test TestCancelRunningTask samples the tab's JS heap (after a
# forced GC) every second while a task streams, for
# MAESTRO_WEBUI_STREAM_SECONDS seconds (default here 300: five minutes),
# and logs the samples as a "budget:" line. Needs chromium and npm ci in web/
# (scripts/test-web.sh installs both).
set -euo pipefail
cd "$(dirname "$0")/../.."
export MAESTRO_WEBUI_STREAM_SECONDS=${MAESTRO_WEBUI_STREAM_SECONDS:-300}
go test -tags browser -count=1 -timeout 30m -v -run '^TestCancelRunningTask$' ./internal/webui/e2e/ 2>&1 | grep -E 'budget:|^(ok|FAIL|---)'
