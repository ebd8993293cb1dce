#!/usr/bin/env python3
"""Exclusive caching with DEMOTE (docs/design.md §4.7), the part a sweep spec cannot express:
writes the configs of every point and runs them through `tiercache sim --json` (a config with a
`[hierarchy]` section runs its levels in the simulator's event loop), appending
one record per run to results.jsonl, each named `clients/sharing/count/design`:

- clients:  1 to 8 clients, each with its own client cache, sharing one array, with
            disjoint and with shared (overlapping) address ranges.

The designs and link-bandwidth parts are sweeps (sweep.toml, sweep-bw.toml). This part is not:
a client count changes the length of the `hierarchy.clients` array, so an axis would have to
give whole arrays as literal values, and each client's requests (the run's split among them)
and offset (i << 40) derive from the count; the spec language has no derived values, and its
`[ci]` overrides apply to the base before the axes, so they cannot shrink the caches and
requests inside an axis's values (README.md).

Usage: run.py [--ci] [--bin PATH] [--out DIR]
"""

import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# Analytical setting (docs/design.md §4.7): a client hit costs Tc, an array hit Tc + Ta, a disk read
# Tc + Ta + Td; with constant devices each level's device takes the cumulative time.
TC, TA, TD = 2_000, 200_000, 5_000_000
LINE = 4096

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


def document(clients, array_bytes, array_evict, demote, workload, warmup, array_lat):
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
        out.append("[[hierarchy.clients.levels]]")
        out.append(level("client", cbytes, cevict, TC, demote=demote))
    return "\n".join(out) + "\n"


def run(bin_path, path, out):
    with open(out, "a") as f:
        subprocess.run([bin_path, "sim", path, "--json"], stdout=f, check=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ci", action="store_true", help="small caches and short runs (seconds)")
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "tiercache"))
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "exclusive-caching-clients"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    results = os.path.join(args.out, "results.jsonl")
    if os.path.exists(results):
        os.remove(results)
    cache = (64 if args.ci else 4096) * LINE  # client = array
    requests = 8_000 if args.ci else 200_000
    warmup = requests // 4

    points = []  # (name, document text)
    for sharing in ("disjoint", "shared"):
        for n in (1, 2, 4, 8):
            for c, a, d in (("lru", "lru", False), ("lru", "mru", True)):
                per_client = max(requests // n, 1000)
                w = f'{{ archetype = "zipf", requests = {per_client} }}'
                clients = [(f"c{i}", cache, c, (i << 40) if sharing == "disjoint" else 0)
                           for i in range(n)]
                doc = document(clients, 4 * cache, a, d, w, warmup, TC + TA)
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
