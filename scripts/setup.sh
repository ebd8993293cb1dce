#!/usr/bin/env bash
# Installs what tiercache's tests use beyond Rust: a headless browser for the HTML reports and
# libCacheSim (the reference simulator the hit ratios are checked against). The real engine's
# tests will add fio, libnbd-bin, nbdkit and qemu-utils here.
# Idempotent: installs only what is missing. Needs root (or sudo) for apt-get.
set -euo pipefail

need_apt=()
command -v chromium >/dev/null || need_apt+=(chromium)   # renders the HTML reports in tests
if [ "${#need_apt[@]}" -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing ${need_apt[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if ! python3 -c "import libcachesim" 2>/dev/null; then
  echo "setup: installing libcachesim (PyPI)"
  python3 -m pip install -q libcachesim
fi
