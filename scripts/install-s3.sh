#!/usr/bin/env bash
# Builds the S3-compatible server the blob store tests run against
# (versitygw with its POSIX backend: internal/blobstore/s3test,
# docs/scale-out.md, "Artifacts") from its Go module, at a pinned version,
# into a cache directory:
#
#   scripts/install-s3.sh [CACHE_DIR]     (default .cache/versitygw)
#
# The binary is CACHE_DIR/bin/versitygw. Idempotent: a binary already built
# at this version (CACHE_DIR/version) is kept. The build is bounded
# (S3_INSTALL_TIMEOUT seconds, default 900). Exit status is non-zero when the
# build failed (the Go tests then skip loudly, or fail under CI=true).
set -euo pipefail
cd "$(dirname "$0")/.."

module=github.com/versity/versitygw
version=v1.8.0
dir=${1:-${MAESTRO_VERSITYGW:-.cache/versitygw}}
mkdir -p "$dir/bin"
dir=$(cd "$dir" && pwd)
if [ -x "$dir/bin/versitygw" ] && [ "$(cat "$dir/version" 2>/dev/null)" = "$version" ]; then
  echo "install-s3: versitygw $version already in $dir/bin"
  exit 0
fi
echo "install-s3: building $module $version into $dir/bin"
# go install of a module path at a version ignores this module's go.mod.
# A test server, built for the least CPU: its own packages and their
# dependencies without optimisation or inlining (-N -l: the tests store a
# few small objects), no symbol table or DWARF (-s -w); the standard
# library with the default flags, so that it comes from the build cache
# that scripts/test.sh filled before it starts this build.
GOBIN="$dir/bin" GOFLAGS=-mod=mod timeout "${S3_INSTALL_TIMEOUT:-900}" \
  go install -ldflags='-s -w' -gcflags='all=-N -l' -gcflags='std=' "$module/cmd/versitygw@$version"
echo "$version" >"$dir/version"
echo "install-s3: done"
