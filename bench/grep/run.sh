#!/usr/bin/env bash
# Times Maestro's Grep tool against ripgrep on the same searches over the
# same tree (default: the Go standard library source), in the same run,
# alternating the two, and prints a markdown table of medians and ratios.
#
#   bench/grep/run.sh                    # GOROOT/src, 7 repetitions
#   REPS=11 TREE=/some/dir bench/grep/run.sh
#   GREP_CASES='no literal' bench/grep/run.sh   # only the searches whose name matches (extended regexp)
#
# Both tools search the same files: ripgrep runs with --no-config (no user
# config), --hidden (Maestro does not skip dotfiles) and --no-require-git
# (Maestro applies .gitignore files outside git repositories too). Both
# skip binary files and symbolic links. Maestro returns every match
# (max_results is set high) so both print the same lines; the match counts
# are checked to be equal.
set -euo pipefail

cd "$(dirname "$0")/../.."
REPS=${REPS:-7}
# shellcheck source=../lib.sh
source bench/lib.sh
versus_setup ./bench/grep maestro-grep

# name|flags|pattern
cases=(
	'regexp||func \w+Context\('
	'literal||context.WithCancel'
	'ignore case|-i|newrequest'
	'many matches||err != nil'
	'no literal||[A-Z]{4}\d{3}'
)

echo "Grep tool vs ripgrep: $TREE ($(find "$TREE" -type f | wc -l) files, $(du -sh "$TREE" | cut -f1)), $REPS alternating runs each, medians"
machine_line
echo
echo "| search | pattern | matching lines (maestro / rg) | maestro wall ms | rg wall ms | wall ratio | maestro CPU ms | rg CPU ms | CPU ratio |"
echo "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
status=0
for c in "${cases[@]}"; do
	IFS='|' read -r name flags pattern <<<"$c"
	if [[ -n ${GREP_CASES:-} ]] && ! grep -qE -- "$GREP_CASES" <<<"$name"; then
		continue
	fi
	mflags=(-root "$TREE" -max 1000000000 -pattern "$pattern")
	rflags=(--no-config --hidden --no-require-git -n --no-heading)
	if [[ $flags == -i ]]; then
		mflags+=(-i)
		rflags+=(-i)
	fi
	# Warm the page cache once.
	"$work/maestro-grep" "${mflags[@]}" >/dev/null
	(cd "$TREE" && "$RG" "${rflags[@]}" -e "$pattern" . >/dev/null) || true
	: >"$work/m.times"
	: >"$work/r.times"
	for ((i = 0; i < REPS; i++)); do
		run_ms "$work/m.out" "$work/maestro-grep" "${mflags[@]}" >>"$work/m.times"
		(cd "$TREE" && run_ms "$work/r.out" "$RG" "${rflags[@]}" -e "$pattern" .) >>"$work/r.times"
	done
	mcount=$(grep -cE '^[^:]+:[0-9]+:' "$work/m.out" || true)
	rcount=$(grep -cE '^[^:]+:[0-9]+:' "$work/r.out" || true)
	mt=$(median 1 <"$work/m.times")
	rt=$(median 1 <"$work/r.times")
	mc=$(median 2 <"$work/m.times")
	rc=$(median 2 <"$work/r.times")
	note=""
	if [[ $mcount != "$rcount" ]]; then
		note=" (COUNTS DIFFER)"
		status=1
	fi
	printf '| %s | `%s` | %s / %s%s | %s | %s | %sx | %s | %s | %sx |\n' "$name" "$pattern" "$mcount" "$rcount" "$note" \
		"$mt" "$rt" "$(ratio "$mt" "$rt")" "$mc" "$rc" "$(ratio "$mc" "$rc")"
done
exit $status
