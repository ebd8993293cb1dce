#!/usr/bin/env bash
# Builds the tiercache Python package (crates/python) as a manylinux wheel, as users install it:
# maturin builds it in release for this machine, then auditwheel checks which manylinux policy
# its symbol versions meet, copies in the shared libraries it needs beyond that policy
# (liblzma, for compressed traces) and retags it. Prints the wheel's path, policy and size.
#
#   bash scripts/build-wheel.sh [OUTDIR]      # default target/wheels
#
# crates/python/tests/test_wheel.py installs the result into a fresh virtualenv and runs the
# example notebook there.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/wheels}
raw=target/wheels-linux
rm -rf "$raw"
mkdir -p "$out"
rm -f "$out"/tiercache-*.whl
maturin build --release -m crates/python/Cargo.toml -o "$raw" --compatibility linux
auditwheel repair --plat auto -w "$out" "$raw"/tiercache-*.whl
wheel=$(ls "$out"/tiercache-*manylinux*.whl)
# The check: auditwheel names the manylinux policy the repaired wheel meets; a wheel that
# still needed a library outside it would not have been repaired above.
auditwheel show "$wheel"
echo "wheel: $wheel ($(du -k "$wheel" | cut -f1) KiB)"
