"""A 432-point sweep on a local Ray cluster against the local runner, side by side.

    python3 crates/python/bench/ray_sweep.py [CPUS]

Runs crates/python/bench/ray_sweep.toml (432 short timed points) with the local runner
(`tiercache.sweep(..., jobs=CPUS)`) and on a local Ray cluster of CPUS CPUs (default 2,
started here: `ray=ADDRESS`), each into a fresh directory; checks the rows are the same and
prints wall-clock seconds, points per second and the ratio.
"""

import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import ray

import tiercache

SPEC = Path(__file__).resolve().parent / "ray_sweep.toml"


def rows(d):
    out = {}
    for line in (Path(d) / "results.jsonl").read_text().splitlines():
        v = json.loads(line)
        v.pop("elapsed_s")
        out[v["point"]] = v
    return out


def main():
    cpus = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    tmp = Path(tempfile.mkdtemp())
    t = time.perf_counter()
    local = tiercache.sweep(SPEC, tmp / "local", jobs=cpus, progress=False)
    local_s = time.perf_counter() - t
    t = time.perf_counter()
    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
    start_s = time.perf_counter() - t
    os.environ.setdefault("TIERCACHE_PYTHON", sys.executable)
    t = time.perf_counter()
    on_ray = tiercache.sweep(SPEC, tmp / "ray", ray=ray.get_runtime_context().gcs_address, progress=False)
    ray_s = time.perf_counter() - t
    ray.shutdown()
    n = local.summary["total"]
    assert on_ray.summary["ok"] == local.summary["ok"] == n, (local.summary, on_ray.summary)
    assert rows(tmp / "local") == rows(tmp / "ray"), "Ray and local rows differ"
    print(f"{n} points, {cpus} CPUs; identical rows")
    print(f"  local runner  {local_s:7.1f} s  {n / local_s:6.1f} points/s")
    print(f"  Ray (local)   {ray_s:7.1f} s  {n / ray_s:6.1f} points/s  (+{start_s:.1f} s cluster start)")
    print(f"  Ray / local = {ray_s / local_s:.2f}")


if __name__ == "__main__":
    main()
