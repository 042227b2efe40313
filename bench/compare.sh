#!/usr/bin/env bash
# Before/after figures from one sitting: runs the given sections of
# bench/run.sh on a checkout of REV (a temporary git worktree) and on this
# tree, alternating, ROUNDS times, so both sides see the same machine load.
#
#   bench/compare.sh 8cbd3a6 loop agentcli sse
#   ROUNDS=3 bench/compare.sh main~5 loop
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: bench/compare.sh REV SECTION..." >&2; exit 2; }
rev=$1; shift
rounds=${ROUNDS:-2}
base=$(mktemp -d "${TMPDIR:-/tmp}/maestro-bench-base.XXXXXX")
trap 'git worktree remove --force "$base" >/dev/null 2>&1 || rm -rf "$base"' EXIT
git worktree add --detach -q "$base" "$rev"
echo "# before = $(git -C "$base" log --oneline -1 | cut -c1-60)"
echo "# after  = $(git log --oneline -1 | cut -c1-60) (this tree)"
for section in "$@"; do
  for r in $(seq "$rounds"); do
    for side in before after; do
      dir=.; [ "$side" = before ] && dir=$base
      echo
      echo "### $section — $side, round $r"
      (cd "$dir" && ONLY=$section bash bench/run.sh 2>&1 | sed 1,2d)
    done
  done
done
