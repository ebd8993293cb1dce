#!/usr/bin/env bash
# Host-side caching of a network volume (issue: NBD client backend), side by side in one run:
#
#   bench/remote_vs_nbdkit_cache.sh [SECONDS] [WARMUP_SECONDS] [disk|sata-ssd] [ROUNDS]
#
# The volume: 1 GiB from a file on a real disk (/var/tmp), served by `nbdkit file ...
# cache=none` (disk, the default) or by a cache-less `tiercache serve` that makes the file
# behave like the docs/design.md §5 SATA SSD preset (sata-ssd: an emulated slow backend both caches
# sit in front of). The workload: fio's nbd engine, 70/30 random read/write, 4 KiB, zipf(1.1),
# QD 16, over the whole volume. Three ways to reach the volume:
#   1. uncached: fio straight at the remote export;
#   2. tiercache serve: a 256 MiB write-back cache file in /dev/shm (S3-FIFO, threshold
#      cleaning between 15% and 25% dirty), the export as its backend (nbd+unix://);
#   3. nbdkit's cache filter in front of the same export (nbd plugin), write-back, caching
#      reads too, its cache file in /dev/shm limited to 256 MiB.
# Each is measured twice, interleaved, after a warm-up (fio ramp_time). Prints one JSON line
# per run and the ratios. Needs fio and nbdkit (scripts/setup.sh installs them).
set -euo pipefail
SECS=${1:-20}
WARM=${2:-10}
BACKEND=${3:-disk}
ROUNDS=${4:-2}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# TIERCACHE_BIN: the binary to measure (e.g. another commit's build); default: built here.
if [ -n "${TIERCACHE_BIN:-}" ]; then
  BIN=$TIERCACHE_BIN
else
  cargo build --release -q --manifest-path "$ROOT/Cargo.toml" -p tiercache
  BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/tiercache
fi
D=$(mktemp -d /var/tmp/tc-remote.XXXXXX)    # the remote volume: a real disk
S=$(mktemp -d /dev/shm/tc-remote.XXXXXX)    # caches: RAM disk
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$D" "$S"' EXIT
head -c 1G /dev/urandom > "$D/volume.img"
sync

case $BACKEND in
  disk) nbdkit -U "$D/remote.sock" --foreground file "$D/volume.img" cache=none & ;;
  sata-ssd)
    # Pass-through mode with a token cache: every request goes to the emulated device.
    cat > "$D/ssd.toml" <<TOML
[cache]
shards = 16
capacity = "64KiB"
write_policy = "pass-through"
[engine]
cache_path = "$D/ssd-cache.img"
backend_path = "$D/volume.img"
backend_device = { preset = "sata-ssd-5100" }
[serve]
socket = "$D/remote.sock"
TOML
    "$BIN" serve "$D/ssd.toml" 2>"$D/ssd.log" & ;;
  *) echo "backend: disk or sata-ssd" >&2; exit 2 ;;
esac
for _ in $(seq 100); do [ -S "$D/remote.sock" ] && break; sleep 0.1; done
REMOTE="nbd+unix:///?socket=$D/remote.sock"

cat > "$S/serve.toml" <<TOML
[cache]
shards = 16
capacity = "256MiB"
line_size = "4KiB"
eviction = "s3-fifo"
write_policy = "write-back"
cleaning = { policy = "threshold", high = 0.25, low = 0.15, batch = 128 }
[engine]
cache_path = "$S/cache.img"
backend_path = "$REMOTE"
[engine.remote]
connections = 4
[serve]
socket = "$S/tc.sock"
TOML
"$BIN" serve "$S/serve.toml" 2>"$S/serve.log" &
TC=$!
TMPDIR=$S nbdkit -U "$S/nkcache.sock" --foreground --filter=cache nbd socket="$D/remote.sock" \
  cache=writeback cache-on-read=true cache-max-size=256M &
NK=$!
for s in "$S/tc.sock" "$S/nkcache.sock"; do
  for _ in $(seq 100); do [ -S "$s" ] && break; sleep 0.1; done
done

run() { # NAME URI
  fio --name=bench --ioengine=nbd --uri="$2" --rw=randrw --rwmixread=70 --bs=4k --iodepth=16 \
      --random_distribution=zipf:1.1 --size=1g --time_based --ramp_time="$WARM" \
      --runtime="$SECS" --randseed=7 --output-format=json --output="$S/$1.json" >/dev/null
  python3 - "$1" "$S/$1.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[2]))["jobs"][0]
r, w = j["read"], j["write"]
p99 = lambda x: x["clat_ns"]["percentile"]["99.000000"] / 1000
print(json.dumps({"name": sys.argv[1], "iops": round(r["iops"] + w["iops"]),
                  "read_p99_us": p99(r), "write_p99_us": p99(w)}))
PY
}
for round in $(seq "$ROUNDS"); do
  run "uncached-r$round" "$REMOTE"
  run "tiercache-r$round" "nbd+unix:///?socket=$S/tc.sock"
  run "nbdkit-cache-r$round" "nbd+unix:///?socket=$S/nkcache.sock"
done
kill -TERM $TC; wait $TC || true
grep -E "note|listening" "$S/serve.log" || true
python3 - "$S" "$ROUNDS" <<'PY'
import json, statistics, sys
s, rounds = sys.argv[1], int(sys.argv[2])
def load(n):
    j = json.load(open(f"{s}/{n}.json"))["jobs"][0]
    p99 = max(j["read"]["clat_ns"]["percentile"]["99.000000"], j["write"]["clat_ns"]["percentile"]["99.000000"])
    return j["read"]["iops"] + j["write"]["iops"], p99
rows = []
for r in range(1, rounds + 1):
    t, u, n = load(f"tiercache-r{r}"), load(f"uncached-r{r}"), load(f"nbdkit-cache-r{r}")
    rows.append({"round": r,
        "iops_tiercache_over_uncached": round(t[0] / u[0], 2),
        "iops_tiercache_over_nbdkit_cache": round(t[0] / n[0], 2),
        "p99_tiercache_over_uncached": round(t[1] / u[1], 2),
        "p99_tiercache_over_nbdkit_cache": round(t[1] / n[1], 2)})
    print(json.dumps(rows[-1]))
print(json.dumps({"median_" + k: statistics.median(row[k] for row in rows) for k in rows[0] if k != "round"}))
PY
