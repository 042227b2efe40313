#!/usr/bin/env bash
# Queue throughput and claim latency: Maestro's queue on SQLite and on
# PostgreSQL against River on the same PostgreSQL, in one run. Starts ONE
# throwaway PostgreSQL cluster (initdb + pg_ctl in a temp dir, 127.0.0.1 on a
# random port, removed on exit), builds bench/queue and bench/river (its own
# module), then for each worker count runs River, Maestro/SQLite and
# Maestro/PostgreSQL back to back (so load drift on a shared machine weighs
# on all three alike) and prints one markdown table with ratios against River.
#
#   bash bench/queue/run.sh                      # defaults
#   JOBS=20000 WORKERS="1 4 16" LAT_JOBS=500 bash bench/queue/run.sh
#   REPEAT=3 bash bench/queue/run.sh             # median of 3 runs per cell
#   IMPL="pool store" bash bench/queue/run.sh    # also the bare store loop under queue.Pool
#   BASELINE=70a1f4e bash bench/queue/run.sh     # also queue.Pool as of that git revision, interleaved
#   BACKENDS=postgres bash bench/queue/run.sh    # Maestro on PostgreSQL only (no SQLite rows)
#
# Needs the PostgreSQL server binaries (scripts/install-deps.sh); looked up
# in $PG_BIN, else PATH, else the newest /usr/lib/postgresql/*/bin.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD

JOBS=${JOBS:-5000}          # no-op jobs per throughput measurement
LAT_JOBS=${LAT_JOBS:-200}   # jobs per claim-latency measurement
LAT_RATE=${LAT_RATE:-50}    # claim-latency jobs inserted per second
WORKERS=${WORKERS:-"1 4 16"}
REPEAT=${REPEAT:-1}
TIMEOUT=${TIMEOUT:-3m}      # per measurement
IMPL=${IMPL:-pool}          # pool: queue.Pool; store: bare claim/Start/Complete loop; "pool store": both
BASELINE=${BASELINE:-}      # a git revision whose queue.Pool runs beside the current one (before/after)
BACKENDS=${BACKENDS:-"sqlite postgres"} # Maestro's store backends to measure
for b in $BACKENDS; do
  case $b in
    sqlite | postgres) ;;
    *) echo "bench/queue: BACKENDS: expected sqlite and/or postgres, found $b" >&2; exit 2 ;;
  esac
done

find_pg_bin() {
  if [ -n "${PG_BIN:-}" ]; then echo "$PG_BIN"; return; fi
  if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    dirname "$(readlink -f "$(command -v initdb)")"; return
  fi
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4 -n -r); do
    if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then echo "$d"; return; fi
  done
  echo "bench/queue: PostgreSQL server binaries not found; run scripts/install-deps.sh" >&2
  return 1
}
pgbin=$(find_pg_bin)

tmp=$(mktemp -d /tmp/maestro-bench-queue.XXXXXX)
chmod 755 "$tmp"
as_pg=()
if [ "$(id -u)" -eq 0 ]; then
  # initdb refuses root: the cluster runs as the postgres user.
  as_pg=(runuser -u postgres --)
fi
pgdata=$tmp/pg/data
pgsock=$tmp/pg/sock
mkdir -p "$pgdata" "$pgsock"
[ ${#as_pg[@]} -eq 0 ] || chown -R postgres: "$tmp/pg"

cleanup() {
  if [ -f "$pgdata/postmaster.pid" ]; then
    "${as_pg[@]}" "$pgbin/pg_ctl" -D "$pgdata" -m immediate -w -t 15 stop >/dev/null 2>&1 || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"${as_pg[@]}" "$pgbin/initdb" -D "$pgdata" -U postgres -A trust -E UTF8 --locale=C --no-sync \
  >"$tmp/initdb.log" 2>&1 || { cat "$tmp/initdb.log" >&2; exit 1; }
# A random free port on 127.0.0.1 (retry if another process takes it first).
started=
for _ in 1 2 3 4 5; do
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null \
    || echo $((20000 + RANDOM % 40000)))
  if "${as_pg[@]}" "$pgbin/pg_ctl" -D "$pgdata" -l "$tmp/pg/postgres.log" -w -t 30 \
      -o "-p $port -k $pgsock -c listen_addresses=127.0.0.1 -c max_connections=200 -c shared_buffers=128MB -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
      start >/dev/null 2>&1; then
    started=1; break
  fi
done
if [ -z "$started" ]; then
  echo "bench/queue: PostgreSQL did not start:" >&2
  tail -20 "$tmp/pg/postgres.log" >&2
  exit 1
fi
pgurl() { echo "postgres://postgres@127.0.0.1:$port/$1?sslmode=disable"; }
"$pgbin/psql" -X -q -d "$(pgurl postgres)" -c 'CREATE DATABASE maestro' -c 'CREATE DATABASE river'

go build -o "$tmp/queue" ./bench/queue
(cd bench/river && go build -o "$tmp/river" .)
base_label=
if [ -n "$BASELINE" ]; then
  # The baseline's own bench/queue, built from its tree; its rows are
  # relabelled maestro@<rev>.
  base_label=$(git rev-parse --short "$BASELINE^{commit}")
  mkdir -p "$tmp/base"
  git archive "$base_label" | tar -x -C "$tmp/base"
  (cd "$tmp/base" && go build -o "$tmp/queue-base" ./bench/queue)
  # A baseline that has -pg-pidfile records its CPU time per job too.
  base_cpu=
  case $("$tmp/queue-base" -h 2>&1 || true) in *-pg-pidfile*) base_cpu=1 ;; esac
fi

results=$tmp/results.jsonl
# store_flags prints bench/queue's flags for backend $1.
store_flags() {
  case $1 in
    sqlite) echo "-backend sqlite -dir $tmp/sqlite" ;;
    *) echo "-backend postgres -dsn $(pgurl maestro)" ;;
  esac
}
for rep in $(seq "$REPEAT"); do
  for w in $WORKERS; do
    "$tmp/river" -dsn "$(pgurl river)" -pg-pidfile "$pgdata/postmaster.pid" -workers "$w" -jobs "$JOBS" -lat-jobs "$LAT_JOBS" -lat-rate "$LAT_RATE" -timeout "$TIMEOUT" -out "$results"
    for impl in $IMPL; do
      for b in $BACKENDS; do
        cpu_flags=
        [ "$b" = sqlite ] || cpu_flags="-pg-pidfile $pgdata/postmaster.pid"
        "$tmp/queue" -impl "$impl" $(store_flags "$b") $cpu_flags -workers "$w" -jobs "$JOBS" -lat-jobs "$LAT_JOBS" -lat-rate "$LAT_RATE" -timeout "$TIMEOUT" -out "$results"
      done
    done
    if [ -n "$base_label" ]; then
      rm -f "$tmp/base.jsonl"
      for b in $BACKENDS; do
        cpu_flags=
        [ "$b" = sqlite ] || [ -z "$base_cpu" ] || cpu_flags="-pg-pidfile $pgdata/postmaster.pid"
        "$tmp/queue-base" $(store_flags "$b") $cpu_flags -workers "$w" -jobs "$JOBS" -lat-jobs "$LAT_JOBS" -lat-rate "$LAT_RATE" -timeout "$TIMEOUT" -out "$tmp/base.jsonl"
      done
      sed 's/"system":"maestro"/"system":"maestro@'"$base_label"'"/' "$tmp/base.jsonl" >>"$results"
    fi
  done
done
"$tmp/queue" -report "$results" -pg-version "$("$pgbin/postgres" --version | awk '{print $3}')"
