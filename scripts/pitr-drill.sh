#!/usr/bin/env bash
# `make pitr-drill`: a restore to a point in time, rehearsed end to end on a scratch cluster of
# its own (never the service's): WAL archived by archive_command, a base backup by
# pg_basebackup, a mistake (DELETE of every row) after the target time, then recovery of the
# base backup with restore_command and recovery_target_time. It passes when the recovered
# cluster holds every row committed before the target and the DELETE is undone.
# docs/operations.md, "Point-in-time recovery", says how to run the same on the real cluster.
#   COGNIS_PITR_PORT (default 55471; the recovered cluster uses the next port)
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PORT="${COGNIS_PITR_PORT:-55471}"
[[ -x "$PG_BIN/initdb" ]] || die "PostgreSQL $PG_MAJOR not installed: run scripts/install-postgres.sh"
mkdir -p "$LOCAL_DIR"
SCRATCH=$(mktemp -d "$LOCAL_DIR/pitr-drill-XXXXXX")
chmod 755 "$LOCAL_DIR" "$SCRATCH"
own "$PG_OS_USER" "$SCRATCH"
ARCHIVE="$SCRATCH/archive"
RUN="$SCRATCH/run"

pg() {  # pg_* tool or psql as the cluster's OS user
    local tool=$1
    shift
    as_user "$PG_OS_USER" "$PG_BIN/$tool" "$@"
}

sql() {  # PORT SQL: one value
    pg psql -X -q -At -v ON_ERROR_STOP=1 -h "$RUN" -p "$1" -d postgres -c "$2"
}

cleanup() {
    local data
    for data in "$SCRATCH/primary" "$SCRATCH/recovered"; do
        [[ -f "$data/postmaster.pid" ]] && pg pg_ctl stop -D "$data" -m immediate -w >/dev/null 2>&1
    done
    rm -rf "$SCRATCH"
}
trap cleanup EXIT

t0=$(date +%s)
as_user "$PG_OS_USER" mkdir -p "$ARCHIVE" "$RUN"
log "pitr drill: initdb of a scratch primary in $SCRATCH"
pg initdb -D "$SCRATCH/primary" -U "$PG_OS_USER" --auth-local=peer --auth-host=reject >/dev/null
as_user "$PG_OS_USER" tee -a "$SCRATCH/primary/postgresql.conf" >/dev/null <<EOF
port = $PORT
listen_addresses = ''
unix_socket_directories = '$RUN'
shared_buffers = '32MB'
wal_level = replica
archive_mode = on
archive_command = 'test ! -f $ARCHIVE/%f && cp %p $ARCHIVE/%f'
EOF
pg pg_ctl start -D "$SCRATCH/primary" -l "$SCRATCH/primary.log" -w >/dev/null

sql "$PORT" "CREATE TABLE drill (id int PRIMARY KEY, written text);
             INSERT INTO drill SELECT g, 'before the base backup' FROM generate_series(1, 1000) g"
log "pitr drill: base backup (pg_basebackup)"
pg pg_basebackup -h "$RUN" -p "$PORT" -D "$SCRATCH/base" -X stream -c fast
sql "$PORT" "INSERT INTO drill SELECT g, 'after the base backup' FROM generate_series(1001, 1500) g"
target=$(sql "$PORT" "SELECT clock_timestamp()")
sleep 1
sql "$PORT" "DELETE FROM drill"  # the mistake to undo
segment=$(sql "$PORT" "SELECT pg_walfile_name(pg_switch_wal())")
log "pitr drill: target $target; DELETE after it; waiting for WAL segment $segment in the archive"
wait_for 60 "$SCRATCH/primary.log" "WAL segment $segment archived" -- test -f "$ARCHIVE/$segment"
pg pg_ctl stop -D "$SCRATCH/primary" -m fast -w >/dev/null

log "pitr drill: recovering the base backup to $target"
as_user "$PG_OS_USER" cp -a "$SCRATCH/base" "$SCRATCH/recovered"
as_user "$PG_OS_USER" tee -a "$SCRATCH/recovered/postgresql.conf" >/dev/null <<EOF
port = $((PORT + 1))
archive_mode = off
restore_command = 'cp $ARCHIVE/%f %p'
recovery_target_time = '$target'
recovery_target_action = 'promote'
EOF
as_user "$PG_OS_USER" touch "$SCRATCH/recovered/recovery.signal"
pg pg_ctl start -D "$SCRATCH/recovered" -l "$SCRATCH/recovered.log" -w >/dev/null
promoted() { [[ "$(sql $((PORT + 1)) "SELECT pg_is_in_recovery()")" == f ]]; }
wait_for 60 "$SCRATCH/recovered.log" "recovery to end" -- promoted
rows=$(sql $((PORT + 1)) "SELECT count(*) FROM drill")
after=$(sql $((PORT + 1)) "SELECT count(*) FROM drill WHERE written = 'after the base backup'")
t1=$(date +%s)
if [[ "$rows" != 1500 || "$after" != 500 ]]; then
    tail -n 20 "$SCRATCH/recovered.log" >&2
    die "pitr drill FAILED: $rows rows recovered ($after from the archive), 1500 expected"
fi
echo "pitr drill passed in $((t1 - t0)) s: recovered to $target, 1500 rows" \
    "(1000 from the base backup, 500 replayed from the WAL archive), the DELETE after it undone"
