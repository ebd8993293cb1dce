#!/usr/bin/env bash
# Cache hierarchies for real (docs/design.md §4.7): `tiercache serve` with a RAM level (256 MiB of
# process memory) above a 1 GiB cache file above a 4 GiB backend file, side by side in one
# run with the same engine at one level and with both levels inclusive:
#
#   one        the cache file alone (LRU)
#   inclusive  RAM level (LRU) over the cache file (LRU), clean victims dropped
#   exclusive  RAM level (LRU) over the cache file (MRU), clean victims demoted into it
#              (LRU-MRU-demote: the two levels act as one LRU cache of their summed size)
#   excl-lru   the same with an LRU cache file (for comparison)
#
# The cache file (in /dev/shm, as the shipped serve configs have it: its metadata syncs cost
# nothing) is made as fast as an NVMe SSD (nvme-ssd); the backend file, on disk (/var/tmp), as
# slow as a SATA SSD (sata-ssd-5100), or as the device preset BACKEND_PRESET names (e.g.
# hdd-7200-sas: a backend whose misses cost milliseconds, where exclusive caching's saved
# misses are worth more than its demote writes). CACHE_PRESET=none leaves the cache file
# unemulated (memory speed); BACKEND_PRESET=none leaves the backend file unemulated and opens
# it O_DIRECT, so its misses cost what this machine's disk costs: the issue's literal setting
# ("1 GiB cache file, 4 GiB backend on disk") with no model in between. fio drives a read-mostly (95/5) 4 KiB
# zipf(THETA, default 0.6) random workload over a footprint of 1200 MiB, which fits the sum of
# the levels (1280 MiB) but neither alone; each design is first filled (one sequential pass over
# the footprint), then runs WARM seconds of the workload, then is measured for SECS seconds.
#
#   bench/two_level_serve.sh [SECS] [WARM] [SCALE] [THETA]
#
# SCALE divides every size (2: 128 MiB RAM, 512 MiB cache, 2 GiB backend, 600 MiB footprint)
# for slow machines. Prints one JSON object per design and the IOPS ratios against `one`.
# Counters in the JSON cover the measured window only: read hit ratios of each level,
# backend reads, cache-file writes and metadata record writes (a durable clear counts two)
# per I/O, the server's CPU time per I/O (fio shares the machine: CPU is throughput), and
# the demotes by answer.
# TIERCACHE_BIN names the binary (default: a release build); DESIGNS picks designs (default:
# all four, `one` first: the ratios are against it); KEEP=dir keeps each design's configs,
# stats snapshots and fio output; PERF_DESIGN=name records a `perf record -g` profile of that
# design's server over the measured window (to PERF_OUT, default /tmp/two_level.perf).
# Needs fio (scripts/setup.sh).
set -euo pipefail
SECS=${1:-20}
WARM=${2:-20}
SCALE=${3:-1}
THETA=${4:-0.6}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "${TIERCACHE_BIN:-}" ]; then
  cargo build --release -q --manifest-path "$ROOT/Cargo.toml" -p tiercache
  TIERCACHE_BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/tiercache
fi
RAM=$((256 / SCALE))
CACHE=$((1024 / SCALE))
BACKEND=$((4096 / SCALE))
FOOT=$((1200 / SCALE))
W=$(mktemp -d /var/tmp/tc-two-level.XXXXXX)
SHM=$(mktemp -d /dev/shm/tc-two-level.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$W" "$SHM"' EXIT
# One backend file for every design (same data, same place on disk).
truncate -s "${BACKEND}M" "$W/backend.img"
# Data over the footprint: a hole reads as zeros without touching the disk, which would make
# an unemulated backend's misses free.
dd if=/dev/urandom of="$W/backend.img" bs=1M count="$FOOT" conv=notrunc status=none

run() { # DESIGN
  local name=$1 d="$W/$1"
  mkdir -p "$d"
  local lower_eviction=lru ram=""
  case $name in
    one) ;;
    inclusive) ram="[ram_level]
capacity = \"${RAM}MiB\"
eviction = \"lru\"
exclusive = false" ;;
    exclusive) lower_eviction=mru; ram="[ram_level]
capacity = \"${RAM}MiB\"
eviction = \"lru\"
exclusive = true" ;;
    excl-lru) ram="[ram_level]
capacity = \"${RAM}MiB\"
eviction = \"lru\"
exclusive = true" ;;
  esac
  local devices="" cp=${CACHE_PRESET:-nvme-ssd} bp=${BACKEND_PRESET:-sata-ssd-5100}
  [ "$cp" = none ] || devices="cache_device = { preset = \"$cp\" }"
  if [ "$bp" = none ]; then
    devices="$devices
backend_direct = true"
  else
    devices="$devices
backend_device = { preset = \"$bp\" }"
  fi
  cat > "$d/serve.toml" <<TOML
[cache]
capacity = "${CACHE}MiB"
line_size = "4KiB"
write_policy = "write-back"
eviction = "$lower_eviction"
shards = 16
$ram
[engine]
cache_path = "$SHM/$name-cache.img"
backend_path = "$W/backend.img"
$devices
format = true
force_format = true
[serve]
socket = "$d/tc.sock"
stats_file = "$d/stats.json"
stats_interval_ns = "500ms"
[serve.demote]
accept = false
TOML
  "$TIERCACHE_BIN" serve "$d/serve.toml" 2>"$d/serve.log" &
  local tc=$!
  for _ in $(seq 200); do [ -S "$d/tc.sock" ] && break; sleep 0.1; done
  local uri="nbd+unix:///?socket=$d/tc.sock"
  local job=(--ioengine=nbd --uri="$uri" --rw=randrw --rwmixread=95 --bs=4k --iodepth=16
             --numjobs=2 --group_reporting --size="${FOOT}m" --random_distribution=zipf:$THETA
             --norandommap --randseed=7 --time_based)
  # Fill both levels first (one sequential pass over the footprint), so that the measured
  # part runs on full caches (steady state), then warm with the workload itself.
  fio --name=fill --ioengine=nbd --uri="$uri" --rw=read --bs=1m --iodepth=8 --size="${FOOT}m" >/dev/null
  fio --name=warm "${job[@]}" --runtime="$WARM" >/dev/null
  # The measured window's counters are the difference of two snapshots (the fill and the
  # warm-up would otherwise dilute them), and the server's CPU time over it (2 cores run
  # fio and the server: CPU per I/O is throughput).
  cp "$d/stats.json" "$d/stats-before.json"
  local cpu0
  cpu0=$(awk '{print $14 + $15}' /proc/$tc/stat)
  if [ -n "${PERF_DESIGN:-}" ] && [ "$PERF_DESIGN" = "$name" ]; then
    perf record -g -o "${PERF_OUT:-/tmp/two_level.perf}" -p $tc -- sleep "$SECS" >/dev/null 2>&1 &
  fi
  fio --name=measure "${job[@]}" --runtime="$SECS" --output-format=json --output="$d/fio.json" >/dev/null
  sleep 0.6 # one more stats interval: the snapshot covers the whole window
  echo $(( $(awk '{print $14 + $15}' /proc/$tc/stat) - cpu0 )) > "$d/cpu_ticks"
  # Before the shutdown, which writes records of its own (the demoted lines').
  cp "$d/stats.json" "$d/stats-after.json"
  kill -TERM $tc; wait $tc || true
  rm -f "$SHM/$name-cache.img"
  if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp -r "$d" "$KEEP/"; fi
  python3 - "$name" "$d" "$(getconf CLK_TCK)" <<'PY'
import json, sys
name, d, hz = sys.argv[1], sys.argv[2], int(sys.argv[3])
j = json.load(open(f"{d}/fio.json"))["jobs"][0]
before = json.load(open(f"{d}/stats-before.json"))
after = json.load(open(f"{d}/stats-after.json"))
def delta(path):
    a, b = before, after
    for k in path.split("."):
        a, b = a.get(k, {}) if isinstance(a, dict) else 0, b.get(k, {}) if isinstance(b, dict) else 0
    return (b if isinstance(b, (int, float)) else 0) - (a if isinstance(a, (int, float)) else 0)
has_ram = "ram_level" in after
ratio = lambda lvl, n, k: round(delta(f"{lvl}.cache.{n}") / max(delta(f"{lvl}.cache.{k}"), 1), 3)
ios = j["read"]["total_ios"] + j["write"]["total_ios"]
print(json.dumps({"design": name,
                  "iops": round(j["read"]["iops"] + j["write"]["iops"]),
                  "read_p99_us": j["read"]["clat_ns"]["percentile"]["99.000000"] / 1000,
                  "ram_read_hit_ratio": ratio("ram_level", "read_line_hits", "read_line_accesses") if has_ram else None,
                  "cache_read_hit_ratio": ratio("engine", "read_line_hits", "read_line_accesses"),
                  "backend_reads_per_io": round(delta("engine.cache.backend_bytes_read") / 4096 / max(ios, 1), 4),
                  "server_cpu_us_per_io": round(int(open(f"{d}/cpu_ticks").read()) / hz * 1e6 / max(ios, 1), 1),
                  "cache_writes_per_io": round(delta("engine.cache.cache_bytes_written") / 4096 / max(ios, 1), 3),
                  "records_per_io": round((delta("engine.records_written") + 2 * delta("engine.slot_invalidations")) / max(ios, 1), 3),
                  "demotes_sent": delta("ram_level.demotes.sent"),
                  "demotes_accepted": delta("ram_level.demotes.sent_accepted"),
                  "demotes_already_held": delta("ram_level.demotes.sent_already_held"),
                  "demotes_rejected": delta("ram_level.demotes.sent_rejected")}))
PY
}

for name in ${DESIGNS:-one inclusive exclusive excl-lru}; do run "$name"; done | tee "$W/all.jsonl"
python3 - "$W/all.jsonl" <<'PY'
import json, sys
rows = {r["design"]: r for r in map(json.loads, open(sys.argv[1]))}
base = rows["one"]["iops"] if "one" in rows else next(iter(rows.values()))["iops"]
for k, r in rows.items():
    print(f"{k:10s} {r['iops']:>8d} IOPS  {r['iops'] / base:5.2f}x one level")
best = max(rows, key=lambda k: rows[k]["iops"])
print(f"highest IOPS: {best}")
PY
