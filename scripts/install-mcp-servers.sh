#!/usr/bin/env bash
# Installs the reference MCP servers the MCP client tests use
# (@modelcontextprotocol/server-everything and server-filesystem) from the npm
# registry into a cache directory, at pinned versions (internal/mcp,
# docs/mcp.md).
#
#   scripts/install-mcp-servers.sh [CACHE_DIR]     (default .cache/mcp-servers)
#
# Idempotent (scripts/npm-cache-install.sh). Each npm install is bounded
# (MCP_SERVER_INSTALL_TIMEOUT seconds, default 300). The servers' entry points
# are linked into CACHE_DIR/bin (run them with node). Exit status is non-zero
# when any install failed (the Go tests then skip loudly, or fail under
# CI=true).
set -uo pipefail
cd "$(dirname "$0")/.."

# name|package|version|binary inside the prefix
servers=(
  "server-everything|@modelcontextprotocol/server-everything|2026.8.31|node_modules/.bin/mcp-server-everything"
  "server-filesystem|@modelcontextprotocol/server-filesystem|2026.8.31|node_modules/.bin/mcp-server-filesystem"
)
NPM_INSTALL_TIMEOUT=${MCP_SERVER_INSTALL_TIMEOUT:-300} exec bash scripts/npm-cache-install.sh install-mcp-servers \
  "${1:-${MAESTRO_MCP_SERVERS:-.cache/mcp-servers}}" "${servers[@]}"
