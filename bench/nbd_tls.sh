#!/usr/bin/env bash
# What TLS costs on the NBD hit path, in one run, as ratios: 4 KiB random reads at QD 16
# (fio's nbd engine, libnbd) from a 256 MiB RAM export over TCP on 127.0.0.1, served by
#   1. tiercache's NBD server in the clear,
#   2. tiercache's NBD server with TLS required (nbds://, X.509),
#   3. nbdkit's memory plugin with TLS required (GnuTLS), the same credentials.
#
#   bench/nbd_tls.sh [SECONDS] [ROUNDS]
#
# Prints IOPS per configuration (median of ROUNDS) and the ratios. Needs fio and nbdkit
# (scripts/setup.sh).
set -euo pipefail
SECS=${1:-10}
ROUNDS=${2:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cargo build -q --profile test --manifest-path "$ROOT/Cargo.toml" -p tiercache-nbd --example nbd_tls_bench
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/debug/examples/nbd_tls_bench
W=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$W"' EXIT
# fio's nbd engine may not name local files in a URI (libnbd's allow_local_file is off), so
# its credentials are libnbd's default directory under a HOME of this run's own.
mkdir -p "$W/.pki"
"$BIN" certs "$W/pki"
cp -r "$W/pki" "$W/.pki/libnbd"
PLAIN=10890; TLS=10891; KIT=10892
"$BIN" serve $PLAIN 256 &
"$BIN" serve $TLS 256 "$W/pki" &
nbdkit -f --exit-with-parent -i 127.0.0.1 -p $KIT --tls=require --tls-certificates="$W/pki" memory 256M 2>/dev/null &
sleep 1
iops() { # URI
  HOME=$W fio --name=tls --ioengine=nbd --uri="$1" --rw=randread --bs=4k --iodepth=16 --size=256m \
      --time_based --runtime="$SECS" --output-format=json 2>/dev/null |
    python3 -c 'import json,sys; t=sys.stdin.read(); print(round(json.loads(t[t.index("{"):])["jobs"][0]["read"]["iops"]))'
}
declare -A R
for name in plain tls nbdkit_tls; do R[$name]=""; done
for r in $(seq "$ROUNDS"); do
  R[plain]+="$(iops "nbd://127.0.0.1:$PLAIN/") "
  R[tls]+="$(iops "nbds://127.0.0.1:$TLS/") "
  R[nbdkit_tls]+="$(iops "nbds://127.0.0.1:$KIT/") "
done
python3 - "${R[plain]}" "${R[tls]}" "${R[nbdkit_tls]}" <<'PY'
import statistics, sys, json
names = ["tiercache_plain", "tiercache_tls", "nbdkit_tls"]
med = {n: statistics.median(int(x) for x in v.split()) for n, v in zip(names, sys.argv[1:])}
for n in names:
    print(json.dumps({"config": n, "iops_4k_randread_qd16": med[n], "rounds": sys.argv[1 + names.index(n)].split()}))
print(json.dumps({
    "tls_over_plain": round(med["tiercache_tls"] / med["tiercache_plain"], 3),
    "tiercache_tls_over_nbdkit_tls": round(med["tiercache_tls"] / med["nbdkit_tls"], 3),
}))
PY
