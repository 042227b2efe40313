#!/usr/bin/env bash
# Installs the five agent CLIs Maestro drives (Claude Code, Codex, Gemini CLI,
# OpenCode, Qwen Code) from the npm registry into a cache directory, at pinned
# versions, for the agent-CLI integration tier (internal/agentcli).
#
#   scripts/install-agent-clis.sh [CACHE_DIR]     (default .cache/agent-clis)
#
# Idempotent: a CLI whose marker file records the pinned version is skipped.
# Each npm install is bounded (AGENT_CLI_INSTALL_TIMEOUT seconds, default 300).
# Every CLI gets its own prefix so one failing install cannot break the others;
# the binaries are linked into CACHE_DIR/bin (scripts/npm-cache-install.sh).
# Exit status is non-zero when any install failed (the Go tests then skip
# loudly, or fail under CI=true).
set -uo pipefail
cd "$(dirname "$0")/.."

# name|package|version|binary path inside the prefix (native binaries are
# called directly: their .bin shims are stubs when install scripts are skipped)
clis=(
  "claude|@anthropic-ai/claude-code|2.1.330|node_modules/.bin/claude"
  "codex|@openai/codex|0.169.0|node_modules/.bin/codex"
  "gemini|@google/gemini-cli|0.61.0|node_modules/.bin/gemini"
  "opencode|opencode-ai|1.18.33|node_modules/.bin/opencode"
  "qwen|@qwen-code/qwen-code|0.24.4|node_modules/.bin/qwen"
)

NPM_INSTALL_TIMEOUT=${AGENT_CLI_INSTALL_TIMEOUT:-300} exec bash scripts/npm-cache-install.sh install-agent-clis \
  "${1:-${MAESTRO_AGENT_CLIS:-.cache/agent-clis}}" "${clis[@]}"
