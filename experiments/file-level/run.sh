#!/usr/bin/env bash
# The file-level experiment (docs/design.md §4.9): the simulator's tables (four variants × three
# file workloads; file-level vs block-level ± TRIM at three cache sizes), then the real Postmark run
# on `tiercache mount` against the slow store, rclone and the fast directory.
# Usage: experiments/file-level/run.sh [--quick] [OUTDIR]   (default OUTDIR: results/file-level)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
QUICK=""
if [ "${1:-}" = "--quick" ]; then QUICK="--quick"; shift; fi
OUT=${1:-$ROOT/results/file-level}
mkdir -p "$OUT"
cd "$ROOT"
cargo run --release -q -p tiercache-run --example file_level -- $QUICK \
  --json "$OUT/sim.jsonl" | tee "$OUT/sim.md"
cargo build --release -q -p tiercache
if [ -n "$QUICK" ]; then
  bench/postmark_file_cache.sh 300 3000 | tee "$OUT/postmark.txt"
else
  bench/postmark_file_cache.sh 1000 10000 | tee "$OUT/postmark.txt"
  STORE_META_LATENCY=0 bench/postmark_file_cache.sh 1000 10000 | tee "$OUT/postmark-meta0.txt"
fi
