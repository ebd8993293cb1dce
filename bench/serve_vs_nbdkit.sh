#!/usr/bin/env bash
# Side-by-side NBD benchmarks of `tiercache serve` against nbdkit, in one run, as ratios.
#
#   bench/serve_vs_nbdkit.sh [SECONDS] [ROUNDS]
#
# 1. hit path: 4 KiB random reads, QD 16, fio's nbd engine over a Unix socket; tiercache with
#    a RAM-disk cache holding the whole 256 MiB volume (warmed by one sequential read) against
#    nbdkit's file plugin serving a /dev/shm file; and fio io_uring straight on a /dev/shm file
#    (the machine's limit).
# Prints one JSON object per configuration and the ratios. Needs fio, nbdkit (scripts/setup.sh).
set -euo pipefail
SECS=${1:-10}
ROUNDS=${2:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# TIERCACHE_BIN: the binary to measure (e.g. another commit's build); default: built here.
if [ -n "${TIERCACHE_BIN:-}" ]; then
  BIN=$TIERCACHE_BIN
else
  cargo build --release -q --manifest-path "$ROOT/Cargo.toml" -p tiercache
  BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/tiercache
fi
W=$(mktemp -d /dev/shm/tc-bench.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$W"' EXIT
VOL=256m
head -c 256M /dev/urandom > "$W/nbdkit.img"
cp "$W/nbdkit.img" "$W/backend.img"
# The cache may not be larger than its backend: the backend is extended (sparse) past the
# 256 MiB the workload reads, so a 512 MiB cache (16 shards filled unevenly) holds all of it.
truncate -s 512M "$W/backend.img"

fio_json() { # URI_OR_FILE ENGINE OUT [extra...]
  local target=$1 engine=$2 out=$3; shift 3
  local t=(--filename="$target")
  [ "$engine" = nbd ] && t=(--uri="$target")
  fio --name=bench --ioengine="$engine" "${t[@]}" --rw=randread --bs=4k --iodepth=16 \
      --size=$VOL --time_based --runtime="$SECS" --output-format=json --output="$out" "$@" >/dev/null
}
summary() { # NAME FILE
  python3 - "$1" "$2" <<'PY'
import json, sys
j = json.load(open(sys.argv[2]))["jobs"][0]["read"]
p = j["clat_ns"]["percentile"]
print(json.dumps({"name": sys.argv[1], "iops": round(j["iops"]), "p50_us": p["50.000000"]/1000,
                  "p99_us": p["99.000000"]/1000}))
PY
}

cat > "$W/serve.toml" <<TOML
[cache]
shards = 16
capacity = "512MiB"
line_size = "4KiB"
write_policy = "write-back"
[engine]
cache_path = "$W/cache.img"
backend_path = "$W/backend.img"
[serve]
socket = "$W/tc.sock"
TOML
"$BIN" serve "$W/serve.toml" 2>"$W/serve.log" &
TC=$!
nbdkit -U "$W/nbdkit.sock" --foreground file "$W/nbdkit.img" &
NK=$!
for s in "$W/tc.sock" "$W/nbdkit.sock"; do
  for _ in $(seq 100); do [ -S "$s" ] && break; sleep 0.1; done
done
# Warm the cache: one sequential pass makes every line resident.
fio --name=warm --ioengine=nbd --uri="nbd+unix:///?socket=$W/tc.sock" --rw=read --bs=1m \
    --iodepth=4 --size=$VOL >/dev/null
for round in $(seq "$ROUNDS"); do
  fio_json "nbd+unix:///?socket=$W/tc.sock" nbd "$W/tc-$round.json"
  fio_json "nbd+unix:///?socket=$W/nbdkit.sock" nbd "$W/nk-$round.json"
done
fio_json "$W/nbdkit.img" io_uring "$W/uring.json" --direct=0
kill -TERM $TC; wait $TC || true
kill $NK; wait $NK 2>/dev/null || true
for round in $(seq "$ROUNDS"); do
  summary "tiercache-serve-hits-r$round" "$W/tc-$round.json"
  summary "nbdkit-file-r$round" "$W/nk-$round.json"
done
summary "fio-io_uring-shm-file" "$W/uring.json"
python3 - "$W" "$ROUNDS" <<'PY'
import json, statistics, sys
w, rounds = sys.argv[1], int(sys.argv[2])
rd = lambda f: json.load(open(f"{w}/{f}"))["jobs"][0]["read"]
p99 = lambda j: j["clat_ns"]["percentile"]["99.000000"]
iops, lat = [], []
for r in range(1, rounds + 1):
    t, n = rd(f"tc-{r}.json"), rd(f"nk-{r}.json")
    iops.append(t["iops"] / n["iops"])
    lat.append(p99(t) / p99(n))
    print(json.dumps({"round": r, "iops_ratio_tiercache_over_nbdkit": round(iops[-1], 3),
                      "p99_ratio_tiercache_over_nbdkit": round(lat[-1], 3)}))
print(json.dumps({"median_iops_ratio": round(statistics.median(iops), 3),
                  "median_p99_ratio": round(statistics.median(lat), 3)}))
u = rd("uring.json")
best = max(rd(f"tc-{r}.json")["iops"] for r in range(1, rounds + 1))
print(json.dumps({"hit_path_fraction_of_io_uring_on_the_cache_file": round(best / u["iops"], 3)}))
PY
