#!/usr/bin/env bash
# The test command: installs the tools the tests drive, then runs every test of the workspace,
# then builds the tiercache Python package (crates/python, a maturin abi3 wheel), installs it
# into this Python and runs its pytest suite (it compares against the `tiercache` binary that
# `cargo test` built, starts its own 2-CPU Ray cluster and executes the example notebook).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo test --workspace "$@"

# The Python package: the wheel is built in release, as users get it (the test profile cannot
# be used: `cargo rustc --profile test` builds a test harness, not a loadable module), and
# installed over any older one. `cargo test` left the `tiercache` binary the tests compare
# against in target/debug.
rm -f target/wheels/tiercache-*.whl
# `--compatibility linux`: a wheel for this machine (a manylinux one would bundle liblzma with patchelf).
maturin build --release -m crates/python/Cargo.toml -o target/wheels --compatibility linux
python3 -m pip install -q --force-reinstall --no-deps target/wheels/tiercache-*.whl
# From outside the source tree, so the installed package (not crates/python/python) is tested.
(cd crates/python/tests && TIERCACHE_BIN="$PWD/../../../target/debug/tiercache" python3 -m pytest -q -p no:cacheprovider .)
