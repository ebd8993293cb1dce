#!/usr/bin/env bash
# The engine's two I/O paths side by side, in one run: 4 KiB random reads, all hits, fio's nbd
# engine at QD 16 over a Unix socket, against `tiercache serve` with `engine.io = "psync"` and
# with `engine.io = "io-uring"`, both with `cache_mapped_reads = false` so that every hit
# reads the cache file through the chosen path (a /dev/shm file, 256 MiB volume, warmed).
#
#   bench/serve_io_engines.sh [SECONDS] [ROUNDS]
#
# Prints one JSON line per run and the median ratio io-uring / psync. Needs fio.
set -euo pipefail
SECS=${1:-10}
ROUNDS=${2:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cargo build --release -q --manifest-path "$ROOT/Cargo.toml" -p tiercache
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/tiercache
W=$(mktemp -d /dev/shm/tc-io.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$W"' EXIT
head -c 256M /dev/urandom > "$W/backend.img"
for io in psync io-uring; do
  cat > "$W/$io.toml" <<TOML
[cache]
shards = 16
capacity = "512MiB"
line_size = "4KiB"
write_policy = "write-back"
[engine]
cache_path = "$W/cache-$io.img"
backend_path = "$W/backend.img"
io = "$io"
cache_mapped_reads = false
[serve]
socket = "$W/$io.sock"
TOML
  "$BIN" serve "$W/$io.toml" 2>"$W/$io.log" &
  for _ in $(seq 100); do [ -S "$W/$io.sock" ] && break; sleep 0.1; done
  fio --name=warm --ioengine=nbd --uri="nbd+unix:///?socket=$W/$io.sock" --rw=read --bs=1m \
      --size=256m >/dev/null
done
for round in $(seq "$ROUNDS"); do
  for io in psync io-uring; do
    fio --name=bench --ioengine=nbd --uri="nbd+unix:///?socket=$W/$io.sock" --rw=randread \
        --bs=4k --iodepth=16 --size=256m --time_based --runtime="$SECS" \
        --output-format=json --output="$W/$io-$round.json" >/dev/null
  done
done
python3 - "$W" "$ROUNDS" <<'PY'
import json, statistics, sys
w, rounds = sys.argv[1], int(sys.argv[2])
iops = lambda f: json.load(open(f))["jobs"][0]["read"]["iops"]
ratios = []
for r in range(1, rounds + 1):
    p, u = iops(f"{w}/psync-{r}.json"), iops(f"{w}/io-uring-{r}.json")
    print(json.dumps({"round": r, "psync_iops": round(p), "io_uring_iops": round(u)}))
    ratios.append(u / p)
print(json.dumps({"median_iops_ratio_io_uring_over_psync": round(statistics.median(ratios), 3)}))
PY
