#!/usr/bin/env python3
"""Tables of the exclusive-caching experiment from its results.jsonl (records of
`tiercache hierarchy --json`, named `part/workload/setting/design`).

Usage: table.py results/exclusive-caching/results.jsonl
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


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    parts = defaultdict(dict)
    with open(sys.argv[1]) as f:
        for n, line in enumerate(f, 1):
            try:
                rec = json.loads(line)
                part, workload, setting, design = rec["name"].split("/")
            except (ValueError, KeyError) as e:
                sys.exit(f"{sys.argv[1]}:{n}: not a hierarchy record of this experiment: {e}")
            parts[part][(workload, setting, design)] = rec

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
