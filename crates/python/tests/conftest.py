"""Fixtures of the tiercache Python package's tests: the `tiercache` command they compare
against, the repository's trace fixtures, and one local Ray cluster (2 CPUs) per session."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
TRACES = Path(os.environ.get("TIERCACHE_TRACES", REPO / "fixtures" / "traces"))


def _cli_path() -> str:
    env = os.environ.get("TIERCACHE_BIN")
    if env:
        return env
    for profile in ("release", "debug"):
        p = REPO / "target" / profile / "tiercache"
        if p.exists():
            return str(p)
    found = shutil.which("tiercache")
    if found:
        return found
    pytest.exit("no tiercache binary: build it (cargo build -p tiercache) or set TIERCACHE_BIN", 2)


@pytest.fixture(scope="session")
def cli():
    """Runs the `tiercache` command: cli(*args) -> CompletedProcess (text)."""
    path = _cli_path()

    def environ():
        # Built at each call: starting Ray sets variables (RAY_AUTH_MODE) its clients need.
        return dict(os.environ, TIERCACHE_PYTHON=sys.executable)

    def run(*args, check=True, env=None, **kw):
        p = subprocess.run([path, *map(str, args)], capture_output=True, text=True, env=env or environ(), **kw)
        if check and p.returncode != 0:
            raise AssertionError(f"tiercache {' '.join(map(str, args))} failed ({p.returncode}):\n{p.stderr}")
        return p

    run.path = path
    run.environ = environ
    return run


@pytest.fixture(scope="session")
def traces():
    if not (TRACES / "msr-hm0-sample.csv").exists():
        pytest.skip(f"trace fixtures not found in {TRACES}")
    return TRACES


@pytest.fixture(scope="session")
def data():
    return HERE / "data"


@pytest.fixture(scope="session")
def ray_address(tmp_path_factory):
    """A local Ray cluster with 2 CPUs, started once for the session; yields its address."""
    ray = pytest.importorskip("ray")
    import logging

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
    address = ray.get_runtime_context().gcs_address
    os.environ.setdefault("TIERCACHE_PYTHON", sys.executable)
    yield address
    ray.shutdown()
