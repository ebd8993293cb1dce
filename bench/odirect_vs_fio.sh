#!/usr/bin/env bash
# The engine on an O_DIRECT cache file on the machine's real disk, side by side in one run:
# all-hit 4 KiB random reads at QD 16 (fio's nbd engine over a Unix socket) against
# `tiercache serve` with `engine.io = "io-uring"` and with `engine.io = "psync"` (both
# `cache_direct = true`, `cache_mapped_reads = false`, the 256 MiB volume warmed into a cache
# that holds it), and fio's io_uring engine with O_DIRECT at QD 16 on the io_uring cache file
# itself (the device's limit). A fourth server, `busy`, is the io_uring one with
# `serve.busy_poll_ns = "1ms"`: each connection polls for its next request and its reads'
# completions before it sleeps, saving a thread wake-up per round trip for up to a core.
# Then the same engine driven in-process at QD 16 (example odirect_qd16: no NBD transport),
# against the same fio figure.
#
# A third server, `memory`, runs the same cache with the cache file in the page cache
# (`cache_direct = false`): its hits answer at memory speed (read on the connection's reader
# thread, not started on a ring), so 16 / its IOPS is the NBD round trip of a full queue with
# no device in it. A connection whose 16 reads travel together (the
# device completes a submitted batch together, and the client sends the next batch as the
# replies arrive) cannot beat 1 / (1/fio + 1/memory): the device's time for a batch plus one
# round trip, back to back. The script prints that bound and the io_uring server against it.
# A server that keeps the device busy while replies and new requests cross (the busy-polling
# one, when wake-ups are slow) is not held to it: its reads do not travel as one batch.
#
#   bench/odirect_vs_fio.sh [SECONDS] [ROUNDS]
#
# TIERCACHE_BIN names the binary (default: built here with the test profile, opt-level 2);
# TC_BENCH_DIR the directory (default /var/tmp, which must not be tmpfs). Needs fio.
set -euo pipefail
SECS=${1:-10}
ROUNDS=${2:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
if [ -z "${TIERCACHE_BIN:-}" ]; then
  cargo build --profile test -q --manifest-path "$ROOT/Cargo.toml" -p tiercache
  TIERCACHE_BIN=$TARGET/debug/tiercache
fi
cargo build --profile test -q --manifest-path "$ROOT/Cargo.toml" -p tiercache-engine --example odirect_qd16
EXAMPLE=$TARGET/debug/examples/odirect_qd16
BASE=${TC_BENCH_DIR:-/var/tmp}
FSTYPE=$(df --output=fstype "$BASE" | tail -1 | tr -d ' ')
case $FSTYPE in tmpfs|ramfs) echo "$BASE is $FSTYPE: O_DIRECT needs a real disk" >&2; exit 1 ;; esac
W=$(mktemp -d "$BASE/tc-odirect.XXXXXX")
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$W"' EXIT
echo "{\"dir\": \"$W\", \"fstype\": \"$FSTYPE\", \"device\": \"$(df --output=source "$BASE" | tail -1)\", \"binary\": \"$TIERCACHE_BIN\"}"
head -c 256M /dev/urandom > "$W/backend.img"
for io in psync io-uring memory busy; do
  direct=true; mode=$io; busy_poll=0
  [ "$io" = memory ] && { direct=false; mode=io-uring; }
  [ "$io" = busy ] && { mode=io-uring; busy_poll='"1ms"'; }
  cat > "$W/$io.toml" <<TOML
[cache]
# One policy shard: the cache holds exactly the volume, so every slot of the cache file is
# written (fio's anchor reads no holes) and every read hits (16 shards fill unevenly).
shards = 1
capacity = "256MiB"
line_size = "4KiB"
write_policy = "write-back"
[engine]
cache_path = "$W/cache-$io.img"
backend_path = "$W/backend.img"
cache_direct = $direct
cache_mapped_reads = false
io = "$mode"
[serve]
socket = "$W/$io.sock"
busy_poll_ns = $busy_poll
TOML
  "$TIERCACHE_BIN" serve "$W/$io.toml" 2>"$W/$io.log" &
  for _ in $(seq 100); do [ -S "$W/$io.sock" ] && break; sleep 0.1; done
  fio --name=warm --ioengine=nbd --uri="nbd+unix:///?socket=$W/$io.sock" --rw=read --bs=1m \
      --iodepth=4 --size=256m >/dev/null
done
for round in $(seq "$ROUNDS"); do
  for io in io-uring psync memory busy; do
    nice -n 5 fio --name=bench --ioengine=nbd --uri="nbd+unix:///?socket=$W/$io.sock" \
        --rw=randread --bs=4k --iodepth=16 --size=256m --time_based --runtime="$SECS" \
        --output-format=json --output="$W/$io-$round.json" >/dev/null
  done
  # The anchor: the same device, the io_uring cache file's data area read directly.
  nice -n 5 fio --name=bench --ioengine=io_uring --direct=1 --filename="$W/cache-io-uring.img" \
      --rw=randread --bs=4k --iodepth=16 --size=256m --time_based --runtime="$SECS" \
      --output-format=json --output="$W/fio-$round.json" >/dev/null
done
kill -TERM $(jobs -p) 2>/dev/null || true
wait 2>/dev/null || true
python3 - "$W" "$ROUNDS" <<'PY'
import json, statistics, sys
w, rounds = sys.argv[1], int(sys.argv[2])
iops = lambda f: json.load(open(f"{w}/{f}"))["jobs"][0]["read"]["iops"]
u, p, f, mem, busy = [], [], [], [], []
for r in range(1, rounds + 1):
    u.append(iops(f"io-uring-{r}.json")); p.append(iops(f"psync-{r}.json")); f.append(iops(f"fio-{r}.json"))
    mem.append(iops(f"memory-{r}.json")); busy.append(iops(f"busy-{r}.json"))
    print(json.dumps({"round": r, "serve_io_uring_iops": round(u[-1]),
                      "serve_io_uring_busy_poll_iops": round(busy[-1]), "serve_psync_iops": round(p[-1]),
                      "serve_memory_iops": round(mem[-1]), "fio_io_uring_direct_iops": round(f[-1])}))
m = statistics.median
# Batch on the device, then one round trip, back to back (see the header).
bound = 1 / (1 / m(f) + 1 / m(mem))
print(json.dumps({"nbd_serve_io_uring_over_fio": round(m(u) / m(f), 3),
                  "nbd_serve_io_uring_busy_poll_over_fio": round(m(busy) / m(f), 3),
                  "nbd_serve_io_uring_busy_poll_over_io_uring": round(m(busy) / m(u), 3),
                  "nbd_serve_psync_over_fio": round(m(p) / m(f), 3),
                  "nbd_serve_io_uring_over_psync": round(m(u) / m(p), 3),
                  "nbd_batch_bound_over_fio": round(bound / m(f), 3),
                  "nbd_serve_io_uring_over_batch_bound": round(m(u) / bound, 3)}))
json.dump({"fio": m(f)}, open(f"{w}/fio-median.json", "w"))
PY
# In-process: the engine without NBD, against the same fio figure.
rm -f "$W"/cache-*.img
nice -n 5 "$EXAMPLE" "$W" "$SECS" "$ROUNDS" | tee "$W/inproc.txt"
python3 - "$W" <<'PY'
import json, sys
w = sys.argv[1]
fio = json.load(open(f"{w}/fio-median.json"))["fio"]
last = json.loads(open(f"{w}/inproc.txt").read().strip().splitlines()[-1])
print(json.dumps({"in_process_io_uring_started_over_fio": round(last["median_iops_io_uring_started"] / fio, 3),
                  "in_process_io_uring_batched_over_fio": round(last["median_iops_io_uring_batched"] / fio, 3),
                  "in_process_pread_16_threads_over_fio": round(last["median_iops_pread_16_threads"] / fio, 3),
                  "in_process_pread_batched_over_fio": round(last["median_iops_pread_batched"] / fio, 3)}))
PY
