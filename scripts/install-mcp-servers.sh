#!/usr/bin/env bash
# Installs the reference MCP servers the MCP client tests use
# (@modelcontextprotocol/server-everything and server-filesystem) from the npm
# registry into a cache directory, at pinned versions (internal/mcp,
# docs/mcp.md).
#
#   scripts/install-mcp-servers.sh [CACHE_DIR]     (default .cache/mcp-servers)
#
# Idempotent: a server whose marker file records the pinned version is
# skipped. Each npm install is bounded (MCP_SERVER_INSTALL_TIMEOUT seconds,
# default 300). The servers' entry points are linked into CACHE_DIR/bin (run
# them with node). Exit status is non-zero when any install failed (the Go
# tests then skip loudly, or fail under CI=true).
set -uo pipefail
cd "$(dirname "$0")/.."

cache=${1:-${MAESTRO_MCP_SERVERS:-.cache/mcp-servers}}
timeout_s=${MCP_SERVER_INSTALL_TIMEOUT:-300}
# A cache directory that cannot be made or entered stops the script: an
# empty $cache would put every prefix and link under /.
if ! mkdir -p "$cache/bin" || ! cache=$(cd "$cache" && pwd) || [ -z "$cache" ] || [ "$cache" = / ]; then
  echo "install-mcp-servers: cannot use the cache directory ${1:-${MAESTRO_MCP_SERVERS:-.cache/mcp-servers}}" >&2
  exit 1
fi

if ! command -v npm >/dev/null 2>&1; then
  echo "install-mcp-servers: npm not found; MCP servers not installed" >&2
  exit 1
fi

# name|package|version|binary inside the prefix
servers=(
  "server-everything|@modelcontextprotocol/server-everything|2026.8.31|node_modules/.bin/mcp-server-everything"
  "server-filesystem|@modelcontextprotocol/server-filesystem|2026.8.31|node_modules/.bin/mcp-server-filesystem"
)

status=0
for entry in "${servers[@]}"; do
  IFS='|' read -r name pkg version bin <<<"$entry"
  prefix="$cache/$name"
  marker="$prefix/.installed"
  if [ -f "$marker" ] && [ "$(cat "$marker")" = "$pkg@$version" ] && [ -e "$prefix/$bin" ]; then
    echo "install-mcp-servers: $name $version already installed"
  else
    echo "install-mcp-servers: installing $pkg@$version into $prefix"
    rm -rf "$prefix"
    mkdir -p "$prefix"
    start=$(date +%s)
    if timeout "$timeout_s" npm install --prefix "$prefix" --no-save --no-audit --no-fund \
      --loglevel=error "$pkg@$version" >"$prefix/install.log" 2>&1 && [ -e "$prefix/$bin" ]; then
      echo "$pkg@$version" >"$marker"
      echo "install-mcp-servers: $name done in $(( $(date +%s) - start )) s"
    else
      echo "install-mcp-servers: $name FAILED (see $prefix/install.log)" >&2
      tail -5 "$prefix/install.log" >&2
      status=1
      continue
    fi
  fi
  ln -sf "$prefix/$bin" "$cache/bin/$name"
done
exit $status
