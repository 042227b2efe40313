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
# the binaries are linked into CACHE_DIR/bin. Exit status is non-zero when any
# install failed (the Go tests then skip loudly, or fail under CI=true).
set -uo pipefail
cd "$(dirname "$0")/.."

cache=${1:-${MAESTRO_AGENT_CLIS:-.cache/agent-clis}}
timeout_s=${AGENT_CLI_INSTALL_TIMEOUT:-300}
# A cache directory that cannot be made or entered (e.g. a link loop) stops
# the script: an empty $cache would put every prefix and link under /.
if ! mkdir -p "$cache/bin" || ! cache=$(cd "$cache" && pwd) || [ -z "$cache" ] || [ "$cache" = / ]; then
  echo "install-agent-clis: cannot use the cache directory ${1:-${MAESTRO_AGENT_CLIS:-.cache/agent-clis}}" >&2
  exit 1
fi

if ! command -v npm >/dev/null 2>&1; then
  echo "install-agent-clis: npm not found; agent CLIs not installed" >&2
  exit 1
fi

# name|package|version|binary path inside the prefix (native binaries are
# called directly: their .bin shims are stubs when install scripts are skipped)
clis=(
  "claude|@anthropic-ai/claude-code|2.1.330|node_modules/.bin/claude"
  "codex|@openai/codex|0.169.0|node_modules/.bin/codex"
  "gemini|@google/gemini-cli|0.61.0|node_modules/.bin/gemini"
  "opencode|opencode-ai|1.18.33|node_modules/.bin/opencode"
  "qwen|@qwen-code/qwen-code|0.24.4|node_modules/.bin/qwen"
)

# One CLI: skipped when its marker records the pinned version, else
# installed into its own prefix; its binary is linked into CACHE_DIR/bin.
install_one() {
  local name=$1 pkg=$2 version=$3 bin=$4
  local prefix="$cache/$name"
  local marker="$prefix/.installed"
  if [ -f "$marker" ] && [ "$(cat "$marker")" = "$pkg@$version" ] && [ -x "$prefix/$bin" ]; then
    echo "install-agent-clis: $name $version already installed"
  else
    echo "install-agent-clis: installing $pkg@$version into $prefix"
    rm -rf "$prefix"
    mkdir -p "$prefix"
    local start
    start=$(date +%s)
    if timeout "$timeout_s" npm install --prefix "$prefix" --no-save --no-audit --no-fund \
      --loglevel=error "$pkg@$version" >"$prefix/install.log" 2>&1; then
      echo "$pkg@$version" >"$marker"
      echo "install-agent-clis: $name done in $(( $(date +%s) - start )) s"
    else
      echo "install-agent-clis: $name FAILED (see $prefix/install.log)" >&2
      tail -5 "$prefix/install.log" >&2
      return 1
    fi
  fi
  ln -sf "$prefix/$bin" "$cache/bin/$name"
}

# The five installs run at once (each in its own prefix, so they cannot
# interfere): they wait mostly on the registry, and one at a time they took
# about 45 s on a fresh machine.
pids=()
for entry in "${clis[@]}"; do
  IFS='|' read -r name pkg version bin <<<"$entry"
  install_one "$name" "$pkg" "$version" "$bin" &
  pids+=("$!")
done
status=0
for pid in "${pids[@]}"; do
  wait "$pid" || status=1
done
exit $status
