#!/usr/bin/env bash
# What TLS with pre-shared keys costs on the NBD hit path, in one run, as ratios: 4 KiB reads
# at QD 16 (nbdcopy of the whole export to null:, one connection; libnbd over GnuTLS: fio's nbd
# engine may not name a key file, nor qemu-img bench take a tls-creds object) from a 256 MiB
# RAM export over TCP on 127.0.0.1, served by
#   1. tiercache's NBD server in the clear,
#   2. tiercache's NBD server with TLS required, X.509 (rustls),
#   3. tiercache's NBD server with TLS required, a pre-shared key (OpenSSL),
#   4. nbdkit's memory plugin with TLS required, the same key (GnuTLS).
#
#   bench/nbd_tls_psk.sh [ROUNDS]
#
# Prints IOPS per configuration (median of ROUNDS, rounds interleaved) and the ratios. Needs
# nbdcopy, nbdkit and psktool (scripts/setup.sh). The server's certificate names 127.0.0.1.
set -euo pipefail
ROUNDS=${1:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cargo build -q --profile test --manifest-path "$ROOT/Cargo.toml" -p tiercache-nbd --example nbd_tls_bench
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/debug/examples/nbd_tls_bench
W=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$W"' EXIT
"$BIN" certs "$W/pki"
mkdir -p "$W/psk"
psktool -u bench -p "$W/psk/keys.psk" >/dev/null
PLAIN=10893; X509=10894; PSK=10895; KIT=10896
"$BIN" serve $PLAIN 256 &
"$BIN" serve $X509 256 "$W/pki" &
"$BIN" serve-psk $PSK 256 "$W/psk/keys.psk" &
nbdkit -f --exit-with-parent -i 127.0.0.1 -p $KIT --tls=require --tls-psk="$W/psk/keys.psk" memory 256M 2>/dev/null &
sleep 1
iops() { # URI: nbdcopy of the whole export to null:, 4 KiB requests, 16 in flight, one connection
  python3 - "$1" <<'PY'
import subprocess, sys, time
t = time.monotonic()
subprocess.run(["nbdcopy", "--connections=1", "--requests=16", "--request-size=4096",
                "--no-extents", sys.argv[1], "null:"], check=True)
print(round((256 << 20) / 4096 / (time.monotonic() - t)))
PY
}
declare -A R
for name in plain x509 psk nbdkit_psk; do R[$name]=""; done
for r in $(seq "$ROUNDS"); do
  R[plain]+="$(iops "nbd://127.0.0.1:$PLAIN/") "
  R[x509]+="$(iops "nbds://127.0.0.1:$X509/?tls-certificates=$W/pki") "
  R[psk]+="$(iops "nbds://bench@127.0.0.1:$PSK/?tls-psk-file=$W/psk/keys.psk") "
  R[nbdkit_psk]+="$(iops "nbds://bench@127.0.0.1:$KIT/?tls-psk-file=$W/psk/keys.psk") "
done
python3 - "${R[plain]}" "${R[x509]}" "${R[psk]}" "${R[nbdkit_psk]}" <<'PY'
import statistics, sys, json
names = ["tiercache_plain", "tiercache_tls_x509", "tiercache_tls_psk", "nbdkit_tls_psk"]
med = {n: statistics.median(int(x) for x in v.split()) for n, v in zip(names, sys.argv[1:])}
for n in names:
    print(json.dumps({"config": n, "iops_4k_read_qd16": med[n], "rounds": sys.argv[1 + names.index(n)].split()}))
print(json.dumps({
    "psk_over_plain": round(med["tiercache_tls_psk"] / med["tiercache_plain"], 3),
    "psk_over_x509": round(med["tiercache_tls_psk"] / med["tiercache_tls_x509"], 3),
    "tiercache_psk_over_nbdkit_psk": round(med["tiercache_tls_psk"] / med["nbdkit_tls_psk"], 3),
}))
PY
