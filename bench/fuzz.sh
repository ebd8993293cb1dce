#!/usr/bin/env bash
# Runs every cargo-fuzz target (fuzz/) for MINUTES each, on nightly, and prints per target
# the executions, the coverage reached and whether it crashed. A crash's input lands in
# fuzz/artifacts/TARGET/; copy it to fuzz/regressions/TARGET/ (the stable suite replays it,
# crates/nbd/tests/fuzz_regression.rs) once fixed.
#
#   bench/fuzz.sh [MINUTES] [TARGET...]
#
# SANITIZER=none builds without AddressSanitizer (still coverage-guided, and far quicker to
# build on a loaded machine); default: address.
#
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`).
set -euo pipefail
MINUTES=${1:-10}
SANITIZER=${SANITIZER:-address}
shift || true
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT/fuzz"
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || mapfile -t TARGETS < <(cargo +nightly fuzz list)
for t in "${TARGETS[@]}"; do
  mkdir -p "corpus/$t"
  log=$(mktemp)
  status=ok
  # The corpus in the repository is the seed; what the run adds goes to a scratch copy.
  work=$(mktemp -d)
  cp -r "corpus/$t/." "$work/"
  cargo +nightly fuzz run -s "$SANITIZER" "$t" "$work" -- -max_total_time=$((MINUTES * 60)) -rss_limit_mb=2048 \
    -timeout=10 >"$log" 2>&1 || status=crashed
  line=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  echo "{\"target\": \"$t\", \"minutes\": $MINUTES, \"status\": \"$status\", \"last\": \"${line//\"/}\", \"corpus_found\": $(ls "$work" | wc -l)}"
  [ "$status" = ok ] || tail -40 "$log" >&2
  rm -rf "$work" "$log"
done
