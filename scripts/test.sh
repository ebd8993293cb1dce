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
# The manylinux wheel users get (maturin, then auditwheel: scripts/build-wheel.sh).
bash scripts/build-wheel.sh target/wheels
wheel=$(ls "$PWD"/target/wheels/tiercache-*manylinux*.whl)
python3 -m pip install -q --force-reinstall --no-deps "$wheel"
# From outside the source tree, so the installed package (not crates/python/python) is tested.
# test_wheel.py installs the same wheel into a fresh virtualenv and runs the notebook there.
(cd crates/python/tests && TIERCACHE_BIN="$PWD/../../../target/debug/tiercache" \
  TIERCACHE_WHEEL="$wheel" python3 -m pytest -q -p no:cacheprovider .)
