#!/usr/bin/env python3
"""Exclusive caching with DEMOTE (docs/design.md §4.7): writes the configs of every point and runs
them through `tiercache hierarchy --json`, appending one record per run to results.jsonl.

Three parts, every point a variant name `part/workload/setting/design`:
- designs:  the eight designs (LRU/MRU client x LRU/MRU array x demote or not) on the four
            archetypes (random, sequential, zipf, a trace) under the constant-latency model;
- bw:       the client-array link from 1 Gbit/s down to 10 Mbit/s, LRU-LRU-none against
            LRU-MRU-demote, on random and zipf;
- clients:  1 to 8 clients, each with its own client cache, sharing one array, with
            disjoint and with shared (overlapping) address ranges.

Usage: run.py [--ci] [--bin PATH] [--out DIR]
"""

import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TRACE = os.path.join(ROOT, "fixtures", "traces", "msr-hm0-sample.csv")

# Analytical setting (docs/design.md §4.7): a client hit costs Tc, an array hit Tc + Ta, a disk read
# Tc + Ta + Td; with constant devices each level's device takes the cumulative time.
TC, TA, TD = 2_000, 200_000, 5_000_000
LINE = 4096

DESIGNS = [
    (c, a, d)
    for d in (False, True)
    for c in ("lru", "mru")
    for a in ("lru", "mru")
]


def design_name(c, a, d):
    return f"{c.upper()}-{a.upper()}-{'demote' if d else 'none'}"


def level(name, capacity, eviction, latency, demote=False):
    victim = ', victim = "demote"' if demote else ""
    return (
        f'name = "{name}"\n'
        f'cache = {{ capacity = {capacity}, eviction = "{eviction}", '
        f'cleaning = {{ policy = "none" }}{victim} }}\n'
        f'device = {{ model = "constant", latency_ns = {latency} }}\n'
    )


def document(clients, array_bytes, array_evict, demote, workload, link_bw, warmup, array_lat):
    """A hierarchy document: `clients` is a list of (name, client_bytes, client_evict, offset)."""
    out = ["[hierarchy]", f"warmup_requests = {warmup}",
           f'backend = {{ model = "constant", latency_ns = {TC + TA + TD} }}', ""]
    out.append("[[hierarchy.levels]]")
    out.append(level("array", array_bytes, array_evict, array_lat))
    for name, cbytes, cevict, offset in clients:
        out.append("[[hierarchy.clients]]")
        out.append(f'name = "{name}"')
        out.append(f"offset = {offset}")
        out.append(f"workload = {workload}")
        if link_bw:
            out.append(f"link = {{ bandwidth = {link_bw}, latency_ns = 0 }}")
        out.append("[[hierarchy.clients.levels]]")
        out.append(level("client", cbytes, cevict, TC, demote=demote))
    return "\n".join(out) + "\n"


def run(bin_path, path, out):
    with open(out, "a") as f:
        subprocess.run([bin_path, "hierarchy", path, "--json"], stdout=f, check=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ci", action="store_true", help="small caches and short runs (seconds)")
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "tiercache"))
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "exclusive-caching"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    results = os.path.join(args.out, "results.jsonl")
    if os.path.exists(results):
        os.remove(results)
    cache = (64 if args.ci else 4096) * LINE  # client = array
    requests = 8_000 if args.ci else 200_000
    warmup = requests // 4

    points = []  # (name, document text)
    workloads = {
        "random": f'{{ archetype = "random", requests = {requests} }}',
        "sequential": f'{{ archetype = "sequential", requests = {requests} }}',
        "zipf": f'{{ archetype = "zipf", requests = {requests} }}',
        "trace": f'{{ trace = "{TRACE}" }}',
    }
    for wname, w in workloads.items():
        for c, a, d in DESIGNS:
            # The trace is a sample of a few thousand requests: no warm-up, small caches.
            tcache = cache if wname != "trace" else 256 * LINE
            doc = document([("host", tcache, c, 0)], tcache, a, d, w, None,
                           0 if wname == "trace" else warmup, TC + TA)
            points.append((f"designs/{wname}/-/{design_name(c, a, d)}", doc))
    bandwidths = [("1G", 125_000_000), ("300M", 37_500_000), ("100M", 12_500_000),
                  ("30M", 3_750_000), ("10M", 1_250_000)]
    for wname in ("random", "zipf"):
        for bname, bw in bandwidths:
            for c, a, d in (("lru", "lru", False), ("lru", "mru", True)):
                # The link carries the data; the array's own time is Ta.
                doc = document([("host", cache, c, 0)], cache, a, d, workloads[wname], bw,
                               warmup, TC + TA)
                points.append((f"bw/{wname}/{bname}/{design_name(c, a, d)}", doc))
    for sharing in ("disjoint", "shared"):
        for n in (1, 2, 4, 8):
            for c, a, d in (("lru", "lru", False), ("lru", "mru", True)):
                per_client = max(requests // n, 1000)
                w = f'{{ archetype = "zipf", requests = {per_client} }}'
                clients = [(f"c{i}", cache, c, (i << 40) if sharing == "disjoint" else 0)
                           for i in range(n)]
                doc = document(clients, 4 * cache, a, d, w, None, warmup, TC + TA)
                points.append((f"clients/{sharing}/{n}/{design_name(c, a, d)}", doc))

    cfg_dir = os.path.join(args.out, "configs")
    os.makedirs(cfg_dir, exist_ok=True)
    for i, (name, doc) in enumerate(points):
        path = os.path.join(cfg_dir, name.replace("/", "_") + ".toml")
        with open(path, "w") as f:
            f.write(f'name = "{name}"\n' + doc)
        print(f"[{i + 1}/{len(points)}] {name}", file=sys.stderr)
        run(args.bin, path, results)
    print(results)


if __name__ == "__main__":
    main()
