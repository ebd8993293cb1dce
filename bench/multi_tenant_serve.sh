#!/usr/bin/env bash
# Three VMs' volumes behind one `tiercache serve` cache, one of them scanning: how well the
# others keep their cache under each partitioning mode, side by side in one run
# (docs/design.md §4.10).
#
# Exports vm1 and vm2 read a 12 MiB hot set each (4 KiB random reads, zipf 1.1, QD 8); vm3
# reads its whole 512 MiB volume sequentially in 64 KiB blocks, over and over (a scan). The
# cache holds 48 MiB; the backends are files made as slow as one SATA SSD each
# (sata-ssd-5100), so a miss costs what a real one would. Modes (MODES, default "shared
# static"; add "eci" or "trd" where the policy core has `cache.tenancy`):
#   shared — one LRU over everything: the scan flushes the hot sets;
#   static — equal partitions (16 MiB each), given at start in [[serve.exports]];
#   eci/trd — cache.tenancy = { mode = ..., interval_ns = 1s }: sized live by the core.
#
#   bench/multi_tenant_serve.sh [SECONDS] [ROUNDS]
#
# Prints one JSON object per run (per export: read hit ratio, fio read IOPS) and the median
# of vm1+vm2's IOPS and hit ratios per mode, with each mode's ratio to `shared`.
# TIERCACHE_BIN names the binary (default: a release build). Needs fio (scripts/setup.sh).
set -euo pipefail
SECS=${1:-15}
ROUNDS=${2:-2}
MODES=${MODES:-"shared static"}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "${TIERCACHE_BIN:-}" ]; then
  cargo build --release -q --manifest-path "$ROOT/Cargo.toml" -p tiercache
  TIERCACHE_BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/tiercache
fi
W=$(mktemp -d /var/tmp/tc-multi-tenant.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$W"' EXIT

run() { # MODE ROUND
  local mode=$1 r=$2 d="$W/$1-$2"
  mkdir -p "$d"
  local tenancy="" part=""
  case "$mode" in
    shared) ;;
    static) part='partition = "16MiB"' ;;
    *) tenancy="tenancy = { mode = \"$mode\", interval_ns = \"1s\" }" ;;
  esac
  cat > "$d/serve.toml" <<TOML
[cache]
capacity = "48MiB"
line_size = "4KiB"
write_policy = "write-back"
shards = 1                       # partitioning modes run on one policy shard
$tenancy
[engine]
cache_path = "$d/cache.img"
backend_device = { preset = "sata-ssd-5100" }
[serve]
socket = "$d/tc.sock"
stats_file = "$d/stats.json"
stats_interval_ns = "500ms"
TOML
  for i in 1 2 3; do
    size=64MiB; [ $i = 3 ] && size=512MiB
    printf '[[serve.exports]]\nname = "vm%s"\nvolume = %s\nbackend_path = "%s/vm%s.img"\nbackend_size = "%s"\n%s\n' \
      $i $i "$d" $i $size "$part" >> "$d/serve.toml"
  done
  "$TIERCACHE_BIN" serve "$d/serve.toml" 2>"$d/serve.log" &
  local tc=$!
  for _ in $(seq 100); do [ -S "$d/tc.sock" ] && break; sleep 0.1; done
  local u="nbd+unix:///%s?socket=$d/tc.sock"
  local common="--ioengine=nbd --time_based --runtime=$SECS --output-format=json --randseed=7"
  local pids=()
  for i in 1 2; do
    fio --name=vm$i $common --uri="$(printf "$u" vm$i)" --rw=randread --bs=4k --iodepth=8 \
      --size=12m --random_distribution=zipf:1.1 > "$d/fio$i.json" &
    pids+=($!)
  done
  fio --name=vm3 $common --uri="$(printf "$u" vm3)" --rw=read --bs=64k --iodepth=4 \
    --size=512m > "$d/fio3.json" &
  pids+=($!)
  wait "${pids[@]}"
  kill -TERM $tc; wait $tc || true
  python3 - "$d" "$mode" "$r" <<'PY'
import json, sys
d, mode, r = sys.argv[1], sys.argv[2], int(sys.argv[3])
st = json.load(open(f"{d}/stats.json"))
out = {"mode": mode, "round": r, "exports": {}}
for e in st["exports"]:
    text = open(f"{d}/fio{e['volume']}.json").read()  # the nbd engine says hello first
    fio = json.loads(text[text.index("{"):])["jobs"][0]["read"]
    out["exports"][e["name"]] = {
        "read_hit_ratio": round(e["read_hit_ratio"], 4),
        "read_iops": round(fio["iops"], 1),
        "read_mean_us": round(fio["lat_ns"]["mean"] / 1000, 1),
        "partition_lines": e["partition_lines"],
    }
print(json.dumps(out))
PY
}

RESULTS="$W/results.jsonl"
for r in $(seq "$ROUNDS"); do
  for m in $MODES; do run "$m" "$r" | tee -a "$RESULTS"; done
done
python3 - "$RESULTS" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
modes = list(dict.fromkeys(r["mode"] for r in runs))
def med(mode, f):
    return statistics.median(f(r["exports"]) for r in runs if r["mode"] == mode)
iops = lambda e: e["vm1"]["read_iops"] + e["vm2"]["read_iops"]
hit = lambda e: (e["vm1"]["read_hit_ratio"] + e["vm2"]["read_hit_ratio"]) / 2
scan = lambda e: e["vm3"]["read_iops"]
base = {"iops": med("shared", iops), "hit": med("shared", hit)} if "shared" in modes else None
print(f"{'mode':8} {'vm1+vm2 IOPS':>13} {'vs shared':>9} {'vm1/vm2 hit':>11} {'vm3 scan IOPS':>14}")
for m in modes:
    i, h = med(m, iops), med(m, hit)
    rel = f"{i / base['iops']:.2f}x" if base and base["iops"] else "-"
    print(f"{m:8} {i:13.0f} {rel:>9} {h:11.3f} {med(m, scan):14.0f}")
PY
