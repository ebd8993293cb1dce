#!/usr/bin/env bash
# Restart of a file cache holding many small files (docs/design.md §15), side by side in one
# run:
#   tc-warm   `tiercache mount` restarted over its cache directory after a clean unmount
#             (the checkpoint brings the clean blocks back)
#   tc-cold   the same mount over an empty cache directory of the same size: what a restart
#             gave before the checkpoint (the journal alone; every clean block dropped)
#   rclone    `rclone mount --vfs-cache-mode full` restarted over a VFS cache it filled itself
#             (only for at most RCLONE_MAX files: filling it takes a FUSE read a file)
# For each count of files: the time from starting the mount to the mountpoint answering, the
# time of the first read of a cached file after it, and (tiercache) whether that read was a
# hit (the mount's own counters: block hits, store reads) and how many blocks were restored.
#
# The tiercache cache is filled through the library (examples/fill_cache.rs: files read once
# through the mount's state) rather than through FUSE, so a million files take a minute.
#
# Usage: bench/warm_restart.sh [COUNT...]   (default: 1000 1000000)
# Environment: FAST_DIR (/dev/shm), SLOW_DIR (/var/tmp), TIERCACHE (target/release/tiercache),
#   FILL (target/release/examples/fill_cache), RCLONE_MAX (10000), FILE_SIZE (100),
#   KEEP_STORE_DIR and KEEP_CACHE_DIR (both or neither: keep each count's filled store and
#   cache there, store-N and cache-N, and reuse them on the next run; a million files take
#   minutes to fill).
set -euo pipefail

COUNTS=${*:-1000 1000000}
FAST_DIR=${FAST_DIR:-/dev/shm}
SLOW_DIR=${SLOW_DIR:-/var/tmp}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TIERCACHE=${TIERCACHE:-$ROOT/target/release/tiercache}
FILL=${FILL:-$ROOT/target/release/examples/fill_cache}
RCLONE_MAX=${RCLONE_MAX:-10000}
FILE_SIZE=${FILE_SIZE:-100}
BLOCK=512

for tool in fusermount3 python3; do
  command -v "$tool" >/dev/null || { echo "missing $tool: run scripts/setup.sh" >&2; exit 1; }
done
[ -x "$TIERCACHE" ] || { echo "missing $TIERCACHE: cargo build --release -p tiercache" >&2; exit 1; }
if [ -n "${KEEP_STORE_DIR:-}" ] && [ -z "${KEEP_CACHE_DIR:-}" ] || [ -z "${KEEP_STORE_DIR:-}" ] && [ -n "${KEEP_CACHE_DIR:-}" ]; then
  echo "KEEP_STORE_DIR and KEEP_CACHE_DIR go together" >&2; exit 2
fi
[ -x "$FILL" ] || { echo "missing $FILL: cargo build --release -p tiercache-filecache --example fill_cache" >&2; exit 1; }

WORK_FAST=$(mktemp -d "$FAST_DIR/wr-fast.XXXXXX")
WORK_SLOW=$(mktemp -d "$SLOW_DIR/wr-slow.XXXXXX")
MNT=$WORK_SLOW/mnt
mkdir -p "$MNT"
PID=

unmount() {
  mountpoint -q "$1" && { fusermount3 -u "$1" 2>/dev/null || fusermount3 -u -z "$1" || true; }
  for _ in $(seq 1 600); do mountpoint -q "$1" || return 0; sleep 0.05; done
}
cleanup() {
  unmount "$MNT" || true
  [ -n "$PID" ] && kill "$PID" 2>/dev/null || true
  rm -rf "$WORK_FAST" "$WORK_SLOW"
}
trap cleanup EXIT

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", b - a}'; }

# Starts a mount command in the background (its pid in PID); sets READY to the seconds until
# the mountpoint answers. Not run in $(...): the mount would hold the substitution's pipe.
start_and_wait() {
  local t0 t1
  t0=$(now)
  "$@" >/dev/null &
  PID=$!
  until mountpoint -q "$MNT"; do
    kill -0 "$PID" 2>/dev/null || { echo "mount exited before it was ready" >&2; return 1; }
    sleep 0.01
  done
  ls "$MNT" >/dev/null
  t1=$(now)
  READY=$(secs "$t0" "$t1")
}

# Reads file $1 under the mount, checks its content; prints the seconds it took.
first_read() {
  local t0 t1
  t0=$(now)
  cmp -s "$MNT/$1" "$EXPECTED" || { echo "wrong content in $1" >&2; return 1; }
  t1=$(now)
  secs "$t0" "$t1"
}

stop_tiercache() {
  kill -TERM "$PID"; wait "$PID" || true; PID=
  unmount "$MNT"
}

# Prints Python expression $1 of the JSON document in file $2 (as `d`).
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($1)" "$2"; }

ROWS=()
for n in $COUNTS; do
  store=${KEEP_STORE_DIR:-$WORK_SLOW}/store-$n cache=${KEEP_CACHE_DIR:-$WORK_FAST}/cache-$n
  # The fill's cache: one 512-byte block a file, plus 1/16 (as fill_cache sizes it).
  cache_size=$(( n * BLOCK * 17 / 16 ))
  if [ -n "${KEEP_CACHE_DIR:-}" ] && [ -e "$cache/checkpoint" ]; then
    echo "== $n files: reusing $store and $cache" >&2
  else
    rm -rf "$store" "$cache"
    mkdir -p "$store"
    echo "== $n files: filling the cache" >&2
    "$FILL" "$store" "$cache" --files "$n" --size "$FILE_SIZE" --block-size "$BLOCK" \
      --cache-size "$cache_size" >/dev/null
  fi
  EXPECTED=$WORK_SLOW/expected
  python3 -c "import sys; sys.stdout.buffer.write(bytes(b % 251 for b in range($FILE_SIZE)))" >"$EXPECTED"
  probe="d$(( (n / 2) / 1000 ))/f$(( n / 2 ))"
  for mode in tc-warm tc-cold; do
    dir=$cache
    [ "$mode" = tc-cold ] && dir=$WORK_FAST/cold-$n && rm -rf "$dir"
    start_and_wait "$TIERCACHE" mount "$store" "$MNT" --cache-dir "$dir" \
      --cache-size "$cache_size" --block-size "$BLOCK" --quiet --stats "$WORK_SLOW/$mode.json"
    ready=$READY
    read_s=$(first_read "$probe")
    stop_tiercache
    restored=$(json "d['restored_blocks']" "$WORK_SLOW/$mode.json")
    hits=$(json "d['core']['read_hits']" "$WORK_SLOW/$mode.json")
    store_reads=$(json "d['store_reads']" "$WORK_SLOW/$mode.json")
    ROWS+=("$(printf '%-9s %10s %12s %14s %9s %10s %12s' "$mode" "$n" "$ready" "$read_s" "$restored" "$hits" "$store_reads")")
    echo "${ROWS[-1]}" >&2
  done
  if [ "$n" -le "$RCLONE_MAX" ] && command -v rclone >/dev/null; then
    rc=$WORK_FAST/rclone-$n
    echo "== $n files: filling rclone's VFS cache through its mount" >&2
    rclone mount "$store" "$MNT" --vfs-cache-mode full --cache-dir "$rc" --config /dev/null \
      --vfs-cache-max-size 100G --log-file "$WORK_SLOW/rclone-fill.log" >/dev/null &
    PID=$!
    until mountpoint -q "$MNT"; do sleep 0.01; done
    find "$MNT" -type f -exec cat {} + >/dev/null
    unmount "$MNT"; wait "$PID" || true; PID=
    start_and_wait rclone mount "$store" "$MNT" --vfs-cache-mode full --cache-dir "$rc" \
      --config /dev/null --vfs-cache-max-size 100G --log-file "$WORK_SLOW/rclone.log"
    ready=$READY
    read_s=$(first_read "$probe")
    unmount "$MNT"; wait "$PID" || true; PID=
    ROWS+=("$(printf '%-9s %10s %12s %14s %9s %10s %12s' rclone "$n" "$ready" "$read_s" - - -)")
    echo "${ROWS[-1]}" >&2
  fi
  rm -rf "$WORK_FAST"/rclone-* "$WORK_FAST/cold-$n" 2>/dev/null || true
  [ -n "${KEEP_CACHE_DIR:-}" ] || rm -rf "$store" "$cache" 2>/dev/null || true
done

printf '\n%-9s %10s %12s %14s %9s %10s %12s\n' contender files "ready (s)" "1st read (s)" restored "hits" "store reads"
printf '%s\n' "${ROWS[@]}"
