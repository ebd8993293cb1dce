#!/usr/bin/env python3
"""Tables of the exclusive-caching experiment from its results: the sweeps' results.jsonl
(`tiercache sweep sweep.toml`, `sweep-bw.toml` and `sweep-clients.toml`: result lines whose
records are hierarchy records named `workload/design`, `workload/link/design` and
`clients/sharing/count/design`) and records of `tiercache sim --json`, in any mix.

Usage: table.py results/exclusive-caching/results.jsonl [results/exclusive-caching-bw/results.jsonl ...]
"""

import json
import sys
from collections import defaultdict


def level(rec, name):
    for l in rec["result"]["levels"]:
        if l["name"] == name:
            return l
    return None


def hits(rec):
    """(client, array, backend) fractions of all requests; client levels summed."""
    c = sum(l["hit_fraction"] for l in rec["result"]["levels"] if not l["shared"])
    return c, level(rec, "array")["hit_fraction"], level(rec, "backend")["hit_fraction"]


def demotes(rec):
    ls = [l for l in rec["result"]["levels"] if not l["shared"]]
    return (sum(l["demotes_sent"] for l in ls), sum(l["demotes_accepted"] for l in ls),
            sum(l["demotes_already_held"] for l in ls), sum(l["demotes_rejected"] for l in ls))


def mean_us(rec):
    return rec["result"]["latency_us"]["mean"]


# The part each sweep is (its spec's `name`), and how its record names read.
SWEEPS = {
    "exclusive-caching": "designs",
    "exclusive-caching-bw": "bw",
    "exclusive-caching-clients": "clients",
}


def key(line):
    """(part, workload, setting, design) of a result line or a bare record."""
    if "point" in line:  # a sweep's result line: the record is the hierarchy record
        names = line["record"]["name"].split("/")
        part = SWEEPS[line["sweep"]]
        if part == "designs":
            workload, design = names
            return part, workload, "-", design
        if part == "clients":  # clients/sharing/count/design
            _, sharing, count, design = names
            return part, sharing, count, design
        return (part, *names)
    part, workload, setting, design = line["name"].split("/")
    return part, workload, setting, design


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    parts = defaultdict(dict)
    for path in sys.argv[1:]:
        with open(path) as f:
            for n, text in enumerate(f, 1):
                try:
                    line = json.loads(text)
                    if line.get("status", "ok") != "ok":
                        continue  # a failed point; a rerun's later line replaces it
                    part, workload, setting, design = key(line)
                except (ValueError, KeyError) as e:
                    sys.exit(f"{path}:{n}: not a result of this experiment: {e!r}")
                # A later line (a rerun) wins.
                parts[part][(workload, setting, design)] = line.get("record", line)

    print("## Eight designs x four archetypes (constant model; hit fractions of all requests)\n")
    print("| workload | design | client | array | backend | mean µs | demotes sent | accepted | held | rejected |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for (w, _, d), rec in sorted(parts["designs"].items(), key=lambda kv: (kv[0][0], mean_us(kv[1]))):
        c, a, b = hits(rec)
        s, acc, held, rej = demotes(rec)
        print(f"| {w} | {d} | {c:.3f} | {a:.3f} | {b:.3f} | {mean_us(rec):.0f} | {s} | {acc} | {held} | {rej} |")

    print("\n## Link bandwidth (client-array link; mean latency µs)\n")
    print("| workload | link | LRU-LRU-none | LRU-MRU-demote | demote / none | link util (demote) |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    order = {"1G": 0, "300M": 1, "100M": 2, "30M": 3, "10M": 4}
    keys = sorted({(w, s) for (w, s, _) in parts["bw"]}, key=lambda k: (k[0], order.get(k[1], 9)))
    for w, s in keys:
        none = parts["bw"].get((w, s, "LRU-LRU-none"))
        dem = parts["bw"].get((w, s, "LRU-MRU-demote"))
        if not none or not dem:
            continue
        link = level(dem, "host.client")["link"] or {}
        print(f"| {w} | {s}bit/s | {mean_us(none):.0f} | {mean_us(dem):.0f} | "
              f"{mean_us(dem) / mean_us(none):.2f} | {link.get('utilisation', 0):.2f} |")

    print("\n## Clients sharing one array (zipf per client; mean latency µs, array hit fraction)\n")
    print("| ranges | clients | none: mean µs | none: array hits | demote: mean µs | demote: array hits | demote / none |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    keys = sorted({(w, s) for (w, s, _) in parts["clients"]}, key=lambda k: (k[0], int(k[1])))
    for w, s in keys:
        none = parts["clients"].get((w, s, "LRU-LRU-none"))
        dem = parts["clients"].get((w, s, "LRU-MRU-demote"))
        if not none or not dem:
            continue
        print(f"| {w} | {s} | {mean_us(none):.0f} | {hits(none)[1]:.3f} | {mean_us(dem):.0f} | "
              f"{hits(dem)[1]:.3f} | {mean_us(dem) / mean_us(none):.2f} |")


if __name__ == "__main__":
    main()
