#!/usr/bin/env bash
# Isolation of a slow store on the block path (docs/design.md §14, "The data path off the
# lock"): one fio job reads a cold file at random (every 4 KiB read misses a store with
# STORE_LATENCY per data operation) while a second job reads a file the cache holds at
# random; both through one `tiercache mount --no-passthrough --direct-io`. Prints each job's
# read IOPS per round for TIERCACHE and BASELINE_TIERCACHE, interleaved by round; the cached
# job's IOPS is what a slow store held up when misses read it under the mount's lock.
#
# Usage: TIERCACHE=<build> BASELINE_TIERCACHE=<build> bench/fio_store_isolation.sh
# Environment: ROUNDS (3), RUNTIME (3), STORE_LATENCY (5ms), FAST_DIR (/dev/shm),
#   SLOW_DIR (/var/tmp).
set -euo pipefail

ROUNDS=${ROUNDS:-3}
RUNTIME=${RUNTIME:-3}
STORE_LATENCY=${STORE_LATENCY:-5ms}
FAST_DIR=${FAST_DIR:-/dev/shm}
SLOW_DIR=${SLOW_DIR:-/var/tmp}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TIERCACHE=${TIERCACHE:-$ROOT/target/release/tiercache}
declare -A BIN=([tc]=$TIERCACHE)
[ -n "${BASELINE_TIERCACHE:-}" ] && BIN[base]=$BASELINE_TIERCACHE
for tool in fio fusermount3; do
  command -v "$tool" >/dev/null || { echo "missing $tool: run scripts/setup.sh" >&2; exit 1; }
done

for round in $(seq 1 "$ROUNDS"); do
  for name in "${!BIN[@]}"; do
    slow=$(mktemp -d "$SLOW_DIR/iso-slow.XXXXXX")
    fast=$(mktemp -d "$FAST_DIR/iso-fast.XXXXXX")
    mkdir -p "$slow/store" "$slow/mnt"
    head -c 64M /dev/urandom >"$slow/store/cold"
    "${BIN[$name]}" mount "$slow/store" "$slow/mnt" --cache-dir "$fast/cache" \
      --cache-size 256MiB --store-latency "$STORE_LATENCY" --store-meta-latency 0s \
      --no-passthrough --direct-io >"$slow/log" 2>&1 &
    pid=$!
    for _ in $(seq 1 100); do mountpoint -q "$slow/mnt" && break; sleep 0.05; done
    head -c 16M /dev/urandom >"$slow/mnt/hot"
    cat "$slow/mnt/hot" >/dev/null # cached (write-back: it was already)
    fio --output-format=terse --terse-version=3 \
      --name=cold --filename="$slow/mnt/cold" --rw=randread --bs=4k --time_based \
      --runtime="$RUNTIME" --ioengine=psync \
      --name=hot --filename="$slow/mnt/hot" --rw=randread --bs=4k --time_based \
      --runtime="$RUNTIME" --ioengine=psync |
      awk -F';' -v r="$round" -v n="$name" '{printf "round %s %-5s %-5s read IOPS %s\n", r, n, $3, $8}'
    fusermount3 -u "$slow/mnt" || fusermount3 -u -z "$slow/mnt"
    wait "$pid" || true
    rm -rf "$slow" "$fast"
  done
done
