# Shell helpers of the bench scripts that time a Maestro command against a
# baseline command (bench/grep/run.sh, bench/utility/run.sh); source it.

# run_ms OUT CMD... : runs CMD with stdout to OUT and prints two numbers:
# elapsed (wall) milliseconds and CPU (user + system) milliseconds.
run_ms() {
	local out=$1; shift
	local TIMEFORMAT='%R %U %S' t
	t=$( { time "$@" >"$out" 2>/dev/null; } 2>&1 ) || true
	awk '{ printf "%d %d\n", $1 * 1000, ($2 + $3) * 1000 }' <<<"$t"
}

# median COLUMN < FILE : the median of a column of numbers.
median() { awk -v c="$1" '{print $c}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# ratio A B : A / B with two decimals ("n/a" when B is 0).
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

# need_rg : fails unless ripgrep ($RG) is installed.
need_rg() {
	command -v "$RG" >/dev/null || { echo "ripgrep ($RG) not found; scripts/install-deps.sh installs it" >&2; exit 1; }
}

# versus_setup PKG BIN : the start of a script that times a Maestro command
# against ripgrep: TREE (default: the Go standard library source) and RG
# (default: rg) set unless given, ripgrep required, a scratch directory
# $work removed on exit, and the Go package PKG built into $work/BIN.
versus_setup() {
	TREE=${TREE:-$(go env GOROOT)/src}
	RG=${RG:-rg}
	need_rg
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	go build -o "$work/$2" "$1"
}

# machine_line : the tools' versions and the machine, for a table's title.
machine_line() {
	echo "$($RG --version | sed -n 1p); $(go version | cut -d' ' -f3); $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg)"
}
