#!/usr/bin/env bash
# `tiercache serve` with LBICA against the same cache without balancing, side by side in one
# run (docs/design.md §4.8): the cache file is made as slow as an enterprise SATA SSD
# (sata-ssd-863a) and the backend file as slow as a RAID-5 of six SATA SSDs (sata-ssd-5100), a
# backend with more bandwidth than the cache, so that the cache device saturates first. (Over an
# emulated 7.2K HDD the backend saturated first, on write-back alone, and LBICA never saw a burst.)
# fio drives bursts of 50/50 64 KiB zipf(1.1) random I/O over a working set the cache holds
# (QD 32; after every 2,000 I/Os it pauses 100 ms): 64 KiB ops reach the 863a's 520 MB/s at
# a request rate the engine serves on a small machine. For each, the stats file is sampled
# every 100 ms for the cache device's queue time (ops queued × service time, as the balancer
# sees it). On a 2-core machine shared with builds (load 13-16) the engine served 800-1,350
# 64 KiB IOPS, a sixth of the 863a's bandwidth at most: the host CPU, not the emulated cache,
# was the limit there, so run it on a quieter machine.
#
#   bench/serve_balancing.sh [SECONDS] [ROUNDS]
#
# BACKEND=hdd runs the setting LBICA was built for instead: the same 863a cache over one
# emulated 7.2K SAS HDD (hdd-7200-sas), where the backend's queue of cleaner writes is the
# longer one, so LBICA should (and does) stay out of the way.
#
# Prints one JSON object per run and the median ratios lbica / none. TIERCACHE_BIN names the
# binary (default: a release build). Needs fio (scripts/setup.sh).
set -euo pipefail
SECS=${1:-10}
case ${BACKEND:-raid5} in
  raid5) BACKEND_DEVICE='{ raid = "raid5", members = 6, member = "sata-ssd-5100", stripe_unit = "64KiB" }' ;;
  hdd) BACKEND_DEVICE='{ preset = "hdd-7200-sas" }' ;;
  *) echo "BACKEND must be raid5 or hdd, not '${BACKEND}'" >&2; exit 2 ;;
esac
ROUNDS=${2:-2}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "${TIERCACHE_BIN:-}" ]; then
  cargo build --release -q --manifest-path "$ROOT/Cargo.toml" -p tiercache
  TIERCACHE_BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/tiercache
fi
W=$(mktemp -d /var/tmp/tc-balancing.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$W"' EXIT

run() { # BALANCER ROUND
  local b=$1 r=$2 d="$W/$1-$2"
  mkdir -p "$d"
  cat > "$d/serve.toml" <<TOML
[cache]
capacity = "256MiB"
line_size = "4KiB"
write_policy = "write-back"
cleaning = { policy = "lazy", idle_ns = "20ms", batch = 64 }
shards = 16
balancing = { policy = "$b", interval_ns = "10ms" }
[engine]
cache_path = "$d/cache.img"
backend_path = "$d/backend.img"
backend_size = "1GiB"
cache_device = { preset = "sata-ssd-863a" }
backend_device = $BACKEND_DEVICE
[serve]
socket = "$d/tc.sock"
stats_file = "$d/stats.json"
stats_interval_ns = "100ms"
TOML
  if [ "$b" = none ]; then sed -i 's/^balancing = .*$/balancing = { policy = "none" }/' "$d/serve.toml"; fi
  "$TIERCACHE_BIN" serve "$d/serve.toml" 2>"$d/serve.log" &
  local tc=$!
  for _ in $(seq 100); do [ -S "$d/tc.sock" ] && break; sleep 0.1; done
  local uri="nbd+unix:///?socket=$d/tc.sock"
  # Warm: the working set (192 MiB) read once, sequentially, into the cache.
  fio --name=warm --ioengine=nbd --uri="$uri" --rw=read --bs=1m --size=192m --iodepth=8 >/dev/null
  # Sample the cache device's queue time while fio runs.
  ( while kill -0 $tc 2>/dev/null; do
      python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["engine"]["executor"]["cache"]; print(e["queued"]*e["service_ns"])' "$d/stats.json" 2>/dev/null || true
      sleep 0.1
    done > "$d/qtime.txt" ) &
  local sampler=$!
  fio --name=bursts --ioengine=nbd --uri="$uri" --rw=randrw --rwmixread=50 --bs=64k --iodepth=32 \
      --size=192m --random_distribution=zipf:1.1 --norandommap --time_based --runtime="$SECS" \
      --thinktime=100ms --thinktime_blocks=2000 --output-format=json --output="$d/fio.json" >/dev/null
  kill -TERM $tc; wait $tc || true
  kill $sampler 2>/dev/null || true; wait $sampler 2>/dev/null || true
  python3 - "$b" "$r" "$d" <<'PY'
import json, statistics, sys
b, r, d = sys.argv[1:4]
j = json.load(open(f"{d}/fio.json"))["jobs"][0]
q = [float(x) for x in open(f"{d}/qtime.txt") if x.strip()]
s = json.load(open(f"{d}/stats.json"))["engine"]
ios = j["read"]["total_ios"] + j["write"]["total_ios"]
mean_us = (j["read"]["clat_ns"]["mean"] * j["read"]["total_ios"]
           + j["write"]["clat_ns"]["mean"] * j["write"]["total_ios"]) / max(ios, 1) / 1000
print(json.dumps({"balancer": b, "round": int(r), "iops": round(j["read"]["iops"] + j["write"]["iops"]),
                  "mean_latency_us": round(mean_us, 1),
                  "p99_read_us": j["read"]["clat_ns"]["percentile"]["99.000000"] / 1000,
                  "cache_qtime_us_mean": round(statistics.mean(q) / 1000, 1) if q else None,
                  "balancer_changes": s["cache"]["balancer_changes"],
                  "balancer_bypassed": s["cache"]["balancer_bypassed"]}))
PY
}

for r in $(seq "$ROUNDS"); do
  for b in none lbica; do run "$b" "$r"; done
done | tee "$W/all.jsonl"
python3 - "$W/all.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = lambda b, k: [x[k] for x in sorted(rows, key=lambda x: x["round"]) if x["balancer"] == b and x[k] is not None]
for k in ["mean_latency_us", "cache_qtime_us_mean", "iops"]:
    ratios = [a / n for a, n in zip(by("lbica", k), by("none", k)) if n]
    if ratios:
        print(f"lbica / none, {k}: median {statistics.median(ratios):.2f} (rounds: {', '.join(f'{x:.2f}' for x in ratios)})")
PY
