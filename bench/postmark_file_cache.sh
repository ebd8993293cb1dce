#!/usr/bin/env bash
# Postmark (Debian's `postmark`, the mail-server benchmark) on a slow file store, side by side in
# one run:
#   fast        the fast directory itself (tmpfs): the anchor
#   uncached    the slow store alone
#   tc-wb, tc-wb-around, tc-wt, tc-wt-around
#               `tiercache mount` of the slow store, cache on the fast directory, four variants
#   rclone      `rclone mount` (local backend) of the same store with --vfs-cache-mode full and
#               its cache on the same fast directory: the caching FUSE mount people use today
# The slow store is a directory on disk seen through `tiercache mount --cache-size 0` with a
# fixed latency per operation (STORE_LATENCY per data read/write, STORE_META_LATENCY per
# lookup/create/unlink/rename/getattr...): every contender goes through that same slow mount.
#
# Prints one table: Postmark's own transaction time (whole seconds, its resolution), the run's
# wall time, and each wall time as a ratio to the fast directory and to rclone. With REPS=n the
# contenders run n times, interleaved (shared machines drift), and the table shows medians.
#
# Usage: bench/postmark_file_cache.sh [FILES] [TRANSACTIONS]
# Environment: STORE_LATENCY (1ms), STORE_META_LATENCY (100us), CACHE_SIZE (256MiB),
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

for tool in postmark rclone fusermount3; do
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
  unmount "$STORE" || true
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$FAST" "$SLOW"
}
trap cleanup EXIT

# The store is slow at every operation: no kernel caching in front of it (a build without the
# option has none).
STORE_ARGS=()
"$STORE_TIERCACHE" mount --help | grep -q -- --no-kernel-cache && STORE_ARGS+=(--no-kernel-cache)
"$STORE_TIERCACHE" mount "$BACKING" "$STORE" --cache-size 0 "${STORE_ARGS[@]}" \
  --store-latency "$STORE_LATENCY" --store-meta-latency "$STORE_META_LATENCY" \
  --stats "$SLOW/store-stats.json" 2>"$SLOW/store.log" &
PIDS+=($!)
wait_mounted "$STORE"

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
  local tx
  tx=$(echo "$out" | awk '/seconds of transactions/ {print $1}')
  echo "$tx $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')"
}

declare -A TX WALL TXS WALLS
run_one() {
  local name=$1
  case $name in
    fast) read -r TX[$name] WALL[$name] < <(postmark_in "$FAST/dir") ;;
    uncached) read -r TX[$name] WALL[$name] < <(postmark_in "$STORE") ;;
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
      read -r TX[$name] WALL[$name] < <(postmark_in "$MNT")
      kill -TERM "$pid"; wait "$pid" || true
      unmount "$MNT"
      ;;
    rclone)
      rm -rf "$FAST/cache" && mkdir -p "$FAST/cache"
      rclone mount "$STORE" "$MNT" --vfs-cache-mode full --cache-dir "$FAST/cache" \
        --vfs-cache-max-size "$CACHE_SIZE" --config /dev/null 2>"$SLOW/rclone.log" &
      local pid=$!
      wait_mounted "$MNT"
      read -r TX[$name] WALL[$name] < <(postmark_in "$MNT")
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

echo "Postmark: $FILES files of 4-28 KiB, $TRANSACTIONS transactions; store latency $STORE_LATENCY per data op, $STORE_META_LATENCY per metadata op; cache $CACHE_SIZE on $FAST_DIR" >&2
for rep in $(seq 1 "$REPS"); do
  for name in $ONLY; do run_one "$name"; done
done
for name in $ONLY; do
  TX[$name]=$(echo "${TXS[$name]}" | median)
  WALL[$name]=$(echo "${WALLS[$name]}" | median)
done

printf '\n%-14s %18s %10s %10s %10s\n' contender "postmark tx (s)" "wall (s)" "/ fast" "/ rclone"
for name in $ONLY; do
  fast=${WALL[fast]:-}
  rc=${WALL[rclone]:-}
  vs_fast=$(awk -v a="${WALL[$name]}" -v b="${fast:-0}" 'BEGIN {print (b > 0 ? a / b : 0)}')
  vs_rc=$(awk -v a="${WALL[$name]}" -v b="${rc:-0}" 'BEGIN {print (b > 0 ? a / b : 0)}')
  printf '%-14s %18s %10.2f %10.2f %10.2f\n' "$name" "${TX[$name]}" "${WALL[$name]}" "$vs_fast" "$vs_rc"
done
