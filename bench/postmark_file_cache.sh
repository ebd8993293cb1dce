#!/usr/bin/env bash
# Postmark (Debian's `postmark`, the mail-server benchmark) on a slow file store, side by side in
# one run:
#   fast        the fast directory itself (tmpfs): the anchor
#   uncached    the slow store alone
#   tc-wb, tc-wb-around, tc-wt, tc-wt-around
#               `tiercache mount` of the slow store, cache on the fast directory, four variants
#   rclone      `rclone mount` (local backend) of the same store with --vfs-cache-mode full and
#               its cache on the same fast directory: the caching FUSE mount people use today
# The slow store (STORE_KIND):
#   emulated  (default) a directory on disk seen through `tiercache mount --cache-size 0` with a
#             fixed latency per operation (STORE_LATENCY per data read/write, STORE_META_LATENCY
#             per lookup/create/unlink/rename/getattr...)
#   nbd       a store that is not our own FUSE layer: ext4 (mounted `dirsync`, so creates,
#             deletes and renames reach the device before they return, as on a network file
#             system) on a loop device over the disk image that `nbdfuse` serves from
#             `nbdkit --filter=delay memory` (NBD_DELAY per device read and write). Needs root
#             (losetup, mount).
# Every contender goes through that same store. The script measures the store's own latency
# of a create and of a delete (timed on the store alone) and prints Postmark's creates and
# deletes times those as the floor: what any cache that puts metadata on the store first pays.
#
# Prints one table: Postmark's own transaction time (whole seconds, its resolution), the run's
# wall time, and each wall time as a ratio to the fast directory and to rclone. With REPS=n the
# contenders run n times, interleaved (shared machines drift), and the table shows medians.
#
# Usage: bench/postmark_file_cache.sh [FILES] [TRANSACTIONS]
# Environment: STORE_KIND (emulated), NBD_DELAY (1ms: whole seconds or NNms, as nbdkit takes it), STORE_LATENCY (1ms),
#   STORE_META_LATENCY (100us), CACHE_SIZE (256MiB),
#   FAST_DIR (/dev/shm), SLOW_DIR (/var/tmp), TIERCACHE (target/release/tiercache), ONLY (a
#   space-separated subset of the contender names), REPS (1), STORE_TIERCACHE (the binary
#   serving the slow store: $TIERCACHE; set it to compare two builds over the same store),
#   TC_ARGS (more `tiercache mount` options for the tc-* contenders), BASELINE_TIERCACHE
#   (another build: contenders base-wb, base-wt... run it, for a before/after in one run).
set -euo pipefail

FILES=${1:-1000}
TRANSACTIONS=${2:-10000}
STORE_LATENCY=${STORE_LATENCY:-1ms}
STORE_META_LATENCY=${STORE_META_LATENCY:-100us}
CACHE_SIZE=${CACHE_SIZE:-256MiB}
FAST_DIR=${FAST_DIR:-/dev/shm}
SLOW_DIR=${SLOW_DIR:-/var/tmp}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TIERCACHE=${TIERCACHE:-$ROOT/target/release/tiercache}
STORE_TIERCACHE=${STORE_TIERCACHE:-$TIERCACHE}
TC_ARGS=${TC_ARGS:-}
ONLY=${ONLY:-"fast uncached tc-wb tc-wb-around tc-wt tc-wt-around rclone"}
REPS=${REPS:-1}

STORE_KIND=${STORE_KIND:-emulated}
NBD_DELAY=${NBD_DELAY:-1ms}
TOOLS="postmark rclone fusermount3"
case $STORE_KIND in
  emulated) ;;
  nbd)
    TOOLS+=" nbdkit nbdfuse losetup mkfs.ext4"
    [ "$(id -u)" = 0 ] || { echo "STORE_KIND=nbd needs root (losetup, mount)" >&2; exit 1; }
    ;;
  *) echo "STORE_KIND must be emulated or nbd, not $STORE_KIND" >&2; exit 2 ;;
esac
for tool in $TOOLS; do
  command -v "$tool" >/dev/null || { echo "missing $tool: run scripts/setup.sh" >&2; exit 1; }
done
[ -x "$TIERCACHE" ] || { echo "missing $TIERCACHE: cargo build --release -p tiercache" >&2; exit 1; }

FAST=$(mktemp -d "$FAST_DIR/pm-fast.XXXXXX")
SLOW=$(mktemp -d "$SLOW_DIR/pm-slow.XXXXXX")
BACKING=$SLOW/backing   # the store's real directory
STORE=$SLOW/store       # the same, slowed
MNT=$SLOW/mnt           # the cached view under test
mkdir -p "$BACKING" "$STORE" "$MNT" "$FAST/cache" "$FAST/dir"
PIDS=()
LOOP=

wait_mounted() {
  for _ in $(seq 1 200); do
    mountpoint -q "$1" && return 0
    sleep 0.05
  done
  echo "mount at $1 did not appear" >&2
  return 1
}

unmount() {
  mountpoint -q "$1" && { fusermount3 -u "$1" 2>/dev/null || fusermount3 -u -z "$1" || true; }
  for _ in $(seq 1 100); do mountpoint -q "$1" || return 0; sleep 0.05; done
}

cleanup() {
  unmount "$MNT" || true
  if [ "$STORE_KIND" = nbd ]; then
    mountpoint -q "$SLOW/ext4" && umount "$SLOW/ext4"
    [ -n "$LOOP" ] && losetup -d "$LOOP"
    unmount "$SLOW/nbd" || true
    [ -f "$SLOW/nbdkit.pid" ] && kill "$(cat "$SLOW/nbdkit.pid")" 2>/dev/null
  else
    unmount "$STORE" || true
  fi
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$FAST" "$SLOW"
}
trap cleanup EXIT

if [ "$STORE_KIND" = nbd ]; then
  # ext4 on a loop device over nbdfuse's image of an nbdkit RAM disk slowed by NBD_DELAY.
  mkdir -p "$SLOW/nbd" "$SLOW/ext4"
  nbdkit -U "$SLOW/nbd.sock" --pidfile "$SLOW/nbdkit.pid" --filter=delay memory 2G \
    delay-read="$NBD_DELAY" delay-write="$NBD_DELAY"
  for _ in $(seq 1 100); do [ -S "$SLOW/nbd.sock" ] && break; sleep 0.05; done
  nbdfuse "$SLOW/nbd" --unix "$SLOW/nbd.sock" 2>"$SLOW/nbdfuse.log" &
  PIDS+=($!)
  for _ in $(seq 1 100); do [ -e "$SLOW/nbd/nbd" ] && break; sleep 0.05; done
  LOOP=$(losetup -f --show "$SLOW/nbd/nbd")
  mkfs.ext4 -q -E lazy_itable_init=0,lazy_journal_init=0 "$LOOP"
  mount -o dirsync "$LOOP" "$SLOW/ext4"
  BACKING=$SLOW/ext4/store
  STORE=$BACKING
  mkdir -p "$BACKING"
else
  # The store is slow at every operation: no kernel caching in front of it (a build without
  # the option has none).
  STORE_ARGS=()
  "$STORE_TIERCACHE" mount --help | grep -q -- --no-kernel-cache && STORE_ARGS+=(--no-kernel-cache)
  "$STORE_TIERCACHE" mount "$BACKING" "$STORE" --cache-size 0 "${STORE_ARGS[@]}" \
    --store-latency "$STORE_LATENCY" --store-meta-latency "$STORE_META_LATENCY" \
    --stats "$SLOW/store-stats.json" 2>"$SLOW/store.log" &
  PIDS+=($!)
  wait_mounted "$STORE"
fi

# The store's own latency of a create and of a delete (an empty file, in a fresh directory),
# each the mean of PROBE of them: the per-operation part of the floor.
PROBE=200
probe_dir=$STORE/.latency-probe
mkdir -p "$probe_dir"
t0=$(date +%s.%N)
for i in $(seq 1 $PROBE); do : >"$probe_dir/p$i"; done
t1=$(date +%s.%N)
rm -f "$probe_dir"/p*   # one process: no fork per delete in the figure
t2=$(date +%s.%N)
rmdir "$probe_dir"
CREATE_S=$(awk -v a="$t0" -v b="$t1" -v n=$PROBE 'BEGIN {printf "%.6f", (b - a) / n}')
DELETE_S=$(awk -v a="$t1" -v b="$t2" -v n=$PROBE 'BEGIN {printf "%.6f", (b - a) / n}')

# Runs Postmark in $1; prints "transaction-seconds wall-seconds".
postmark_in() {
  local dir=$1
  cat >"$SLOW/pm.cfg" <<EOF
set location $dir
set number $FILES
set transactions $TRANSACTIONS
set size 4096 28672
set read 4096
set write 4096
set buffering false
set seed 42
run
quit
EOF
  local t0 t1 out
  t0=$(date +%s.%N)
  out=$(postmark "$SLOW/pm.cfg")
  t1=$(date +%s.%N)
  local tx created deleted
  tx=$(echo "$out" | awk '/seconds of transactions/ {print $1}')
  created=$(echo "$out" | awk '/ created \(/ {print $1; exit}')
  deleted=$(echo "$out" | awk '/ deleted \(/ {print $1; exit}')
  echo "$tx $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}') $created $deleted"
}

declare -A TX WALL TXS WALLS
run_one() {
  local name=$1
  case $name in
    fast) read -r TX[$name] WALL[$name] CREATED DELETED < <(postmark_in "$FAST/dir") ;;
    uncached) read -r TX[$name] WALL[$name] CREATED DELETED < <(postmark_in "$STORE") ;;
    tc-*|base-*)
      local variant=${name#*-} bin=$TIERCACHE args=$TC_ARGS
      if [[ $name == base-* ]]; then
        bin=${BASELINE_TIERCACHE:?base-* contenders need BASELINE_TIERCACHE}
        args=
      fi
      rm -rf "$FAST/cache" && mkdir -p "$FAST/cache"
      "$bin" mount "$STORE" "$MNT" --cache-dir "$FAST/cache" --cache-size "$CACHE_SIZE" \
        --variant "$variant" $args --stats "$SLOW/$name-stats.json" 2>"$SLOW/$name.log" &
      local pid=$!
      wait_mounted "$MNT"
      read -r TX[$name] WALL[$name] CREATED DELETED < <(postmark_in "$MNT")
      kill -TERM "$pid"; wait "$pid" || true
      unmount "$MNT"
      ;;
    rclone)
      rm -rf "$FAST/cache" && mkdir -p "$FAST/cache"
      rclone mount "$STORE" "$MNT" --vfs-cache-mode full --cache-dir "$FAST/cache" \
        --vfs-cache-max-size "$CACHE_SIZE" --config /dev/null 2>"$SLOW/rclone.log" &
      local pid=$!
      wait_mounted "$MNT"
      read -r TX[$name] WALL[$name] CREATED DELETED < <(postmark_in "$MNT")
      fusermount3 -u "$MNT" || fusermount3 -u -z "$MNT"
      wait "$pid" || true
      ;;
  esac
  # Postmark deletes what it made; a contender's leftovers must not slow the next one.
  rm -rf "${BACKING:?}"/* "$FAST/dir"/* 2>/dev/null || true
  printf '%-14s done: postmark transactions %s s, wall %.2f s\n' "$name" "${TX[$name]}" "${WALL[$name]}" >&2
  TXS[$name]+="${TX[$name]} "
  WALLS[$name]+="${WALL[$name]} "
}

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2)}'; }

if [ "$STORE_KIND" = nbd ]; then
  store_text="ext4 (dirsync) on loop over nbdfuse/nbdkit, $NBD_DELAY per device I/O"
else
  store_text="emulated, $STORE_LATENCY per data op, $STORE_META_LATENCY per metadata op"
fi
echo "Postmark: $FILES files of 4-28 KiB, $TRANSACTIONS transactions; store: $store_text; cache $CACHE_SIZE on $FAST_DIR" >&2
CREATED=0 DELETED=0
for rep in $(seq 1 "$REPS"); do
  for name in $ONLY; do run_one "$name"; done
done
for name in $ONLY; do
  TX[$name]=$(echo "${TXS[$name]}" | median)
  WALL[$name]=$(echo "${WALLS[$name]}" | median)
done

FLOOR=$(awk -v c="$CREATED" -v d="$DELETED" -v cs="$CREATE_S" -v ds="$DELETE_S" \
  'BEGIN {printf "%.3f", c * cs + d * ds}')
printf '\nstore: %s; create %.3f ms, delete %.3f ms (each the mean of %d on the store alone)\n' \
  "$store_text" "$(awk -v s="$CREATE_S" 'BEGIN {print s * 1000}')" \
  "$(awk -v s="$DELETE_S" 'BEGIN {print s * 1000}')" "$PROBE"
printf 'metadata floor: %s creates x %.3f ms + %s deletes x %.3f ms = %s s' "$CREATED" \
  "$(awk -v s="$CREATE_S" 'BEGIN {print s * 1000}')" "$DELETED" \
  "$(awk -v s="$DELETE_S" 'BEGIN {print s * 1000}')" "$FLOOR"
[ -n "${WALL[fast]:-}" ] && printf '; fast + floor = %.3f s' \
  "$(awk -v a="${WALL[fast]}" -v b="$FLOOR" 'BEGIN {print a + b}')"
echo
printf '\n%-14s %18s %10s %10s %10s\n' contender "postmark tx (s)" "wall (s)" "/ fast" "/ rclone"
for name in $ONLY; do
  fast=${WALL[fast]:-}
  rc=${WALL[rclone]:-}
  vs_fast=$(awk -v a="${WALL[$name]}" -v b="${fast:-0}" 'BEGIN {print (b > 0 ? a / b : 0)}')
  vs_rc=$(awk -v a="${WALL[$name]}" -v b="${rc:-0}" 'BEGIN {print (b > 0 ? a / b : 0)}')
  printf '%-14s %18s %10.2f %10.2f %10.2f\n' "$name" "${TX[$name]}" "${WALL[$name]}" "$vs_fast" "$vs_rc"
done
