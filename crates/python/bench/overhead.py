"""Python overhead per simulated request against the CLI, on the same hit-ratio run.

    python3 crates/python/bench/overhead.py [REQUESTS] [ROUNDS]

Runs one hit-ratio-only config (LRU, zipf 0.9 over 2M 4 KiB blocks, a 200,000-line cache;
default 20,000,000 requests) with `tiercache sim` (target/release/tiercache, or $TIERCACHE_BIN)
and with `tiercache.run` in this process, alternating, ROUNDS times each (default 3). Prints
ns per request of each (median) and the ratio. Both give the same record (checked).
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import tiercache

REPO = Path(__file__).resolve().parents[3]


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000_000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    cli = os.environ.get("TIERCACHE_BIN", str(REPO / "target" / "release" / "tiercache"))
    cfg = Path(tempfile.mkdtemp()) / "hit-ratio.toml"
    cfg.write_text(
        f"""
name = "overhead"
[run]
mode = "hit-ratio"
seed = 1
requests = {n}
[workload]
read_fraction = 1.0
footprint = "{2_000_000 * 4096}"
distribution = {{ type = "zipf", theta = 0.9 }}
[cache]
capacity = "{200_000 * 4096}"
line_size = "4KiB"
"""
    )
    cli_s, py_s = [], []
    cli_rec = py_rec = None
    for _ in range(rounds):
        t = time.perf_counter()
        out = subprocess.run([cli, "sim", str(cfg), "--json"], check=True, capture_output=True, text=True).stdout
        cli_s.append(time.perf_counter() - t)
        cli_rec = json.loads(out.splitlines()[0])
        t = time.perf_counter()
        py_rec = tiercache.run(cfg).record
        py_s.append(time.perf_counter() - t)
    assert cli_rec == py_rec, "the CLI and the package disagree"
    c, p = statistics.median(cli_s), statistics.median(py_s)
    print(f"hit-ratio run, {n:,} requests, median of {rounds} alternating rounds")
    print(f"  CLI    (tiercache sim)  {c:7.2f} s  {c / n * 1e9:6.1f} ns/request")
    print(f"  Python (tiercache.run)  {p:7.2f} s  {p / n * 1e9:6.1f} ns/request")
    print(f"  Python / CLI = {p / c:.3f}  (overhead {100 * (p / c - 1):+.1f}%)")


if __name__ == "__main__":
    main()
