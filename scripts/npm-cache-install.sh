#!/usr/bin/env bash
# Installs npm packages at pinned versions into a cache directory, each in its
# own prefix so one failing install cannot break the others, and links each
# one's binary into CACHE_DIR/bin. Shared by scripts/install-agent-clis.sh
# and scripts/install-mcp-servers.sh.
#
#   scripts/npm-cache-install.sh LABEL CACHE_DIR "name|package|version|binary" …
#
# binary is the path inside the prefix. Idempotent: an entry whose marker file
# records the pinned version (and whose binary exists) is skipped. Each npm
# install is bounded (NPM_INSTALL_TIMEOUT seconds, default 300). LABEL starts
# every message. Exit status is non-zero when any install failed.
set -uo pipefail

label=$1 cache=$2 given=$2
shift 2
timeout_s=${NPM_INSTALL_TIMEOUT:-300}
# A cache directory that cannot be made or entered (e.g. a link loop) stops
# the script: an empty $cache would put every prefix and link under /.
if ! mkdir -p "$cache/bin" || ! cache=$(cd "$cache" && pwd) || [ -z "$cache" ] || [ "$cache" = / ]; then
  echo "$label: cannot use the cache directory $given" >&2
  exit 1
fi

if ! command -v npm >/dev/null 2>&1; then
  echo "$label: npm not found; nothing installed" >&2
  exit 1
fi

# One package: skipped when its marker records the pinned version, else
# installed into its own prefix; its binary is linked into CACHE_DIR/bin.
install_one() {
  local name=$1 pkg=$2 version=$3 bin=$4
  local prefix="$cache/$name"
  local marker="$prefix/.installed"
  if [ -f "$marker" ] && [ "$(cat "$marker")" = "$pkg@$version" ] && [ -x "$prefix/$bin" ]; then
    echo "$label: $name $version already installed"
  else
    echo "$label: installing $pkg@$version into $prefix"
    rm -rf "$prefix"
    mkdir -p "$prefix"
    local start
    start=$(date +%s)
    if timeout "$timeout_s" npm install --prefix "$prefix" --no-save --no-audit --no-fund \
      --loglevel=error "$pkg@$version" >"$prefix/install.log" 2>&1; then
      echo "$pkg@$version" >"$marker"
      echo "$label: $name done in $(( $(date +%s) - start )) s"
    else
      echo "$label: $name FAILED (see $prefix/install.log)" >&2
      tail -5 "$prefix/install.log" >&2
      return 1
    fi
  fi
  ln -sf "$prefix/$bin" "$cache/bin/$name"
}

# The installs run at once (each in its own prefix, so they cannot
# interfere): they wait mostly on the registry; one at a time the five agent
# CLIs took about 45 s on a fresh machine.
pids=()
for entry in "$@"; do
  IFS='|' read -r name pkg version bin <<<"$entry"
  install_one "$name" "$pkg" "$version" "$bin" &
  pids+=("$!")
done
status=0
for pid in "${pids[@]}"; do
  wait "$pid" || status=1
done
exit $status
